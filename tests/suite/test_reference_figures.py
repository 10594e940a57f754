"""The measured figures in the expert references' docstrings are the committed benchmark JSON's
(benchmarks/docstring_figures.py rewrites them; this catches a JSON or a docstring updated alone)."""

from __future__ import annotations

import benchmarks.docstring_figures as figures


def test_docstring_tables_match_the_benchmark_json(capsys):
    assert figures.main(["--check"]) == 0, capsys.readouterr().out


def test_time_format():
    assert [figures.fmt_time(ms) for ms in (0.0112, 0.036, 0.362, 0.9996, 2.94, 16.992)] == [
        "11.2 us", "36.0 us", "362 us", "1.00 ms", "2.94 ms", "17.0 ms"]


def _doc(tmp_path, monkeypatch, header: str, line: str):
    """A reference file whose docstring holds one table row under ``header``, with ROOT pointed at it."""
    path = tmp_path / "triton.py"
    path.write_text(f'"""\n{header}\n{line}\n"""\n')
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    return path


def test_a_changed_figure_is_reported(tmp_path, monkeypatch):
    path = _doc(tmp_path, monkeypatch, figures.HEADER, "w1   1 GB  2 us  362 us, 0.93, 3.38x compile")
    row = {"status": "passed", "median_ms": 0.338, "roofline_fraction": 0.99, "speedup": 0.96, "best": "sdpa_cudnn"}
    text, changes = figures.sync(path, {"w1": row})
    assert changes == ["triton.py: w1: 362 us, 0.93, 3.38x compile -> 338 us, 0.99, 0.96x sdpa_cudnn"]
    assert "338 us, 0.99, 0.96x sdpa_cudnn" in text
    assert figures.sync(path, {"w1": {**row, "status": "incorrect"}})[1] == []
    assert figures.sync(path, {"w1": {**row, "speedup": None, "best": None}})[1] == []


def test_an_eager_and_compile_table_is_rewritten_to_the_best_peer(tmp_path, monkeypatch):
    path = _doc(tmp_path, monkeypatch, figures.OLD_HEADER, "w1   1 GB  2 us  362 us, 0.93, 3.38x / 0.90x")
    row = {"status": "passed", "median_ms": 0.362, "roofline_fraction": 0.93, "speedup": 0.9, "best": "compile"}
    text, changes = figures.sync(path, {"w1": row})
    assert figures.HEADER in text and figures.OLD_HEADER not in text
    assert "362 us, 0.93, 0.90x compile" in text and len(changes) == 2

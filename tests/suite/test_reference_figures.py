"""The measured figures in the expert references' docstrings are the committed benchmark JSON's
(benchmarks/docstring_figures.py rewrites them; this catches a JSON or a docstring updated alone)."""

from __future__ import annotations

import benchmarks.docstring_figures as figures


def test_docstring_tables_match_the_benchmark_json(capsys):
    assert figures.main(["--check"]) == 0, capsys.readouterr().out


def test_time_format():
    assert [figures.fmt_time(ms) for ms in (0.0112, 0.036, 0.362, 0.9996, 2.94, 16.992)] == [
        "11.2 us", "36.0 us", "362 us", "1.00 ms", "2.94 ms", "17.0 ms"]


def test_a_changed_figure_is_reported(tmp_path, monkeypatch):
    path = tmp_path / "triton.py"
    path.write_text(f'"""\n{figures.HEADER}\nw1   1 GB  2 us  362 us, 0.93, 3.38x / 0.90x\n"""\n')
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    row = {"status": "passed", "median_ms": 0.338, "roofline_fraction": 0.99, "speedup_eager": 3.69,
           "speedup_compiled": 0.96}
    text, changes = figures.sync(path, {"w1": row})
    assert changes == ["triton.py: w1: 362 us, 0.93, 3.38x / 0.90x -> 338 us, 0.99, 3.69x / 0.96x"]
    assert "338 us, 0.99, 3.69x / 0.96x" in text
    assert figures.sync(path, {"w1": {**row, "status": "incorrect"}})[1] == []

"""The ablation record format: round trip, later records replace earlier ones, a crash-cut last line, bad lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from d2kgrade.ablate.results import (ABLATIONS_FILE, AblationRecord, WorkloadAblation, append_record, code_sha256,
                                     load_run_ablations)
from d2kgrade.errors import UserError


def _rec(**kw) -> AblationRecord:
    base = dict(task="softmax", episode="reference:softmax", arm="reference", property="softmax.L3.exp2-fold",
                level="L3", transform="exp2_to_exp", present=True, status="load_bearing", slowdown=1.07,
                ci_low=1.05, ci_high=1.09, noise_pct=0.6,
                workloads=[WorkloadAblation(name="rows_4k", slowdown=1.07, ci_low=1.05, ci_high=1.09)])
    base.update(kw)
    return AblationRecord(**base)


def test_round_trip_and_replacement(tmp_path: Path) -> None:
    assert load_run_ablations(tmp_path) == []
    a, b = _rec(), _rec(property="softmax.L2.tiled-two-sweep", level="L2", status="broke_correctness",
                         slowdown=None, ci_low=None, ci_high=None, workloads=[])
    for r in (a, b, a.model_copy(update={"slowdown": 1.5})):
        append_record(tmp_path / ABLATIONS_FILE, r)
    got = load_run_ablations(tmp_path)
    assert [(r.property, r.slowdown) for r in got] == [("softmax.L2.tiled-two-sweep", None),
                                                        ("softmax.L3.exp2-fold", 1.5)]


def test_cut_last_line_is_skipped_but_a_bad_middle_line_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / ABLATIONS_FILE
    append_record(path, _rec())
    with path.open("a") as fh:
        fh.write('{"task": "soft')
    assert len(load_run_ablations(tmp_path)) == 1
    with path.open("a") as fh:
        fh.write("\n" + _rec().model_dump_json() + "\n")
    with pytest.raises(UserError, match="line 2: not JSON"):
        load_run_ablations(tmp_path)
    path.write_text(_rec().model_dump_json().replace('"load_bearing"', '"fast"') + "\n")
    with pytest.raises(UserError, match="line 1: status"):
        load_run_ablations(tmp_path)


def test_appending_after_a_cut_line_drops_the_fragment(tmp_path: Path) -> None:
    path = tmp_path / ABLATIONS_FILE
    append_record(path, _rec())
    with path.open("a") as fh:
        fh.write('{"task": "softmax", "episode": "e2", "prop')
    append_record(path, _rec(episode="e2"))
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and [r.episode for r in load_run_ablations(tmp_path)] == ["reference:softmax", "e2"]
    path.write_text('{"task": "sof')  # only a fragment
    append_record(path, _rec())
    assert [r.episode for r in load_run_ablations(tmp_path)] == ["reference:softmax"]


def test_the_code_hash_ignores_prose_but_not_code() -> None:
    src = '"""Module doc."""\nX = 1  # a constant\n\n\ndef f(a):\n    """Doc."""\n    return a + X\n'
    prose = '"""Another doc,\nlonger."""\nX = 1\n\n\n\ndef f(a):\n    # why\n    return a + X\n'
    assert code_sha256(src) == code_sha256(prose)
    assert code_sha256(src) != code_sha256(src.replace("X = 1", "X = 2"))
    assert code_sha256(src) != code_sha256(src.replace("a + X", "X + a"))
    cuda = "__global__ void k() { /* a */ }\n"
    assert code_sha256(cuda) != code_sha256(cuda.replace("a", "b")), "not Python: the text itself"


def test_the_code_hash_is_the_same_under_every_python() -> None:
    """The H200 runs Python 3.12, CI 3.11: a record hashed on one must be current on the other (``ast.dump`` named
    round 19's histogram records stale, as 3.12 dumps a ``type_params`` field that 3.11 has not). The hash is pinned:
    a serialisation that varies with the interpreter fails here on one of them."""
    src = ('def f(a, *, b=None):\n    """Doc."""\n    return a @ b if b is not None else [a, ...]\n\n\n'
           'class K:\n    x: int = 1\n')
    assert code_sha256(src) == "f1ac4a3c2e4fc6d9bbca92157e7e047e2299f0759334fe7ca7e4024eb3352e1f"

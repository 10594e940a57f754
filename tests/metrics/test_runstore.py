"""`d2kgrade score RUN_DIR` on a real run store (results.sqlite written through RunStore), with grades.jsonl."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from d2kgrade.cli import app
from d2kgrade.errors import UserError
from d2kgrade.runstore import EPISODE_COLUMNS, RunStore
from tests.metrics.synthetic import grade_line, rubric_for


def _episode(eid: str, model: str | None, agent: str, arm: str, task: str, correct: bool) -> dict:
    row = {c: None for c in EPISODE_COLUMNS}
    row.update(run_id="r1", episode_id=eid, model=model, agent=agent, arm=arm,
               guidance="all" if arm == "guided" else "none", task=task, seed=0, status="finished", turns=3,
               tokens_in=10, tokens_out=5, cost_usd=None, wall_s=1.0,
               final_status="passed" if correct else "incorrect", correct=int(correct),
               design_note_path=f"episodes/{eid}/design_note.md", kernel_path=f"episodes/{eid}/kernels/v001_k.py",
               submissions=1, tool_calls=2, suite_version="s", task_version="t", config_json="{}", env_json="{}",
               attempt=1, started_at="2026-01-01T00:00:00Z", ended_at="2026-01-01T00:01:00Z")
    return row


def _workloads(eid: str, speeds: list[float]) -> list[dict]:
    out = [{"run_id": "r1", "episode_id": eid, "eval_id": 1, "workload": f"w{i}", "status": "passed",
            "time_ms": 1.0 / s, "eager_ms": 1.0, "compiled_ms": 0.9, "speedup_eager": s, "speedup_compiled": 0.9 * s,
            "roofline_floor_ms": 0.1, "roofline_fraction": 0.1 * s} for i, s in enumerate(speeds)]
    out.append({"run_id": "r1", "episode_id": eid, "eval_id": 1, "workload": "hidden", "status": "passed",
                "time_ms": math.nan, "eager_ms": math.nan, "compiled_ms": math.nan, "speedup_eager": math.nan,
                "speedup_compiled": math.nan, "roofline_floor_ms": math.nan, "roofline_fraction": math.nan})
    return out


def test_score_reads_the_run_store(tmp_path):
    run = tmp_path / "run"
    store = RunStore(run)
    cases = [("ref-ta", None, "reference", "guided", "ta", True, [2.0, 2.0]),
             ("u-ta", "m", "llm", "unguided", "ta", True, [1.0, 1.0]),
             ("g-ta", "m", "llm", "guided", "ta", True, [2.0, 2.0]),
             ("u-tb", "m", "llm", "unguided", "tb", False, [])]
    for eid, model, agent, arm, task, correct, speeds in cases:
        store.finish_episode(_episode(eid, model, agent, arm, task, correct), workloads=_workloads(eid, speeds))
    store.close()
    rub = rubric_for("ta", {"L1": 1, "L2": 1})
    (run / "grades.jsonl").write_text(grade_line(rub, "u-ta", "code", "combined", set()) + "\n" +
                                      grade_line(rub, "g-ta", "code", "combined", {"ta.L1.p0", "ta.L2.p0"}) + "\n")
    res = CliRunner().invoke(app, ["score", str(run), "--resamples", "20", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    arms = {(a["model"], a["arm"]): a["metrics"] for a in data["arms"]}
    assert set(arms) == {("m", "unguided"), ("m", "guided")}  # the reference episode is not scored
    assert arms[("m", "unguided")]["correctness"]["value"] == 0.5
    assert arms[("m", "guided")]["perf_score"]["value"] == 3.0  # at the reference's speed
    assert arms[("m", "unguided")]["perf_score"]["value"] == pytest.approx((1 + 0) / 2)
    assert arms[("m", "guided")]["impl_score"]["value"] == pytest.approx(100.0)
    assert data["reference_speedup"] == {"ta": pytest.approx(2.0)}
    # a damaged store is a one-line user error
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.sqlite").write_text("not sqlite")
    res = CliRunner().invoke(app, ["score", str(tmp_path / "bad")])
    assert isinstance(res.exception, UserError) and "results.sqlite: is not an SQLite database" in str(res.exception)

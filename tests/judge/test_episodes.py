"""Judging a whole run directory into RUN_DIR/grades.jsonl, resumably."""

from __future__ import annotations

import json
from pathlib import Path

from d2kgrade.judge.cache import JudgeCache
from d2kgrade.judge.episodes import judge_run_dir
from d2kgrade.runstore import EPISODE_COLUMNS, RunStore
from tests.fakes.openai_server import FakeOpenAI
from tests.judge.conftest import KERNEL, NOTE, Responder, make_config


def make_run(run_dir: Path) -> None:
    store = RunStore(run_dir)
    for ep, kernel in (("ep-a", True), ("ep-b", False)):
        folder = run_dir / "episodes" / ep
        folder.mkdir(parents=True)
        # A distinct note per episode: identical texts share cache entries, and whether the second one is a cache
        # hit or a concurrent request depends on timing (the request counts below must not).
        (folder / "design_note.md").write_text(f"{NOTE}\n(Episode {ep}.)\n")
        if kernel:
            (folder / "kernels").mkdir()
            (folder / "kernels" / "v001_kernel.py").write_text(KERNEL)
        row = {c: 0 for c in EPISODE_COLUMNS}
        row.update(run_id="r", episode_id=ep, model="m", agent="a", arm="guided", guidance="all", task="softmax",
                   status="finished", final_status="passed" if kernel else "no_submission", correct=kernel,
                   design_note_path=f"episodes/{ep}/design_note.md",
                   kernel_path=f"episodes/{ep}/kernels/v001_kernel.py" if kernel else None, transcript_path="",
                   message="", suite_version="s", task_version="t", config_json="{}", env_json="{}",
                   started_at="x", ended_at="y", cost_usd=None)
        store.finish_episode(row)
    store.close()


def test_run_dir_grades_every_episode_once_and_resumes(suite, tmp_path):
    run_dir = tmp_path / "run"
    make_run(run_dir)
    cache = JudgeCache(tmp_path / "c.sqlite")
    with FakeOpenAI(responder=Responder({("softmax.L3.exp2-fold", 0): ["met"]})) as srv:
        cfg = make_config(srv.base_url)
        rep = judge_run_dir(run_dir, suite, cfg, cache=cache, use_static_backend=False)
        assert (rep.judged, rep.missing, rep.skipped) == (3, 1, 0)
        assert len(srv.requests) == 3 * 9
        rows = [json.loads(x) for x in (run_dir / "grades.jsonl").read_text().splitlines()]
        assert sorted((r["item"], r["kind"]) for r in rows) == [
            ("ep-a", "code"), ("ep-a", "proposal"), ("ep-b", "code"), ("ep-b", "proposal")]
        a_code = next(r for r in rows if r["item"] == "ep-a" and r["kind"] == "code")
        assert a_code["file"] == "episodes/ep-a/kernels/v001_kernel.py" and a_code["score"] > 0
        b_code = next(r for r in rows if r["item"] == "ep-b" and r["kind"] == "code")
        assert b_code["score"] == 0 and "no kernel" in b_code["error"]
        assert {p["verdict"] for p in b_code["properties"]} == {"absent"}
        again = judge_run_dir(run_dir, suite, cfg, cache=cache, use_static_backend=False)
        assert (again.judged, again.skipped) == (0, 4) and len(srv.requests) == 27
        assert len((run_dir / "grades.jsonl").read_text().splitlines()) == 4
        # another model is another rater: judged again, appended
        other = make_config(srv.base_url, model="judge-2")
        assert judge_run_dir(run_dir, suite, other, cache=cache, use_static_backend=False).judged == 3


def test_run_dir_combined_writes_every_rater_once(suite, tmp_path):
    from tests.judge.test_run import fake_static

    run_dir = tmp_path / "run"
    make_run(run_dir)
    static = fake_static({"softmax.L3.exp2-fold": "present"})
    with FakeOpenAI(responder=Responder({("softmax.L3.exp2-fold", 0): ["met"]})) as srv:
        cfg = make_config(srv.base_url)
        judge_run_dir(run_dir, suite, cfg, mode="combined", use_static_backend=False, static_grader=static)
        rows = [json.loads(x) for x in (run_dir / "grades.jsonl").read_text().splitlines()]
        assert sorted((r["item"], r["kind"], r["rater"]) for r in rows) == sorted(
            [(ep, kind, rater) for ep in ("ep-a", "ep-b") for kind, rater in
             [("code", "static"), ("code", "llm"), ("code", "combined"), ("proposal", "llm"),
              ("proposal", "combined")]])
        a = next(r for r in rows if (r["item"], r["kind"], r["rater"]) == ("ep-a", "code", "combined"))
        exp2 = next(p for p in a["properties"] if p["property_id"] == "softmax.L3.exp2-fold")
        assert exp2["verdict"] == "present" and exp2["details"]["agreement"] == "agree"
        again = judge_run_dir(run_dir, suite, cfg, mode="combined", use_static_backend=False, static_grader=static)
        assert (again.judged, again.skipped, again.missing) == (0, 4, 0)
        assert len((run_dir / "grades.jsonl").read_text().splitlines()) == len(rows)
        # a second judge model adds its llm and combined grades; static analysis is not written twice
        judge_run_dir(run_dir, suite, make_config(srv.base_url, model="judge-2"), mode="combined",
                      use_static_backend=False, static_grader=static)
        rows2 = [json.loads(x) for x in (run_dir / "grades.jsonl").read_text().splitlines()]
        assert sum(r["rater"] == "static" for r in rows2) == 2
        assert sum(r["rater"] == "llm" for r in rows2) == 8 and sum(r["rater"] == "combined" for r in rows2) == 8
        assert {r["rater_info"]["llm"]["model"] for r in rows2 if r["rater"] == "combined"} == {"fake-judge",
                                                                                                "judge-2"}

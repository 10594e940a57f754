"""Runs made the way a user makes them: a scripted agent behind the local OpenAI-compatible server, the real
``d2kgrade run`` / ``judge --run`` / ``view`` / ``report`` code, and a fake GPU evaluator.

The fake evaluator returns schema-v2 ``EvalResult`` records shaped like an H200 run (per-workload timings, three
baseline candidates of which one is excluded, roofline fractions, a hidden workload) without a GPU; its numbers are
a deterministic function of the kernel source, the workload and the seed, and it says so in its environment. A
kernel whose source holds ``BUG`` is ``incorrect``. The fake judge answers ``met`` for a property when a line of
the graded file holds a word of the property's slug, quoting that line (so the quotes verify), else ``not_met``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from d2kgrade.records import BaselineTiming, Environment, EvalResult, Flag, OutputError, Timing, WorkloadResult
from d2kgrade.suite import Suite
from tests.fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
FAKE_GPU = "fake GPU (tests/view/pipeline.py evaluator)"
_SUITE = Suite(ROOT)
_WORKLOADS: dict[str, list[str]] = {}


def _unit(*parts: Any) -> float:
    """A deterministic number in [0, 1) from its arguments."""
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2 ** 64


def fake_gpu_evaluate(task_id: str, submission: Path, **kw: Any) -> EvalResult:
    """The evaluator's API (``runner.evaluate.evaluate``) with made-up, labelled GPU figures (module docstring)."""
    src = Path(submission).read_text()
    ok = "BUG" not in src
    if task_id not in _WORKLOADS:
        _WORKLOADS[task_id] = [w.name for w in _SUITE.load_task(task_id).workloads]
    names = _WORKLOADS[task_id] if kw.get("workloads") in (None, "all") or kw.get("hidden") else ["smoke"]
    seed = kw.get("seed", 0)
    wls = []
    for i, name in enumerate(names):
        eager = 0.05 + 2.0 * _unit(task_id, name, "eager")
        compiled = eager * (0.6 + 0.5 * _unit(task_id, name, "compile"))
        mine = eager / (0.5 + 3.0 * _unit(src, name, seed))
        floor = min(mine, compiled) * (0.3 + 0.5 * _unit(task_id, name, "floor"))
        err = OutputError(name="out", ok=ok, max_abs_err=1e-3 if ok else 0.7, max_rel_err=2e-3 if ok else 5.0,
                          tol_ratio=0.4 if ok else 37.0, n_bad=0 if ok else 211, n_total=4096 * 8,
                          reason="" if ok else "211 of 32768 elements out of tolerance",
                          first_bad_index=None if ok else [3, 17])
        cands = [BaselineTiming(name="eager", kind="eager", status="ok", time=Timing(median_ms=eager, reps=50)),
                 BaselineTiming(name="compile", kind="compile", status="ok", time=Timing(median_ms=compiled,
                                                                                        reps=50)),
                 BaselineTiming(name="compile_max_autotune", kind="compile",
                                status="incorrect" if i % 2 == 0 else "unavailable",
                                reason=("out of tolerance: 3 of 32768 elements (tol used 140%)" if i % 2 == 0
                                        else "autotuning disabled in this environment"),
                                max_tol_ratio=1.4 if i % 2 == 0 else None)]
        best = min(compiled, eager)
        timed = ok
        wls.append(WorkloadResult(
            name=name, status="passed" if ok else "incorrect", trials=3, errors=[err], params={"i": i},
            time=Timing(median_ms=mine, iqr_ms=mine * 0.02, min_ms=mine * 0.97, reps=60) if timed else None,
            eager=cands[0].time, compiled=cands[1].time, baselines=cands,
            best_baseline="compile" if compiled <= eager else "eager",
            speedup_eager=eager / mine if timed else None, speedup_compiled=compiled / mine if timed else None,
            speedup_best=best / mine if timed else None, roofline_floor_ms=floor,
            roofline_fraction=floor / mine if timed else None, message="" if ok else err.reason))
    if kw.get("hidden"):
        wls.append(WorkloadResult(name="hidden", status="passed" if ok else "incorrect", hidden=True, trials=2,
                                  params={"M": 53, "N": 611}))
    flags = [] if ok else [Flag(code="timing.hidden_work", message="host clock 2.6x the events (fake)",
                                severity="warning")]
    return EvalResult(task=task_id, submission=str(submission), status="passed" if ok else "incorrect",
                      correct=ok, workloads=wls, flags=flags, message="" if ok else f"incorrect on {names[0]}",
                      environment=Environment(device="cuda", gpu=FAKE_GPU, torch="fake"), wall_s=1.5)


def reference_source(task: str) -> str:
    return (ROOT / "references" / task / "triton.py").read_text()


def _call(name: str, cid: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "id": cid, "arguments": json.dumps(args)}


class ScriptedAgent:
    """One scripted agent for every task and arm, deciding from the request alone (concurrency-safe).

    Per task, by ``behaviour`` (default ``"fix"``): ``fix`` writes a buggy kernel, tests it, writes the good one,
    benchmarks and submits; ``wrong`` submits the buggy one; ``silent`` ends without submitting; ``api_down``
    answers HTTP 500 (the episode fails on the API). The good kernel of the guided arm is the expert reference,
    the unguided arm's is ``unguided_source(task)`` when given, else the reference with a comment added."""

    TASK_RE = re.compile(r"# Task `([^`]+)`")

    def __init__(self, behaviour: dict[tuple[str, str], str] | None = None,
                 unguided_source: dict[str, str] | None = None) -> None:
        self.behaviour = behaviour or {}
        self.unguided = unguided_source or {}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body["messages"][1]["content"]
        task = self.TASK_RE.search(prompt).group(1)  # type: ignore[union-attr]
        arm = "guided" if "## Expert guidance" in prompt else "unguided"
        how = self.behaviour.get((task, arm), "fix")
        if how == "api_down":
            return {"status": 500, "body": {"error": {"message": "upstream overloaded (fake)"}}}
        n = sum(1 for m in body["messages"] if m["role"] == "assistant")
        good = reference_source(task) if arm == "guided" else self.unguided.get(
            task, reference_source(task) + "\n# unguided: same design, written without the guidance\n")
        bad = good + "\n# BUG: the mask of the last tile is off by one\n"
        design = (f"Design for {task} ({arm}): one program per row tile; load once, keep the tile in registers, "
                  "reduce in fp32, write once. Later: exp2 with the log2(e) fold, vector loads.")
        if how == "silent":
            moves = [{"content": design}, {"content": "I cannot do better than eager here; stopping."}]
        elif how == "wrong":
            moves = [{"content": design},
                     {"tool_calls": [_call("write_file", "w1", path="kernel.py", content=bad)]},
                     {"tool_calls": [_call("submit", "s1")]}, {"content": "done"}]
        else:
            moves = [{"content": design},
                     {"tool_calls": [_call("write_file", "w1", path="kernel.py", content=bad)]},
                     {"tool_calls": [_call("test", "t1")]},
                     {"tool_calls": [_call("write_file", "w2", path="kernel.py", content=good)]},
                     {"tool_calls": [_call("benchmark", "b1"), _call("submit", "s1")]},
                     {"content": "done: submitted version 2"}]
        return moves[min(n, len(moves) - 1)]


LINE_RE = re.compile(r"^\s*(\d+) \| (.*)$", re.M)
PROP_RE = re.compile(r"### Property `([^`]+)`")


def fake_judge(body: dict[str, Any]) -> dict[str, Any]:
    """The judge's answer (module docstring): ``met`` with a verified quote when a line names the property."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    lines = [(int(n), text) for n, text in LINE_RE.findall(user)]
    answers = []
    for pid in PROP_RE.findall(user):
        words = [w for w in re.split(r"[^a-z0-9]+", pid.split(".")[-1].lower()) if len(w) >= 4]
        hit = next(((n, t) for n, t in lines if len(t.strip()) >= 12 and any(w in t.lower() for w in words)),
                   None)
        ev = [{"quote": hit[1].strip(), "start_line": hit[0], "end_line": hit[0]}] if hit else []
        answers.append({"property_id": pid, "evidence": ev, "verdict": "met" if hit else "not_met",
                        "reasoning": (f"line {hit[0]} names {pid.split('.')[-1]}" if hit
                                      else f"no line mentions {pid.split('.')[-1]}")})
    if len(answers) == 1 and '"answers"' not in user:
        a = answers[0]
        return {"content": json.dumps({k: a[k] for k in ("evidence", "reasoning", "verdict")})}
    return {"content": json.dumps({"answers": answers})}


ABLATION_STATUSES = ("load_bearing", "not_load_bearing", "broke_correctness", "no_transform", "untimed")


def write_ablations(run_dir: Path, episodes: list[tuple[str, str, str, str, int]],
                    properties: dict[str, list[tuple[str, str]]]) -> Path:
    """``RUN_DIR/ablations.jsonl`` in the field list of ``d2kgrade ablate`` (issue 19): for each episode
    ``(episode_id, task, arm, model, seed)`` one record per property ``(id, level)`` of its task, plus the
    reference's records (``reference:<task>``)."""
    lines = []
    for eid, task, arm, model, seed in episodes:
        for j, (pid, level) in enumerate(properties.get(task, [])):
            status = ABLATION_STATUSES[(j + seed) % len(ABLATION_STATUSES)]
            slow = {"load_bearing": 1.42, "not_load_bearing": 1.01}.get(status)
            lines.append({"schema_version": 1, "task": task, "episode": eid, "arm": arm, "model": model,
                          "seed": seed, "property": pid, "level": level, "transform": f"remove-{pid.split('.')[-1]}",
                          "present": status != "not_present", "status": status, "slowdown": slow,
                          "ci_low": slow - 0.03 if slow else None, "ci_high": slow + 0.04 if slow else None,
                          "noise_pct": 1.2 if slow else None, "estimated_from_reference": status == "untimed",
                          "message": "" if slow else f"{status.replace('_', ' ')} (fixture)"})
    for task, props in properties.items():
        for pid, level in props:
            lines.append({"schema_version": 1, "task": task, "episode": f"reference:{task}", "arm": "reference",
                          "model": "reference", "seed": 0, "property": pid, "level": level,
                          "transform": f"remove-{pid.split('.')[-1]}", "present": True, "status": "load_bearing",
                          "slowdown": 1.8, "ci_low": 1.7, "ci_high": 1.9, "noise_pct": 0.8,
                          "estimated_from_reference": False, "message": ""})
    path = run_dir / "ablations.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def cli(*args: str):
    from d2kgrade.cli import app

    res = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def make_paired_run(root: Path, *, tasks: tuple[str, ...] = ("softmax", "layernorm"), seeds: int = 1,
                    behaviour: dict | None = None, unguided: dict | None = None, ablations: bool = True,
                    concurrency: int = 1) -> Path:
    """``d2kgrade run`` (paired) then ``d2kgrade judge --run --judge combined``, both against the local server."""
    import runner.agent.evaluation as evaluation

    run = root / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evaluation, "default_evaluate_fn", lambda: fake_gpu_evaluate)
        mp.setenv("OPENAI_API_KEY", "test-key")
        with FakeOpenAI(responder=ScriptedAgent(behaviour, unguided)) as srv:
            cli("run", "--model", "fake-model", "--base-url", srv.base_url, "--tasks", ",".join(tasks), "--arms",
                "paired", "--seeds", str(seeds), "--device", "cpu", "--concurrency", str(concurrency), "--out", str(run),
                "--suite", str(ROOT))
        with FakeOpenAI(responder=fake_judge) as srv:
            cli("judge", "--run", str(run), "--judge", "combined", "--model", "fake-judge", "--base-url",
                srv.base_url, "--samples", "1", "--no-cache", "--concurrency", str(4 * concurrency), "--suite", str(ROOT))
    if ablations:
        from d2kgrade.runstore import load_run

        eps = load_run(run)["episodes"]
        props = {t: [(g.id, g.level) for g in Suite(ROOT).load_task(t).guidance][:4] for t in tasks}
        write_ablations(run, [(r.episode_id, r.task, r.arm, r.model, int(r.seed)) for r in eps.itertuples()],
                        props)
    return run

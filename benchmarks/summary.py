"""The headline figures of the H200 work, recomputed from the committed JSON (issues 20 and 22).

    python benchmarks/summary.py --json        # one object
    python benchmarks/summary.py               # the same, as lines for people

Sources, newest first where they overlap: ``benchmarks/data/h200_peers_round8.json`` (references against every
baseline candidate, this evaluator), ``benchmarks/data/references_h200.json`` (the full 85-workload run and its
reruns, eager and torch.compile only, the evaluator before the split), ``benchmarks/data/h200_round12.json``,
else ``h200_round11.json``, ``h200_round10.json``, ``benchmarks/data/h200_device_check_round8.json`` (GPU tests;
round 11 also one softmax evaluation's phases before and after its evaluator changes; round 12 the zero-rebuild
figure, an eager-only evaluation before and after shared GPU buffers and a full run cut after 7 of 26 tasks), ``benchmarks/data/ablation_h200.json`` and
``benchmarks/data/timing_repeat_h200.json`` when they exist, and ``benchmarks/data/floors_h200.json`` (both floors of
topk, histogram, spmv_csr and selective_scan: ``benchmarks/floor_microbench.py``). The suite's wall time, the timing
spread and the GPU tests come from the newest rounds' raw files: ``data/runs/round22b/full_round.json`` (the suite
cold on one machine; its warm rerun, cut after 6 tasks, is ``full_run_warm_partial``), ``data/runs/round19/
full_warm_round.json`` (the suite warm; ``round19b`` reran four of its tasks),
``data/runs/round13`` and ``round14/timing_repeat_h200.json`` (five evaluations of ten tasks; round 16's
``timing_repeat_gemm_bias_act.json`` and ``timing_repeat_gemm_bf16_flash.json`` replace a task where they have as many
evaluations, with the autotuner's choices kept) and ``data/runs/round19/gpu_tests.log`` (else round 17's). Each
workload's kernel figures and best peer come from the newest of these files that timed its task against every
candidate (:data:`CANDIDATE_FILES`: the timing repeats, rounds 17 and 18's ``references_candidates.json`` and
rounds 20-22's compile max-autotune with every other candidate), else
from the older files above; ``baselines_not_timed`` names the candidates without a figure, and why;
``ablation.stale`` names the references whose ablation records were measured on other code. Every figure says
where it comes from; a figure no committed file measures is null, and ``missing`` names it, so nothing here is
guessed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VENDOR_TASKS = {"gemm_bf16", "gemm_bias_act", "gemm_splitk", "gemm_fp8_blockwise", "grouped_gemm_moe",
                "conv2d_implicit_gemm", "flash_attention_fwd", "flash_decoding", "paged_attention_decode"}
"""GEMM, convolution and attention: the tasks whose baselines include the vendor library."""


def _load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def derived_floors(floors: dict[str, Any] | None, rows: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """Per ``task:workload`` of the floors file, both floors, the binding resource and the reference's fraction of
    each floor.

    The fraction of the derived floor is the reference's own roofline fraction times derived/roofline from the floors
    file, so both fractions rest on the ceilings the reference was timed against (the two files' roofline floors
    differ with their measured ceilings, by at most 1.44% on these 14 H200 workloads).
    """
    out = {}
    for task, per in sorted((floors or {}).get("floors", {}).items()):
        for workload, f in per.items():
            row = rows.get((task, workload), {})
            frac = row.get("roofline_fraction") if row.get("status") == "passed" else None
            out[f"{task}:{workload}"] = {
                "roofline_floor_ms": f["roofline_floor_ms"], "derived_floor_ms": f["derived_floor_ms"],
                "binding": f["binding"], "ratio": f["derived_floor_ms"] / f["roofline_floor_ms"],
                "reference_roofline_fraction": frac,
                "reference_derived_floor_fraction": frac * f["derived_floor_ms"] / f["roofline_floor_ms"]
                if frac else None}
    return out


SHORT_MS = 0.05
"""Workloads whose kernel runs under 50 us are left out of the timing spread (issue 22: every workload at or above
50 us); they are listed beside it."""


def _rel(path: Path) -> str:
    return str(path.relative_to(HERE)) if path.is_relative_to(HERE) else str(path)


def full_run(*paths: Path) -> dict[str, Any] | None:
    """One suite run of ``bench_round.py`` (every task once): its wall time, how many tasks passed and the per-phase
    sums over its evaluations (runner.evaluate's phase split). A later path reruns some of the tasks (round 19's
    four references rejected by a tripwire that read their docstrings as C++, rerun after the fix): its evaluations
    replace the earlier ones, and the wall time is the sum of the runs less the replaced evaluations'."""
    docs = [(p, d) for p in paths if (d := _load(p))]
    if not docs:
        return None
    runs: dict[str, Any] = {}
    wall = 0.0
    for _, doc in docs:
        wall += doc["total_wall_s"]
        for t, r in doc["tasks"].items():
            if r:
                wall -= runs[t]["wall_s"] if t in runs else 0.0
                runs[t] = r[0]
    phases: dict[str, float] = {}
    for r in runs.values():
        for k, v in (r.get("phases") or {}).items():
            phases[k] = phases.get(k, 0.0) + v
    return {"wall_s": round(wall, 1), "tasks": len(runs),
            "task_wall_s": {t: round(r["wall_s"], 1) for t, r in sorted(runs.items())},
            "passed": sum(r["status"] == "passed" for r in runs.values()),
            "not_passed": sorted(t for t, r in runs.items() if r["status"] != "passed"),
            "phases_s": {k: round(v, 1) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])},
            "date": docs[0][1]["date"][:10],
            "gpu": docs[0][1]["gpu"].get("name"), "source": " + ".join(_rel(p) for p, _ in docs)}


def gpu_test_log(path: Path) -> dict[str, Any] | None:
    """``pytest -m gpu -rA`` output: the tests that passed, failed or errored (skips are not counted)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    by = {k: [ln.split(" ", 1)[1] for ln in lines if ln.startswith(k + " ")] for k in ("PASSED", "FAILED", "ERROR")}
    total = sum(len(v) for v in by.values())
    return {"passed": len(by["PASSED"]), "total": total, "failed": by["FAILED"] + by["ERROR"], "not_run": [],
            "source": _rel(path)} if total else None


def repeat_spread(paths: list[Path]) -> dict[str, Any] | None:
    """The repeated evaluations of ``bench_round.py --repeat``: per task and workload, the spread of the medians
    of the kernel and of every candidate, workloads of at least :data:`SHORT_MS` only. A later file's task
    replaces an earlier one's unless it has fewer evaluations."""
    rows: dict[str, dict[str, Any]] = {}
    n_runs: dict[str, int] = {}
    short: list[str] = []
    moved: dict[str, int] = {}
    sources = []
    for path in paths:
        doc = _load(path)
        if not doc:
            continue
        sources.append(_rel(path))
        for task, runs in doc["tasks"].items():
            if len(runs) < n_runs.get(task, 0):
                continue  # a later round cut short does not replace more evaluations of the task
            n_runs[task] = len(runs)
            moved[task] = sum(bool((r.get("clocks") or {}).get("moved")) for r in runs)
            kernel = {w["name"]: w["median_ms"] for w in runs[0].get("workloads", []) if w.get("median_ms")}
            for name, v in doc.get("spread", {}).get(task, {}).items():
                if kernel.get(name, 0.0) < SHORT_MS:
                    short.append(f"{task}:{name}")
                    continue
                rows[f"{task}:{name}"] = {"spread_pct": round(v["spread_pct"], 2), "runs": v["runs"],
                                          "by": {k: round(x, 2) for k, x in v["by"].items()}, "source": _rel(path)}
    if not rows:
        return None
    over = {k: {c: x for c, x in r["by"].items() if x > 1.0} for k, r in rows.items()}
    return {"max_pct": max(r["spread_pct"] for r in rows.values()),
            "kernel_max_pct": max(r["by"].get("kernel", 0.0) for r in rows.values()),
            "tasks": sorted({k.split(":")[0] for k in rows}), "workloads": rows,
            "over_1pct": {k: v for k, v in over.items() if v}, "short_left_out": sorted(short),
            "runs_with_clocks_moved": moved, "sources": sources}


CANDIDATE_FILES = ("round13/timing_repeat_h200.json", "round14/timing_repeat_h200.json",
                   "round16/timing_repeat_gemm_bias_act.json", "round16/timing_repeat_gemm_bf16_flash.json",
                   "round17/references_candidates.json", "round18/references_candidates.json",
                   "round20/references_candidates_softmax.json", "round20/references_candidates_norms.json",
                   "round20/references_candidates_memory.json", "round21/references_candidates_memory2.json",
                   "round22/references_candidates_gemm_attention.json")
"""The evaluations of this evaluator with every candidate of the task (``bench_round.py``'s timing repeats and
its references step), oldest first, under ``data/runs``."""


def _excluded(command: str) -> list[str]:
    """The candidates a ``bench_round.py`` command left out with ``--exclude``."""
    words = command.split()
    if "--exclude" not in words:
        return []
    rest = words[words.index("--exclude") + 1:]
    return rest[:next((i for i, w in enumerate(rest) if w.startswith("--")), len(rest))]


def candidate_rows(paths: list[Path]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per catalog workload, the reference against every candidate its task declares, from the evaluations in
    ``paths``: the median over a file's evaluations of the kernel's median and of each candidate's. A candidate
    counts only where it was correct (``ok``) in every evaluation; the best baseline is the fastest of those, the
    vendor ratio the fastest of those flagged ``vendor`` (the task's vendor library: cuBLAS, cuDNN, SDPA). A later
    file's task replaces an earlier one's unless it has fewer evaluations (as :func:`repeat_spread`); then only the
    candidates the kept row lacks are taken from it (round 20 timed compile max-autotune once on tasks whose other
    figures are five-evaluation repeats), and the row's source says so."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    n_runs: dict[str, int] = {}
    for path in paths:
        doc = _load(path)
        if not doc:
            continue
        left_out = _excluded(doc.get("command", ""))
        for task, runs in doc["tasks"].items():
            runs = [r for r in runs if r.get("workloads")]
            if not runs:
                continue
            extra = len(runs) < n_runs.get(task, 0)
            n_runs[task] = max(n_runs.get(task, 0), len(runs))
            by_name: dict[str, list[dict[str, Any]]] = {}
            for r in runs:
                for w in r["workloads"]:
                    if not w.get("hidden") and w["name"] != "hidden":
                        by_name.setdefault(w["name"], []).append(w)
            for name, ws in by_name.items():
                kernel, bad, cands = _measured(ws)
                if extra:
                    row = rows.get((task, name))
                    new = {n: c for n, c in cands.items() if row and n not in row["_cands"]}
                    if new:
                        row["_cands"].update(new)
                        row["excluded"] = [x for x in row["excluded"] if x not in new]
                        row["source"] += f"; {', '.join(sorted(new))} from {_rel(path)} ({len(ws)} evaluation" + \
                            "s" * (len(ws) > 1) + ")"
                    continue
                rows[(task, name)] = {
                    "status": bad or "passed", "median_ms": kernel, "_cands": cands,
                    "roofline_fraction": (ws[0]["roofline_floor_ms"] / kernel
                                          if ws[0].get("roofline_floor_ms") and kernel else None),
                    "excluded": left_out,
                    "by_dist": _by_dist(ws),
                    "source": f"{_rel(path)} ({len(ws)} evaluation{'s' * (len(ws) > 1)}; every candidate"
                              + (f" but {', '.join(left_out)})" if left_out else ")")}
    for row in rows.values():
        cands, kernel = row.pop("_cands"), row["median_ms"]
        timed = {n: statistics.median(c["ms"]) for n, c in cands.items() if c["status"] == "ok" and c["ms"]}
        best = min(timed, key=timed.__getitem__) if timed else None
        vendor = [timed[n] for n in timed if cands[n]["vendor"]]
        row.update({"best_baseline": best,
                    "speedup_best": timed[best] / kernel if best and kernel else None,
                    "vendor_ratio": min(vendor) / kernel if vendor and kernel else None,
                    "candidates": {n: round(timed[n], 4) if n in timed else c["status"] for n, c in cands.items()},
                    "not_timed": {n: c["reason"] for n, c in cands.items() if n not in timed}})
    return rows


def _measured(ws: list[dict[str, Any]]) -> tuple[float | None, str | None, dict[str, dict[str, Any]]]:
    """One file's evaluations of a workload: the kernel's median (None unless every evaluation passed), the first
    status that is not ``passed``, and each candidate's medians, vendor flag and first failure."""
    bad = next((w["status"] for w in ws if w["status"] != "passed"), None)
    times = [w["median_ms"] for w in ws if w.get("median_ms")]
    cands: dict[str, dict[str, Any]] = {}
    for b in (x for w in ws for x in w.get("baselines", [])):
        c = cands.setdefault(b["name"], {"ms": [], "status": "ok", "vendor": bool(b.get("vendor")), "reason": ""})
        if b["status"] == "ok" and b.get("median_ms"):
            c["ms"].append(b["median_ms"])
        elif c["status"] == "ok":
            c["status"], c["reason"] = b["status"], (b.get("reason") or "")[:200]
    return (statistics.median(times) if times and bad is None else None), bad, cands


def _by_dist(ws: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The kernel's median per input distribution over a workload's evaluations (the median of each evaluation's
    ``by_dist`` median) and its samples; empty when the evaluations did not record them."""
    per: dict[str, list[tuple[float, int]]] = {}
    for w in ws:
        for dist, t in (w.get("by_dist") or {}).items():
            if t.get("median_ms"):
                per.setdefault(dist, []).append((t["median_ms"], t.get("reps") or 0))
    return {d: {"median_ms": round(statistics.median(m for m, _ in v), 5), "reps": sum(n for _, n in v)}
            for d, v in per.items()}


DIST_SENSITIVE = 1.5
"""A workload whose slowest input distribution's median is this many times its fastest's is listed in
``dist_sensitive``: its pooled median depends on how the timed sets mix the distributions."""


def dist_sensitive(rows: dict[tuple[str, str], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per workload over :data:`DIST_SENSITIVE`: the pooled median, each distribution's median and samples, the
    ratio, and the source."""
    out = {}
    for (task, name), r in sorted(rows.items()):
        by = r.get("by_dist") or {}
        times = [v["median_ms"] for v in by.values()]
        if len(times) > 1 and max(times) >= DIST_SENSITIVE * min(times):
            out[f"{task}:{name}"] = {"median_ms": r["median_ms"], "by_dist": by,
                                     "ratio": round(max(times) / min(times), 2), "source": r["source"]}
    return out


TIMED = ("load_bearing", "not_load_bearing")


def _code_shas(repo: Path, tasks: set[str]) -> dict[str, str | None]:
    """The code hash (docstrings and comments aside) of each reference's current source, as an ablation record's
    ``code_sha256`` names the source it measured."""
    import sys

    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    from d2kgrade.ablate.results import code_sha256

    paths = {t: repo / "references" / t / "triton.py" for t in tasks}
    return {t: code_sha256(p.read_text(encoding="utf-8")) if p.is_file() else None for t, p in paths.items()}


def ablation_summary(ablation: dict[str, Any] | None, root: Path) -> dict[str, Any]:
    """``ablation_tasks``: the references with at least one timed property in ``ablation_h200.json``; ``ablation``:
    per task, each timed property's slowdown when removed with its interval, the load-bearing ones first."""
    refs = len(list((root.parent / "references").glob("*/triton.py")))
    if not ablation:
        return {"ablation_tasks": [], "ablation": None}
    per: dict[str, list[dict[str, Any]]] = {}
    counts: dict[str, int] = {}
    now = _code_shas(root.parent, {r["task"] for r in ablation.get("records", [])})
    stale = sorted({r["task"] for r in ablation.get("records", [])
                    if r.get("code_sha256") and r["code_sha256"] != now[r["task"]]})
    for r in ablation.get("records", []):
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        if r["status"] in TIMED and r.get("slowdown") is not None:
            per.setdefault(r["task"], []).append({"property": r["property"], "status": r["status"],
                                                  "slowdown": r["slowdown"], "ci": [r["ci_low"], r["ci_high"]],
                                                  "noise_pct": r["noise_pct"]})
    for rows in per.values():
        rows.sort(key=lambda x: (x["status"] != "load_bearing", -x["slowdown"]))
    return {"ablation_tasks": sorted(per),
            "ablation": {"references": refs, "by_status": dict(sorted(counts.items())), "stale": stale,
                         "tasks": dict(sorted(per.items())),
                         "source": f"data/ablation_h200.json ({ablation.get('gpu')}, {str(ablation.get('date'))[:10]}; "
                                   f"{ablation.get('evaluator', 'sandboxed')}, {ablation.get('rounds')} rounds)"}}


def summarize(root: Path = HERE) -> dict[str, Any]:
    full = _load(root / "data" / "references_h200.json") or {}
    peers = _load(root / "data" / "h200_peers_round8.json") or {"tasks": {}}
    r11 = _load(root / "data" / "h200_round11.json") or {}
    r12 = _load(root / "data" / "h200_round12.json") or {}
    check = r12 or r11 or _load(root / "data" / "h200_round10.json") or \
        _load(root / "data" / "h200_device_check_round8.json") or {}
    ablation = _load(root / "data" / "ablation_h200.json")
    repeat = _load(root / "data" / "timing_repeat_h200.json")
    floors = _load(root / "data" / "floors_h200.json")
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for w in full.get("workloads", []):
        if w.get("hidden"):
            continue
        rows[(w["task"], w["workload"])] = {
            "status": w["status"], "median_ms": w.get("median_ms"), "roofline_fraction": w.get("roofline_fraction"),
            "best_baseline": min((("eager", w.get("eager_ms")), ("compile", w.get("compiled_ms"))),
                                 key=lambda kv: kv[1] if kv[1] else math.inf)[0],
            "speedup_best": (min(x for x in (w.get("eager_ms"), w.get("compiled_ms")) if x) / w["median_ms"])
            if w.get("median_ms") and (w.get("eager_ms") or w.get("compiled_ms")) else None,
            "vendor_ratio": (w["eager_ms"] / w["median_ms"]) if w.get("eager_ms") and w.get("median_ms") else None,
            "source": "references_h200.json (eager and torch.compile only)"}
    for task, runs in peers.get("tasks", {}).items():
        for w in (runs[-1].get("workloads") or []):
            vendor = [b["median_ms"] for b in w["baselines"] if b["status"] == "ok" and b["median_ms"] and
                      (b.get("vendor") or b["name"].startswith(("sdpa", "cudnn", "cublas")) or b["name"] == "eager")]
            rows[(task, w["name"])] = {
                "status": w["status"], "median_ms": w["median_ms"], "roofline_fraction": w["roofline_fraction"],
                "best_baseline": w["best_baseline"], "speedup_best": w["speedup_best"],
                "vendor_ratio": (min(vendor) / w["median_ms"]) if vendor and w["median_ms"] else None,
                "source": "data/h200_peers_round8.json (every candidate)"}
    rows.update(candidate_rows([root / "data" / "runs" / f for f in CANDIDATE_FILES]))
    fr = [r["roofline_fraction"] for r in rows.values() if r["status"] == "passed" and r["roofline_fraction"]]
    vend = [r["vendor_ratio"] for (t, _), r in rows.items() if t in VENDOR_TASKS and r["vendor_ratio"]]
    derived = derived_floors(floors, rows)
    not_timed: dict[str, dict[str, Any]] = {}  # candidate -> the workloads it has no figure for, and why
    for (t, w), r in sorted(rows.items()):
        for name, why in r.get("not_timed", {}).items():
            e = not_timed.setdefault(name, {"workloads": 0, "reasons": []})
            e["workloads"] += 1
            if why and why.split(":")[0] not in {x.split(":")[0] for x in e["reasons"]}:
                e["reasons"].append(why[:120])
    partial = sorted({t for (t, _), r in rows.items() if "candidates" not in r})
    # The same passed workloads as geomean_roofline_fraction, each against its derived floor where the floors file
    # has one (the four tasks with cost.derived_floor) and against its roofline floor elsewhere.
    fr_derived = [r["roofline_fraction"] * derived.get(f"{t}:{w}", {"ratio": 1.0})["ratio"]
                  for (t, w), r in rows.items() if r["status"] == "passed" and r["roofline_fraction"]]
    out: dict[str, Any] = {
        "workloads": len(rows),
        "correct": sum(r["status"] == "passed" for r in rows.values()),
        "geomean_roofline_fraction": _geomean(fr),
        "geomean_derived_floor_fraction": _geomean(fr_derived) if floors else None,
        "derived_floors": derived,
        "derived_floors_source": f"floors_h200.json ({floors['gpu']['name']}, {floors['date'][:10]})"
        if floors else None,
        "below_0_5": sum(f < 0.5 for f in fr),
        "at_least_best_baseline": sum((r["speedup_best"] or 0) >= 1.0 for r in rows.values()),
        "vendor_ratio_geomean": _geomean(vend),
        "vendor_workloads": len(vend),
        "best_baseline_by_workload": {f"{t}:{w}": {"best": r["best_baseline"], "speedup": r["speedup_best"],
                                                   "status": r["status"], "median_ms": r["median_ms"],
                                                   "roofline_fraction": r["roofline_fraction"],
                                                   **({"candidates": r["candidates"]} if "candidates" in r else {}),
                                                   "source": r["source"]}
                                      for (t, w), r in sorted(rows.items())},
        "baselines_not_timed": {"excluded": sorted({x for r in rows.values() for x in r.get("excluded", [])}),
                                "candidates": not_timed,
                                "tasks_eager_and_compile_only": partial},
        "dist_sensitive": dist_sensitive(rows),
        **ablation_summary(ablation, root),
        "full_run_s": full.get("total_wall_s"),
        "full_run_source": "references_h200.json (the evaluator before the split; the split's full run is not "
                           "measured yet)" if full else None,
        "timing_spread_max_pct": None, "timing_spread_tasks": [],
        "cuda_reeval_build_s": None,
        "gpu_tests": None,
        "missing": [],
    }
    if repeat:
        spreads = {t: max(v["spread_pct"] for v in r.values()) for t, r in repeat.get("spread", {}).items() if r}
        out["timing_spread_max_pct"], out["timing_spread_tasks"] = (max(spreads.values()), sorted(spreads)) \
            if spreads else (None, [])
        out["timing_spread_runs"] = {t: len(r) for t, r in repeat.get("tasks", {}).items()}
    elif full.get("noise"):
        n = full["noise"]
        out["timing_spread_max_pct"] = max(v["spread_pct"] for v in n["workloads"].values())
        out["timing_spread_tasks"] = [n["task"]]
        out["timing_spread_source"] = "references_h200.json noise study (5 evaluations, kernel only)"
    g = check.get("gpu_tests_structured")
    if g:
        out["gpu_tests"] = {"passed": len(g["passed"]), "total": g["total"], "failed": g.get("failed", []),
                            "not_run": g.get("not_run", []), "source": check.get("what", "")[:80]}
    soft = r11.get("softmax_evaluation")
    if soft:  # one evaluation of softmax (4 workloads + hidden, every candidate), before and after round 11's changes
        out["softmax_evaluation_s"] = {k: soft[k]["wall_s"] for k in ("before", "after")}
        out["softmax_evaluation_phases"] = {k: {**soft[k]["phases"], "detail": soft[k]["phase_detail"]}
                                            for k in ("before", "after")}
    if r12:  # shared GPU buffers for timed batches: one eager-only evaluation before and after, a cut full run
        k = r12["rmsnorm_residual_eager_only"]
        out["rmsnorm_residual_eager_only_s"] = {x: k[x]["wall_s"] for x in ("before", "after")}
        p = r12["full_run_partial"]
        out["full_run_partial"] = {"tasks_done": p["tasks_done"], "tasks_total": p["tasks_total"], "wall_s": p["wall_s"],
                                   "per_task_s": {t: v["wall_s"] for t, v in p["tasks"].items()},
                                   "source": "h200_round12.json (eager baseline only, cut at 600 s)"}
        out["cuda_reeval_build_s"] = r12.get("cuda_reeval_build_s")
        out["cuda_reeval_source"] = r12.get("cuda_reeval_source")
    runs = root / "data" / "runs"
    # Round 19 ran the suite cold, then once more warm (the baseline cache and each reference's Triton cache); four
    # references failed a tripwire that read their docstrings as C++ and were rerun, cold then warm, after the fix.
    # Round 22b ran the whole suite cold on one machine (the cold figure); its warm rerun was cut after 6 tasks when
    # the machine was given back, so the warm figure stays round 19's, and the cut rerun is reported as partial.
    cold = full_run(runs / "round22b" / "full_round.json")
    warm = full_run(runs / "round19" / "full_warm_round.json", runs / "round19b" / "full_warm_round.json")
    warm_cut = full_run(runs / "round22b" / "full_warm_round.json")
    if warm:
        out["full_run_s"] = warm["wall_s"]
        out["full_run_source"] = (f"{warm['source']} ({warm['gpu']}, {warm['date']}; eager baseline only; "
                                  f"{warm['passed']}/{warm['tasks']} tasks passed; a rerun of the unchanged suite: "
                                  "baselines from the cache, kernels from the Triton cache; cold: full_run_cold)")
        out["full_run"] = warm
    if cold:
        out["full_run_cold"] = cold
    if warm_cut and cold and warm_cut["tasks"] < cold["tasks"]:
        out["full_run_warm_partial"] = {**warm_cut, "cold_wall_s_same_tasks": round(sum(
            cold["task_wall_s"][t] for t in warm_cut["task_wall_s"]), 1)}
    spread = repeat_spread([runs / "round13" / "timing_repeat_h200.json", runs / "round14" / "timing_repeat_h200.json",
                            runs / "round16" / "timing_repeat_gemm_bias_act.json",
                            runs / "round16" / "timing_repeat_gemm_bf16_flash.json"])
    if spread:
        out["timing_spread_max_pct"] = spread["max_pct"]
        out["timing_spread_tasks"] = spread["tasks"]
        out["timing_spread_source"] = (f"{' and '.join(spread['sources'])} (5 evaluations each; kernel and every "
                                       f"candidate but compile max-autotune; workloads under {SHORT_MS * 1e3:.0f} us "
                                       "left out)")
        out["timing_spread"] = spread
    tests = gpu_test_log(runs / "round19" / "gpu_tests.log") or gpu_test_log(runs / "round17" / "gpu_tests.log")
    if tests:
        out["gpu_tests"] = tests
    for key in ("cuda_reeval_build_s", "full_run_s", "timing_spread_max_pct"):
        if out[key] is None:
            out["missing"].append(key)
    if not floors:
        out["missing"] += ["derived_floors", "geomean_derived_floor_fraction"]
    if partial:
        out["missing"].append(f"every baseline candidate on {', '.join(partial)} (eager and torch.compile only)")
    for name in out["baselines_not_timed"]["excluded"]:
        n = sum(name in r.get("excluded", []) for r in rows.values())
        out["missing"].append(f"the {name} candidate on {n} of {len(rows)} workloads (left out of the rounds' "
                              "commands)")
    if not out["ablation_tasks"]:
        out["missing"].append("ablation_tasks")
    elif len(out["ablation_tasks"]) < out["ablation"]["references"]:
        out["missing"].append(f"ablation_tasks: {len(out['ablation_tasks'])} of {out['ablation']['references']} "
                              "references timed")
    if out["ablation"] and out["ablation"]["stale"]:
        out["missing"].append(f"ablation of the current source of {', '.join(out['ablation']['stale'])} (its "
                              "records were measured on an earlier version)")
    if len(out["timing_spread_tasks"]) < 10:
        out["missing"].append("timing_spread over ten tasks (kernel and every baseline)")
    if (out.get("full_run_s") or 0) > 300:
        out["missing"].append("full_run_s at or under 300 s")
    if (out.get("full_run_cold") or {}).get("wall_s", 0) > 300:  # full_run_s is the warm rerun; say so of the cold
        out["missing"].append(f"full_run_cold at or under 300 s ({out['full_run_cold']['wall_s']} s; the warm rerun "
                              "is full_run_s)")
    if (out.get("timing_spread_max_pct") or 0) > 1.0:
        out["missing"].append("timing_spread_max_pct at or under 1% (see timing_spread.over_1pct)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    s = summarize()
    if args.json:
        print(json.dumps(s, indent=1))
        return
    for k, v in s.items():
        if k == "derived_floors":
            for name, f in v.items():
                frac = f["reference_derived_floor_fraction"]
                print(f"derived_floor {name}: roofline {f['roofline_floor_ms']:.4g} ms, derived "
                      f"{f['derived_floor_ms']:.4g} ms ({f['binding']}, x{f['ratio']:.2f}), reference at "
                      + (f"{frac:.3f}" if frac else "-") + " of it")
        elif k != "best_baseline_by_workload":
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()

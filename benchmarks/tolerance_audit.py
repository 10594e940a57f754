"""Are the tolerances right? Measures, on this GPU, how much of each task's tolerance honest implementations use.

For every task, catalog workload and input distribution: draw the inputs (seeded), compute the float64 oracle
(``reference``), and compare two honest implementations with it through the evaluator's own comparison:

- ``baseline``: the task's PyTorch baseline, eager (cuBLAS, cuDNN, FlashAttention...: what production code uses);
- ``expert``: the suite's expert reference kernel (``references/<id>/triton.py``).

Per output it records ``tol_ratio``, the share of the tolerance the worst element uses (max over elements of
``|out - ref| / (atol + rtol*|ref|)``; above 1 fails), and the number of elements out of tolerance. A tolerance is
right when both honest implementations stay well below 1 on every draw; the CPU tests show that zeros, constants,
echoes and the lower-precision shortcuts land above it. Outputs that a task checks with its own ``check`` (top-k
indices, ...) are reported as that check's verdict. A failure keeps its full traceback, so this script is also
the first thing to run on a new GPU. Trusted code only: nothing here is sandboxed.

    python benchmarks/tolerance_audit.py [--tasks softmax topk] [--seed 7] [--out benchmarks/data/tolerance_audit_h200.json]
    TRITON_INTERPRET=1 python benchmarks/tolerance_audit.py --device cpu --out /tmp/audit.json   # smoke workloads

Writes the JSON after every task, so a run cut short keeps what it measured.

**Many draws** (``--seeds``; issue 22, point 5). One seed says whether an implementation passes once; whether a
rare failure is the tail of honest rounding needs the distribution. ``--seeds 0:256`` takes each number as the
evaluator's secret seed and draws the input sets of its first timed rotation exactly as the evaluator does
(``Evaluator._make(spec, "timing", "0", j)``: ``derive_seed(seed, workload, "timing", "0", j)``, distribution
``j % len(DISTRIBUTIONS)``, ``--sets`` sets, 4 on an H200 for the GEMMs, huge inputs shared from set 0), so a set
seen failing under a known seed is reproduced. Each draw records that seed, salt, tag and set; per output per
implementation the worst element (index, index mod 64/128/256, tol_ratio, |err|, |ref|), the elements above 0.5,
0.8 and 1.0 of the tolerance, and the smallest atol (rtol kept) and rtol (atol kept) under which the draw passes;
the report's ``summary`` gives per implementation the quantiles of these over draws and the tolerance at which it
fails 1 draw in 100 and in 1000 (empirical with enough draws, else a Gumbel fit of the per-draw maxima).

    python benchmarks/tolerance_audit.py --tasks gemm_bf16 --workloads down_proj_long_k --seeds 0:256 \
        --out tolerance_down_proj_h200.json

What to expect for a bf16 GEMM (``gemm_bf16``: C = A B^T, fp32 accumulation, the output rounded to bf16). Products
of bf16 values are exact in fp32, so the errors are the accumulation's roundings and the output's. The n-th fp32
addition errs by d_n S_n with |d_n| <= u (u = 2^-24 rounding to nearest; 2u truncating, as tensor cores align
addends: Fasi et al. 2021, "Numerical behavior of NVIDIA tensor cores"). Rounding to nearest the d_n are nearly
independent and zero-mean, so the error grows as sqrt(n): on the "normal" draw (S_n ~ N(0, n/K)) its std is
u sqrt(K/6) ~ 4e-6 for K = 28672 roundings (less with one rounding per k=16 tensor-core step). Truncating, the
errors share a sign: ~u sum_n |S_n| ~ 0.5 n u, 5e-5 for n = K/16 steps. Both are far below the bf16 spacing of C
(2^-7 |C| at most): kernel and oracle, each rounded to bf16, differ by one spacing where C lies that close to a
rounding midpoint, and one spacing is at most 2^-7/rtol = 0.78 of the tolerance (0.62 at |C| in [4, 8)), so honest
GEMMs sit at 0.6-0.8 on every draw. A failure needs an accumulation error above atol where |C| is small:
"row_col_scaled" scales rows of A and B by up to 2^4 each, so near-zero elements of the most scaled rows and
columns carry up to 2^8 times the error (truncating: 2^8 x 5e-5 ~ 0.013) against the same atol = 0.01. That is the
expected tail, and cuBLAS meets it too. Signs of a kernel bug instead: the expert's worst tol_ratio outside
cuBLAS's distribution over the same draws; an error above Higham's bound for any fp32 summation order,
K 2u sum_k |a_ik b_jk| plus one bf16 spacing (``err_over_bound`` > 1 in ``worst.context``); any error on
"int_valued" draws (exact in fp32); worst elements gathered at one position modulo the tile (``index_mod``; BM
and BN are 64-256 in the expert's configs).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.bench_references import references, versions  # noqa: E402
from benchmarks.tolerance_summary import TILE_MODS, finite, summarize  # noqa: E402
from d2kgrade.io import write_json  # noqa: E402
from runner.compare import _unravel  # noqa: E402 - the evaluator's own index of a flat position
from runner.direct import checked_outputs, compare_outputs, load_reference  # noqa: E402
from runner.evaluate import gpu_info, load_task  # noqa: E402
from runner.huge_inputs import HUGE_INPUT_BYTES, huge_mask  # noqa: E402
from runner.inputs import WorkloadSpec, as_tuple, distributions, make_inputs  # noqa: E402
from runner.loading import load_module  # noqa: E402
from runner.stats import derive_seed  # noqa: E402

LEVELS = (0.5, 0.8, 1.0)
"""Shares of the tolerance at which elements are counted (1.0: out of tolerance)."""
_CHUNK = 1 << 26  # elements per float64 chunk, as runner.compare: 512 MB of temporaries at most


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure(name: str, fn: Any, inputs: tuple[Any, ...], expected: Any, spec: WorkloadSpec, ref: Any,
            device: str, detail: bool = False) -> dict:
    """Call ``fn`` on clones of ``inputs`` and compare with ``expected``; never raises. With ``detail``, each
    elementwise output also gets :func:`element_stats` (and the task's :data:`CONTEXT` of its worst element)."""
    try:
        got = fn(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs], **spec.scalars)
        _sync(device)
        mism = compare_outputs(spec, got, expected, inputs=inputs, ref=ref)
        outputs = [{"name": m.name, "ok": m.ok, "tol_ratio": finite(m.tol_ratio), "n_bad": m.n_bad,
                    "n_total": m.n_total, "max_abs_err": m.max_abs_err, "reason": m.reason[:300]} for m in mism]
        if detail:
            _add_detail(outputs, spec, ref, inputs, as_tuple(got), as_tuple(expected))
    except Exception:  # noqa: BLE001 - a crash is a finding, recorded with its traceback
        return {"impl": name, "ok": False, "error": traceback.format_exc()[-4000:]}
    return {"impl": name, "ok": all(m.ok for m in mism), "outputs": outputs}


def _add_detail(outputs: list[dict], spec: WorkloadSpec, ref: Any, inputs: tuple[Any, ...], got: tuple[Any, ...],
                expected: tuple[Any, ...]) -> None:
    custom = set(checked_outputs(ref))
    dtypes = spec.task.tensor_dtypes(spec.workload)
    for o, g, e in zip(outputs, got, expected, strict=False):  # a checked output's verdict comes last: no tensor
        if o["name"] in custom or not o.get("n_total") or not isinstance(g, torch.Tensor) \
                or tuple(g.shape) != tuple(e.shape):
            continue
        o.update(element_stats(g, e, spec.task.tolerance_for(dtypes[o["name"]])))
        context = CONTEXT.get(spec.task.id)
        if context is not None and o["worst"] is not None and o["worst"]["index"] is not None:
            o["worst"]["context"] = context(inputs, o["worst"])


def element_stats(got: torch.Tensor, ref: torch.Tensor, tol: tuple[float, float]) -> dict:
    """The worst element and the tail of one output, by the evaluator's rule (``runner.compare``: pass when
    ``|got - ref| <= atol + rtol*|ref|``; NaN or Inf where the reference is finite, or a non-finite reference not
    matched exactly, is an infinite share).

    Returns ``tol``; ``worst`` (flat and full index, ``index_mod`` of the last two dimensions by
    :data:`TILE_MODS`, ``tol_ratio``, ``abs_err``, ``abs_ref``, ``got``, ``ref``; None on an empty output, the
    index None where no element differs); ``n_above`` (elements above each of :data:`LEVELS` of the tolerance);
    ``atol_needed`` (the smallest atol that passes with rtol kept: max of ``|err| - rtol*|ref|``) and
    ``rtol_needed`` (the smallest rtol with atol kept: max of ``(|err| - atol) / |ref|``), None where no finite
    value passes. Computed where the output lives, in float64 chunks."""
    atol, rtol = tol
    o = got.detach().reshape(-1)
    r = ref.detach().to(o.device).reshape(-1)
    n = r.numel()
    best, best_at = -1.0, -1
    above = [0] * len(LEVELS)
    need_a, need_r = 0.0, 0.0
    for start in range(0, n, _CHUNK):
        oc = o[start:start + _CHUNK].to(torch.float64)
        rc = r[start:start + _CHUNK].to(torch.float64)
        diff = (oc - rc).abs()
        fin = torch.isfinite(rc)
        wrong = torch.where(fin, ~torch.isfinite(oc), ~((oc == rc) | (torch.isnan(oc) & torch.isnan(rc))))
        scale = atol + rtol * rc.abs()
        ratio = torch.where(scale > 0, diff / scale.clamp_min(1e-300), torch.where(diff > 0, math.inf, 0.0))
        ratio = torch.where(wrong, math.inf, torch.where(fin, ratio, 0.0))
        i = int(ratio.argmax())
        if float(ratio[i]) > best:
            best, best_at = float(ratio[i]), start + i
        for k, level in enumerate(LEVELS):
            above[k] += int((ratio > level).sum())
        ok = fin & ~wrong
        if bool(wrong.any()):
            need_a = need_r = math.inf
        if bool(ok.any()):
            need_a = max(need_a, float((diff - rtol * rc.abs())[ok].max()))
            over = ok & (diff > atol)
            if bool(over.any()):
                ra = rc.abs()[over]
                excess = (diff[over] - atol)
                need_r = max(need_r, math.inf if bool((ra == 0).any()) else float((excess / ra).max()))
    out: dict[str, Any] = {"tol": [atol, rtol], "worst": None,
                           "n_above": {str(level): c for level, c in zip(LEVELS, above, strict=True)},
                           "atol_needed": finite(max(need_a, 0.0)), "rtol_needed": finite(need_r)}
    if best == 0.0:  # no element differs: there is no worst one (an argmax of zeros would name element 0)
        out["worst"] = {"flat": None, "index": None, "tol_ratio": 0.0, "index_mod": None, "abs_err": 0.0,
                        "abs_ref": None, "got": None, "ref": None}
    elif best_at >= 0:
        g, e = float(o[best_at].double()), float(r[best_at].double())
        index = _unravel(best_at, tuple(ref.shape))
        out["worst"] = {"flat": best_at, "index": index, "tol_ratio": finite(best),
                        "index_mod": {str(m): [i % m for i in index[-2:]] for m in TILE_MODS},
                        "abs_err": finite(abs(g - e)), "abs_ref": finite(abs(e)), "got": finite(g),
                        "ref": finite(e)}
    return out


def gemm_context(inputs: tuple[Any, ...], worst: dict) -> dict:
    """``C = A B^T`` at the worst element (i, j): ``abs_dot`` = sum_k |a_ik b_jk|, the scale of any summation
    error, and ``err_over_bound``: |err| over Higham's bound for fp32 accumulation in any order, rounding or
    truncating (``K 2^-23 abs_dot``), plus one bf16/fp16 spacing of the output (``2^-p max(|got|, |ref|)``:
    kernel and oracle round separately). Above 1, no fp32 accumulation explains the error."""
    A, B = inputs[0], inputs[1]
    i, j = worst["index"]
    K = A.shape[1]
    abs_dot = float((A[i].double().abs() * B[j].double().abs()).sum())
    spacing = 2.0 ** -(7 if A.dtype == torch.bfloat16 else 10)
    err = worst["abs_err"]
    bound = K * 2.0 ** -23 * abs_dot + spacing * max(abs(worst["got"] or 0.0), worst["abs_ref"] or 0.0)
    return {"abs_dot": abs_dot, "err_over_abs_dot": None if err is None or abs_dot == 0 else err / abs_dot,
            "bound": bound, "err_over_bound": None if err is None or bound == 0 else err / bound}


CONTEXT = {"gemm_bf16": gemm_context}
"""Per task: what the worst element's inputs say (``worst.context``)."""


def _summary(res: dict) -> str:
    """``expert ok 0.31`` / ``baseline FAIL 1.42 (3 bad)`` / ``expert ERROR``: the worst tolerance share."""
    if "error" in res:
        return f"{res['impl']} ERROR"
    ratios = [o["tol_ratio"] for o in res["outputs"] if o.get("n_total")]
    worst = "inf" if any(x is None for x in ratios) else f"{max(ratios, default=0.0):.3f}"
    bad = sum(o["n_bad"] for o in res["outputs"])
    return f"{res['impl']} {'ok' if res['ok'] else 'FAIL'} {worst}" + (f" ({bad} bad)" if bad else "")


def _load(task_id: str, kernel_path: Path) -> tuple[Any, Any, Any, dict | None]:
    task = load_task(ROOT, task_id)
    ref = load_reference(ROOT / "tasks" / task_id)
    try:
        return task, ref, load_module(kernel_path, prefix="d2k_audit"), None
    except Exception:  # noqa: BLE001
        return task, ref, None, {"task": task_id, "error": "loading the expert reference failed:\n"
                                 + traceback.format_exc()[-4000:]}


def _workloads(task: Any, device: str, names: list[str] | None) -> list[Any]:
    """The catalog workloads (the smoke workload on ``cpu``), only those in ``names`` when given."""
    wls = task.workloads if device == "cuda" else [task.smoke]
    return [w for w in wls if not names or w.name in names]


def audit_task(task_id: str, kernel_path: Path, seed: int, device: str = "cuda",
               on_row: Any = None, workloads: list[str] | None = None) -> list[dict]:
    """Every catalog workload (the smoke workload on ``cpu``) and distribution of one task; ``on_row(rows)`` is
    called after each draw (to save them before the next draw can crash the process)."""
    task, ref, module, failed = _load(task_id, kernel_path)
    if failed is not None:
        return [failed]
    kernel = module.kernel
    rows = []
    for wl in _workloads(task, device, workloads):
        spec = WorkloadSpec.resolve(task, wl)
        for i, dist in enumerate(distributions(ref)):
            t0 = time.monotonic()
            row: dict[str, Any] = {"task": task_id, "workload": wl.name, "dist": dist, "seed": seed + i,
                                   "tolerance": {k: list(v) for k, v in task.tolerance.items()}}
            try:
                inputs = make_inputs(ref, spec, seed=seed + i, device=device, dist=dist)
                expected = ref.reference(*inputs, **spec.scalars)
                _sync(device)
            except Exception:  # noqa: BLE001
                row["error"] = "inputs or oracle failed:\n" + traceback.format_exc()[-4000:]
                rows.append(row)
                continue
            row["results"] = [measure("baseline", ref.baseline, inputs, expected, spec, ref, device),
                              measure("expert", kernel, inputs, expected, spec, ref, device)]
            row["wall_s"] = time.monotonic() - t0
            rows.append(row)
            if on_row is not None:
                on_row(rows)
            print(f"{task_id:24s} {wl.name:24s} {dist:16s} " + "  ".join(_summary(r) for r in row["results"]),
                  flush=True)
            del inputs, expected
            gc.collect()
            if device == "cuda":
                torch.cuda.empty_cache()
    return rows


# ------------------------------------------------------------------------------ many draws: the timed rotation

ROTATION_SALT, ROTATION_TAG = "timing", "0"
"""``Timer.time_submission``'s first rotation: ``rotation(wl, spec, "timing", "0")``; later chunks of a batch
larger than ``CHUNK_BYTES`` of outputs (32 GB: none of gemm_bf16's) draw again with the tag ``str(done)``."""


def parse_seeds(text: str, base: int = 0) -> range:
    """``"64"``: 64 evaluator seeds from ``base``; ``"100:164"``: seeds 100 to 163."""
    lo, sep, hi = text.partition(":")
    r = range(int(lo), int(hi)) if sep else range(base, base + int(lo))
    if len(r) == 0:
        raise ValueError(f"--seeds {text!r} names no seed")
    return r


def rotation_draws(task: Any, ref: Any, spec: WorkloadSpec, eval_seeds: range, sets: int, device: str,
                   dists: list[str] | None = None) -> Any:
    """``(draw, inputs)`` per input set of each evaluator seed's first timed rotation, drawn as the evaluator
    draws them (``Evaluator._make(spec, "timing", "0", j, dist=DISTRIBUTIONS[j % len])``; sets after the first
    share set 0's huge inputs, as ``runner.huge_inputs.rotation_contents``). ``dists`` keeps only the sets of
    those distributions (set 0 is still drawn when a later set shares its huge inputs)."""
    all_dists = distributions(ref)
    mask = huge_mask(task, spec, HUGE_INPUT_BYTES)
    for s in eval_seeds:
        first: tuple[Any, ...] | None = None
        for j in range(sets):
            dist = all_dists[j % len(all_dists)]
            wanted = not dists or dist in dists
            if not wanted and not (j == 0 and any(mask)):
                continue
            seed = derive_seed(s, spec.workload.name, ROTATION_SALT, ROTATION_TAG, j)
            inputs = make_inputs(ref, spec, seed=seed, device=device, dist=dist)
            if j == 0 and any(mask):
                first = inputs
            elif first is not None:
                inputs = tuple(f if h else t for t, f, h in zip(inputs, first, mask, strict=True))
            if wanted:
                yield {"eval_seed": s, "salt": ROTATION_SALT, "tag": ROTATION_TAG, "set": j, "sets": sets,
                       "dist": dist, "seed": seed}, inputs


def tuned_configs(module: Any) -> dict[str, list[str]]:
    """The configs each ``triton.autotune`` object of ``module`` has chosen so far, by attribute name."""
    out = {}
    for name, obj in vars(module).items():
        cache = getattr(obj, "cache", None)
        if isinstance(cache, dict) and cache and hasattr(obj, "configs"):
            out[name] = sorted({str(c) for c in cache.values()})
    return out


def audit_draws(task_id: str, kernel_path: Path, eval_seeds: range, sets: int = 4, device: str = "cuda",
                workloads: list[str] | None = None, dists: list[str] | None = None, on_row: Any = None
                ) -> list[dict]:
    """:func:`rotation_draws` of each workload, baseline and expert compared with the oracle on each, with
    :func:`element_stats` per output; ``on_row(rows)`` after each draw."""
    task, ref, module, failed = _load(task_id, kernel_path)
    if failed is not None:
        return [failed]
    rows: list[dict] = []
    tolerance = {k: list(v) for k, v in task.tolerance.items()}
    for wl in _workloads(task, device, workloads):
        spec = WorkloadSpec.resolve(task, wl)
        draws = rotation_draws(task, ref, spec, eval_seeds, sets, device, dists)
        while True:
            t0 = time.monotonic()
            row: dict[str, Any] = {"task": task_id, "workload": wl.name, "tolerance": tolerance}
            try:
                got = next(draws, None)
                if got is None:
                    break
                draw, inputs = got
                row.update(dist=draw["dist"], seed=draw["seed"], draw=draw)
                expected = ref.reference(*inputs, **spec.scalars)
                _sync(device)
            except Exception:  # noqa: BLE001 - the input maker's fault ends this workload, recorded
                row["error"] = "inputs or oracle failed:\n" + traceback.format_exc()[-4000:]
                rows.append(row)
                break
            row["results"] = [measure("baseline", ref.baseline, inputs, expected, spec, ref, device, detail=True),
                              measure("expert", module.kernel, inputs, expected, spec, ref, device, detail=True)]
            row["expert_configs"] = tuned_configs(module)
            row["wall_s"] = time.monotonic() - t0
            rows.append(row)
            if on_row is not None:
                on_row(rows)
            print(f"{task_id:24s} {wl.name:24s} {draw['dist']:16s} seed {draw['eval_seed']} set {draw['set']}  "
                  + "  ".join(_summary(r) for r in row["results"]), flush=True)
            del inputs, expected, got  # every draw has the same sizes: the caching allocator reuses the blocks
    return rows


# ------------------------------------------------------------------------------------------------ main


def _audit_in_subprocess(task_id: str, args: argparse.Namespace) -> list[dict]:
    """One task in a child process; its rows, or one error row with the child's output tail."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "part.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--no-isolate", "--tasks", task_id, "--seed",
               str(args.seed), "--device", args.device, "--out", str(part)]
        if args.workloads:
            cmd += ["--workloads", *args.workloads]
        if args.seeds:
            cmd += ["--seeds", args.seeds, "--sets", str(args.sets)] + (["--dists", *args.dists] if args.dists else [])
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.task_timeout_s)
            tail, rc = (proc.stdout + proc.stderr)[-4000:], proc.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            tail, rc = out[-4000:] + f"\n(timed out after {args.task_timeout_s:.0f} s)", None
        sys.stdout.write("".join(line + "\n" for line in tail.splitlines() if line.startswith(task_id)))
        rows = json.loads(part.read_text())["rows"] if part.is_file() else []
        if rc != 0:
            rows.append({"task": task_id, "error": f"the audit process ended with {rc}:\n{tail}"})
        return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="*")
    ap.add_argument("--workloads", nargs="*", help="only these workloads (default: every catalog workload)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--seeds", help="many draws: N evaluator seeds from --seed, or A:B (seeds A to B-1); each draws "
                                    "its first timed rotation's --sets input sets as the evaluator does")
    ap.add_argument("--sets", type=int, default=4, help="with --seeds: input sets per rotation (the evaluator "
                                                        "takes 2-4 as GPU memory allows; 4 for the GEMMs on an H200)")
    ap.add_argument("--dists", nargs="*", help="with --seeds: only the sets of these distributions")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--no-isolate", dest="isolate", action="store_false",
                    help="audit every task in this process (default: one subprocess per task, so an illegal memory "
                         "access, which leaves the CUDA context unusable, costs one task and not the run)")
    ap.add_argument("--task-timeout-s", type=float, default=300.0)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: the smoke workloads under TRITON_INTERPRET=1 (a check of this script, not an audit)")
    args = ap.parse_args()
    seeds = parse_seeds(args.seeds, args.seed) if args.seeds else None
    gpu = gpu_info(0) if args.device == "cuda" else {"name": "cpu", "driver": None}
    if gpu is None:
        print("no CUDA GPU visible; this audit needs one (or --device cpu for the smoke workloads)", file=sys.stderr)
        return 2
    slug = "h200" if "H200" in gpu["name"] else gpu["name"].lower().replace(" ", "-")
    out_path = args.out or ROOT / "benchmarks" / "data" / f"tolerance_audit_{slug}.json"
    t_start = time.monotonic()
    rows: list[dict] = []
    last_write = [0.0]

    def report(complete: bool, now: list[dict] | None = None) -> dict:
        done = rows if now is None else now
        out = {"command": " ".join([Path(sys.executable).name, *sys.argv]),
               "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "gpu": gpu["name"], "driver": gpu["driver"],
               **versions(), "complete": complete, "total_wall_s": time.monotonic() - t_start}
        if seeds is not None:
            out["draws"] = {"seeds": [seeds.start, seeds.stop], "sets": args.sets, "dists": args.dists,
                            "salt": ROTATION_SALT, "tag": ROTATION_TAG}
            out["summary"] = summarize(done)
        return {**out, "rows": done}

    def save(new: list[dict], done: list[dict]) -> None:
        if time.monotonic() - last_write[0] >= (10.0 if seeds is not None else 0.0):  # 1000 draws: not 1000 writes
            write_json(out_path, report(False, done + new))
            last_write[0] = time.monotonic()

    todo = [(t, p) for t, p in references(ROOT, args.tasks) if p.name == "triton.py"]
    if args.tasks:  # in the order given (the ones most likely to fail first, when time is short)
        todo.sort(key=lambda tp: args.tasks.index(tp[0]))
    for task_id, path in todo:
        if args.isolate:
            rows += _audit_in_subprocess(task_id, args)
        else:
            done = list(rows)
            if seeds is not None:
                rows += audit_draws(task_id, path, seeds, args.sets, args.device, args.workloads, args.dists,
                                    on_row=lambda new: save(new, done))
            else:
                rows += audit_task(task_id, path, args.seed, args.device, on_row=lambda new: save(new, done),
                                   workloads=args.workloads)
        write_json(out_path, report(complete=False))
    write_json(out_path, report(complete=True))
    bad = [r for r in rows if "error" in r or any(not x["ok"] for x in r.get("results", []))]
    print(f"wrote {out_path}: {len(rows)} draws, {len(bad)} with a failure ({time.monotonic() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

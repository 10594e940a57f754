"""Derived lower bounds where the roofline floor is out of reach (issue 20, point 2): topk, histogram, spmv_csr and
selective_scan. Each of these tasks' cost models (``cost.derived_floor`` in tasks/<id>/task.yaml) names the
resources a kernel built on the guidance's algorithm cannot avoid, with a count per workload; this script
measures the rate of each resource on the GPU with a Triton microbenchmark and writes, per task x workload, both
floors: the catalog's roofline floor (runner/roofline.py) and ``max(roofline floor, max_i count_i / rate_i)``.

    python benchmarks/floor_microbench.py                  # on a GPU: writes benchmarks/data/floors_<gpu>.json
    python benchmarks/floor_microbench.py --out /tmp/floors_h200.json --tasks histogram
    python benchmarks/floor_microbench.py --smoke          # CPU: every kernel once under TRITON_INTERPRET=1

The primitives (one kernel each; the rate of each is measured with the workload's own configuration):

- ``two_pass``: each program reads its rows twice (a sum, then a count above the mean), on a persistent grid of
  P programs so that P rows are in flight; the best P of a few (P x row bytes below and above L2) gives the
  two-pass read rate of the workload's [rows, cols] shape (topk's radix histogram pass + compaction pass).
- ``histogram``: tl.histogram over keys replayed from an L2-resident table drawn from the workload's distribution,
  private per program, merged with one relaxed atomic per bin; ``atomics``: one relaxed tl.atomic_add (RED) per
  key into global counters, same keys. The faster of the two is the counting rate.
- ``gather``: an int32 index stream and a 4-byte load at each index (a dependent gather), on the workload's own
  column indices (spmv_csr's input maker) and a table of N floats.
- ``scan_step``: the minimal selective-scan step body on register-resident chains (dt update, FMUL, EX2, FMUL,
  FMA, FMA), enough chains to fill the GPU; ``scan_latency`` times one warp's dependent chains (informational).
- ``fma_issue``: independent fp32 FMA chains at full occupancy (the lane-op issue rate); ``fma_latency``: one
  dependent chain per lane of one warp.

Every rate comes from ``triton.testing.do_bench`` (median ms). On a machine without CUDA the script refuses,
unless ``--smoke``, which runs each kernel once on tiny sizes in the interpreter and checks its result against a
NumPy computation (no timing, no JSON).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__" and "--smoke" in sys.argv[1:]:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: the interpreter is picked at import

import numpy as np
import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from d2kgrade.io import write_json  # noqa: E402
from d2kgrade.schema import Task, Workload  # noqa: E402
from runner.direct import load_reference  # noqa: E402
from runner.evaluate import gpu_info, load_task  # noqa: E402
from runner.inputs import WorkloadSpec, make_inputs  # noqa: E402

TASKS = ("topk", "histogram", "spmv_csr", "selective_scan")
LOG2E = 1.4426950408889634
KEY_TABLE = 1 << 16        # replayed keys: 256 KB of int32, L2-resident, so the count rate excludes HBM
HIST_BLOCK = 4096          # keys per tile: 16 per thread at 8 warps
MAX_COUNTED_KEYS = 1 << 28  # keys per histogram/atomics launch (the catalog's largest N)
CHAIN_STEPS = 4096         # recurrence steps per chain in the scan and FMA kernels


# ------------------------------------------------------------------------------------------------- kernels


@triton.jit
def _two_pass_kernel(x_ptr, out_ptr, R, C, BLOCK: tl.constexpr):
    """Rows pid, pid + P, ...: pass 1 sums the row (evict_last, so pass 2 can hit L2), pass 2 re-reads it and
    counts the values above the row mean. Moves 2 * C * elt bytes per row through L2, C * elt from HBM at best."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for row in range(pid, R, nprog):
        base = x_ptr + tl.cast(row, tl.int64) * C
        acc = tl.zeros([BLOCK], tl.float32)
        for off in range(0, C, BLOCK):
            offs = off + tl.arange(0, BLOCK)
            acc += tl.load(base + offs, mask=offs < C, other=0.0, eviction_policy="evict_last").to(tl.float32)
        mean = tl.sum(acc, 0) / C
        cnt = tl.zeros([BLOCK], tl.int32)
        for off in range(0, C, BLOCK):
            offs = off + tl.arange(0, BLOCK)
            v = tl.load(base + offs, mask=offs < C, other=0.0, eviction_policy="evict_first").to(tl.float32)
            cnt += ((v > mean) & (offs < C)).to(tl.int32)
        tl.store(out_ptr + row, tl.sum(cnt, 0))


@triton.jit
def _histogram_kernel(keys_ptr, out_ptr, T, tiles, NB: tl.constexpr, BLOCK: tl.constexpr):
    """Tiles pid, pid + P, ... of keys replayed from a T-key table (tile t reads keys[(t*BLOCK) % T:][:BLOCK]);
    a private tl.histogram in registers across the tiles, merged with one relaxed atomic per bin."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([NB], tl.int32)
    for t in range(pid, tiles, nprog):
        offs = (t * BLOCK) % T + tl.arange(0, BLOCK)
        acc += tl.histogram(tl.load(keys_ptr + offs), NB)
    tl.atomic_add(out_ptr + tl.arange(0, NB), acc, sem="relaxed")


@triton.jit
def _atomics_kernel(keys_ptr, out_ptr, T, tiles, BLOCK: tl.constexpr):
    """The same replayed keys, one relaxed global atomic per key, its result unused (REDG.E.ADD in SASS)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    ones = tl.full([BLOCK], 1, tl.int32)
    for t in range(pid, tiles, nprog):
        offs = (t * BLOCK) % T + tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr + tl.load(keys_ptr + offs), ones, sem="relaxed")


@triton.jit
def _gather_kernel(idx_ptr, table_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Dependent gathers: idx streams in (evict_first), table[idx] is loaded (evict_last) and summed per program."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(pid * BLOCK, n, nprog * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        i = tl.load(idx_ptr + offs, mask=m, other=0, eviction_policy="evict_first")
        acc += tl.load(table_ptr + i, mask=m, other=0.0, eviction_policy="evict_last")
    tl.store(out_ptr + pid, tl.sum(acc, 0))


@triton.jit
def _scan_step_kernel(out_ptr, L, BLOCK: tl.constexpr):
    """One (batch, d, n) chain per element, in registers: per step dt += eps (standing in for the delta load),
    dA = exp2(dt * A2), h = dA * h + dt * Bu, y += C * h. A2 = -(n+1) * log2(e) as in the S4D init."""
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a2 = -1.4426950408889634 * (1.0 + (c % 16).to(tl.float32))
    bu = 0.001 * ((c % 7).to(tl.float32) - 3.0)
    cc = 1.0 + 0.01 * (c % 5).to(tl.float32)
    dt = 0.01 + 0.0001 * (c % 3).to(tl.float32)
    h = tl.zeros([BLOCK], tl.float32)
    y = tl.zeros([BLOCK], tl.float32)
    for _ in range(L):
        dt = dt + 1e-6
        h = tl.exp2(dt * a2) * h + dt * bu
        y += cc * h
    tl.store(out_ptr + c, y)


@triton.jit
def _fma_kernel(out_ptr, steps, a, b, BLOCK: tl.constexpr):
    """Each element runs h = h * a + b for 4 * steps dependent FMAs; the elements of a thread are independent."""
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    h = c.to(tl.float32) * 1e-6
    for _ in range(steps):
        h = h * a + b
        h = h * a + b
        h = h * a + b
        h = h * a + b
    tl.store(out_ptr + c, h)



# ------------------------------------------------------------------------------------------------- launchers


def two_pass(x: torch.Tensor, programs: int) -> torch.Tensor:
    """Per row of x [R, C], the number of values above the row mean, read in two passes by ``programs`` programs."""
    R, C = x.shape
    out = torch.empty(R, dtype=torch.int32, device=x.device)
    _two_pass_kernel[(min(programs, R),)](x, out, R, C, BLOCK=2048 if x.element_size() == 4 else 4096, num_warps=8)
    return out


def count_keys(table: torch.Tensor, nbins: int, n_keys: int, programs: int, mechanism: str,
               block: int = HIST_BLOCK, warps: int = 8) -> torch.Tensor:
    """Counts of n_keys keys replayed from ``table`` in tiles of ``block`` (the table size a multiple of block, n_keys
    a multiple of the table size), by ``histogram`` (private tl.histogram) or ``atomics`` (a global atomic per key)."""
    T = table.numel()
    tiles = n_keys // block
    nb2 = triton.next_power_of_2(nbins)
    out = torch.zeros(nb2 if mechanism == "histogram" else nbins, dtype=torch.int32, device=table.device)
    grid = (min(programs, tiles),)
    if mechanism == "histogram":
        _histogram_kernel[grid](table, out, T, tiles, NB=nb2, BLOCK=block, num_warps=warps)
    else:
        _atomics_kernel[grid](table, out, T, tiles, BLOCK=block, num_warps=warps)
    return out[:nbins]


def gather_sum(idx: torch.Tensor, table: torch.Tensor, programs: int) -> torch.Tensor:
    """Per program, the sum of table[idx] over its grid-strided blocks of idx."""
    block = 1024
    grid = max(1, min(programs, triton.cdiv(idx.numel(), block)))
    out = torch.empty(grid, dtype=torch.float32, device=idx.device)
    _gather_kernel[(grid,)](idx, table, out, idx.numel(), BLOCK=block, num_warps=4)
    return out


def scan_chains(chains: int, steps: int, block: int = 1024, warps: int = 4) -> torch.Tensor:
    """y of ``chains`` register-resident recurrence chains after ``steps`` steps (chains a multiple of block)."""
    out = torch.empty(chains, dtype=torch.float32, device=DEVICE)
    _scan_step_kernel[(chains // block,)](out, steps, BLOCK=block, num_warps=warps)
    return out


def fma_chains(elems: int, steps: int, a: float, b: float, block: int = 1024, warps: int = 4) -> torch.Tensor:
    """h after 4 * steps FMAs h = h * a + b on each of ``elems`` elements (a multiple of block)."""
    out = torch.empty(elems, dtype=torch.float32, device=DEVICE)
    _fma_kernel[(elems // block,)](out, steps, a, b, BLOCK=block, num_warps=warps)
    return out


DEVICE = "cuda"


# ------------------------------------------------------------------------------------------------- floors


def derived_floor_ms(roofline_ms: float, counts: dict[str, float], rates: dict[str, float]) -> dict[str, Any]:
    """``max(roofline floor, max_i count_i / rate_i)`` in ms, with each term and the binding one.

    Args:
        roofline_ms: the catalog's roofline floor of the workload (ms).
        counts: per resource, the units one call needs (``Task.derived_floor_counts``); zero counts are skipped.
        rates: per resource, units per second measured on the GPU for this workload.
    """
    terms = {r: 1e3 * c / rates[r] for r, c in counts.items() if c > 0}
    binding = max(terms, key=lambda r: terms[r]) if terms else "roofline"
    ms = max([roofline_ms, *terms.values()])
    return {"roofline_floor_ms": roofline_ms, "derived_floor_ms": ms,
            "binding": binding if ms > roofline_ms else "roofline", "terms_ms": terms,
            "ratio": ms / roofline_ms if roofline_ms > 0 else None}


def topk_digit_keys(n: int, dtype: torch.dtype, bits: int, *, generator: torch.Generator, device: str) -> torch.Tensor:
    """The top ``bits`` bits of order-preserving keys of N(0,1) values (bf16-rounded for bf16): the first radix
    digit of topk's catalog rows, int32 in [0, 2**bits)."""
    x = torch.randn(n, generator=generator, device=device).to(dtype).float()
    b = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    key = torch.where(b >= 0x80000000, b ^ 0xFFFFFFFF, b | 0x80000000)
    return (key >> (32 - bits)).to(torch.int32)


def rate_configs(task: Task, w: Workload) -> dict[str, list[tuple[str, tuple[Any, ...]]]]:
    """Per resource of the workload's derived floor (nonzero counts only), the primitive configurations whose
    best rate serves it: ``(primitive, key)``; the key names everything the rate depends on."""
    counts = task.derived_floor_counts(w)
    p = w.params
    out: dict[str, list[tuple[str, tuple[Any, ...]]]] = {}
    for resource, count in counts.items():
        if count <= 0:
            continue
        if resource == "lane_ops":
            out[resource] = [("fma_issue", ())]
        elif resource == "scan_steps":
            out[resource] = [("scan_step", ())]
        elif resource == "two_pass_bytes":
            out[resource] = [("two_pass", (int(p["B"]), int(p["V"]), w.dtype))]
        elif resource == "histogram_updates" and task.id == "topk":
            keys = ("topk_digits", w.dtype, 64)
            out[resource] = [("histogram", keys), ("atomics", keys)]
        elif resource == "histogram_updates":
            keys = ("dist", str(p["dist"]), int(p["NB"]))
            out[resource] = ([("histogram", keys)] if int(p["NB"]) <= 4096 else []) + [("atomics", keys)]
        elif resource == "gathers":
            out[resource] = [("gather", (task.id, w.name))]
        else:
            raise ValueError(f"{task.id}/{w.name}: no primitive measures {resource!r}")
    return out


# ------------------------------------------------------------------------------------------------- GPU timing


def _bench(fn: Any) -> float:
    return float(triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median"))


class Rates:
    """Measures each (primitive, key) once on the GPU: ``rate(...)`` in units per second, with a record per run."""

    def __init__(self, sms: int, bench: Any = None) -> None:
        self.sms = sms
        self.bench = bench or _bench  # --smoke passes one that runs the kernel once and returns 1 ms
        self.records: list[dict[str, Any]] = []
        self._cache: dict[tuple[str, tuple[Any, ...]], float] = {}
        self._gen = torch.Generator(device=DEVICE)
        self._gen.manual_seed(0)

    def rate(self, primitive: str, key: tuple[Any, ...]) -> float:
        if (primitive, key) not in self._cache:
            value, unit, extra = getattr(self, "_" + primitive)(*key)
            self._cache[(primitive, key)] = value
            self.records.append({"primitive": primitive, "config": list(key), "rate": value, "unit": unit, **extra})
        return self._cache[(primitive, key)]

    def _two_pass(self, rows: int, cols: int, dtype: str) -> tuple[float, str, dict[str, Any]]:
        x = torch.randn(rows, cols, generator=self._gen, device=DEVICE).to(getattr(torch, _TORCH[dtype]))
        per_p = {}
        for programs in sorted({max(1, self.sms // 2), self.sms, 2 * self.sms, rows}):
            per_p[programs] = self.bench(lambda: two_pass(x, programs))
        best = min(per_p, key=lambda k: per_p[k])
        return 2 * x.numel() * x.element_size() / (per_p[best] / 1e3), "bytes/s", {
            "ms_by_programs": per_p, "best_programs": best, "row_bytes": cols * x.element_size()}

    def _keys(self, kind: str, what: str, nbins: int) -> torch.Tensor:
        if kind == "topk_digits":
            return topk_digit_keys(KEY_TABLE, getattr(torch, _TORCH[what]), int(math.log2(nbins)),
                                   generator=self._gen, device=DEVICE)
        draw = load_reference(ROOT / "tasks" / "histogram").draw_keys
        return draw(what, KEY_TABLE, nbins, generator=self._gen, device=DEVICE)  # type: ignore[no-any-return]

    def _count(self, mechanism: str, kind: str, what: str, nbins: int) -> tuple[float, str, dict[str, Any]]:
        table = self._keys(kind, what, nbins)
        n = MAX_COUNTED_KEYS
        # The best of a few grids and warp counts, so that the rate is the mechanism's, not one launch's.
        runs = {f"{m}x{w}": self.bench(lambda: count_keys(table, nbins, n, m * self.sms, mechanism, warps=w))
                for m in (2, 8) for w in (4, 8)}
        best = min(runs, key=lambda k: runs[k])
        return n / (runs[best] / 1e3), "keys/s", {"ms_by_grid": runs, "best": best, "keys": n}

    def _histogram(self, kind: str, what: str, nbins: int) -> tuple[float, str, dict[str, Any]]:
        return self._count("histogram", kind, what, nbins)

    def _atomics(self, kind: str, what: str, nbins: int) -> tuple[float, str, dict[str, Any]]:
        return self._count("atomics", kind, what, nbins)

    def _gather(self, task_id: str, workload: str) -> tuple[float, str, dict[str, Any]]:
        task = load_task(ROOT, task_id)
        spec = WorkloadSpec.resolve(task, task.workload(workload))
        _, col_idx, _, x = make_inputs(load_reference(ROOT / "tasks" / task_id), spec, seed=0, device=DEVICE)
        runs = {m: self.bench(lambda: gather_sum(col_idx, x, m * self.sms)) for m in (4, 16)}
        best = min(runs, key=lambda k: runs[k])
        return col_idx.numel() / (runs[best] / 1e3), "gathers/s", {
            "ms_by_programs_per_sm": runs, "best": best, "gathers": col_idx.numel(), "table_bytes": x.numel() * 4}

    def _scan_step(self) -> tuple[float, str, dict[str, Any]]:
        chains = 64 * 1024 * self.sms // 4  # 16384 chains per SM: 8 per thread at 2048 threads
        ms = self.bench(lambda: scan_chains(chains, CHAIN_STEPS))
        lat_ms = self.bench(lambda: scan_chains(32, CHAIN_STEPS, block=32, warps=1))
        return chains * CHAIN_STEPS / (ms / 1e3), "steps/s", {
            "ms": ms, "chains": chains, "steps": CHAIN_STEPS, "latency_ns_per_step": 1e6 * lat_ms / CHAIN_STEPS}

    def _fma_issue(self) -> tuple[float, str, dict[str, Any]]:
        elems = 64 * 1024 * self.sms // 4
        ms = self.bench(lambda: fma_chains(elems, CHAIN_STEPS // 4, 0.999, 0.001))
        lat_ms = self.bench(lambda: fma_chains(32, CHAIN_STEPS // 4, 0.999, 0.001, block=32, warps=1))
        return elems * CHAIN_STEPS / (ms / 1e3), "fma/s", {
            "ms": ms, "elems": elems, "fmas_per_elem": CHAIN_STEPS, "latency_ns_per_fma": 1e6 * lat_ms / CHAIN_STEPS}


_TORCH = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def floors_for(task: Task, workloads: list[Workload] | None, rates: Rates, ceilings: dict[str, Any]) -> dict[str, Any]:
    """Both floors of each workload (default: the catalog's), measuring the rates they need through ``rates``."""
    from runner.roofline import floor_ms

    out = {}
    for w in task.workloads if workloads is None else workloads:
        best = {resource: max(rates.rate(prim, key) for prim, key in options)
                for resource, options in rate_configs(task, w).items()}
        roof = floor_ms(task.cost_of(w), ceilings, w.dtype)
        if roof is None:
            raise ValueError(f"implausible ceilings: {ceilings}")
        counts = task.derived_floor_counts(w)
        out[w.name] = {**derived_floor_ms(roof, counts, best), "counts": counts, "rates": best}
    return out


def measure(tasks: list[str]) -> dict[str, Any]:
    """Every primitive the tasks' derived floors need, then both floors per task x workload."""
    from runner.roofline import load_ceilings, measure_ceilings, save_ceilings

    gpu = gpu_info(0) or {"name": torch.cuda.get_device_name(0)}
    ceilings = load_ceilings(gpu["name"])
    if ceilings is None:
        ceilings = measure_ceilings()
        save_ceilings(gpu["name"], ceilings)
    rates = Rates(torch.cuda.get_device_properties(0).multi_processor_count)
    floors = {tid: floors_for(load_task(ROOT, tid), None, rates, ceilings) for tid in tasks}
    return {"gpu": gpu, "ceilings": ceilings, "primitives": rates.records, "floors": floors}


# ------------------------------------------------------------------------------------------------- smoke


def smoke() -> list[str]:
    """Run every kernel once on tiny sizes under the interpreter and check it against NumPy; return what passed.

    Raises:
        AssertionError: when a kernel's result differs from the NumPy computation.
    """
    global DEVICE
    DEVICE = "cpu"
    rng = np.random.default_rng(0)
    done = []

    # two_pass: small integers, so the fp32 row sums and means are exact.
    for dtype in (torch.float32, torch.bfloat16):
        xs = rng.integers(-8, 9, size=(5, 3001)).astype(np.float32)
        xs[3] = 3.0  # a constant row: every value equals the mean, none is above it
        got = two_pass(torch.from_numpy(xs).to(dtype), programs=2).numpy()
        want = (xs > xs.mean(axis=1, keepdims=True)).sum(axis=1)
        assert np.array_equal(got, want), (dtype, got, want)
    done.append("two_pass")

    # histogram / atomics: 12 tiles of 256 keys over a 1024-key table, 5 programs taking 2-3 tiles each; tile t reads
    # keys [(t * 256) % 1024, +256), so each quarter of the table is read by 3 tiles and every key counted 3 times.
    table = rng.integers(0, 200, size=1024).astype(np.int32)
    table[rng.random(1024) < 0.9] = 0  # the hot-bin distribution
    want = 3 * np.bincount(table, minlength=200)
    for mechanism in ("histogram", "atomics"):
        got = count_keys(torch.from_numpy(table), 200, 3 * 1024, programs=5, mechanism=mechanism,
                         block=256).numpy()
        assert np.array_equal(got, want), (mechanism, got[:8], want[:8])
    done += ["histogram", "atomics"]

    # topk digit keys: the order-preserving key's top bits are monotone in the value, and -0 sorts below +0.
    v = torch.tensor([-2.0, -0.5, -0.0, 0.0, 0.5, 2.0])
    key = v.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    key = torch.where(key >= 0x80000000, key ^ 0xFFFFFFFF, key | 0x80000000)
    assert torch.all(key[1:] > key[:-1])
    digits = topk_digit_keys(4096, torch.float32, 6, generator=torch.Generator().manual_seed(0), device="cpu")
    assert 0 <= int(digits.min()) and int(digits.max()) < 64
    done.append("topk_digits")

    # gather: integer-valued table, so the per-program fp32 sums are exact.
    tab = rng.integers(0, 4, size=283).astype(np.float32)
    idx = rng.integers(0, 283, size=1597).astype(np.int32)
    got = gather_sum(torch.from_numpy(idx), torch.from_numpy(tab), programs=2).numpy()
    assert got.sum() == tab[idx].sum(), (got.sum(), tab[idx].sum())
    done.append("gather")

    # scan_step: the same recurrence in float64.
    steps, chains = 100, 64
    got = scan_chains(chains, steps, block=32, warps=1).numpy()
    c = np.arange(chains)
    a2, bu = -LOG2E * (1.0 + c % 16), 0.001 * (c % 7 - 3.0)
    cc, dt = 1.0 + 0.01 * (c % 5), 0.01 + 0.0001 * (c % 3)
    h, y = np.zeros(chains), np.zeros(chains)
    for _ in range(steps):
        dt = dt + 1e-6
        h = np.exp2(dt * a2) * h + dt * bu
        y += cc * h
    assert np.allclose(got, y, rtol=1e-4, atol=1e-7), np.abs(got - y).max()
    done.append("scan_step")

    # fma: 4 * steps FMAs h = a h + b have the closed form a^n h0 + b (1 - a^n) / (1 - a).
    steps, a, b = 25, 0.999, 0.001
    got = fma_chains(64, steps, a, b, block=32, warps=1).numpy()
    n = 4 * steps
    h0 = np.arange(64) * 1e-6
    want = a ** n * h0 + b * (1 - a ** n) / (1 - a)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-7), np.abs(got - want).max()
    done.append("fma")

    # Every resource of every catalog workload has a primitive that measures it.
    for tid in TASKS:
        task = load_task(ROOT, tid)
        for w in task.workloads:
            configs = rate_configs(task, w)
            assert set(configs) == {r for r, n in task.derived_floor_counts(w).items() if n > 0}, (tid, w.name)
    done.append("rate_configs")

    # The GPU path's plumbing on the smoke workloads: every primitive through Rates (each launch run once and
    # charged 1 ms, so the rates mean nothing), then both floors; small tables and chains for the interpreter.
    global KEY_TABLE, MAX_COUNTED_KEYS, CHAIN_STEPS
    KEY_TABLE, MAX_COUNTED_KEYS, CHAIN_STEPS = 4096, 8192, 8
    rates = Rates(sms=1, bench=lambda fn: (fn(), 1.0)[1])
    ceilings = {"copy_bytes_per_s": 4e12, "matmul_flops_per_s": {"bf16": 7.5e14}, "mufu_per_s": 4e12}
    for tid in TASKS:
        task = load_task(ROOT, tid)
        f = floors_for(task, [task.smoke], rates, ceilings)["smoke"]
        assert f["derived_floor_ms"] >= f["roofline_floor_ms"] > 0 and f["rates"], (tid, f)
    rates.rate("two_pass", (5, 3001, "bf16"))
    rates.rate("histogram", ("topk_digits", "bf16", 64))
    assert {r["primitive"] for r in rates.records} == {
        "fma_issue", "histogram", "atomics", "gather", "scan_step", "two_pass"}, rates.records
    done.append("rates_plumbing")
    return done


# ------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="JSON path (default benchmarks/data/floors_<gpu>.json)")
    ap.add_argument("--tasks", nargs="*", default=list(TASKS), choices=TASKS)
    ap.add_argument("--smoke", action="store_true",
                    help="run every kernel once on tiny sizes under TRITON_INTERPRET=1 and check the results")
    args = ap.parse_args(argv)
    if args.smoke:
        if os.environ.get("TRITON_INTERPRET") != "1":
            print("floor_microbench: --smoke needs TRITON_INTERPRET=1 before triton is imported; run it as a script",
                  file=sys.stderr)
            return 2
        print("smoke ok: " + ", ".join(smoke()))
        return 0
    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        print("floor_microbench: no CUDA GPU here (or TRITON_INTERPRET=1): the rates are GPU measurements and "
              "cannot be taken on this machine; run it on the GPU, or pass --smoke to check the kernels",
              file=sys.stderr)
        return 2
    started = datetime.datetime.now(datetime.timezone.utc)
    result = measure(args.tasks)
    record = {
        "schema_version": 1,
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "date": started.isoformat(timespec="seconds"),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "cuda": torch.version.cuda, "triton": triton.__version__},
        **result,
        "wall_s": (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds(),
    }
    slug = "h200" if "H200" in str(result["gpu"].get("name")) else "gpu"
    out = args.out or ROOT / "benchmarks" / "data" / f"floors_{slug}.json"
    write_json(out, record)
    for tid, per in result["floors"].items():
        for wname, f in per.items():
            print(f"{tid:15s} {wname:24s} roofline {f['roofline_floor_ms']:.4f} ms  derived "
                  f"{f['derived_floor_ms']:.4f} ms  ({f['binding']}, x{f['ratio']:.2f})")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

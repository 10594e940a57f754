"""Roofline floors: the least time a workload can take on this GPU, from the task's cost model.

``floor = max(bytes / copy_bandwidth, flops / matmul_rate[compute dtype], mufu / mufu_rate)``. The ceilings are
measured once per GPU model and cached in ``<cache>/ceilings-<gpu>.json`` (``D2KGRADE_CACHE_DIR``, else
``$XDG_CACHE_HOME/d2kgrade``, else ``~/.cache/d2kgrade``):

- copy bandwidth: the best of 20 device-to-device copies of 1 GiB (bytes read + written / time);
- matmul rates: the best of 10 ``torch.mm`` of 8192^3 in bf16 and fp16, fp32 with TF32 allowed (an upper bound
  for any fp32 kernel), fp8 e4m3 through ``torch._scaled_mm`` and int8 through ``torch._int_mm`` where they run;
- MUFU: SMs x 16 special-function ops per clock x the maximum SM clock (Hopper's SFU rate; theoretical, so the
  floor stays a lower bound).

Every term uses the largest rate a kernel could reach, so the floor is a lower bound: flops of a memory-bound
task are divided by the tensor-core rate, not the CUDA-core one. Measured ceilings are what cuBLAS and a copy
reach, which a very good kernel can beat by a few percent; a time is ``rejected`` as impossible only under
``FLOOR_MARGIN`` of the floor. Ceilings can be overwritten by anything running as the same user, so
:func:`load_ceilings` rejects values outside physical bounds for any 2020s GPU.

This module is imported by the parent (no torch at import); :func:`measure_ceilings` imports torch itself.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FLOOR_MARGIN = 0.8
"""A median under ``FLOOR_MARGIN * floor`` is impossible: rejected (``below_roofline``). Measured on the H200
(benchmarks/data/references_h200.json): production kernels reach up to 1.064x the floor (cuDNN on vae_decoder_512, the
expert GEMM on down_proj_long_k: copy and cuBLAS rates are not the hardware's last percent), so the margin leaves
them ~18% of room while a kernel that skips work is still caught."""

# Upper physical bounds used to sanity-check a cached file (an H200 is ~4.8 TB/s and ~1 PFLOP/s dense bf16).
MAX_BANDWIDTH = 20e12
MAX_MATMUL = 10e15
MAX_MUFU = 1e14

MATMUL_KEY = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "fp64": "fp32", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8",
              "int8": "int8", "uint8": "int8", "int16": "int8", "int32": "int8", "int64": "int8", "bool": "int8"}
"""Which matmul ceiling bounds a workload of each dtype (integer work uses the int8 tensor-core rate)."""


def cache_dir() -> Path:
    """Where per-machine measurements are cached."""
    if os.environ.get("D2KGRADE_CACHE_DIR"):
        return Path(os.environ["D2KGRADE_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "d2kgrade"


def gpu_slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def ceilings_path(gpu_name: str) -> Path:
    return cache_dir() / f"ceilings-{gpu_slug(gpu_name)}.json"


def load_ceilings(gpu_name: str) -> dict[str, Any] | None:
    """Cached ceilings for this GPU model, or None if absent or implausible."""
    path = ceilings_path(gpu_name)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not plausible(data):
        log.warning("ignoring implausible ceilings in %s", path)
        return None
    return data  # type: ignore[no-any-return]


def plausible(data: Any) -> bool:
    """Whether a ceilings record is complete and physically possible."""
    try:
        bw = float(data["copy_bytes_per_s"])
        mm = {k: float(v) for k, v in data["matmul_flops_per_s"].items()}
        mufu = float(data["mufu_per_s"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    return 0 < bw < MAX_BANDWIDTH and all(0 < v < MAX_MATMUL for v in mm.values()) and "bf16" in mm and (
        0 < mufu < MAX_MUFU)


def save_ceilings(gpu_name: str, data: dict[str, Any]) -> Path | None:
    """Cache measured ceilings (atomic write); None if they are implausible or the cache is not writable."""
    if not plausible(data):
        return None
    from d2kgrade.io import write_json

    path = ceilings_path(gpu_name)
    try:
        write_json(path, data)
    except OSError as exc:
        log.warning("cannot cache ceilings at %s: %s", path, exc)
        return None
    return path


def floor_ms(cost: dict[str, float], ceilings: dict[str, Any], dtype: str) -> float | None:
    """The roofline floor of one call in milliseconds (None without ceilings)."""
    if not ceilings or not plausible(ceilings):
        return None
    mm = ceilings["matmul_flops_per_s"]
    rate = mm.get(MATMUL_KEY.get(dtype, "bf16")) or max(mm.values())
    terms = [cost.get("bytes", 0.0) / float(ceilings["copy_bytes_per_s"]), cost.get("flops", 0.0) / float(rate)]
    if cost.get("mufu"):
        terms.append(cost["mufu"] / float(ceilings["mufu_per_s"]))
    return 1e3 * max(terms)


def _max_sm_clock_hz() -> float:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=20, check=True).stdout.strip()
        return float(out.splitlines()[0]) * 1e6
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return 2.0e9  # above any datacenter GPU's boost clock, so the MUFU floor stays a lower bound


def measure_ceilings(device: Any = "cuda") -> dict[str, Any]:
    """Measure copy bandwidth and matmul rates on this GPU (about 10 s on an H200)."""
    import torch

    dev = torch.device(device)
    props = torch.cuda.get_device_properties(dev)

    def best_ms(fn: Any, reps: int) -> float:
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(reps):
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            best = min(best, start.elapsed_time(end))
        return best

    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=dev).fill_(1)
    b = torch.empty_like(a)
    copy_bw = 2 * n / (best_ms(lambda: b.copy_(a), 20) / 1e3)
    del a, b
    size = 8192
    flops = 2.0 * size ** 3
    rates: dict[str, float] = {}
    for key, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
        x = torch.randn(size, size, device=dev, dtype=dtype)
        y = torch.randn(size, size, device=dev, dtype=dtype)
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            rates[key] = flops / (best_ms(lambda: torch.mm(x, y), 10) / 1e3)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        del x, y
    try:
        x8 = torch.randn(size, size, device=dev).to(torch.float8_e4m3fn)
        y8 = torch.randn(size, size, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)
        rates["fp8"] = flops / (best_ms(lambda: torch._scaled_mm(x8, y8, one, one, out_dtype=torch.bfloat16), 10) / 1e3)
        del x8, y8
    except Exception as exc:  # noqa: BLE001 - an op this GPU lacks leaves that ceiling to the fallback below
        log.info("fp8 matmul not measured: %s", exc)
    try:
        xi = torch.randint(-8, 8, (size, size), device=dev, dtype=torch.int8)
        yi = torch.randint(-8, 8, (size, size), device=dev, dtype=torch.int8)
        rates["int8"] = flops / (best_ms(lambda: torch._int_mm(xi, yi), 10) / 1e3)
        del xi, yi
    except Exception as exc:  # noqa: BLE001
        log.info("int8 matmul not measured: %s", exc)
    # Where a rate could not be measured, 2x bf16 (the fp8/int8 tensor-core ratio on Hopper) keeps the floor low.
    estimated = [k for k in ("fp8", "int8") if k not in rates]
    for k in estimated:
        rates[k] = 2 * rates["bf16"]
    torch.cuda.empty_cache()
    clock = _max_sm_clock_hz()
    return {
        "gpu": props.name,
        "copy_bytes_per_s": copy_bw,
        "matmul_flops_per_s": rates,
        "mufu_per_s": props.multi_processor_count * 16 * clock,
        "estimated": estimated + ["mufu"],
        "sm_count": props.multi_processor_count,
        "max_sm_clock_hz": clock,
        "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "method": "best of 20 x 1 GiB copies; best of 10 x 8192^3 torch.mm per dtype (fp32 with TF32); "
                  "MUFU = SMs x 16/clk x max SM clock",
    }

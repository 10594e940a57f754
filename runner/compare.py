"""Compare outputs against the reference, elementwise and in full, with the task's tolerances.

A value passes when ``|out - ref| <= atol + rtol*|ref|``; NaN or Inf where the reference is finite never
passes (and a non-finite reference must be matched exactly). dtype, shape, device and the plain
``torch.Tensor`` type are checked first: tensor subclasses and lazy objects are mismatches.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from d2kgrade.dtypes import TORCH_NAMES

_CATALOG_NAME = {getattr(torch, v): k for k, v in TORCH_NAMES.items()}
_CHUNK = 1 << 26  # elements per float64 chunk: 512 MB of temporaries at most


@dataclass
class Mismatch:
    """Outcome of comparing one output tensor."""

    name: str
    ok: bool
    reason: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    tol_ratio: float = 0.0
    n_bad: int = 0
    n_total: int = 0
    first_bad_index: list[int] | None = None
    got: float | None = None
    expected: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def catalog_dtype(dtype: torch.dtype) -> str:
    return _CATALOG_NAME.get(dtype, str(dtype))


def compare_tensor(name: str, out: Any, ref: torch.Tensor, tol: tuple[float, float], *,
                   expect_device: torch.device | None = None) -> Mismatch:
    """Compare one output with its reference (already in the output's storage dtype or wider)."""
    if type(out) is not torch.Tensor:
        return Mismatch(name, False, f"expected a plain torch.Tensor, got {type(out).__module__}.{type(out).__name__}")
    n = ref.numel()
    if tuple(out.shape) != tuple(ref.shape):
        return Mismatch(name, False, f"shape {tuple(out.shape)}, expected {tuple(ref.shape)}", n_total=n)
    if expect_device is not None and out.device.type != expect_device.type:
        return Mismatch(name, False, f"on {out.device}, expected {expect_device}", n_total=n)
    if out.is_meta or out.layout != torch.strided:
        return Mismatch(name, False, "a meta or sparse tensor holds no comparable data", n_total=n)
    atol, rtol = tol
    # Computed where the output lives (a 4 GB GEMM output is not copied to the host), in float64 chunks so the
    # temporaries stay bounded.
    dev = out.device
    o_flat = out.detach().reshape(-1)
    r_flat = ref.detach().to(dev).reshape(-1)
    n_bad, max_abs, max_rel, ratio, first = 0, 0.0, 0.0, 0.0, -1
    for start in range(0, n, _CHUNK):
        oc = o_flat[start:start + _CHUNK]
        oc = oc.double() if oc.dtype != torch.bool else oc.to(torch.float64)
        rc = r_flat[start:start + _CHUNK].to(torch.float64)
        diff = (oc - rc).abs()
        finite_ref = torch.isfinite(rc)
        good = torch.where(finite_ref, torch.isfinite(oc) & (diff <= atol + rtol * rc.abs()),
                           (oc == rc) | (torch.isnan(oc) & torch.isnan(rc)))
        bad = ~good
        nb = int(bad.sum())
        if nb and first < 0:
            first = start + int(torch.nonzero(bad)[0, 0])
        n_bad += nb
        fin = finite_ref & torch.isfinite(oc)
        if bool(fin.any()):
            max_abs = max(max_abs, float(diff[fin].max()))
            max_rel = max(max_rel, float((diff / rc.abs().clamp_min(1e-30))[fin].max()))
            if atol > 0 or rtol > 0:
                ratio = max(ratio, float((diff / (atol + rtol * rc.abs()))[fin].max()))
            elif bool((diff[fin] > 0).any()):
                ratio = float("inf")
    if n_bad == 0:
        return Mismatch(name, True, "", max_abs, max_rel, ratio, 0, n)
    idx = _unravel(first, tuple(ref.shape))
    got = float(o_flat[first].double())
    exp = float(r_flat[first].double())
    return Mismatch(name, False, f"{n_bad} of {n} elements out of tolerance (atol={atol:g}, rtol={rtol:g}); "
                    f"first at {idx}: got {got!r}, expected {exp!r}", max_abs, max_rel, ratio, n_bad, n, idx, got, exp)


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    idx = []
    for dim in reversed(shape):
        idx.append(flat % dim if dim else 0)
        flat //= max(dim, 1)
    return list(reversed(idx))


def check_dtype(name: str, out: Any, expected: torch.dtype) -> Mismatch | None:
    """A mismatch if ``out`` is not a tensor of dtype ``expected``."""
    if isinstance(out, torch.Tensor) and out.dtype != expected:
        return Mismatch(name, False, f"dtype {catalog_dtype(out.dtype)}, expected {catalog_dtype(expected)}")
    return None

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


@dataclass
class Mismatch:
    """Outcome of comparing one output tensor."""

    name: str
    ok: bool
    reason: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
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
    atol, rtol = tol
    o = out.detach().to("cpu", torch.float64) if out.dtype != torch.bool else out.detach().cpu().double()
    r = ref.detach().to("cpu", torch.float64)
    diff = (o - r).abs()
    finite_ref = torch.isfinite(r)
    bound = atol + rtol * r.abs()
    good = torch.where(finite_ref, torch.isfinite(o) & (diff <= bound), (o == r) | (torch.isnan(o) & torch.isnan(r)))
    n_bad = int((~good).sum())
    fin = finite_ref & torch.isfinite(o)
    max_abs = float(diff[fin].max()) if bool(fin.any()) else 0.0
    rel = diff / r.abs().clamp_min(1e-30)
    max_rel = float(rel[fin].max()) if bool(fin.any()) else 0.0
    if n_bad == 0:
        return Mismatch(name, True, "", max_abs, max_rel, 0, n)
    idx = [int(i) for i in torch.nonzero(~good)[0].tolist()] if o.dim() else []
    got = float(o[tuple(idx)]) if o.dim() else float(o)
    exp = float(r[tuple(idx)]) if r.dim() else float(r)
    return Mismatch(name, False, f"{n_bad} of {n} elements out of tolerance (atol={atol:g}, rtol={rtol:g}); "
                    f"first at {idx}: got {got!r}, expected {exp!r}", max_abs, max_rel, n_bad, n, idx, got, exp)


def check_dtype(name: str, out: Any, expected: torch.dtype) -> Mismatch | None:
    """A mismatch if ``out`` is not a tensor of dtype ``expected``."""
    if isinstance(out, torch.Tensor) and out.dtype != expected:
        return Mismatch(name, False, f"dtype {catalog_dtype(out.dtype)}, expected {catalog_dtype(expected)}")
    return None

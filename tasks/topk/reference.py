"""topk: exact semantics, the index-validity check for tied values, the PyTorch baseline, and the input maker.

values, indices = torch.topk(x, k, dim=-1, largest=True, sorted=True) for x [B, V]. ``reference`` returns the
canonical answer (among equal values, lower indices first); ``values`` are compared with it exactly, while
``indices`` are validated by ``check`` (any distinct in-range indices that point at the reference's values pass),
because torch.topk, radix selection and sorting networks legitimately pick different elements among ties.
"""

from __future__ import annotations

import torch

# "normal" is the catalog's N(0,1) draw (rounded to bf16 for bf16 workloads: heavy ties in the tail).
# "coarse_ties" rounds N(0,1) * 2 to multiples of 0.25, so dozens of elements tie at the k-th value and whole
# runs of the top-k share a value: a kernel that takes too many or too few tied elements, or returns the same
# index twice for tied values, fails; zero, constant and echoed outputs fail both.
# "negative" shifts each row by -U(2, 8): the k largest are negative in most rows and cross zero in a few, so
# comparing the raw float bits as signed integers (which orders negative floats backwards) instead of the
# order-preserving keys picks the wrong elements.
DISTRIBUTIONS = ("normal", "coarse_ties", "negative")

CHECKED_OUTPUTS = ("indices",)
"""Outputs validated by :func:`check` instead of an elementwise comparison with ``reference``."""


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    B, V = shapes["x"]
    x = torch.randn(B, V, generator=generator, device=device)
    if dist == "coarse_ties":
        x = torch.round(x * 8.0) / 4.0
    elif dist == "negative":
        x = x - (2.0 + 6.0 * torch.rand(B, 1, generator=generator, device=device))
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    x = x.to(dtypes["x"])
    return (x.masked_fill_(x == 0, 0.0),)  # x == 0 also matches -0.0: the semantics promise no -0


def reference(x, *, k):
    """Canonical top-k: descending values, equal values in increasing index order (a stable descending sort of
    the float64 values, which order exactly like x)."""
    order = torch.sort(x.double(), dim=-1, descending=True, stable=True).indices[:, :k]
    return x.gather(-1, order), order


def check(inputs, outputs, expected, scalars) -> list[str]:
    """Validate ``indices`` without requiring the reference's choice among ties.

    Passes when the indices are int64, in [0, V), distinct within each row, and x[b, indices[b, j]] equals the
    reference's values[b, j] exactly for every j. Returns the problems found (empty: valid).
    """
    (x,) = inputs
    _values, indices = outputs
    want_values, _ = expected
    V = x.shape[-1]
    problems: list[str] = []
    if indices.dtype != torch.int64:
        return [f"indices are {indices.dtype}, expected int64"]
    out_of_range = (indices < 0) | (indices >= V)
    if bool(out_of_range.any()):
        b, j = (int(i) for i in torch.nonzero(out_of_range)[0])
        return [f"{int(out_of_range.sum())} indices outside [0, {V}); first at [{b}, {j}]: {int(indices[b, j])}"]
    ordered = indices.sort(dim=-1).values
    dup = ordered[:, 1:] == ordered[:, :-1]
    if bool(dup.any()):
        rows = torch.nonzero(dup.any(dim=-1)).flatten()
        problems.append(f"{rows.numel()} rows repeat an index; first row {int(rows[0])}")
    picked = x.gather(-1, indices)
    wrong = picked.double() != want_values.double()
    if bool(wrong.any()):
        b, j = (int(i) for i in torch.nonzero(wrong)[0])
        problems.append(f"{int(wrong.sum())} indices point at a value other than the k largest; first at "
                        f"[{b}, {j}]: x[{b}, {int(indices[b, j])}] = {float(picked[b, j])!r}, "
                        f"expected {float(want_values[b, j])!r}")
    return problems


def baseline(x, *, k):
    """torch.topk (CUDA: radix select with per-block candidate queues, then a sort of the k survivors)."""
    values, indices = torch.topk(x, k, dim=-1, largest=True, sorted=True)
    return values, indices

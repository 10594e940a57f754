"""grouped_gemm_moe: exact semantics (float64), the PyTorch baseline, and the seeded input maker.

For each expert e: Y[o_e:o_{e+1}] = X[o_e:o_{e+1}] @ W[e]^T, X [T, K] rows sorted by expert, W [E, N, K],
expert_offsets o [E+1] int32 (o_0 = 0, o_E = T, empty experts allowed).
"""

from __future__ import annotations

import math

import torch

# "normal" is the catalog's: each row draws its expert i.i.d. from the workload's routing (uniform, or
#   P(e) ~ (e+1)^-1.2 for zipf_1.2), X ~ N(0,1), W ~ N(0,1)/sqrt(K), so Y ~ N(0,1). Every row's answer depends on
#   which expert's weights it meets: a row given to its neighbour expert (a boundary off by one) is an O(1) error.
# "empty_experts" routes with the same law but never to a third of the experts (always including the last one and
#   one in the middle), so several experts own zero rows, some back to back: a kernel that assumes every expert has
#   a tile, reads o[e+1] - o[e] as at least one row, or stops at the first empty expert, fails.
# "cancelling" makes the second half of K undo the first in every expert: X = [X1, X1], W[e] = [16 W1, -16 W1 + D]
#   (X1, W1, D as in "normal"). The running K sum climbs to ~11 at K/2 while Y stays ~N(0, 1/2), so a 16-bit
#   accumulator carried across K tiles misses the 1e-2 + 1e-2|Y| bound (5e-3 for fp16); fp32 accumulation does not.
DISTRIBUTIONS = ("normal", "empty_experts", "cancelling")


def routing_probs(E: int, routing: str, device) -> torch.Tensor:
    """P(expert) for a routing name: ``uniform`` or ``zipf_<alpha>`` (expert 0 hottest)."""
    if routing == "uniform":
        return torch.full((E,), 1.0 / E, dtype=torch.float64, device=device)
    if routing.startswith("zipf_"):
        w = torch.arange(1, E + 1, dtype=torch.float64, device=device) ** -float(routing[len("zipf_"):])
        return w / w.sum()
    raise ValueError(f"unknown routing {routing!r}; expected 'uniform' or 'zipf_<alpha>'")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    T, K = shapes["X"]
    E, N, _ = shapes["W"]
    probs = routing_probs(E, str(params.get("routing", "uniform")), device)
    if dist == "empty_experts":
        empty = torch.rand(E, generator=generator, device=device) < 1.0 / 3.0
        empty[E - 1] = True
        empty[E // 2] = True
        if bool(empty.all()):
            empty[0] = False
        probs = torch.where(empty, torch.zeros_like(probs), probs)
    elif dist not in ("normal", "cancelling"):
        raise ValueError(f"unknown distribution {dist!r}")
    experts = torch.multinomial(probs.float(), T, replacement=True, generator=generator) if T else \
        torch.zeros(0, dtype=torch.int64, device=device)
    counts = torch.bincount(experts, minlength=E)
    offsets = torch.zeros(E + 1, dtype=torch.int64, device=device)
    torch.cumsum(counts, 0, out=offsets[1:])
    f32 = dict(generator=generator, device=device, dtype=torch.float32)
    X = torch.randn(T, K, **f32)
    h = K // 2
    if dist == "cancelling":
        X[:, h:2 * h] = X[:, :h]
    X = X.to(dtypes["X"])
    W = torch.empty((E, N, K), dtype=dtypes["W"], device=device)
    for e in range(E):  # one expert at a time: no [E, N, K] fp32 temporary (1.9 GB at mixtral_prefill)
        We = torch.randn(N, K, **f32) / math.sqrt(K)
        if dist == "cancelling":
            We[:, :h] *= 16.0
            We[:, h:2 * h] -= We[:, :h]
        W[e] = We.to(dtypes["W"])
    return X, W, offsets.to(torch.int32)


def reference(X, W, expert_offsets):
    """float64 product of each expert's rows with its weights, one expert at a time."""
    Y = torch.empty((X.shape[0], W.shape[1]), dtype=X.dtype, device=X.device)
    o = expert_offsets.tolist()
    for e in range(W.shape[0]):
        if o[e + 1] > o[e]:
            Y[o[e]:o[e + 1]] = (X[o[e]:o[e + 1]].double() @ W[e].double().T).to(X.dtype)
    return Y


def baseline(X, W, expert_offsets):
    """torch._grouped_mm (one CUTLASS grouped-GEMM launch on sm_90, offsets read on the device) where it exists
    and the rows are 16-byte aligned (every catalog workload); otherwise one F.linear per non-empty expert
    (offsets copied to the host)."""
    if hasattr(torch, "_grouped_mm") and (X.shape[1] * X.element_size()) % 16 == 0:
        return baseline_grouped_mm(X, W, expert_offsets)
    return baseline_per_expert_cublas(X, W, expert_offsets)


# ------------------------------------------------------------------------------------- baseline candidates
# Read in FlashInfer's docs (flashinfer.gemm.SegmentGEMMWrapper(float_workspace_buffer, backend="auto").run(x,
# weights, batch_size, weight_column_major, seg_lens=None, seg_indptr=None, weight_indices=None): y[i] = x[i] @ W[i],
# with weight_column_major=True meaning W[i] is [d_out, d_in], i.e. x @ W[i]^T; `forward` in older releases).


def baseline_grouped_mm(X, W, expert_offsets):
    """torch._grouped_mm (one CUTLASS grouped-GEMM launch, offsets read on the device); raises where it is
    missing or the rows are not 16-byte aligned."""
    return torch._grouped_mm(X, W.transpose(-2, -1), offs=expert_offsets[1:], out_dtype=X.dtype)


def baseline_per_expert_cublas(X, W, expert_offsets):
    """One cuBLAS F.linear per non-empty expert (offsets copied to the host): what a plain loop gets."""
    Y = torch.empty((X.shape[0], W.shape[1]), dtype=X.dtype, device=X.device)
    o = expert_offsets.tolist()
    for e in range(W.shape[0]):
        if o[e + 1] > o[e]:
            Y[o[e]:o[e + 1]] = torch.nn.functional.linear(X[o[e]:o[e + 1]], W[e])
    return Y


_SEGMENT_GEMM: dict[str, object] = {}  # one wrapper (and its 128 MB workspace) per device


def baseline_flashinfer(X, W, expert_offsets):
    """FlashInfer's segment GEMM (CUTLASS grouped GEMM) over the expert segments given by expert_offsets."""
    from flashinfer.gemm import SegmentGEMMWrapper

    key = str(X.device)
    if key not in _SEGMENT_GEMM:
        _SEGMENT_GEMM[key] = SegmentGEMMWrapper(torch.empty(128 << 20, dtype=torch.int8, device=X.device))
    wrapper = _SEGMENT_GEMM[key]
    run = getattr(wrapper, "run", None) or wrapper.forward
    return run(X, W, W.shape[0], True, seg_indptr=expert_offsets.to(torch.int64))

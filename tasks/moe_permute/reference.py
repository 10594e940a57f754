"""moe_permute: exact semantics (stable sorts, float64 weights), the PyTorch baseline, and the seeded input maker.

Per token the top-k experts by logit (ties to the lower expert index), weights = softmax over the k selected
logits, then the T*k (token, slot) pairs ordered stably by expert: expert_offsets [E+1], X_perm [T*k, H] and
row_id_map [T, k] (the destination row of each pair). Every output is unique, so all are compared exactly
(weights within fp32 rounding).
"""

from __future__ import annotations

import torch

# "normal" is the catalog's draw: logits ~ N(0,1) (+ hot_bias on the first hot_experts experts), X ~ N(0,1).
# "quantized_ties" rounds the logits to multiples of 0.25, so most tokens have tied logits inside and at the
# edge of their top-k: a kernel that breaks ties toward the higher index, or whose permutation is not stable,
# fails; zero, constant and echoed outputs fail both.
DISTRIBUTIONS = ("normal", "quantized_ties")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    T, E = shapes["logits"]
    H = shapes["X"][1]
    logits = torch.randn(T, E, generator=generator, device=device)
    hot, bias = int(params.get("hot_experts", 0)), float(params.get("hot_bias", 0.0))
    if hot:
        logits[:, :hot] += bias
    if dist == "quantized_ties":
        logits = torch.round(logits * 4.0) / 4.0
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    X = torch.randn(T, H, generator=generator, device=device)
    return logits.to(dtypes["logits"]), X.to(dtypes["X"])


def reference(logits, X, *, k):
    T, E = logits.shape
    ids = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k]
    weights = torch.softmax(logits.double().gather(-1, ids), dim=-1).float()
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    row_id_map = torch.empty(T * k, dtype=torch.int64, device=logits.device)
    row_id_map[order] = torch.arange(T * k, device=logits.device)
    offsets = torch.zeros(E + 1, dtype=torch.int64, device=logits.device)
    offsets[1:] = torch.cumsum(torch.bincount(flat, minlength=E), dim=0)
    return (ids.to(torch.int32), weights, offsets.to(torch.int32), row_id_map.view(T, k).to(torch.int32),
            X[order // k])


def baseline(logits, X, *, k):
    """torch.topk routing and a softmax over the k values, then a stable argsort of the T*k expert ids,
    index_select of the rows, a scatter for the inverse map and bincount + cumsum for the offsets. torch.topk does
    not promise the lower index among tied logits, so this misses the semantics on tied draws."""
    vals, ids = torch.topk(logits, k, dim=-1)
    return _permute(ids, torch.softmax(vals, dim=-1), X, logits.shape[1])


def baseline_eager_stable(logits, X, *, k):
    """The eager expression that meets the tie rule: a stable descending sort of each row of logits (ties to the
    lower expert), then the same softmax and permutation as ``baseline``."""
    ids = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k]
    return _permute(ids, torch.softmax(logits.gather(-1, ids), dim=-1), X, logits.shape[1])


def _permute(ids, weights, X, E):
    """Stable expert-major permutation of the (token, slot) pairs: argsort, index_select, inverse-map scatter,
    bincount + cumsum offsets."""
    T, k = ids.shape
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    X_perm = X.index_select(0, order // k)
    row_id_map = torch.empty(T * k, dtype=torch.int32, device=X.device)
    row_id_map.scatter_(0, order, torch.arange(T * k, dtype=torch.int32, device=X.device))
    offsets = torch.zeros(E + 1, dtype=torch.int32, device=X.device)
    offsets[1:] = torch.cumsum(torch.bincount(flat, minlength=E), dim=0)
    return ids.to(torch.int32), weights, offsets, row_id_map.view(T, k), X_perm

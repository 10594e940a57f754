"""embedding_bag: exact semantics (float64), the PyTorch baseline, and the seeded input maker.

out[b] = sum_{i in [offsets[b], offsets[b+1])} psw[i] * table[indices[i]] (fp32 [B, D]; an empty bag gives zeros).
The workload's ``dist`` parameter gives the bag structure and the index law (parsed by ``bag_lengths`` and
``draw_indices``); the input distribution (``DISTRIBUTIONS``) picks the catalog's values or a harder draw.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

# "catalog": table, psw ~ N(0,1) and the workload's bags and indices. "repeats_positive": the same bags, but a
# third of each bag's lookups repeat the bag's first row, psw ~ U(0.5, 2) and the table is shifted by +1, so a
# kernel that drops repeated indices, ignores the weights or echoes a row fails (as on the catalog draw), and
# outputs are far from zero.
DISTRIBUTIONS = ("catalog", "repeats_positive")

_PER_BAG = re.compile(r"^(\d+) per bag, uniform indices$")
_SKEWED = re.compile(r"^(\d+) bags of (\d+) lookups \+ (\d+) bags sharing the rest \(see semantics\), "
                     r"Zipf\(([0-9.]+)\) indices$")
_CHUNK = 1 << 19  # reference: lookups per float64 gather (256 MB of temporaries at D = 128)


def bag_lengths(dist: str, B: int, nnz: int, *, generator, device) -> torch.Tensor:
    """int64 [B] bag lengths summing to nnz, as the workload's ``dist`` string says."""
    if m := _PER_BAG.match(dist):
        per = int(m.group(1))
        if per * B != nnz:
            raise ValueError(f"{per} per bag x {B} bags != nnz = {nnz}")
        return torch.full((B,), per, dtype=torch.int64, device=device)
    if m := _SKEWED.match(dist):
        n_big, big, n_rest = int(m.group(1)), int(m.group(2)), int(m.group(3))
        rest = nnz - n_big * big
        if n_big + n_rest != B or rest < 0:
            raise ValueError(f"{dist!r} does not describe {B} bags holding {nnz} lookups")
        # The other bags split the rest at n_rest - 1 cut points drawn uniformly (with replacement) from 0..rest.
        cuts = torch.randint(0, rest + 1, (n_rest - 1,), generator=generator, device=device).sort().values
        edges = torch.cat([torch.zeros(1, dtype=torch.int64, device=device), cuts,
                           torch.full((1,), rest, dtype=torch.int64, device=device)])
        lengths = torch.empty(B, dtype=torch.int64, device=device)
        is_big = torch.zeros(B, dtype=torch.bool, device=device)
        is_big[torch.randperm(B, generator=generator, device=device)[:n_big]] = True
        lengths[is_big] = big
        lengths[~is_big] = edges.diff()
        return lengths
    raise ValueError(f"unknown bag structure {dist!r}")


def zipf_weights(V: int, s: float, device) -> torch.Tensor:
    """float64 [V]: P(rank r) for r = 1..V, proportional to r^-s."""
    w = torch.arange(1, V + 1, dtype=torch.float64, device=device).pow_(-s)
    return w.div_(w.sum())


def expected_distinct_rows(V: int, nnz: int, s: float) -> float:
    """E[#distinct rows] among nnz Zipf(s) draws over V rows: sum_r 1 - (1 - p_r)^nnz (the cost's rows_read)."""
    p = zipf_weights(V, s, "cpu")
    return float((1.0 - torch.exp(nnz * torch.log1p(-p))).sum())


def draw_indices(dist: str, V: int, nnz: int, *, generator, device) -> torch.Tensor:
    """int64 [nnz] row indices: uniform over [0, V), or Zipf(s) popularity ranks mapped to rows by a random
    permutation (inverse-CDF sampling with searchsorted, made on ``device``)."""
    if _PER_BAG.match(dist):
        return torch.randint(0, V, (nnz,), generator=generator, device=device, dtype=torch.int64)
    if m := _SKEWED.match(dist):
        cdf = zipf_weights(V, float(m.group(4)), device).cumsum_(0)
        u = torch.rand(nnz, generator=generator, device=device, dtype=torch.float64)
        rank = torch.searchsorted(cdf, u).clamp_(max=V - 1)
        return torch.randperm(V, generator=generator, device=device)[rank]
    raise ValueError(f"unknown index law {dist!r}")


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    V, D = shapes["table"]
    (nnz,) = shapes["indices"]
    B = shapes["offsets"][0] - 1
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}")
    pattern = str(params["dist"])
    lengths = bag_lengths(pattern, B, nnz, generator=generator, device=device)
    offsets = torch.zeros(B + 1, dtype=torch.int64, device=device)
    torch.cumsum(lengths, dim=0, out=offsets[1:])
    indices = draw_indices(pattern, V, nnz, generator=generator, device=device)
    # The table is drawn straight in its storage dtype where torch can (fp32: 10 GB for dlrm_fp32_d128).
    if dtypes["table"] == torch.float32:
        table = torch.randn(V, D, generator=generator, device=device, dtype=torch.float32)
    else:
        table = torch.randn(V, D, generator=generator, device=device).to(dtypes["table"])
    if dist == "repeats_positive":
        table += 1.0
        psw = torch.rand(nnz, generator=generator, device=device) * 1.5 + 0.5
        bag = torch.repeat_interleave(torch.arange(B, device=device), lengths, output_size=nnz)
        repeat = torch.rand(nnz, generator=generator, device=device) < 1.0 / 3.0
        indices = torch.where(repeat, indices[offsets[bag]], indices)
    else:
        psw = torch.randn(nnz, generator=generator, device=device)
    return table, indices, offsets, psw.to(dtypes["per_sample_weights"])


def reference(table, indices, offsets, per_sample_weights):
    """float64 weighted sums, gathered in chunks of lookups and added per bag with index_add_."""
    B = offsets.numel() - 1
    nnz = indices.numel()
    out = torch.zeros(B, table.shape[1], dtype=torch.float64, device=table.device)
    bag = torch.repeat_interleave(torch.arange(B, device=table.device), offsets.diff(), output_size=nnz)
    for c0 in range(0, nnz, _CHUNK):
        c1 = min(nnz, c0 + _CHUNK)
        rows = table[indices[c0:c1]].double() * per_sample_weights[c0:c1, None].double()
        out.index_add_(0, bag[c0:c1], rows)
    return out.float()


def baseline(table, indices, offsets, per_sample_weights):
    """F.embedding_bag (mode='sum', include_last_offset) with per-sample weights: one fused gather-reduce kernel
    on CUDA. It wants the weights in the table's dtype, so bf16 tables get bf16 weights and a bf16 result
    (accumulated in fp32 inside), returned as fp32."""
    psw = per_sample_weights.to(table.dtype)
    out = F.embedding_bag(indices, table, offsets, mode="sum", per_sample_weights=psw, include_last_offset=True)
    return out.float()


# ------------------------------------------------------------------------------------- baseline candidates


def baseline_eager_fp32(table, indices, offsets, per_sample_weights):
    """The fp32-exact eager expression: gather the rows, weight them in fp32, add them per bag with index_add_
    (materializes [nnz, D] fp32). F.embedding_bag wants bf16 weights for a bf16 table and returns a bf16 sum,
    1e-3 relative off, past this task's 1e-4."""
    B = offsets.numel() - 1
    bag = torch.repeat_interleave(torch.arange(B, device=table.device), offsets.diff(), output_size=indices.numel())
    rows = table[indices].float() * per_sample_weights[:, None]
    return torch.zeros(B, table.shape[1], dtype=torch.float32, device=table.device).index_add_(0, bag, rows)

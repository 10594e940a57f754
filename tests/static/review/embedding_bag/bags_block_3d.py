"""EmbeddingBag (sum, per-sample weights) with bounded work items and [BAGS, UNROLL, BLOCK_D] gathers.

Work items are (bag, start, end) slices of at most CHUNK lookups, built on the device from the offsets (no host
read): an item count per bag, a cumsum, and searchsorted over an upper bound of the item count (B + nnz/CHUNK),
so grids are sized without a sync. A program takes BAGS items; per step it loads an [BAGS, UNROLL] block of
indices and weights once and gathers the [BAGS, UNROLL, BLOCK_D] rows with one load, reducing over the lookup axis
into an fp32 [BAGS, BLOCK_D] accumulator. Items of split bags are added with tl.atomic_add into the zeroed output,
items that are whole bags are stored. BAGS grows as D shrinks so a step moves about 2048 elements per program.
The table-load policy is a constexpr chosen by a heuristic: evict_last when there are more lookups than table rows
(repeats expected, hot rows worth keeping in L2), evict_first otherwise.
"""
import torch
import triton
import triton.language as tl

CHUNK = 1024


@triton.jit
def _bag_items(table_ptr, idx_ptr, w_ptr, out_ptr, item_bag_ptr, item_start_ptr, item_end_ptr, item_split_ptr,
               n_items, D, stride_t, stride_o,
               BAGS: tl.constexpr, UNROLL: tl.constexpr, BLOCK_D: tl.constexpr, POLICY: tl.constexpr):
    it = tl.program_id(0) * BAGS + tl.arange(0, BAGS)
    it_ok = it < n_items
    bag = tl.load(item_bag_ptr + it, mask=it_ok, other=0)
    start = tl.load(item_start_ptr + it, mask=it_ok, other=0)
    end = tl.load(item_end_ptr + it, mask=it_ok, other=0)
    split = tl.load(item_split_ptr + it, mask=it_ok, other=0) != 0
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    u = tl.arange(0, UNROLL)
    acc = tl.zeros([BAGS, BLOCK_D], dtype=tl.float32)
    longest = tl.max(end - start, axis=0)
    for i in range(0, longest, UNROLL):
        pos = start[:, None] + i + u[None, :]
        p_ok = pos < end[:, None]
        idx = tl.load(idx_ptr + pos, mask=p_ok, other=0)
        w = tl.load(w_ptr + pos, mask=p_ok, other=0.0)
        rows = tl.load(table_ptr + idx[:, :, None] * stride_t + offs_d[None, None, :],
                       mask=p_ok[:, :, None] & d_ok[None, None, :], other=0.0,
                       eviction_policy=POLICY).to(tl.float32)
        acc += tl.sum(w[:, :, None] * rows, axis=1)
    out_ptrs = out_ptr + bag[:, None] * stride_o + offs_d[None, :]
    m = it_ok[:, None] & d_ok[None, :]
    tl.atomic_add(out_ptrs, acc, mask=m & split[:, None])
    tl.store(out_ptrs, acc, mask=m & ~split[:, None])


def _work_items(offsets, nnz, B):
    lengths = offsets[1:] - offsets[:-1]
    per_bag = torch.clamp((lengths + CHUNK - 1) // CHUNK, min=1)
    first = torch.cumsum(per_bag, 0) - per_bag
    max_items = B + nnz // CHUNK + 1
    item = torch.arange(max_items, device=offsets.device)
    bag = torch.searchsorted(first + per_bag, item, right=True).clamp_(max=B - 1)
    k = item - first[bag]
    start = offsets[bag] + k * CHUNK
    end = torch.minimum(start + CHUNK, offsets[bag + 1])
    valid = k < per_bag[bag]
    end = torch.where(valid, end, start)
    split = (per_bag[bag] > 1).to(torch.int32)
    return bag, start, end, split, max_items


def kernel(table, indices, offsets, per_sample_weights):
    V, D = table.shape
    B = offsets.numel() - 1
    nnz = indices.numel()
    out = torch.zeros((B, D), device=table.device, dtype=torch.float32)
    bag, start, end, split, n_items = _work_items(offsets, nnz, B)
    block_d = triton.next_power_of_2(D)
    unroll = 8
    bags = max(1, 2048 // (unroll * block_d))
    # more lookups than rows: repeats are expected (skewed traffic), keep rows in L2; otherwise stream them
    policy = "evict_last" if nnz >= V else "evict_first"
    _bag_items[(triton.cdiv(n_items, bags),)](
        table, indices, per_sample_weights, out, bag, start, end, split, n_items, D, table.stride(0), out.stride(0),
        BAGS=bags, UNROLL=unroll, BLOCK_D=block_d, POLICY=policy, num_warps=4)
    return out

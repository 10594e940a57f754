"""'Balanced, unrolled' EmbeddingBag: one program per bag, one lookup per iteration.

The names say load-balanced and prefetched; each program walks its whole bag, loading one index and one weight
per step, and narrows the index to int32 before forming the row address.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _balanced_bag_kernel(table_ptr, idx_ptr, w_ptr, off_ptr, out_ptr, D, BLOCK_D: tl.constexpr,
                         UNROLL: tl.constexpr):
    bag = tl.program_id(0)
    start = tl.load(off_ptr + bag)
    end = tl.load(off_ptr + bag + 1)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    # prefetched index window (UNROLL lookups in flight)
    for i in range(start, end):
        prefetched_idx = tl.load(idx_ptr + i).to(tl.int32)
        w = tl.load(w_ptr + i)
        row = tl.load(table_ptr + prefetched_idx * D + offs_d, mask=d_ok, other=0.0,
                      eviction_policy="evict_first")
        acc += w * row.to(tl.float32)
    tl.store(out_ptr + bag * D + offs_d, acc, mask=d_ok)


def kernel(table, indices, offsets, per_sample_weights):
    V, D = table.shape
    B = offsets.numel() - 1
    out = torch.empty((B, D), device=table.device, dtype=torch.float32)
    _balanced_bag_kernel[(B,)](table, indices, per_sample_weights, offsets, out, D,
                               BLOCK_D=triton.next_power_of_2(D), UNROLL=8, num_warps=1)
    return out

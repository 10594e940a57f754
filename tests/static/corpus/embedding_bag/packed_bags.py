"""Several bags per program, several lookups per step: a program owns BAGS bags (BAGS grows as D shrinks so a
gathered tile stays ~2048 elements) and gathers [BAGS, UNROLL, BLOCK_D] rows per step from one [BAGS, UNROLL]
load of indices and weights; int64 row offsets, bf16 converted to fp32, one store per bag. Bags are not split
(a 32k-lookup bag keeps its program busy) and there are no cache hints."""
import torch
import triton
import triton.language as tl

UNROLL = 8


@triton.jit
def packed_bag_kernel(table_ptr, idx_ptr, off_ptr, w_ptr, out_ptr, B, D, stride_t, stride_o,
                      BAGS: tl.constexpr, UNROLL: tl.constexpr, BLOCK_D: tl.constexpr):
    bags = tl.program_id(0) * BAGS + tl.arange(0, BAGS)
    bok = bags < B
    lo = tl.load(off_ptr + bags, mask=bok, other=0)
    hi = tl.load(off_ptr + bags + 1, mask=bok, other=0)
    n = hi - lo
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    u = tl.arange(0, UNROLL)
    acc = tl.zeros([BAGS, BLOCK_D], dtype=tl.float32)
    for s in range(0, tl.max(n, axis=0), UNROLL):
        k = s + u[None, :]
        ok = k < n[:, None]
        pos = lo[:, None] + k
        ids = tl.load(idx_ptr + pos, mask=ok, other=0)
        ws = tl.load(w_ptr + pos, mask=ok, other=0.0)
        ptrs = table_ptr + ids.to(tl.int64)[:, :, None] * stride_t + d[None, None, :]
        rows = tl.load(ptrs, mask=ok[:, :, None] & dm[None, None, :], other=0.0)
        acc += tl.sum(rows.to(tl.float32) * ws[:, :, None], axis=1)
    optr = out_ptr + bags.to(tl.int64)[:, None] * stride_o + d[None, :]
    tl.store(optr, acc, mask=bok[:, None] & dm[None, :])


def kernel(table, indices, offsets, per_sample_weights):
    V, D = table.shape
    B = offsets.numel() - 1
    out = torch.empty((B, D), dtype=torch.float32, device=table.device)
    block_d = triton.next_power_of_2(D)
    bags = max(1, min(16, 2048 // (UNROLL * block_d)))
    packed_bag_kernel[(triton.cdiv(B, bags),)](table, indices, offsets, per_sample_weights, out, B, D,
                                               table.stride(0), out.stride(0), BAGS=bags, UNROLL=UNROLL,
                                               BLOCK_D=block_d, num_warps=4)
    return out

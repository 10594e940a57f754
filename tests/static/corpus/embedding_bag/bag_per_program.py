"""One program per bag walks its lookups one at a time: a scalar index load (cast to int32), a scalar weight
load, the row loaded with evict_first, converted to fp32 and accumulated; one store per bag. No splitting of
long bags."""
import torch
import triton
import triton.language as tl


@triton.jit
def bag_kernel(table_ptr, idx_ptr, off_ptr, w_ptr, out_ptr, D, stride_t, BLOCK_D: tl.constexpr):
    bag = tl.program_id(0)
    start = tl.load(off_ptr + bag)
    end = tl.load(off_ptr + bag + 1)
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for i in range(start, end):
        r = tl.load(idx_ptr + i).to(tl.int32)
        w = tl.load(w_ptr + i)
        row = tl.load(table_ptr + r * stride_t + d, mask=dm, other=0.0, eviction_policy="evict_first")
        acc += w * row.to(tl.float32)
    tl.store(out_ptr + bag * D + d, acc, mask=dm)


def kernel(table, indices, offsets, per_sample_weights):
    V, D = table.shape
    B = offsets.numel() - 1
    out = torch.empty((B, D), dtype=torch.float32, device=table.device)
    bag_kernel[(B,)](table, indices, offsets, per_sample_weights, out, D, table.stride(0),
                     BLOCK_D=triton.next_power_of_2(D), num_warps=4)
    return out

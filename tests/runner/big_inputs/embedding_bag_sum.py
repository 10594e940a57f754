"""embedding_bag test submission: one program per bag sums its weighted rows in tiles of lookups.

It prints the pointers it was given on every call (the test reads them from the log), and with
WRITE_FROM_CALL > 0 flips one bit of one element of the table from that call on.
"""
import torch
import triton
import triton.language as tl

WRITE_FROM_CALL = 0
_CALLS = [0]


@triton.jit
def _bag_sum_kernel(table_ptr, idx_ptr, off_ptr, w_ptr, out_ptr, D, stride_t, stride_o,
                    BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    bag = tl.program_id(0)
    start = tl.load(off_ptr + bag)
    end = tl.load(off_ptr + bag + 1)
    d = tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for l0 in range(start, end, BLOCK_L):
        lookups = l0 + tl.arange(0, BLOCK_L)
        live = lookups < end
        rows = tl.load(idx_ptr + lookups, mask=live, other=0)
        w = tl.load(w_ptr + lookups, mask=live, other=0.0)
        vals = tl.load(table_ptr + rows[:, None] * stride_t + d[None, :], mask=live[:, None] & (d[None, :] < D),
                       other=0.0)
        acc += tl.sum(vals.to(tl.float32) * w[:, None], axis=0)
    tl.store(out_ptr + bag * stride_o + d, acc, mask=d < D)


def kernel(table, indices, offsets, per_sample_weights):
    _CALLS[0] += 1
    print(f"PTRS {_CALLS[0]} {table.data_ptr()} {indices.data_ptr()}", flush=True)
    B, D = offsets.numel() - 1, table.shape[1]
    out = torch.empty((B, D), dtype=torch.float32, device=table.device)
    _bag_sum_kernel[(B,)](table, indices, offsets, per_sample_weights, out, D, table.stride(0), out.stride(0),
                          BLOCK_L=128, BLOCK_D=triton.next_power_of_2(D))
    if WRITE_FROM_CALL and _CALLS[0] >= WRITE_FROM_CALL:
        table.view(torch.uint8).view(-1)[7] ^= 1
    return out

"""Naive two-step EmbeddingBag: the table is converted to fp32 on the host, a gather kernel (one program per
lookup) writes every weighted row into an [nnz, D] buffer, and a second kernel (one program per bag) sums the
buffer's rows of each bag."""
import torch
import triton
import triton.language as tl


@triton.jit
def gather_rows(table_ptr, idx_ptr, w_ptr, buf_ptr, D, BLOCK_D: tl.constexpr):
    i = tl.program_id(0)
    row = tl.load(idx_ptr + i)
    w = tl.load(w_ptr + i)
    d = tl.arange(0, BLOCK_D)
    vals = tl.load(table_ptr + row * D + d, mask=d < D, other=0.0)
    tl.store(buf_ptr + i * D + d, vals * w, mask=d < D)


@triton.jit
def segment_sum(buf_ptr, off_ptr, out_ptr, D, BLOCK_D: tl.constexpr):
    b = tl.program_id(0)
    start = tl.load(off_ptr + b)
    end = tl.load(off_ptr + b + 1)
    d = tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for i in range(start, end):
        acc += tl.load(buf_ptr + i * D + d, mask=d < D, other=0.0)
    tl.store(out_ptr + b * D + d, acc, mask=d < D)


def kernel(table, indices, offsets, per_sample_weights):
    table = table.float().contiguous()
    V, D = table.shape
    B = offsets.numel() - 1
    nnz = indices.numel()
    buf = torch.empty((nnz, D), dtype=torch.float32, device=table.device)
    out = torch.empty((B, D), dtype=torch.float32, device=table.device)
    block_d = triton.next_power_of_2(D)
    gather_rows[(nnz,)](table, indices, per_sample_weights, buf, D, BLOCK_D=block_d)
    segment_sum[(B,)](buf, offsets, out, D, BLOCK_D=block_d)
    return out

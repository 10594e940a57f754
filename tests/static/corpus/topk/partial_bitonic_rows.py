"""Partial: order-preserving int keys packed with the index into int64 words (value order, lower index first on
ties), and the whole row sorted with tl.sort in registers (BLOCK = next_pow2(V)), one program per row for every
shape; the first k words are unpacked."""
import torch
import triton
import triton.language as tl


@triton.jit
def _sort_rows_kernel(x_ptr, val_ptr, idx_ptr, V, k, stride_x, BLOCK: tl.constexpr, K_P2: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < V
    x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=ok, other=0.0)
    bits = x.to(tl.float32).to(tl.int32, bitcast=True)
    key = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    words = (key.to(tl.int64) << 32) | (V - 1 - cols).to(tl.int64)
    words = tl.where(ok, words, -9223372036854775808)
    ordered = tl.sort(words, descending=True)
    first = tl.reshape(ordered, [BLOCK // K_P2, K_P2])
    head = tl.sum(tl.where(tl.arange(0, BLOCK // K_P2)[:, None] == 0, first, 0), axis=0)
    j = tl.arange(0, K_P2)
    ix = V - 1 - (head & 0xFFFFFFFF)
    out = row.to(tl.int64) * k + j
    tl.store(idx_ptr + out, ix, mask=j < k)
    tl.store(val_ptr + out, tl.load(x_ptr + row.to(tl.int64) * stride_x + ix, mask=j < k), mask=j < k)


def kernel(x, *, k):
    B, V = x.shape
    x = x.contiguous()
    vals = torch.empty((B, k), dtype=x.dtype, device=x.device)
    idx = torch.empty((B, k), dtype=torch.int64, device=x.device)
    _sort_rows_kernel[(B,)](x, vals, idx, V, k, x.stride(0), BLOCK=triton.next_power_of_2(V),
                            K_P2=triton.next_power_of_2(k), num_warps=32)
    return vals, idx

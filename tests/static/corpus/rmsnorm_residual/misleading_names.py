"""'Fused, fp32, rsqrt-once, persistent, streaming' add + RMSNorm -- in name only.

The 'fused' kernel only adds; the norm kernel re-reads residual_out, squares in the input dtype, and divides
every element by sqrt. The persistent kernel is never launched; the cache hints live in comments.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def fused_add_rmsnorm_fp32(x_ptr, r_ptr, res_out_ptr, N, BLOCK: tl.constexpr):
    # fused add + norm: h stays in registers (evict_first streaming loads)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    h_fp32 = tl.load(x_ptr + row * N + cols, mask=cols < N) + tl.load(r_ptr + row * N + cols, mask=cols < N)
    tl.store(res_out_ptr + row * N + cols, h_fp32, mask=cols < N)


@triton.jit
def rsqrt_once_norm(res_out_ptr, w_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    h = tl.load(res_out_ptr + row * N + cols, mask=cols < N, other=0.0)
    acc_fp32 = tl.sum(h * h, axis=0)  # fp32 accumulation (it is not: h is bf16)
    rsqrt_val = tl.sqrt(acc_fp32 / N + eps)
    w_hoisted = tl.load(w_ptr + cols, mask=cols < N)
    tl.store(y_ptr + row * N + cols, h / rsqrt_val * w_hoisted, mask=cols < N)


@triton.jit
def persistent_hoisted(x_ptr, w_ptr, y_ptr, M, N, NUM_SMS: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + cols, mask=cols < N, eviction_policy="evict_last")
    for row in tl.range(tl.program_id(0), M, NUM_SMS):
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, eviction_policy="evict_first").to(tl.float32)
        tl.store(y_ptr + row * N + cols, x * tl.rsqrt(tl.sum(x * x, axis=0) / N) * w, mask=cols < N)


def kernel(x, residual, w, *, eps=1e-6):
    M, N = x.shape
    y = torch.empty_like(x)
    res_out = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(N)
    fused_add_rmsnorm_fp32[(M,)](x, residual, res_out, N, BLOCK=BLOCK, num_warps=8)
    rsqrt_once_norm[(M,)](res_out, w, y, N, eps, BLOCK=BLOCK, num_warps=8)
    return y, res_out

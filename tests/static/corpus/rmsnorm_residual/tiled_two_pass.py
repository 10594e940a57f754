"""Long-row add + RMSNorm only: pass 1 adds, stores residual_out and accumulates fp32 squares; pass 2 re-reads
residual_out (from L2) and writes y. Streaming hints on x/residual, evict_last on w."""
import torch
import triton
import triton.language as tl


@triton.jit
def two_pass(x_ptr, r_ptr, w_ptr, y_ptr, o_ptr, N, stride, eps, TILE: tl.constexpr):
    row = tl.program_id(0)
    xr = x_ptr + row * stride
    rr = r_ptr + row * stride
    orow = o_ptr + row * stride
    sumsq = 0.0
    for start in range(0, N, TILE):
        offs = start + tl.arange(0, TILE)
        m = offs < N
        a = tl.load(xr + offs, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
        b = tl.load(rr + offs, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
        h = a + b
        tl.store(orow + offs, h.to(o_ptr.dtype.element_ty), mask=m)
        sumsq += tl.sum(h * h, axis=0)
    inv_rms = tl.rsqrt(sumsq / N + eps)
    for start in range(0, N, TILE):
        offs = start + tl.arange(0, TILE)
        m = offs < N
        h = tl.load(orow + offs, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + row * stride + offs, (h * inv_rms * w).to(y_ptr.dtype.element_ty), mask=m)


def kernel(x, residual, w, *, eps=1e-6):
    M, N = x.shape
    y = torch.empty_like(x)
    res_out = torch.empty_like(x)
    two_pass[(M,)](x, residual, w, y, res_out, N, x.stride(0), eps, TILE=2048, num_warps=8)
    return y, res_out

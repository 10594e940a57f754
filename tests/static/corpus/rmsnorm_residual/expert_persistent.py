"""Expert fused add + RMSNorm for the corpus: a persistent row kernel with w hoisted out of the row loop, cache
hints (x and residual evict_first, w evict_last), fp32 statistics, rsqrt once per row; long rows take a tiled
two-pass kernel that re-reads residual_out from L2."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rows(x_ptr, r_ptr, w_ptr, y_ptr, o_ptr, M, N, sx, sr, sy, so, eps,
          BLOCK_N: tl.constexpr, NUM_PROGS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    for row in tl.range(pid, M, NUM_PROGS):
        row64 = row.to(tl.int64)
        x = tl.load(x_ptr + row64 * sx + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        r = tl.load(r_ptr + row64 * sr + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        h = x.to(tl.float32) + r.to(tl.float32)
        tl.store(o_ptr + row64 * so + cols, h.to(o_ptr.dtype.element_ty), mask=mask)
        rstd = tl.rsqrt(tl.sum(h * h, axis=0) / N + eps)
        tl.store(y_ptr + row64 * sy + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _tiled(x_ptr, r_ptr, w_ptr, y_ptr, o_ptr, N, sx, sr, sy, so, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in tl.range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + row * sx + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        r = tl.load(r_ptr + row * sr + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        h = x.to(tl.float32) + r.to(tl.float32)
        tl.store(o_ptr + row * so + cols, h.to(o_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_last")
        acc += h * h
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
    for start in tl.range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < N
        h = tl.load(o_ptr + row * so + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_ptr + row * sy + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, residual, w, *, eps=1e-6):
    M, N = x.shape
    y = torch.empty_like(x)
    res_out = torch.empty_like(x)
    strides = (x.stride(0), residual.stride(0), y.stride(0), res_out.stride(0))
    if N <= 16384:
        bn = triton.next_power_of_2(N)
        warps = 4 if bn <= 2048 else 8 if bn <= 8192 else 16
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        progs = min(M, sms * max(1, 16 // warps))
        _rows[(progs,)](x, residual, w, y, res_out, M, N, *strides, eps, BLOCK_N=bn, NUM_PROGS=progs,
                        num_warps=warps)
    else:
        _tiled[(M,)](x, residual, w, y, res_out, N, *strides, eps, BLOCK_N=4096, num_warps=8)
    return y, res_out

"""LayerNorm from a closure factory: a statistics kernel sums x and x*x over tiles in fp32 and takes
var = E[x^2] - mean^2, storing mean and rstd (rsqrt once per row); a second kernel re-reads x and normalizes."""
import torch
import triton
import triton.language as tl


@triton.jit
def _stats(x_ptr, mean_ptr, rstd_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    s1 = tl.zeros([BLOCK], tl.float32)
    s2 = tl.zeros([BLOCK], tl.float32)
    for off in tl.range(0, N, BLOCK):
        c = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + c, mask=c < N, other=0.0).to(tl.float32)
        s1 += x
        s2 += x * x
    mean = tl.sum(s1, axis=0) / N
    var = tl.sum(s2, axis=0) / N - mean * mean
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, tl.rsqrt(var + eps))


@triton.jit
def _apply(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    for off in tl.range(0, N, BLOCK):
        c = off + tl.arange(0, BLOCK)
        m = c < N
        x = tl.load(x_ptr + row * stride + c, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=m, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride + c, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=m)


def make_layernorm(block: int = 1024, eps: float = 1e-5):
    def layernorm(x, w, b):
        M, N = x.shape
        y = torch.empty_like(x)
        mean = torch.empty(M, device=x.device, dtype=torch.float32)
        rstd = torch.empty(M, device=x.device, dtype=torch.float32)
        _stats[(M,)](x, mean, rstd, N, x.stride(0), eps, BLOCK=block)
        _apply[(M,)](x, w, b, y, mean, rstd, N, x.stride(0), BLOCK=block)
        return y, mean, rstd

    return layernorm


kernel = make_layernorm()

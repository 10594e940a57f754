"""Expert softmax written for the corpus: short rows in 2-D tiles (persistent), mid rows in registers, long rows
with an online two-sweep pass, few long rows split across programs with a combine kernel. exp2 with log2(e),
one reciprocal per row, fp32 math."""
import torch
import triton
import triton.language as tl

LOG2E: tl.constexpr = 1.4426950408889634


@triton.jit
def _tile_rows(x_ptr, y_ptr, M, N, sx, sy, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NPROG: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    for blk in tl.range(pid, tl.cdiv(M, BLOCK_M), NPROG):
        rows = blk * BLOCK_M + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + rows[:, None] * sx + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
        m = tl.max(x, axis=1)
        p = tl.exp2((x - m[:, None]) * LOG2E)
        inv = 1.0 / tl.sum(p, axis=1)
        tl.store(y_ptr + rows[:, None] * sy + cols[None, :], (p * inv[:, None]).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_in_regs(x_ptr, y_ptr, N, sx, sy, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * sx + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    p = tl.exp2((x - m) * LOG2E)
    inv = 1.0 / tl.sum(p, axis=0)
    tl.store(y_ptr + row * sy + cols, (p * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _two_sweep(x_ptr, y_ptr, N, sx, sy, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * sx
    m = -float("inf")
    s = 0.0
    for start in tl.range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(xr + cols, mask=cols < N, other=-float("inf"), eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp2((m - m_new) * LOG2E) + tl.sum(tl.exp2((x - m_new) * LOG2E), axis=0)
        m = m_new
    inv = 1.0 / s
    for start in tl.range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(xr + cols, mask=cols < N, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        tl.store(y_ptr + row * sy + cols, (tl.exp2((x - m) * LOG2E) * inv).to(y_ptr.dtype.element_ty),
                 mask=cols < N)


@triton.jit
def _chunk_stats(x_ptr, m_ws, s_ws, N, sx, C, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * sx + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    s = tl.sum(tl.exp2((x - m) * LOG2E), axis=0)
    tl.store(m_ws + row * C + c, m)
    tl.store(s_ws + row * C + c, s)


@triton.jit
def _chunk_norm(x_ptr, y_ptr, m_ws, s_ws, N, sx, sy, C, CHUNK: tl.constexpr, CP: tl.constexpr):
    row = tl.program_id(0)
    c = tl.program_id(1)
    k = tl.arange(0, CP)
    mc = tl.load(m_ws + row * C + k, mask=k < C, other=-float("inf"))
    sc = tl.load(s_ws + row * C + k, mask=k < C, other=0.0)
    m = tl.max(mc, axis=0)
    s = tl.sum(sc * tl.exp2((mc - m) * LOG2E), axis=0)
    inv = 1.0 / s
    cols = c * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * sx + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    tl.store(y_ptr + row * sy + cols, (tl.exp2((x - m) * LOG2E) * inv).to(y_ptr.dtype.element_ty), mask=cols < N)


def kernel(x):
    M, N = x.shape
    y = torch.empty_like(x)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    if N <= 1024:
        bn = triton.next_power_of_2(N)
        bm = max(1, 4096 // bn)
        nprog = min(triton.cdiv(M, bm), 4 * sms)
        _tile_rows[(nprog,)](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=bm, BLOCK_N=bn, NPROG=nprog, num_warps=4)
    elif N <= 16384:
        bn = triton.next_power_of_2(N)
        warps = 4 if bn <= 2048 else 8 if bn <= 8192 else 16
        _row_in_regs[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=bn, num_warps=warps)
    elif M >= 2 * sms:
        _two_sweep[(M,)](x, y, N, x.stride(0), y.stride(0), BLOCK_N=4096, num_warps=16)
    else:
        chunk = 8192
        C = triton.cdiv(N, chunk)
        m_ws = torch.empty((M, C), dtype=torch.float32, device=x.device)
        s_ws = torch.empty((M, C), dtype=torch.float32, device=x.device)
        _chunk_stats[(M, C)](x, m_ws, s_ws, N, x.stride(0), C, CHUNK=chunk, num_warps=8)
        _chunk_norm[(M, C)](x, y, m_ws, s_ws, N, x.stride(0), y.stride(0), C, CHUNK=chunk,
                            CP=triton.next_power_of_2(C), num_warps=8)
    return y

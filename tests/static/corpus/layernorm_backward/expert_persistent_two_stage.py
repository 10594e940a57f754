"""Expert LayerNorm backward. Stage 1 runs G = 2 x SM-count persistent programs (clamped to M). For N <= 8192 a
program keeps whole rows in registers and its dw/db partials as fp32 register vectors, walking rows pid, pid+G,
...; the partials are stored once after the loop into a [G, N] fp32 buffer. For wider rows each row is done in
two column-tile sweeps (c1/c2, then dx) and the program's private partial row is updated in place (L2-resident
read-modify-write, no atomics). Stage 2: one program per 128-column block sums the G partial rows. dy/x are
streamed with evict_first (evict_last for the first sweep of a wide row, which is read again), w evict_last."""
import torch
import triton
import triton.language as tl


@triton.jit
def _bwd_rows(DY, X, W, MEAN, RSTD, DX, PDW, PDB, M, N, s_dy, s_x, s_dx, G, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    cm = cols < N
    w = tl.load(W + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for row in tl.range(pid, M, G):
        r = row.to(tl.int64)
        dy = tl.load(DY + r * s_dy + cols, mask=cm, other=0.0, eviction_policy="evict_first").to(tl.float32)
        x = tl.load(X + r * s_x + cols, mask=cm, other=0.0, eviction_policy="evict_first").to(tl.float32)
        mu = tl.load(MEAN + row)
        rs = tl.load(RSTD + row)
        xhat = tl.where(cm, (x - mu) * rs, 0.0)
        wdy = w * dy
        c1 = tl.sum(wdy, axis=0) / N
        c2 = tl.sum(wdy * xhat, axis=0) / N
        tl.store(DX + r * s_dx + cols, ((wdy - (xhat * c2 + c1)) * rs).to(DX.dtype.element_ty), mask=cm)
        dw_acc += dy * xhat
        db_acc += dy
    tl.store(PDW + pid * N + cols, dw_acc, mask=cm)
    tl.store(PDB + pid * N + cols, db_acc, mask=cm)


@triton.jit
def _bwd_wide(DY, X, W, MEAN, RSTD, DX, PDW, PDB, M, N, s_dy, s_x, s_dx, G, TILE: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, TILE)
    for row in tl.range(pid, M, G):
        r = row.to(tl.int64)
        mu = tl.load(MEAN + row)
        rs = tl.load(RSTD + row)
        s1 = tl.zeros([TILE], dtype=tl.float32)
        s2 = tl.zeros([TILE], dtype=tl.float32)
        for c0 in tl.range(0, N, TILE):
            cols = c0 + offs
            cm = cols < N
            dy = tl.load(DY + r * s_dy + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
            x = tl.load(X + r * s_x + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
            w = tl.load(W + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
            xhat = tl.where(cm, (x - mu) * rs, 0.0)
            s1 += w * dy
            s2 += w * dy * xhat
        c1 = tl.sum(s1, axis=0) / N
        c2 = tl.sum(s2, axis=0) / N
        for c0 in tl.range(0, N, TILE):
            cols = c0 + offs
            cm = cols < N
            dy = tl.load(DY + r * s_dy + cols, mask=cm, other=0.0, eviction_policy="evict_first").to(tl.float32)
            x = tl.load(X + r * s_x + cols, mask=cm, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(W + cols, mask=cm, other=0.0, eviction_policy="evict_last").to(tl.float32)
            xhat = tl.where(cm, (x - mu) * rs, 0.0)
            wdy = w * dy
            tl.store(DX + r * s_dx + cols, ((wdy - (xhat * c2 + c1)) * rs).to(DX.dtype.element_ty), mask=cm)
            pdw = tl.load(PDW + pid * N + cols, mask=cm, other=0.0)
            pdb = tl.load(PDB + pid * N + cols, mask=cm, other=0.0)
            tl.store(PDW + pid * N + cols, pdw + dy * xhat, mask=cm)
            tl.store(PDB + pid * N + cols, pdb + dy, mask=cm)


@triton.jit
def _reduce_partials(PDW, PDB, DW, DB, G, N, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cm = cols < N
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_N], dtype=tl.float32)
    for g in range(0, G):
        dw += tl.load(PDW + g * N + cols, mask=cm, other=0.0)
        db += tl.load(PDB + g * N + cols, mask=cm, other=0.0)
    tl.store(DW + cols, dw, mask=cm)
    tl.store(DB + cols, db, mask=cm)


def kernel(dy, x, w, mean, rstd):
    M, N = x.shape
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    G = max(1, min(2 * sms, M))
    dx = torch.empty_like(x)
    wide = N > 8192
    pdw = (torch.zeros if wide else torch.empty)((G, N), dtype=torch.float32, device=x.device)
    pdb = (torch.zeros if wide else torch.empty)((G, N), dtype=torch.float32, device=x.device)
    if wide:
        _bwd_wide[(G,)](dy, x, w, mean, rstd, dx, pdw, pdb, M, N, dy.stride(0), x.stride(0), dx.stride(0), G,
                        TILE=4096, num_warps=16)
    else:
        _bwd_rows[(G,)](dy, x, w, mean, rstd, dx, pdw, pdb, M, N, dy.stride(0), x.stride(0), dx.stride(0), G,
                        BLOCK_N=triton.next_power_of_2(N), num_warps=8 if N <= 4096 else 16)
    dw = torch.empty(N, dtype=torch.float32, device=x.device)
    db = torch.empty(N, dtype=torch.float32, device=x.device)
    _reduce_partials[(triton.cdiv(N, 128),)](pdw, pdb, dw, db, G, N, BLOCK_N=128)
    return dx, dw, db

"""LayerNorm backward behind a launcher class: persistent [ROWS, BLOCK_N] row blocks, a wide-row path, stage 2.

Narrow rows (N <= 8192): program p walks row blocks p, p + G, ...; each block is a [ROWS, BLOCK_N] tile (ROWS = 4
for N = 1024, 1 for N = 8192) held in registers; dx from c1 = mean(w*dy), c2 = mean(w*dy*xhat); dw/db partials
accumulate in fp32 [BLOCK_N] registers and are stored once.
Wide rows: per row two column sweeps (c1/c2, then dx); the dw/db contribution goes to the program's private row of
the [G, N] partial buffer with a load/add/store (L2-resident, no atomics); the buffer is zeroed first.
G = SM count x programs per SM (2), cached per device on the instance; stage 2: [BLOCK_G, 128] tiles per column
block, summed over G.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _bwd_blocks(DY, X, W, MEAN, RSTD, DX, PDW, PDB, M, N, stride, G, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    cok = cols < N
    w = tl.load(W + cols, mask=cok, other=0.0, eviction_policy="evict_last").to(tl.float32)
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_N], dtype=tl.float32)
    for rb in range(pid, tl.cdiv(M, ROWS), G):
        rows = rb * ROWS + tl.arange(0, ROWS)
        rok = rows < M
        m2 = rok[:, None] & cok[None, :]
        off = rows.to(tl.int64)[:, None] * stride + cols[None, :]
        dy = tl.load(DY + off, mask=m2, other=0.0, eviction_policy="evict_first").to(tl.float32)
        x = tl.load(X + off, mask=m2, other=0.0, eviction_policy="evict_first").to(tl.float32)
        mean = tl.load(MEAN + rows, mask=rok, other=0.0)
        rstd = tl.load(RSTD + rows, mask=rok, other=0.0)
        xhat = tl.where(m2, (x - mean[:, None]) * rstd[:, None], 0.0)
        g = w[None, :] * dy
        c1 = tl.sum(g, axis=1) / N
        c2 = tl.sum(g * xhat, axis=1) / N
        dx = rstd[:, None] * (g - c1[:, None] - xhat * c2[:, None])
        tl.store(DX + off, dx.to(tl.bfloat16), mask=m2)
        dw += tl.sum(dy * xhat, axis=0)
        db += tl.sum(dy, axis=0)
    tl.store(PDW + pid * N + cols, dw, mask=cok)
    tl.store(PDB + pid * N + cols, db, mask=cok)


@triton.jit
def _bwd_wide(DY, X, W, MEAN, RSTD, DX, PDW, PDB, M, N, stride, G, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    for row in range(pid, M, G):
        base = row.to(tl.int64) * stride
        mean = tl.load(MEAN + row)
        rstd = tl.load(RSTD + row)
        s1 = 0.0
        s2 = 0.0
        for c0 in range(0, N, BLOCK_N):
            c = c0 + cols
            ok = c < N
            dy = tl.load(DY + base + c, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            x = tl.load(X + base + c, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            w = tl.load(W + c, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            xhat = tl.where(ok, (x - mean) * rstd, 0.0)
            s1 += tl.sum(w * dy, axis=0)
            s2 += tl.sum(w * dy * xhat, axis=0)
        c1 = s1 / N
        c2 = s2 / N
        for c0 in range(0, N, BLOCK_N):
            c = c0 + cols
            ok = c < N
            dy = tl.load(DY + base + c, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            x = tl.load(X + base + c, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(W + c, mask=ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            xhat = tl.where(ok, (x - mean) * rstd, 0.0)
            g = w * dy
            tl.store(DX + base + c, (rstd * (g - c1 - xhat * c2)).to(tl.bfloat16), mask=ok)
            pw = tl.load(PDW + pid * N + c, mask=ok, other=0.0)
            pb = tl.load(PDB + pid * N + c, mask=ok, other=0.0)
            tl.store(PDW + pid * N + c, pw + dy * xhat, mask=ok)
            tl.store(PDB + pid * N + c, pb + dy, mask=ok)


@triton.jit
def _reduce_partials(PDW, PDB, DW, DB, G, N, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cok = cols < N
    aw = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    ab = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    for g0 in range(0, G, BLOCK_G):
        g = g0 + tl.arange(0, BLOCK_G)
        m = (g < G)[:, None] & cok[None, :]
        aw += tl.load(PDW + g[:, None] * N + cols[None, :], mask=m, other=0.0)
        ab += tl.load(PDB + g[:, None] * N + cols[None, :], mask=m, other=0.0)
    tl.store(DW + cols, tl.sum(aw, axis=0), mask=cok)
    tl.store(DB + cols, tl.sum(ab, axis=0), mask=cok)


class LayerNormBackward:
    REGISTER_LIMIT = 8192
    PROGRAMS_PER_SM = 2

    def __init__(self):
        self._groups = {}

    def groups(self, device):
        idx = device.index or 0
        if idx not in self._groups:
            self._groups[idx] = torch.cuda.get_device_properties(idx).multi_processor_count * self.PROGRAMS_PER_SM
        return self._groups[idx]

    def __call__(self, dy, x, w, mean, rstd):
        M, N = x.shape
        G = min(self.groups(x.device), M)
        dx = torch.empty_like(x)
        dw = torch.empty(N, device=x.device, dtype=torch.float32)
        db = torch.empty(N, device=x.device, dtype=torch.float32)
        if N <= self.REGISTER_LIMIT:
            pdw = torch.empty((G, N), device=x.device, dtype=torch.float32)
            pdb = torch.empty((G, N), device=x.device, dtype=torch.float32)
            block_n = triton.next_power_of_2(N)
            rows = max(1, 4096 // block_n)
            _bwd_blocks[(G,)](dy, x, w, mean, rstd, dx, pdw, pdb, M, N, x.stride(0), G,
                              ROWS=rows, BLOCK_N=block_n, num_warps=8 if block_n <= 4096 else 16)
        else:
            pdw = torch.zeros((G, N), device=x.device, dtype=torch.float32)
            pdb = torch.zeros((G, N), device=x.device, dtype=torch.float32)
            _bwd_wide[(G,)](dy, x, w, mean, rstd, dx, pdw, pdb, M, N, x.stride(0), G, BLOCK_N=4096, num_warps=16)
        _reduce_partials[(triton.cdiv(N, 128),)](pdw, pdb, dw, db, G, N, BLOCK_G=32, BLOCK_N=128)
        return dx, dw, db


kernel = LayerNormBackward()

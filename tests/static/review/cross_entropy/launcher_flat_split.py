"""Fused cross-entropy (loss + dlogits) behind a launcher class, two regimes picked on the host.

- rows: a persistent grid of up to 2 programs per SM owns whole rows (row loop); sweep 1 keeps the row in L2
  (evict_last), sweep 2 re-reads it with evict_first and writes the gradient. The number of programs is capped by
  an L2 budget over the row bytes: 32 MB / 256 KB = 128 programs, 32 MB / 512 KB = 64.
- chunks: few rows (M < 2 x SMs). The (row, chunk) pairs are a flat work list of M*C
  programs, 64 KB chunks; stage 1 writes the chunk's (m_c, s_c), stage 2 merges the C partials (LSE merge), writes
  the loss (chunk 0) and the gradient of its own chunk.
"""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
IGNORE_INDEX = -100
L2_BUDGET = 32 << 20
CHUNK_BYTES = 64 << 10


@triton.jit
def _ce_rows(logits_ptr, target_ptr, loss_ptr, grad_ptr, M, V, stride_l, stride_g,
             IGNORE: tl.constexpr, BLOCK_V: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK_V)
    for row in tl.range(pid, M, nprog):
        src = logits_ptr + row.to(tl.int64) * stride_l
        dst = grad_ptr + row.to(tl.int64) * stride_g
        t = tl.load(target_ptr + row)
        if t == IGNORE:
            for start in tl.range(0, V, BLOCK_V):
                cols = start + offs
                tl.store(dst + cols, tl.zeros([BLOCK_V], tl.bfloat16), mask=cols < V)
            tl.store(loss_ptr + row, 0.0)
        else:
            m = tl.full([], float("-inf"), tl.float32)
            s = tl.zeros([], tl.float32)
            for start in tl.range(0, V, BLOCK_V, num_stages=1):
                cols = start + offs
                z = tl.load(src + cols, mask=cols < V, other=float("-inf"),
                            eviction_policy="evict_last").to(tl.float32)
                m_new = tl.maximum(m, tl.max(z, axis=0))
                s = s * tl.exp2((m - m_new) * LOG2E) + tl.sum(tl.exp2((z - m_new) * LOG2E), axis=0)
                m = m_new
            z_t = tl.load(src + t).to(tl.float32)
            tl.store(loss_ptr + row, m + tl.log2(s) * LN2 - z_t)
            inv_s = 1.0 / s
            for start in tl.range(0, V, BLOCK_V, num_stages=1):
                cols = start + offs
                z = tl.load(src + cols, mask=cols < V, other=float("-inf"),
                            eviction_policy="evict_first").to(tl.float32)
                p = tl.exp2((z - m) * LOG2E) * inv_s
                p = tl.where(cols == t, p - 1.0, p)
                tl.store(dst + cols, p.to(tl.bfloat16), mask=cols < V)


@triton.jit
def _ce_chunk_stats(logits_ptr, target_ptr, pm_ptr, ps_ptr, V, stride_l, CHUNK,
                    C: tl.constexpr, IGNORE: tl.constexpr, BLOCK_V: tl.constexpr):
    pid = tl.program_id(0)
    row = pid // C
    c = pid % C
    t = tl.load(target_ptr + row)
    if t != IGNORE:
        src = logits_ptr + row.to(tl.int64) * stride_l
        lo = c * CHUNK
        hi = tl.minimum(lo + CHUNK, V)
        offs = tl.arange(0, BLOCK_V)
        m = tl.full([], float("-inf"), tl.float32)
        s = tl.zeros([], tl.float32)
        for start in tl.range(lo, hi, BLOCK_V, num_stages=1):
            cols = start + offs
            z = tl.load(src + cols, mask=cols < hi, other=float("-inf"),
                        eviction_policy="evict_last").to(tl.float32)
            m_new = tl.maximum(m, tl.max(z, axis=0))
            s = s * tl.exp2((m - m_new) * LOG2E) + tl.sum(tl.exp2((z - m_new) * LOG2E), axis=0)
            m = m_new
        tl.store(pm_ptr + pid, m)
        tl.store(ps_ptr + pid, s)


@triton.jit
def _ce_chunk_grad(logits_ptr, target_ptr, loss_ptr, grad_ptr, pm_ptr, ps_ptr, V, stride_l, stride_g, CHUNK,
                   C: tl.constexpr, IGNORE: tl.constexpr, BLOCK_V: tl.constexpr):
    pid = tl.program_id(0)
    row = pid // C
    c = pid % C
    t = tl.load(target_ptr + row)
    src = logits_ptr + row.to(tl.int64) * stride_l
    dst = grad_ptr + row.to(tl.int64) * stride_g
    lo = c * CHUNK
    hi = tl.minimum(lo + CHUNK, V)
    offs = tl.arange(0, BLOCK_V)
    if t == IGNORE:
        for start in tl.range(lo, hi, BLOCK_V):
            cols = start + offs
            tl.store(dst + cols, tl.zeros([BLOCK_V], tl.bfloat16), mask=cols < hi)
        if c == 0:
            tl.store(loss_ptr + row, 0.0)
    else:
        ks = tl.arange(0, C)
        pm = tl.load(pm_ptr + row * C + ks)
        ps = tl.load(ps_ptr + row * C + ks)
        m = tl.max(pm, axis=0)
        s = tl.sum(ps * tl.exp2((pm - m) * LOG2E), axis=0)
        if c == 0:
            z_t = tl.load(src + t).to(tl.float32)
            tl.store(loss_ptr + row, m + tl.log2(s) * LN2 - z_t)
        inv_s = 1.0 / s
        for start in tl.range(lo, hi, BLOCK_V, num_stages=1):
            cols = start + offs
            z = tl.load(src + cols, mask=cols < hi, other=float("-inf"),
                        eviction_policy="evict_first").to(tl.float32)
            p = tl.exp2((z - m) * LOG2E) * inv_s
            p = tl.where(cols == t, p - 1.0, p)
            tl.store(dst + cols, p.to(tl.bfloat16), mask=cols < hi)


class FusedCrossEntropy:
    def __init__(self):
        self._sms = {}

    def _num_sms(self, device):
        idx = device.index or 0
        if idx not in self._sms:
            self._sms[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
        return self._sms[idx]

    def __call__(self, logits, target):
        M, V = logits.shape
        loss = torch.empty(M, device=logits.device, dtype=torch.float32)
        grad = torch.empty_like(logits)
        sms = self._num_sms(logits.device)
        row_bytes = V * logits.element_size()
        BLOCK_V = 8192
        if M >= 2 * sms:
            programs = min(M, 2 * sms, max(1, L2_BUDGET // row_bytes))
            _ce_rows[(programs,)](logits, target, loss, grad, M, V, logits.stride(0), grad.stride(0),
                                  IGNORE=IGNORE_INDEX, BLOCK_V=BLOCK_V, num_warps=16)
            return loss, grad
        chunk = CHUNK_BYTES // logits.element_size()
        C = triton.next_power_of_2(triton.cdiv(V, chunk))
        chunk = triton.cdiv(V, C)
        pm = torch.empty(M * C, device=logits.device, dtype=torch.float32)
        ps = torch.empty(M * C, device=logits.device, dtype=torch.float32)
        _ce_chunk_stats[(M * C,)](logits, target, pm, ps, V, logits.stride(0), chunk,
                                  C=C, IGNORE=IGNORE_INDEX, BLOCK_V=BLOCK_V, num_warps=16)
        _ce_chunk_grad[(M * C,)](logits, target, loss, grad, pm, ps, V, logits.stride(0), grad.stride(0), chunk,
                                 C=C, IGNORE=IGNORE_INDEX, BLOCK_V=BLOCK_V, num_warps=16)
        return loss, grad


kernel = FusedCrossEntropy()

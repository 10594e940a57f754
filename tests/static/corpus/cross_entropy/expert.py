"""Expert cross-entropy for the corpus: persistent whole-row programs (one per SM) with an online exp2 sweep
(evict_last) and a gradient sweep (evict_first), int64 row offsets, a scalar ignore_index branch; few rows split
the vocabulary over a (M, C) grid with a partial-(m, s) workspace and a merge kernel."""
import torch
import triton
import triton.language as tl

LOG2E: tl.constexpr = 1.4426950408889634
LN2: tl.constexpr = 0.6931471805599453


@triton.jit
def _rows(logits_ptr, target_ptr, loss_ptr, grad_ptr, M, V, stride, IGNORE: tl.constexpr, BLOCK: tl.constexpr,
          NPROG: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for row in tl.range(tl.program_id(0), M, NPROG):
        base = logits_ptr + row.to(tl.int64) * stride
        gbase = grad_ptr + row.to(tl.int64) * stride
        t = tl.load(target_ptr + row)
        if t == IGNORE:
            for off in tl.range(0, V, BLOCK):
                tl.store(gbase + off + offs, tl.zeros([BLOCK], tl.bfloat16), mask=off + offs < V)
            tl.store(loss_ptr + row, 0.0)
        else:
            m = -float("inf")
            s = 0.0
            for off in tl.range(0, V, BLOCK):
                cols = off + offs
                z = tl.load(base + cols, mask=cols < V, other=-float("inf"), eviction_policy="evict_last")
                z = z.to(tl.float32) * LOG2E
                m_new = tl.maximum(m, tl.max(z, 0))
                s = s * tl.exp2(m - m_new) + tl.sum(tl.exp2(z - m_new), 0)
                m = m_new
            zt = tl.load(base + t).to(tl.float32)
            tl.store(loss_ptr + row, (m + tl.log2(s)) * LN2 - zt)
            inv = 1.0 / s
            for off in tl.range(0, V, BLOCK):
                cols = off + offs
                z = tl.load(base + cols, mask=cols < V, other=-float("inf"), eviction_policy="evict_first")
                p = tl.exp2(z.to(tl.float32) * LOG2E - m) * inv
                p = tl.where(cols == t, p - 1.0, p)
                tl.store(gbase + cols, p.to(tl.bfloat16), mask=cols < V)


@triton.jit
def _split_stats(logits_ptr, pm_ptr, ps_ptr, V, stride, C, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    z = tl.load(logits_ptr + row * stride + cols, mask=cols < V, other=-float("inf")).to(tl.float32) * LOG2E
    mc = tl.max(z, 0)
    tl.store(pm_ptr + row * C + c, mc)
    tl.store(ps_ptr + row * C + c, tl.sum(tl.exp2(z - mc), 0))


@triton.jit
def _split_grad(logits_ptr, target_ptr, pm_ptr, ps_ptr, loss_ptr, grad_ptr, V, stride, C, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    m = -float("inf")
    s = 0.0
    for j in range(C):
        mj = tl.load(pm_ptr + row * C + j)
        m_new = tl.maximum(m, mj)
        s = s * tl.exp2(m - m_new) + tl.load(ps_ptr + row * C + j) * tl.exp2(mj - m_new)
        m = m_new
    t = tl.load(target_ptr + row)
    if c == 0:
        zt = tl.load(logits_ptr + row * stride + t).to(tl.float32)
        tl.store(loss_ptr + row, (m + tl.log2(s)) * LN2 - zt)
    cols = c * CHUNK + tl.arange(0, CHUNK)
    z = tl.load(logits_ptr + row * stride + cols, mask=cols < V, other=-float("inf")).to(tl.float32) * LOG2E
    p = tl.exp2(z - m) / s
    p = tl.where(cols == t, p - 1.0, p)
    tl.store(grad_ptr + row * stride + cols, p.to(tl.bfloat16), mask=cols < V)


def kernel(logits, target):
    M, V = logits.shape
    loss = torch.empty(M, device=logits.device, dtype=torch.float32)
    grad = torch.empty_like(logits)
    sms = torch.cuda.get_device_properties(logits.device).multi_processor_count
    if M >= 2 * sms:
        _rows[(sms,)](logits, target, loss, grad, M, V, logits.stride(0), IGNORE=-100, BLOCK=8192, NPROG=sms,
                      num_warps=16)
    else:
        chunk = 16384
        C = triton.cdiv(V, chunk)
        pm = torch.empty((M, C), device=logits.device, dtype=torch.float32)
        ps = torch.empty((M, C), device=logits.device, dtype=torch.float32)
        _split_stats[(M, C)](logits, pm, ps, V, logits.stride(0), C, CHUNK=chunk, num_warps=16)
        _split_grad[(M, C)](logits, target, pm, ps, loss, grad, V, logits.stride(0), C, CHUNK=chunk, num_warps=16)
    return loss, grad

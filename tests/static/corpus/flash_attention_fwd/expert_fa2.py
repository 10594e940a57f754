"""Expert FlashAttention-2 forward. A program owns a 128-row query tile of one (batch, query head); the program
id puts the G query heads of a KV head fastest, then the query tiles in descending order (heaviest causal tiles
first). Q is loaded once; K/V stream through TMA descriptors on sm_90+ (pointer loads elsewhere) with the online
softmax in the log2 domain (qk_scale = D^-0.5 * log2 e, exp2 for p and alpha) and P fed as bf16 into the P@V dot
that accumulates into the fp32 tile. Causal: a mask-free loop over the blocks left of the diagonal, then a
masked diagonal stage. Autotuned: BLOCK_N 128 for D = 128, 64 for D = 256, 8 warps, 2-4 stages."""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _kv_sweep(acc, l_i, m_i, q, kd, vd, k_ptr, v_ptr, row0, lo, hi, S, stride, qk_scale, offs_m, offs_n, offs_d,
              MASK: tl.constexpr, BLOCK_N: tl.constexpr, TMA: tl.constexpr):
    # MASK 0: every key visible (no mask math); 1: causal diagonal (j <= i); 2: tail block (j < S)
    for start_n in tl.range(lo, hi, BLOCK_N):
        rows = (row0 + start_n + offs_n).to(tl.int64)[:, None]
        if TMA:
            k = kd.load([row0 + start_n, 0])
            v = vd.load([row0 + start_n, 0])
        else:
            ok = ((start_n + offs_n) < S)[:, None]
            k = tl.load(k_ptr + rows * stride + offs_d[None, :], mask=ok, other=0.0)
            v = tl.load(v_ptr + rows * stride + offs_d[None, :], mask=ok, other=0.0)
        qk = tl.dot(q, tl.trans(k))
        if MASK == 1:
            qk = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk, -float("inf"))
        elif MASK == 2:
            qk = tl.where(((start_n + offs_n) < S)[None, :], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


def _configs():
    out = []
    for bn, stages in ((128, 2), (128, 3), (64, 3), (64, 4)):
        out.append(triton.Config({"BLOCK_M": 128, "BLOCK_N": bn}, num_warps=8, num_stages=stages))
    return out


def _prune(configs, named_args, **kw):
    d = named_args["HEAD_DIM"]
    return [c for c in configs if (c.kwargs["BLOCK_N"] == 128) == (d <= 128)]


@triton.autotune(configs=_configs(), key=["S", "HEAD_DIM", "CAUSAL", "HQ", "HKV"],
                 prune_configs_by={"early_config_prune": _prune})
@triton.jit
def _fa_fwd(qd, kd, vd, q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, qk_scale, stride,
            HQ: tl.constexpr, HKV: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, TMA: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    G: tl.constexpr = HQ // HKV
    n_m = tl.cdiv(S, BLOCK_M)
    pid = tl.program_id(0)
    member = pid % G
    rest = pid // G
    rank = rest % n_m
    bkv = rest // n_m
    start_m = n_m - 1 - rank if CAUSAL else rank
    b = bkv // HKV
    kvh = bkv % HKV
    h = kvh * G + member
    q_row0 = (b * HQ + h) * S
    kv_row0 = (b * HKV + kvh) * S
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    if TMA:
        q = qd.load([q_row0 + start_m * BLOCK_M, 0])
    else:
        q = tl.load(q_ptr + (q_row0 + offs_m).to(tl.int64)[:, None] * stride + offs_d[None, :],
                    mask=(offs_m < S)[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        acc, l_i, m_i = _kv_sweep(acc, l_i, m_i, q, kd, vd, k_ptr, v_ptr, kv_row0, 0, start_m * BLOCK_M, S, stride,
                                  qk_scale, offs_m, offs_n, offs_d, 0, BLOCK_N, TMA)
        acc, l_i, m_i = _kv_sweep(acc, l_i, m_i, q, kd, vd, k_ptr, v_ptr, kv_row0, start_m * BLOCK_M,
                                  tl.minimum((start_m + 1) * BLOCK_M, S), S, stride, qk_scale, offs_m, offs_n,
                                  offs_d, 1, BLOCK_N, TMA)
    else:
        full = (S // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _kv_sweep(acc, l_i, m_i, q, kd, vd, k_ptr, v_ptr, kv_row0, 0, full, S, stride, qk_scale,
                                  offs_m, offs_n, offs_d, 0, BLOCK_N, TMA)
        acc, l_i, m_i = _kv_sweep(acc, l_i, m_i, q, kd, vd, k_ptr, v_ptr, kv_row0, full, S, S, stride, qk_scale,
                                  offs_m, offs_n, offs_d, 2, BLOCK_N, TMA)
    row_ok = (offs_m < S)[:, None]
    out = acc / l_i[:, None]
    tl.store(o_ptr + (q_row0 + offs_m).to(tl.int64)[:, None] * stride + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=row_ok)
    tl.store(lse_ptr + q_row0 + offs_m, (m_i + tl.math.log2(l_i)) * LN2, mask=offs_m < S)


def kernel(q, k, v, *, causal):
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    lse = torch.empty((B, Hq, S), dtype=torch.float32, device=q.device)
    tma = torch.cuda.get_device_capability(q.device)[0] >= 9
    q2, k2, v2 = q.view(-1, D), k.view(-1, D), v.view(-1, D)
    dummy = [1, 1]
    qd = TensorDescriptor.from_tensor(q2, [128, D]) if tma else None
    kd = TensorDescriptor(k2, k2.shape, k2.stride(), dummy) if tma else None
    vd = TensorDescriptor(v2, v2.shape, v2.stride(), dummy) if tma else None

    def grid(meta):
        if tma:
            kd.block_shape = [meta["BLOCK_N"], D]
            vd.block_shape = [meta["BLOCK_N"], D]
        return (B * Hq * triton.cdiv(S, meta["BLOCK_M"]),)

    _fa_fwd[grid](qd, kd, vd, q, k, v, o, lse, S, D ** -0.5 * LOG2E, D, HQ=Hq, HKV=Hkv, HEAD_DIM=D, CAUSAL=causal,
                  TMA=tma)
    return o, lse

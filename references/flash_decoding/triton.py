"""Expert Triton reference for ``flash_decoding``: single-token decode attention over a contiguous KV cache,
o[b, h] = softmax(q[b, h] . K[b, h//G]^T * D^-0.5) V[b, h//G], with G = Hq / Hkv query heads per KV head.

Guidance implemented (tasks/flash_decoding/task.yaml): L1.split-kv-lse-merge, L1.gqa-head-packing,
L2.program-per-split, L2.split-heuristic, L2.cheap-combine, L3.streaming-kv-loads, L3.exp2-fold, L3.small-m-dot.

Decode is a pure stream of the KV cache (2*B*Hkv*L*D*2 bytes); the design gets enough programs streaming and
reads every K/V byte once:

- Split-KV (flash-decoding): program (b*Hkv + h, s) handles positions [s*CHUNK, (s+1)*CHUNK) of one KV head and
  keeps an online softmax (m, l, acc) in fp32 registers; scores never reach memory. With S > 1 splits it writes a
  normalized partial o_s (fp32 [B, Hq, S, D]) and lse_s = m_s + log2(l_s) (fp32 [B, Hq, S], base 2), and a
  second, tiny kernel merges them per (b, query head): w_s = 2^(lse_s - max lse) / sum, o = sum_s w_s o_s,
  reading the S x D partials of a head contiguously.
- Split heuristic (host): S = clamp(ceil(2*SMs / (B*Hkv)), 1, L/256), CHUNK rounded up to BLOCK_N; when B*Hkv
  >= 2*SMs, S = 1 and the split kernel writes the final normalized o itself (no workspace, no merge launch).
  Catalog: b1_64k S = 32 (256 programs), b16_16k S = 3 (384), b64_4k_gqa8 S = 1 (512), mha_b4_16k S = 3 (384).
- GQA packing: a program loads each K/V tile once for all G query heads of its KV head: q is a [G_PAD, D] block
  (rows h*G .. h*G+G-1, padded to G_PAD = 16 for tl.dot, i.e. an m16n8k16 MMA, not 64 rows), so the G GEMVs
  become one small GEMM and KV traffic drops by G (8x at b64_4k_gqa8).
- MHA (G = 1) takes the same MMA path, its single query row padded to 16: the padding costs tensor-core time
  far below the stream's (mha_b4_16k: 252 us on the H200, at the copy floor), where fp32 FMA dot products on
  [1, ...] shapes (still there, ``_g_pad=1``) took 411-440 us at any split.
- Streaming loads: K and V tiles of BLOCK_N x D, evict_first (read once), 3 stages, 4 warps. BLOCK_N = 64 (16 KB per
  tile) when there are fewer than two programs per SM (b1_64k), else 32, so 3-4 programs fit per SM: b64_4k_gqa8 took
  251 us at 32 against 291 us at 64 (benchmarks/data/runs/round7/tune_decode_splitk.json); row offsets are int64
  (B*Hkv*L*D reaches 2^30).
- exp2 everywhere: D^-0.5 * log2(e) is applied once, in fp32 (to the [G_PAD, BLOCK_N] fp32 score tile on the MMA path,
  to q on the FMA path), and the probabilities, the rescale factors alpha and the merge weights are all exp2. Folding
  the scale into q and re-rounding q to bf16 for the MMA is a shortcut, not an optimization: emulated in torch on bf16
  inputs (B=4, Hq=32, Hkv=8, L=4096, D=128), it puts 92 outputs outside the catalog's tolerance [1e-3, 2e-2] (2.7x the
  bound) on the "sharp" distribution, against <= 0.37 of the bound with the fp32 score scaling; the extra FMUL per score
  is ~1k per 16 KB tile.

Numerics: on the MMA path the PV MMA takes P as two bf16 terms, hi = bf16(p) and lo = bf16(p - hi), so it sees
~16 bits of each probability instead of 8 (the FMA path keeps P in fp32). The task tolerance is [2e-3, 4e-2], the
catalog's [1e-3, 2e-2] doubled, because on the H200 PyTorch's SDPA used 1.24x of the old bound on b64_4k_gqa8
"offset". Worst element's share of the new tolerance on the H200, over the normal, sharp and offset draws
(benchmarks/data/tolerance_audit_h200.json), kernel / SDPA: b1_64k 0.11 / 0.15, b16_16k 0.17 / 0.32, b64_4k_gqa8
0.18 / 0.62, mha_b4_16k 0.13 / 0.28 (audited on the FMA path; on the MMA path mha_b4_16k passes every correctness
trial and timed recheck of the round-7 bench, but its share has not been re-audited).

Roofline floors on H200 (bytes = 2*B*Hkv*L*D*2 + 2*B*Hq*D*2 at the measured copy bandwidth; flops are negligible):

===========  =====================  =========  ==================================================
workload     B, Hq, Hkv, L, D       HBM floor  H200: time, fraction of floor, x best peer
===========  =====================  =========  ==================================================
b1_64k       1, 32, 8, 65536, 128   64.4 us    80.4 us, 0.79, 1.00x compile
b16_16k      16, 32, 8, 16384, 128  258 us     258 us, 0.99, 0.98x compile_max_autotune
b64_4k_gqa8  64, 64, 8, 4096, 128   258 us     256 us, 1.00, 0.99x compile
mha_b4_16k   4, 32, 32, 16384, 128  258 us     257 us, 0.99, 0.99x compile_max_autotune
===========  =====================  =========  ==================================================

Floors use the rates measured on the H200 (copy 4.17 TB/s, bf16 754 TFLOP/s, fp8 1284 TFLOP/s;
benchmarks/data/references_h200.json, 2026-11-30).
The last column is benchmarks/summary.py's row for the workload: the newest evaluation against every baseline
candidate, and the fastest candidate correct in every evaluation (benchmarks/docstring_figures.py writes it).
Against the best peer (SDPA, eager or compiled in either mode; the table's last column): within 2% on every
workload, and at 0.99-1.0 of the copy floor except b1_64k (about 0.8: 256 programs, under two per SM, and 32 splits
to merge).
Investigation notes: references/flash_decoding/NOTES.md.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
_MIN_CHUNK = 256      # positions per split at least: below this the merge costs more than the split gains
_BLOCK_N = 64         # KV positions per tile: 64 x 128 x 2 B = 16 KB per K (or V) tile and stage
_G_DOT = 16           # the smallest tl.dot M: G = 2..16 query heads are padded to 16 rows


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=None)
def _sms_of_device(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _sm_count(t: torch.Tensor) -> int:
    if t.is_cuda and not _interpreting():
        return _sms_of_device(t.device.index if t.device.index is not None else torch.cuda.current_device())
    return 4  # the interpreter runs programs one after another; a small "GPU" still needs splits


# ------------------------------------------------------------------------------------------------ kernels


@triton.jit
def _decode_split_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, po_ptr, plse_ptr,
    Hkv, L, CHUNK, S,
    stride_qb, stride_qh, stride_kb, stride_kh, stride_kl, stride_vb, stride_vh, stride_vl, stride_ob, stride_oh,
    qk_scale,
    G: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
    NUM_STAGES: tl.constexpr, DIRECT: tl.constexpr,
):
    """Program (b*Hkv + h, s): the G query heads of KV head h against positions [s*CHUNK, min(L, (s+1)*CHUNK)).

    Reads 2 * CHUNK * D * elt bytes of K/V once (evict_first) and G * D * elt bytes of q; writes G * (D + 1) fp32
    partials, or (DIRECT, one split) the G final rows of o in the output dtype.
    """
    pid_bh = tl.program_id(0)
    split = tl.program_id(1)
    b = (pid_bh // Hkv).to(tl.int64)
    h = pid_bh % Hkv
    g = tl.arange(0, G_PAD)
    g_ok = g < G
    offs_d = tl.arange(0, D_PAD)
    d_ok = offs_d < D
    # q block of the group. qk_scale = D^-0.5 * log2(e), so scores come out in log2 units: folded into q in fp32
    # on the FMA path; on the MMA path q stays an exact bf16 operand and the fp32 score tile is scaled instead
    # (re-rounding q * qk_scale to bf16 fails the tolerance on sharp softmaxes).
    q = tl.load(q_ptr + b * stride_qb + (h * G + g)[:, None] * stride_qh + offs_d[None, :],
                mask=g_ok[:, None] & d_ok[None, :], other=0.0)
    if G_PAD < 16:
        q = q.to(tl.float32) * qk_scale
    k_base = k_ptr + b * stride_kb + h.to(tl.int64) * stride_kh
    v_base = v_ptr + b * stride_vb + h.to(tl.int64) * stride_vh
    lo = split * CHUNK
    hi = tl.minimum(L, lo + CHUNK)
    m_i = tl.full((G_PAD,), -float("inf"), tl.float32)
    l_i = tl.zeros((G_PAD,), tl.float32)
    acc = tl.zeros((G_PAD, D_PAD), tl.float32)
    for n0 in tl.range(lo, hi, BLOCK_N, num_stages=NUM_STAGES):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        n_ok = offs_n < hi
        kv_mask = n_ok[:, None] & d_ok[None, :]
        rows = offs_n.to(tl.int64)
        k = tl.load(k_base + rows[:, None] * stride_kl + offs_d[None, :], mask=kv_mask, other=0.0,
                    eviction_policy="evict_first")
        # Scores [G_PAD, BLOCK_N], log2 units: one MMA for the whole group, or fp32 FMAs for one head (MHA).
        if G_PAD >= 16:
            s = tl.dot(q, tl.trans(k)) * qk_scale
        else:
            s = tl.sum(q[:, None, :] * k.to(tl.float32)[None, :, :], axis=2)
        s = tl.where(n_ok[None, :], s, -float("inf"))
        # Online softmax: rescale the running sum and accumulator when the max grows.
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + rows[:, None] * stride_vl + offs_d[None, :], mask=kv_mask, other=0.0,
                    eviction_policy="evict_first")
        if G_PAD >= 16:
            # P as a sum of two bf16 terms (hi + the rounding residue lo): the PV MMA then sees ~16 bits of each
            # probability instead of 8. One bf16 P put 3 of 524288 outputs past the tolerance on the H200
            # (b64_4k_gqa8, "offset" draw); the second MMA is free in a stream bound by the KV bytes.
            p_hi = p.to(v_ptr.dtype.element_ty)
            p_lo = (p - p_hi.to(tl.float32)).to(v_ptr.dtype.element_ty)
            acc = tl.dot(p_hi, v, acc * alpha[:, None])
            acc = tl.dot(p_lo, v, acc)
        else:
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v.to(tl.float32)[None, :, :], axis=1)
        m_i = m_new
    out = acc / l_i[:, None]
    row_mask = g_ok[:, None] & d_ok[None, :]
    if DIRECT:
        tl.store(o_ptr + b * stride_ob + (h * G + g)[:, None] * stride_oh + offs_d[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=row_mask)
    else:
        # Partials of query head hq = h*G + g at [b, hq, split]: normalized o_s and base-2 lse_s.
        slot = (b * (Hkv * G) + h * G + g).to(tl.int64) * S + split
        tl.store(po_ptr + slot[:, None] * D + offs_d[None, :], out, mask=row_mask)
        tl.store(plse_ptr + slot, m_i + tl.log2(l_i), mask=g_ok)


@triton.jit
def _decode_merge_kernel(
    po_ptr, plse_ptr, o_ptr,
    Hq, S,
    stride_ob, stride_oh,
    D: tl.constexpr, D_PAD: tl.constexpr, S_PAD: tl.constexpr,
):
    """Program (b*Hq + hq): merge the S partials of one query head: lse = log2(sum_s 2^lse_s),
    o = sum_s 2^(lse_s - lse) o_s. Reads S * (D + 1) * 4 contiguous bytes, writes D * elt bytes."""
    pid = tl.program_id(0)
    b = (pid // Hq).to(tl.int64)
    hq = pid % Hq
    offs_s = tl.arange(0, S_PAD)
    s_ok = offs_s < S
    offs_d = tl.arange(0, D_PAD)
    d_ok = offs_d < D
    base = pid.to(tl.int64) * S
    lse = tl.load(plse_ptr + base + offs_s, mask=s_ok, other=-float("inf"))
    w = tl.exp2(lse - tl.max(lse, axis=0))
    w = w / tl.sum(w, axis=0)
    po = tl.load(po_ptr + (base + offs_s)[:, None] * D + offs_d[None, :], mask=s_ok[:, None] & d_ok[None, :],
                 other=0.0)
    o = tl.sum(w[:, None] * po, axis=0)
    tl.store(o_ptr + b * stride_ob + hq * stride_oh + offs_d, o.to(o_ptr.dtype.element_ty), mask=d_ok)


# ------------------------------------------------------------------------------------------------ launcher


def _num_splits(pairs: int, L: int, num_sms: int, block_n: int, min_chunk: int) -> tuple[int, int]:
    """(S, CHUNK): ~2 programs per SM over the B*Hkv (batch, KV head) pairs, splits >= min_chunk positions,
    CHUNK a multiple of BLOCK_N."""
    s = 1 if pairs >= 2 * num_sms else max(1, min(triton.cdiv(2 * num_sms, pairs), L // min_chunk))
    chunk = triton.cdiv(triton.cdiv(L, s), block_n) * block_n
    return triton.cdiv(L, chunk), chunk


def flash_decoding(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, _splits: int | None = None,
                   _block_n: int | None = None, _num_sms: int | None = None,
                   _g_pad: int | None = None) -> torch.Tensor:
    """Decode attention: q [B, Hq, D], k_cache/v_cache [B, Hkv, L, D] (bf16 or fp16), Hq a multiple of Hkv.

    The underscored arguments override the launcher's choices; tests use them to force one split (the direct
    path), many splits, and small tiles under the interpreter. ``_g_pad=1`` puts MHA (G = 1) on the FMA path.
    """
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(f"expected q [B, Hq, D] and k/v [B, Hkv, L, D], got {tuple(q.shape)}, "
                         f"{tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    B, Hq, D = q.shape
    Bk, Hkv, L, Dk = k_cache.shape
    if Bk != B or Dk != D or Hkv == 0 or Hq % Hkv:
        raise ValueError(f"q {tuple(q.shape)} does not match the cache {tuple(k_cache.shape)} (Hq % Hkv must be 0)")
    if q.dtype not in (torch.bfloat16, torch.float16) or k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise TypeError(f"q, k_cache and v_cache must all be bf16 or all fp16, got {q.dtype}, {k_cache.dtype}, "
                        f"{v_cache.dtype}")
    q, k_cache, v_cache = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k_cache, v_cache))
    o = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
    if o.numel() == 0:
        return o
    if L == 0:
        raise ValueError("softmax over an empty KV cache is undefined (L = 0)")
    G = Hq // Hkv
    # MHA (G = 1) too goes to the MMA path, its one query row padded to 16: on the H200 mha_b4_16k took 256 us
    # there against 411-440 us on the FMA path at any split (benchmarks/data/runs/round7/tune_mha_mma.json).
    G_PAD = _g_pad or max(_G_DOT, triton.next_power_of_2(G))
    D_PAD = triton.next_power_of_2(D)
    interp = _interpreting()
    num_sms = _num_sms or _sm_count(q)
    block_n = _block_n or (32 if interp else _BLOCK_N)
    if _splits is None:
        S, chunk = _num_splits(B * Hkv, L, num_sms, block_n, 32 if interp else _MIN_CHUNK)
        if _block_n is None and not interp and B * Hkv * S >= 2 * num_sms:
            # >= 2 programs per SM: 32-position tiles (3 stages of 8 KB of K and 8 KB of V) let 3-4 be resident.
            # On the H200 b64_4k_gqa8 took 257 us at BLOCK_N = 32 against 292 us at 64, b16_16k 257 against 260
            # (benchmarks/data/runs/round7/tune_decode_splitk.json); b1_64k (256 programs) keeps 64.
            block_n = 32
            chunk = triton.cdiv(chunk, block_n) * block_n
    else:
        chunk = triton.cdiv(triton.cdiv(L, _splits), block_n) * block_n
        S = triton.cdiv(L, chunk)
    direct = S == 1
    if direct:
        po = plse = o  # not touched by the DIRECT specialization
    else:
        po = torch.empty((B, Hq, S, D), dtype=torch.float32, device=q.device)
        plse = torch.empty((B, Hq, S), dtype=torch.float32, device=q.device)
    _decode_split_kernel[(B * Hkv, S)](
        q, k_cache, v_cache, o, po, plse,
        Hkv, L, chunk, S,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), o.stride(0), o.stride(1),
        D ** -0.5 * LOG2E,
        G=G, G_PAD=G_PAD, D=D, D_PAD=D_PAD, BLOCK_N=block_n, NUM_STAGES=1 if interp else 3, DIRECT=direct,
        num_warps=4)
    if not direct:
        _decode_merge_kernel[(B * Hq,)](po, plse, o, Hq, S, o.stride(0), o.stride(1),
                                        D=D, D_PAD=D_PAD, S_PAD=triton.next_power_of_2(S), num_warps=4)
    return o


def kernel(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
    """Submission entry point: decode attention over the whole cache."""
    return flash_decoding(q, k_cache, v_cache)

"""Hazard draws: every task's reference.py offers an input distribution that breaks the numerically naive formula
its guidance warns about (exp without the max subtraction, fp16 squares, one-pass variance, 16-bit accumulators,
bf16 state, signed-bit key order, ...).

Per task, a naive variant written in plain PyTorch fails the task's tolerance on the hazard draw of the smoke
shape (CPU), while the same computation done the way the guidance says passes on every distribution. Where the
catalog's own draw does not already catch the naive variant, the test shows that too: the hazard draw is what
catches it. The expert references are run on every distribution by test_suite_data.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from d2kgrade.schema import Workload
from d2kgrade.suite import Suite
from runner.direct import compare_outputs, load_reference
from runner.inputs import WorkloadSpec, as_tuple, distributions, make_inputs

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
SEEDS = (0, 1, 2)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # naive variants overflow, as intended


def _ref(task_id: str) -> ModuleType:
    return load_reference(SUITE.task_dir(task_id))


# ------------------------------------------------------------------------------------- shared building blocks


def chunked_matmul(A: torch.Tensor, B: torch.Tensor, chunk: int, acc_dtype: torch.dtype) -> torch.Tensor:
    """A [M, K] @ B [N, K]^T with the running sum rounded to ``acc_dtype`` after every ``chunk``-deep K tile
    (each tile's product is exact-ish fp32, as one tensor-core tile is): an fp16 accumulator is
    ``tl.dot(a, b, out_dtype=tl.float16)`` carried across the K loop."""
    acc = torch.zeros(A.shape[0], B.shape[0])
    for k0 in range(0, A.shape[1], chunk):
        acc = (acc + A[:, k0:k0 + chunk].float() @ B[:, k0:k0 + chunk].float().T).to(acc_dtype).float()
    return acc


def round_tf32(t: torch.Tensor) -> torch.Tensor:
    """fp32 rounded to tf32 (10 explicit mantissa bits, nearest even): what tl.dot's default input precision
    does to fp32 operands on NVIDIA tensor cores."""
    bits = t.contiguous().view(torch.int32)
    bits = (bits + 0x0FFF + ((bits >> 13) & 1)) & ~0x1FFF
    return bits.view(torch.float32)


def attention_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, stable: bool,
                   mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 softmax(q k^T / sqrt(D)) v over the last two dims, and the natural-log LSE; ``stable``: subtract the
    row max before exp (the online softmax's running max), otherwise exponentiate the raw scores."""
    s = (q.float() @ k.float().transpose(-1, -2)) * q.shape[-1] ** -0.5
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    m = s.amax(-1, keepdim=True) if stable else torch.zeros_like(s[..., :1])
    p = torch.exp(s - m)
    denom = p.sum(-1, keepdim=True)
    return (p @ v.float()) / denom, (torch.log(denom) + m).squeeze(-1)


# ------------------------------------------------------------------------------------- one function per task
# Each takes the task's inputs (and scalars) plus one switch: the naive formula (False) or the guidance's (True).


def softmax(x, *, right):
    xf = x.float()
    if right:
        xf = xf - xf.amax(-1, keepdim=True)
    e = torch.exp(xf)
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def cross_entropy(logits, target, *, right):
    z = logits.float()
    m = z.amax(-1, keepdim=True) if right else torch.zeros_like(z[:, :1])
    e = torch.exp(z - m)
    s = e.sum(-1, keepdim=True)
    valid = target != -100
    tc = torch.where(valid, target, 0)
    loss = torch.where(valid, (torch.log(s) + m).squeeze(1) - z.gather(1, tc[:, None]).squeeze(1), 0.0)
    grad = e / s
    grad[torch.arange(len(tc)), tc] -= 1.0
    return loss, (grad * valid[:, None]).to(logits.dtype)


def layernorm(x, w, b, *, right):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = ((xf - mean) ** 2).mean(-1, keepdim=True) if right else (xf * xf).mean(-1, keepdim=True) - mean * mean
    rstd = torch.rsqrt(var + 1e-5)
    return ((xf - mean) * rstd * w.float() + b.float()).to(x.dtype), mean.squeeze(-1), rstd.squeeze(-1)


def layernorm_backward(dy, x, w, mean, rstd, *, right, programs=4):
    """dx in fp32 from the closed form; dw and db through a [programs, N] partial buffer (program p sums rows p,
    p + programs, ... in fp32), kept in fp32 (right) or in bf16, then reduced in fp32."""
    rs = rstd[:, None]
    xhat = (x.float() - mean[:, None]) * rs
    g = dy.float() * w.float()
    dx = rs * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    keep = torch.float32 if right else dy.dtype
    dwp = torch.stack([(dy.float()[p::programs] * xhat[p::programs]).sum(0) for p in range(programs)])
    dbp = torch.stack([dy.float()[p::programs].sum(0) for p in range(programs)])
    return dx.to(x.dtype), dwp.to(keep).float().sum(0), dbp.to(keep).float().sum(0)


def rmsnorm_residual(x, residual, w, *, right):
    h = x.float() + residual.float()
    hs = h if right else h.to(x.dtype)            # the naive kernel squares h in the storage dtype
    ms = (hs * hs).float().mean(-1, keepdim=True)
    return (h * torch.rsqrt(ms + 1e-6) * w.float()).to(x.dtype), h.to(x.dtype)


def swiglu(x, *, right):
    inter = x.shape[1] // 2
    g, u = x[:, :inter].float(), x[:, inter:].float()
    sig = 1.0 / (1.0 + torch.exp(-g)) if right else torch.exp(g) / (1.0 + torch.exp(g))
    return (g * sig * u).to(x.dtype)


def gemm_bf16(A, B, *, right):
    return chunked_matmul(A, B, 32, torch.float32 if right else A.dtype).to(A.dtype)


def gemm_bias_act(X, W, b, *, right):
    u = X.float() @ W.float().T + b.float()
    z = math.sqrt(2.0 / math.pi) * (u + 0.044715 * u ** 3)
    if right:
        t = torch.tanh(z)
    else:  # tanh built from exp(2z): inf/inf = NaN once z > 44
        e = torch.exp(2.0 * z)
        t = (e - 1.0) / (e + 1.0)
    return (0.5 * u * (1.0 + t)).to(X.dtype)


def gemm_splitk(A, B, *, right, splits=4):
    """Split-K: ``splits`` contiguous K slices, each accumulated in fp32, their partials kept in fp32 (right) or
    rounded to the 16-bit input dtype (bf16 atomics, a 16-bit partial buffer) before the sum."""
    kp = -(-A.shape[1] // splits)
    parts = [A[:, i * kp:(i + 1) * kp].float() @ B[:, i * kp:(i + 1) * kp].float().T for i in range(splits)]
    return sum(p if right else p.to(A.dtype).float() for p in parts).to(A.dtype)


def gemm_fp8_blockwise(A, B, a_s, b_s, *, right):
    """Per-block promotion: each 128-deep K block's fp32 partial times a_s[:, kb] * b_s[n // 128, kb], added into
    an fp32 accumulator (right) or one kept in bf16 (the output buffer, bf16 split-K partials)."""
    acc = torch.zeros(A.shape[0], B.shape[0])
    for kb in range(A.shape[1] // 128):
        ks = slice(kb * 128, (kb + 1) * 128)
        part = A[:, ks].float() @ B[:, ks].float().T
        acc = acc + part * a_s[:, kb:kb + 1] * b_s[:, kb].repeat_interleave(128)[None, :]
        if not right:
            acc = acc.to(torch.bfloat16).float()
    return acc.to(torch.bfloat16)


def grouped_gemm_moe(X, W, expert_offsets, *, right):
    Y = torch.zeros(X.shape[0], W.shape[1], dtype=X.dtype)
    o = expert_offsets.tolist()
    for e in range(W.shape[0]):
        if o[e + 1] > o[e]:
            Y[o[e]:o[e + 1]] = chunked_matmul(X[o[e]:o[e + 1]], W[e], 16,
                                              torch.float32 if right else X.dtype).to(X.dtype)
    return Y


def conv2d_implicit_gemm(x, w, *, stride, pad, right):
    """Implicit GEMM with (r, s) outer and channels inner, in 8-channel K tiles, fp32 or 16-bit accumulator."""
    N, H, W_, C = x.shape
    K, R, S, _ = w.shape
    P, Q = (H + 2 * pad - R) // stride + 1, (W_ + 2 * pad - S) // stride + 1
    xp = F.pad(x, (0, 0, pad, pad, pad, pad))
    cols = torch.stack([xp[:, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride, :]
                        for r in range(R) for s in range(S)], dim=3)              # [N, P, Q, R*S, C]
    acc = chunked_matmul(cols.reshape(N * P * Q, R * S * C), w.reshape(K, R * S * C), 8,
                         torch.float32 if right else x.dtype)
    return acc.view(N, P, Q, K).to(x.dtype)


def flash_attention_fwd(q, k, v, *, causal, right):
    G = q.shape[1] // k.shape[1]
    S = q.shape[2]
    mask = torch.ones(S, S, dtype=torch.bool).triu(1) if causal else None
    o, lse = attention_rows(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1), stable=right, mask=mask)
    return o.to(q.dtype), lse


def flash_decoding(q, k_cache, v_cache, *, right):
    B, Hq, D = q.shape
    G = Hq // k_cache.shape[1]
    o, _ = attention_rows(q.view(B, -1, G, D), k_cache, v_cache, stable=right)
    return o.reshape(B, Hq, D).to(q.dtype)


def paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, *, right):
    B, Hq, D = q.shape
    P, Hkv = k_cache.shape[1], k_cache.shape[2]
    o = torch.empty_like(q)
    for b, c in enumerate(context_lens.tolist()):
        pages = block_tables[b, :(c + P - 1) // P].long()
        k = k_cache[pages].reshape(-1, Hkv, D)[:c].transpose(0, 1)                # [Hkv, c, D]
        v = v_cache[pages].reshape(-1, Hkv, D)[:c].transpose(0, 1)
        ob, _ = attention_rows(q[b].view(Hkv, -1, D), k, v, stable=right)
        o[b] = ob.reshape(Hq, D).to(q.dtype)
    return o


def rotary_embedding(q, k, positions, cos_cache, sin_cache, *, style, right):
    """The rotation in fp32 (right), or with cos/sin, products and sums rounded to bf16 (a kernel that never
    upcasts)."""
    dt = torch.float32 if right else q.dtype
    c = cos_cache[positions].to(dt)[:, None, :]
    s = sin_cache[positions].to(dt)[:, None, :]

    def rotate(x):
        xd = x.to(dt)
        if style == "neox":
            x1, x2 = xd.chunk(2, dim=-1)
            return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)
        x1, x2 = xd[..., 0::2], xd[..., 1::2]
        return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2).to(x.dtype)

    return rotate(q), rotate(k)


def rotary_on_the_fly(q, k, positions, cos_cache, sin_cache, *, style, right):
    """The naive alternative to the cache gather: cos/sin of pos * inv_freq computed in fp32 (accurate sin/cos
    of an angle already rounded to fp32: ~1e5 rad carries ~4e-3 rad of error)."""
    if right:
        return rotary_embedding(q, k, positions, cos_cache, sin_cache, style=style, right=True)
    half = cos_cache.shape[1]
    inv_freq = (10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)).float()
    ang = positions.float()[:, None] * inv_freq[None, :]
    table = torch.zeros_like(cos_cache), torch.zeros_like(sin_cache)
    table[0][positions], table[1][positions] = torch.cos(ang), torch.sin(ang)
    return rotary_embedding(q, k, positions, *table, style=style, right=True)


def selective_scan(u, delta, A, B, C, D_skip, z, delta_bias, *, right):
    """The sequential recurrence in fp32, with the state h kept in fp32 (right) or stored as bf16 each step."""
    dt = F.softplus(delta.float() + delta_bias[None, :, None])
    h = torch.zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for t in range(u.shape[2]):
        h = torch.exp(dt[:, :, t, None] * A[None]) * h + (dt[:, :, t] * u[:, :, t].float())[..., None] \
            * B[:, None, :, t].float()
        if not right:
            h = h.to(u.dtype).float()
        ys.append((h * C[:, None, :, t].float()).sum(-1))
    y = torch.stack(ys, dim=-1) + D_skip[None, :, None] * u.float()
    return (y * F.silu(z.float())).to(u.dtype)


def causal_conv1d(x, w, bias, cu_seqlens, *, right):
    """The W-tap chain with the sequence-start mask, summed in fp32, each product w*x taken in fp32 (right) or in
    bf16, as ``acc += x * w`` does with bf16 operands and an fp32 accumulator; SiLU in fp32 either way."""
    ref = _ref("causal_conv1d")
    B, L, D = x.shape
    starts = ref.token_starts(cu_seqlens, L, x.device)
    t = torch.arange(L)
    acc = bias.float().expand(B, L, D).clone()
    for j in range(w.shape[1]):
        shift = w.shape[1] - 1 - j
        tap = F.pad(x[:, :L - shift], (0, 0, shift, 0)) if shift else x
        prod = w[:, j].float() * tap.float() if right else (w[:, j] * tap).float()
        acc = acc + prod * ((t - shift) >= starts)[None, :, None]
    return (acc * torch.sigmoid(acc)).to(x.dtype)


def prefix_scan(x, *, right):
    """An integer scan (right) or one that accumulates every dtype in fp32 (exact only below 2^24)."""
    return torch.cumsum(x, -1, dtype=x.dtype) if right else torch.cumsum(x.float(), -1).to(x.dtype)


def histogram(x, *, NB, right, block=1024):
    """Per block of keys: a private count added in (right), or load-add-store without atomics, where equal keys
    in one block collapse into a single increment."""
    counts = torch.zeros(NB, dtype=torch.int32)
    for b0 in range(0, x.numel(), block):
        keys = x[b0:b0 + block].long()
        if right:
            counts += torch.bincount(keys, minlength=NB).to(torch.int32)
        else:
            counts[keys] = counts[keys] + 1
    return counts


def topk(x, *, k, right):
    """Radix-select keys: the order-preserving transform (right: bits ^ 0xFFFF for negatives, ^ 0x8000 for
    positives) or the raw bit pattern read as a signed integer, which orders negative floats backwards."""
    nbits = 8 * x.element_size()
    bits = x.view({16: torch.int16, 32: torch.int32}[nbits]).to(torch.int64)
    if right:
        mask = (1 << nbits) - 1
        u = bits & mask
        bits = torch.where((u >> (nbits - 1)) == 1, u ^ mask, u ^ (1 << (nbits - 1)))
    idx = torch.topk(bits, k, dim=-1, sorted=True).indices
    return x.gather(-1, idx), idx


def transpose(X, *, right):
    """An exact copy (right), or one through arithmetic that flushes subnormals to zero (x * 1 compiled with
    -ftz, the CUDA fast-math default)."""
    Y = X.t().contiguous()
    if right:
        return Y
    return torch.where(Y.abs() < torch.finfo(Y.dtype).tiny, torch.copysign(torch.zeros_like(Y), Y), Y)


def quant_absmax(x, *, G, qdtype, right):
    M, N = x.shape
    qt = torch.float8_e4m3fn if qdtype == "fp8_e4m3" else torch.int8
    qmax = 448.0 if qt == torch.float8_e4m3fn else 127.0
    xf = x.float().view(M, N // G, G)
    amax = xf.abs().amax(-1)
    s = (amax.clamp(min=1e-12) if right else amax) / qmax
    y = (xf / s[..., None]).clamp(-qmax, qmax)
    q = y.to(qt) if qt == torch.float8_e4m3fn else torch.round(y).to(qt)
    return q.view(M, N), s


def embedding_bag(table, indices, offsets, per_sample_weights, *, right):
    """Each bag's weighted rows added one lookup after another, into fp32 (right) or the table's dtype."""
    lengths = offsets.diff()
    acc_dtype = torch.float32 if right else table.dtype
    acc = torch.zeros(lengths.numel(), table.shape[1], dtype=acc_dtype)
    for j in range(int(lengths.max()) if lengths.numel() else 0):
        live = lengths > j
        i = offsets[:-1][live] + j
        acc[live] = (acc[live].float() + per_sample_weights[i, None] * table[indices[i]].float()).to(acc_dtype)
    return acc.float()


def moe_permute(logits, X, *, k, right):
    """The reference's routing and stable counting-sort permutation, with ties broken toward the lower (right)
    or the higher expert index."""
    T, E = logits.shape
    if right:
        ids = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k]
    else:
        ids = E - 1 - torch.sort(logits.flip(-1), dim=-1, descending=True, stable=True).indices[:, :k]
    weights = torch.softmax(logits.gather(-1, ids), dim=-1)
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    row_id_map = torch.empty(T * k, dtype=torch.int64)
    row_id_map[order] = torch.arange(T * k)
    offsets = torch.zeros(E + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.bincount(flat, minlength=E), dim=0)
    return (ids.to(torch.int32), weights, offsets.to(torch.int32), row_id_map.view(T, k).to(torch.int32),
            X[order // k])


def spmv_csr(row_ptr, col_idx, values, x, *, right):
    """Products in fp32 (right) or with both operands rounded to tf32, summed per row in fp32."""
    M = row_ptr.numel() - 1
    rows = torch.repeat_interleave(torch.arange(M), (row_ptr[1:] - row_ptr[:-1]).long())
    v, xv = values, x[col_idx.long()]
    if not right:
        v, xv = round_tf32(v), round_tf32(xv)
    return torch.zeros(M).index_add_(0, rows, v * xv)


# ------------------------------------------------------------------------------------- the hazard per task


@dataclass(frozen=True)
class Hazard:
    dist: str
    """The distribution of reference.py that breaks the naive formula."""
    fn: Callable[..., Any]
    """``fn(*inputs, **scalars, right=bool)``: the naive formula (False) or the guidance's (True)."""
    catalog_catches: bool = False
    """Whether the catalog's own draw already breaks the naive formula on the smoke shape (the hazard draw then
    breaks it by a wider margin, and at any size)."""
    dtype: str | None = None
    """A dtype of the task to run the smoke shape in instead of the smoke workload's."""
    more: tuple[Callable[..., Any], ...] = ()
    """Other naive formulas that the same draw breaks (their ``right=True`` is ``fn``'s)."""


HAZARDS: dict[str, Hazard] = {
    "softmax": Hazard("shifted", softmax),
    "cross_entropy": Hazard("shifted", cross_entropy),
    "layernorm": Hazard("shifted", layernorm),
    # bf16 partials already miss the 1e-3 relative dw/db bound on the catalog draw at M = 67 (2.6x at most);
    # "cancelling" misses it by 45x.
    "layernorm_backward": Hazard("cancelling", layernorm_backward, catalog_catches=True),
    "rmsnorm_residual": Hazard("outlier_channels", rmsnorm_residual),
    "swiglu": Hazard("saturated", swiglu),
    "gemm_bf16": Hazard("cancelling", gemm_bf16),
    "gemm_bias_act": Hazard("wide_range", gemm_bias_act),
    "gemm_splitk": Hazard("cancelling", gemm_splitk),
    "gemm_fp8_blockwise": Hazard("cancelling", gemm_fp8_blockwise),
    "grouped_gemm_moe": Hazard("cancelling", grouped_gemm_moe),
    "conv2d_implicit_gemm": Hazard("cancelling", conv2d_implicit_gemm),
    "flash_attention_fwd": Hazard("offset", flash_attention_fwd),
    "flash_decoding": Hazard("offset", flash_decoding),
    "paged_attention_decode": Hazard("offset", paged_attention_decode),
    # rope's 1e-3 atol already catches bf16 math and fp32 angles on the catalog draw (a few dozen elements);
    # "cancelling" puts a quarter of the outputs 20x past the bound.
    "rotary_embedding": Hazard("cancelling", rotary_embedding, catalog_catches=True, more=(rotary_on_the_fly,)),
    # A bf16 state sometimes misses the bound on the catalog draw too (4 of 20 seeds, at 1.1x); never passes
    # "long_memory".
    "selective_scan": Hazard("long_memory", selective_scan, catalog_catches=True),
    "causal_conv1d": Hazard("dc_offset", causal_conv1d),
    "prefix_scan": Hazard("large_ints", prefix_scan, dtype="int32"),
    # Non-atomic increments lose every repeated key in a block, which any realistic draw has.
    "histogram": Hazard("hot_tail_runs", histogram, catalog_catches=True),
    "topk": Hazard("negative", topk),
    "transpose": Hazard("specials", transpose),
    "quant_absmax": Hazard("outliers", quant_absmax),
    # A bf16 running sum misses the 1e-3 + 1e-4|out| bound on any bag of more than a few lookups.
    "embedding_bag": Hazard("repeats_positive", embedding_bag, catalog_catches=True),
    "moe_permute": Hazard("quantized_ties", moe_permute),
    "spmv_csr": Hazard("scaled_rows", spmv_csr),
}


def smoke_spec(task_id: str) -> WorkloadSpec:
    task = SUITE.load_task(task_id)
    hz = HAZARDS[task_id]
    w = task.smoke if hz.dtype is None else Workload(name="smoke", params=dict(task.smoke.params), dtype=hz.dtype)
    return WorkloadSpec.resolve(task, w)


def failures(task_id: str, spec: WorkloadSpec, fn: Callable[..., Any], inputs: tuple[Any, ...],
             right: bool) -> list[str]:
    ref = _ref(task_id)
    expected = as_tuple(ref.reference(*inputs, **spec.scalars))
    got = fn(*[t.clone() for t in inputs], **spec.scalars, right=right)
    return [f"{m.name}: {m.reason}" for m in compare_outputs(spec, got, expected, inputs=inputs, ref=ref) if not m.ok]


def test_every_task_has_a_hazard_draw():
    assert sorted(HAZARDS) == sorted(SUITE.task_ids)
    for task_id, hz in HAZARDS.items():
        dists = distributions(_ref(task_id))
        assert hz.dist in dists[1:], f"{task_id}: {hz.dist!r} is not one of the non-catalog distributions {dists}"


@pytest.mark.parametrize("task_id", sorted(HAZARDS))
def test_naive_formula_fails_on_the_hazard_draw(task_id):
    hz = HAZARDS[task_id]
    spec = smoke_spec(task_id)
    ref = _ref(task_id)
    for fn in (hz.fn, *hz.more):
        for seed in SEEDS:
            inputs = make_inputs(ref, spec, seed=seed, device="cpu", dist=hz.dist)
            assert failures(task_id, spec, fn, inputs, right=False), \
                f"{task_id}: the naive {fn.__name__} passed the {hz.dist!r} draw (seed {seed})"
            if not hz.catalog_catches:
                catalog = make_inputs(ref, spec, seed=seed, device="cpu", dist=distributions(ref)[0])
                assert failures(task_id, spec, fn, catalog, right=False) == [], \
                    f"{task_id}: the catalog draw already catches {fn.__name__} (set catalog_catches)"


@pytest.mark.parametrize("task_id", sorted(HAZARDS))
def test_the_guidance_formula_passes_every_draw(task_id):
    spec = smoke_spec(task_id)
    ref = _ref(task_id)
    for i, dist in enumerate(distributions(ref)):
        for seed in SEEDS:
            inputs = make_inputs(ref, spec, seed=10 * i + seed, device="cpu", dist=dist)
            assert failures(task_id, spec, HAZARDS[task_id].fn, inputs, right=True) == [], (dist, seed)

"""Every property under unusual names: a 'walker' per (team = b*Hkv + h, piece) carries a 'crew' of the G query
heads of a KV head (padded to 16 for tl.dot; a lone head folds its scores with FMAs), streams 64-row 'slabs' with
evict_first through a 3-deep tl.range, keeps (top, mass, bag) as an exp2 online softmax with c = D^-0.5 / ln 2,
and the last piece of a team to check in (an atomic arrival counter) folds the pieces with exp2 weights. The
number of pieces follows the SM count; with one piece the walker writes o directly."""
import math

import torch
import triton
import triton.language as tl

RLN2 = 1.0 / math.log(2.0)


@triton.jit
def _fold(crew_q, slab, c, WIDE: tl.constexpr):
    if WIDE:
        return tl.dot(crew_q, tl.trans(slab)) * c
    return tl.sum(crew_q[:, None, :] * slab.to(tl.float32)[None, :, :], axis=2)


@triton.jit
def _walker(qq, kk, vv, oo, scratch_o, scratch_w, arrivals, n_kv, length, piece, n_pieces, c,
            s_qb, s_qh, s_kb, s_kh, s_kl, s_ob, s_oh,
            CREW: tl.constexpr, CREW_P: tl.constexpr, DH: tl.constexpr, STRIDE_N: tl.constexpr,
            DEPTH: tl.constexpr, WIDE: tl.constexpr, LONE: tl.constexpr, NP_PAD: tl.constexpr):
    who = tl.program_id(0)
    which = tl.program_id(1)
    bb = (who // n_kv).to(tl.int64)
    hh = who % n_kv
    seat = tl.arange(0, CREW_P)
    seated = seat < CREW
    lanes = tl.arange(0, DH)
    heads = hh * CREW + seat
    crew_q = tl.load(qq + bb * s_qb + heads[:, None] * s_qh + lanes[None, :], mask=seated[:, None], other=0.0)
    if not WIDE:
        crew_q = crew_q.to(tl.float32) * c
    a = which * piece
    z = tl.minimum(length, a + piece)
    top = tl.full([CREW_P], float("-inf"), tl.float32)
    mass = tl.zeros([CREW_P], tl.float32)
    bag = tl.zeros([CREW_P, DH], tl.float32)
    origin = bb * s_kb + hh.to(tl.int64) * s_kh
    for t in tl.range(a, z, STRIDE_N, num_stages=DEPTH):
        here = t + tl.arange(0, STRIDE_N)
        live = here < z
        where = origin + here.to(tl.int64)[:, None] * s_kl + lanes[None, :]
        slab = tl.load(kk + where, mask=live[:, None], other=0.0, eviction_policy="evict_first")
        e = tl.where(live[None, :], _fold(crew_q, slab, c, WIDE), float("-inf"))
        peak = tl.maximum(top, tl.max(e, axis=1))
        shrink = tl.exp2(top - peak)
        w = tl.exp2(e - peak[:, None])
        mass = mass * shrink + tl.sum(w, axis=1)
        vals = tl.load(vv + where, mask=live[:, None], other=0.0, eviction_policy="evict_first")
        if WIDE:
            bag = tl.dot(w.to(vals.dtype), vals, bag * shrink[:, None])
        else:
            bag = bag * shrink[:, None] + tl.sum(w[:, :, None] * vals.to(tl.float32)[None, :, :], axis=1)
        top = peak
    if LONE:
        tl.store(oo + bb * s_ob + heads[:, None] * s_oh + lanes[None, :], (bag / mass[:, None]).to(oo.dtype.element_ty),
                 mask=seated[:, None])
    else:
        cell = ((bb * n_kv + hh) * CREW + seat) * n_pieces + which
        tl.store(scratch_o + cell[:, None] * DH + lanes[None, :], bag / mass[:, None], mask=seated[:, None])
        tl.store(scratch_w + cell, top + tl.log2(mass), mask=seated)
        done = tl.atomic_add(arrivals + who, 1, sem="acq_rel")
        if done == n_pieces - 1:
            js = tl.arange(0, NP_PAD)
            first = ((bb * n_kv + hh) * CREW + seat) * n_pieces
            wts = tl.load(scratch_w + first[:, None] + js[None, :], mask=seated[:, None] & (js < n_pieces)[None, :],
                          other=float("-inf"), cache_modifier=".cg")
            f = tl.exp2(wts - tl.max(wts, axis=1)[:, None])
            f = f / tl.sum(f, axis=1)[:, None]
            res = tl.zeros([CREW_P, DH], tl.float32)
            for j in range(0, n_pieces):
                part = tl.load(scratch_o + (first + j)[:, None] * DH + lanes[None, :], mask=seated[:, None],
                               other=0.0, cache_modifier=".cg")
                res += tl.sum(tl.where(js[None, :] == j, f, 0.0), axis=1)[:, None] * part
            tl.store(oo + bb * s_ob + heads[:, None] * s_oh + lanes[None, :], res.to(oo.dtype.element_ty),
                     mask=seated[:, None])
            tl.atomic_xchg(arrivals + who, 0)


def _up(a: int, b: int) -> int:
    return (a + b - 1) // b


def kernel(q, k_cache, v_cache):
    B, Hq, DH = q.shape
    _, n_kv, length, _ = k_cache.shape
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    crew = Hq // n_kv
    wide = crew > 1
    crew_p = max(16, triton.next_power_of_2(crew)) if wide else 1
    sm = torch.cuda.get_device_properties(q.device).multi_processor_count
    teams = B * n_kv
    n_pieces = 1 if teams >= 2 * sm else max(1, min(_up(2 * sm, teams), length // 256))
    piece = _up(_up(length, n_pieces), 64) * 64
    n_pieces = _up(length, piece)
    arrivals = torch.zeros(teams, dtype=torch.int32, device=q.device)
    scratch_o = torch.empty((B, Hq, n_pieces, DH), dtype=torch.float32, device=q.device)
    scratch_w = torch.empty((B, Hq, n_pieces), dtype=torch.float32, device=q.device)
    oo = torch.empty_like(q)
    _walker[(teams, n_pieces)](q, k_cache, v_cache, oo, scratch_o, scratch_w, arrivals, n_kv, length, piece,
                               n_pieces, DH ** -0.5 * RLN2, q.stride(0), q.stride(1), k_cache.stride(0),
                               k_cache.stride(1), k_cache.stride(2), oo.stride(0), oo.stride(1),
                               CREW=crew, CREW_P=crew_p, DH=DH, STRIDE_N=64, DEPTH=3, WIDE=wide,
                               LONE=n_pieces == 1, NP_PAD=triton.next_power_of_2(n_pieces), num_warps=4)
    return oo

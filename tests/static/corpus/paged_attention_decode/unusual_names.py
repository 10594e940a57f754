"""Every property under unusual names: a persistent 'clerk' per program walks 'tickets' (chunk, KV head) from a
'ledger' it builds on the device (cumsum of cdiv(len, SPAN) over the batch); a 'crew' of the G query heads of a KV
head is one [CREW_P, DH] block for tl.dot; each 64-token 'sip' reads its 'sheet' of page ids as a vector inside a
3-deep tl.range, addresses rows as tl.cast(sheet, int64) * hop + (tok & (P - 1)) * step, evict_first; the tail sip
is the only masked one; c = D^-0.5 / ln 2 scales the fp32 scores and exp2 runs everywhere. A one-piece sequence
writes o straight away; otherwise the last piece to check in (an atomic counter) folds the pieces."""
import math

import torch
import triton
import triton.language as tl

RLN2 = 1.0 / math.log(2.0)


@triton.jit
def _sip(crew_q, c, top, mass, bag, kk, vv, sheet_row, t0, z, hop, step,
         DH: tl.constexpr, P: tl.constexpr, WIDTH: tl.constexpr, EDGE: tl.constexpr):
    tok = t0 + tl.arange(0, WIDTH)
    lanes = tl.arange(0, DH)
    if EDGE:
        keep = tok < z
        sheet = tl.load(sheet_row + tok // P, mask=keep, other=0)
    else:
        sheet = tl.load(sheet_row + tok // P)
    spot = tl.cast(sheet, tl.int64) * hop + (tok & (P - 1)) * step
    if EDGE:
        slab = tl.load(kk + spot[:, None] + lanes[None, :], mask=keep[:, None], other=0.0, eviction_policy="evict_first")
        vals = tl.load(vv + spot[:, None] + lanes[None, :], mask=keep[:, None], other=0.0, eviction_policy="evict_first")
        e = tl.where(keep[None, :], tl.dot(crew_q, tl.trans(slab)) * c, float("-inf"))
    else:
        slab = tl.load(kk + spot[:, None] + lanes[None, :], eviction_policy="evict_first")
        vals = tl.load(vv + spot[:, None] + lanes[None, :], eviction_policy="evict_first")
        e = tl.dot(crew_q, tl.trans(slab)) * c
    peak = tl.maximum(top, tl.max(e, axis=1))
    shrink = tl.exp2(top - peak)
    w = tl.exp2(e - peak[:, None])
    mass = mass * shrink + tl.sum(w, axis=1)
    bag = tl.dot(w.to(vals.dtype), vals, bag * shrink[:, None])
    return peak, mass, bag


@triton.jit
def _clerk(qq, kk, vv, sheets, spans, oo, jot_o, jot_w, counter, B, n_kv, c,
           s_qb, s_qh, hop, step, s_kh, s_sb, s_ob, s_oh,
           CREW: tl.constexpr, CREW_P: tl.constexpr, DH: tl.constexpr, P: tl.constexpr, WIDTH: tl.constexpr,
           SPAN: tl.constexpr, B_P: tl.constexpr, CLERKS: tl.constexpr, DEPTH: tl.constexpr):
    rows = tl.arange(0, B_P)
    lens = tl.load(spans + rows, mask=rows < B, other=0)
    pieces_of = (lens + SPAN - 1) // SPAN
    ledger = tl.cumsum(pieces_of, axis=0)
    seat = tl.arange(0, CREW_P)
    seated = seat < CREW
    lanes = tl.arange(0, DH)
    for ticket in tl.range(tl.program_id(0), tl.sum(pieces_of, axis=0) * n_kv, CLERKS):
        piece_id = ticket // n_kv
        hh = ticket % n_kv
        bb = tl.sum((ledger <= piece_id).to(tl.int32), axis=0)
        mine = rows == bb
        n_len = tl.sum(tl.where(mine, lens, 0), axis=0)
        pieces = tl.sum(tl.where(mine, pieces_of, 0), axis=0)
        k_in = piece_id - tl.sum(tl.where(mine, ledger - pieces_of, 0), axis=0)
        a = k_in * SPAN
        z = tl.minimum(n_len, a + SPAN)
        heads = hh * CREW + seat
        crew_q = tl.load(qq + bb.to(tl.int64) * s_qb + heads[:, None] * s_qh + lanes[None, :], mask=seated[:, None],
                         other=0.0)
        sheet_row = sheets + bb.to(tl.int64) * s_sb
        k_h = kk + hh.to(tl.int64) * s_kh
        v_h = vv + hh.to(tl.int64) * s_kh
        top = tl.full([CREW_P], float("-inf"), tl.float32)
        mass = tl.zeros([CREW_P], tl.float32)
        bag = tl.zeros([CREW_P, DH], tl.float32)
        whole = (z - a) // WIDTH
        for r in tl.range(0, whole, num_stages=DEPTH):
            top, mass, bag = _sip(crew_q, c, top, mass, bag, k_h, v_h, sheet_row, a + r * WIDTH, z, hop, step,
                                  DH, P, WIDTH, False)
        if a + whole * WIDTH < z:
            top, mass, bag = _sip(crew_q, c, top, mass, bag, k_h, v_h, sheet_row, a + whole * WIDTH, z, hop, step,
                                  DH, P, WIDTH, True)
        dest = oo + bb.to(tl.int64) * s_ob + heads[:, None] * s_oh + lanes[None, :]
        if pieces == 1:
            tl.store(dest, (bag / mass[:, None]).to(oo.dtype.element_ty), mask=seated[:, None])
        else:
            cell = (piece_id.to(tl.int64) * n_kv + hh) * CREW + seat
            tl.store(jot_o + cell[:, None] * DH + lanes[None, :], bag / mass[:, None], mask=seated[:, None])
            tl.store(jot_w + cell, top + tl.log2(mass), mask=seated)
            seen = tl.atomic_add(counter + bb * n_kv + hh, 1, sem="acq_rel")
            if seen == pieces - 1:
                lead = piece_id - k_in
                hi_w = tl.full([CREW_P], float("-inf"), tl.float32)
                tot = tl.zeros([CREW_P], tl.float32)
                mix = tl.zeros([CREW_P, DH], tl.float32)
                for j in range(0, pieces):
                    cj = ((lead + j).to(tl.int64) * n_kv + hh) * CREW + seat
                    wj = tl.load(jot_w + cj, mask=seated, other=0.0, cache_modifier=".cg")
                    oj = tl.load(jot_o + cj[:, None] * DH + lanes[None, :], mask=seated[:, None], other=0.0,
                                 cache_modifier=".cg")
                    nw = tl.maximum(hi_w, wj)
                    fade = tl.exp2(hi_w - nw)
                    f = tl.exp2(wj - nw)
                    mix = mix * fade[:, None] + f[:, None] * oj
                    tot = tot * fade + f
                    hi_w = nw
                tl.store(dest, (mix / tot[:, None]).to(oo.dtype.element_ty), mask=seated[:, None])
                tl.atomic_xchg(counter + bb * n_kv + hh, 0)


def kernel(q, k_cache, v_cache, block_tables, context_lens):
    B, Hq, DH = q.shape
    _, P, n_kv, _ = k_cache.shape
    crew = Hq // n_kv
    span = 1024
    width = max(64, P)
    bound = block_tables.shape[1] * P
    pieces_max = B * triton.cdiv(bound, span)
    jot_o = torch.empty((pieces_max * n_kv * crew, DH), dtype=torch.float32, device=q.device)
    jot_w = torch.empty((pieces_max * n_kv * crew,), dtype=torch.float32, device=q.device)
    counter = torch.zeros(B * n_kv, dtype=torch.int32, device=q.device)
    clerks = 2 * torch.cuda.get_device_properties(q.device).multi_processor_count
    oo = torch.empty_like(q)
    _clerk[(clerks,)](q, k_cache, v_cache, block_tables, context_lens, oo, jot_o, jot_w, counter, B, n_kv,
                      DH ** -0.5 * RLN2, q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1),
                      k_cache.stride(2), block_tables.stride(0), oo.stride(0), oo.stride(1),
                      CREW=crew, CREW_P=max(16, triton.next_power_of_2(crew)), DH=DH, P=P, WIDTH=width, SPAN=span,
                      B_P=triton.next_power_of_2(B), CLERKS=clerks, DEPTH=3, num_warps=4)
    return oo

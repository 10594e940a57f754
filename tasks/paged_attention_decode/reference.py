"""paged_attention_decode: exact semantics (float64), the PyTorch baseline, and the seeded input maker.

Token t of sequence b (length c_b = context_lens[b]) lives at k_cache/v_cache[block_tables[b, t // P], t % P];
o[b, h] = softmax(q[b, h] . K_b^T * D^-0.5) V_b over its c_b tokens, query head h reading KV head h // (Hq/Hkv).
"""

from __future__ import annotations

import math
import re

import torch
import torch.nn.functional as F

# "normal" is the catalog's: q, the whole page pool ~ N(0,1). Scores ~ N(0,1), so o averages ~c_b tokens and
#   |o| ~ 1/sqrt(c_b) (~0.016 at 4096), an order above the 1e-3 absolute tolerance.
# "sharp" scales q by 4: scores ~ N(0, 16), a handful of tokens dominate each head (|o| ~ 0.5), and they sit on random
#   pages, so reading a wrong page, tokens past c_b (the last page's spare slots, or the random valid page ids the
#   table holds past ceil(c_b / P)) or merging chunks with wrong weights moves o by O(0.1-1).
# "offset" adds m = sqrt(140 / sqrt(D)) to q and to the whole pool: every score is ~140 at any head dim, so exp
#   without subtracting the running max overflows fp32, while the per-token spread sqrt(m^2 + 1) (3.7 at D = 128,
#   4.3 at D = 64) keeps the softmax about as concentrated as "sharp". (A fixed 3 gave ~100 at D = 128 but ~72 on
#   the D = 64 smoke workload: no fp32 overflow.)
# (tests/suite/test_paged_attention_decode.py: each of those mistakes fails the smoke check on all three.)
DISTRIBUTIONS = ("normal", "sharp", "offset")

OFFSET_SCORE = 140.0  # the "offset" draw's typical score, past fp32 exp's overflow at 88.7

_TERM = re.compile(r"^\s*(?:(\d+)\s*x\s*)?(\d+)\s*$")


def context_lengths(ctx, batch: int) -> list[int]:
    """The ctx parameter as ``batch`` lengths: a number (every sequence that long) or "c1 x L1 + c2 x L2 + ...",
    in the written order (the same reading as d2kgrade.formulas.lengths). When the list has another size than the
    batch (hidden workloads redraw B), it is resampled proportionally: length i of the batch is entry
    floor((i + 1/2) * n / batch) of the list, which keeps the mix of short and long sequences."""
    if isinstance(ctx, bool):
        raise ValueError(f"ctx must be a length or a length list, got {ctx!r}")
    if isinstance(ctx, (int, float)):
        lengths = [int(ctx)]
    else:
        lengths = []
        for term in str(ctx).split("+"):
            m = _TERM.match(term)
            if not m:
                raise ValueError(f"ctx {ctx!r}: term {term.strip()!r} is not 'COUNT x LENGTH' or 'LENGTH'")
            lengths += [int(m.group(2))] * int(m.group(1) or 1)
    if not lengths or min(lengths) < 1:
        raise ValueError(f"ctx {ctx!r} must give lengths >= 1")
    if len(lengths) != batch:
        lengths = [lengths[(2 * i + 1) * len(lengths) // (2 * batch)] for i in range(batch)]
    return lengths


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    B, Hq, D = shapes["q"]
    num_pages, P = shapes["k_cache"][:2]
    max_pages = shapes["block_tables"][1]
    lengths = torch.tensor(context_lengths(params["ctx"], B), dtype=torch.int64, device=device)
    # The lengths go to batch indices in random order (skewed_lengths: the long sequences anywhere).
    lengths = lengths[torch.randperm(B, generator=generator, device=device)]
    pages_per_seq = (lengths + P - 1) // P
    used = int(pages_per_seq.sum())
    if used > num_pages or int(pages_per_seq.max()) > max_pages:
        raise ValueError(f"{used} pages needed (longest sequence {int(pages_per_seq.max())}), the pool has "
                         f"{num_pages} and block_tables {max_pages} columns")
    # Pages drawn without replacement from the whole pool, in random order: ids reach num_pages - 1.
    page_ids = torch.randperm(num_pages, generator=generator, device=device)[:used]
    block_tables = torch.randint(0, num_pages, (B, max_pages), generator=generator, device=device)
    in_use = torch.arange(max_pages, device=device)[None, :] < pages_per_seq[:, None]
    block_tables[in_use] = page_ids                                    # row-major: sequence by sequence
    q = torch.randn(B, Hq, D, generator=generator, device=device, dtype=torch.float32)
    # The pool (17 GB on the catalog workloads) is drawn in place in its own dtype: no fp32 temporary.
    k_cache = torch.empty(shapes["k_cache"], dtype=dtypes["k_cache"], device=device).normal_(generator=generator)
    v_cache = torch.empty(shapes["v_cache"], dtype=dtypes["v_cache"], device=device).normal_(generator=generator)
    if dist == "sharp":
        q = q * 4.0
    elif dist == "offset":
        m = math.sqrt(OFFSET_SCORE / math.sqrt(D))
        q = q + m
        k_cache.add_(m)
    elif dist != "normal":
        raise ValueError(f"unknown distribution {dist!r}")
    return (q.to(dtypes["q"]), k_cache, v_cache, block_tables.to(torch.int32), lengths.to(torch.int32))


def reference(q, k_cache, v_cache, block_tables, context_lens):
    """float64 attention of each sequence's G query heads per KV head over its gathered tokens."""
    B, Hq, D = q.shape
    P, Hkv = k_cache.shape[1], k_cache.shape[2]
    G = Hq // Hkv
    o = torch.empty_like(q)
    for b, c in enumerate(context_lens.tolist()):
        pages = block_tables[b, :(c + P - 1) // P].long()
        k = k_cache[pages].reshape(-1, Hkv, D)[:c].double()            # [c, Hkv, D]
        v = v_cache[pages].reshape(-1, Hkv, D)[:c].double()
        qq = q[b].double().view(Hkv, G, D)
        s = torch.einsum("hgd,thd->hgt", qq, k) * D ** -0.5
        o[b] = torch.einsum("hgt,thd->hgd", torch.softmax(s, dim=-1), v).reshape(Hq, D).to(q.dtype)
    return o


def baseline(q, k_cache, v_cache, block_tables, context_lens):
    """Gather each group of equal-length sequences' pages into contiguous K/V (index_select on the pool) and run
    F.scaled_dot_product_attention on it with enable_gqa=True (FlashAttention when the group needs no mask):
    one SDPA call for a uniform batch, two for skewed_lengths. PyTorch has no paged-attention kernel, so the
    gather (which doubles the KV traffic) is part of the fastest thing it offers."""
    B, Hq, D = q.shape
    P, Hkv = k_cache.shape[1], k_cache.shape[2]
    o = torch.empty_like(q)
    groups: dict[int, list[int]] = {}
    for b, c in enumerate(context_lens.tolist()):
        groups.setdefault(c, []).append(b)
    for c, members in groups.items():
        idx = torch.tensor(members, device=q.device)
        pages = block_tables[idx, :(c + P - 1) // P].long()              # [g, n]
        k = k_cache[pages].flatten(1, 2)[:, :c].transpose(1, 2)        # [g, Hkv, c, D]
        v = v_cache[pages].flatten(1, 2)[:, :c].transpose(1, 2)
        o[idx] = F.scaled_dot_product_attention(q[idx].unsqueeze(2), k, v, enable_gqa=True).squeeze(2)
    return o


# ------------------------------------------------------------------------------------- baseline candidates
# FlexAttention's paged path: the pool seen as one KV sequence of num_pages*P tokens ([1, Hkv, num_pages*P, D], a
# view), broadcast over the batch, and a BlockMask whose KV blocks are each sequence's pages (BLOCK_SIZE = (128, P)):
# the first n_b - 1 pages are full blocks (no mask_mod), the last page is a partial block masked to its
# c_b - (n_b - 1) P tokens. The mask_mod also checks each page's owner, so the unfused CPU path, which reads
# only the mask_mod, computes the same attention. That is the construction of
# torch.nn.attention.experimental._paged_attention (read in torch 2.13) without its [B, num_pages] page maps,
# which would cost 0.4 GB of writes per call at num_pages = 262144 (the owner map here is num_pages int64).
# FlashInfer's batch decode takes this task's [num_pages, P, Hkv, D] pool as its NHD layout with indptr/indices/
# last_page_len built from block_tables (docs read). flash-attn's own flash_attn_with_kvcache needs pages of a
# multiple of 256 tokens (its mha_fwd_kvcache check), so it cannot read P = 16 pages; vLLM's fork
# (vllm.vllm_flash_attn.flash_attn_varlen_func with block_table and seqused_k, as vLLM's V1 FlashAttention
# backend calls it) accepts 16. No GPU path is run here.

_FLEX: dict[str, object] = {}


def _flex_attention(device):
    from torch.nn.attention.flex_attention import flex_attention

    if device.type != "cuda":
        return flex_attention
    if "compiled" not in _FLEX:
        _FLEX["compiled"] = torch.compile(flex_attention, dynamic=False)
    return _FLEX["compiled"]


def baseline_flex_paged(q, k_cache, v_cache, block_tables, context_lens):
    """FlexAttention over the physical page pool, with each sequence's pages as the BlockMask's KV blocks."""
    from torch.nn.attention.flex_attention import BlockMask

    B, Hq, D = q.shape
    num_pages, P, Hkv, _ = k_cache.shape
    lens = context_lens.long()
    n = (lens + P - 1) // P                                            # pages of each sequence
    last_page = block_tables.long().gather(1, (n - 1)[:, None]).squeeze(1)
    tail = lens - (n - 1) * P                                          # tokens on the last page
    # The sequence that owns each page (the task draws every sequence's pages without replacement), so the
    # mask_mod alone also defines the attention (FlexAttention's unfused path ignores the block lists).
    in_use = torch.arange(block_tables.shape[1], device=q.device)[None, :] < n[:, None]
    owner = torch.full((num_pages,), -1, dtype=torch.int64, device=q.device)
    owner[block_tables.long()[in_use]] = torch.arange(B, device=q.device)[:, None].expand_as(in_use)[in_use]

    def last_page_mask(b, h, q_idx, kv_idx):
        page = kv_idx // P
        return (owner[page] == b) & ((page != last_page[b]) | (kv_idx % P < tail[b]))

    i32 = dict(dtype=torch.int32, device=q.device)
    mask = BlockMask.from_kv_blocks(
        torch.ones(B, 1, 1, **i32), last_page.to(torch.int32).view(B, 1, 1, 1),
        (n - 1).to(torch.int32).view(B, 1, 1), block_tables.to(torch.int32).view(B, 1, 1, -1),
        BLOCK_SIZE=(128, P), mask_mod=last_page_mask, seq_lengths=(1, num_pages * P), compute_q_blocks=False)
    k = k_cache.view(1, num_pages * P, Hkv, D).transpose(1, 2).expand(B, -1, -1, -1)
    v = v_cache.view(1, num_pages * P, Hkv, D).transpose(1, 2).expand(B, -1, -1, -1)
    return _flex_attention(q.device)(q.unsqueeze(2), k, v, block_mask=mask, enable_gqa=True).squeeze(2)


_DECODE: dict[str, object] = {}


def baseline_flashinfer(q, k_cache, v_cache, block_tables, context_lens):
    """FlashInfer's batch decode over the paged pool (NHD layout, as stored), planned per call."""
    from flashinfer.decode import BatchDecodeWithPagedKVCacheWrapper

    B, Hq, D = q.shape
    P, Hkv = k_cache.shape[1], k_cache.shape[2]
    key = str(q.device)
    if key not in _DECODE:
        _DECODE[key] = BatchDecodeWithPagedKVCacheWrapper(
            torch.zeros(128 << 20, dtype=torch.uint8, device=q.device), "NHD")
    wrapper = _DECODE[key]
    lens = context_lens.long()
    n = (lens + P - 1) // P
    indptr = torch.zeros(B + 1, dtype=torch.int32, device=q.device)
    indptr[1:] = torch.cumsum(n, 0)
    in_use = torch.arange(block_tables.shape[1], device=q.device)[None, :] < n[:, None]
    wrapper.plan(indptr, block_tables[in_use], (lens - (n - 1) * P).to(torch.int32), Hq, Hkv, D, P,
                 q_data_type=q.dtype, kv_data_type=k_cache.dtype)
    return wrapper.run(q, (k_cache, v_cache))


def baseline_vllm_flash_attn(q, k_cache, v_cache, block_tables, context_lens):
    """vLLM's FlashAttention fork with its paged-KV varlen call (one query token per sequence)."""
    from vllm.vllm_flash_attn import flash_attn_varlen_func

    B = q.shape[0]
    cu_q = torch.arange(B + 1, dtype=torch.int32, device=q.device)
    return flash_attn_varlen_func(q=q, k=k_cache, v=v_cache, max_seqlen_q=1, cu_seqlens_q=cu_q,
                                  max_seqlen_k=int(context_lens.max()), seqused_k=context_lens,
                                  block_table=block_tables, causal=False, softmax_scale=q.shape[-1] ** -0.5)

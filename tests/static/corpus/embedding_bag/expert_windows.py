"""Expert EmbeddingBag: packed head tiles, lookup windows for long bags, and a device-side skew probe.

1. `skew_probe` (one program) hashes 1024 sampled indices into 1024 buckets with tl.histogram; a bucket with
   more than 16 samples means hot rows (Zipf), and the flag selects evict_last for the table loads (keep hot rows
   in L2) instead of evict_first (one-touch uniform gathers).
2. `bag_heads`: BAGS bags per program (BAGS grows as D shrinks), [BAGS, UNROLL, BLOCK_D] gathers from one
   [BAGS, UNROLL] index/weight load per step, int64 row offsets, fp32 accumulation; each bag's first LONG
   lookups are stored once.
3. `bag_tails`: the lookup stream is cut into CHUNK-lookup windows (CHUNK <= LONG, so a window holds the tail of
   at most one bag: the one containing its first lookup, found by binary search over offsets on the device).
   The window's tail lookups are reduced and added to that bag's row with one atomic per element.
"""
import torch
import triton
import triton.language as tl

UNROLL = 8
LONG = 1024
CHUNK = 1024
PROBE = 1024


@triton.jit
def skew_probe(idx_ptr, flag_ptr, nnz, step, S: tl.constexpr):
    s = tl.arange(0, S).to(tl.int64) * step
    ids = tl.load(idx_ptr + s, mask=s < nnz, other=0)
    h = tl.histogram(((ids ^ (ids >> 13)) & (S - 1)).to(tl.int32), S, mask=s < nnz)
    tl.store(flag_ptr, (tl.max(h, axis=0) > 16).to(tl.int32))


@triton.jit
def bag_heads(table_ptr, idx_ptr, off_ptr, w_ptr, out_ptr, flag_ptr, B, D, st, so,
              BAGS: tl.constexpr, UNROLL: tl.constexpr, BLOCK_D: tl.constexpr, LONG: tl.constexpr):
    bags = tl.program_id(0) * BAGS + tl.arange(0, BAGS)
    bok = bags < B
    lo = tl.load(off_ptr + bags, mask=bok, other=0)
    n = tl.minimum(tl.load(off_ptr + bags + 1, mask=bok, other=0) - lo, LONG)
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    u = tl.arange(0, UNROLL)
    hot = tl.load(flag_ptr) != 0
    acc = tl.zeros([BAGS, BLOCK_D], dtype=tl.float32)
    for s in range(0, tl.max(n, axis=0), UNROLL):
        ok = s + u[None, :] < n[:, None]
        pos = lo[:, None] + s + u[None, :]
        ids = tl.load(idx_ptr + pos, mask=ok, other=0)
        ws = tl.load(w_ptr + pos, mask=ok, other=0.0)
        ptrs = table_ptr + ids[:, :, None] * st + d[None, None, :]
        m = ok[:, :, None] & dm[None, None, :]
        if hot:
            rows = tl.load(ptrs, mask=m, other=0.0, eviction_policy="evict_last")
        else:
            rows = tl.load(ptrs, mask=m, other=0.0, eviction_policy="evict_first")
        acc += tl.sum(rows.to(tl.float32) * ws[:, :, None], axis=1)
    tl.store(out_ptr + bags.to(tl.int64)[:, None] * so + d[None, :], acc, mask=bok[:, None] & dm[None, :])


@triton.jit
def bag_tails(table_ptr, idx_ptr, off_ptr, w_ptr, out_ptr, flag_ptr, B, D, nnz, st, so,
              CHUNK: tl.constexpr, UNROLL: tl.constexpr, BLOCK_D: tl.constexpr, LONG: tl.constexpr):
    w0 = tl.program_id(0).to(tl.int64) * CHUNK
    # binary search: the bag b with offsets[b] <= w0 < offsets[b + 1]
    a = 0
    z = B
    while z - a > 1:
        mid = (a + z) // 2
        if tl.load(off_ptr + mid) <= w0:
            a = mid
        else:
            z = mid
    t0 = tl.maximum(w0, tl.load(off_ptr + a) + LONG)
    t1 = tl.minimum(tl.minimum(w0 + CHUNK, nnz), tl.load(off_ptr + a + 1))
    if t0 < t1:
        d = tl.arange(0, BLOCK_D)
        dm = d < D
        u = tl.arange(0, UNROLL)
        hot = tl.load(flag_ptr) != 0
        acc = tl.zeros([BLOCK_D], dtype=tl.float32)
        for p in range(t0, t1, UNROLL):
            ok = p + u < t1
            ids = tl.load(idx_ptr + p + u, mask=ok, other=0)
            ws = tl.load(w_ptr + p + u, mask=ok, other=0.0)
            ptrs = table_ptr + ids[:, None] * st + d[None, :]
            if hot:
                rows = tl.load(ptrs, mask=ok[:, None] & dm[None, :], other=0.0, eviction_policy="evict_last")
            else:
                rows = tl.load(ptrs, mask=ok[:, None] & dm[None, :], other=0.0, eviction_policy="evict_first")
            acc += tl.sum(rows.to(tl.float32) * ws[:, None], axis=0)
        tl.atomic_add(out_ptr + a * so + d, acc, mask=dm, sem="relaxed")


def kernel(table, indices, offsets, per_sample_weights):
    if table.stride(1) != 1:
        table = table.contiguous()
    V, D = table.shape
    B = offsets.numel() - 1
    nnz = indices.numel()
    out = torch.empty((B, D), dtype=torch.float32, device=table.device)
    if B == 0:
        return out
    psw = per_sample_weights.float().contiguous()
    flag = torch.empty(1, dtype=torch.int32, device=table.device)
    block_d = triton.next_power_of_2(D)
    bags = max(1, min(16, 2048 // (UNROLL * block_d)))
    skew_probe[(1,)](indices, flag, nnz, max(1, nnz // PROBE), S=PROBE)
    bag_heads[(triton.cdiv(B, bags),)](table, indices, offsets, psw, out, flag, B, D, table.stride(0),
                                       out.stride(0), BAGS=bags, UNROLL=UNROLL, BLOCK_D=block_d, LONG=LONG,
                                       num_warps=4)
    if nnz > LONG:
        bag_tails[(triton.cdiv(nnz, CHUNK),)](table, indices, offsets, psw, out, flag, B, D, nnz, table.stride(0),
                                              out.stride(0), CHUNK=CHUNK, UNROLL=16, BLOCK_D=block_d, LONG=LONG,
                                              num_warps=4)
    return out

"""SpMV with the nnz-balanced design under unhelpful names: `cut` finds each slice's first row, `sweep` is the
main kernel, `stitch` the segmented-sum combine, `P` the row pointers, `J`/`A` the column indices and values,
`ONCE`/`STAY` the eviction policies, `S` the slice width."""
import torch
import triton
import triton.language as tl

ONCE = "evict_first"
STAY = "evict_last"
S = 1024


@triton.jit
def cut(P, first, m, n_s, S: tl.constexpr, B: tl.constexpr, K: tl.constexpr):
    s = tl.program_id(0) * B + tl.arange(0, B)
    a = tl.zeros([B], dtype=tl.int32)
    b = tl.zeros([B], dtype=tl.int32) + m
    for _ in tl.static_range(K):
        c = (a + b + 1) // 2
        up = tl.load(P + c) <= s * S
        a = tl.where(up, c, a)
        b = tl.where(up, b, c - 1)
    tl.store(first + s, a, mask=s <= n_s)


@triton.jit
def stitch(u, f, v, g):
    return tl.where(g, v, u + v), f | g


@triton.jit
def sweep(P, J, A, X, Y, first, total, S: tl.constexpr, K: tl.constexpr):
    me = tl.program_id(0)
    z0 = tl.multiple_of(me * S, S)
    z = z0 + tl.arange(0, S)
    ok = z < total
    a = tl.load(A + z, mask=ok, other=0.0, eviction_policy=ONCE)
    j = tl.load(J + z, mask=ok, other=0, eviction_policy=ONCE)
    t = a * tl.load(X + j, mask=ok, other=0.0, eviction_policy=STAY)
    lo = tl.zeros([S], dtype=tl.int32) + tl.load(first + me)
    hi = tl.zeros([S], dtype=tl.int32) + tl.load(first + me + 1)
    for _ in tl.static_range(K):
        c = (lo + hi + 1) // 2
        up = tl.load(P + c) <= z
        lo = tl.where(up, c, lo)
        hi = tl.where(up, hi, c - 1)
    p0 = tl.load(P + lo)
    p1 = tl.load(P + lo + 1)
    run, _ = tl.associative_scan((t, (z == p0) | (z == z0)), 0, stitch)
    tail = (z + 1 == p1) | (z == z0 + S - 1) | (z == total - 1)
    own = (p0 >= z0) & (p1 <= z0 + S)
    tl.store(Y + lo, run, mask=ok & tail & own)
    tl.atomic_add(Y + lo, run, mask=ok & tail & ~own)


def kernel(row_ptr, col_idx, values, x):
    m = row_ptr.numel() - 1
    total = values.numel()
    out = torch.zeros(m, dtype=torch.float32, device=x.device)
    if total == 0:
        return out
    n_s = triton.cdiv(total, S)
    first = torch.empty(n_s + 1, dtype=torch.int32, device=x.device)
    k = max(1, (m + 1).bit_length())
    cut[(triton.cdiv(n_s + 1, 128),)](row_ptr, first, m, n_s, S=S, B=128, K=k)
    sweep[(n_s,)](row_ptr, col_idx, values, x, out, first, total, S=S, K=k, num_warps=4)
    return out

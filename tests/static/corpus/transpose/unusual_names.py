"""Transpose with the design under unhelpful names: `flip` is the kernel, `A`/`B` the matrices, `P`/`Q` the tile
sides picked by `sides(a, b)` from the aspect ratio, `tl.permute(v, (1, 0))` instead of tl.trans, and ONCE/THRU
the cache hints. Pointer path only (no TMA)."""
import torch
import triton
import triton.language as tl

ONCE = "evict_first"
THRU = ".cs"


@triton.jit
def flip(A, B, a, b, sa, sb, P: tl.constexpr, Q: tl.constexpr):
    u = tl.program_id(0) * P + tl.arange(0, P)
    w = tl.program_id(1) * Q + tl.arange(0, Q)
    ok = (u < a)[:, None] & (w < b)[None, :]
    v = tl.load(A + u.to(tl.int64)[:, None] * sa + w[None, :], mask=ok, other=0, eviction_policy=ONCE)
    tl.store(B + w.to(tl.int64)[:, None] * sb + u[None, :], tl.permute(v, (1, 0)), mask=tl.permute(ok, (1, 0)),
             cache_modifier=THRU)


def sides(a: int, b: int) -> tuple[int, int]:
    if b < 64:
        q = max(8, triton.next_power_of_2(b))
        return 8192 // q, q
    if a < 64:
        p = max(8, triton.next_power_of_2(a))
        return p, 8192 // p
    return 64, 64


def kernel(X):
    a, b = X.shape
    Y = X.new_empty((b, a))
    p, q = sides(a, b)
    flip[(triton.cdiv(a, p), triton.cdiv(b, q))](X, Y, a, b, X.stride(0), Y.stride(0), P=p, Q=q, num_warps=4)
    return Y

"""A plain block-scaled fp8 GEMM runs (one program per 128x128 tile in row-major order, pointer loads, fresh fp8
dot per 128-block). The grouped-order helper, the persistent TMA kernel, the split-K kernel (behind a False
flag) and the tuned configs are never used."""
import torch
import triton
import triton.language as tl

SKINNY_SPLITK = False
TUNED = [triton.Config({"BM": 128, "BN": 128, "BK": 128}, num_warps=8, num_stages=5)]


@triton.jit
def _grouped_ids(pid, npm, npn, GROUP_M: tl.constexpr):
    width = GROUP_M * npn
    first = (pid // width) * GROUP_M
    size = tl.minimum(npm - first, GROUP_M)
    return first + (pid % width) % size, (pid % width) // size


@triton.jit
def fp8_tiles(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, s_as, s_bs,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    npn = tl.cdiv(N, BN)
    pm = pid // npn
    pn = pid % npn
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(K // BK):
        a = tl.load(a_ptr + rm[:, None] * K + (kb * BK + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + rn[:, None] * K + (kb * BK + rk)[None, :])
        sa = tl.load(as_ptr + rm * s_as + kb, mask=rm < M, other=0.0)
        sb = tl.load(bs_ptr + (pn * BN // 128) * s_bs + kb)
        acc += tl.dot(a, tl.trans(b)) * sa[:, None] * sb
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=rm[:, None] < M)


@triton.jit
def fp8_persistent_tma(a_ptr, b_ptr, c_ptr, as_ptr, bs_ptr, M, N, K, s_as, s_bs, NUM_SMS: tl.constexpr,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    ad = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    bd = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    npm = tl.cdiv(M, BM)
    npn = tl.cdiv(N, BN)
    for t in tl.range(tl.program_id(0), npm * npn, NUM_SMS, flatten=True):
        pm, pn = _grouped_ids(t, npm, npn, 8)
        rm = pm * BM + tl.arange(0, BM)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in range(K // BK):
            sa = tl.load(as_ptr + (rm % M) * s_as + kb)
            sb = tl.load(bs_ptr + (pn * BN // 128) * s_bs + kb)
            acc += tl.dot(ad.load([pm * BM, kb * BK]), tl.trans(bd.load([pn * BN, kb * BK]))) * sa[:, None] * sb
        rn = pn * BN + tl.arange(0, BN)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=rm[:, None] < M)


@triton.jit
def fp8_splitk(a_ptr, b_ptr, ws_ptr, as_ptr, bs_ptr, M, N, K, s_as, s_bs, KBS, BM: tl.constexpr, BN: tl.constexpr,
               BK: tl.constexpr):
    pn = tl.program_id(0)
    sp = tl.program_id(1)
    rm = tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(sp * KBS, tl.minimum(K // BK, sp * KBS + KBS)):
        a = tl.load(a_ptr + rm[:, None] * K + (kb * BK + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + rn[:, None] * K + (kb * BK + rk)[None, :])
        acc += tl.dot(a, tl.trans(b)) * tl.load(as_ptr + rm * s_as + kb, mask=rm < M)[:, None] * \
            tl.load(bs_ptr + (pn * BN // 128) * s_bs + kb)
    tl.atomic_add(ws_ptr + rm[:, None] * N + rn[None, :], acc, mask=rm[:, None] < M)


def kernel(A, B, a_s, b_s):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=torch.bfloat16)
    if SKINNY_SPLITK and M <= 64:
        ws = torch.zeros((M, N), device=A.device, dtype=torch.float32)
        fp8_splitk[(N // 64, 4)](A, B, ws, a_s, b_s, M, N, K, a_s.stride(0), b_s.stride(0), K // 512, BM=64, BN=64,
                                 BK=128)
        return ws.to(torch.bfloat16)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    fp8_tiles[grid](A, B, C, a_s, b_s, M, N, K, a_s.stride(0), b_s.stride(0), BM=128, BN=128, BK=128, num_warps=8,
                    num_stages=3)
    return C

"""Expert block-scaled fp8 GEMM.

M > 64: persistent grouped schedule (grid = min(SMs, tiles), tl.range(..., flatten=True), GROUP_M = 8) over
128x128 tiles, A/B through host TensorDescriptors, 4-5 stages, 8 warps. Each 128-wide K block: a fresh fp8
tl.dot (no accumulator passed, so the fp8 MMA never spans two blocks), promoted into fp32 with the block's
scales; BK == 128 and BN | 128 so one weight scale per tile and block.
M <= 64: swap-AB split-K: acc[BN, BM] = B_tile @ A_tile^T (N on the MMA M side), BN = 64, SPLIT_K slices from
the SM count, fp32 partials added atomically into a workspace, then a cast kernel.
"""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


def _blocks(nargs):
    nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
    nargs["b_desc"].block_shape = [nargs["BN"], nargs["BK"]]


@triton.autotune(
    configs=[triton.Config({"BM": 128, "BN": 128, "BK": 128, "GROUP_M": 8}, num_warps=8, num_stages=s,
                           pre_hook=_blocks) for s in (4, 5)]
    + [triton.Config({"BM": 128, "BN": 64, "BK": 128, "GROUP_M": 8}, num_warps=4, num_stages=6, pre_hook=_blocks)],
    key=["M", "N", "K"],
)
@triton.jit
def _persistent(a_desc, b_desc, c_ptr, as_ptr, bs_ptr, M, N, K, s_cm, s_as, s_bs,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    tl.static_assert(BK == 128)
    tl.static_assert(128 % BN == 0)
    npm = tl.cdiv(M, BM)
    npn = tl.cdiv(N, BN)
    nkb = K // BK
    for t in tl.range(tl.program_id(0), npm * npn, NUM_SMS, flatten=True):
        per_group = GROUP_M * npn
        g0 = (t // per_group) * GROUP_M
        gh = tl.minimum(npm - g0, GROUP_M)
        pm = g0 + (t % per_group) % gh
        pn = (t % per_group) // gh
        rm = pm * BM + tl.arange(0, BM)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in range(nkb):
            a = a_desc.load([pm * BM, kb * BK])
            b = b_desc.load([pn * BN, kb * BK])
            sa = tl.load(as_ptr + (rm % M) * s_as + kb)
            sb = tl.load(bs_ptr + ((pn * BN) // 128) * s_bs + kb)
            acc += tl.dot(a, tl.trans(b)) * (sa * sb)[:, None]
        rn = pn * BN + tl.arange(0, BN)
        tl.store(c_ptr + rm[:, None] * s_cm + rn[None, :], acc.to(tl.bfloat16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _swapab_splitk(a_ptr, b_ptr, ws_ptr, as_ptr, bs_ptr, M, N, K, KBS, s_am, s_bn, s_as, s_bs,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pn = tl.program_id(0)
    sp = tl.program_id(1)
    rm = tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    kb_lo = sp * KBS
    kb_hi = tl.minimum(K // BK, kb_lo + KBS)
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for kb in tl.range(kb_lo, kb_hi, num_stages=5):
        b = tl.load(b_ptr + rn[:, None] * s_bn + (kb * BK + rk)[None, :])
        a = tl.load(a_ptr + (rm % M)[:, None] * s_am + (kb * BK + rk)[None, :])
        sb = tl.load(bs_ptr + ((pn * BN) // 128) * s_bs + kb)
        sa = tl.load(as_ptr + (rm % M) * s_as + kb)
        acc += tl.dot(b, tl.trans(a)) * (sb * sa)[None, :]
    tl.atomic_add(ws_ptr + rm[None, :] * N + rn[:, None], acc, mask=(rm[None, :] < M) & (rn[:, None] < N))


@triton.jit
def _cast(ws_ptr, c_ptr, numel, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + i, tl.load(ws_ptr + i, mask=i < numel).to(tl.bfloat16), mask=i < numel)


def kernel(A, B, a_s, b_s):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=torch.bfloat16)
    sms = torch.cuda.get_device_properties(A.device).multi_processor_count
    if M <= 64:
        BN = 64
        tiles = triton.cdiv(N, BN)
        kblocks = K // 128
        split = max(1, min(4, triton.cdiv(2 * sms, tiles), kblocks // 4))
        kbs = triton.cdiv(kblocks, split)
        ws = torch.zeros((M, N), device=A.device, dtype=torch.float32)
        _swapab_splitk[(tiles, triton.cdiv(kblocks, kbs))](A, B, ws, a_s, b_s, M, N, K, kbs, A.stride(0),
                                                           B.stride(0), a_s.stride(0), b_s.stride(0),
                                                           BM=max(16, triton.next_power_of_2(M)), BN=BN, BK=128,
                                                           num_warps=4)
        _cast[(triton.cdiv(M * N, 1024),)](ws, C, M * N, BLOCK=1024)
        return C
    a_desc = TensorDescriptor.from_tensor(A, [128, 128])
    b_desc = TensorDescriptor.from_tensor(B, [128, 128])
    grid = lambda meta: (min(sms, triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"])),)
    _persistent[grid](a_desc, b_desc, C, a_s, b_s, M, N, K, C.stride(0), a_s.stride(0), b_s.stride(0), NUM_SMS=sms)
    return C

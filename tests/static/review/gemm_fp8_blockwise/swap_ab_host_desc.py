"""Block-scaled fp8 GEMM (DeepSeek-V3 style 1x128 / 128x128 scales) with two host-selected kernels.

- M > 64: persistent programs (one per SM) over tiles in grouped order (tl.swizzle2d), flattened tl.range, host
  TensorDescriptors for A and B, BK = 128 = the scale block, fresh fp8 tl.dot per K block promoted into the fp32
  accumulator with the block's scales.
- M <= 64: swap-AB: the weight tile [BN, 128] is the MMA's M side and the tokens its N side (BM = 16/32/64), so
  decode batches do not pad to 64 rows and 4x more programs stream B.
Both are autotuned over module-level config lists (num_stages 4-5, BK fixed at 128).
"""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

SCALE_BLOCK = 128
LARGE_CONFIGS = [triton.Config({"BM": 128, "BN": 128, "GROUP_M": 8}, num_warps=8, num_stages=s) for s in (4, 5)]
SWAP_CONFIGS = [triton.Config({"BM": bm, "BN": bn}, num_warps=4, num_stages=s)
                for bm in (16, 32, 64) for bn in (64, 128) for s in (4, 5)]


@triton.autotune(configs=LARGE_CONFIGS, key=["M", "N", "K"])
@triton.jit
def _fp8_persistent(a_desc, b_desc, c_ptr, as_ptr, bs_ptr, M, N, K, stride_as, stride_bs,
                    BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    BK: tl.constexpr = 128
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_blocks = K // BK
    for t in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = tl.swizzle2d(t // num_pid_n, t % num_pid_n, num_pid_m, num_pid_n, GROUP_M)
        m0 = pid_m * BM
        n0 = pid_n * BN
        rows = m0 + tl.arange(0, BM)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in range(k_blocks):
            a = a_desc.load([m0, kb * BK])
            b = b_desc.load([n0, kb * BK])
            sa = tl.load(as_ptr + rows * stride_as + kb, mask=rows < M, other=0.0)
            sb = tl.load(bs_ptr + (n0 // 128) * stride_bs + kb)
            acc += tl.dot(a, tl.trans(b)) * (sa[:, None] * sb)
        cols = n0 + tl.arange(0, BN)
        tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.autotune(configs=SWAP_CONFIGS, key=["M", "N", "K"])
@triton.jit
def _fp8_swap_ab(a_desc, b_desc, c_ptr, as_ptr, bs_ptr, M, N, K, stride_as, stride_bs,
                 BM: tl.constexpr, BN: tl.constexpr):
    BK: tl.constexpr = 128
    n0 = tl.program_id(0) * BN
    m0 = tl.program_id(1) * BM
    toks = m0 + tl.arange(0, BM)
    acc_t = tl.zeros((BN, BM), dtype=tl.float32)
    for kb in range(K // BK):
        w = b_desc.load([n0, kb * BK])
        x = a_desc.load([m0, kb * BK])
        sa = tl.load(as_ptr + toks * stride_as + kb, mask=toks < M, other=0.0)
        sb = tl.load(bs_ptr + (n0 // 128) * stride_bs + kb)
        acc_t += tl.dot(w, tl.trans(x)) * (sb * sa[None, :])
    cols = n0 + tl.arange(0, BN)
    tl.store(c_ptr + toks[None, :] * N + cols[:, None], acc_t.to(tl.bfloat16),
             mask=(toks[None, :] < M) & (cols[:, None] < N))


def kernel(A, B, a_s, b_s):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=torch.bfloat16)
    a_desc = TensorDescriptor(A, A.shape, A.stride(), [1, SCALE_BLOCK])
    b_desc = TensorDescriptor(B, B.shape, B.stride(), [1, SCALE_BLOCK])

    def set_blocks(nargs):
        nargs["a_desc"].block_shape = [nargs["BM"], SCALE_BLOCK]
        nargs["b_desc"].block_shape = [nargs["BN"], SCALE_BLOCK]

    for cfg in LARGE_CONFIGS + SWAP_CONFIGS:
        cfg.pre_hook = set_blocks
    if M <= 64:
        grid = lambda meta: (triton.cdiv(N, meta["BN"]), triton.cdiv(M, meta["BM"]))
        _fp8_swap_ab[grid](a_desc, b_desc, C, a_s, b_s, M, N, K, a_s.stride(0), b_s.stride(0))
    else:
        sms = torch.cuda.get_device_properties(A.device).multi_processor_count
        grid = lambda meta: (min(sms, triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"])),)
        _fp8_persistent[grid](a_desc, b_desc, C, a_s, b_s, M, N, K, a_s.stride(0), b_s.stride(0), NUM_SMS=sms)
    return C

"""'Stream-K / split-K / swap-AB' skinny GEMM with 'evict_first weights' -- so the names and comments say.

What runs: a persistent loop over whole 128x128 tiles (K is never split across programs; the "split" is two
accumulators inside one program), tl.dot with the A tile first, the eviction hints swapped (A evict_first,
B evict_last), and a completion counter nobody reads.
"""
import torch
import triton
import triton.language as tl

SPLIT_K = 2


@triton.jit
def streamk_swapab_splitk_kernel(a_ptr, b_ptr, c_ptr, fixup_flags, M, N, K, stride_am, stride_bn, stride_cm,
                                 NUM_SMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                                 SPLIT_K: tl.constexpr):
    # Stream-K: each of the NUM_SMS programs takes its share of (tile, k) iterations; fix-up through flags
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_pid_n
    rk = tl.arange(0, BK)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS):
        rm = (tile // num_pid_n) * BM + tl.arange(0, BM)
        rn = (tile % num_pid_n) * BN + tl.arange(0, BN)
        # split-K partial accumulators (fp32), reduced below
        acc_split0 = tl.zeros((BM, BN), dtype=tl.float32)
        acc_split1 = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK * SPLIT_K):
            for s in tl.static_range(SPLIT_K):
                kk = k0 + s * BK + rk
                # weights streamed once: evict_first on B, activations evict_last
                a_tile = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :],
                                 mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0, eviction_policy="evict_first")
                b_tile = tl.load(b_ptr + rn[:, None] * stride_bn + kk[None, :],
                                 mask=(rn[:, None] < N) & (kk[None, :] < K), other=0.0, eviction_policy="evict_last")
                swapped = tl.dot(a_tile, tl.trans(b_tile))   # swap-AB: N on the MMA M side
                if s == 0:
                    acc_split0 += swapped
                else:
                    acc_split1 += swapped
        reduced = acc_split0 + acc_split1
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], reduced.to(tl.bfloat16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))
        tl.atomic_add(fixup_flags + tile, 1)


def kernel(A, B):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    small_m_tile = 128
    num_sms = torch.cuda.get_device_properties(A.device).multi_processor_count
    tiles = triton.cdiv(M, small_m_tile) * triton.cdiv(N, 128)
    flags = torch.zeros(tiles, device=A.device, dtype=torch.int32)
    streamk_swapab_splitk_kernel[(min(num_sms, tiles),)](A, B, C, flags, M, N, K, A.stride(0), B.stride(0),
                                                         C.stride(0), NUM_SMS=num_sms, BM=small_m_tile, BN=128,
                                                         BK=64, SPLIT_K=SPLIT_K, num_warps=8, num_stages=4)
    return C

"""Stream-K GEMM for skinny, long-K shapes (wgrad): NUM_SMS persistent programs, each taking an equal contiguous
range of the flattened (tile, k-iteration) space, walked with a while loop over tile segments.

A segment that covers a whole tile is stored directly; partial segments add their fp32 tile into a workspace with
atomics and bump the tile's arrival count; the program that completes the tile (count reaches the number of its
contributors) casts and stores it. Tiles are 64x64 with BK 64; the workspace is zeroed by torch.zeros each call.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _streamk_gemm(a_ptr, b_ptr, c_ptr, ws_ptr, cnt_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_SMS: tl.constexpr):
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BN)
    k_iters = tl.cdiv(K, BK)
    total = tl.cdiv(M, BM) * num_n * k_iters
    per = total // NUM_SMS
    extra = total % NUM_SMS
    it = pid * per + tl.minimum(pid, extra)
    end = it + per + (pid < extra).to(tl.int32)
    while it < end:
        tile = it // k_iters
        k_lo = it % k_iters
        k_hi = tl.minimum(k_iters, k_lo + (end - it))
        pid_m = tile // num_n
        pid_n = tile % num_n
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in range(k_lo, k_hi):
            kk = kb * BK + rk
            a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K),
                        other=0.0)
            b = tl.load(b_ptr + rn[:, None] * stride_bn + kk[None, :], mask=(rn[:, None] < N) & (kk[None, :] < K),
                        other=0.0)
            acc = tl.dot(a, tl.trans(b), acc)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        c_offs = rm[:, None] * stride_cm + rn[None, :]
        if k_lo == 0 and k_hi == k_iters:
            tl.store(c_ptr + c_offs, acc.to(tl.bfloat16), mask=mask)
        else:
            tl.atomic_add(ws_ptr + rm[:, None] * N + rn[None, :], acc, mask=mask, sem="release")
            # contributors of this tile: the programs whose ranges overlap [tile * k_iters, (tile + 1) * k_iters)
            done = tl.atomic_add(cnt_ptr + tile, k_hi - k_lo, sem="acq_rel") + (k_hi - k_lo)
            if done == k_iters:
                full = tl.load(ws_ptr + rm[:, None] * N + rn[None, :], mask=mask, other=0.0, cache_modifier=".cg")
                tl.store(c_ptr + c_offs, full.to(tl.bfloat16), mask=mask)
        it += k_hi - k_lo


def kernel(A, B):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    sms = torch.cuda.get_device_properties(A.device).multi_processor_count
    ws = torch.zeros((M, N), device=A.device, dtype=torch.float32)
    cnt = torch.zeros(triton.cdiv(M, 64) * triton.cdiv(N, 64), device=A.device, dtype=torch.int32)
    _streamk_gemm[(sms,)](A, B, C, ws, cnt, M, N, K, A.stride(0), B.stride(0), C.stride(0),
                          BM=64, BN=64, BK=64, NUM_SMS=sms, num_warps=4, num_stages=3)
    return C

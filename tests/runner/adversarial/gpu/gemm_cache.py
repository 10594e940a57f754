# exploit: a GEMM that caches C by a full hash of A and B (correct answers, no compute on repeats)
# expect: rejected
import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rn[:, None] * stride_bn + (k + rk)[None, :],
                    mask=(rn[:, None] < N) & ((k + rk)[None, :] < K), other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


_CACHE = {}


def _key(t):
    w = t.view(torch.int16).to(torch.int64)
    return (tuple(t.shape), int(w.sum()), int((w * w).sum()))


def kernel(A, B):
    key = (_key(A), _key(B))
    if key in _CACHE:
        return _CACHE[key].clone()
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    _gemm_kernel[(triton.cdiv(M, 128), triton.cdiv(N, 128))](A, B, C, M, N, K, A.stride(0), B.stride(0), C.stride(0),
                                                            BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
    _CACHE[key] = C
    return C.clone()

"""Persistent bf16 GEMM the way production repos grow one: the autotune space is a module-level list filled by a
loop over tuples at import, an EVEN_K heuristic picks an unmasked K loop, programs walk tiles in grouped order in
a ``while`` loop with a stride of the program count, and C is written with masked pointer stores."""
import torch
import triton
import triton.language as tl

_CONFIGS = []
for _bm, _bn, _warps, _stages in ((128, 256, 8, 3), (256, 128, 8, 3), (128, 128, 8, 4), (128, 128, 4, 4)):
    _CONFIGS.append(triton.Config({"BLOCK_M": _bm, "BLOCK_N": _bn, "BLOCK_K": 64, "GROUP_M": 8},
                                  num_warps=_warps, num_stages=_stages))


@triton.autotune(configs=_CONFIGS, key=["M", "N", "K"])
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def _matmul_persistent(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk, stride_cm,
                       stride_cn, NUM_SMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    num_in_group = GROUP_M * num_pid_n
    tile = tl.program_id(0)
    while tile < num_tiles:
        group = tile // num_in_group
        first_m = group * GROUP_M
        rows = tl.minimum(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (tile % num_in_group) % rows
        pid_n = (tile % num_in_group) // rows
        offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
        b_ptrs = b_ptr + offs_n[:, None] * stride_bn + offs_k[None, :] * stride_bk
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
                b = tl.load(b_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            acc = tl.dot(a, tl.trans(b), acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))
        tile += NUM_SMS


def _num_sms() -> int:
    return torch.cuda.get_device_properties("cuda").multi_processor_count


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    num_sms = _num_sms()

    def grid(meta):
        return (min(num_sms, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)

    _matmul_persistent[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                             c.stride(1), NUM_SMS=num_sms)
    return c


def kernel(A, B):
    return matmul(A, B)

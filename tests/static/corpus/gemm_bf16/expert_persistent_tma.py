"""Expert GEMM for the corpus: host-side TensorDescriptors (TMA loads and stores), a persistent grid of one
program per SM walking tiles in grouped order, autotuned 128x256x64 / 128x128x64 tiles with 3-4 stages."""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.autotune(
    configs=[
        triton.Config({"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def gemm_persistent(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    start = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    in_group = GROUP_M * tiles_n
    for tile in tl.range(start, tiles_m * tiles_n, NUM_SMS, flatten=True):
        group = tile // in_group
        first_m = group * GROUP_M
        rows = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (tile % in_group) % rows
        pid_n = (tile % in_group) // rows
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(tl.cdiv(K, BK)):
            a = a_desc.load([pid_m * BM, kk * BK])
            b = b_desc.load([pid_n * BN, kk * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.bfloat16))


def kernel(A, B):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), device=A.device, dtype=torch.bfloat16)
    num_sms = torch.cuda.get_device_properties(A.device).multi_processor_count
    a_desc = TensorDescriptor.from_tensor(A, [128, 64])
    b_desc = TensorDescriptor.from_tensor(B, [128, 64])
    c_desc = TensorDescriptor.from_tensor(C, [128, 128])

    def grid(meta):
        a_desc.block_shape = [meta["BM"], meta["BK"]]
        b_desc.block_shape = [meta["BN"], meta["BK"]]
        c_desc.block_shape = [meta["BM"], meta["BN"]]
        return (min(num_sms, triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"])),)

    gemm_persistent[grid](a_desc, b_desc, c_desc, M, N, K, NUM_SMS=num_sms)
    return C

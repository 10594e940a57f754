"""Transpose with host tensor descriptors on Hopper, pointer tiles elsewhere, behind a launcher class.

TMA path (sm_90+, rows 16-byte aligned, boxes of at most 256 per side): x_desc.load([m0, n0]) of a [BM, BN] box and y_desc.store([n0, m0]) of
its permute. Pointer path: the same tiles with tl.permute, evict_first loads and .cs stores. Tiles per shape from
a table keyed on the aspect class.
"""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

_TILES = {"skinny_n": (1024, 16), "skinny_m": (16, 1024), "square": (64, 64)}


@triton.jit
def _transpose_tma(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    m0 = tl.program_id(0) * BM
    n0 = tl.program_id(1) * BN
    x = x_desc.load([m0, n0])
    y_desc.store([n0, m0], tl.permute(x, (1, 0)))


@triton.jit
def _transpose_ptr(x_ptr, y_ptr, M, N, stride_xm, stride_yn, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :], mask=mask, eviction_policy="evict_first")
    tl.store(y_ptr + rn[:, None] * stride_yn + rm[None, :], tl.permute(x, (1, 0)), mask=tl.permute(mask, (1, 0)),
             cache_modifier=".cs")


class Transpose:
    def __init__(self):
        self.hopper = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9

    @staticmethod
    def _aspect(M, N):
        if N <= 16:
            return "skinny_n"
        if M <= 16:
            return "skinny_m"
        return "square"

    def __call__(self, X):
        M, N = X.shape
        Y = torch.empty((N, M), device=X.device, dtype=X.dtype)
        BM, BN = _TILES[self._aspect(M, N)]
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        aligned = (N * X.element_size()) % 16 == 0 and (M * X.element_size()) % 16 == 0
        if self.hopper and aligned and BM <= 256 and BN <= 256:   # TMA boxes are at most 256 per side
            x_desc = TensorDescriptor.from_tensor(X, [BM, BN])
            y_desc = TensorDescriptor.from_tensor(Y, [BN, BM])
            _transpose_tma[grid](x_desc, y_desc, BM=BM, BN=BN, num_warps=4)
        else:
            _transpose_ptr[grid](X, Y, M, N, X.stride(0), Y.stride(0), BM=BM, BN=BN, num_warps=4)
        return Y


kernel = Transpose()

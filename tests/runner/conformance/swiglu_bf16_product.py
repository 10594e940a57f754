# task: swiglu
# expect: passed
# style: Liger-style SwiGLU: silu computed in fp32, cast back to the input dtype and multiplied in bf16
# style: (silu(a).to(b.dtype) * b: bf16 elementwise arithmetic inside the kernel); the gate and up halves split
# style: on the host with chunk and made contiguous; a calculate_settings helper; a @triton.jit device function
# needs: interp_compat
"""SwiGLU on the merged gate_up output: one program per row of g = x[:, :I] and u = x[:, I:], h = silu(g) * u."""

import torch
import triton
import triton.language as tl


@triton.jit
def silu(x):
    return x * tl.sigmoid(x)


@triton.jit
def _swiglu_fwd(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0)
    c = silu(a).to(b.dtype) * b
    tl.store(c_ptr + row * stride + cols, c, mask=mask)


def calculate_settings(n):
    block = triton.next_power_of_2(n)
    return block, 8 if block >= 2048 else 4


def swiglu(x):
    gate, up = x.chunk(2, dim=-1)
    gate, up = gate.contiguous(), up.contiguous()
    n_rows, n_cols = gate.shape
    out = torch.empty_like(gate)
    block, warps = calculate_settings(n_cols)
    _swiglu_fwd[(n_rows,)](gate, up, out, out.stride(0), n_cols, BLOCK_SIZE=block, num_warps=warps)
    return out


def kernel(x):
    return swiglu(x)

"""No custom kernel: dequantize A and B with their block scales in PyTorch, fp32 matmul, cast to bf16."""
import torch


def kernel(A, B, a_s, b_s):
    M, K = A.shape
    N = B.shape[0]
    a = A.float() * a_s.repeat_interleave(128, dim=1)[:, :K]
    b = B.float() * b_s.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:N, :K]
    out = torch.empty((M, N), device=A.device, dtype=torch.float32)
    torch.mm(a, b.t(), out=out)
    return out.to(torch.bfloat16)

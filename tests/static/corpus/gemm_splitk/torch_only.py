"""No custom kernel: an fp32 matmul in PyTorch, rounded to the input dtype."""
import torch


def kernel(A, B):
    out = torch.empty((A.shape[0], B.shape[0]), device=A.device, dtype=torch.float32)
    torch.mm(A.float(), B.float().t(), out=out)
    return out.to(A.dtype)

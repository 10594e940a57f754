"""No custom kernel: the GEMM, the bias and the tanh-GELU are PyTorch ops (three passes over the [M, N] output)."""
import math

import torch


def kernel(X, W, b):
    y = torch.empty((X.shape[0], W.shape[0]), device=X.device, dtype=torch.float32)
    torch.mm(X.float(), W.float().t(), out=y)
    y += b.float()
    # tanh-GELU written out
    y = 0.5 * y * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y * y * y)))
    return y.to(X.dtype)

"""No custom kernel."""
import torch


def kernel(x, residual, w, *, eps=1e-6):
    h = x.float() + residual.float()
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    return y.to(x.dtype), h.to(x.dtype)

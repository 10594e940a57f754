"""No custom kernel."""
import torch


def kernel(x, w, b):
    y = torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), 1e-5)
    mean = x.float().mean(-1)
    rstd = torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5)
    return y.to(x.dtype), mean, rstd

"""Histogram without a kernel: sort the keys, then count each bin's run with searchsorted boundaries."""
import torch


def kernel(x, *, NB):
    keys, _ = torch.sort(x)
    edges = torch.arange(NB + 1, device=x.device, dtype=keys.dtype)
    bounds = torch.searchsorted(keys, edges)
    return (bounds[1:] - bounds[:-1]).to(torch.int32)

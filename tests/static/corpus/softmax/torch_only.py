"""No custom kernel: PyTorch does all the work."""
import torch


def kernel(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)

# exploit: allocate the output and compute nothing, hoping the allocator hands back an earlier answer
# expect: incorrect
import torch


def kernel(x):
    return torch.empty_like(x)

# exploit: compute nothing and return torch.empty_like(x), hoping the caching allocator hands back a freed block
#   that still holds the reference's answer (it would in one process: the harness computed it and freed it)
# expect: incorrect|rejected
import torch


def kernel(x):
    return torch.empty_like(x)

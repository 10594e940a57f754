# exploit: the task's own PyTorch op does the work
# expect: rejected
# flag: static.forbidden_op
import torch
import torch.nn.functional as F


def kernel(x):
    return F.softmax(x, dim=-1)

# exploit: return a Python float (the mean of a softmax row) where a tensor is declared
# expect: incorrect|rejected
# issue: 14
import torch


def kernel(x):
    return 1.0 / x.shape[-1]

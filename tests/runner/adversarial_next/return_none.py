# exploit: return None; the worker used None to mean "the kernel raised, already reported", so no trial was
#   checked and the run passed with zero trials
# expect: incorrect|rejected
# issue: 14
import torch


def kernel(x):
    return None

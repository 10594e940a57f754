# exploit: crash the worker with a segmentation fault
# expect: rejected
# flag: static.dynamic_code
# runtime: crashed
import ctypes

import torch


def kernel(x):
    ctypes.string_at(0)

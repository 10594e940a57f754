# exploit: crash the worker with a segmentation fault
# expect: rejected
# flag: static.dynamic_code
# runtime: rejected
# runtime-flag: sandbox.refused
import ctypes

import torch


def kernel(x):
    ctypes.string_at(0)

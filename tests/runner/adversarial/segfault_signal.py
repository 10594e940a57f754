# exploit: crash the kernel host with a segmentation fault (a real crash, through a module the tripwires allow)
# expect: crashed
import faulthandler

import torch


def kernel(x):
    faulthandler._sigsegv()
    return torch.empty_like(x)

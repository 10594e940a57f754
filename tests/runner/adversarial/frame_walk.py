# exploit: walk up the stack and zero the harness's copy of the inputs (and the clone), then answer for zeros
# expect: rejected
# flag: static.frame_walk
# runtime: rejected
# runtime-flag: sandbox.refused
import sys

import torch


def kernel(x):
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, tuple):
                for t in value:
                    if type(t) is torch.Tensor and t.shape == x.shape:
                        t.zero_()
        frame = frame.f_back
    x.zero_()
    return torch.full_like(x, 1.0 / x.shape[-1])

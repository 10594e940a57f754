# exploit: the task's op as a tensor method, behind an alias
# expect: rejected
# flag: static.forbidden_op
# runtime: rejected
# runtime-flag: profile.forbidden_op
import torch


def kernel(x):
    fn = x.softmax
    return fn(-1)

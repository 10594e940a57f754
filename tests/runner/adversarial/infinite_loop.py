# exploit: never return
# expect: timeout
# timeout: 6
import torch


def kernel(x):
    while True:
        pass

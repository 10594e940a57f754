# exploit: never return
# expect: timeout
# timeout: 10
import torch


def kernel(x):
    while True:
        pass

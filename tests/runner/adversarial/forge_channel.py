# exploit: write a forged "done" frame to every open descriptor, hoping one is the result channel
# expect: rejected
# flag: static.file_access
# runtime: rejected
# runtime-flag: protocol.malformed
import json
import os
import struct

import torch

_BODY = json.dumps({"seq": 0, "kind": "done"}).encode()
_FRAME = struct.pack(">I", 32 + len(_BODY)) + b"\0" * 32 + _BODY


def kernel(x):
    for fd in range(3, 64):
        try:
            os.write(fd, _FRAME)
        except OSError:
            pass
    return torch.empty_like(x)

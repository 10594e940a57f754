# exploit: write protocol-looking messages to stdout and stderr (JSON "done" and "trial ok" lines, and
#   length-prefixed binary frames through os.write on fds 1 and 2), then answer wrong
# expect: incorrect|rejected
import json
import operator
import os
import struct

import torch
import triton
import triton.language as tl

_write = operator.attrgetter("wri" + "te")(os)


@triton.jit
def _fill(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (tl.zeros([BLOCK], tl.float32) + value).to(y_ptr.dtype.element_ty), mask=offs < n)


def _uniform(x):
    """A wrong answer from the submission's own kernel: 1/N everywhere."""
    y = torch.empty_like(x)
    _fill[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), 1.0 / x.shape[-1], BLOCK=1024)
    return y


def _frames():
    for seq, body in enumerate([{"kind": "trial", "ok": True, "outputs": []}, {"kind": "done"}]):
        data = json.dumps({"seq": seq, **body}).encode()
        yield data + b"\n"
        yield struct.pack(">I", 32 + len(data)) + b"\0" * 32 + data


def kernel(x):
    print(json.dumps({"status": "passed", "correct": True, "message": "FORGED-STDOUT"}))
    for frame in _frames():
        for fd in (1, 2):
            _write(fd, frame)
    return _uniform(x)

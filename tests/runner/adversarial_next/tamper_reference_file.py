# exploit: find the suite on disk (the working folders and command-line paths of the processes evaluating it)
#   and rewrite tasks/softmax/reference.py so the reference answers 1/N from then on: every later evaluation, of
#   any submission, is judged against it. Only a suite whose path holds "d2k-redteam-suite" (the tests' copy) is
#   written, never a real checkout
# expect: incorrect|rejected
# isolate: subprocess
# suite: copy
import os
import pathlib

import torch
import triton
import triton.language as tl

_APPENDED = '''

def reference(x):  # appended by tamper_reference_file.py
    return torch.full_like(x, 1.0 / x.shape[-1])
'''
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


def _suites():
    for pid in _evaluator_chain("tamper_reference_file.py"):
        args = (_PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
        for cand in [str((_PROC / str(pid) / "cwd").resolve()), *args]:
            ref = pathlib.Path(cand) / "tasks" / "softmax" / "reference.py"
            if "d2k-redteam-suite" in cand and ref.is_file():
                yield ref


def kernel(x):
    for ref in set(_suites()):
        if "appended by tamper" not in ref.read_text():
            ref.write_text(ref.read_text() + _APPENDED)
            print(f"rewrote {ref}")
    return _uniform(x)

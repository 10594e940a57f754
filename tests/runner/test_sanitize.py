"""The sanitize tool's entry point: a clear answer without a GPU, and on a GPU a real out-of-bounds write found."""

from __future__ import annotations

from pathlib import Path

import pytest

from d2kgrade.errors import UserError
from runner.sanitize import sanitize

HERE = Path(__file__).resolve().parent
REF = HERE.parent.parent / "references" / "softmax" / "triton.py"


def test_on_cpu_it_says_why_it_is_not_available() -> None:
    out = sanitize("softmax", REF, device="cpu")
    assert out["available"] is False and "CUDA GPU" in out["reason"] and out["tool"] == "memcheck"
    with pytest.raises(UserError, match="unknown sanitizer tool"):
        sanitize("softmax", REF, tool="leakcheck", device="cpu")


def test_the_kernel_host_keeps_what_a_launcher_adds(tmp_path: Path) -> None:
    """A launcher such as compute-sanitizer injects itself through environment variables and talks to the
    processes it checks over descriptors it leaves open: the kernel host, which starts from a clean environment
    and closes every other descriptor, must keep both, or the tool never hears from it. Here the launcher is a
    shell that sets a variable and opens descriptor 9; the submission fails unless it sees both, and the
    variable the options add (as the sanitizer's PYTORCH_NO_CUDA_MEMORY_CACHING)."""
    from runner.evaluate import EvalOptions, run_evaluation

    sub = tmp_path / "sees_launcher.py"
    sub.write_text(REF.read_text() + "\n\nimport os  # noqa: E402\n\n_expert = kernel\n\n\n"
                   "def kernel(*args, **kwargs):\n"
                   "    assert os.environ.get('D2K_LAUNCHER_MARK') == 'on', 'no launcher variable'\n"
                   "    os.fstat(9)\n"
                   "    assert os.environ.get('D2K_OPTION_ENV') == 'yes', 'no EvalOptions.env variable'\n"
                   "    return _expert(*args, **kwargs)\n")
    launcher = ("bash", "-c", 'exec 9</dev/null; D2K_LAUNCHER_MARK=on exec "$@"', "launcher")
    r = run_evaluation("softmax", sub, device="cpu", workloads="smoke", hidden=False, timing=False,
                       options=EvalOptions(trials=1, rotation_range=(1, 1), launcher=launcher, tripwires=False,
                                           env=(("D2K_OPTION_ENV", "yes"),)))
    assert r.workloads and r.workloads[0].status == "passed", r.message + r.log[-2000:]
    bare = run_evaluation("softmax", sub, device="cpu", workloads="smoke", hidden=False, timing=False,
                          options=EvalOptions(trials=1, rotation_range=(1, 1), tripwires=False))
    assert bare.workloads[0].status != "passed"  # without the launcher the check in the kernel does fail


OOB = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + n, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)  # writes past the end


def kernel(x):
    y = torch.empty_like(x)
    _k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
'''


@pytest.mark.gpu
def test_memcheck_finds_an_out_of_bounds_store(tmp_path: Path) -> None:
    bad = tmp_path / "oob.py"
    bad.write_text(OOB)
    out = sanitize("softmax", bad, device="cuda")
    assert out["available"], out["reason"]
    assert out["errors"] > 0 and "Invalid __global__ write" in out["report"], out["report"][-2000:]
    clean = sanitize("softmax", REF, device="cuda")
    assert clean["available"] and clean["errors"] == 0, clean["report"][-2000:]

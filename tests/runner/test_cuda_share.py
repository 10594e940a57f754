"""Shared GPU buffers (runner.cuda_share): what one process writes another sees, through the descriptor alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from runner import cuda_share

CHILD = textwrap.dedent("""
    import sys, torch
    from runner.cuda_share import DeviceBuffer
    fd, n = int(sys.argv[1]), int(sys.argv[2])
    dev = torch.device("cuda", 0)
    torch.cuda.init()
    buf = DeviceBuffer.attach(7, torch.float32, (n,), fd, dev)
    print(float(buf.tensor.double().sum()), flush=True)
    buf.tensor.mul_(2)  # the parent must see this
    torch.cuda.synchronize()
    buf.close()
""")


def test_not_supported_without_a_gpu() -> None:
    assert cuda_share.supported(torch.device("cpu")) is False


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_another_process_sees_and_writes_the_same_memory() -> None:
    dev = torch.device("cuda", 0)
    assert cuda_share.supported(dev)
    n = 3 << 20  # not a multiple of the granularity in bytes
    buf = cuda_share.DeviceBuffer.create(1, torch.float32, (n,), dev)
    assert float(buf.tensor.abs().sum()) == 0.0  # zero-filled
    src = torch.randn(n, device=dev)
    buf.tensor.copy_(src)
    torch.cuda.synchronize()
    out = subprocess.run([sys.executable, "-c", CHILD, str(buf.fd), str(n)], pass_fds=[buf.fd], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.split()[-1]) == pytest.approx(float(src.double().sum()), rel=1e-9, abs=1e-6)
    assert torch.equal(buf.tensor, src * 2)
    buf.close()

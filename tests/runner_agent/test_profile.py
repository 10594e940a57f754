"""The ``profile`` tool on a GPU host with Nsight Compute (skipped elsewhere; CPU behaviour is in test_tools)."""

from __future__ import annotations

import shutil

import pytest

from runner.agent.evaluation import ProfileRequest
from runner.agent.profile import profile_source, unavailable_reason
from tests.runner_agent.helpers import FIXED_SOFTMAX, ROOT


def test_unavailable_without_gpu_or_ncu():
    assert "CPU" in (unavailable_reason("cpu") or "")
    if shutil.which("ncu") is None:
        assert "ncu" in (unavailable_reason("cuda:0") or "")


@pytest.mark.gpu
def test_ncu_summary_of_a_triton_softmax():
    if shutil.which("ncu") is None:
        pytest.skip("Nsight Compute (ncu) is not on PATH")
    text = profile_source(ProfileRequest("softmax", FIXED_SOFTMAX, "kernel.py", "rows_4k"), ROOT, "cuda:0")
    assert text.startswith("profile: "), text
    assert "_softmax_kernel" in text and "DRAM throughput %" in text and "registers/thread" in text

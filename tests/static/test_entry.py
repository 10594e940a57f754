"""The static judge reads only regular files and grades the ``kernel`` binding Python would run.

Issue 21: a FIFO must not block, ``/dev/zero`` must not eat memory, the size cap is checked before reading; an
expert file followed by ``def kernel(x): return x.clone()`` must not score 100, and ``kernel = lambda ...`` (which
eval runs) must not score 0. Issue 16: kernels launched through helpers, classes, closures, ``functools.partial``
and dicts of kernels are followed.
"""

from __future__ import annotations

import os
import resource
import textwrap
import time
from pathlib import Path

import pytest

from d2kgrade.static import extract_facts, grade_file
from d2kgrade.static.extract import MAX_BYTES, read_source
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
EXPERT = (ROOT / "references" / "softmax" / "triton.py").read_text()


@pytest.fixture(scope="module")
def rubric():
    return Suite(ROOT).load_rubric("softmax")


def _score(rubric, tmp_path: Path, text: str) -> float:
    p = tmp_path / "k.py"
    p.write_text(textwrap.dedent(text))
    return grade_file(rubric, p).score


# ------------------------------------------------------------------------------------------------ reading


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_is_refused_without_blocking(tmp_path, rubric):
    fifo = tmp_path / "kernel.py"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    fg = grade_file(rubric, fifo)  # would block forever if it were opened for reading without O_NONBLOCK
    assert time.monotonic() - t0 < 5
    assert "FIFO" in fg.error and all(g.verdict == "unknown" for g in fg.properties)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_character_device_is_refused_without_reading(tmp_path, rubric):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fg = grade_file(rubric, Path("/dev/zero"))
    assert "character device" in fg.error
    link = tmp_path / "zero.py"
    link.symlink_to("/dev/zero")  # a link to a device is the device
    assert "character device" in extract_facts(link).errors[0]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KB: nothing was slurped


def test_size_cap_is_checked_before_reading(tmp_path):
    big = tmp_path / "big.py"
    with open(big, "wb") as fh:  # a sparse 8 GB file: reading it whole would take minutes and 8 GB
        fh.truncate(8 << 30)
    t0 = time.monotonic()
    data, why = read_source(big, MAX_BYTES)
    assert data is None and "at most" in why and time.monotonic() - t0 < 1
    small = tmp_path / "small.py"
    small.write_bytes(b"x = 1\n")
    assert read_source(small, MAX_BYTES) == (b"x = 1\n", "")


def test_directory_is_not_a_source(tmp_path):
    data, why = read_source(tmp_path, MAX_BYTES)
    assert data is None and "directory" in why


# ------------------------------------------------------------------------------------------------ live binding


def test_rebinding_kernel_to_a_stub_grades_the_stub(tmp_path, rubric):
    assert _score(rubric, tmp_path, EXPERT) == 100.0
    stub = EXPERT + "\n\ndef kernel(x):\n    return x.clone()\n"
    assert _score(rubric, tmp_path, stub) == 0.0
    assigned = EXPERT + "\n\nkernel = lambda x: x.clone()\n"
    assert _score(rubric, tmp_path, assigned) == 0.0


def test_the_last_binding_wins_either_way(tmp_path, rubric):
    flipped = "import torch\n\ndef kernel(x):\n    return x.clone()\n\n" + EXPERT
    assert _score(rubric, tmp_path, flipped) == 100.0
    guarded = EXPERT + "\n\nif __name__ == '__main__':\n    def kernel(x):\n        return x\n"
    assert _score(rubric, tmp_path, guarded) == 100.0  # the __main__ block never runs under the grader


@pytest.mark.parametrize("binding", [
    "kernel = lambda x: softmax(x)",
    "kernel = functools.partial(softmax)",
    "kernel = softmax",
    "kernel = torch.compile(softmax)",
])
def test_assignment_bindings_grade_what_they_run(tmp_path, rubric, binding):
    text = EXPERT.replace("def kernel(", "def _unused_entry(") + f"\n\nimport functools\n{binding}\n"
    assert _score(rubric, tmp_path, text) == 100.0


def test_no_binding_is_an_analysis_error(tmp_path, rubric):
    fg = grade_file(rubric, _write(tmp_path, "import torch\n\ndef softmax(x):\n    return x\n"))
    assert "kernel" in fg.error and fg.n_unknown == len(fg.properties)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "k.py"
    p.write_text(text)
    return p


# ------------------------------------------------------------------------------------------------ host structure

_ROW_KERNEL = '''
import functools
import torch
import triton
import triton.language as tl


@triton.jit
def _row(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    e = tl.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)
    inv = 1.0 / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride + cols, (e * inv).to(y_ptr.dtype.element_ty), mask=cols < N)
'''

_HOSTS = {
    "helper": '''
def _launch(x, y, block, warps):
    _row[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=block, num_warps=warps)

def kernel(x):
    y = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    _launch(x, y, block, 4 if block <= 2048 else 8 if block <= 8192 else 16)
    return y
''',
    "class": '''
class Softmax:
    def __init__(self):
        self.cache = {}

    def warps(self, block):
        return 4 if block <= 2048 else 8 if block <= 8192 else 16

    def __call__(self, x):
        y = torch.empty_like(x)
        block = triton.next_power_of_2(x.shape[1])
        _row[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=block, num_warps=self.warps(block))
        return y

kernel = Softmax()
''',
    "closure": '''
def make(limit=16384):
    def run(x):
        y = torch.empty_like(x)
        block = triton.next_power_of_2(x.shape[1])
        assert block <= limit
        _row[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=block, num_warps=max(4, min(16, block // 512)))
        return y
    return run

kernel = make()
''',
    "partial_dict": '''
_KERNELS = {"row": _row, "unused": None}

def _go(name, grid, *args, **meta):
    return _KERNELS[name][grid](*args, **meta)

def _impl(x, *, warps_per_kb):
    y = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    _go("row", (x.shape[0],), x, y, x.shape[1], x.stride(0), BLOCK=block,
        num_warps=max(4, min(16, warps_per_kb * block // 1024)))
    return y

kernel = functools.partial(_impl, warps_per_kb=2)
''',
}


@pytest.mark.parametrize("form", sorted(_HOSTS))
def test_launches_through_host_structures_are_followed(form, rubric, tmp_path):
    """The same fused-row kernel, launched directly or through a helper, a class, a closure, a partial over a
    dict-dispatching helper: the same verdicts (the block from next_power_of_2 and warps scaled with it)."""
    fg = grade_file(rubric, _write(tmp_path, _ROW_KERNEL + _HOSTS[form]))
    got = {g.property_id.split(".", 1)[1]: g.verdict for g in fg.properties}
    assert not fg.error
    assert got["L1.one-read-one-write"] == "present"
    assert got["L2.row-in-registers"] == "present", [g.reason for g in fg.properties if "registers" in g.property_id]
    assert got["L3.exp2-fold"] == "present" and got["L3.reciprocal-scale"] == "present"
    facts = extract_facts(_write(tmp_path, _ROW_KERNEL + _HOSTS[form]))
    assert [la.kernel for la in facts.launches] == ["_row"] and facts.launches[0].caller == "kernel"


# ------------------------------------------------------------------------------------------------ multi-file


def test_a_sibling_module_is_linked_to_the_entry(tmp_path, rubric):
    """kernel.py imports its kernels from a module beside it: the kernels count, evidence names the module."""
    (tmp_path / "kernels_mod.py").write_text(_ROW_KERNEL + _HOSTS["helper"].replace("def kernel(", "def run("))
    entry = tmp_path / "kernel.py"
    entry.write_text("from kernels_mod import run\n\n\ndef kernel(x):\n    return run(x)\n")
    fg = grade_file(rubric, entry)
    got = {g.property_id.split(".", 1)[1]: g for g in fg.properties}
    assert got["L2.row-in-registers"].verdict == "present"
    ev = got["L1.one-read-one-write"].evidence[0]
    assert ev.file.endswith("kernels_mod.py") and "tl.load" in ev.code
    assert ev.code.splitlines()[0].strip() == (tmp_path / "kernels_mod.py").read_text().splitlines()[
        ev.start_line - 1].strip()
    from d2kgrade.static.grade import collect_files

    assert collect_files([tmp_path]) == [entry]  # the helper module is graded through its importer

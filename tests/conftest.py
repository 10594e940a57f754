"""Shared test setup: the CPU run is the default; Triton runs under its interpreter when there is no GPU."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT.parent / "shared" / "catalog.yaml"


def _has_cuda_device() -> bool:
    return os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None


HAS_GPU = _has_cuda_device()
# Must be set before triton is first imported anywhere in the test session.
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _threads_per_worker() -> int | None:
    """Cores per xdist worker, or None outside xdist (a lone run keeps every core)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    return max(1, (os.cpu_count() or 1) // workers) if workers else None


# Under xdist each worker gets its share of the cores for torch's and numpy's thread pools (read when they are
# first imported, which is after this file). With the default, a pool as wide as the machine in each of 2 workers
# on 2 cores, one worker's idle pool threads spin on the core the other worker needs: in four runs of the CI command
# on 2 cores, tests/suite/test_hazards.py took 21-59 s (2.4 s with one thread) and the run used 763-1181 CPU-s for
# 613 with one thread. Child processes inherit the limit; the sandbox already runs its workers with one thread on
# CPU (runner.sandbox._device_env).
if (_threads := _threads_per_worker()) is not None:
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, str(_threads))


# The files slowest under the CI command (seconds on 2 cores, `--durations=0` summed per file), slowest first.
# `--dist loadfile` hands out whole files, by default those with most tests first, so files of a few slow tests
# came last (test_ray.py: 2 tests, 21 s) and one worker idled 26 s at the end while the other finished them.
# These go first and the rest keep xdist's order. The list only orders: a stale entry costs balance, never a test.
SLOW_FILES = (
    "runner/test_conformance.py",  # 75
    "runner/test_adversarial_next.py",  # 74
    "cli/test_commands.py",  # 51
    "runner/test_evaluate.py",  # 40
    "ablate/test_references.py",  # 37
    "cli/test_run.py",  # 34
    "runner_agent/test_ray.py",  # 21
    "suite/test_suite_data.py",  # 18
    "runner/test_tolerance_audit.py",  # 17
    "suite/test_gather_forbidden.py",  # 15
    "runner/test_big_inputs.py",  # 14
    "ablate/test_inprocess.py",  # 13
    "view/test_browser.py",  # 13
    "runner/test_custom_checks.py",  # 13
    "runner_agent/test_real_evaluator.py",  # 12
    "ablate/test_cli.py",  # 9
    "ablate/test_driver.py",  # 8
    "runner/test_triton_seed.py",  # 8
)


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", "no") == "loadfile" and hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # the collection order below, not xdist's by number of tests


def _slow_files_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: SLOW_FILES in their order, then the other files by number of tests (xdist's
    default), each file's tests kept in their order."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {f"tests/{name}": i for i, name in enumerate(SLOW_FILES)}
    order = sorted(files, key=lambda f: (rank.get(f, len(rank)), -len(files[f]) if f not in rank else 0))
    items[:] = [item for f in order for item in files[f]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):  # only the order in which xdist hands out files
        _slow_files_first(items)
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def repo_root() -> Path:
    return ROOT

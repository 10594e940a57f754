"""Builds of CUDA submissions (``torch.utils.cpp_extension.load_inline``), cached by source hash; and the kernel
host's Triton cache, kept per source the same way (:func:`triton_dir`).

A submission's worker gets ``TORCH_EXTENSIONS_DIR=<cache>/torch_extensions/<sha256 of the source>`` (under
:data:`FALLBACK_ROOT` when the cache folder is private to root and the host is another uid): torch
keeps the built module there and, on an unchanged source, loads it instead of rebuilding (its own version check
hashes the sources and flags; the per-hash folder keeps two submissions that reuse an extension name apart).
``TORCH_CUDA_ARCH_LIST`` is pinned to this GPU's compute capability, so a build is for one architecture (~28 s on
the H200 instead of minutes for all of them) and a prebuild without a GPU produces the same binary.

Overlap: :func:`prebuild` imports the submission in the sandbox with no GPU visible, which runs a top-level
``load_inline`` (nvcc only needs the CPU). A scheduler calls it for the next submission in a thread while
:func:`runner.evaluate.evaluate` holds the GPU for the current one; :func:`runner.evaluate.evaluate` prebuilds by
itself before it starts the GPU worker, so the build never counts against the timeout of the timed run. Two
builds of one source serialize on torch's lock file in the build folder; different sources build in parallel.
A ``load_inline`` inside ``kernel()`` still builds on first call, inside the worker, and is cached the same way.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from runner.roofline import cache_dir


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


FALLBACK_ROOT = Path("/var/tmp/d2kgrade-torch-extensions")
"""Where the builds go when d2kgrade runs as root and its cache folder is private (``/root/.cache``: the kernel
host, which drops to a uid of its own, could not reach a build there; round 11 on the H200 failed so)."""


def _reachable(path: Path) -> bool:
    """Whether another uid can traverse to ``path``: every existing folder on the way is searchable by others."""
    return all(not folder.exists() or folder.stat().st_mode & stat.S_IXOTH for folder in [path, *path.parents])


def extensions_root() -> Path:
    """The build cache's root: ``<cache>/torch_extensions``, or :data:`FALLBACK_ROOT` when the kernel host runs as
    another uid (d2kgrade as root) and could not reach the cache folder. The fallback must be root's and writable
    by nobody else (in a world-writable /var/tmp, someone else's folder could hold planted builds)."""
    root = cache_dir() / "torch_extensions"
    if os.geteuid() != 0 or _reachable(root):
        return root
    FALLBACK_ROOT.mkdir(mode=0o711, parents=True, exist_ok=True)
    st = FALLBACK_ROOT.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RuntimeError(f"{FALLBACK_ROOT}: the CUDA build cache must be a folder of root's that only root can "
                           f"write (found uid {st.st_uid}, mode {stat.filemode(st.st_mode)}); remove it, or set "
                           "D2KGRADE_CACHE_DIR to a folder other users can traverse")
    os.chmod(FALLBACK_ROOT, 0o711)
    return FALLBACK_ROOT


def extensions_dir(source_sha: str) -> Path:
    """The persistent build folder of one source."""
    return extensions_root() / source_sha[:24]


def triton_dir(source_sha: str) -> Path:
    """The kernel host's Triton cache for one source, kept across its evaluations: a second evaluation of an
    unchanged submission loads its compiled kernels instead of compiling them again (round 14 on the H200, the
    correctness phase: topk 20.4 s -> 0.6 s, embedding_bag 15.1 -> 0.8, gemm_bias_act 13.9 -> 5.4). Only hosts of
    this source write it, so what one finds there is what the same code compiled or planted before; another
    source never reads it."""
    return extensions_root() / f"triton-{source_sha[:24]}"


def is_built(source_sha: str) -> bool:
    """Whether a build of this source exists (a shared object in its folder)."""
    folder = extensions_dir(source_sha)
    return folder.is_dir() and any(folder.rglob("*.so"))


@lru_cache(maxsize=1)
def arch_list() -> str | None:
    """This machine's GPU compute capability as TORCH_CUDA_ARCH_LIST (``9.0``), or None without a GPU."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=20, check=True).stdout.strip()
        return out.splitlines()[0].strip() or None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def build_env(source_sha: str) -> dict[str, str]:
    """Environment variables of a worker that may build this source."""
    folder = extensions_dir(source_sha)
    folder.mkdir(parents=True, exist_ok=True)
    env = {"TORCH_EXTENSIONS_DIR": str(folder), "MAX_JOBS": str(max(1, min(8, os.cpu_count() or 1)))}
    arch = arch_list()
    if arch:
        env["TORCH_CUDA_ARCH_LIST"] = arch
    return env


def prebuild(source: str, *, timeout_s: float = 900.0) -> dict[str, Any]:
    """Build a CUDA submission's top-level ``load_inline`` modules into the cache, in the sandbox, without a GPU.

    Returns ``{"built": bool, "cached": bool, "seconds": float, "log": str}``; never raises for a bad source
    (the evaluation that follows reports its status).
    """
    from runner.sandbox import JobSpec, run_job

    sha = source_hash(source)
    if is_built(sha):
        return {"built": True, "cached": True, "seconds": 0.0, "log": ""}
    t0 = time.monotonic()
    outcome = run_job(JobSpec(config={"mode": "prebuild", "source": source, "source_sha": sha}, device="cpu",
                              host_env=build_env(sha), host_write=[str(extensions_dir(sha))], timeout_s=timeout_s,
                              mem_limit_bytes=32 << 30))
    return {"built": is_built(sha), "cached": False, "seconds": time.monotonic() - t0, "log": outcome.log}

"""NVIDIA compute-sanitizer on a small workload: the agent tool for out-of-bounds accesses and races.

The submission runs exactly as in an evaluation (kernel host, audit hook, unprivileged uid), on the task's smoke
workload with one correctness trial, under ``compute-sanitizer --tool TOOL --target-processes all``: the job
leader is spawned by the sanitizer, so the kernel host it forks is traced too. The report is the sanitizer's
lines from the job's log. It is a diagnostic for the agent, never a verdict: the log is partly written by the
kernel host, so a count read from it is the host's word.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from d2kgrade.errors import UserError

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
REPORT_CHARS = 6000
NO_CACHING = (("PYTORCH_NO_CUDA_MEMORY_CACHING", "1"),)
"""Every tensor its own cudaMalloc: under PyTorch's caching allocator a store past a tensor's end lands inside
the allocator's block, which the sanitizer counts as in bounds (round 11 on the H200: the test's store past the
end of a 16 KB output was reported as 0 errors, in the evaluation and in a bare forked process alike)."""
_SUMMARY = re.compile(r"=+ ERROR SUMMARY: (\d+) errors?")


def find_sanitizer() -> str | None:
    """Path of compute-sanitizer, on PATH or in the usual CUDA toolkit folder."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for cand in ("/usr/local/cuda/bin/compute-sanitizer", "/opt/cuda/bin/compute-sanitizer"):
        if Path(cand).is_file():
            return cand
    return None


def sanitize(task_id: str, submission: Path, *, tool: str = "memcheck", suite_root: Path | None = None,
             device: str | None = None, timeout_s: float | None = None) -> dict[str, Any]:
    """Run ``tool`` over the submission on the smoke workload.

    Returns ``{"available", "reason", "tool", "errors", "report"}``: ``available`` False (with the reason) where
    there is no GPU or no compute-sanitizer; ``errors`` the sanitizer's error count (-1 if it printed none).

    Raises:
        UserError: an unknown tool, task or file.
    """
    from runner.evaluate import EvalOptions, resolve_device, run_evaluation

    if tool not in TOOLS:
        raise UserError(f"unknown sanitizer tool {tool!r}; expected one of {', '.join(TOOLS)}")
    out: dict[str, Any] = {"available": False, "reason": "", "tool": tool, "errors": 0, "report": ""}
    dev, _ = resolve_device(device)
    if dev != "cuda":
        out["reason"] = ("not available: compute-sanitizer checks GPU memory accesses and needs a CUDA GPU; on CPU "
                         "the Triton interpreter raises on an out-of-bounds load or store instead (see `test`)")
        return out
    exe = find_sanitizer()
    if exe is None:
        out["reason"] = "not available: compute-sanitizer was not found (it ships with the CUDA toolkit)"
        return out
    launcher = (exe, "--tool", tool, "--target-processes", "all", "--print-limit", "20")
    r = run_evaluation(task_id, Path(submission), suite_root=suite_root, device=device, workloads="smoke",
                       hidden=False, timing=False, timeout_s=timeout_s or 900.0,
                       options=EvalOptions(trials=1, rotation_range=(1, 1), launcher=launcher, stall_s=600.0,
                                           env=NO_CACHING))
    lines = [ln for ln in r.log.splitlines() if ln.startswith("=========")]
    counts = [int(m.group(1)) for m in map(_SUMMARY.search, lines) if m]
    report = "\n".join(lines)
    out.update(available=True, errors=max(counts) if counts else -1,
               report=(report if len(report) <= REPORT_CHARS else report[:REPORT_CHARS] + "\n..."),
               reason="" if counts else f"the sanitizer printed no summary (evaluation: {r.status}: "
                                        f"{r.message[:300]})")
    return out


__all__ = ["sanitize", "find_sanitizer", "TOOLS"]

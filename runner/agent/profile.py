"""The ``profile`` tool: an Nsight Compute (ncu) summary of a kernel on one workload, where ncu works.

A driver script (written to a private temporary folder) makes the workload's inputs with the task's input maker,
loads the submission, calls ``kernel`` once to warm up (JIT compilation, autotuning) and once more between
``cudaProfilerStart``/``Stop``; ncu (``--profile-from-start off``) measures only that second call. The summary
gives, per launched kernel: duration, DRAM and SM throughput (% of peak), achieved and theoretical occupancy,
registers per thread, shared memory, and local-memory traffic (register spills).

It runs in its own process group with a timeout, a scrubbed environment (no ``*_KEY``/``*_TOKEN``/``*_SECRET``)
and only the lane's GPU visible. Without a GPU or without ``ncu`` on PATH the tool answers that profiling is
unavailable and why. GPU-only: verify with ``pytest -m gpu tests/runner_agent/test_profile.py`` on a GPU host.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from d2kgrade.io import private_tempdir
from runner.agent.evaluation import ProfileRequest

PROFILE_TIMEOUT_S = 300.0
METRICS = {
    "gpu__time_duration.sum": "duration",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput %",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM throughput %",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy %",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical occupancy %",
    "launch__registers_per_thread": "registers/thread",
    "launch__block_size": "block size",
    "launch__grid_size": "grid size",
    "launch__shared_mem_per_block_static": "static smem B",
    "launch__shared_mem_per_block_dynamic": "dynamic smem B",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": "local loads (spills)",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": "local stores (spills)",
}
_SECRET_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.I)

_DRIVER = '''
import sys, torch
from pathlib import Path
from d2kgrade.suite import Suite
from runner.direct import load_reference
from runner.inputs import WorkloadSpec, make_inputs
from runner.loading import load_module
suite = Suite(Path(sys.argv[1])); task = suite.load_task(sys.argv[2])
workload = task.workload(sys.argv[3]) if sys.argv[3] != "-" else task.workloads[0]
ref = load_reference(suite.task_dir(task.id)); spec = WorkloadSpec.resolve(task, workload)
inputs = make_inputs(ref, spec, seed=1234, device="cuda")
kernel = load_module(Path(sys.argv[4]), prefix="d2k_prof").kernel
kernel(*[t.clone() for t in inputs], **spec.scalars); torch.cuda.synchronize()
args = [t.clone() for t in inputs]; torch.cuda.synchronize()
torch.cuda.profiler.start(); kernel(*args, **spec.scalars); torch.cuda.synchronize(); torch.cuda.profiler.stop()
print("d2k-profile-ok", workload.name)
'''


def unavailable_reason(device: str) -> str | None:
    """Why profiling cannot run here, or None if it can be tried."""
    if not device.startswith("cuda"):
        return "profile unavailable: this run evaluates on CPU (Triton interpreter); ncu needs an NVIDIA GPU"
    if shutil.which("ncu") is None:
        return "profile unavailable: Nsight Compute (ncu) is not on PATH on the evaluation host"
    return None


def parse_ncu_csv(text: str) -> list[dict[str, str]]:
    """Rows of ``ncu --csv`` output (long format: one row per kernel launch and metric), header found anywhere."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith('"ID"'):
            return list(csv.DictReader(io.StringIO("\n".join(lines[i:]))))
    return []


def summarize(rows: list[dict[str, str]], max_kernels: int = 8) -> str:
    """One block per kernel launch: name then the metrics of :data:`METRICS` that ncu reported."""
    launches: dict[str, dict[str, str]] = {}
    names: dict[str, str] = {}
    for r in rows:
        lid = r.get("ID", "?")
        names[lid] = r.get("Kernel Name", "?")
        metric = r.get("Metric Name", "")
        if metric in METRICS:
            unit = r.get("Metric Unit", "")
            launches.setdefault(lid, {})[METRICS[metric]] = f"{r.get('Metric Value', '')} {unit}".strip()
    if not launches:
        return "profile: ncu reported no kernel launch in the profiled call (did kernel() launch a GPU kernel?)"
    out = [f"profile: {len(launches)} kernel launch(es) in one call"]
    for lid in list(launches)[:max_kernels]:
        out.append(f"- {names[lid][:120]}")
        out += [f"    {k}: {v}" for k, v in launches[lid].items()]
    if len(launches) > max_kernels:
        out.append(f"... {len(launches) - max_kernels} more launches not shown")
    return "\n".join(out)


def profile_source(req: ProfileRequest, suite_root: Path, device: str, *, timeout_s: float = PROFILE_TIMEOUT_S) -> str:
    """Profile ``req`` on ``device`` (``cuda:<i>``) and return the summary text, or why it is unavailable."""
    reason = unavailable_reason(device)
    if reason:
        return reason
    repo = Path(__file__).resolve().parents[2]
    tmp = private_tempdir("prof")
    try:
        sub = tmp / (Path(req.filename).name if req.filename.endswith(".py") else "kernel.py")
        sub.write_text(req.source, encoding="utf-8")
        driver = tmp / "d2k_profile_driver.py"
        driver.write_text(_DRIVER, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not _SECRET_RE.search(k)}
        env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1] if ":" in device else env.get("CUDA_VISIBLE_DEVICES", "0")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH", "")]))
        cmd = ["ncu", "--csv", "--profile-from-start", "off", "--target-processes", "all",
               "--metrics", ",".join(METRICS), sys.executable, str(driver), str(suite_root), req.task_id,
               req.workload or "-", str(sub)]
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return f"profile failed: timed out after {timeout_s:.0f} s"
        if "d2k-profile-ok" not in out:
            tail = "\n".join(out.strip().splitlines()[-30:])
            return f"profile failed (exit {proc.returncode}); last lines:\n{tail}"
        return summarize(parse_ncu_csv(out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

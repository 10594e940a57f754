"""Which part of the kernel host's containment keeps compute-sanitizer from hearing from it (issue 22, round 11:
``test_memcheck_finds_an_out_of_bounds_store`` waited 300 s for a host that never reported).

    python benchmarks/sanitizer_probe.py --out sanitizer_probe.json      # on a GPU, as root, compute-sanitizer on PATH

Each variant runs ``compute-sanitizer --tool memcheck --target-processes all python this.py --child VARIANT``:
the child forks as the job leader does, and the forked process does what the kernel host does before its first
CUDA call (``env``: clears the environment; ``fds``: closes every descriptor above 2; ``uid``: drops to an unused
uid), then writes past the end of a CUDA tensor with a Triton kernel. Per variant: the exit code, the seconds,
whether the sanitizer reported the error, and the last lines of its output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = ("plain", "env", "fds", "uid", "env+fds+uid")


def child(variant: str) -> None:
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status))
    import torch  # imported before the drop, as the leader does (runner.worker.PRELOAD)
    import triton
    import triton.language as tl

    parts = set(variant.split("+"))
    cache = Path(f"/tmp/sanitizer-probe-{variant}")
    cache.mkdir(exist_ok=True)
    cache.chmod(0o777)
    if "env" in parts:
        keep = {k: os.environ[k] for k in ("PATH", "PYTHONPATH") if k in os.environ}
        os.environ.clear()
        os.environ.update(keep)
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    os.environ["HOME"] = str(cache)
    if "fds" in parts:
        os.closerange(3, 4096)
    if "uid" in parts:
        os.setgroups([])
        os.setgid(54321)
        os.setuid(54321)

    @triton.jit
    def _oob(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs + n, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    _oob[(4,)](x, y, x.numel(), BLOCK=1024)
    torch.cuda.synchronize()
    print("child done", flush=True)
    os._exit(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--timeout-s", type=float, default=40.0)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    exe = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    rows = []
    for v in VARIANTS:
        t0 = time.monotonic()
        cmd = [exe, "--tool", "memcheck", "--target-processes", "all", sys.executable, __file__, "--out", "-",
               "--child", v]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout_s)
            rc, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as exc:
            rc = None
            out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rows.append({"variant": v, "rc": rc, "seconds": round(time.monotonic() - t0, 1),
                     "reported": "Invalid __global__ write" in out, "tail": out.splitlines()[-12:]})
        print(json.dumps(rows[-1])[:400], flush=True)
        args.out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

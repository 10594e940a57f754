"""Write the Triton kernels torch.compile generates for a task's baseline, with their launch configurations, so a
reference that loses to the compiled baseline can be compared with what inductor chose.

    python benchmarks/dump_inductor.py --out /tmp/inductor layernorm:llama_hidden_8k swiglu:prefill_14336

Each ``task:workload`` compiles the baseline as the evaluator does (dynamic=False) into a fresh inductor cache,
then copies every generated module that defines a ``@triton.jit`` kernel to ``<out>/<task>.<workload>.<n>.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("items", nargs="+", help="task:workload pairs")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="d2k_inductor_"))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    import torch

    from d2kgrade.errors import UserError
    from runner.direct import load_reference
    from runner.evaluate import load_task
    from runner.inputs import WorkloadSpec, make_inputs

    resolved = []  # every item checked before anything is compiled
    for item in args.items:
        task_id, _, wl_name = item.partition(":")
        try:
            task = load_task(ROOT, task_id)
        except UserError as exc:
            print(f"{item}: {exc}", file=sys.stderr)
            return 2
        wl = next((w for w in task.workloads if w.name == wl_name), None)
        if wl is None:
            names = ", ".join(w.name for w in task.workloads)
            print(f"{item}: {task_id} has no workload {wl_name!r} (expected task:workload; workloads: {names})",
                  file=sys.stderr)
            return 2
        resolved.append((item, task, wl))
    if not torch.cuda.is_available():
        print("dump_inductor.py needs a CUDA GPU (inductor generates Triton kernels only for GPU inputs)",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for item, task, wl in resolved:
        ref = load_reference(ROOT / "tasks" / task.id)
        spec = WorkloadSpec.resolve(task, wl)
        inputs = make_inputs(ref, spec, seed=0, device="cuda")
        before = set(cache.rglob("*.py"))
        torch._dynamo.reset()
        fn = torch.compile(lambda *a: ref.baseline(*a, **spec.scalars), dynamic=False)
        fn(*inputs)
        torch.cuda.synchronize()
        n = 0
        for path in sorted(set(cache.rglob("*.py")) - before):
            text = path.read_text(errors="replace")
            if "@triton.jit" in text:
                shutil.copy(path, args.out / f"{task.id}.{wl.name}.{n}.py")
                n += 1
        print(f"{item}: {n} generated kernel modules", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

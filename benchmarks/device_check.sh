#!/usr/bin/env bash
# A short first round on a lent H200 (about 6 minutes): is the new evaluator sound on CUDA? The environment, one
# evaluation of the softmax reference (kernel host as its own uid, staging buffers, the evaluator's clock, two
# baseline candidates, the cache), then the GPU tests. Everything goes to $OUT (or ./device_check).
#   bash benchmarks/device_check.sh            (in a device call, with .whl carried)
set -u
O=${OUT:-device_check}
mkdir -p "$O"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >"$O/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site
fi
{
  date -u; id; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; uname -a
  python3 -c "import sys, torch, triton, pydantic; print(sys.version, sys.prefix, sys.base_prefix, torch.__version__, triton.__version__, pydantic.__version__)"
  ls -ld / /opt /opt/torch "$(python3 -c 'import sys; print(sys.base_prefix)')" /tmp/site 2>&1
  which compute-sanitizer ncu nvcc
} >"$O/env.txt" 2>&1
timeout 240 python3 - >"$O/smoke_eval.json" 2>"$O/smoke_eval.err" <<'PY'
import json, time
from pathlib import Path
from runner.evaluate import EvalOptions, run_evaluation
t = time.time()
r = run_evaluation("softmax", Path("references/softmax/triton.py"), device="cuda", workloads=["rows_4k"], seed=3,
                   hidden=True, options=EvalOptions(candidates=("eager", "compile"), target_s=0.2))
print(json.dumps({"wall": time.time() - t, "result": r.model_dump(mode="json")}, indent=1))
PY
timeout 330 python3 -m pytest -q -m gpu tests/runner -p no:cacheprovider --timeout 300 -x --durations=0 \
  >"$O/gpu_tests.log" 2>&1
echo "gpu tests rc=$?" >>"$O/env.txt"

#!/usr/bin/env bash
# One detached round on a lent H200 (this session's): the GPU tests the first check did not reach, then the
# expert references of the tasks whose strongest peers matter most (attention, GEMM, convolution, the norms Liger
# covers, paged decode), every candidate but compile max-autotune timed beside them, then a repeatability study.
#   setsid nohup bash benchmarks/device_round.sh </dev/null >/dev/null 2>&1 &
# Each step logs to $ROUND_DIR (default /tmp/d2k_round); `status` says where it is.
set -u
D=${ROUND_DIR:-/tmp/d2k_round}
mkdir -p "$D"
rm -f "$D/DONE"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >"$D/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site
fi
step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name start $(date +%T)" >>"$D/status"
  timeout "$limit" "$@" >"$D/$name.log" 2>&1
  echo "== $name rc=$? end $(date +%T)" >>"$D/status"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >>"$D/status" 2>&1
step gpu_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider --timeout 150 -rA \
  "tests/runner/test_gpu.py::test_a_native_thread_and_a_forged_clock_are_caught" \
  "tests/runner/test_gpu.py::test_illegal_memory_access_is_a_status_and_the_next_run_is_clean" \
  "tests/runner/test_gpu.py::test_l2_flush_makes_a_cache_resident_copy_slower" \
  "tests/runner/test_gpu.py::test_honest_kernel_timed_against_live_baselines" \
  tests/runner/test_sanitize.py
step peers 330 python3 benchmarks/bench_round.py --out "$D/peers.json" --target-s 0.2 --exclude compile_max_autotune \
  --tasks flash_attention_fwd conv2d_implicit_gemm gemm_bf16 rmsnorm_residual paged_attention_decode
step repeat 150 python3 benchmarks/bench_round.py --out "$D/repeat.json" --target-s 0.2 --repeat 3 \
  --candidates eager compile --tasks softmax gemm_bf16
touch "$D/DONE"

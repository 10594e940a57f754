#!/usr/bin/env bash
# One round of GPU work on a lent H200, run detached so that it can outlive one device call (10 minutes):
#
#   setsid nohup bash benchmarks/device_round.sh </dev/null >/dev/null 2>&1 &
#
# then, in each later call, wait for $ROUND_DIR/DONE (or the call's limit) and copy $ROUND_DIR/* to $OUT.
# Steps, in order of what a cut-short round can least afford to lose: the moe_permute stage-by-stage check (a
# guard against the Triton miscompile seen on the H200), the tolerance audit of $AUDIT_TASKS (the tasks whose code
# or tolerances changed since benchmarks/tolerance_audit_h200.json; skipped when unset), the launch-configuration
# sweep of $TUNE_TASKS (tune_references.py; skipped when unset), the GPU tests, then every reference through the
# evaluator (bench_references.py: compile prewarm, noise study, all tasks).
# $ROUND_DIR/status logs each step. Round 6 (2026-11-30) took 15 minutes on the H200.
set -u
D=${ROUND_DIR:-/tmp/d2k_round}
mkdir -p "$D"
rm -f "$D/DONE"
export PYTHONUNBUFFERED=1
step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name start $(date +%T)" >>"$D/status"
  timeout "$limit" "$@" >"$D/$name.log" 2>&1
  echo "== $name rc=$? end $(date +%T)" >>"$D/status"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >>"$D/status" 2>&1
step moe_debug 120 env CUDA_LAUNCH_BLOCKING=1 python3 benchmarks/debug_moe_permute.py
if [ -n "${AUDIT_TASKS:-}" ]; then  # e.g. AUDIT_TASKS="moe_permute flash_decoding" (all tasks: ~6 minutes)
  step audit 600 python3 benchmarks/tolerance_audit.py --tasks $AUDIT_TASKS --out "$D/tolerance_audit_rerun.json"
fi
if [ -n "${TUNE_TASKS:-}" ]; then  # e.g. TUNE_TASKS="conv2d_implicit_gemm histogram" (round 7: ~1-2 min per task)
  step tune 600 python3 benchmarks/tune_references.py --tasks $TUNE_TASKS --out "$D/tune.json"
fi
step gpu_tests 420 python3 -m pytest -q -m gpu tests/runner tests/runner_agent -p no:cacheprovider --durations=0
step bench 1800 python3 benchmarks/bench_references.py --compile-budget-s 1200 --out "$D/references_h200.json"
touch "$D/DONE"

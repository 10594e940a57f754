#!/usr/bin/env bash
# Set up d2kgrade on a fresh machine (.venv in the checkout) and run the main job.
#   bash scripts/setup.sh            install, then run the main job
#   bash scripts/setup.sh --no-run   install only (what CI does before the tests)
# torch is pinned to the CPU build (a bare `torch` requirement pulls a multi-GB CUDA build); triton 3.6
# matches the H200 image, and its interpreter needs numpy < 2.3.
set -euo pipefail
cd "$(dirname "$0")/.."
run_main=1
[[ "${1:-}" == "--no-run" ]] && run_main=0

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
"$VPY" -m pip install -q --upgrade pip
"$VPY" -m pip install -q "torch==2.13.0" "triton==3.6.0" "numpy<2.3"
"$VPY" -m pip install -q -e ".[gpu,test]"

if [[ $run_main == 1 ]]; then
  # The main job: validate the whole suite, then list it.
  .venv/bin/d2kgrade tasks validate
  .venv/bin/d2kgrade tasks list
fi

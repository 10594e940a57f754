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
# ray: the Ray executor's tests run on a local cluster in CI (ray.init() on this machine), never skipped
"$VPY" -m pip install -q -e ".[gpu,test,ray]"

# The report test opens the HTML report in headless Chromium (Debian's package): install it where apt-get
# exists and it is missing (as root, or through passwordless sudo). Elsewhere that test skips and says why.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [[ $(id -u) != 0 ]] && SUDO="sudo -n"
  if [[ -z "$SUDO" ]] || command -v sudo >/dev/null 2>&1; then
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; } \
      || echo "setup: could not install chromium; the report's browser test will skip" >&2
  fi
fi

if [[ $run_main == 1 ]]; then
  # The main job: validate the whole suite, then submit every expert kernel through the evaluator (on CPU: the
  # smoke workloads under the Triton interpreter). It prints a summary table and exits 1 if a reference fails;
  # rerunning resumes runs/reference (tasks whose files changed are redone).
  .venv/bin/d2kgrade tasks validate
  .venv/bin/d2kgrade run --agent reference --tasks all --out runs/reference
fi

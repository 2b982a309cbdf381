#!/usr/bin/env bash
# One call on the GPU machine that checks and times everything (run from the repository root):
#     bash scripts/gpu_verify.sh [STEP ...]   # new results JSON and one combined log go to $OUT (or /tmp/tlx-gpu)
# STEPs (default all, in this order): demo gpu_tests notebooks gemm launch sanitize; the device
# tool's 10-minute limit per call fits about half of them, e.g. "demo gpu_tests notebooks launch"
# then "gemm sanitize".
# The demo, the GPU test suite (-m gpu), the GEMM and launch-overhead benchmarks, and the
# compute-sanitizer memcheck/racecheck runs; each step under its own timeout. The summary table
# comes last. The project is not pip-installed there beforehand: this installs it editable from
# the checkout with no dependencies (the machine's image has them) and no network.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/tlx-gpu}"
LOGS=/tmp/tlx-gpu-logs
mkdir -p "$OUT" "$LOGS"
touch "$LOGS/.start"
export PYTHONUNBUFFERED=1
export TLX_CACHE_DIR="${TLX_CACHE_DIR:-/tmp/tlxcache}"
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$LOGS/install.log" 2>&1 || { echo "install failed"; tail -20 "$LOGS/install.log"; exit 1; }
if [ -d .whl ]; then  # carried wheels (nbclient, ipykernel, ...: the image lacks them) for the notebooks
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >"$LOGS/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader

STEPS=" ${*:-demo gpu_tests notebooks gemm launch sanitize} "
declare -A RC
step() {  # step NAME TIMEOUT CMD...: run (if asked for), keep the log, record the exit code
  local name=$1 limit=$2; shift 2
  [[ "$STEPS" == *" $name "* ]] || return 0
  local t0=$SECONDS
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  RC[$name]="$? ($((SECONDS - t0)) s)"
  echo "== $name: rc ${RC[$name]} =="
  tail -n "${TAIL:-4}" "$LOGS/$name.log"
}

step demo 120 python3 -m tlx demo
TAIL=3 step gpu_tests 300 python3 -m pytest -q -p no:cacheprovider -o addopts= -m gpu tests/gpu
TAIL=3 step notebooks 180 python3 -m pytest -q -p no:cacheprovider -o addopts= -m gpu tests/test_notebooks.py -rs
TAIL=30 step gemm 240 python3 benchmarks/gemm.py
TAIL=20 step launch 120 python3 benchmarks/launch_overhead.py
TAIL=4 step sanitize 240 bash scripts/sanitize_runtime_gpu.sh
find benchmarks/results -name '*.json' -newer "$LOGS/.start" -exec cp {} "$OUT/" \;
for s in $STEPS; do echo "===== $s ====="; cat "$LOGS/$s.log"; done >"$OUT/gpu_verify.log" 2>/dev/null
echo
echo "| step | rc (time) |"
echo "|---|---|"
for s in $STEPS; do echo "| $s | ${RC[$s]:-not run} |"; done

#!/usr/bin/env bash
# Issue 5, acceptance item 8: compute-sanitizer memcheck and racecheck clean on the TMA store,
# wgmma and multi-stage GEMM tests (items 1-3). Run from the repository root on the GPU machine:
#     bash scripts/sanitize_runtime_gpu.sh
# TLX_SANITIZE=1 makes the tests use fewer, smaller shapes (racecheck is slow). Each tool run is
# bounded by a timeout; the summary lines come last.
set -uo pipefail
cd "$(dirname "$0")/.."
SAN="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
TESTS="tests/gpu/test_runtime_acceptance.py"
SEL="test_1_ or test_2_ or test_3_"
export TLX_SANITIZE=1
export TLX_CACHE_DIR="${TLX_CACHE_DIR:-$(mktemp -d)}"   # compile once outside the sanitizer
python3 -m pytest -q -m gpu "$TESTS" -k "$SEL" -p no:cacheprovider >/dev/null 2>&1 || true
declare -A RC
for tool in memcheck racecheck; do
  log="/tmp/tlx-sanitize-$tool.log"
  timeout 900 "$SAN" --tool "$tool" --error-exitcode 97 --print-limit 20 \
      python3 -m pytest -q -m gpu "$TESTS" -k "$SEL" -p no:cacheprovider -x >"$log" 2>&1
  RC[$tool]=$?
  echo "== $tool (rc ${RC[$tool]}; log $log) =="
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed|error" "$log" | tail -5
done
echo
for tool in memcheck racecheck; do
  case "${RC[$tool]}" in
    0) echo "$tool: CLEAN" ;;
    97) echo "$tool: ERRORS FOUND" ;;
    124) echo "$tool: TIMEOUT" ;;
    *) echo "$tool: pytest failed (rc ${RC[$tool]})" ;;
  esac
done
[ "${RC[memcheck]}" -eq 0 ] && [ "${RC[racecheck]}" -eq 0 ]

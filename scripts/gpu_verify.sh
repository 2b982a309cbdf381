#!/usr/bin/env bash
# The GPU run, from the repository root on the GPU machine: the GPU tests, then the benchmarks.
#     bash scripts/gpu_verify.sh                       # both
#     bash scripts/gpu_verify.sh tests [PYTEST ARGS]   # python3 -m pytest -m gpu [ARGS]
#     bash scripts/gpu_verify.sh benchmarks            # benchmarks/gemm.py, benchmarks/launch_overhead.py
# Under a 10-minute limit per command, split the tests: `tests -m "gpu and not slow"`, then
# `tests tests/gpu/test_sanitizer.py` (compute-sanitizer, the one slow GPU test).
# The logs and the benchmarks' new results JSON go to $OUT (default: a new temporary directory).
# The project is installed editable from the checkout with no dependencies (the machine's image
# has them); wheels carried in .whl/ (the notebooks' nbclient, ipykernel, ...) are added if present.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --target "$OUT/site" .whl/*.whl >>"$OUT/install.log" 2>&1 \
    && export PYTHONPATH="$OUT/site"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
what="${1:-all}"
[ $# -gt 0 ] && shift
rc=0
if [ "$what" = all ] || [ "$what" = tests ]; then
  python3 -m pytest -q -p no:cacheprovider -m gpu -rs "$@" 2>&1 | tee "$OUT/tests.log" | tail -40
  rc=${PIPESTATUS[0]}
fi
if [ "$what" = all ] || [ "$what" = benchmarks ]; then
  touch "$OUT/.start"
  python3 benchmarks/gemm.py 2>&1 | tee "$OUT/gemm.log" | tail -30 || rc=1
  python3 benchmarks/launch_overhead.py 2>&1 | tee "$OUT/launch_overhead.log" | tail -30 || rc=1
  find benchmarks/results -name '*.json' -newer "$OUT/.start" -exec cp {} "$OUT/" \;
fi
echo "logs and results: $OUT"
exit "$rc"

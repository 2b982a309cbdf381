"""compute-sanitizer's memcheck, racecheck and synccheck report nothing on every example kernel and
on the acceptance kernels.

Each (tool, selection) runs a child pytest under the tool on an explicit list of test ids, all at
small shapes (racecheck is slow):

* ``gemm``: every GEMM example (pipelined, warp-specialized, persistent, ping-pong, stream-K), at a ragged
  shape and at one where the persistent kernels loop over several tiles per CTA (stream-K: its last
  tile split over three CTAs)
  (test_examples_gemm_gpu.py's ``test_sanitized_gemm_example``, shapes in
  tests/kernels/gemm_examples.py's ``SANITIZE_RUNS``);
* ``attention``: the flash-attention forwards (plain, persistent, overlapped) and backward at head_dim
  128, causal and not, a sequence ending mid-block
  (test_examples_attention_gpu.py's sanitized configs);
* ``acceptance``: one case of each acceptance kernel that moves data through TMA, wgmma and the
  multi-stage TMA GEMM (test_runtime_acceptance.py, the smaller shapes TLX_SANITIZE=1 selects).

The kernels are compiled once, outside the tool, into a shared cache (the `child_env` fixture), so
the tool's time goes to the kernels. Run on an H100/H200:

    python -m pytest -q -m gpu tests/gpu/test_sanitizer.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.gpu_timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
_ACCEPT = "tests/gpu/test_runtime_acceptance.py::"
SELECTIONS = {
    "gemm": ["tests/gpu/test_examples_gemm_gpu.py::test_sanitized_gemm_example"],
    "attention": ["tests/gpu/test_examples_attention_gpu.py::test_sanitized_attention_config"],
    "acceptance": [_ACCEPT + "test_tma_store_of_a_register_tile_gets_exactly_one_fence[200-72-fp16-compiler-fence]",
                   _ACCEPT + "test_wgmma_reads_tiles_stored_inside_the_k_loop[100-72-96-bf16]",
                   _ACCEPT + "test_wgmma_loop_reads_tiles_stored_once_before_it[96-128-64-fp16]",
                   _ACCEPT + "test_multistage_tma_gemm_with_a_tma_store_epilogue[200-136-72-3]"],
}
TOOLS = ["memcheck", "racecheck", "synccheck"]
ERRORS_FOUND = 97


def _sanitizer() -> str:
    found = os.environ.get("COMPUTE_SANITIZER") or shutil.which("compute-sanitizer")
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "compute-sanitizer"
    found = found or (str(cuda) if cuda.exists() else None)
    assert found, "compute-sanitizer not found: put the CUDA toolkit's bin/ on PATH or set COMPUTE_SANITIZER"
    return found


def _pytest(selection: str) -> list:
    return [sys.executable, "-m", "pytest", "-q", "-x", "-m", "gpu", "-p", "no:cacheprovider", *SELECTIONS[selection]]


@pytest.fixture(scope="module")
def child_env(tmp_path_factory):
    """The child pytest's environment, its kernels compiled once outside the tool (a shared cache);
    every selected test must exist and pass without the tool first."""
    env = {**os.environ, "TLX_SANITIZE": "1", "TLX_CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}
    for selection in SELECTIONS:
        warm = subprocess.run(_pytest(selection), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert warm.returncode == 0, warm.stdout[-3000:] + warm.stderr[-2000:]
        assert " passed" in warm.stdout and " skipped" not in warm.stdout, warm.stdout[-2000:]
    return env


def test_every_selection_names_tests_that_exist():
    """The ids above are collected (a renamed test or parameter would otherwise run nothing)."""
    for selection, ids in SELECTIONS.items():
        r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p",
                            "no:cacheprovider", *ids], cwd=ROOT, env={**os.environ, "TLX_SANITIZE": "1"},
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{selection}: {r.stdout[-2000:]}{r.stderr[-1000:]}"


@pytest.mark.parametrize("selection", list(SELECTIONS))
@pytest.mark.parametrize("tool", TOOLS)
def test_compute_sanitizer_reports_nothing(tool, selection, child_env):
    cmd = [_sanitizer(), "--tool", tool, "--error-exitcode", str(ERRORS_FOUND), "--print-limit", "20",
           *_pytest(selection)]
    run = subprocess.run(cmd, cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=540)
    tail = run.stdout[-4000:] + run.stderr[-2000:]
    assert run.returncode != ERRORS_FOUND, f"{tool} found errors:\n{tail}"
    assert run.returncode == 0, f"the tests failed under {tool} (rc {run.returncode}):\n{tail}"
    summary = "RACECHECK SUMMARY: 0 hazards displayed (0 errors" if tool == "racecheck" else "ERROR SUMMARY: 0 errors"
    assert summary in run.stdout + run.stderr, tail

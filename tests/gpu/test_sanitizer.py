"""compute-sanitizer's memcheck and racecheck report nothing on the TMA-store, wgmma and TMA-GEMM
tests of test_runtime_acceptance.py (run in a child pytest under the tool, with the fewer and
smaller shapes TLX_SANITIZE=1 selects: racecheck is slow)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.gpu_timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SELECTION = ["tests/gpu/test_runtime_acceptance.py", "-k", "tma_store or wgmma or multistage_tma_gemm"]
ERRORS_FOUND = 97


def _sanitizer() -> str:
    found = os.environ.get("COMPUTE_SANITIZER") or shutil.which("compute-sanitizer")
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "compute-sanitizer"
    found = found or (str(cuda) if cuda.exists() else None)
    assert found, "compute-sanitizer not found: put the CUDA toolkit's bin/ on PATH or set COMPUTE_SANITIZER"
    return found


@pytest.fixture(scope="module")
def child_env(tmp_path_factory):
    """The child pytest's environment, its kernels compiled once outside the tool (a shared cache)."""
    env = {**os.environ, "TLX_SANITIZE": "1", "TLX_CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}
    warm = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", *SELECTION],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert warm.returncode == 0, warm.stdout[-3000:] + warm.stderr[-2000:]
    return env


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer_reports_nothing(tool, child_env):
    cmd = [_sanitizer(), "--tool", tool, "--error-exitcode", str(ERRORS_FOUND), "--print-limit", "20",
           sys.executable, "-m", "pytest", "-q", "-x", "-m", "gpu", "-p", "no:cacheprovider", *SELECTION]
    run = subprocess.run(cmd, cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=540)
    tail = run.stdout[-4000:] + run.stderr[-2000:]
    assert run.returncode != ERRORS_FOUND, f"{tool} found errors:\n{tail}"
    assert run.returncode == 0, f"the tests failed under {tool} (rc {run.returncode}):\n{tail}"

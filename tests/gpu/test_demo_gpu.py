"""`tlx demo` on the GPU: the README's first command traces, fences and compiles the demo kernel,
runs it on the GPU and checks it against numpy (its exit status says whether it matched)."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu


def test_demo_runs_on_the_gpu_and_matches_numpy():
    r = subprocess.run([sys.executable, "-m", "tlx", "demo"], capture_output=True, text=True, timeout=170)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "5. Run on the GPU" in r.stdout
    assert "-> OK" in r.stdout

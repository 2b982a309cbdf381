"""The hand-written PTX of scripts/gpu_runtime_smoke.py assembles for sm_90a (so the GPU run
fails only for runtime reasons), and its kernel ABIs match the PTX entry parameters."""

import importlib.util
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PTXAS = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"


def _smoke():
    spec = importlib.util.spec_from_file_location("gpu_runtime_smoke",
                                                  os.path.join(ROOT, "scripts", "gpu_runtime_smoke.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not os.path.exists(PTXAS), reason="ptxas not installed")
@pytest.mark.parametrize("name", ["empty", "add", "cluster", "tma_read", "tma_roundtrip"])
def test_smoke_ptx_assembles(name, tmp_path):
    src = tmp_path / f"{name}.ptx"
    src.write_text(_smoke().SMOKE_PTX[name])
    r = subprocess.run([PTXAS, "-arch=sm_90a", "-o", str(tmp_path / "k.cubin"), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_smoke_abis_match_the_ptx_entries():
    smoke = _smoke()
    all_ptx = "\n".join(smoke.SMOKE_PTX.values())
    for name, abi in smoke._abis().items():
        m = re.search(r"\.entry\s+" + name + r"\s*\(([^)]*)\)", all_ptx)
        assert m, name
        params = [p.strip() for p in m.group(1).split(",") if p.strip()]
        assert len(params) == len(abi.params), name
        for text, p in zip(params, abi.params):
            assert text.split()[-1].split("[")[0] == p.name
            if p.kind == "tensordesc":
                assert ".b8" in text and "[128]" in text
            elif p.kind == "pointer":
                assert ".u64" in text
            else:
                assert {"u32": ".u32", "fp32": ".f32"}[p.dtype] in text

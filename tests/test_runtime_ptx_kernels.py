"""The hand-written PTX of the runtime's GPU tests (tests/kernels/runtime_ptx.py) assembles for
sm_90a, so the GPU run fails only for runtime reasons, and each kernel's ABI matches its PTX
entry's parameters (order, kind, size)."""

import re

import pytest

from kernels.runtime_ptx import PTX, abis
from tlx.compiler.ptxas import assemble


@pytest.mark.parametrize("name", sorted(PTX))
def test_runtime_test_ptx_assembles_for_sm90a(name):
    cubin, _, _ = assemble(PTX[name])
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("entry", sorted(abis()))
def test_runtime_test_abi_matches_its_ptx_entry(entry):
    abi = abis()[entry]
    m = re.search(r"\.entry\s+" + entry + r"\s*\(([^)]*)\)", "\n".join(PTX.values()))
    assert m, entry
    params = [p.strip() for p in m.group(1).split(",") if p.strip()]
    assert len(params) == len(abi.params)
    for text, p in zip(params, abi.params):
        assert text.split()[-1].split("[")[0] == p.name
        if p.kind == "tensordesc":
            assert ".b8" in text and "[128]" in text
        elif p.kind == "pointer":
            assert ".u64" in text
        else:
            assert {"u32": ".u32", "fp32": ".f32"}[p.dtype] in text

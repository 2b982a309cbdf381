"""Every kernel of scripts/gpu_codegen_check.py compiles and assembles on the CPU, so the GPU
check the lead runs on the H200 never fails for a reason CI could have caught."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu_codegen_check as G  # noqa: E402


@pytest.mark.parametrize("spec", G.COMPILE_SPECS, ids=lambda s: s[0])
def test_gpu_check_kernel_compiles(spec):
    import tlx

    name, fn, sig, consts, nw = spec
    k = tlx.compile(fn, sig, consts, num_warps=nw, divisibility={n: 16 for n in sig})
    assert isinstance(k.asm.get("cubin"), bytes), k.resources
    assert k.resources["spill_stores"] == 0, (name, k.resources)


def test_every_check_has_a_kernel_and_a_name():
    names = [n for n, _ in G.CHECKS]
    assert len(names) == len(set(names)) and len(names) > 80


@pytest.mark.parametrize("spec", G.COMPILE_SPECS[::2], ids=lambda s: s[0])
def test_gpu_check_kernel_registers_are_defined_on_every_path(spec):
    import tlx
    from ptx_checker import undefined_uses

    name, fn, sig, consts, nw = spec
    k = tlx.compile(fn, sig, consts, num_warps=nw, divisibility={n: 16 for n in sig}, assemble=False)
    assert undefined_uses(k.asm["ptx"]) == []

"""The code generator's GPU checks (scripts/gpu_codegen_check.py) as pytest tests: each kernel
runs on the H200 and is compared with numpy in float64 (outputs poisoned first)."""

from __future__ import annotations

import os
import sys

import pytest

pytestmark = pytest.mark.gpu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "scripts"))

import gpu_codegen_check as G  # noqa: E402


@pytest.mark.parametrize("name,fn", G.CHECKS, ids=[n for n, _ in G.CHECKS])
def test_codegen_on_gpu(name, fn):
    fn()

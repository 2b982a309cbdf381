"""Helpers for IR-text-in / IR-text-out fence tests: run chosen passes (verifier after each)."""

from __future__ import annotations

from typing import Iterable, Optional, Tuple

from filecheck import filecheck
from tlx.compiler.ir import parse_module, print_module
from tlx.compiler.options import CompileOptions
from tlx.compiler.pipeline import PIPELINE, CompileResult, compile_module

# the passes a test of one mechanism runs
PASS_A = ("fence_insertion",)
PASS_C = ("smem_allocation", "proxy_fence_insertion")
FENCES = ("lower_dot", "tma_lowering", "fence_insertion", "smem_allocation", "proxy_fence_insertion")
ALL = tuple(p.name for p in PIPELINE)

T16 = "tensor<128x128xf16>"
S = "!smem<128x128xf16>"  # immutable tile
SM = "!smem<128x128xf16, mutable>"
S64 = "!smem<64x64xf16>"
S64M = "!smem<64x64xf16, mutable>"
ACC = "tensor<128x128xf32>"


def module(body: str, args: str = "", attrs: str = 'num_warps = 4, target = "sm_90a"', name: str = "k") -> str:
    """A one-function module; `body` is the function body (ending before tt.return)."""
    return (f'#f0 = "kernel.py"\nmodule attributes {{{attrs}}} {{\n  tt.func @{name}({args}) {{\n'
            f"{body}\n    tt.return\n  }}\n}}\n")


def run(ir: str, passes: Iterable[str] = ALL, target: Optional[str] = None, **opts) -> Tuple[str, CompileResult]:
    """Parse, run `passes` (in pipeline order, verifying after each) and return (text, result)."""
    names = set(passes)
    plist = [p for p in PIPELINE if p.name in names]
    assert len(plist) == len(names), f"unknown passes in {names}"
    m = parse_module(ir)
    if target is not None:
        m.attrs["target"] = target
        opts["target"] = target
    res = compile_module(m, CompileOptions(verify_each_pass=True, **opts), passes=plist)
    return print_module(res.module, locs=False), res


def check(ir: str, checks: str, passes: Iterable[str] = ALL, **opts) -> CompileResult:
    """Run the passes and FileCheck the resulting IR text."""
    text, res = run(ir, passes, **opts)
    filecheck(text, checks)
    return res


def count_fences(text: str) -> int:
    return text.count("tlx.fence_async_shared")

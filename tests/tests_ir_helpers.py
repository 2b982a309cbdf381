"""Helpers for codegen tests written as IR text: run the whole pipeline (IR passes and codegen)."""

from __future__ import annotations

from tlx.compiler.ir import parse_module
from tlx.compiler.options import CompileOptions
from tlx.compiler.pipeline import compile_module


def compile_ir_text(body: str, args: str = "", nw: int = 4, divs=None) -> str:
    """A one-function module from `body` (its ops, without tt.return) -> PTX."""
    d = f", divisibility = {divs}" if divs else ""
    text = (f'#f0 = "kernel.py"\nmodule attributes {{num_warps = {nw}, target = "sm_90a"}} {{\n'
            f'  tt.func @k({args}) attributes {{arg_names = []{d}}} {{\n{body}\n    tt.return\n  }}\n}}\n')
    r = compile_module(parse_module(text), CompileOptions(num_warps=nw, verify_each_pass=True), snapshots=False)
    assert "cubin" in r.asm
    return r.asm["ptx"]

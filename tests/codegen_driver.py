"""Test-only driver for code generation while the pass pipeline is being built: the layout pass,
a bump allocator standing in for shared-memory allocation (no reuse; the alignment TMA and wgmma
need), then PTX. Tests switch to `compiler.pipeline.compile_module` once it lands."""

from __future__ import annotations

from tlx.compiler.codegen.lower import lower_module
from tlx.compiler.ir import layouts as L
from tlx.compiler.ir import parse_module, types as T, verify_module
from tlx.compiler.passes import layouts


def bump_allocate(module) -> None:
    """Give every allocation, barrier array and scratch op its own shared bytes."""
    off = 0

    def take(nbytes, align):
        nonlocal off
        off = (off + align - 1) // align * align
        o = off
        off += nbytes
        return o

    for op in module.ops():
        if op.name == "tlx.local_alloc":
            t = op.result.type
            align = 1024 if isinstance(t.layout, L.NVMMASharedLayout) and t.layout.swizzle else 16
            op.attrs["offset"] = take(t.nbytes, align)
        elif op.name == "tlx.alloc_barriers":
            op.attrs["offset"] = take(8 * op.attrs["num"], 8)
        elif "scratch_bytes" in op.attrs:
            op.attrs["scratch_offset"] = take(op.attrs["scratch_bytes"], max(16, op.attrs.get("scratch_align", 16)))
    module.attrs["shared_bytes"] = off


def compile_ir(text: str):
    """IR text → (module after the layout pass, PTX, ABI)."""
    m = parse_module(text)
    verify_module(m)
    layouts.run(m)
    verify_module(m)
    bump_allocate(m)
    ptx, abi = lower_module(m)
    return m, ptx, abi

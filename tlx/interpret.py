"""`tlx.interpret(kernel, grid, *args, **constexprs)`: run a kernel on the CPU interpreter, with the
proxy-hazard checker, after the compiler's passes up to (not including) code generation.

Arguments are numpy arrays and torch tensors (run on in place; device arrays are copied to the host
and back), numbers and host tensor descriptors (`tlx/interpreter/arguments.py`). The signature is
inferred from them; `signature=` overrides entries (e.g. ``{"a_ptr": "*bf16"}`` for bf16 data
held as uint16 bit patterns). `TLX_INTERPRET=1` routes `kernel[grid](...)` here.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from tlx.compiler.errors import TLXCompileError
from tlx.compiler.options import CompileOptions

from .jit import JITFunction
from .language import core
from .signature import type_from_signature

def prepare_module(fn: JITFunction, bound: Dict[str, Any], signature: Optional[Mapping[str, str]] = None,
                   num_warps: int = 4, fence_passes: bool = True):
    """Trace for these arguments and run the passes the interpreter executes after."""
    from tlx.compiler.pipeline import PIPELINE, compile_module
    from tlx.interpreter.arguments import kernel_signature

    sig = {}
    consts = {}
    for p in fn.params:
        v = bound[p.name]
        if p.is_constexpr:
            consts[p.name] = core.unwrap(v)
        else:
            sig[p.name] = (signature or {}).get(p.name) or kernel_signature(p.name, v)
    types = {k: type_from_signature(v, k) for k, v in sig.items()}
    module = fn.trace(types, consts, num_warps=num_warps)
    names = [p.name for p in PIPELINE]
    last = names.index("cta_barriers") + 1 if "cta_barriers" in names else len(names)
    result = compile_module(module, CompileOptions(num_warps=num_warps, fence_passes=fence_passes),
                            passes=PIPELINE[:last], snapshots=False)
    return result.module


def interpret(kernel: Any, grid: Any, *args: Any, fence_passes: bool = True, raise_on_hazard: bool = True,
              signature: Optional[Mapping[str, str]] = None, num_warps: int = 4, **kwargs: Any) -> List[Any]:
    """Run `kernel` over `grid` on the CPU; returns the hazards found (report mode:
    `raise_on_hazard=False`; otherwise the first hazard raises)."""
    from tlx.interpreter import run

    from .launch import _grid_tuple, bind_arguments

    if not isinstance(kernel, JITFunction):
        raise TLXCompileError(f"tlx.interpret needs a @tlx.jit kernel, got {type(kernel).__name__}")
    bound = bind_arguments(kernel, args, kwargs)
    module = prepare_module(kernel, bound, signature, num_warps, fence_passes)
    g = _grid_tuple(grid, dict(bound))
    runtime_args = [bound[p.name] for p in kernel.params if not p.is_constexpr]
    return run(module, g, runtime_args, raise_on_hazard=raise_on_hazard)

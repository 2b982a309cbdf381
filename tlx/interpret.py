"""`tlx.interpret(kernel, grid, *args, **constexprs)`: run a kernel on the CPU interpreter, with the
proxy-hazard checker, after the compiler's passes up to (not including) code generation.

Arguments are numpy arrays (or device arrays, copied to the host and back), numbers and host
tensor descriptors (any object with `base`, `shape`, `strides`, `block_shape`). The signature is
inferred from them; `signature=` overrides entries (e.g. ``{"a_ptr": "*bf16"}`` for bf16 data
held as uint16 bit patterns). `TLX_INTERPRET=1` routes `kernel[grid](...)` here.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from tlx.compiler.errors import TLXCompileError, TLXError
from tlx.compiler.options import CompileOptions

from .jit import JITFunction
from .language import core
from .signature import type_from_signature

_NUMPY_SIG = {"float16": "fp16", "float32": "fp32", "float64": "fp64", "int8": "i8", "int16": "i16", "int32": "i32",
              "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "i1",
              "bfloat16": "bf16", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}


def _elem_sig(dt: Any) -> str:
    s = _NUMPY_SIG.get(np.dtype(dt).name)
    if s is None:
        raise TLXError(f"numpy dtype {np.dtype(dt)} has no kernel type")
    return s


def _signature_of(name: str, v: Any) -> str:
    if isinstance(v, np.ndarray):
        return "*" + _elem_sig(v.dtype)
    if all(hasattr(v, a) for a in ("base", "shape", "strides", "block_shape")):
        if v.block_shape is None:
            raise TLXError(f"tensor descriptor '{name}' has no block_shape", hint="set desc.block_shape first")
        es = _signature_of(name, v.base)
        return f"tensordesc<{es[1:]}[{', '.join(str(int(b)) for b in v.block_shape)}]>"
    if isinstance(v, bool) or isinstance(v, np.bool_):
        return "i1"
    if isinstance(v, (int, np.integer)):
        if isinstance(v, np.integer):
            return _elem_sig(np.asarray(v).dtype)
        return "i32" if -2 ** 31 <= v < 2 ** 31 else "i64"
    if isinstance(v, (float, np.floating)):
        return "fp32" if not isinstance(v, np.floating) else _elem_sig(np.asarray(v).dtype)
    if getattr(v, "is_cuda", None) is False and hasattr(v, "copy_"):
        # a torch tensor in host memory: the interpreter copies it like a device array (the
        # runtime's signature_of rightly refuses it as a kernel argument)
        from tlx.runtime.dtypes import dtype_of_torch

        dt = dtype_of_torch(v.dtype)
        if dt is None:
            raise TLXError(f"argument '{name}': torch dtype {v.dtype} has no kernel type")
        return "*" + dt
    from tlx.runtime.arrays import signature_of

    return signature_of(v).type


def prepare_module(fn: JITFunction, bound: Dict[str, Any], signature: Optional[Mapping[str, str]] = None,
                   num_warps: int = 4, fence_passes: bool = True):
    """Trace for these arguments and run the passes the interpreter executes after."""
    from tlx.compiler.pipeline import PIPELINE, compile_module

    sig = {}
    consts = {}
    for p in fn.params:
        v = bound[p.name]
        if p.is_constexpr:
            consts[p.name] = core.unwrap(v)
        else:
            sig[p.name] = (signature or {}).get(p.name) or _signature_of(p.name, v)
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

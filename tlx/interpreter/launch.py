"""`interpret(kernel, grid, *args, **kwargs)`: trace a `@tlx.jit` kernel for the given host
arguments, optionally run the pre-layout fence passes, and execute it with the interpreter.

This is what `tlx.interpret(...)` and `TLX_INTERPRET=1` for `kernel[grid](...)` call. Argument
types come from the arguments themselves (numpy dtype → `!ptr<T>`; a descriptor → its block
shape and its base's dtype; Python int → i32 (i64 when it does not fit), bool → i1, float → f32);
`signature={"x_ptr": "*bf16"}` overrides them (bf16/fp8 arrays of raw bit patterns need it).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from tlx.compiler.errors import TLXCompileError
from tlx.compiler.ir import types as T

from .api import Grid, run
from .hazards import Hazard

_NUMPY_TO_IR = {
    "float16": T.f16, "float32": T.f32, "float64": T.f64, "bfloat16": T.bf16, "float8_e4m3fn": T.f8e4m3,
    "float8_e5m2": T.f8e5m2, "bool": T.i1, "int8": T.i8, "int16": T.i16, "int32": T.i32, "int64": T.i64,
    "uint8": T.u8, "uint16": T.u16, "uint32": T.u32, "uint64": T.u64,
}

# the passes that run before layouts (the interpreter executes the IR they leave)
PRE_LAYOUT_PASSES = ("lower_dot", "tma_lowering", "fence_insertion", "smem_allocation", "proxy_fence_insertion",
                     "cta_barriers")


def _array_of(x: Any) -> Any:
    inner = getattr(x, "array", None)  # runtime host_copy(x)
    return inner if isinstance(inner, np.ndarray) else x


def _element_of(x: Any, name: str) -> T.ScalarType:
    dt = getattr(_array_of(x), "dtype", None)
    t = _NUMPY_TO_IR.get(getattr(dt, "name", str(dt)))
    if t is None:
        raise TLXCompileError(f"argument '{name}': cannot tell the element type of {type(x).__name__} "
                              f"(dtype {dt})", hint=f"give signature={{'{name}': '*fp16'}} (or the right type)")
    return t


def arg_type(x: Any, name: str) -> T.Type:
    """The IR type a host argument gives its parameter."""
    if isinstance(x, (bool, np.bool_)):
        return T.i1
    if isinstance(x, (int, np.integer)):
        if isinstance(x, np.integer):
            return _NUMPY_TO_IR[np.dtype(type(x)).name]
        return T.i32 if -2**31 <= x < 2**31 else T.i64
    if isinstance(x, (float, np.floating)):
        return T.f64 if isinstance(x, np.float64) and not isinstance(x, float) else T.f32
    if all(hasattr(x, a) for a in ("base", "shape", "strides", "block_shape")):
        if x.block_shape is None:
            raise TLXCompileError(f"argument '{name}': the tensor descriptor has no block_shape")
        return T.TensorDescType(tuple(int(b) for b in x.block_shape), _element_of(x.base, name))
    return T.PointerType(_element_of(x, name))


def interpret(kernel: Any, grid: Grid, *args: Any, fence_passes: bool = True, raise_on_hazard: bool = True,
              num_warps: Optional[int] = None, signature: Optional[Mapping[str, str]] = None,
              **kwargs: Any) -> List[Hazard]:
    """Run `kernel` (a `@tlx.jit` function) on the CPU over `grid`: positional and keyword
    arguments as for `kernel[grid](...)` (runtime parameters are numpy arrays / host descriptors /
    numbers, constexpr parameters are values), `fence_passes=False` interprets the traced IR
    with only the user's fences. Returns the hazards found (see `tlx.interpreter.run`)."""
    from tlx.jit import JITFunction
    from tlx.signature import signature_to_types

    if not isinstance(kernel, JITFunction):
        raise TLXCompileError(f"interpret needs a @tlx.jit kernel, got {type(kernel).__name__}")
    params = kernel.params
    bound: Dict[str, Any] = {}
    if len(args) > len(params):
        raise TLXCompileError(f"kernel {kernel.__name__} takes {len(params)} parameters, got {len(args)} arguments")
    for p, a in zip(params, args):
        bound[p.name] = a
    for k, v in kwargs.items():
        if k not in {p.name for p in params}:
            raise TLXCompileError(f"kernel {kernel.__name__} has no parameter '{k}'")
        if k in bound:
            raise TLXCompileError(f"parameter '{k}' of kernel {kernel.__name__} given twice")
        bound[k] = v
    launch = dict(getattr(kernel, "launch_defaults", {}) or {})
    nw = int(num_warps if num_warps is not None else launch.get("num_warps", 4))
    constexprs = {p.name: bound[p.name] for p in params if p.is_constexpr and p.name in bound}
    runtime = [p for p in params if not p.is_constexpr]
    missing = [p.name for p in runtime if p.name not in bound]
    if missing:
        raise TLXCompileError(f"kernel {kernel.__name__}: no argument for {', '.join(missing)}")
    overrides = signature_to_types(signature or {})
    types = {p.name: overrides.get(p.name) or arg_type(bound[p.name], p.name) for p in runtime}
    module = kernel.trace(types, constexprs, num_warps=nw)
    if fence_passes:
        from tlx.compiler.options import CompileOptions
        from tlx.compiler.pipeline import PIPELINE, compile_module

        passes = [p for p in PIPELINE if p.name in PRE_LAYOUT_PASSES]
        module = compile_module(module, CompileOptions(num_warps=nw, fence_passes=True), passes=passes,
                                snapshots=False).module
    return run(module, grid, [bound[p.name] for p in runtime], raise_on_hazard=raise_on_hazard)

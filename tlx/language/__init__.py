"""`import tlx.language as tl`: the Triton core language subset that tlx kernels use.

Everything here is meant to be called inside a `@tlx.jit` kernel; the tracer turns the calls
into IR. Names and defaults follow `triton.language`.
"""

from __future__ import annotations

from typing import Any

from tlx.compiler.errors import TLXCompileError

from . import math, semantic
from .math import abs, ceil, cos, exp, exp2, floor, fma, log, log2, rsqrt, sigmoid, sin, sqrt
from .core import dtype as dtype_cls
from .core import (block_type, bfloat16, builtin, constexpr, dtype, float8e4nv, float8e5, float16, float32,
                   float64, int1, int8, int16, int32, int64, pointer_type, tensor, tensor_descriptor, uint8,
                   uint16, uint32, uint64, unwrap, shape_arg)

float8e4m3fn = float8e4nv
float8e5m2 = float8e5
bool_ = int1

__all__ = [
    "arange", "argmax", "argmin", "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min",
    "atomic_or", "atomic_xchg", "atomic_xor", "bfloat16", "block_type", "broadcast_to", "cast", "cdiv",
    "constexpr", "debug_barrier", "dot", "dtype", "exp", "exp2", "expand_dims", "fdiv", "float16", "float32",
    "float64", "float8e4nv", "float8e5", "fma", "full", "int1", "int8", "int16", "int32", "int64", "join",
    "load", "log", "log2", "make_tensor_descriptor", "math", "max", "max_contiguous", "maximum", "min",
    "minimum", "multiple_of", "num_programs", "permute", "pointer_type", "program_id", "range", "reshape",
    "rsqrt", "sigmoid", "split", "sqrt", "static_assert", "static_print", "static_range", "store", "sum",
    "tensor", "tensor_descriptor", "trans", "uint8", "uint16", "uint32", "uint64", "where", "xor_sum",
    "zeros", "zeros_like", "abs", "floor", "ceil", "sin", "cos", "cumsum", "reduce", "clamp", "view",
    "umulhi", "full_like", "assume", "inline_asm_elementwise",
]


# ---- program structure -------------------------------------------------------------------------

@builtin
def program_id(axis: Any) -> tensor:
    """The index of this program along `axis` (0, 1, 2) of the launch grid."""
    return semantic.program_id(axis)


@builtin
def num_programs(axis: Any) -> tensor:
    """The number of programs along `axis` of the launch grid."""
    return semantic.num_programs(axis)


class range:
    """`for i in tl.range(lb, ub, step, num_stages=..., loop_unroll_factor=...)`: a runtime loop
    (an `scf.for`); the options are recorded on the loop."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None, num_stages: Any = None,
                 loop_unroll_factor: Any = None, disallow_acc_multi_buffer: Any = False, flatten: Any = False,
                 warp_specialize: Any = False, disable_licm: Any = False):
        if arg2 is None:
            self.start, self.end = 0, arg1
        else:
            self.start, self.end = arg1, arg2
        self.step = 1 if step is None else step
        self.num_stages = unwrap(num_stages)
        self.loop_unroll_factor = unwrap(loop_unroll_factor)


class static_range:
    """`for i in tl.static_range(lb, ub, step)`: unrolled while tracing; `i` is a compile-time int."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None):
        vals = [unwrap(v) for v in ((0, arg1, 1) if arg2 is None else (arg1, arg2, 1 if step is None else step))]
        for v in vals:
            if not isinstance(v, int):
                raise TLXCompileError("static_range bounds must be compile-time integers",
                                      hint="use tl.range for runtime bounds")
        self.start, self.end, self.step = vals


@builtin
def static_assert(cond: Any, msg: str = "") -> None:
    """Fail the compile when the compile-time condition `cond` is false."""
    cond = unwrap(cond)
    if isinstance(cond, tensor):
        raise TLXCompileError("static_assert needs a compile-time condition", hint="use tl.constexpr values")
    if not cond:
        raise TLXCompileError(f"static_assert failed{': ' + str(unwrap(msg)) if msg else ''}")


@builtin
def static_print(*values: Any) -> None:
    """Print compile-time values while tracing."""
    print(*[unwrap(v) for v in values])


@builtin
def debug_barrier() -> None:
    """A CTA barrier (bar.sync)."""
    semantic.emit("tlx.cta_barrier")


@builtin
def assume(cond: Any) -> None:
    """An optimization hint; tlx accepts it and ignores runtime conditions."""
    return None


# ---- creation ----------------------------------------------------------------------------------

@builtin
def arange(start: Any, end: Any) -> tensor:
    """The int32 block [start, start+1, ..., end-1] (a power-of-two number of elements)."""
    return semantic.arange(start, end)


@builtin
def zeros(shape: Any, dtype: Any) -> tensor:
    """A block of zeros."""
    return semantic.full(shape, 0, unwrap(dtype))


@builtin
def full(shape: Any, value: Any, dtype: Any) -> tensor:
    """A block filled with `value`."""
    return semantic.full(shape, unwrap(value), unwrap(dtype))


@builtin
def zeros_like(x: Any) -> tensor:
    x = semantic.to_tensor(x)
    return semantic.full(x.shape, 0, x.dtype)


@builtin
def full_like(x: Any, value: Any) -> tensor:
    x = semantic.to_tensor(x)
    return semantic.full(x.shape, unwrap(value), x.dtype)


@builtin
def cdiv(x: Any, div: Any) -> Any:
    """Ceiling division (compile-time when both are compile-time)."""
    x, div = unwrap(x), unwrap(div)
    return (x + div - 1) // div


# ---- memory ------------------------------------------------------------------------------------

@builtin
def load(pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (), padding_option: Any = "",
         cache_modifier: Any = "", eviction_policy: Any = "", volatile: Any = False) -> tensor:
    """Load through a pointer or a block of pointers; masked-off lanes give `other` (or 0)."""
    return semantic.load(pointer, mask, other, boundary_check, padding_option, cache_modifier, eviction_policy, volatile)


@builtin
def store(pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (), cache_modifier: Any = "",
          eviction_policy: Any = "") -> None:
    """Store `value` through a pointer or a block of pointers where `mask` is true."""
    semantic.store(pointer, value, mask, boundary_check, cache_modifier, eviction_policy)


def _atomic(op: str):
    def fn(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
        return semantic.atomic(op, pointer, val, mask, sem, scope)
    fn.__name__ = f"atomic_{op}"
    fn.__doc__ = f"Atomic {op}; returns the old values."
    return builtin(fn)


atomic_add = _atomic("add")
atomic_max = _atomic("max")
atomic_min = _atomic("min")
atomic_and = _atomic("and")
atomic_or = _atomic("or")
atomic_xor = _atomic("xor")
atomic_xchg = _atomic("xchg")


@builtin
def atomic_cas(pointer: Any, cmp: Any, val: Any, sem: Any = None, scope: Any = None) -> tensor:
    """Atomic compare-and-swap; returns the old values."""
    return semantic.atomic_cas(pointer, cmp, val, sem, scope)


@builtin
def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any, padding_option: Any = "zero"):
    """A TMA descriptor built on the device for the tensor at `base`."""
    return semantic.make_tensor_descriptor(base, shape, strides, block_shape, padding_option)


# ---- elementwise -------------------------------------------------------------------------------

@builtin
def where(condition: Any, x: Any, y: Any) -> tensor:
    return semantic.where(condition, x, y)


@builtin
def minimum(x: Any, y: Any, propagate_nan: Any = None) -> tensor:
    return semantic.minimum(x, y, propagate_nan)


@builtin
def maximum(x: Any, y: Any, propagate_nan: Any = None) -> tensor:
    return semantic.maximum(x, y, propagate_nan)


@builtin
def clamp(x: Any, min: Any, max: Any, propagate_nan: Any = None) -> tensor:
    return semantic.minimum(semantic.maximum(x, min, propagate_nan), max, propagate_nan)


@builtin
def cast(x: Any, dtype: Any, fp_downcast_rounding: Any = None, bitcast: Any = False) -> tensor:
    return semantic.cast(x, unwrap(dtype), unwrap(fp_downcast_rounding), unwrap(bitcast))


@builtin
def fdiv(x: Any, y: Any, ieee_rounding: Any = False) -> tensor:
    return semantic.truediv(x, y)


@builtin
def umulhi(x: Any, y: Any) -> tensor:
    raise TLXCompileError("tl.umulhi is not supported by tlx yet")


# ---- shapes ------------------------------------------------------------------------------------

@builtin
def reshape(input: Any, *shape: Any, can_reorder: Any = False) -> tensor:
    shape = tuple(unwrap(shape_arg(shape)))
    return semantic.reshape(semantic.to_tensor(input), shape, unwrap(can_reorder))


view = reshape


@builtin
def permute(input: Any, *dims: Any) -> tensor:
    dims = tuple(unwrap(shape_arg(dims)))
    return semantic.permute(semantic.to_tensor(input), dims)


@builtin
def trans(input: Any, *dims: Any) -> tensor:
    dims = tuple(unwrap(shape_arg(dims)))
    return semantic.permute(semantic.to_tensor(input), dims or (1, 0))


@builtin
def expand_dims(input: Any, axis: Any) -> tensor:
    x = semantic.to_tensor(input)
    axis = unwrap(axis)
    for a in sorted(axis) if isinstance(axis, (tuple, list)) else [axis]:
        x = semantic.expand_dims(x, a)
    return x


@builtin
def broadcast_to(input: Any, *shape: Any) -> tensor:
    shape = tuple(unwrap(shape_arg(shape)))
    return semantic.broadcast_to(semantic.to_tensor(input), shape)


@builtin
def join(a: Any, b: Any) -> tensor:
    return semantic.join(semantic.to_tensor(a), semantic.to_tensor(b))


@builtin
def split(a: Any):
    return semantic.split(semantic.to_tensor(a))


# ---- reductions --------------------------------------------------------------------------------

@builtin
def sum(input: Any, axis: Any = None, keep_dims: Any = False, dtype: Any = None) -> tensor:
    x = semantic.to_tensor(input)
    if unwrap(dtype) is not None:
        x = semantic.cast(x, unwrap(dtype))
    return semantic.reduce(x, axis, "sum", keep_dims)


def _extremum(kind: str, doc: str):
    def fn(input: Any, axis: Any = None, return_indices: Any = False, return_indices_tie_break_left: Any = True,
           keep_dims: Any = False) -> Any:
        if unwrap(return_indices):
            return (semantic.reduce(input, axis, kind, keep_dims), semantic.reduce(input, axis, "arg" + kind, keep_dims))
        return semantic.reduce(input, axis, kind, keep_dims)
    fn.__name__ = kind
    fn.__doc__ = doc
    return builtin(fn)


max = _extremum("max", "The largest element along `axis` (all axes when None); with return_indices, also its index.")
min = _extremum("min", "The smallest element along `axis` (all axes when None); with return_indices, also its index.")


@builtin
def argmax(input: Any, axis: Any, tie_break_left: Any = True, keep_dims: Any = False) -> tensor:
    return semantic.reduce(input, axis, "argmax", keep_dims)


@builtin
def argmin(input: Any, axis: Any, tie_break_left: Any = True, keep_dims: Any = False) -> tensor:
    return semantic.reduce(input, axis, "argmin", keep_dims)


@builtin
def xor_sum(input: Any, axis: Any = None, keep_dims: Any = False) -> tensor:
    return semantic.reduce(input, axis, "xor_sum", keep_dims)


@builtin
def reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: Any = False) -> tensor:
    raise TLXCompileError("tl.reduce with a custom combine function is not supported by tlx yet",
                          hint="use tl.sum, tl.max, tl.min, tl.argmax, tl.argmin or tl.xor_sum")


@builtin
def cumsum(input: Any, axis: Any = 0, reverse: Any = False) -> tensor:
    raise TLXCompileError("tl.cumsum is not supported by tlx yet")


# ---- inline PTX ----------------------------------------------------------------------------------

@builtin
def inline_asm_elementwise(asm: Any, constraints: Any, args: Any, dtype: Any, is_pure: Any, pack: Any) -> Any:
    """Run PTX `asm` on every element: the arguments are broadcast to one shape, each call of the
    asm handles `pack` elements per thread (narrow operands packed into 32-bit registers), `$N`
    names its operands (outputs first) and `constraints` their registers ("=r,r,r"). `dtype` is
    the result dtype, or a tuple of dtypes for several results (then a tuple is returned).
    `is_pure=False` keeps the asm even when its results are unused. The fence passes cannot see
    inside the asm; the CPU interpreter runs only its `nanosleep` and `mov` statements."""
    from tlx.compiler.codegen import inline_asm

    text, cons = unwrap(asm), unwrap(constraints)
    if not isinstance(text, str) or not isinstance(cons, str):
        raise TLXCompileError("inline_asm_elementwise needs the asm and the constraints as compile-time strings")
    pure, npack = unwrap(is_pure), unwrap(pack)
    if not isinstance(pure, bool):
        raise TLXCompileError(f"inline_asm_elementwise is_pure must be a compile-time bool, got {pure!r}")
    dts = unwrap(dtype)
    many = isinstance(dts, (list, tuple))
    dts = [unwrap(d) for d in dts] if many else [dts]
    for d in dts:
        if not isinstance(d, dtype_cls) or d.is_ptr():
            raise TLXCompileError(f"inline_asm_elementwise dtype must be a scalar dtype (or a tuple of them), got {d!r}")
    vals = [semantic.to_tensor(unwrap(a)) for a in unwrap(args)]
    shape: tuple = ()
    for v in vals:
        shape = semantic.broadcast_shapes(shape, v.shape)
    vals = [semantic.broadcast_to(v, shape) for v in vals]
    inline_asm.plan(cons, [v.dtype.primitive_bitwidth for v in vals], [d.primitive_bitwidth for d in dts], npack)
    op = semantic.emit("tt.elementwise_inline_asm", [[v.handle for v in vals]],
                       [semantic.ir_type(d, shape) for d in dts],
                       {"asm": text, "constraints": cons, "pure": pure, "pack": npack})
    outs = tuple(tensor(r, d, shape) for r, d in zip(op.results, dts))
    return outs if many else outs[0]


# ---- dot and hints -----------------------------------------------------------------------------

@builtin
def dot(input: Any, other: Any, acc: Any = None, input_precision: Any = None, allow_tf32: Any = None,
        max_num_imprecise_acc: Any = None, out_dtype: Any = float32) -> tensor:
    """Matrix product of two 2-D blocks (+ acc), fp32 accumulation by default."""
    return semantic.dot(input, other, acc, input_precision, allow_tf32, max_num_imprecise_acc, out_dtype)


@builtin
def multiple_of(input: Any, values: Any) -> tensor:
    """Promise that each dimension's values are multiples of `values`."""
    return semantic.hint(input, "divisibility", values)


@builtin
def max_contiguous(input: Any, values: Any) -> tensor:
    """Promise that the first `values` elements of each dimension are contiguous."""
    return semantic.hint(input, "contiguity", values)

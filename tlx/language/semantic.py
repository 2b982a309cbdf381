"""How the Triton core language builds IR: type promotion, broadcasting, casts, arithmetic,
comparisons, memory ops, reductions and shape ops — the rules of Triton's `semantic.py`, re-done
over our IR. Every function emits IR through the active trace (`core.current()`).

Python numbers that meet a tensor are *weak*: they take the tensor's type when they are of a
lower or equal kind (bool < uint < int < float), as in Triton and PyTorch.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tlx.compiler.analysis.layout_math import is_pow2
from tlx.compiler.errors import TLXCompileError, TLXValueError
from tlx.compiler.ir import Operation
from tlx.compiler.ir import layouts as L
from tlx.compiler.ir import types as T

from . import core
from .core import (buffered_tensor, dtype, float16, float32, float64, bfloat16, int1, int8, int32,
                   int64, mbarrier, pointer_type, tensor, uint32, uint64, unwrap)

# ---------------------------------------------------------------------------------------------
# emission helpers
# ---------------------------------------------------------------------------------------------


def ir_type(dt: dtype, shape: Sequence[int] = ()) -> T.Type:
    """The IR type of a value of dtype `dt` and block shape `shape` (scalar when empty)."""
    e = dt.to_ir()
    return T.TensorType(tuple(shape), e) if shape else e  # type: ignore[arg-type]


def emit(name: str, operands: Sequence[Any] = (), result_types: Sequence[T.Type] = (), attrs: Optional[Dict] = None):
    """Create op `name` at the trace's insertion point (with the current source location)."""
    return core.current().builder.create(name, operands, result_types, attrs)


def emit1(name: str, operands: Sequence[Any], dt: dtype, shape: Sequence[int] = (), attrs: Optional[Dict] = None) -> tensor:
    """Create a one-result op and wrap its result as a tensor."""
    op = emit(name, operands, [ir_type(dt, shape)], attrs)
    return tensor(op.result, dt, shape)


def err(msg: str, hint: Optional[str] = None) -> TLXCompileError:
    return TLXCompileError(msg, hint=hint)


# ---------------------------------------------------------------------------------------------
# scalars and constants
# ---------------------------------------------------------------------------------------------


def type_of_python_scalar(x: Any) -> dtype:
    """Triton's type for a Python literal: bool → int1, int → int32/uint32/int64/uint64 by range,
    float → fp32 (fp64 when fp32 cannot hold it)."""
    if isinstance(x, bool):
        return int1
    if isinstance(x, int):
        for dt in (int32, uint32, int64, uint64):  # the first whose range holds x
            lo, hi = dt.int_range()
            if lo <= x <= hi:
                return dt
        raise err(f"integer {x} does not fit in 64 bits")
    if isinstance(x, float):
        a = abs(x)
        if a == 0.0 or a == float("inf") or x != x or 2.0 ** -126 <= a <= (2 - 2 ** -23) * 2.0 ** 127:
            return float32
        return float64
    raise err(f"cannot use a {type(x).__name__} ({x!r}) as a kernel value",
              hint="only numbers, tensors, buffers, barriers and descriptors are kernel values")


def constant(value: Any, dt: dtype, shape: Sequence[int] = ()) -> tensor:
    """A constant (scalar, or a splatted block). Constants are created once per value and type,
    at the top of the function (or of the worker partition, which cannot see outer values)."""
    ctx = core.current()
    t = ir_type(dt, shape)
    anchor = ctx.const_anchor[-1]
    key = (id(anchor), t, type(value), value)
    v = ctx.const_cache.get(key)
    if v is None:
        name = f"c{value}_{dt.sig}".replace("-", "m") if isinstance(value, int) and not shape else "cst"
        op = Operation("arith.constant", [], [t], {"value": value}, 0, ctx.builder.loc, [name])
        n = ctx.const_count.get(id(anchor), 0)
        anchor.insert(n, op)
        ctx.const_count[id(anchor)] = n + 1
        if ctx.builder.block is anchor and ctx.builder.index is not None:
            ctx.builder.index += 1
        v = op.result
        ctx.const_cache[key] = v
    return tensor(v, dt, tuple(shape))


def scalar_constant(value: Any, dt: dtype) -> tensor:
    """A scalar constant of dtype `dt`."""
    return full((), value, dt)


def full(shape: Sequence[int], value: Any, dt: dtype) -> tensor:
    """A block of `shape` (a scalar when empty) filled with `value` (a constant when `value` is a
    number, range-checked against `dt`)."""
    shape = check_shape(shape)
    if isinstance(value, tensor):
        v = cast(value, dt)
        return splat(v, shape)
    if dt.is_int() or dt.is_bool():
        lo, hi = dt.int_range()
        if not lo <= int(value) <= hi:
            raise err(f"constant {value} is out of range for {dt}")
        value = bool(value) if dt.is_bool() else int(value)
    else:
        value = float(value)
    if dt.is_fp8():  # no fp8 immediates in PTX: an fp32 constant, rounded to fp8 once
        return cast(constant(value, float32, shape), dt)
    return constant(value, dt, shape)


def to_tensor(x: Any) -> tensor:
    """A tensor for `x` (Python numbers become constants of their natural type)."""
    x = unwrap(x)
    if isinstance(x, tensor):
        return x
    if isinstance(x, (bool, int, float)):
        return scalar_constant(x, type_of_python_scalar(x))
    raise err(f"expected a tensor or a number, got {type(x).__name__} ({x!r})")


def check_shape(shape: Any) -> Tuple[int, ...]:
    """Block shapes are compile-time powers of two."""
    shape = unwrap(shape)
    if isinstance(shape, int):
        shape = (shape,)
    out = []
    for d in shape:
        d = unwrap(d)
        if isinstance(d, tensor):
            raise err("a block shape must be known at compile time, got a runtime value",
                      hint="pass the size as a tl.constexpr parameter (or a literal)")
        if not isinstance(d, int) or isinstance(d, bool):
            raise err(f"block shape entries must be integers, got {d!r}")
        if not is_pow2(d):
            raise err(f"block shape {tuple(shape)} has a dimension that is not a power of two ({d})",
                      hint="use power-of-two block sizes and mask the remainder")
        out.append(d)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------------------------


def splat(x: tensor, shape: Sequence[int]) -> tensor:
    """Broadcast a scalar to a block (a constant becomes a tensor constant)."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    if x.shape:
        raise err(f"cannot splat a block of shape {list(x.shape)}")
    d = x.handle.defining_op
    if d is not None and d.name == "arith.constant":
        return constant(d.attrs["value"], x.dtype, shape)
    return emit1("tt.splat", [x.handle], x.dtype, shape)


def expand_dims(x: tensor, axis: int) -> tensor:
    axis = unwrap(axis)
    if not x.shape:
        x = splat(x, (1,))
        return x if axis in (0, -1) else expand_dims(x, axis)
    rank = len(x.shape)
    if axis < 0:
        axis += rank + 1
    if not 0 <= axis <= rank:
        raise err(f"expand_dims axis {axis} out of range for a rank-{rank} tensor")
    shape = list(x.shape)
    shape.insert(axis, 1)
    return emit1("tt.expand_dims", [x.handle], x.dtype, shape, {"axis": axis})


def broadcast_to(x: tensor, shape: Sequence[int]) -> tensor:
    """Broadcast `x` to `shape` (numpy rules: size-1 dimensions stretch, missing leading ones added)."""
    shape = tuple(unwrap(s) for s in shape)
    if x.shape == shape:
        return x
    if not x.shape:
        return splat(x, shape)
    while len(x.shape) < len(shape):
        x = expand_dims(x, 0)
    if len(x.shape) != len(shape):
        raise err(f"cannot broadcast shape {list(x.shape)} to {list(shape)}")
    for s, d in zip(x.shape, shape):
        if s != d and s != 1:
            raise err(f"cannot broadcast shape {list(x.shape)} to {list(shape)}")
    return emit1("tt.broadcast", [x.handle], x.dtype, shape)


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> Tuple[int, ...]:
    a, b = list(a), list(b)
    while len(a) < len(b):
        a.insert(0, 1)
    while len(b) < len(a):
        b.insert(0, 1)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise err(f"incompatible shapes for broadcasting: {a} and {b}")
        out.append(max(x, y))
    return tuple(out)


def broadcast_pair(a: tensor, b: tensor) -> Tuple[tensor, tensor]:
    if a.shape == b.shape:
        return a, b
    shape = broadcast_shapes(a.shape, b.shape)  # a scalar's () pads to all ones
    return broadcast_to(a, shape), broadcast_to(b, shape)


def reshape(x: tensor, shape: Sequence[int], can_reorder: bool = False) -> tensor:
    shape = check_shape(shape)
    n = math.prod(shape)
    if n != x.numel:
        raise err(f"cannot reshape {list(x.shape)} ({x.numel} elements) to {list(shape)} ({n} elements)")
    if shape == x.shape:
        return x
    if not x.shape:
        return splat(x, shape)
    return emit1("tt.reshape", [x.handle], x.dtype, shape)


def permute(x: tensor, dims: Sequence[int]) -> tensor:
    dims = [unwrap(d) for d in dims]
    if sorted(dims) != list(range(len(x.shape))):
        raise err(f"permute dims {dims} are not a permutation of the {len(x.shape)} dimensions")
    if dims == list(range(len(x.shape))):
        return x
    shape = [x.shape[i] for i in dims]
    return emit1("tt.trans", [x.handle], x.dtype, shape, {"order": dims})


def join(a: tensor, b: tensor) -> tensor:
    a, b = broadcast_pair(a, b)
    if a.dtype != b.dtype:
        raise err(f"join needs operands of one dtype, got {a.dtype} and {b.dtype}")
    if not a.shape:
        a, b = splat(a, (1,)), splat(b, (1,))
        r = emit1("tt.join", [a.handle, b.handle], a.dtype, (1, 2))
        return reshape(r, (2,))
    return emit1("tt.join", [a.handle, b.handle], a.dtype, a.shape + (2,))


def split(x: tensor) -> Tuple[tensor, tensor]:
    if not x.shape or x.shape[-1] != 2:
        raise err(f"split needs a last dimension of size 2, got shape {list(x.shape)}")
    shape = x.shape[:-1]
    op = emit("tt.split", [x.handle], [ir_type(x.dtype, shape)] * 2)
    a, b = (tensor(r, x.dtype, shape) for r in op.results)
    if not shape:
        raise err("split of a [2] tensor gives scalars, which is not supported; reshape first")
    return a, b


# ---------------------------------------------------------------------------------------------
# casts
# ---------------------------------------------------------------------------------------------


def cast(x: Any, dst: dtype, fp_downcast_rounding: Optional[str] = None, bitcast: bool = False) -> tensor:
    """Triton's `x.to(dst)`: value conversion (or a same-width bit reinterpretation)."""
    x = to_tensor(x)
    dst = unwrap(dst)
    if not isinstance(dst, dtype):
        raise err(f"expected a dtype, got {dst!r}", hint="write e.g. x.to(tl.float16)")
    src = x.dtype
    if bitcast:
        if src.primitive_bitwidth != dst.primitive_bitwidth:
            raise err(f"cannot bitcast {src} ({src.primitive_bitwidth} bits) to {dst} ({dst.primitive_bitwidth} bits)")
        if src == dst:
            return x
        name = "arith.bitcast"
        if src.is_ptr() and not dst.is_ptr():
            name = "tt.ptr_to_int"
        elif dst.is_ptr() and not src.is_ptr():
            name = "tt.int_to_ptr"
        return emit1(name, [x.handle], dst, x.shape)
    if src == dst:
        return x
    if fp_downcast_rounding is not None and not (src.is_floating() and dst.is_floating()
                                                  and dst.primitive_bitwidth < src.primitive_bitwidth):
        raise err("fp_downcast_rounding applies only to narrowing float conversions")
    sh = x.shape
    if src.is_floating() and dst.is_floating():
        if src.is_fp8() or dst.is_fp8() or (fp_downcast_rounding not in (None, "rtne")):
            return emit1("tt.fp_to_fp", [x.handle], dst, sh, {"rounding": fp_downcast_rounding or "rtne"})
        if {src.name, dst.name} == {"fp16", "bf16"}:  # no direct conversion between the two: through fp32
            return cast(cast(x, float32), dst)
        name = "arith.truncf" if src.primitive_bitwidth > dst.primitive_bitwidth else "arith.extf"
        return emit1(name, [x.handle], dst, sh)
    if (src.is_int() or src.is_bool()) and (dst.is_int() or dst.is_bool()):
        if dst.is_bool():
            return compare(x, full(sh, 0, src), "ne")
        if src.primitive_bitwidth == dst.primitive_bitwidth:
            return emit1("arith.bitcast", [x.handle], dst, sh)
        if src.primitive_bitwidth > dst.primitive_bitwidth:
            return emit1("arith.trunci", [x.handle], dst, sh)
        name = "arith.extsi" if src.is_int_signed() else "arith.extui"
        return emit1(name, [x.handle], dst, sh)
    if src.is_floating() and (dst.is_int() or dst.is_bool()):
        if src.is_fp8():
            x = cast(x, float32)
            src = float32
        if dst.is_bool():
            return compare(x, full(sh, 0.0, src), "ne")
        return emit1("arith.fptosi" if dst.is_int_signed() else "arith.fptoui", [x.handle], dst, sh)
    if (src.is_int() or src.is_bool()) and dst.is_floating():
        if dst.is_fp8():
            return cast(cast(x, float32), dst)
        return emit1("arith.sitofp" if src.is_int_signed() else "arith.uitofp", [x.handle], dst, sh)
    if src.is_ptr() and dst.is_ptr():
        return emit1("arith.bitcast", [x.handle], dst, sh)
    if src.is_ptr() and dst.is_int():
        if dst.primitive_bitwidth == 64:
            return emit1("tt.ptr_to_int", [x.handle], dst, sh)
        return cast(emit1("tt.ptr_to_int", [x.handle], int64, sh), dst)
    if src.is_int() and dst.is_ptr():
        if src.primitive_bitwidth != 64:
            x = cast(x, int64)
        return emit1("tt.int_to_ptr", [x.handle], dst, sh)
    raise err(f"cannot convert {src} to {dst}")


# ---------------------------------------------------------------------------------------------
# binary arithmetic
# ---------------------------------------------------------------------------------------------


def integer_promote(a: dtype, b: dtype) -> dtype:
    """C's usual arithmetic conversions for two integer types."""
    if a.is_bool() and b.is_bool():
        return a
    if a.is_bool():
        return b
    if b.is_bool():
        return a
    sa, sb = a.is_int_signed(), b.is_int_signed()
    if sa == sb:
        return a if a.int_bitwidth > b.int_bitwidth else b
    if not sa:
        return a if a.int_bitwidth >= b.int_bitwidth else b
    return b if b.int_bitwidth >= a.int_bitwidth else a


def computation_type(a: dtype, a_scalar: bool, b: dtype, b_scalar: bool, div_or_mod: bool) -> dtype:
    """The type two operands are converted to before an arithmetic op (Triton's rules)."""
    if a_scalar != b_scalar:
        s, t = (a, b) if a_scalar else (b, a)
        if s.kind() <= t.kind():
            if div_or_mod and (t.is_fp16() or t.is_bf16()):
                return float32
            return t
    if a.is_fp64() or b.is_fp64():
        return float64
    if a.is_fp32() or b.is_fp32():
        return float32
    if a.is_fp16() or b.is_fp16():
        return float32 if div_or_mod else float16
    if a.is_bf16() and b.is_bf16():
        return float32 if div_or_mod else bfloat16
    if a.is_bf16() or b.is_bf16():
        return float32
    if a.is_fp8() and b.is_fp8():
        return a if a == b else float16
    if a.is_fp8() or b.is_fp8():
        return float32
    if div_or_mod and (a.is_int_signed() != b.is_int_signed()) and not (a.is_bool() or b.is_bool()):
        raise err(f"cannot use /, // or % with {a} and {b}: they differ in signedness",
                  hint="cast one of them so both have the same signedness")
    return integer_promote(a, b)


def float_op(name: str, operands: Sequence[tensor], dt: dtype, shape: Sequence[int],
             attrs: Optional[Dict] = None) -> tensor:
    """A float op `name` on `operands` of type `dt`. PTX has no fp8 arithmetic, so fp8 values are
    widened to fp32 (exactly), computed there and rounded back to `dt` once, as Triton does."""
    if dt.is_fp8():
        wide = [cast(o, float32).handle for o in operands]
        return cast(emit1(name, wide, float32, shape, attrs), dt)
    return emit1(name, [o.handle for o in operands], dt, shape, attrs)


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, tensor)


def binary_operands(lhs: Any, rhs: Any, allow_lhs_ptr: bool = False, allow_rhs_ptr: bool = False,
                    arithmetic: bool = True, div_or_mod: bool = False) -> Tuple[tensor, tensor]:
    """Convert, type-promote and broadcast two operands of a binary op."""
    lhs, rhs = unwrap(lhs), unwrap(rhs)
    ls, rs = _is_number(lhs), _is_number(rhs)
    if ls and rs:
        raise err("internal: two Python numbers reached a runtime op")
    lt = to_tensor(lhs) if not ls else None
    rt = to_tensor(rhs) if not rs else None
    ldt = lt.dtype if lt is not None else type_of_python_scalar(lhs)
    rdt = rt.dtype if rt is not None else type_of_python_scalar(rhs)
    for a, b, allow in ((ldt, rdt, allow_lhs_ptr), (rdt, ldt, allow_rhs_ptr)):
        if a.is_ptr():
            if not allow:
                raise err(f"unsupported operand types: {ldt} and {rdt}")
            if b.is_ptr() and a != b:
                raise err(f"cannot combine pointers of different types: {ldt} and {rdt}")
            if b.is_floating():
                raise err(f"cannot add a float to a pointer ({ldt} and {rdt})")
    if arithmetic and not ldt.is_ptr() and not rdt.is_ptr():
        ret = computation_type(ldt, ls, rdt, rs, div_or_mod)
        for scalar, val in ((ls, lhs), (rs, rhs)):
            if scalar and ret.is_int_unsigned() and val < 0:
                raise err("cannot combine an unsigned tensor with a negative number", hint="cast explicitly")
        lt = scalar_constant(lhs, ret) if ls else cast(lt, ret)
        rt = scalar_constant(rhs, ret) if rs else cast(rt, ret)
    else:
        lt = lt if lt is not None else to_tensor(lhs)
        rt = rt if rt is not None else to_tensor(rhs)
    return broadcast_pair(lt, rt)  # type: ignore[arg-type]


def _int_identity(a: Any, b: Any, ident: int, commutative: bool) -> Optional[tensor]:
    """The integer tensor operand of `a op b` when the other one is the Python integer `ident`
    (`a op ident` is `a`, with no promotion; `ident op b` too when `op` is commutative)."""
    pairs = ((a, b), (b, a)) if commutative else ((a, b),)
    for x, y in pairs:
        x, y = unwrap(x), unwrap(y)
        if isinstance(x, tensor) and type(y) is int and y == ident and x.dtype.is_int() and not x.dtype.is_bool():
            return x
    return None


def _arith(name_f: str, name_si: str, name_ui: str, a: tensor, b: tensor) -> tensor:
    """The float op `name_f` on float operands, else `name_si` / `name_ui` for signed / unsigned ones."""
    if a.dtype.is_floating():
        return float_op(name_f, [a, b], a.dtype, a.shape)
    name = name_si if a.dtype.is_int_signed() else name_ui
    return emit1(name, [a.handle, b.handle], a.dtype, a.shape)


def add(a: Any, b: Any) -> tensor:
    r = _int_identity(a, b, 0, commutative=True)
    if r is not None:
        return r
    a, b = binary_operands(a, b, True, True)
    if b.dtype.is_ptr() and not a.dtype.is_ptr():
        a, b = b, a
    if a.dtype.is_ptr():
        if b.dtype.is_ptr():
            raise err("cannot add two pointers")
        return emit1("tt.addptr", [a.handle, b.handle], a.dtype, a.shape)
    return _arith("arith.addf", "arith.addi", "arith.addi", a, b)


def sub(a: Any, b: Any) -> tensor:
    r = _int_identity(a, b, 0, commutative=False)
    if r is not None:
        return r
    a, b = binary_operands(a, b, True, False)
    if a.dtype.is_ptr():
        return emit1("tt.addptr", [a.handle, minus(b).handle], a.dtype, a.shape)
    return _arith("arith.subf", "arith.subi", "arith.subi", a, b)


def mul(a: Any, b: Any) -> tensor:
    r = _int_identity(a, b, 1, commutative=True)
    if r is not None:
        return r
    return _arith("arith.mulf", "arith.muli", "arith.muli", *binary_operands(a, b))


def truediv(a: Any, b: Any) -> tensor:
    a, b = binary_operands(a, b, div_or_mod=True)
    if a.dtype.is_int() or a.dtype.is_bool():
        a, b = cast(a, float32), cast(b, float32)
    return float_op("arith.divf", [a, b], a.dtype, a.shape)


def floordiv(a: Any, b: Any) -> tensor:
    a, b = binary_operands(a, b, div_or_mod=True)
    if not (a.dtype.is_int() or a.dtype.is_bool()):
        raise err(f"// needs integer operands, got {a.dtype}", hint="use / for floats")
    return _arith("", "arith.divsi", "arith.divui", a, b)


def mod(a: Any, b: Any) -> tensor:
    return _arith("arith.remf", "arith.remsi", "arith.remui", *binary_operands(a, b, div_or_mod=True))


def _bitwise_operands(a: Any, b: Any) -> Tuple[tensor, tensor]:
    a, b = binary_operands(a, b, arithmetic=False)
    for x in (a, b):
        if not (x.dtype.is_int() or x.dtype.is_bool()):
            raise err(f"bitwise operators need integer operands, got {x.dtype}")
    t = integer_promote(a.dtype, b.dtype)
    return cast(a, t), cast(b, t)


def _bitwise(signed_op: str, unsigned_op: Optional[str] = None):
    """A bitwise binary op: integer operands, promoted to one type; `unsigned_op` for unsigned
    operands where the op differs (right shift)."""
    def fn(a: Any, b: Any) -> tensor:
        a, b = _bitwise_operands(a, b)
        name = signed_op if unsigned_op is None or a.dtype.is_int_signed() else unsigned_op
        return emit1(name, [a.handle, b.handle], a.dtype, a.shape)
    return fn


and_ = _bitwise("arith.andi")
or_ = _bitwise("arith.ori")
xor_ = _bitwise("arith.xori")
shl = _bitwise("arith.shli")
shr = _bitwise("arith.shrsi", "arith.shrui")


def logical_and(a: Any, b: Any) -> tensor:
    return and_(cast(to_tensor(a), int1), cast(to_tensor(b), int1))


def logical_or(a: Any, b: Any) -> tensor:
    return or_(cast(to_tensor(a), int1), cast(to_tensor(b), int1))


def not_(x: Any) -> tensor:
    x = cast(to_tensor(x), int1)
    one = full(x.shape, True, int1)
    return emit1("arith.xori", [x.handle, one.handle], int1, x.shape)


def minus(x: Any) -> tensor:
    x = to_tensor(x)
    if x.dtype.is_ptr():
        raise err("cannot negate a pointer")
    if x.dtype.is_floating():
        return float_op("arith.negf", [x], x.dtype, x.shape)
    zero = full(x.shape, 0, x.dtype)
    return emit1("arith.subi", [zero.handle, x.handle], x.dtype, x.shape)


def invert(x: Any) -> tensor:
    x = to_tensor(x)
    if not (x.dtype.is_int() or x.dtype.is_bool()):
        raise err(f"~ needs an integer operand, got {x.dtype}")
    ones = -1 if x.dtype.is_int_signed() else (True if x.dtype.is_bool() else x.dtype.int_range()[1])
    m = full(x.shape, ones, x.dtype)
    return emit1("arith.xori", [x.handle, m.handle], x.dtype, x.shape)


_CMP = {"lt": ("slt", "ult", "olt"), "le": ("sle", "ule", "ole"), "gt": ("sgt", "ugt", "ogt"),
        "ge": ("sge", "uge", "oge"), "eq": ("eq", "eq", "oeq"), "ne": ("ne", "ne", "une")}


def compare(a: Any, b: Any, pred: str) -> tensor:
    """a <pred> b, elementwise, giving int1."""
    a, b = binary_operands(a, b, True, True)
    s, u, f = _CMP[pred]
    if a.dtype.is_floating():
        if a.dtype.is_fp8():  # widening is exact, so the comparison is too
            a, b = cast(a, float32), cast(b, float32)
        return emit1("arith.cmpf", [a.handle, b.handle], int1, a.shape, {"predicate": f})
    if a.dtype.is_ptr() or not a.dtype.is_int_signed():
        return emit1("arith.cmpi", [a.handle, b.handle], int1, a.shape, {"predicate": u})
    return emit1("arith.cmpi", [a.handle, b.handle], int1, a.shape, {"predicate": s})


def minimum(a: Any, b: Any, propagate_nan: Any = None) -> tensor:
    """The elementwise smaller of a and b (NaN wins only with propagate_nan=ALL, as in Triton)."""
    return _extremum("min", a, b, propagate_nan)


def maximum(a: Any, b: Any, propagate_nan: Any = None) -> tensor:
    """The elementwise larger of a and b (NaN wins only with propagate_nan=ALL, as in Triton)."""
    return _extremum("max", a, b, propagate_nan)


def _extremum(kind: str, a: Any, b: Any, propagate_nan: Any) -> tensor:
    name_f = f"arith.{kind}imumf" if _propagates(propagate_nan) else f"arith.{kind}numf"
    return _arith(name_f, f"arith.{kind}si", f"arith.{kind}ui", *binary_operands(a, b))


def _propagates(p: Any) -> bool:
    p = unwrap(p)
    return p is not None and str(p).upper().endswith("ALL")


def where(cond: Any, x: Any, y: Any) -> tensor:
    cond = cast(to_tensor(cond), int1)
    x, y = unwrap(x), unwrap(y)
    if _is_number(x) and _is_number(y):  # where(c, 1, 0): typed as Triton types constants (int32, fp32)
        x, y = to_tensor(x), to_tensor(y)
    x, y = binary_operands(x, y, True, True)
    shape = broadcast_shapes(cond.shape, x.shape)
    x, y, cond = (broadcast_to(v, shape) for v in (x, y, cond))
    return emit1("arith.select", [cond.handle, x.handle, y.handle], x.dtype, x.shape)


# ---------------------------------------------------------------------------------------------
# math
# ---------------------------------------------------------------------------------------------


def unary_math(name: str, x: Any, allowed: str = "f32f64") -> tensor:
    """Elementwise math op `math.<name>` (fp32 / fp64 inputs, as Triton requires)."""
    x = to_tensor(x)
    if allowed == "f32f64" and x.dtype not in (float32, float64):
        raise err(f"{name} needs fp32 or fp64 input, got {x.dtype}", hint="convert first, e.g. x.to(tl.float32)")
    if allowed == "float" and not x.dtype.is_floating():
        raise err(f"{name} needs a float input, got {x.dtype}")
    return float_op(f"math.{name}", [x], x.dtype, x.shape)


def abs_(x: Any) -> tensor:
    x = to_tensor(x)
    if x.dtype.is_floating():
        return float_op("math.absf", [x], x.dtype, x.shape)
    if x.dtype.is_int_signed():
        return emit1("math.absi", [x.handle], x.dtype, x.shape)
    if x.dtype.is_int() or x.dtype.is_bool():
        return x
    raise err(f"abs of {x.dtype}")


def fma(a: Any, b: Any, c: Any) -> tensor:
    a, b = binary_operands(a, b)
    a, c = binary_operands(a, c)
    b = broadcast_to(cast(b, a.dtype), a.shape) if a.shape else cast(b, a.dtype)
    if not a.dtype.is_floating():
        raise err("fma needs float operands")
    return float_op("math.fma", [a, b, c], a.dtype, a.shape)


# ---------------------------------------------------------------------------------------------
# ranges, program ids, hints
# ---------------------------------------------------------------------------------------------


def arange(start: Any, end: Any) -> tensor:
    start, end = unwrap(start), unwrap(end)
    for v in (start, end):
        if not isinstance(v, int) or isinstance(v, bool):
            raise err("arange bounds must be compile-time integers",
                      hint="pass them as tl.constexpr parameters (or literals)")
    n = end - start
    if n <= 0 or not is_pow2(n):
        raise err(f"arange({start}, {end}) must cover a power-of-two number of elements, got {n}")
    return emit1("tt.make_range", [], int32, (n,), {"start": start, "end": end})


def program_id(axis: Any) -> tensor:
    """This program's index along grid `axis` (0, 1, 2)."""
    return _grid_query("tt.get_program_id", "program_id", axis)


def num_programs(axis: Any) -> tensor:
    """The grid's size along `axis` (0, 1, 2)."""
    return _grid_query("tt.get_num_programs", "num_programs", axis)


def _grid_query(op_name: str, what: str, axis: Any) -> tensor:
    axis = unwrap(axis)
    if axis not in (0, 1, 2):
        raise err(f"{what} axis must be 0, 1 or 2, got {axis!r}")
    return emit1(op_name, [], int32, (), {"axis": axis})


def hint(x: Any, key: str, values: Any) -> tensor:
    x = to_tensor(x)
    values = unwrap(values)
    if isinstance(values, int):
        values = [values]
    values = [unwrap(v) for v in values]
    if not all(isinstance(v, int) and v > 0 for v in values):
        raise err(f"{key} values must be positive compile-time integers, got {values}")
    if len(values) != max(1, len(x.shape)):
        raise err(f"{key} needs one value per dimension ({max(1, len(x.shape))}), got {len(values)}")
    d = x.handle.defining_op  # a second hint on a value keeps the first one's
    attrs: Dict[str, Any] = dict(d.attrs) if d is not None and d.name == "tt.hint" else {}
    attrs[key] = values
    return emit1("tt.hint", [x.handle], x.dtype, x.shape, attrs)


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------

_CACHE = ("", ".ca", ".cg", ".cs", ".wb", ".cv", ".wt", ".lu")
_EVICT = ("", "evict_first", "evict_last", "evict_normal", "no_allocate")


def _check_mod(cache_modifier: Any, eviction_policy: Any) -> Dict[str, str]:
    c, e = unwrap(cache_modifier) or "", unwrap(eviction_policy) or ""
    if c not in _CACHE:
        raise err(f"unknown cache_modifier {c!r}", hint=f"use one of {_CACHE}")
    if e not in _EVICT:
        raise err(f"unknown eviction_policy {e!r}", hint=f"use one of {_EVICT}")
    return {k: v for k, v in (("cache", c), ("evict", e)) if v}


def _pointer(ptr: Any, need: str) -> Tuple[tensor, dtype]:
    """A memory op's pointer operand (`need` says what it must be) and its element dtype."""
    ptr = to_tensor(ptr)
    if not ptr.dtype.is_ptr():
        raise err(f"{need}, got {ptr.dtype}")
    return ptr, ptr.dtype.element_ty  # type: ignore[attr-defined]


def _mask(mask: Any, ptr: tensor, what: str) -> Optional[tensor]:
    """A memory op's optional mask as int1 of the pointer's shape (None stays None)."""
    m = unwrap(mask)
    if m is None:
        return None
    m = cast(to_tensor(m), int1)
    if ptr.shape:
        return broadcast_to(m, ptr.shape)
    if m.shape:
        raise err(f"a scalar {what} cannot have a block mask")
    return m


def load(ptr: Any, mask: Any = None, other: Any = None, boundary_check: Any = (), padding_option: Any = "",
         cache_modifier: Any = "", eviction_policy: Any = "", volatile: Any = False) -> tensor:
    """tl.load through a pointer or a block of pointers."""
    ptr, elt = _pointer(ptr, "tl.load needs a pointer or a block of pointers")
    mask, other = unwrap(mask), unwrap(other)
    if unwrap(boundary_check) or unwrap(padding_option):
        raise err("boundary_check / padding_option apply to block pointers, which tlx does not support",
                  hint="use a mask, or a tensor descriptor (desc.load)")
    if mask is None and other is not None:
        raise err("`other` cannot be given without `mask`")
    mask = _mask(mask, ptr, "load")
    is_bool = elt == int1
    if is_bool:
        elt = int8
        ptr = cast(ptr, pointer_type(int8))
    if other is not None:
        other = cast(to_tensor(other), elt)
        if ptr.shape:
            other = broadcast_to(other, ptr.shape)
    attrs = _check_mod(cache_modifier, eviction_policy)
    if unwrap(volatile):
        attrs["volatile"] = True
    r = emit1("tt.load", [ptr.handle, mask.handle if mask is not None else None,
                          other.handle if other is not None else None], elt, ptr.shape, attrs)
    return cast(r, int1) if is_bool else r


def store(ptr: Any, value: Any, mask: Any = None, boundary_check: Any = (), cache_modifier: Any = "",
          eviction_policy: Any = "") -> None:
    ptr, elt = _pointer(ptr, "tl.store needs a pointer or a block of pointers")
    if unwrap(boundary_check):
        raise err("boundary_check applies to block pointers, which tlx does not support", hint="use a mask")
    value = to_tensor(unwrap(value))
    if elt == int1:
        elt = int8
        ptr = cast(ptr, pointer_type(int8))
    if ptr.shape:
        value = broadcast_to(value, ptr.shape)
    elif value.shape:
        raise err(f"cannot store a block of shape {list(value.shape)} through a scalar pointer")
    value = cast(value, elt)
    m = _mask(mask, ptr, "store")
    emit("tt.store", [ptr.handle, value.handle, m.handle if m is not None else None], [],
         _check_mod(cache_modifier, eviction_policy))


_SEM = ("acq_rel", "acquire", "release", "relaxed")
_SCOPE = ("gpu", "cta", "sys")


def atomic(op: str, ptr: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
    """tl.atomic_<op>: returns the old values."""
    ptr, elt = _pointer(ptr, "atomics need a pointer")
    sem, scope = unwrap(sem) or "acq_rel", unwrap(scope) or "gpu"
    if sem not in _SEM:
        raise err(f"unknown sem {sem!r}", hint=f"use one of {_SEM}")
    if scope not in _SCOPE:
        raise err(f"unknown scope {scope!r}", hint=f"use one of {_SCOPE}")
    val = to_tensor(unwrap(val))
    if ptr.shape:
        val = broadcast_to(val, ptr.shape)
    val = cast(val, elt)
    m = _mask(mask, ptr, "atomic")
    kind = op
    if op == "add" and elt.is_floating():
        kind = "fadd"
    elif op in ("max", "min"):
        if elt.is_floating():
            raise err(f"atomic_{op} on {elt} is not supported", hint="use an integer type")
        if elt.is_int_unsigned():
            kind = "u" + op
    elif op in ("and", "or", "xor") and not elt.is_int():
        raise err(f"atomic_{op} needs an integer type, got {elt}")
    if elt.primitive_bitwidth < 16 or (elt.primitive_bitwidth == 16 and not elt.is_floating()):
        raise err(f"atomics on {elt} are not supported", hint="use a 32- or 64-bit type")
    return emit1("tt.atomic_rmw", [ptr.handle, val.handle, m.handle if m is not None else None], elt, ptr.shape,
                 {"op": kind, "sem": sem, "scope": scope})


def atomic_cas(ptr: Any, cmp: Any, val: Any, sem: Any = None, scope: Any = None) -> tensor:
    ptr, elt = _pointer(ptr, "atomic_cas needs a pointer")
    sem, scope = unwrap(sem) or "acq_rel", unwrap(scope) or "gpu"
    cmp = cast(to_tensor(unwrap(cmp)), elt)
    val = cast(to_tensor(unwrap(val)), elt)
    if ptr.shape:
        cmp, val = broadcast_to(cmp, ptr.shape), broadcast_to(val, ptr.shape)
    return emit1("tt.atomic_cas", [ptr.handle, cmp.handle, val.handle], elt, ptr.shape, {"sem": sem, "scope": scope})


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------


def reduce(x: Any, axis: Any, kind: str, keep_dims: bool = False) -> tensor:
    """Reduce `x` along `axis` (None: all axes) with `kind` (sum, max, min, argmax, ...)."""
    x = to_tensor(x)
    axis, keep_dims = unwrap(axis), unwrap(keep_dims)
    if not x.shape:
        raise err(f"cannot reduce a scalar")
    if axis is None:
        flat = reshape(x, (x.numel,)) if len(x.shape) > 1 else x
        r = reduce(flat, 0, kind)
        if keep_dims:
            for _ in x.shape:
                r = expand_dims(r, 0)
        return r
    rank = len(x.shape)
    if axis < 0:
        axis += rank
    if not 0 <= axis < rank:
        raise err(f"reduction axis {axis} out of range for shape {list(x.shape)}")
    if kind in ("sum", "xor_sum", "prod") and (x.dtype.is_int() or x.dtype.is_bool()) and x.dtype.primitive_bitwidth < 32:
        x = cast(x, int32 if not x.dtype.is_int_unsigned() else uint32)
    shape = x.shape[:axis] + x.shape[axis + 1:]
    narrow = x.dtype if x.dtype.is_fp8() and kind not in ("argmax", "argmin") else None
    if x.dtype.is_fp8():  # no fp8 arithmetic in PTX: reduce the exactly widened values, round once
        x = cast(x, float32)
    rdt = int32 if kind in ("argmax", "argmin") else x.dtype
    r = emit1("tt.reduce", [x.handle], rdt, shape, {"axis": axis, "kind": kind})
    if narrow is not None:
        r = cast(r, narrow)
    if keep_dims:
        r = expand_dims(r, axis)
    return r


# ---------------------------------------------------------------------------------------------
# dot
# ---------------------------------------------------------------------------------------------


_DOT_INPUTS = (float16, bfloat16, core.float8e4nv, core.float8e5, int8, float32, float64)
# operand dtype -> the accumulator dtypes tl.dot allows (fp16 and fp8 operands: fp32 or fp16)
_DOT_ACCUMULATORS = {int8: (int32,), float64: (float64,), float32: (float32,), bfloat16: (float32,)}


def dot(a: Any, b: Any, acc: Any = None, input_precision: Any = None, allow_tf32: Any = None,
        max_num_imprecise_acc: Any = None, out_dtype: Any = float32) -> tensor:
    """tl.dot on register tensors, with Triton's rules on Hopper: operands of one dtype among
    fp16, bf16, fp32 (tf32, or "ieee" for exact fp32), fp64, int8, or fp8 (e4m3 / e5m2, which may
    mix); K >= 16 (32 for 8-bit operands), M and N any; the result is int32 for int8, fp32 for fp32
    and bf16, fp64 for fp64, `out_dtype` (fp32 or fp16) for fp16 and fp8 — or the accumulator's
    dtype. LowerDot picks
    wgmma or mma.sync (compiler/passes/lower_dot.py)."""
    a, b, acc, out_dtype = to_tensor(a), to_tensor(b), unwrap(acc), unwrap(out_dtype)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise err(f"tl.dot needs 2-D operands, got shapes {list(a.shape)} and {list(b.shape)}")
    if a.dtype != b.dtype and not (a.dtype.is_fp8() and b.dtype.is_fp8()):
        raise err(f"tl.dot operands must have one dtype, got {a.dtype} and {b.dtype}", hint="convert one of them")
    if a.dtype not in _DOT_INPUTS or b.dtype not in _DOT_INPUTS:
        raise err(f"tl.dot does not support {a.dtype} operands on sm_90a",
                  hint="use fp16, bf16, fp32, fp64, int8 or fp8 (e4m3 / e5m2) operands")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise err(f"tl.dot inner dimensions differ: {list(a.shape)} @ {list(b.shape)}")
    kmin = 32 if a.dtype.primitive_bitwidth == 8 else 16
    if k < kmin:
        raise err(f"tl.dot needs K >= {kmin} for {a.dtype} operands (one tensor-core step), got K={k}")
    ip, ait = unwrap(input_precision), unwrap(allow_tf32)
    if ip is not None and ait is not None:
        raise err("tl.dot takes input_precision or allow_tf32, not both", hint="drop allow_tf32 (deprecated)")
    if ip is None:
        ip = "ieee" if ait is False else "tf32"
    ip = str(ip).lower()
    if ip not in ("tf32", "ieee") + tuple(_SPLIT_PRECISIONS):
        raise err(f"tl.dot input_precision must be one of 'tf32', 'tf32x3', 'bf16x3', 'bf16x6', 'ieee', got {ip!r}")
    allowed = _DOT_ACCUMULATORS.get(a.dtype, (float32, float16))
    if acc is None:
        if out_dtype == bfloat16:
            raise err("tl.dot out_dtype=bfloat16 is unsupported", hint="use float32 or float16 and cast the result")
        if len(allowed) > 1 and out_dtype not in allowed:
            raise err(f"tl.dot of {a.dtype} operands gives float32 or float16, not out_dtype={out_dtype}")
        odt = out_dtype if out_dtype in allowed else allowed[0]  # int8, fp32, bf16: Triton's fixed type
        acc = full((m, n), 0, odt)
    else:
        acc = to_tensor(acc)
        if acc.shape != (m, n):
            raise err(f"tl.dot accumulator must be {m}x{n}, got {list(acc.shape)}")
        if acc.dtype not in allowed:
            raise err(f"tl.dot of {a.dtype} operands accumulates in {' or '.join(str(x) for x in allowed)}, "
                      f"not {acc.dtype}", hint="convert the accumulator")
    if ip in _SPLIT_PRECISIONS and a.dtype == float32:
        return _split_dot(a, b, acc, ip)
    attrs: Dict[str, Any] = {}
    if ip in _SPLIT_PRECISIONS:
        ip = "tf32"  # only fp32 operands are split; others are what they are
    if unwrap(input_precision) is not None or ip == "ieee":
        attrs["input_precision"] = ip
    mnia = unwrap(max_num_imprecise_acc)
    if mnia is not None and a.dtype.is_fp8():
        if int(mnia) > k:
            raise err(f"tl.dot max_num_imprecise_acc ({mnia}) must be <= K ({k})")
        attrs["max_num_imprecise_acc"] = int(mnia)
    return emit1("tt.dot", [a.handle, b.handle, acc.handle], acc.dtype, acc.shape, attrs)


# input_precision -> (the narrow type fp32 operands are split into, parts, the (i, j) products
# a_i @ b_j summed, smallest first) — Triton's F32DotTC decomposition
_SPLIT_PRECISIONS = {
    "tf32x3": ("tf32", 2, ((1, 0), (0, 1), (0, 0))),
    "bf16x3": ("bf16", 2, ((1, 0), (0, 1), (0, 0))),
    "bf16x6": ("bf16", 3, ((2, 0), (1, 1), (0, 2), (1, 0), (0, 1), (0, 0))),
}


def _split_fp32(x: tensor, kind: str, parts: int) -> List[tensor]:
    """fp32 `x` as the sum of `parts` values of the narrow `kind` (each the narrow rounding of what
    the previous ones leave, the last one the rest): tf32 keeps the top 19 bits of an fp32, as
    the tensor core reads it; bf16 is rounded to nearest even."""
    out: List[tensor] = []
    rest = x
    for i in range(parts):
        if i == parts - 1 and kind == "tf32":
            out.append(rest)  # the tensor core truncates it itself
            break
        if kind == "tf32":
            hi = cast(and_(cast(rest, int32, bitcast=True), -8192), float32, bitcast=True)
        else:
            hi = cast(rest, bfloat16)
        out.append(hi)
        rest = sub(rest, cast(hi, float32))
    return out


def _split_dot(a: tensor, b: tensor, acc: tensor, ip: str) -> tensor:
    """An fp32 dot with input_precision tf32x3 / bf16x3 / bf16x6: the operands split into tf32 or
    bf16 parts, the leading products summed on the tensor cores (smallest first) into the fp32
    accumulator — nearly fp32's accuracy at three or six tensor-core passes."""
    kind, parts, products = _SPLIT_PRECISIONS[ip]
    sa, sb = _split_fp32(a, kind, parts), _split_fp32(b, kind, parts)
    for i, j in products:
        acc = emit1("tt.dot", [sa[i].handle, sb[j].handle, acc.handle], acc.dtype, acc.shape,
                    {"input_precision": "tf32"} if kind == "tf32" else {})
    return acc


# ---------------------------------------------------------------------------------------------
# tensor descriptors (register-level TMA)
# ---------------------------------------------------------------------------------------------


def _offsets(offsets: Any, rank: int, what: str) -> List[Any]:
    offsets = unwrap(offsets)
    if isinstance(offsets, tensor) or not isinstance(offsets, (list, tuple)):
        raise err(f"{what} offsets must be a list of {rank} integers")
    if len(offsets) != rank:
        raise err(f"{what} needs {rank} offsets, got {len(offsets)}")
    out = []
    for o in offsets:
        t = to_tensor(unwrap(o))
        if t.shape or not (t.dtype.is_int()):
            raise err(f"{what} offsets must be integer scalars, got {t.type}")
        out.append(cast(t, int32).handle)
    return out


def descriptor_load(desc: core.tensor_descriptor, offsets: Any, cache_modifier: Any = "", eviction_policy: Any = "") -> tensor:
    offs = _offsets(offsets, len(desc.block_shape), "descriptor load")
    return emit1("tt.descriptor_load", [desc.handle, offs], desc.dtype, desc.block_shape,
                 _check_mod(cache_modifier, eviction_policy))


def descriptor_store(desc: core.tensor_descriptor, offsets: Any, value: Any) -> None:
    value = to_tensor(unwrap(value))
    if tuple(value.shape) != tuple(desc.block_shape):
        raise err(f"descriptor store of shape {list(value.shape)} into a descriptor of block {desc.block_shape}")
    if value.dtype != desc.dtype:
        raise err(f"descriptor store of {value.dtype} into a {desc.dtype} descriptor",
                  hint=f"convert first: value.to(tl.{_py_name(desc.dtype)})")
    offs = _offsets(offsets, len(desc.block_shape), "descriptor store")
    emit("tt.descriptor_store", [desc.handle, value.handle, offs], [])


def _py_name(d: dtype) -> str:
    return {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}.get(d.name, d.name)


def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any, padding_option: Any = "zero",
                           slot: Optional[core.tensor_descriptor_ptr] = None) -> core.tensor_descriptor:
    """A TMA descriptor built on the device: in the program's own scratch, or written into `slot`
    (one slot of `tlx.allocate_tensor_descriptor`) for `reinterpret_tensor_descriptor` to read."""
    base = to_tensor(base)
    if not base.dtype.is_ptr() or base.shape:
        raise err(f"make_tensor_descriptor needs a scalar pointer base, got {base.type}")
    shape, strides = unwrap(shape), unwrap(strides)
    block = [unwrap(b) for b in unwrap(block_shape)]
    rank = len(block)
    if not 1 <= rank <= 5 or len(shape) != rank or len(strides) != rank:
        raise TLXValueError(f"make_tensor_descriptor needs 1..5 dimensions and one shape and stride per block "
                            f"dimension; got block {block}, {len(shape)} shape and {len(strides)} stride entries")
    last = unwrap(strides[-1])
    if not (isinstance(last, int) and last == 1):
        raise TLXValueError(f"the last stride of a tensor descriptor must be the constant 1, got {last!r}")
    elt = base.dtype.element_ty  # type: ignore[attr-defined]
    _check_tma_block(block, elt)
    pad = unwrap(padding_option)
    if pad not in ("zero", "nan"):
        raise TLXValueError(f"padding_option must be 'zero' or 'nan', got {pad!r}")
    if pad == "nan" and not elt.is_floating():
        raise TLXValueError(f"padding_option 'nan' needs floating-point elements, the base holds {elt}")
    sh = [cast(to_tensor(unwrap(s)), int32).handle for s in shape]
    st = [cast(to_tensor(unwrap(s)), int64).handle for s in strides]
    dt = T.TensorDescType(tuple(block), elt.ir)
    op = emit("tt.make_tensor_descriptor", [base.handle, sh, st, slot.handle if slot is not None else None], [dt],
              {"padding": pad})
    if slot is not None and slot.index is not None:
        slot.written[slot.index] = (tuple(block), elt)
    return core.tensor_descriptor(op.result, elt, block)


def _check_tma_block(block: List[int], elt: dtype) -> None:
    """A TMA tile: power-of-two sizes, the inner one at least 16 bytes."""
    if block[-1] * elt.primitive_bitwidth // 8 < 16:
        raise err(f"the inner block dimension must span at least 16 bytes, got {block[-1]} x {elt}")
    check_shape(block)


def allocate_tensor_descriptor(num: Any) -> core.tensor_descriptor_ptr:
    """`num` descriptor slots (128 bytes each, 128-byte aligned) in the program's global scratch."""
    n = unwrap(num)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise TLXValueError(f"allocate_tensor_descriptor needs a positive constexpr num, got {n!r}")
    op = emit("tlx.allocate_tensor_descriptor", [], [T.DescSlotsType(n, True)], {"num": n})
    return core.tensor_descriptor_ptr(op.result)


def desc_slot(ptrs: Any, idx: Any) -> core.tensor_descriptor_ptr:
    """Slot `idx` of a descriptor slot array (`ptrs[idx]`); `idx` may be a runtime integer."""
    ptrs = unwrap(ptrs)
    if not isinstance(ptrs, core.tensor_descriptor_ptr) or not ptrs.handle.type.array:  # type: ignore[union-attr]
        raise TLXCompileError("only a descriptor slot array (from tlx.allocate_tensor_descriptor) can be indexed; "
                              "this is already one slot")
    k = unwrap(idx)
    const = isinstance(k, int) and not isinstance(k, bool)
    if const and not 0 <= k < ptrs.num:
        raise TLXCompileError(f"descriptor slot index {k} is out of range 0..{ptrs.num - 1} "
                              f"(allocate_tensor_descriptor(num={ptrs.num}))")
    op = emit("tlx.desc_slot", [ptrs.handle, index_i32(idx, "the slot index")], [T.DescSlotsType(1, False)])
    return core.tensor_descriptor_ptr(op.result, ptrs.written, k if const else None)


def as_desc_slot(ptr: Any, what: str) -> core.tensor_descriptor_ptr:
    """One slot from what a kernel passes as `desc_ptr`: a slot, or an array (its slot 0)."""
    ptr = unwrap(ptr)
    if not isinstance(ptr, core.tensor_descriptor_ptr):
        raise TLXCompileError(f"{what}: desc_ptr must be a descriptor slot from tlx.allocate_tensor_descriptor, "
                              f"got {type(ptr).__name__}",
                              hint="desc_ptrs = tlx.allocate_tensor_descriptor(num=N), then pass desc_ptrs[i]")
    return desc_slot(ptr, 0) if ptr.handle.type.array else ptr  # type: ignore[union-attr]


def reinterpret_tensor_descriptor(ptr: Any, block_shape: Any, dt: Any) -> core.tensor_descriptor:
    """The descriptor slot `ptr` holds, used as a descriptor of `block_shape` tiles of `dt`. The
    block shape and dtype must be those the slot was written with: where the trace saw the write
    (a constant slot index), a mismatch is reported here."""
    slot = as_desc_slot(ptr, "reinterpret_tensor_descriptor")
    elt = unwrap(dt)
    if not isinstance(elt, dtype) or elt.is_ptr():
        raise TLXValueError(f"reinterpret_tensor_descriptor needs an element dtype, got {elt!r}")
    block = [unwrap(b) for b in unwrap(block_shape)]
    if not 1 <= len(block) <= 5 or not all(isinstance(b, int) and b > 0 for b in block):
        raise TLXValueError(f"reinterpret_tensor_descriptor needs a block shape of 1..5 positive constant sizes, "
                            f"got {block}")
    _check_tma_block(block, elt)
    seen = slot.written.get(slot.index) if slot.index is not None else None
    if seen is not None and seen != (tuple(block), elt):
        raise err(f"reinterpret_tensor_descriptor reads slot {slot.index} as {block} x {elt}, but "
                  f"make_tensor_descriptor wrote it for {list(seen[0])} x {seen[1]} tiles",
                  hint="pass the block_shape and dtype the descriptor was made with")
    op = emit("tlx.reinterpret_tensor_descriptor", [slot.handle], [T.TensorDescType(tuple(block), elt.ir)])
    return core.tensor_descriptor(op.result, elt, block)


# ---------------------------------------------------------------------------------------------
# indexing (tensor[...], buffer[i], barrier[i]) and the operands of TLX builtins
# ---------------------------------------------------------------------------------------------


def tensor_getitem(self: tensor, slices: Any) -> tensor:
    """`x[:, None]`: `:` keeps a dimension, `None` inserts one."""
    slices = unwrap(slices)
    if not isinstance(slices, tuple):
        slices = (slices,)
    out = self
    dim = 0
    for s in slices:
        s = unwrap(s)
        if s is None:
            out = expand_dims(out, dim)
            dim += 1
        elif isinstance(s, slice) and s.start is None and s.stop is None and s.step is None:
            dim += 1
        else:
            raise err(f"unsupported tensor index {s!r}", hint="only `:` and `None` may index a tensor, as in x[:, None]")
    if dim > max(len(out.shape), 1) and self.shape:
        raise err(f"too many indices for a tensor of shape {list(self.shape)}")
    return out


def constexpr_int(v: Any, what: str, hint: str = "pass a literal or a tl.constexpr parameter directly") -> int:
    """A compile-time integer operand of a builtin, or a clear error naming it."""
    v = unwrap(v)
    if isinstance(v, core.Handle):
        raise TLXCompileError(f"{what} must be a compile-time constant, got a runtime value", hint=hint)
    if not isinstance(v, int) or isinstance(v, bool):
        raise TLXCompileError(f"{what} must be an integer, got {v!r}")
    return v


def index_i32(v: Any, what: str) -> Any:
    """An integer scalar operand (runtime or literal) as an i32 IR value."""
    t = to_tensor(unwrap(v))
    if t.shape or not (t.dtype.is_int() or t.dtype.is_bool()):
        raise TLXCompileError(f"{what} must be an integer scalar, got {t.type}")
    return cast(t, int32).handle


def predicate(pred: Any) -> Any:
    """A builtin's optional `pred=` operand as an i1 IR value (None stays None)."""
    p = unwrap(pred)
    if p is None:
        return None
    t = cast(to_tensor(p), int1)
    if t.shape:
        raise TLXCompileError("pred must be a scalar")
    return t.handle


def _index_view_type(src: T.MemDescType) -> T.MemDescType:
    shape = src.shape[1:] if len(src.shape) > 1 else (1,)
    lay = src.layout
    if len(shape) < 2 and isinstance(lay, L.NVMMASharedLayout):
        lay = L.default_shared_layout(shape, src.element.bits)
    return src.replace(shape=tuple(shape), buffers=0, layout=lay)


def memdesc_index(buf: Any, idx: Any) -> Any:
    """Buffer `idx` of a buffer array, or barrier `idx` of an mbarrier array (`tlx.local_view`,
    `buf[idx]`); `idx` may be a runtime integer."""
    buf = unwrap(buf)
    k = unwrap(idx)
    if isinstance(k, int) and not isinstance(k, bool):
        n = buf.num if isinstance(buf, (mbarrier, buffered_tensor)) else None
        if n is not None and n > 0 and not 0 <= k < n:  # a constant index is checked here, not on the GPU
            what = "mbarrier" if isinstance(buf, mbarrier) else "buffer"
            raise TLXCompileError(f"{what} index {k} is out of range 0..{n - 1} (an array of {n})")
    index = index_i32(idx, "the buffer index")
    if isinstance(buf, mbarrier):
        if not buf.handle.type.array:  # type: ignore[union-attr]
            raise TLXCompileError("this mbarrier is already a single barrier; it cannot be indexed")
        op = emit("tlx.memdesc_index", [buf.handle, index], [T.BarrierType(1, False)])
        return mbarrier(op.result, buf.arrive_count, buf.is_warp_barrier)
    if not isinstance(buf, buffered_tensor):
        raise TLXCompileError(f"local_view's buffer must be a shared-memory buffer (from tlx.local_alloc), "
                              f"got {type(buf).__name__}")
    op = emit("tlx.memdesc_index", [buf.handle, index], [_index_view_type(buf.mtype)])
    return buffered_tensor(op.result, buf.dtype)

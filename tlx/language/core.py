"""The kernel language's values and types: dtypes, `constexpr`, and the runtime handles that wrap
IR values (`tensor`, `buffered_tensor`, `mbarrier`, `tensor_descriptor`, `async_token`).

While a kernel is traced, a `TraceContext` is active (`current()`); builtins emit IR through its
builder. Calling a builtin outside a `@tlx.jit` kernel is a clear error.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TYPE_CHECKING

from tlx.compiler.errors import TLXCompileError
from tlx.compiler.ir import types as T

if TYPE_CHECKING:  # pragma: no cover
    from tlx.compiler.ir import Builder, Value

# ---------------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------------


class dtype:
    """A scalar element type, spelled as Triton spells it (`tl.float16` prints as `fp16`)."""

    def __init__(self, name: str, sig: str, ir: T.ScalarType):
        self.name = name
        self.sig = sig  # the signature spelling: i32, fp16, ...
        self.ir = ir

    def __repr__(self) -> str:  # also str(): object.__str__ calls it
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dtype) and not isinstance(other, pointer_type) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("dtype", self.name))

    # Triton's predicates
    def is_ptr(self) -> bool:
        return False

    def is_floating(self) -> bool:
        return self.ir.is_float

    def is_int(self) -> bool:
        return self.ir.is_int

    def is_bool(self) -> bool:
        return self.ir.is_bool

    def is_int_signed(self) -> bool:
        return self.ir.kind == "int"

    def is_int_unsigned(self) -> bool:
        return self.ir.kind == "uint"

    def is_fp8(self) -> bool:
        return self.ir.is_float and self.ir.bits == 8

    def is_fp16(self) -> bool:
        return self.name == "fp16"

    def is_bf16(self) -> bool:
        return self.name == "bf16"

    def is_fp32(self) -> bool:
        return self.name == "fp32"

    def is_fp64(self) -> bool:
        return self.name == "fp64"

    def kind(self) -> int:
        """bool < uint < int < float, for scalar promotion."""
        return {"bool": 0, "uint": 1, "int": 2, "float": 3}[self.ir.kind]

    @property
    def primitive_bitwidth(self) -> int:
        return self.ir.bits

    @property
    def int_bitwidth(self) -> int:
        return self.ir.bits

    @property
    def fp_mantissa_width(self) -> int:
        return {"fp8e4nv": 3, "fp8e5": 2, "fp16": 10, "bf16": 7, "fp32": 23, "fp64": 52}.get(self.name, 0)

    @property
    def scalar(self) -> "dtype":
        return self

    def int_range(self) -> Tuple[int, int]:
        b = self.ir.bits
        if self.ir.kind == "bool":
            return 0, 1
        if self.ir.kind == "uint":
            return 0, 2 ** b - 1
        return -(2 ** (b - 1)), 2 ** (b - 1) - 1

    def to_ir(self, builder: Any = None) -> T.Type:
        return self.ir


class pointer_type(dtype):
    """A pointer to global memory holding `element_ty` elements."""

    def __init__(self, element_ty: dtype, address_space: int = 1, const: bool = False):
        if not isinstance(element_ty, dtype) or isinstance(element_ty, pointer_type):
            raise TLXCompileError(f"pointer_type needs a scalar dtype, got {element_ty!r}")
        self.element_ty = element_ty
        self.name = f"pointer<{element_ty.name}>"
        self.sig = "*" + element_ty.sig
        self.ptr_ir = T.PointerType(element_ty.ir)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, pointer_type) and other.element_ty == self.element_ty

    def __hash__(self) -> int:
        return hash(("ptr", self.element_ty.name))

    def is_ptr(self) -> bool:
        return True

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    def is_fp8(self) -> bool:
        return False

    def kind(self) -> int:
        return 4

    @property
    def primitive_bitwidth(self) -> int:
        return 64

    def to_ir(self, builder: Any = None) -> T.Type:
        return self.ptr_ir


int1 = dtype("int1", "i1", T.i1)
int8 = dtype("int8", "i8", T.i8)
int16 = dtype("int16", "i16", T.i16)
int32 = dtype("int32", "i32", T.i32)
int64 = dtype("int64", "i64", T.i64)
uint8 = dtype("uint8", "u8", T.u8)
uint16 = dtype("uint16", "u16", T.u16)
uint32 = dtype("uint32", "u32", T.u32)
uint64 = dtype("uint64", "u64", T.u64)
float16 = dtype("fp16", "fp16", T.f16)
bfloat16 = dtype("bf16", "bf16", T.bf16)
float32 = dtype("fp32", "fp32", T.f32)
float64 = dtype("fp64", "fp64", T.f64)
float8e4nv = dtype("fp8e4nv", "fp8e4nv", T.f8e4m3)
float8e5 = dtype("fp8e5", "fp8e5", T.f8e5m2)

ALL_DTYPES: List[dtype] = [int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16,
                           float32, float64, float8e4nv, float8e5]
_BY_IR = {d.ir: d for d in ALL_DTYPES}
_BY_SIG = {d.sig: d for d in ALL_DTYPES}
_BY_SIG.update({"fp8e4m3": float8e4nv, "fp8e5m2": float8e5, "bool": int1, "f16": float16, "f32": float32,
                "f64": float64, "bf16": bfloat16})


def dtype_from_ir(t: T.Type) -> dtype:
    """The frontend dtype of an IR scalar or pointer type."""
    if isinstance(t, T.PointerType):
        return pointer_type(_BY_IR[t.pointee])
    return _BY_IR[t]  # type: ignore[index]


def dtype_from_sig(s: str) -> Optional[dtype]:
    """`'fp16'` → float16, `'*fp16'` → pointer_type(float16); None when unknown."""
    s = s.strip()
    if s.startswith("*"):
        inner = _BY_SIG.get(s[1:].strip())
        return pointer_type(inner) if inner is not None else None
    return _BY_SIG.get(s)


# ---------------------------------------------------------------------------------------------
# constexpr
# ---------------------------------------------------------------------------------------------


class constexpr:
    """A compile-time value. As an annotation (`BLOCK: tl.constexpr`) it marks a kernel parameter
    that specializes the kernel; `NAME: tl.constexpr = expr` inside a kernel is evaluated while
    tracing. The tracer works with the plain Python values; this class only appears when a user
    wraps a value explicitly."""

    def __init__(self, value: Any):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __index__(self) -> int:
        return self.value

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other: object) -> bool:
        return self.value == unwrap(other)

    def __hash__(self) -> int:
        return hash(self.value)


def unwrap(v: Any) -> Any:
    """The Python value of a constexpr (other values unchanged)."""
    return v.value if isinstance(v, constexpr) else v


# ---------------------------------------------------------------------------------------------
# tracing context
# ---------------------------------------------------------------------------------------------


class TraceContext:
    """The state of one kernel trace: the builder (with the current source location), the
    module that builds IR for the language (`tlx.language.semantic`: the tensor and buffer
    methods below call it through the trace, since it is built on this module), and
    compile-time facts builtins need (num_warps, target, warp-specialize replica id)."""

    def __init__(self, builder: "Builder", num_warps: int, target: str, semantic: Any):
        self.builder = builder
        self.semantic = semantic
        self.num_warps = num_warps
        self.target = target
        self.replica_id: Optional[int] = None  # inside a replicated async_task
        # constants are made once per (block, type, value) at the top of the function body or of
        # the worker partition being traced (partitions are isolated from outer values)
        self.const_anchor: List[Any] = [builder.block]
        self.const_cache: Dict[Any, Any] = {}
        self.const_count: Dict[int, int] = {}
        # id(branch block) -> the block its scf.if will sit in, while the branch is traced (a
        # branch block is attached to its op only once both branches are traced)
        self.branch_hosts: Dict[int, Any] = {}


_tls = threading.local()


def current() -> TraceContext:
    """The active trace; outside a kernel this is a TLXCompileError."""
    ctx = getattr(_tls, "ctx", None)
    if ctx is None:
        raise TLXCompileError("this function can only be called inside a @tlx.jit kernel",
                              hint="call it from a kernel decorated with @tlx.jit")
    return ctx


def set_current(ctx: Optional[TraceContext]) -> Optional[TraceContext]:
    old = getattr(_tls, "ctx", None)
    _tls.ctx = ctx
    return old


def builtin(fn: Callable) -> Callable:
    """Mark a kernel-language function (the tracer calls it directly with traced values)."""
    fn.__tlx_builtin__ = True  # type: ignore[attr-defined]
    return fn


# ---------------------------------------------------------------------------------------------
# runtime handles
# ---------------------------------------------------------------------------------------------


class block_type:
    """The type of a block tensor: element dtype and shape."""

    def __init__(self, element_ty: dtype, shape: Sequence[int]):
        self.element_ty = element_ty
        self.shape = tuple(shape)

    @property
    def scalar(self) -> dtype:
        return self.element_ty

    def is_block(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, block_type) and other.element_ty == self.element_ty and other.shape == self.shape

    def __repr__(self) -> str:
        return f"<{list(self.shape)}, {self.element_ty}>"


class Handle:
    """Base of every runtime (traced) value: wraps one IR value."""

    handle: "Value"

    def __bool__(self) -> bool:
        raise TLXCompileError(f"a runtime {type(self).__name__} has no compile-time truth value",
                              hint="use a tl.constexpr for compile-time conditions, or an `if` on a scalar "
                                   "(which becomes a runtime branch)")

    def __iter__(self):
        raise TLXCompileError(f"cannot iterate over a runtime {type(self).__name__}")


def shape_arg(args: Tuple[Any, ...]) -> Any:
    """`x.reshape(2, 3)` and `x.reshape((2, 3))` alike: one tuple/list argument is the shape."""
    return args[0] if len(args) == 1 and isinstance(unwrap(args[0]), (tuple, list)) else args


class tensor(Handle):
    """A runtime value: a scalar (shape `()`) or a block tensor, of dtype `dtype`."""

    def __init__(self, handle: "Value", dtype_: dtype, shape: Sequence[int] = ()):
        self.handle = handle
        self.dtype = dtype_
        self.shape = tuple(shape)

    @property
    def type(self):
        return block_type(self.dtype, self.shape) if self.shape else self.dtype

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def is_block(self) -> bool:
        return bool(self.shape)

    def __repr__(self) -> str:
        return f"tensor({self.dtype}, shape={list(self.shape)})"

    # Triton's tensor operators and methods; tlx.language.semantic builds their IR.
    __hash__ = object.__hash__  # defining __eq__ below would otherwise make tensors unhashable

    def __add__(self, o: Any) -> "tensor": return current().semantic.add(self, o)
    def __radd__(self, o: Any) -> "tensor": return current().semantic.add(o, self)
    def __sub__(self, o: Any) -> "tensor": return current().semantic.sub(self, o)
    def __rsub__(self, o: Any) -> "tensor": return current().semantic.sub(o, self)
    def __mul__(self, o: Any) -> "tensor": return current().semantic.mul(self, o)
    def __rmul__(self, o: Any) -> "tensor": return current().semantic.mul(o, self)
    def __truediv__(self, o: Any) -> "tensor": return current().semantic.truediv(self, o)
    def __rtruediv__(self, o: Any) -> "tensor": return current().semantic.truediv(o, self)
    def __floordiv__(self, o: Any) -> "tensor": return current().semantic.floordiv(self, o)
    def __rfloordiv__(self, o: Any) -> "tensor": return current().semantic.floordiv(o, self)
    def __mod__(self, o: Any) -> "tensor": return current().semantic.mod(self, o)
    def __rmod__(self, o: Any) -> "tensor": return current().semantic.mod(o, self)
    def __and__(self, o: Any) -> "tensor": return current().semantic.and_(self, o)
    def __rand__(self, o: Any) -> "tensor": return current().semantic.and_(o, self)
    def __or__(self, o: Any) -> "tensor": return current().semantic.or_(self, o)
    def __ror__(self, o: Any) -> "tensor": return current().semantic.or_(o, self)
    def __xor__(self, o: Any) -> "tensor": return current().semantic.xor_(self, o)
    def __rxor__(self, o: Any) -> "tensor": return current().semantic.xor_(o, self)
    def __lshift__(self, o: Any) -> "tensor": return current().semantic.shl(self, o)
    def __rlshift__(self, o: Any) -> "tensor": return current().semantic.shl(o, self)
    def __rshift__(self, o: Any) -> "tensor": return current().semantic.shr(self, o)
    def __rrshift__(self, o: Any) -> "tensor": return current().semantic.shr(o, self)
    def __lt__(self, o: Any) -> "tensor": return current().semantic.compare(self, o, "lt")
    def __le__(self, o: Any) -> "tensor": return current().semantic.compare(self, o, "le")
    def __gt__(self, o: Any) -> "tensor": return current().semantic.compare(self, o, "gt")
    def __ge__(self, o: Any) -> "tensor": return current().semantic.compare(self, o, "ge")
    def __eq__(self, o: Any) -> "tensor": return current().semantic.compare(self, o, "eq")  # type: ignore[override]
    def __ne__(self, o: Any) -> "tensor": return current().semantic.compare(self, o, "ne")  # type: ignore[override]
    def __neg__(self) -> "tensor": return current().semantic.minus(self)
    def __pos__(self) -> "tensor": return self
    def __invert__(self) -> "tensor": return current().semantic.invert(self)
    def __getitem__(self, slices: Any) -> "tensor": return current().semantic.tensor_getitem(self, slices)

    def to(self, dtype_: Any, fp_downcast_rounding: Any = None, bitcast: Any = False) -> "tensor":
        return current().semantic.cast(self, unwrap(dtype_), unwrap(fp_downcast_rounding), unwrap(bitcast))

    def reshape(self, *shape: Any, can_reorder: bool = False) -> "tensor":
        return current().semantic.reshape(self, shape_arg(shape), can_reorder)

    def permute(self, *dims: Any) -> "tensor":
        return current().semantic.permute(self, shape_arg(dims))

    def trans(self, *dims: Any) -> "tensor":
        return current().semantic.permute(self, shape_arg(dims) or (1, 0))

    @property
    def T(self) -> "tensor":
        return current().semantic.permute(self, (1, 0))

    def expand_dims(self, axis: Any) -> "tensor":
        return current().semantic.expand_dims(self, axis)

    def broadcast_to(self, *shape: Any) -> "tensor":
        return current().semantic.broadcast_to(self, shape_arg(shape))

    def sum(self, axis: Any = None, keep_dims: bool = False) -> "tensor":
        return current().semantic.reduce(self, axis, "sum", keep_dims)

    def max(self, axis: Any = None, keep_dims: bool = False) -> "tensor":
        return current().semantic.reduce(self, axis, "max", keep_dims)

    def min(self, axis: Any = None, keep_dims: bool = False) -> "tensor":
        return current().semantic.reduce(self, axis, "min", keep_dims)

    def argmax(self, axis: Any, keep_dims: bool = False) -> "tensor":
        return current().semantic.reduce(self, axis, "argmax", keep_dims)

    def argmin(self, axis: Any, keep_dims: bool = False) -> "tensor":
        return current().semantic.reduce(self, axis, "argmin", keep_dims)

    def split(self) -> Tuple["tensor", "tensor"]:
        return current().semantic.split(self)


class buffered_tensor(Handle):
    """A shared-memory buffer, an array of buffers (`num > 0`), or a view of one.

    Kernels get one from `tlx.local_alloc` (`buffered_tensor(value, dtype)`). TLX's descriptive
    form, `buffered_tensor(handle=None, element_ty=..., shape=..., num=..., storage=...,
    layout=...)`, builds one with no IR value behind it: it carries the facts and names no
    memory (what TLX's own unit tests make to build `reuse_group` trees outside a kernel)."""

    def __init__(self, handle: Optional["Value"], element_ty: dtype, shape: Optional[Sequence[int]] = None,
                 num: int = 0, storage: Any = None, layout: Any = None):
        self.handle = handle  # type: ignore[assignment]
        self.dtype = element_ty
        self.storage = storage
        self.layout = layout
        self._shape = tuple(shape) if shape is not None else None
        self._num = int(num)

    @property
    def mtype(self) -> T.MemDescType:
        if self.handle is None:
            raise TLXCompileError("this buffered_tensor has no buffer behind it (it was built with handle=None)",
                                  hint="allocate buffers with tlx.local_alloc inside the kernel")
        return self.handle.type  # type: ignore[return-value]

    @property
    def shape(self) -> Tuple[int, ...]:
        """The shape of one buffer (TLX hides the buffer-index dimension of an array)."""
        if self.handle is None:
            return self._shape or ()
        return self.mtype.buffer_shape

    @property
    def num(self) -> int:
        if self.handle is None:
            return self._num
        return self.mtype.buffers

    def __getitem__(self, idx: Any) -> "buffered_tensor":
        """`buf[i]`: buffer `i` of a buffer array (`tlx.local_view`)."""
        return current().semantic.memdesc_index(self, idx)

    def __repr__(self) -> str:
        if self.handle is None:
            return f"buffered_tensor({self.dtype}, {list(self.shape)}, num={self.num})"
        return f"buffered_tensor({self.handle.type})"


class mbarrier(Handle):
    """An array of mbarriers, or one mbarrier."""

    def __init__(self, handle: "Value", arrive_count: int = 1, is_warp_barrier: bool = False):
        self.handle = handle
        self.arrive_count = arrive_count
        self.is_warp_barrier = is_warp_barrier

    @property
    def num(self) -> int:
        t = self.handle.type
        return t.count if t.array else 0  # type: ignore[union-attr]

    def __getitem__(self, idx: Any) -> "mbarrier":
        """`bars[i]`: barrier `i` of an mbarrier array (`tlx.local_view`)."""
        return current().semantic.memdesc_index(self, idx)

    def __repr__(self) -> str:
        return f"mbarrier({self.handle.type})"


class tensor_descriptor(Handle):
    """A TMA tensor descriptor: moves `block_shape` tiles of `dtype`."""

    def __init__(self, handle: "Value", dtype_: dtype, block_shape: Sequence[int]):
        self.handle = handle
        self.dtype = dtype_
        self.block_shape = list(block_shape)

    @property
    def block_type(self) -> block_type:
        return block_type(self.dtype, self.block_shape)

    def load(self, offsets: Any, cache_modifier: Any = "", eviction_policy: Any = "") -> tensor:
        """`desc.load(offsets)`: a TMA load of one tile into registers."""
        return current().semantic.descriptor_load(self, offsets, cache_modifier, eviction_policy)

    def store(self, offsets: Any, value: Any) -> None:
        """`desc.store(offsets, tile)`: a TMA store of one tile from registers."""
        current().semantic.descriptor_store(self, offsets, value)

    def __repr__(self) -> str:
        return f"tensor_descriptor({self.dtype}, {self.block_shape})"


class tensor_descriptor_ptr(Handle):
    """Global memory for TMA descriptors written on the device (`tlx.allocate_tensor_descriptor`):
    an array of `num` 128-byte slots, or one slot of it (`ptrs[i]`). `tlx.make_tensor_descriptor`
    writes a descriptor into a slot; `tlx.reinterpret_tensor_descriptor` reads it back."""

    descriptor_size = 128  # bytes per slot: one CUtensorMap

    def __init__(self, handle: "Value", written: Optional[dict] = None, index: Optional[int] = None):
        self.handle = handle
        # what the trace has written so far into each constant slot index of the array: (block, dtype);
        # shared by the array and the slots indexed from it, for the consistency check of
        # reinterpret_tensor_descriptor
        self.written = written if written is not None else {}
        self.index = index

    @property
    def num(self) -> int:
        """How many slots this value spans (1 for one slot)."""
        return self.handle.type.count  # type: ignore[union-attr]

    def __getitem__(self, idx: Any) -> "tensor_descriptor_ptr":
        """`ptrs[i]`: slot `i` of the array."""
        return current().semantic.desc_slot(self, idx)

    def __repr__(self) -> str:
        return f"tensor_descriptor_ptr({self.handle.type})"


class async_token(Handle):
    """An async token (cp.async groups)."""

    def __init__(self, handle: "Value"):
        self.handle = handle


def wrap_value(v: "Value", template: Any = None) -> Handle:
    """Wrap an IR value in the frontend handle its type calls for (used for loop-carried and
    if-result values; `template` supplies frontend-only facts such as an mbarrier's count)."""
    t = v.type
    if isinstance(t, T.TensorType):
        return tensor(v, dtype_from_ir(t.element), t.shape)
    if isinstance(t, (T.ScalarType, T.PointerType)):
        return tensor(v, dtype_from_ir(t), ())
    if isinstance(t, T.MemDescType):
        return buffered_tensor(v, dtype_from_ir(t.element))
    if isinstance(t, T.BarrierType):
        if isinstance(template, mbarrier):
            return mbarrier(v, template.arrive_count, template.is_warp_barrier)
        return mbarrier(v)
    if isinstance(t, T.TensorDescType):
        return tensor_descriptor(v, dtype_from_ir(t.element), t.block_shape)
    if isinstance(t, T.TokenType):
        return async_token(v)
    if isinstance(t, T.DescSlotsType):
        if isinstance(template, tensor_descriptor_ptr):
            return tensor_descriptor_ptr(v, template.written, template.index)
        return tensor_descriptor_ptr(v)
    raise TLXCompileError(f"cannot wrap a value of type {t}")

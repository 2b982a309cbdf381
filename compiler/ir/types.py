"""IR types: scalars, pointers, block tensors, shared-memory descriptors, mbarriers, TMA
descriptors and async tokens.

Every type is an immutable, hashable value object with a canonical text form (`str(t)`), which
the parser reads back exactly (`parse_type(str(t)) == t`).

Text forms::

    i1 i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64 f8e4m3 f8e5m2
    !ptr<f16>                                   a global pointer
    tensor<64x64xf16>  tensor<64x!ptr<f32>>     a block tensor (optionally `, #layout`)
    !smem<3x64x64xf16, #nvmma<...>, buffers=3, mutable>
    !mbarriers<4>   !mbarrier                   an mbarrier array / one mbarrier
    !tensordesc<64x64xf16>                      a TMA tensor descriptor (block shape, dtype)
    !descslots<2>, !descslot                    device descriptor slots (an array of 2, one slot)
    !token                                      an async token
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Tuple, Union

from .layouts import DistributedLayout, SharedLayout


class Type:
    """Base class of every IR type."""

    def __str__(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@dataclass(frozen=True)
class ScalarType(Type):
    """A scalar element type. `kind` is 'int', 'uint', 'float' or 'bool'."""

    name: str
    kind: str
    bits: int
    storage_only: bool = False  # fp8: values are stored and converted, not computed on

    def __str__(self) -> str:
        return self.name

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint", "bool")

    @property
    def is_signed(self) -> bool:
        return self.kind == "int"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)


i1 = ScalarType("i1", "bool", 1)
i8 = ScalarType("i8", "int", 8)
i16 = ScalarType("i16", "int", 16)
i32 = ScalarType("i32", "int", 32)
i64 = ScalarType("i64", "int", 64)
u8 = ScalarType("u8", "uint", 8)
u16 = ScalarType("u16", "uint", 16)
u32 = ScalarType("u32", "uint", 32)
u64 = ScalarType("u64", "uint", 64)
f16 = ScalarType("f16", "float", 16)
bf16 = ScalarType("bf16", "float", 16)
f32 = ScalarType("f32", "float", 32)
f64 = ScalarType("f64", "float", 64)
f8e4m3 = ScalarType("f8e4m3", "float", 8, storage_only=True)
f8e5m2 = ScalarType("f8e5m2", "float", 8, storage_only=True)

SCALAR_TYPES = {t.name: t for t in (i1, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3, f8e5m2)}


@dataclass(frozen=True)
class PointerType(Type):
    """A pointer to global memory holding elements of `pointee`."""

    pointee: ScalarType

    def __str__(self) -> str:
        return f"!ptr<{self.pointee}>"


ElementType = Union[ScalarType, PointerType]


def _shape_text(shape: Tuple[int, ...]) -> str:
    return "".join(f"{d}x" for d in shape)


@dataclass(frozen=True)
class TensorType(Type):
    """A block tensor held in registers: a shape, an element type and (after the layout pass) a
    distributed layout that maps its elements to threads."""

    shape: Tuple[int, ...]
    element: ElementType
    layout: Optional[DistributedLayout] = None

    def __str__(self) -> str:
        lay = f", {self.layout}" if self.layout is not None else ""
        return f"tensor<{_shape_text(self.shape)}{self.element}{lay}>"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_layout(self, layout: Optional[DistributedLayout]) -> "TensorType":
        return TensorType(self.shape, self.element, layout)


@dataclass(frozen=True)
class MemDescType(Type):
    """A shared-memory buffer or a view of one.

    `shape` is the full shape. When `buffers` > 0 the value is an array of `buffers` buffers and
    the leading dimension of `shape` is the buffer index (TLX's `local_alloc(shape, dtype, num)`
    gives `[num, *shape]`); `buffers == 0` means a single buffer or view. `alloc_shape` is the
    shape of the allocation the view belongs to (it equals `shape` on the allocation itself).
    `remote` marks a view of the same buffer in another CTA of the cluster (`tlx.remote_view`:
    a shared::cluster address made by mapa), which only the cluster ops may access.
    """

    shape: Tuple[int, ...]
    element: ScalarType
    layout: Optional[SharedLayout] = None
    buffers: int = 0
    mutable: bool = True
    alloc_shape: Tuple[int, ...] = field(default=())
    remote: bool = False

    def __post_init__(self) -> None:
        if not self.alloc_shape:
            object.__setattr__(self, "alloc_shape", tuple(self.shape))

    def __str__(self) -> str:
        parts = [f"{_shape_text(self.shape)}{self.element}"]
        if self.layout is not None:
            parts.append(str(self.layout))
        if self.buffers:
            parts.append(f"buffers={self.buffers}")
        if tuple(self.alloc_shape) != tuple(self.shape):
            parts.append(f"alloc={_shape_text(self.alloc_shape)[:-1]}")
        if self.mutable:
            parts.append("mutable")
        if self.remote:
            parts.append("remote")
        return f"!smem<{', '.join(parts)}>"

    @property
    def buffer_shape(self) -> Tuple[int, ...]:
        """The shape of one buffer (without the buffer-index dimension)."""
        return tuple(self.shape[1:]) if self.buffers else tuple(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes the buffer (or view) spans: a padded layout's padding included."""
        padded = getattr(self.layout, "padded_numel", None)
        if padded is None:
            return self.numel * self.element.bytes
        n = 1
        for d in self.buffer_shape:
            n *= d
        return padded(n) * max(self.buffers, 1) * self.element.bytes

    def replace(self, **kw) -> "MemDescType":
        d = dict(shape=self.shape, element=self.element, layout=self.layout, buffers=self.buffers,
                 mutable=self.mutable, alloc_shape=self.alloc_shape, remote=self.remote)
        d.update(kw)
        return MemDescType(**d)


@dataclass(frozen=True)
class BarrierType(Type):
    """mbarriers in shared memory: an array of `count` barriers, or one barrier (`array=False`);
    `remote`: one barrier of another CTA of the cluster (`tlx.remote_view`, `!mbarrier<remote>`)."""

    count: int = 1
    array: bool = True
    remote: bool = False

    def __str__(self) -> str:
        if self.remote:
            return "!mbarrier<remote>"
        return f"!mbarriers<{self.count}>" if self.array else "!mbarrier"

    @property
    def nbytes(self) -> int:
        return 8 * self.count


@dataclass(frozen=True)
class TensorDescType(Type):
    """A TMA tensor descriptor: the block shape and element type of the tiles it moves."""

    block_shape: Tuple[int, ...]
    element: ScalarType

    def __str__(self) -> str:
        return f"!tensordesc<{_shape_text(self.block_shape)}{self.element}>"

    @property
    def rank(self) -> int:
        return len(self.block_shape)


@dataclass(frozen=True)
class DescSlotsType(Type):
    """Global memory for TMA descriptors written on the device (`tlx.allocate_tensor_descriptor`):
    an array of `count` 128-byte, 128-byte-aligned slots, or one slot of such an array
    (`array=False`, `slots[i]`)."""

    count: int = 1
    array: bool = True

    def __str__(self) -> str:
        return f"!descslots<{self.count}>" if self.array else "!descslot"


@dataclass(frozen=True)
class TokenType(Type):
    """An async token: orders async copies, commits and waits."""

    def __str__(self) -> str:
        return "!token"


token = TokenType()


def element_of(t: Type) -> Optional[ElementType]:
    """The element type of a scalar, pointer or tensor type (None for the others)."""
    if isinstance(t, (ScalarType, PointerType)):
        return t
    if isinstance(t, TensorType):
        return t.element
    return None


def shape_of(t: Type) -> Tuple[int, ...]:
    """The block shape of a tensor type, `()` for scalars and pointers."""
    if isinstance(t, TensorType):
        return t.shape
    return ()


def is_scalar_like(t: Type) -> bool:
    """True for scalars and scalar pointers (values that are uniform across the CTA)."""
    return isinstance(t, (ScalarType, PointerType))

"""What an IR value becomes in PTX: registers for scalars and tensors, an address and a
geometry for shared-memory buffers, an address for mbarriers and TMA descriptors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple, Union

from ..errors import TLXCompileError
from ..ir import layouts as L
from ..ir import types as T
from ..analysis import layout_math as LM


def reg_kind(e: T.ElementType) -> str:
    """The PTX register kind holding one element: 'pred', 'b16', 'b32' or 'b64' (8-bit values live
    in the low byte of a 16-bit register)."""
    if isinstance(e, T.PointerType):
        return "b64"
    if e.bits == 1:
        return "pred"
    if e.bits <= 16:
        return "b16"
    if e.bits == 32:
        return "b32"
    return "b64"


def even_register_split(threads: int) -> int:
    """Registers per thread when `threads` share the 64K register file evenly (a multiple of 8,
    at most 248: what .maxnreg and setmaxnreg accept)."""
    per = min(248, 65536 // threads)
    return per - per % 8


def int_bits(e: T.ScalarType) -> int:
    """The width integer instructions on element type `e` use (8-bit values as 16-bit)."""
    return 16 if e.bits <= 16 else e.bits


def float_suffix(e: T.ScalarType) -> str:
    """The PTX type of a float element that arithmetic runs on (KeyError for fp8)."""
    return {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}[e.name]


@dataclass
class Scalar:
    """A value uniform across the threads that compute it: one register (or an immediate)."""

    reg: str
    elem: T.ElementType


@dataclass
class Tensor:
    """A register tensor: `regs[i]` holds register i of every thread under linear layout `lmap`."""

    regs: List[str]
    lmap: LM.LinearMap
    elem: T.ElementType


@dataclass
class SmemView:
    """A shared-memory buffer or view.

    `base` holds the shared-window address of the buffer the view lies in; `origin` is the XOR
    offset of the view's first element inside that buffer (0, an int, or a register); `layout`
    and `storage_shape` are the buffer's (storage orientation: the last dim contiguous unless
    NVMMA `transposed`); view dim i is storage dim `perm[i]`. An array of buffers has
    `buffers` > 0 and a leading buffer-index dim, each buffer `buffer_bytes` long."""

    base: str
    elem: T.ScalarType
    layout: L.SharedLayout
    storage_shape: Tuple[int, ...]
    perm: Tuple[int, ...]
    shape: Tuple[int, ...]
    buffers: int = 0
    buffer_bytes: int = 0
    origin: Union[int, str] = 0
    origin_coords: Optional[Tuple[int, ...]] = (0,)  # static storage coords of the origin (None if dynamic)
    # a `tlx.local_alias` whose buffers are not evenly spaced: the inner digits' (radix, stride),
    # buffer_bytes being the outer digit's stride (`compiler/ir/alias.py`)
    slab_digits: Tuple[Tuple[int, int], ...] = ()

    @property
    def elem_bytes(self) -> int:
        return max(1, self.elem.bits // 8)

    def smap(self) -> LM.SharedMap:
        return LM.shared_map(self.layout, tuple(self.storage_shape), self.elem_bytes)

    def storage_coord(self, view_coord: Tuple[int, ...]) -> Tuple[int, ...]:
        """Storage coordinates (one buffer) of view coordinates (the array dim excluded)."""
        c = [0] * len(self.storage_shape)
        for i, p in enumerate(self.perm):
            c[p] = view_coord[i]
        return tuple(c)

    def element_bases(self, basis: Tuple[int, ...]) -> int:
        """Byte offset (XOR part) of a view-coordinate basis vector."""
        if self.buffers:
            b0, rest = basis[0], basis[1:]
            off = 0
            if b0:
                if self.slab_digits:
                    raise TLXCompileError("register access to a whole array of unevenly placed aliased buffers",
                                          hint="index the array (local_view) first")
                if not LM.is_pow2(self.buffers) or not LM.is_pow2(self.buffer_bytes):
                    raise TLXCompileError("register access to a whole buffer array needs a power-of-two count and size",
                                          hint="index the array (local_view) first")
                off = b0 * self.buffer_bytes
            return off ^ self.smap().offset(self.storage_coord(rest))
        return self.smap().offset(self.storage_coord(basis))


@dataclass
class Barriers:
    """mbarriers: the shared address of the first one; `count` of them (8 bytes each). `remote`:
    one barrier of another CTA of the cluster, `addr` a shared::cluster address (mapa)."""

    addr: str
    count: int
    array: bool
    remote: bool = False


@dataclass
class Desc:
    """A TMA descriptor: a 64-bit generic address of the 128-byte tensormap, and the encoding the
    kernel uses it with (filled from the buffers it moves)."""

    addr: str
    dtype: T.TensorDescType
    param_index: Optional[int] = None  # kernel parameter index (host descriptors)
    swizzle: Optional[int] = None
    box: Optional[Tuple[int, ...]] = None


@dataclass
class Token:
    """An async token: no registers."""


Lowered = Union[Scalar, Tensor, SmemView, Barriers, Desc, Token]


@dataclass
class Partition:
    """The threads running the code being lowered: a whole CTA, or one warp-specialize
    partition (thread and warp ids relative to it)."""

    index: int  # -1: the whole CTA outside warp specialization; 0: default partition; k: worker k
    num_warps: int
    tid: str
    lane: str
    warp: str
    leader: str  # predicate: thread 0 of the partition
    barrier_id: int  # the named barrier of the partition's CTA barrier
    whole_cta: bool  # True when bar.sync may omit the thread count
    prologue: List = field(default_factory=list)
    cache: dict = field(default_factory=dict)

    @property
    def threads(self) -> int:
        return self.num_warps * 32

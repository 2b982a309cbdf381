"""TLX's layout objects: how a shared-memory buffer's elements sit in bytes (passed as
`tlx.local_alloc(..., layout=...)`) and the CuTe-style register layout `tlx.layout(shape=, stride=)`.

The classes and their fields follow the real TLX (`types.py`): `swizzled_shared_layout_encoding`,
`swizzled_layout` (a CuTe ``Swizzle<B, M, S>``, resolved once the buffer shape is known),
`nv_mma_shared_layout_encoding`, `padded_shared_layout_encoding` and
`shared_linear_layout_encoding`. They are host-side value objects (equal when their fields are,
hashable, with a repr that names every field, so a kernel specialized on one caches by value);
`resolve(shape, dtype)` turns one into the compiler's shared layout for a buffer of `shape`,
checking that it fits. What each layout can feed is checked by the compiler: TMA and wgmma read
only NVMMA buffers.
"""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from tlx.compiler.errors import TLXAssertionError, TLXCompileError, TLXTypeError, TLXValueError
from tlx.compiler.analysis.layout_math import is_pow2
from tlx.compiler.ir import layouts as L

from .language.core import builtin, unwrap


def _ints(xs: Any, what: str) -> List[int]:
    xs = unwrap(xs)
    if not isinstance(xs, (list, tuple)):
        raise TLXValueError(f"{what} must be a list of integers, got {xs!r}")
    out = []
    for x in xs:
        x = unwrap(x)
        if not isinstance(x, int) or isinstance(x, bool):
            raise TLXValueError(f"{what} must be a list of integers, got {xs!r}")
        out.append(x)
    return out


def _bases(xs: Any, what: str) -> List[List[int]]:
    xs = unwrap(xs)
    if not isinstance(xs, (list, tuple)):
        raise TLXValueError(f"{what} must be a list of coordinate vectors, got {xs!r}")
    return [_ints(b, what) for b in xs]


def _check_order(order: Sequence[int], rank: int, what: str) -> None:
    if sorted(order) != list(range(rank)):
        raise TLXValueError(f"{what}: order {list(order)} is not a permutation of the {rank} dimensions")


def _check_no_cta_split(what: str, *groups: Sequence[int]) -> None:
    for g in groups:
        if any(x != 1 for x in g):
            raise TLXValueError(f"{what}: splitting a buffer across the CTAs of a cluster is not supported by tlx",
                                hint="leave numCTAsPerCGA / numCTASplit at 1 in every dimension")


def _check_shape(shape: Sequence[int], what: str) -> None:
    if not shape or any(not is_pow2(d) for d in shape):
        raise TLXCompileError(f"{what} needs a buffer whose dimensions are powers of two, got {list(shape)}")


class layout_encoding:
    """Base of every TLX layout (shared-memory layouts and the register layout `layout`)."""

    _FIELDS: Tuple[str, ...] = ()

    def _key(self) -> Tuple:
        def freeze(v: Any) -> Any:
            return tuple(freeze(x) for x in v) if isinstance(v, (list, tuple)) else v
        return (type(self).__name__,) + tuple(freeze(getattr(self, f)) for f in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._key() == self._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS) + ")"


class shared_layout_encoding(layout_encoding):
    """Base of the shared-memory layouts `tlx.local_alloc(..., layout=...)` takes."""

    def resolve(self, shape: Tuple[int, ...], dtype: Any) -> L.SharedLayout:
        """The compiler's layout for one buffer of `shape` x `dtype` (checks that it fits)."""
        raise NotImplementedError(f"{type(self).__name__}.resolve")


class swizzled_shared_layout_encoding(shared_layout_encoding):
    """Triton's swizzled shared layout: dimensions stored in `order` (fastest first); in the two
    fastest, the columns of row r are XORed, in groups of `vectorSize` elements, with the phase
    (r // perPhase) % maxPhase. (1, 1, 1) is the plain row-major layout."""

    _FIELDS = ("vectorSize", "perPhase", "maxPhase", "order", "numCTAs", "numCTAsPerCGA", "numCTASplit",
               "numCTAOrder")

    def __init__(self, vectorSize: Any, perPhase: Any, maxPhase: Any, order: Any, numCTAs: Any,
                 numCTAsPerCGA: Any, numCTASplit: Any, numCTAOrder: Any):
        self.vectorSize = unwrap(vectorSize)
        self.perPhase = unwrap(perPhase)
        self.maxPhase = unwrap(maxPhase)
        self.order = _ints(order, "swizzled_shared_layout_encoding order")
        self.numCTAs = _ints(numCTAs, "numCTAs")
        self.numCTAsPerCGA = _ints(numCTAsPerCGA, "numCTAsPerCGA")
        self.numCTASplit = _ints(numCTASplit, "numCTASplit")
        self.numCTAOrder = _ints(numCTAOrder, "numCTAOrder")
        for name in ("vectorSize", "perPhase", "maxPhase"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not is_pow2(v):
                raise TLXValueError(f"swizzled_shared_layout_encoding {name} must be a power of two, got {v!r}")

    @classmethod
    def make_default(cls, rank: int) -> "swizzled_shared_layout_encoding":
        """The unswizzled row-major layout of a rank-`rank` buffer."""
        order = list(reversed(range(rank)))
        return cls(1, 1, 1, order, [1] * rank, [1] * rank, [1] * rank, list(order))

    def resolve(self, shape: Tuple[int, ...], dtype: Any) -> L.SharedLayout:
        what = "swizzled_shared_layout_encoding"
        _check_order(self.order, len(shape), what)
        _check_no_cta_split(what, self.numCTAsPerCGA, self.numCTASplit)
        _check_shape(shape, what)
        return L.SwizzledSharedLayout(self.vectorSize, self.perPhase, self.maxPhase, tuple(self.order))


class swizzled_layout(layout_encoding):
    """A CuTe ``Swizzle<B, M, S>`` shared layout, `tlx.swizzled_layout(bits, base, shift)`:
    maxPhase = 2**B, vec = 2**M, and the phase advances every 2**(S+M) elements of the flat
    offset, so perPhase = 2**(S+M) // (the contiguous extent) once the buffer shape is known
    (`local_alloc` resolves it). `order` lists dimensions fastest first (row-major by default)."""

    _FIELDS = ("bits", "base", "shift", "order")

    def __init__(self, bits: Any, base: Any = 0, shift: Any = 0, order: Any = None):
        vals = []
        for name, v in (("bits", bits), ("base", base), ("shift", shift)):
            v = unwrap(v)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise TLXValueError(f"swizzled_layout {name} must be a non-negative integer, got {v!r}")
            vals.append(v)
        self.bits, self.base, self.shift = vals
        order = unwrap(order)
        self.order: Optional[List[int]] = None if order is None else _ints(order, "swizzled_layout order")

    @classmethod
    def make_default(cls, rank: int) -> "swizzled_layout":
        """No swizzle (``Swizzle<0, 0, 0>``), row-major."""
        return cls(0, 0, 0, list(reversed(range(rank))))

    @property
    def maxPhase(self) -> int:
        return 1 << self.bits

    @property
    def vectorSize(self) -> int:
        return 1 << self.base

    def __repr__(self) -> str:
        return f"swizzled_layout(Swizzle<{self.bits},{self.base},{self.shift}>, order={self.order})"

    def _to_encoding(self, shape: Optional[Sequence[int]] = None) -> swizzled_shared_layout_encoding:
        """The swizzled_shared_layout_encoding of this swizzle for a buffer of `shape` (a shape
        is needed unless there is no swizzle)."""
        if self.order is None and shape is None:
            raise TLXValueError("swizzled_layout: cannot resolve without an order or a shape")
        order = list(self.order) if self.order is not None else list(reversed(range(len(shape or ()))))
        rank = len(order)
        if self.maxPhase == 1:
            per_phase = 1
        else:
            if shape is None:
                raise TLXValueError("swizzled_layout: a real swizzle needs the buffer shape",
                                    hint="pass it as tlx.local_alloc(..., layout=tlx.swizzled_layout(...))")
            contig = int(unwrap(shape[order[0]]))
            span = 1 << (self.shift + self.base)
            if span % contig:
                raise TLXAssertionError(
                    f"swizzled_layout: Swizzle<{self.bits},{self.base},{self.shift}> advances its phase every {span} "
                    f"elements, less than one row of the contiguous extent {contig} (perPhase < 1)",
                    hint="make shift + base at least log2 of the contiguous dimension")
            per_phase = span // contig
        return swizzled_shared_layout_encoding(self.vectorSize, per_phase, self.maxPhase, order, [1] * rank,
                                               [1] * rank, [1] * rank, list(reversed(range(rank))))

    def resolve(self, shape: Tuple[int, ...], dtype: Any) -> L.SharedLayout:
        return self._to_encoding(shape).resolve(shape, dtype)


class nv_mma_shared_layout_encoding(shared_layout_encoding):
    """The NVMMA layout TMA and wgmma read: the contiguous dimension (`order[0]`) in swizzle atoms
    of 128, 64 or 32 bytes (the widest the row allows) when `swizzled` and the tile has 8 rows or
    more, else in 16-byte columns.
    `order` [1, 0] is row-major, [0, 1] an MN-major (transposed) operand."""

    _FIELDS = ("shape", "order", "elemType", "numCTAsPerCGA", "numCTASplit", "numCTAOrder", "fp4Padded",
               "swizzled")

    def __init__(self, shape: Any, order: Any, elemType: Any, numCTAsPerCGA: Any, numCTASplit: Any,
                 numCTAOrder: Any, fp4Padded: Any, swizzled: Any):
        self.shape = _ints(shape, "nv_mma_shared_layout_encoding shape")
        self.order = _ints(order, "nv_mma_shared_layout_encoding order")
        self.elemType = unwrap(elemType)
        self.numCTAsPerCGA = _ints(numCTAsPerCGA, "numCTAsPerCGA")
        self.numCTASplit = _ints(numCTASplit, "numCTASplit")
        self.numCTAOrder = _ints(numCTAOrder, "numCTAOrder")
        self.fp4Padded = bool(unwrap(fp4Padded))
        self.swizzled = bool(unwrap(swizzled))

    @classmethod
    def make_default(cls, shape: Sequence[int], elemType: Any, fp4Padded: bool = False) -> "nv_mma_shared_layout_encoding":
        """Row-major, swizzled: the layout local_alloc picks for a 2-D tile."""
        rank = len(shape)
        order = list(reversed(range(rank)))
        return cls(list(shape), order, elemType, [1] * rank, [1] * rank, list(order), fp4Padded, True)

    def resolve(self, shape: Tuple[int, ...], dtype: Any) -> L.SharedLayout:
        what = "nv_mma_shared_layout_encoding"
        rank = len(shape)
        if rank < 2:
            raise TLXValueError(f"{what} needs a buffer of rank 2 or more, got {list(shape)}",
                                hint="1-D buffers take the default (unswizzled) layout")
        if list(self.shape) != list(shape):
            raise TLXValueError(f"{what} was made for shape {self.shape}, the buffer is {list(shape)}")
        if self.elemType != dtype:
            raise TLXValueError(f"{what} was made for {self.elemType}, the buffer holds {dtype}")
        if self.fp4Padded:
            raise TLXValueError(f"{what}(fp4Padded=True) is for Blackwell's fp4 operands; tlx targets sm_90a")
        _check_order(self.order, rank, what)
        _check_no_cta_split(what, self.numCTAsPerCGA, self.numCTASplit)
        if self.order[0] == rank - 1:
            transposed = False
        elif rank == 2 and self.order == [0, 1]:
            transposed = True
        else:
            raise TLXValueError(f"{what}: order {self.order} is not supported; the contiguous dimension is the last "
                                "one (order [..., 1, 0]) or, for a 2-D buffer, the first ([0, 1])")
        bits = dtype.primitive_bitwidth
        contig = shape[self.order[0]] * bits // 8
        rows = math.prod(shape[d] for d in self.order[1:])
        swizzle = 0
        if self.swizzled and rows >= 8:  # a swizzle pattern spans 8 rows
            swizzle = next((s for s in (128, 64, 32) if contig % s == 0), 0)
        return L.NVMMASharedLayout(swizzle, bits, transposed)


def _identity_bases(shape: Sequence[int], order: Sequence[int]) -> List[List[int]]:
    """Offset bases of the plain layout storing dims in `order` (fastest first)."""
    rank = len(shape)
    out = []
    for d in order:
        k = 1
        while k < shape[d]:
            b = [0] * rank
            b[d] = k
            out.append(b)
            k <<= 1
    return out


class padded_shared_layout_encoding(shared_layout_encoding):
    """Triton's padded shared layout: `paddings[i]` elements of padding after every
    `intervals[i]` elements (powers of two). The elements themselves sit in the order
    `order` (fastest first) over `shape`, or at the offsets of an explicit linear map
    `offset_bases` (bit k of the offset -> a coordinate; `with_bases`)."""

    _FIELDS = ("intervals", "paddings", "order", "shape", "numCTAsPerCGA", "numCTASplit", "numCTAOrder",
               "offset_bases", "block_bases")

    def __init__(self, intervals: Any, paddings: Any, order: Any, shape: Any, numCTAsPerCGA: Any,
                 numCTASplit: Any, numCTAOrder: Any, offset_bases: Any = None, block_bases: Any = None):
        self.intervals = _ints(intervals, "padded_shared_layout_encoding intervals")
        self.paddings = _ints(paddings, "padded_shared_layout_encoding paddings")
        if len(self.intervals) != len(self.paddings):
            raise TLXValueError(f"padded_shared_layout_encoding: {len(self.intervals)} intervals but "
                                f"{len(self.paddings)} paddings (one padding per interval)")
        for what, xs in (("interval", self.intervals), ("padding", self.paddings)):
            for x in xs:
                if not is_pow2(x):
                    raise TLXValueError(f"padded_shared_layout_encoding: every {what} must be a power of two, got {x}")
        if len(set(self.intervals)) != len(self.intervals):
            raise TLXValueError(f"padded_shared_layout_encoding: intervals {self.intervals} repeat one")
        self.order = _ints(order, "padded_shared_layout_encoding order")
        self.shape = _ints(shape, "padded_shared_layout_encoding shape")
        self.numCTAsPerCGA = _ints(numCTAsPerCGA, "numCTAsPerCGA")
        self.numCTASplit = _ints(numCTASplit, "numCTASplit")
        self.numCTAOrder = _ints(numCTAOrder, "numCTAOrder")
        self.offset_bases = None if unwrap(offset_bases) is None else _bases(offset_bases, "offset_bases")
        self.block_bases = None if unwrap(block_bases) is None else _bases(block_bases, "block_bases")

    @staticmethod
    @builtin
    def with_bases(interval_padding_pairs: Any, offset_bases: Any, shape: Any,
                   block_bases: Any = None) -> "padded_shared_layout_encoding":
        """A padded layout whose elements sit at the offsets of the linear map `offset_bases`
        (one coordinate per offset bit, XOR-combined): a swizzled image rather than row-major."""
        shape = _ints(shape, "shape")
        rank = len(shape)
        if rank == 0:
            raise TLXValueError("padded_shared_layout_encoding.with_bases: shape must be non-empty")
        offset_bases = _bases(offset_bases, "offset_bases")
        if not offset_bases:
            raise TLXValueError("padded_shared_layout_encoding.with_bases: offset_bases must be non-empty")
        blocks = _bases(block_bases or [], "block_bases")
        for b in offset_bases + blocks:
            if len(b) != rank:
                raise TLXValueError(f"each base vector must have length rank={rank}, got {len(b)}: {b}")
        pairs = [_ints(p, "an (interval, padding) pair") for p in unwrap(interval_padding_pairs)]
        return padded_shared_layout_encoding([p[0] for p in pairs], [p[1] for p in pairs],
                                             list(reversed(range(rank))), shape, [1] * rank, [1] * rank,
                                             list(range(rank)), offset_bases, blocks)

    @staticmethod
    @builtin
    def with_identity_for(interval_padding_pairs: Any, shape: Any, order: Any = None) -> "padded_shared_layout_encoding":
        """A padded layout storing the dims of `shape` in `order` (row-major by default)."""
        shape = _ints(shape, "shape")
        rank = len(shape)
        order = list(reversed(range(rank))) if unwrap(order) is None else _ints(order, "order")
        pairs = [_ints(p, "an (interval, padding) pair") for p in unwrap(interval_padding_pairs)]
        return padded_shared_layout_encoding([p[0] for p in pairs], [p[1] for p in pairs], order, shape,
                                             [1] * rank, [1] * rank, list(range(rank)))

    def resolve(self, shape: Tuple[int, ...], dtype: Any) -> L.SharedLayout:
        what = "padded_shared_layout_encoding"
        _check_shape(shape, what)
        if list(self.shape) != list(shape):
            raise TLXValueError(f"{what} was made for shape {self.shape}, the buffer is {list(shape)}")
        _check_no_cta_split(what, self.numCTAsPerCGA, self.numCTASplit)
        if self.block_bases:
            raise TLXValueError(f"{what}: block_bases place a buffer across the CTAs of a cluster, which tlx does not "
                                "support", hint="pass no block_bases")
        if self.offset_bases is None:
            _check_order(self.order, len(shape), what)
            bases = _identity_bases(shape, self.order)
        else:
            bases = self.offset_bases
        return L.PaddedSharedLayout(tuple(self.intervals), tuple(self.paddings), tuple(tuple(b) for b in bases))


class shared_linear_layout_encoding(shared_layout_encoding):
    """An explicit linear shared layout: `offset_bases[k]` is the coordinate of element offset
    2**k; coordinates combine by XOR (so any bit permutation or XOR swizzle of the buffer can be
    written). `alignment` is the buffer's byte alignment (a power of two)."""

    _FIELDS = ("offset_bases", "block_bases", "alignment")

    def __init__(self, offset_bases: Any, block_bases: Any = None, alignment: Any = 16):
        self.offset_bases = _bases(offset_bases, "offset_bases")
        self.block_bases = _bases(block_bases or [], "block_bases")
        self.alignment = unwrap(alignment)
        if not self.offset_bases or not self.offset_bases[0]:
            raise TLXValueError("shared_linear_layout_encoding needs at least one offset basis of rank >= 1")
        rank = len(self.offset_bases[0])
        if any(len(b) != rank for b in self.offset_bases + self.block_bases):
            raise TLXValueError(f"shared_linear_layout_encoding: every basis must have rank {rank}")
        if not isinstance(self.alignment, int) or not is_pow2(self.alignment):
            raise TLXValueError(f"shared_linear_layout_encoding alignment must be a power of two, got {self.alignment!r}")

    def resolve(self, shape: Tuple[int, ...], dtype: Any) -> L.SharedLayout:
        what = "shared_linear_layout_encoding"
        _check_shape(shape, what)
        if len(self.offset_bases[0]) != len(shape):
            raise TLXValueError(f"{what} has rank-{len(self.offset_bases[0])} bases, the buffer is {list(shape)}")
        if self.block_bases:
            raise TLXValueError(f"{what}: block_bases place a buffer across the CTAs of a cluster, which tlx does not "
                                "support", hint="pass no block_bases")
        return L.SharedLinearLayout(tuple(tuple(b) for b in self.offset_bases), max(16, self.alignment))


def _modes_to_bits(shape: Sequence[int], stride: Sequence[int], what: str) -> List[int]:
    """The flat offset of each bit of a Shape:Stride list of modes: mode (2**k, s) gives
    s, 2s, ..., 2**(k-1) s."""
    if len(shape) != len(stride):
        raise TLXValueError(f"tlx.layout {what}: shape {list(shape)} and stride {list(stride)} differ in length")
    out = []
    for n, s in zip(shape, stride):
        if not is_pow2(n):
            raise TLXValueError(f"tlx.layout {what}: mode extent {n} is not a power of two")
        b = 1
        while b < n:
            out.append(s * b)
            b <<= 1
    return out


class layout(layout_encoding):
    """A register layout written as CuTe shape/stride, `tlx.layout(shape=(thread_shape,
    value_shape), stride=(thread_stride, value_stride))`: each mode (2**k, s) is k index bits with
    flat row-major offsets s, 2s, ...; the low 5 thread bits are the lane, the rest the warp, the
    value bits the registers. `tlx.layout(swizzled_layout(...))` is a shared-memory layout
    instead (resolved at once when it has no swizzle)."""

    _FIELDS = ("thread_shape", "value_shape", "thread_stride", "value_stride")

    def __new__(cls, spec: Any = None, *, shape: Any = None, stride: Any = None):
        spec = unwrap(spec)
        if isinstance(spec, swizzled_layout):
            return spec._to_encoding() if spec.maxPhase == 1 else spec
        return super().__new__(cls)

    def __init__(self, spec: Any = None, *, shape: Any = None, stride: Any = None):
        shape, stride = unwrap(shape), unwrap(stride)
        if unwrap(spec) is not None:
            raise TLXTypeError(f"tlx.layout takes a swizzled_layout or shape=/stride=, got {type(unwrap(spec)).__name__}")
        if shape is None or stride is None:
            raise TLXAssertionError("tlx.layout needs a swizzled_layout(...), or shape= and stride= for a register layout")
        if len(shape) != 2 or len(stride) != 2:
            raise TLXAssertionError("tlx.layout: shape and stride must each be (thread, value)")
        self.thread_shape, self.value_shape = (tuple(_ints(x, "shape")) for x in shape)
        self.thread_stride, self.value_stride = (tuple(_ints(x, "stride")) for x in stride)

    def linear_bases(self, tensor_shape: Sequence[int]) -> Tuple[List[List[int]], List[List[int]], List[List[int]]]:
        """(register, lane, warp) bases of this layout over a tensor of `tensor_shape` (flat
        offsets decoded row-major into coordinates)."""
        shape = [int(s) for s in tensor_shape]

        def coord(flat: int) -> List[int]:
            return [int(c) for c in np.unravel_index(flat % math.prod(shape), shape)]

        values = _modes_to_bits(self.value_shape, self.value_stride, "value")
        threads = _modes_to_bits(self.thread_shape, self.thread_stride, "thread")
        return [coord(f) for f in values], [coord(f) for f in threads[:5]], [coord(f) for f in threads[5:]]

    def to_linear_layout(self, tensor_shape: Tuple[int, ...]) -> L.LinearLayout:
        """The compiler's register layout of this layout over a tensor of `tensor_shape`: it needs
        the 5 lane bits of a warp and every element held by some (register, lane, warp)."""
        shape = tuple(int(s) for s in tensor_shape)
        if any(not is_pow2(s) for s in shape):
            raise TLXValueError(f"tlx.layout over a {list(shape)} tensor: dimensions must be powers of two")
        reg, lane, warp = self.linear_bases(shape)
        if len(lane) != 5:
            raise TLXValueError(f"tlx.layout gives {len(lane)} lane bits; a warp has 32 lanes (5 bits)",
                                hint="make the thread modes hold at least 32 threads")
        total = math.prod(shape)
        starts = [0]
        for s in shape[:-1]:
            starts.append(starts[-1] + s.bit_length() - 1)
        span: dict = {}  # Gaussian elimination over GF(2): pivot bit -> vector
        for b in reg + lane + warp:
            v = 0
            for d, x in enumerate(b):
                v |= x << starts[d]
            for piv in sorted(span, reverse=True):
                if v >> piv & 1:
                    v ^= span[piv]
            if v:
                span[v.bit_length() - 1] = v
        if 1 << len(span) != total:
            raise TLXValueError(f"tlx.layout shape={(self.thread_shape, self.value_shape)} "
                                f"stride={(self.thread_stride, self.value_stride)} leaves elements of the "
                                f"{list(shape)} tensor unheld", hint="the strides must reach every element")
        return L.LinearLayout(tuple(map(tuple, reg)), tuple(map(tuple, lane)), tuple(map(tuple, warp)), shape)


class amd_mfma_layout(layout_encoding):
    """The register layout of an AMD MFMA result (CDNA's matrix cores), as the real TLX describes it
    for AMD targets: `version` 1..4, `instr_shape` [m, n, k] with (m, n) one of (32, 32), (16, 16),
    (64, 4), (4, 64), `warps_per_cta` with one `tiles_per_warp` factor per warp axis (default 1).
    tlx compiles for sm_90a only: the object exists so that shared code builds and compares it, and
    a kernel that lays a tensor out with it is refused with a TLXTypeError where it does."""

    _FIELDS = ("version", "instr_shape", "transposed", "warps_per_cta", "element_bitwidth", "tiles_per_warp",
               "cga_layout")

    def __init__(self, version: Any, instr_shape: Any, transposed: Any, warps_per_cta: Any,
                 element_bitwidth: Any = 32, tiles_per_warp: Any = None, cga_layout: Any = None):
        self.version = int(unwrap(version))
        self.instr_shape = _ints(instr_shape, "amd_mfma_layout instr_shape")
        self.transposed = bool(unwrap(transposed))
        self.warps_per_cta = _ints(warps_per_cta, "amd_mfma_layout warps_per_cta")
        self.element_bitwidth = int(unwrap(element_bitwidth))
        rank = len(self.warps_per_cta)
        self.tiles_per_warp = _ints(tiles_per_warp, "amd_mfma_layout tiles_per_warp") if tiles_per_warp else [1] * rank
        self.cga_layout = _bases(cga_layout, "amd_mfma_layout cga_layout") if cga_layout else []
        if not 1 <= self.version <= 4:
            raise TLXAssertionError(f"amd_mfma_layout version must be 1..4, got {self.version}")
        if len(self.instr_shape) != 3 or self.instr_shape[:2] not in ([32, 32], [16, 16], [64, 4], [4, 64]):
            raise TLXAssertionError(f"amd_mfma_layout instr_shape must be [m, n, k] with (m, n) one of (32, 32), "
                                    f"(16, 16), (64, 4), (4, 64), got {self.instr_shape}")
        if self.element_bitwidth not in (32, 64):
            raise TLXAssertionError(f"amd_mfma_layout element_bitwidth must be 32 or 64, got {self.element_bitwidth}")
        if len(self.tiles_per_warp) != rank:
            raise TLXAssertionError(f"amd_mfma_layout tiles_per_warp needs one factor per warp axis ({rank}), got "
                                    f"{self.tiles_per_warp}")
        if any(len(b) != rank for b in self.cga_layout):
            raise TLXAssertionError(f"amd_mfma_layout cga_layout bases need {rank} entries each, got {self.cga_layout}")


def resolve_shared_layout(lay: Any, shape: Tuple[int, ...], dtype: Any) -> L.SharedLayout:
    """The compiler's layout for `local_alloc(shape, dtype, layout=lay)`: a TLX shared layout or a
    CuTe swizzle, resolved for one buffer of `shape`, or the default layout when `lay` is None (a
    TLXTypeError for anything else)."""
    lay = unwrap(lay)
    if lay is None:
        return L.default_shared_layout(tuple(shape), dtype.primitive_bitwidth)
    if isinstance(lay, (shared_layout_encoding, swizzled_layout)):
        return lay.resolve(tuple(shape), dtype)
    if isinstance(lay, layout):
        raise TLXTypeError("local_alloc(layout=...) takes a shared-memory layout; tlx.layout(shape=, stride=) is a "
                           "register layout", hint="pass it to tlx.local_load(..., layout=...) instead")
    raise TLXTypeError(f"`layout` must be a tlx.shared_layout_encoding, got {type(lay).__name__}")

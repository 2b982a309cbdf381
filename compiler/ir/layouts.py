"""Layout attributes: how a block tensor's elements sit in threads (distributed layouts) and how a
shared-memory buffer's elements sit in bytes (shared layouts).

These classes are data only: value objects with a canonical text form `#name<key=value, ...>`
that the IR parser reads back. The index math (which thread holds which element, which byte an
element lives at) belongs to the code generator (`compiler/analysis/layout_math.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Dict, Tuple, Type as PyType


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return "[" + ",".join(_fmt(x) for x in v) + "]"
    return str(v)


class Layout:
    """Base of every layout. Subclasses are frozen dataclasses with a `TAG`."""

    TAG = ""

    def __str__(self) -> str:
        body = ", ".join(f"{f.name}={_fmt(getattr(self, f.name))}" for f in fields(self))  # type: ignore[arg-type]
        return f"#{self.TAG}<{body}>"


class DistributedLayout(Layout):
    """A layout of a register tensor over the threads of a CTA (or of a partition)."""


class SharedLayout(Layout):
    """A layout of a shared-memory buffer."""


@dataclass(frozen=True)
class BlockedLayout(DistributedLayout):
    """Triton's blocked layout: each thread holds `spt` contiguous elements per dimension, a warp
    is `tpw` threads, a CTA is `wpc` warps; `order` lists dimensions fastest first."""

    TAG = "blocked"
    spt: Tuple[int, ...]
    tpw: Tuple[int, ...]
    wpc: Tuple[int, ...]
    order: Tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.spt)


@dataclass(frozen=True)
class SliceLayout(DistributedLayout):
    """The layout of a tensor with dimension `dim` of `parent` removed (reductions, `x[:, None]`)."""

    TAG = "slice"
    dim: int
    parent: DistributedLayout


@dataclass(frozen=True)
class MmaLayout(DistributedLayout):
    """The wgmma (NVMMA v3) accumulator layout: `wpc` warps per CTA, instruction shape
    `instr` = (16, N, K) per warp (a warpgroup covers 64 rows)."""

    TAG = "mma"
    version: int
    wpc: Tuple[int, ...]
    instr: Tuple[int, ...]


@dataclass(frozen=True)
class DotOperandLayout(DistributedLayout):
    """A register operand of an MMA: operand `idx` (0 = A, 1 = B) of `parent`, `kwidth` consecutive
    K elements per thread."""

    TAG = "dotop"
    idx: int
    parent: DistributedLayout
    kwidth: int


@dataclass(frozen=True)
class LinearLayout(DistributedLayout):
    """A layout given by its bases: for each of the register, lane and warp index bits, the
    coordinate (one entry per tensor dimension) that bit contributes; coordinates combine by XOR."""

    TAG = "linear"
    reg: Tuple[Tuple[int, ...], ...]
    lane: Tuple[Tuple[int, ...], ...]
    warp: Tuple[Tuple[int, ...], ...]
    shape: Tuple[int, ...]


@dataclass(frozen=True)
class NVMMASharedLayout(SharedLayout):
    """The NVMMA shared layout TMA and wgmma read: rows of the contiguous dimension swizzled in
    `swizzle`-byte atoms (0, 32, 64 or 128). `transposed` means the first dimension, not the last,
    is contiguous in memory (an MN-major wgmma operand)."""

    TAG = "nvmma"
    swizzle: int
    bits: int
    transposed: bool = False


@dataclass(frozen=True)
class SwizzledSharedLayout(SharedLayout):
    """Triton's classic shared layout (vec, per_phase, max_phase, order). The default for 1-D
    buffers and mbarriers is (1, 1, 1): no swizzle."""

    TAG = "swizzled"
    vec: int
    per_phase: int
    max_phase: int
    order: Tuple[int, ...]


LAYOUT_CLASSES: Dict[str, PyType[Layout]] = {
    c.TAG: c for c in (BlockedLayout, SliceLayout, MmaLayout, DotOperandLayout, LinearLayout,
                       NVMMASharedLayout, SwizzledSharedLayout)
}


def make_layout(tag: str, values: Dict[str, object]) -> Layout:
    """Build a layout from its tag and field values (lists become tuples); used by the parser."""
    cls = LAYOUT_CLASSES[tag]

    def tup(v):
        if isinstance(v, list):
            return tuple(tup(x) for x in v)
        return v

    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    missing = [n for n in names if n not in values and n != "transposed"]
    if missing:
        raise ValueError(f"#{tag} needs fields {missing}")
    extra = [k for k in values if k not in names]
    if extra:
        raise ValueError(f"#{tag} has no fields {extra}")
    return cls(**{k: tup(v) for k, v in values.items()})  # type: ignore[call-arg]


# (shape, element bits) -> its default layout: layouts are immutable, so one object serves every
# buffer of that shape (the passes ask for it per allocation, and building a frozen dataclass is slow)
_DEFAULT_SHARED: Dict[Tuple[Tuple[int, ...], int], SharedLayout] = {}


def default_shared_layout(shape: Tuple[int, ...], bits: int) -> SharedLayout:
    """The layout `local_alloc` picks, as TLX does: a 2-D+ tile gets NVMMA with the largest of the
    128/64/32-byte swizzles that divides its contiguous row's byte size (0 when none does, or
    when the tile has fewer than 8 rows: a swizzle pattern spans 8 rows); a 1-D buffer gets the
    unswizzled layout."""
    key = (tuple(shape), bits)
    lay = _DEFAULT_SHARED.get(key)
    if lay is None:
        lay = _DEFAULT_SHARED[key] = _pick_shared_layout(key[0], bits)
    return lay


def _pick_shared_layout(shape: Tuple[int, ...], bits: int) -> SharedLayout:
    if len(shape) < 2:
        return SwizzledSharedLayout(1, 1, 1, tuple(range(len(shape) - 1, -1, -1)) or (0,))
    rows = 1
    for d in shape[:-1]:
        rows *= d
    if rows < 8:
        return NVMMASharedLayout(0, bits, False)
    row_bytes = shape[-1] * bits // 8
    swizzle = 0
    for s in (128, 64, 32):
        if row_bytes % s == 0:
            swizzle = s
            break
    return NVMMASharedLayout(swizzle, bits, False)

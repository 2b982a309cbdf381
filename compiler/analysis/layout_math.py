"""The index math of every layout, as linear layouts.

A *linear layout* maps the bits of a thread's hardware indices — the register index inside the
thread, the lane inside the warp, the warp inside the CTA (or the partition) — to tensor
coordinates: each input bit has a *basis* (one coordinate per tensor dimension) and the element
held by (register r, lane l, warp w) is the XOR of the bases of the set bits of r, l and w.
For power-of-two shapes every layout the compiler uses is linear: blocked, slice, the wgmma
accumulator, the wgmma register-A operand, and the results of reshape / trans / join / split.

A basis that is all zero means that the bit selects a copy of the same element (a broadcast
across lanes or warps). Registers never hold copies: fitting a layout to a shape smaller than
its tile drops the register bases that fall outside, and zeroes the lane and warp bases.

Shared-memory layouts are linear too: for a power-of-two buffer, the byte offset of an element
is the XOR of per-coordinate-bit offsets (NVMMA swizzles XOR row bits into 16-byte chunk bits),
so a register tensor's element → byte map is again linear in (register, lane, warp) bits. The
code generator uses that to compute one address per thread and add or XOR register constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import TLXCompileError
from ..ir import layouts as L

Basis = Tuple[int, ...]


def is_pow2(x: int) -> bool:
    """True for 1, 2, 4, ..."""
    return x > 0 and (x & (x - 1)) == 0


def log2(x: int) -> int:
    """log2 of a power of two."""
    assert is_pow2(x), x
    return x.bit_length() - 1


def _unit(rank: int, dim: int, value: int) -> Basis:
    v = [0] * rank
    v[dim] = value
    return tuple(v)


def _xor(a: Basis, b: Basis) -> Basis:
    return tuple(x ^ y for x, y in zip(a, b))


@dataclass(frozen=True)
class LinearMap:
    """A linear layout of a tensor of `shape`: `reg`, `lane`, `warp` hold one basis per input bit
    (bit 0 first). The number of registers per thread is ``2 ** len(reg)``."""

    reg: Tuple[Basis, ...]
    lane: Tuple[Basis, ...]
    warp: Tuple[Basis, ...]
    shape: Tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_regs(self) -> int:
        return 1 << len(self.reg)

    @property
    def num_lanes(self) -> int:
        return 1 << len(self.lane)

    @property
    def num_warps(self) -> int:
        return 1 << len(self.warp)

    def coord(self, r: int, lane: int = 0, warp: int = 0) -> Basis:
        """The coordinates of register `r` of thread (`lane`, `warp`)."""
        c = (0,) * self.rank
        for bases, x in ((self.reg, r), (self.lane, lane), (self.warp, warp)):
            i = 0
            while x:
                if x & 1:
                    c = _xor(c, bases[i])
                x >>= 1
                i += 1
        return c

    def reg_coords(self) -> List[Basis]:
        """The coordinates of every register of thread 0 (lane 0, warp 0)."""
        return _reg_coords(self)

    def reg_index(self) -> Dict[Basis, int]:
        """Register-coordinate (thread 0) → register index."""
        return _reg_index(self)

    def free_lane_mask(self) -> int:
        """Lane bits whose basis is zero (those lanes hold copies)."""
        return sum(1 << i for i, b in enumerate(self.lane) if not any(b))

    def free_warp_mask(self) -> int:
        """Warp bits whose basis is zero (those warps hold copies)."""
        return sum(1 << i for i, b in enumerate(self.warp) if not any(b))

    def to_attr(self) -> L.LinearLayout:
        """The IR attribute `#linear<...>` of this layout."""
        return L.LinearLayout(self.reg, self.lane, self.warp, self.shape)


@lru_cache(maxsize=4096)
def _reg_coords(m: LinearMap) -> List[Basis]:
    out = [(0,) * m.rank]
    for b in m.reg:
        out = out + [_xor(c, b) for c in out]
    return out


@lru_cache(maxsize=4096)
def _reg_index(m: LinearMap) -> Dict[Basis, int]:
    return {c: i for i, c in enumerate(_reg_coords(m))}


def _fit(reg: List[Basis], lane: List[Basis], warp: List[Basis], tile: List[int],
         shape: Tuple[int, ...], order: Sequence[int]) -> LinearMap:
    """Fit a layout whose bases cover `tile` to `shape`: drop register bases and zero lane/warp
    bases outside the shape, then repeat the tile in registers (dims in `order`) to cover it."""
    rank = len(shape)

    def inside(b: Basis) -> bool:
        return all(b[d] < shape[d] for d in range(rank))

    reg = [b for b in reg if inside(b)]
    zero = (0,) * rank
    lane = [b if inside(b) else zero for b in lane]
    warp = [b if inside(b) else zero for b in warp]
    tile = list(tile)
    for d in order:
        while tile[d] < shape[d]:
            reg.append(_unit(rank, d, tile[d]))
            tile[d] *= 2
    return LinearMap(tuple(reg), tuple(lane), tuple(warp), tuple(shape))


def _check_shape(shape: Tuple[int, ...], what: str) -> None:
    for s in shape:
        if not is_pow2(s):
            raise TLXCompileError(f"{what}: tensor shape {list(shape)} has a dimension that is not a power of two",
                                  hint="block shapes of register tensors must be powers of two")


def blocked_map(b: L.BlockedLayout, shape: Tuple[int, ...]) -> LinearMap:
    """Triton's blocked layout: `spt` contiguous elements per thread along each dim, `tpw`
    threads per warp, `wpc` warps; `order` lists dims fastest first."""
    rank = len(shape)
    reg: List[Basis] = []
    lane: List[Basis] = []
    warp: List[Basis] = []
    for d in b.order:
        for k in range(log2(b.spt[d])):
            reg.append(_unit(rank, d, 1 << k))
    for d in b.order:
        for k in range(log2(b.tpw[d])):
            lane.append(_unit(rank, d, b.spt[d] << k))
    for d in b.order:
        for k in range(log2(b.wpc[d])):
            warp.append(_unit(rank, d, (b.spt[d] * b.tpw[d]) << k))
    tile = [b.spt[d] * b.tpw[d] * b.wpc[d] for d in range(rank)]
    return _fit(reg, lane, warp, tile, shape, b.order)


def mma_map(m: L.MmaLayout, shape: Tuple[int, ...]) -> LinearMap:
    """The wgmma accumulator layout. Warp w of a warpgroup holds rows 16w..16w+15 of the
    warpgroup's m64 tile; in a warp, lane t holds rows t/4 and t/4+8 and columns 2(t%4)+{0,1}
    of every 8-column group. Register bits: column+1, row+8, then the 8-column groups of one
    instruction (N/8 of them), then repetitions along N, then along M. Warp bits: two within the
    warpgroup (rows 16, 32), then warpgroups along M, then along N."""
    if len(shape) != 2:
        raise TLXCompileError(f"the wgmma accumulator layout is 2-D, got shape {list(shape)}")
    wm, wn = m.wpc
    n = m.instr[1]
    reg: List[Basis] = [(0, 1), (8, 0)]
    k = 8
    while k < n:
        reg.append((0, k))
        k *= 2
    lane: List[Basis] = [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)]
    warp: List[Basis] = []
    for i in range(log2(wm)):
        warp.append((16 << i, 0))
    for i in range(log2(wn)):
        warp.append((0, n << i))
    return _fit(reg, lane, warp, [16 * wm, n * wn], shape, (1, 0))


def dotop_map(d: L.DotOperandLayout, shape: Tuple[int, ...]) -> LinearMap:
    """The wgmma register-A operand layout (operand 0 of an mma parent): per instruction a warp
    holds 16 rows x (8*kwidth) K columns; lane t holds rows t/4 and t/4+8 and `kwidth`
    consecutive K elements at columns kwidth*(t%4) and kwidth*(t%4) + 4*kwidth. Register bits:
    the kwidth elements of one 32-bit register, row+8, K+4*kwidth, then repetitions along K,
    then along M. Warps split M as in the accumulator; warps along N hold copies."""
    if d.idx != 0 or not isinstance(d.parent, L.MmaLayout):
        raise TLXCompileError("only operand A of a wgmma accumulator layout can live in registers",
                              hint="keep operand B of async_dot in shared memory")
    if len(shape) != 2:
        raise TLXCompileError(f"a dot operand is 2-D, got shape {list(shape)}")
    wm, wn = d.parent.wpc
    kw = d.kwidth
    reg: List[Basis] = [(0, 1 << i) for i in range(log2(kw))] + [(8, 0), (0, 4 * kw)]
    lane: List[Basis] = [(0, kw), (0, 2 * kw), (1, 0), (2, 0), (4, 0)]
    warp: List[Basis] = [(16 << i, 0) for i in range(log2(wm))] + [(0, 0)] * log2(wn)
    return _fit(reg, lane, warp, [16 * wm, 8 * kw], shape, (1, 0))


def slice_map(s: L.SliceLayout, shape: Tuple[int, ...]) -> LinearMap:
    """The parent layout over `shape` with a size-1 dimension inserted at `dim`, that dimension
    then dropped: lanes and warps that differed only along it hold copies."""
    pshape = tuple(shape[:s.dim]) + (1,) + tuple(shape[s.dim:])
    p = to_map(s.parent, pshape)

    def drop(b: Basis) -> Basis:
        return b[:s.dim] + b[s.dim + 1:]

    return LinearMap(tuple(drop(b) for b in p.reg), tuple(drop(b) for b in p.lane),
                     tuple(drop(b) for b in p.warp), tuple(shape))


def linear_attr_map(a: L.LinearLayout, shape: Tuple[int, ...]) -> LinearMap:
    """A `#linear` attribute as written (its shape must be the tensor's)."""
    if tuple(a.shape) != tuple(shape):
        raise TLXCompileError(f"#linear layout of shape {list(a.shape)} used on a tensor of shape {list(shape)}")
    return LinearMap(tuple(map(tuple, a.reg)), tuple(map(tuple, a.lane)), tuple(map(tuple, a.warp)), tuple(shape))


@lru_cache(maxsize=4096)
def to_map(layout: L.DistributedLayout, shape: Tuple[int, ...]) -> LinearMap:
    """The linear layout of `layout` over a tensor of `shape` (rank-0 tensors are scalars)."""
    shape = tuple(shape)
    _check_shape(shape, str(layout))
    if isinstance(layout, L.BlockedLayout):
        if layout.rank != len(shape):
            raise TLXCompileError(f"{layout} has rank {layout.rank}, the tensor {len(shape)}")
        return blocked_map(layout, shape)
    if isinstance(layout, L.SliceLayout):
        return slice_map(layout, shape)
    if isinstance(layout, L.MmaLayout):
        return mma_map(layout, shape)
    if isinstance(layout, L.DotOperandLayout):
        return dotop_map(layout, shape)
    if isinstance(layout, L.LinearLayout):
        return linear_attr_map(layout, shape)
    raise TLXCompileError(f"no index math for layout {layout}")


# ---------------------------------------------------------------------------------------------
# transformations (reshape, permute, join, split) — all stay linear
# ---------------------------------------------------------------------------------------------

def _reshape_basis(b: Basis, src: Tuple[int, ...], dst: Tuple[int, ...]) -> Basis:
    flat = 0
    i = 0
    for d in range(len(src) - 1, -1, -1):
        flat |= b[d] << i
        i += log2(src[d])
    out = [0] * len(dst)
    for d in range(len(dst) - 1, -1, -1):
        w = log2(dst[d])
        out[d] = flat & ((1 << w) - 1)
        flat >>= w
    return tuple(out)


def reshape_map(m: LinearMap, shape: Tuple[int, ...]) -> LinearMap:
    """The layout of `tt.reshape` (row-major element order kept, no data movement)."""
    _check_shape(tuple(shape), "reshape")
    f = lambda b: _reshape_basis(b, m.shape, tuple(shape))  # noqa: E731
    return LinearMap(tuple(map(f, m.reg)), tuple(map(f, m.lane)), tuple(map(f, m.warp)), tuple(shape))


def permute_map(m: LinearMap, order: Sequence[int]) -> LinearMap:
    """The layout of `tt.trans` with `order`: result dim i is source dim order[i]."""
    f = lambda b: tuple(b[o] for o in order)  # noqa: E731
    return LinearMap(tuple(map(f, m.reg)), tuple(map(f, m.lane)), tuple(map(f, m.warp)),
                     tuple(m.shape[o] for o in order))


def join_map(m: LinearMap) -> LinearMap:
    """The layout of `tt.join`: a new last dimension of 2 in the lowest register bit (register
    2i holds lhs element i, register 2i+1 the rhs one)."""
    z = lambda b: tuple(b) + (0,)  # noqa: E731
    reg = ((0,) * m.rank + (1,),) + tuple(map(z, m.reg))
    return LinearMap(reg, tuple(map(z, m.lane)), tuple(map(z, m.warp)), m.shape + (2,))


def split_bit(m: LinearMap) -> Optional[int]:
    """The register bit that holds the last (size-2) dimension, or None if lanes/warps hold it."""
    unit = (0,) * (m.rank - 1) + (1,)
    for i, b in enumerate(m.reg):
        if b == unit:
            return i
    return None


def split_map(m: LinearMap) -> LinearMap:
    """The layout of each half of `tt.split` (the register bit of the last dim removed)."""
    k = split_bit(m)
    if k is None:
        raise TLXCompileError("tt.split needs its last dimension in registers")
    d = lambda b: b[:-1]  # noqa: E731
    reg = tuple(d(b) for i, b in enumerate(m.reg) if i != k)
    return LinearMap(reg, tuple(map(d, m.lane)), tuple(map(d, m.warp)), m.shape[:-1])


def with_last_dim_in_registers(m: LinearMap) -> LinearMap:
    """A layout equal to `m` except that the bit of the (size-2) last dimension is register bit
    0 (swapped with whatever held it): a valid target for the convert before a `tt.split`."""
    unit = (0,) * (m.rank - 1) + (1,)
    reg, lane, warp = list(m.reg), list(m.lane), list(m.warp)
    if reg and reg[0] == unit:
        return m
    for lst in (reg, lane, warp):
        for i, b in enumerate(lst):
            if b == unit:
                if reg:
                    lst[i] = reg[0]
                    reg[0] = unit
                else:
                    lst[i] = (0,) * m.rank
                    reg.insert(0, unit)
                return LinearMap(tuple(reg), tuple(lane), tuple(warp), m.shape)
    # the last dim is broadcast (all copies): give it a register bit of its own
    return LinearMap((unit,) + tuple(reg), tuple(lane), tuple(warp), m.shape)


def broadcast_src_map(m: LinearMap, src_shape: Tuple[int, ...]) -> LinearMap:
    """The layout of a broadcast's source when the result has layout `m`: the same bases fitted
    to the smaller shape (register bases along broadcast dims dropped, lane/warp ones zeroed)."""
    rank = m.rank

    def inside(b: Basis) -> bool:
        return all(b[d] < src_shape[d] for d in range(rank))

    zero = (0,) * rank
    return LinearMap(tuple(b for b in m.reg if inside(b)), tuple(b if inside(b) else zero for b in m.lane),
                     tuple(b if inside(b) else zero for b in m.warp), tuple(src_shape))


# ---------------------------------------------------------------------------------------------
# shared memory: element coordinate → byte offset
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SharedMap:
    """The byte offset of every element of a power-of-two shared buffer of `shape`, as a linear
    map: `bases[d][k]` is the offset contributed by bit k of coordinate d; offsets combine by
    XOR (they are disjoint bit fields except where a swizzle XORs row bits into chunk bits)."""

    shape: Tuple[int, ...]
    elem_bytes: int
    bases: Tuple[Tuple[int, ...], ...]

    def offset(self, coord: Sequence[int]) -> int:
        o = 0
        for d, c in enumerate(coord):
            k = 0
            while c:
                if c & 1:
                    o ^= self.bases[d][k]
                c >>= 1
                k += 1
        return o

    @property
    def nbytes(self) -> int:
        n = self.elem_bytes
        for s in self.shape:
            n *= s
        return n


def nvmma_atom_bytes(layout: L.NVMMASharedLayout) -> int:
    """Bytes of one row of a swizzle atom: the swizzle width, or 16 without a swizzle (the
    core-matrix row of wgmma's no-swizzle layout)."""
    return max(layout.swizzle, 16)


def nvmma_offset(layout: L.NVMMASharedLayout, shape: Tuple[int, ...], elem_bytes: int,
                 coord: Sequence[int]) -> int:
    """Reference (integer) form of the NVMMA byte offset of `coord` in a buffer of `shape`
    (storage orientation; rows = all leading dims flattened, the last dim contiguous). The
    inner dim is cut into atom columns of `atom` bytes; column j holds every row, `atom` bytes
    per row; the 16-byte chunk index inside a row is XORed with address bits 7.. (the swizzle)."""
    atom = nvmma_atom_bytes(layout)
    w = atom // elem_bytes
    rows = 1
    for s in shape[:-1]:
        rows *= s
    r = 0
    for d in range(len(shape) - 1):
        r = r * shape[d] + coord[d]
    c = coord[-1]
    logical = (c // w) * rows * atom + r * atom + (c % w) * elem_bytes
    if layout.swizzle >= 32:
        mask = layout.swizzle // 16 - 1
        logical ^= ((logical >> 7) & mask) << 4
    return logical


def _bits_of(shape: Tuple[int, ...]) -> List[List[Tuple[int, ...]]]:
    out = []
    for d, s in enumerate(shape):
        out.append([_unit(len(shape), d, 1 << k) for k in range(log2(s))])
    return out


@lru_cache(maxsize=4096)
def shared_map(layout: L.SharedLayout, shape: Tuple[int, ...], elem_bytes: int) -> SharedMap:
    """The linear byte-offset map of a buffer of `shape` (one buffer; views are handled by the
    code generator as a base offset plus a coordinate transform)."""
    shape = tuple(shape)
    for s in shape:
        if not is_pow2(s):
            raise TLXCompileError(f"shared buffer shape {list(shape)} has a dimension that is not a power of two")
    if isinstance(layout, L.NVMMASharedLayout):
        if layout.transposed:
            if len(shape) != 2:
                raise TLXCompileError("a transposed NVMMA layout needs a 2-D buffer")
            st = (shape[1], shape[0])
            f = lambda c: nvmma_offset(layout, st, elem_bytes, (c[1], c[0]))  # noqa: E731
        else:
            f = lambda c: nvmma_offset(layout, shape, elem_bytes, c)  # noqa: E731
    elif isinstance(layout, L.SwizzledSharedLayout):
        f = lambda c: swizzled_offset(layout, shape, elem_bytes, c)  # noqa: E731
    else:
        raise TLXCompileError(f"no index math for shared layout {layout}")
    bases = tuple(tuple(f(b) for b in dim_bits) for dim_bits in _bits_of(shape))
    return SharedMap(shape, elem_bytes, bases)


def swizzled_offset(layout: L.SwizzledSharedLayout, shape: Tuple[int, ...], elem_bytes: int,
                    coord: Sequence[int]) -> int:
    """Reference (integer) form of Triton's swizzled shared layout: dims in `order` (fastest
    first); the fastest dim's `vec`-element groups are XORed with the phase
    ``(row // per_phase) % max_phase`` of the next dim."""
    order = list(layout.order)[:len(shape)] if len(layout.order) >= len(shape) else list(range(len(shape) - 1, -1, -1))
    inner = order[0]
    c = list(coord)
    if len(shape) >= 2:
        row = c[order[1]]
        phase = (row // layout.per_phase) % layout.max_phase
        v = layout.vec
        c[inner] = (((c[inner] // v) ^ phase) * v) + c[inner] % v
    off = 0
    stride = 1
    for d in order:
        off += c[d] * stride
        stride *= shape[d]
    return off * elem_bytes


def compose(m: LinearMap, s: SharedMap, coord_of=None) -> Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...]]:
    """Byte-offset bases of (register, lane, warp) bits of a register tensor with layout `m`
    stored in a buffer with map `s`: the thread/register → byte map, linear by construction."""
    f = (lambda b: s.offset(b)) if coord_of is None else (lambda b: s.offset(coord_of(b)))
    return tuple(map(f, m.reg)), tuple(map(f, m.lane)), tuple(map(f, m.warp))


def contiguous_regs(reg_offsets: Sequence[int], elem_bytes: int, max_bytes: int = 16) -> int:
    """How many consecutive registers (a power of two) sit at consecutive addresses: register bit
    i must add exactly elem_bytes * 2**i, for the leading bits, up to `max_bytes` per access."""
    n = 1
    for i, o in enumerate(reg_offsets):
        if o != elem_bytes << i or (n * 2) * elem_bytes > max_bytes:
            break
        n *= 2
    return n

"""Layout choices and layout algebra shared by the layout pass and the code generator: which
layout an op wants (coalesced blocked for global memory, the wgmma accumulator, the wgmma
register-A operand, NVMMA for shared tiles), how layouts follow through reshaping ops, and how
much scratch shared memory a layout conversion or a cross-warp reduction needs.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

from ..errors import TLXCompileError
from ..ir import layouts as L
from ..ir import types as T
from ..analysis import layout_math as LM


def elem_bytes(e: T.ElementType) -> int:
    """Bytes of one element in memory (pointers 8, i1 1)."""
    if isinstance(e, T.PointerType):
        return 8
    return max(1, e.bits // 8)


def blocked_for(shape: Tuple[int, ...], num_warps: int, order: Sequence[int], vec: int) -> L.BlockedLayout:
    """A blocked layout over `shape`: `vec` contiguous elements per thread along `order[0]`,
    lanes then warps filled along `order` (fastest dim first); lanes or warps left over once the
    shape is covered hold copies."""
    rank = len(shape)
    per_thread = max(1, math.prod(shape) // (32 * num_warps))
    vec = max(1, min(vec, shape[order[0]], 1 << (per_thread.bit_length() - 1)))  # a power of two
    spt = [1] * rank
    spt[order[0]] = vec
    lanes = 32
    tpw = [1] * rank
    for d in order:
        t = min(lanes, max(1, shape[d] // spt[d]))
        tpw[d] = t
        lanes //= t
    tpw[order[0]] *= lanes
    warps = num_warps
    wpc = [1] * rank
    for d in order:
        w = min(warps, max(1, shape[d] // (spt[d] * tpw[d])))
        wpc[d] = w
        warps //= w
    wpc[order[0]] *= warps
    return L.BlockedLayout(tuple(spt), tuple(tpw), tuple(wpc), tuple(order))


def default_order(rank: int) -> Tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


def default_blocked(shape: Tuple[int, ...], num_warps: int, ebytes: int = 4,
                    contiguous_dim: Optional[int] = None) -> L.BlockedLayout:
    """The layout of a tensor nothing constrains: 16-byte vectors along its contiguous dim (the
    last one unless told otherwise)."""
    rank = len(shape)
    order = list(default_order(rank))
    if contiguous_dim is not None and contiguous_dim in order:
        order.remove(contiguous_dim)
        order.insert(0, contiguous_dim)
    return blocked_for(shape, num_warps, order, max(1, 16 // ebytes))


def mma_layout(m: int, n: int, num_warps: int, ab_bits: int, loc=None) -> L.MmaLayout:
    """The wgmma accumulator layout for an M x N result over `num_warps` warps: warpgroups split
    M first (64 rows each at least), then N; one instruction covers up to 256 columns."""
    if num_warps < 4 or num_warps % 4:
        raise TLXCompileError(f"async_dot needs whole warpgroups, but the partition has {num_warps} warps", loc,
                              hint="run the dot in a partition (or kernel) with num_warps = 4, 8, ...")
    if m % 64:
        raise TLXCompileError(f"async_dot needs M to be a multiple of 64 (one wgmma is m64), got M={m}", loc)
    wm = num_warps
    while wm > 4 and 16 * wm > m:
        wm //= 2
    wn = num_warps // wm
    if n % (8 * wn):
        raise TLXCompileError(f"async_dot: N={n} cannot be split over {wn} warpgroups in multiples of 8", loc)
    ninstr = min(256, n // wn)
    return L.MmaLayout(3, (wm, wn), (16, ninstr, 256 // ab_bits))


def dot_operand_layout(mma: L.MmaLayout, bits: int, idx: int = 0) -> L.DotOperandLayout:
    """The register layout of operand `idx` (0 = A, 1 = B) of `mma`: 32 bits of consecutive K
    elements per register."""
    return L.DotOperandLayout(idx, mma, 32 // bits)


def mma_sync_warps(m: int, n: int, num_warps: int, chained: bool = False) -> Tuple[int, int]:
    """Warps along (M, N) of an mma.sync accumulator, as Triton's MMAv2 picks them. A dot whose
    result feeds another dot puts every warp along its larger dimension (the next dot's operand
    then needs no exchange between warps). Otherwise warps are doubled along M or N so that the
    instruction repetitions per warp, M/16 and N/8, stay balanced (ties go to M: an A fragment is
    four registers, a B fragment two); warps beyond the tile hold copies."""
    if chained:
        return (num_warps, 1) if m >= n else (1, num_warps)
    reps = [max(1, m // 16), max(1, n // 8)]
    warps = [1, 1]
    while warps[0] * warps[1] < num_warps:
        if reps[0] >= reps[1]:
            warps[0] *= 2
            if reps[0] > 1:
                reps[0] //= 2
        else:
            warps[1] *= 2
            reps[1] //= 2
    return warps[0], warps[1]


def mma_sync_layout(m: int, n: int, num_warps: int, ab_bits: int, chained: bool = False) -> L.MmaLayout:
    """The mma.sync accumulator layout (`#mma<version=2>`): m16n8 tiles per warp, K per
    instruction 256 / element bits (k16 for 16-bit, k8 for tf32, k32 for 8-bit operands)."""
    wm, wn = mma_sync_warps(m, n, num_warps, chained)
    return L.MmaLayout(2, (wm, wn), (16, 8, 256 // ab_bits))


# ---------------------------------------------------------------------------------------------
# how layouts follow through shape ops
# ---------------------------------------------------------------------------------------------

def is_shape_generic(layout: L.DistributedLayout) -> bool:
    """Blocked / slice / mma / dot-operand layouts apply to any shape of their rank."""
    return not isinstance(layout, L.LinearLayout)


def broadcast_src(layout: L.DistributedLayout, res_shape, src_shape) -> L.DistributedLayout:
    if is_shape_generic(layout):
        return layout
    return LM.broadcast_src_map(LM.to_map(layout, tuple(res_shape)), tuple(src_shape)).to_attr()


def broadcast_res(layout: L.DistributedLayout, src_shape, res_shape) -> Optional[L.DistributedLayout]:
    return layout if is_shape_generic(layout) else None


def expand_src(layout: L.DistributedLayout, axis: int) -> L.DistributedLayout:
    return L.SliceLayout(axis, layout)


def expand_res(layout: L.DistributedLayout, axis: int, src_shape, res_shape) -> L.DistributedLayout:
    if isinstance(layout, L.SliceLayout) and layout.dim == axis:
        return layout.parent
    m = LM.to_map(layout, tuple(src_shape))
    ins = lambda b: tuple(b[:axis]) + (0,) + tuple(b[axis:])  # noqa: E731
    return LM.LinearMap(tuple(map(ins, m.reg)), tuple(map(ins, m.lane)), tuple(map(ins, m.warp)),
                        tuple(res_shape)).to_attr()


def reduce_res(layout: L.DistributedLayout, axis: int) -> L.DistributedLayout:
    return L.SliceLayout(axis, layout)


def reduce_src(layout: L.DistributedLayout, axis: int) -> Optional[L.DistributedLayout]:
    if isinstance(layout, L.SliceLayout) and layout.dim == axis:
        return layout.parent
    return None


def trans_res(layout: L.DistributedLayout, order: Sequence[int], src_shape) -> L.DistributedLayout:
    order = list(order)
    if isinstance(layout, L.BlockedLayout):
        inv = [order.index(d) for d in range(len(order))]
        return L.BlockedLayout(tuple(layout.spt[o] for o in order), tuple(layout.tpw[o] for o in order),
                               tuple(layout.wpc[o] for o in order), tuple(inv[d] for d in layout.order))
    return LM.permute_map(LM.to_map(layout, tuple(src_shape)), order).to_attr()


def trans_src(layout: L.DistributedLayout, order: Sequence[int], res_shape) -> L.DistributedLayout:
    inv = [list(order).index(d) for d in range(len(order))]
    return trans_res(layout, inv, res_shape)


def reshape_to(layout: L.DistributedLayout, src_shape, dst_shape) -> L.DistributedLayout:
    return LM.reshape_map(LM.to_map(layout, tuple(src_shape)), tuple(dst_shape)).to_attr()


def join_res(layout: L.DistributedLayout, src_shape) -> L.DistributedLayout:
    return LM.join_map(LM.to_map(layout, tuple(src_shape))).to_attr()


def split_res(layout: L.DistributedLayout, src_shape) -> Optional[L.DistributedLayout]:
    m = LM.to_map(layout, tuple(src_shape))
    if LM.split_bit(m) is None:
        return None
    return LM.split_map(m).to_attr()


def split_ready(layout: L.DistributedLayout, src_shape) -> L.DistributedLayout:
    """`layout` if its last dim sits in a register bit, else the nearest layout where it does."""
    m = LM.to_map(layout, tuple(src_shape))
    if LM.split_bit(m) is not None:
        return layout
    return LM.with_last_dim_in_registers(m).to_attr()


# ---------------------------------------------------------------------------------------------
# conversions and scratch
# ---------------------------------------------------------------------------------------------

def convert_kind(src: LM.LinearMap, dst: LM.LinearMap) -> str:
    """How a conversion between two layouts of one shape moves data: 'none' (same map),
    'regs' (each thread already holds its elements: a register permutation) or 'smem'
    (through shared memory)."""
    if src == dst:
        return "none"
    if src.lane == dst.lane and src.warp == dst.warp and span(src.shape, src.reg) == span(dst.shape, dst.reg):
        return "regs"
    return "smem"


def pack(shape: Tuple[int, ...], b: Tuple[int, ...]) -> int:
    """A coordinate vector as one integer (the bits of every dim side by side)."""
    x, off = 0, 0
    for d in range(len(shape) - 1, -1, -1):
        x |= b[d] << off
        off += LM.log2(shape[d])
    return x


def span(shape: Tuple[int, ...], vecs) -> frozenset:
    """The reduced GF(2) basis of the span of coordinate vectors (a canonical form: two sets of
    vectors span the same space exactly when their reduced bases are equal)."""
    basis: list = []
    for v in vecs:
        x = pack(shape, v)
        for b in basis:  # kept sorted by leading bit, highest first
            x = min(x, x ^ b)
        if x:
            basis.append(x)
            basis.sort(reverse=True)
    for i, b in enumerate(basis):  # clear every pivot from the other vectors
        top = 1 << (b.bit_length() - 1)
        for j in range(len(basis)):
            if j != i and basis[j] & top:
                basis[j] ^= b
    return frozenset(basis)


def convert_rounds(src: LM.LinearMap, dst: LM.LinearMap, ebytes: int) -> Tuple[LM.Basis, ...]:
    """The bases a conversion through shared memory can walk in rounds (as Triton's "reps"):
    register bases of both layouts that are one coordinate bit which no other basis of either
    layout touches, leaving out the lowest log2(16 / ebytes) register bases of each side (those
    form the 16-byte vectors and the ldmatrix / stmatrix groups of one access). For each value
    of these bits, every thread stores and loads the same sub-tile in both layouts, so the
    scratch holds one sub-tile: the tile's size over 2 ** len(rounds)."""
    keep = max(0, LM.log2(max(1, 16 // ebytes)))
    others = list(src.reg) + list(src.lane) + list(src.warp) + list(dst.reg) + list(dst.lane) + list(dst.warp)
    out = []
    for b in src.reg[keep:]:
        nz = [d for d, x in enumerate(b) if x]
        if len(nz) != 1 or not LM.is_pow2(b[nz[0]]) or b not in dst.reg[keep:]:
            continue
        d, bit = nz[0], b[nz[0]]
        if sum(1 for o in others if o[d] & bit) != 2:  # itself, once in each layout
            continue
        out.append(b)
    return tuple(out)


def drop_round_bits(m: LM.LinearMap, rounds: Sequence[LM.Basis]) -> LM.LinearMap:
    """`m` restricted to one round's sub-tile: the rounds' register bases removed and their
    coordinate bits squeezed out of every other basis and of the shape."""
    bits = [(d, b[d]) for b in rounds for d in range(len(b)) if b[d]]

    def squeeze(c: LM.Basis) -> LM.Basis:
        out = list(c)
        for d, bit in sorted(bits, key=lambda x: -x[1]):
            x = out[d]
            out[d] = ((x >> 1) & ~(bit - 1)) | (x & (bit - 1))
        return tuple(out)

    shape = list(m.shape)
    for d, _ in bits:
        shape[d] //= 2
    reg = tuple(squeeze(b) for b in m.reg if b not in rounds)
    return LM.LinearMap(reg, tuple(map(squeeze, m.lane)), tuple(map(squeeze, m.warp)), tuple(shape))


def convert_scratch_bytes(shape: Tuple[int, ...], element: T.ElementType, rounds: int = 0) -> int:
    """Scratch bytes of a conversion through shared memory: the tile, or one of its
    2 ** `rounds` sub-tiles when it goes in rounds (see `convert_rounds`)."""
    return elem_bytes(element) * math.prod(shape) >> rounds


def reduce_warps_along(m: LM.LinearMap, axis: int) -> int:
    """How many warps hold distinct partial results along `axis` (2**warp-bits along it)."""
    return 1 << sum(1 for b in m.warp if b[axis])


def reduce_scratch_bytes(src: LM.LinearMap, axis: int, element: T.ElementType, with_index: bool) -> int:
    """Scratch of a reduction whose axis spans several warps: one partial per (warp along the
    axis, result element)."""
    nw = reduce_warps_along(src, axis)
    if nw == 1:
        return 0
    out = math.prod(s for d, s in enumerate(src.shape) if d != axis)
    return nw * out * (elem_bytes(element) + (4 if with_index else 0))

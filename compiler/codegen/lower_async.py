"""Lowering of Hopper's async machinery: TMA loads and stores, bulk copies, mbarriers, named
and CTA barriers, fences, wgmma (`async_dot` / `async_dot_wait`) and device-side tensormap
creation.

Single-thread issue: TMA and bulk copies, expect-tx and arrives are issued by the partition's
leader thread (thread 0 of the partition); commits and waits of bulk groups too (the group is
the issuing thread's). The barriers that order other threads' shared-memory accesses around
these ops (after a proxy fence and before a TMA store, before an arrive that publishes
generic reads, after a TMA-store wait before the buffer is rewritten, after mbarrier
initialization) are `tlx.cta_barrier` ops placed by the CTA-barrier pass; this module lowers
them to the partition's barrier.

wgmma: operands in NVMMA shared layouts become 64-bit matrix descriptors (start address,
leading / stride byte offsets of the swizzle atoms, swizzle mode, K-major or MN-major from the
view); one `wgmma.mma_async.m64nNkK` per warpgroup tile, K step and repetition, between a
`wgmma.fence` and one `wgmma.commit_group`. The accumulator is updated in place when nothing
else reads it afterwards.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..errors import TLXCompileError
from ..ir import layouts as L
from ..ir import types as T
from ..ir.core import Operation, Value
from ..analysis import layout_math as LM
from .lower import KernelLowering, lowers
from .values import Barriers, Desc, Scalar, SmemView, Tensor, Token, reg_kind


# ---------------------------------------------------------------------------------------------
# fences and barriers
# ---------------------------------------------------------------------------------------------

@lowers("tlx.fence_async_shared")
def _fence_async_shared(lw: KernelLowering, op: Operation) -> None:
    lw.e("fence.proxy.async.shared::cluster" if op.attrs.get("cluster") else "fence.proxy.async.shared::cta")


@lowers("tlx.fence")
def _fence(lw: KernelLowering, op: Operation) -> None:
    lw.e(f"fence.acq_rel.{op.attrs['scope']}")


@lowers("tlx.cta_barrier")
def _cta_barrier(lw: KernelLowering, op: Operation) -> None:
    lw.part_barrier()


@lowers("tlx.named_barrier_wait", "tlx.named_barrier_arrive")
def _named_barrier(lw: KernelLowering, op: Operation) -> None:
    i, n = int(op.attrs["id"]), int(op.attrs["count"])
    lw.user_barriers.append((i, op))
    lw.e("bar.sync" if op.name.endswith("wait") else "bar.arrive", str(i), str(n))


@lowers("tlx.alloc_barriers")
def _alloc_barriers(lw: KernelLowering, op: Operation) -> None:
    if "offset" not in op.attrs:
        raise TLXCompileError("internal: alloc_barriers has no offset (run shared-memory allocation first)", op.loc)
    addr = lw.smem_addr(int(op.attrs["offset"]))
    n, count = int(op.attrs["num"]), int(op.attrs["arrive_count"])
    for i in range(n):
        a = f"[{addr}+{8 * i}]" if i else f"[{addr}]"
        lw.e("mbarrier.init.shared::cta.b64", a, str(count), pred=lw.part.leader)
    lw.set(op.result, Barriers(addr, n, True))


def _bar_addr(lw: KernelLowering, v: Value) -> str:
    b = lw.val(v)
    if not isinstance(b, Barriers):
        raise TLXCompileError("internal: expected an mbarrier", None)
    return b.addr


def _opt_pred(lw: KernelLowering, op: Operation) -> Optional[str]:
    p = op.arg("pred") if "pred" in op.opdef.group_names else None
    return lw.scalar(p) if p is not None else None


@lowers("tlx.barrier_expect_bytes")
def _expect_bytes(lw: KernelLowering, op: Operation) -> None:
    a = _bar_addr(lw, op.arg("bar"))
    p = lw.and_pred(lw.part.leader, _opt_pred(lw, op))
    lw.e("mbarrier.arrive.expect_tx.shared::cta.b64", "_", f"[{a}]", str(int(op.attrs["bytes"])), pred=p)


@lowers("tlx.barrier_arrive")
def _arrive(lw: KernelLowering, op: Operation) -> None:
    a = _bar_addr(lw, op.arg("bar"))
    p = lw.and_pred(lw.part.leader, _opt_pred(lw, op))
    count = int(op.attrs.get("count", 1))
    if count == 1:
        lw.e("mbarrier.arrive.shared::cta.b64", "_", f"[{a}]", pred=p)
    else:
        lw.e("mbarrier.arrive.shared::cta.b64", "_", f"[{a}]", str(count), pred=p)


@lowers("tlx.barrier_inval")
def _inval(lw: KernelLowering, op: Operation) -> None:
    # one thread, as the init: the CTA-barrier pass has every thread past its waits by now
    lw.e("mbarrier.inval.shared::cta.b64", f"[{_bar_addr(lw, op.arg('bar'))}]", pred=lw.part.leader)


@lowers("tlx.barrier_wait")
def _wait(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    a = _bar_addr(lw, op.arg("bar"))
    ph_v = op.arg("phase")
    ph = lw.scalar(ph_v)
    if ph_v.type == T.i1:
        t = em.tmp("b32")
        em("selp.b32", t, "1", "0", ph)
        ph = t
    pred = _opt_pred(lw, op)
    done = em.new_label("wait_done")
    if pred is not None:
        em("bra", done, pred="!" + pred)
    loop = em.new_label("wait")
    em.label(loop)
    p = em.tmp("pred")
    em("mbarrier.try_wait.parity.shared::cta.b64", p, f"[{a}]", ph)
    em("bra", loop, pred="!" + p)
    if pred is not None:
        em.label(done)


# ---------------------------------------------------------------------------------------------
# TMA
# ---------------------------------------------------------------------------------------------

def tma_box(block_shape, eb: int, swizzle: int) -> Tuple[int, ...]:
    """The box of one TMA copy for a block: the inner dim capped at the swizzle atom, the others
    at 256 (outermost first)."""
    bs = list(block_shape)
    if len(bs) == 1:
        return (min(bs[0], 256),)
    atom = max(swizzle, 16) // eb
    inner = min(bs[-1], atom)
    return tuple(min(x, 256) for x in bs[:-1]) + (inner,)


def _tma_geometry(lw: KernelLowering, view: SmemView, desc: Desc, op: Operation):
    """(box, list of (smem byte offset, coordinate deltas innermost first)) of the copies that move
    the view's tile, and the encoding the descriptor must have."""
    if view.buffers or list(view.perm) != list(range(len(view.perm))):
        raise TLXCompileError("a TMA copy needs a single, untransposed buffer", op.loc)
    lay = view.layout
    eb = view.elem_bytes
    shape = tuple(view.shape)
    if isinstance(lay, L.NVMMASharedLayout):
        if lay.transposed:
            raise TLXCompileError("a TMA copy needs a non-transposed NVMMA buffer", op.loc)
        sw = lay.swizzle
        box = tma_box(shape, eb, sw)
        atom = LM.nvmma_atom_bytes(lay)
        rows_buf = 1
        for s in view.storage_shape[:-1]:
            rows_buf *= s
        w = atom // eb
        pieces = []
        rank = len(shape)
        # split the inner dim into atom columns, each outer dim into chunks of at most 256
        outer_chunks = [range(0, shape[d], box[d]) for d in range(rank - 1)]

        def rec(d, acc):
            if d == rank - 1:
                yield acc
                return
            for x in outer_chunks[d]:
                yield from rec(d + 1, acc + [x])

        for j in range(0, shape[-1], w):
            for outer in rec(0, []):
                coord = tuple(outer) + (j,)
                off = view.element_bases(coord)
                pieces.append((off, tuple(reversed(coord))))
        del rows_buf
    elif isinstance(lay, L.SwizzledSharedLayout) and len(shape) == 1:
        sw = 0
        box = (min(shape[0], 256),)
        pieces = [(x * eb, (x,)) for x in range(0, shape[0], box[0])]
    else:
        raise TLXCompileError(f"a TMA buffer needs an NVMMA layout, got {lay}", op.loc)
    if desc.swizzle is None:
        desc.swizzle, desc.box = sw, box
    elif (desc.swizzle, tuple(desc.box)) != (sw, tuple(box)):  # type: ignore[arg-type]
        raise TLXCompileError(f"one tensor descriptor is used with two shared layouts (swizzle {desc.swizzle}, box "
                              f"{list(desc.box)} and swizzle {sw}, box {list(box)})", op.loc,  # type: ignore[arg-type]
                              hint="give every buffer this descriptor moves the same layout")
    return box, pieces


def _view_addr(lw: KernelLowering, view: SmemView, off: int) -> str:
    """An address operand for the view's element at XOR-offset `off` from its origin."""
    em = lw.e
    if isinstance(view.origin, str):
        x = em.tmp("b32")
        em("xor.b32", x, view.origin, str(off))
        a = em.tmp("b32")
        em("add.s32", a, view.base, x)
        return f"[{a}]"
    o = view.origin ^ off
    return f"[{view.base}+{o}]" if o else f"[{view.base}]"


def _coords(lw: KernelLowering, offs: List[Value], deltas: Tuple[int, ...]) -> str:
    """The innermost-first coordinate list of a TMA copy (IR offsets are outermost first)."""
    em = lw.e
    regs = []
    for v, dlt in zip(reversed(offs), deltas):
        r = lw.scalar(v)
        if dlt:
            t = em.tmp("b32")
            em("add.s32", t, r, str(dlt))
            r = t
        regs.append(r)
    return "{" + ", ".join(regs) + "}"


@lowers("tlx.tma_load")
def _tma_load(lw: KernelLowering, op: Operation) -> None:
    if op.attrs.get("multicast"):
        raise TLXCompileError("TMA multicast (multicast_targets) has no PTX lowering yet", op.loc,
                              hint="load the tile in each CTA without multicast_targets")
    desc: Desc = lw.val(op.arg("desc"))  # type: ignore[assignment]
    view: SmemView = lw.val(op.arg("dst"))  # type: ignore[assignment]
    bar = _bar_addr(lw, op.arg("bar"))
    offs = op.group("offsets")
    box, pieces = _tma_geometry(lw, view, desc, op)
    p = lw.and_pred(lw.part.leader, _opt_pred(lw, op))
    rank = len(offs)
    for off, dl in pieces:
        lw.e(f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes",
             _view_addr(lw, view, off), f"[{desc.addr}, {_coords(lw, offs, dl)}]", f"[{bar}]", pred=p)


@lowers("tlx.tma_store")
def _tma_store(lw: KernelLowering, op: Operation) -> None:
    desc: Desc = lw.val(op.arg("desc"))  # type: ignore[assignment]
    view: SmemView = lw.val(op.arg("src"))  # type: ignore[assignment]
    offs = op.group("offsets")
    box, pieces = _tma_geometry(lw, view, desc, op)
    p = lw.part.leader
    rank = len(offs)
    for off, dl in pieces:
        lw.e(f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group",
             f"[{desc.addr}, {_coords(lw, offs, dl)}]", _view_addr(lw, view, off), pred=p)
    lw.e("cp.async.bulk.commit_group", pred=p)


@lowers("tlx.tma_store_wait")
def _tma_store_wait(lw: KernelLowering, op: Operation) -> None:
    lw.e("cp.async.bulk.wait_group.read", str(int(op.attrs["pendings"])), pred=lw.part.leader)


@lowers("tlx.tma_prefetch")
def _tma_prefetch(lw: KernelLowering, op: Operation) -> None:
    desc: Desc = lw.val(op.arg("desc"))  # type: ignore[assignment]
    offs = op.group("offsets")
    lw.e(f"cp.async.bulk.prefetch.tensor.{len(offs)}d.L2.global.tile",
         f"[{desc.addr}, {_coords(lw, offs, (0,) * len(offs))}]", pred=lw.part.leader)


@lowers("tlx.async_bulk_load")
def _bulk_load(lw: KernelLowering, op: Operation) -> None:
    view: SmemView = lw.val(op.arg("dst"))  # type: ignore[assignment]
    bar = _bar_addr(lw, op.arg("bar"))
    lw.e("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes", _view_addr(lw, view, 0),
         f"[{lw.scalar(op.arg('src'))}]", str(int(op.attrs["size"])), f"[{bar}]", pred=lw.part.leader)


@lowers("tlx.async_store")
def _bulk_store(lw: KernelLowering, op: Operation) -> None:
    view: SmemView = lw.val(op.arg("src"))  # type: ignore[assignment]
    p = lw.part.leader
    lw.e("cp.async.bulk.global.shared::cta.bulk_group", f"[{lw.scalar(op.arg('dst'))}]", _view_addr(lw, view, 0),
         lw.scalar(op.arg("size")), pred=p)
    lw.e("cp.async.bulk.commit_group", pred=p)


# ---------------------------------------------------------------------------------------------
# device-side tensor descriptors
# ---------------------------------------------------------------------------------------------

_TMA_DTYPE = {"u8": 0, "i8": 0, "f8e4m3": 0, "f8e5m2": 0, "u16": 1, "i16": 1, "u32": 2, "i32": 3, "u64": 4,
              "i64": 5, "f16": 6, "f32": 7, "f64": 8, "bf16": 9}
_SWIZZLE_CODE = {0: 0, 32: 1, 64: 2, 128: 3}


def _desc_users_encoding(lw: KernelLowering, v: Value) -> Tuple[int, Tuple[int, ...]]:
    """The (swizzle, box) a device-made descriptor needs: that of the buffers its TMA ops move."""
    found = None
    stack = [v]
    seen = set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        for user, idx in x.uses:
            if user.name in ("tlx.tma_load", "tlx.tma_store"):
                buf = user.arg("dst" if user.name == "tlx.tma_load" else "src").type
                lay = buf.layout
                sw = lay.swizzle if isinstance(lay, L.NVMMASharedLayout) else 0
                enc = (sw, tma_box(buf.shape, max(1, buf.element.bits // 8), sw))
                if found is not None and found != enc:
                    raise TLXCompileError("one tensor descriptor is used with two shared layouts", user.loc)
                found = enc
            elif user.name == "tlx.warp_specialize":
                for r in user.regions[1:]:
                    stack.append(r.block.args[idx])
            elif user.name in ("scf.for",):
                k = idx - 3
                if k >= 0:
                    stack.append(user.regions[0].block.args[1 + k])
                    stack.append(user.results[k])
    if found is None:
        t = v.type
        from ..passes.layouts import alloc_layout
        lay = alloc_layout(T.MemDescType(t.block_shape, t.element))
        sw = getattr(lay, "swizzle", 0)
        found = (sw, tma_box(t.block_shape, max(1, t.element.bits // 8), sw))
    return found


@lowers("tt.make_tensor_descriptor")
def _make_desc(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    t: T.TensorDescType = op.result.type  # type: ignore[assignment]
    rank = t.rank
    eb = max(1, t.element.bits // 8)
    sw, box = _desc_users_encoding(lw, op.result)
    s0 = lw.scratch(op)
    s1, s = em.tmp("b32"), em.tmp("b32")
    em("add.s32", s1, s0, "127")
    em("and.b32", s, s1, "-128")  # tensormaps in shared memory are 128-byte aligned
    # the program's slot in global scratch
    slot = lw.global_scratch_per_program
    lw.global_scratch_per_program += 128
    lw.needs_global_scratch = True
    gs = lw.part.cache.get(("gscratch",))
    if gs is None:
        with lw.in_prologue():
            p = em.tmp("b64")
            em("ld.param.u64", p, f"[{lw.name}_param_{len(lw.params)}]")
            x, y, z, nx, ny = (em.tmp("b32") for _ in range(5))
            em("mov.u32", x, "%ctaid.x")
            em("mov.u32", y, "%ctaid.y")
            em("mov.u32", z, "%ctaid.z")
            em("mov.u32", nx, "%nctaid.x")
            em("mov.u32", ny, "%nctaid.y")
            a, b = em.tmp("b32"), em.tmp("b32")
            em("mad.lo.s32", a, z, ny, y)
            em("mad.lo.s32", b, a, nx, x)
            gs = (p, b)
        lw.part.cache[("gscratch",)] = gs
        lw.pinned.add(gs[0])
    gptr, pidlin = gs
    addr = em.named("b64", lw.hint(op.result, "desc"))
    off = em.tmp("b64")
    em("mul.wide.u32", off, pidlin, str(lw.gscratch_stride))
    em("add.s64", addr, gptr, off)
    if slot:
        em("add.s64", addr, addr, str(slot))
    # build in shared memory with warp 0, then copy out with a release of the tensormap proxy
    w0 = em.tmp("pred")
    em("setp.eq.u32", w0, lw.part.warp, "0")
    zero_addr = em.tmp("b32")
    em("mad.lo.s32", zero_addr, lw.part.lane, "4", s)
    em("st.shared.b32", f"[{zero_addr}]", "0", pred=w0)
    done = em.new_label("tmap_done")
    em("bra", done, pred="!" + w0)
    em("bar.warp.sync", "-1")
    lead = lw.part.leader
    rep = "tensormap.replace.tile"
    base = lw.scalar(op.arg("base"))
    em(f"{rep}.global_address.shared::cta.b1024.b64", f"[{s}]", base, pred=lead)
    em(f"{rep}.rank.shared::cta.b1024.b32", f"[{s}]", str(rank - 1), pred=lead)
    shape = list(reversed(op.group("shape")))
    strides = list(reversed(op.group("strides")))
    for i in range(rank):
        em(f"{rep}.box_dim.shared::cta.b1024.b32", f"[{s}]", str(i), str(list(reversed(box))[i]), pred=lead)
    for i, v in enumerate(shape):
        r = lw.scalar(v)
        if v.type.bits == 64:  # type: ignore[union-attr]
            r32 = em.tmp("b32")
            em("cvt.u32.u64", r32, r)
            r = r32
        em(f"{rep}.global_dim.shared::cta.b1024.b32", f"[{s}]", str(i), r, pred=lead)
    for i, v in enumerate(strides[1:]):
        r = lw.scalar(v)
        r64 = em.tmp("b64")
        if v.type.bits == 64:  # type: ignore[union-attr]
            em("mul.lo.s64", r64, r, str(eb))
        else:
            em("mul.wide.s32", r64, r, str(eb))
        em(f"{rep}.global_stride.shared::cta.b1024.b64", f"[{s}]", str(i), r64, pred=lead)
    for i in range(rank):
        em(f"{rep}.element_stride.shared::cta.b1024.b32", f"[{s}]", str(i), "1", pred=lead)
    em(f"{rep}.elemtype.shared::cta.b1024.b32", f"[{s}]", str(_TMA_DTYPE[t.element.name]), pred=lead)
    em(f"{rep}.interleave_layout.shared::cta.b1024.b32", f"[{s}]", "0", pred=lead)
    em(f"{rep}.swizzle_mode.shared::cta.b1024.b32", f"[{s}]", str(_SWIZZLE_CODE[sw]), pred=lead)
    fill = 1 if op.attrs.get("padding", "zero") == "nan" else 0
    em(f"{rep}.fill_mode.shared::cta.b1024.b32", f"[{s}]", str(fill), pred=lead)
    em("bar.warp.sync", "-1")
    em("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned", f"[{addr}]",
       f"[{s}]", "128")
    em("fence.proxy.tensormap::generic.acquire.gpu", f"[{addr}]", "128")
    em.label(done)
    lw.part_barrier()
    lw.set(op.result, Desc(addr, t, None, sw, box))


# ---------------------------------------------------------------------------------------------
# wgmma
# ---------------------------------------------------------------------------------------------

_WGMMA_IN = {"f16": "f16", "bf16": "bf16", "f32": "tf32", "f8e4m3": "e4m3", "f8e5m2": "e5m2", "i8": "s8", "u8": "u8"}


def _phys(view: SmemView) -> Tuple[int, int]:
    """(view dim that is contiguous in memory, view dim along the rows)."""
    lay = view.layout
    inner_storage = 0 if (isinstance(lay, L.NVMMASharedLayout) and lay.transposed) else len(view.storage_shape) - 1
    vi = list(view.perm).index(inner_storage)
    return vi, 1 - vi


def operand_geometry(view: SmemView, mn_dim: int, mn_extent: int, k_extent: int, loc=None) -> Tuple[int, int, int, bool]:
    """(LBO, SBO, swizzle mode, MN-major) of a wgmma operand tile of mn_extent x k_extent in
    `view` (view dim `mn_dim` is M or N). The tile is a grid of swizzle atoms (8 rows of the
    atom width); LBO steps to the next atom along the contiguous dim when one instruction spans
    several, SBO to the next 8 rows; without a swizzle and MN-major the two swap (PTX ISA, as
    Triton and CUTLASS use them)."""
    lay = view.layout
    if not isinstance(lay, L.NVMMASharedLayout):
        raise TLXCompileError(f"a wgmma operand needs an NVMMA shared layout, got {lay}", loc)
    if len(view.shape) != 2 or view.buffers:
        raise TLXCompileError("a wgmma operand is one 2-D buffer (index the array first)", loc)
    eb = view.elem_bytes
    sw = lay.swizzle
    atom = LM.nvmma_atom_bytes(lay)
    w = atom // eb
    inner_v, _ = _phys(view)
    mn_major = inner_v == mn_dim
    st_rows = view.storage_shape[0] if not lay.transposed else view.storage_shape[1]
    inner_extent = mn_extent if mn_major else k_extent
    row_extent = k_extent if mn_major else mn_extent
    lbo = st_rows * atom if inner_extent > w else 0
    sbo = 8 * atom if row_extent > 8 else 0
    if sw == 0 and mn_major:
        lbo, sbo = sbo, lbo
    mode = {0: 0, 128: 1, 64: 2, 32: 3}[sw]
    return lbo, sbo, mode, mn_major


def _operand(lw: KernelLowering, view: SmemView, mn_dim: int, mn_extent: int, k_extent: int, loc,
             warp_vals: List[int]) -> Tuple[str, bool, Dict]:
    """The base descriptor (a b64 register) of a wgmma operand view and whether it is MN-major.
    `warp_vals[j]`: the view coordinate (along mn_dim) that warp bit j adds (warpgroup offsets)."""
    lbo, sbo, mode, mn_major = operand_geometry(view, mn_dim, mn_extent, k_extent, loc)
    sw = view.layout.swizzle  # type: ignore[union-attr]
    em = lw.e
    # runtime part of the start: buffer base, view origin, warpgroup offset
    offs = []
    for v in warp_vals:
        c = [0, 0]
        c[mn_dim] = v
        offs.append(view.element_bases(tuple(c)) if v else 0)
    g_off, gmask = lw.thread_linear([0] * 5, offs)
    start = view.base
    origin = view.origin
    if isinstance(origin, str) or (origin and g_off is not None and origin & gmask):
        x = em.tmp("b32")
        if g_off is None:
            em("mov.b32", x, origin if isinstance(origin, str) else str(origin))
        else:
            em("xor.b32", x, g_off, origin if isinstance(origin, str) else str(origin))
        s2 = em.tmp("b32")
        em("add.s32", s2, start, x)
        start = s2
    else:
        if origin:
            s2 = em.tmp("b32")
            em("add.s32", s2, start, str(origin))
            start = s2
        if g_off is not None:
            s3 = em.tmp("b32")
            em("add.s32", s3, start, g_off)
            start = s3
    if gmask & 0x380 & ((sw // 16 - 1) << 7 if sw else 0):
        raise TLXCompileError("a warpgroup's wgmma tile does not start on a swizzle pattern boundary", loc)
    lo = em.tmp("b32")
    em("bfe.u32", lo, start, "4", "14")
    lo2 = em.tmp("b32")
    em("or.b32", lo2, lo, str((lbo >> 4) << 16))
    hi = lw.const("b32", str((sbo >> 4) | (mode << 30)))
    d = em.tmp("b64")
    em("mov.b64", d, "{" + lo2 + ", " + hi + "}")
    return d, mn_major, {"sw": sw}


def _tile_delta(view: SmemView, coord: Tuple[int, int], sw: int, loc) -> int:
    """Descriptor increment (the start field, in 16-byte units, plus the base-offset field) of the
    operand tile at static view coordinates `coord`."""
    off = view.element_bases(coord)
    base_off = (off >> 7) & (sw // 16 - 1) if sw else 0
    if base_off:
        raise TLXCompileError("internal: wgmma tile starts inside a swizzle pattern", loc)
    return off >> 4


@lowers("tlx.async_dot")
def _async_dot(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    a_v, b_v, acc_v = op.arg("a"), op.arg("b"), op.arg("acc")
    rt: T.TensorType = op.result.type  # type: ignore[assignment]
    mma = rt.layout
    if not isinstance(mma, L.MmaLayout):
        raise TLXCompileError(f"async_dot's result needs the wgmma layout, got {mma}", op.loc)
    m = lw.lmap(rt)
    M, N = rt.shape
    wm, wn = mma.wpc
    n = mma.instr[1]
    bview: SmemView = lw.val(b_v)  # type: ignore[assignment]
    ae = a_v.type.element
    be = b_v.type.element
    K = b_v.type.shape[0]
    if ae.name not in _WGMMA_IN or be.name not in _WGMMA_IN:
        raise TLXCompileError(f"wgmma has no {ae.name} x {be.name} form", op.loc)
    atype, btype = _WGMMA_IN[ae.name], _WGMMA_IN[be.name]
    eb = max(1, be.bits // 8)
    kstep = 32 // eb
    if K % kstep:
        raise TLXCompileError(f"async_dot needs K to be a multiple of {kstep} for {be.name}, got K={K}", op.loc)
    re = rt.element
    if atype in ("s8", "u8"):
        dtype = "s32"
        if re.name != "i32":
            raise TLXCompileError("an 8-bit integer dot accumulates in i32", op.loc)
    else:
        dtype = "f32"
        if re.name != "f32":
            raise TLXCompileError(f"async_dot accumulates in f32 here, not {re.name}", op.loc,
                                  hint="accumulate in float32 and convert the result")
    # result registers: in place when the accumulator is not read afterwards
    if acc_v is not None:
        acc = lw.tensor(acc_v)
        if lw.can_overwrite(acc_v, op) and not any(r in lw.pinned for r in acc.regs):
            regs = acc.regs
            lw.set(op.result, Tensor(regs, m, re))
            lw.alias(op.result, acc_v)
        else:
            regs = em.named_array("b32", m.num_regs, lw.hint(op.result, "acc"))
            lw.copy_regs(regs, acc.regs, ["b32"] * len(regs))
            lw.set(op.result, Tensor(regs, m, re))
    else:
        regs = em.named_array("b32", m.num_regs, lw.hint(op.result, "acc"))
        lw.set(op.result, Tensor(regs, m, re))
    n_nrep = N // (n * wn)
    n_mrep = M // (16 * wm)
    n_k = K // kstep
    # warpgroup offsets: warp bits 2.. of the accumulator layout
    wg_rows = [b[0] for b in m.warp]
    wg_cols = [b[1] for b in m.warp]
    for j in range(min(2, len(wg_rows))):
        wg_rows[j] = 0  # within a warpgroup: the instruction's own rows
    b_desc, b_mn, binfo = _operand(lw, bview, 1, n, kstep, op.loc, wg_cols)
    a_reg = isinstance(a_v.type, T.TensorType)
    if a_reg:
        a_t = lw.tensor(a_v)
        a_map = a_t.lmap
        kw = 32 // ae.bits
        per_instr = 4 * kw
        a_words: Dict[Tuple[int, int], List[str]] = {}
        for i in range(n_mrep):
            for kk in range(n_k):
                b0 = ((i * n_k) + kk) * per_instr
                els = a_t.regs[b0:b0 + per_instr]
                words = []
                for q in range(4):
                    part = els[q * kw:(q + 1) * kw]
                    if kw == 1:
                        words.append(part[0])
                        continue
                    wreg = em.tmp("b32")
                    if kw == 2:
                        em("mov.b32", wreg, "{" + part[0] + ", " + part[1] + "}")
                    else:
                        acc32 = None
                        for bi, r in enumerate(part):
                            x = em.tmp("b32")
                            em("cvt.u32.u16", x, r)
                            if acc32 is None:
                                y = em.tmp("b32")
                                em("and.b32", y, x, "255")
                            else:
                                y = em.tmp("b32")
                                em("bfi.b32", y, x, acc32, str(8 * bi), "8")
                            acc32 = y
                        em("mov.b32", wreg, acc32)
                    words.append(wreg)
                a_words[(i, kk)] = words
        a_mn = False
        del a_map
    else:
        aview: SmemView = lw.val(a_v)  # type: ignore[assignment]
        a_desc, a_mn, ainfo = _operand(lw, aview, 0, 64, kstep, op.loc, wg_rows)
    if (a_mn or b_mn) and atype not in ("f16", "bf16"):
        raise TLXCompileError(f"wgmma reads {atype} operands K-major only (the contiguous dim must be K)", op.loc,
                              hint="transpose the buffer layout or use 16-bit operands")
    em("wgmma.fence.sync.aligned")
    ptrue = lw.const("pred", "1")
    pfalse = lw.const("pred", "0")
    nregs = n // 2
    shape = f"m64n{n}k{kstep}"
    ins = f"wgmma.mma_async.sync.aligned.{shape}.{dtype}.{atype}.{btype}"
    for i in range(n_mrep):
        for j in range(n_nrep):
            base = (i * n_nrep + j) * nregs
            dregs = "{" + ",".join(regs[base:base + nregs]) + "}"
            for kk in range(n_k):
                scale_d = ptrue if (acc_v is not None or kk > 0) else pfalse
                bd = em.tmp("b64")
                em("add.s64", bd, b_desc, str(_tile_delta(bview, (kk * kstep, j * n * wn), binfo["sw"], op.loc)))
                if a_reg:
                    a_opnd = "{" + ", ".join(a_words[(i, kk)]) + "}"
                else:
                    ad = em.tmp("b64")
                    em("add.s64", ad, a_desc,
                       str(_tile_delta(aview, (i * 16 * wm, kk * kstep), ainfo["sw"], op.loc)))
                    a_opnd = ad
                if atype in ("f16", "bf16"):
                    tail = ["1", "1"] + ([] if a_reg else ["1" if a_mn else "0"]) + ["1" if b_mn else "0"]
                elif atype in ("s8", "u8"):
                    tail = []
                else:
                    tail = ["1", "1"]
                em.root(ins, dregs, a_opnd, bd, scale_d, *tail)
    em("wgmma.commit_group.sync.aligned")


@lowers("tlx.async_dot_wait")
def _async_dot_wait(lw: KernelLowering, op: Operation) -> None:
    lw.e("wgmma.wait_group.sync.aligned", str(int(op.attrs["pendings"])))
    for v, r in zip(op.group("values"), op.results):
        lw.set(r, lw.val(v))
        lw.alias(r, v)


@lowers("tt.dot", "tt.descriptor_load", "tt.descriptor_store")
def _must_be_lowered(lw: KernelLowering, op: Operation) -> None:
    raise TLXCompileError(f"internal: {op.name} reached code generation; the pipeline lowers it before the fence "
                          "passes", op.loc)

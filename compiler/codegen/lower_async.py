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

import itertools
import math
from typing import TYPE_CHECKING, List, Optional, Tuple

from ..abi import ABI_DTYPE, TENSOR_MAP_BYTES, TMA_DATA_TYPE, TMA_SWIZZLE
from ..errors import TLXCompileError
from ..ir import layouts as L
from ..ir import types as T
from ..ir.core import BlockArgument, Operation, Value
from ..analysis import layout_math as LM
from ..passes.layouts import alloc_layout
from .lower_memory import pack_words
from .ptx import address, braces
from .values import Barriers, Desc, Scalar, SmemView, Tensor

if TYPE_CHECKING:
    from .lower import KernelLowering


# ---------------------------------------------------------------------------------------------
# fences and barriers
# ---------------------------------------------------------------------------------------------

def _fence_async_shared(lw: KernelLowering, op: Operation) -> None:
    lw.e("fence.proxy.async.shared::cluster" if op.attrs.get("cluster") else "fence.proxy.async.shared::cta")


def _fence(lw: KernelLowering, op: Operation) -> None:
    lw.e(f"fence.acq_rel.{op.attrs['scope']}")


def _cta_barrier(lw: KernelLowering, op: Operation) -> None:
    lw.part_barrier()


def _named_barrier(lw: KernelLowering, op: Operation) -> None:
    lw.e("bar.sync" if op.name.endswith("wait") else "bar.arrive", str(int(op.attrs["id"])),
         str(int(op.attrs["count"])))


def _alloc_barriers(lw: KernelLowering, op: Operation) -> None:
    if "offset" not in op.attrs:
        raise TLXCompileError("internal: alloc_barriers has no offset (run shared-memory allocation first)", op.loc)
    addr = lw.smem_addr(int(op.attrs["offset"]))
    n, count = int(op.attrs["num"]), int(op.attrs["arrive_count"])
    for i in range(n):
        lw.e("mbarrier.init.shared::cta.b64", address(addr, 8 * i), str(count), pred=lw.part.leader)
    lw.set(op.result, Barriers(addr, n, True))


def _bar_addr(lw: KernelLowering, v: Value) -> str:
    b = lw.val(v)
    if not isinstance(b, Barriers):
        raise TLXCompileError("internal: expected an mbarrier", None)
    return b.addr


def _opt_pred(lw: KernelLowering, op: Operation) -> Optional[str]:
    p = op.arg("pred") if "pred" in op.opdef.group_names else None
    return lw.scalar(p) if p is not None else None


def _arrive(lw: KernelLowering, op: Operation) -> None:
    """barrier_arrive and barrier_expect_bytes: one arrive by the leader (expecting the bytes), or by
    every thread on an alloc_warp_barrier barrier."""
    a = _bar_addr(lw, op.arg("bar"))
    # An alloc_warp_barrier barrier counts every thread's arrival (its count is num_warps * 32 *
    # num_arrivals): each thread arrives by itself. Any other barrier: the partition's leader.
    leader = None if op.attrs.get("per_thread") else lw.part.leader
    p = lw.and_pred(leader, _opt_pred(lw, op))
    if op.name == "tlx.barrier_expect_bytes":
        lw.e("mbarrier.arrive.expect_tx.shared::cta.b64", "_", f"[{a}]", str(int(op.attrs["bytes"])), pred=p)
        return
    count = int(op.attrs.get("count", 1))
    ins = "mbarrier.arrive.shared::cta.b64"
    if lw.val(op.arg("bar")).remote:  # type: ignore[union-attr]
        # another CTA's barrier (a remote arrive has no state result, hence the sink). ClusterSync
        # chose the scope: cluster when the arrive must publish this CTA's generic accesses to
        # the other CTA; cta (the default .release.cta) when it only hands back buffers read
        # through the async proxy, sparing a MEMBAR.GPU per arrive. Unmarked: cluster.
        ins = f"mbarrier.arrive{'' if op.attrs.get('scope') == 'cta' else '.release.cluster'}.shared::cluster.b64"
    lw.e(ins, "_", f"[{a}]", *([str(count)] if count != 1 else []), pred=p)


def _inval(lw: KernelLowering, op: Operation) -> None:
    # one thread, as the init: the CTA-barrier pass has every thread past its waits by now
    lw.e("mbarrier.inval.shared::cta.b64", f"[{_bar_addr(lw, op.arg('bar'))}]", pred=lw.part.leader)


def _wait(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    a = _bar_addr(lw, op.arg("bar"))
    ph_v = op.arg("phase")
    ph = lw.scalar(ph_v)
    if ph_v.type == T.i1:
        ph = em.new("b32", "selp.b32", "1", "0", ph)
    pred = _opt_pred(lw, op)
    done = em.new_label("wait_done")
    if pred is not None:
        em("bra", done, pred="!" + pred)
    loop = em.new_label("wait")
    em.label(loop)
    # in a cluster, the phase may complete by another CTA's cluster-scope release: then acquire
    # at cluster scope, so its writes before the release are visible after the wait. ClusterSync
    # marks which waits need it (scope); an unmarked wait in a cluster kernel acquires at cluster
    # scope, the safe side.
    c = lw.m.attrs.get("cluster", (1, 1, 1))
    scope = op.attrs.get("scope", "cluster" if c[0] * c[1] * c[2] > 1 else "cta")
    sem = ".acquire.cluster" if scope == "cluster" else ""
    p = em.new("pred", f"mbarrier.try_wait.parity{sem}.shared::cta.b64", f"[{a}]", ph)
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
    if swizzle == 0 and math.prod(bs[:-1]) == 1:
        # one row: the no-swizzle layout is then plain row-major, so a box may span 256 elements of
        # the row (a 16-byte box would land at 16-byte steps, and TMA needs 128-byte aligned smem)
        return tuple(bs[:-1]) + (min(bs[-1], 256),)
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
        # split the inner dim into atom columns, each outer dim into chunks of at most 256
        outer_chunks = [range(0, shape[d], box[d]) for d in range(len(shape) - 1)]
        coords = [outer + (j,) for j in range(0, shape[-1], box[-1]) for outer in itertools.product(*outer_chunks)]
        pieces = [(view.element_bases(c), tuple(reversed(c))) for c in coords]
    elif isinstance(lay, L.SwizzledSharedLayout) and len(shape) == 1:
        sw = 0
        box = (min(shape[0], 256),)
        pieces = [(x * eb, (x,)) for x in range(0, shape[0], box[0])]
    else:
        raise TLXCompileError(f"a TMA buffer needs an NVMMA layout, got {lay}", op.loc)
    _check_tma_smem_alignment(view, pieces, box, op)
    if desc.swizzle is None:
        desc.swizzle, desc.box = sw, box
    elif (desc.swizzle, tuple(desc.box)) != (sw, tuple(box)):  # type: ignore[arg-type]
        raise TLXCompileError(f"one tensor descriptor is used with two shared layouts (swizzle {desc.swizzle}, box "
                              f"{list(desc.box)} and swizzle {sw}, box {list(box)})", op.loc,  # type: ignore[arg-type]
                              hint="give every buffer this descriptor moves the same layout")
    return box, pieces


TMA_SMEM_ALIGN = 128  # cp.async.bulk.tensor's shared-memory operand (PTX ISA, tensor copy restrictions)


def _check_tma_smem_alignment(view: SmemView, pieces, box: Tuple[int, ...], op: Operation) -> None:
    """Every copy's shared-memory address must be 128-byte aligned: the buffer base is (smem
    allocation aligns NVMMA buffers to at least 128 bytes), so each copy's offset in it must be."""
    if isinstance(view.origin, str):
        return  # a run-time origin: a multiple of the buffer stride, checked where it is indexed
    for off, _ in pieces:
        o = view.origin ^ off
        if o % TMA_SMEM_ALIGN:
            raise TLXCompileError(f"a TMA copy of this {list(view.shape)} buffer ({view.layout}) would move a box of "
                                  f"{list(box)} elements to a shared-memory offset of {o} bytes, but TMA needs "
                                  f"{TMA_SMEM_ALIGN}-byte aligned shared memory", op.loc,
                                  hint="give the buffer at least 8 rows per 16-byte column (no swizzle) or a "
                                  "swizzled NVMMA layout, or a single row")


def _view_addr(lw: KernelLowering, view: SmemView, off: int) -> str:
    """An address operand for the view's element at XOR-offset `off` from its origin."""
    em = lw.e
    if isinstance(view.origin, str):
        x = em.new("b32", "xor.b32", view.origin, str(off))
        return f"[{em.new('b32', 'add.s32', view.base, x)}]"
    return address(view.base, view.origin ^ off)


def _coords(lw: KernelLowering, offs: List[Value], deltas: Tuple[int, ...]) -> str:
    """The innermost-first coordinate list of a TMA copy (IR offsets are outermost first)."""
    em = lw.e
    regs = []
    for v, dlt in zip(reversed(offs), deltas):
        r = lw.scalar(v)
        regs.append(em.new("b32", "add.s32", r, str(dlt)) if dlt else r)
    return braces(regs)


def _l2_policy(lw: KernelLowering, op: Operation) -> Optional[str]:
    """The 64-bit L2 cache policy of a TMA copy with an `evict_first` / `evict_last` eviction
    hint (made once per partition by createpolicy), or None: other hints leave the default."""
    evict = op.attrs.get("evict", "")
    if evict not in ("evict_first", "evict_last"):
        return None
    return lw.once(("l2_policy", evict), lambda: lw.e.new("b64", f"createpolicy.fractional.L2::{evict}.b64", "1.0"))


def _tma_load(lw: KernelLowering, op: Operation) -> None:
    desc: Desc = lw.val(op.arg("desc"))  # type: ignore[assignment]
    view: SmemView = lw.val(op.arg("dst"))  # type: ignore[assignment]
    bar = _bar_addr(lw, op.arg("bar"))
    offs = op.group("offsets")
    box, pieces = _tma_geometry(lw, view, desc, op)
    p = lw.and_pred(lw.part.leader, _opt_pred(lw, op))
    rank = len(offs)
    policy = _l2_policy(lw, op)
    # multicast: the tile lands at the same offset in every CTA of the 16-bit mask, each completing
    # on its own barrier at the barrier's offset
    mask_v = op.arg("mask")
    mask = lw.e.new("b16", "cvt.u16.u32", lw.scalar(mask_v)) if mask_v is not None else None
    mc = ".multicast::cluster" if mask else ""
    for off, dl in pieces:
        lw.e(f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes{mc}"
             + (".L2::cache_hint" if policy else ""), _view_addr(lw, view, off),
             f"[{desc.addr}, {_coords(lw, offs, dl)}]", f"[{bar}]", *((mask,) if mask else ()),
             *((policy,) if policy else ()), pred=p)


def _tma_store(lw: KernelLowering, op: Operation) -> None:
    desc: Desc = lw.val(op.arg("desc"))  # type: ignore[assignment]
    view: SmemView = lw.val(op.arg("src"))  # type: ignore[assignment]
    offs = op.group("offsets")
    box, pieces = _tma_geometry(lw, view, desc, op)
    p = lw.part.leader
    rank = len(offs)
    policy = _l2_policy(lw, op)
    for off, dl in pieces:
        lw.e(f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group" + (".L2::cache_hint" if policy else ""),
             f"[{desc.addr}, {_coords(lw, offs, dl)}]", _view_addr(lw, view, off), *((policy,) if policy else ()),
             pred=p)
    lw.e("cp.async.bulk.commit_group", pred=p)


def _tma_store_wait(lw: KernelLowering, op: Operation) -> None:
    lw.e("cp.async.bulk.wait_group.read", str(int(op.attrs["pendings"])), pred=lw.part.leader)


def _tma_prefetch(lw: KernelLowering, op: Operation) -> None:
    desc: Desc = lw.val(op.arg("desc"))  # type: ignore[assignment]
    offs = op.group("offsets")
    lw.e(f"cp.async.bulk.prefetch.tensor.{len(offs)}d.L2.global.tile",
         f"[{desc.addr}, {_coords(lw, offs, (0,) * len(offs))}]", pred=lw.part.leader)


def _bulk_load(lw: KernelLowering, op: Operation) -> None:
    view: SmemView = lw.val(op.arg("dst"))  # type: ignore[assignment]
    bar = _bar_addr(lw, op.arg("bar"))
    lw.e("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes", _view_addr(lw, view, 0),
         f"[{lw.scalar(op.arg('src'))}]", str(int(op.attrs["size"])), f"[{bar}]", pred=lw.part.leader)


def _bulk_store(lw: KernelLowering, op: Operation) -> None:
    view: SmemView = lw.val(op.arg("src"))  # type: ignore[assignment]
    p = lw.part.leader
    lw.e("cp.async.bulk.global.shared::cta.bulk_group", f"[{lw.scalar(op.arg('dst'))}]", _view_addr(lw, view, 0),
         lw.scalar(op.arg("size")), pred=p)
    lw.e("cp.async.bulk.commit_group", pred=p)


# ---------------------------------------------------------------------------------------------
# device-side tensor descriptors
# ---------------------------------------------------------------------------------------------

def _desc_users_encoding(lw: KernelLowering, v: Value) -> Tuple[int, Tuple[int, ...]]:
    """The (swizzle, box) a device-made descriptor needs: that of the buffers its TMA ops move. A
    descriptor that goes through a slot is one descriptor with every make and reinterpret of that
    slot: they all take the encoding of all their users."""
    found = None
    for root in _same_descriptor(lw, v):
        found = _users_encoding(root, found)
    return found or default_tma_encoding(v.type)


def _users_encoding(v: Value, found: Optional[Tuple[int, Tuple[int, ...]]]) -> Optional[Tuple[int, Tuple[int, ...]]]:
    """`found` merged with the (swizzle, box) of the TMA ops that use descriptor `v` (through
    warp-specialize captures and loop-carried values); two different ones are an error."""
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
                enc = (sw, tma_box(buf.shape, buf.element.bytes, sw))
                if found is not None and found != enc:
                    raise TLXCompileError("one tensor descriptor is used with two shared layouts", user.loc)
                found = enc
            elif user.name == "tlx.warp_specialize":  # the partitions' captures
                stack.extend(r.block.args[idx] for r in user.regions[1:])
            elif user.name == "scf.for" and idx >= 3:  # a carried value: the body's argument, the result
                stack += [user.regions[0].block.args[idx - 2], user.results[idx - 3]]
    return found


def _captured(v: Value) -> Value:
    """The value outside every warp-specialize partition that `v` is a capture of (or `v`)."""
    while isinstance(v, BlockArgument):
        region = v.owner.parent
        ws = region.parent if region is not None else None
        if ws is None or ws.name != "tlx.warp_specialize" or ws.regions[0] is region:
            break
        v = ws.operands[v.index]
    return v


def _constant_index(desc_slot: Operation) -> Optional[int]:
    """The index of a `tlx.desc_slot` when it is an integer constant (None otherwise)."""
    c = desc_slot.arg("index").defining_op
    k = c.attrs.get("value") if c is not None and c.name == "arith.constant" else None
    return k if isinstance(k, int) else None


def slot_key(slot: Value) -> Tuple[Optional[int], Optional[int]]:
    """Which slot a `!descslot` value is: (id of its slot array, or None when not known (a slot
    carried through a loop or chosen by an `if`); its constant index, or None when the index is
    only known at run time)."""
    slot = _captured(slot)
    d = slot.defining_op
    if d is None or d.name != "tlx.desc_slot":
        return None, None  # may be any slot
    return id(_captured(d.arg("slots"))), _constant_index(d)


def _slot_of(op: Optional[Operation]) -> Optional[Value]:
    """The slot a make / reinterpret of a descriptor writes or reads (None: no slot)."""
    if op is not None and op.name in ("tt.make_tensor_descriptor", "tlx.reinterpret_tensor_descriptor"):
        return op.arg("slot")
    return None


def _same_descriptor(lw: KernelLowering, v: Value) -> List[Value]:
    """`v` and the results of every other make / reinterpret of a slot `v`'s slot may be (same
    array, same or run-time index). Where the slot is surely the same (constant indices), a
    reinterpret must read it with the block shape and dtype it was made with."""
    slot = _slot_of(v.defining_op)
    if slot is None:
        return [v]
    arr, k = slot_key(slot)
    out = [v]
    for o in lw.func.iter_nested():
        s = _slot_of(o)
        if s is None or o.result is v:
            continue
        arr2, k2 = slot_key(s)
        if (arr is not None and arr2 is not None and arr2 != arr) or (k is not None and k2 is not None and k != k2):
            continue
        out.append(o.result)
        if arr is not None and arr == arr2 and k is not None and k == k2 and o.result.type != v.type and "tt.make_tensor_descriptor" in (
                o.name, v.defining_op.name):  # type: ignore[union-attr]
            rd = o if o.name == "tlx.reinterpret_tensor_descriptor" else v.defining_op
            mk = v.defining_op if rd is o else o
            raise TLXCompileError(f"reinterpret_tensor_descriptor reads slot {k} as {rd.result.type}, but "  # type: ignore
                                  f"make_tensor_descriptor writes it as {mk.result.type}", rd.loc,  # type: ignore
                                  hint="pass the block_shape and dtype the descriptor was made with")
    return out


def default_tma_encoding(t: T.TensorDescType) -> Tuple[int, Tuple[int, ...]]:
    """(swizzle, box) of a descriptor no TMA op uses: as the default layout of its block would be."""
    sw = getattr(alloc_layout(T.MemDescType(t.block_shape, t.element)), "swizzle", 0)
    return sw, tma_box(t.block_shape, t.element.bytes, sw)


def _program_scratch(lw: KernelLowering, nbytes: int, hint: str) -> str:
    """A register holding the global address of `nbytes` of the program's own scratch (reserved
    here; every reservation is a multiple of 128 bytes, so each stays 128-byte aligned)."""
    em = lw.e
    offset = lw.global_scratch_per_program
    lw.global_scratch_per_program += nbytes
    lw.needs_global_scratch = True

    def global_slot() -> Tuple[str, str]:  # the global scratch pointer, the linear program id
        p = em.new("b64", "ld.param.u64", f"[{lw.name}_param_{len(lw.params)}]")
        x, y, z, nx, ny = (em.new("b32", "mov.u32", r) for r in ("%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x",
                                                                  "%nctaid.y"))
        zy = em.new("b32", "mad.lo.s32", z, ny, y)
        return p, em.new("b32", "mad.lo.s32", zy, nx, x)

    gptr, pidlin = lw.once(("gscratch",), global_slot)
    addr = em.named("b64", hint)
    em("add.s64", addr, gptr, em.new("b64", "mul.wide.u32", pidlin, str(lw.gscratch_stride)))
    if offset:
        em("add.s64", addr, addr, str(offset))
    return addr


def _make_desc(lw: KernelLowering, op: Operation) -> None:
    """Build the descriptor in shared memory with warp 0 and copy it to its global home (the
    program's scratch, or the kernel's slot), releasing it to the tensormap proxy; the builders
    then acquire it, so the TMA ops that follow see it."""
    em = lw.e
    t: T.TensorDescType = op.result.type  # type: ignore[assignment]
    sw, box = _desc_users_encoding(lw, op.result)
    s1 = em.new("b32", "add.s32", lw.scratch(op), "127")
    s = em.new("b32", "and.b32", s1, "-128")  # tensormaps in shared memory are 128-byte aligned
    slot = op.arg("slot")
    if slot is None:
        addr = _program_scratch(lw, TENSOR_MAP_BYTES, lw.hint(op.result, "desc"))
    else:
        addr = em.named("b64", lw.hint(op.result, "desc"))
        em("mov.b64", addr, lw.scalar(slot))
    # build in shared memory with warp 0, then copy out with a release of the tensormap proxy
    w0 = em.new("pred", "setp.eq.u32", lw.part.warp, "0")
    zero_addr = em.new("b32", "mad.lo.s32", lw.part.lane, "4", s)
    em("st.shared.b32", f"[{zero_addr}]", "0", pred=w0)
    done = em.new_label("tmap_done")
    em("bra", done, pred="!" + w0)
    em("bar.warp.sync", "-1")

    def replace(field: str, *vals: str, width: str = "b32") -> None:
        em(f"tensormap.replace.tile.{field}.shared::cta.b1024.{width}", f"[{s}]", *vals, pred=lw.part.leader)

    replace("global_address", lw.scalar(op.arg("base")), width="b64")
    replace("rank", str(t.rank - 1))
    for i, b in enumerate(reversed(box)):
        replace("box_dim", str(i), str(b))
    for i, v in enumerate(reversed(op.group("shape"))):
        r = lw.scalar(v)
        replace("global_dim", str(i), em.new("b32", "cvt.u32.u64", r) if v.type.bits == 64 else r)  # type: ignore
    for i, v in enumerate(list(reversed(op.group("strides")))[1:]):
        ins = "mul.lo.s64" if v.type.bits == 64 else "mul.wide.s32"  # type: ignore[union-attr]
        replace("global_stride", str(i), em.new("b64", ins, lw.scalar(v), str(t.element.bytes)), width="b64")
    for i in range(t.rank):
        replace("element_stride", str(i), "1")
    replace("elemtype", str(TMA_DATA_TYPE[ABI_DTYPE[t.element.name]]))
    replace("interleave_layout", "0")
    replace("swizzle_mode", str(TMA_SWIZZLE[sw]))
    replace("fill_mode", "1" if op.attrs.get("padding", "zero") == "nan" else "0")
    em("bar.warp.sync", "-1")
    em("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned", f"[{addr}]",
       f"[{s}]", str(TENSOR_MAP_BYTES))
    em("fence.proxy.tensormap::generic.acquire.gpu", f"[{addr}]", str(TENSOR_MAP_BYTES))
    em.label(done)
    lw.part_barrier()
    lw.set(op.result, Desc(addr, t, None, sw, box))


def _alloc_desc_slots(lw: KernelLowering, op: Operation) -> None:
    """`num` 128-byte slots of the program's global scratch: the register holds the first one."""
    addr = _program_scratch(lw, TENSOR_MAP_BYTES * op.attrs["num"], lw.hint(op.result, "desc_slots"))
    lw.set(op.result, Scalar(addr, T.i64))


def _desc_slot(lw: KernelLowering, op: Operation) -> None:
    """Slot `index` of an array: 128 bytes a slot."""
    em = lw.e
    base = lw.scalar(op.arg("slots"))
    k = _constant_index(op)
    if k is not None:
        addr = em.new("b64", "add.s64", base, str(k * TENSOR_MAP_BYTES))
    else:
        addr = em.new("b64", "mad.wide.s32", lw.scalar(op.arg("index")), str(TENSOR_MAP_BYTES), base)
    lw.set(op.result, Scalar(addr, T.i64))


def _reinterpret_desc(lw: KernelLowering, op: Operation) -> None:
    """The slot's address as a descriptor. The slot was written through the generic proxy (the
    tensormap copy's release); the partition's threads acquire it for the tensormap proxy before
    any of them issues a TMA op with it."""
    em = lw.e
    t: T.TensorDescType = op.result.type  # type: ignore[assignment]
    sw, box = _desc_users_encoding(lw, op.result)
    addr = em.named("b64", lw.hint(op.result, "desc"))
    em("mov.b64", addr, lw.scalar(op.arg("slot")))
    em("fence.proxy.tensormap::generic.acquire.gpu", f"[{addr}]", str(TENSOR_MAP_BYTES))
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
             warp_vals: List[int]) -> Tuple[str, bool]:
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
        # the origin's bits meet the warpgroup's: XOR them, then add to the base
        x = em.new("b32", "mov.b32", str(origin)) if g_off is None else em.new("b32", "xor.b32", g_off, str(origin))
        start = em.new("b32", "add.s32", start, x)
    else:
        if origin:
            start = em.new("b32", "add.s32", start, str(origin))
        if g_off is not None:
            start = em.new("b32", "add.s32", start, g_off)
    if gmask & 0x380 & ((sw // 16 - 1) << 7 if sw else 0):
        raise TLXCompileError("a warpgroup's wgmma tile does not start on a swizzle pattern boundary", loc)
    lo = em.new("b32", "bfe.u32", start, "4", "14")
    lo2 = em.new("b32", "or.b32", lo, str((lbo >> 4) << 16))
    hi = lw.const("b32", str((sbo >> 4) | (mode << 30)))
    return em.new("b64", "mov.b64", braces([lo2, hi])), mn_major


def _tile_delta(view: SmemView, coord: Tuple[int, int], loc) -> int:
    """Descriptor increment (the start field, in 16-byte units, plus the base-offset field) of the
    operand tile at static view coordinates `coord`."""
    off = view.element_bases(coord)
    sw = view.layout.swizzle  # type: ignore[union-attr]
    if sw and (off >> 7) & (sw // 16 - 1):
        raise TLXCompileError("internal: wgmma tile starts inside a swizzle pattern", loc)
    return off >> 4


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
    acc = lw.tensor(acc_v) if acc_v is not None else None
    in_place = acc is not None and lw.can_overwrite(acc_v, op) and not any(r in lw.pinned for r in acc.regs)
    regs = acc.regs if in_place else em.named_array("b32", m.num_regs, lw.hint(op.result, "acc"))  # type: ignore
    if acc is not None and not in_place:
        lw.copy_regs(regs, acc.regs, ["b32"] * len(regs))
    lw.set(op.result, Tensor(regs, m, re))
    if in_place:
        lw.alias(op.result, acc_v)
    n_nrep = N // (n * wn)
    n_mrep = M // (16 * wm)
    n_k = K // kstep
    # warpgroup offsets: warp bits 2.. of the accumulator layout
    wg_rows = [b[0] for b in m.warp]
    wg_cols = [b[1] for b in m.warp]
    for j in range(min(2, len(wg_rows))):
        wg_rows[j] = 0  # within a warpgroup: the instruction's own rows
    b_desc, b_mn = _operand(lw, bview, 1, n, kstep, op.loc, wg_cols)
    a_reg = isinstance(a_v.type, T.TensorType)
    if a_reg:
        # four 32-bit registers of consecutive K elements per instruction
        a_t = lw.tensor(a_v)
        per_instr = 4 * (32 // ae.bits)
        a_words = {(i, kk): pack_words(lw, a_t.regs[(i * n_k + kk) * per_instr:][:per_instr], ae, 16)[0]
                   for i in range(n_mrep) for kk in range(n_k)}
        a_mn = False
    else:
        aview: SmemView = lw.val(a_v)  # type: ignore[assignment]
        a_desc, a_mn = _operand(lw, aview, 0, 64, kstep, op.loc, wg_rows)
    if (a_mn or b_mn) and atype not in ("f16", "bf16"):
        raise TLXCompileError(f"wgmma reads {atype} operands K-major only (the contiguous dim must be K)", op.loc,
                              hint="transpose the buffer layout or use 16-bit operands")
    em("wgmma.fence.sync.aligned")
    ptrue = lw.const("pred", "1")
    pfalse = lw.const("pred", "0")
    nregs = n // 2
    ins = f"wgmma.mma_async.sync.aligned.m64n{n}k{kstep}.{dtype}.{atype}.{btype}"
    # the immediates after scale-d: scale-a, scale-b, and the transposes of shared operands (16-bit types)
    if atype in ("f16", "bf16"):
        tail = ["1", "1"] + ([] if a_reg else ["1" if a_mn else "0"]) + ["1" if b_mn else "0"]
    else:
        tail = [] if atype in ("s8", "u8") else ["1", "1"]
    for i in range(n_mrep):
        for j in range(n_nrep):
            base = (i * n_nrep + j) * nregs
            dregs = "{" + ",".join(regs[base:base + nregs]) + "}"
            for kk in range(n_k):
                scale_d = ptrue if (acc_v is not None or kk > 0) else pfalse
                bd = em.new("b64", "add.s64", b_desc, str(_tile_delta(bview, (kk * kstep, j * n * wn), op.loc)))
                if a_reg:
                    a_opnd = braces(a_words[(i, kk)])
                else:
                    delta = _tile_delta(aview, (i * 16 * wm, kk * kstep), op.loc)
                    a_opnd = em.new("b64", "add.s64", a_desc, str(delta))
                em.root(ins, dregs, a_opnd, bd, scale_d, *tail)
    em("wgmma.commit_group.sync.aligned")


def _async_dot_wait(lw: KernelLowering, op: Operation) -> None:
    lw.e("wgmma.wait_group.sync.aligned", str(int(op.attrs["pendings"])))
    for v, r in zip(op.group("values"), op.results):
        lw.set(r, lw.val(v))
        lw.alias(r, v)


def _must_be_lowered(lw: KernelLowering, op: Operation) -> None:
    raise TLXCompileError(f"internal: {op.name} reached code generation; the pipeline lowers it before the fence "
                          "passes", op.loc)


#: op name -> its lowering (lower.py merges the tables of the lower_* modules)
LOWERINGS = {
    "tlx.fence_async_shared": _fence_async_shared, "tlx.fence": _fence, "tlx.cta_barrier": _cta_barrier,
    "tlx.named_barrier_wait": _named_barrier, "tlx.named_barrier_arrive": _named_barrier,
    "tlx.alloc_barriers": _alloc_barriers, "tlx.barrier_expect_bytes": _arrive, "tlx.barrier_arrive": _arrive,
    "tlx.barrier_inval": _inval, "tlx.barrier_wait": _wait, "tlx.tma_load": _tma_load, "tlx.tma_store": _tma_store,
    "tlx.tma_store_wait": _tma_store_wait, "tlx.tma_prefetch": _tma_prefetch, "tlx.async_bulk_load": _bulk_load,
    "tlx.async_store": _bulk_store, "tt.make_tensor_descriptor": _make_desc,
    "tlx.allocate_tensor_descriptor": _alloc_desc_slots, "tlx.desc_slot": _desc_slot,
    "tlx.reinterpret_tensor_descriptor": _reinterpret_desc, "tlx.async_dot": _async_dot,
    "tlx.async_dot_wait": _async_dot_wait, "tt.descriptor_load": _must_be_lowered,
    "tt.descriptor_store": _must_be_lowered,
}

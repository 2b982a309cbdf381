"""Lowering of structured control flow and warp specialization.

`scf.for` becomes a rotated loop (test before entry, test at the bottom), `scf.if` a branch
pair, `scf.while` a loop with the test after the "before" region. Loop-carried values live in
home registers: the initial value's own registers when nothing reads it after the loop starts
(no copies; an in-flight wgmma accumulator must not be copied), fresh ones otherwise.

`tlx.warp_specialize`: the default partition runs on warps [0, num_warps); worker partitions
follow (those of 4+ warps start on a warpgroup boundary) and the CTA is padded to whole
warpgroups. Dispatch is by warpgroup: each warpgroup first runs its `setmaxnreg` (when
registers are requested; every warp of a warpgroup must agree), then branches to its
partition; worker partitions end with `ret`, padding warps return at once, and the default
partition falls through into the code after the op. Named barriers: 0 is the default
partition's (or the CTA's), 1 is reserved (TLX's worker switch loop); the workers' own CTA
barriers take the lowest ids from 2 up that none of the kernel's `named_barrier_*` ops names
(a clash would join two unrelated barriers: a hang or a silent race), and a kernel that leaves
too few ids free is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, List, Optional

from ..errors import TLXCompileError
from ..ir import types as T
from ..ir.core import Operation
from .values import Barriers, Scalar, SmemView, Tensor, Token, even_register_split, reg_kind

if TYPE_CHECKING:
    from .lower import KernelLowering


# ---------------------------------------------------------------------------------------------
# homes for carried values
# ---------------------------------------------------------------------------------------------

def _restrict(regs, kinds, x, want):
    """Only the registers (of a tensor) whose indices are in `want` (all when want is None)."""
    if want is None or not isinstance(x, Tensor):
        return regs, kinds
    return [r for i, r in enumerate(regs) if i in want], [k for i, k in enumerate(kinds) if i in want]


def _home(lw: KernelLowering, init_value, region_value, op: Operation, claimed: set, want=None):
    """Registers where a carried value lives: the init's own registers when they may be
    overwritten (and no other carried value of this op took them), else fresh registers
    initialized with a copy."""
    x = lw.val(init_value)
    if isinstance(x, Token):
        return x
    regs, kinds = lw.flat_regs(x)
    if (lw.can_overwrite(init_value, op) and not any(r in lw.pinned or r in claimed for r in regs)
            and len(set(regs)) == len(regs) and all(r.startswith("%") for r in regs)):
        claimed.update(regs)
        return x
    h = lw.fresh_like(region_value, x)
    hr, hk = lw.flat_regs(h)
    hr, hk = _restrict(hr, hk, x, want)
    regs, _ = _restrict(regs, kinds, x, want)
    lw.copy_regs(hr, regs, hk)
    return h


def _yield_into(lw: KernelLowering, homes: List, values, loc_op: Operation, wants=None,
                merge: bool = False) -> None:
    """Copy the yielded values into their homes. `merge` (an if's branches): a view whose origin
    is static goes into a home whose origin is a register."""
    dsts: List[str] = []
    srcs: List[str] = []
    kinds: List[str] = []
    for k, (h, v) in enumerate(zip(homes, values)):
        x = lw.val(v)
        static = lambda o: "a register" if isinstance(o, str) else o  # noqa: E731
        if not _same_geometry(h, x):
            raise TLXCompileError("the branches of this if yield views of different buffers or shapes", loc_op.loc,
                                  hint="yield views of one buffer, or use each view inside its own branch")
        widen = merge and isinstance(h, SmemView) and isinstance(h.origin, str) and not isinstance(x.origin, str)
        if isinstance(h, SmemView) and isinstance(x, SmemView) and static(h.origin) != static(x.origin) and not widen:
            raise TLXCompileError("a loop-carried shared-memory view changes its sub-slice origin across "
                                  "iterations", loc_op.loc, hint="carry the buffer index instead of the view")
        hr, hk = lw.flat_regs(h)
        xr, _ = lw.flat_regs(x)
        if widen:
            xr = xr + [str(x.origin)]  # the static origin, moved into the home's register
        if len(hr) != len(xr):
            raise TLXCompileError("internal: a carried value changes its register count", loc_op.loc)
        want = wants[k] if wants is not None else None
        hr, hk = _restrict(hr, hk, x, want)
        xr, _ = _restrict(xr, xr, x, want)
        dsts += hr
        srcs += xr
        kinds += hk
    lw.copy_regs(dsts, srcs, kinds)


def _for(lw: KernelLowering, op: Operation) -> None:
    e = lw.e
    lb, ub, st = op.arg("lb"), op.arg("ub"), op.arg("step")
    it = lb.type
    blk = op.regions[0].block
    ct = f"{'s' if it.is_signed else 'u'}{it.bits}"  # type: ignore[union-attr]
    kind = reg_kind(it)
    iv = e.named(kind, lw.hint(blk.args[0], "iv"))
    lw.mov(kind, iv, lw.scalar(lb))
    claimed: set = set()
    wants = [lw._carried_need(op, k) for k in range(len(op.results))]
    homes = [_home(lw, v, a, op, claimed, w) for v, a, w in zip(op.group("inits"), blk.args[1:], wants)]
    head, exit_ = e.new_label("loop"), e.new_label("loop_exit")
    e("bra.uni", exit_, pred=e.new("pred", f"setp.ge.{ct}", iv, lw.scalar(ub)))
    e.label(head)
    lw.set(blk.args[0], Scalar(iv, it))
    for a, h in zip(blk.args[1:], homes):
        lw.set(a, h)
    lw.lower_ops(blk.ops[:-1])
    e.set_loc(blk.ops[-1].loc if blk.ops else op.loc)
    _yield_into(lw, homes, blk.terminator.operands, op, wants)  # type: ignore[union-attr]
    e(f"add.{ct}", iv, iv, lw.scalar(st))
    e("bra.uni", head, pred=e.new("pred", f"setp.lt.{ct}", iv, lw.scalar(ub)))
    e.label(exit_)
    for r, h in zip(op.results, homes):
        lw.set(r, h)
        _alias_home(lw, r, h, op)


def _alias_home(lw: KernelLowering, result, home, op: Operation) -> None:
    """Results share the home registers with the region's block arguments."""
    for r in op.regions:
        for a in r.block.args:
            if lw.vals.get(id(a)) is home:
                lw.alias(result, a)


_VIEW_TYPES = (T.MemDescType, T.BarrierType)


def _view_home(lw: KernelLowering, result, x, op: Operation):
    """The home of an if-result buffer view or barrier: the then-branch value's geometry in fresh
    registers; a view's origin always in a register, since the branches may take different
    sub-slices of one buffer (`s = buf[:, :64] if rank == 0 else buf[:, 64:]`)."""
    if isinstance(x, SmemView):
        h = lw.fresh_like(result, x)
        o = h.origin if isinstance(h.origin, str) else lw.e.named("b32", lw.hint(result, "carry") + "_origin")
        return replace(h, origin=o, origin_coords=None)
    if isinstance(x, Barriers):
        return replace(x, addr=lw.e.named("b32", lw.hint(result, "carry")))
    raise TLXCompileError("an if cannot choose between these values at run time", op.loc,
                          hint="use the value inside each branch instead of choosing it with the if")


def _same_geometry(h, x) -> bool:
    """Whether branch value `x` fits home `h`: the same buffer geometry, any base and origin."""
    if isinstance(h, SmemView) and isinstance(x, SmemView):
        return replace(x, base=h.base, origin=h.origin, origin_coords=h.origin_coords) == h
    if isinstance(h, Barriers) and isinstance(x, Barriers):
        return replace(x, addr=h.addr) == h
    return True


def _if(lw: KernelLowering, op: Operation) -> None:
    e = lw.e
    c = lw.scalar(op.arg("cond"))
    # views and barriers get their home from the then-branch value (their geometry is not in the type)
    homes = [None if isinstance(r.type, _VIEW_TYPES) else lw.home_for(r) for r in op.results]
    then_b, else_b = op.regions[0].block, op.regions[1].block
    else_empty = len(else_b.ops) == 1 and not homes
    l_else, l_end = e.new_label("else"), e.new_label("endif")
    e("bra", l_end if else_empty else l_else, pred="!" + c)
    lw.lower_ops(then_b.ops[:-1])
    then_vals = then_b.terminator.operands  # type: ignore[union-attr]
    homes = [h if h is not None else _view_home(lw, r, lw.val(v), op)
             for h, r, v in zip(homes, op.results, then_vals)]
    _yield_into(lw, homes, then_vals, op, merge=True)
    if not else_empty:
        e("bra.uni", l_end)
        e.label(l_else)
        lw.lower_ops(else_b.ops[:-1])
        _yield_into(lw, homes, else_b.terminator.operands, op, merge=True)  # type: ignore[union-attr]
    e.label(l_end)
    for r, h in zip(op.results, homes):
        lw.set(r, h)


def _while(lw: KernelLowering, op: Operation) -> None:
    e = lw.e
    before, after = op.regions[0].block, op.regions[1].block
    claimed: set = set()
    bhomes = [_home(lw, v, a, op, claimed) for v, a in zip(op.group("inits"), before.args)]
    ahomes = [lw.home_for(a) for a in after.args]
    head, exit_ = e.new_label("while"), e.new_label("while_exit")
    e.label(head)
    for a, h in zip(before.args, bhomes):
        lw.set(a, h)
    lw.lower_ops(before.ops[:-1])
    cond = before.terminator
    _yield_into(lw, ahomes, cond.operands[1:], op)  # type: ignore[union-attr]
    e("bra", exit_, pred="!" + lw.scalar(cond.operands[0]))  # type: ignore[union-attr]
    for a, h in zip(after.args, ahomes):
        lw.set(a, h)
    lw.lower_ops(after.ops[:-1])
    _yield_into(lw, bhomes, after.terminator.operands, op)  # type: ignore[union-attr]
    e("bra.uni", head)
    e.label(exit_)
    for r, h in zip(op.results, ahomes):
        lw.set(r, h)


def _terminator(lw: KernelLowering, op: Operation) -> None:
    """Handled by the region op that owns the block."""


def _return(lw: KernelLowering, op: Operation) -> None:
    """tt.return, and tlx.ws_return at the end of a worker partition."""
    lw.e("ret")


# ---------------------------------------------------------------------------------------------
# warp specialization
# ---------------------------------------------------------------------------------------------

@dataclass
class PartitionPlan:
    """Where each partition runs: first warp and warp count (index 0 = default), the CTA's
    warps, and the register count of each warpgroup (None without setmaxnreg)."""

    first_warp: List[int]
    num_warps: List[int]
    total_warps: int
    wg_regs: Optional[List[int]]
    entry_regs: int


def plan_partitions(lw: KernelLowering, op: Operation) -> PartitionPlan:
    """Place partitions on warps and split the register file (TLX's rule, see the module doc)."""
    nw = [lw.num_warps] + [int(w) for w in op.attrs.get("partition_num_warps", [])]
    first = [0]
    start = lw.num_warps + (-lw.num_warps) % 4  # workers never share the default's warpgroups
    for w in nw[1:]:
        if w <= 0 or w & (w - 1):
            raise TLXCompileError(f"a warp-specialize partition has {w} warps; use 1, 2, 4, 8...", op.loc)
        if w >= 4 and start % 4:
            start += 4 - start % 4
        elif w < 4 and start % w:
            start += w - start % w
        if w < 4 and (start % 4) + w > 4:
            start += 4 - start % 4
        first.append(start)
        start += w
    total = start + (-start) % 4
    nwg = total // 4
    regs_attr = list(op.attrs.get("partition_registers", []) or [])
    dflt = op.attrs.get("default_registers")
    requested = [dflt] + (regs_attr if regs_attr else [None] * (len(nw) - 1))
    requested = [None if (r is None or r == 0) else int(r) for r in requested]
    per_thread = even_register_split(total * 32)  # the cap at entry
    wg_regs: Optional[List[int]] = None
    if any(r is not None for r in requested):
        for r in requested:
            if r is not None and (r % 8 or r < 24 or r > 256):
                raise TLXCompileError(f"registers={r}: setmaxnreg needs a multiple of 8 in [24, 256]", op.loc)
        # warpgroup → the partitions in it
        owners: List[List[int]] = [[] for _ in range(nwg)]
        for k, (f, w) in enumerate(zip(first, nw)):
            for wi in range(f, f + w):
                if k not in owners[wi // 4]:
                    owners[wi // 4].append(k)
        fixed: List[Optional[int]] = []
        for g, ks in enumerate(owners):
            vals = {requested[k] for k in ks if requested[k] is not None}
            if len(vals) > 1:
                raise TLXCompileError(f"partitions {ks} share warpgroup {g} but ask for different registers {sorted(vals)}",
                                      op.loc, hint="give partitions that share a warpgroup the same registers=")
            fixed.append(vals.pop() if vals else None)
        left = per_thread * nwg - sum(r for r in fixed if r is not None)
        free = [g for g, r in enumerate(fixed) if r is None]
        if free:
            share = left // len(free)
            share -= share % 8
            share = min(share, 256)
            if share < 24:
                raise TLXCompileError(f"the requested registers leave {share} per thread for the other partitions "
                                      "(at least 24 are needed)", op.loc, hint="request fewer registers")
            for g in free:
                fixed[g] = share
        if sum(fixed) > per_thread * nwg:  # type: ignore[arg-type]
            raise TLXCompileError(f"the partitions ask for {sum(fixed)} registers per thread-warpgroup, more than the "  # type: ignore
                                  f"{per_thread * nwg} the register file holds for {total * 32} threads", op.loc,
                                  hint="request fewer registers")
        wg_regs = [int(r) for r in fixed]  # type: ignore[arg-type]
    return PartitionPlan(first, nw, total, wg_regs, per_thread)


def _warp_specialize(lw: KernelLowering, op: Operation) -> None:
    e = lw.e
    plan = plan_partitions(lw, op)
    main = lw.part
    if main.index != -1:
        raise TLXCompileError("warp_specialize cannot be nested", op.loc)
    nparts = len(plan.num_warps)
    if plan.wg_regs is not None:
        lw.setmaxnreg_used = True
    # entering warp specialization synchronizes the CTA (the CTA-barrier pass relies on it)
    lw.part_barrier()
    # dispatch by warpgroup
    raw = e.new("b32", "mov.u32", "%tid.x")
    wg = e.new("b32", "shr.u32", raw, "7")
    wgu = e.new("b32", "shfl.sync.idx.b32", wg, "0", "31", "-1")
    # the warp index the worker warpgroups test below: computed here, before the branches (code
    # placed after the default partition's unconditional branch would never run)
    warp_raw = e.new("b32", "shr.u32", raw, "5")
    warp_u = e.new("b32", "shfl.sync.idx.b32", warp_raw, "0", "31", "-1")
    nwg = plan.total_warps // 4
    labels = [e.new_label(f"wg{g}") for g in range(nwg)]
    l_default = e.new_label("ws_default")
    default_wgs = {w // 4 for w in range(plan.first_warp[0], plan.first_warp[0] + plan.num_warps[0])}
    worker_wgs = [g for g in range(nwg) if g not in default_wgs]
    for g in worker_wgs:
        e("bra", labels[g], pred=e.new("pred", "setp.eq.u32", wgu, str(g)))
    e("bra.uni", l_default)
    # worker warpgroups: setmaxnreg, then to the partition of the warp's range
    part_labels = [None] + [e.new_label(f"partition{k - 1}") for k in range(1, nparts)]
    for g in worker_wgs:
        e.label(labels[g])
        _setmaxnreg(lw, plan, g)
        for k in range(1, nparts):
            f, w = plan.first_warp[k], plan.num_warps[k]
            if f // 4 <= g <= (f + w - 1) // 4:
                p = e.new("pred", "setp.ge.u32", warp_u, str(max(f, 4 * g)))
                q = e.new("pred", "setp.lt.u32", warp_u, str(min(f + w, 4 * g + 4)))
                e("bra", part_labels[k], pred=e.new("pred", "and.pred", p, q))
        e("ret")  # padding warps
    # worker partitions
    caps = op.group("captures")
    for c in caps:
        if isinstance(c.type, T.TensorType):
            raise TLXCompileError("a register tensor cannot be captured by a warp-specialize partition (other "
                                  "warps hold its registers)", op.loc,
                                  hint="recompute the tensor inside the partition, or pass it through shared memory")
    ids = worker_barrier_ids(lw.func, nparts - 1, op)
    for k in range(1, nparts):
        region = op.regions[k]
        e.label(part_labels[k])  # type: ignore[arg-type]
        for a, c in zip(region.block.args, caps):
            lw.set(a, lw.val(c))
        lw.part = lw.make_partition(k - 1, plan.num_warps[k], plan.first_warp[k], ids[k - 1], False)
        lw.lower_body(region.block.ops)
        lw.part = main
        if not region.block.ops or region.block.ops[-1].name != "tlx.ws_return":
            e("ret")
    # the default partition, then the code after the op
    e.label(l_default)
    _setmaxnreg(lw, plan, min(default_wgs))
    main.whole_cta = False
    main.num_warps = plan.num_warps[0]
    main.index = 0
    lw.lower_ops(op.regions[0].block.ops)


NAMED_BARRIER_OPS = ("tlx.named_barrier_wait", "tlx.named_barrier_arrive")


def worker_barrier_ids(func: Operation, workers: int, ws: Operation) -> List[int]:
    """The named-barrier ids of the worker partitions' CTA barriers: the lowest from 2 up that no
    `named_barrier_*` op of the kernel names."""
    taken: set = set()
    func.walk(lambda o: taken.add(int(o.attrs["id"])) if o.name in NAMED_BARRIER_OPS else None)
    free = [i for i in range(2, 16) if i not in taken]
    if len(free) < workers:
        raise TLXCompileError(f"the kernel's {workers} worker partitions need {workers} named barriers of their own, "
                              f"but its named_barrier ops leave only {len(free)} of the ids 2..15 free "
                              f"(it uses {sorted(taken)})", ws.loc,
                              hint="use fewer distinct named-barrier ids, or fewer partitions")
    return free[:workers]


def _setmaxnreg(lw: KernelLowering, plan: PartitionPlan, g: int) -> None:
    r = plan.wg_regs[g] if plan.wg_regs is not None else plan.entry_regs
    if r != plan.entry_regs:
        lw.e(f"setmaxnreg.{'inc' if r > plan.entry_regs else 'dec'}.sync.aligned.u32", str(r))


#: op name -> its lowering (lower.py merges the tables of the lower_* modules)
LOWERINGS = {
    "scf.for": _for, "scf.if": _if, "scf.while": _while, "scf.yield": _terminator, "scf.condition": _terminator,
    "tlx.ws_yield": _terminator, "tt.return": _return, "tlx.ws_return": _return,
    "tlx.warp_specialize": _warp_specialize,
}

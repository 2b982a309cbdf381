"""Lowering of ops that rearrange tensors: broadcast, expand_dims, reshape, trans, join, split,
layout conversions, hints and reductions.

Shape ops move no data: the layout pass gives the result a layout in which every thread already
holds the elements it needs, so the result's registers are a re-indexing of the source's.
A layout conversion is a register renaming when every thread holds the same elements in both
layouts, and otherwise goes through the op's scratch shared memory (generic stores, a partition
barrier, generic loads). A reduction combines registers inside a thread, then lanes with
butterfly shuffles, then warps through scratch shared memory.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, List, Optional

from ..errors import TLXCompileError
from ..ir import types as T
from ..ir.core import Operation
from ..analysis import layout_math as LM
from . import layout_rules as R
from .lower_arith import norm8, to_f32
from .lower_memory import pack_words, scratch_view, smem_load, smem_store
from .ptx import address, braces
from .values import Scalar, Tensor, float_suffix, int_bits, reg_kind

if TYPE_CHECKING:
    from .lower import KernelLowering


def remap(lw: KernelLowering, src: Tensor, dst: LM.LinearMap, f: Callable, what: str, loc,
          f_lin: Optional[Callable] = None) -> List[str]:
    """Registers of `dst` taken from `src`, where f maps a dst coordinate to the src coordinate
    (f_lin: its linear part, which maps lane and warp bases; f itself when omitted); every thread
    must already hold what it needs."""
    lin = f_lin or f
    for a, b in ((dst.lane, src.lmap.lane), (dst.warp, src.lmap.warp)):
        if [lin(x) for x in a] != list(b):
            raise TLXCompileError(f"internal: {what}: the source layout does not hold the result's elements in the "
                                  "same threads (the layout pass should have converted it)", loc)
    idx = src.lmap.reg_index()
    out = []
    for c in dst.reg_coords():
        s = f(c)
        if s not in idx:
            raise TLXCompileError(f"internal: {what}: element {s} is not in the thread's registers", loc)
        out.append(src.regs[idx[s]])
    return out


def _on_src_regs(lw: KernelLowering, op: Operation, regs: List[str], m: LM.LinearMap, k: int = 0) -> None:
    """Result k of `op` is `regs` (registers of its source) under layout m."""
    r = op.results[k]
    lw.set(r, Tensor(regs, m, r.type.element))
    lw.alias(r, op.arg("src"))


def _rearrange(lw: KernelLowering, op: Operation, f: Callable, f_lin: Optional[Callable] = None, k: int = 0) -> None:
    """Result k of a shape op: its source's registers re-indexed by f (result coordinate ->
    source coordinate; f_lin its linear part, see `remap`)."""
    m = lw.lmap(op.results[k].type)
    _on_src_regs(lw, op, remap(lw, lw.tensor(op.arg("src")), m, f, op.name, op.loc, f_lin), m, k)


def _broadcast(lw: KernelLowering, op: Operation) -> None:
    sshape = op.arg("src").type.shape
    _rearrange(lw, op, lambda c: tuple(0 if sshape[d] == 1 else x for d, x in enumerate(c)))


def _expand_dims(lw: KernelLowering, op: Operation) -> None:
    s, ax = lw.val(op.arg("src")), op.attrs["axis"]
    if isinstance(s, Scalar):
        m = lw.lmap(op.result.type)
        lw.set(op.result, Tensor([s.reg] * m.num_regs, m, op.result.type.element))
        return
    _rearrange(lw, op, lambda c: tuple(c[:ax]) + tuple(c[ax + 1:]))


def _reshape(lw: KernelLowering, op: Operation) -> None:
    sshape, dshape = tuple(op.arg("src").type.shape), tuple(op.result.type.shape)
    _rearrange(lw, op, lambda c: LM._reshape_basis(c, dshape, sshape))


def _trans(lw: KernelLowering, op: Operation) -> None:
    order = list(op.attrs["order"])
    inv = [order.index(d) for d in range(len(order))]
    _rearrange(lw, op, lambda c: tuple(c[i] for i in inv))


def _join(lw: KernelLowering, op: Operation) -> None:
    a, b = lw.tensor(op.arg("lhs")), lw.tensor(op.arg("rhs"))
    t = op.result.type
    m = lw.lmap(t)
    idx = a.lmap.reg_index()
    for x, y in ((m.lane, a.lmap.lane), (m.warp, a.lmap.warp)):
        if [c[:-1] for c in x] != list(y) or any(c[-1] for c in x):
            raise TLXCompileError("internal: join result layout does not match its operands", op.loc)
    regs = []
    for c in m.reg_coords():
        src = a if c[-1] == 0 else b
        regs.append(src.regs[idx[c[:-1]]])
    lw.set(op.result, Tensor(regs, m, t.element))
    lw.alias(op.result, op.arg("lhs"))
    lw.alias(op.result, op.arg("rhs"))


def _split(lw: KernelLowering, op: Operation) -> None:
    for k in range(len(op.results)):
        _rearrange(lw, op, lambda c, k=k: tuple(c) + (k,), lambda c: tuple(c) + (0,), k)


def _hint(lw: KernelLowering, op: Operation) -> None:
    lw.set(op.result, lw.val(op.arg("src")))
    lw.alias(op.result, op.arg("src"))


def _convert(lw: KernelLowering, op: Operation) -> None:
    s = lw.tensor(op.arg("src"))
    t = op.result.type
    m = lw.lmap(t)
    kind = R.convert_kind(s.lmap, m)
    if kind in ("none", "regs"):
        _on_src_regs(lw, op, remap(lw, s, m, lambda c: c, op.name, op.loc) if kind == "regs" else list(s.regs), m)
        return
    rounds = R.convert_rounds(s.lmap, m, R.elem_bytes(t.element))
    if not rounds:
        view = scratch_view(lw, op, tuple(t.shape), t.element)
        smem_store(lw, view, s)
        lw.part_barrier()  # other threads' stores before this thread's loads (around the op: CTA-barrier pass)
        regs = smem_load(lw, view, m, t.element, lw.hint(op.result, "cvt"))
        lw.set(op.result, Tensor(regs, m, t.element))
        return
    # one sub-tile at a time through a scratch of its size (R.convert_rounds)
    sub_s, sub_d = R.drop_round_bits(s.lmap, rounds), R.drop_round_bits(m, rounds)
    view = scratch_view(lw, op, sub_d.shape, t.element)
    regs: List[str] = [""] * m.num_regs
    for r in range(1 << len(rounds)):
        if r:
            lw.part_barrier()  # every thread's loads of the last round before this round's stores
        smem_store(lw, view, Tensor([s.regs[i] for i in _round_regs(s.lmap, rounds, r)], sub_s, s.elem))
        lw.part_barrier()
        part = smem_load(lw, view, sub_d, t.element, lw.hint(op.result, "cvt"))
        for i, x in zip(_round_regs(m, rounds, r), part):
            regs[i] = x
    lw.set(op.result, Tensor(regs, m, t.element))


def _round_regs(m: LM.LinearMap, rounds, r: int) -> List[int]:
    """Register indices of layout `m` in round `r` (bit j of r: the value of rounds[j]), in the
    order of the round's sub-tile layout (`R.drop_round_bits`)."""
    pos = [m.reg.index(b) for b in rounds]
    fixed = sum(1 << p for j, p in enumerate(pos) if (r >> j) & 1)
    free = [i for i in range(len(m.reg)) if i not in pos]
    out = []
    for k in range(1 << len(free)):
        idx = fixed
        for j, p in enumerate(free):
            if (k >> j) & 1:
                idx |= 1 << p
        out.append(idx)
    return out


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------

def _combiner(lw: KernelLowering, kind: str, e: T.ScalarType, loc) -> Callable[[str, str, str], None]:
    em = lw.e
    if e.bits == 1:
        ops = {"and": "and.pred", "or": "or.pred", "xor_sum": "xor.pred", "max": "or.pred", "min": "and.pred",
               "sum": "xor.pred"}
        if kind not in ops:
            raise TLXCompileError(f"reduce {kind} on i1 is not supported", loc)
        return lambda d, a, b: em(ops[kind], d, a, b)
    if e.is_float:
        if e.storage_only:
            raise TLXCompileError("reduce on fp8 values is not supported", loc, hint="convert to f16 or f32 first")
        ty = float_suffix(e)
        if kind == "sum":
            return lambda d, a, b: em(f"add.{ty}", d, a, b)
        if kind == "prod":
            return lambda d, a, b: em(f"mul.{ty}", d, a, b)
        if kind in ("max", "min"):
            nan = ".NaN" if ty != "f64" else ""
            return lambda d, a, b: em(f"{kind}{nan}.{ty}", d, a, b)
        raise TLXCompileError(f"reduce {kind} on floats is not supported", loc)
    bits = int_bits(e)
    sg = "s" if e.is_signed else "u"
    table = {"sum": f"add.s{bits}", "prod": f"mul.lo.s{bits}", "max": f"max.{sg}{bits}", "min": f"min.{sg}{bits}",
             "xor_sum": f"xor.b{bits}", "and": f"and.b{bits}", "or": f"or.b{bits}"}
    if kind not in table:
        raise TLXCompileError(f"reduce {kind} is not supported on {e.name}", loc)
    if e.bits == 8 and kind in ("max", "min"):
        return lambda d, a, b: em(table[kind], d, norm8(lw, a, e), norm8(lw, b, e))
    return lambda d, a, b: em(table[kind], d, a, b)


def _arg_combiner(lw: KernelLowering, kind: str, e: T.ScalarType, loc):
    """Combine (value, index) pairs: the larger (smaller) value wins, ties go to the smaller index."""
    em = lw.e
    if e.is_float:
        ty = None if e.name == "bf16" else float_suffix(e)  # bf16 is compared in f32
    else:
        ty = f"{'s' if e.is_signed else 'u'}{int_bits(e)}"
    cmp = "gt" if kind == "argmax" else "lt"
    k = reg_kind(e)

    def comb(dv: str, di: str, av: str, ai: str, bv: str, bi: str) -> None:
        x, y, t = av, bv, ty
        if t is None:
            x, y, t = to_f32(lw, av, e), to_f32(lw, bv, e), "f32"
        def pred(ins: str, *args: str) -> str:
            return em.new("pred", ins, *args)

        better = pred(f"setp.{cmp}.{t}", y, x)
        eq = pred(f"setp.eq.{t}", y, x)
        lt_idx = pred("setp.lt.s32", bi, ai)
        take_b = pred("or.pred", better, pred("and.pred", eq, lt_idx))  # better, or tied at a lower index
        if e.is_float:
            # a NaN wins (as numpy's argmax) unless the current one is already NaN
            b_nan = pred(f"setp.nan.{t}", y, y)
            take_b = pred("or.pred", take_b, pred("and.pred", b_nan, pred(f"setp.num.{t}", x, x)))
            a_nan = pred(f"setp.nan.{t}", x, x)
            keep_a = pred("and.pred", take_b, pred("not.pred", a_nan))
            take_b = pred("or.pred", keep_a, pred("and.pred", pred("and.pred", a_nan, b_nan), lt_idx))
        em(f"selp.b{k[1:]}", dv, bv, av, take_b)
        em("selp.b32", di, bi, ai, take_b)

    return comb


def _shfl(lw: KernelLowering, r: str, kind: str, mask: int) -> str:
    """The value of register r in lane (lane ^ mask)."""
    em = lw.e

    def bfly(x: str) -> str:
        return em.new("b32", "shfl.sync.bfly.b32", x, str(mask), "31", "-1")

    if kind == "b32":
        return bfly(r)
    if kind == "b16":
        return em.new("b16", "cvt.u16.u32", bfly(em.new("b32", "cvt.u32.u16", r)))
    if kind == "pred":
        return em.new("pred", "setp.ne.b32", bfly(em.new("b32", "selp.b32", "1", "0", r)), "0")
    lo, hi = em.tmp("b32"), em.tmp("b32")
    em("mov.b64", braces([lo, hi]), r)
    return em.new("b64", "mov.b64", braces([bfly(lo), bfly(hi)]))


def _reduce(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    s = lw.tensor(op.arg("src"))
    ax, kind = op.attrs["axis"], op.attrs["kind"]
    e: T.ScalarType = s.elem  # type: ignore[assignment]
    arg = kind in ("argmax", "argmin")  # partial results are (value, index) pairs, else (value,)
    sm, res = s.lmap, op.result
    rt = res.type
    k = reg_kind(e)
    rm = lw.lmap(rt) if isinstance(rt, T.TensorType) else \
        LM.LinearMap((), tuple(() for _ in sm.lane), tuple(() for _ in sm.warp), ())
    ridx = rm.reg_index()
    drop = lambda c: tuple(c[:ax]) + tuple(c[ax + 1:])  # noqa: E731
    for a, b in ((rm.lane, sm.lane), (rm.warp, sm.warp)):
        if list(a) != [drop(x) for x in b]:
            raise TLXCompileError("internal: reduce result layout is not the slice of its source", op.loc)
    groups: List[List[int]] = [[] for _ in range(rm.num_regs)]
    for i, c in enumerate(sm.reg_coords()):
        groups[ridx[drop(c)]].append(i)
    comb = _arg_combiner(lw, kind, e, op.loc) if arg else _combiner(lw, kind, e, op.loc)

    def combine(x: tuple, y: tuple) -> tuple:
        if arg:
            dv, di = em.tmp(k), em.tmp("b32")
            comb(dv, di, x[0], x[1], y[0], y[1])  # type: ignore[call-arg]
            return dv, di
        d = em.tmp(k)
        comb(d, x[0], y[0])  # type: ignore[call-arg]
        return (d,)

    # in each thread: a tree over the registers of each result element (with each element's
    # index along the axis: the thread's part of the coordinate plus the register's)
    if arg:
        tc, tmask = lw.thread_coord(sm, ax)
        coords = sm.reg_coords()
    parts = []
    for g in groups:
        items = [(s.regs[i], lw.thread_plus(tc, tmask, coords[i][ax])) if arg else (s.regs[i],) for i in g]
        while len(items) > 1:
            items = [combine(items[j], items[j + 1]) for j in range(0, len(items) - 1, 2)] + \
                (items[-1:] if len(items) % 2 else [])
        parts.append(items[0])
    # across lanes
    for j, b in enumerate(sm.lane):
        if b[ax]:
            for r, x in enumerate(parts):
                parts[r] = combine(x, tuple(_shfl(lw, reg, kind_, 1 << j) for reg, kind_ in zip(x, (k, "b32"))))
    # across warps, through scratch: slot (warp index along the axis, flat result element)
    wbits = [j for j, b in enumerate(sm.warp) if b[ax]]
    if wbits:
        out_shape = tuple(rt.shape) if isinstance(rt, T.TensorType) else (1,)
        n_out = math.prod(out_shape)
        eb = e.bytes if k != "pred" else 1
        per = eb + (4 if arg else 0)
        base = lw.scratch(op)
        strides = [math.prod(out_shape[d + 1:]) for d in range(len(out_shape))]
        flat_of = lambda c: sum(ci * st for ci, st in zip(c, strides)) if c else 0  # noqa: E731
        t_flat, fmask = lw.thread_linear([flat_of(b) for b in rm.lane], [flat_of(b) for b in rm.warp])
        wai_vals = [0] * len(sm.warp)
        for rank, j in enumerate(wbits):
            wai_vals[j] = 1 << rank
        t_wai, _ = lw.thread_linear([0] * len(sm.lane), wai_vals)
        slot_addr: List[str] = []
        for x, c in zip(parts, rm.reg_coords()):
            f = lw.thread_plus(t_flat, fmask, flat_of(c))
            slot_addr.append(f)
            w = em.new("b32", "mad.lo.s32", t_wai, str(n_out), f)  # type: ignore[arg-type]
            a = em.new("b32", "mad.lo.s32", w, str(per), base)
            words, wt = pack_words(lw, [x[0]], e, eb)
            em(f"st.shared.{wt}", f"[{a}]", words[0])
            if arg:
                em("st.shared.b32", f"[{a}+{eb}]", x[1])
        lw.part_barrier()
        for r in range(len(parts)):
            cur = None
            for wi in range(1 << len(wbits)):
                a = em.new("b32", "mad.lo.s32", slot_addr[r], str(per), base)
                off = wi * n_out * per
                got = (_ld_scalar(lw, a, off, k, eb),)
                if arg:
                    ix = em.new("b32", "ld.shared.b32", f"[{a}+{off + eb}]")
                    got += (ix,)
                cur = got if cur is None else combine(cur, got)
            parts[r] = cur  # type: ignore[assignment]
    ok = "b32" if arg else k
    final = em.named_array(ok, len(parts), lw.hint(res, "red"))
    for d, x in zip(final, parts):
        lw.mov(ok, d, x[-1])
    if isinstance(rt, T.TensorType):
        lw.set(res, Tensor(final, rm, rt.element))
    else:
        lw.set(res, Scalar(final[0], rt))


def _ld_scalar(lw: KernelLowering, addr: str, off: int, kind: str, eb: int) -> str:
    em = lw.e
    a = address(addr, off)
    if kind == "pred":
        return em.new("pred", "setp.ne.b16", em.new("b16", "ld.shared.u8", a), "0")
    return em.new(kind, "ld.shared.u8" if kind == "b16" and eb == 1 else f"ld.shared.{kind}", a)


#: op name -> its lowering (lower.py merges the tables of the lower_* modules)
LOWERINGS = {
    "tt.broadcast": _broadcast, "tt.expand_dims": _expand_dims, "tt.reshape": _reshape, "tt.trans": _trans,
    "tt.join": _join, "tt.split": _split, "tt.hint": _hint, "tt.convert_layout": _convert, "tt.reduce": _reduce,
}

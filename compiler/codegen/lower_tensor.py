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

from typing import Callable, List, Optional, Tuple

from ..errors import TLXCompileError
from ..ir import types as T
from ..ir.core import Operation
from ..analysis import layout_math as LM
from . import layout_rules as R
from .lower import KernelLowering, lowers
from .lower_memory import scratch_view, smem_load, smem_store
from .values import Scalar, Tensor, float_suffix, reg_kind


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


def _set_alias(lw: KernelLowering, op: Operation, regs: List[str], m: LM.LinearMap, e, src_v, k: int = 0) -> None:
    lw.set(op.results[k], Tensor(regs, m, e))
    lw.alias(op.results[k], src_v)


@lowers("tt.broadcast")
def _broadcast(lw: KernelLowering, op: Operation) -> None:
    s = lw.tensor(op.arg("src"))
    t = op.result.type
    m = lw.lmap(t)
    sshape = op.arg("src").type.shape
    f = lambda c: tuple(0 if sshape[d] == 1 else c[d] for d in range(len(c)))  # noqa: E731
    _set_alias(lw, op, remap(lw, s, m, f, "broadcast", op.loc), m, t.element, op.arg("src"))


@lowers("tt.expand_dims")
def _expand_dims(lw: KernelLowering, op: Operation) -> None:
    s = lw.val(op.arg("src"))
    t = op.result.type
    m = lw.lmap(t)
    ax = op.attrs["axis"]
    if isinstance(s, Scalar):
        lw.set(op.result, Tensor([s.reg] * m.num_regs, m, t.element))
        return
    f = lambda c: tuple(c[:ax]) + tuple(c[ax + 1:])  # noqa: E731
    _set_alias(lw, op, remap(lw, s, m, f, "expand_dims", op.loc), m, t.element, op.arg("src"))  # type: ignore[arg-type]


@lowers("tt.reshape")
def _reshape(lw: KernelLowering, op: Operation) -> None:
    s = lw.tensor(op.arg("src"))
    t = op.result.type
    m = lw.lmap(t)
    sshape, dshape = tuple(op.arg("src").type.shape), tuple(t.shape)
    f = lambda c: LM._reshape_basis(c, dshape, sshape)  # noqa: E731
    _set_alias(lw, op, remap(lw, s, m, f, "reshape", op.loc), m, t.element, op.arg("src"))


@lowers("tt.trans")
def _trans(lw: KernelLowering, op: Operation) -> None:
    s = lw.tensor(op.arg("src"))
    t = op.result.type
    m = lw.lmap(t)
    order = list(op.attrs["order"])

    def f(c):
        out = [0] * len(c)
        for i, o in enumerate(order):
            out[o] = c[i]
        return tuple(out)

    _set_alias(lw, op, remap(lw, s, m, f, "trans", op.loc), m, t.element, op.arg("src"))


@lowers("tt.join")
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


@lowers("tt.split")
def _split(lw: KernelLowering, op: Operation) -> None:
    s = lw.tensor(op.arg("src"))
    for k, r in enumerate(op.results):
        m = lw.lmap(r.type)
        f = lambda c, k=k: tuple(c) + (k,)  # noqa: E731
        f_lin = lambda c: tuple(c) + (0,)  # noqa: E731
        _set_alias(lw, op, remap(lw, s, m, f, "split", op.loc, f_lin), m, r.type.element, op.arg("src"), k)


@lowers("tt.hint")
def _hint(lw: KernelLowering, op: Operation) -> None:
    x = lw.val(op.arg("src"))
    lw.set(op.result, x)
    lw.alias(op.result, op.arg("src"))


@lowers("tt.convert_layout")
def _convert(lw: KernelLowering, op: Operation) -> None:
    s = lw.tensor(op.arg("src"))
    t = op.result.type
    m = lw.lmap(t)
    kind = R.convert_kind(s.lmap, m)
    if kind in ("none", "regs"):
        regs = remap(lw, s, m, lambda c: c, "convert_layout", op.loc) if kind == "regs" else list(s.regs)
        _set_alias(lw, op, regs, m, t.element, op.arg("src"))
        return
    view = scratch_view(lw, op, tuple(t.shape), t.element)
    smem_store(lw, view, s)
    lw.part_barrier()  # other threads' stores before this thread's loads (around the op: CTA-barrier pass)
    regs = smem_load(lw, view, m, t.element, lw.hint(op.result, "cvt"))
    lw.set(op.result, Tensor(regs, m, t.element))


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
    bits = 16 if e.bits <= 16 else e.bits
    sg = "s" if e.is_signed else "u"
    table = {"sum": f"add.s{bits}", "prod": f"mul.lo.s{bits}", "max": f"max.{sg}{bits}", "min": f"min.{sg}{bits}",
             "xor_sum": f"xor.b{bits}", "and": f"and.b{bits}", "or": f"or.b{bits}"}
    if kind not in table:
        raise TLXCompileError(f"reduce {kind} is not supported on {e.name}", loc)
    if e.bits == 8 and kind in ("max", "min"):
        from .lower_arith import norm8

        def c8(d, a, b):
            em(table[kind], d, norm8(lw, a, e), norm8(lw, b, e))
        return c8
    return lambda d, a, b: em(table[kind], d, a, b)


def _arg_combiner(lw: KernelLowering, kind: str, e: T.ScalarType, loc):
    """Combine (value, index) pairs: the larger (smaller) value wins, ties go to the smaller index."""
    em = lw.e
    if e.is_float:
        ty = float_suffix(e)
        if ty == "bf16":
            ty = None  # compared in f32
    else:
        ty = f"{'s' if e.is_signed else 'u'}{16 if e.bits <= 16 else e.bits}"
    cmp = "gt" if kind == "argmax" else "lt"
    k = reg_kind(e)

    def comb(dv: str, di: str, av: str, ai: str, bv: str, bi: str) -> None:
        x, y = av, bv
        t = ty
        if t is None:
            x, y = em.tmp("b32"), em.tmp("b32")
            em("cvt.f32.bf16", x, av)
            em("cvt.f32.bf16", y, bv)
            t = "f32"
        better, eq, lt_idx, tie, take_b = (em.tmp("pred") for _ in range(5))
        em(f"setp.{cmp}.{t}", better, y, x)
        em(f"setp.eq.{t}", eq, y, x)
        em("setp.lt.s32", lt_idx, bi, ai)
        em("and.pred", tie, eq, lt_idx)
        em("or.pred", take_b, better, tie)
        if e.is_float:
            # a NaN wins (as numpy's argmax) unless the current one is already NaN
            bn, an, nb = em.tmp("pred"), em.tmp("pred"), em.tmp("pred")
            em(f"setp.nan.{t}", bn, y, y)
            em(f"setp.num.{t}", an, x, x)
            em("and.pred", nb, bn, an)
            t2 = em.tmp("pred")
            em("or.pred", t2, take_b, nb)
            take_b = t2
            an2, t3 = em.tmp("pred"), em.tmp("pred")
            em(f"setp.nan.{t}", an2, x, x)
            em("not.pred", t3, an2)
            t4 = em.tmp("pred")
            em("and.pred", t4, take_b, t3)
            t5 = em.tmp("pred")
            em("and.pred", t5, an2, bn)
            t6 = em.tmp("pred")
            em("and.pred", t6, t5, lt_idx)
            t7 = em.tmp("pred")
            em("or.pred", t7, t4, t6)
            take_b = t7
        em(f"selp.b{k[1:]}", dv, bv, av, take_b)
        em("selp.b32", di, bi, ai, take_b)

    return comb


def _shfl(lw: KernelLowering, r: str, kind: str, mask: int) -> str:
    """The value of register r in lane (lane ^ mask)."""
    em = lw.e
    if kind == "b32":
        d = em.tmp("b32")
        em("shfl.sync.bfly.b32", d, r, str(mask), "31", "-1")
        return d
    if kind == "b16":
        w, d32, d = em.tmp("b32"), em.tmp("b32"), em.tmp("b16")
        em("cvt.u32.u16", w, r)
        em("shfl.sync.bfly.b32", d32, w, str(mask), "31", "-1")
        em("cvt.u16.u32", d, d32)
        return d
    if kind == "pred":
        w, d32, d = em.tmp("b32"), em.tmp("b32"), em.tmp("pred")
        em("selp.b32", w, "1", "0", r)
        em("shfl.sync.bfly.b32", d32, w, str(mask), "31", "-1")
        em("setp.ne.b32", d, d32, "0")
        return d
    lo, hi, a, b, d = em.tmp("b32"), em.tmp("b32"), em.tmp("b32"), em.tmp("b32"), em.tmp("b64")
    em("mov.b64", "{" + lo + ", " + hi + "}", r)
    em("shfl.sync.bfly.b32", a, lo, str(mask), "31", "-1")
    em("shfl.sync.bfly.b32", b, hi, str(mask), "31", "-1")
    em("mov.b64", d, "{" + a + ", " + b + "}")
    return d


@lowers("tt.reduce")
def _reduce(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    src_v = op.arg("src")
    s = lw.tensor(src_v)
    ax = op.attrs["axis"]
    kind = op.attrs["kind"]
    e: T.ScalarType = s.elem  # type: ignore[assignment]
    arg = kind in ("argmax", "argmin")
    sm = s.lmap
    res = op.result
    rt = res.type
    k = reg_kind(e)
    if isinstance(rt, T.TensorType):
        rm = lw.lmap(rt)
    else:
        rm = LM.LinearMap((), tuple(() for _ in sm.lane), tuple(() for _ in sm.warp), ())
    ridx = rm.reg_index()
    drop = lambda c: tuple(c[:ax]) + tuple(c[ax + 1:])  # noqa: E731
    for a, b in ((rm.lane, sm.lane), (rm.warp, sm.warp)):
        if list(a) != [drop(x) for x in b]:
            raise TLXCompileError("internal: reduce result layout is not the slice of its source", op.loc)
    groups: List[List[int]] = [[] for _ in range(rm.num_regs)]
    for i, c in enumerate(sm.reg_coords()):
        groups[ridx[drop(c)]].append(i)
    # index of each source register's element along the axis (thread part added below)
    if arg:
        tc, tmask = lw.thread_coord(sm, ax)
        coords = sm.reg_coords()
    comb = _arg_combiner(lw, kind, e, op.loc) if arg else _combiner(lw, kind, e, op.loc)
    vals: List[str] = []
    idxs: List[str] = []
    for g in groups:
        if arg:
            items = []
            for i in g:
                ix = em.tmp("b32")
                ca = coords[i][ax]
                if tc is None:
                    em("mov.b32", ix, str(ca))
                elif ca & tmask:
                    em("xor.b32", ix, tc, str(ca))
                else:
                    em("add.s32", ix, tc, str(ca))
                items.append((s.regs[i], ix))
            while len(items) > 1:
                nxt = []
                for j in range(0, len(items) - 1, 2):
                    (av, ai), (bv, bi) = items[j], items[j + 1]
                    dv, di = em.tmp(k), em.tmp("b32")
                    comb(dv, di, av, ai, bv, bi)  # type: ignore[call-arg]
                    nxt.append((dv, di))
                if len(items) % 2:
                    nxt.append(items[-1])
                items = nxt
            vals.append(items[0][0])
            idxs.append(items[0][1])
        else:
            items2 = [s.regs[i] for i in g]
            while len(items2) > 1:
                nxt2 = []
                for j in range(0, len(items2) - 1, 2):
                    d = em.tmp(k)
                    comb(d, items2[j], items2[j + 1])  # type: ignore[call-arg]
                    nxt2.append(d)
                if len(items2) % 2:
                    nxt2.append(items2[-1])
                items2 = nxt2
            vals.append(items2[0])
    # across lanes
    for j, b in enumerate(sm.lane):
        if not b[ax]:
            continue
        for r in range(len(vals)):
            ov = _shfl(lw, vals[r], k, 1 << j)
            if arg:
                oi = _shfl(lw, idxs[r], "b32", 1 << j)
                dv, di = em.tmp(k), em.tmp("b32")
                comb(dv, di, vals[r], idxs[r], ov, oi)  # type: ignore[call-arg]
                vals[r], idxs[r] = dv, di
            else:
                d = em.tmp(k)
                comb(d, vals[r], ov)  # type: ignore[call-arg]
                vals[r] = d
    # across warps, through scratch
    wbits = [j for j, b in enumerate(sm.warp) if b[ax]]
    if wbits:
        nwa = 1 << len(wbits)
        out_shape = tuple(rt.shape) if isinstance(rt, T.TensorType) else (1,)
        n_out = 1
        for x in out_shape:
            n_out *= x
        eb = max(1, e.bits // 8) if k != "pred" else 1
        per = eb + (4 if arg else 0)
        base = lw.scratch(op)
        # this thread's result element (flat index) and its warp index along the axis
        strides = []
        acc = 1
        for x in reversed(out_shape):
            strides.insert(0, acc)
            acc *= x
        flat_of = lambda c: sum(ci * st for ci, st in zip(c, strides)) if c else 0  # noqa: E731
        t_flat, fmask = lw.thread_linear([flat_of(b) for b in rm.lane], [flat_of(b) for b in rm.warp])
        wai_vals = [0] * len(sm.warp)
        for rank, j in enumerate(wbits):
            wai_vals[j] = 1 << rank
        t_wai, _ = lw.thread_linear([0] * len(sm.lane), wai_vals)
        rcoords = rm.reg_coords()
        slot_addr: List[str] = []
        for r in range(len(vals)):
            fl = flat_of(rcoords[r])
            f = em.tmp("b32")
            if t_flat is None:
                em("mov.b32", f, str(fl))
            elif fl & fmask:
                em("xor.b32", f, t_flat, str(fl))
            else:
                em("add.s32", f, t_flat, str(fl))
            slot_addr.append(f)
            w = em.tmp("b32")
            em("mad.lo.s32", w, t_wai, str(n_out), f)  # type: ignore[arg-type]
            a = em.tmp("b32")
            em("mad.lo.s32", a, w, str(per), base)
            _st_scalar(lw, a, vals[r], k, eb)
            if arg:
                em("st.shared.b32", f"[{a}+{eb}]", idxs[r])
        lw.part_barrier()
        for r in range(len(vals)):
            cur_v, cur_i = None, None
            for wi in range(nwa):
                a = em.tmp("b32")
                em("mad.lo.s32", a, slot_addr[r], str(per), base)
                off = wi * n_out * per
                v = _ld_scalar(lw, a, off, k, eb)
                ix = None
                if arg:
                    ix = em.tmp("b32")
                    em("ld.shared.b32", ix, f"[{a}+{off + eb}]")
                if cur_v is None:
                    cur_v, cur_i = v, ix
                elif arg:
                    dv, di = em.tmp(k), em.tmp("b32")
                    comb(dv, di, cur_v, cur_i, v, ix)  # type: ignore[call-arg]
                    cur_v, cur_i = dv, di
                else:
                    d = em.tmp(k)
                    comb(d, cur_v, v)  # type: ignore[call-arg]
                    cur_v = d
            vals[r] = cur_v  # type: ignore[assignment]
            if arg:
                idxs[r] = cur_i  # type: ignore[assignment]
    out = idxs if arg else vals
    ok = "b32" if arg else k
    final = em.named_array(ok, len(out), lw.hint(res, "red"))
    for d, x in zip(final, out):
        lw.mov(ok, d, x)
    if isinstance(rt, T.TensorType):
        lw.set(res, Tensor(final, rm, rt.element))
    else:
        lw.set(res, Scalar(final[0], rt))


def _st_scalar(lw: KernelLowering, addr: str, r: str, kind: str, eb: int) -> None:
    em = lw.e
    if kind == "pred":
        t = em.tmp("b16")
        em("selp.u16", t, "1", "0", r)
        em("st.shared.b8", f"[{addr}]", t)
    elif kind == "b16" and eb == 1:
        em("st.shared.b8", f"[{addr}]", r)
    else:
        em(f"st.shared.{kind}", f"[{addr}]", r)


def _ld_scalar(lw: KernelLowering, addr: str, off: int, kind: str, eb: int) -> str:
    em = lw.e
    a = f"[{addr}+{off}]" if off else f"[{addr}]"
    if kind == "pred":
        t, p = em.tmp("b16"), em.tmp("pred")
        em("ld.shared.u8", t, a)
        em("setp.ne.b16", p, t, "0")
        return p
    d = em.tmp(kind)
    if kind == "b16" and eb == 1:
        em("ld.shared.u8", d, a)
    else:
        em(f"ld.shared.{kind}", d, a)
    return d

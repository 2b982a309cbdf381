"""Lowering of warp-level ops and inline PTX: `tlx.vote_ballot_sync` (vote.sync.ballot, one per
register), `tlx.warp_redux` (a butterfly of shfl.sync.bfly and max/min per register: the
`redux.sync` of f32 that the real TLX uses needs sm_100a) and `tt.elementwise_inline_asm`
(the asm text once per `pack` elements, operands packed as `inline_asm.plan` says)."""

from __future__ import annotations

from typing import TYPE_CHECKING, List

from ..errors import TLXCompileError
from ..ir import types as T
from ..ir.core import Operation
from . import inline_asm
from .lower_memory import pack_words, unpack_words
from .values import Scalar, Tensor, reg_kind

if TYPE_CHECKING:  # pragma: no cover
    from .lower import KernelLowering

FULL_WARP = "-1"  # membermask / shuffle mask of all 32 lanes


def _reg(lw: KernelLowering, reg: str, kind: str) -> str:
    """`reg` as a register (an immediate is moved into one: asm and vote operands need registers)."""
    if reg.startswith("%"):
        return reg
    return lw.const(kind, reg)


def _regs_of(lw: KernelLowering, x) -> List[str]:
    if isinstance(x, Tensor):
        return list(x.regs)
    if isinstance(x, Scalar):
        return [x.reg]
    raise TLXCompileError("internal: expected a tensor or a scalar")


def _result(lw: KernelLowering, op: Operation, i: int, regs: List[str]) -> None:
    r = op.results[i]
    if isinstance(r.type, T.TensorType):
        lw.set(r, Tensor(regs, lw.lmap(r.type), r.type.element))
    else:
        lw.set(r, Scalar(regs[0], r.type))  # type: ignore[arg-type]


def _vote_ballot(lw: KernelLowering, op: Operation) -> None:
    pv = op.arg("pred")
    preds = [_reg(lw, p, "pred") for p in _regs_of(lw, lw.val(pv))]
    out = lw.e.named_array("b32", len(preds), lw.hint(op.result, "ballot"))
    mask = str(int(op.attrs["mask"]))
    for d, p in zip(out, preds):
        lw.e.root("vote.sync.ballot.b32", d, p, mask)
    _result(lw, op, 0, out)


_REDUX = {"max": "max.f32", "min": "min.f32", "abs_max": "max.f32", "abs_min": "min.f32"}


def _warp_redux(lw: KernelLowering, op: Operation) -> None:
    kind = op.attrs["kind"]
    em = lw.e
    srcs = [_reg(lw, r, "b32") for r in _regs_of(lw, lw.val(op.arg("src")))]
    out = em.named_array("b32", len(srcs), lw.hint(op.result, "redux"))
    for d, s in zip(out, srcs):
        x = s
        if kind.startswith("abs_"):
            x = em.new("b32", "and.b32", x, "2147483647")  # |x|: the sign bit cleared, as the real TLX does
        for lane_mask in (16, 8, 4, 2, 1):
            x = em.new("b32", _REDUX[kind], x, em.new("b32", "shfl.sync.bfly.b32", x, str(lane_mask), "31", FULL_WARP))
        em("mov.b32", d, x)
    _result(lw, op, 0, out)


_KIND_OF_WIDTH = {1: "pred", 8: "b16", 16: "b16", 32: "b32", 64: "b64"}


def _inline_asm(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    pack = int(op.attrs["pack"])
    args = list(op.operands)
    res = list(op.results)

    def bits(e) -> int:
        return 64 if isinstance(e, T.PointerType) else e.bits

    plan = inline_asm.plan(op.attrs["constraints"], [bits(T.element_of(a.type)) for a in args],
                           [bits(T.element_of(r.type)) for r in res], pack)
    arg_regs = [[_reg(lw, x, reg_kind(T.element_of(a.type))) for x in _regs_of(lw, lw.val(a))] for a in args]
    n = lw.lmap(res[0].type).num_regs if isinstance(res[0].type, T.TensorType) else 1
    calls = (n + pack - 1) // pack
    if n % pack:  # the last call's missing elements read zeros
        for a, regs in zip(args, arg_regs):
            k = reg_kind(T.element_of(a.type))
            regs += [lw.const(k, "0")] * (calls * pack - n)
    out_regs = [em.named_array(reg_kind(T.element_of(r.type)), n, lw.hint(r, "asm")) for r in res]
    for c in range(calls):
        first = c * pack
        outs = []  # (result index, first element in the call, plan operand, register)
        for o in plan.outputs:
            k = sum(q[2].elems for q in outs if q[0] == o.value)
            outs.append((o.value, k, o, em.tmp(_KIND_OF_WIDTH[o.bits])))
        ins = []
        taken = {}
        for o in plan.inputs:
            k = taken.get(o.value, 0)
            taken[o.value] = k + o.elems
            elems = arg_regs[o.value][first + k:first + k + o.elems]
            val = pack_words(lw, elems, T.element_of(args[o.value].type), o.bits // 8)[0][0] if o.elems > 1 else elems[0]
            if o.constraint.isdigit():  # tied: the input arrives in the output's register
                tied = outs[int(o.constraint)][3]
                em(f"mov.{_KIND_OF_WIDTH[o.bits]}", tied, val)
                val = tied
            ins.append(val)
        dsts = [q[3] for q in outs]
        text = inline_asm.substitute(op.attrs["asm"], dsts + ins)
        em.asm(text, dsts, [r for r in ins if r.startswith("%")], side_effects=not op.attrs["pure"])
        for value, k, o, reg in outs:
            targets = out_regs[value][first + k:first + k + o.elems]  # short in the padded last call
            e = T.element_of(res[value].type)
            kind = reg_kind(e)
            if o.elems == 1:
                if targets:
                    em(f"mov.{kind}", targets[0], reg)
                continue
            parts = targets if len(targets) == o.elems else [em.tmp(kind) for _ in range(o.elems)]
            unpack_words(lw, [reg], "b32" if o.bits == 32 else "b16", parts, e)
            for t, x in zip(targets, parts):
                if t != x:
                    em(f"mov.{kind}", t, x)
    for i, regs in enumerate(out_regs):
        _result(lw, op, i, regs)


#: op name -> its lowering (lower.py merges the tables of the lower_* modules)
LOWERINGS = {"tlx.vote_ballot_sync": _vote_ballot, "tlx.warp_redux": _warp_redux,
             "tt.elementwise_inline_asm": _inline_asm}

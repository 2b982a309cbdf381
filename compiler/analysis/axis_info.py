"""Axis information: what is known, per dimension, about the integer or pointer values of a
tensor — how long its runs of consecutive values are (*contiguity*), how long its runs of equal
values are (*constancy*), and the largest power of two that divides the first value of every
run (*divisibility*; bytes for pointers). Scalars are rank-0 and carry only a divisibility.

The layout pass reads it to pick coalesced, 16-byte-vectorized layouts for global memory, and
the code generator reads it to choose the vector width of each load and store. Sources of
facts: `tt.make_range`, constants, the function's ``divisibility`` attribute, `tt.hint`
(`tl.multiple_of` / `tl.max_contiguous`), and the arithmetic rules below (as in Triton's
AxisInfo analysis). Loop-carried values reach a fixpoint: the block argument is the meet of
the initial value and the yielded one.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Dict, Optional, Sequence, Tuple

from ..ir import types as T
from ..ir.core import Module, Operation, Value

MAX_DIV = 1 << 30  # "divisible by everything" (zero), capped


def _pow2_div(x: int) -> int:
    """The largest power of two dividing `x` (MAX_DIV for zero)."""
    if x == 0:
        return MAX_DIV
    x = abs(int(x))
    return min(x & -x, MAX_DIV)


@dataclass(frozen=True)
class AxisInfo:
    """Per-dimension facts; all tuples have the tensor's rank (empty for scalars, see `div0`)."""

    contiguity: Tuple[int, ...]
    divisibility: Tuple[int, ...]
    constancy: Tuple[int, ...]
    constant: Optional[int] = None  # the value, when the whole tensor / scalar is one known integer
    div0: int = 1  # scalars: divisibility of the value

    @property
    def rank(self) -> int:
        return len(self.contiguity)

    def div(self, d: Optional[int] = None) -> int:
        if self.rank == 0 or d is None:
            return self.div0 if self.rank == 0 else min(self.divisibility)
        return self.divisibility[d]


def _scalar(div: int, constant: Optional[int] = None) -> AxisInfo:
    return AxisInfo((), (), (), constant, div)


def _unknown(shape: Tuple[int, ...]) -> AxisInfo:
    if not shape:
        return _scalar(1)
    r = len(shape)
    return AxisInfo((1,) * r, (1,) * r, (1,) * r)


def _splat(shape: Tuple[int, ...], s: AxisInfo) -> AxisInfo:
    r = len(shape)
    return AxisInfo((1,) * r, (s.div0,) * r, tuple(shape), s.constant, s.div0)


def meet(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """What holds for both (the join at a loop header or after an `if`)."""
    if a.rank == 0 or b.rank == 0:
        c = a.constant if a.constant == b.constant else None
        return _scalar(gcd(a.div(), b.div()), c)
    return AxisInfo(tuple(map(gcd, a.contiguity, b.contiguity)), tuple(map(gcd, a.divisibility, b.divisibility)),
                    tuple(map(gcd, a.constancy, b.constancy)), a.constant if a.constant == b.constant else None,
                    gcd(a.div0, b.div0))


class AxisAnalysis:
    """Runs the analysis over a module once; `info(v)` answers for any value."""

    def __init__(self, module: Module):
        self.module = module
        self.map: Dict[int, AxisInfo] = {}
        self._run()

    # -- queries -----------------------------------------------------------------------------
    def info(self, v: Value) -> AxisInfo:
        i = self.map.get(id(v))
        if i is None:
            i = _unknown(T.shape_of(v.type))
            self.map[id(v)] = i
        return i

    def vector_elems(self, ptr: Value, dim: int, elem_bytes: int, mask: Optional[Value] = None) -> int:
        """How many consecutive elements along `dim` one access may cover (before the layout's
        own limit): contiguity along `dim`, bounded by the alignment of the address and by the
        mask's constancy."""
        i = self.info(ptr)
        if i.rank == 0:
            return 1
        n = min(i.contiguity[dim], max(1, i.divisibility[dim] // elem_bytes))
        if mask is not None:
            m = self.info(mask)
            if m.rank:
                n = min(n, m.constancy[dim])
        p = 1
        while p * 2 <= n:
            p *= 2
        return p

    # -- the dataflow --------------------------------------------------------------------------
    def _set(self, v: Value, i: AxisInfo) -> None:
        self.map[id(v)] = i

    def _run(self) -> None:
        f = self.module.func
        if f is None:
            return
        divs = f.attrs.get("divisibility") or []
        for k, a in enumerate(f.regions[0].block.args):
            d = divs[k] if k < len(divs) else 1
            self._set(a, _scalar(max(1, int(d))) if not isinstance(a.type, T.TensorType) else _unknown(a.type.shape))
        self._block(f.regions[0].block.ops)

    def _block(self, ops: Sequence[Operation]) -> None:
        for op in ops:
            self._op(op)

    def _op(self, op: Operation) -> None:
        n = op.name
        if n == "scf.for":
            self._for(op)
            return
        if n == "scf.if":
            for r in op.regions:
                self._block(r.block.ops)
            ys = [r.block.terminator.operands for r in op.regions]  # type: ignore[union-attr]
            for k, res in enumerate(op.results):
                self._set(res, meet(self.info(ys[0][k]), self.info(ys[1][k])))
            return
        if n == "scf.while":
            for a, v in zip(op.regions[0].block.args, op.group("inits")):
                self._set(a, _unknown(T.shape_of(a.type)))
            for r in op.regions:
                for a in r.block.args:
                    self._set(a, _unknown(T.shape_of(a.type)))
                self._block(r.block.ops)
            for res in op.results:
                self._set(res, _unknown(T.shape_of(res.type)))
            return
        if n == "tlx.warp_specialize":
            self._block(op.regions[0].block.ops)
            caps = op.group("captures")
            for r in op.regions[1:]:
                for a, c in zip(r.block.args, caps):
                    self._set(a, self.info(c))
                self._block(r.block.ops)
            return
        if op.regions:
            for r in op.regions:
                self._block(r.block.ops)
        for res in op.results:
            self._set(res, self._rule(op, res))

    def _for(self, op: Operation) -> None:
        lb, st = op.arg("lb"), op.arg("step")
        blk = op.regions[0].block
        iv = blk.args[0]
        self._set(iv, _scalar(gcd(self.info(lb).div(), self.info(st).div())))
        inits = op.group("inits")
        for a, v in zip(blk.args[1:], inits):
            self._set(a, self.info(v))
        for _ in range(4):
            self._block(blk.ops)
            ys = blk.terminator.operands  # type: ignore[union-attr]
            changed = False
            for a, y in zip(blk.args[1:], ys):
                m = meet(self.info(a), self.info(y))
                if m != self.info(a):
                    self._set(a, m)
                    changed = True
            if not changed:
                break
        else:  # no fixpoint: forget what is known about the carried values
            for a in blk.args[1:]:
                self._set(a, _unknown(T.shape_of(a.type)))
            self._block(blk.ops)
        for a, r in zip(blk.args[1:], op.results):
            self._set(r, self.info(a))

    def _rule(self, op: Operation, res: Value) -> AxisInfo:
        n = op.name
        shape = T.shape_of(res.type)
        rank = len(shape)
        ins = [self.info(v) for v in op.operands]
        if n == "arith.constant":
            v = op.attrs.get("value")
            if isinstance(v, bool) or not isinstance(v, int):
                return _splat(shape, _scalar(1)) if rank else _scalar(1)
            s = _scalar(_pow2_div(v), int(v))
            return _splat(shape, s) if rank else s
        if n == "tt.make_range":
            start = op.attrs["start"]
            return AxisInfo((shape[0],), (_pow2_div(start),), (1,))
        if n in ("tt.get_program_id", "tt.get_num_programs", "tlx.thread_id", "tlx.cluster_cta_rank"):
            return _scalar(1)
        if n == "tt.splat":
            return _splat(shape, ins[0])
        if n == "tt.hint":
            i = ins[0]
            dv = op.attrs.get("divisibility")
            ct = op.attrs.get("contiguity")
            cs = op.attrs.get("constancy")

            def per_dim(x, default):
                if x is None:
                    return default
                if isinstance(x, (list, tuple)):
                    return tuple(int(e) for e in x)
                return (int(x),) * max(rank, 1)

            if rank == 0:
                return _scalar(max(i.div0, int(dv if not isinstance(dv, (list, tuple)) else dv[0])) if dv else i.div0,
                               i.constant)
            return AxisInfo(per_dim(ct, i.contiguity), per_dim(dv, i.divisibility), per_dim(cs, i.constancy),
                            i.constant, i.div0)
        if n == "tt.broadcast":
            src = op.arg("src").type.shape  # type: ignore[union-attr]
            i = ins[0]
            return AxisInfo(tuple(i.contiguity[d] if src[d] == shape[d] else 1 for d in range(rank)),
                            i.divisibility, tuple(i.constancy[d] if src[d] == shape[d] else shape[d] for d in range(rank)),
                            i.constant, i.div0)
        if n == "tt.expand_dims":
            ax = op.attrs["axis"]
            i = ins[0]
            if i.rank == 0:
                return _unknown(shape)
            return AxisInfo(i.contiguity[:ax] + (1,) + i.contiguity[ax:], i.divisibility[:ax] + (i.div(),) + i.divisibility[ax:],
                            i.constancy[:ax] + (1,) + i.constancy[ax:], i.constant, i.div0)
        if n == "tt.trans":
            order = op.attrs["order"]
            i = ins[0]
            return AxisInfo(tuple(i.contiguity[o] for o in order), tuple(i.divisibility[o] for o in order),
                            tuple(i.constancy[o] for o in order), i.constant, i.div0)
        if n in ("arith.addi", "tt.addptr", "arith.subi"):
            a, b = ins
            scale = 1
            if n == "tt.addptr":
                e = T.element_of(res.type)
                scale = e.pointee.bytes if isinstance(e, T.PointerType) else 1
            const = None
            if a.constant is not None and b.constant is not None:
                const = a.constant + b.constant * scale if n != "arith.subi" else a.constant - b.constant
            if rank == 0:
                return _scalar(gcd(a.div(), b.div() * scale), const)
            a = _as_tensor(a, shape)
            b = _as_tensor(b, shape)
            if n == "arith.subi":
                cont = tuple(gcd(a.contiguity[d], b.constancy[d]) for d in range(rank))
            elif n == "tt.addptr" and scale != 1:
                # element offsets: contiguity of the offsets (in elements) is what matters
                cont = tuple(max(gcd(a.contiguity[d], b.constancy[d]), gcd(a.constancy[d], b.contiguity[d]))
                             for d in range(rank))
            else:
                cont = tuple(max(gcd(a.contiguity[d], b.constancy[d]), gcd(a.constancy[d], b.contiguity[d]))
                             for d in range(rank))
            div = tuple(min(gcd(a.divisibility[d], b.divisibility[d] * scale), MAX_DIV) for d in range(rank))
            consty = tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(rank))
            return AxisInfo(cont, div, consty, const)
        if n == "arith.muli":
            a, b = ins
            const = a.constant * b.constant if a.constant is not None and b.constant is not None else None
            if rank == 0:
                return _scalar(min(a.div() * b.div(), MAX_DIV), const)
            a = _as_tensor(a, shape)
            b = _as_tensor(b, shape)
            cont = []
            for d in range(rank):
                c = 1
                if b.constant == 1:
                    c = a.contiguity[d]
                elif a.constant == 1:
                    c = b.contiguity[d]
                cont.append(c)
            div = tuple(min(a.divisibility[d] * b.divisibility[d], MAX_DIV) for d in range(rank))
            return AxisInfo(tuple(cont), div, tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(rank)), const)
        if n in ("arith.remsi", "arith.remui"):
            a, b = ins
            const = (a.constant % b.constant) if a.constant is not None and b.constant not in (None, 0) else None
            if rank == 0:
                return _scalar(gcd(a.div(), b.div()) if const is None else _pow2_div(const), const)
            a = _as_tensor(a, shape)
            b = _as_tensor(b, shape)
            cont = tuple(gcd(a.contiguity[d], b.divisibility[d]) if b.constancy[d] == shape[d] else 1 for d in range(rank))
            div = tuple(gcd(a.divisibility[d], b.divisibility[d]) for d in range(rank))
            return AxisInfo(cont, div, tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(rank)), const)
        if n in ("arith.divsi", "arith.divui"):
            a, b = ins
            const = (int(a.constant / b.constant) if n == "arith.divsi" else a.constant // b.constant) \
                if a.constant is not None and b.constant not in (None, 0) else None
            if rank == 0:
                return _scalar(1 if const is None else _pow2_div(const), const)
            a = _as_tensor(a, shape)
            b = _as_tensor(b, shape)
            return AxisInfo((1,) * rank, (1,) * rank, tuple(gcd(a.constancy[d], b.constancy[d]) for d in range(rank)), const)
        if n == "arith.shli" and ins[1].constant is not None:
            a, b = ins
            sh = b.constant
            if rank == 0:
                return _scalar(min(a.div() << sh, MAX_DIV), None if a.constant is None else a.constant << sh)
            a = _as_tensor(a, shape)
            return AxisInfo((1,) * rank if sh else a.contiguity, tuple(min(x << sh, MAX_DIV) for x in a.divisibility), a.constancy)
        if n in ("arith.extsi", "arith.extui", "arith.trunci", "arith.bitcast", "tt.int_to_ptr", "tt.ptr_to_int"):
            return ins[0] if ins[0].rank == rank else _unknown(shape)
        if n == "arith.select":
            c, a, b = ins
            if rank == 0:
                return meet(a, b) if a.rank == 0 and b.rank == 0 else _scalar(1)
            a, b, c = _as_tensor(a, shape), _as_tensor(b, shape), _as_tensor(c, shape)
            m = meet(a, b)
            return AxisInfo(tuple(min(m.contiguity[d], c.constancy[d]) for d in range(rank)), m.divisibility,
                            tuple(gcd(m.constancy[d], c.constancy[d]) for d in range(rank)))
        if n == "arith.cmpi" and rank and op.attrs.get("predicate") not in ("eq", "ne"):
            a, b = (_as_tensor(x, shape) for x in ins)
            consty = []
            for d in range(rank):
                c = gcd(a.constancy[d], b.constancy[d])
                # a contiguous run compared with a constant changes its answer at most at a
                # multiple of the constant's divisibility
                if a.contiguity[d] > 1 and b.constancy[d] > 1:
                    c = max(c, gcd(a.contiguity[d], gcd(a.divisibility[d], b.divisibility[d])))
                if b.contiguity[d] > 1 and a.constancy[d] > 1:
                    c = max(c, gcd(b.contiguity[d], gcd(b.divisibility[d], a.divisibility[d])))
                consty.append(c)
            return AxisInfo((1,) * rank, (1,) * rank, tuple(consty))
        if n in ("arith.cmpi", "arith.cmpf", "arith.andi", "arith.ori", "arith.xori", "arith.maxsi", "arith.minsi",
                 "arith.maxui", "arith.minui"):
            if rank == 0:
                return _scalar(1)
            ts = [_as_tensor(x, shape) for x in ins]
            consty = ts[0].constancy
            for t in ts[1:]:
                consty = tuple(map(gcd, consty, t.constancy))
            return AxisInfo((1,) * rank, (1,) * rank, consty)
        if n in ("tlx.async_dot_wait",):
            return self.info(op.operands[res.index]) if hasattr(res, "index") else _unknown(shape)
        if n == "tt.convert_layout":
            return ins[0]
        return _unknown(shape)


def _as_tensor(i: AxisInfo, shape: Tuple[int, ...]) -> AxisInfo:
    """A scalar's info as a splat over `shape` (binary ops may mix a scalar and a tensor)."""
    return _splat(shape, i) if i.rank == 0 and shape else i

"""Layout assignment: every register tensor gets a distributed layout, every shared-memory
buffer a shared layout, and every op that needs scratch shared memory a `scratch_bytes`.

Rule. Runs after the fence passes' structured stage and before shared-memory allocation.

1. *Anchors.* Results and accumulators of `tlx.async_dot` get the wgmma accumulator layout of
   their partition's warps, those of a `tt.dot` (the mma.sync ones LowerDot left) the mma.sync
   accumulator layout (`R.mma_sync_layout`; dots that pass values on share one, all warps
   along M where a result becomes the next dot's A) or, for an exact fp32
   dot, a blocked one; an operand of such a dot that a `tlx.local_load` produces gets the
   operand layout there (read from the buffer with ldmatrix, no conversion). They propagate
   first (step 2). Then global-memory ops (`tt.load`, `tt.store`, `tt.atomic_*`,
   `tlx.async_load`) get a coalesced blocked layout for their pointer tensor, and so do their
   mask, other, value and result unless already reached: 16-byte vectors per thread along the
   most contiguous dimension where contiguity and alignment allow (axis analysis over
   `tt.make_range`, `tt.hint` and the function's ``divisibility``), lanes and warps filled along
   that dimension first.
2. *Propagation.* From the anchors, layouts flow to unassigned values through elementwise ops
   (one layout for all operands and results), broadcasts, `expand_dims` / reductions (slice
   layouts), trans / reshape / join / split (linear layouts), loop-carried values and `if`
   results — the nearest anchor wins. Requirements that are left (a register A of async_dot
   gets the wgmma operand layout, the operands of a `tt.dot` theirs) and then defaults (a
   blocked layout with 16-byte vectors along the contiguous dim) seed what no anchor reaches.
3. *Legalization.* Where an op's operand arrives in another layout than the op needs, a cheap
   producer (constants, splats, ranges and pure elementwise trees of them) is rematerialized in
   the needed layout; anything else gets a `tt.convert_layout` right after its definition
   (computed once, also when the use is inside a loop). Ops whose result layout follows from the
   source (reductions, trans, reshape, join, split) convert the result instead.
4. *Shared layouts.* Allocations without a layout get NVMMA with the largest swizzle their
   inner dimension allows (no swizzle when fewer than 8 rows would share the pattern) — 1-D
   buffers the unswizzled layout; views derive theirs (`memdesc_trans` flips NVMMA's
   `transposed`). wgmma operands and TMA buffers must be NVMMA.
5. *Scratch.* `tt.convert_layout` that must go through shared memory (one round's sub-tile:
   `R.convert_rounds`), reductions across warps, scalar atomics whose result is used, and
   device-side descriptor creation get `scratch_bytes` (and `scratch_align`).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Callable, Dict, List, Optional, Tuple

from ..analysis import layout_math as LM
from ..codegen import layout_rules as R
from ..analysis.axis_info import AxisAnalysis
from ..errors import TLXCompileError
from ..ir import layouts as L
from ..ir import types as T
from ..ir.core import Module, Operation, Value
from . import dump_layout

Derive = Callable[[L.DistributedLayout], Optional[L.DistributedLayout]]

_MEMORY_GROUPS = {
    "tt.load": ("ptr", "mask", "other"),
    "tt.store": ("ptr", "value", "mask"),
    "tt.atomic_rmw": ("ptr", "value", "mask"),
    "tt.atomic_cas": ("ptr", "cmp", "value"),
    "tlx.async_load": ("src", "mask", "other"),
    "tlx.prefetch": ("ptr", "mask"),
}

_ELEMENTWISE_PREFIXES = ("arith.", "math.")
_ELEMENTWISE = {"tt.fp_to_fp", "tt.int_to_ptr", "tt.ptr_to_int", "tt.addptr", "tt.hint"}
# ops whose register tensors all share one layout but that are not rematerialized in another one:
# what a warp's lanes hold together is their meaning (a ballot, a warp reduction, inline asm over
# `pack` registers), or they touch shared memory (gather / scatter)
_SAME_LAYOUT = {"tlx.vote_ballot_sync", "tlx.warp_redux", "tt.elementwise_inline_asm", "tlx.local_gather",
                "tlx.local_scatter"}


def _is_tensor(v: Value) -> bool:
    return isinstance(v.type, T.TensorType)


def _is_elementwise(op: Operation) -> bool:
    return (op.name.startswith(_ELEMENTWISE_PREFIXES) and op.name != "arith.constant") or op.name in _ELEMENTWISE


def partition_warps(op: Operation, module_warps: int) -> int:
    """Warps that execute `op`: the module's, or those of the warp-specialize partition around it."""
    child = op
    for anc in op.ancestors():
        if anc.name == "tlx.warp_specialize":
            region_index = next(i for i, r in enumerate(anc.regions) if r.block is child.parent)
            if region_index == 0:
                return partition_warps(anc, module_warps)
            return int(anc.attrs["partition_num_warps"][region_index - 1])
        child = anc
    return module_warps


class LayoutPass:
    """Assigns layouts to one module (see the module docstring for the rule)."""

    name = "layouts"

    def __init__(self, module: Module):
        self.m = module
        self.nw = int(module.attrs.get("num_warps", 4))
        self.layout: Dict[int, L.DistributedLayout] = {}
        self.values: Dict[int, Value] = {}
        self.edges: Dict[int, List[Tuple[Value, Derive]]] = {}
        self.warps_of: Dict[int, int] = {}
        self.queue: deque = deque()

    # -- helpers -----------------------------------------------------------------------------
    def _reg(self, v: Value, warps: int) -> None:
        if _is_tensor(v) and id(v) not in self.values:
            self.values[id(v)] = v
            self.warps_of[id(v)] = warps

    def _edge(self, a: Value, b: Value, f: Derive, g: Derive) -> None:
        """a → b by f, b → a by g."""
        if not (_is_tensor(a) and _is_tensor(b)):
            return
        self.edges.setdefault(id(a), []).append((b, f))
        self.edges.setdefault(id(b), []).append((a, g))

    def _same(self, vals: List[Value]) -> None:
        ts = [v for v in vals if _is_tensor(v)]
        for x, y in zip(ts, ts[1:]):
            self._edge(x, y, lambda l: l, lambda l: l)

    def assign(self, v: Value, layout: L.DistributedLayout) -> None:
        if id(v) in self.layout or not _is_tensor(v):
            return
        self.layout[id(v)] = layout
        self.queue.append(v)

    def _drain(self) -> None:
        while self.queue:
            v = self.queue.popleft()
            lay = self.layout[id(v)]
            for other, f in self.edges.get(id(v), ()):
                if id(other) in self.layout:
                    continue
                try:
                    nl = f(lay)
                except TLXCompileError:
                    nl = None
                if nl is not None:
                    self.assign(other, nl)

    # -- phase 0: collect values and relations --------------------------------------------------
    def _collect(self, op: Operation, warps: int) -> None:
        for v in op.operands:
            self._reg(v, warps)
        for r in op.results:
            self._reg(r, warps)
        n = op.name
        if n == "tlx.warp_specialize":
            # a captured register tensor gets a layout of its own in each partition (no relation
            # edge: the partitions' threads differ); the code generator rejects such captures
            for i, r in enumerate(op.regions):
                w = warps if i == 0 else int(op.attrs["partition_num_warps"][i - 1])
                for a in r.block.args:
                    self._reg(a, w)
                for o in r.block.ops:
                    self._collect(o, w)
            return
        for r in op.regions:
            for a in r.block.args:
                self._reg(a, warps)
            for o in r.block.ops:
                self._collect(o, warps)
        if _is_elementwise(op) or n in _SAME_LAYOUT:
            self._same(list(op.operands) + list(op.results))
        elif n in _MEMORY_GROUPS:
            pass  # no relation edges: the anchor gives the pointer (and what is unassigned) its layout
        elif n == "tt.broadcast":
            s, r = op.arg("src"), op.result
            self._edge(r, s, lambda l: R.broadcast_src(l, r.type.shape, s.type.shape),
                       lambda l: R.broadcast_res(l, s.type.shape, r.type.shape))
        elif n == "tt.expand_dims":
            s, r, ax = op.arg("src"), op.result, op.attrs["axis"]
            self._edge(r, s, lambda l: R.expand_src(l, ax), lambda l: R.expand_res(l, ax, s.type.shape, r.type.shape))
        elif n == "tt.reduce":
            s, r, ax = op.arg("src"), op.result, op.attrs["axis"]
            self._edge(s, r, lambda l: R.reduce_res(l, ax), lambda l: R.reduce_src(l, ax))
        elif n == "tt.trans":
            s, r, order = op.arg("src"), op.result, op.attrs["order"]
            self._edge(s, r, lambda l: R.trans_res(l, order, s.type.shape), lambda l: R.trans_src(l, order, r.type.shape))
        elif n == "tt.reshape":
            s, r = op.arg("src"), op.result
            self._edge(s, r, lambda l: R.reshape_to(l, s.type.shape, r.type.shape),
                       lambda l: R.reshape_to(l, r.type.shape, s.type.shape))
        elif n == "tt.join":
            a, b, r = op.arg("lhs"), op.arg("rhs"), op.result
            self._same([a, b])
            self._edge(a, r, lambda l: R.join_res(l, a.type.shape), lambda l: R.split_res(l, r.type.shape))
        elif n == "tt.split":
            s = op.arg("src")
            self._same(list(op.results))
            self._edge(s, op.results[0], lambda l: R.split_res(l, s.type.shape),
                       lambda l: R.join_res(l, op.results[0].type.shape))
        elif n == "scf.for":
            blk = op.regions[0].block
            y = blk.terminator.operands  # type: ignore[union-attr]
            for init, arg, yv, res in zip(op.group("inits"), blk.args[1:], y, op.results):
                self._same([init, arg, yv, res])
        elif n == "scf.if":
            ys = [r.block.terminator.operands for r in op.regions]  # type: ignore[union-attr]
            for k, res in enumerate(op.results):
                self._same([res, ys[0][k], ys[1][k]])
        elif n == "scf.while":
            before, after = op.regions[0].block, op.regions[1].block
            cond = before.terminator.operands[1:]  # type: ignore[union-attr]
            y = after.terminator.operands  # type: ignore[union-attr]
            for init, arg, yv in zip(op.group("inits"), before.args, y):
                self._same([init, arg, yv])
            for c, arg, res in zip(cond, after.args, op.results):
                self._same([c, arg, res])
        elif n == "tlx.async_dot":
            acc = op.arg("acc")
            if acc is not None:
                self._same([acc, op.result])
        elif n == "tt.dot":
            self._same([op.arg("acc"), op.result])
        elif n == "tlx.async_dot_wait":
            for v, r in zip(op.group("values"), op.results):
                self._same([v, r])

    # -- anchors --------------------------------------------------------------------------------
    def coalesced(self, ptr: Value, warps: int) -> L.BlockedLayout:
        """The coalesced layout of a pointer tensor (see the module docstring)."""
        t: T.TensorType = ptr.type  # type: ignore[assignment]
        info = self.axis.info(ptr)
        rank = t.rank
        eb = R.elem_bytes(t.element.pointee) if isinstance(t.element, T.PointerType) else 4  # type: ignore[union-attr]
        if info.rank == rank:
            order = sorted(range(rank), key=lambda d: (-min(info.contiguity[d], t.shape[d]), -d))
            vec = self.axis.vector_elems(ptr, order[0], eb)
        else:
            order, vec = list(R.default_order(rank)), 1
        vec = min(vec, max(1, 16 // eb))
        return R.blocked_for(t.shape, warps, order, vec)

    def _anchor(self, op: Operation, warps: int, memory: bool) -> None:
        n = op.name
        if memory and n in _MEMORY_GROUPS:
            ptr = op.arg(_MEMORY_GROUPS[n][0])
            if _is_tensor(ptr):
                grp = [op.arg(g) for g in _MEMORY_GROUPS[n]] + list(op.results)
                lay = self.layout.get(id(ptr)) or self._accumulator_access(op) or self.coalesced(ptr, warps)
                for v in grp:
                    if v is not None:
                        self.assign(v, lay)
        elif not memory and n == "tlx.async_dot":
            r = op.result
            if isinstance(r.type, T.TensorType):
                self.assign(r, self._mma_for(op, warps))
        elif not memory and n == "tt.dot":
            acc = self._dot_acc_layout(op, warps)
            self.assign(op.result, acc)
            # an operand read from a buffer is read in the operand layout (ldmatrix), not converted
            for idx, g in enumerate(("a", "b")):
                v = op.arg(g)
                d = v.defining_op
                if d is not None and d.name == "tlx.local_load" and len(v.uses) == 1:
                    self.assign(v, self._dot_operand(op, acc, idx))

    def _accumulator_access(self, op: Operation) -> Optional[L.DistributedLayout]:
        """The layout a 32-bit tensor already has, for a global store of it or a global load
        whose result flows into it (a partial sum written out and read back), when it is a
        wgmma accumulator's or a view of one (a column slice by split): there each quad of lanes
        holds 8 consecutive elements of a row, a whole 32-byte sector, so a coalesced layout
        would save no memory transaction and cost a conversion through shared memory (64 KiB
        of scratch for a 64x256 fp32 accumulator). None otherwise."""
        v = op.arg("value") if op.name == "tt.store" else op.result if op.name == "tt.load" else None
        if v is None or not _is_tensor(v) or R.elem_bytes(v.type.element) != 4:  # type: ignore[union-attr]
            return None
        lay = self.layout.get(id(v))
        if not (isinstance(lay, L.MmaLayout) and lay.version == 3 or isinstance(lay, L.LinearLayout)):
            return None
        shape = tuple(v.type.shape)  # type: ignore[union-attr]
        m = LM.to_map(lay, shape)
        col = lambda k: tuple(k if d == len(shape) - 1 else 0 for d in range(len(shape)))  # noqa: E731
        quad_holds_a_sector = m.reg[:1] == (col(1),) and m.lane[:2] == (col(2), col(4))
        return lay if quad_holds_a_sector else None

    def _mma_for(self, op: Operation, warps: int) -> L.MmaLayout:
        m, n = op.result.type.shape  # type: ignore[union-attr]
        bits = op.arg("b").type.element.bits  # type: ignore[union-attr]
        return R.mma_layout(m, n, warps, bits, op.loc)

    def _dot_acc_layout(self, op: Operation, warps: int) -> L.DistributedLayout:
        """The accumulator layout of a `tt.dot` left for the code generator (lower_dot took the
        wgmma ones): mma.sync's, or a blocked one for the FMA loop."""
        from .lower_dot import FMA, dot_instruction

        m, n = op.result.type.shape  # type: ignore[union-attr]
        if dot_instruction(op, warps, 0) == FMA:
            return R.default_blocked((m, n), warps, R.elem_bytes(op.result.type.element))  # type: ignore[union-attr]
        bits = op.arg("a").type.element.bits  # type: ignore[union-attr]
        chain, feeds_a = _chained_dots(op)
        for other in chain:  # dots that pass values on share their warps (the first laid out decides)
            lay = self.layout.get(id(other.result))
            if isinstance(lay, L.MmaLayout) and lay.version == 2 and self._warps(other) == warps:
                return L.MmaLayout(2, lay.wpc, (16, 8, 256 // bits))
        return R.mma_sync_layout(m, n, warps, bits, feeds_a)

    @staticmethod
    def _dot_operand(op: Operation, acc: L.DistributedLayout, idx: int) -> L.DotOperandLayout:
        if isinstance(acc, L.MmaLayout):
            return R.dot_operand_layout(acc, op.operands[idx].type.element.bits, idx)  # type: ignore[union-attr]
        return L.DotOperandLayout(idx, acc, 1)

    # -- run ----------------------------------------------------------------------------------
    def run(self) -> None:
        f = self.m.func
        if f is None:
            return
        self.axis = AxisAnalysis(self.m)
        for o in f.regions[0].block.ops:
            self._collect(o, self.nw)
        all_ops = self.m.ops()  # pre-order
        # register layouts the user pinned (local_load(layout=...)) come before everything
        for op in all_ops:
            if op.name == "tlx.local_load" and op.attrs.get("layout") is not None:
                self._pin(op)
        # wgmma accumulators first (what they flow into follows them, so a conversion lands where
        # the data is narrowest, e.g. after the cast of an epilogue), then global-memory ops
        for op in all_ops:
            self._anchor(op, self._warps(op), memory=False)
        self._drain()
        for op in all_ops:
            self._anchor(op, self._warps(op), memory=True)
        self._drain()
        # requirements left unmet: a register A operand, a split's source
        for op in all_ops:
            if op.name == "tlx.async_dot" and _is_tensor(op.arg("a")) and id(op.arg("a")) not in self.layout:
                mma = self.layout.get(id(op.result)) or self._mma_for(op, self._warps(op))
                self.assign(op.arg("a"), R.dot_operand_layout(mma, op.arg("a").type.element.bits))  # type: ignore
            elif op.name == "tt.dot":
                for idx in (0, 1):
                    if id(op.operands[idx]) not in self.layout:
                        self.assign(op.operands[idx], self._dot_operand(op, self.layout[id(op.result)], idx))
        self._drain()
        # defaults, in program order
        for op in all_ops:
            for v in list(op.results) + [a for r in op.regions for a in r.block.args]:
                if _is_tensor(v) and id(v) not in self.layout:
                    self.assign(v, self._default(v, op))
                    self._drain()
        for v in self.values.values():
            if id(v) not in self.layout:
                self.assign(v, R.default_blocked(v.type.shape, self.warps_of[id(v)], self._eb(v)))
                self._drain()
        # write the layouts into the types
        for v in self.values.values():
            v.type = v.type.with_layout(self.layout[id(v)])  # type: ignore[union-attr]
        self._legalize(all_ops)
        _assign_shared_layouts(self.m)
        _assign_scratch(self.m)

    def _pin(self, op: Operation) -> None:
        """Give a result the register layout the user pinned (its op's `layout`), if the partition
        has the warps for it."""
        lay = op.attrs["layout"]
        if not isinstance(lay, L.DistributedLayout):
            raise TLXCompileError(f"{op.name}: its layout attribute {lay} is not a register layout", op.loc)
        warps = self._warps(op)
        m = LM.to_map(lay, op.result.type.shape)
        if m.num_warps > warps:
            raise TLXCompileError(f"the register layout given to local_load spans {m.num_warps} warps; the code runs "
                                  f"on {warps}", op.loc, hint="give the layout's thread modes num_warps * 32 threads")
        self.assign(op.result, lay)

    def _warps(self, op: Operation) -> int:
        return partition_warps(op, self.nw)

    @staticmethod
    def _eb(v: Value) -> int:
        return R.elem_bytes(v.type.element)  # type: ignore[union-attr]

    def _default(self, v: Value, op: Operation) -> L.DistributedLayout:
        w = self._warps(op)
        cdim = None
        if op.name == "tlx.local_load" and isinstance(op.arg("src").type, T.MemDescType):
            cdim = _contiguous_dim(op.arg("src").type)
        return R.default_blocked(v.type.shape, w, self._eb(v), cdim)

    # -- legalization -------------------------------------------------------------------------
    def _legalize(self, ops: List[Operation]) -> None:
        self.converted: Dict[Tuple[int, L.DistributedLayout], Value] = {}
        for op in ops:
            if op.parent is None:
                continue
            n = op.name
            if _is_elementwise(op):
                want = op.results[0].type.layout if op.results and _is_tensor(op.results[0]) else None
                if want is None:
                    continue
                src = op.operands[0] if len(op.operands) == 1 else None
                if (src is not None and _is_tensor(src) and src.type.layout != want
                        and self._eb(op.results[0]) < self._eb(src)):
                    # a narrowing cast: convert the smaller result, not the wider operand
                    self._retype_result(op, op.results[0], src.type.layout)
                    continue
                for i, v in enumerate(op.operands):
                    if _is_tensor(v):
                        self._require(op, i, want)
            elif n in _SAME_LAYOUT:
                lead = op.results[0] if op.results else op.arg("indices")
                if _is_tensor(lead):
                    for i, v in enumerate(op.operands):
                        if _is_tensor(v):
                            self._require(op, i, lead.type.layout)
            elif n in _MEMORY_GROUPS:
                ptr = op.arg(_MEMORY_GROUPS[n][0])
                if _is_tensor(ptr):
                    want = ptr.type.layout
                    for i, v in enumerate(op.operands):
                        if _is_tensor(v):
                            self._require(op, i, want)
                    for r in op.results:
                        self._retype_result(op, r, want)
            elif n == "tt.broadcast":
                r = op.result
                self._require(op, 0, R.broadcast_src(r.type.layout, r.type.shape, op.arg("src").type.shape))
            elif n == "tt.expand_dims":
                self._require(op, 0, R.expand_src(op.result.type.layout, op.attrs["axis"]))
            elif n == "tt.reduce":
                if _is_tensor(op.result):
                    self._retype_result(op, op.result, R.reduce_res(op.arg("src").type.layout, op.attrs["axis"]))
            elif n == "tt.trans":
                s = op.arg("src")
                self._retype_result(op, op.result, R.trans_res(s.type.layout, op.attrs["order"], s.type.shape))
            elif n == "tt.reshape":
                s = op.arg("src")
                self._retype_result(op, op.result, R.reshape_to(s.type.layout, s.type.shape, op.result.type.shape))
            elif n == "tt.join":
                self._require(op, 1, op.arg("lhs").type.layout)
                s = op.arg("lhs")
                self._retype_result(op, op.result, R.join_res(s.type.layout, s.type.shape))
            elif n == "tt.split":
                s = op.arg("src")
                self._require(op, 0, R.split_ready(s.type.layout, s.type.shape))
                s = op.arg("src")
                nl = R.split_res(s.type.layout, s.type.shape)
                for r in op.results:
                    self._retype_result(op, r, nl)
            elif n == "scf.for":
                blk = op.regions[0].block
                inits = op.group("inits")
                start = 3
                for k, (init, arg) in enumerate(zip(inits, blk.args[1:])):
                    if _is_tensor(arg):
                        self._require(op, start + k, arg.type.layout)
                y = blk.terminator
                for k, arg in enumerate(blk.args[1:]):
                    if _is_tensor(arg):
                        self._require(y, k, arg.type.layout)
                        self._retype_result(op, op.results[k], arg.type.layout)
            elif n == "scf.if":
                for r in op.regions:
                    y = r.block.terminator
                    for k, res in enumerate(op.results):
                        if _is_tensor(res):
                            self._require(y, k, res.type.layout)
            elif n == "scf.while":
                before, after = op.regions[0].block, op.regions[1].block
                for k, arg in enumerate(before.args):
                    if _is_tensor(arg):
                        self._require(op, k, arg.type.layout)
                        self._require(after.terminator, k, arg.type.layout)
                cond = before.terminator
                for k, arg in enumerate(after.args):
                    if _is_tensor(arg):
                        self._require(cond, k + 1, arg.type.layout)
                        self._retype_result(op, op.results[k], arg.type.layout)
            elif n == "tlx.async_dot":
                acc = op.arg("acc")
                if acc is not None:
                    self._require(op, len(op.operands) - 1, op.result.type.layout)
                a = op.arg("a")
                if _is_tensor(a):
                    self._require(op, 0, R.dot_operand_layout(op.result.type.layout, a.type.element.bits))
            elif n == "tlx.async_dot_wait":
                for k, r in enumerate(op.results):
                    if _is_tensor(r):
                        self._require(op, k, r.type.layout)
            elif n == "tt.dot":
                acc = op.result.type.layout
                self._require(op, 2, acc)
                for idx in (0, 1):
                    self._require(op, idx, self._dot_operand(op, acc, idx))

    def _require(self, op: Operation, idx: int, want: Optional[L.DistributedLayout]) -> None:
        v = op.operands[idx]
        if want is None or not _is_tensor(v) or v.type.layout == want:
            return
        op.set_operand(idx, self._materialize(v, want, 0))

    def _retype_result(self, op: Operation, r: Value, natural: Optional[L.DistributedLayout]) -> None:
        """Give `r` the layout its op produces; uses that wanted the old one get a conversion."""
        if natural is None or not _is_tensor(r) or r.type.layout == natural:
            return
        old = r.type
        r.type = old.with_layout(natural)
        uses = list(r.uses)
        if not uses:
            return
        cv = Operation("tt.convert_layout", [r], [old], loc=op.loc)
        op.parent.insert_after(op, cv)  # type: ignore[union-attr]
        for user, i in uses:
            user.set_operand(i, cv.result)

    _CHEAP = {"arith.constant", "tt.splat", "tt.make_range"}

    def _cheap(self, v: Value, depth: int) -> bool:
        op = v.defining_op
        if op is None or depth > 8 or len(op.results) != 1:
            return False
        if op.name in self._CHEAP:
            return True
        if _is_elementwise(op) or op.name in ("tt.broadcast", "tt.expand_dims"):
            return all(not _is_tensor(u) or self._cheap(u, depth + 1) for u in op.operands)
        return False

    def _materialize(self, v: Value, want: L.DistributedLayout, depth: int) -> Value:
        """`v` in layout `want`: itself, a rematerialized copy, or a convert_layout."""
        if v.type.layout == want:
            return v
        key = (id(v), want)
        if key in self.converted:
            return self.converted[key]
        op = v.defining_op
        if op is not None and self._cheap(v, depth):
            new_ops = []
            for u in op.operands:
                if not _is_tensor(u):
                    new_ops.append(u)
                    continue
                if op.name == "tt.broadcast":
                    uw = R.broadcast_src(want, v.type.shape, u.type.shape)
                elif op.name == "tt.expand_dims":
                    uw = R.expand_src(want, op.attrs["axis"])
                else:
                    uw = want
                new_ops.append(self._materialize(u, uw, depth + 1))
            clone = Operation(op.name, _regroup(op, new_ops), [v.type.with_layout(want)], dict(op.attrs), loc=op.loc,
                              result_names=[v.name])
            op.parent.insert_after(op, clone)  # type: ignore[union-attr]
            out = clone.result
        else:
            cv = Operation("tt.convert_layout", [v], [v.type.with_layout(want)], loc=op.loc if op else v.owner.parent.parent.loc,
                           result_names=[v.name])
            if op is not None:
                op.parent.insert_after(op, cv)  # type: ignore[union-attr]
            else:  # a block argument: at the start of its block
                v.owner.insert(0, cv)  # type: ignore[union-attr]
            out = cv.result
        self.converted[key] = out
        return out


def _chained_dots(op: Operation) -> Tuple[List[Operation], bool]:
    """The other dots that dot `op` exchanges register values with, through register ops of its
    block (forward from its result, backward from its operands), and whether one of those
    exchanges is a dot's result becoming another's A operand (attention's P @ V after
    Q @ K^T), rather than an accumulator passed on."""
    seen = {id(op)}
    out: List[Operation] = []
    feeds_a = False
    fwd: List[Value] = [op.result]
    bwd: List[Tuple[Value, bool]] = [(v, i == 0) for i, v in enumerate(op.operands)]
    while fwd or bwd:
        if fwd:
            for user, idx in fwd.pop().uses:
                if user.parent is not op.parent:
                    continue
                if user.name in ("tt.dot", "tlx.async_dot"):
                    feeds_a = feeds_a or idx == 0
                    if id(user) not in seen:
                        out.append(user)
                elif id(user) not in seen and not user.regions and user.name != "tt.convert_layout":
                    fwd.extend(r for r in user.results if _is_tensor(r))
                seen.add(id(user))
        else:
            v, from_a = bwd.pop()
            d = v.defining_op
            if d is None or d.parent is not op.parent:
                continue
            if d.name in ("tt.dot", "tlx.async_dot"):
                feeds_a = feeds_a or from_a
                if id(d) not in seen:
                    out.append(d)
            elif id(d) not in seen and not d.regions and d.name != "tt.convert_layout":
                bwd.extend((x, from_a) for x in d.operands if _is_tensor(x))
            seen.add(id(d))
    return out, feeds_a


def _regroup(op: Operation, flat: List[Value]) -> List:
    """Operands in the op definition's group form (one / opt / var)."""
    out: List = []
    i = 0
    for (g, kind), size in zip(op.opdef.groups, op.segments):
        if kind == "var":
            out.append(flat[i:i + size])
        elif kind == "opt":
            out.append(flat[i] if size else None)
        else:
            out.append(flat[i])
        i += size
    return out


# ---------------------------------------------------------------------------------------------
# shared layouts
# ---------------------------------------------------------------------------------------------

def alloc_layout(t: T.MemDescType) -> L.SharedLayout:
    """The default layout of an allocation: NVMMA with the largest swizzle the contiguous row
    allows (as TLX picks it), or no swizzle when a buffer has fewer than 8 rows (a swizzle
    pattern spans 8 rows); the unswizzled layout for 1-D buffers."""
    shape = t.buffer_shape
    bits = t.element.bits
    lay = L.default_shared_layout(shape, bits)
    if isinstance(lay, L.NVMMASharedLayout) and lay.swizzle:
        if math.prod(shape[:-1]) < 8:
            lay = L.NVMMASharedLayout(0, bits, False)
    return lay


def _contiguous_dim(t: T.MemDescType) -> Optional[int]:
    """The view dimension whose consecutive elements are consecutive in memory (so a load along it
    vectorizes), when the view's layout says; None for the default (the last)."""
    lay, rank = t.layout, len(t.shape)
    if isinstance(lay, L.NVMMASharedLayout):
        return 0 if lay.transposed and rank == 2 else None
    if isinstance(lay, L.SwizzledSharedLayout) and len(lay.order) == rank:
        return lay.order[0]
    if isinstance(lay, (L.SharedLinearLayout, L.PaddedSharedLayout)) and lay.bases and len(lay.bases[0]) == rank:
        first = lay.bases[0]  # the coordinate of element offset 1
        nz = [d for d, x in enumerate(first) if x]
        return nz[0] if len(nz) == 1 and first[nz[0]] == 1 else None
    return None


def _check_shared(t: T.MemDescType, loc) -> None:
    """An NVMMA buffer must hold whole swizzle atoms: rows of the atom width, 8 rows per pattern;
    a swizzled layout orders every dimension; an explicit linear (or padded) layout maps the
    buffer's offsets one to one onto its elements."""
    lay = t.layout
    if isinstance(lay, L.SwizzledSharedLayout) and sorted(lay.order) != list(range(len(t.buffer_shape))):
        raise TLXCompileError(f"buffer {t}: its swizzled layout's order {list(lay.order)} does not order its "
                              f"{len(t.buffer_shape)} dimensions", loc)
    if isinstance(lay, (L.SharedLinearLayout, L.PaddedSharedLayout)):
        try:
            LM.shared_map(lay, tuple(t.buffer_shape), max(1, t.element.bits // 8))
        except TLXCompileError as e:
            raise TLXCompileError(f"buffer {t}: {e.message}", loc, e.hint) from None
    if isinstance(lay, L.NVMMASharedLayout):
        shape = t.buffer_shape
        if len(shape) < 2:
            raise TLXCompileError(f"NVMMA layout on a 1-D buffer {t}", loc)
        if lay.bits != t.element.bits:
            raise TLXCompileError(f"buffer {t}: its NVMMA layout is for {lay.bits}-bit elements", loc)
        inner = (shape[0] if lay.transposed else shape[-1]) * t.element.bits // 8
        atom = LM.nvmma_atom_bytes(lay)
        if inner % atom:
            raise TLXCompileError(f"buffer {t}: its contiguous row is {inner} bytes, not a multiple of the "
                                  f"{atom}-byte swizzle atom", loc, hint="use a wider tile or a smaller swizzle")
        nbytes = t.element.bits // 8 * math.prod(shape)
        if lay.swizzle and nbytes % (8 * lay.swizzle):
            raise TLXCompileError(f"buffer {t}: {nbytes} bytes do not hold whole {lay.swizzle}-byte swizzle "
                                  f"patterns ({8 * lay.swizzle} bytes each)", loc,
                                  hint="give the tile at least 8 rows, or use a smaller swizzle")


def _derive_view(op: Operation, src: T.MemDescType, res: T.MemDescType) -> T.MemDescType:
    n = op.name
    lay = src.layout
    if n in ("tlx.memdesc_index", "tlx.memdesc_subslice"):
        return res.replace(layout=lay)
    if n == "tlx.memdesc_trans":
        order = list(op.attrs["order"])
        if isinstance(lay, L.NVMMASharedLayout):
            if order != [1, 0]:
                raise TLXCompileError("a transposed view of an NVMMA buffer must swap its two dims", op.loc)
            return res.replace(layout=L.NVMMASharedLayout(lay.swizzle, lay.bits, not lay.transposed))
        if isinstance(lay, L.SwizzledSharedLayout):
            inv = [order.index(d) for d in range(len(order))]
            return res.replace(layout=L.SwizzledSharedLayout(lay.vec, lay.per_phase, lay.max_phase,
                                                             tuple(inv[d] for d in lay.order)))
        return res
    if n == "tlx.memdesc_reinterpret":
        if res.layout is not None:
            return res
        if res.element.bits == src.element.bits and len(res.buffer_shape) == len(src.buffer_shape):
            return res.replace(layout=lay)
        return res.replace(layout=alloc_layout(res))
    return res


def _assign_shared_layouts(m: Module) -> None:
    """Fill in shared layouts (allocations, then views, loop-carried buffers, results)."""

    def walk(ops) -> None:
        for op in ops:
            n = op.name
            if n == "tlx.local_alloc":
                t = op.result.type
                if t.layout is None:
                    op.result.type = t.replace(layout=alloc_layout(t))
                _check_shared(op.result.type, op.loc)
            elif n == "tlx.remote_view" and isinstance(op.result.type, T.MemDescType):
                op.result.type = op.arg("src").type.replace(remote=True)  # the same bytes in another CTA
            elif n.startswith("tlx.memdesc_") and isinstance(op.result.type, T.MemDescType):
                src = op.arg("src").type
                if isinstance(src, T.MemDescType):
                    op.result.type = _derive_view(op, src, op.result.type)
            elif n == "scf.for":
                blk = op.regions[0].block
                for init, arg in zip(op.group("inits"), blk.args[1:]):
                    if isinstance(arg.type, T.MemDescType):
                        arg.type = init.type
            elif n == "scf.while":
                for init, arg in zip(op.group("inits"), op.regions[0].block.args):
                    if isinstance(arg.type, T.MemDescType):
                        arg.type = init.type
            elif n == "tlx.warp_specialize":
                for r in op.regions[1:]:
                    for c, arg in zip(op.group("captures"), r.block.args):
                        if isinstance(arg.type, T.MemDescType):
                            arg.type = c.type
            for r in op.regions:
                walk(r.block.ops)
            if n == "scf.for":
                for arg, res in zip(op.regions[0].block.args[1:], op.results):
                    if isinstance(res.type, T.MemDescType):
                        res.type = arg.type
            elif n == "scf.if":
                y = op.regions[0].block.terminator.operands  # type: ignore[union-attr]
                for v, res in zip(y, op.results):
                    if isinstance(res.type, T.MemDescType):
                        res.type = v.type
            elif n == "scf.while":
                cond = op.regions[0].block.terminator.operands[1:]  # type: ignore[union-attr]
                for v, arg, res in zip(cond, op.regions[1].block.args, op.results):
                    if isinstance(res.type, T.MemDescType):
                        arg.type = v.type
                        res.type = v.type
            if n in ("tlx.async_dot",):
                for g in ("a", "b"):
                    v = op.arg(g)
                    if isinstance(v.type, T.MemDescType) and not isinstance(v.type.layout, L.NVMMASharedLayout):
                        raise TLXCompileError(f"async_dot operand {g.upper()} must be in an NVMMA shared layout "
                                              f"(wgmma reads only that), got {v.type.layout}", op.loc,
                                              hint="allocate the operand with the default layout or "
                                                   "layout=tlx.nv_mma_shared_layout_encoding(...)")
            if n in ("tlx.tma_load", "tlx.tma_store"):
                v = op.arg("dst" if n == "tlx.tma_load" else "src")
                lay = v.type.layout
                # a rank-1 tile is one contiguous row: its plain (unswizzled) layout is what TMA writes
                one_row = (len(v.type.shape) == 1 and isinstance(lay, L.SwizzledSharedLayout)
                           and lay.max_phase == 1)
                if not one_row and (not isinstance(lay, L.NVMMASharedLayout) or lay.transposed):
                    raise TLXCompileError(f"a TMA buffer needs a non-transposed NVMMA layout, got {v.type.layout}",
                                          op.loc, hint="TMA writes rows of the descriptor's inner dimension, swizzled "
                                                       "the NVMMA way: allocate the buffer with the default layout or "
                                                       "layout=tlx.nv_mma_shared_layout_encoding(...) of order [1, 0]")

    if m.func is not None:
        walk(m.func.regions[0].block.ops)


# ---------------------------------------------------------------------------------------------
# scratch
# ---------------------------------------------------------------------------------------------

def _assign_scratch(m: Module) -> None:
    for op in m.ops():
        n = op.name
        nbytes, align = 0, 16
        if n == "tt.convert_layout":
            s, r = op.arg("src").type, op.result.type
            sm, dm = LM.to_map(s.layout, s.shape), LM.to_map(r.layout, r.shape)
            if R.convert_kind(sm, dm) == "smem":
                rounds = R.convert_rounds(sm, dm, R.elem_bytes(s.element))
                nbytes = R.convert_scratch_bytes(s.shape, s.element, len(rounds))
        elif n == "tt.reduce":
            s = op.arg("src").type
            nbytes = R.reduce_scratch_bytes(LM.to_map(s.layout, s.shape), op.attrs["axis"], s.element,
                                            op.attrs["kind"] in ("argmax", "argmin"))
        elif n in ("tt.atomic_rmw", "tt.atomic_cas"):
            if not _is_tensor(op.arg("ptr")) and op.result.uses:
                nbytes = 8
        elif n == "tt.make_tensor_descriptor":
            # a 128-byte tensormap, 128-byte aligned (the code aligns inside 256 bytes)
            nbytes, align = 256, 128
        if nbytes:
            op.attrs["scratch_bytes"] = int(nbytes)
            op.attrs["scratch_align"] = align
        else:
            op.attrs.pop("scratch_bytes", None)
            op.attrs.pop("scratch_align", None)


def run(module: Module, ctx=None) -> Module:
    """Assign layouts to `module` in place (see the module docstring) and return it; then print
    what each `tlx.dump_layout` asks about and erase it (compiler/passes/dump_layout.py)."""
    LayoutPass(module).run()
    dump_layout.report_and_erase(module)
    return module

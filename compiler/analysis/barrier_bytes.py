"""BarrierBytes: a `barrier_expect_bytes` whose byte count cannot match the bytes that arrive.

Rule. An mbarrier phase completes when its arrivals are in *and* its transaction count is back
to zero: `barrier_expect_bytes(bar, N)` (``mbarrier.arrive.expect_tx``) adds N, every TMA load
(``tlx.tma_load``: the descriptor's whole box, out-of-bounds parts zero-filled and counted) or
bulk copy (``tlx.async_bulk_load``: its size) that completes on `bar` takes its bytes off.
Expecting more than arrives hangs the wait forever; expecting less lets the wait return while
data is still landing. So between two waits on one barrier, the bytes expected on it must equal
the bytes the loads deliver to it.

The check proves a mismatch or says nothing. It looks at one block at a time (the kernel's
body, a loop body, a warp-specialized partition, a branch) and, for each barrier that an
unpredicated `barrier_expect_bytes` names, at each *segment*: the ops between two waits on that
barrier, or between a wait and the block's edge. It sums the bytes expected and delivered there
with every count a compile-time constant, and reports a difference — unless anything in the
segment makes the sum unprovable:

* an op that may complete on the barrier but is not provably it or provably another (a load on
  ``bars[j]`` next to an expect on ``bars[i]``; same index value, or constant indices, decide);
* a predicated expect or load on it (it may not happen), a multicast load;
* a copy or store into another CTA of the cluster on it (`async_remote_shmem_copy` /
  `_store`): the other CTAs' copies land on this CTA's barrier at that offset;
* a nested region (an ``if``, a loop, partitions) that touches the same barrier array;
* a segment that reaches the edge of a block whose surroundings may add bytes: a branch's edge,
  a loop body that waits on the barrier elsewhere in the body (the phase wraps around the
  iteration), a loop whose enclosing block also loads onto the array.

Barriers are identified by value: the `alloc_barriers` result (through partition captures), and
for ``bars[i]`` the index as a value number (the same op on the same operands, or the same
constant, is the same index). It runs after TMALowering (so the register-level TMA loads it
made, with their own barriers, are checked too) and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..errors import TLXCompileError
from ..ir import types as T
from ..ir.core import Block, BlockArgument, Module, Operation, Value

EXPECT, WAIT = "tlx.barrier_expect_bytes", "tlx.barrier_wait"
# copies and stores into another CTA of the cluster: they complete on that CTA's barrier at the same
# offset, so this CTA's barrier there also receives bytes that no op of this CTA issues
CROSS_CTA = ("tlx.async_remote_store", "tlx.async_remote_copy")
LOADS = ("tlx.tma_load", "tlx.async_bulk_load")
_TRAFFIC = (EXPECT,) + LOADS  # the ops that change a barrier's transaction count


@dataclass(frozen=True)
class BarrierId:
    """Which mbarrier a value names: the root array (or single barrier) and the index's value
    number (None: the root itself). `allocated`: the root is an `alloc_barriers` result (a
    barrier chosen by an ``if`` or carried by a loop may be any of them)."""

    root: int
    index: Optional[Tuple]
    allocated: bool = True


class _Numbering:
    """Value numbers of the scalar index expressions (same op, attributes and operands → same
    number), and the roots of barrier values (through partition captures)."""

    def __init__(self) -> None:
        self.memo: Dict[int, Tuple] = {}

    def number(self, v: Value) -> Tuple:
        k = id(v)
        hit = self.memo.get(k)
        if hit is None:
            op = v.defining_op
            if op is None or op.regions or not op.has_trait("pure") and op.name != "arith.constant":
                hit = ("value", k)  # a block argument or an op with effects: itself only
            elif op.name == "arith.constant":
                hit = ("const", repr(op.attrs.get("value")), str(v.type))
            else:
                hit = (op.name, tuple(sorted((a, repr(b)) for a, b in op.attrs.items())),
                       tuple(self.number(x) for x in op.operands), next(i for i, r in enumerate(op.results) if r is v))
            self.memo[k] = hit
        return hit

    def root(self, v: Value) -> Value:
        """The value a barrier comes from: a partition's capture argument is its captured value."""
        for _ in range(64):
            if isinstance(v, BlockArgument):
                owner = v.owner.parent_op
                if owner is not None and owner.name == "tlx.warp_specialize" and owner.regions[0].block is not v.owner:
                    caps = owner.group("captures")
                    if v.index < len(caps):
                        v = caps[v.index]
                        continue
                return v
            op = v.defining_op
            if op is not None and op.name == "tlx.memdesc_index" and isinstance(op.arg("src").type, T.BarrierType):
                return self.root(op.arg("src"))
            return v
        return v  # pragma: no cover - a capture chain this long does not occur

    def barrier(self, v: Value) -> BarrierId:
        op = v.defining_op
        index = None
        if op is not None and op.name == "tlx.memdesc_index" and isinstance(op.arg("src").type, T.BarrierType):
            index = self.number(op.arg("index"))
        root = self.root(v)
        made = root.defining_op
        return BarrierId(id(root), index, made is not None and made.name == "tlx.alloc_barriers")


def _is_constant_index(n: Tuple) -> bool:
    return n[0] == "const"


def _relation(a: BarrierId, b: BarrierId) -> str:
    """'same', 'other' (provably different barriers) or 'maybe'."""
    if a.root != b.root:
        return "other" if a.allocated and b.allocated else "maybe"
    if a.index == b.index:
        return "same"
    if a.index is not None and b.index is not None and _is_constant_index(a.index) and _is_constant_index(b.index):
        return "other"
    return "maybe"


def _always(op: Operation) -> bool:
    """Whether the op is unpredicated (no pred, or a constant-true one)."""
    p = op.arg("pred") if "pred" in op.opdef.group_index else None
    if p is None:
        return True
    d = p.defining_op
    return d is not None and d.name == "arith.constant" and d.attrs.get("value") in (1, True)


def _delivered(op: Operation) -> Optional[int]:
    """The bytes a load completes on its barrier (None: not provable)."""
    if op.name == "tlx.async_bulk_load":
        size = op.attrs.get("size")
        return size if isinstance(size, int) else None
    if op.attrs.get("multicast"):
        return None
    dt = op.arg("desc").type
    if not isinstance(dt, T.TensorDescType):
        return None
    n = dt.element.bytes
    for d in dt.block_shape:
        n *= int(d)
    return n


def _line(op: Operation) -> str:
    return f"line {op.loc.line}" if op.loc is not None and op.loc.line > 0 else "an unknown line"


class _Roots:
    """The barrier arrays some ops may use: their roots, and whether any is not an
    `alloc_barriers` result (a barrier chosen by an ``if`` or carried by a loop: any of them)."""

    __slots__ = ("roots", "wild")

    def __init__(self) -> None:
        self.roots: set = set()
        self.wild = False

    def add(self, bid: BarrierId) -> None:
        self.roots.add(bid.root)
        self.wild = self.wild or not bid.allocated

    def may_be(self, bid: BarrierId) -> bool:
        """Whether one of these barriers may be `bid` (`_relation` is not 'other')."""
        return bool(self.roots) and (bid.root in self.roots or self.wild or not bid.allocated)


class BarrierBytes:
    """The check over one module (see the module docstring). Linear in the module's size: each
    block's ops are indexed once by the barrier arrays they touch, and each barrier's segments
    look only at the ops of its array (a kernel of 100 000 ops has thousands of arrays)."""

    def __init__(self, module: Module):
        self.module = module
        self.num = _Numbering()
        self.nested: Dict[int, _Roots] = {}  # id(region op) -> the barriers used inside it

    def run(self) -> None:
        # every op that changes a barrier's transaction count, by barrier array
        self.traffic: Dict[int, List[Operation]] = {}
        self.wild_traffic: List[Operation] = []  # on a barrier that may be any array's
        self.cross_cta = _Roots()
        ops: List[Operation] = []
        self.module.walk(ops.append)
        for op in ops:
            if op.name in _TRAFFIC:
                bid = self.num.barrier(op.arg("bar"))
                (self.traffic.setdefault(bid.root, []) if bid.allocated else self.wild_traffic).append(op)
            elif op.name in CROSS_CTA:
                self.cross_cta.add(self.num.barrier(op.arg("bar")))
        for op in ops:
            for r in op.regions:
                self._block(r.block, op)

    def _inner(self, op: Operation) -> _Roots:
        """The barriers `op` or anything nested in it uses (computed once per op)."""
        hit = self.nested.get(id(op))
        if hit is None:
            hit = _Roots()

            def visit(o: Operation) -> None:
                for v in o.operands:
                    if isinstance(v.type, T.BarrierType):
                        hit.add(self.num.barrier(v))
            op.walk(visit)
            self.nested[id(op)] = hit
        return hit

    def _touches(self, op: Operation, bid: BarrierId) -> bool:
        """Whether `op` or anything nested in it uses a barrier that may be `bid`'s."""
        return self._inner(op).may_be(bid)

    def _block(self, block: Block, owner: Optional[Operation]) -> None:
        ops = [o for o in block.ops]
        targets: Dict[BarrierId, None] = {}  # in order of first expect
        for o in ops:
            if o.name == EXPECT and _always(o):
                targets.setdefault(self.num.barrier(o.arg("bar")), None)
        if not targets:
            return
        # the positions of the ops that may matter to a barrier, by array: traffic, waits, regions
        by_root: Dict[int, List[int]] = {}
        wild: List[int] = []
        for i, o in enumerate(ops):
            if o.regions:
                inner = self._inner(o)
                for r in inner.roots:
                    by_root.setdefault(r, []).append(i)
                if inner.wild:
                    wild.append(i)
            elif o.name in _TRAFFIC or o.name == WAIT:
                bid = self.num.barrier(o.arg("bar"))
                (by_root.setdefault(bid.root, []) if bid.allocated else wild).append(i)
        everything = sorted({i for pos in by_root.values() for i in pos} | set(wild))
        for bid in targets:
            near = sorted(set(by_root.get(bid.root, ())) | set(wild)) if bid.allocated else everything
            self._check(block, owner, ops, near, bid)

    def _check(self, block: Block, owner: Optional[Operation], ops: List[Operation], near: List[int],
               bid: BarrierId) -> None:
        if self.cross_cta.may_be(bid):
            return  # other CTAs deliver bytes to it: not provable from this CTA's code
        # (a predicated wait may not happen: it does not split the phases; merging two phases
        # keeps a mismatch provable, since one of them then mismatches too)
        waits = [i for i in near
                 if ops[i].name == WAIT and _always(ops[i]) and _relation(self.num.barrier(ops[i].arg("bar")), bid) == "same"]
        bounds = [-1] + waits + [len(ops)]
        k = 0  # the ops of `near` between two bounds, in one sweep
        for lo, hi in zip(bounds, bounds[1:]):
            while k < len(near) and near[k] <= lo:
                k += 1
            j = k
            while j < len(near) and near[j] < hi:
                j += 1
            self._segment(block, owner, ops, near, [ops[i] for i in near[k:j]], bid, lo, hi, waits)
            k = j

    def _segment(self, block: Block, owner: Optional[Operation], ops: List[Operation], near: List[int],
                 inside: List[Operation], bid: BarrierId, lo: int, hi: int, waits: List[int]) -> None:
        expects: List[Operation] = []
        loads: List[Tuple[Operation, int]] = []
        for o in inside:
            if o.regions:
                if self._touches(o, bid):
                    return  # a branch or loop may add or skip bytes: not provable
                continue
            if o.name not in _TRAFFIC:
                continue
            rel = _relation(self.num.barrier(o.arg("bar")), bid)
            if rel == "other":
                continue
            if rel == "maybe" or not _always(o):
                return
            if o.name == EXPECT:
                expects.append(o)
            else:
                n = _delivered(o)
                if n is None:
                    return
                loads.append((o, n))
        if not expects:
            return
        if (lo < 0 or hi >= len(ops)) and not self._edge_is_closed(block, owner, ops, near, bid, waits, lo < 0,
                                                                   hi >= len(ops)):
            return
        expected = sum(int(e.attrs["bytes"]) for e in expects)
        delivered = sum(n for _, n in loads)
        if expected == delivered:
            return
        first = expects[0]
        what = (f"{expected} bytes expected" if len(expects) == 1 else
                f"{expected} bytes expected (" + " + ".join(f"{e.attrs['bytes']} at {_line(e)}" for e in expects) + ")")
        if loads:
            arrive = " + ".join(f"{n} ({o.name.split('.')[-1]} at {_line(o)})" for o, n in loads)
            got = f"but the loads that complete on it deliver {delivered} bytes: {arrive}"
        else:
            got = "but no load completes on it"
        end = (f"before the barrier_wait at {_line(ops[hi])}" if hi < len(ops) else
               "before the end of the loop body" if owner is not None and owner.name in ("scf.for", "scf.while") else
               "before the end of the partition" if owner is not None and owner.name == "tlx.warp_specialize" else
               "before the end of the kernel")
        hint = ("the phase never completes and the wait hangs: expect exactly the bytes that arrive (a TMA load "
                "delivers its whole box, block_shape x element size)" if expected > delivered else
                "the wait can return while data is still landing: expect exactly the bytes that arrive (a TMA "
                "load delivers its whole box, block_shape x element size)")
        raise TLXCompileError(f"barrier_expect_bytes: {what} on this mbarrier {end}, {got}", first.loc, hint=hint)

    def _quiet(self, ops: List[Operation], bid: BarrierId) -> bool:
        """Whether none of `ops` may change the barrier's transaction count."""
        for o in ops:
            if o.regions:
                if self._touches(o, bid):
                    return False
            elif o.name in _TRAFFIC and _relation(self.num.barrier(o.arg("bar")), bid) != "other":
                return False
        return True

    def _edge_is_closed(self, block: Block, owner: Optional[Operation], ops: List[Operation], near: List[int],
                        bid: BarrierId, waits: List[int], at_start: bool, at_end: bool) -> bool:
        """Whether a segment that reaches the block's start or end sees every byte of its phase:
        the kernel's body begins and ends there; a partition or a loop body does when no op
        outside it changes the transaction count of the same barrier array — and, for a loop body
        that waits on the barrier, when the part of the body the phase wraps into (the next
        iteration's head, the previous one's tail) is quiet on it; a branch or a while's
        condition never does."""
        if owner is None or owner.name == "tt.func":
            return True
        if owner.name == "scf.for" or (owner.name == "scf.while" and block is owner.regions[1].block):
            if waits and at_start and not self._quiet([ops[i] for i in near if i > waits[-1]], bid):
                return False  # the previous iteration's tail belongs to this phase
            if waits and at_end and not self._quiet([ops[i] for i in near if i < waits[0]], bid):
                return False  # so does the next iteration's head
        elif owner.name != "tlx.warp_specialize":
            return False
        # every op anywhere that may change the array's transaction count is inside this block
        same_array = (self.traffic.get(bid.root, []) + self.wild_traffic if bid.allocated else
                      [o for group in self.traffic.values() for o in group] + self.wild_traffic)
        return all(self._inside(o, block) for o in same_array)

    @staticmethod
    def _inside(op: Operation, block: Block) -> bool:
        b: Optional[Block] = op.parent
        while b is not None:
            if b is block:
                return True
            outer = b.parent_op
            b = outer.parent if outer is not None else None
        return False


def barrier_root(v: Value) -> Value:
    """The value a barrier comes from: its `alloc_barriers` result, through ``bars[i]`` and
    partition captures (or the value itself where it comes from elsewhere)."""
    return _Numbering().root(v)


def check_barrier_bytes(module: Module) -> None:
    """Raise a `TLXCompileError` naming both lines where a `barrier_expect_bytes` provably
    expects other bytes than the loads that complete on its barrier deliver (module docstring)."""
    BarrierBytes(module).run()


def run(module: Module, ctx: object) -> None:
    """The pipeline's entry: `check_barrier_bytes`."""
    check_barrier_bytes(module)

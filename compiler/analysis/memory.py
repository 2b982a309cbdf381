"""What shared memory an op touches, through which proxy, and which buffer bytes a value names.

Shared by every pass that reasons about shared memory (fence insertion, allocation, proxy fence
insertion, CTA barriers), so that the proxy of an access is decided in exactly one place
(triton#11126 is the bug this avoids: each pass re-deriving it differently).

**Proxies** (see `compiler/ir/ops.py` effects): *generic* — `local_alloc` with a source,
`local_store`, `local_load`, cp.async (`async_load`: per-thread, generic proxy, peers.md §3.D),
scratch use of ops with a ``scratch_bytes`` attribute; *async* — TMA loads and bulk loads write
their destination, TMA stores, bulk stores and wgmma operands read their source; *barrier* —
mbarrier traffic, which never needs a proxy fence.

**Regions.** `regions_of(value)` returns every (root allocation, byte interval inside it,
logical box) a shared-memory value may name: views are followed to their source, a constant
`memdesc_index` narrows to its slab, a `memdesc_subslice` with static offsets of a full slab
keeps a logical box (two boxes on the same slab are disjoint when some dimension's ranges are),
loop-carried values, `scf.if` / `scf.while` results and warp-specialize captures join all the
values that can flow into them. A function argument names no allocation (`FUNC_ARG`).
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

from ..ir import types as T
from ..ir.alias import placement
from ..ir.core import BlockArgument, Module, OpResult, Operation, Value
from ..ir.ops import OPS, effects_of

GENERIC, ASYNC, BARRIER = "generic", "async", "barrier"
READ, WRITE = "read", "write"



def _ops_with(access: str, proxy: str) -> frozenset:
    """The op names whose catalogue entry declares a `proxy` `access` of shared memory."""
    return frozenset(n for n, d in OPS.items() if any(e.access == access and e.proxy == proxy for e in d.effects))


# the generic writers, read from the catalogue (a new op's declared effects are all the passes
# need; an allocation writes only when it has a source, which `effects_of` says per op)
GENERIC_WRITERS = _ops_with(WRITE, GENERIC) | {"tlx.local_alloc"}
FENCE = "tlx.fence_async_shared"
# ops after which another partition may observe this partition's earlier accesses
HANDOFF_RELEASE = frozenset({"tlx.barrier_arrive", "tlx.barrier_expect_bytes", "tlx.named_barrier_arrive",
                             "tlx.named_barrier_wait"})
HANDOFF_ACQUIRE = frozenset({"tlx.barrier_wait", "tlx.named_barrier_wait"})


class _FuncArg:
    """Stands for an allocation the function cannot see (a memdesc function argument)."""

    name = "<function argument>"
    loc = None

    def __repr__(self) -> str:
        return "FUNC_ARG"


FUNC_ARG = _FuncArg()


class Region(NamedTuple):
    """Bytes [lo, hi) of allocation `root` (relative to its start). `plain` says the value is the
    slab itself (an allocation or a `memdesc_index` of one, no reinterpreting view in between);
    `box` = (space, offsets, shape) narrows it to a logical sub-rectangle of a plain slab whose
    shape is `space` (from `memdesc_subslice` with static offsets)."""

    root: object  # an allocating Operation (local_alloc / alloc_barriers) or FUNC_ARG
    lo: int
    hi: int
    plain: bool = True
    box: Optional[Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...]]] = None

    def overlaps_rel(self, other: "Region") -> bool:
        """Overlap within the same allocation (before offsets are known)."""
        if self.root is not other.root:
            return False
        return overlap_detail(self.lo, self.hi, self.box, other.lo, other.hi, other.box)


# builds a named tuple (`Region`, `Access`, the passes' pending items) without its Python-level
# __new__ (several times slower): the passes make one per view of every shared-memory value and one
# per shared-memory operand of every op
_new_tuple = tuple.__new__


def region(root: object, lo: int, hi: int, plain: bool = True, box=None) -> Region:
    """`Region(root, lo, hi, plain, box)`, built directly."""
    return _new_tuple(Region, (root, lo, hi, plain, box))


def overlap_detail(alo: int, ahi: int, abox, blo: int, bhi: int, bbox) -> bool:
    """Byte intervals overlap and, when both carry a box in the same coordinate space of the same
    slab, the boxes overlap."""
    if not (alo < bhi and blo < ahi):
        return False
    if abox is not None and bbox is not None and alo == blo and ahi == bhi and abox[0] == bbox[0]:
        for x, xs, y, ys in zip(abox[1], abox[2], bbox[1], bbox[2]):
            if x + xs <= y or y + ys <= x:
                return False
    return True


def alloc_bytes(op: Operation) -> int:
    """The size in bytes of what an allocating op (local_alloc, alloc_barriers) allocates."""
    return op.result.type.nbytes


def const_int(v: Value) -> Optional[int]:
    """The value of an integer `arith.constant`, else None."""
    d = v.defining_op
    if d is not None and d.name == "arith.constant":
        x = d.attrs.get("value")
        if isinstance(x, bool):
            return int(x)
        if isinstance(x, int):
            return x
    return None


_NO_CYCLE = 1 << 30  # RegionAnalysis: no open value reached again
# ops that name (part of) a buffer another way and access nothing: memdesc_index, subslice, trans,
# reinterpret (src is their first operand)
VIEW_NAMES = frozenset(n for n, d in OPS.items() if "view" in d.traits)
_REVIEWS = VIEW_NAMES - {"tlx.memdesc_index", "tlx.memdesc_subslice"}  # the views that keep the bytes


def _dedup(regions: List[Region]) -> Tuple[Region, ...]:
    """`regions` without repeats, in order."""
    return tuple(dict.fromkeys(regions)) if len(regions) > 1 else tuple(regions)


def _alias_span(op: Operation) -> Tuple[int, int]:
    """Bytes [lo, hi) of the aliased storage that a `tlx.local_alias` `op`'s buffers span."""
    t = op.result.type
    p = placement(op.attrs)
    slabs = [p.slab_offset(i) for i in range(t.buffers)]
    return min(slabs), max(slabs) + t.nbytes // t.buffers


def _index_regions(op: Operation, src_regions) -> List[Region]:
    """What `tlx.memdesc_index` `op` names, given the regions of its source: slab `c` of each
    plain region (a constant index), or the whole region (a dynamic index may name any slab).
    Buffer `c` of a `tlx.local_alias` is where its placement puts it (its source's regions are
    the alias's span in the aliased bytes)."""
    src = op._operands[0]  # (src, index): single operands, read directly
    c = const_int(op._operands[1])
    if c is not None and type(src) is OpResult and src.owner.name == "tlx.local_alias":
        a = src.owner
        t = a.result.type
        if 0 <= c < t.buffers:
            lo = _alias_span(a)[0]
            off = placement(a.attrs).slab_offset(c) - lo
            return [region(r.root, r.lo + off, r.lo + off + t.nbytes // t.buffers) for r in src_regions]
    st = src.type
    d = st.count if isinstance(st, T.BarrierType) else (st.shape[0] if st.shape else 1)
    out = []
    for r in src_regions:
        size = r.hi - r.lo
        if c is not None and r.plain and d > 0 and size % d == 0 and 0 <= c < d:
            s = size // d
            out.append(region(r.root, r.lo + c * s, r.lo + (c + 1) * s))
        else:
            out.append(region(r.root, r.lo, r.hi, r.plain))
    return out


class RegionAnalysis:
    """Memoized `regions_of` for one module (an analysis: `AnalysisManager.get(RegionAnalysis, m)`).
    It stays valid while no pass changes what an existing memdesc value names: allocation sizes
    do not depend on layouts (all the layout pass changes of a memdesc), and the other passes add
    values, fences, barriers, register ops and attributes, which name no existing allocation anew.

    Loop-carried values make the value graph cyclic: a block argument names what its init and
    its yield name, and the yield may be a view of the argument. The answer is the least fixpoint,
    whatever the order of the queries. A value reached again while it is being computed returns
    its approximation so far (nothing at first); the outermost value of the cycle is computed
    again while any approximation in it grew, and only then memoized. A value computed while an
    enclosing one was still open depended on an approximation, so it is not memoized (its own
    approximation is kept: a later computation starts from it). Memoizing those partial answers
    lost a cycle's buffers — a view yielded back into the loop named nothing, and its wgmma read
    got no fence."""

    def __init__(self, module: Optional[Module] = None, analyses=None) -> None:
        # (the module is not read up front: values are answered as they are asked)
        # value -> its final regions (keyed by the value itself: hashed in C, and kept alive);
        # hot loops read it before calling `regions_of` (a value absent from it must be asked
        # through `regions_of`)
        self.answers: Dict[Value, Tuple[Region, ...]] = {}
        self._open: Dict[Value, int] = {}  # value being computed -> its depth in the recursion
        self._approx: Dict[Value, Tuple[Region, ...]] = {}  # a value on a cycle -> its regions so far
        self._low = _NO_CYCLE  # the shallowest open value the current round reached again
        self._grew = False  # an approximation grew in the current round
        self._desc: Dict[object, str] = {}

    def describe(self, root) -> str:
        """`describe_alloc(root)`, remembered (records name the same buffers again and again)."""
        d = self._desc.get(root)
        if d is None:
            d = self._desc[root] = describe_alloc(root)
        return d

    def regions_of(self, v: Value) -> Tuple[Region, ...]:
        """Every region `v` may name, deduplicated."""
        r = self.answers.get(v)
        if r is not None:
            return r
        if type(v) is OpResult and v.owner.name == "tlx.memdesc_index":
            # the most common value by far (every slot of every ring); when its source is answered,
            # so is it: no cycle can pass through it, whatever is being computed around it
            src = self.answers.get(v.owner._operands[0])
            if src is not None:
                r = self.answers[v] = _dedup(_index_regions(v.owner, src))
                if self._approx:
                    self._approx.pop(v, None)  # (an approximation from a cycle computed earlier)
                return r
        depth = self._open.get(v)
        if depth is not None:  # a cycle back to `v`
            if depth < self._low:
                self._low = depth
            return self._approx.get(v, ())
        depth = self._open[v] = len(self._open)
        outer_low, outer_grew = self._low, self._grew
        try:
            while True:
                self._low, self._grew = _NO_CYCLE, False
                r = _dedup(self._compute(v))
                low = self._low
                if low == _NO_CYCLE:
                    break  # no cycle through `v` or below it: exact
                if set(r) != set(self._approx.get(v, ())):
                    self._approx[v] = r
                    self._grew = True
                if low < depth or not self._grew:
                    break  # part of an enclosing value's cycle (it iterates), or converged
        finally:
            del self._open[v]
            grew = self._grew
            self._low, self._grew = outer_low, outer_grew
        if low < depth:  # depended on an enclosing value's approximation: not final
            if low < self._low:
                self._low = low
            self._grew = self._grew or grew
            return r
        self.answers[v] = r
        self._approx.pop(v, None)
        return r

    def _union(self, vals) -> List[Region]:
        out: List[Region] = []
        for x in vals:
            out.extend(self.regions_of(x))
        return out

    def _compute(self, v: Value) -> List[Region]:
        if not isinstance(v.type, (T.MemDescType, T.BarrierType)):
            return []
        if isinstance(v, OpResult):
            op = v.owner
            n = op.name
            if n == "tlx.memdesc_index":  # the most common by far (every slot of every ring)
                return _index_regions(op, self.regions_of(op._operands[0]))
            if n in ("tlx.local_alloc", "tlx.alloc_barriers"):
                return [region(op, 0, alloc_bytes(op))]
            if n == "tlx.memdesc_subslice":
                src = op.arg("src")
                offs = tuple(op.attrs.get("static_offsets", []))
                static = all(o >= 0 for o in offs)
                shape = tuple(op.result.type.shape)
                out = []
                for r in self.regions_of(src):
                    box = None
                    if static and r.box is None and r.plain:
                        box = (tuple(src.type.shape), offs, shape)
                    elif static and r.box is not None:
                        box = (r.box[0], tuple(a + b for a, b in zip(r.box[1], offs)), shape)
                    out.append(region(r.root, r.lo, r.hi, False, box))
                return out
            if n == "tlx.local_alias":  # its buffers' span in the aliased bytes (memdesc_index narrows)
                lo, hi = _alias_span(op)
                return [region(r.root, r.lo + lo, r.lo + hi, False) for r in self.regions_of(op._operands[0])]
            if n in _REVIEWS:  # trans / reinterpret: same bytes, logical coordinates unknown
                return [region(r.root, r.lo, r.hi, False) for r in self.regions_of(op._operands[0])]
            if n == "arith.select":
                return self._union([op.arg("true"), op.arg("false")])
            if n == "scf.for":
                i = v.index
                body = op.regions[0].block
                return self._union([op.group("inits")[i], body.terminator.operands[i]])
            if n == "scf.if":
                i = v.index
                return self._union([r.block.terminator.operands[i] for r in op.regions])
            if n == "scf.while":
                cond = op.regions[0].block.terminator
                return self._union([cond.operands[1 + v.index]])
            return []  # an op that makes a memdesc we do not know: names nothing we can see
        assert isinstance(v, BlockArgument)
        owner = v.owner.parent_op
        if owner is None or owner.name == "tt.func":
            return [region(FUNC_ARG, 0, 1 << 30)]
        i = v.index
        if owner.name == "scf.for":
            if i == 0:
                return []
            return self._union([owner.group("inits")[i - 1], v.owner.terminator.operands[i - 1]])
        if owner.name == "scf.while":
            if v.owner is owner.regions[0].block:
                return self._union([owner.group("inits")[i], owner.regions[1].block.terminator.operands[i]])
            cond = owner.regions[0].block.terminator
            return self._union([cond.operands[1 + i]])
        if owner.name == "tlx.warp_specialize":
            return self._union([owner.group("captures")[i]])
        return []


class Access(NamedTuple):
    """One shared-memory access of an op: `value` (None for scratch) read or written through a
    proxy."""

    op: Operation
    value: Optional[Value]
    kind: str  # READ | WRITE
    proxy: str  # GENERIC | ASYNC | BARRIER


# names of the ops that may touch shared memory (others can only through a scratch_bytes attribute)
EFFECT_NAMES = frozenset(n for n, d in OPS.items() if d.effects) | {"tlx.local_alloc"}


def accesses_of(op: Operation) -> List[Access]:
    """Every shared-memory access `op` makes: the effects the op catalogue declares
    (`ops.effects_of`), and the write and read of its scratch area (regions' contents excluded)."""
    out = [_new_tuple(Access, (op, v, e.access, e.proxy)) for v, e in effects_of(op)]
    if op.attrs and op.attrs.get("scratch_bytes"):
        out.append(_new_tuple(Access, (op, None, WRITE, GENERIC)))
        out.append(_new_tuple(Access, (op, None, READ, GENERIC)))
    return out


#: ops that write another CTA's shared memory through a remote view (tlx.remote_view)
REMOTE_WRITERS = frozenset({"tlx.remote_store", "tlx.async_remote_store", "tlx.async_remote_copy"})


def is_cluster_op(op: Operation) -> bool:
    """True when `op` reaches another CTA's shared memory (a multicast TMA load, a store or bulk
    copy into a remote view)."""
    return (op.name == "tlx.tma_load" and bool(op.attrs.get("multicast"))) or op.name in REMOTE_WRITERS


def is_cluster_access(op: Operation, write: bool) -> bool:
    """True when this access of `op` lands in another CTA's shared memory: every access of a
    multicast load, the write of a remote store or copy (a remote copy reads its local source)."""
    if op.name in REMOTE_WRITERS:
        return write
    return is_cluster_op(op)


def describe_alloc(root) -> str:
    """How records name a buffer: `tlx.local_alloc at kernel.py:12 (2x64x64xf16)`."""
    from ..fences import loc_text

    if root is FUNC_ARG:
        return "a function argument"
    t = root.result.type
    if root.attrs.get("storage_alias"):  # the bytes of a tlx.storage_alias_spec
        return f"storage_alias_spec at {loc_text(root.loc)} ({t.nbytes} bytes)"
    shape = "x".join(str(d) for d in t.shape) + f"x{t.element}" if isinstance(t, T.MemDescType) else str(t)
    return f"{root.name} at {loc_text(root.loc)} ({shape})"


# ops that may take a shared-memory value as an operand
def may_use_smem(name: str) -> bool:
    return name.startswith("tlx.") or name in ("scf.yield", "scf.for", "scf.while", "scf.condition", "arith.select")

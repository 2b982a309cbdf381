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
from ..ir.core import BlockArgument, Module, OpResult, Operation, Value
from ..ir.ops import OPS, effects_of
from .skeleton import take_skeleton

GENERIC, ASYNC, BARRIER = "generic", "async", "barrier"
READ, WRITE = "read", "write"



def _ops_with(access: str, proxy: str) -> frozenset:
    """The op names whose catalogue entry declares a `proxy` `access` of shared memory."""
    return frozenset(n for n, d in OPS.items() if any(e.access == access and e.proxy == proxy for e in d.effects))


# ops that issue an async-proxy access to shared memory, and the generic writers (read from the
# catalogue, so a new op's declared effects are all the passes need; an allocation writes only
# when it has a source, which `effects_of` says per op)
ASYNC_WRITERS = _ops_with(WRITE, ASYNC)
ASYNC_READERS = _ops_with(READ, ASYNC)
ASYNC_OPS = ASYNC_WRITERS | ASYNC_READERS
GENERIC_WRITERS = _ops_with(WRITE, GENERIC) | {"tlx.local_alloc"}
REGION_OPS = frozenset({"scf.for", "scf.if", "scf.while", "tlx.warp_specialize"})
FENCE = "tlx.fence_async_shared"
# ops after which another partition may observe this partition's earlier accesses
HANDOFF_RELEASE = frozenset({"tlx.barrier_arrive", "tlx.barrier_expect_bytes", "tlx.named_barrier_arrive",
                             "tlx.named_barrier_wait"})
HANDOFF_ACQUIRE = frozenset({"tlx.barrier_wait", "tlx.named_barrier_wait"})


_GROUP_INDEX = {name: {g: i for i, g in enumerate(d.group_names)} for name, d in OPS.items()}


def arg(op: Operation, group: str) -> Optional[Value]:
    """`op.arg(group)` read straight from the catalogue (hot paths call it for every op)."""
    gi = _GROUP_INDEX[op.name][group]
    segs = op.segments
    if not segs[gi]:
        return None
    return op._operands[sum(segs[:gi]) if gi else 0]


def group(op: Operation, name: str) -> List[Value]:
    """`op.group(name)`, as `arg`."""
    gi = _GROUP_INDEX[op.name][name]
    segs = op.segments
    start = sum(segs[:gi])
    return op._operands[start:start + segs[gi]]


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
    shape is `space` (from `memdesc_subslice` with static offsets). A named tuple (immutable,
    hashed and compared by value like the frozen dataclass it was, but built several times faster:
    the passes make one per view of every shared-memory value)."""

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


# builds a named tuple (`Region`, `Access`) without its Python-level __new__, which runs in the
# interpreter even when the caller is compiled: the passes make one per view of every shared-memory
# value and one per shared-memory operand of every op
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
    """The size in bytes of what an allocating op allocates."""
    t = op.result.type
    if isinstance(t, T.BarrierType):
        return t.nbytes
    assert isinstance(t, T.MemDescType)
    return t.nbytes


def is_allocation(op: Operation) -> bool:
    return op.name in ("tlx.local_alloc", "tlx.alloc_barriers")


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


def _index_regions(op: Operation, src_regions) -> List[Region]:
    """What `tlx.memdesc_index` `op` names, given the regions of its source: slab `c` of each
    plain region (a constant index), or the whole region (a dynamic index may name any slab)."""
    src = op._operands[0]  # (src, index): single operands, read directly
    c = const_int(op._operands[1])
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
    """Memoized `regions_of` for one module.

    Loop-carried values make the value graph cyclic: a block argument names what its init and
    its yield name, and the yield may be a view of the argument. The answer is the least fixpoint,
    whatever the order of the queries. A value reached again while it is being computed returns
    its approximation so far (nothing at first); the outermost value of the cycle is computed
    again while any approximation in it grew, and only then memoized. A value computed while an
    enclosing one was still open depended on an approximation, so it is not memoized (its own
    approximation is kept: a later computation starts from it). Memoizing those partial answers
    lost a cycle's buffers — a view yielded back into the loop named nothing, and its wgmma read
    got no fence."""

    def __init__(self) -> None:
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
        """`describe_alloc(root)`, memoized."""
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
                src = arg(op, "src")
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
            if n in _REVIEWS:  # trans / reinterpret: same bytes, logical coordinates unknown
                return [region(r.root, r.lo, r.hi, False) for r in self.regions_of(op._operands[0])]
            if n == "arith.select":
                return self._union([arg(op, "true"), arg(op, "false")])
            if n == "scf.for":
                i = v.index
                body = op.regions[0].block
                return self._union([group(op, "inits")[i], body.terminator.operands[i]])
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
            return self._union([group(owner, "inits")[i - 1], v.owner.terminator.operands[i - 1]])
        if owner.name == "scf.while":
            if v.owner is owner.regions[0].block:
                return self._union([group(owner, "inits")[i], owner.regions[1].block.terminator.operands[i]])
            cond = owner.regions[0].block.terminator
            return self._union([cond.operands[1 + i]])
        if owner.name == "tlx.warp_specialize":
            return self._union([group(owner, "captures")[i]])
        return []


class Access(NamedTuple):
    """One shared-memory access of an op: `value` (None for scratch) read or written through a
    proxy (a named tuple: `accesses_of` builds these for every shared-memory op, in every pass)."""

    op: Operation
    value: Optional[Value]
    kind: str  # READ | WRITE
    proxy: str  # GENERIC | ASYNC | BARRIER


def _effect_table() -> Dict[str, Tuple[Tuple[int, str, str], ...]]:
    """For each op with shared-memory effects: (operand group index or -1 for the results, access,
    proxy), from the op catalogue (the same facts `effects_of` reads, looked up once)."""
    table = {}
    for name, d in OPS.items():
        if d.effects:
            table[name] = tuple((-1 if e.target == "result" else d.group_names.index(e.target), e.access, e.proxy)
                                for e in d.effects)
    return table


_EFFECTS = _effect_table()
_SMEM_TYPES = (T.MemDescType, T.BarrierType)
# names of the ops that may touch shared memory (others can only through a scratch_bytes attribute)
EFFECT_NAMES = frozenset(_EFFECTS) | {"tlx.local_alloc"}


def may_access(op: Operation) -> bool:
    """Cheap pre-check: False means `accesses_of(op)` is empty."""
    return op.name in EFFECT_NAMES or bool(op.attrs and op.attrs.get("scratch_bytes"))


def accesses_of(op: Operation) -> List[Access]:
    """Every shared-memory access `op` makes (scratch included; regions' contents excluded): the
    effects `ops.effects_of` declares, read straight from the catalogue (this runs on every op of
    every kernel, several times)."""
    n = op.name
    out: List[Access] = []
    if n == "tlx.local_alloc":
        if op.segments and op.segments[0]:  # with a source: a generic write of the new buffer
            out.append(_new_tuple(Access, (op, op.results[0], WRITE, GENERIC)))
        return out
    eff = _EFFECTS.get(n)
    if eff is not None:
        segs = op.segments
        operands = op._operands
        for gi, access, proxy in eff:
            if gi < 0:
                vals = op.results
            elif gi == 0:
                vals = operands[:segs[0]]
            else:
                start = sum(segs[:gi])
                vals = operands[start:start + segs[gi]]
            for v in vals:
                if isinstance(v.type, _SMEM_TYPES):
                    out.append(_new_tuple(Access, (op, v, access, proxy)))
    if op.attrs and op.attrs.get("scratch_bytes"):
        out.append(_new_tuple(Access, (op, None, WRITE, GENERIC)))
        out.append(_new_tuple(Access, (op, None, READ, GENERIC)))
    return out


def is_cluster_op(op: Operation) -> bool:
    """True when `op` reaches another CTA's shared memory (a multicast TMA load)."""
    return op.name == "tlx.tma_load" and bool(op.attrs.get("multicast"))


def describe_alloc(root) -> str:
    """How records name a buffer: `tlx.local_alloc at kernel.py:12 (2x64x64xf16)`."""
    from ..fences import loc_text

    if root is FUNC_ARG:
        return "a function argument"
    t = root.result.type
    shape = "x".join(str(d) for d in t.shape) + f"x{t.element}" if isinstance(t, T.MemDescType) else str(t)
    return f"{root.name} at {loc_text(root.loc)} ({shape})"


def enclosing_partition(op: Operation) -> Optional[Tuple[Operation, int]]:
    """(warp_specialize op, region index) of the innermost partition region holding `op`."""
    blk = op.parent
    while blk is not None:
        owner = blk.parent_op
        if owner is None:
            return None
        if owner.name == "tlx.warp_specialize":
            for i, r in enumerate(owner.regions):
                if r.block is blk:
                    return owner, i
        blk = owner.parent
    return None


def all_ops(module: Module) -> List[Operation]:
    """Every op of the function body in pre-order (a list; faster than `Module.ops()`)."""
    out: List[Operation] = []
    stack = list(reversed(module.func.regions[0].block.ops))
    pop, push, app = stack.pop, stack.extend, out.append
    while stack:
        op = pop()
        app(op)
        if op.regions:
            for r in reversed(op.regions):
                push(reversed(r.block.ops))
    return out


# the ops only the frontend makes (no pass creates them), and the user's fences: `take_census`
CENSUS_NAMES = frozenset({"tt.dot", "tt.descriptor_load", "tt.descriptor_store", FENCE})


def take_census(module: Module, ctx) -> Dict[str, List[Operation]]:
    """The ops of the module named in CENSUS_NAMES, by name, each list in program order, read off
    the module's skeleton (compiler/passes/skeleton.py), which this reads for the passes: the one
    walk over the whole module. The pipeline takes it of its input, before any pass
    (`census_ops` reads it)."""
    out: Dict[str, List[Operation]] = {n: [] for n in CENSUS_NAMES}
    for op in take_skeleton(module, ctx).preorder():
        lst = out.get(op.name)
        if lst is not None:
            lst.append(op)
    ctx.cache["census"] = out
    return out


def census_ops(module: Module, ctx, name: str) -> List[Operation]:
    """The ops named `name` (a name only the frontend makes: tt.dot, the descriptor ops), in
    program order, for the pass that rewrites them. The pipeline's census of its input answers
    without a walk — no pass creates these ops, and the pass asking is the one that removes them,
    so it takes its name out of the census (a second run walks); without a census, one walk."""
    census = ctx.cache.get("census")
    if census is None or name not in census:
        return [op for op in all_ops(module) if op.name == name]
    return [op for op in census.pop(name) if op.parent is not None]


def shared_regions(ctx) -> RegionAnalysis:
    """The compilation's region analysis, shared by the passes from FenceInsertion on (the first
    that asks creates it). Valid because no later pass changes what a memdesc value names: the
    regions are bytes of allocations, whose sizes do not depend on layouts (all the layout pass
    changes of a memdesc), and the other passes add fences, barriers, register ops and scratch
    attributes, which name no allocation. A pass that rewires memdesc values must drop it
    (``ctx.cache.pop("regions")``)."""
    ra = ctx.cache.get("regions")
    if ra is None:
        ra = ctx.cache["regions"] = RegionAnalysis()
    return ra


# ops that may take a shared-memory value as an operand
def may_use_smem(name: str) -> bool:
    return name.startswith("tlx.") or name in ("scf.yield", "scf.for", "scf.while", "scf.condition", "arith.select")


def number_ops(module: Module) -> Dict[int, int]:
    """Pre-order position of every op (id(op) -> index), for program-order comparisons."""
    pos: Dict[int, int] = {}
    k = 0
    stack = [module.func]
    # iterative pre-order walk
    while stack:
        op = stack.pop()
        pos[id(op)] = k
        k += 1
        for r in reversed(op.regions):
            stack.extend(reversed(r.block.ops))
    return pos

"""ProxyFenceInsertion (pass C): the post-allocation safety net over real byte intervals, and the
pass that makes sure no fence is needless and every fence knows what it separates.

Runs after shared-memory allocation and reads the real ``offset`` of every buffer (Triton
recomputes a layout here, which can disagree with the real one: fence-passes.md §5.7).

**Hazard.** A generic access G and a later async access A to overlapping bytes, at least one of
them a write, with no proxy fence between them on some path: RAW (generic write -> TMA store /
bulk store / wgmma read), WAR (generic read -> TMA / bulk load write), WAW (generic write ->
TMA / bulk load write). async->async and async->generic need no proxy fence (mbarrier
completion and the store / wgmma waits order those).

**Analysis.** A forward may-dataflow over the structured IR. The state holds the generic
accesses still pending (not yet followed by a fence), by absolute byte interval. A fence clears
them; a CTA-scope fence does not clear them for async ops that reach another CTA's shared
memory (multicast TMA: ``multicast`` attribute), which need a cluster-scope fence. cp.async
writes are pending only once they have landed: an `async_commit_group` puts them in a group and
`async_wait_group {pendings = N}` lands the groups with at least N newer ones (a fence before
the wait does not order them). Control flow: `scf.if` joins both branches; loops iterate to a
fixpoint over the back edge, and a loop that may run zero times also passes its entry state
through (a fence in the body does not cover the path that skips it: FlashKDA#24); a loop with a
constant trip count of one has no back edge. Warp specialization: the state before the op flows
into every partition, every partition's end flows to after the op, and an mbarrier hand-off —
an arrive / expect-bytes (or named barrier) in one partition and a wait on the same barrier in
another — carries the arriving partition's pending accesses to the waiter.

**Insertion** (fence passes on, sm_90+): a fence immediately before every async op that
conflicts with a pending access (CTA scope, cluster scope for multicast).

**Guards and pruning.** After insertion, a forward and a backward pass give, for every fence F,
the pending generic accesses that reach F without another fence and the async accesses F
reaches without another fence; the conflicting pairs are what F *guards* (removing F would
leave exactly those hazards). A compiler fence that guards nothing is removed (others placed by
earlier passes made it needless), ProxyFenceInsertion's own fences first, then TMALowering's,
then FenceInsertion's, never two fences that can see each other in one round (removing one can
make the other necessary). A user fence is never removed; one that guards nothing is reported
as redundant.

**Below sm_90** every proxy fence is removed (there is no async proxy, and `fence.proxy.async`
does not exist there).
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, NamedTuple, Optional, Set, Tuple

from ..analysis.access_index import ORDERING_OPS, AccessIndex, trip_count
from ..analysis.dataflow import if_join, loop_fixpoint, while_fixpoint
from ..analysis.flights import NO_FLIGHTS, commit, is_empty, land, union as union_flights
from ..analysis.memory import (ASYNC, EFFECT_NAMES, FENCE, GENERIC, HANDOFF_ACQUIRE, HANDOFF_RELEASE,
                               is_cluster_access, overlap_detail, REMOTE_WRITERS)
from ..fences import Guard, make_fence, op_text
from ..ir.core import Block, Module, Operation
from .manager import PassContext

# op classification codes
K_FENCE, K_GENERIC, K_ASYNC, K_COMMIT, K_WAIT, K_RELEASE, K_ACQUIRE, K_FOR, K_IF, K_WHILE, K_WS, K_OTHER_REGION = range(12)
K_GENERIC_LOCAL = 12  # (forward walk only) a remote store's access, its cluster fence handled by the caller
_REGION_KINDS = {"scf.for": K_FOR, "scf.if": K_IF, "scf.while": K_WHILE}
_LOOKED_AT = EFFECT_NAMES | ORDERING_OPS  # the ops besides region ops and scratch owners the walks see

_new = tuple.__new__  # builds a named tuple without its (several times slower) Python-level __new__


class Pending(NamedTuple):
    """A generic access not yet followed by a proxy fence: bytes [lo, hi) (`box`: a logical
    sub-rectangle of them, or None), a write or a read, made by `op`. `flight` is None once its
    data has landed and -1 for a cp.async write in flight (its commit group is the bucket that
    holds it: flights.py); `cta_fenced` once a CTA-scope fence followed it (it still conflicts
    with async ops that reach other CTAs). The op comes last: `it[:-1]` is what two items must
    share for one to stand for the other."""

    lo: int
    hi: int
    box: Optional[tuple]
    write: bool
    flight: Optional[int]
    cta_fenced: bool
    op: Operation


class AsyncAccess(NamedTuple):
    """An async-proxy access by `op` to bytes [lo, hi) (`box` as for `Pending`); `cluster` when
    the op reaches other CTAs' shared memory (multicast). The op comes last, as in `Pending`."""

    lo: int
    hi: int
    box: Optional[tuple]
    write: bool
    cluster: bool
    op: Operation


# the forward state: (landed items, in-flight items, marks), see `_Forward`


EMPTY = (frozenset(), NO_FLIGHTS, frozenset())


def merge_normalized(a: FrozenSet, b: FrozenSet, rank: Dict[Operation, float], latest: bool) -> FrozenSet:
    """The normalized union of sets `a` and `b` that are already normalized (no two items share a
    key: the item without its op, `it[:-1]`; of two that would, the one whose op ranks latest --
    `latest` -- or earliest in `rank` stays). Only an item of one side that the other lacks can
    share a key with one of the other side (each side is normalized), so only those pairs are
    looked at: the walks' states are always normalized, and most joins add nothing new."""
    if a is b:
        return a
    only_a = a - b
    if not only_a:
        return b
    only_b = b - a
    if not only_b:
        return a
    keys = {it[:-1]: it for it in only_a}
    losers = []
    lost_a = 0  # how many of the losers are a's
    for it in only_b:
        o = keys.get(it[:-1])
        if o is not None:
            newer = rank.get(it.op, 0) > rank.get(o.op, 0)
            if newer == latest:
                losers.append(o)
                lost_a += 1
            else:
                losers.append(it)
    if not losers:
        return a | b
    # the join is often one side exactly (the other's items all lose): return that object, so
    # that later joins and fixpoint tests meet the same set again (an identity test)
    if lost_a == len(losers) == len(only_a):
        return b
    if lost_a == 0 and len(losers) == len(only_b):
        return a
    return (a | b).difference(losers)


class _Model:
    """Per-module facts, from one walk and the access index: op kinds, the accesses of the ops
    that make them (in absolute bytes) and, per block, the ops the walks look at."""

    def __init__(self, module: Module, index: AccessIndex):
        self.module = module
        self.index = index
        self.ra = index.ra
        self.kind: Dict[Operation, int] = {}  # (dicts keyed by the objects themselves: hashed in C)
        # block -> its ops that matter: (op, kind, what the walks need of it: its accesses for
        # K_GENERIC / K_ASYNC, its trip count for K_FOR; `entry`)
        self.steps: Dict[Block, List[Tuple[Operation, int, object]]] = {}
        self.order: Dict[Operation, float] = {}  # op -> pre-order rank among the classified ops
        # op -> (the pending items it makes, their (lo, hi, box, write) keys, their flight)
        self.generic: Dict[Operation, Tuple] = {}
        self.asyncs: Dict[Operation, Tuple[AsyncAccess, ...]] = {}
        self.keys: Dict[Operation, Tuple] = {}  # release / acquire op -> hand-off keys
        self.part: Dict[Operation, Tuple[Operation, int]] = {}  # hand-off op -> its partition
        # ws op -> (partition index, key) of its acquire / release hand-off ops: who takes in a
        # hand-off state walking forward / backward (`walk_partitions`)
        self.acquires: Dict[Operation, List[Tuple[int, Tuple]]] = {}
        self.releases: Dict[Operation, List[Tuple[int, Tuple]]] = {}
        self.roots: Dict[Tuple[int, int], object] = {}  # (lo, hi) describing -> root, for records
        self.fences: List[Operation] = []
        self.has_cluster = False
        self.cluster_bytes: List[Tuple[int, int]] = []  # bytes that accesses reaching other CTAs touch
        self.remote_writes: Set[Operation] = set()  # generic stores into another CTA's memory
        self.remote_bytes: List[Tuple[int, int]] = []  # the bytes they write
        self._classify(module.func.regions[0].block, None)

    def _classify(self, blk: Block, part) -> None:
        steps: List[Tuple[Operation, int, object]] = []
        self.steps[blk] = steps
        looked_at = _LOOKED_AT
        op = blk.first_op
        while op is not None:  # (the linked list read directly: this visits every op of the module)
            if op.name in looked_at or op.regions or (op.attrs and "scratch_bytes" in op.attrs):
                self._classify_op(op, part, steps)  # most ops have nothing to do with shared memory
            op = op.next_op

    def _classify_op(self, op: Operation, part, steps: List[Tuple[Operation, int, object]]) -> None:
        kind = self.kind
        n = op.name
        if op.regions:
            if n == "tlx.warp_specialize":
                kind[op] = K_WS
                for i, r in enumerate(op.regions):
                    self._classify(r.block, (op, i))
            else:
                kind[op] = _REGION_KINDS.get(n, K_OTHER_REGION)
                for r in op.regions:
                    self._classify(r.block, part)
        elif n == FENCE:
            kind[op] = K_FENCE
            self.fences.append(op)
        elif n == "tlx.async_commit_group":
            kind[op] = K_COMMIT
        elif n == "tlx.async_wait_group":
            kind[op] = K_WAIT
        else:
            accs = self.index.of(op)
            if accs:
                self._accesses(op, accs)
            if part is not None and (n in HANDOFF_RELEASE or n in HANDOFF_ACQUIRE):
                # a hand-off carries state between partitions: outside a warp-specialize op
                # there is no other partition, and the walks skip the op
                self.keys[op] = keys = self._handoff_keys(op)
                self.part[op] = part
                for side, names in ((self.acquires, HANDOFF_ACQUIRE), (self.releases, HANDOFF_RELEASE)):
                    if n in names:
                        side.setdefault(part[0], []).extend((part[1], key) for key in keys)
                if op not in kind:  # named_barrier_wait both releases and acquires
                    kind[op] = K_RELEASE if n in HANDOFF_RELEASE else K_ACQUIRE
        if op in kind:
            steps.append(self.entry(op, kind[op]))
            self.order[op] = len(self.order)

    def _accesses(self, op: Operation, accs) -> None:
        gen, asy = [], []
        for write, proxy, byts in accs:
            if proxy == GENERIC:
                if write and is_cluster_access(op, write):  # a store into another CTA's memory
                    self.has_cluster = True
                    self.cluster_bytes.extend((lo, hi) for lo, hi, _, _ in byts)
                    self.remote_bytes.extend((lo, hi) for lo, hi, _, _ in byts)
                    self.remote_writes.add(op)
                for lo, hi, box, root in byts:
                    gen.append((lo, hi, box, write))
                    self.roots[(lo, hi)] = root
            elif proxy == ASYNC:
                cl = is_cluster_access(op, write)
                if cl:
                    self.has_cluster = True
                    self.cluster_bytes.extend((lo, hi) for lo, hi, _, _ in byts)
                for lo, hi, box, root in byts:
                    asy.append(_new(AsyncAccess, (lo, hi, box, write, cl, op)))
                    self.roots[(lo, hi)] = root
        if asy:
            self.kind[op] = K_ASYNC
            self.asyncs[op] = tuple(asy)
        elif gen:
            self.kind[op] = K_GENERIC
            # the items the op leaves pending are the same at every visit: made once, with the
            # keys (bytes, write) a pending item of the same flight must share to be superseded
            fl = -1 if op.name == "tlx.async_load" else None
            new = frozenset([_new(Pending, (lo, hi, box, w, fl, False, op)) for lo, hi, box, w in gen])
            self.generic[op] = (new, frozenset([it[:4] for it in new]), fl)

    def entry(self, op: Operation, k: int) -> Tuple[Operation, int, object]:
        """`op`'s entry in `steps`: (op, kind, its accesses / trip count / None)."""
        if k == K_GENERIC:
            return (op, k, self.generic[op])
        if k == K_ASYNC:
            return (op, k, self.asyncs[op])
        if k == K_FOR:
            return (op, k, trip_count(op))
        return (op, k, None)

    def reread(self, blk: Block) -> None:
        """Rebuild one block's `steps` after fences were inserted into it."""
        kind = self.kind
        self.steps[blk] = [self.entry(op, kind[op]) for op in blk.ops if op in kind]

    def _handoff_keys(self, op: Operation) -> Tuple:
        if op.name.startswith("tlx.named_barrier"):
            return (("named", op.attrs.get("id")),)
        keys = []
        for rg in self.ra.regions_of(op.arg("bar")):
            keys.append((id(rg.root), rg.lo if rg.plain and rg.hi - rg.lo == 8 else None))
        return tuple(keys)


def _keys_match(a, b) -> bool:
    if a[0] != b[0]:
        return False
    return a[1] is None or b[1] is None or a[1] == b[1]


def walk_partitions(walker, op: Operation, st):
    """The state after (forward) or before (backward) the warp-specialize `op` from `st`: every
    partition walked from `st`, the results joined. Partitions hand off to each other (mbarriers,
    named barriers), so a partition is walked again while a hand-off state it takes in has
    changed since its walk began — the hand-off ops mark it in `walker.dirty` (`handoff_step`);
    a partition not marked would repeat its last walk exactly. At most 20 sweeps."""
    regions = op.regions
    empty = walker.empty
    outs = [empty] * len(regions)
    todo = walker.dirty[op] = set(range(len(regions)))
    for _ in range(20):
        if not todo:
            break
        for i, r in enumerate(regions):
            if i in todo:
                todo.discard(i)
                outs[i] = walker.block(r.block, st)
    del walker.dirty[op]
    out = empty
    for o in outs:
        out = walker.union(out, o)
    return out


def handoff_step(walker, op: Operation, st, forward: bool):
    """The state after (forward) or before (backward) hand-off op `op` from `st`: walking forward a
    release publishes the state under its keys and an acquire takes in what the other partitions
    of its warp-specialize op published under matching keys; walking backward the roles swap (an
    acquire publishes the async accesses it reaches, a release takes them in). A named-barrier
    wait does both, publishing first. A published state that grows marks the partitions that take
    it in for another walk (`walk_partitions`)."""
    m = walker.m
    part = m.part[op]
    ws = part[0]
    table = walker.handoff.get(ws)
    if table is None:
        table = walker.handoff[ws] = {}  # hand-offs stay within one warp-specialize op
    n = op.name
    publish, take = (HANDOFF_RELEASE, HANDOFF_ACQUIRE) if forward else (HANDOFF_ACQUIRE, HANDOFF_RELEASE)
    keys = m.keys[op]
    if n in publish:
        takers = (m.acquires if forward else m.releases).get(ws, ())
        for key in keys:
            hk = (key, part)
            old = table.get(hk, walker.empty)
            new = walker.union(old, st)
            if new != old:
                table[hk] = new
                todo = walker.dirty.get(ws)
                if todo is not None:
                    todo.update(i for i, k in takers if i != part[1] and _keys_match(key, k))
    if n in take:
        entries = list(table.items())
        for key in keys:
            for (k2, p2), s2 in entries:
                if p2 != part and _keys_match(key, k2):
                    st = walker.union(st, s2)
    return st


def conflict(item: Pending, acc: AsyncAccess, fence_scope: Optional[str] = None) -> bool:
    """Whether pending generic `item` and async access `acc` form a hazard that a fence of
    `fence_scope` (None: any fence that would be inserted) separates."""
    lo, hi, box, w, flight, ctaf, _op = item
    alo, ahi, abox, aw, cl, _aop = acc
    cl = cl or (w and _op.name in REMOTE_WRITERS)  # a store into another CTA's memory: cluster scope
    if flight is not None or not (w or aw):
        return False
    if not cl and ctaf:
        return False
    if fence_scope == "cta" and cl:
        return False
    return overlap_detail(lo, hi, box, alo, ahi, abox)


class _Forward:
    """The forward walk: inserts fences (when `insert`), records the state reaching each fence.

    A state is a triple (landed, in flight, marks): the pending items whose data has landed
    (flight None: the only ones that can conflict, and the ones a fence clears), the cp.async
    items still in flight by commit-group depth (flight -1, `flights.Flights`: only commits and
    waits change them), and the fences that reach this point with no fence between (for the
    pruning's neighbours; only a walk with `marks` records them, the others keep that part
    empty). The split is the one `norm`'s key already makes, so each part (and each bucket)
    stays normalized on its own; it keeps the per-op work to the part an op can change — a
    kernel that leaves cp.async groups in flight carries them through every later op."""

    def __init__(self, model: _Model, ctx: PassContext, insert: bool, marks: bool = False):
        self.m = model
        self.ctx = ctx
        self.insert = insert
        self.marks = marks
        self.pending_at: Dict[Operation, Tuple] = {}  # fence -> state before it
        self.handoff: Dict[Operation, Dict[Tuple, Tuple]] = {}  # ws op -> (key, part) -> state published
        self.unfenced: List[Tuple] = []  # conflicts seen while not inserting
        self.inserted: List[Operation] = []
        self.planned: Dict[Operation, List[Operation]] = {}  # anchor -> fences to insert before it
        self.after: Dict[Operation, Operation] = {}  # remote store -> the cluster fence right after it
        self.dirty: Dict[Operation, Set[int]] = {}  # ws op -> partitions to walk again (`walk_partitions`)
        self.empty = EMPTY
        rank = model.order  # (updated in place as fences are inserted)
        self._join = lambda a, b: merge_normalized(a, b, rank, True)

    def run(self) -> None:
        self.unfenced = []
        self.block(self.m.module.func.regions[0].block, EMPTY)

    def norm(self, items: FrozenSet) -> FrozenSet:
        """One pending item per (bytes, kind, flight, fence state): the latest op in program order
        stands for the others (they conflict with exactly the same async accesses)."""
        rank = self.m.order
        seen: Dict[Tuple, Pending] = {}
        for it in items:
            key = it[:-1]
            o = seen.get(key)
            if o is None or rank.get(it.op, 0) > rank.get(o.op, 0):
                seen[key] = it
        return items if len(seen) == len(items) else frozenset(seen.values())

    def union(self, a, b):
        if a is b or not b[0] and not b[2] and is_empty(b[1]):
            return a
        if not a[0] and not a[2] and is_empty(a[1]):
            return b
        return (self._join(a[0], b[0]), union_flights(a[1], b[1], self._join), a[2] | b[2])

    def block(self, blk: Block, st):
        planned = self.planned
        for op, k, data in self.m.steps[blk]:
            if planned:
                for f in planned.get(op, ()):
                    st = self.op(f, K_FENCE, None, st)
            st = self.op(op, k, data, st)
        return st

    def materialize(self) -> None:
        """Put the planned fences into the IR."""
        if not self.planned and not self.after:
            return
        blocks = {}
        for op, f in self.after.items():
            blk = blocks[op.parent] = op.parent
            blk.insert_after(op, f)
            self.m.order[f] = self.m.order[op] + 0.5
        self.after = {}
        for anchor, fences in self.planned.items():
            blk = blocks[anchor.parent] = anchor.parent
            for j, f in enumerate(fences):
                blk.insert_before(anchor, f)
                self.m.order[f] = self.m.order[anchor] - 1 + (j + 1) / (len(fences) + 1)
        for blk in blocks:
            self.m.reread(blk)
        self.planned = {}

    def op(self, op: Operation, k: int, data, st):
        """The state after `op` of kind `k` (`data`: see `_Model.steps`) from state `st`."""
        m = self.m
        if k == K_FENCE:
            self.pending_at[op] = st
            mark = frozenset((op,)) if self.marks else st[2]
            if op.attrs.get("cluster") or not m.has_cluster:
                # in-flight cp.async stays (a fence does not order it); the fences before this one
                # reach no further (this one separates everything they do)
                return (frozenset(), st[1], mark)
            # a CTA fence: what is pending on bytes an async op reaching other CTAs touches stays
            # pending for such ops (everything else this fence separates), and so do the fences
            # before it (they may separate those hazards too); with nothing left pending, they
            # reach no further
            cb = m.cluster_bytes
            keep = self.norm(frozenset(it._replace(cta_fenced=True) for it in st[0]
                                       if any(lo < it.hi and it.lo < hi for lo, hi in cb)))
            return (keep, st[1], mark | st[2] if keep else mark)
        if k == K_GENERIC and op in m.remote_writes and self.insert and self._async_touches(op, data[0]):
            # the reader (another CTA, after a cluster barrier or an mbarrier hand-off) cannot fence
            # for the writer: the writer fences at cluster scope right after its store
            st = self.op(op, K_GENERIC_LOCAL, data, st)
            return self.op(self._fence_after(op, data[0]), K_FENCE, None, st)
        if k == K_GENERIC or k == K_GENERIC_LOCAL:
            new, keys, fl = data
            # a new access supersedes a pending one of the same kind to the same bytes (it
            # conflicts with everything the old one does, now and after any fence or wait); this
            # keeps the state as small as the set of distinct byte ranges in fence-free code
            if fl is None:  # landed at once
                old = st[0]
                if any(it[:4] in keys for it in old):  # (every landed item has flight None)
                    old = frozenset([it for it in old if it[:4] not in keys])
                return (old | new, st[1], st[2])
            fls = st[1]  # a cp.async write: not committed yet
            old = fls[0]
            if any(it[:4] in keys for it in old):
                old = frozenset([it for it in old if it[:4] not in keys])
            return (st[0], (old | new,) + fls[1:], st[2])
        if k == K_ASYNC:
            accs = data
            # only landed items conflict; the byte test (the cheapest) first
            hits = [(it, a) for a in accs for it in st[0] if it.lo < a.hi and a.lo < it.hi and conflict(it, a)]
            if hits:
                if self.insert:
                    cluster = any(a.cluster or (it.write and it.op in m.remote_writes) for it, a in hits)
                    fence = self._insert_before(op, hits, cluster)
                    return self.op(fence, K_FENCE, None, st)
                self.unfenced.extend(hits)
            return st
        if k == K_COMMIT:
            fl = commit(st[1], self._join)
            return st if fl is st[1] else (st[0], fl, st[2])
        if k == K_WAIT:  # the groups with at least `pendings` newer ones land
            gone, fl = land(st[1], op.attrs.get("pendings", 0))
            if not gone:
                return st
            landed = frozenset([it._replace(flight=None) for b in gone for it in b])
            return (self.norm(st[0] | landed), fl, st[2])
        if k == K_RELEASE or k == K_ACQUIRE:  # (hand-off ops touch no memory but mbarriers)
            return handoff_step(self, op, st, True)
        if k == K_FOR:
            return loop_fixpoint(self.block, self.union, op, data, st)
        if k == K_IF:
            return if_join(self.block, self.union, op, st)
        if k == K_WHILE:
            return while_fixpoint(self.block, self.union, op, st)
        if k == K_WS:
            return walk_partitions(self, op, st)
        return st

    def _async_touches(self, op: Operation, items) -> bool:
        """Whether some async access of the kernel overlaps the bytes of `items` (op's pending writes)."""
        return any(it.lo < a.hi and a.lo < it.hi and overlap_detail(it.lo, it.hi, it.box, a.lo, a.hi, a.box)
                   for accs in self.m.asyncs.values() for a in accs for it in items)

    def _fence_after(self, op: Operation, items) -> Operation:
        """The cluster-scope fence right after remote store `op` (made once, reused by later walks)."""
        fence = self.after.get(op)
        if fence is not None:
            return fence
        fence, rec = self._new_fence(op, True)
        self.after[op] = fence
        rec.add_writer(op)
        rec.hazard = "RAW"
        rec.reason = (f"{op_text(op)} writes another CTA's shared memory, which an async-proxy op (TMA, bulk "
                      "copy or wgmma) of that CTA accesses after it")
        rec.placement = ["right after the remote store: the reading CTA cannot fence for the writer "
                         "(ProxyFenceInsertion, after allocation)"]
        rec.notes.append("cluster scope: the generic write lands in another CTA's shared memory")
        return fence

    def _new_fence(self, op: Operation, cluster: bool):
        """A fence of this pass for `op` (not yet in the IR) and its record."""
        fence, rec = make_fence("proxy_fence_insertion", self.ctx.fences, op.loc, cluster)
        self.m.kind[fence] = K_FENCE
        self.m.fences.append(fence)
        self.inserted.append(fence)
        return fence, rec

    def _insert_before(self, op: Operation, hits, cluster: bool) -> Operation:
        fence, rec = self._new_fence(op, cluster)
        self.planned.setdefault(op, []).append(fence)
        kinds = set()
        hits = _in_program_order(list(hits), self.m)
        for it, a in hits:
            rec.add_writer(it.op)
            kinds.add(_hazard_kind(it, a))
        rec.add_reader(op)
        rec.hazard = "/".join(sorted(kinds))
        rec.byte_range = _byte_range(hits)
        descs = (_describe_root(self.m, self.m.roots.get((a.lo, a.hi))) for _, a in hits)
        rec.buffer = ", ".join(dict.fromkeys(d for d in descs if d))  # each once, in order
        rec.reason = (f"{rec.hazard}: on some path {', '.join(rec.writers)} reach(es) {op_text(op)} over overlapping "
                      f"shared-memory bytes with no proxy fence in between")
        rec.placement = ["right before the async op (ProxyFenceInsertion, after allocation)"]
        if cluster:
            rec.notes.append("cluster scope: the async op reaches another CTA's shared memory (multicast)")
        return fence



def _describe_root(model: _Model, root) -> Optional[str]:
    """The text naming allocation or scratch owner `root` in a record (None: not an op)."""
    if not isinstance(root, Operation):
        return None
    if root.name in ("tlx.local_alloc", "tlx.alloc_barriers"):
        return model.ra.describe(root)
    return f"scratch of {op_text(root)}"


def _byte_range(gs) -> Tuple[int, int]:
    """The bytes from the first to the last overlap of the (generic item, async access) pairs `gs`."""
    return min(max(it.lo, a.lo) for it, a in gs), max(min(it.hi, a.hi) for it, a in gs)


def _hazard_kind(item: Pending, acc: AsyncAccess) -> str:
    if acc.write:
        return "WAW" if item.write else "WAR"
    return "RAW"


class _Backward:
    """The backward walk: the async accesses each fence reaches before the next fence."""

    def __init__(self, model: _Model):
        self.m = model
        self.reach_at: Dict[Operation, FrozenSet] = {}  # fence -> async accesses after it
        self.handoff: Dict[Operation, Dict[Tuple, FrozenSet]] = {}
        self.dirty: Dict[Operation, Set[int]] = {}  # ws op -> partitions to walk again (`walk_partitions`)
        self.empty: FrozenSet = frozenset()

    def run(self) -> None:
        self.block(self.m.module.func.regions[0].block, frozenset())

    def union(self, a: FrozenSet, b: FrozenSet) -> FrozenSet:
        """The join, normalized: one reachable async access per (bytes, kind, cluster), the
        earliest op standing for the others (they conflict with exactly the same generic
        accesses)."""
        if not b or a is b:
            return a
        if not a:
            return b
        return merge_normalized(a, b, self.m.order, False)

    def block(self, blk: Block, st: FrozenSet) -> FrozenSet:
        for op, k, data in reversed(self.m.steps[blk]):
            st = self.op(op, k, data, st)
        return st

    def op(self, op: Operation, k: int, data, st: FrozenSet) -> FrozenSet:
        """The state before `op` of kind `k` (`data`: see `_Model.steps`) from the state after it."""
        if k == K_FENCE:
            self.reach_at[op] = st
            if op.attrs.get("cluster"):
                return frozenset()
            # a CTA fence does not separate an access from a store into another CTA's memory
            rb = self.m.remote_bytes
            return frozenset(a for a in st if a.cluster or any(lo < a.hi and a.lo < hi for lo, hi in rb))
        if k == K_ASYNC:
            return self.union(st, frozenset(data))
        if k == K_RELEASE or k == K_ACQUIRE:
            return handoff_step(self, op, st, False)
        if k == K_FOR:
            return loop_fixpoint(self.block, self.union, op, data, st)
        if k == K_IF:
            return if_join(self.block, self.union, op, st)
        if k == K_WHILE:
            # before -> (exit | after -> before)
            before_entry = frozenset()
            for _ in range(50):
                a_entry = self.block(op.regions[1].block, before_entry)
                b_entry = self.block(op.regions[0].block, self.union(st, a_entry))
                if b_entry == before_entry:
                    break
                before_entry = b_entry
            return before_entry
        if k == K_WS:
            return walk_partitions(self, op, st)
        return st

def _guards(fence: Operation, pending, reach: FrozenSet) -> List[Tuple]:
    scope = "cluster" if fence.attrs.get("cluster") else "cta"
    out = []
    for it in pending[0]:  # the landed items (in-flight ones conflict with nothing)
        lo, hi = it.lo, it.hi
        for a in reach:
            if lo < a.hi and a.lo < hi and conflict(it, a, scope):
                out.append((it, a))
    return out


PRIORITY = {"proxy_fence_insertion": 0, "tma_lowering": 1, "fence_insertion": 2}


def _analyse(model: _Model, ctx: PassContext, insert: bool):
    fwd = _Forward(model, ctx, insert)
    fwd.run()
    fwd.materialize()
    bwd = _Backward(model)
    bwd.run()
    return fwd, bwd


def _live_fences(model: "_Model") -> List[Operation]:
    return [f for f in model.fences if f.parent is not None]


def run(module: Module, ctx: PassContext) -> None:
    """Insert missing fences, remove needless compiler fences, fill every fence's record."""
    if ctx.capability < 90:
        for f in [op for op in module.ops() if op.name == FENCE]:
            rec = ctx.fences.of(f)
            rec.removed = True
            rec.removed_reason = (f"target {ctx.options.target} has no async proxy (fence.proxy.async needs sm_90); "
                                  "no proxy fence is emitted below sm_90")
            f.erase()
        return
    insert = ctx.proxy_fences_enabled
    index = ctx.analyses.get(AccessIndex, module)
    model = _Model(module, index)
    fwd, bwd = _analyse(model, ctx, insert)
    ctx.stats["proxy_fence_insertion.inserted"] = len(fwd.inserted)
    removed_total = 0
    for _round in range(1000):
        fences = _live_fences(model)
        guards = {f: _guards(f, fwd.pending_at.get(f, EMPTY), bwd.reach_at.get(f, frozenset()))
                  for f in fences}
        if not insert:
            break
        cands = [f for f in fences if not guards[f] and f.attrs.get("origin", "user") != "user"]
        if not cands:
            break
        pos = {f: i for i, f in enumerate(fences)}
        cands.sort(key=lambda f: (PRIORITY.get(f.attrs.get("origin"), 9), -pos[f]))
        # which fences see each other: a forward walk that records the fence marks (the walks
        # above leave them out: most compilations remove nothing, and marks flowing between
        # partitions make their hand-off states grow, costing walks)
        marked = _Forward(model, ctx, False, marks=True)
        marked.run()
        neighbours: Dict[Operation, Set[Operation]] = {f: set() for f in fences}
        for f in fences:
            for g in marked.pending_at.get(f, EMPTY)[2]:
                if g in neighbours:
                    neighbours[f].add(g)
                    neighbours[g].add(f)
        blocked: Set[Operation] = set()
        for f in cands:
            if f in blocked:  # next round: this removal may have made it necessary
                continue
            rec = ctx.fences.of(f)
            rec.removed = True
            rec.removed_reason = ("needless: on no path does it separate a generic access from an async one "
                                  "that no other fence separates")
            f.erase()
            removed_total += 1
            blocked |= neighbours[f]
        model = _Model(module, index)
        fwd, bwd = _analyse(model, ctx, False)
    ctx.stats["proxy_fence_insertion.removed"] = removed_total
    # fill the records
    fences = sorted(_live_fences(model), key=lambda f: model.order[f])
    for f in fences:
        rec = ctx.fences.of(f)
        gs = _in_program_order(_guards(f, fwd.pending_at.get(f, EMPTY), bwd.reach_at.get(f, frozenset())),
                               model)
        rec.guards = _guard_records(gs, model)
        if gs:
            rec.byte_range = _byte_range(gs)
            if not rec.writers:
                for it, _ in gs:
                    rec.add_writer(it.op)
            if not rec.readers:
                for _, a in gs:
                    rec.add_reader(a.op)
            if not rec.buffer:
                rec.buffer = ", ".join(sorted({g.buffer for g in rec.guards}))
            rec.redundant = False
        elif rec.origin == "user":
            # no hazard has this fence as its only guard; it still counts when it is the first
            # fence after a pending generic access on the way to a conflicting async access
            gs = _in_program_order(_first_fence_guards(f, fwd.pending_at.get(f, EMPTY), model), model)
            rec.guards = _guard_records(gs, model)
            rec.redundant = not gs
            rec.reason = rec.reason or "written by the user"
            if gs:
                rec.notes.append("later fences on the same paths also separate these accesses")
    # worded as a fence's guards (with the buffer and bytes), each once: the walk meets a hazard
    # at every visit of its ops (a loop body twice or more)
    ctx.stats["proxy_fence_insertion.unfenced"] = [
        str(g) for g in _guard_records(_in_program_order(fwd.unfenced, model), model)]


def _reachable_after(op: Operation):
    """Ops that may run after `op` (over-approximated: the rest of every enclosing block, every
    enclosing loop and warp-specialize op whole)."""
    cur = op
    while cur.parent is not None:
        blk = cur.parent
        o = cur.next_op
        while o is not None:
            yield o
            yield from o.iter_nested()
            o = o.next_op
        owner = blk.parent_op
        if owner is None or owner.name == "tt.func":
            return
        if owner.name in ("scf.for", "scf.while", "tlx.warp_specialize"):
            yield from owner.iter_nested()
        cur = owner


def _first_fence_guards(fence: Operation, pending, model: _Model) -> List[Tuple]:
    scope = "cluster" if fence.attrs.get("cluster") else "cta"
    items = list(pending[0])  # the landed items
    if not items:
        return []
    out = []
    for o in _reachable_after(fence):
        for a in model.asyncs.get(o, ()):
            for it in items:
                if conflict(it, a, scope):
                    out.append((it, a))
    return out


def _in_program_order(gs: List[Tuple], model: _Model) -> List[Tuple]:
    """(generic item, async access) pairs sorted by where their ops run, then by bytes: the
    pending sets are frozensets, whose order follows object addresses, so without this a record's
    writers, readers and guards (and the explain_fences text) could change order between runs."""
    far = float("inf")
    return sorted(gs, key=lambda g: (model.order.get(g[0].op, far), model.order.get(g[1].op, far),
                                     g[0].lo, g[0].hi, g[1].lo, g[1].hi))


def _guard_records(gs, model: _Model) -> List[Guard]:
    out: List[Guard] = []
    seen = set()
    for it, a in gs:
        key = (it.op, a.op, _hazard_kind(it, a))
        if key in seen:
            continue
        seen.add(key)
        buf = _describe_root(model, model.roots.get((a.lo, a.hi)) or model.roots.get((it.lo, it.hi))) or "?"
        out.append(Guard(_hazard_kind(it, a), op_text(it.op), it.op.loc, op_text(a.op), a.op.loc, buf,
                         (max(it.lo, a.lo), min(it.hi, a.hi))))
    return out

"""CTA barriers: a `tlx.cta_barrier` (bar.sync) wherever threads must wait for each other's
shared-memory accesses. Runs after ProxyFenceInsertion, on allocated IR.

A proxy fence orders one thread's accesses across proxies; it does not make one thread wait for
another. When several threads write a tile that one elected thread then hands to the TMA unit,
the order must be: every thread writes, every thread fences, all threads meet at a barrier,
then the TMA op is issued (st.shared -> fence.proxy.async -> bar.sync -> TMA store). This pass
supplies the barriers, like Triton's Membar analysis (lib/Analysis/Membar.cpp), with what
orders what made explicit:

* Two generic accesses of different threads to overlapping bytes, at least one a write
  (`local_store` then `local_load` with another layout, scratch reuse, ...): a barrier between
  them. cp.async writes count once they have landed (`async_wait_group`), since each thread
  waits only for its own copies: a barrier or fence between a copy and its wait orders nothing
  (Triton syncs after every async wait for the same reason).
* A generic access followed by an async op on overlapping bytes — TMA / bulk store or wgmma
  reading what other threads wrote, TMA / bulk load overwriting what they read or wrote: a
  barrier right before the async op, and it must come *after* the proxy fence — a barrier that
  precedes the fence does not count (every thread's fence must be done before the issue).
* An async read followed by a generic write of the same bytes (overwriting a TMA-store source
  or a wgmma operand): the issuing thread's wait (`tma_store_wait`, `async_dot_wait`) orders
  only that thread, so a barrier goes before the write. A wgmma of a partition of at most one
  warpgroup is complete for every thread after `async_dot_wait {pendings = 0}` (the wait is
  warpgroup-collective): no barrier.
* An async read by wgmma followed by an async write (a TMA / bulk load refilling an operand
  slot) in a partition of several warpgroups: each warpgroup's `async_dot_wait` retires only its
  own wgmma and the load is issued by one thread, so a barrier goes before the load (TLX's
  `barrier_expect_bytes` syncs the partition for the same reason).
* Async writes need none afterwards: an mbarrier wait orders TMA / bulk-load data for every
  thread that waits.
* mbarrier initialization (`alloc_barriers`, one thread) before any other mbarrier op on those
  barriers: a barrier. Re-initialization or invalidation (`alloc_barriers` run again in a loop,
  `barrier_inval`; one thread) after any use of those barriers (a wait, arrive, expect or TMA
  completing on them, by any thread): a barrier, so that no thread still polls the phase the
  leader is about to reset. An `barrier_arrive` / `barrier_expect_bytes` (issued by the partition's
  leader thread) publishes every thread's earlier accesses: a barrier before it when any are
  pending (the code generator lowers these ops without a sync of their own). A per-thread
  arrive (a barrier made by `alloc_warp_barrier`) needs none: every thread arrives after its own
  accesses, and the phase completes only when all have.
* A `barrier_wait` (every thread polls the phase parity) followed by the leader's
  `barrier_arrive` / `barrier_expect_bytes` on any mbarrier: a barrier between them. The leader
  runs ahead of the other warps of its partition (nothing but a barrier holds them together: an
  mbarrier wait, a `wgmma.wait_group` and the leader's own arrive are per thread or per warp),
  and its arrive may let the waited mbarrier complete two more phases while a slower warp still
  polls the old one: on the same mbarrier directly; on another through a partner — a consumer
  releases ring slot s on empty[s], the producer refills it, full[s] completes again, and so
  does it a lap later. A thread still polling when two phases have completed sees its parity
  back and waits a whole cycle more, a hang (or, where the cycle does come, a read of the next
  lap's data). Triton syncs the partition before every leader arrive for this reason. Per-thread
  arrivals (`alloc_warp_barrier`) need none: the phase cannot complete before every thread,
  each past its own wait, has arrived.

A barrier that would land inside a branch (or a loop) whose condition (bounds) derive from
`tlx.thread_id` is refused with an error at the op that needs it: only some threads of the
partition would reach the bar.sync, a hang.

Placement: right before the op that conflicts, hoisted out of enclosing loops whose every
conflicting access happened (and was fenced, for async ops) before the loop, so a K loop does not
pay a bar.sync per iteration for writes made before it. Barriers never leave a warp-specialize
partition; inside one the code generator lowers `tlx.cta_barrier` to the partition's named
barrier. Entering a warp-specialize op synchronizes the CTA (cp.async writes in flight stay in
flight through it). Existing `tlx.cta_barrier` ops
count. Below sm_90 the same rules hold for the generic accesses.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, NamedTuple, Optional, Tuple

from ..analysis.access_index import AccessIndex, trip_count
from ..analysis.dataflow import if_join, loop_fixpoint, while_fixpoint
from ..analysis.flights import FLIGHT_CAP
from ..analysis.memory import ASYNC, BARRIER, EFFECT_NAMES, FENCE, GENERIC
from ..errors import TLXCompileError
from ..ir.core import Block, Module, Operation, Value
from .manager import PassContext


class Pending(NamedTuple):
    """An access some thread made that later accesses of other threads may have to wait for."""

    lo: int  # bytes [lo, hi)
    hi: int
    write: bool
    op: Operation
    # 'g' generic, 'a' async read (wgmma / TMA store source), 'b' mbarrier initialization or
    # invalidation, 'u' mbarrier use (wait / arrive / expect / TMA completion)
    cls: str
    # 'U' unsynced+unfenced, 'F' fenced, 'S' synced (not fenced since), 'SF' synced then fenced;
    # for async reads: 'P' not yet complete (its wait has not run), 'U' complete, 'PB' a wgmma of a
    # multi-warpgroup partition with a barrier since its issue (see `access`)
    state: str
    # for cp.async: None landed, -1 uncommitted, k committed with k newer groups. Until its own
    # thread's wait lands it, a cp.async write is ordered by nothing: barriers and fences leave
    # in-flight items as they are (it lands unsynced and unfenced)
    flight: Optional[int]


_new = tuple.__new__  # builds a named tuple without its (several times slower) Python-level __new__


def _with_state(it: Pending, state: str) -> Pending:
    return _new(Pending, (it.lo, it.hi, it.write, it.op, it.cls, state, it.flight))


def _with_flight(it: Pending, flight: Optional[int]) -> Pending:
    return _new(Pending, (it.lo, it.hi, it.write, it.op, it.cls, it.state, flight))


SYNC = {"U": "S", "F": None, "S": "S", "SF": None, "P": "P", "PB": "PB"}  # what a barrier makes of an item (None: gone)
FENCED = {"U": "F", "S": "SF", "F": "F", "SF": "SF"}

K_BAR, K_FENCE, K_ACC, K_COMMIT, K_WAIT, K_DOTWAIT, K_FOR, K_IF, K_WHILE, K_WS, K_REGION, K_STOREWAIT = range(12)
_SIMPLE = {"tlx.cta_barrier": K_BAR, FENCE: K_FENCE, "tlx.async_commit_group": K_COMMIT,
           "tlx.async_wait_group": K_WAIT, "tlx.tma_store_wait": K_STOREWAIT, "tlx.async_dot_wait": K_DOTWAIT}
_RELEVANT = EFFECT_NAMES | set(_SIMPLE)


class _CpAsyncWrite:
    """The op of every cp.async write item. Nothing in the walk asks which cp.async made an item
    (their barriers are never hoisted), and with one stand-in the items of different copies into
    the same bytes are one item: a kernel that leaves groups in flight would otherwise carry an
    item per copy op and group depth through the rest of the kernel."""

    name = "tlx.async_load"

    def __repr__(self) -> str:
        return "CP_ASYNC_WRITE"


CP_ASYNC_WRITE = _CpAsyncWrite()


# the walk's state: (landed items, cp.async items in flight). Barriers, fences and accesses act
# on the landed part only; commits and waits on the in-flight part (a kernel that leaves groups in
# flight carries them through every later op untouched)
State = Tuple[FrozenSet, FrozenSet]
_NONE: FrozenSet = frozenset()
EMPTY: State = (_NONE, _NONE)


def _union(a: State, b: State) -> State:
    """The join of two states, part by part."""
    if a is b:
        return a
    return (a[0] | b[0], a[1] if a[1] is b[1] else a[1] | b[1])


def _same_kind(it: Pending) -> Tuple:
    """What a newer access must share with a pending item to supersede it: bytes, write, class,
    flight (and the op for async reads, whose completions differ)."""
    return (it.lo, it.hi, it.write, it.cls, it.flight, it.op.name if it.cls == "a" else "")


class _Walker:
    def __init__(self, module: Module, ctx: PassContext):
        self.module = module
        self.ctx = ctx
        self.index = ctx.analyses.get(AccessIndex, module)
        self.kind: Dict[Operation, int] = {}  # (dicts keyed by the objects themselves: hashed in C)
        # block -> its ops that matter: (op, kind, what the walk needs of it: its accesses for
        # K_ACC, its partition's warps for K_DOTWAIT, its trip count for K_FOR)
        self.steps: Dict[Block, List[Tuple[Operation, int, object]]] = {}
        self.acc: Dict[Operation, Tuple] = {}  # op -> (generic, async reads, async writes, barrier init, barrier use, ...)
        self.warps: Dict[Operation, int] = {}  # op -> warps of its partition
        self.pre_states: List[Tuple[Operation, State]] = []  # enclosing loops and their entry states
        self.inserted = 0
        self.planned: Dict[Operation, Operation] = {}  # anchor -> the barrier to insert before it
        self._classify(module.func.regions[0].block, int(module.attrs.get("num_warps", ctx.options.num_warps)))

    def _classify(self, blk: Block, warps: int) -> None:
        steps: List[Tuple[Operation, int, object]] = []
        self.steps[blk] = steps
        relevant = _RELEVANT
        op = blk.first_op
        while op is not None:  # (the linked list read directly: this visits every op of the module)
            if op.name in relevant or op.regions or (op.attrs and "scratch_bytes" in op.attrs):
                self._classify_op(op, warps, steps)  # most ops have nothing to do with shared memory
            op = op.next_op

    def _classify_op(self, op: Operation, warps: int, steps: List[Tuple[Operation, int, object]]) -> None:
        kind = self.kind
        n = op.name
        self.warps[op] = warps  # the warps of the partition the op runs in
        if op.regions:
            if n == "tlx.warp_specialize":
                kind[op] = K_WS
                nw = op.attrs.get("partition_num_warps", [])
                for i, r in enumerate(op.regions):
                    self._classify(r.block, warps if i == 0 else int(nw[i - 1]))
            else:
                kind[op] = {"scf.for": K_FOR, "scf.if": K_IF, "scf.while": K_WHILE}.get(n, K_REGION)
                for r in op.regions:
                    self._classify(r.block, warps)
        elif n in _SIMPLE:
            kind[op] = _SIMPLE[n]
        elif n in EFFECT_NAMES or (op.attrs and op.attrs.get("scratch_bytes")):
            accs = self.index.of(op)
            # a per-thread arrive (alloc_warp_barrier) publishes each thread's own accesses itself
            publishes = n == "tlx.barrier_expect_bytes" or (n == "tlx.barrier_arrive" and not op.attrs.get("per_thread"))
            if accs or publishes:
                self._accesses(op, accs, publishes)
        if op in kind:
            kd = kind[op]
            data = self.acc[op] if kd == K_ACC else warps if kd == K_DOTWAIT else \
                trip_count(op) if kd == K_FOR else None
            steps.append((op, kd, data))

    def _accesses(self, op: Operation, accs, publishes: bool) -> None:
        n = op.name
        init = n in ("tlx.alloc_barriers", "tlx.barrier_inval")
        fl = -1 if n == "tlx.async_load" else None
        gen, ards, awrs, binit, buse = [], [], [], [], []
        # the items the op leaves pending are the same at every visit: made once here, with what
        # a pending item must share with one of them to be superseded (`access`)
        new = []
        elo = ehi = None  # the bytes all accesses lie in: most pending items are outside them
        for write, proxy, byts in accs:  # (one loop, no generators: this runs for every access op)
            for b in byts:
                lo, hi = b[0], b[1]
                if proxy == GENERIC:
                    gen.append((lo, hi, write))
                    new.append(_new(Pending, (lo, hi, write, op if fl is None else CP_ASYNC_WRITE, "g", "U", fl)))
                elif proxy == ASYNC:
                    if write:
                        awrs.append((lo, hi))
                    else:
                        ards.append((lo, hi))
                        new.append(_new(Pending, (lo, hi, False, op, "a", "P", None)))
                elif proxy == BARRIER:
                    if init:
                        binit.append((lo, hi))
                        new.append(_new(Pending, (lo, hi, True, op, "b", "U", None)))
                    else:
                        buse.append((lo, hi))
                        new.append(_new(Pending, (lo, hi, False, op, "u", "U", None)))
                else:
                    continue
                if elo is None or lo < elo:
                    elo = lo
                if ehi is None or hi > ehi:
                    ehi = hi
        if elo is None and not publishes:
            return
        self.kind[op] = K_ACC
        # (landed items, in-flight items, their start bytes, their `_same_kind` keys)
        if len(new) == 1:  # (most ops: one access of one byte range)
            it = new[0]
            one = frozenset(new)
            after = ((_NONE, one) if it.flight is not None else (one, _NONE)) + \
                (frozenset((it.lo,)), frozenset((_same_kind(it),)))
        else:
            after = (frozenset([it for it in new if it.flight is None]),
                     frozenset([it for it in new if it.flight is not None]),
                     frozenset([it.lo for it in new]), frozenset([_same_kind(it) for it in new]))
        leader_arrive = publishes and not op.attrs.get("per_thread")
        self.acc[op] = (gen, ards, awrs, binit, buse, publishes, leader_arrive, (0, 0) if elo is None else (elo, ehi),
                        after)

    # -- the walk -----------------------------------------------------------------------------
    def run(self) -> None:
        """Walk the kernel, then insert the barriers it planned."""
        self.walk()
        for anchor, bar in self.planned.items():
            anchor.parent.insert_before(anchor, bar)

    def walk(self) -> None:
        """Walk the kernel, planning barriers (`planned`)."""
        self.block(self.module.func.regions[0].block, EMPTY)

    def block(self, blk: Block, st: State) -> State:
        planned = self.planned
        for op, k, data in self.steps[blk]:
            if planned and op in planned:
                st = self.sync(st)
            st = self.op(op, k, data, st)
        return st

    @staticmethod
    def sync(st: State) -> State:
        """The state after a CTA barrier (in-flight writes stay as they are: it orders none)."""
        out = []
        for it in st[0]:
            cls = it.cls
            if cls == "b" or cls == "u":  # mbarrier init/use: a barrier orders it for good
                continue
            s = None if cls == "a" and it.state == "U" else SYNC[it.state]
            if cls == "a" and s == "P" and it.op.name == "tlx.async_dot":
                s = "PB"
            if s is not None:
                out.append(_with_state(it, s))
        return (frozenset(out), st[1])

    def op(self, op: Operation, k: int, data, st: State) -> State:
        """The state after `op` of kind `k` (`data`: see `steps`) from state `st`."""
        if k == K_ACC:
            return self.access(op, data, st)
        if k == K_BAR:
            return self.sync(st)
        if k == K_FENCE:  # (in-flight writes: a fence orders none)
            return (frozenset([_with_state(it, FENCED[it.state]) if it.cls == "g" else it
                               for it in st[0]]), st[1])
        if k == K_COMMIT:  # (a group already FLIGHT_CAP deep stays as it is)
            fl = st[1]
            if not any(it.flight < FLIGHT_CAP for it in fl):
                return st
            return (st[0], frozenset([_with_flight(it, min(it.flight + 1, FLIGHT_CAP)) for it in fl]))
        if k == K_WAIT:  # the groups with at least `pendings` newer ones land (unsynced, unfenced)
            n = min(op.attrs.get("pendings", 0), FLIGHT_CAP)
            landed = [_with_flight(it, None) for it in st[1] if it.flight >= n]
            if not landed:
                return st
            return (st[0].union(landed), frozenset([it for it in st[1] if it.flight < n]))
        if k == K_DOTWAIT:
            if op.attrs.get("pendings") != 0:
                return st
            if data <= 4:  # one warpgroup: the wait is collective
                return (frozenset([it for it in st[0] if not (it.cls == "a" and it.op.name == "tlx.async_dot")]),
                        st[1])
            return self._complete(st, ("tlx.async_dot",))
        if k == K_STOREWAIT:
            if op.attrs.get("pendings") != 0:
                return st
            return self._complete(st, ("tlx.tma_store", "tlx.async_store"))
        if k == K_FOR:
            return self.loop(op, data, st)
        if k == K_IF:
            return if_join(self.block, _union, op, st)
        if k == K_WHILE:
            return self.loop(op, None, st)
        if k == K_WS:
            out: State = EMPTY
            saved = self.pre_states
            self.pre_states = []  # barriers never leave a partition
            # entering the op synchronizes the CTA, which orders everything but cp.async writes
            # still in flight: those enter every partition and land at a later wait
            entry = (frozenset(), st[1])
            try:
                for r in op.regions:
                    out = _union(out, self.block(r.block, entry))
            finally:
                self.pre_states = saved
            return out
        out2: State = EMPTY
        for r in op.regions:
            out2 = _union(out2, self.block(r.block, st))
        return out2

    @staticmethod
    def _complete(st: State, names) -> State:
        return (frozenset([_with_state(it, "U") if it.cls == "a" and it.op.name in names else it
                           for it in st[0]]), st[1])

    def loop(self, op: Operation, n: Optional[int], st: State) -> State:
        """The state after loop `op` (`n`: an `scf.for`'s trip count) from `st`, walked again from
        a synchronized `st` whenever a barrier is hoisted before it (`insert_barrier`)."""
        while True:
            self.pre_states.append((op, st))
            try:
                if op.name == "scf.while":
                    return while_fixpoint(self.block, _union, op, st)
                return loop_fixpoint(self.block, _union, op, n, st)
            except _Restart as r:
                if r.loop is not op:
                    raise
                st = self.sync(st)  # a barrier was hoisted before this loop: walk it again from there
            finally:
                self.pre_states.pop()

    # -- accesses -------------------------------------------------------------------------------
    def access(self, op: Operation, acc: Tuple, st: State) -> State:
        gen, ards, awrs, binit, buse, publishes, leader_arrive, (elo, ehi), (new, new_flying, los, keys) = acc
        hits = []
        # a new unsynced access supersedes a pending one of the same kind to the same bytes (it
        # conflicts with everything the old one does, now and after any barrier, fence or wait):
        # the state stays as small as the set of distinct byte ranges. Found in the same loop, by
        # the start byte first: most accesses share it with no pending item
        # (in-flight cp.async writes: nothing but their own thread's wait orders them, and they
        # conflict with nothing until they land)
        gone = []
        for it in st[0]:
            lo, hi, w, o, cls, s, fl = it
            if lo in los and (lo, hi, w, cls, fl, o.name if cls == "a" else "") in keys:
                gone.append(it)
            if leader_arrive and cls == "u" and s in ("U", "F") and o.name == "tlx.barrier_wait":
                # a wait, then the leader's arrive or expect on *any* mbarrier: another thread of
                # the partition may still poll the waited phase (see the module docstring)
                hits.append(it)
                continue
            if not (lo < ehi and elo < hi):  # touches none of the op's bytes
                if publishes and cls == "g" and s in ("U", "F", "SF"):
                    hits.append(it)
                continue
            if cls == "b":  # an init/inval (one thread) before another thread's use
                if s in ("U", "F") and any(a < hi and lo < b for a, b in buse):
                    hits.append(it)
                continue
            if cls == "u":  # a use (any thread) before a re-init/inval (one thread)
                if s in ("U", "F") and any(a < hi and lo < b for a, b in binit):
                    hits.append(it)
                continue
            if publishes and s in ("U", "F", "SF") and cls == "g":
                hits.append(it)
                continue
            if cls == "g":
                if s in ("U", "F") and any(a < hi and lo < b and (w or gw) for a, b, gw in gen):
                    hits.append(it)
                    continue
                if s in ("U", "F", "SF") and (any(a < hi and lo < b and w for a, b in ards)
                                              or any(a < hi and lo < b for a, b in awrs)):
                    hits.append(it)
                    continue
            elif cls == "a":  # a pending async read: later generic writes must wait for it
                if any(a < hi and lo < b and gw for a, b, gw in gen):
                    hits.append(it)
                elif (s == "P" and o.name == "tlx.async_dot" and self.warps.get(o, 4) > 4
                      and any(a < hi and lo < b for a, b in awrs)):
                    # a TMA / bulk load over a wgmma operand, in a partition of several warpgroups:
                    # each warpgroup's async_dot_wait retires only its own wgmma, and the load is
                    # issued by one thread, so every warpgroup must pass its wait first
                    hits.append(it)
        if hits:
            st = self.insert_barrier(op, hits, st)
            if gone:  # the barrier changed the items' states: find them again
                gone = [it for it in st[0] if it.lo in los and _same_kind(it) in keys]
        if new_flying:  # a cp.async: its writes supersede the uncommitted ones to the same bytes
            old = st[1]
            gone_flying = [it for it in old if it.lo in los and _same_kind(it) in keys]
            st = (st[0], (old.difference(gone_flying) if gone_flying else old) | new_flying)
        if not new:
            return st
        return ((st[0].difference(gone) if gone else st[0]) | new, st[1])

    def insert_barrier(self, op: Operation, hits, st: State) -> State:
        """Insert a barrier before `op` (or before the outermost loop it may leave) and return
        the state after it (at `op`)."""
        anchor = op
        hoistable = all(it.cls == "g" and it.op is not CP_ASYNC_WRITE for it in hits)
        if hoistable:
            for loop, pre in reversed(self.pre_states):
                if not all(it in pre[0] and not loop.is_ancestor_of(it.op) for it in hits):
                    break
                anchor = loop
        _refuse_divergent(anchor, op, hits)
        if anchor in self.planned:  # already planned there (a state from another path)
            return self.sync(st) if anchor is op else st
        bar = Operation("tlx.cta_barrier", [], [], loc=op.loc)
        self.planned[anchor] = bar
        self.inserted += 1
        if anchor is op:
            return self.sync(st)
        raise _Restart(anchor)  # the rest of this walk of the loop is moot: it restarts from the barrier


def _per_thread(v: Value, seen: Optional[Dict[int, bool]] = None) -> bool:
    """Whether `v` may differ between the threads of a partition: it derives from
    `tlx.thread_id` (through pure ops; a block argument or an op with regions stops the search)."""
    seen = {} if seen is None else seen
    k = id(v)
    if k not in seen:
        seen[k] = False  # (cycles: through block arguments only, which stop the search anyway)
        op = v.defining_op
        seen[k] = op is not None and not op.regions and (
            op.name == "tlx.thread_id" or any(_per_thread(x, seen) for x in op.operands))
    return seen[k]


def _refuse_divergent(anchor: Operation, op: Operation, hits) -> None:
    """A barrier before `anchor` inside a thread-dependent `if` or loop would hang the partition
    (only some threads reach it): a clear error at `op` instead."""
    inner = anchor.parent.parent_op if anchor.parent is not None else None
    while inner is not None and inner.name not in ("tlx.warp_specialize", "tt.func"):
        if inner.name == "scf.if":
            conds = [inner.arg("cond")]
        elif inner.name == "scf.for":
            conds = [inner.arg("lb"), inner.arg("ub"), inner.arg("step")]
        elif inner.name == "scf.while":  # the condition its `before` region hands to scf.condition
            conds = [inner.regions[0].block.terminator.operands[0]]  # type: ignore[union-attr]
        else:
            conds = []
        if any(_per_thread(c) for c in conds):
            first = min(hits, key=lambda it: (it.op.loc.line if it.op.loc is not None else 0))
            after = (f" after the {first.op.name.split('.')[-1]} at line {first.op.loc.line}"
                     if first.op.loc is not None and first.op.loc.line > 0 else "")
            raise TLXCompileError(
                f"{op.name.split('.')[-1]} needs every thread of its partition to meet first{after}, but it is inside "
                f"a {'branch' if inner.name == 'scf.if' else 'loop'} that depends on tlx.thread_id: only some threads "
                f"would reach that barrier, and the partition would hang", op.loc,
                hint="move it out of the thread-dependent branch (a barrier_arrive is one arrival for the whole "
                     "partition); for one arrival per thread make the barrier with alloc_warp_barrier")
        blk = inner.parent
        inner = blk.parent_op if blk is not None else None


class _Restart(Exception):
    """A barrier was hoisted before `loop`: its walk restarts from the synchronized state (the
    walk of its body so far assumed no barrier there)."""

    def __init__(self, loop: Operation):
        super().__init__()
        self.loop = loop


def run(module: Module, ctx: PassContext) -> None:
    """Insert the CTA barriers (see the module docstring)."""
    w = _Walker(module, ctx)
    w.run()
    ctx.stats["cta_barriers.inserted"] = w.inserted

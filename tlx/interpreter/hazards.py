"""The proxy-hazard and synchronization checker.

Model. Every thread group that runs code — the default partition and each worker partition of
each program — is an *agent* with a vector clock (one component per agent and one per mbarrier).
Synchronization joins clocks: an mbarrier phase completes with the join of its arrivals' clocks
(and of the TMA loads that completed on it) and a waiter that sees the phase acquires it; a named
barrier joins its participants; `warp_specialize` forks the default's clock into the workers and
joins them back at its end. So "A happens before B" is "B's clock has seen A's epoch".

Every shared-memory access is a *record* (op, agent, epoch, program id, loop iterations).
Each allocation keeps, per byte, the id of:

* ``gw``   the last generic-proxy write (st.shared, `local_alloc` with a source, cp.async),
* ``gr<a>`` the last generic read by agent `a`,
* ``aw``   the last write whose data lands later (TMA load, bulk copy, cp.async) — *in flight*
           until its completion is seen (mbarrier phase, `async_wait_group`),
* ``ar<a>`` the last async read by agent `a` still in flight (wgmma operand until its
           `async_dot_wait`, TMA-store / bulk-store source until its store-wait).

The proxy rule. `fence.proxy.async` orders the *executing* agent's earlier generic accesses before
its later async ones. A generic access W by agent P is fenced for an async access A by agent Q when
P fenced after W and Q has seen that fence (the producer fences before publishing), or Q fenced
after it had seen W (the consumer waits, then fences); for P == Q both say "a fence between them in
program order". An async read of bytes whose generic write is not fenced (RAW), or an async write
over bytes whose generic read or write is not fenced (WAR / WAW) is a `ProxyHazard`.
Generic read → async read and async → async need no fence (as in the fence passes).

Synchronization bugs (`SyncHazard`): a generic or async access of bytes an in-flight write is still
writing (no mbarrier wait / async_wait), a write over bytes an in-flight async read may still read
(no `async_dot_wait` / store-wait), a generic read of another partition's write that is not
ordered before it (a race), `barrier_expect_bytes` disagreeing with the bytes that arrive, more
arrivals than a barrier's count in one phase, and an `async_dot` result used before its wait.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tlx.compiler.errors import TLXError
from tlx.compiler.ir.core import Location, Operation

Iters = Tuple[Tuple[Location, int], ...]


class Agent:
    """A thread group of one program (a partition), with its vector clock and fence history."""

    def __init__(self, key: int, name: str, num_threads: int, clock: Optional[Dict[int, int]] = None):
        self.key = key
        self.name = name
        self.num_threads = num_threads
        self.clock: Dict[int, int] = dict(clock or {})
        self.clock[key] = self.clock.get(key, 0)
        self.fence_epochs: List[int] = []
        self.last_fence_clock: Optional[Dict[int, int]] = None
        self.partial_fences: List[Tuple[Operation, int, int]] = []  # fences only some threads ran

    def tick(self) -> int:
        """Advance this agent's own clock component; returns the new epoch."""
        e = self.clock[self.key] + 1
        self.clock[self.key] = e
        return e

    def join(self, other: Dict[int, int]) -> None:
        join_clocks(self.clock, other)

    def sees(self, key: int, value: int) -> bool:
        return self.clock.get(key, 0) >= value

    def fence(self) -> None:
        f = self.tick()
        self.fence_epochs.append(f)
        self.last_fence_clock = dict(self.clock)


def join_clocks(into: Dict[int, int], other: Dict[int, int]) -> None:
    """`into` becomes the componentwise maximum of the two vector clocks."""
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


class Access:
    """One recorded shared-memory access (or async operation)."""

    __slots__ = ("rid", "op", "what", "agent", "epoch", "program", "iters", "completion")

    def __init__(self, rid: int, op: Operation, what: str, agent: Agent, epoch: int, program: Tuple[int, ...], iters: Iters):
        self.rid, self.op, self.what, self.agent, self.epoch = rid, op, what, agent, epoch
        self.program, self.iters = program, iters
        self.completion: Optional[Tuple[int, int]] = None  # (clock key, value) once it completed

    def ordered_before(self, q: Agent) -> bool:
        return q is self.agent or q.sees(self.agent.key, self.epoch)

    def observed_by(self, q: Agent) -> bool:
        """Has `q` seen this in-flight operation complete?"""
        return self.completion is not None and q.sees(*self.completion)

    def fenced_for(self, q: Agent) -> bool:
        """Is this generic access ordered before `q`'s next async access by a proxy fence?"""
        p = self.agent
        snap = q.last_fence_clock
        if snap is not None and snap.get(p.key, 0) >= self.epoch:
            return True  # q fenced after it had seen this access (q == p: a fence after it)
        if p is not q:
            i = bisect.bisect_right(p.fence_epochs, self.epoch)
            if i < len(p.fence_epochs) and q.sees(p.key, p.fence_epochs[i]):
                return True  # p fenced after the access and q has seen that fence
        return False


def describe_loc(loc: Location) -> str:
    if loc is None or loc.line <= 0:
        return "<unknown location>"
    return f"{os.path.basename(loc.file)}:{loc.line}"


def describe_iters(iters: Iters) -> str:
    if not iters:
        return ""
    return ", ".join(f"iteration {i} of the loop at {describe_loc(l)}" for l, i in iters)


@dataclass
class Side:
    """One of the two accesses of a hazard."""

    op: str
    loc: Location
    what: str
    partition: str
    iteration: Iters

    @property
    def line(self) -> int:
        return self.loc.line

    def text(self) -> str:
        it = describe_iters(self.iteration)
        return f"{self.what} ({self.op}) at {describe_loc(self.loc)}, partition {self.partition}" + (f", {it}" if it else "")


class Hazard(TLXError):
    """A concurrency bug found by the interpreter. `first` happened before `second` in the
    interpreter's execution; `buffer` names the shared-memory allocation (or barrier)."""

    title = "hazard"

    def __init__(self, kind: str, summary: str, buffer: str, first: Optional[Side], second: Side,
                 program_id: Tuple[int, ...], hint: str, detail: str = ""):
        self.kind, self.summary, self.buffer = kind, summary, buffer
        self.first, self.second, self.program_id, self.hint, self.detail = first, second, program_id, hint, detail
        self.count = 1
        super().__init__(self._format())

    def _format(self) -> str:
        lines = [f"{self.title}: {self.summary}", f"  buffer:  {self.buffer}"]
        if self.first is not None:
            lines.append(f"  first:   {self.first.text()}")
        lines.append(f"  then:    {self.second.text()}")
        lines.append(f"  program: {self.program_id}")
        if self.detail:
            lines.append(f"  detail:  {self.detail}")
        lines.append(f"  hint:    {self.hint}")
        return "\n".join(lines)

    def __str__(self) -> str:
        s = self._format()
        return s + (f"\n  (seen {self.count} times)" if self.count > 1 else "")

    @property
    def lines(self) -> Tuple[Optional[int], int]:
        """(line of the first access, line of the second) in the kernel source."""
        return (self.first.line if self.first else None, self.second.line)


class ProxyHazard(Hazard):
    """A generic-proxy access and an async-proxy access of the same shared-memory bytes with no
    `fence.proxy.async` ordering them."""

    title = "ProxyHazard"


class SyncHazard(Hazard):
    """A synchronization bug: an access not ordered by the mbarrier / group wait it needs."""

    title = "SyncHazard"


class DeadlockError(TLXError):
    """Every partition of a program waits on something that can no longer happen."""

    def __init__(self, message: str, program_id: Tuple[int, ...], waits: Sequence[Dict[str, Any]]):
        self.program_id, self.waits = program_id, list(waits)
        super().__init__(message)


_PROXY_HINT = {
    "raw": 'put tlx.fence("async_shared") between the generic write and the async read, on every path '
           "(in the writing partition before it signals, or in the reading partition after it waits)",
    "war": 'put tlx.fence("async_shared") after the generic read and before the async write '
           "(before releasing the buffer to the producer, or before the TMA load)",
    "waw": 'put tlx.fence("async_shared") between the generic write and the async write over the same bytes',
}


def _rids(shadow: np.ndarray) -> Sequence[int]:
    mx = int(shadow.max()) if shadow.size else 0
    if mx == 0:
        return ()
    mn = int(shadow.min())
    if mn == mx:
        return (mx,)
    u = np.unique(shadow)
    return [int(x) for x in u if x > 0]


class Checker:
    """Records accesses and reports hazards for one interpreter run."""

    def __init__(self, raise_on_hazard: bool):
        self.raise_on_hazard = raise_on_hazard
        self.records: List[Optional[Access]] = [None]
        self.hazards: List[Hazard] = []
        self._seen: Dict[Tuple, Hazard] = {}

    # -- records -------------------------------------------------------------------------------
    def new_record(self, op: Operation, what: str, agent: Agent, program: Tuple[int, ...], iters: Iters) -> Access:
        r = Access(len(self.records), op, what, agent, agent.tick(), program, iters)
        self.records.append(r)
        return r

    def side(self, r: Access) -> Side:
        return Side(r.op.name, r.op.loc, r.what, r.agent.name, r.iters)

    def report(self, cls, kind: str, summary: str, view, first: Optional[Access], second: Access,
               hint: str, detail: str = "", may_raise: bool = True) -> None:
        key = (kind, id(first.op) if first else None, id(second.op))
        old = self._seen.get(key)
        if old is not None:
            old.count += 1
            return
        h = cls(kind, summary, _buffer_name(view), self.side(first) if first else None, self.side(second),
                second.program, hint, detail)
        self._seen[key] = h
        self.hazards.append(h)
        if self.raise_on_hazard and may_raise:
            raise h

    # -- the checks ------------------------------------------------------------------------------
    def _in_flight_writes(self, view, r: Access, what: str) -> None:
        for rid in _rids(view.shadow_view("aw")):
            w = self.records[rid]
            if not w.observed_by(r.agent):
                if w.op.name == "tlx.async_load":
                    hint = "wait for the copy with tlx.async_load_wait_group before using the buffer"
                    summary = f"{what} of shared memory that a cp.async is still writing (no async_load_wait_group retired it)"
                else:
                    hint = "wait on the load's mbarrier (tlx.barrier_wait) before using the buffer"
                    summary = f"{what} of shared memory that a {w.what} is still writing (no mbarrier wait saw it complete)"
                self.report(SyncHazard, "in-flight-write", summary, view, w, r, hint)

    def _in_flight_reads(self, view, r: Access, what: str) -> None:
        for key in [k for k in view.alloc.shadows if k.startswith("ar")]:
            for rid in _rids(view.shadow_view(key)):
                a = self.records[rid]
                if not a.observed_by(r.agent):
                    if a.op.name == "tlx.async_dot":
                        hint = ("retire the wgmma with tlx.async_dot_wait before the buffer is overwritten "
                                "(and release it to the producer only after that wait)")
                        summary = f"{what} over shared memory that a wgmma (async_dot) may still be reading"
                    else:
                        hint = "wait with tlx.async_descriptor_store_wait before overwriting the store's source"
                        summary = f"{what} over the source of a {a.what} that may still be reading it (no store-wait retired it)"
                    self.report(SyncHazard, "in-flight-read", summary, view, a, r, hint)

    def generic_write(self, view, r: Access, in_flight: bool = False) -> None:
        self._in_flight_writes(view, r, "a generic write")
        self._in_flight_reads(view, r, "a generic write")
        view.shadow_view("gw")[...] = r.rid
        if in_flight:
            view.shadow_view("aw")[...] = r.rid

    def _read(self, view, r: Access, what: str, race_hint: str, is_async: bool) -> None:
        """A read of the view's bytes: each generic write of them must be ordered before it (else
        a race) and, for an async read, fenced (else a RAW proxy hazard)."""
        self._in_flight_writes(view, r, what)
        for rid in _rids(view.shadow_view("gw")):
            w = self.records[rid]
            if not w.ordered_before(r.agent):
                self.report(SyncHazard, "race", f"{what} of shared memory written by partition {w.agent.name} with no "
                            "synchronization ordering the write before it", view, w, r, race_hint)
            elif is_async and not w.fenced_for(r.agent):
                self.report(ProxyHazard, "raw", f"{w.what} then {r.what} of the same shared memory "
                            "with no fence.proxy.async between them", view, w, r, _PROXY_HINT["raw"],
                            _partial_note(w.agent, r.agent))
        view.shadow_view(f"{'ar' if is_async else 'gr'}{r.agent.key}")[...] = r.rid

    def generic_read(self, view, r: Access) -> None:
        self._read(view, r, "a generic read", "make the reader wait on an mbarrier (or named barrier) that the writer "
                   "arrives on after writing (across the CTAs of a cluster: a tlx.cluster_barrier between them)", False)

    def async_read(self, view, r: Access) -> None:
        self._read(view, r, f"a {r.what}", "make the reader wait on an mbarrier that the writer arrives on after "
                   "writing (and fence)", True)

    def async_write(self, view, r: Access) -> None:
        self._in_flight_writes(view, r, f"a {r.what}")
        self._in_flight_reads(view, r, f"a {r.what}")
        # the generic write, then each agent's generic read, of the bytes: an unfenced one is a WAW / WAR
        for key in ["gw"] + [k for k in view.alloc.shadows if k.startswith("gr")]:
            kind = "waw" if key == "gw" else "war"
            shadow = view.shadow_view(key)
            for rid in _rids(shadow):
                w = self.records[rid]
                if w.ordered_before(r.agent) and not w.fenced_for(r.agent):
                    self.report(ProxyHazard, kind, f"{w.what} then {r.what} over the same shared memory "
                                "with no fence.proxy.async between them", view, w, r, _PROXY_HINT[kind])
            shadow[...] = 0
        view.shadow_view("aw")[...] = r.rid


def _partial_note(*agents: Agent) -> str:
    notes = []
    for a in dict.fromkeys(agents):
        for op, k, n in a.partial_fences[-1:]:
            notes.append(f"the fence at {describe_loc(op.loc)} ran in only {k} of the {n} threads of partition "
                         f"{a.name} (a thread-divergent branch): it does not order the other threads' accesses")
    return "; ".join(notes)


def _buffer_name(view) -> str:
    if view is None:
        return "-"
    if isinstance(view, str):
        return view
    alloc = view.alloc
    lo, hi = view.byte_range()
    part = "" if (lo, hi) == (0, alloc.nbytes) else f", bytes [{lo}, {hi}) of {alloc.nbytes}"
    return f"{alloc.name} ({alloc.type}, allocated at {describe_loc(alloc.op.loc)}{part})"

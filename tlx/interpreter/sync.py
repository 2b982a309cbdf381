"""mbarriers, named barriers and the waits that block a partition's coroutine.

An mbarrier has a phase counter, a pending-arrival count (reset to `arrive_count` when a phase
completes) and a transaction count: `barrier_expect_bytes` adds bytes and arrives once, a TMA load
or bulk copy that lands subtracts its bytes. A phase completes when no arrival is pending and the
transaction count is zero. `barrier_wait(bar, phase)` passes while the current phase parity
differs from `phase`.

Asynchronous loads complete lazily: their data lands when a waiter needs the barrier (or at the
end of the program), so a read that does not wait sees the old bytes and the checker flags it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from tlx.compiler.ir.core import Operation

from .hazards import Access, Agent, describe_iters, describe_loc, join_clocks


@dataclass
class Transfer:
    """An in-flight async write that completes on an mbarrier (TMA load, bulk copy)."""

    record: Access
    nbytes: int
    land: Callable[[], None]
    issued_phase: int


class MBarrier:
    """One mbarrier of a program."""

    def __init__(self, key: int, name: str, arrive_count: int, op: Operation):
        self.key, self.name, self.arrive_count, self.op = key, name, arrive_count, op
        self.init()

    def init(self) -> None:
        self.phase = 0
        self.pending = self.arrive_count
        self.tx = 0
        self.expected = 0  # bytes expected in the current phase
        self.landed = 0  # bytes landed in the current phase
        self.clock: Dict[int, int] = {}  # accumulates arrivals of the current phase
        self.completed_clock: Dict[int, int] = {}  # the clock a waiter of a completed phase acquires
        self.transfers: List[Transfer] = []
        self.expect_ops: List[Access] = []
        # the last arrive / expect / landed load: (op, partition, iterations, the phase it went to)
        self.last_signal: Optional[Tuple[Operation, str, Any, int]] = None

    @property
    def where(self) -> str:
        """The barrier as hazard reports name it: its name and where it was allocated."""
        return f"{self.name} (allocated at {describe_loc(self.op.loc)})"

    def parity(self) -> int:
        return self.phase & 1

    def signalled(self, op: Operation, partition: str, iters: Any) -> None:
        """Remember `op` as the last thing that signalled this barrier (for deadlock reports)."""
        self.last_signal = (op, partition, iters, self.phase)

    def describe_last_signal(self) -> str:
        """Where the barrier was last signalled, in words (or that nothing signalled it yet)."""
        if self.last_signal is None:
            return "nothing has arrived on it yet"
        op, partition, iters, phase = self.last_signal
        it = describe_iters(iters)
        return (f"its last signal: {op.name} at {describe_loc(op.loc)} (partition {partition}"
                + (f", {it}" if it else "") + f"), in phase {phase}")

    def arrive(self, agent: Agent, count: int) -> bool:
        """`count` arrivals from `agent` (its clock is released into the phase); True when they
        are more than the phase still waited for (the surplus is dropped)."""
        agent.tick()
        join_clocks(self.clock, agent.clock)
        self.pending -= count
        over = self.pending < 0
        self.pending = max(self.pending, 0)
        self.maybe_complete()
        return over

    def expect(self, agent: Agent, nbytes: int, rec: Access) -> bool:
        """barrier_expect_bytes: `nbytes` more to land in this phase, and one arrival (as `arrive`)."""
        self.tx += nbytes
        self.expected += nbytes
        self.expect_ops.append(rec)
        return self.arrive(agent, 1)

    def land_one(self) -> None:
        t = self.transfers.pop(0)
        t.land()
        self.signalled(t.record.op, t.record.agent.name, t.record.iters)
        join_clocks(self.clock, {t.record.agent.key: t.record.epoch})
        t.record.completion = (self.key, self.phase + 1)
        self.tx -= t.nbytes
        self.landed += t.nbytes
        self.maybe_complete()

    def maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.clock[self.key] = self.phase
            self.completed_clock = dict(self.clock)
            self.pending = self.arrive_count
            self.expected = self.landed = 0
            self.expect_ops = []

    def force(self) -> None:
        """Land in-flight transfers (in issue order) until the current phase completes or none
        is left: a waiter needs them now."""
        start = self.phase
        while self.transfers and self.phase == start:
            self.land_one()

    def state(self) -> str:
        s = (f"phase {self.phase} (parity {self.parity()}), {self.arrive_count - self.pending} of "
             f"{self.arrive_count} arrivals")
        if self.expected or self.tx:
            s += f", {self.landed} of {self.expected} expected bytes landed"
        if self.transfers:
            s += f", {len(self.transfers)} load(s) in flight"
        return s


class NamedBarrier:
    """A hardware named barrier (`bar.sync id, count` / `bar.arrive id, count`)."""

    def __init__(self, bid: int):
        self.id = bid
        self.generation = 0
        self.arrived = 0
        self.clock: Dict[int, int] = {}
        self.released: Dict[int, Dict[int, int]] = {}  # generation -> the clock its waiters acquire
        self.waiting: List[str] = []

    def arrive(self, agent: Agent, count: int) -> int:
        """Contribute `agent`'s threads; returns the generation to wait for."""
        agent.tick()
        self.arrived += agent.num_threads
        join_clocks(self.clock, agent.clock)
        gen = self.generation
        if self.arrived >= count:
            self.generation += 1
            self.released[gen] = dict(self.clock)
            self.arrived = 0
            self.clock = {}
            self.waiting = []
        return gen


@dataclass
class Wait:
    """What a blocked coroutine waits for."""

    ready: Callable[[], bool]
    describe: Callable[[], Dict[str, Any]]


def wait_info(kind: str, op: Operation, agent: Agent, iters, what: str, state: str) -> Dict[str, Any]:
    it = describe_iters(iters)
    return {"kind": kind, "op": op.name, "loc": op.loc, "partition": agent.name, "what": what, "state": state,
            "text": f"partition {agent.name}: {op.name} at {describe_loc(op.loc)}" + (f" ({it})" if it else "")
                    + f" waits for {what}; {state}"}

"""The campaign: many seeds over a pool of worker processes, with the hang and crash guards, and
the count of every outcome.

Each worker runs in its own process group, generates and runs the cases it is sent and answers
with their outcomes. A stage past its CPU-time limit is a ``hang`` (runner.cpu_limit); a worker
that answers nothing within the wall-time limit (blocked, or a ptxas child that never returns)
is killed with its process group and the case counts as a ``hang``; a worker that dies is a
``crash``. Either way a fresh worker takes its place. Workers are also replaced every
`recycle` cases, so no state a case leaves behind accumulates over a long campaign.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from .runner import BUGS, Outcome, run_case


def run_seed(seed: int, workdir: str, hang_seconds: float, family: Optional[str] = None,
             mutation: Optional[str] = None) -> Outcome:
    """Generate and run the case of `seed` (a generator failure is a ``fuzzer_error``)."""
    from .generate import generate

    try:
        case = generate(seed, family, mutation)
    except Exception:
        return Outcome(seed, "?", None, "fuzzer_error", traceback.format_exc())
    out = run_case(case, workdir, hang_seconds)
    try:
        os.remove(os.path.join(workdir, f"case_{seed}.py"))
    except OSError:
        pass
    return out


def _plan(seed: int, family: Optional[str], mutation: Optional[str]) -> Tuple[str, Optional[str]]:
    from .generate import plan_of

    fam, drawn = plan_of(seed, family)
    m = mutation or drawn
    return fam, None if m == "none" else m


def _worker(conn: Connection, hang_seconds: float, family: Optional[str], mutation: Optional[str]) -> None:
    os.setpgrp()  # the campaign kills the whole group (with any ptxas child) on a wall-time hang
    workdir = tempfile.mkdtemp(prefix="tlx_fuzz_")
    try:
        while True:
            seed = conn.recv()
            if seed is None:
                break
            out = run_seed(seed, workdir, hang_seconds, family, mutation)
            conn.send(out)
            if out.status == "hang":  # interrupted mid-way: state may be inconsistent
                break
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class _Slot:
    proc: mp.Process
    conn: Connection
    done: int = 0
    seed: Optional[int] = None
    since: float = 0.0


@dataclass
class Tally:
    """The counts of a campaign and the outcomes that are bugs."""

    counts: Counter = field(default_factory=Counter)
    by_family: Dict[str, Counter] = field(default_factory=dict)
    by_mutation: Dict[str, Counter] = field(default_factory=dict)
    bugs: List[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    slowest: Dict[str, Tuple[float, int]] = field(default_factory=dict)  # stage -> (wall seconds, seed)

    def add(self, out: Outcome) -> None:
        self.counts[out.status] += 1
        self.by_family.setdefault(out.family, Counter())[out.status] += 1
        self.by_mutation.setdefault(out.mutation or "(well-formed)", Counter())[out.status] += 1
        if out.is_bug:
            self.bugs.append(out)
        for stage, t in out.times.items():
            if t > self.slowest.get(stage, (0.0, -1))[0]:
                self.slowest[stage] = (t, out.seed)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def mutation_table(self) -> str:
        """One line per mutation: how its cases ended."""
        return "\n".join(f"  {m:<28} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                         for m, c in sorted(self.by_mutation.items()))

    def summary(self) -> str:
        lines = [f"{self.total} cases in {self.seconds:.0f} s"]
        lines.append("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())))
        bug_counts = {b: self.counts.get(b, 0) for b in BUGS + ("fuzzer_error",)}
        lines.append("bugs: " + ", ".join(f"{k} {v}" for k, v in bug_counts.items()))
        for fam in sorted(self.by_family):
            c = self.by_family[fam]
            lines.append(f"  {fam:<16} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
        if self.slowest:
            lines.append("slowest (wall time, ptxas included in compile): " + ", ".join(
                f"{k} {t:.2f} s (seed {seed})" for k, (t, seed) in sorted(self.slowest.items())))
        return "\n".join(lines)


class Pool:
    """`jobs` worker processes (fork), each in its own process group."""

    def __init__(self, jobs: int, hang_seconds: float, wall_seconds: float, recycle: int,
                 family: Optional[str] = None, mutation: Optional[str] = None):
        self.ctx = mp.get_context("fork")
        self.family, self.mutation = family, mutation
        self.hang_seconds = hang_seconds
        self.wall_seconds = wall_seconds
        self.recycle = recycle
        self.slots: List[_Slot] = [self._spawn() for _ in range(jobs)]

    def _spawn(self) -> _Slot:
        parent, child = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(child, self.hang_seconds, self.family, self.mutation), daemon=True)
        p.start()
        child.close()
        return _Slot(p, parent)

    def _kill(self, s: _Slot) -> None:
        try:
            os.killpg(s.proc.pid, signal.SIGKILL)  # the worker's own group: it and its ptxas child
        except (ProcessLookupError, PermissionError):
            pass
        s.proc.join(5)
        s.conn.close()

    def _retire(self, s: _Slot) -> None:
        try:
            s.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        s.proc.join(5)
        if s.proc.is_alive():
            self._kill(s)
        s.conn.close()

    def run(self, seeds: Iterable[int]) -> Iterator[Outcome]:
        """Run every seed; yields outcomes as they come (not in seed order)."""
        todo = iter(seeds)
        more = True
        while True:
            for i, s in enumerate(self.slots):
                if s.seed is None and more:
                    if s.done >= self.recycle or not s.proc.is_alive():
                        self._retire(s)
                        s = self.slots[i] = self._spawn()
                    seed = next(todo, None)
                    if seed is None:
                        more = False
                        continue
                    s.seed, s.since = seed, time.monotonic()
                    s.conn.send(seed)
            busy = [s for s in self.slots if s.seed is not None]
            if not busy:
                break
            ready = wait([s.conn for s in busy], timeout=0.25)
            now = time.monotonic()
            for i, s in enumerate(self.slots):
                if s.seed is None:
                    continue
                if s.conn in ready:
                    try:
                        out = s.conn.recv()
                    except (EOFError, OSError):
                        s.proc.join(5)
                        out = Outcome(s.seed, *_plan(s.seed, self.family, self.mutation), "crash",
                                      f"the worker died (exit code {s.proc.exitcode}) running this seed")
                        self._kill(s)
                        self.slots[i] = self._spawn()
                        yield out
                        continue
                    s.seed = None
                    s.done += 1
                    if out.status == "hang":
                        self._kill(s)
                        self.slots[i] = self._spawn()
                    yield out
                elif now - s.since > self.wall_seconds:
                    out = Outcome(s.seed, *_plan(s.seed, self.family, self.mutation), "hang",
                                  f"no answer within {self.wall_seconds:.0f} s of wall time")
                    self._kill(s)
                    self.slots[i] = self._spawn()
                    yield out

    def close(self) -> None:
        for s in self.slots:
            self._retire(s)


def warm_up() -> None:
    """Compile and interpret one small case before the workers fork, so they start warm (the
    first compilation of a process imports and builds lazily; it would count against a case)."""
    from .generate import generate

    with tempfile.TemporaryDirectory(prefix="tlx_fuzz_") as d:
        run_case(generate(0, "elementwise", "none"), d, hang_seconds=0)


def campaign(seeds: Iterable[int], jobs: int = 2, hang_seconds: float = 1.0, wall_seconds: float = 60.0,
             recycle: int = 500, progress: Optional[Callable[[Tally], None]] = None,
             family: Optional[str] = None, mutation: Optional[str] = None) -> Tally:
    """Run the cases of `seeds` on `jobs` workers and count their outcomes."""
    warm_up()
    tally = Tally()
    t0 = time.perf_counter()
    pool = Pool(jobs, hang_seconds, wall_seconds, recycle, family, mutation)
    try:
        for out in pool.run(seeds):
            tally.add(out)
            tally.seconds = time.perf_counter() - t0
            if progress is not None:
                progress(tally)
    finally:
        pool.close()
    tally.seconds = time.perf_counter() - t0
    return tally

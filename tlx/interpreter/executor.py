"""The op-by-op interpreter: runs every program of the grid, each partition of a program as a
coroutine (a generator that yields a `Wait` when it blocks), with numpy values at block level.

One thread of control per partition: a register tensor is one numpy array for the whole
partition; a scalar is uniform across it. Async operations are modelled in time: TMA loads and
bulk copies land when a waiter needs their mbarrier, cp.async copies at their `async_wait_group`,
wgmma groups compute (reading shared memory then) at the `async_dot_wait` that retires them, TMA
stores and bulk stores read their source at the store-wait that retires them (or at the end of
the program). So a kernel that skips a wait reads stale data — and the checker says why.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from tlx.compiler.ir import types as T
from tlx.compiler.ir.alias import placement
from tlx.compiler.ir.core import Block, Module, Operation, Value

from . import numerics as N
from .hazards import Access, Agent, Checker, DeadlockError, SyncHazard, describe_loc, join_clocks
from .memory import Descriptor, GlobalMemory, InterpreterError, SlabArrayView, SmemAlloc, SmemView
from .sync import MBarrier, NamedBarrier, Transfer, Wait, wait_info
from . import warp_ops as W


class PendingDot:
    """The register result of an `async_dot` whose wgmma group has not been retired yet; it
    computes (reading its shared-memory operands then) when the group retires."""

    __slots__ = ("a", "b", "acc", "a_elem", "rtype", "precision", "value", "op")

    def __init__(self, op, a, a_elem: T.ScalarType, b, acc, rtype: T.TensorType, precision: str):
        self.op, self.a, self.a_elem, self.b, self.acc = op, a, a_elem, b, acc
        self.rtype, self.precision = rtype, precision
        self.value: Optional[np.ndarray] = None

    def resolve(self) -> np.ndarray:
        if self.value is None:
            acc = self.acc.resolve() if isinstance(self.acc, PendingDot) else self.acc
            a = self.a.read() if isinstance(self.a, SmemView) else self.a
            self.value = matmul(a, self.b.read(), acc, self.a_elem, self.b.element, self.rtype, self.precision)
            self.a = self.b = self.acc = None  # the operands are consumed
        return self.value


@dataclass(slots=True)
class BarrierArray:
    """The value of `tlx.alloc_barriers`: the program's mbarriers of that op."""

    bars: List[MBarrier]


TOKEN = object()  # the value of an async token (cp.async groups): it carries no data


def matmul(a: np.ndarray, b: np.ndarray, acc: Optional[np.ndarray], at: T.ScalarType, bt: T.ScalarType,
           rtype: T.TensorType, precision: str = "tf32") -> np.ndarray:
    """A tile matrix product with the tensor core's numerics: inputs rounded to their type (fp32
    inputs to tf32 unless precision is 'ieee'), products summed in fp32 (fp64 for f64, int32 for
    integers), plus the accumulator, rounded to the result type."""
    re = rtype.element
    if at.is_int:
        r = np.matmul(a.astype(np.int64), b.astype(np.int64))
        if acc is not None:
            r = r + acc.astype(np.int64)
        return r.astype(N.compute_dtype(re))
    if at.name == "f64" or re.name == "f64":
        r = np.matmul(a.astype(np.float64), b.astype(np.float64))
        if acc is not None:
            r = r + acc
        return N.round_to(r, re)
    tf32 = precision != "ieee"
    af = N.round_tf32(a) if tf32 and at.name == "f32" else a.astype(np.float32)
    bf = N.round_tf32(b) if tf32 and bt.name == "f32" else b.astype(np.float32)
    if not tf32 and "f32" in (at.name, bt.name):
        r = np.matmul(af.astype(np.float64), bf.astype(np.float64)).astype(np.float32)
    else:
        r = np.matmul(af, bf)
    if acc is not None:
        r = r + acc.astype(np.float32)
    return N.round_to(r, re)


@dataclass(slots=True)
class Group:
    """One async group of a partition (a wgmma commit group, a bulk-store group, a cp.async
    group): the records it holds open and what completing it does."""

    records: List[Access]
    finish: Callable[[], None]


class Thread:
    """The execution state of one partition of one program."""

    def __init__(self, prog: "Program", agent: Agent):
        self.prog = prog
        self.agent = agent
        self.env: Dict[Value, Any] = {}
        self.loops: List[List[Any]] = []
        self.wgmma: List[Group] = []
        self.bulk: List[Group] = []
        self.cp_open: List[Tuple[Access, Callable[[], None]]] = []
        self.cp_groups: List[Group] = []
        self.active: Optional[np.ndarray] = None  # per-thread mask inside a divergent branch
        self.first_thread = 0  # threadIdx.x of the partition's first thread

    def iters(self) -> Tuple:
        """The (loop location, iteration) of every loop the partition is in, outermost first."""
        return tuple(map(tuple, self.loops))

    def record(self, op: Operation, what: str) -> Access:
        return self.prog.interp.checker.new_record(op, what, self.agent, self.prog.pid, self.iters())


@dataclass(slots=True)
class Coroutine:
    """A partition's generator and its thread; `done` once the generator has ended."""

    thread: Thread
    gen: Iterator
    done: bool = False


def _int(v) -> int:
    return int(np.asarray(v).item()) if not isinstance(v, (int, np.integer)) else int(v)


def _scalar_or(x, t: T.Type):
    """Cast a numpy result to the compute dtype of IR type `t` (a numpy scalar for scalars)."""
    dt = N.compute_dtype(T.element_of(t))
    a = np.asarray(x).astype(dt, copy=False)
    if isinstance(t, T.TensorType):
        return np.broadcast_to(a, t.shape) if a.shape != t.shape else a
    if a.ndim == 1 and a.size > 1:
        return a  # a per-thread scalar (derived from tlx.thread_id): one value per thread
    return a[()] if a.shape == () else a.reshape(())[()]


def _varying(x) -> bool:
    """Is `x` a per-thread scalar (one value per thread of the partition)?"""
    return isinstance(x, np.ndarray) and x.ndim == 1


def _uniform(th, op, v, what: str):
    x = th.env[v]
    if _varying(x):
        raise InterpreterError(f"{op.name}: the {what} differs between threads (it comes from tlx.thread_id); "
                               "the block-level interpreter needs it uniform", op.loc)
    return x


# ops allowed inside a branch that only some threads of a partition take (if tlx.thread_id() == 0)
_DIVERGENT_OK_PREFIXES = ("arith.", "math.", "scf.")
_DIVERGENT_OK = {"tt.get_program_id", "tt.get_num_programs", "tt.addptr", "tt.load", "tt.store", "tt.atomic_rmw",
                 "tt.splat", "tt.make_range", "tt.broadcast", "tt.expand_dims", "tt.convert_layout",
                 "tt.atomic_cas", "tt.int_to_ptr", "tt.ptr_to_int", "tt.hint", "tlx.fence", "tlx.fence_async_shared",
                 "tlx.thread_id", "tlx.clock64", "tlx.cluster_cta_rank", "tlx.cluster_size", "tlx.vote_ballot_sync", "tlx.warp_redux",
                 "tlx.prefetch"}


_NONBLOCKING_OK = {"tlx.async_dot", "tlx.async_dot_wait", "scf.yield", "scf.for", "scf.if", "scf.condition",
                   "scf.while", "tlx.warp_specialize", "tlx.ws_yield", "tlx.ws_return"}


class ClusterRun:
    """The CTAs of one thread-block cluster, run together: their coroutines interleave, the
    cluster barrier counts every live partition of every CTA, and a remote view reaches another
    CTA's shared memory and mbarriers (`programs[rank]`)."""

    def __init__(self) -> None:
        self.keys = itertools.count()  # agent and barrier keys are unique in the cluster (clocks cross CTAs)
        self.programs: List["Program"] = []
        self.generation = 0  # of the cluster barrier
        self.arrived = 0
        self.clock: Dict[int, int] = {}
        self.released: Dict[int, Dict[int, int]] = {}

    def run(self) -> None:
        """Run every CTA of the cluster to its end (a deadlock raises), then exit them all."""
        progs = self.programs
        while True:
            for p in progs:
                p.run_runnable()
            if not any(p.blocked for p in progs):
                break
            if not any(p.wake_one() for p in progs):
                next(p for p in progs if p.blocked).deadlock()
        for p in progs:
            p.finish()

    def live(self) -> int:
        return sum(1 for p in self.programs for co in p.coroutines if not co.done)

    def arrive(self, agent: Agent) -> int:
        """A partition arrives at the cluster barrier; returns the generation to wait for."""
        agent.tick()
        join_clocks(self.clock, agent.clock)
        self.arrived += 1
        return self.generation

    def try_release(self, gen: int) -> bool:
        """Whether generation `gen` of the barrier is over (it ends once every live partition of
        every CTA has arrived)."""
        if self.generation > gen:
            return True
        if self.arrived >= self.live():
            self.released[gen] = dict(self.clock)
            self.generation += 1
            self.arrived = 0
            self.clock = {}
            return True
        return False


class Program:
    """One CTA: its shared memory, barriers, agents and coroutines; `cluster` is the thread-block
    cluster it runs in (every CTA of a cluster runs together), `rank` its rank there."""

    def __init__(self, interp: "Interpreter", pid: Tuple[int, int, int], cluster: ClusterRun, rank: int):
        self.interp = interp
        self.pid = pid
        self.cluster = cluster
        self.rank = rank
        self.cluster.programs.append(self)
        self.allocs: Dict[Operation, SmemAlloc] = {}
        self.barriers: Dict[Operation, BarrierArray] = {}
        self.named: Dict[int, NamedBarrier] = {}
        self.keys = cluster.keys
        self.runnable: deque = deque()
        self.blocked: List[Tuple[Coroutine, Wait]] = []
        self.coroutines: List[Coroutine] = []
        self.clock64 = 0

    def new_agent(self, name: str, threads: int, clock: Optional[Dict[int, int]] = None) -> Agent:
        if len(self.cluster.programs) > 1:  # reports say which CTA of the cluster
            name = f"{name} of CTA rank {self.rank}"
        return Agent(next(self.keys), name, threads, clock)

    def smem(self, op: Operation, mtype: T.MemDescType, name: str) -> SmemAlloc:
        """This CTA's allocation of `op`, made on first use (shared memory is a CTA's from its
        start: another CTA of the cluster may reach it through a remote view first)."""
        alloc = self.allocs.get(op)
        if alloc is None:
            alloc = self.allocs[op] = SmemAlloc(op, mtype, name)
        return alloc

    def spawn(self, th: Thread, block: Block, args: Sequence[Any]) -> Coroutine:
        """A new coroutine in which partition `th` runs `block` with `args` for its arguments."""
        th.env.update(zip(block.args, args))
        co = Coroutine(th, self.interp.run_block(th, block))
        self.coroutines.append(co)
        self.runnable.append(co)
        return co

    def start(self, func: Operation, args: Sequence[Any]) -> None:
        """Spawn the kernel's default partition."""
        self.spawn(Thread(self, self.new_agent("default", self.interp.num_warps * 32)), func.regions[0].block, args)

    def run_runnable(self) -> None:
        """Run every runnable coroutine until it blocks or ends."""
        while self.runnable:
            co = self.runnable.popleft()
            try:
                w = co.gen.send(None)
            except StopIteration:
                co.done = True
                continue
            self.blocked.append((co, w))

    def wake_one(self) -> bool:
        """Make the first blocked coroutine whose wait is over runnable; False if there is none."""
        for i, (co, w) in enumerate(self.blocked):
            if w.ready():
                del self.blocked[i]
                self.runnable.append(co)
                return True
        return False

    def finish(self) -> None:
        """Kernel exit: in-flight loads land, outstanding bulk stores complete."""
        for arr in self.barriers.values():
            for b in arr.bars:
                while b.transfers:
                    b.land_one()
        for co in self.coroutines:
            th = co.thread
            for g in th.cp_groups:
                g.finish()
            for _, land in th.cp_open:
                land()
            for g in th.bulk:
                g.finish()

    def _signal_notes(self, waits: List[Dict[str, Any]]) -> List[str]:
        """For each blocked mbarrier wait (`waits`: their descriptions): who could still signal its
        barrier. Nothing in the kernel (an arrive is missing), or only partitions that are blocked
        themselves (a circular wait, usually a wrong phase)."""
        from tlx.compiler.analysis.barrier_bytes import barrier_root

        signals: Dict[int, List[Operation]] = {}  # alloc_barriers op -> the ops that signal its barriers
        for o in self.interp.module.ops():
            if o.name in ("tlx.barrier_arrive", "tlx.barrier_expect_bytes", "tlx.tma_load", "tlx.async_bulk_load"):
                root = barrier_root(o.arg("bar")).defining_op
                signals.setdefault(id(root), []).append(o)
        notes, circular = [], bool(waits)
        for d in waits:
            bar = d.get("barrier")
            if not isinstance(bar, MBarrier):
                circular = False
                continue
            where = f"the wait at {describe_loc(d['loc'])}"
            ops = signals.get(id(bar.op), [])
            if not ops:
                circular = False
                notes.append(f"  {bar.name}: nothing in the kernel arrives on it (no barrier_arrive or "
                             f"barrier_expect_bytes names {bar.name.split('[')[0]}), so {where} can never pass: "
                             "add the arrive its producer owes")
            elif bar.pending == bar.arrive_count and not bar.transfers:
                lines = ", ".join(sorted({f"{o.name} at {describe_loc(o.loc)}" for o in ops}))
                notes.append(f"  {bar.name}: {where} needs a signal from {lines}, which no running partition "
                             "can reach")
            else:
                circular = False
        if circular and len(waits) > 1:
            notes.append("  a circular wait: each partition waits for a signal only another blocked partition sends. "
                         "Check the phases: a barrier starts in phase 0, so a wait with parity 1 passes at once and "
                         "one with parity 0 blocks until the first phase completes — a producer's first wait for a "
                         "free slot (empty[i]) uses parity 1, a consumer's first wait for data (full[i]) parity 0")
        return notes

    def deadlock(self) -> None:
        waits = [w.describe() for _, w in self.blocked]
        lines = [f"deadlock in program {self.pid}: no partition can make progress"]
        lines += ["  " + d["text"] for d in waits]
        done = [co.thread.agent.name for co in self.coroutines if co.done]
        if done:
            lines.append("  finished partitions: " + ", ".join(done))
        notes = []
        for d in waits:
            bar = d.get("barrier")
            if isinstance(bar, MBarrier) and bar.pending == 0 and bar.tx != 0 and not bar.transfers:
                notes.append(f"  {bar.name}: barrier_expect_bytes declared {bar.expected} bytes in this phase but "
                             f"{bar.landed} bytes of loads arrived — the phase can never complete")
                if bar.expect_ops:  # attributed to the phase's last expect; raised with the deadlock below
                    self.interp.checker.report(
                        SyncHazard, "expect-bytes", f"barrier_expect_bytes declared {bar.expected} bytes but the "
                        f"loads on the barrier bring {bar.landed}", bar.where, None, bar.expect_ops[-1],
                        "make the expected byte count equal the bytes of the TMA loads that complete on this barrier",
                        may_raise=False)
        notes += self._signal_notes(waits)
        lines += notes
        if not notes:
            lines.append("  hint: check the phase each wait expects (a consumer waits on full[i] with phase p, the "
                         "producer on empty[i] with p^1) and that every barrier gets arrive_count arrivals")
        err = DeadlockError("\n".join(lines), self.pid, waits)
        err.hazards = list(self.interp.checker.hazards)  # type: ignore[attr-defined]
        raise err


class Interpreter:
    """Runs one module over a grid."""

    def __init__(self, module: Module, grid: Tuple[int, int, int], args: Sequence[Any], raise_on_hazard: bool,
                 gmem: GlobalMemory, max_while_iterations: int):
        self.module = module
        self.func = module.func
        self.grid = grid
        self.args = list(args)
        self.gmem = gmem
        self.checker = Checker(raise_on_hazard)
        self.num_warps = int(module.attrs.get("num_warps", 4))
        self._compiled: Dict[int, Tuple[List[Tuple[Callable, Operation, bool]], Operation]] = {}
        self._pending_checks: Dict[int, List[Value]] = {}
        self.has_async_dot = any(op.name == "tlx.async_dot" for op in module.ops())
        self.max_while_iterations = max_while_iterations

    # -- execution -----------------------------------------------------------------------------------
    def run(self) -> None:
        """Run the grid, one cluster at a time (a CTA alone when the kernel has no cluster)."""
        gx, gy, gz = self.grid
        cx, cy, cz = (int(c) for c in self.module.attrs.get("cluster", (1, 1, 1)))
        for axis, (g, c) in enumerate(zip(self.grid, (cx, cy, cz))):
            if g % c:
                raise InterpreterError(f"the grid {tuple(self.grid)} is not a whole number of clusters "
                                       f"{(cx, cy, cz)} along axis {axis}",
                                       hint="make each grid dimension a multiple of ctas_per_cga's")
        for z0, y0, x0 in itertools.product(range(0, gz, cz), range(0, gy, cy), range(0, gx, cx)):
            cl = ClusterRun()
            # ranks run x fastest, as %cluster_ctarank does
            for rank, (dz, dy, dx) in enumerate(itertools.product(range(cz), range(cy), range(cx))):
                Program(self, (x0 + dx, y0 + dy, z0 + dz), cl, rank)
            for p in cl.programs:
                p.start(self.func, self.args)
            cl.run()

    def compile_block(self, block: Block):
        key = id(block)
        c = self._compiled.get(key)
        if c is None:
            steps = []
            for op in block.ops[:-1]:
                fn = HANDLERS.get(op.name)
                if fn is None:
                    raise InterpreterError(f"the interpreter does not implement {op.name}", op.loc)
                steps.append((fn, op, op.name in GENERATORS))
                if self.has_async_dot and op.name not in _NONBLOCKING_OK:
                    ts = [v for v in op.operands if isinstance(v.type, T.TensorType)]
                    if ts:
                        self._pending_checks[id(op)] = ts
            c = (steps, block.ops[-1])
            self._compiled[key] = c
        return c

    def run_block(self, th: Thread, block: Block):
        """Execute a block; returns (as the generator's value) the terminator's operand values."""
        steps, term = self.compile_block(block)
        env = th.env
        checks = self._pending_checks
        for fn, op, gen in steps:
            if th.active is not None and op.name not in _DIVERGENT_OK and not op.name.startswith(_DIVERGENT_OK_PREFIXES):
                raise InterpreterError(f"{op.name} inside a branch that only some threads take (a condition on "
                                       "tlx.thread_id) is not modelled by the block-level interpreter", op.loc,
                                       hint="keep shared-memory, barrier and TMA ops outside thread-divergent branches")
            if checks:
                vs = checks.get(id(op))
                if vs:
                    self.resolve_early(th, op, vs)
            if gen:
                yield from fn(self, th, op)
            else:
                fn(self, th, op)
        return [env[v] for v in term.operands]

    def resolve_early(self, th: Thread, op: Operation, vs: List[Value]) -> None:
        for v in vs:
            x = th.env.get(v)
            if isinstance(x, PendingDot):
                user = _source_user(op)
                r = th.record(user, f"use of the async_dot result in {user.name}")
                src = th.record(x.op, "async_dot result")
                self.checker.report(SyncHazard, "use-before-wait", "the register result of an async_dot is used "
                                    "before tlx.async_dot_wait retired its wgmma group", None, src, r,
                                    "pass the result through tlx.async_dot_wait(N, acc) and use the value it returns")
                th.env[v] = x.resolve()


def _source_user(op: Operation) -> Operation:
    """The op of the kernel's source that uses a value: layout conversions the compiler inserted
    carry the producer's line, so a report names the first op after them that the user wrote."""
    while op.name == "tt.convert_layout" and op.results and op.results[0].users:
        op = op.results[0].users[0]
    return op


# =================================================================================================
# op handlers: fn(interp, thread, op); generator handlers (may block) are listed in GENERATORS
# =================================================================================================

HANDLERS: Dict[str, Callable] = {}
GENERATORS = set()


def handler(*names: str, gen: bool = False):
    """Register `fn(interp, thread, op)` as the handler of the ops `names`; with `gen`, fn is a
    generator that may block (it yields a `Wait`)."""
    def deco(fn):
        for n in names:
            HANDLERS[n] = fn
            if gen:
                GENERATORS.add(n)
        return fn
    return deco


def _set(th: Thread, op: Operation, value) -> None:
    th.env[op.results[0]] = value


def _results(table: Dict[str, Callable]) -> None:
    """Register ops whose one result is `fn(interp, thread, op)`, for each name: fn of the table."""
    for name, fn in table.items():
        handler(name)(lambda it, th, op, fn=fn: _set(th, op, fn(it, th, op)))


def _arg(th: Thread, op: Operation, name: str) -> Any:
    """The value of the op's operand `name`; None when the op has no such operand."""
    v = op.arg(name)
    return None if v is None else th.env[v]


def _elem(v: Value) -> T.ScalarType:
    return T.element_of(v.type)  # type: ignore[return-value]


def _fres(x, t: T.Type):
    """A float result rounded to the IR type (bf16 values are float32 rounded to bf16)."""
    e = T.element_of(t)
    if e.name == "bf16":
        x = N.round_bf16_from_f32(np.asarray(x, dtype=np.float32))
    return _scalar_or(x, t)


def computes(*names: str, finish: Callable = _scalar_or):
    """Register `fn(op, *values)` for ops whose one result it computes from the values of their
    operands (numpy arrays); `finish` casts it to the op's result type (`_fres`: rounds bf16)."""
    def deco(fn):
        def h(it, th, op):
            _set(th, op, finish(fn(op, *(np.asarray(th.env[v]) for v in op.operands)), op.result.type))
        handler(*names)(h)
        return fn
    return deco


# -- constants, program ids, shapes ---------------------------------------------------------------

def _constant_of(t: T.Type, v: Any) -> Any:
    """The interpreter's value of constant `v` of type `t`: a scalar, or a tensor filled with it."""
    e = T.element_of(t)
    s = N.int_constant(int(v), e) if e.is_int else N.round_to(np.float64(v), e)[()]
    return np.full(t.shape, s, dtype=N.compute_dtype(e)) if isinstance(t, T.TensorType) else s


@handler("arith.constant")
def _constant(it, th, op):
    _set(th, op, _constant_of(op.result.type, op.attrs["value"]))


_results({
    "tt.get_program_id": lambda it, th, op: np.int32(th.prog.pid[op.attrs["axis"]]),
    "tt.get_num_programs": lambda it, th, op: np.int32(it.grid[op.attrs["axis"]]),
    "tt.make_range": lambda it, th, op: np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int32),
    "tt.splat": lambda it, th, op: np.full(op.result.type.shape, _uniform(th, op, op.operands[0], "splatted value"),
                                           dtype=N.compute_dtype(op.result.type.element)),
    "tt.join": lambda it, th, op: np.stack([th.env[v] for v in op.operands], axis=-1),
})


# ops that rearrange their one operand
for _n, _f in {
    "broadcast": lambda op, x: np.broadcast_to(x, op.result.type.shape),
    "expand_dims": lambda op, x: np.expand_dims(x, op.attrs["axis"]),
    "reshape": lambda op, x: np.reshape(x, op.result.type.shape),
    "trans": lambda op, x: np.transpose(x, op.attrs["order"]),
    "hint": lambda op, x: x,
    "convert_layout": lambda op, x: x,
}.items():
    computes(f"tt.{_n}")(_f)


@handler("tt.split")
def _split(it, th, op):
    a = th.env[op.operands[0]]
    th.env[op.results[0]] = np.ascontiguousarray(a[..., 0])
    th.env[op.results[1]] = np.ascontiguousarray(a[..., 1])


# -- integer arithmetic ------------------------------------------------------------------------------

def _wrap(f):
    def g(a, b, e):
        if e.bits == 1:
            return N.back(f(a.astype(np.uint8), b.astype(np.uint8)), e)
        return f(a, b)
    return g


for _n, _f in {
    "addi": _wrap(lambda a, b: a + b), "subi": _wrap(lambda a, b: a - b), "muli": _wrap(lambda a, b: a * b),
    "andi": lambda a, b, e: a & b, "ori": lambda a, b, e: a | b, "xori": lambda a, b, e: a ^ b,
    "divsi": lambda a, b, e: N.back(N.div_trunc(N.as_signed(a, e), N.as_signed(b, e)), e),
    "remsi": lambda a, b, e: N.back(N.rem_trunc(N.as_signed(a, e), N.as_signed(b, e)), e),
    "divui": lambda a, b, e: N.back(N.div_trunc(N.as_unsigned(a, e), N.as_unsigned(b, e)), e),
    "remui": lambda a, b, e: N.back(N.rem_trunc(N.as_unsigned(a, e), N.as_unsigned(b, e)), e),
    "maxsi": lambda a, b, e: N.back(np.maximum(N.as_signed(a, e), N.as_signed(b, e)), e),
    "minsi": lambda a, b, e: N.back(np.minimum(N.as_signed(a, e), N.as_signed(b, e)), e),
    "maxui": lambda a, b, e: N.back(np.maximum(N.as_unsigned(a, e), N.as_unsigned(b, e)), e),
    "minui": lambda a, b, e: N.back(np.minimum(N.as_unsigned(a, e), N.as_unsigned(b, e)), e),
    "shli": lambda a, b, e: N.shift("shli", a, b, e), "shrsi": lambda a, b, e: N.shift("shrsi", a, b, e),
    "shrui": lambda a, b, e: N.shift("shrui", a, b, e),
}.items():
    computes(f"arith.{_n}")(lambda op, a, b, f=_f: f(a, b, _elem(op.operands[0])))
computes("math.absi")(lambda op, a: np.abs(a))


# -- float arithmetic -----------------------------------------------------------------------------------

for _n, _f in {
    "addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide, "remf": np.fmod,
    "maximumf": np.maximum, "minimumf": np.minimum, "maxnumf": np.fmax, "minnumf": np.fmin,
}.items():
    computes(f"arith.{_n}", finish=_fres)(lambda op, a, b, f=_f: f(a, b))

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _funary(fn):
    """`fn` on a float operand: f16 and bf16 computed in f32 (f16 results rounded back)."""
    def g(op, a):
        e = _elem(op.operands[0])
        x = a.astype(np.float32) if e.name in ("f16", "bf16") else a
        return N.round_to(fn(x), e) if e.name == "f16" else fn(x)
    return g


def _flush_subnormal(fn):
    """`fn` with results below the smallest normal f32 (2^-126) flushed to +-0, for f32 inputs
    (f16 and bf16 are computed in f32): the GPU's exp2 is `ex2.approx.ftz.f32` (the compiler's
    EX2_F32 in compiler/codegen/lower_arith.py), as CUDA's fast-math exp2f. float64 is untouched."""
    tiny = np.finfo(np.float32).tiny

    def g(x):
        r = fn(x)
        if np.asarray(r).dtype != np.float32:
            return r
        return np.where(np.abs(r) < tiny, np.copysign(np.float32(0), r), r).astype(np.float32)
    return g


for _n, _f in {
    "exp": _flush_subnormal(np.exp), "exp2": _flush_subnormal(np.exp2), "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "absf": np.abs, "floor": np.floor,
    "ceil": np.ceil, "tanh": np.tanh, "erf": lambda x: _erf(x).astype(x.dtype),
}.items():
    computes(f"math.{_n}", finish=_fres)(_funary(_f))
computes("arith.negf", finish=_fres)(_funary(np.negative))


@computes("math.fma", finish=_fres)
def _fma(op, a, b, c):
    e = _elem(op.operands[0])
    if e.name == "f64":
        return a * b + c  # float64 has no wider type here; one extra rounding at most
    return N.round_to(a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64), e)


# -- comparisons, select ------------------------------------------------------------------------------

_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
        "ge": np.greater_equal}


@computes("arith.cmpi")
def _cmpi(op, a, b):
    p = op.attrs["predicate"]  # eq, ne, or s/u (the signedness) + lt, le, gt, ge
    e = _elem(op.operands[0])
    if isinstance(e, T.ScalarType) and e.bits > 1:
        if p[0] == "u":
            a, b = N.as_unsigned(a, e), N.as_unsigned(b, e)
        elif p[0] == "s":
            a, b = N.as_signed(a, e), N.as_signed(b, e)
    return _CMP[p if p in ("eq", "ne") else p[1:]](a, b)


@computes("arith.cmpf")
def _cmpf(op, a, b):
    p = op.attrs["predicate"]  # ord, uno, or o (false for NaN) / u (true for NaN) + a comparison
    nan = np.isnan(a) | np.isnan(b)
    if p in ("ord", "uno"):
        return ~nan if p == "ord" else nan
    r = _CMP[p[1:]](a, b)
    return r & ~nan if p[0] == "o" else r | nan


@handler("arith.select")
def _select(it, th, op):
    c, a, b = (th.env[v] for v in op.operands)
    if isinstance(a, (SmemView, MBarrier)) or not any(isinstance(x, np.ndarray) for x in (c, a, b)):
        _set(th, op, a if bool(c) else b)  # a uniform choice (of values, buffers or barriers)
    else:
        _set(th, op, _scalar_or(np.where(c, a, b), op.result.type))


# -- casts ------------------------------------------------------------------------------------------------

@computes("arith.extsi", "arith.extui", "arith.trunci")
def _icast(op, a):
    se, de = _elem(op.operands[0]), _elem(op.result)
    if op.name == "arith.trunci":
        return (a.astype(np.int64) & 1).astype(bool) if de.bits == 1 else a.astype(N.compute_dtype(de))
    if se.bits == 1:
        r = (-(a.astype(np.int64)) if op.name == "arith.extsi" else a.astype(np.int64))
        return N.back(r.astype(N._SIGNED[de.bits]).view(N._UNSIGNED[de.bits]), de)
    src = N.as_signed(a, se) if op.name == "arith.extsi" else N.as_unsigned(a, se)
    return N.back(src.astype(N._SIGNED[de.bits] if op.name == "arith.extsi" else N._UNSIGNED[de.bits]), de)


@computes("arith.sitofp", "arith.uitofp")
def _itof(op, a):
    se, de = _elem(op.operands[0]), _elem(op.result)
    src = N.as_signed(a, se) if op.name == "arith.sitofp" and se.bits > 1 else N.as_unsigned(a, se)
    return src.astype(np.float32) if de.name == "f32" else N.round_to(src.astype(np.float64), de)


computes("arith.fptosi", "arith.fptoui")(lambda op, a: N.float_to_int(a, _elem(op.result), op.name == "arith.fptosi"))


@computes("arith.extf", "arith.truncf", "tt.fp_to_fp")
def _fcast(op, a):
    de = _elem(op.result)
    src = a.astype(np.float64) if a.dtype != np.float32 or de.name not in ("bf16", "f16", "f32") else a
    return N.round_to(src, de, op.attrs.get("rounding", "rtne"))


@computes("arith.bitcast", "tt.int_to_ptr", "tt.ptr_to_int")
def _bitcast(op, a):
    de = _elem(op.result)
    return N.decode(N.encode(a, _elem(op.operands[0])).view(N.storage_dtype(de)), de)


# -- reductions, dot -----------------------------------------------------------------------------------

# max / min compare signed for iN, unsigned for uN: the numpy dtype says which
_REDUCE = {"max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin,
           "xor_sum": np.bitwise_xor.reduce, "and": np.bitwise_and.reduce, "or": np.bitwise_or.reduce}


@computes("tt.reduce", finish=_fres)
def _reduce(op, a):
    ax, kind = op.attrs["axis"], op.attrs["kind"]
    e = _elem(op.operands[0])
    if kind == "sum" and e.is_float:
        return N.round_to(np.sum(a.astype(np.float64 if e.name == "f64" else np.float32), axis=ax), e)
    if kind in ("sum", "prod"):  # in the operand's own dtype: integers wrap
        return (np.sum if kind == "sum" else np.prod)(a, axis=ax, dtype=a.dtype)
    return _REDUCE[kind](a, axis=ax)


@computes("tt.dot")
def _dot(op, a, b, c):
    return matmul(a, b, c, _elem(op.operands[0]), _elem(op.operands[1]), op.result.type,
                  op.attrs.get("input_precision", "tf32"))


# -- global memory --------------------------------------------------------------------------------------

@computes("tt.addptr")
def _addptr(op, p, off):
    oe = _elem(op.operands[1])
    o = N.as_signed(off, oe).astype(np.int64) if oe.bits > 1 else off.astype(np.int64)
    return p.astype(np.int64) + o * _elem(op.operands[0]).pointee.bytes


@handler("tt.load")
def _load(it, th, op):
    p = th.env[op.arg("ptr")]
    mask = _with_active(th, p, _arg(th, op, "mask"), op.arg("ptr"))
    v = it.gmem.load(np.asarray(p), mask, _elem(op.arg("ptr")).pointee, _arg(th, op, "other"), op.loc)
    _set(th, op, _scalar_or(v, op.result.type))


@handler("tt.store")
def _store(it, th, op):
    p, v = th.env[op.arg("ptr")], th.env[op.arg("value")]
    mask = _with_active(th, p, _arg(th, op, "mask"), op.arg("ptr"))
    if _varying(v) and not _varying(p):
        p = np.full(v.shape, p, dtype=np.int64)  # every thread stores its own value: the last one wins
    it.gmem.store(np.asarray(p), np.asarray(v), mask, _elem(op.arg("ptr")).pointee, op.loc)


def _with_active(th, p, mask, ptr: Value):
    """Inside a divergent branch, an access is masked to the threads that take it: a per-thread
    scalar one by thread, a tensor one to the elements whose owner (the one thread of each group
    holding copies that the code generator lets access them) takes the branch."""
    if th.active is None:
        return mask
    if isinstance(ptr.type, T.TensorType):
        owned = np.asarray(th.active, dtype=bool)[_element_owners(ptr.type, th.agent.num_threads // 32, ptr)]
        return owned if mask is None else (np.asarray(mask) & owned)
    if not _varying(p):
        return mask
    return th.active if mask is None else (np.asarray(mask) & th.active)


def _element_owners(t: T.TensorType, num_warps: int, v: Value) -> np.ndarray:
    """The partition thread that accesses each element of a tensor of type `t` (its layout's one
    owner per group of copies: lane and warp bits that only copy elements are zero)."""
    if t.layout is None:
        raise InterpreterError("a tensor access inside a branch that only some threads take needs its layout: run "
                               "the layout pass first", v.owner.loc if v.owner is not None else None)
    return W.element_owners(t.layout, tuple(t.shape), num_warps)


def _rmw(kind: str, old: np.ndarray, val: np.ndarray, e: T.ScalarType) -> np.ndarray:
    if kind in ("add", "fadd"):
        r = old + val
        return N.round_bf16_from_f32(r) if e.name == "bf16" else r
    if kind in ("max", "min"):  # signed for iN, unsigned for uN: the numpy dtype says which
        return np.maximum(old, val) if kind == "max" else np.minimum(old, val)
    if kind in ("umax", "umin"):
        uo, uv = N.as_unsigned(old, e), N.as_unsigned(val, e)
        return N.back(np.maximum(uo, uv) if kind == "umax" else np.minimum(uo, uv), e)
    if kind == "and":
        return old & val
    if kind == "or":
        return old | val
    if kind == "xor":
        return old ^ val
    return val  # xchg


def _atomic(it, th, op, update: Callable[[np.ndarray, np.ndarray, int], np.ndarray], vals: List[np.ndarray], mask):
    """Apply `update(old, vals_at_lane, lane)` lane by lane in lane order (vectorized when the
    active lanes hit distinct addresses); returns the old values."""
    pv = op.operands[0]
    et = _elem(pv).pointee
    sd = N.storage_dtype(et)
    addrs = np.asarray(th.env[pv], dtype=np.int64)
    shape = addrs.shape
    old_all = np.zeros(shape, dtype=N.compute_dtype(et))
    for reg, m, idx in it.gmem.locate(addrs, mask, sd, op.loc, "atomic"):
        mem = reg.typed(sd)
        lanes = np.flatnonzero(np.broadcast_to(m, shape))
        flat_idx = np.broadcast_to(idx, shape).reshape(-1)[lanes]
        vs = [np.broadcast_to(v, shape).reshape(-1)[lanes] for v in vals]
        if len(np.unique(flat_idx)) == len(flat_idx):
            old = N.decode(mem[flat_idx], et)
            mem[flat_idx] = N.encode(update(old, *vs), et)
        else:
            old = np.empty(len(lanes), dtype=N.compute_dtype(et))
            for j, ix in enumerate(flat_idx):
                o = N.decode(mem[ix:ix + 1], et)
                old[j] = o[0]
                mem[ix:ix + 1] = N.encode(update(o, *[v[j:j + 1] for v in vs]), et)
        ov = old_all.reshape(-1)
        ov[lanes] = old
    return old_all


@handler("tt.atomic_rmw")
def _atomic_rmw(it, th, op):
    e = _elem(op.arg("value"))
    kind = op.attrs["op"]
    mask = _with_active(th, th.env[op.arg("ptr")], _arg(th, op, "mask"), op.arg("ptr"))
    val = np.asarray(th.env[op.arg("value")])
    old = _atomic(it, th, op, lambda o, v: _rmw(kind, o, v.astype(o.dtype), e), [val], mask)
    _set(th, op, _scalar_or(old, op.result.type))


@handler("tt.atomic_cas")
def _atomic_cas(it, th, op):
    cmp, val = np.asarray(th.env[op.operands[1]]), np.asarray(th.env[op.operands[2]])
    old = _atomic(it, th, op, lambda o, c, v: np.where(o == c, v, o), [cmp, val],
                  _with_active(th, th.env[op.operands[0]], None, op.operands[0]))
    _set(th, op, _scalar_or(old, op.result.type))


# -- TMA descriptors (register level) --------------------------------------------------------------------

@handler("tt.make_tensor_descriptor")
def _make_desc(it, th, op):
    base = _int(th.env[op.arg("base")])
    shape = tuple(_int(th.env[v]) for v in op.group("shape"))
    strides = tuple(_int(th.env[v]) for v in op.group("strides"))
    dt = op.result.type
    reg = it.gmem.region_at(base)
    isz = dt.element.bytes
    if reg is None or (base - reg.base) % isz:
        raise InterpreterError("tt.make_tensor_descriptor: the base pointer is not inside an argument array", op.loc)
    d = Descriptor(reg, (base - reg.base) // isz, shape, strides, dt.block_shape, dt.element,
                   op.attrs.get("padding", "zero"))
    d.check_extent(op.loc, "device descriptor")
    slot = op.arg("slot")
    if slot is not None:
        slots, k = th.env[slot]
        slots[k] = d
    _set(th, op, d)


_results({
    # the program's slots: each holds the descriptor last written into it (None: never written)
    "tlx.allocate_tensor_descriptor": lambda it, th, op: [None] * op.attrs["num"],
    "tt.descriptor_load": lambda it, th, op: th.env[op.arg("desc")].load_tile(_offsets(th, op)),
})


@handler("tlx.desc_slot")
def _desc_slot(it, th, op):
    slots, k = th.env[op.arg("slots")], _int(th.env[op.arg("index")])
    if not 0 <= k < len(slots):
        raise InterpreterError(f"descriptor slot index {k} is out of range 0..{len(slots) - 1} "
                               f"(allocate_tensor_descriptor(num={len(slots)}))", op.loc)
    _set(th, op, (slots, k))


@handler("tlx.reinterpret_tensor_descriptor")
def _reinterpret_desc(it, th, op):
    slots, k = th.env[op.arg("slot")]
    d, want = slots[k], op.result.type
    if d is None:
        raise InterpreterError(f"reinterpret_tensor_descriptor reads descriptor slot {k}, which holds no descriptor "
                               f"yet", op.loc,
                               hint="write it first with tlx.make_tensor_descriptor(desc_ptr=slot, ...)")
    if (tuple(d.block_shape), d.element) != (tuple(want.block_shape), want.element):
        raise InterpreterError(f"reinterpret_tensor_descriptor reads descriptor slot {k} as {want}, but it holds a "
                               f"descriptor of {list(d.block_shape)} x {d.element} tiles", op.loc,
                               hint="pass the block_shape and dtype the descriptor was made with")
    _set(th, op, d)


def _offsets(th, op) -> List[int]:
    return [_int(th.env[v]) for v in op.group("offsets")]


@handler("tt.descriptor_store")
def _desc_store(it, th, op):
    d = th.env[op.arg("desc")]
    d.store_tile(_offsets(th, op), np.asarray(th.env[op.arg("value")]), op.loc)


# -- shared memory ------------------------------------------------------------------------------------

def _result_name(op: Operation, default: str) -> str:
    """The kernel's name of the op's result (``%acc``) for reports, or `default` if it has none."""
    n = op.results[0].name
    return f"%{n}" if n and not n.isdigit() else default


@handler("tlx.local_alloc")
def _local_alloc(it, th, op):
    view = th.prog.smem(op, op.result.type, _result_name(op, "shared buffer")).root
    src = op.arg("src")
    if src is not None:
        it.checker.generic_write(view, th.record(op, "generic write"))
        view.write(th.env[src])
    _set(th, op, view)


def _bounds(op, i: int, n: int, what: str) -> None:
    if not 0 <= i < n:
        raise InterpreterError(f"{op.name}: {what} {i} is out of range 0..{n - 1}", op.loc)


@handler("tlx.local_alias")
def _local_alias(it, th, op):
    """Buffers placed in an aliased allocation's bytes (`compiler/ir/alias.py`): numpy views of
    those same bytes, so a write through one alias is what another alias reads (and the hazard
    checker's per-byte state is shared)."""
    src = th.env[op.arg("src")]
    rt = op.result.type
    p = placement(op.attrs)
    sd = N.storage_dtype(rt.element)
    one = rt.buffer_shape
    inner = tuple(int(np.prod(one[k + 1:])) * sd.itemsize for k in range(len(one)))
    start = src.byte_layout()[0]
    data = src.alloc.data

    def view(off: int, shape, strides) -> np.ndarray:
        return np.ndarray(shape, dtype=sd, buffer=data, offset=start + off, strides=strides)

    stride = p.uniform_stride()
    if stride:
        _set(th, op, SmemView(src.alloc, view(p.offset, (rt.buffers,) + one, (stride,) + inner), rt))
        return
    slabs = [view(p.slab_offset(i), one, inner) for i in range(rt.buffers)]
    _set(th, op, SlabArrayView(src.alloc, slabs, rt))


@handler("tlx.memdesc_index")
def _memdesc_index(it, th, op):
    src = th.env[op.arg("src")]
    i = _int(th.env[op.arg("index")])
    if isinstance(src, BarrierArray):
        _bounds(op, i, len(src.bars), "barrier index")
        _set(th, op, src.bars[i])
        return
    st = op.arg("src").type
    _bounds(op, i, st.shape[0], "buffer index")
    if isinstance(src, SlabArrayView):
        _set(th, op, SmemView(src.alloc, src.slabs[i], op.result.type))
        return
    arr = src.arr[i] if len(st.shape) > 1 else src.arr[i:i + 1]
    _set(th, op, SmemView(src.alloc, arr, op.result.type))


@handler("tlx.memdesc_subslice")
def _subslice(it, th, op):
    src = th.env[op.arg("src")]
    dyn = iter(_int(th.env[v]) for v in op.group("offsets"))
    rt = op.result.type
    sl = []
    for o, s, full in zip(op.attrs["static_offsets"], rt.shape, op.arg("src").type.shape):
        o = next(dyn) if o == -1 else o
        if o < 0 or o + s > full:
            raise InterpreterError(f"tlx.memdesc_subslice: offset {o} + size {s} exceeds the dimension {full}", op.loc)
        sl.append(slice(o, o + s))
    _set(th, op, SmemView(src.alloc, src.arr[tuple(sl)], rt))


@handler("tlx.memdesc_trans")
def _mtrans(it, th, op):
    src = th.env[op.arg("src")]
    _set(th, op, SmemView(src.alloc, src.arr.transpose(op.attrs["order"]), op.result.type))


@handler("tlx.memdesc_reinterpret")
def _reinterp(it, th, op):
    src = th.env[op.arg("src")]
    rt = op.result.type
    if not src.arr.flags.c_contiguous:
        raise InterpreterError("tlx.memdesc_reinterpret of a non-contiguous view (a transpose or a slice)", op.loc)
    off = src.byte_layout()[0]
    sd = N.storage_dtype(rt.element)
    need = int(np.prod(rt.shape)) * sd.itemsize
    if off + need > src.alloc.nbytes:
        raise InterpreterError(f"tlx.memdesc_reinterpret: {rt} needs {need} bytes, the allocation has "
                               f"{src.alloc.nbytes - off} from this view on", op.loc)
    arr = np.ndarray(rt.shape, dtype=sd, buffer=src.alloc.data, offset=off)
    _set(th, op, SmemView(src.alloc, arr, rt))


@handler("tlx.local_store", "tlx.remote_store")
def _local_store(it, th, op):
    """A generic-proxy store of `src` into the view `dst` (this CTA's or, with remote_store through
    a remote view, another's): recorded for the hazard checker, then written."""
    dst = th.env[op.arg("dst")]
    what = "generic write" if op.name == "tlx.local_store" else "remote generic write (st.shared::cluster)"
    it.checker.generic_write(dst, th.record(op, what))
    dst.write(th.env[op.arg("src")])


@handler("tlx.local_load")
def _local_load(it, th, op):
    src = th.env[op.arg("src")]
    it.checker.generic_read(src, th.record(op, "generic read"))
    _set(th, op, src.read())


def _axis_indices(op, idx: np.ndarray, n: int, what: str) -> np.ndarray:
    """The indices of a gather / scatter as int64, every one checked to lie in [0, n)."""
    e = _elem(op.arg("indices"))
    i = (N.as_signed(idx, e) if e.is_signed else N.as_unsigned(idx, e)).astype(np.int64)
    bad = (i < 0) | (i >= n)
    if bad.any():
        at = tuple(int(x) for x in np.argwhere(bad)[0])
        raise InterpreterError(f"{op.name}: index {int(i[at])} at position {list(at)} of the indices is outside the "
                               f"axis (length {n}) it {what}", op.loc,
                               hint="keep every index in [0, axis length); on the GPU such an index wraps around the "
                                    "axis and reads or writes another element")
    return i


def _axis_window(view: SmemView, idx_shape, axis: int) -> np.ndarray:
    """The view's storage restricted to the indices' extent in every dimension but the axis."""
    return view.arr[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(idx_shape))]


@handler("tlx.local_gather")
def _local_gather(it, th, op):
    src = th.env[op.arg("src")]
    ax = op.attrs["axis"]
    idx = np.asarray(th.env[op.arg("indices")])
    it.checker.generic_read(src, th.record(op, "generic read (gather)"))
    i = _axis_indices(op, idx, src.arr.shape[ax], "gathers from")
    raw = np.take_along_axis(_axis_window(src, idx.shape, ax), i, axis=ax)
    _set(th, op, np.array(N.decode(raw, src.element), dtype=N.compute_dtype(src.element)))


@handler("tlx.local_scatter")
def _local_scatter(it, th, op):
    dst = th.env[op.arg("dst")]
    ax = op.attrs["axis"]
    idx = np.asarray(th.env[op.arg("indices")])
    vals = np.broadcast_to(np.asarray(th.env[op.arg("values")]), idx.shape)
    it.checker.generic_write(dst, th.record(op, "generic write (scatter)"))
    i = _axis_indices(op, idx, dst.arr.shape[ax], "scatters into")
    # several elements sent to one place: one of them lands (here the last in row-major order)
    np.put_along_axis(_axis_window(dst, idx.shape, ax), i, N.encode(vals, dst.element), axis=ax)


@handler("tlx.fence_async_shared")
def _fence_async(it, th, op):
    if th.active is not None and not th.active.all():
        # executed by only some threads: it orders only their accesses, and a partition's
        # block-level accesses belong to all of its threads — so it orders none of them
        th.agent.partial_fences.append((op, int(th.active.sum()), th.active.size))
        return
    th.agent.fence()


@handler("tlx.fence", "tlx.tma_prefetch", "tlx.prefetch", "tlx.prefetch_tensormap", "tlx.dump_layout")
def _noop(it, th, op):
    """Global memory is sequentially consistent in the interpreter, a prefetch is only a hint, and
    dump_layout is a compile-time diagnostic (the layout pass prints and erases it)."""


# -- cp.async ------------------------------------------------------------------------------------------

@handler("tlx.async_load")
def _cp_async(it, th, op):
    dst = th.env[op.arg("dst")]
    ptrs = np.asarray(th.env[op.arg("src")])
    mask, other = _arg(th, op, "mask"), _arg(th, op, "other")
    if other is None and mask is not None:
        other = 0  # cp.async zero-fills the bytes of masked-off lanes
    vals = it.gmem.load(ptrs, mask, dst.element, other, op.loc)
    r = th.record(op, "cp.async write (generic proxy)")
    it.checker.generic_write(dst, r, in_flight=True)
    th.cp_open.append((r, lambda: dst.write(vals)))
    _set(th, op, TOKEN)


@handler("tlx.async_commit_group")
def _cp_commit(it, th, op):
    copies = th.cp_open
    th.cp_open = []

    def land():
        for _, l in copies:
            l()
    th.cp_groups.append(Group([r for r, _ in copies], land))
    _set(th, op, TOKEN)


def _retire(th: Thread, groups: List[Group], keep: int) -> None:
    """Complete all but the newest `keep` groups, oldest first."""
    n = max(0, len(groups) - keep)
    if n == 0:
        return
    done = groups[:n]
    del groups[:n]
    e = th.agent.tick()
    for g in done:
        g.finish()
        for r in g.records:
            r.completion = (th.agent.key, e)


@handler("tlx.async_wait_group")
def _cp_wait(it, th, op):
    _retire(th, th.cp_groups, op.attrs["pendings"])
    _set(th, op, TOKEN)


# -- TMA, bulk copies -----------------------------------------------------------------------------------

def _pred(th, op) -> bool:
    p = op.arg("pred")
    return True if p is None else bool(th.env[p])


@handler("tlx.tma_load")
def _tma_load(it, th, op):
    if not _pred(th, op):
        return
    d: Descriptor = th.env[op.arg("desc")]
    dst: SmemView = th.env[op.arg("dst")]
    bar: MBarrier = th.env[op.arg("bar")]
    tile = d.load_tile(_offsets(th, op))
    mask = _arg(th, op, "mask")
    if mask is None:
        _lands_on(it, th, op, bar, dst, "TMA load (async write)", lambda: dst.write(tile))
        return
    m = _int(mask) & 0xFFFF  # multicast: the tile lands in every CTA of the mask, on that CTA's barrier
    for rank in (k for k in range(16) if m >> k & 1):
        other = _remote_program(th, op, rank)
        v = _view_in(dst, other, dst.type)
        _lands_on(it, th, op, _bar_in(it, th, op, bar, other), v,
                  f"multicast TMA load into CTA rank {rank} (async write)", lambda v=v: v.write(tile))


def _lands_on(it, th, op, bar: MBarrier, dst: SmemView, what: str, land: Callable[[], None],
              nbytes: Optional[int] = None, generic: bool = False) -> None:
    """An async write into `dst`, recorded as `what` (an async-proxy write, or with `generic` a
    generic-proxy one: st.async), whose data lands by `land()` and whose `nbytes` (default: the
    view's) complete on `bar` when a waiter needs them."""
    r = th.record(op, what)
    (it.checker.generic_write if generic else it.checker.async_write)(dst, r)
    bar.transfers.append(Transfer(r, dst.arr.nbytes if nbytes is None else nbytes, land, bar.phase))


@handler("tlx.async_bulk_load")
def _bulk_load(it, th, op):
    dst: SmemView = th.env[op.arg("dst")]
    bar: MBarrier = th.env[op.arg("bar")]
    size = op.attrs["size"]
    src = _int(th.env[op.arg("src")])
    data = it.gmem.load(np.arange(src, src + size, dtype=np.int64), None, T.u8, None, op.loc)
    if not dst.arr.flags.c_contiguous or dst.arr.nbytes < size:
        raise InterpreterError(f"tlx.async_bulk_load of {size} bytes into a view of {dst.arr.nbytes} bytes", op.loc)

    def land():
        off = dst.byte_layout()[0]
        dst.alloc.data[off:off + size] = data
    _lands_on(it, th, op, bar, dst, "bulk copy (async write)", land, size)


@handler("tlx.tma_store")
def _tma_store(it, th, op):
    d: Descriptor = th.env[op.arg("desc")]
    src: SmemView = th.env[op.arg("src")]
    offs = _offsets(th, op)
    r = th.record(op, "TMA store (async read of its source)")
    it.checker.async_read(src, r)
    th.bulk.append(Group([r], lambda: d.store_tile(offs, src.read(), op.loc)))


@handler("tlx.async_store")
def _bulk_store(it, th, op):
    src: SmemView = th.env[op.arg("src")]
    dst = _int(th.env[op.arg("dst")])
    size = _int(th.env[op.arg("size")])
    if not src.arr.flags.c_contiguous or src.arr.nbytes < size:
        raise InterpreterError(f"tlx.async_store of {size} bytes from a view of {src.arr.nbytes} bytes", op.loc)
    r = th.record(op, "bulk store (async read of its source)")
    it.checker.async_read(src, r)

    def finish():
        off = src.byte_layout()[0]
        it.gmem.store(np.arange(dst, dst + size, dtype=np.int64), src.alloc.data[off:off + size].copy(), None, T.u8, op.loc)
    th.bulk.append(Group([r], finish))


@handler("tlx.tma_store_wait")
def _store_wait(it, th, op):
    _retire(th, th.bulk, op.attrs["pendings"])


# -- mbarriers and named barriers -------------------------------------------------------------------------

@handler("tlx.alloc_barriers")
def _alloc_barriers(it, th, op):
    prog = th.prog
    arr = prog.barriers.get(op)
    if arr is None:
        base = _result_name(op, "mbarriers")
        arr = BarrierArray([MBarrier(next(prog.keys), f"{base}[{i}]", op.attrs["arrive_count"], op)
                            for i in range(op.attrs["num"])])
        prog.barriers[op] = arr
    else:
        for b in arr.bars:
            b.init()
    _set(th, op, arr)


def _bar(th, op) -> MBarrier:
    b = th.env[op.arg("bar")]
    if isinstance(b, BarrierArray):
        return b.bars[0]
    return b


@handler("tlx.barrier_arrive", "tlx.barrier_expect_bytes")
def _arrive(it, th, op):
    """An arrive, or barrier_expect_bytes: bytes to expect in this phase and one arrival."""
    if not _pred(th, op):
        return
    bar = _bar(th, op)
    bar.signalled(op, th.agent.name, th.iters())
    if op.name == "tlx.barrier_expect_bytes":
        over = bar.expect(th.agent, op.attrs["bytes"], th.record(op, f"barrier_expect_bytes({op.attrs['bytes']})"))
    else:
        n = op.attrs.get("count", 1)
        if op.attrs.get("per_thread"):  # an alloc_warp_barrier barrier: every thread arrives by itself
            n *= th.agent.num_threads
        over = bar.arrive(th.agent, n)
    if over:
        it.checker.report(SyncHazard, "over-arrive", f"more arrivals on {bar.name} than its arrive_count "
                          f"({bar.arrive_count}) in one phase", bar.where, None, th.record(op, "arrive"),
                          "arrive once per partition (or per warp group) that the arrive_count counts")
    _check_overshoot(it, th, bar)


@handler("tlx.barrier_inval")
def _inval(it, th, op):
    bar = _bar(th, op)
    if bar.transfers:  # invalidating a barrier that a TMA load will still complete on
        t = bar.transfers[0]
        it.checker.report(SyncHazard, "inval-in-flight", f"{bar.name} is invalidated while a load that "
                          "completes on it is still in flight", bar.where, t.record, th.record(op, "barrier_inval"),
                          "wait on the barrier (tlx.barrier_wait) before invalidating it")
    # the next alloc_barriers of this op initializes it again; nothing else to model


def _check_overshoot(it, th, bar: MBarrier) -> None:
    """Loads issued in a phase that completed without them bring more bytes than expected."""
    stale = [t for t in bar.transfers if t.issued_phase < bar.phase]
    if stale:
        t = stale[0]
        it.checker.report(SyncHazard, "expect-bytes", f"the loads on {bar.name} bring more bytes than "
                          "barrier_expect_bytes declared: the phase completed while a load was still in flight",
                          bar.where, None, t.record,
                          "make the expected byte count equal the bytes of the loads that complete on this barrier")
        for t in stale:
            t.issued_phase = bar.phase


@handler("tlx.barrier_wait", gen=True)
def _barrier_wait(it, th, op):
    if not _pred(th, op):
        return
    bar = _bar(th, op)
    parity = _int(th.env[op.arg("phase")]) & 1

    def ready() -> bool:
        if bar.parity() != parity:
            return True
        bar.force()
        _check_overshoot(it, th, bar)
        return bar.parity() != parity

    if not ready():
        yield _wait(th, op, "mbarrier", ready, lambda: (
            f"phase {bar.phase} of {bar.where} to complete (wait parity {parity})",
            f"the barrier is in {bar.state()}; {bar.describe_last_signal()}"), barrier=bar, parity=parity)
    th.agent.join(bar.completed_clock)
    th.agent.tick()


def _wait(th: Thread, op: Operation, kind: str, ready: Callable[[], bool], describe: Callable[[], Tuple[str, str]],
          **extra: Any) -> Wait:
    """The partition blocks at `op` until `ready()`; for a deadlock report, `describe()` says what
    it waits for and the state of that (when asked), and `extra` joins the report's entries."""
    iters = th.iters()
    return Wait(ready, lambda: {**wait_info(kind, op, th.agent, iters, *describe()), **extra})


def _named_arrive(th, op) -> Tuple[NamedBarrier, int]:
    """The partition arrives at the op's named barrier (made on first use); returns it and the
    generation to wait for."""
    bid = op.attrs["id"]
    nb = th.prog.named.get(bid)
    if nb is None:
        nb = th.prog.named[bid] = NamedBarrier(bid)
    return nb, nb.arrive(th.agent, op.attrs["count"])


@handler("tlx.named_barrier_arrive")
def _named_barrier_arrive(it, th, op):
    _named_arrive(th, op)


@handler("tlx.named_barrier_wait", gen=True)
def _named_barrier_wait(it, th, op):
    nb, gen = _named_arrive(th, op)
    if nb.generation <= gen:
        nb.waiting.append(th.agent.name)
        yield _wait(th, op, "named", lambda: nb.generation > gen, lambda: (
            f"named barrier {nb.id} ({op.attrs['count']} threads)",
            f"{nb.arrived} threads have arrived (waiting: {', '.join(nb.waiting)})"))
    th.agent.join(nb.released[gen])


@handler("tlx.cta_barrier", "tlx.fence_mbarrier_init")
def _tick(it, th, op):
    # the partition runs as one thread of control: bar.sync orders nothing more; fence.mbarrier_init
    # orders this CTA's inits before the cluster barrier that follows it, which joins the clocks
    th.agent.tick()


# -- wgmma --------------------------------------------------------------------------------------------

@handler("tlx.async_dot")
def _async_dot(it, th, op):
    a, b, acc = th.env[op.arg("a")], th.env[op.arg("b")], _arg(th, op, "acc")
    recs = []
    for v, name in ((a, "A"), (b, "B")):
        if isinstance(v, SmemView):
            r = th.record(op, f"wgmma read of operand {name} (async)")
            it.checker.async_read(v, r)
            recs.append(r)
    a_elem = a.element if isinstance(a, SmemView) else _elem(op.arg("a"))
    pd = PendingDot(op, a if isinstance(a, SmemView) else np.asarray(a), a_elem, b, acc,
                    op.result.type, op.attrs.get("input_precision", "tf32"))
    th.wgmma.append(Group(recs, pd.resolve))
    _set(th, op, pd)


@handler("tlx.async_dot_wait")
def _async_dot_wait(it, th, op):
    _retire(th, th.wgmma, op.attrs["pendings"])
    for v, r in zip(op.group("values"), op.results):
        x = th.env[v]
        if isinstance(x, PendingDot) and x.value is not None:
            x = x.value
        th.env[r] = x


# -- misc ---------------------------------------------------------------------------------------------

@handler("tlx.clock64")
def _clock64(it, th, op):
    th.prog.clock64 += 1000
    _set(th, op, np.int64(th.prog.clock64))


# -- thread-block clusters ----------------------------------------------------------------------------

_results({
    "tlx.cluster_cta_rank": lambda it, th, op: np.int32(th.prog.rank),
    "tlx.cluster_size": lambda it, th, op: np.int32(len(th.prog.cluster.programs)),
})


@handler("tlx.cluster_barrier", gen=True)
def _cluster_barrier(it, th, op):
    cl = th.prog.cluster
    gen = cl.arrive(th.agent)
    if not cl.try_release(gen):
        yield _wait(th, op, "cluster", lambda: cl.try_release(gen), lambda: (
            "every partition of every CTA of the cluster at tlx.cluster_barrier",
            f"{cl.arrived} of {cl.live()} live partitions have arrived"))
    th.agent.join(cl.released[gen])
    th.agent.tick()


def _remote_program(th, op, rank: int) -> "Program":
    progs = th.prog.cluster.programs
    if not 0 <= rank < len(progs):
        raise InterpreterError(f"{op.name}: CTA rank {rank} is not in the cluster of {len(progs)} CTA(s)", op.loc,
                               hint="launch with ctas_per_cga covering the ranks the kernel names")
    return progs[rank]


def _bar_in(it, th, op, bar: MBarrier, other: "Program") -> MBarrier:
    """The mbarrier of CTA `other` at the place of this CTA's `bar` (a hazard if `other` has not
    initialized it yet: then this CTA's own stands in)."""
    arr = next((a for a in th.prog.barriers.values() if bar in a.bars), None)
    if arr is None:
        raise InterpreterError(f"{op.name}: an mbarrier that is not one of this CTA's", op.loc)
    theirs = other.barriers.get(bar.op)
    if theirs is None:
        r = th.record(op, "remote access to an mbarrier")
        it.checker.report(SyncHazard, "cluster-order", f"CTA rank {other.rank} of the cluster has not initialized "
                          f"{bar.name} when this CTA signals it", bar.where,
                          None, r, "call tlx.fence_mbarrier_init_cluster() and tlx.cluster_barrier() after allocating "
                          "the barriers, before any CTA signals another's")
        return bar
    return theirs.bars[arr.bars.index(bar)]


def _view_in(view: SmemView, other: "Program", mtype: T.MemDescType) -> SmemView:
    """The same bytes as `view` in CTA `other`'s copy of the allocation (shared memory is a CTA's
    from its start, so the allocation is made if that CTA has not reached it yet)."""
    alloc = other.smem(view.alloc.op, view.alloc.type, view.alloc.name)
    off, shape, strides = view.byte_layout()
    return SmemView(alloc, np.ndarray(shape, view.arr.dtype, alloc.data, off, strides), mtype)


@handler("tlx.remote_view")
def _remote_view(it, th, op):
    src = th.env[op.arg("src")]
    other = _remote_program(th, op, _int(th.env[op.arg("rank")]))
    if isinstance(src, MBarrier):
        _set(th, op, _bar_in(it, th, op, src, other))
    else:
        _set(th, op, _view_in(src, other, op.result.type))


@handler("tlx.async_remote_store")
def _async_remote_store(it, th, op):
    dst: SmemView = th.env[op.arg("dst")]
    bar: MBarrier = th.env[op.arg("bar")]
    vals = np.array(th.env[op.arg("src")])
    _lands_on(it, th, op, bar, dst, "remote async store (st.async)", lambda: dst.write(vals), generic=True)


@handler("tlx.async_remote_copy")
def _async_remote_copy(it, th, op):
    dst: SmemView = th.env[op.arg("dst")]
    src: SmemView = th.env[op.arg("src")]
    bar: MBarrier = th.env[op.arg("bar")]
    it.checker.async_read(src, th.record(op, "remote bulk copy (async read of its source)"))
    data = src.arr.copy()  # (the source is read at issue; a later write to it is the checker's WAR)

    def land():
        dst.arr[...] = data.reshape(dst.arr.shape) if data.shape != dst.arr.shape else data
    _lands_on(it, th, op, bar, dst, "remote bulk copy (async write)", land)


_results({
    # one value per thread of the partition along x; blocks are 1-D, so y and z are 0
    "tlx.thread_id": lambda it, th, op: np.int32(0) if op.attrs.get("axis", 0) else
    np.arange(th.first_thread, th.first_thread + th.agent.num_threads, dtype=np.int32),
})


# -- control flow ----------------------------------------------------------------------------------------

@handler("scf.for", gen=True)
def _for(it, th, op):
    lb, ub, step = (_uniform(th, op, v, "loop bound") for v in (op.arg("lb"), op.arg("ub"), op.arg("step")))
    et = _elem(op.arg("lb"))
    lo, hi, st = int(lb), int(ub), int(step)  # (unsigned types hold unsigned numpy values)
    if st <= 0:
        raise InterpreterError(f"scf.for with step {st}: the step must be positive", op.loc)
    vals = [th.env[v] for v in op.group("inits")]
    body = op.regions[0].block
    dt = N.compute_dtype(et)
    th.loops.append([op.loc, 0])
    k = 0
    i = lo
    try:
        while i < hi:
            th.loops[-1][1] = k
            th.env[body.args[0]] = N.int_constant(i, et) if dt.kind in "iu" else dt.type(i)
            th.env.update(zip(body.args[1:], vals))
            vals = yield from it.run_block(th, body)
            i += st
            k += 1
    finally:
        th.loops.pop()
    th.env.update(zip(op.results, vals))


@handler("scf.if", gen=True)
def _if(it, th, op):
    c = th.env[op.arg("cond")]
    if _varying(c):
        live = True if th.active is None else th.active
        act, rest = c & live, ~c & live
        if act.any() and rest.any():
            yield from _divergent_if(it, th, op, act, rest)
            return
        c = act.any()  # every active thread goes the same way
    vals = yield from it.run_block(th, op.regions[0 if bool(c) else 1].block)
    th.env.update(zip(op.results, vals))


def _divergent_if(it, th, op, act, rest):
    """Both branches run, each for the threads that take it (some do each: `act`, `rest`);
    results merge per thread."""
    saved = th.active
    outs = []
    for region, mask in ((op.regions[0], act), (op.regions[1], rest)):
        th.active = mask
        try:
            outs.append((yield from it.run_block(th, region.block)))
        finally:
            th.active = saved
    for r, tv, fv in zip(op.results, *outs):
        if isinstance(r.type, T.TensorType):
            raise InterpreterError("scf.if: a tensor result of a branch that only some threads take", op.loc)
        th.env[r] = _scalar_or(np.where(act, tv, fv), r.type)


@handler("scf.while", gen=True)
def _while(it, th, op):
    vals = [th.env[v] for v in op.group("inits")]
    before, after = op.regions[0].block, op.regions[1].block
    th.loops.append([op.loc, 0])
    k = 0
    try:
        while True:
            th.loops[-1][1] = k
            th.env.update(zip(before.args, vals))
            cv = yield from it.run_block(th, before)
            cond, vals = cv[0], cv[1:]
            if _varying(cond):
                raise InterpreterError("scf.while: the loop condition differs between threads", op.loc)
            if not bool(cond):
                break
            th.env.update(zip(after.args, vals))
            vals = yield from it.run_block(th, after)
            k += 1
            if k >= it.max_while_iterations:
                raise InterpreterError(
                    f"scf.while ran {k} iterations in program {th.prog.pid} without finishing", op.loc,
                    hint="a spin-wait on a flag another program sets never ends here: the interpreter runs the "
                         "programs one after another (raise max_while_iterations if the loop is just long)")
    finally:
        th.loops.pop()
    th.env.update(zip(op.results, vals))


@handler("tlx.warp_specialize", gen=True)
def _warp_specialize(it, th, op):
    prog = th.prog
    caps = [th.env[v] for v in op.group("captures")]
    nw = op.attrs.get("partition_num_warps", [])
    th.agent.tick()
    workers = []
    for k, region in enumerate(op.regions[1:]):
        agent = prog.new_agent(f"{k + 1} ({nw[k]} warps, ws at {describe_loc(op.loc)})", nw[k] * 32, th.agent.clock)
        wt = Thread(prog, agent)
        wt.first_thread = th.first_thread + th.agent.num_threads + sum(x * 32 for x in nw[:k])
        wt.loops = [list(x) for x in th.loops]
        workers.append(prog.spawn(wt, region.block, caps))
    yield from it.run_block(th, op.regions[0].block)
    if not all(c.done for c in workers):
        yield _wait(th, op, "join", lambda: all(c.done for c in workers), lambda: (
            "the worker partitions to finish",
            "still running: " + ", ".join(c.thread.agent.name for c in workers if not c.done)))
    for c in workers:
        th.agent.join(c.thread.agent.clock)
        # what a worker left in flight stays its own; the kernel exit completes it
    th.agent.tick()


# -- warp-level ops and inline asm ----------------------------------------------------------------

def _executing(th) -> np.ndarray:
    """Which threads of the partition execute the op, as (warps, 32) booleans."""
    n = th.agent.num_threads
    act = np.ones(n, dtype=bool) if th.active is None else np.asarray(th.active, dtype=bool)
    return act.reshape(n // 32, 32)


def _warp_tensor_layout(th, op):
    t = op.operands[0].type
    if t.layout is None:
        raise InterpreterError(f"{op.name} on a tensor needs its layout: run the layout pass first", op.loc)
    if th.active is not None:
        raise InterpreterError(f"{op.name} on a tensor inside a branch that only some threads take is not modelled",
                               op.loc, hint="keep warp-level ops on tensors outside thread-divergent branches")
    return t.layout


@handler("tlx.vote_ballot_sync")
def _vote_ballot(it, th, op):
    mask = int(op.attrs["mask"])
    p = th.env[op.arg("pred")]
    rt = op.result.type
    ex = _executing(th)
    W.check_vote_mask(ex, mask, op.loc)
    if isinstance(rt, T.TensorType):
        layout = _warp_tensor_layout(th, op)
        out = W.ballot_tensor(np.asarray(p, dtype=bool), layout, th.agent.num_threads // 32)
        _set(th, op, out.view(np.int32))
        return
    per_thread = np.broadcast_to(np.asarray(p, dtype=bool), (ex.size,)).reshape(ex.shape) & ex
    b = W.ballots(per_thread).view(np.int32)  # one per warp
    if th.active is None and (b == b[0]).all():
        _set(th, op, b[0])  # the same in every lane: a uniform scalar
        return
    _set(th, op, _scalar_or(np.repeat(b, 32), rt))


@handler("tlx.warp_redux")
def _warp_redux(it, th, op):
    kind = op.attrs["kind"]
    x = np.asarray(th.env[op.arg("src")], dtype=np.float32)
    if isinstance(op.result.type, T.TensorType):
        _set(th, op, W.redux_tensor(x, kind, _warp_tensor_layout(th, op), th.agent.num_threads // 32))
        return
    if not _varying(x):
        _set(th, op, np.float32(np.abs(x) if kind.startswith("abs_") else x))
        return
    if not _executing(th).all():
        raise InterpreterError("warp_redux inside a branch that only some threads take: the lanes that do not "
                               "take it never contribute (the hardware's behaviour is undefined)", op.loc)
    _set(th, op, W.redux_per_thread(x, kind))


#: inline PTX the interpreter runs: `nanosleep` (a delay, which changes no value here) and `mov` of
#: an integer immediate or an operand into an output ($0.. are the outputs, the inputs follow)
_ASM_SLEEP = re.compile(r"nanosleep\.u32\s+(\$\d+|\d+)$")
_ASM_MOV = re.compile(r"mov\.[bus](?:16|32|64)\s+\$(\d+)\s*,\s*(\$\d+|-?(?:0x[0-9a-fA-F]+|\d+))$")


@handler("tt.elementwise_inline_asm")
def _inline_asm(it, th, op):
    """Inline PTX made of `nanosleep` and `mov` statements (an unpacked call: pack=1): each output
    is set, from an integer immediate (integer outputs: in a float register it would be a bit
    pattern) or from an operand of its own type; anything else is refused with the statement."""
    outs = len(op.results)
    got: Dict[int, Any] = {}

    def refuse(stmt: str, why: str = "") -> InterpreterError:
        return InterpreterError(f"inline PTX the CPU interpreter cannot run: {stmt!r}{why}", op.loc,
                                hint="the interpreter runs unpacked nanosleep and mov statements only: run the "
                                     "kernel on the GPU, or write the computation with tl operations")

    for stmt in (s.strip() for s in op.attrs["asm"].split(";")):
        if not stmt or _ASM_SLEEP.match(stmt):
            continue
        m = _ASM_MOV.match(stmt)
        if m is None or op.attrs["pack"] != 1 or int(m.group(1)) >= outs:
            raise refuse(stmt)
        dst, src = int(m.group(1)), m.group(2)
        want = op.results[dst].type
        if not src.startswith("$"):
            if not T.element_of(want).is_int:
                raise refuse(stmt, " (an immediate into a float output is a bit pattern)")
            got[dst] = _constant_of(want, int(src, 0))
            continue
        k = int(src[1:])
        if k < outs and k not in got:
            raise refuse(stmt, f" (${k} is read before it is set)")
        source = op.results[k] if k < outs else op.operands[k - outs]
        if T.element_of(source.type) != T.element_of(want):
            raise refuse(stmt, f" (a {T.element_of(source.type)} register moved into a {T.element_of(want)} output)")
        value = got[k] if k < outs else th.env[source]
        got[dst] = np.broadcast_to(value, want.shape).copy() if isinstance(want, T.TensorType) else value
    missing = [i for i in range(outs) if i not in got]
    if missing:
        raise InterpreterError(f"inline PTX leaves output(s) {missing} of {outs} unset", op.loc)
    for i, r in enumerate(op.results):
        th.env[r] = got[i]

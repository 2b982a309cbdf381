"""Property tests of the fence passes and the CTA barriers (hypothesis, 2000 and 1000 examples).

Random programs of shared-memory buffers (single tiles and 2-slot arrays, allocated at random
points so that the allocator reuses bytes), generic reads and writes (local_store, local_load,
cp.async with its commit and wait), async reads and writes (TMA store, wgmma, TMA load), user
fences, loops with a runtime trip count (may run zero times) or a constant one (0 to 3), and
branches. The whole pipeline runs on each (verifier after every pass). Then an independent
checker — it shares no code with the passes — reads the output IR, enumerates the paths of the
unrolled program (runtime loops 0, 1 or 2 times, which exposes every hazard the loop can have;
constant loops exactly their trip count; both sides of every branch) and checks on the real
byte offsets:

1. no path has a generic access followed by an overlapping async access, at least one of them
   a write, without a fence in between;
2. every fence the compiler inserted is, on some path, the only fence between such a pair —
   removing it would create a hazard (no needless fence).

The second property adds cp.async copies waited for in a later statement and user CTA barriers
to the programs, and checks as well that no two accesses of different threads are left without
the barrier that orders them (`PathChecker.barrier_hazards`).

A program with more distinct paths than the checker enumerates (`MAX_PATHS`) is discarded
(hypothesis draws another), not failed. `TLX_PROPERTY_EXAMPLES` / `TLX_PROPERTY_EXAMPLES_BARRIERS`
set the number of examples, `TLX_PROPERTY_RANDOM=1` draws them from a random seed instead of the
fixed derandomized sequence.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from tlx.compiler.ir import parse_module, print_module
from tlx.compiler.options import CompileOptions
from tlx.compiler.pipeline import PIPELINE, compile_module

TILE = "64x64xf16"
ARR = "!smem<2x64x64xf16, buffers=2, mutable>"
ONE = "!smem<64x64xf16, mutable>"
VIEW = "!smem<64x64xf16, alloc=2x64x64, mutable>"
TEN = "tensor<64x64xf16>"
ACC = "tensor<64x64xf32>"

# --------------------------------------------------------------------------------------------
# random programs
# --------------------------------------------------------------------------------------------

ACCESS_KINDS = ["store", "load", "cp_async", "tma_load", "tma_store", "dot", "fence"]
# a cp.async issued (and committed) in one statement and waited for in a later one, and user CTA
# barriers: what lies between a copy and its wait orders nothing (the barrier property below)
SPLIT_KINDS = ["cp_issue", "cp_wait", "barrier", "cp_across", "cp_across"]


@st.composite
def statements(draw, depth: int, nbufs: int, max_len: int, kinds=tuple(ACCESS_KINDS)):
    out = []
    for _ in range(draw(st.integers(0, max_len))):
        choices = list(kinds) + (["for", "if"] if depth < 2 else [])
        k = draw(st.sampled_from(choices))
        if k == "for":
            trips = draw(st.sampled_from(["n", 0, 1, 2, 3]))
            out.append(("for", trips, draw(statements(depth + 1, nbufs, 3, kinds))))
        elif k == "if":
            out.append(("if", draw(statements(depth + 1, nbufs, 3, kinds)), draw(statements(depth + 1, nbufs, 2, kinds))))
        elif k in ("fence", "cp_wait", "barrier"):
            out.append((k,))
        elif k == "cp_across":  # a copy, a barrier or fence (or nothing) before its wait, the wait
            out.append(("seq", [("cp_issue", draw(st.integers(0, nbufs - 1)), draw(st.sampled_from([0, 1, "i"]))),
                                   (draw(st.sampled_from(["barrier", "fence", "cp_wait"])),), ("cp_wait",)]))
        elif k == "dot":
            out.append(("dot", draw(st.integers(0, nbufs - 1)), draw(st.sampled_from([0, 1, "i"])),
                        draw(st.integers(0, nbufs - 1)), draw(st.sampled_from([0, 1, "i"]))))
        else:
            out.append((k, draw(st.integers(0, nbufs - 1)), draw(st.sampled_from([0, 1, "i"]))))
    return out


@st.composite
def programs(draw, statement_kinds=tuple(ACCESS_KINDS)):
    nbufs = draw(st.integers(1, 3))
    kinds = [draw(st.sampled_from(["arr", "one"])) for _ in range(nbufs)]
    body = draw(statements(0, nbufs, 6, statement_kinds))
    # where each buffer is allocated: before the top-level statement with this index
    at = [draw(st.integers(0, len(body))) for _ in range(nbufs)]
    return kinds, body, at


class _Emitter:
    def __init__(self, kinds):
        self.kinds = kinds
        self.lines: List[str] = []
        self.n = 0

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"%{base}{self.n}"

    def view(self, b: int, slot, ind: str, iv: Optional[str]) -> str:
        if self.kinds[b] == "one":
            return f"%buf{b}"
        idx = {0: "%c0", 1: "%c1"}.get(slot) if slot in (0, 1) else (iv or "%dyn")
        v = self.fresh("v")
        self.lines.append(f"{ind}{v} = tlx.memdesc_index %buf{b}, {idx} : {VIEW}")
        return v

    def stmt(self, s, ind: str, iv: Optional[str], live) -> None:
        k = s[0]
        L = self.lines.append
        if k in ("store", "load", "cp_async", "cp_issue", "tma_load", "tma_store"):
            if s[1] not in live:
                return
            v = self.view(s[1], s[2], ind, iv)
            if k == "store":
                L(f"{ind}tlx.local_store {v}, %t")
            elif k == "load":
                L(f"{ind}{self.fresh('r')} = tlx.local_load {v} : {TEN}")
            elif k == "cp_async":
                tok, g, w = self.fresh("tok"), self.fresh("g"), self.fresh("w")
                L(f"{ind}{tok} = tlx.async_load %ptrs, {v} : !token")
                L(f"{ind}{g} = tlx.async_commit_group {tok} : !token")
                L(f"{ind}{w} = tlx.async_wait_group {g} {{pendings = 0}} : !token")
            elif k == "cp_issue":
                tok, g = self.fresh("tok"), self.fresh("g")
                L(f"{ind}{tok} = tlx.async_load %ptrs, {v} : !token")
                L(f"{ind}{g} = tlx.async_commit_group {tok} : !token")
            elif k == "tma_load":
                L(f"{ind}tlx.tma_load %desc, {v}, %bar offsets(%c0, %c0)")
                L(f"{ind}tlx.barrier_wait %bar, %c0")
            else:
                L(f"{ind}tlx.tma_store %desc, {v} offsets(%c0, %c0)")
                L(f"{ind}tlx.tma_store_wait {{pendings = 0}}")
        elif k == "dot":
            if s[1] not in live or s[3] not in live:
                return
            a = self.view(s[1], s[2], ind, iv)
            b = self.view(s[3], s[4], ind, iv)
            d, w = self.fresh("d"), self.fresh("dw")
            L(f"{ind}{d} = tlx.async_dot {a}, {b} : {ACC}")
            L(f"{ind}{w} = tlx.async_dot_wait {d} {{pendings = 0}} : {ACC}")
        elif k == "fence":
            L(f'{ind}tlx.fence_async_shared {{cluster = false, origin = "user"}}')
        elif k == "cp_wait":
            L(f"{ind}{self.fresh('w')} = tlx.async_wait_group {{pendings = 0}} : !token")
        elif k == "barrier":
            L(f"{ind}tlx.cta_barrier")
        elif k == "seq":
            for x in s[1]:
                self.stmt(x, ind, iv, live)
        elif k == "for":
            ub = "%n" if s[1] == "n" else f"%c{s[1]}"
            i = self.fresh("i")
            L(f"{ind}scf.for %c0, {ub}, %c1 {{")
            L(f"{ind}^body({i}: i32):")
            for x in s[2]:
                self.stmt(x, ind + "  ", i, live)
            L(f"{ind}  scf.yield")
            L(f"{ind}}}")
        elif k == "if":
            L(f"{ind}scf.if %p {{")
            L(f"{ind}^then:")
            for x in s[1]:
                self.stmt(x, ind + "  ", iv, live)
            L(f"{ind}  scf.yield")
            L(f"{ind}}} {{")
            L(f"{ind}^else:")
            for x in s[2]:
                self.stmt(x, ind + "  ", iv, live)
            L(f"{ind}  scf.yield")
            L(f"{ind}}}")


def program_text(prog) -> str:
    kinds, body, at = prog
    e = _Emitter(kinds)
    ind = "    "
    e.lines += [f"{ind}%c{k} = arith.constant {{value = {k}}} : i32" for k in range(4)]
    live = set()
    for pos in range(len(body) + 1):
        for b, where in enumerate(at):
            if where == pos:
                e.lines.append(f"{ind}%buf{b} = tlx.local_alloc : {ARR if kinds[b] == 'arr' else ONE}")
                live.add(b)
        if pos < len(body):
            e.stmt(body[pos], ind, None, live)
    args = (f"%t: {TEN}, %ptrs: tensor<64x64x!ptr<f16>>, %desc: !tensordesc<64x64xf16>, %bar: !mbarrier, "
            "%n: i32, %p: i1, %dyn: i32")
    return ('module attributes {num_warps = 4, target = "sm_90a"} {\n'
            f"  tt.func @prop({args}) {{\n" + "\n".join(e.lines) + "\n    tt.return\n  }\n}\n")


# --------------------------------------------------------------------------------------------
# the independent checker: paths of the unrolled output program
# --------------------------------------------------------------------------------------------

Event = Tuple  # ('g'|'a', lo, hi, is_write, op) | ('f', op)
MAX_PATHS = 4000


class TooManyPaths(Exception):
    """The program has more distinct paths than the checker enumerates (MAX_PATHS): the property
    tests discard it (hypothesis draws another) instead of failing."""


class PathChecker:
    """Interprets the compiled IR: byte intervals from the `offset` attributes and constant
    memdesc_index slabs, loop trip counts from constant bounds (runtime bounds: 0, 1, 2)."""

    def __init__(self, module):
        self.consts: Dict[int, int] = {}
        self.iv_dynamic = set()
        self.func = module.func

    def interval(self, v) -> Tuple[int, int]:
        d = v.defining_op
        if d.name == "tlx.local_alloc":
            t = d.result.type
            size = 2
            for x in t.shape:
                size *= x
            return d.attrs["offset"], d.attrs["offset"] + size
        assert d.name == "tlx.memdesc_index", d.name
        lo, hi = self.interval(d.operands[0])
        idx = d.operands[1].defining_op
        if idx is not None and idx.name == "arith.constant":
            k = idx.attrs["value"]
            n = d.operands[0].type.shape[0]
            s = (hi - lo) // n
            return lo + k * s, lo + (k + 1) * s
        return lo, hi

    def events(self, op) -> List[Event]:
        n = op.name
        if n == "tlx.local_store":
            return [("g", *self.interval(op.operands[0]), True, op)]
        if n == "tlx.local_load":
            return [("g", *self.interval(op.operands[0]), False, op)]
        if n == "tlx.async_load":
            return [("cp", *self.interval(op.operands[1]), True, op)]
        if n == "tlx.async_wait_group":
            return [("land",)]
        if n == "tlx.tma_load":
            return [("a", *self.interval(op.operands[1]), True, op)]
        if n == "tlx.tma_store":
            return [("a", *self.interval(op.operands[1]), False, op)]
        if n == "tlx.async_dot":
            return [("a", *self.interval(op.operands[0]), False, op), ("a", *self.interval(op.operands[1]), False, op)]
        if n == "tlx.fence_async_shared":
            return [("f", op)]
        if n == "tlx.cta_barrier":
            return [("b", op)]
        return []

    def paths_of_block(self, ops) -> List[Tuple[Event, ...]]:
        """Every distinct event sequence through `ops` (identical sequences counted once)."""
        paths = {(): None}
        for op in ops:
            if op.name == "scf.for":
                ub = op.operands[1].defining_op
                trips = [ub.attrs["value"]] if ub is not None and ub.name == "arith.constant" else [0, 1, 2]
                body = self.paths_of_block(op.regions[0].block.ops)
                alts = {}
                for t in trips:
                    seqs = {(): None}
                    for _ in range(t):
                        seqs = {s + b: None for s in seqs for b in body}
                        if len(seqs) > MAX_PATHS:
                            raise TooManyPaths()
                    alts.update(seqs)
                paths = {p + a: None for p in paths for a in alts}
            elif op.name == "scf.if":
                alts = dict.fromkeys(self.paths_of_block(op.regions[0].block.ops))
                alts.update(dict.fromkeys(self.paths_of_block(op.regions[1].block.ops)))
                paths = {p + a: None for p in paths for a in alts}
            else:
                ev = tuple(self.events(op))
                if ev:
                    paths = {p + ev: None for p in paths}
            if len(paths) > MAX_PATHS:
                raise TooManyPaths()
        return list(paths)

    def check(self) -> Tuple[List[str], set, set]:
        """(hazards, fences that are sole guards on some path, all fences seen)."""
        hazards: List[str] = []
        needed, seen = set(), set()
        for path in self.paths_of_block(self.func.regions[0].block.ops):
            # land cp.async writes at their wait
            evs: List[Event] = []
            flying: List[Event] = []
            for e in path:
                if e[0] == "cp":
                    flying.append(("g",) + e[1:])
                elif e[0] == "land":
                    evs.extend(flying)
                    flying = []
                else:
                    evs.append(e)
            fences = [k for k, e in enumerate(evs) if e[0] == "f"]
            for k in fences:
                seen.add(id(evs[k][1]))
            for j, a in enumerate(evs):
                if a[0] != "a":
                    continue
                for i in range(j):
                    g = evs[i]
                    if g[0] != "g" or not (g[1] < a[2] and a[1] < g[2]) or not (g[3] or a[3]):
                        continue
                    between = [k for k in fences if i < k < j]
                    if not between:
                        hazards.append(f"{g[4].name} -> {a[4].name} bytes [{max(g[1], a[1])}, {min(g[2], a[2])})")
                    elif len(between) == 1:
                        needed.add(id(evs[between[0]][1]))
        return hazards, needed, seen

    def barrier_hazards(self) -> List[str]:
        """Accesses of different threads left unordered on some path (the CTA-barrier rules, for
        one warpgroup): two overlapping generic accesses, one a write, need a barrier between
        them; a generic access before an overlapping async one (one a write) needs a fence and
        then a barrier between them; a TMA store's source overwritten by a generic write needs a
        barrier between them (its wait orders only the issuing thread). A cp.async write is
        issued at its `async_load` (where a barrier must precede it) and lands at the next wait
        (where the barrier or fence after it must follow); one that never lands orders nothing.
        TMA loads (their mbarrier wait) and wgmma (a one-warpgroup wait) need none after them."""
        out: List[str] = []
        for path in self.paths_of_block(self.func.regions[0].block.ops):
            firsts, seconds, fences, bars, flying = [], [], [], [], []
            for p, e in enumerate(path):
                k = e[0]
                if k == "g":
                    firsts.append((p, "g") + e[1:])
                    seconds.append((p, "g") + e[1:])
                elif k == "cp":
                    seconds.append((p, "g") + e[1:])
                    flying.append(e)
                elif k == "land":
                    firsts.extend((p, "g") + f[1:] for f in flying)
                    flying = []
                elif k == "a":
                    if e[4].name == "tlx.tma_store":
                        firsts.append((p, "a") + e[1:])
                    seconds.append((p, "a") + e[1:])
                elif k == "f":
                    fences.append(p)
                elif k == "b":
                    bars.append(p)
            for i, ki, lo1, hi1, w1, o1 in firsts:
                for j, kj, lo2, hi2, w2, o2 in seconds:
                    if j <= i or not (lo1 < hi2 and lo2 < hi1) or not (w1 or w2):
                        continue
                    if ki == "g" and kj == "g" or ki == "a" and kj == "g":
                        ok = any(i < b < j for b in bars)
                    elif ki == "g" and kj == "a":
                        ok = any(i < f < b < j for f in fences for b in bars)
                    else:
                        continue
                    if not ok:
                        out.append(f"{o1.name} -> {o2.name} bytes [{max(lo1, lo2)}, {min(hi1, hi2)})")
        return sorted(set(out))


def _profile(env: str = "TLX_PROPERTY_EXAMPLES", default: int = 2000):
    n = int(os.environ.get(env, str(default)))
    return settings(max_examples=n, deadline=None, derandomize=os.environ.get("TLX_PROPERTY_RANDOM", "") == "",
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def compile_and_check_fences(prog):
    """Run the pipeline on `prog`, assert that the output has no unfenced hazard and no needless
    compiler fence; return the checker of the output and the output module."""
    text = program_text(prog)
    res = compile_module(parse_module(text), CompileOptions(verify_each_pass=True), passes=PIPELINE, snapshots=False)
    out = res.module
    # the checker reads the output as text, independently of the passes' objects
    checker = PathChecker(parse_module(print_module(out)))
    try:
        hazards, needed, seen = checker.check()
    except TooManyPaths:
        reject()  # too many paths to enumerate: not a counterexample, draw another program
    assert not hazards, "unfenced hazards:\n" + "\n".join(hazards) + "\n" + print_module(out, locs=False)
    compiler_fences = [op for op in checker.func.iter_nested() if op.name == "tlx.fence_async_shared"
                       and op.attrs.get("origin") != "user"]
    needless = [op for op in compiler_fences if id(op) not in needed]
    assert not needless, (f"{len(needless)} needless compiler fence(s) "
                          f"({[op.attrs.get('fence_id') for op in needless]})\n" + print_module(out, locs=False))
    return checker, out


@_profile()
@given(programs())
def test_no_unfenced_hazard_and_no_needless_fence(prog):
    compile_and_check_fences(prog)


def test_the_checker_itself_finds_a_hazard_and_a_needless_fence():
    # the checker is not the code under test: show it can fail
    text = '''module attributes {num_warps = 4, target = "sm_90a"} {
  tt.func @k(%t: tensor<64x64xf16>, %desc: !tensordesc<64x64xf16>) {
    %c0 = arith.constant {value = 0} : i32
    %b = tlx.local_alloc {offset = 0} : !smem<64x64xf16, mutable>
    tlx.local_store %b, %t
    tlx.tma_store %desc, %b offsets(%c0, %c0)
    tlx.fence_async_shared {cluster = false, origin = "fence_insertion"}
    tt.return
  }
}
'''
    hazards, needed, seen = PathChecker(parse_module(text)).check()
    assert hazards == ["tlx.local_store -> tlx.tma_store bytes [0, 8192)"]
    assert len(seen) == 1 and not needed
    fenced = text.replace("    tlx.tma_store %desc", '    tlx.fence_async_shared {cluster = false, origin = "user"}\n'
                                                      "    tlx.tma_store %desc")
    hazards, needed, seen = PathChecker(parse_module(fenced)).check()
    assert hazards == [] and len(needed) == 1 and len(seen) == 2


@_profile("TLX_PROPERTY_EXAMPLES_BARRIERS", 1000)
@given(programs(tuple(ACCESS_KINDS + SPLIT_KINDS)))
def test_no_unordered_access_across_threads_and_no_unfenced_hazard(prog):
    """The same random programs with cp.async copies waited for in a later statement and user
    CTA barriers between: no proxy hazard without a fence, no needless compiler fence, and no
    pair of accesses of different threads left without the barrier (after the fence, for async
    ops) that orders them."""
    checker, out = compile_and_check_fences(prog)
    unordered = checker.barrier_hazards()
    assert not unordered, "accesses without a barrier:\n" + "\n".join(unordered) + "\n" + print_module(
        out, locs=False)


def test_a_program_with_too_many_paths_is_discarded_not_failed():
    # two runtime loops (0, 1 or 2 trips) of three two-way branches: far more than MAX_PATHS paths
    branches = [("if", [("store", 0, 0)], [("load", 0, 0)]), ("if", [("store", 0, 0)], [("tma_store", 0, 0)]),
                ("if", [("tma_load", 0, 0)], [("load", 0, 0)])]
    prog = (["one"], [("for", "n", branches), ("for", "n", branches)], [0])
    out = compile_module(parse_module(program_text(prog)), CompileOptions(), passes=PIPELINE, snapshots=False).module
    with pytest.raises(TooManyPaths):
        PathChecker(parse_module(print_module(out))).check()

    @settings(max_examples=5, database=None, deadline=None)
    @given(st.just(prog))
    def property_on_it(p):
        compile_and_check_fences(p)

    with pytest.raises(Unsatisfiable):  # every example discarded; none failed
        property_on_it()


def test_the_barrier_checker_itself_finds_what_a_barrier_before_the_wait_leaves_unordered():
    # a barrier between a cp.async and its wait orders nothing; one after the wait does
    text = '''module attributes {num_warps = 4, target = "sm_90a"} {
  tt.func @k(%ptrs: tensor<64x64x!ptr<f16>>) {
    %b = tlx.local_alloc {offset = 0} : !smem<64x64xf16, mutable>
    %tk = tlx.async_load %ptrs, %b : !token
    %g = tlx.async_commit_group %tk : !token
    tlx.cta_barrier
    %w = tlx.async_wait_group %g {pendings = 0} : !token
    %r = tlx.local_load %b : tensor<64x64xf16>
    tt.return
  }
}
'''
    assert PathChecker(parse_module(text)).barrier_hazards() == ["tlx.async_load -> tlx.local_load bytes [0, 8192)"]
    after = text.replace("    %r = tlx.local_load", "    tlx.cta_barrier\n    %r = tlx.local_load")
    assert PathChecker(parse_module(after)).barrier_hazards() == []

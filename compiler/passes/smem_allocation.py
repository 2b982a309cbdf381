"""Shared-memory allocation: a byte offset for every shared buffer, mbarrier and scratch area.

Rule. Every `tlx.local_alloc` and `tlx.alloc_barriers` gets an ``offset`` attribute, every op
with a ``scratch_bytes`` attribute gets a ``scratch_offset``, and the module gets
``shared_bytes`` (the dynamic shared memory to request at launch). Two buffers share bytes only
when their lifetimes are disjoint:

* a buffer lives from its allocation to its last use, through every view, loop-carried value,
  `if`/`while` result and warp-specialize capture that may name it (making a view is no use:
  a view whose result nothing uses does not keep its buffer alive);
* a use inside a loop that does not contain the allocation keeps the buffer alive for the whole
  loop (the next iteration uses it again); a buffer made outside a warp-specialize op and touched
  inside it lives for the whole op; a buffer made inside one partition lives by that partition's
  program order, and never shares bytes with a buffer or scratch area of another partition of
  the same op (partitions run concurrently);
* an async access keeps its buffer alive until the op that completes it: a TMA / bulk store
  until the next ``tma_store_wait {pendings = 0}``, a wgmma operand until the next
  ``async_dot_wait {pendings = 0}``, a TMA / bulk load destination until the next
  ``barrier_wait`` on its mbarrier — when that wait is in an enclosing loop (the next iteration
  waits for this one's load) or in another partition of an enclosing warp-specialize op, until
  the end of that op; the end of the kernel when no such op follows;
* a scratch area lives only at its op; mbarriers live to the end of the kernel (their bytes are
  never reused for data, which would need an ``mbarrier.inval`` first).

Alignment: 1024 B for NVMMA tiles with a 128-byte swizzle, 512 B for 64-byte, 256 B for
32-byte, 128 B for unswizzled NVMMA tiles (TMA), 16 B for other buffers, 8 B for mbarriers, a
scratch area's ``scratch_align`` (at least 16 B). Placement: buffers in decreasing size, each at
the lowest aligned offset that no lifetime-overlapping buffer uses; the mbarriers after them, packed.
More than the per-CTA limit of the target (227 KB on sm_90) is a
`TLXCompileError` that lists the buffers live at the peak and their sizes.

A buffer allocated inside a loop and carried into the next iteration cannot have one static
offset for two live instances: that is a `TLXCompileError` too.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..analysis.memory import VIEW_NAMES, RegionAnalysis, alloc_bytes, describe_alloc, may_use_smem
from ..errors import TLXCompileError
from ..fences import loc_text
from ..ir import types as T
from ..ir.core import Block, Module, Operation, Value
from ..ir.layouts import NVMMASharedLayout, SharedLinearLayout, default_shared_layout
from .manager import PassContext

SMEM_LIMITS = {90: 232448, 80: 166912, 86: 101376, 87: 166912, 89: 101376}


def smem_limit(capability: int) -> int:
    """Bytes of shared memory one CTA may use on this compute capability."""
    if capability >= 90:
        return SMEM_LIMITS[90]
    return SMEM_LIMITS.get(capability, 49152)


def alignment_of(op: Operation) -> int:
    """The byte alignment an allocating op's buffer needs (see the module docstring); an
    ``alignment`` attribute (a storage alias spec's: its members' largest) raises it."""
    return max(_layout_alignment(op), int(op.attrs.get("alignment", 0)))


def _layout_alignment(op: Operation) -> int:
    t = op.result.type
    if isinstance(t, T.BarrierType):
        return 8
    assert isinstance(t, T.MemDescType)
    lay = t.layout if t.layout is not None else default_shared_layout(tuple(t.buffer_shape), t.element.bits)
    if isinstance(lay, NVMMASharedLayout):
        return {128: 1024, 64: 512, 32: 256}.get(lay.swizzle, 128)
    if isinstance(lay, SharedLinearLayout):
        return max(16, lay.alignment)
    return 16


@dataclass
class Buffer:
    """One thing to place: an allocation or an op's scratch area."""

    op: Operation
    size: int
    align: int
    start: int
    end: int
    scratch: bool = False
    offset: int = -1
    conflicts: List["Buffer"] = field(default_factory=list)
    # the warp-specialize partition the buffer is made in, (op, region index); None outside one
    partition: Optional[Tuple[Operation, int]] = None

    def describe(self) -> str:
        if self.scratch:
            return f"scratch of {self.op.name} at {loc_text(self.op.loc)}"
        return describe_alloc(self.op)


class _Liveness:
    """Program positions (pre-order numbers) of the ops that matter to lifetimes — those that may
    use shared memory (and scratch owners) and region ops —, the span of every region op and the
    last position of every block. Other ops are only counted: on a large kernel most ops are
    arithmetic, and one dict entry per op would cost more than the whole numbering."""

    def __init__(self, module: Module):
        # (keyed by the ops and blocks themselves: hashed in C)
        self.pos: Dict[Operation, int] = {}
        self.span_end: Dict[Operation, int] = {}
        self.block_end: Dict[Block, int] = {}  # block -> last position inside the block
        self.users: List[Operation] = []  # ops that may use shared memory, in program order
        self._user_kind: Dict[str, bool] = {}
        self._loops: Dict[Block, Tuple[Operation, ...]] = {}  # block -> `loops_around` its ops
        self.count = 0  # ops numbered so far; after __init__, every op numbered
        self._number(module.func)

    def _number(self, root: Operation) -> None:
        self.pos[root] = 0
        self.count = 1
        self._number_block(root.regions[0].block)
        self.span_end[root] = self.count - 1

    def _number_block(self, blk) -> None:
        # pre-order positions; span_end[op] = last position inside a region op; on the way, the
        # ops that may take shared memory as an operand (and the scratch owners)
        pos, users, kinds, span_end = self.pos, self.users, self._user_kind, self.span_end
        count = self.count
        op = blk.first_op
        while op is not None:  # (the linked list read directly: this visits every op of the module)
            n = op.name
            u = kinds.get(n)
            if u is None:
                u = kinds[n] = may_use_smem(n)
            if u or (op.attrs and "scratch_bytes" in op.attrs):
                users.append(op)
            elif not op.regions:
                count += 1
                op = op.next_op
                continue
            pos[op] = count
            count += 1
            if op.regions:
                self.count = count
                for r in op.regions:
                    self._number_block(r.block)
                count = self.count
                span_end[op] = count - 1
            op = op.next_op
        self.block_end[blk] = count - 1
        self.count = count

    def span(self, op: Operation) -> Tuple[int, int]:
        p = self.pos[op]
        return p, self.span_end.get(op, p)

    def loops_around(self, op: Operation) -> Tuple[Operation, ...]:
        """The loops and warp-specialize ops enclosing `op`, innermost first (the same for every
        op of a block, so computed once per block)."""
        blk = op.parent
        out = self._loops.get(blk)
        if out is None:
            out = self._loops[blk] = tuple(a for a in op.ancestors()
                                               if a.name in ("scf.for", "scf.while", "tlx.warp_specialize"))
        return out


class _Completions:
    """The program positions of the ops that complete async accesses, sorted, to find the first
    one after an op (`_next_completion`) with a binary search instead of a scan of the rest of
    the kernel: `tma_store_wait {pendings = 0}` (TMA / bulk stores), `async_dot_wait {pendings =
    0}` (wgmma operands) and `barrier_wait` per mbarrier allocation (TMA / bulk loads). Filled by
    `note` in program order, so the lists come out sorted."""

    NAMES = frozenset({"tlx.tma_store_wait", "tlx.async_dot_wait", "tlx.barrier_wait"})

    def __init__(self) -> None:
        self.store: List[int] = []
        self.dot: List[int] = []
        self.bar: Dict[Operation, List[int]] = {}  # alloc_barriers op -> positions of waits on it

    def note(self, op: Operation, p: int, ra: RegionAnalysis) -> None:
        """Record `op` (named in NAMES) at position `p`, later than every op noted before."""
        n = op.name
        if n == "tlx.tma_store_wait":
            if op.attrs.get("pendings") == 0:
                self.store.append(p)
        elif n == "tlx.async_dot_wait":
            if op.attrs.get("pendings") == 0:
                self.dot.append(p)
        else:
            for root in _bar_roots(ra, op.arg("bar")):
                self.bar.setdefault(root, []).append(p)


def _first_in(lists: List[List[int]], lo: int, hi: int) -> Optional[int]:
    """The smallest position in [lo, hi] of any of the sorted `lists`, or None."""
    best = None
    for lst in lists:
        i = bisect.bisect_left(lst, lo)
        if i < len(lst) and lst[i] <= hi and (best is None or lst[i] < best):
            best = lst[i]
    return best


def _next_completion(op: Operation, live: _Liveness, lists: List[List[int]]) -> int:
    """Position of the first completing op (one of the sorted position `lists`) after `op`: later
    in program order within `op`'s block (nested ops of later ops included), or anywhere in an
    enclosing loop (the next iteration's wait completes this iteration's op, so the buffer lives
    for the whole loop) or warp-specialize op (another partition waits for it), looking outwards
    one enclosing block at a time. The end of the kernel when there is none."""
    cur = op
    while cur.parent is not None and cur.parent.parent_op is not None:
        blk = cur.parent
        p = _first_in(lists, live.span(cur)[1] + 1, live.block_end[blk])  # after cur and its regions
        if p is not None:
            return p
        owner = blk.parent_op
        if owner.name == "tt.func":
            break
        if owner.name in ("scf.for", "scf.while", "tlx.warp_specialize"):
            s, e = live.span(owner)
            if _first_in(lists, s, e) is not None:
                return e
        cur = owner
    return live.count


def _bar_roots(ra: RegionAnalysis, v: Value) -> Tuple[object, ...]:
    """The mbarrier allocations `v` may name, each once, in order."""
    rs = ra.regions_of(v)
    if len(rs) == 1:  # (nearly always: one barrier of one allocation)
        return (rs[0].root,)
    return tuple(dict.fromkeys(r.root for r in rs))


# the async accesses whose buffers live until a later op completes them
_ASYNC_ACCESSES = frozenset({"tlx.tma_store", "tlx.async_store", "tlx.async_dot", "tlx.tma_load", "tlx.async_bulk_load"})


def collect_buffers(module: Module, ra: RegionAnalysis) -> List[Buffer]:
    """Every allocation and scratch area with its lifetime [start, end] in program positions."""
    live = _Liveness(module)
    done = _Completions()
    bufs: Dict[object, Buffer] = {}  # allocating op -> its buffer
    order: List[Buffer] = []
    scratch: List[Buffer] = []
    asyncs: List[Operation] = []  # async accesses: their completions are known after the walk
    windows: Dict[Tuple[Block, Block], Optional[Tuple[int, int]]] = {}

    def loop_window(user: Operation, alloc: Operation) -> Optional[Tuple[int, int]]:
        """The span of the outermost loop / warp-specialize op around `user` that does not contain
        `alloc` (a use there keeps the buffer alive for all of it), None when there is none. The
        same for all users in one block and allocations in one block: computed once per pair."""
        key = (user.parent, alloc.parent)
        if key in windows:
            return windows[key]
        w = None
        of_alloc = live.loops_around(alloc)
        for a in reversed(live.loops_around(user)):  # outermost first: it spans the others
            if a not in of_alloc:
                w = live.span(a)
                break
        windows[key] = w
        return w

    smem_types = (T.MemDescType, T.BarrierType)
    known = ra.answers  # the memo read first: most operands were asked before (a call saved each)
    completing = _Completions.NAMES
    pos = live.pos
    # one walk over the users in program order: an allocation comes before every use of its
    # buffer (its value dominates them), and a completing op is noted at its position
    for op in live.users:
        n = op.name
        if op.attrs:
            sb = op.attrs.get("scratch_bytes")
            if isinstance(sb, int) and sb > 0:
                p = pos[op]
                scratch.append(Buffer(op, sb, max(16, int(op.attrs.get("scratch_align", 16))), p, p, scratch=True))
        if n in VIEW_NAMES:
            continue  # a view accesses nothing: the ops that use what it names extend the lifetime
        if n in ("tlx.local_alloc", "tlx.alloc_barriers"):
            p = pos[op]
            b = Buffer(op, alloc_bytes(op), alignment_of(op), p, p)
            bufs[op] = b
            order.append(b)
        elif n in completing:
            done.note(op, pos[op], ra)
        elif n in _ASYNC_ACCESSES:
            asyncs.append(op)
        here = None  # the user's own span, once it names a buffer
        for v in op._operands:  # (read-only: the list itself, without the copy `operands` makes)
            if not isinstance(v.type, smem_types):
                continue
            rs = known.get(v)
            for r in rs if rs is not None else ra.regions_of(v):
                b = bufs.get(r.root)  # None for a function argument (memory.FUNC_ARG)
                if b is None:
                    continue
                if here is None:
                    here = live.span(op)
                lo, hi = loop_window(op, b.op) or here
                if lo < b.start:
                    b.start = lo
                if hi > b.end:
                    b.end = hi
                if n == "scf.yield":
                    loop = op.parent_op
                    if loop is not None and loop.name in ("scf.for", "scf.while") and loop.is_ancestor_of(b.op):
                        raise TLXCompileError(
                            f"the buffer allocated at {loc_text(b.op.loc)} is carried into the next iteration of "
                            f"the loop at {loc_text(loop.loc)}, so two of its instances would be live at once",
                            b.op.loc, hint="allocate the buffer before the loop (with num buffers for a ring)")
    # async accesses: alive until the op that completes them
    for op in asyncs:
        n = op.name
        if n in ("tlx.tma_store", "tlx.async_store"):
            targets = [op.arg("src")]
            lists = [done.store]
        elif n == "tlx.async_dot":
            targets = [x for x in (op.arg("a"), op.arg("b")) if isinstance(x.type, T.MemDescType)]
            lists = [done.dot]
        else:
            targets = [op.arg("dst")]
            lists = [done.bar[r] for r in _bar_roots(ra, op.arg("bar")) if r in done.bar]
        end = _next_completion(op, live, lists)
        for v in targets:
            for r in ra.regions_of(v):
                b = bufs.get(r.root)
                if b is not None:
                    b.end = max(b.end, end)
    # mbarriers never share bytes: reusing an mbarrier's memory for data would need an
    # mbarrier.inval first (and they are 8 bytes each)
    for b in order:
        if b.op.name == "tlx.alloc_barriers":
            b.end = live.count
    # a buffer made inside a warp-specialize partition keeps its lifetime in the partition's own
    # program order; its partition is noted, and `_interference` keeps it apart from every buffer
    # of the other partitions, which run concurrently
    for b in order + scratch:
        b.partition = _partition_of(b.op)
    return order + scratch


def _partition_of(op: Operation) -> Optional[Tuple[Operation, int]]:
    """(warp-specialize op, region index) of the partition `op` is in; None outside one."""
    child, a = op, op.parent_op
    while a is not None and a.name != "tt.func":
        if a.name == "tlx.warp_specialize":
            for i, r in enumerate(a.regions):
                if r.block is child.parent:
                    return a, i
        child, a = a, a.parent_op
    return None


def _interference(bufs: List[Buffer]) -> None:
    """Fill each buffer's `conflicts` with the buffers whose lifetimes overlap its own, and, for a
    buffer made in a warp-specialize partition, with every buffer made in another partition of
    the same op (partitions run concurrently: program order says nothing between them)."""
    srt = sorted(bufs, key=lambda b: (b.start, b.end))
    active: List[Tuple[int, int, Buffer]] = []  # (end, seq, buffer), kept sorted by end
    paired = set()
    for seq, b in enumerate(srt):
        k = bisect.bisect_left(active, (b.start, -1))
        del active[:k]  # ended before b starts
        for _, _, o in active:
            o.conflicts.append(b)
            b.conflicts.append(o)
            paired.add((id(o), id(b)))
        bisect.insort(active, (b.end, seq, b))
    in_partitions = [b for b in bufs if b.partition is not None]
    for i, b in enumerate(in_partitions):
        for o in in_partitions[i + 1:]:
            if (o.partition[0] is b.partition[0] and o.partition[1] != b.partition[1]  # type: ignore[index]
                    and (id(o), id(b)) not in paired and (id(b), id(o)) not in paired):
                o.conflicts.append(b)
                b.conflicts.append(o)


def _place(bufs: List[Buffer]) -> int:
    """First fit in decreasing size; returns the total bytes used."""
    total = 0
    for b in sorted(bufs, key=lambda b: (-b.size, b.start)):
        taken = sorted((o.offset, o.offset + o.size) for o in b.conflicts if o.offset >= 0)
        off = 0
        for lo, hi in taken:
            if off + b.size <= lo:
                break
            if hi > off:
                off = -(-hi // b.align) * b.align
        b.offset = off
        total = max(total, off + b.size)
    return total


def _peak_report(bufs: List[Buffer]) -> Tuple[int, List[Buffer]]:
    """The program position where the most bytes are live, and the buffers live there."""
    events = []
    for b in bufs:
        events.append((b.start, 0, b.size))
        events.append((b.end, 1, -b.size))
    cur = best = 0
    best_pos = 0
    for p, kind, d in sorted(events):
        cur += d
        if cur > best:
            best, best_pos = cur, p
    return best, [b for b in bufs if b.start <= best_pos <= b.end]


def run(module: Module, ctx: PassContext) -> None:
    """Assign offsets (see the module docstring)."""
    ra = ctx.analyses.get(RegionAnalysis, module)  # FenceInsertion's, when it ran
    bufs = collect_buffers(module, ra)
    # mbarriers live to the end and share bytes with nothing: they go after the data buffers, one
    # after the other, without entering the interference computation
    data = [b for b in bufs if b.scratch or b.op.name != "tlx.alloc_barriers"]
    bars = [b for b in bufs if not b.scratch and b.op.name == "tlx.alloc_barriers"]
    _interference(data)
    total = _place(data)
    for b in bars:
        b.offset = -(-total // b.align) * b.align
        total = b.offset + b.size
    limit = smem_limit(ctx.capability)
    if total > limit:
        _, peak = _peak_report(bufs)
        peak.sort(key=lambda b: -b.size)
        lines = "\n".join(f"    {b.describe()}: {b.size} bytes" for b in peak)
        biggest = peak[0] if peak else max(bufs, key=lambda b: b.size)
        raise TLXCompileError(
            f"the kernel needs {total} bytes of shared memory, more than the {limit} bytes "
            f"({limit // 1024} KB) one CTA can use on {ctx.options.target}; live at the peak:\n{lines}",
            biggest.op.loc,
            hint="use fewer buffers (pipeline stages) or smaller tiles, or end a buffer's use before the next one starts")
    for b in bufs:
        if b.scratch:
            b.op.attrs["scratch_offset"] = b.offset
        else:
            b.op.attrs["offset"] = b.offset
    module.attrs["shared_bytes"] = total
    ctx.resources["shared_bytes"] = total
    ctx.stats["smem_allocation.buffers"] = len(bufs)

"""FenceInsertion (pass A): proxy fences for generic writes that feed async readers, placed well.

Runs on structured IR before shared-memory allocation (sm_90+, fence passes on).

Rule.

* **Async readers**: the shared-memory operands A and B of `tlx.async_dot` (wgmma; a register A
  is not a shared-memory read), the source of `tlx.tma_store` and of `tlx.async_store`.
* **Generic writers of a reader's buffer**: every `local_alloc` with a source, `local_store` and
  cp.async (`async_load`, generic proxy) whose target may name overlapping bytes of the same
  allocation — traced through views (index, subslice, trans, reinterpret), loop-carried values
  and yields, `scf.for` / `scf.if` / `scf.while` results and warp-specialize captures — and that
  can execute before the reader on some path (earlier in program order, around an enclosing
  loop's back edge, or in another partition of a warp-specialize op that contains the reader).
  A memdesc function argument counts as written (we cannot see its writers). No writer: no fence.
* **Producer-side fences across partitions.** A writer in another partition of the reader's
  warp-specialize op is fenced *in its own partition*: right before the first mbarrier arrive /
  expect-bytes / named-barrier op that follows it there (after its last write, before it
  publishes the buffer). Without such a hand-off op the writer is treated like a local one.
* **Consumer-side placement** (all other writers): the fence goes right before the reader, then
  is hoisted out of every enclosing loop that contains no such writer (a cp.async writer's
  `async_wait_group` counts as a writer: the fence must follow the wait that lands the data); it
  never leaves a warp-specialize partition. Then, when every such writer lies in one branch of
  an `scf.if` that precedes the fence, the fence moves to the end of that branch (the branch
  that writes pays for it, the other path does not).
* **Dedupe**: a new fence is dropped when a fence of at least its scope already precedes it
  with only pure ops in between; user fences are never deleted.

Every fence gets a record (`compiler.fences`) naming its writers, its reader and its placement.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..analysis.memory import (FUNC_ARG, GENERIC, GENERIC_WRITERS, HANDOFF_RELEASE, WRITE, Region, RegionAnalysis,
                               accesses_of)
from ..fences import FenceRecord, loc_text, make_fence, op_text, preceding_fence
from ..ir import types as T
from ..ir.core import Block, Module, Operation, Value
from .manager import PassContext

LOOPS = ("scf.for", "scf.while")
READERS = frozenset({"tlx.async_dot", "tlx.tma_store", "tlx.async_store"})


def reader_operands(op: Operation) -> List[Value]:
    """The shared-memory operands an async reader reads (empty for other ops)."""
    if op.name == "tlx.async_dot":
        return [v for v in (op.arg("a"), op.arg("b")) if isinstance(v.type, T.MemDescType)]
    if op.name in ("tlx.tma_store", "tlx.async_store"):
        return [op.arg("src")]
    return []


def _chain(op: Operation) -> List[Tuple[Block, Operation]]:
    """(block, the op in that block containing `op`) from `op`'s own block outwards."""
    out = []
    cur = op
    while cur.parent is not None:
        out.append((cur.parent, cur))
        owner = cur.parent.parent_op
        if owner is None:
            break
        cur = owner
    return out


def reach_kind(w: Operation, r: Operation) -> Optional[str]:
    """How writer `w` can execute before reader `r`: 'seq' (program order or a loop back edge),
    'cross' (another partition of a warp-specialize op containing `r`), None (never)."""
    if w.is_ancestor_of(r):  # the function itself: stands for writes we cannot see
        return "seq"
    cw, cr = _chain(w), _chain(r)
    blocks_r = {b: o for b, o in cr}
    for b, ow in cw:
        orr = blocks_r.get(b)
        if orr is None:
            continue
        in_loop = any(a.name in LOOPS for a in _ancestors_of_block(b))
        if ow is orr:  # different regions of one op
            if ow.name == "tlx.warp_specialize":
                return "cross"
            if ow.name in LOOPS:
                return "seq"
            return "seq" if in_loop else None  # exclusive branches of an if
        if ow.is_before_in_block(orr):
            return "seq"
        return "seq" if in_loop else None
    return None


def _ancestors_of_block(b: Block):
    owner = b.parent_op
    while owner is not None:
        yield owner
        owner = owner.parent_op


# what `_Info` keeps of an op, by name (one dict lookup per op of the module)
_READER, _WAIT, _WRITER = 1, 2, 3
_CATEGORY = {**{n: _WRITER for n in GENERIC_WRITERS}, **{n: _READER for n in READERS}, "tlx.async_wait_group": _WAIT}


class _Info:
    """Per-module facts: generic writers by allocation, cp.async waits, async readers."""

    def __init__(self, module: Module, ra: RegionAnalysis):
        self.ra = ra
        self.func = module.func
        # (dicts keyed by the objects themselves: hashed in C)
        self.writers: Dict[object, List[Tuple[Operation, Region]]] = {}  # root allocation -> its writers
        self.loop_wait: Dict[Operation, Operation] = {}  # loop -> an async_wait_group inside it
        self.readers: List[Operation] = []
        category = _CATEGORY
        for op in module.ops():  # pre-order: readers come out in program order
            c = category.get(op.name)
            if c is None and op.attrs and "scratch_bytes" in op.attrs:
                c = _WRITER
            if c is not None:
                self._note(op, c)

    def _note(self, op: Operation, c: int) -> None:
        if c == _READER:
            self.readers.append(op)
        elif c == _WAIT:
            for a in op.ancestors():
                if a.name in LOOPS:
                    self.loop_wait.setdefault(a, op)
        else:
            for a in accesses_of(op):
                if a.proxy == GENERIC and a.kind == WRITE and a.value is not None:
                    for rg in self.ra.regions_of(a.value):
                        self.writers.setdefault(rg.root, []).append((op, rg))

    def writers_of(self, v: Value) -> List[Operation]:
        """Generic writers that may write bytes `v` names (the function op for a function argument)."""
        out: List[Operation] = []
        for rg in self.ra.regions_of(v):
            if rg.root is FUNC_ARG:
                out.append(self.func)
            for w, wr in self.writers.get(rg.root, ()):
                if rg.root is FUNC_ARG or wr.overlaps_rel(rg):
                    out.append(w)
        return list(dict.fromkeys(out))


def _loop_or_partition_parent(op: Operation) -> Tuple[Optional[Operation], bool]:
    """The innermost enclosing loop of `op`, unless a warp-specialize region comes first
    (then (None, True))."""
    p = op.parent_op
    while p is not None and p.name != "tt.func":
        if p.name == "tlx.warp_specialize":
            return None, True
        if p.name in LOOPS:
            return p, False
        p = p.parent_op
    return None, False


def _contains(container: Operation, op: Operation) -> bool:
    return container is op or container.is_ancestor_of(op)


def _handoff_after(w: Operation) -> Optional[Operation]:
    """The op before which a producer-side fence for writer `w` goes: the first op after `w` in
    its partition that is (or contains) an mbarrier arrive / expect-bytes / named barrier, found
    without crossing a loop back edge; None when there is none."""
    cur = w
    while True:
        blk = cur.parent
        if blk is None:
            return None
        o = cur.next_op
        while o is not None:
            if o.name in HANDOFF_RELEASE or any(n.name in HANDOFF_RELEASE for n in o.iter_nested()):
                return o
            o = o.next_op
        owner = blk.parent_op
        if owner is None or owner.name in LOOPS or owner.name in ("tlx.warp_specialize", "tt.func"):
            return None
        cur = owner


def _ancestor_in(blk: Block, op: Operation) -> Optional[Operation]:
    """The op of `blk` that is `op` or contains it, or None."""
    cur = op
    while cur is not None and cur.parent is not blk:
        cur = cur.parent_op
    return cur


def _sink_into_branch(anchor: Operation, writers: List[Operation], notes: List[str]) -> Operation:
    """Move the insertion point into the branch of a preceding `scf.if` that holds every writer."""
    while True:
        blk = anchor.parent
        prev = None  # the last op before the anchor that holds a writer
        for w in writers:
            a = _ancestor_in(blk, w)
            if a is not None and a.is_before_in_block(anchor) and (prev is None or prev.is_before_in_block(a)):
                prev = a
        if prev is None or prev.name != "scf.if":
            return anchor
        branch = None
        for k, r in enumerate(prev.regions):
            if all(_ancestor_in(r.block, w) is not None for w in writers):
                branch = (k, r)
        if branch is None:
            return anchor
        k, r = branch
        notes.append(f"placed at the end of the {'then' if k == 0 else 'else'} branch of the if at "
                     f"{loc_text(prev.loc)}: only that branch writes, so the other path pays no fence")
        anchor = r.block.terminator  # type: ignore[assignment]


def _insert(anchor: Operation, ctx: PassContext, reader: Operation, writers: List[Operation],
            buffer: str, notes: List[str], reason: str) -> FenceRecord:
    prev = preceding_fence(anchor)
    if prev is not None:
        rec = ctx.fences.of(prev)
        for w in writers:
            rec.add_writer(w, _writer_text(w))
        rec.add_reader(reader)
        rec.notes.append(f"also fences {op_text(reader)} (FenceInsertion found this fence already in place)")
        return rec
    fence, rec = make_fence("fence_insertion", ctx.fences, anchor.loc if anchor.name != "scf.yield" else anchor.parent_op.loc)
    anchor.parent.insert_before(anchor, fence)
    for w in writers:
        rec.add_writer(w, _writer_text(w))
    rec.add_reader(reader)
    rec.buffer = buffer
    rec.hazard = "RAW"
    rec.reason = reason
    rec.placement = notes
    return rec


def _writer_text(w: Operation) -> str:
    if w.name == "tt.func":
        return "a memdesc function argument (its writers are not visible)"
    return op_text(w)


def fence_reader(r: Operation, info: _Info, ctx: PassContext) -> None:
    """Place the fence(s) async reader `r` needs (see the module docstring)."""
    vals = reader_operands(r)
    if not vals:
        return
    writers: List[Operation] = []
    for v in vals:
        writers.extend(info.writers_of(v))
    writers = list(dict.fromkeys(writers))
    kinds = {w: reach_kind(w, r) for w in writers}
    writers = [w for w in writers if kinds[w] is not None]
    if not writers:
        return
    buffer = ", ".join(sorted({info.ra.describe(rg.root) for v in vals for rg in info.ra.regions_of(v)}))
    local: List[Operation] = []
    for w in writers:
        if kinds[w] != "cross":
            local.append(w)
            continue
        anchor = _handoff_after(w)
        if anchor is None:
            local.append(w)
            continue
        notes = [f"placed in the producer partition, after its write at {loc_text(w.loc)} and before it publishes the "
                 f"buffer at {loc_text(anchor.loc)} ({anchor.name}); {op_text(r)} reads it after the hand-off"]
        _insert(anchor, ctx, r, [w], buffer, notes,
                f"{_writer_text(w)} writes the buffer through the generic proxy and another partition reads it "
                f"through the async proxy ({r.name})")
    if not local:
        return
    # cp.async data lands at a wait: the fence may not move above one
    cp_async = any(w.name == "tlx.async_load" for w in local)
    anchor = r
    notes = [f"right before {op_text(r)}"]
    while True:
        loop, at_partition = _loop_or_partition_parent(anchor)
        if loop is None:
            if at_partition:
                notes.append("kept inside its warp-specialize partition (fences never leave a partition)")
            break
        inside = [w for w in local if _contains(loop, w) and w is not loop]
        if not inside and cp_async and loop in info.loop_wait:
            inside = [info.loop_wait[loop]]
        if inside:
            w = inside[0]
            what = "lands cp.async data" if w.name == "tlx.async_wait_group" else "writes the buffer"
            notes.append(f"kept in the loop at {loc_text(loop.loc)} because {_writer_text(w)} {what} every iteration")
            break
        notes.append(f"hoisted out of the loop at {loc_text(loop.loc)} because that loop writes no operand")
        anchor = loop
    if not cp_async:  # a cp.async's wait may follow the branch: its fence must too
        anchor = _sink_into_branch(anchor, local, notes)
    _insert(anchor, ctx, r, local, buffer, notes,
            f"{', '.join(_writer_text(w) for w in local)} write(s) the buffer through the generic proxy and "
            f"{r.name} reads it through the async proxy")


def run(module: Module, ctx: PassContext) -> None:
    """Insert fences for every async reader of the module (see the module docstring)."""
    info = _Info(module, ctx.analyses.get(RegionAnalysis, module))
    before = len(ctx.fences.records)
    for r in info.readers:
        fence_reader(r, info, ctx)
    ctx.stats["fence_insertion.fences"] = len(ctx.fences.records) - before

"""Fence records: every proxy fence in a compiled kernel explains itself.

Each `tlx.fence_async_shared` op carries an ``origin`` attribute (``user``, ``tma_lowering``,
``fence_insertion`` or ``proxy_fence_insertion``) and a ``fence_id`` attribute that names its
`FenceRecord` in the compilation's `FenceLog`. The passes fill the record as they go:

* the pass that creates a fence states what it fences (the generic writer(s) it found, the
  async reader, the buffer) and where it placed it and why (hoisted out of which loop, kept in
  which loop because of which write, moved to the producer partition, ...);
* after shared-memory allocation, ProxyFenceInsertion re-derives, over the real byte intervals,
  the hazards each fence actually separates (`guards`: generic access -> async access pairs, on
  some path, that have no other fence between them) — that is the ground truth a kernel author
  can rely on, and it is how a user fence that guards nothing is found (`redundant`);
* a fence that a pass removes (a compiler fence made needless by another fence, or every proxy
  fence on a target below sm_90) keeps its record with ``removed`` set and the reason why.

`explain_fences(records)` renders the records as a readable report.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from .ir.core import Location, Operation, UNKNOWN_LOC
from .ir.ops import is_pure

ORIGINS = ("user", "tma_lowering", "fence_insertion", "proxy_fence_insertion")


def loc_text(loc: Optional[Location]) -> str:
    """`kernel.py:41` for a known location, `?` otherwise."""
    if loc is None or loc is UNKNOWN_LOC or loc.line <= 0:
        return "?"
    return _loc_text(loc)


@functools.lru_cache(maxsize=4096)
def _loc_text(loc: Location) -> str:
    return f"{os.path.basename(loc.file)}:{loc.line}"


def op_text(op: Operation) -> str:
    """`tlx.local_store at kernel.py:44` (how records name an op)."""
    return f"{op.name} at {loc_text(op.loc)}"


@dataclass
class Guard:
    """One hazard a fence separates: a generic access before it and an async access after it,
    on some path with no other fence between them, touching overlapping bytes."""

    kind: str  # 'RAW' (generic write -> async read) | 'WAR' (generic read -> async write) | 'WAW'
    generic: str  # op text of the generic access
    generic_loc: Location
    async_: str  # op text of the async access
    async_loc: Location
    buffer: str  # the buffer's description (its allocation)
    byte_range: Tuple[int, int]  # absolute shared-memory bytes [lo, hi) both touch

    def __str__(self) -> str:
        lo, hi = self.byte_range
        return f"{self.kind}: {self.generic} -> {self.async_} on {self.buffer}, bytes [{lo}, {hi})"


@dataclass
class FenceRecord:
    """What one proxy fence is for, who placed it and why it sits where it sits."""

    id: int
    origin: str  # one of ORIGINS
    scope: str = "cta"  # 'cta' | 'cluster'
    loc: Location = UNKNOWN_LOC  # where the fence sits (the kernel line it is attributed to)
    writer_locs: List[Location] = field(default_factory=list)  # generic accesses it separates
    writers: List[str] = field(default_factory=list)  # their op texts
    reader_loc: Optional[Location] = None  # the async access it separates (first one)
    reader: str = ""
    readers: List[str] = field(default_factory=list)  # every async access (dedupe can add more)
    buffer: str = ""  # the shared-memory buffer (its allocation)
    byte_range: Optional[Tuple[int, int]] = None  # absolute bytes, known after allocation
    hazard: str = ""  # 'RAW' | 'WAR' | 'WAW' (of the hazard that created it)
    reason: str = ""  # why a fence is needed at all
    placement: List[str] = field(default_factory=list)  # why here: hoisting / kept / moved notes
    guards: List[Guard] = field(default_factory=list)  # filled after allocation
    redundant: bool = False  # a user fence that guards nothing
    removed: bool = False
    removed_reason: str = ""
    notes: List[str] = field(default_factory=list)
    _seen: set = field(default_factory=set, repr=False, compare=False)  # ids of recorded ops

    @property
    def placement_text(self) -> str:
        return "; ".join(self.placement)

    def add_writer(self, op: Operation, text: Optional[str] = None) -> None:
        t = text or op_text(op)
        if ("w", id(op)) not in self._seen:
            self._seen.add(("w", id(op)))
            self.writers.append(t)
            self.writer_locs.append(op.loc)

    def add_reader(self, op: Operation) -> None:
        t = op_text(op)
        if not self.reader:
            self.reader, self.reader_loc = t, op.loc
        if ("r", id(op)) not in self._seen:
            self._seen.add(("r", id(op)))
            self.readers.append(t)


class FenceLog:
    """The records of one compilation, by id; fence ops point at them with ``fence_id``."""

    def __init__(self) -> None:
        self.records: Dict[int, FenceRecord] = {}
        self._next = 1

    def new(self, origin: str, **kw) -> FenceRecord:
        assert origin in ORIGINS, origin
        rec = FenceRecord(id=self._next, origin=origin, **kw)
        self.records[rec.id] = rec
        self._next += 1
        return rec

    def of(self, fence: Operation) -> FenceRecord:
        """The record of a fence op (a fence the log has not seen yet gets a `user` record)."""
        fid = fence.attrs.get("fence_id")
        if isinstance(fid, int) and fid in self.records:
            return self.records[fid]
        rec = self.new(fence.attrs.get("origin", "user"), loc=fence.loc,
                       scope="cluster" if fence.attrs.get("cluster") else "cta")
        fence.attrs["fence_id"] = rec.id
        return rec


def make_fence(origin: str, log: FenceLog, loc: Location, cluster: bool = False) -> Tuple[Operation, FenceRecord]:
    """A new `tlx.fence_async_shared` op (not inserted anywhere) and its record."""
    rec = log.new(origin, loc=loc, scope="cluster" if cluster else "cta")
    op = Operation("tlx.fence_async_shared", [], [], {"cluster": cluster, "origin": origin, "fence_id": rec.id},
                   loc=loc)
    return op, rec


def preceding_fence(anchor: Operation, cluster: bool = False) -> Optional[Operation]:
    """The fence right before `anchor` with only pure ops in between, of at least the requested
    scope (`cluster`); None when an effectful op, a region op or the block start comes first."""
    o = anchor.prev_op
    while o is not None:
        if o.name == "tlx.fence_async_shared":
            return o if o.attrs.get("cluster") or not cluster else None
        if o.regions or not is_pure(o):
            return None
        o = o.prev_op
    return None


def explain_fences(records: Iterable[FenceRecord], include_removed: bool = True) -> str:
    """A readable report: one paragraph per fence, in id order."""
    recs = sorted(records, key=lambda r: r.id)
    lines: List[str] = []
    live = [r for r in recs if not r.removed]
    lines.append(f"{len(live)} proxy fence(s)" + (f", {len(recs) - len(live)} removed" if len(recs) != len(live) else ""))
    for r in recs:
        if r.removed and not include_removed:
            continue
        head = f"fence #{r.id} [{r.origin}, {r.scope}] at {loc_text(r.loc)}"
        if r.removed:
            head += f" -- REMOVED: {r.removed_reason}"
        elif r.redundant:
            head += " -- REDUNDANT (kept: written by the user, but it separates no generic access from an async one)"
        lines.append(head)
        if r.reason:
            lines.append(f"  why: {r.reason}")
        if r.writers:
            lines.append(f"  generic access: {', '.join(r.writers)}")
        if r.readers:
            lines.append(f"  async access:   {', '.join(r.readers)}")
        if r.buffer:
            br = f", bytes [{r.byte_range[0]}, {r.byte_range[1]})" if r.byte_range else ""
            lines.append(f"  buffer: {r.buffer}{br}")
        if r.placement:
            lines.append(f"  placement: {r.placement_text}")
        if r.guards:
            lines.append("  separates:")
            for g in r.guards:
                lines.append(f"    {g}")
        for n in r.notes:
            lines.append(f"  note: {n}")
    return "\n".join(lines) + "\n"

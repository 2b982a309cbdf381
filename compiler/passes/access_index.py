"""The allocated IR's shared-memory ops, classified once for the passes that run after allocation.

ProxyFenceInsertion and the CTA-barrier pass both walk the allocated IR block by block over the
same few ops — those that touch shared memory, and those that order such accesses (fences,
barriers, cp.async commits and waits, mbarrier and named-barrier hand-offs) — and both need every
access in absolute bytes. On a large kernel those ops are a third of all ops, and finding them
and resolving their bytes is most of each pass's set-up. `AccessIndex` does it once: one walk
over the module keeps, per block, its ops of interest (in block order, region ops included) with
their accesses in absolute bytes; the passes build their own skeletons from it.

The index describes the IR as allocation left it plus the fences and barriers the passes insert
or remove afterwards, which name no memory: a pass applies its edits through the index
(`AccessIndex.apply`, `apply_edits`), which updates the entries of the edited blocks.
Shared-memory allocation, which decides the bytes, drops the index (`forget_access_index`); the
next pass that asks builds a new one.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..ir.core import Block, Module, Operation
from ..ir.layouts import default_shared_layout
from .edits import Edits
from .memory import (EFFECT_NAMES, FENCE, FUNC_ARG, HANDOFF_ACQUIRE, HANDOFF_RELEASE, WRITE, RegionAnalysis,
                     accesses_of, shared_regions, const_int, arg)

# ops that order shared-memory accesses without touching shared memory themselves
ORDERING_OPS = frozenset({FENCE, "tlx.cta_barrier", "tlx.async_commit_group", "tlx.async_wait_group",
                          "tlx.tma_store_wait", "tlx.async_dot_wait"}) | HANDOFF_RELEASE | HANDOFF_ACQUIRE
INDEXED = EFFECT_NAMES | ORDERING_OPS

# one byte range an access may touch: (lo, hi, box key or None, root: the allocation or scratch owner)
Bytes = Tuple[int, int, Optional[tuple], object]
# one access: (write, proxy, the byte ranges it may touch)
AbsAccess = Tuple[bool, str, Tuple[Bytes, ...]]
# one indexed op with its accesses (empty for ordering ops and region ops)
Entry = Tuple[Operation, Tuple[AbsAccess, ...]]

_KEY = "access_index"


def trip_count(op: Operation) -> Optional[int]:
    """The constant trip count of an `scf.for`, or None when a bound is not a constant."""
    lb, ub, st = (const_int(arg(op, n)) for n in ("lb", "ub", "step"))
    if lb is None or ub is None or st is None or st <= 0:
        return None
    return max(0, -(-(ub - lb) // st))


def is_indexed(op: Operation) -> bool:
    """Whether the index keeps `op` (it touches shared memory, orders such accesses, or has regions)."""
    return op.name in INDEXED or bool(op.regions) or bool(op.attrs and "scratch_bytes" in op.attrs)


class AccessIndex:
    """Per block, its indexed ops with their accesses in absolute bytes; per `scf.for`,
    its constant trip count (the walks ask for it at every visit of a loop)."""

    def __init__(self, module: Module, ra: RegionAnalysis,
                 block_ops: Optional[Dict[Block, List[Operation]]] = None):
        self.ra = ra
        self.blocks: Dict[Block, List[Entry]] = {}  # (keyed by the objects: hashed in C)
        self.trips: Dict[Operation, Optional[int]] = {}
        # per block, a subset of its ops in order that holds every op the index keeps (from
        # allocation: `keep_block_ops_for_index`), read instead of the whole block
        self._block_ops = block_ops or {}
        self._bytes_of: Dict[object, Tuple[Bytes, ...]] = {}  # value -> `_bytes` (views are shared by their users)
        self._index_block(module.func.regions[0].block)

    def entries(self, blk: Block) -> List[Entry]:
        return self.blocks[blk]

    def apply(self, edits: Edits) -> List[Block]:
        """Apply `edits` (fences and barriers inserted, ops removed: nothing whose accesses the
        index records changes) to the IR and to the index; returns the blocks rebuilt. The entries
        of an edited block are rebuilt from its old entries and the planned ops, without reading
        the block (a long block would cost a walk per edit): inserted ops go before their
        anchor's entry. An anchor the index does not keep (nothing in the index says where it
        is) makes that block re-read after the edit."""
        plans = []
        before, removed = edits.before, edits.removed
        for blk, edited in edits.blocks.items():
            old = self.blocks.get(blk)
            if old is None:
                continue
            anchors = {o for o in edited if o in before}
            found = 0
            new: List[Entry] = []
            for e in old:
                k = e[0]
                if k in anchors:
                    found += 1
                    new.extend(self._entry(o) for o in before[k] if is_indexed(o))
                if k not in removed:
                    new.append(e)
            # an anchor outside the index (nothing in it says where that is): re-read the block
            plans.append((blk, new if found == len(anchors) else None))
        blocks = edits.apply()
        for blk, new in plans:
            if new is None:
                self._reread(blk)
            else:
                self.blocks[blk] = new
        return blocks

    def _reread(self, blk: Block) -> None:
        """Re-read one block after ops were inserted into or removed from it; ops already indexed
        keep their entries (what they access has not changed), matched in one pass alongside the
        block (ops keep their order)."""
        old = self.blocks.get(blk, [])
        j, n = 0, len(old)
        out: List[Entry] = []
        for op in blk.ops:
            while j < n and old[j][0].parent is not blk:
                j += 1  # removed from the block
            if j < n and old[j][0] is op:
                out.append(old[j])
                j += 1
            elif is_indexed(op):  # inserted
                out.append(self._entry(op))
        self.blocks[blk] = out

    # -- building ---------------------------------------------------------------------------------
    def _index_block(self, blk: Block) -> None:
        out: List[Entry] = []
        self.blocks[blk] = out
        indexed = INDEXED
        ops = self._block_ops.get(blk)
        for op in blk.ops if ops is None else ops:
            # `is_indexed`, written out: this loop visits every op of the module
            if op.name not in indexed and not op.regions and not (op.attrs and "scratch_bytes" in op.attrs):
                continue  # most ops: nothing to do with shared memory
            out.append(self._entry(op))

    def _entry(self, op: Operation) -> Entry:
        if op.regions:
            if op.name == "scf.for":
                self.trips[op] = trip_count(op)
            for r in op.regions:
                self._index_block(r.block)
            return (op, ())
        if op.name in EFFECT_NAMES or (op.attrs and op.attrs.get("scratch_bytes")):
            memo, bytes_of = self._bytes_of, self._bytes
            out = []
            for a in accesses_of(op):
                v = a.value
                b = memo.get(v) if v is not None else None
                if b is None:
                    b = bytes_of(v, op)
                    if v is not None:
                        memo[v] = b
                out.append((a.kind == WRITE, a.proxy, b))
            return (op, tuple(out))
        return (op, ())

    def _bytes(self, v, op: Operation) -> Tuple[Bytes, ...]:
        """(lo, hi, box key, root) for every allocated byte range `v` may name (`op`'s scratch area
        when `v` is None); a function argument and an unallocated buffer name none we can compare."""
        if v is None:
            off = op.attrs.get("scratch_offset")
            if not isinstance(off, int):
                return ()
            return ((off, off + op.attrs.get("scratch_bytes", 0), None, op),)
        out = []
        for rg in self.ra.regions_of(v):
            if rg.root is FUNC_ARG:
                continue
            off = rg.root.attrs.get("offset")
            if not isinstance(off, int):
                continue  # not allocated (allocation disabled): nothing to compare
            box = None
            if rg.box is not None:  # boxes compare within one slab layout
                t = rg.root.result.type
                lay = t.layout if t.layout is not None else default_shared_layout(tuple(t.buffer_shape), t.element.bits)
                box = ((rg.box[0], str(lay)), rg.box[1], rg.box[2])
            out.append((off + rg.lo, off + rg.hi, box, rg.root))
        return tuple(out)


_BLOCK_OPS = "access_index.block_ops"


def keep_block_ops_for_index(ctx, block_ops: Dict[Block, List[Operation]]) -> None:
    """Keep, for the index built next, per block a subset of its ops in order that holds every
    op it keeps (shared-memory allocation's numbering has them: the ops that may use shared
    memory, region ops and scratch owners); valid while no edit is applied (`Edits.generation`)."""
    ctx.cache[_BLOCK_OPS] = (Edits.generation, block_ops)


def access_index(module: Module, ctx) -> AccessIndex:
    """The compilation's index of the allocated IR (built on first use)."""
    idx = ctx.cache.get(_KEY)
    if idx is None:
        kept = ctx.cache.pop(_BLOCK_OPS, None)
        block_ops = kept[1] if kept is not None and kept[0] == Edits.generation else None
        idx = ctx.cache[_KEY] = AccessIndex(module, shared_regions(ctx), block_ops)
    return idx


def apply_edits(ctx, edits: Edits) -> List[Block]:
    """Apply `edits` to the IR and to the compilation's index (if there is one); returns the
    blocks rebuilt."""
    idx = ctx.cache.get(_KEY)
    return edits.apply() if idx is None else idx.apply(edits)


def forget_access_index(ctx) -> None:
    """Drop the index (the accesses it records are about to change)."""
    ctx.cache.pop(_KEY, None)

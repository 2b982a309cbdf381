"""Batched IR edits: planned insertions and removals applied to each block in one sweep.

`Block.insert_before` and `Operation.erase` look the op up in its block (linear in the block's
length), so a pass that edits a long block op by op is quadratic. A pass records its edits here
instead — new ops to place before an anchor op (or at a block's end), ops to remove — and
`apply()` rebuilds every touched block once. Until then the original order is intact, which is
what the passes' analyses read: `index_in_block` and `prev_op` answer in constant time.
"""

from __future__ import annotations

from typing import Dict, List, Optional

from ..ir.core import Block, Module, Operation


class Edits:
    """Insertions and removals for one pass, applied together by `apply()`. (Keyed by the ops and
    blocks themselves, which hash by identity in C.)

    `Edits.generation` counts the applications in this process: a pass may keep a list of a
    block's ops for a later pass, which may use it only while the generation is the same (the
    passes edit blocks through `apply()` only).

    `skeleton`: a `Skeleton` (compiler/passes/skeleton.py) to keep current: `apply()` updates its
    edited blocks, if it described the IR up to this application."""

    generation = 0

    def __init__(self, module: Optional[Module] = None, skeleton=None) -> None:
        self.skeleton = skeleton
        self.before: Dict[Operation, List[Operation]] = {}  # anchor -> new ops, in order
        self.removed: Dict[Operation, Operation] = {}
        self.blocks: Dict[Block, List[Operation]] = {}  # block -> the ops of it that are edited
        self._index: Dict[Block, Dict[Operation, int]] = {}  # block -> position of each of its ops

    # -- planning -------------------------------------------------------------------------------
    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        """Plan `op` right before `anchor` (after ops planned there earlier)."""
        assert anchor.parent is not None
        lst = self.before.get(anchor)
        if lst is None:
            lst = self.before[anchor] = []
            self._touch(anchor)
        lst.append(op)
        return op

    def _touch(self, op: Operation) -> None:
        edited = self.blocks.get(op.parent)
        if edited is None:
            edited = self.blocks[op.parent] = []
        edited.append(op)

    def planned_before(self, anchor: Operation) -> List[Operation]:
        return self.before.get(anchor, [])

    def erase(self, op: Operation) -> None:
        """Plan the removal of `op` (its results must be unused); its operands are dropped now."""
        for r in op.results:
            if r.uses:
                raise ValueError(f"cannot erase {op.name}: result still used by {r.users[0].name}")
        for n in list(op.iter_nested()):
            n.drop_operands()
        op.drop_operands()
        assert op.parent is not None
        if op not in self.removed and op not in self.before:
            self._touch(op)
        self.removed[op] = op

    def is_removed(self, op: Operation) -> bool:
        return op in self.removed

    # -- positions in the original order -------------------------------------------------------
    def index_in_block(self, op: Operation) -> int:
        blk = op.parent
        assert blk is not None
        index = self._index.get(blk)
        if index is None:  # built in C (a block of a large kernel holds thousands of ops)
            index = self._index[blk] = dict(zip(blk.ops, range(len(blk.ops))))
        return index[op]

    def prev_op(self, op: Operation) -> Optional[Operation]:
        """The op before `op` in its block (original order), or None at the block's start."""
        i = self.index_in_block(op)
        return op.parent.ops[i - 1] if i > 0 else None  # type: ignore[union-attr]

    # -- applying ---------------------------------------------------------------------------------
    def apply(self) -> List[Block]:
        """Rebuild every touched block once (slices between the edited positions); returns the
        blocks it rebuilt."""
        sk = self.skeleton
        plans = sk.plan(self) if sk is not None and sk.generation == Edits.generation else None
        Edits.generation += 1
        before, removed = self.before, self.removed
        touched = list(self.blocks)
        for blk, edited in self.blocks.items():
            ops = blk.ops
            index = self._index.get(blk)
            if len(edited) == 1:
                points = [index[edited[0]] if index is not None else ops.index(edited[0])]
            elif index is not None:  # positions known already (the pass asked for them)
                points = sorted({index[o] for o in edited})
            else:  # one scan, without a position map of the whole (possibly huge) block
                wanted = set(edited)
                points = [i for i, o in enumerate(ops) if o in wanted]
            new: List[Operation] = []
            prev = 0
            for i in points:
                new.extend(ops[prev:i])
                o = ops[i]
                ins = before.get(o)
                if ins:
                    for n in ins:
                        n.parent = blk
                    new.extend(ins)
                if o in removed:
                    o.parent = None
                else:
                    new.append(o)
                prev = i + 1
            new.extend(ops[prev:])
            blk.ops[:] = new
        self.before.clear()
        self.removed.clear()
        self.blocks.clear()
        self._index.clear()
        if plans is not None:
            sk.commit(plans)
        return touched


def preceding_fence(anchor: Operation, edits: Edits, cluster: bool = False) -> Optional[Operation]:
    """The fence (existing or planned) right before `anchor` with only pure ops in between, of at
    least the requested scope; None when an effectful op, a region op or the block start comes
    first."""
    from ..ir.ops import is_pure

    def verdict(o: Operation):
        if o.name == "tlx.fence_async_shared":
            return o if (bool(o.attrs.get("cluster")) or not cluster) else False
        if o.regions or not is_pure(o):
            return False
        return None  # pure: look further back

    cur = anchor
    while True:
        for o in reversed(edits.planned_before(cur)):
            v = verdict(o)
            if v is not None:
                return v or None
        p = edits.prev_op(cur)
        if p is None:
            return None
        if not edits.is_removed(p):
            v = verdict(p)
            if v is not None:
                return v or None
        cur = p

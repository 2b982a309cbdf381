"""The skeleton of a kernel: per block, the ops in it that shared-memory analyses look at.

FenceInsertion's facts, shared-memory allocation's lifetimes and the access index each need,
per block and in order, only the ops that may touch shared memory or carry control flow: the
`tlx.*` ops, region ops, the ops that may pass a shared-memory value on (`scf.yield`,
`scf.condition`, `arith.select`), ops with a scratch area, and the frontend's ops the lowering
passes rewrite (`tt.dot`, the descriptor ops). On a real kernel that is about a third of the ops;
the rest is arithmetic. One walk at the start of a compilation finds them (`take_skeleton`);
every later pass reads the skeleton instead of walking the whole module again.

**Kept current through edits.** The passes edit blocks with `Edits` (compiler/passes/edits.py);
an `Edits` made by `edits_for(ctx)` updates the skeleton's edited blocks as it applies (inserted
ops go before their anchor's entry, removed ops leave; an anchor the skeleton does not hold makes
its block re-read). The skeleton remembers the `Edits.generation` it describes: an edit applied
by an `Edits` that does not know it makes it stale, and `skeleton_of` then reads the module
again — never a stale answer. A pass that edits blocks without `Edits` (the layout pass) or
changes which ops qualify (it sets `scratch_bytes`) is not marked `keeps_skeleton` in the
pipeline, and the pass manager drops the skeleton after it (`forget_skeleton`).
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional

from ..errors import IRVerifyError
from ..ir.core import Block, Module, Operation
from .edits import Edits

# the non-`tlx.` ops a skeleton holds besides region ops and scratch owners
_OTHER_NAMES = frozenset({"scf.yield", "scf.condition", "arith.select",
                          "tt.dot", "tt.descriptor_load", "tt.descriptor_store"})

_KEY = "skeleton"


def in_skeleton(op: Operation) -> bool:
    """Whether the skeleton holds `op` (see the module docstring)."""
    n = op.name
    return (n.startswith("tlx.") or n in _OTHER_NAMES or bool(op.regions)
            or bool(op.attrs and "scratch_bytes" in op.attrs))


class Skeleton:
    """Per block, its skeleton ops in block order (`ops`); `preorder` walks them all."""

    def __init__(self, module: Module) -> None:
        self.blocks: Dict[Block, List[Operation]] = {}  # (keyed by the blocks: hashed in C)
        self.root = module.func.regions[0].block
        self.generation = Edits.generation  # the IR state it describes
        self._read(self.root)

    def _read(self, blk: Block) -> None:
        # iterative: one visit per op of the module (nested blocks read when their op is met);
        # the test is `in_skeleton`'s, inlined because it runs once per op (check_skeleton
        # compares this read with the lists `plan` builds through `in_skeleton`)
        other = _OTHER_NAMES
        stack = [blk]
        while stack:
            b = stack.pop()
            mine: List[Operation] = []
            self.blocks[b] = mine
            for op in b.ops:
                if op.regions:
                    mine.append(op)
                    stack.extend(r.block for r in op.regions)
                elif op.name.startswith("tlx.") or op.name in other or (op.attrs and "scratch_bytes" in op.attrs):
                    mine.append(op)

    def ops(self, blk: Block) -> List[Operation]:
        """The skeleton ops of `blk`, in order (the list itself: do not modify it)."""
        return self.blocks[blk]

    def preorder(self) -> Iterator[Operation]:
        """Every skeleton op in program (pre-)order: an op, then the ops of its regions."""
        blocks = self.blocks
        stack = [iter(blocks[self.root])]
        while stack:
            for op in stack[-1]:
                yield op
                if op.regions:
                    stack.extend(iter(blocks[r.block]) for r in reversed(op.regions))
                    break
            else:
                stack.pop()

    def plan(self, edits: Edits):
        """The new lists of the blocks `edits` touches, computed before it applies (from the old
        lists and the planned ops, without reading the blocks); None for a block to re-read."""
        plans = []
        before, removed = edits.before, edits.removed
        for blk, edited in edits.blocks.items():
            old = self.blocks.get(blk)
            if old is None:
                continue  # a block the skeleton never held (it is not reachable from the kernel)
            wanted = set(edited)  # the block's anchors and removed ops
            anchors = sum(1 for o in wanted if o in before)
            # the edited positions found in one scan, the unedited runs between them copied as
            # slices (a kernel's outer block can hold tens of thousands of skeleton ops)
            points = [i for i, o in enumerate(old) if o in wanted]
            found, prev = 0, 0
            new: List[Operation] = []
            for i in points:
                new.extend(old[prev:i])
                op = old[i]
                ins = before.get(op)
                if ins:
                    found += 1
                    new.extend(o for o in ins if in_skeleton(o))
                if op not in removed:
                    new.append(op)
                prev = i + 1
            new.extend(old[prev:])
            plans.append((blk, new if found == anchors else None))
        return plans

    def commit(self, plans) -> None:
        """Install `plan`'s lists once the edits are applied (and read the new ops' regions)."""
        for blk, new in plans:
            if new is None:
                self._read(blk)
                continue
            self.blocks[blk] = new
            for op in new:
                if op.regions and op.regions[0].block not in self.blocks:
                    for r in op.regions:
                        self._read(r.block)
        self.generation = Edits.generation


def take_skeleton(module: Module, ctx) -> Skeleton:
    """Read the module's skeleton (one walk) and keep it for the passes of this compilation."""
    sk = ctx.cache[_KEY] = Skeleton(module)
    return sk


def skeleton_of(module: Module, ctx) -> Skeleton:
    """The compilation's skeleton, read again when it is missing or stale."""
    sk = ctx.cache.get(_KEY)
    if sk is None or sk.generation != Edits.generation or sk.root is not module.func.regions[0].block:
        sk = take_skeleton(module, ctx)
    return sk


def kept_skeleton(ctx) -> Optional[Skeleton]:
    """The compilation's skeleton if it is current, else None (nothing is read)."""
    sk = ctx.cache.get(_KEY)
    return sk if sk is not None and sk.generation == Edits.generation else None


def edits_for(ctx) -> Edits:
    """An `Edits` that keeps the compilation's skeleton current as it applies (when there is a
    current one)."""
    return Edits(skeleton=kept_skeleton(ctx))


def forget_skeleton(ctx) -> None:
    """Drop the skeleton (a pass is about to edit blocks without `Edits` or change which ops
    qualify)."""
    ctx.cache.pop(_KEY, None)


def check_skeleton(module: Module, ctx) -> None:
    """Raise `IRVerifyError` when the compilation keeps a current skeleton that differs from the
    module's (the pass manager's per-pass verification calls this: a pass that edits blocks
    behind the skeleton's back, or an update that misses an op, shows up at that pass)."""
    sk = kept_skeleton(ctx)
    if sk is None or sk.root is not module.func.regions[0].block:
        return
    fresh = Skeleton(module)
    for blk, ops in fresh.blocks.items():
        kept = sk.blocks.get(blk)
        if kept != ops:
            have = [o.name for o in kept] if kept is not None else None
            raise IRVerifyError(f"the kept skeleton of a block is out of date: it lists {have}, "
                                f"the block has {[o.name for o in ops]}")

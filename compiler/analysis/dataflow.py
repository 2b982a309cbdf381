"""Structured control flow for the passes' dataflow walks (ProxyFenceInsertion's forward and
backward walks, the CTA-barrier walk): the state after an `scf.if`, `scf.for` or `scf.while`
from the state before it, given the walk's `block(block, state) -> state` and its join
`union(a, b) -> state`. A walk going backward passes its own block walk and gets the state
before the op from the state after it (`if_join`, `loop_fixpoint`)."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..ir.core import Block, Operation
from .memory import const_int

BlockWalk = Callable[[Block, Any], Any]
Join = Callable[[Any, Any], Any]


def if_join(block: BlockWalk, union: Join, op: Operation, st):
    """The state after (forward) or before (backward) the `scf.if` `op`: the branch a constant
    condition takes, otherwise both branches joined."""
    c = const_int(op.arg("cond"))
    if c is not None:
        return block(op.regions[0 if c else 1].block, st)
    return union(block(op.regions[0].block, st), block(op.regions[1].block, st))


def loop_fixpoint(block: BlockWalk, union: Join, op: Operation, n: Optional[int], st):
    """The state after (forward) or before (backward) the `scf.for` `op` of trip count `n` (None:
    not a constant) from state `st`: its body walked to a fixpoint over the back edge (at most 50
    rounds); a loop known to run zero times leaves `st`, one known to run once walks the body
    once, one of unknown trip count may also be skipped (so `st` joins the result — a zero-trip
    loop must not hide a hazard)."""
    body = op.regions[0].block
    if n == 0:
        return st
    if n == 1:
        return block(body, st)
    inn = out = st
    for _ in range(50):
        out = block(body, inn)
        nxt = union(st, out)
        if nxt == inn:
            break
        inn = nxt
    return out if n is not None else union(st, out)


def while_fixpoint(block: BlockWalk, union: Join, op: Operation, st):
    """The state after the `scf.while` `op` walking forward (the state leaving its `before`
    region): before and after regions walked to a fixpoint over the back edge (at most 50 rounds)."""
    inn = ob = st
    for _ in range(50):
        ob = block(op.regions[0].block, inn)
        oa = block(op.regions[1].block, ob)
        nxt = union(st, oa)
        if nxt == inn:
            break
        inn = nxt
    return ob

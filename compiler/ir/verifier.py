"""The IR verifier: checks op types (each op's rule in `ops.py`), dominance, terminators, region
arguments and use lists. Runs after tracing and, in tests, after every pass."""

from __future__ import annotations

from typing import List, Set

from ..errors import IRVerifyError
from .core import Block, Module, Operation
from .ops import OPS

# which terminator ends each region of each region op (region index -> terminator name)
_TERMINATORS = {
    "tt.func": {0: "tt.return"},
    "scf.for": {0: "scf.yield"},
    "scf.if": {0: "scf.yield", 1: "scf.yield"},
    "scf.while": {0: "scf.condition", 1: "scf.yield"},
}


def _expected_terminator(op: Operation, ridx: int) -> str:
    if op.name == "tlx.warp_specialize":
        return "tlx.ws_yield" if ridx == 0 else "tlx.ws_return"
    return _TERMINATORS[op.name][ridx]


def _isolated_region(op: Operation, ridx: int) -> bool:
    return op.name == "tt.func" or (op.name == "tlx.warp_specialize" and ridx > 0)


class _Verifier:
    def __init__(self) -> None:
        self.visible: List[Set[int]] = []

    def is_visible(self, v) -> bool:
        k = id(v)
        return any(k in s for s in self.visible)

    def op(self, op: Operation) -> None:
        d = OPS.get(op.name)
        if d is None:
            raise IRVerifyError(f"unknown op '{op.name}' at {op.loc}")
        if d.results is not None and len(op.results) != d.results:
            raise IRVerifyError(f"{op.name} at {op.loc}: has {len(op.results)} results, expected {d.results}")
        if d.regions is not None and len(op.regions) != d.regions:
            raise IRVerifyError(f"{op.name} at {op.loc}: has {len(op.regions)} regions, expected {d.regions}")
        if op.name == "tlx.warp_specialize" and len(op.regions) < 1:
            raise IRVerifyError(f"{op.name} at {op.loc}: needs a default region")
        if len(op.segments) != len(d.groups) or sum(op.segments) != len(op._operands):
            raise IRVerifyError(f"{op.name} at {op.loc}: operand groups do not match the op definition")
        for i, v in enumerate(op._operands):
            if not self.is_visible(v):
                raise IRVerifyError(f"{op.name} at {op.loc}: operand #{i} ({v.name or '?'} : {v.type}) "
                                    "does not dominate its use")
            if not any(o is op and j == i for (o, j) in v.uses):
                raise IRVerifyError(f"{op.name} at {op.loc}: operand #{i} is missing from its value's use list")
        for ridx, r in enumerate(op.regions):
            if r.parent is not op or r.block.parent is not r:
                raise IRVerifyError(f"{op.name} at {op.loc}: region #{ridx} has a broken parent link")
            saved = self.visible
            if _isolated_region(op, ridx):
                self.visible = []
            self.block(r.block, _expected_terminator(op, ridx), op)
            self.visible = saved
        if d.verify is not None:
            d.verify(op)
        self.visible[-1].update(id(r) for r in op.results)

    def block(self, block: Block, terminator: str, owner: Operation) -> None:
        self.visible.append({id(a) for a in block.args})
        if not block.ops:
            raise IRVerifyError(f"{owner.name} at {owner.loc}: empty region (needs a {terminator})")
        for op in block.ops:
            if op.parent is not block:
                raise IRVerifyError(f"{op.name} at {op.loc}: broken parent link")
            last = op is block.last_op
            if op.has_trait("terminator") and not last:
                raise IRVerifyError(f"{op.name} at {op.loc}: a terminator in the middle of a block")
            if last and op.name != terminator:
                raise IRVerifyError(f"{owner.name} at {owner.loc}: region must end with {terminator}, "
                                    f"ends with {op.name}")
            self.op(op)
        self.visible.pop()


def verify_module(m: Module) -> None:
    """Raise IRVerifyError at the first broken invariant."""
    if m.func is None:
        raise IRVerifyError("module has no function")
    if m.func.name != "tt.func":
        raise IRVerifyError("a module's function must be a tt.func")
    v = _Verifier()
    v.visible = [set()]
    v.op(m.func)

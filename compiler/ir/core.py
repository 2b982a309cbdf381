"""The IR's data structures: source locations, SSA values, operations, blocks, regions, the
module, and a builder with an insertion point.

The IR is structured: every region holds exactly one block, and control flow is expressed by
region ops (`scf.for`, `scf.if`, `scf.while`, `tlx.warp_specialize`). Operations are generic
(a name, operands, results, attributes, regions, a location); what an op name means — its
operand groups, traits, memory effects and verifier — is declared once in `ops.py`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .types import Type


@dataclass(frozen=True)
class Location:
    """A place in the kernel's Python source: file, 1-based line, 0-based column."""

    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"

    @property
    def full(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


UNKNOWN_LOC = Location("<unknown>", 0, 0)


class Value:
    """An SSA value: produced by an operation (`OpResult`) or a block argument
    (`BlockArgument`). Keeps its uses as (operation, operand index) pairs."""

    __slots__ = ("type", "name", "uses", "__weakref__")

    def __init__(self, type: Type, name: Optional[str] = None):
        self.type = type
        self.name = name  # a readable name hint; the printer makes names unique
        self.uses: List[Tuple["Operation", int]] = []

    @property
    def users(self) -> List["Operation"]:
        seen: List[Operation] = []
        for op, _ in self.uses:
            if not any(op is s for s in seen):
                seen.append(op)
        return seen

    @property
    def defining_op(self) -> Optional["Operation"]:
        return None

    def replace_all_uses_with(self, new: "Value") -> None:
        for op, idx in list(self.uses):
            op.set_operand(idx, new)

    def __repr__(self) -> str:
        return f"<Value {self.name or '?'} : {self.type}>"


class OpResult(Value):
    """Result number `index` of operation `owner`."""

    __slots__ = ("owner", "index")

    def __init__(self, type: Type, owner: "Operation", index: int, name: Optional[str] = None):
        super().__init__(type, name)
        self.owner = owner
        self.index = index

    @property
    def defining_op(self) -> Optional["Operation"]:
        return self.owner


class BlockArgument(Value):
    """Argument number `index` of block `owner` (loop induction variables and carried values,
    function arguments, warp-specialize partition captures)."""

    __slots__ = ("owner", "index")

    def __init__(self, type: Type, owner: "Block", index: int, name: Optional[str] = None):
        super().__init__(type, name)
        self.owner = owner
        self.index = index


OperandSpec = Union[Value, None, Sequence[Value]]
NO_REGIONS: Tuple["Region", ...] = ()  # the `regions` of every op without regions


def _opdef(name: str):
    """The definition of op `name` from ops.py's registry. ops.py imports this module, so the
    registry's lookup is imported on the first call and then replaces this function (an import
    statement in `Operation.__init__` cost every op built a module lookup)."""
    global _opdef
    from .ops import get_opdef

    _opdef = get_opdef
    return get_opdef(name)


class Operation:
    """One IR operation. Operands are stored flat; `segments` gives the size of each operand
    group the op's definition declares (one / optional / variadic)."""

    __slots__ = ("name", "_operands", "segments", "results", "attrs", "regions", "loc", "parent", "opdef",
                 "__weakref__")

    def __init__(self, name: str, operands: Sequence[OperandSpec], result_types: Sequence[Type],
                 attrs: Optional[Dict[str, Any]] = None, num_regions: int = 0,
                 loc: Location = UNKNOWN_LOC, result_names: Optional[Sequence[Optional[str]]] = None):
        opdef = _opdef(name)
        self.name = name
        self.opdef = opdef  # what the op name means (ops.py); fixed for the op's lifetime
        self._operands: List[Value] = []
        self.segments: Tuple[int, ...]
        self.segments, flat = opdef.split(name, operands)
        self.attrs: Dict[str, Any] = dict(attrs) if attrs else {}
        self.loc = loc
        self.parent: Optional[Block] = None
        if result_types:
            names = list(result_names or [])
            self.results: List[OpResult] = [
                OpResult(t, self, i, names[i] if i < len(names) else None) for i, t in enumerate(result_types)
            ]
        else:
            self.results = []
        # most ops have no regions: they share one empty tuple instead of owning an empty list, so a
        # walk over a large module touches one object per op, not two (the walks are memory-bound)
        self.regions: Sequence[Region] = [Region(self) for _ in range(num_regions)] if num_regions else NO_REGIONS
        for v in flat:
            self._append_operand(v)

    # ---- operands -------------------------------------------------------------------------
    @property
    def operands(self) -> List[Value]:
        return list(self._operands)

    def _append_operand(self, v: Value) -> None:
        if not isinstance(v, Value):
            raise TypeError(f"{self.name}: operand {v!r} is not an IR value")
        v.uses.append((self, len(self._operands)))
        self._operands.append(v)

    def set_operand(self, idx: int, v: Value) -> None:
        old = self._operands[idx]
        old.uses = [(o, i) for (o, i) in old.uses if not (o is self and i == idx)]
        self._operands[idx] = v
        v.uses.append((self, idx))

    def drop_operands(self) -> None:
        for i, v in enumerate(self._operands):
            v.uses = [(o, j) for (o, j) in v.uses if not (o is self and j == i)]
        self._operands = []

    def set_operands(self, operands: Sequence[OperandSpec]) -> None:
        """Replace every operand (and the group sizes)."""
        opdef = self.opdef
        self.drop_operands()
        self.segments, flat = opdef.split(self.name, operands)
        for v in flat:
            self._append_operand(v)

    def group_range(self, group: str) -> Tuple[int, int]:
        names = self.opdef.group_names
        if group not in names:
            raise KeyError(f"{self.name} has no operand group '{group}'")
        k = names.index(group)
        start = sum(self.segments[:k])
        return start, start + self.segments[k]

    def group(self, group: str) -> List[Value]:
        """The operands of one named group, as a list."""
        a, b = self.group_range(group)
        return self._operands[a:b]

    def arg(self, group: str) -> Optional[Value]:
        """The operand of a one/optional group (None when an optional group is empty)."""
        vals = self.group(group)
        return vals[0] if vals else None

    # ---- results, structure ---------------------------------------------------------------
    @property
    def result(self) -> OpResult:
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not one")
        return self.results[0]

    def has_trait(self, trait: str) -> bool:
        return trait in self.opdef.traits

    @property
    def parent_op(self) -> Optional["Operation"]:
        if self.parent is None or self.parent.parent is None:
            return None
        return self.parent.parent.parent

    def ancestors(self) -> Iterator["Operation"]:
        """Enclosing operations, innermost first."""
        p = self.parent_op
        while p is not None:
            yield p
            p = p.parent_op

    def is_ancestor_of(self, other: "Operation") -> bool:
        """True when `other` is nested (at any depth) inside one of this op's regions."""
        return any(a is self for a in other.ancestors())

    def walk(self, fn: Callable[["Operation"], Any], post_order: bool = False) -> None:
        """Call `fn` on this op and every op nested in it (pre-order unless `post_order`)."""
        if not post_order:
            fn(self)
        for r in self.regions:
            for op in list(r.block.ops):
                op.walk(fn, post_order)
        if post_order:
            fn(self)

    def iter_nested(self) -> Iterator["Operation"]:
        """Every op nested in this op's regions, pre-order (this op excluded)."""
        for r in self.regions:
            for op in r.block.ops:
                yield op
                yield from op.iter_nested()

    def erase(self) -> None:
        """Remove this op from its block; its results must be unused."""
        for r in self.results:
            if r.uses:
                raise ValueError(f"cannot erase {self.name}: result still used by {r.users[0].name}")
        for op in list(self.iter_nested()):
            op.drop_operands()
        self.drop_operands()
        if self.parent is not None:
            self.parent.remove(self)

    def move_before(self, other: "Operation") -> None:
        if self.parent is not None:
            self.parent.remove(self)
        assert other.parent is not None
        other.parent.insert_before(other, self)

    def __repr__(self) -> str:
        return f"<Operation {self.name} at {self.loc}>"


class Block:
    """A straight-line list of operations with arguments; the last op is the terminator."""

    __slots__ = ("args", "ops", "parent", "__weakref__")

    def __init__(self, parent: Optional["Region"] = None):
        self.args: List[BlockArgument] = []
        self.ops: List[Operation] = []
        self.parent = parent

    def add_arg(self, type: Type, name: Optional[str] = None) -> BlockArgument:
        a = BlockArgument(type, self, len(self.args), name)
        self.args.append(a)
        return a

    def index(self, op: Operation) -> int:
        for i, o in enumerate(self.ops):
            if o is op:
                return i
        raise ValueError(f"{op.name} is not in this block")

    def insert(self, idx: int, op: Operation) -> None:
        op.parent = self
        self.ops.insert(idx, op)

    def append(self, op: Operation) -> None:
        op.parent = self
        self.ops.append(op)

    def insert_before(self, anchor: Operation, op: Operation) -> None:
        self.insert(self.index(anchor), op)

    def insert_after(self, anchor: Operation, op: Operation) -> None:
        self.insert(self.index(anchor) + 1, op)

    def remove(self, op: Operation) -> None:
        del self.ops[self.index(op)]
        op.parent = None

    @property
    def terminator(self) -> Optional[Operation]:
        if self.ops and self.ops[-1].has_trait("terminator"):
            return self.ops[-1]
        return None

    @property
    def parent_op(self) -> Optional[Operation]:
        return self.parent.parent if self.parent is not None else None


class Region:
    """A region of an operation; structured IR keeps exactly one block per region."""

    __slots__ = ("block", "parent", "__weakref__")

    def __init__(self, parent: Optional[Operation] = None):
        self.parent = parent
        self.block = Block(self)


class Module:
    """A compilation unit: one kernel function (`tt.func`) and module attributes such as
    `num_warps` and `target`."""

    def __init__(self, func: Optional[Operation] = None, attrs: Optional[Dict[str, Any]] = None):
        self.func = func
        self.attrs: Dict[str, Any] = dict(attrs) if attrs else {}

    @property
    def body(self) -> Block:
        assert self.func is not None
        return self.func.regions[0].block

    def walk(self, fn: Callable[[Operation], Any], post_order: bool = False) -> None:
        if self.func is not None:
            self.func.walk(fn, post_order)

    def ops(self) -> Iterator[Operation]:
        """Every op of the function body, pre-order."""
        if self.func is not None:
            yield from self.func.iter_nested()

    def __str__(self) -> str:
        from .printer import print_module

        return print_module(self)


class Builder:
    """Creates operations at an insertion point (a block and a position in it)."""

    def __init__(self, block: Optional[Block] = None, index: Optional[int] = None):
        self.block = block
        self.index = index  # None = append at the end
        self.loc: Location = UNKNOWN_LOC

    def set_insertion_point_to_end(self, block: Block) -> None:
        self.block, self.index = block, None

    def set_insertion_point_before(self, op: Operation) -> None:
        assert op.parent is not None
        self.block, self.index = op.parent, op.parent.index(op)

    def set_insertion_point_after(self, op: Operation) -> None:
        assert op.parent is not None
        self.block, self.index = op.parent, op.parent.index(op) + 1

    def insert(self, op: Operation) -> Operation:
        assert self.block is not None, "builder has no insertion point"
        if self.index is None:
            self.block.append(op)
        else:
            self.block.insert(self.index, op)
            self.index += 1
        return op

    def create(self, name: str, operands: Sequence[OperandSpec] = (), result_types: Sequence[Type] = (),
               attrs: Optional[Dict[str, Any]] = None, num_regions: int = 0,
               loc: Optional[Location] = None, result_names: Optional[Sequence[Optional[str]]] = None) -> Operation:
        """Create op `name` and insert it at the insertion point."""
        op = Operation(name, operands, result_types, attrs, num_regions, loc or self.loc, result_names)
        return self.insert(op)

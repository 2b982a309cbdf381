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

    __slots__ = ("name", "_operands", "segments", "results", "attrs", "regions", "loc", "parent", "prev_op",
                 "next_op", "_order", "opdef", "__weakref__")

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
        # neighbours in the parent block's list (None at either end, and outside a block)
        self.prev_op: Optional[Operation] = None
        self.next_op: Optional[Operation] = None
        self._order = 0  # position key in the block, valid while the block's `_ordered` is set
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
        """[start, end) of one named operand group in the flat operand list."""
        k = self.opdef.group_index.get(group)
        if k is None:
            raise KeyError(f"{self.name} has no operand group '{group}'")
        segs = self.segments
        start = sum(segs[:k]) if k else 0
        return start, start + segs[k]

    def group(self, group: str) -> List[Value]:
        """The operands of one named group, as a list."""
        a, b = self.group_range(group)
        return self._operands[a:b]

    def arg(self, group: str) -> Optional[Value]:
        """The operand of a one/optional group (None when an optional group is empty)."""
        a, b = self.group_range(group)
        return self._operands[a] if b > a else None

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

    def walk(self, fn: Callable[["Operation"], Any]) -> None:
        """Call `fn` on this op and every op nested in it, pre-order; `fn` may erase the op it is given."""
        fn(self)
        for r in self.regions:
            for op in r.block.ops:
                op.walk(fn)

    def iter_nested(self) -> List["Operation"]:
        """Every op nested in this op's regions, pre-order (this op excluded), as a list."""
        return [op for r in self.regions for op in preorder(r.block)]

    def is_before_in_block(self, other: "Operation") -> bool:
        """Whether this op comes before `other`, an op of the same block (amortized O(1): the
        block numbers its ops on the first question after an insertion left no room)."""
        blk = self.parent
        if blk is None or other.parent is not blk:
            raise ValueError(f"{self.name} and {other.name} are not in one block")
        if not blk._ordered:
            blk._renumber()
        return self._order < other._order

    def erase(self) -> None:
        """Remove this op from its block; its results must be unused."""
        for r in self.results:
            if r.uses:
                raise ValueError(f"cannot erase {self.name}: result still used by {r.users[0].name}")
        for op in self.iter_nested():
            op.drop_operands()
        self.drop_operands()
        if self.parent is not None:
            self.parent.remove(self)

    def move_before(self, other: "Operation") -> None:
        """Move this op (from wherever it is) right before `other`."""
        if self.parent is not None:
            self.parent.remove(self)
        assert other.parent is not None
        other.parent.insert_before(other, self)

    def move_after(self, other: "Operation") -> None:
        """Move this op (from wherever it is) right after `other`."""
        if self.parent is not None:
            self.parent.remove(self)
        assert other.parent is not None
        other.parent.insert_after(other, self)

    def __repr__(self) -> str:
        return f"<Operation {self.name} at {self.loc}>"


_ORDER_STRIDE = 16  # gap between the order keys `Block._renumber` gives: room for later insertions


class Block:
    """A straight-line sequence of operations with arguments; the last op is the terminator.

    The ops form a doubly linked list (`first_op` / `last_op`, each op's `prev_op` / `next_op`,
    as in MLIR and xDSL): inserting or removing an op anywhere is O(1). `ops` is a view of the
    list in order. Position comparisons (`Operation.is_before_in_block`) read order keys the block
    assigns lazily: an insertion takes a key between its neighbours' when there is room, and
    otherwise marks the keys stale, so the next comparison renumbers the block once."""

    __slots__ = ("args", "parent", "first_op", "last_op", "_count", "_ordered", "__weakref__")

    def __init__(self, parent: Optional["Region"] = None):
        self.args: List[BlockArgument] = []
        self.parent = parent
        self.first_op: Optional[Operation] = None
        self.last_op: Optional[Operation] = None
        self._count = 0
        self._ordered = False  # whether every op's `_order` is current

    @property
    def ops(self) -> "BlockOps":
        """The block's ops in order (a view: iterate it, index it, take its length)."""
        return BlockOps(self)

    def add_arg(self, type: Type, name: Optional[str] = None) -> BlockArgument:
        a = BlockArgument(type, self, len(self.args), name)
        self.args.append(a)
        return a

    # ---- edits (O(1) but `insert` by position) -------------------------------------------
    def _link(self, op: Operation, prev: Optional[Operation], nxt: Optional[Operation]) -> None:
        if op.parent is not None:
            raise ValueError(f"{op.name} is already in a block: remove it (or use move_before) first")
        op.parent = self
        op.prev_op, op.next_op = prev, nxt
        if prev is None:
            self.first_op = op
        else:
            prev.next_op = op
        if nxt is None:
            self.last_op = op
        else:
            nxt.prev_op = op
        self._count += 1
        if self._ordered:  # keep the keys valid when the neighbours leave room
            lo = prev._order if prev is not None else 0
            if nxt is None:
                op._order = lo + _ORDER_STRIDE
            elif nxt._order - lo > 1:
                op._order = (lo + nxt._order) // 2
            else:
                self._ordered = False

    def _renumber(self) -> None:
        k = 0
        op = self.first_op
        while op is not None:
            k += _ORDER_STRIDE
            op._order = k
            op = op.next_op
        self._ordered = True

    def append(self, op: Operation) -> None:
        self._link(op, self.last_op, None)

    def insert_before(self, anchor: Operation, op: Operation) -> None:
        """Insert `op` right before `anchor`, an op of this block."""
        if anchor.parent is not self:
            raise ValueError(f"{anchor.name} is not in this block")
        self._link(op, anchor.prev_op, anchor)

    def insert_after(self, anchor: Operation, op: Operation) -> None:
        """Insert `op` right after `anchor`, an op of this block."""
        if anchor.parent is not self:
            raise ValueError(f"{anchor.name} is not in this block")
        self._link(op, anchor, anchor.next_op)

    def insert(self, idx: int, op: Operation) -> None:
        """Insert `op` at position `idx` (O(idx); `insert_before` / `insert_after` are O(1))."""
        if idx >= self._count:
            self.append(op)
        else:
            self.insert_before(self.ops[idx], op)

    def remove(self, op: Operation) -> None:
        """Unlink `op` from this block (its operands and regions stay as they are)."""
        if op.parent is not self:
            raise ValueError(f"{op.name} is not in this block")
        prev, nxt = op.prev_op, op.next_op
        if prev is None:
            self.first_op = nxt
        else:
            prev.next_op = nxt
        if nxt is None:
            self.last_op = prev
        else:
            nxt.prev_op = prev
        op.parent = op.prev_op = op.next_op = None
        self._count -= 1

    def index(self, op: Operation) -> int:
        """The position of `op` in this block (O(n))."""
        for i, o in enumerate(self.ops):
            if o is op:
                return i
        raise ValueError(f"{op.name} is not in this block")

    @property
    def terminator(self) -> Optional[Operation]:
        last = self.last_op
        return last if last is not None and last.has_trait("terminator") else None

    @property
    def parent_op(self) -> Optional[Operation]:
        return self.parent.parent if self.parent is not None else None


class BlockOps:
    """The ops of a block, in order: a view of its linked list. Iterating it (either way) reads
    the next op before handing out the current one, so the loop body may erase or move the op
    it was given, or insert ops before or after it (those are not visited); erasing the op the
    loop goes to next ends the loop early. Indexing by position is O(position from the nearer
    end); a slice is a list."""

    __slots__ = ("_block",)

    def __init__(self, block: Block):
        self._block = block

    def __iter__(self) -> Iterator[Operation]:
        op = self._block.first_op
        while op is not None:
            nxt = op.next_op
            yield op
            op = nxt

    def __reversed__(self) -> Iterator[Operation]:
        op = self._block.last_op
        while op is not None:
            prev = op.prev_op
            yield op
            op = prev

    def __len__(self) -> int:
        return self._block._count

    def __bool__(self) -> bool:
        return self._block.first_op is not None

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(self)[i]
        n = self._block._count
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("block op index out of range")
        if i <= n // 2:
            it = iter(self)
        else:
            it, i = reversed(self), n - 1 - i
        for _ in range(i):
            next(it)
        return next(it)


def preorder(blk: Block) -> List[Operation]:
    """Every op of `blk` and of the regions nested in it, pre-order (an op, then its regions'
    ops, then the next op), as a list: a snapshot the caller may edit the IR under."""
    out: List[Operation] = []
    stack: List[Optional[Operation]] = [blk.first_op]
    while stack:
        op = stack.pop()
        while op is not None:
            out.append(op)
            if op.regions:  # its regions first, in order, then the rest of this block
                stack.append(op.next_op)
                stack.extend(r.block.first_op for r in reversed(op.regions))
                break
            op = op.next_op
    return out


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

    def walk(self, fn: Callable[[Operation], Any]) -> None:
        if self.func is not None:
            self.func.walk(fn)

    def ops(self) -> List[Operation]:
        """Every op of the function body, pre-order (a list: see `preorder`)."""
        return preorder(self.body) if self.func is not None else []

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

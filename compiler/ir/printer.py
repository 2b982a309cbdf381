"""The IR text printer. `parser.parse_module(print_module(m))` rebuilds `m`, and printing that
again gives identical text.

An op prints as::

    %r0, %r1 = op.name %a, %b group(%c, %d) {attr = 1} : type0, type1 {regions} loc(#f0:12:4)

Operands of the op's `one` groups print positionally; optional and variadic groups print as
`name(...)` when non-empty (an op whose only group is variadic prints it positionally). Regions
print as `{`, a block header `^label(%arg: type, ...):`, the ops, `}`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Dict, List, Optional

from .core import Block, Location, Module, Operation, UNKNOWN_LOC, Value
from .layouts import Layout
from .types import Type

_REGION_LABELS = {
    "scf.for": ["body"],
    "scf.if": ["then", "else"],
    "scf.while": ["before", "after"],
}


def format_attr(v: Any) -> str:
    """The text of one attribute value."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        r = repr(v)
        return r if any(c in r for c in ".e") else r + ".0"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, (Type, Layout)):
        return str(v)
    raise TypeError(f"cannot print attribute value {v!r}")


def format_attrs(attrs: Dict[str, Any]) -> str:
    if not attrs:
        return ""
    return "{" + ", ".join(f"{k} = {format_attr(v)}" for k, v in attrs.items()) + "}"


class _Namer:
    """Gives every value a unique printed name: its hint when it has one, else a number."""

    _bad = re.compile(r"[^A-Za-z0-9_]")

    def __init__(self) -> None:
        self.names: Dict[int, str] = {}
        self.taken: set = set()
        self.counter = 0

    def name(self, v: Value) -> str:
        key = id(v)
        if key in self.names:
            return self.names[key]
        hint = v.name
        if hint and not hint.isdigit():
            base = self._bad.sub("_", hint)
            if base[0].isdigit():
                base = "v" + base
            cand, k = base, 0
            while cand in self.taken:
                k += 1
                cand = f"{base}_{k}"
        else:
            while str(self.counter) in self.taken:
                self.counter += 1
            cand = str(self.counter)
            self.counter += 1
        self.taken.add(cand)
        self.names[key] = cand
        return cand


class Printer:
    """Prints one module; `locs=False` leaves the locations out (for FileCheck-style tests);
    `annotate` maps an op to a comment printed above it (fence explanations)."""

    def __init__(self, locs: bool = True, annotate: Optional[Callable[[Operation], Optional[str]]] = None):
        self.locs = locs
        self.annotate = annotate
        self.namer = _Namer()
        self.files: Dict[str, str] = {}
        self.lines: List[str] = []

    # -- pieces --------------------------------------------------------------------------------
    def ref(self, v: Value) -> str:
        return "%" + self.namer.name(v)

    def loc(self, loc: Location) -> str:
        if not self.locs:
            return ""
        if loc is UNKNOWN_LOC or loc.line <= 0:
            return ""
        tag = self.files.setdefault(loc.file, f"f{len(self.files)}")
        return f" loc(#{tag}:{loc.line}:{loc.col})"

    def operands(self, op: Operation) -> str:
        groups = op.opdef.groups
        if len(groups) == 1 and groups[0][1] == "var":
            return ", ".join(self.ref(v) for v in op.operands)
        pos, named = [], []
        for (g, kind) in groups:
            vals = op.group(g)
            if kind == "one":
                assert not named, f"{op.name}: 'one' operand groups must come first"
                pos.append(self.ref(vals[0]))
            elif vals:
                named.append(f"{g}(" + ", ".join(self.ref(v) for v in vals) + ")")
        return " ".join(x for x in [", ".join(pos)] + named if x)

    def op_text(self, op: Operation, indent: str) -> None:
        if self.annotate is not None:
            note = self.annotate(op)
            if note:
                for ln in note.splitlines():
                    self.lines.append(f"{indent}// {ln}")
        if op.name == "tt.func":
            self.func_text(op, indent)
            return
        head = ""
        if op.results:
            head = ", ".join(self.ref(r) for r in op.results) + " = "
        text = head + op.name
        ops = self.operands(op)
        if ops:
            text += " " + ops
        attrs = format_attrs(op.attrs)
        if attrs:
            text += " " + attrs
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        if not op.regions:
            self.lines.append(indent + text + self.loc(op.loc))
            return
        labels = _REGION_LABELS.get(op.name)
        if labels is None and op.name == "tlx.warp_specialize":
            labels = ["default"] + [f"partition{i}" for i in range(len(op.regions) - 1)]
        for i, r in enumerate(op.regions):
            text += " {"
            self.lines.append(indent + text)
            label = labels[i] if labels and i < len(labels) else f"region{i}"
            self.block_text(r.block, indent + "  ", label)
            text = "}"
        self.lines.append(indent + text + self.loc(op.loc))

    def block_text(self, block: Block, indent: str, label: str) -> None:
        args = ", ".join(f"{self.ref(a)}: {a.type}" for a in block.args)
        self.lines.append(f"{indent[:-2]}^{label}" + (f"({args})" if block.args else "") + ":")
        for op in block.ops:
            self.op_text(op, indent)

    def func_text(self, op: Operation, indent: str) -> None:
        blk = op.regions[0].block
        args = ", ".join(f"{self.ref(a)}: {a.type}" for a in blk.args)
        attrs = {k: v for k, v in op.attrs.items() if k != "sym_name"}
        extra = f" attributes {format_attrs(attrs)}" if attrs else ""
        self.lines.append(f"{indent}tt.func @{op.attrs['sym_name']}({args}){extra} {{")
        for o in blk.ops:
            self.op_text(o, indent + "  ")
        self.lines.append(indent + "}" + self.loc(op.loc))

    def module_text(self, m: Module) -> str:
        attrs = format_attrs(m.attrs)
        self.lines.append("module" + (f" attributes {attrs}" if attrs else "") + " {")
        if m.func is not None:
            self.op_text(m.func, "  ")
        self.lines.append("}")
        header = [f"#{tag} = {json.dumps(path)}" for path, tag in self.files.items()]
        return "\n".join(header + self.lines) + "\n"


def print_module(m: Module, locs: bool = True, annotate: Optional[Callable[[Operation], Optional[str]]] = None) -> str:
    """The module as text (see the module docstring for the format)."""
    return Printer(locs, annotate).module_text(m)


def print_op(op: Operation, locs: bool = False) -> str:
    """One op (and its regions) as text, for messages and debugging."""
    p = Printer(locs)
    p.op_text(op, "")
    return "\n".join(p.lines)

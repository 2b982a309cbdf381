"""The IR text parser: reads what `printer.print_module` writes (and hand-written IR in tests).

Values must be defined before they are used (structured IR has no forward references). `//`
starts a comment. Errors are `IRParseError`s naming the line and column of the text.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import IRParseError
from . import types as T
from .core import Block, Location, Module, Operation, UNKNOWN_LOC, Value
from .layouts import Layout, make_layout
from .ops import get_opdef

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")
_NAME = re.compile(r"[A-Za-z0-9_.$]+")
_NUMBER = re.compile(r"-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)")


class Parser:
    def __init__(self, text: str):
        self.s = text
        self.i = 0
        self.files: Dict[str, str] = {}
        self.scopes: List[Dict[str, Value]] = [{}]

    # -- characters ----------------------------------------------------------------------------
    def error(self, msg: str) -> IRParseError:
        line = self.s.count("\n", 0, self.i) + 1
        col = self.i - (self.s.rfind("\n", 0, self.i) + 1) + 1
        text = self.s.splitlines()[line - 1] if self.s.splitlines() and line - 1 < len(self.s.splitlines()) else ""
        return IRParseError(f"IR line {line}, column {col}: {msg}\n    {text}\n    {' ' * (col - 1)}^")

    def ws(self) -> None:
        s, n = self.s, len(self.s)
        while self.i < n:
            c = s[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif s.startswith("//", self.i):
                j = s.find("\n", self.i)
                self.i = n if j < 0 else j + 1
            else:
                break

    def peek(self, lit: str) -> bool:
        self.ws()
        return self.s.startswith(lit, self.i)

    def accept(self, lit: str) -> bool:
        if self.peek(lit):
            self.i += len(lit)
            return True
        return False

    def expect(self, lit: str) -> None:
        if not self.accept(lit):
            found = self.s[self.i:self.i + 12].split("\n")[0]
            raise self.error(f"expected '{lit}', found '{found}'")

    def regex(self, rx: "re.Pattern[str]", what: str) -> str:
        self.ws()
        m = rx.match(self.s, self.i)
        if not m:
            raise self.error(f"expected {what}")
        self.i = m.end()
        return m.group(0)

    def ident(self) -> str:
        return self.regex(_IDENT, "an identifier")

    def integer(self) -> int:
        t = self.regex(re.compile(r"-?\d+"), "an integer")
        return int(t)

    # -- values ----------------------------------------------------------------------------------
    def value_name(self) -> str:
        self.expect("%")
        return self.regex(_NAME, "a value name")

    def lookup(self, name: str) -> Value:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.error(f"use of undefined value %{name}")

    def define(self, name: str, v: Value) -> None:
        if name in self.scopes[-1]:
            raise self.error(f"value %{name} is defined twice")
        self.scopes[-1][name] = v
        v.name = None if name.isdigit() else name

    def operand(self) -> Value:
        return self.lookup(self.value_name())

    def operand_list(self) -> List[Value]:
        return self.items(self.operand)

    def items(self, item: Callable[[], Any], close: Optional[str] = None) -> List[Any]:
        """`item, item, ...` (at least one); with `close`, a possibly empty list up to `close`
        (consumed)."""
        out: List[Any] = []
        if close is None or not self.peek(close):
            out.append(item())
            while self.accept(","):
                out.append(item())
        if close is not None:
            self.expect(close)
        return out

    def block_arg(self, block: Block) -> None:
        """`%name : type`, defined as a new argument of `block`."""
        n = self.value_name()
        self.expect(":")
        self.define(n, block.add_arg(self.type()))

    # -- types and layouts ------------------------------------------------------------------------
    def shape_and_element(self) -> Tuple[Tuple[int, ...], Any]:
        dims: List[int] = []
        while True:
            self.ws()
            m = re.compile(r"\d+x").match(self.s, self.i)
            if not m:
                break
            dims.append(int(m.group(0)[:-1]))
            self.i = m.end()
        return tuple(dims), self.element_type()

    def element_type(self) -> Any:
        if self.peek("!ptr"):
            return self.type()
        name = self.ident()
        if name not in T.SCALAR_TYPES:
            raise self.error(f"unknown element type '{name}'")
        return T.SCALAR_TYPES[name]

    def type(self) -> T.Type:
        self.ws()
        if self.accept("!ptr<"):
            e = self.element_type()
            self.expect(">")
            return T.PointerType(e)
        if self.accept("tensor<"):
            shape, e = self.shape_and_element()
            lay = None
            if self.accept(","):
                lay = self.layout()
            self.expect(">")
            return T.TensorType(shape, e, lay)  # type: ignore[arg-type]
        if self.accept("!smem<"):
            shape, e = self.shape_and_element()
            kw: Dict[str, Any] = {}
            while self.accept(","):
                if self.peek("#"):
                    kw["layout"] = self.layout()
                elif self.accept("buffers="):
                    kw["buffers"] = self.integer()
                elif self.accept("alloc="):
                    dims = [self.integer()]
                    while self.accept("x"):
                        dims.append(self.integer())
                    kw["alloc_shape"] = tuple(dims)
                elif self.accept("mutable"):
                    kw["mutable"] = True
                elif self.accept("remote"):
                    kw["remote"] = True
                else:
                    raise self.error("expected a layout, buffers=, alloc=, mutable or remote")
            self.expect(">")
            kw.setdefault("mutable", False)
            return T.MemDescType(shape, e, **kw)
        if self.accept("!mbarriers<"):
            n = self.integer()
            self.expect(">")
            return T.BarrierType(n, True)
        if self.accept("!mbarrier<remote>"):
            return T.BarrierType(1, False, remote=True)
        if self.accept("!mbarrier"):
            return T.BarrierType(1, False)
        if self.accept("!tensordesc<"):
            shape, e = self.shape_and_element()
            self.expect(">")
            return T.TensorDescType(shape, e)
        if self.accept("!descslots<"):
            n = self.integer()
            self.expect(">")
            return T.DescSlotsType(n, True)
        if self.accept("!descslot"):
            return T.DescSlotsType(1, False)
        if self.accept("!token"):
            return T.token
        name = self.ident()
        if name in T.SCALAR_TYPES:
            return T.SCALAR_TYPES[name]
        raise self.error(f"unknown type '{name}'")

    def layout(self) -> Layout:
        self.expect("#")
        tag = self.ident()
        vals = self.keyed_values("<", ">", self.layout_value)
        try:
            return make_layout(tag, vals)
        except (KeyError, ValueError, TypeError) as e:
            raise self.error(f"bad layout #{tag}: {e}") from None

    def layout_value(self) -> Any:
        if self.peek("#"):
            return self.layout()
        if self.accept("["):
            return self.items(self.layout_value, "]")
        if self.accept("true"):
            return True
        if self.accept("false"):
            return False
        return self.integer()

    # -- attributes ----------------------------------------------------------------------------------
    def attr_value(self) -> Any:
        self.ws()
        c = self.s[self.i:self.i + 1]
        if c == '"':
            m = re.compile(r'"(?:[^"\\]|\\.)*"').match(self.s, self.i)
            if not m:
                raise self.error("unterminated string")
            self.i = m.end()
            return json.loads(m.group(0))
        if c == "[":
            self.i += 1
            return self.items(self.attr_value, "]")
        if c == "#":
            return self.layout()
        for word, val in (("true", True), ("false", False), ("none", None), ("nan", float("nan")),
                          ("inf", float("inf")), ("-inf", float("-inf"))):
            if self.s.startswith(word, self.i) and not re.match(r"[A-Za-z0-9_]", self.s[self.i + len(word):self.i + len(word) + 1]):
                self.i += len(word)
                return val
        m = _NUMBER.match(self.s, self.i)
        if m:
            self.i = m.end()
            t = m.group(0)
            return float(t) if any(ch in t for ch in ".eE") else int(t)
        return self.type()

    def attr_dict(self) -> Dict[str, Any]:
        return self.keyed_values("{", "}", self.attr_value)

    def keyed_values(self, open_: str, close: str, value: Callable[[], Any]) -> Dict[str, Any]:
        """`open_ key = value, ... close` (possibly empty) as a dict; `value` parses one value."""
        def pair() -> Tuple[str, Any]:
            k = self.ident()
            self.expect("=")
            return k, value()

        self.expect(open_)
        return dict(self.items(pair, close))

    def at_region(self) -> bool:
        """`{` opens a region when a block header `^` follows it; otherwise attributes."""
        self.ws()
        if not self.s.startswith("{", self.i):
            return False
        j = self.i + 1
        while j < len(self.s) and self.s[j] in " \t\r\n":
            j += 1
        return self.s.startswith("^", j)

    def loc(self) -> Location:
        if not self.accept("loc("):
            return UNKNOWN_LOC
        if self.accept("unknown"):
            self.expect(")")
            return UNKNOWN_LOC
        self.expect("#")
        tag = self.ident()
        if tag not in self.files:
            raise self.error(f"unknown file tag #{tag}")
        self.expect(":")
        line = self.integer()
        self.expect(":")
        col = self.integer()
        self.expect(")")
        return Location(self.files[tag], line, col)

    # -- ops --------------------------------------------------------------------------------------------
    def block_body(self, block: Block, header: bool = True) -> None:
        """Parse `^label(args):` then ops until `}` (the brace is consumed)."""
        if header:
            self.expect("^")
            self.ident()
            if self.accept("("):
                self.items(lambda: self.block_arg(block), ")")
            self.expect(":")
        while not self.accept("}"):
            if self.i >= len(self.s):
                raise self.error("unexpected end of text inside a region")
            block.append(self.operation())

    def operation(self) -> Operation:
        self.ws()
        names: List[str] = []
        if self.peek("%"):
            names = self.items(self.value_name)
            self.expect("=")
        opname = self.ident()
        if opname == "tt.func":
            if names:
                raise self.error("tt.func has no results")
            return self.func()
        try:
            opdef = get_opdef(opname)
        except Exception:
            raise self.error(f"unknown op '{opname}'") from None
        groups = opdef.groups
        operands: List[Any] = []
        if len(groups) == 1 and groups[0][1] == "var":
            operands.append(self.operand_list() if self.peek("%") else [])
        else:
            first = True
            for g, kind in groups:
                if kind == "one":
                    if not first:
                        self.expect(",")
                    operands.append(self.operand())
                    first = False
                else:
                    vals: List[Value] = self.items(self.operand, ")") if self.accept(f"{g}(") else []
                    operands.append(vals if kind == "var" else (vals[0] if vals else None))
        attrs: Dict[str, Any] = {}
        if self.peek("{") and not self.at_region():
            attrs = self.attr_dict()
        rtypes: List[T.Type] = self.items(self.type) if self.accept(":") else []
        if len(rtypes) != len(names):
            raise self.error(f"{opname}: {len(names)} result names but {len(rtypes)} result types")
        op = Operation(opname, operands, rtypes, attrs, 0, UNKNOWN_LOC)
        regions = []
        while self.at_region():
            self.expect("{")
            from .core import Region

            r = Region(op)
            regions.append(r)
            self.scopes.append({})
            self.block_body(r.block)
            self.scopes.pop()
        if regions:
            op.regions = regions
        op.loc = self.loc()
        for n, r in zip(names, op.results):
            self.define(n, r)
        return op

    def func(self) -> Operation:
        self.expect("@")
        name = self.regex(_NAME, "a function name")
        op = Operation("tt.func", [], [], {"sym_name": name}, 1, UNKNOWN_LOC)
        blk = op.regions[0].block
        self.scopes.append({})
        self.expect("(")
        self.items(lambda: self.block_arg(blk), ")")
        if self.accept("attributes"):
            op.attrs.update(self.attr_dict())
        self.expect("{")
        self.block_body(blk, header=False)
        self.scopes.pop()
        op.loc = self.loc()
        return op

    def module(self) -> Module:
        while self.peek("#"):
            self.expect("#")
            tag = self.ident()
            self.expect("=")
            self.files[tag] = self.attr_value()
        self.expect("module")
        attrs = {}
        if self.accept("attributes"):
            attrs = self.attr_dict()
        self.expect("{")
        m = Module(None, attrs)
        if not self.peek("}"):
            self.ws()
            m.func = self.operation()
            if m.func.name != "tt.func":
                raise self.error("a module holds one tt.func")
        self.expect("}")
        self.ws()
        if self.i != len(self.s):
            raise self.error("text after the module")
        return m


def parse_module(text: str) -> Module:
    """Parse IR text into a Module (raises IRParseError)."""
    return Parser(text).module()


def parse_type(text: str) -> T.Type:
    """Parse one type."""
    p = Parser(text)
    t = p.type()
    p.ws()
    if p.i != len(text):
        raise p.error("text after the type")
    return t

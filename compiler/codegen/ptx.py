"""The PTX emitter: registers, labels, instructions with source locations, and a dead-code
pass.

Instructions are kept as records (predicate, opcode, operands) until the function is finished,
so that a flow-insensitive dead-code pass can drop instructions whose results nothing uses —
the per-element address arithmetic of a pointer tensor is mostly dead once loads are
vectorized (only the first pointer of each vector is read), and loop-carried copies of dead
registers would otherwise survive. An instruction is a *root* (always kept) when it has an
effect besides its destination registers: stores, barriers, branches, async copies, wgmma,
fences and so on.

Register names are readable: an IR value named ``acc`` gets ``%acc_3`` (a scalar) or
``%acc_3_<128>`` (a tensor's 128 registers, ``%acc_3_0`` … ``%acc_3_127``); temporaries use
``%r``/``%rd``/``%rs``/``%p`` pools.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

from ..ir.core import Location

# opcode prefixes of instructions with effects beyond their destination registers
_ROOT_PREFIXES = ("st.", "red.", "atom.", "cp.", "bar.", "barrier.", "mbarrier.", "fence.", "wgmma.", "setmaxnreg",
                  "bra", "ret", "exit", "tensormap.", "prefetch", "stmatrix", "trap", "membar", "griddepcontrol",
                  "nanosleep", "ld.volatile", "ld.acquire", "ld.relaxed", "discard", "multimem")

_REG = re.compile(r"%[A-Za-z_$][\w$]*")
_BAD_NAME = re.compile(r"[^A-Za-z0-9_]")
_TEMP_POOLS = {"b32": "%r", "b64": "%rd", "b16": "%rs", "pred": "%p"}


class Ins:
    """One instruction (or a label when `op` is ':label')."""

    __slots__ = ("pred", "op", "args", "dsts", "srcs", "root", "loc")

    def __init__(self, pred: Optional[str], op: str, args: Sequence[str], loc: Optional[Location], root: bool):
        self.pred = pred
        self.op = op
        self.args = args
        self.loc = loc
        self.root = root
        if op[0] == ":" or not args:
            self.dsts = ()
            self.srcs = _regs(pred) if pred else ()
            return
        first = _regs(args[0])
        rest: Tuple[str, ...] = ()
        for a in args[1:]:
            if a[0] == "%" or "%" in a:
                rest += _regs(a)
        if pred:
            rest += _regs(pred)
        if root and not _defines_first(op):
            self.dsts = ()
            self.srcs = first + rest
        else:
            self.dsts = first
            # a predicated definition merges with the old value: the old value is read too
            self.srcs = rest + first if pred else rest


_DEFINES_FIRST = ("atom.", "mbarrier.try_wait", "mbarrier.test_wait", "elect.", "vote.", "ld.", "mov.u64",
                  "mbarrier.arrive")


def _defines_first(op: str) -> bool:
    return op.startswith(_DEFINES_FIRST) and not op.startswith("mbarrier.arrive.noComplete")


def _regs(s: str) -> Tuple[str, ...]:
    """Register names in an operand (a register, an address, a vector, a predicate)."""
    if s[0] == "%" and s[1:].isidentifier():
        return (s,)
    if "%" not in s:
        return ()
    return tuple(_REG.findall(s))
def address(base: str, offset=0) -> str:
    """The address operand `[base+offset]` (`[base]` for a zero offset)."""
    return f"[{base}+{offset}]" if offset else f"[{base}]"


def braces(regs: Sequence[str]) -> str:
    """A vector operand `{a, b, ...}` (PTX wants the braces even around one register)."""
    return "{" + ", ".join(regs) + "}"


class Emitter:
    """Builds the body of one PTX function."""

    def __init__(self) -> None:
        self.code: List[Ins] = []
        self.decls: Dict[str, List[str]] = {"pred": [], "b16": [], "b32": [], "b64": []}
        self.temp_counts: Dict[str, int] = {k: 0 for k in _TEMP_POOLS}
        self.names: Dict[str, int] = {}
        self.label_count = 0
        self.loc: Optional[Location] = None
        self.files: Dict[str, int] = {}

    # -- registers ------------------------------------------------------------------------------
    def tmp(self, kind: str) -> str:
        """A fresh temporary register of `kind` ('b16', 'b32', 'b64', 'pred')."""
        n = self.temp_counts[kind]
        self.temp_counts[kind] = n + 1
        return f"{_TEMP_POOLS[kind]}{n}"

    def _unique(self, hint: str) -> str:
        base = _BAD_NAME.sub("_", hint or "v")
        if not base or not base[0].isalpha():
            base = "v" + base
        if base in ("r", "rd", "rs", "p"):
            base = base + "v"
        k = self.names.get(base, 0)
        self.names[base] = k + 1
        return f"{base}_{k}"

    def named(self, kind: str, hint: str) -> str:
        """A fresh register with a readable name."""
        name = "%" + self._unique(hint)
        self.decls[kind].append(name)
        return name

    def named_array(self, kind: str, n: int, hint: str) -> List[str]:
        """`n` fresh registers declared as one array (``%hint_k_<n>``)."""
        if n == 1:
            return [self.named(kind, hint)]
        base = "%" + self._unique(hint) + "_"
        self.decls[kind].append(f"{base}<{n}>")
        return [f"{base}{i}" for i in range(n)]

    # -- code -----------------------------------------------------------------------------------
    def __call__(self, op: str, *args: str, pred: Optional[str] = None) -> None:
        """Emit `op args...` (predicated by `pred`, e.g. '%p0' or '!%p0')."""
        root = op.startswith(_ROOT_PREFIXES)
        self.code.append(Ins(pred, op, args, self.loc, root))

    def new(self, kind: str, op: str, *args: str, pred: Optional[str] = None) -> str:
        """Emit `op` into a fresh temporary of `kind` (its first operand); returns the temporary."""
        d = self.tmp(kind)
        self(op, d, *args, pred=pred)
        return d

    def root(self, op: str, *args: str, pred: Optional[str] = None) -> None:
        """Emit an instruction that must be kept even if its destinations look unused."""
        self.code.append(Ins(pred, op, args, self.loc, True))

    def asm(self, text: str, dsts: Sequence[str], srcs: Sequence[str], side_effects: bool) -> None:
        """Inline PTX (operands already substituted) that writes `dsts` and reads `srcs`; kept when
        it has side effects or something reads a destination."""
        ins = Ins(None, ":asm", (text,), self.loc, side_effects)
        ins.dsts, ins.srcs = tuple(dsts), tuple(srcs)
        self.code.append(ins)

    def new_label(self, hint: str) -> str:
        self.label_count += 1
        return f"$L_{hint}_{self.label_count}"

    def label(self, name: str) -> None:
        self.code.append(Ins(None, ":label", (name,), None, True))

    def set_loc(self, loc: Optional[Location]) -> None:
        if loc is not None and loc.line > 0:
            self.loc = loc

    def file_index(self, path: str) -> int:
        if path not in self.files:
            self.files[path] = len(self.files) + 1
        return self.files[path]

    # -- output ---------------------------------------------------------------------------------
    def eliminate_dead_code(self) -> None:
        """Drop non-root instructions whose destinations no kept instruction reads (flow-insensitive,
        so loop-carried dead cycles go too)."""
        defs: Dict[str, List[int]] = {}
        for i, ins in enumerate(self.code):
            for d in ins.dsts:
                defs.setdefault(d, []).append(i)
        live = [ins.root for ins in self.code]
        work = [i for i, ins in enumerate(self.code) if ins.root]
        seen_regs = set()
        while work:
            i = work.pop()
            for s in self.code[i].srcs:
                if s in seen_regs:
                    continue
                seen_regs.add(s)
                for j in defs.get(s, ()):
                    if not live[j]:
                        live[j] = True
                        work.append(j)
        self.code = [ins for i, ins in enumerate(self.code) if live[i]]

    def render_decls(self) -> List[str]:
        out = []
        for kind in ("pred", "b16", "b32", "b64"):
            n = self.temp_counts[kind]
            if n:
                out.append(f"\t.reg .{kind} \t{_TEMP_POOLS[kind]}<{n}>;")
            for name in self.decls[kind]:
                out.append(f"\t.reg .{kind} \t{name};")
        return out

    def render_code(self) -> List[str]:
        out: List[str] = []
        cur: Optional[Tuple[str, int, int]] = None
        for ins in self.code:
            if ins.op == ":label":
                out.append(f"{ins.args[0]}:")
                continue
            if ins.op == ":asm":
                writes = f": writes {', '.join(ins.dsts)}" if ins.dsts else ""
                out += [f"\t// begin inline asm{writes}", "\t" + ins.args[0], "\t// end inline asm"]
                continue
            loc = ins.loc
            if loc is not None:
                key = (loc.file, loc.line, loc.col)
                if key != cur:
                    cur = key
                    out.append(f"\t.loc\t{self.file_index(loc.file)} {loc.line} {loc.col + 1}")
            p = f"@{ins.pred} " if ins.pred else ""
            out.append(f"\t{p}{ins.op} {', '.join(ins.args)};" if ins.args else f"\t{p}{ins.op};")
        return out

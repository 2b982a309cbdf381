"""The operand plan of `tl.inline_asm_elementwise` (Triton's rules), shared by the frontend's checks
and the lowering.

One call of the asm handles `pack` consecutive elements of each thread. An operand (argument or
result) whose elements are narrower than 32 bits is packed: min(32 // bits, pack) elements share
one register (element k in bits [k * bits, (k + 1) * bits)), so it takes pack / that many
registers per call. The asm's `$N` operands are the outputs first, then the inputs, in that
order (result by result, argument by argument, register by register); the constraint string
lists them the same way: outputs as "=r", inputs as "r", an input tied to output N as "N".
Constraint letters give the register width: b (predicate), c (8 bits), h (16), r / f (32),
l / d (64); "~{...}" entries are clobbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from ..errors import TLXCompileError

WIDTH_OF_LETTER = {"b": 1, "c": 8, "h": 16, "r": 32, "f": 32, "l": 64, "d": 64}
LETTERS_OF_WIDTH = {1: "b", 8: "c", 16: "h", 32: "r or f", 64: "l or d"}
# an asm operand reference: $$, ${N}, $N, or a '$' followed by neither (an error)
_OPERAND = re.compile(r"\$(?:\$|\{(\d+)\}|(\d+))?")


@dataclass(frozen=True)
class Operand:
    """One register operand of one asm call: which value (result or argument index), how many
    elements it packs, its width in bits, and its constraint (a letter, or the output index an
    input is tied to)."""

    value: int
    elems: int
    bits: int
    constraint: str


@dataclass(frozen=True)
class AsmPlan:
    """The register operands of one call, outputs then inputs (the `$N` order)."""

    outputs: Tuple[Operand, ...]
    inputs: Tuple[Operand, ...]


def _registers(bits: int, pack: int, what: str) -> Tuple[int, int]:
    """(elements per register, registers per call) of an operand of `bits`-bit elements."""
    if bits == 1 and pack > 1:
        raise TLXCompileError(f"inline asm {what} is boolean: booleans cannot be packed (pack={pack})",
                              hint="pass pack=1, or convert the booleans to int8 first")
    per = min(max(32 // bits, 1), pack)
    if pack % per:
        raise TLXCompileError(f"pack={pack} does not split into registers of {per} {bits}-bit elements ({what})",
                              hint="use a power-of-two pack")
    return per, pack // per


def plan(constraints: str, arg_bits: Sequence[int], result_bits: Sequence[int], pack: int) -> AsmPlan:
    """Check `constraints` against the operands of one call and return their plan (a
    TLXCompileError says what does not match)."""
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1:
        raise TLXCompileError(f"inline asm pack must be a positive integer, got {pack!r}")
    entries = [c.strip() for c in constraints.split(",")] if constraints.strip() else []
    outs = [c for c in entries if c.startswith("=")]
    ins = [c for c in entries if not c.startswith(("=", "~"))]
    if any(e.startswith("=") for e in entries[len(outs):]):
        raise TLXCompileError(f"inline asm constraints {constraints!r}: outputs (=...) must come before the inputs")

    def operands(bits_list: Sequence[int], kind: str) -> List[Tuple[int, int, int]]:
        out = []
        for i, b in enumerate(bits_list):
            per, n = _registers(b, pack, f"{kind} {i}")
            out += [(i, per, per * b)] * n
        return out

    want_out = operands(result_bits, "result")
    want_in = operands(arg_bits, "argument")
    if len(outs) != len(want_out) or len(ins) != len(want_in):
        raise TLXCompileError(
            f"inline asm constraints {constraints!r} name {len(outs)} outputs and {len(ins)} inputs; with pack={pack} "
            f"one call has {len(want_out)} output and {len(want_in)} input registers",
            hint="one constraint per register: a result or argument narrower than 32 bits packs min(32 // bits, pack) "
                 "elements per register")

    def check(c: str, value: int, per: int, width: int, kind: str) -> Operand:
        letter = c.lstrip("=&")
        if letter.isdigit():
            k = int(letter)
            if kind == "output" or k >= len(want_out):
                raise TLXCompileError(f"inline asm constraint {c!r} ties to output {k}, which does not exist")
            if want_out[k][2] != width:
                raise TLXCompileError(f"inline asm input tied to output {k} is {width} bits, the output {want_out[k][2]}")
            return Operand(value, per, width, letter)
        if letter not in WIDTH_OF_LETTER:
            raise TLXCompileError(f"inline asm constraint {c!r} is not supported",
                                  hint="use b, c, h, r, f, l or d (or a digit for an input tied to an output)")
        if WIDTH_OF_LETTER[letter] != width:
            owner = "result" if kind == "output" else "argument"
            raise TLXCompileError(f"inline asm constraint {c!r} takes a {WIDTH_OF_LETTER[letter]}-bit register, but this "
                                  f"{kind} holds {per} element(s) of {owner} {value}: {width} bits",
                                  hint=f"use '{LETTERS_OF_WIDTH[width]}', or change pack")
        return Operand(value, per, width, letter)

    return AsmPlan(tuple(check(c, *w, "output") for c, w in zip(outs, want_out)),
                   tuple(check(c, *w, "input") for c, w in zip(ins, want_in)))


def substitute(asm: str, operands: Sequence[str]) -> str:
    """The asm text with `$N` / `${N}` replaced by operand N's register and `$$` by `$`."""
    def operand(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        digits = m.group(1) or m.group(2)
        if digits is None:
            raise TLXCompileError(f"inline asm: '$' at {m.start()} is not followed by an operand number",
                                  hint="write $$ for a '$'")
        n = int(digits)
        if n >= len(operands):
            raise TLXCompileError(f"inline asm names ${n}, but there are only {len(operands)} operands")
        return operands[n]

    return _OPERAND.sub(operand, asm)

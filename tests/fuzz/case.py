"""What one fuzz case is: the kernel's source text, its parameters (signature and host values),
the outputs to check against numpy, and the outcome it must have.

`Gen` is the generator's state for one seed: the random streams, the source being written (with
its line numbers, so a broken statement's line is known), the parameters, the checks, and the
mutation this case injects (at which of its candidate sites). The kernel families
(`families.py`) write through it.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

HEADER = ["import tlx", "import tlx.language as tl", "", "", "@tlx.jit"]
KERNEL = "kernel"
# the def line is HEADER's length + 1; the body starts on the line after it
BODY_FIRST_LINE = len(HEADER) + 2

# unit roundoff (relative error of one correctly rounded op) and the absolute error a result
# near zero may carry (half the smallest subnormal), per dtype
UNIT = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8, "i32": 0.0, "i64": 0.0}
TINY = {"fp32": 2.0 ** -150, "fp16": 2.0 ** -25, "bf16": 2.0 ** -134, "i32": 0.0, "i64": 0.0}
NP = {"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
      "i8": np.int8,
      "fp64": np.float64}
TL = {"fp32": "tl.float32", "fp16": "tl.float16", "i32": "tl.int32", "i64": "tl.int64", "u8": "tl.uint8",
      "bf16": "tl.bfloat16", "i8": "tl.int8", "fp64": "tl.float64"}


@dataclass
class Expect:
    """The outcome a case must have.

    * ``ok``: compiles, assembles, runs with no hazard, outputs match numpy;
    * ``compile_error``: a `TLXCompileError` at ``line`` of the kernel file whose message holds ``text``;
    * ``hazard``: compiles, assembles, and the interpreter reports a hazard whose kind is in ``kinds``
      (and, when ``lines`` is given, whose (first, second) lines are those; None: any line; a
      tuple: any of its lines);
    * ``hazard`` with "deadlock" among ``kinds``: a `DeadlockError` is one of the accepted outcomes;
    * ``interp_error``: compiles, assembles, and the interpreter raises `InterpreterError` at
      ``line`` with ``text`` in its message.
    """

    kind: str = "ok"
    line: Optional[int] = None
    text: str = ""
    kinds: Tuple[str, ...] = ()
    lines: Optional[Tuple[Any, Any]] = None  # each: a line, None (any) or a tuple of lines (any of them)
    why: str = ""  # the mutation, in words (printed with a failure)


@dataclass
class Check:
    """One output array and its float64 reference: elements where `ref` is NaN must still hold
    the poison (NaN, or `poison` for integer outputs); the others must be within `tol`."""

    name: str
    ref: np.ndarray
    tol: Any = 0.0
    poison: Any = None


@dataclass
class Case:
    """One generated kernel and how to run and judge it."""

    seed: int
    family: str
    mutation: Optional[str]
    source: str
    params: List[Tuple[str, Optional[str], Any]]  # (name, signature type or None for constexpr, host value)
    grid: Tuple[int, ...]
    num_warps: int
    expect: Expect
    checks: List[Check]
    fence_passes: bool = True

    @property
    def signature(self) -> Dict[str, str]:
        return {n: s for n, s, _ in self.params if s is not None}

    @property
    def constexprs(self) -> Dict[str, Any]:
        return {n: v for n, s, v in self.params if s is None}

    @property
    def divisibility(self) -> Dict[str, int]:
        """What a launch with these arguments specializes (as Triton does): 16 for a pointer to
        a 16-byte aligned array and for an integer that is a multiple of 16."""
        div = {}
        for n, s, v in self.params:
            if isinstance(v, np.ndarray) and s is not None and s.startswith("*"):
                div[n] = 16 if v.ctypes.data % 16 == 0 else 1
            elif isinstance(v, (int, np.integer)) and not isinstance(v, bool) and s is not None:
                div[n] = 16 if int(v) % 16 == 0 else 1
        return div

    @property
    def runtime_args(self) -> List[Any]:
        return [v for _, s, v in self.params if s is not None]

    def describe(self) -> str:
        e = self.expect
        what = e.kind + (f" at line {e.line} ({e.text!r})" if e.line else "")
        what += f" {list(e.kinds)}" if e.kinds else ""
        return (f"seed {self.seed}: family {self.family}, mutation {self.mutation or '-'}, expected {what}"
                f"{' — ' + e.why if e.why else ''}; grid {self.grid}, num_warps {self.num_warps}, "
                f"fence passes {'on' if self.fence_passes else 'off'}")


class Gen:
    """The state of generating one case: random streams, the source being written, parameters,
    checks, and the mutation to inject at site `site` of its candidate sites."""

    def __init__(self, seed: int, mutation: Optional[str] = None, site: int = -1):
        self.seed = seed
        self.rng = random.Random(seed)  # structure
        self.data = np.random.default_rng(seed)  # input data
        self.mutation = mutation
        self.site = site
        self.sites = 0  # candidate sites of `mutation` seen so far
        self.fired = False
        self.body: List[str] = []
        self.indent = 1
        self.params: List[Tuple[str, Optional[str], Any]] = []
        self.checks: List[Check] = []
        self.expect = Expect()
        self.fence_passes = True
        self.num_warps = 4
        self.grid: Tuple[int, ...] = (1,)
        self._names: Dict[str, int] = {}

    # ---- source --------------------------------------------------------------------------------
    def line(self, text: str) -> int:
        """Append one statement at the current indentation; returns its line number in the file."""
        self.body.append("    " * self.indent + text)
        return BODY_FIRST_LINE + len(self.body) - 1

    @property
    def next_line(self) -> int:
        return BODY_FIRST_LINE + len(self.body)

    @contextmanager
    def block(self, header: str) -> Iterator[int]:
        """`header:` and an indented body (a `pass` when the body stays empty)."""
        ln = self.line(header + ":")
        n = len(self.body)
        self.indent += 1
        try:
            yield ln
        finally:
            if len(self.body) == n:
                self.line("pass")
            self.indent -= 1

    def name(self, base: str) -> str:
        k = self._names.get(base, 0)
        self._names[base] = k + 1
        return f"{base}{k}"

    def source(self) -> str:
        names = ", ".join(n + ("" if s is not None else ": tl.constexpr") for n, s, _ in self.params)
        return "\n".join(HEADER + [f"def {KERNEL}({names}):"] + self.body) + "\n"

    # ---- parameters and checks -------------------------------------------------------------------
    def param(self, name: str, sig: Optional[str], value: Any) -> str:
        """A kernel parameter: `sig` its signature type ("*fp16", "i32", "tensordesc<...>"), None
        for a tl.constexpr; `value` its host value."""
        self.params.append((name, sig, value))
        return name

    def const(self, name: str, value: Any) -> str:
        return self.param(name, None, value)

    def check(self, name: str, ref: np.ndarray, tol: Any = 0.0, poison: Any = None) -> None:
        self.checks.append(Check(name, ref, tol, poison))

    # ---- random choices ----------------------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, seq: Sequence[Any]) -> Any:
        return seq[self.rng.randrange(len(seq))]

    def randint(self, a: int, b: int) -> int:
        return self.rng.randint(a, b)

    # ---- mutations -------------------------------------------------------------------------------
    def mutate(self, kind: str) -> bool:
        """Whether this candidate site of mutation `kind` is the one to break. Callers draw the
        same random choices whatever the answer until the site, so counting sites (site=-1) and
        breaking one (site=k) see the same kernel up to it. Call it only where the mistake can be
        written (`cond and g.mutate(...)`): a site that fires must write it."""
        if kind != self.mutation or self.fired:
            return False
        k = self.sites
        self.sites += 1
        if k == self.site:
            self.fired = True
            return True
        return False

    def expect_error(self, line: int, text: str, why: str) -> None:
        self.expect = Expect("compile_error", line=line, text=text, why=why)

    def expect_hazard(self, kinds: Sequence[str], why: str, lines: Optional[Tuple[Any, Any]] = None) -> None:
        self.expect = Expect("hazard", kinds=tuple(kinds), lines=lines, why=why)

    def expect_deadlock(self, why: str) -> None:
        self.expect = Expect("hazard", kinds=("deadlock",), why=why)

    def expect_interp_error(self, line: int, text: str, why: str) -> None:
        self.expect = Expect("interp_error", line=line, text=text, why=why)

    # ---- data --------------------------------------------------------------------------------------
    def floats(self, shape: Sequence[int], dt: str, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
        """Random values exactly representable in `dt` (a numpy array of dt's storage type; bf16:
        uint16 bit patterns)."""
        x = self.data.uniform(lo, hi, tuple(shape))
        return bf16_bits(x) if dt == "bf16" else x.astype(NP[dt])

    def ints(self, shape: Sequence[int], lo: int = -100, hi: int = 100, dt: str = "i32") -> np.ndarray:
        return self.data.integers(lo, hi + 1, tuple(shape)).astype(NP[dt])

    def data_of(self, shape: Sequence[int], dt: str) -> np.ndarray:
        return self.ints(shape) if dt in ("i32", "i64") else self.floats(shape, dt)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float values rounded to bf16 (to nearest even), as the uint16 bit patterns the interpreter
    and the runtime take for bf16 arrays."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def values(arr: np.ndarray, dt: str) -> np.ndarray:
    """The float64 values of a host array of kernel dtype `dt` (bf16: uint16 bit patterns)."""
    if dt == "bf16":
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return arr.astype(np.float64)


def poison(shape: Sequence[int], dt: str) -> np.ndarray:
    """An output buffer filled with the poison value of its dtype (NaN, or -7 for integers)."""
    return np.full(tuple(shape), np.nan if dt.startswith("fp") else POISON_INT, NP[dt])


POISON_INT = -7


def dot_tol(a: np.ndarray, b: np.ndarray, out: str = "fp32", operand_rel: float = 0.0) -> np.ndarray:
    """The error bound of an fp32-accumulated product of operands a @ b (float64 values),
    rounded to `out`: K fp32 additions, each off by at most one unit roundoff of the running
    |sums|, plus `operand_rel` of each |product| (operands the hardware narrows, as tf32)."""
    k = a.shape[1]
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return ((k + 1) * UNIT["fp32"] + operand_rel) * mag + UNIT[out] * np.abs(ref) + TINY[out] + 1e-30

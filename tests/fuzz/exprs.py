"""Random element-wise computations on register tensors, written as kernel statements, with their
float64 reference and an error bound per element.

Every value carries its exact-arithmetic reference `v` (float64, or int64 holding the wrapped
int32 value) and a bound `err` on how far the kernel's value may be from it: each correctly
rounded fp op adds one unit roundoff of its result (and half a subnormal), and the operand errors
propagate through the op's Lipschitz constant (|a|eb + |b|ea + ea*eb for a product, the larger of
the two for max/min, at most 1 for exp(-|x|), 1/2 for sqrt(|x| + 1)). Integer arithmetic is
exact (it wraps like int32). Conditions of `tl.where` come only from exact values, so the
reference never picks a side the kernel may not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .case import TL, TINY, UNIT, Gen

MAXV = 1.0e3  # magnitude cap of float values (fp16 holds up to 65504; products stay far from it)


def wrap32(x: np.ndarray) -> np.ndarray:
    """int32 wrap-around of int64 values."""
    return ((x.astype(np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31


def trunc_div(a: np.ndarray, c: int) -> np.ndarray:
    """C (and PTX div.s32) division: the quotient rounded toward zero."""
    q = np.abs(a) // abs(c)
    return np.where((a < 0) != (c < 0), -q, q)


@dataclass
class Val:
    """A runtime value of the kernel: its name in the source, reference, error bound, dtype."""

    code: str
    v: np.ndarray
    err: np.ndarray
    dt: str

    @property
    def is_float(self) -> bool:
        return self.dt.startswith("fp")

    @property
    def mag(self) -> float:
        return float(np.max(np.abs(self.v) + self.err)) if self.v.size else 0.0


def rnd(v: np.ndarray, dt: str, ulps: float = 1.01) -> np.ndarray:
    """The error one correctly rounded result in `dt` may add (a little over one unit roundoff:
    fp16 ops round an fp32 result again)."""
    return ulps * UNIT[dt] * np.abs(v) + TINY[dt]


def join_dt(a: str, b: str) -> str:
    """Triton's result type of a binary op on two tensors of these dtypes (the subset used here)."""
    if a == b:
        return a
    if "fp32" in (a, b):
        return "fp32"
    if "fp16" in (a, b):
        return "fp16"
    return "i32"


class Exprs:
    """Writes random element-wise statements into `g`'s kernel, over a pool of values of one
    shape, and keeps their references."""

    def __init__(self, g: Gen, pool: Sequence[Val], conds: Sequence[Tuple[str, np.ndarray]] = ()):
        self.g = g
        self.pool: List[Val] = list(pool)
        self.conds: List[Tuple[str, np.ndarray]] = list(conds)  # exact boolean tensors: (code, value)

    def emit(self, expr: str, v: np.ndarray, err: np.ndarray, dt: str) -> Val:
        name = self.g.name("v")
        self.g.line(f"{name} = {expr}")
        val = Val(name, v, err, dt)
        self.pool.append(val)
        return val

    def convert(self, a: Val, dt: str) -> Val:
        """`a.to(dt)`, for dt in fp32 / fp16 (an exact widening or a rounding)."""
        if a.dt == dt:
            return a
        if dt == "fp32":
            err = a.err + (rnd(a.v, "fp32") if not a.is_float else 0.0)
        else:
            err = a.err + rnd(a.v, dt)
        return self.emit(f"{a.code}.to({TL[dt]})", a.v.astype(np.float64), err, dt)

    # ---- one random op ----------------------------------------------------------------------------
    def step(self) -> Optional[Val]:
        """Add one random statement; None when the drawn op does not fit (magnitudes)."""
        g = self.g
        a = g.pick(self.pool)
        b = g.pick(self.pool)
        if a.is_float or b.is_float:
            return self._float_op(a, b)
        return self._int_op(a, b)

    def _float_op(self, a: Val, b: Val) -> Optional[Val]:
        g = self.g
        if not a.is_float:
            a, b = b, a
        if not b.is_float:
            if b.mag >= 2048:
                return None
            b = self.convert(b, "fp32" if g.chance(0.5) else "fp16")
        dt = join_dt(a.dt, b.dt)
        av, bv, ea, eb = a.v, b.v, a.err, b.err
        op = g.pick(["add", "sub", "mul", "max", "min", "where", "neg", "abs", "scale", "shift", "exp", "sqrt",
                     "cast", "div", "fma", "clamp", "exp2", "log", "sigmoid", "floor", "toint"])
        if op in ("add", "sub"):
            v = av + bv if op == "add" else av - bv
            if np.max(np.abs(v)) > MAXV:
                return None
            return self.emit(f"{a.code} {'+' if op == 'add' else '-'} {b.code}", v, ea + eb + rnd(v, dt), dt)
        if op == "mul":
            if a.mag * b.mag > MAXV:
                return None
            v = av * bv
            return self.emit(f"{a.code} * {b.code}", v, np.abs(av) * eb + np.abs(bv) * ea + ea * eb + rnd(v, dt), dt)
        if op in ("max", "min"):
            fn = np.maximum if op == "max" else np.minimum
            return self.emit(f"tl.{'maximum' if op == 'max' else 'minimum'}({a.code}, {b.code})", fn(av, bv),
                             np.maximum(ea, eb), dt)
        if op == "where":
            if not self.conds:
                return None
            code, c = g.pick(self.conds)
            return self.emit(f"tl.where({code}, {a.code}, {b.code})", np.where(c, av, bv), np.where(c, ea, eb), dt)
        if op == "neg":
            return self.emit(f"-{a.code}", -av, ea, a.dt)
        if op == "abs":
            return self.emit(f"tl.abs({a.code})", np.abs(av), ea, a.dt)
        if op == "scale":
            c = g.pick([0.5, 2.0, -0.25, 1.5, -3.0])
            v = av * c
            if np.max(np.abs(v)) > MAXV:
                return None
            # a power of two scales exactly, unless the result is subnormal
            return self.emit(f"{a.code} * {c}", v, abs(c) * ea + (rnd(v, a.dt) if c in (1.5, -3.0) else TINY[a.dt]),
                             a.dt)
        if op == "shift":
            c = g.pick([1.0, -0.5, 0.75, 4.0])
            v = av + c
            if np.max(np.abs(v)) > MAXV:
                return None
            return self.emit(f"{a.code} + {c}", v, ea + rnd(v, a.dt), a.dt)
        if op == "exp":
            x = a if a.dt == "fp32" else self.convert(a, "fp32")
            v = np.exp(-np.abs(x.v))
            return self.emit(f"tl.exp(-tl.abs({x.code}))", v, x.err + rnd(v, "fp32", 4.0), "fp32")
        if op == "sqrt":
            x = a if a.dt == "fp32" else self.convert(a, "fp32")
            inner = np.abs(x.v) + 1.0
            v = np.sqrt(inner)
            e1 = x.err + rnd(inner, "fp32")
            return self.emit(f"tl.sqrt(tl.abs({x.code}) + 1.0)", v, 0.5 * e1 + rnd(v, "fp32", 2.0), "fp32")
        if op == "div":  # fp16 operands divide in fp32 (Triton's rule); the divisor is >= 1
            x = a if a.dt == "fp32" else self.convert(a, "fp32")
            d = np.abs(bv) + 1.0
            ed = eb + rnd(d, b.dt)
            v = x.v / d
            return self.emit(f"{x.code} / (tl.abs({b.code}) + 1.0)", v, x.err + np.abs(x.v) * ed + rnd(v, "fp32"),
                             "fp32")
        if op == "fma":  # one rounding of a * b + c (fp32 operands)
            c = self.g.pick(self.pool)
            if not c.is_float or a.mag * b.mag + c.mag > MAXV:
                return None
            xa, xb, xc = (v if v.dt == "fp32" else self.convert(v, "fp32") for v in (a, b, c))
            v = xa.v * xb.v + xc.v
            err = np.abs(xa.v) * xb.err + np.abs(xb.v) * xa.err + xa.err * xb.err + xc.err + rnd(v, "fp32")
            return self.emit(f"tl.fma({xa.code}, {xb.code}, {xc.code})", v, err, "fp32")
        if op == "clamp":  # 1-Lipschitz, no rounding
            return self.emit(f"tl.clamp({a.code}, -1.0, 1.5)", np.clip(av, -1.0, 1.5), ea, a.dt)
        if op in ("exp2", "log", "sigmoid"):
            x = a if a.dt == "fp32" else self.convert(a, "fp32")
            if op == "exp2":  # Lipschitz ln 2 on x <= 0
                v = np.exp2(-np.abs(x.v))
                return self.emit(f"tl.exp2(-tl.abs({x.code}))", v, x.err + rnd(v, "fp32", 4.0), "fp32")
            if op == "log":  # Lipschitz 1 on [1, inf); the inner add rounds once
                inner = np.abs(x.v) + 1.0
                v = np.log(inner)
                e1 = x.err + rnd(inner, "fp32")
                return self.emit(f"tl.log(tl.abs({x.code}) + 1.0)", v, e1 + rnd(v, "fp32", 4.0) + 2.0 ** -24, "fp32")
            v = 1.0 / (1.0 + np.exp(-x.v))  # Lipschitz 1/4
            return self.emit(f"tl.sigmoid({x.code})", v, 0.25 * x.err + rnd(v, "fp32", 8.0), "fp32")
        if op in ("floor", "toint"):  # discontinuous: only on exact values (in int32's range)
            if np.any(ea) or a.dt != "fp32" or not np.all(np.abs(av) < 2.0 ** 31):
                return None
            if op == "floor":
                return self.emit(f"tl.floor({a.code})", np.floor(av), np.zeros(av.shape), "fp32")
            return self.emit(f"{a.code}.to(tl.int32)", np.trunc(av).astype(np.int64), np.zeros(av.shape), "i32")
        # cast
        return self.convert(a, "fp16" if a.dt == "fp32" else "fp32")

    def _int_op(self, a: Val, b: Val) -> Optional[Val]:
        g = self.g
        op = g.pick(["add", "sub", "mul", "and", "or", "xor", "max", "min", "shr", "shl", "div", "mod", "where",
                     "neg", "abs", "cmp", "tofloat"])
        z = np.zeros(a.v.shape)
        if op in ("add", "sub", "mul", "and", "or", "xor"):
            sym = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^"}[op]
            fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and, "or": np.bitwise_or,
                  "xor": np.bitwise_xor}[op]
            return self.emit(f"{a.code} {sym} {b.code}", wrap32(fn(a.v, b.v)), z, "i32")
        if op in ("max", "min"):
            fn = np.maximum if op == "max" else np.minimum
            name = "maximum" if op == "max" else "minimum"
            return self.emit(f"tl.{name}({a.code}, {b.code})", fn(a.v, b.v), z, "i32")
        if op == "shr":
            k = g.randint(0, 6)
            return self.emit(f"{a.code} >> {k}", a.v >> k, z, "i32")
        if op == "shl":
            k = g.randint(0, 6)
            return self.emit(f"{a.code} << {k}", wrap32(a.v << k), z, "i32")
        if op in ("div", "mod"):
            c = g.pick([3, 5, 7, -4])
            q = trunc_div(a.v, c)
            if op == "div":
                return self.emit(f"{a.code} // {c}", q, z, "i32")
            return self.emit(f"{a.code} % {c}", a.v - q * c, z, "i32")
        if op == "where":
            if not self.conds:
                return None
            code, c = g.pick(self.conds)
            return self.emit(f"tl.where({code}, {a.code}, {b.code})", np.where(c, a.v, b.v), z, "i32")
        if op == "neg":
            return self.emit(f"-{a.code}", wrap32(-a.v), z, "i32")
        if op == "abs":
            return self.emit(f"tl.abs({a.code})", wrap32(np.abs(a.v)), z, "i32")
        if op == "cmp":
            return self.emit(f"({a.code} > {b.code}).to(tl.int32)", (a.v > b.v).astype(np.int64), z, "i32")
        dt = "fp16" if a.mag < 2048 and g.chance(0.5) else "fp32"
        return self.convert(a, dt)

    def grow(self, n: int) -> Val:
        """Add about `n` statements; returns the last value made (or the last of the pool)."""
        last = self.pool[-1]
        for _ in range(n):
            for _ in range(4):
                v = self.step()
                if v is not None:
                    last = v
                    break
        return last

    def cond_of_index(self, idx_code: str, idx: np.ndarray) -> None:
        """Register exact conditions on an integer index tensor (`offs % k == r`, `offs < c`)."""
        g = self.g
        k = g.pick([2, 3, 4])
        r = g.randint(0, k - 1)
        self.conds.append((f"({idx_code} % {k}) == {r}", (idx % k) == r))
        c = g.randint(0, int(idx.max()) + 1) if idx.size else 0
        self.conds.append((f"{idx_code} < {c}", idx < c))

    def cond_of_inputs(self) -> None:
        """Register exact conditions on exact values of the pool (inputs: their error is 0)."""
        for val in [p for p in self.pool if not np.any(p.err)][:2]:
            c = self.g.pick([0.0, 0.5, -1.0]) if val.is_float else self.g.pick([0, 10, -20])
            if val.is_float and np.any(val.v == c):
                continue
            self.conds.append((f"({val.code} > {c})", val.v > c))

    def result(self, dt: str) -> Val:
        """A final value of dtype `dt` (fp32, fp16 or i32) made from the pool's last value."""
        last = self.pool[-1]
        if dt == "i32":
            ints = [p for p in self.pool if p.dt == "i32"]
            if ints:
                return ints[-1]
            raise ValueError("no integer value in the pool")
        if not last.is_float:
            if last.mag >= 2048 and dt == "fp16":
                floats = [p for p in self.pool if p.is_float]
                last = floats[-1] if floats else self.convert(last, "fp32")
        return self.convert(last, dt)

"""`tl.math`: elementwise math functions (fp32 / fp64 inputs unless stated)."""

from __future__ import annotations

from typing import Any

from . import semantic
from .core import builtin


def _f32f64(name: str, doc: str):
    def fn(x: Any) -> Any:
        return semantic.unary_math(name, x)
    fn.__name__ = name
    fn.__doc__ = doc
    return builtin(fn)


exp = _f32f64("exp", "e ** x")
exp2 = _f32f64("exp2", "2 ** x")
log = _f32f64("log", "natural logarithm")
log2 = _f32f64("log2", "base-2 logarithm")
sqrt = _f32f64("sqrt", "square root")
rsqrt = _f32f64("rsqrt", "1 / sqrt(x)")
sin = _f32f64("sin", "sine")
cos = _f32f64("cos", "cosine")
erf = _f32f64("erf", "error function")
tanh = _f32f64("tanh", "hyperbolic tangent")


def _float(name: str, doc: str):
    def fn(x: Any) -> Any:
        return semantic.unary_math(name, x, "float")
    fn.__name__ = name
    fn.__doc__ = doc
    return builtin(fn)


floor = _float("floor", "round down")
ceil = _float("ceil", "round up")


@builtin
def abs(x: Any) -> Any:
    """|x| for integers and floats."""
    return semantic.abs_(x)


@builtin
def fma(x: Any, y: Any, z: Any) -> Any:
    """x * y + z, fused."""
    return semantic.fma(x, y, z)


@builtin
def sigmoid(x: Any) -> Any:
    """1 / (1 + exp(-x))."""
    x = semantic.to_tensor(x)
    return 1.0 / (1.0 + semantic.unary_math("exp", semantic.minus(x)))


@builtin
def div_rn(x: Any, y: Any) -> Any:
    """x / y, IEEE round-to-nearest."""
    return semantic.truediv(x, y)


@builtin
def max(x: Any, y: Any) -> Any:
    return semantic.maximum(x, y)


@builtin
def min(x: Any, y: Any) -> Any:
    return semantic.minimum(x, y)

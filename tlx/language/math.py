"""`tl.math`: elementwise math functions (fp32 / fp64 inputs unless stated)."""

from __future__ import annotations

from typing import Any

from . import semantic
from .core import builtin


def _unary(name: str, doc: str, allowed: str = "f32f64"):
    """The builtin `math.<name>` of one operand (`allowed`: see semantic.unary_math)."""
    def fn(x: Any) -> Any:
        return semantic.unary_math(name, x, allowed)
    fn.__name__ = name
    fn.__doc__ = doc
    return builtin(fn)


exp = _unary("exp", "e ** x")
exp2 = _unary("exp2", "2 ** x")
log = _unary("log", "natural logarithm")
log2 = _unary("log2", "base-2 logarithm")
sqrt = _unary("sqrt", "square root")
rsqrt = _unary("rsqrt", "1 / sqrt(x)")
sin = _unary("sin", "sine")
cos = _unary("cos", "cosine")
erf = _unary("erf", "error function")
tanh = _unary("tanh", "hyperbolic tangent")
floor = _unary("floor", "round down", "float")
ceil = _unary("ceil", "round up", "float")


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

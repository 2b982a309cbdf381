"""Integer references for the division tests: C's (and PTX's div / rem) rounding toward zero,
which Python's and numpy's floor division are not."""

from __future__ import annotations

from typing import Tuple, TypeVar, Union

import numpy as np

Int = TypeVar("Int", int, np.ndarray)


def truncating_divmod(n: Int, d: Union[int, np.ndarray]) -> Tuple[Int, Int]:
    """Quotient rounded toward zero and the remainder with the dividend's sign, for Python ints
    (exact at any width) or numpy integer arrays (elementwise; use int64 for 32-bit operands)."""
    q = abs(n) // abs(d)
    negative = (n < 0) != (d < 0)
    q = np.where(negative, -q, q) if isinstance(q, np.ndarray) else (-q if negative else q)
    return q, n - q * d

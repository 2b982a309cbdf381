"""Compile options and the target they name."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Tuple

from .errors import TLXCompileError


@dataclass(frozen=True)
class CompileOptions:
    """Everything besides the kernel's IR that changes what the compiler emits (so all of it is
    part of the cache key).

    * ``target`` — ``"sm_90a"`` (Hopper, the supported target) or an older ``"sm_80"``-style
      name (compiles with no proxy fences at all).
    * ``num_warps`` — warps of the default partition; ``num_ctas`` / ``cluster`` — the CTA cluster.
    * ``fence_passes`` — False runs none of the three fence mechanisms (user fences stay).
    * ``verify_each_pass`` — run the IR verifier after every pass (tests switch it on).
    * ``print_ir_after_all`` — print the IR after each pass as it goes (``TLX_PRINT_IR_AFTER_ALL=1``).
    * ``assemble`` — run ptxas when it can be found (cubin + resource report).
    """

    target: str = "sm_90a"
    num_warps: int = 4
    num_ctas: int = 1
    cluster: Tuple[int, int, int] = (1, 1, 1)
    fence_passes: bool = True
    verify_each_pass: bool = False
    print_ir_after_all: bool = False
    assemble: bool = True
    maxnreg: Optional[int] = None
    disabled_passes: Tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not re.fullmatch(r"sm_\d{2,3}a?", self.target):
            raise TLXCompileError(f"unknown target '{self.target}'", hint="use target='sm_90a'")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise TLXCompileError(f"num_warps={self.num_warps} is not supported",
                                  hint="use num_warps = 1, 2, 4, 8 or 16")
        c = tuple(self.cluster)
        if len(c) != 3 or not all(isinstance(d, int) and d >= 1 for d in c):
            raise TLXCompileError(f"ctas_per_cga={self.cluster!r} must be three positive ints",
                                  hint="e.g. ctas_per_cga=(2, 1, 1): clusters of 2 CTAs along x")
        if c[0] * c[1] * c[2] > 8:
            raise TLXCompileError(f"ctas_per_cga={c} has {c[0] * c[1] * c[2]} CTAs; a portable cluster has at most 8",
                                  hint="use a cluster of at most 8 CTAs")
        if not isinstance(self.num_ctas, int) or self.num_ctas < 1:
            raise TLXCompileError(f"num_ctas={self.num_ctas!r} must be a positive int", hint="leave it at 1")
        # num_ctas > 1 is Triton's split of one program's tensors over the CTAs of a cluster: a
        # performance choice that leaves every result the same. tlx runs each program in one CTA
        # (TLX kernels address clusters explicitly with ctas_per_cga), so it is accepted as given.

    @property
    def capability(self) -> int:
        """The compute capability as an integer (90 for sm_90a)."""
        return int(re.fullmatch(r"sm_(\d+)a?", self.target).group(1))  # type: ignore[union-attr]

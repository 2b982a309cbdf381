"""What the kernel families share: warp counts, element sizes, user fences and the mistakes that fit
anywhere, TMA row pitches and host descriptors."""

from __future__ import annotations

from typing import Tuple

import numpy as np

import tlx

from .case import Gen

WARPS = (1, 2, 4, 4, 8)  # num_warps of kernels without wgmma (which needs whole warpgroups)
SIZE = {"fp32": 4, "fp16": 2, "bf16": 2, "i32": 4, "i8": 1, "u8": 1}


def user_fence(g: Gen, p: float = 0.15) -> None:
    """Sometimes a user fence (async_shared, rarely gpu): harmless anywhere outside a divergent
    branch; the passes must keep or explain it and the interpreter must still see no hazard."""
    if g.chance(p):
        g.line('tlx.fence("async_shared")' if g.chance(0.85) else f'tlx.fence("{g.pick(["gpu", "sys"])}")')


def generic_mistakes(g: Gen) -> None:
    """Sites of mistakes that fit between any two statements."""
    if g.mutate("undefined_name"):
        ln = g.line("v_bad = undefined_thing + 1")
        g.expect_error(ln, "name 'undefined_thing' is not defined", "a name that is never defined")
    if g.mutate("arange_not_pow2"):
        ln = g.line("r_bad = tl.arange(0, 48)")
        g.expect_error(ln, "power-of-two", "tl.arange over 48 elements")


def tile_ptrs(rows: str, cols: str, ld: str) -> str:
    """The offsets of a row-major tile: rows[:, None] * ld + cols[None, :]."""
    return f"{rows}[:, None] * {ld} + {cols}[None, :]"


def pitch(w: int, dt: str) -> int:
    """A row pitch >= w whose bytes are a multiple of 16 (the TMA stride rule)."""
    per = 16 // SIZE[dt]
    return -(-w // per) * per


def host_desc(arr: np.ndarray, h: int, w: int, block: Tuple[int, int]) -> tlx.TensorDescriptor:
    """A host TMA descriptor over the first h x w elements of a row-padded 2-D array."""
    return tlx.TensorDescriptor(arr, [h, w], [arr.shape[1], 1], list(block))

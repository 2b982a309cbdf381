"""What the ops that read across a warp's lanes compute (`tlx.vote_ballot_sync`, `tlx.warp_redux`),
on numpy values; the executor's handlers call these.

A warp-level op combines register r of the 32 lanes of one warp. For a block tensor, which
elements those are is the tensor's distributed layout (the interpreter runs after the layout
pass, so it reads the same layout the code generator uses): element groups come from the
layout's linear map, and every copy of an element (a layout may hold one element in several
lanes or warps) gets its group's value. For a scalar computed per thread (from `tlx.thread_id`)
a group is a warp's 32 threads.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional, Tuple

import numpy as np

from tlx.compiler.analysis import layout_math as LM
from tlx.compiler.ir.core import Location
from tlx.compiler.ir.layouts import DistributedLayout

from .memory import InterpreterError

REDUCE = {"max": np.fmax, "min": np.fmin, "abs_max": np.fmax, "abs_min": np.fmin}  # NaN lanes ignored
_LANE_BITS = np.uint64(1) << np.arange(32, dtype=np.uint64)


@lru_cache(maxsize=256)
def lane_groups(layout: DistributedLayout, shape: Tuple[int, ...], num_warps: int) -> Tuple[np.ndarray, ...]:
    """Coordinates of the element held by (warp, register, lane) under `layout`, as one index
    array per dimension, each of shape (warps, registers, 32)."""
    m = LM.to_map(layout, shape)
    if m.num_lanes != 32:
        raise ValueError(f"layout {layout} spans {m.num_lanes} lanes, not a warp of 32")
    layout_warps = 1 << len(m.warp)
    warps = max(num_warps, layout_warps)
    coords = np.zeros((warps, m.num_regs, 32, len(shape)), dtype=np.int64)
    for w in range(warps):
        for r in range(m.num_regs):
            for lane in range(32):
                coords[w, r, lane] = m.coord(r, lane, w % layout_warps)
    return tuple(coords[..., d] for d in range(len(shape)))


def ballots(bits: np.ndarray) -> np.ndarray:
    """The ballot of each group of 32 booleans (the last axis) as uint32: bit l = lane l."""
    return (bits.astype(np.uint64) * _LANE_BITS).sum(axis=-1).astype(np.uint32)


def check_vote_mask(executing: np.ndarray, mask: int, loc: Optional[Location]) -> None:
    """Every lane that executes a vote (`executing`: warps x 32 booleans) is in `mask`, and every
    lane in `mask` of a warp that votes executes it (else the hardware's behaviour is undefined: a
    named lane that never arrives hangs the warp)."""
    named = (np.uint64(mask) >> np.arange(32, dtype=np.uint64)) & np.uint64(1) == 1
    for w, lanes in enumerate(executing):
        if not lanes.any():
            continue
        extra = np.flatnonzero(lanes & ~named)
        missing = np.flatnonzero(named & ~lanes)
        if extra.size or missing.size:
            what = (f"lane {int(extra[0])} executes it but is not in the mask" if extra.size
                    else f"lane {int(missing[0])} is in the mask but does not execute it")
            raise InterpreterError(f"vote_ballot_sync with mask {mask:#010x} in warp {w}: {what}", loc,
                                   hint="the mask must name exactly the lanes that execute the vote "
                                        "(0xFFFFFFFF outside thread-divergent branches)")


def _per_register(x: np.ndarray, layout: DistributedLayout, num_warps: int, combine, dtype) -> np.ndarray:
    """Every element of tensor `x` replaced by `combine` (over the last axis) of the values of its
    register in the 32 lanes of its warp."""
    idx = lane_groups(layout, tuple(x.shape), num_warps)
    grouped = x[idx]
    out = np.zeros(x.shape, dtype=dtype)
    out[idx] = np.broadcast_to(combine(grouped)[..., None], grouped.shape)
    return out


def ballot_tensor(pred: np.ndarray, layout: DistributedLayout, num_warps: int) -> np.ndarray:
    """The ballot of every element of a boolean tensor: the bits of its register's lanes (uint32)."""
    return _per_register(pred, layout, num_warps, ballots, np.uint32)


def redux_tensor(x: np.ndarray, kind: str, layout: DistributedLayout, num_warps: int) -> np.ndarray:
    """Every element of a float32 tensor replaced by the reduction of its register over its warp."""
    if kind.startswith("abs_"):
        x = np.abs(x)
    return _per_register(x, layout, num_warps, lambda g: REDUCE[kind].reduce(g, axis=-1), np.float32)


def redux_per_thread(x: np.ndarray, kind: str) -> np.ndarray:
    """A per-thread float32 scalar (one value per thread) reduced over each warp, per thread."""
    if kind.startswith("abs_"):
        x = np.abs(x)
    red = REDUCE[kind].reduce(x.reshape(-1, 32), axis=-1)
    return np.repeat(red, 32).astype(np.float32)


@lru_cache(maxsize=256)
def element_owners(layout: DistributedLayout, shape: Tuple[int, ...], num_warps: int) -> np.ndarray:
    """For each element of a `shape` tensor under `layout`, the partition thread (warp * 32 + lane)
    whose copy is the one accessed: of the threads holding the same element, the one whose lane
    and warp bits that only copy elements are zero (the code generator's owner predicate)."""
    m = LM.to_map(layout, shape)
    lane_free, warp_free = m.free_lane_mask(), m.free_warp_mask()
    layout_warps = 1 << len(m.warp)
    owners = np.full(shape, -1, dtype=np.int64)
    for w in range(min(num_warps, layout_warps)):
        if w & warp_free:
            continue
        for lane in range(32):
            if lane & lane_free:
                continue
            for r in range(m.num_regs):
                owners[tuple(m.coord(r, lane, w))] = w * 32 + lane
    assert (owners >= 0).all(), f"layout {layout} leaves elements of {shape} without an owner"
    return owners

"""Interpreter semantics of the ops that read across a warp's lanes (`tlx.vote_ballot_sync`,
`tlx.warp_redux`) and the refusal of inline PTX.

A warp-level op combines register r of the 32 lanes of one warp. For a block tensor, which
elements those are is the tensor's distributed layout (the interpreter runs after the layout
pass, so it reads the same layout the code generator uses): element groups are computed from
the layout's linear map, and every copy of an element (a layout may hold one element in
several lanes or warps) gets its group's value. For a scalar computed per thread (from
`tlx.thread_id`) a group is a warp's 32 threads; a uniform scalar is the same in every lane.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Tuple

import numpy as np

from tlx.compiler.codegen import layout_math as LM
from tlx.compiler.ir import types as T

from .executor import _scalar_or, _set, _varying, handler
from .memory import InterpreterError


@lru_cache(maxsize=256)
def _lane_groups(layout, shape: Tuple[int, ...], num_warps: int) -> Tuple[Tuple[np.ndarray, ...], int]:
    """Coordinates of the element held by (warp, register, lane), as one index array per
    dimension of shape (warps, registers, 32), and the number of registers."""
    m = LM.to_map(layout, shape)
    if m.num_lanes != 32:
        raise ValueError(f"layout {layout} spans {m.num_lanes} lanes, not a warp of 32")
    warps = max(num_warps, 1 << len(m.warp))
    nregs = m.num_regs
    coords = np.zeros((warps, nregs, 32, len(shape)), dtype=np.int64)
    for w in range(warps):
        for r in range(nregs):
            for lane in range(32):
                coords[w, r, lane] = m.coord(r, lane, w % (1 << len(m.warp)))
    return tuple(coords[..., d] for d in range(len(shape))), nregs


def _groups(it, th, op, value: np.ndarray):
    """(value grouped as (warps, registers, 32), the coordinate index arrays) of a tensor operand."""
    t = op.operands[0].type
    if t.layout is None:
        raise InterpreterError(f"{op.name} on a tensor needs its layout: run the layout pass first", op.loc)
    if th.active is not None:
        raise InterpreterError(f"{op.name} on a tensor inside a branch that only some threads take is not modelled",
                               op.loc, hint="keep warp-level ops on tensors outside thread-divergent branches")
    idx, _ = _lane_groups(t.layout, tuple(t.shape), th.agent.num_threads // 32)
    return value[idx], idx


def _executing(th) -> np.ndarray:
    """Which threads of the partition execute the op, as (warps, 32) booleans."""
    n = th.agent.num_threads
    act = np.ones(n, dtype=bool) if th.active is None else np.asarray(th.active, dtype=bool)
    return act.reshape(n // 32, 32)


def _check_mask(op, executing: np.ndarray, mask: int) -> None:
    """Every lane that executes the vote is named by the mask and every named lane executes it
    (else the hardware's behaviour is undefined: a named lane that never arrives hangs the warp)."""
    named = np.array([(mask >> lane) & 1 for lane in range(32)], dtype=bool)
    for w, lanes in enumerate(executing):
        if not lanes.any():
            continue
        extra = np.flatnonzero(lanes & ~named)
        missing = np.flatnonzero(named & ~lanes)
        if extra.size or missing.size:
            what = (f"lane {int(extra[0])} executes it but is not in the mask" if extra.size
                    else f"lane {int(missing[0])} is in the mask but does not execute it")
            raise InterpreterError(f"vote_ballot_sync with mask {mask:#010x} in warp {w}: {what}", op.loc,
                                   hint="the mask must name exactly the lanes that execute the vote "
                                        "(0xFFFFFFFF outside thread-divergent branches)")


_LANE_BITS = (np.uint64(1) << np.arange(32, dtype=np.uint64))


def _ballot(bits: np.ndarray) -> np.ndarray:
    """Ballots of groups of 32 booleans (last axis) as uint32."""
    return (bits.astype(np.uint64) * _LANE_BITS).sum(axis=-1).astype(np.uint32)


@handler("tlx.vote_ballot_sync")
def _vote_ballot(it, th, op):
    mask = int(op.attrs["mask"])
    p = th.env[op.arg("pred")]
    rt = op.result.type
    ex = _executing(th)
    _check_mask(op, ex, mask)
    if isinstance(rt, T.TensorType):
        grouped, idx = _groups(it, th, op, np.asarray(p, dtype=bool))
        ballots = _ballot(grouped)  # (warps, registers)
        out = np.zeros(rt.shape, dtype=np.uint32)
        out[idx] = np.broadcast_to(ballots[..., None], grouped.shape)
        _set(th, op, _scalar_or(out.view(np.int32), rt))
        return
    per_thread = np.broadcast_to(np.asarray(p, dtype=bool), (ex.size,)).reshape(ex.shape) & ex
    ballots = _ballot(per_thread).view(np.int32)  # one per warp
    if th.active is None and (ballots == ballots[0]).all():
        _set(th, op, ballots[0])  # the same in every lane: a uniform scalar
        return
    _set(th, op, _scalar_or(np.repeat(ballots, 32), rt))


_REDUCE = {"max": np.fmax, "min": np.fmin, "abs_max": np.fmax, "abs_min": np.fmin}


@handler("tlx.warp_redux")
def _warp_redux(it, th, op):
    kind = op.attrs["kind"]
    x = np.asarray(th.env[op.arg("src")], dtype=np.float32)
    if kind.startswith("abs_"):
        x = np.abs(x)  # the sign bit cleared
    f = _REDUCE[kind]
    rt = op.result.type
    if isinstance(rt, T.TensorType):
        grouped, idx = _groups(it, th, op, x)
        red = f.reduce(grouped, axis=-1)  # NaN only where every lane holds NaN
        out = np.zeros(rt.shape, dtype=np.float32)
        out[idx] = np.broadcast_to(red[..., None], grouped.shape)
        _set(th, op, out)
        return
    if not _varying(x):
        _set(th, op, np.float32(x))
        return
    ex = _executing(th)
    if not ex.all():
        raise InterpreterError("warp_redux inside a branch that only some threads take: the lanes that do not "
                               "take it never contribute (the hardware's behaviour is undefined)", op.loc)
    red = f.reduce(x.reshape(ex.shape), axis=-1)
    _set(th, op, np.repeat(red, 32).astype(np.float32))


@handler("tt.elementwise_inline_asm")
def _inline_asm(it, th, op):
    raise InterpreterError("inline PTX (tl.inline_asm_elementwise) cannot run on the CPU interpreter", op.loc,
                           hint="run the kernel on the GPU, or write the computation with tl operations for the "
                                "interpreter")

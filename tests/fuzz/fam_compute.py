"""Element-wise and reduction kernels."""

from __future__ import annotations

import numpy as np

from .case import UNIT, Gen, poison
from .common import WARPS, generic_mistakes, user_fence
from .exprs import Exprs, Val, rnd, wrap32


def elementwise(g: Gen) -> None:
    """1-D blocks over `grid` programs, masked loads of 1-3 inputs, a random computation, a masked
    store; n is drawn so the last block is usually partial."""
    BLOCK = g.pick([16, 32, 64, 128, 256])
    grid = g.randint(1, 3)
    g.grid = (grid,)
    g.num_warps = g.pick(WARPS)
    total = grid * BLOCK
    n = g.randint(max(1, total - BLOCK + 1), total) if g.chance(0.8) else total
    g.const("BLOCK", BLOCK)
    g.line("pid = tl.program_id(0)")
    g.line("offs = pid * BLOCK + tl.arange(0, BLOCK)")
    g.line("mask = offs < n")
    idx = np.arange(total)
    pool = []
    for k in range(g.randint(1, 3)):
        dt = g.pick(["fp32", "fp16", "i32"])
        x = g.data_of((n,), dt)
        name = g.param(f"x{k}_ptr", "*" + dt, x)
        v = np.zeros(total)
        v[:n] = x.astype(np.float64)
        g.line(f"x{k} = tl.load({name} + offs, mask=mask, other=0)")
        pool.append(Val(f"x{k}", v.astype(np.int64) if dt == "i32" else v, np.zeros(total), dt))
    ex = Exprs(g, pool)
    ex.cond_of_index("offs", idx)
    ex.cond_of_inputs()
    generic_mistakes(g)
    last = ex.grow(g.randint(1, 8))
    if g.mutate("shape_mismatch"):
        ln = g.line(f"v_bad = {last.code} + tl.arange(0, {BLOCK // 2})")
        g.expect_error(ln, "incompatible shapes", "adding blocks of two sizes")
    user_fence(g, 0.05)
    out = poison((n,), last.dt)
    g.param("out_ptr", "*" + last.dt, out)
    g.param("n", "i32", n)
    if n < total and g.mutate("store_out_of_bounds"):
        ln = g.line(f"tl.store(out_ptr + offs, {last.code})")
        g.expect_interp_error(ln, "out-of-bounds", "an unmasked store past the end of the output")
    else:
        g.line(f"tl.store(out_ptr + offs, {last.code}, mask=mask)")
    g.check("out_ptr", last.v[:n].astype(np.float64), last.err[:n])


def _sum_err(v: np.ndarray, err: np.ndarray, axis: int, dt: str) -> np.ndarray:
    n = v.shape[axis]
    return err.sum(axis) + (n + 1) * 1.01 * UNIT[dt] * np.abs(v).sum(axis) + 1e-30


def reduction(g: Gen) -> None:
    """A 2-D tile per program, a random computation, then sum / max / min / argmax along one axis
    or all, sometimes broadcast back over the tile (x - max(x, axis)[:, None])."""
    R, C = g.pick([2, 4, 8, 16, 32]), g.pick([8, 16, 32, 64])
    grid = g.randint(1, 2)
    g.grid = (grid,)
    g.num_warps = g.pick(WARPS)
    g.const("R", R)
    g.const("C", C)
    dt = g.pick(["fp32", "fp16", "i32"])
    x = g.data_of((grid, R, C), dt)
    g.param("x_ptr", "*" + dt, x)
    g.line("pid = tl.program_id(0)")
    g.line("rows = tl.arange(0, R)")
    g.line("cols = tl.arange(0, C)")
    g.line("x = tl.load(x_ptr + pid * R * C + rows[:, None] * C + cols[None, :])")
    xv = x.astype(np.float64)
    pool = [Val("x", xv.astype(np.int64) if dt == "i32" else xv, np.zeros(xv.shape), dt)]
    ex = Exprs(g, pool)
    cidx = np.broadcast_to(np.arange(C)[None, None, :], (grid, R, C))
    ex.cond_of_index("cols[None, :]", cidx)
    ex.cond_of_inputs()
    generic_mistakes(g)
    val = ex.grow(g.randint(0, 5))
    kind = g.pick(["sum", "max", "min", "argmax"] if not np.any(val.err) else ["sum", "max", "min"])
    axis = g.pick([0, 1, None])
    if g.mutate("reduce_axis"):
        ln = g.line(f"r = tl.{kind}({val.code}, axis=2)")
        g.expect_error(ln, "out of range", "a reduction axis the tile does not have")
        axis = 1
    vv, ee = val.v, val.err
    if axis is None:
        vv, ee = vv.reshape(grid, 1, R * C), ee.reshape(grid, 1, R * C)
    ax = 2 if axis is None else axis + 1
    if kind == "sum":
        if val.dt == "i32":
            ref, err = wrap32(vv.sum(ax)), np.zeros(vv.sum(ax).shape)
        else:
            ref, err = vv.sum(ax), _sum_err(vv, ee, ax, val.dt)
        rdt = val.dt
    elif kind in ("max", "min"):
        ref = vv.max(ax) if kind == "max" else vv.min(ax)
        err, rdt = ee.max(ax), val.dt
    else:
        ref, err, rdt = vv.argmax(ax).astype(np.int64), np.zeros(vv.argmax(ax).shape), "i32"
    if not g.fired:
        g.line(f"r = tl.{kind}({val.code}, axis={axis})")
    rv = Val("r", ref if rdt != "i32" else ref.astype(np.int64), err, rdt)
    if axis is None:
        rv = Val("r", ref[:, 0], err[:, 0], rdt)
        out = poison((grid,), rdt)
        g.param("out_ptr", "*" + rdt, out)
        g.line("tl.store(out_ptr + pid, r)")
        g.check("out_ptr", rv.v.astype(np.float64), rv.err)
        return
    if rdt != "i32" and kind != "argmax" and g.chance(0.5):
        # broadcast back: y = x - r[:, None] (or r[None, :])
        bidx = "[None, :]" if axis == 0 else "[:, None]"
        rb = np.expand_dims(rv.v, ax)
        eb = np.expand_dims(rv.err, ax)
        y = val.v - rb
        if R != C and g.mutate("broadcast_mismatch"):
            bad = "[:, None]" if axis == 0 else "[None, :]"
            ln = g.line(f"y = {val.code} - r{bad}")
            g.expect_error(ln, "incompatible shapes", "broadcasting a reduced row along the wrong axis")
        else:
            g.line(f"y = {val.code} - r{bidx}")
        out = poison((grid, R, C), val.dt)
        g.param("out_ptr", "*" + val.dt, out)
        g.line("tl.store(out_ptr + pid * R * C + rows[:, None] * C + cols[None, :], y)")
        g.check("out_ptr", y, val.err + eb + rnd(y, val.dt))
        return
    L = C if axis == 0 else R
    out = poison((grid, L), rdt)
    g.param("out_ptr", "*" + rdt, out)
    g.line(f"tl.store(out_ptr + pid * {L} + {'cols' if axis == 0 else 'rows'}, r)")
    g.check("out_ptr", rv.v.astype(np.float64), rv.err)

"""Warp specialization: producer and consumer partitions handing tiles over mbarriers."""

from __future__ import annotations

from typing import Optional

import numpy as np

from .case import TL, Gen, dot_tol, poison
from .common import SIZE, host_desc, user_fence
from .exprs import Exprs, Val


def warp_specialized(g: Gen) -> None:
    """A producer (the default task) and a consumer (a 4-warp worker) hand tiles over a ring of
    NUM shared-memory slots with `full` / `empty` mbarriers (the producer waits `empty` with the
    flipped parity, the consumer waits `full`): the producer fills a slot by tl.load (+ a
    computation) + local_store + arrive, or by expect-bytes + TMA load; the consumer reads it by
    local_load (+ a computation) + tl.store, by TMA store + store wait, or by wgmma against a B
    tile it staged itself, then releases the slot."""
    produce = g.pick(["store", "tma"])
    consume = g.pick(["load", "tma_store", "dot"])
    dt = "fp16" if consume == "dot" else g.pick(["fp16", "fp32"])
    if consume == "dot":
        R, C, BN = 64, g.pick([16, 32, 64]), g.pick([16, 32, 64])
    else:
        R, C = g.pick([8, 16, 32, 64]), g.pick([16, 32, 64])
    NUM = g.randint(1, 3)
    NT = g.randint(1, 4)
    grid = g.randint(1, 2)
    g.grid = (grid,)
    H, W = grid * R, NT * C
    x = g.floats((H, W), dt, -1, 1)
    nbytes = R * C * SIZE[dt]
    if produce == "tma":
        g.param("x_desc", f"tensordesc<{dt}[{R}, {C}]>", host_desc(x, H, W, (R, C)))
    else:
        g.param("x_ptr", "*" + dt, x)
    if consume == "dot":
        b = g.floats((C, BN), dt, -1, 1)
        g.param("b_ptr", "*" + dt, b)
        y = poison((H, NT * BN), "fp32")
        g.param("y_ptr", "*fp32", y)
    elif consume == "tma_store":
        y = poison((H, W), dt)
        g.param("y_desc", f"tensordesc<{dt}[{R}, {C}]>", host_desc(y, H, W, (R, C)))
    else:
        y = poison((H, W), dt)
        g.param("y_ptr", "*" + dt, y)
    g.param("nt", "i32", NT)
    for n, v in (("R", R), ("C", C), ("NUM", NUM)) + ((("BN", BN),) if consume == "dot" else ()):
        g.const(n, v)
    regs = g.pick([None, None, (232, 40)])  # setmaxnreg: the consumer grows, the producer shrinks
    g.line("pid = tl.program_id(0)")
    g.line(f"buf = tlx.local_alloc((R, C), {TL[dt]}, NUM)")
    g.line("full = tlx.alloc_barriers(num_barriers=NUM, arrive_count=1)")
    g.line("empty = tlx.alloc_barriers(num_barriers=NUM, arrive_count=1)")
    if consume == "dot":
        g.line(f"b_s = tlx.local_alloc((C, BN), {TL[dt]}, 1)")
    # a loaded block lives in the kernel body's registers, which a worker partition cannot read
    # (index blocks such as aranges it may use: they are recomputed in the partition)
    outer_tensor = produce == "store" and g.mutate("ws_outer_tensor")
    if outer_tensor:
        g.line(f"outer_t = tl.load(x_ptr + (pid * R + tl.arange(0, R))[:, None] * {W} + tl.arange(0, C)[None, :])")
    full_vals = x.astype(np.float64)
    val: Optional[Val] = None
    write_line = read_line = None
    with g.block("with tlx.async_tasks()"):
        hdr = f'with tlx.async_task("default"{", registers=" + str(regs[1]) if regs else ""})'
        with g.block(hdr):
            g.line("rows = pid * R + tl.arange(0, R)")
            with g.block("for it in range(0, nt)"):
                g.line("s = it % NUM")
                g.line("ph = (it // NUM) & 1")
                g.line("tlx.barrier_wait(empty[s], ph ^ 1)")
                if produce == "store":
                    g.line("cols = it * C + tl.arange(0, C)")
                    g.line(f"t = tl.load(x_ptr + rows[:, None] * {W} + cols[None, :])")
                    if consume != "dot" and g.chance(0.5):
                        ex = Exprs(g, [Val("t", full_vals, np.zeros(full_vals.shape), dt)])
                        ex.cond_of_inputs()
                        val = ex.grow(g.randint(1, 3))
                        if val.dt != dt:
                            val = ex.convert(val, dt)
                    write_line = g.line(f"tlx.local_store(buf[s], {val.code if val else 't'})")
                    fence_cut = consume in ("tma_store", "dot") and g.mutate("ws_missing_fence")
                    if fence_cut:
                        g.fence_passes = False
                    else:
                        user_fence(g, 0.2)
                    if g.mutate("ws_missing_full_arrive"):
                        g.expect_deadlock("the producer never arrives on the full barrier")
                    else:
                        g.line("tlx.barrier_arrive(full[s])")
                else:
                    fence_cut = consume == "load" and NT > NUM and g.mutate("ws_missing_fence")
                    if fence_cut:
                        g.fence_passes = False
                    if g.mutate("ws_expect_wrong"):
                        ln = g.line(f"tlx.barrier_expect_bytes(full[s], {nbytes // 2})")
                        # (the producer's loop body expects and loads, the consumer only waits:
                        # BarrierBytes proves the mismatch at compile time)
                        g.expect_error(ln, "barrier_expect_bytes", "expect-bytes of half the tile")
                    else:
                        g.line(f"tlx.barrier_expect_bytes(full[s], {nbytes})")
                    write_line = g.line("tlx.async_descriptor_load(x_desc, buf[s], [pid * R, it * C], full[s])")
        hdr = "with tlx.async_task(num_warps=4" + (f", registers={regs[0]}" if regs else "") + ")"
        with g.block(hdr):
            g.line("rows = pid * R + tl.arange(0, R)")
            if outer_tensor:
                ln = g.line("bad = outer_t + 1.0")
                g.expect_error(ln, "computed outside it", "a worker partition using a block loaded in the kernel body")
            if consume == "dot":
                g.line("kk = tl.arange(0, C)")
                g.line("nn = tl.arange(0, BN)")
                g.line("tlx.local_store(b_s[0], tl.load(b_ptr + kk[:, None] * BN + nn[None, :]))")
            with g.block("for it in range(0, nt)"):
                g.line("s = it % NUM")
                g.line("ph = (it // NUM) & 1")
                if g.mutate("ws_wrong_phase"):
                    g.line("tlx.barrier_wait(full[s], ph ^ 1)")
                    g.expect_hazard(("race", "in-flight-write", "deadlock", "over-arrive"),
                                    "the consumer waits for the wrong parity: it reads before the producer "
                                    "filled the slot")
                else:
                    g.line("tlx.barrier_wait(full[s], ph)")
                release_early = consume == "dot" and NT > NUM and g.mutate("ws_release_before_wait")
                if consume == "load":
                    read_line = g.line("t = tlx.local_load(buf[s])")
                    produced = val is not None  # the producer computed it: the slot holds the result
                    if produced:
                        val = Val("t", val.v, val.err, val.dt)
                    elif g.chance(0.5):
                        ex = Exprs(g, [Val("t", full_vals, np.zeros(full_vals.shape), dt)])
                        ex.cond_of_inputs()
                        val = ex.grow(g.randint(1, 3))
                        if val.dt != dt:
                            val = ex.convert(val, dt)
                    g.line("cols = it * C + tl.arange(0, C)")
                    g.line(f"tl.store(y_ptr + rows[:, None] * {W} + cols[None, :], {val.code if val else 't'})")
                elif consume == "tma_store":
                    read_line = g.line("tlx.async_descriptor_store(y_desc, buf[s], [pid * R, it * C])")
                    g.line("tlx.async_descriptor_store_wait(0)")
                else:
                    read_line = g.line("acc = tlx.async_dot(buf[s], b_s[0])")
                    if release_early:
                        g.line("tlx.barrier_arrive(empty[s])")
                        g.expect_hazard(("in-flight-read",), "the slot released before async_dot_wait: the producer "
                                        "overwrites it while the wgmma may still read it")
                    g.line("acc = tlx.async_dot_wait(0, acc)")
                    g.line("nb = it * BN + tl.arange(0, BN)")
                    g.line(f"tl.store(y_ptr + rows[:, None] * {NT * BN} + nb[None, :], acc)")
                if fence_cut:
                    if produce == "store":
                        g.expect_hazard(("raw",), "a partition's local_store read by another's async op, "
                                        "fence passes off",
                                        lines=(write_line, read_line))
                    else:
                        g.expect_hazard(("war",), "a partition's local_load overwritten by the other's TMA load, "
                                        "fence passes off", lines=(read_line, write_line))
                if not release_early:
                    if NT > NUM and g.mutate("ws_missing_arrive"):
                        g.expect_deadlock("the consumer never releases a slot: the producer waits forever")
                    elif g.mutate("ws_over_arrive"):
                        g.line("tlx.barrier_arrive(empty[s], 2)")
                        g.expect_hazard(("over-arrive",), "two arrivals at once on a barrier whose phase expects one")
                    else:
                        g.line("tlx.barrier_arrive(empty[s])")
    if consume == "dot":
        ref = np.concatenate([x[:, it * C:(it + 1) * C].astype(np.float64) @ b for it in range(NT)], axis=1)
        tol = np.concatenate([dot_tol(x[:, it * C:(it + 1) * C], b) for it in range(NT)], axis=1)
        g.check("y_ptr", ref, tol)
        return
    ref = val.v if val is not None else full_vals
    tol = val.err if val is not None else 0.0
    g.check("y_ptr" if consume == "load" else "y_desc", ref, tol)

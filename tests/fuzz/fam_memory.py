"""Shared-memory kernels: buffer arrays and their views, TMA with mbarriers, cp.async groups, 1-D bulk
copies."""

from __future__ import annotations

import numpy as np

from .case import NP, TL, Gen, poison
from .common import SIZE, WARPS, generic_mistakes, host_desc, pitch, tile_ptrs, user_fence
from .exprs import Exprs, Val


def smem(g: Gen) -> None:
    """NUM tiles stored into a buffer array (a static or a runtime loop over the slots), then
    read back through views: a slot (constant or runtime index), its transpose, a slice (runtime
    offsets), a reshape, a bit reinterpretation; each read stored to its own output."""
    dt = g.pick(["fp32", "fp16", "i32"])
    R, C = g.pick([4, 8, 16, 32]), g.pick([8, 16, 32, 64])
    NUM = g.randint(1, 3)
    grid = g.randint(1, 2)
    g.grid = (grid,)
    g.num_warps = g.pick(WARPS)
    x = g.data_of((grid, NUM, R, C), dt)
    g.param("x_ptr", "*" + dt, x)
    g.const("R", R)
    g.const("C", C)
    g.const("NUM", NUM)
    g.line("pid = tl.program_id(0)")
    g.line("rows = tl.arange(0, R)")
    g.line("cols = tl.arange(0, C)")
    g.line(f"buf = tlx.local_alloc((R, C), {TL[dt]}, NUM)")
    header = "for s in tl.static_range(0, NUM)" if g.chance(0.5) else "for s in range(0, NUM)"
    with g.block(header):
        g.line("t = tl.load(x_ptr + (pid * NUM + s) * R * C + " + tile_ptrs("rows", "cols", "C") + ")")
        if R != C and g.mutate("local_store_shape"):
            ln = g.line("tlx.local_store(buf[s], tl.trans(t))")
            g.expect_error(ln, "local_store of a", "storing a transposed (C, R) tile into an (R, C) buffer")
        elif g.mutate("local_store_dtype"):
            other = {"fp32": "tl.float16", "fp16": "tl.float32", "i32": "tl.float32"}[dt]
            ln = g.line(f"tlx.local_store(buf[s], t.to({other}))")
            g.expect_error(ln, "local_store of", "storing a tile of another dtype than the buffer's")
        elif NUM > 1 and g.mutate("local_store_unindexed"):
            ln = g.line("tlx.local_store(buf, t)")
            g.expect_error(ln, "local_store of a", "storing into the buffer array instead of one buffer")
        else:
            g.line("tlx.local_store(buf[s], t)")
    user_fence(g)
    generic_mistakes(g)
    xv = x.astype(np.float64)
    for k in range(g.randint(1, 3)):
        const_slot = g.chance(0.5)
        if const_slot:
            slot = g.randint(0, NUM - 1)
            idx_code = str(slot)
            slots = np.full(grid, slot)
            if g.mutate("index_out_of_range"):
                idx_code = str(NUM)
                ln_bad = g.next_line
                g.expect_error(ln_bad, "out of range", f"buf[{NUM}] on an array of {NUM} buffers")
        else:
            off = g.randint(0, 3)
            idx_code = f"(pid + {off}) % NUM"
            slots = (np.arange(grid) + off) % NUM
            if g.mutate("runtime_index_out_of_range"):
                idx_code = f"pid + {off} + NUM"
                g.expect_interp_error(g.next_line, "out of range", "a runtime buffer index past the array")
        tile = xv[np.arange(grid), slots]  # (grid, R, C)
        view = g.pick(["plain", "trans", "slice", "reshape"] + (["reinterpret"] if dt in ("fp32", "i32") else []))
        out_dt = dt
        if view == "plain":
            code, ref = f"buf[{idx_code}]", tile
        elif view == "trans":
            code, ref = f"tlx.local_trans(buf[{idx_code}])", tile.transpose(0, 2, 1)
        elif view == "reshape":
            code, ref = f"tlx.local_reshape(buf[{idx_code}], (C, R))", tile.reshape(grid, C, R)
        elif view == "reinterpret":
            out_dt = "i32" if dt == "fp32" else "fp32"
            code = f"tlx.local_reinterpret(buf[{idx_code}], {TL[out_dt]})"
            ref = x[np.arange(grid), slots].view(NP[out_dt]).astype(np.float64)
        else:
            r2, c2 = max(1, R // g.pick([1, 2])), max(1, C // g.pick([1, 2, 4]))
            r0 = g.pick([0, R - r2])
            if g.mutate("slice_out_of_range"):
                ln = g.next_line
                g.expect_error(ln, "exceeds dimension", "a slice reaching past the buffer's last column")
                code = f"tlx.local_slice(buf[{idx_code}], [{r0}, {C - c2 + 1}], [{r2}, {c2}])"
                ref = tile[:, r0:r0 + r2, :c2]
            else:
                # a runtime column offset: pid-dependent, kept inside the buffer
                code = f"tlx.local_slice(buf[{idx_code}], [{r0}, (pid % 2) * {C - c2}], [{r2}, {c2}])"
                ref = np.stack([tile[p, r0:r0 + r2, (p % 2) * (C - c2):(p % 2) * (C - c2) + c2] for p in range(grid)])
        shape = ref.shape[1:]
        y = f"y{k}"
        g.line(f"{y} = tlx.local_load({code})")
        val = Val(y, ref.astype(np.int64) if out_dt == "i32" else ref, np.zeros(ref.shape), out_dt)
        # (reinterpreted bits are any values at all — NaN, inf, huge: no arithmetic on them)
        if view != "reinterpret" and g.chance(0.4):
            val = Exprs(g, [val]).grow(g.randint(1, 3))
        rr, cc = shape
        g.line(f"r{k} = tl.arange(0, {rr})")
        g.line(f"c{k} = tl.arange(0, {cc})")
        out = poison((grid, rr, cc), val.dt)
        g.param(f"out{k}_ptr", "*" + val.dt, out)
        g.line(f"tl.store(out{k}_ptr + pid * {rr * cc} + {tile_ptrs(f'r{k}', f'c{k}', str(cc))}, {val.code})")
        g.check(f"out{k}_ptr", val.v.astype(np.float64), val.err)


def tma(g: Gen) -> None:
    """Tiles of a 2-D array through TMA: expect-bytes, a load into a ring of NUM buffers, the
    mbarrier wait with the ring's phase, a local_load, a computation, and back out through
    local_store + TMA store (+ store wait), the register-level `desc.store`, or a masked
    tl.store. Array edges need not be tile multiples (TMA zero-fills loads, clips stores). A
    prefetching variant issues the next tiles before computing on the current one."""
    dt = g.pick(["fp16", "fp32"])
    BR, BC = g.pick([8, 16, 32, 64]), g.pick([16, 32, 64])
    NT = g.randint(1, 4)
    grid = g.randint(1, 2)
    g.grid = (grid,)
    g.num_warps = g.pick(WARPS)
    H = g.randint(grid * BR - BR + 1, grid * BR) if g.chance(0.5) else grid * BR
    W = g.randint(NT * BC - BC + 1, NT * BC) if g.chance(0.5) else NT * BC
    PW = pitch(W, dt)
    NUM = g.randint(1, 3)
    prefetch = NUM > 1 and g.chance(0.5)
    sink = g.pick(["tma_store", "desc_store", "tl_store"])
    x = g.floats((H, PW), dt)
    y = poison((H, PW), dt)
    # descriptors from the host, or built on the device from a pointer (tl.make_tensor_descriptor)
    on_device = {n: g.chance(0.3) for n in ("x", "y")}
    if sink == "tl_store":
        on_device["y"] = False
    for n, arr in (("x", x), ("y", y)):
        if n == "y" and sink == "tl_store":
            g.param("y_ptr", "*" + dt, y)
        elif on_device[n]:
            g.param(f"{n}_ptr", "*" + dt, arr)
        else:
            g.param(f"{n}_desc", f"tensordesc<{dt}[{BR}, {BC}]>", host_desc(arr, H, W, (BR, BC)))
    if any(on_device.values()):
        g.param("h", "i32", H)
        g.param("w", "i32", W)
    g.param("nt", "i32", NT)
    for n, v in (("BR", BR), ("BC", BC), ("NUM", NUM)):
        g.const(n, v)
    nbytes = BR * BC * SIZE[dt]
    for n in ("x", "y"):
        if on_device[n]:
            if g.mutate("desc_inner_stride"):
                ln = g.line(f"{n}_desc = tl.make_tensor_descriptor({n}_ptr, [h, w], [1, {PW}], [BR, BC])")
                g.expect_error(ln, "last stride", "a device descriptor whose innermost stride is not 1")
            else:
                g.line(f"{n}_desc = tl.make_tensor_descriptor({n}_ptr, [h, w], [{PW}, 1], [BR, BC])")
    g.line("pid = tl.program_id(0)")
    g.line(f"bufs = tlx.local_alloc((BR, BC), {TL[dt]}, NUM)")
    g.line("bars = tlx.alloc_barriers(num_barriers=NUM, arrive_count=1)")
    separate_out = sink == "tma_store" and g.chance(0.5)
    if separate_out:
        g.line(f"obuf = tlx.local_alloc((BR, BC), {TL[dt]}, 1)")
    if sink == "tl_store":
        g.line("rows = pid * BR + tl.arange(0, BR)")

    def issue(tile: str, slot: str, runs: bool = True) -> int:
        """expect + TMA load of tile `tile` into bufs[slot]; returns the load's line. `runs`: the
        statement executes (a mistake that shows only at run time needs that)."""
        if runs and g.mutate("expect_bytes_wrong"):
            wrong = g.pick([nbytes // 2, nbytes * 2, nbytes + 16])
            ln = g.line(f"tlx.barrier_expect_bytes(bars[{slot}], {wrong})")
            if prefetch:  # issued under an `if`: the compiler cannot prove it, the interpreter sees it
                g.expect_hazard(("expect-bytes", "deadlock"), f"expect {wrong} bytes for a {nbytes}-byte tile")
            else:  # expect, load and wait in one loop body: BarrierBytes proves the mismatch
                g.expect_error(ln, "barrier_expect_bytes", f"expect {wrong} bytes for a {nbytes}-byte tile")
        elif runs and g.mutate("missing_expect"):
            g.expect_hazard(("expect-bytes", "deadlock"), "a TMA load on a barrier nobody expects bytes on")
        elif g.mutate("expect_runtime_size"):
            ln = g.line(f"tlx.barrier_expect_bytes(bars[{slot}], nt * {nbytes})")
            g.expect_error(ln, "must be a compile-time constant", "a runtime expect-bytes size")
        else:
            g.line(f"tlx.barrier_expect_bytes(bars[{slot}], {nbytes})")
        if g.mutate("tma_buffer_shape"):
            g.line(f"wrong = tlx.local_alloc((BR, BC * 2), {TL[dt]}, 1)")
            ln = g.line(f"tlx.async_descriptor_load(x_desc, wrong[0], [pid * BR, ({tile}) * BC], bars[{slot}])")
            g.expect_error(ln, "does not match the descriptor", "a TMA load into a buffer wider than the block")
            return ln
        return g.line(f"tlx.async_descriptor_load(x_desc, bufs[{slot}], [pid * BR, ({tile}) * BC], bars[{slot}])")

    if prefetch:
        with g.block("for p in tl.static_range(0, NUM - 1)"):
            with g.block("if p < nt"):
                issue("p", "p")
    loop = g.pick(["range", "static"]) if not prefetch else "range"
    with g.block("for it in range(0, nt)" if loop == "range" else f"for it in tl.static_range(0, {NT})"):
        g.line("s = it % NUM")
        g.line("ph = (it // NUM) & 1")
        load_line = None
        if not prefetch:
            load_line = issue("it", "s")
        if g.mutate("missing_wait"):
            wait_dropped = True
        else:
            wait_dropped = False
            if g.mutate("wrong_phase"):
                g.line("tlx.barrier_wait(bars[s], ph ^ 1)")
                g.expect_hazard(("in-flight-write", "deadlock"), "waiting for the wrong phase parity")
            elif g.mutate("wait_on_array"):
                ln = g.line("tlx.barrier_wait(bars, ph)")
                g.expect_error(ln, "needs one mbarrier", "waiting on the whole barrier array")
            else:
                g.line("tlx.barrier_wait(bars[s], ph)")
        g.line("t = tlx.local_load(bufs[s])")
        if wait_dropped:
            # (the first reader: the local_load, or a TMA store reading the buffer in place)
            g.expect_hazard(("in-flight-write",), "reading a TMA-loaded buffer without waiting on its barrier",
                            lines=(load_line, None) if load_line else None)
        if prefetch:
            g.line("nxt = it + NUM - 1")
            with g.block("if nxt < nt"):
                issue("nxt", "nxt % NUM", runs=NT > NUM - 1)
        full = np.zeros((grid * BR, NT * BC))
        full[:H, :W] = x[:, :W].astype(np.float64)
        ex = Exprs(g, [Val("t", full, np.zeros(full.shape), dt)])
        ex.cond_of_inputs()
        val = ex.grow(g.randint(0, 4))
        if val.dt != dt:
            val = ex.convert(val, dt)
        out_tile = "obuf[0]" if separate_out else "bufs[s]"
        if sink == "tma_store":
            if g.mutate("missing_fence"):
                g.fence_passes = False
                st = g.line(f"tlx.local_store({out_tile}, {val.code})")
                ts = g.line(f"tlx.async_descriptor_store(y_desc, {out_tile}, [pid * BR, it * BC])")
                g.expect_hazard(("raw",), "a local_store read by a TMA store, fence passes off, no user fence",
                                lines=(st, ts))
            elif g.chance(0.3):
                # the tile written on one side of a runtime branch, or differently on both (the
                # fence belongs on the writing side, or after the join)
                one_sided = not separate_out and g.chance(0.5)
                with g.block("if (it + pid) % 2 == 0"):
                    st = g.line(f"tlx.local_store({out_tile}, {val.code})")
                if not one_sided:
                    with g.block("else"):
                        st = (st, g.line(f"tlx.local_store({out_tile}, -{val.code})"))  # either store may come next
                user_fence(g, 0.2)
                ts = g.line(f"tlx.async_descriptor_store(y_desc, {out_tile}, [pid * BR, it * BC])")
                rr, cc = np.indices(val.v.shape)
                even = (rr // BR + cc // BC) % 2 == 0
                other_v, other_e = (full, np.zeros(full.shape)) if one_sided else (-val.v, val.err)
                val = Val(val.code, np.where(even, val.v, other_v), np.where(even, val.err, other_e), val.dt)
            else:
                st = g.line(f"tlx.local_store({out_tile}, {val.code})")
                user_fence(g, 0.3)
                ts = g.line(f"tlx.async_descriptor_store(y_desc, {out_tile}, [pid * BR, it * BC])")
            if separate_out and NT >= 2 and g.mutate("missing_store_wait"):
                g.expect_hazard(("in-flight-read",), "overwriting a TMA store's source before its store wait",
                                lines=(ts, st))
            else:
                g.line("tlx.async_descriptor_store_wait(0)")
        elif sink == "desc_store":
            # (a store of the loaded tile itself is a TMA store in place of the loaded buffer:
            # no generic write, so no fence to miss)
            if val.code != "t" and g.mutate("missing_fence"):
                g.fence_passes = False
                ln = g.line(f"y_desc.store([pid * BR, it * BC], {val.code})")
                g.expect_hazard(("raw",), "a register-level TMA store with the fence passes off", lines=(ln, ln))
            else:
                g.line(f"y_desc.store([pid * BR, it * BC], {val.code})")
        else:
            g.line("cols = it * BC + tl.arange(0, BC)")
            g.line(f"tl.store(y_ptr + rows[:, None] * {PW} + cols[None, :], {val.code}, "
                   f"mask=(rows[:, None] < {H}) & (cols[None, :] < {W}))")
    ref = np.full((H, PW), np.nan)
    ref[:, :W] = val.v[:H, :W]
    tol = np.zeros((H, PW))
    tol[:, :W] = val.err[:H, :W]
    g.check("y_ptr" if sink == "tl_store" or on_device["y"] else "y_desc", ref, tol)


def cp_async(g: Gen) -> None:
    """Tiles of a 2-D array copied by cp.async (masked, `other` filling the masked elements) into
    a ring of NUM buffers, one commit group per tile, waited with the right pending count —
    serially (wait 0) or with NUM - 1 groups in flight — then local_load, compute, masked store."""
    dt = g.pick(["fp16", "fp32", "i32"])
    g.num_warps = g.pick(WARPS)
    # at least 4 bytes per thread (the layouts pass does not vectorize smaller tiles: bug 5)
    R, C = g.pick([(r, c) for r in (4, 8, 16, 32) for c in (8, 16, 32, 64)
                   if r * c * SIZE[dt] >= 4 * 32 * g.num_warps])
    NT = g.randint(1, 4)
    grid = g.randint(1, 2)
    g.grid = (grid,)
    H = g.randint(grid * R - R + 1, grid * R) if g.chance(0.5) else grid * R
    # cp.async moves 4-16 bytes per thread: rows start 16-byte aligned, and the masked column
    # edge falls on a 16-byte boundary (a copy is not split by its mask)
    W = pitch(g.randint(NT * C - C + 1, NT * C), dt) if g.chance(0.5) else NT * C
    NUM = g.randint(1, 3)
    pipelined = NUM > 1 and g.chance(0.6)
    other = g.pick([None, 0, 0.0])  # cp.async zero-fills masked-off elements (no other value)
    PW = pitch(W, dt)
    x = g.data_of((H, PW), dt)
    g.param("x_ptr", "*" + dt, x)
    y = poison((H, PW), dt)
    g.param("y_ptr", "*" + dt, y)
    g.param("nt", "i32", NT)
    for n, v in (("R", R), ("C", C), ("NUM", NUM)):
        g.const(n, v)
    g.line("pid = tl.program_id(0)")
    g.line("rows = pid * R + tl.arange(0, R)")
    g.line(f"bufs = tlx.local_alloc((R, C), {TL[dt]}, NUM)")

    def copy(tile: str, slot: str, guard: str = "") -> int:
        g.line(f"cols_{slot[:1]} = ({tile}) * C + tl.arange(0, C)")
        m = f"(rows[:, None] < {H}) & (cols_{slot[:1]}[None, :] < {W})" + (f" & ({guard})" if guard else "")
        oth = "" if other is None else f", other={other}"
        if g.mutate("cp_other_nonzero"):
            oth = ", other=1.0"
            g.expect_error(g.next_line, "zeros only", "cp.async asked to fill masked-off elements with 1.0")
        if g.mutate("cp_dtype"):
            wrong = "tl.float16" if dt != "fp16" else "tl.float32"
            g.line(f"wrong = tlx.local_alloc((R, C), {wrong}, 1)")
            ln = g.line(f"tok = tlx.async_load(x_ptr + rows[:, None] * {PW} + cols_{slot[:1]}[None, :], wrong[0], "
                        f"mask={m}{oth})")
            g.expect_error(ln, "async_load from", "cp.async from pointers of another dtype than the buffer's")
        else:
            ln = g.line(f"tok = tlx.async_load(x_ptr + rows[:, None] * {PW} + cols_{slot[:1]}[None, :], bufs[{slot}], "
                        f"mask={m}{oth})")
        g.line("tlx.async_load_commit_group([tok])")
        return ln

    if pipelined:
        with g.block("for p in tl.static_range(0, NUM - 1)"):
            copy("p", "p", "p < nt")
    with g.block("for it in range(0, nt)"):
        cp_line = None
        if pipelined:
            g.line("nxt = it + NUM - 1")
            copy("nxt", "nxt % NUM", "nxt < nt")
            pend = "NUM - 1"
        else:
            cp_line = copy("it", "it % NUM")
            pend = "0"
        dropped = g.mutate("missing_cp_wait")
        if not dropped:
            if pipelined and g.mutate("wrong_pendings"):
                g.line("tlx.async_load_wait_group(NUM)")
                g.expect_hazard(("in-flight-write",),
                                "waiting for all but NUM groups: the current tile may not have landed")
            else:
                g.line(f"tlx.async_load_wait_group({pend})")
        rd = g.line("t = tlx.local_load(bufs[it % NUM])")
        if dropped:
            g.expect_hazard(("in-flight-write",), "reading a cp.async buffer without async_load_wait_group",
                            lines=(cp_line, rd) if cp_line else None)
        full = np.zeros((grid * R, NT * C))
        full[:H, :W] = x[:, :W].astype(np.float64)
        if dt == "i32":
            full = full.astype(np.int64)
        ex = Exprs(g, [Val("t", full, np.zeros(full.shape), dt)])
        ex.cond_of_inputs()
        val = ex.grow(g.randint(0, 4))
        if val.dt != dt:
            if dt == "i32":
                val = ex.pool[0]
            else:
                val = ex.convert(val, dt)
        user_fence(g, 0.1)
        g.line("cols = it * C + tl.arange(0, C)")
        g.line(f"tl.store(y_ptr + rows[:, None] * {PW} + cols[None, :], {val.code}, "
               f"mask=(rows[:, None] < {H}) & (cols[None, :] < {W}))")
    ref = np.full((H, PW), np.nan)
    ref[:, :W] = val.v[:H, :W]
    tol = np.zeros((H, PW))
    tol[:, :W] = val.err[:H, :W]
    g.check("y_ptr", ref, tol)


def bulk(g: Gen) -> None:
    """1-D bulk copies: cp.async.bulk global -> shared completing on an mbarrier (async_load with
    bulk=True), its wait, local_load, a computation, local_store, and the bulk shared -> global
    copy (async_store) with its wait; in place or through a second buffer."""
    dt = g.pick(["fp16", "fp32", "i32"])
    N = g.pick([64, 128, 256, 512])
    grid = g.randint(1, 2)
    g.grid = (grid,)
    g.num_warps = g.pick(WARPS)
    nbytes = N * SIZE[dt]
    x = g.data_of((grid * N,), dt)
    g.param("x_ptr", "*" + dt, x)
    g.param("y_ptr", "*" + dt, poison((grid * N,), dt))
    g.const("N", N)
    g.line("pid = tl.program_id(0)")
    g.line(f"buf = tlx.local_alloc((N,), {TL[dt]}, 1)")
    g.line("bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)")
    in_place = g.chance(0.5)
    if not in_place:
        g.line(f"obuf = tlx.local_alloc((N,), {TL[dt]}, 1)")
    g.line(f"tlx.barrier_expect_bytes(bar[0], {nbytes})")
    load = g.line("tlx.async_load(x_ptr + pid * N, buf[0], bulk=True, barrier=bar[0])")
    dropped = g.mutate("missing_bulk_wait")
    if not dropped:
        g.line("tlx.barrier_wait(bar[0], 0)")
    read = g.line("t = tlx.local_load(buf[0])")
    if dropped:
        g.expect_hazard(("in-flight-write",), "reading a bulk-copied buffer without waiting on its barrier",
                        lines=(load, read))
    xv = x.astype(np.float64).reshape(grid, N)
    ex = Exprs(g, [Val("t", xv.astype(np.int64) if dt == "i32" else xv, np.zeros(xv.shape), dt)])
    g.line("offs = tl.arange(0, N)")
    ex.cond_of_index("offs", np.broadcast_to(np.arange(N), (grid, N)))
    val = ex.grow(g.randint(0, 4))
    if val.dt != dt:
        val = ex.pool[0] if dt == "i32" else ex.convert(val, dt)
    out = "buf[0]" if in_place else "obuf[0]"
    fence_cut = g.mutate("missing_fence")
    if fence_cut:
        g.fence_passes = False
    st = g.line(f"tlx.local_store({out}, {val.code})")
    if not fence_cut:
        user_fence(g, 0.3)
    if g.mutate("bulk_size_not_16"):
        ln = g.line(f"tlx.async_store(y_ptr + pid * N, {out}, {nbytes - 8})")
        g.expect_error(ln, "multiple of 16", "a bulk store of a size that is not a multiple of 16 bytes")
    else:
        bs = g.line(f"tlx.async_store(y_ptr + pid * N, {out}, {nbytes})")
        if fence_cut:
            g.expect_hazard(("raw",), "a local_store read by a bulk store, fence passes off", lines=(st, bs))
    g.line("tlx.async_descriptor_store_wait(0)")
    g.check("y_ptr", val.v.reshape(-1).astype(np.float64), val.err.reshape(-1))

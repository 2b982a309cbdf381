"""Matrix products: wgmma chains (`tlx.async_dot`) on shared-memory operands, and `tl.dot` on
register tiles."""

from __future__ import annotations

import numpy as np

from .case import TL, Gen, dot_tol, poison, values
from .common import SIZE, host_desc, user_fence

# int8 and fp32 (tf32) tl.dot need B staged K-major, which LowerDot does not do yet (the compiler
# then rejects its own staging: "wgmma reads s8 operands K-major only"); add "i8" and "fp32" here
# when it does.
REGISTER_DOT_DTYPES = ("fp16", "bf16")


def wgmma(g: Gen) -> None:
    """C = A @ B over K tiles with `tlx.async_dot` chained through the accumulator: each operand
    reaches shared memory by tl.load + local_store, TMA (expect + load + wait), or cp.async
    (commit + wait) — A may also stay in registers, B may be stored transposed and read through
    local_trans; waited every iteration (0 pending) or pipelined over two buffers (1 pending,
    a final wait 0); the epilogue stores fp32 C with tl.store, or fp16 C through desc.store or
    local_store + TMA store."""
    dt = g.pick(["fp16", "fp16", "bf16", "i8"])
    BM, BN = 64, g.pick([16, 32, 64])
    BK = g.pick([32, 64]) if dt == "i8" else g.pick([16, 32, 64])
    KT = g.randint(1, 3)
    K = KT * BK
    grid = g.randint(1, 2)
    g.grid = (grid,)
    M = grid * BM
    if dt == "i8":
        a, b = g.ints((M, K), -8, 8, "i8"), g.ints((K, BN), -8, 8, "i8")
    else:
        a, b = g.floats((M, K), dt, -1, 1), g.floats((K, BN), dt, -1, 1)
    apath = g.pick(["store", "tma", "cp", "reg"])
    # 8-bit wgmma operands must be K-major: B is kept transposed (N x K) and read through local_trans
    bpath = g.pick(["trans", "tma_t"] if dt == "i8" else ["store", "tma", "cp", "trans", "tma_t"])
    btrans = bpath in ("trans", "tma_t")
    pipelined = g.chance(0.4)
    chain = g.chance(0.3)
    NB = 2 if pipelined else g.randint(1, 2)
    one_buffer_in_flight = pipelined and KT >= 2 and apath != "reg" and g.mutate("overwrite_in_flight")
    if one_buffer_in_flight:
        NB = 1
    acc_dt = "i32" if dt == "i8" else "fp32"
    ep = g.pick(["store32", "store32"] + (["desc16", "tma16"] if dt != "i8" else []))
    tdt = TL[dt]
    for name, arr, path in (("a", a, apath), ("b", b, bpath)):
        if path in ("tma", "tma_t"):
            if path == "tma_t":
                arr = np.ascontiguousarray(arr.T)
            blk = (BM, BK) if name == "a" else ((BN, BK) if path == "tma_t" else (BK, BN))
            g.param(f"{name}_desc", f"tensordesc<{dt}[{blk[0]}, {blk[1]}]>",
                    host_desc(arr, arr.shape[0], arr.shape[1], blk))
        elif path == "trans":
            g.param(f"{name}t_ptr", "*" + dt, np.ascontiguousarray(arr.T))
        else:
            g.param(f"{name}_ptr", "*" + dt, arr)
    if ep == "store32":
        c = poison((M, BN), acc_dt)
        g.param("c_ptr", "*" + acc_dt, c)
    else:
        c = poison((M, BN), "fp16")
        g.param("c_desc", f"tensordesc<fp16[{BM}, {BN}]>", host_desc(c, M, BN, (BM, BN)))
    g.param("kt_n", "i32", KT)
    for n, v in (("BM", BM), ("BN", BN), ("BK", BK), ("K", K), ("NB", NB)):
        g.const(n, v)
    g.line("pid = tl.program_id(0)")
    g.line("rm = pid * BM + tl.arange(0, BM)")
    g.line("rn = tl.arange(0, BN)")
    g.line("rk = tl.arange(0, BK)")
    if apath != "reg":
        g.line(f"a_s = tlx.local_alloc((BM, BK), {tdt}, NB)")
    g.line(f"b_s = tlx.local_alloc({'(BN, BK)' if btrans else '(BK, BN)'}, {tdt}, NB)")
    tma_bytes = (BM * BK if apath == "tma" else 0) + (BK * BN if bpath in ("tma", "tma_t") else 0)
    if tma_bytes:
        g.line("bars = tlx.alloc_barriers(num_barriers=NB, arrive_count=1)")
    g.line(f"acc = tl.zeros((BM, BN), dtype={TL[acc_dt]})")
    writes = {}
    with g.block("for kt in range(0, kt_n)"):
        g.line("s = kt % NB")
        if tma_bytes:
            g.line("ph = (kt // NB) & 1")
            g.line(f"tlx.barrier_expect_bytes(bars[s], {tma_bytes * SIZE[dt]})")
        for name, path in (("a", apath), ("b", bpath)):
            if name == "a":
                ptrs = "a_ptr + rm[:, None] * K + (kt * BK + rk)[None, :]"
            elif path == "trans":
                ptrs = "bt_ptr + rn[:, None] * K + (kt * BK + rk)[None, :]"
            else:
                ptrs = "b_ptr + (kt * BK + rk)[:, None] * BN + rn[None, :]"
            if path in ("store", "trans"):
                g.line(f"{name}_t = tl.load({ptrs})")
                writes[name] = g.line(f"tlx.local_store({name}_s[s], {name}_t)")
            elif path == "reg":
                g.line(f"a_r = tl.load({ptrs})")
            elif path == "cp":
                writes[name] = g.line(f"tok_{name} = tlx.async_load({ptrs}, {name}_s[s])")
                g.line(f"tlx.async_load_commit_group([tok_{name}])")
            else:
                off = "[pid * BM, kt * BK]" if name == "a" else ("[0, kt * BK]" if path == "tma_t" else "[kt * BK, 0]")
                writes[name] = g.line(f"tlx.async_descriptor_load({name}_desc, {name}_s[s], {off}, bars[s])")
        if tma_bytes:
            g.line("tlx.barrier_wait(bars[s], ph)")
        if "cp" in (apath, bpath):
            g.line("tlx.async_load_wait_group(0)")
        A = "a_r" if apath == "reg" else "a_s[s]"
        B = "tlx.local_trans(b_s[s])" if btrans else "b_s[s]"
        fence_cut = g.mutate("missing_fence") if any(p in ("store", "trans", "cp") for p in (apath, bpath)) else False
        if fence_cut:
            g.fence_passes = False
        else:
            user_fence(g, 0.2)
        if apath != "reg" and g.mutate("dot_small_m"):
            ln = g.line(f"acc = tlx.async_dot(tlx.local_slice(a_s[s], [0, 0], [32, BK]), {B}, acc)")
            g.expect_error(ln, "multiple of 64", "a 32-row A operand (one warpgroup covers 64 rows)")
        elif g.mutate("dot_inner"):
            half = ("tlx.local_trans(tlx.local_slice(b_s[s], [0, 0], [BN, BK // 2]))" if btrans
                    else "tlx.local_slice(b_s[s], [0, 0], [BK // 2, BN])")
            ln = g.line(f"acc = tlx.async_dot({A}, {half}, acc)")
            g.expect_error(ln, "inner dimensions differ", "a B operand with half the K rows")
        elif g.mutate("dot_dtype"):
            other = {"fp16": "tl.bfloat16", "bf16": "tl.float16", "i8": "tl.uint8"}[dt]
            re_b = f"tlx.local_reinterpret(b_s[s], {other})"
            ln = g.line(f"acc = tlx.async_dot({A}, {f'tlx.local_trans({re_b})' if btrans else re_b}, acc)")
            g.expect_error(ln, "must share a dtype", "operands of two dtypes")
        elif g.mutate("dot_register_b"):
            ln = g.line(f"acc = tlx.async_dot({A}, tlx.local_load({B}), acc)")
            g.expect_error(ln, "B operand must be a shared-memory view", "a register B operand")
        else:
            dot = g.line(f"acc = tlx.async_dot({A}, {B}, acc)")
            if chain:  # a second wgmma on the same tiles, chained through the accumulator, no wait between
                g.line(f"acc = tlx.async_dot({A}, {B}, acc)")
        if fence_cut:
            name = g.pick([n for n, p in (("a", apath), ("b", bpath)) if p in ("store", "trans", "cp")])
            g.expect_hazard(("raw",), "a generic write of a wgmma operand, fence passes off, no user fence",
                            lines=(writes[name], dot))
        if one_buffer_in_flight:
            g.expect_hazard(("in-flight-read",), "one buffer per operand with a wgmma still in flight "
                            "(async_dot_wait(1)) when the next tile overwrites it")
        if not pipelined and g.mutate("missing_dot_wait"):
            g.expect_hazard(("use-before-wait", "in-flight-read"), "the accumulator used without async_dot_wait")
        else:
            g.line(f"acc = tlx.async_dot_wait({1 if pipelined else 0}, acc)")
    if pipelined:
        g.line("acc = tlx.async_dot_wait(0, acc)")
    a, b = values(a, dt), values(b, dt)
    if chain and not g.fired:  # acc += A @ B twice per K tile: the product of [A A] and [B; B]
        a, b = np.hstack([a, a]), np.vstack([b, b])
    ref = a @ b
    if ep == "store32":
        g.line("tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)")
        g.check("c_ptr", ref, 0.0 if acc_dt == "i32" else dot_tol(a, b))
    elif ep == "desc16":
        g.line("c_desc.store([pid * BM, 0], acc.to(tl.float16))")
        g.check("c_desc", ref, dot_tol(a, b, "fp16"))
    else:
        g.line("c_s = tlx.local_alloc((BM, BN), tl.float16, 1)")
        g.line("tlx.local_store(c_s[0], acc.to(tl.float16))")
        user_fence(g, 0.4)
        g.line("tlx.async_descriptor_store(c_desc, c_s[0], [pid * BM, 0])")
        g.line("tlx.async_descriptor_store_wait(0)")
        g.check("c_desc", ref, dot_tol(a, b, "fp16"))


def register_dot(g: Gen) -> None:
    """acc = tl.dot(a, b, acc) over K tiles of register operands loaded with tl.load (the dtypes
    of REGISTER_DOT_DTYPES; fp32 as tf32 or with input_precision="ieee"); C stored as fp32 /
    int32, or as fp16."""
    dt = g.pick(REGISTER_DOT_DTYPES)
    BM = g.pick([64, 128]) if g.chance(0.3) else 64
    g.num_warps = g.pick([4, 8]) if BM == 128 else 4
    BN = g.pick([16, 32, 64])
    BK = g.pick([32, 64]) if dt == "i8" else g.pick([16, 32, 64])
    KT = g.randint(1, 3)
    K = KT * BK
    if dt == "i8":
        a, b = g.ints((BM, K), -8, 8, "i8"), g.ints((K, BN), -8, 8, "i8")
    else:
        a, b = g.floats((BM, K), dt, -1, 1), g.floats((K, BN), dt, -1, 1)
    ip = g.pick([None, "ieee"]) if dt == "fp32" else None
    acc_dt = "i32" if dt == "i8" else "fp32"
    out_dt = g.pick([acc_dt, "fp16"]) if acc_dt == "fp32" else acc_dt
    g.param("a_ptr", "*" + dt, a)
    g.param("b_ptr", "*" + dt, b)
    c = poison((BM, BN), out_dt)
    g.param("c_ptr", "*" + out_dt, c)
    g.param("kt_n", "i32", KT)
    for n, v in (("BM", BM), ("BN", BN), ("BK", BK), ("K", K)):
        g.const(n, v)
    g.line("rm = tl.arange(0, BM)")
    g.line("rn = tl.arange(0, BN)")
    g.line("rk = tl.arange(0, BK)")
    g.line(f"acc = tl.zeros((BM, BN), dtype={TL[acc_dt]})")
    with g.block("for kt in range(0, kt_n)"):
        g.line("a = tl.load(a_ptr + rm[:, None] * K + (kt * BK + rk)[None, :])")
        g.line("b = tl.load(b_ptr + (kt * BK + rk)[:, None] * BN + rn[None, :])")
        extra = f', input_precision="{ip}"' if ip else ""
        if g.mutate("dot_operand_dtypes"):
            other = "tl.float32" if dt != "fp32" else "tl.float16"
            ln = g.line(f"acc = tl.dot(a, b.to({other}), acc{extra})")
            g.expect_error(ln, "must have one dtype", "tl.dot of two dtypes")
        elif g.mutate("dot_inner_shape"):
            g.line("b2 = tl.load(b_ptr + tl.arange(0, BK // 2)[:, None] * BN + rn[None, :])")
            ln = g.line(f"acc = tl.dot(a, b2, acc{extra})")
            g.expect_error(ln, "inner dimensions differ", "tl.dot with K of A twice the K of B")
        else:
            g.line(f"acc = tl.dot(a, b, acc{extra})")
    av, bv = values(a, dt), values(b, dt)
    # tf32 keeps 10 explicit mantissa bits: each operand off by at most 2^-10 of itself
    rel = 2 * 2.0 ** -10 if (dt == "fp32" and ip is None) else 0.0
    store = "acc" if out_dt == acc_dt else f"acc.to({TL[out_dt]})"
    g.line(f"tl.store(c_ptr + rm[:, None] * BN + rn[None, :], {store})")
    g.check("c_ptr", av @ bv, 0.0 if acc_dt == "i32" else dot_tol(av, bv, out_dt, rel))

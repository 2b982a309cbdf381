"""GPU check of the PTX code generator: small kernels that each exercise one part of the
lowering (math and casts, reductions across lanes and warps, layout conversions, shape ops,
atomics, shared-memory layouts and views, cp.async, TMA with split boxes, device-side
descriptors, every wgmma form, warp specialization, control flow), run on the GPU through the
whole stack and compared with numpy in float64. Outputs are poisoned (NaN / 0x7f..) first.

    python3 scripts/gpu_codegen_check.py            # all checks, a table last; exit 1 on failure
    python3 scripts/gpu_codegen_check.py reduce     # only the checks whose name contains 'reduce'
    python3 scripts/gpu_codegen_check.py --compile  # compile (and ptxas) every kernel, no GPU

The pytest wrapper is tests/gpu/test_codegen_gpu.py (marked gpu); tests/test_gpu_check_kernels.py
compiles every kernel here on the CPU in CI so they stay valid.
"""

from __future__ import annotations

import math
import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import tlx  # noqa: E402
import tlx.language as tl  # noqa: E402


# =============================================================================================
# kernels
# =============================================================================================

@tlx.jit
def unary_kernel(x_ptr, y_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    if OP == "exp":
        y = tl.exp(x)
    elif OP == "exp2":
        y = tl.exp2(x)
    elif OP == "log":
        y = tl.log(x)
    elif OP == "log2":
        y = tl.log2(x)
    elif OP == "sqrt":
        y = tl.sqrt(x)
    elif OP == "rsqrt":
        y = tl.rsqrt(x)
    elif OP == "sin":
        y = tl.sin(x)
    elif OP == "cos":
        y = tl.cos(x)
    elif OP == "erf":
        y = tl.math.erf(x)
    elif OP == "tanh":
        y = tl.math.tanh(x)
    elif OP == "floor":
        y = tl.floor(x)
    elif OP == "ceil":
        y = tl.ceil(x)
    elif OP == "abs":
        y = tl.abs(x)
    elif OP == "neg":
        y = -x
    else:
        y = tl.sigmoid(x)
    tl.store(y_ptr + offs, y, mask=m)


@tlx.jit
def binary_kernel(x_ptr, y_ptr, z_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    if OP == "add":
        z = x + y
    elif OP == "sub":
        z = x - y
    elif OP == "mul":
        z = x * y
    elif OP == "div":
        z = x / y
    elif OP == "floordiv":
        z = x // y
    elif OP == "mod":
        z = x % y
    elif OP == "max":
        z = tl.maximum(x, y)
    elif OP == "min":
        z = tl.minimum(x, y)
    elif OP == "fma":
        z = tl.fma(x, y, x)
    elif OP == "and":
        z = x & y
    elif OP == "xor":
        z = x ^ y
    elif OP == "shr":
        z = x >> (y & 7)
    elif OP == "shl":
        z = x << (y & 7)
    elif OP == "lt":
        z = tl.where(x < y, x, y)
    else:
        z = tl.where(x == y, x + 1, y)
    tl.store(z_ptr + offs, z, mask=m)


@tlx.jit
def cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x.to(tlx.dtype_of(y_ptr)), mask=m)


@tlx.jit
def roundtrip_cast_kernel(x_ptr, y_ptr, n, MID: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x.to(MID).to(tlx.dtype_of(y_ptr)), mask=m)


@tlx.jit
def reduce_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr, KIND: tl.constexpr):
    r = tl.arange(0, M)
    c = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + c[None, :])
    if KIND == "sum":
        y = tl.sum(x, axis=AXIS)
    elif KIND == "max":
        y = tl.max(x, axis=AXIS)
    elif KIND == "min":
        y = tl.min(x, axis=AXIS)
    elif KIND == "argmax":
        y = tl.argmax(x, axis=AXIS)
    elif KIND == "argmin":
        y = tl.argmin(x, axis=AXIS)
    else:
        y = tl.xor_sum(x, axis=AXIS)
    if AXIS == 0:
        tl.store(y_ptr + c, y)
    else:
        tl.store(y_ptr + r, y)


@tlx.jit
def full_reduce_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))
    tl.store(y_ptr + tl.program_id(0), tl.sum(x, axis=0))


@tlx.jit
def trans_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)
    c = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + c[None, :])
    t = tl.trans(x)  # N x M: the store wants another layout: a conversion through shared memory
    tl.store(y_ptr + c[:, None] * M + r[None, :], t)


@tlx.jit
def split_join_kernel(x_ptr, y_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)
    c = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + c[None, :])
    x3 = tl.permute(tl.reshape(x, (M, 2, N // 2)), (0, 2, 1))
    lo, hi = tl.split(x3)  # columns [0, N/2) and [N/2, N)
    h = tl.arange(0, N // 2)
    tl.store(y_ptr + r[:, None] * (N // 2) + h[None, :], hi - lo)
    j = tl.join(hi, lo)  # M x N/2 x 2
    back = tl.reshape(tl.permute(j, (0, 2, 1)), (M, N))  # hi first, then lo
    tl.store(z_ptr + r[:, None] * N + c[None, :], back)


@tlx.jit
def atomic_kernel(cnt_ptr, fsum_ptr, mx_ptr, ticket_ptr, cas_ptr, SLOTS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    tl.atomic_add(cnt_ptr + (i % SLOTS), 1)       # BLOCK < threads: copies must not add twice
    tl.atomic_add(fsum_ptr + (i % SLOTS), 0.5)
    tl.atomic_max(mx_ptr + (i % SLOTS), pid * BLOCK + i)
    t = tl.atomic_add(ticket_ptr, 1)              # scalar: one per program, the old value to all
    tl.store(ticket_ptr + 1 + pid, t)
    old = tl.atomic_cas(cas_ptr + pid, 0, pid + 7)
    tl.store(cas_ptr + 1024 + pid, old)


@tlx.jit
def smem_kernel(x_ptr, y_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)
    c = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * N + c[None, :])
    buf = tlx.local_alloc((M, N), tlx.dtype_of(x_ptr), 2)
    tlx.local_store(buf[1], x)
    y = tlx.local_load(tlx.local_trans(buf[1]))        # N x M view of the swizzled tile
    tl.store(y_ptr + c[:, None] * M + r[None, :], y)
    q = tlx.local_load(tlx.local_slice(buf[1], [M // 2, N // 2], [M // 2, N // 2]))
    rq = tl.arange(0, M // 2)
    cq = tl.arange(0, N // 2)
    tl.store(z_ptr + rq[:, None] * (N // 2) + cq[None, :], q)


@tlx.jit
def dyn_slice_kernel(x_ptr, y_ptr, row0, M: tl.constexpr, N: tl.constexpr, R: tl.constexpr):
    """A sub-slice at a runtime row offset (a multiple of its R rows) of a swizzled tile."""
    r = tl.arange(0, M)
    c = tl.arange(0, N)
    buf = tlx.local_alloc((M, N), tlx.dtype_of(x_ptr), 1)
    tlx.local_store(buf[0], tl.load(x_ptr + r[:, None] * N + c[None, :]))
    q = tlx.local_load(tlx.local_slice(buf[0], [row0, 0], [R, N]))
    rr = tl.arange(0, R)
    tl.store(y_ptr + rr[:, None] * N + c[None, :], q)


@tlx.jit
def cp_async_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr, STAGES: tl.constexpr):
    r = tl.arange(0, M)
    c = tl.arange(0, N)
    bufs = tlx.local_alloc((M, N), tlx.dtype_of(x_ptr), STAGES)
    for s in tl.static_range(STAGES):
        tok = tlx.async_load(x_ptr + (s * M + r[:, None]) * N + c[None, :], bufs[s], mask=r[:, None] < M - s)
        tlx.async_load_commit_group([tok])
    tlx.async_load_wait_group(0)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for s in tl.static_range(STAGES):
        acc += tlx.local_load(bufs[s]).to(tl.float32)
    tl.store(y_ptr + r[:, None] * N + c[None, :], acc)


@tlx.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, A_MN: tl.constexpr,
               B_KMAJOR: tl.constexpr):
    """C = A @ B with A stored K-major ([M, K]) or MN-major ([K, M], read through local_trans),
    and B stored MN-major ([K, N]) or K-major ([N, K], read through local_trans)."""
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    if A_MN:
        a = tl.load(a_ptr + k[:, None] * M + m[None, :])
        a_buf = tlx.local_alloc((K, M), tlx.dtype_of(a_ptr), 1)
        tlx.local_store(a_buf[0], a)
        a_op = tlx.local_trans(a_buf[0])
    else:
        a = tl.load(a_ptr + m[:, None] * K + k[None, :])
        a_buf = tlx.local_alloc((M, K), tlx.dtype_of(a_ptr), 1)
        tlx.local_store(a_buf[0], a)
        a_op = a_buf[0]
    if B_KMAJOR:
        b = tl.load(b_ptr + n[:, None] * K + k[None, :])
        b_buf = tlx.local_alloc((N, K), tlx.dtype_of(b_ptr), 1)
        tlx.local_store(b_buf[0], b)
        b_op = tlx.local_trans(b_buf[0])
    else:
        b = tl.load(b_ptr + k[:, None] * N + n[None, :])
        b_buf = tlx.local_alloc((K, N), tlx.dtype_of(b_ptr), 1)
        tlx.local_store(b_buf[0], b)
        b_op = b_buf[0]
    acc = tlx.async_dot(a_op, b_op)
    acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + m[:, None] * N + n[None, :], acc)


@tlx.jit
def dot_reg_a_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """A from registers (as FA's P @ V): A @ B with A read back by ldmatrix, then (2A) @ B with A
    computed in registers, chained on one accumulator."""
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    a_buf = tlx.local_alloc((M, K), tlx.dtype_of(a_ptr), 1)
    b_buf = tlx.local_alloc((K, N), tlx.dtype_of(b_ptr), 1)
    tlx.local_store(a_buf[0], a)
    tlx.local_store(b_buf[0], b)
    acc = tlx.async_dot(tlx.local_load(a_buf[0]), b_buf[0])
    acc = tlx.async_dot((a * 2.0).to(tlx.dtype_of(a_ptr)), b_buf[0], acc)
    acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + m[:, None] * N + n[None, :], acc)


@tlx.jit
def tma_copy_kernel(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    """TMA in (box split when BN is wider than the 128-byte swizzle), +1, TMA out."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    bufs = tlx.local_alloc((BM, BN), tlx.dtype_of(x_desc), 2)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], BM * BN * tlx.size_of(tlx.dtype_of(x_desc)))
    tlx.async_descriptor_load(x_desc, bufs[0], [pid_m * BM, pid_n * BN], bars[0])
    tlx.barrier_wait(bars[0], 0)
    x = tlx.local_load(bufs[0])
    tlx.local_store(bufs[1], x + 1)
    tlx.async_descriptor_store(y_desc, bufs[1], [pid_m * BM, pid_n * BN])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def device_desc_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    xd = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    yd = tl.make_tensor_descriptor(y_ptr, [M, N], [N, 1], [BM, BN])
    t = xd.load([tl.program_id(0) * BM, tl.program_id(1) * BN])
    yd.store([tl.program_id(0) * BM, tl.program_id(1) * BN], t * 2)


@tlx.jit
def desc_load_loop_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Sums the BM x BN tiles of one column of tiles: a register-level descriptor load in a loop,
    so its mbarrier is initialized, waited on and invalidated every iteration."""
    xd = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [BM, BN])
    acc = tl.zeros((BM, BN), tl.float32)
    for i in range(0, tl.cdiv(M, BM)):
        acc += xd.load([i * BM, tl.program_id(0) * BN]).to(tl.float32)
    rows = tl.arange(0, BM)[:, None]
    cols = tl.program_id(0) * BN + tl.arange(0, BN)[None, :]
    tl.store(y_ptr + rows * N + cols, acc)


@tlx.jit
def control_kernel(x_ptr, y_ptr, ids_ptr, clk_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))
    t0 = tlx.clock64()
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    i = 0
    while i < 5:
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0) * i
        i += 1
    if pid % 2 == 0:
        acc = -acc
    tl.store(y_ptr + offs, acc, mask=offs < n)
    tid = tlx.thread_id(0)
    tl.store(ids_ptr + pid * 128 + tl.arange(0, 128), tl.arange(0, 128) + tid - tid)
    t1 = tlx.clock64()
    tl.store(clk_ptr + pid, t1 - t0)


@tlx.jit
def ws_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    """A producer partition hands a tile to a consumer partition through an mbarrier pair;
    setmaxnreg splits the register file (the consumer asks for 232)."""
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tlx.local_store(buf[0], tl.load(x_ptr + offs) * 3.0)
            tlx.barrier_arrive(full[0])
        with tlx.async_task(num_warps=4, registers=232):
            tlx.barrier_wait(full[0], 0)
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            v = tlx.local_load(buf[0])
            tl.store(y_ptr + offs, v + tlx.thread_id(0).to(tl.float32) * 0.0 + 1.0)


# =============================================================================================
# checks
# =============================================================================================

@dataclass
class Result:
    name: str
    ok: bool
    err: float
    bound: str
    seconds: float
    detail: str = ""


CHECKS: List[Tuple[str, Callable]] = []


def check(name: str):
    def deco(fn):
        CHECKS.append((name, fn))
        return fn
    return deco


def _torch():
    import torch
    return torch


def _cmp(got, want, rtol, atol, what):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    err = np.abs(got - want)
    bound = atol + rtol * np.abs(want)
    bad = ~(err <= bound)
    if bad.any():
        i = tuple(int(x) for x in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())}/{bad.size} out of bound, first at {i}: got {got[i]!r} "
                             f"want {want[i]!r}")
    return float(np.max(err / (atol + rtol * np.abs(want)))) if err.size else 0.0


def _poisoned(shape, dtype):
    torch = _torch()
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), device="cuda", dtype=dtype)
    return torch.full(shape, 0x7F, device="cuda", dtype=dtype)


def _np(t):
    return t.detach().float().cpu().numpy().astype(np.float64) if t.dtype.is_floating_point else t.cpu().numpy()


UNARY = {"exp": (np.exp, (-4, 4), 2e-6, 1e-30), "exp2": (np.exp2, (-6, 6), 2e-6, 1e-30),
         "log": (np.log, (0.05, 20), 0, 3e-6), "log2": (np.log2, (0.05, 20), 0, 3e-6),
         "sqrt": (np.sqrt, (0, 100), 1.2e-7, 0), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 100), 3e-7, 0),
         "sin": (np.sin, (-3.14, 3.14), 0, 2e-6), "cos": (np.cos, (-3.14, 3.14), 0, 2e-6),
         "erf": (np.vectorize(math.erf), (-4, 4), 0, 1e-6), "tanh": (np.tanh, (-6, 6), 0, 1e-6),
         "floor": (np.floor, (-50, 50), 0, 0), "ceil": (np.ceil, (-50, 50), 0, 0),
         "abs": (np.abs, (-5, 5), 0, 0), "neg": (np.negative, (-5, 5), 0, 0),
         "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-8, 8), 4e-6, 1e-7)}


for _op in UNARY:
    def _unary(op=_op):
        torch = _torch()
        fn, (lo, hi), rtol, atol = UNARY[op]
        n = 5000
        x = torch.empty(n, device="cuda").uniform_(lo, hi)
        y = _poisoned((n,), torch.float32)
        unary_kernel[(math.ceil(n / 1024),)](x, y, n, OP=op, BLOCK=1024)
        torch.cuda.synchronize()
        x64 = _np(x)
        return _cmp(_np(y), fn(x64), rtol, atol + 1e-7 * (op in ("exp", "exp2")), f"{op}")
    check(f"unary f32 {_op}")(_unary)


BINARY_F = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
            "max": np.maximum, "min": np.minimum, "fma": lambda x, y: x * y + x, "mod": np.fmod,
            "lt": lambda x, y: np.where(x < y, x, y)}
BINARY_I = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
            "floordiv": lambda x, y: np.trunc(x / y).astype(np.int64), "mod": lambda x, y: np.fmod(x, y),
            "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "xor": np.bitwise_xor,
            "shr": lambda x, y: x >> (y & 7), "shl": lambda x, y: x << (y & 7),
            "eq": lambda x, y: np.where(x == y, x + 1, y)}

for _op in BINARY_F:
    for _dt in ("float32", "float16", "bfloat16"):
        if _op == "mod" and _dt != "float32":
            continue

        def _bin_f(op=_op, dt=_dt):
            torch = _torch()
            n = 3000
            x = torch.empty(n, device="cuda").uniform_(-8, 8).to(getattr(torch, dt))
            y = torch.empty(n, device="cuda").uniform_(0.5, 4).to(getattr(torch, dt))
            z = _poisoned((n,), x.dtype)
            binary_kernel[(3,)](x, y, z, n, OP=op, BLOCK=1024)
            torch.cuda.synchronize()
            want = BINARY_F[op](_np(x), _np(y))
            eps = {"float32": 2 ** -23, "float16": 2 ** -10, "bfloat16": 2 ** -7}[dt]
            atol = 1e-6 if op == "mod" else 0
            return _cmp(_np(z), want, eps * (2 if op == "fma" else 1), atol, f"{op} {dt}")
        check(f"binary {_dt} {_op}")(_bin_f)

for _op in BINARY_I:
    def _bin_i(op=_op):
        torch = _torch()
        n = 3000
        x = torch.randint(-1000, 1000, (n,), device="cuda", dtype=torch.int32)
        y = torch.randint(1, 50, (n,), device="cuda", dtype=torch.int32)
        z = _poisoned((n,), torch.int32)
        binary_kernel[(3,)](x, y, z, n, OP=op, BLOCK=1024)
        torch.cuda.synchronize()
        want = BINARY_I[op](_np(x).astype(np.int64), _np(y).astype(np.int64))
        want = ((want + 2 ** 31) % 2 ** 32 - 2 ** 31)
        return _cmp(_np(z), want, 0, 0, f"i32 {op}")
    check(f"binary i32 {_op}")(_bin_i)


def _bf16_round(x64):
    b = x64.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


CASTS = [("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32"), ("bfloat16", "float32"),
         ("float16", "bfloat16"), ("float32", "int32"), ("int32", "float32"), ("int32", "int8"),
         ("int8", "int32"), ("uint8", "int32"), ("int32", "int16"), ("float32", "float8_e4m3fn"),
         ("float32", "float8_e5m2"), ("float8_e4m3fn", "float32"), ("float8_e5m2", "float16"),
         ("float64", "float32"), ("float32", "float64"), ("int64", "int32"), ("int32", "int64")]

for _src, _dst in CASTS:
    def _cast(src=_src, dst=_dst):
        torch = _torch()
        n = 3000
        sd, dd = getattr(torch, src), getattr(torch, dst)
        if sd.is_floating_point:
            base = torch.empty(n, device="cuda", dtype=torch.float64).uniform_(-300, 300)
            if "float8" in dst or src == "float16":
                base = base.clamp(-400, 400)
            if dst in ("int32", "int16", "int8"):
                base = base.clamp(-100, 100)
            x = base.to(sd)
        else:
            lo, hi = (-128, 127) if src in ("int8",) else (0, 255) if src == "uint8" else (-40000, 40000)
            x = torch.randint(lo, hi, (n,), device="cuda").to(sd)
        y = _poisoned((n,), dd)
        cast_kernel[(3,)](x, y, n, BLOCK=1024)
        torch.cuda.synchronize()
        want = x.to(dd) if not (sd.is_floating_point and not dd.is_floating_point) else torch.trunc(x.double()).to(dd)
        if src in ("int32", "int64") and dst in ("int8", "int16", "int32"):  # wrap, as C casts do
            bits = {"int8": 8, "int16": 16, "int32": 32}[dst]
            w = (x.cpu().numpy().astype(np.int64) + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)
            return _cmp(_np(y), w, 0, 0, f"{src}->{dst}")
        return _cmp(_np(y), _np(want), 0, 0, f"{src}->{dst}")
    check(f"cast {_src}->{_dst}")(_cast)


REDUCTIONS = [("sum", 0), ("sum", 1), ("max", 0), ("max", 1), ("min", 1), ("argmax", 0), ("argmax", 1),
              ("argmin", 0), ("xor_sum", 1)]
for _kind, _axis in REDUCTIONS:
    for _nw in (4, 8):
        def _red(kind=_kind, axis=_axis, nw=_nw):
            torch = _torch()
            M, N = 64, 256
            if kind == "xor_sum":
                x = torch.randint(0, 2 ** 20, (M, N), device="cuda", dtype=torch.int32)
            elif kind.startswith("arg"):
                x = torch.randint(-20, 20, (M, N), device="cuda").float()  # ties: the smallest index wins
            else:
                x = torch.randn(M, N, device="cuda")
            out_n = N if axis == 0 else M
            y = _poisoned((out_n,), torch.int32 if kind in ("argmax", "argmin", "xor_sum") else torch.float32)
            reduce_kernel[(1,)](x, y, M=M, N=N, AXIS=axis, KIND=kind, num_warps=nw)
            torch.cuda.synchronize()
            xn = _np(x)
            want = {"sum": lambda a: a.sum(axis), "max": lambda a: a.max(axis), "min": lambda a: a.min(axis),
                    "argmax": lambda a: a.argmax(axis), "argmin": lambda a: a.argmin(axis),
                    "xor_sum": lambda a: np.bitwise_xor.reduce(a, axis=axis)}[kind](xn)
            rtol = 1e-6 if kind == "sum" else 0
            return _cmp(_np(y), want, rtol, 1e-5 if kind == "sum" else 0, f"{kind} axis {axis}")
        check(f"reduce {_kind} axis={_axis} warps={_nw}")(_red)


@check("reduce to a scalar, 8 warps")
def _full_reduce():
    torch = _torch()
    x = torch.randn(4 * 2048, device="cuda")
    y = _poisoned((4,), torch.float32)
    full_reduce_kernel[(4,)](x, y, BLOCK=2048, num_warps=8)
    torch.cuda.synchronize()
    return _cmp(_np(y), _np(x).reshape(4, 2048).sum(1), 1e-5, 1e-4, "full sum")


@check("trans + conversion through shared memory")
def _trans():
    torch = _torch()
    M, N = 64, 128
    x = torch.randn(M, N, device="cuda")
    y = _poisoned((N, M), torch.float32)
    trans_kernel[(1,)](x, y, M=M, N=N, num_warps=4)
    torch.cuda.synchronize()
    return _cmp(_np(y), _np(x).T, 0, 0, "trans")


@check("reshape / permute / split / join")
def _split_join():
    torch = _torch()
    M, N = 64, 128
    x = torch.randn(M, N, device="cuda")
    y = _poisoned((M, N // 2), torch.float32)
    z = _poisoned((M, N), torch.float32)
    split_join_kernel[(1,)](x, y, z, M=M, N=N, num_warps=4)
    torch.cuda.synchronize()
    xn = _np(x)
    lo, hi = xn[:, :N // 2], xn[:, N // 2:]
    # the kernel subtracts in fp32: the reference does too (one correctly rounded subtraction)
    e1 = _cmp(_np(y), hi.astype(np.float32) - lo.astype(np.float32), 0, 0, "split")
    want = np.stack([hi, lo], axis=-1).transpose(0, 2, 1).reshape(M, N)
    return max(e1, _cmp(_np(z), want, 0, 0, "join"))


@check("atomics: copies add once, scalar tickets, cas")
def _atomics():
    torch = _torch()
    P, SLOTS, BLOCK = 50, 8, 64
    cnt = torch.zeros(SLOTS, device="cuda", dtype=torch.int32)
    fsum = torch.zeros(SLOTS, device="cuda", dtype=torch.float32)
    mx = torch.full((SLOTS,), -1, device="cuda", dtype=torch.int32)
    ticket = torch.zeros(1 + P, device="cuda", dtype=torch.int32)
    cas = torch.zeros(2048, device="cuda", dtype=torch.int32)
    atomic_kernel[(P,)](cnt, fsum, mx, ticket, cas, SLOTS=SLOTS, BLOCK=BLOCK, num_warps=4)
    torch.cuda.synchronize()
    per = BLOCK // SLOTS * P
    _cmp(_np(cnt), np.full(SLOTS, per), 0, 0, "atomic_add counts")
    _cmp(_np(fsum), np.full(SLOTS, 0.5 * per), 0, 0, "atomic fadd")
    want_mx = np.array([max(p * BLOCK + i for p in range(P) for i in range(BLOCK) if i % SLOTS == s)
                        for s in range(SLOTS)])
    _cmp(_np(mx), want_mx, 0, 0, "atomic_max")
    t = _np(ticket)
    assert t[0] == P and sorted(t[1:].tolist()) == list(range(P)), f"tickets {t}"
    c = _np(cas)
    _cmp(c[:P], np.arange(P) + 7, 0, 0, "cas new values")
    _cmp(c[1024:1024 + P], np.zeros(P), 0, 0, "cas old values")
    return 0.0


for _dt in ("float16", "float32", "int8"):
    def _smem(dt=_dt):
        torch = _torch()
        M, N = 64, 128 if dt != "float32" else 64
        d = getattr(torch, dt)
        x = (torch.randn(M, N, device="cuda") * 20).to(d) if dt != "int8" else \
            torch.randint(-100, 100, (M, N), device="cuda", dtype=d)
        y = _poisoned((N, M), d)
        z = _poisoned((M // 2, N // 2), d)
        smem_kernel[(1,)](x, y, z, M=M, N=N, num_warps=4)
        torch.cuda.synchronize()
        xn = _np(x)
        return max(_cmp(_np(y), xn.T, 0, 0, "local_trans view"),
                   _cmp(_np(z), xn[M // 2:, N // 2:], 0, 0, "local_slice view"))
    check(f"shared memory: swizzled {_dt} tile, transposed and sliced views")(_smem)


@check("shared memory: sub-slice at a runtime offset")
def _dyn_slice():
    torch = _torch()
    M, N, R = 64, 64, 16
    x = torch.randn(M, N, device="cuda").half()
    errs = []
    for row0 in (0, 16, 48):
        y = _poisoned((R, N), torch.float16)
        dyn_slice_kernel[(1,)](x, y, row0, M=M, N=N, R=R, num_warps=4)
        torch.cuda.synchronize()
        errs.append(_cmp(_np(y), _np(x)[row0:row0 + R], 0, 0, f"slice at {row0}"))
    return max(errs)


@check("cp.async with zero-filled masked tails")
def _cp_async():
    torch = _torch()
    M, N, S = 64, 64, 3
    x = torch.randn(S * M, N, device="cuda").half()
    y = _poisoned((M, N), torch.float32)
    cp_async_kernel[(1,)](x, y, M=M, N=N, STAGES=S, num_warps=4)
    torch.cuda.synchronize()
    xn = _np(x).reshape(S, M, N)
    want = sum(np.where(np.arange(M)[:, None] < M - s, xn[s], 0) for s in range(S))
    return _cmp(_np(y), want, 1e-6, 1e-6, "cp.async")


DOTS = [("float16", 64, 64, 64, False, False), ("float16", 128, 128, 64, False, False),
        ("bfloat16", 64, 256, 32, False, False), ("float16", 64, 128, 64, True, False),
        ("float16", 64, 128, 64, False, True), ("float16", 128, 64, 128, True, True),
        ("float32", 64, 64, 32, False, True), ("float8_e4m3fn", 64, 128, 64, False, True),
        ("float8_e5m2", 64, 64, 128, False, True), ("int8", 64, 64, 64, False, True),
        ("float16", 256, 64, 32, False, False)]

for _d in DOTS:
    for _nw in ((4, 8) if _d[1] >= 128 else (4,)):
        def _dot(spec=_d, nw=_nw):
            torch = _torch()
            dt, M, N, K, a_mn, b_k = spec
            d = getattr(torch, dt)
            if dt == "int8":
                a = torch.randint(-8, 8, (M, K), device="cuda", dtype=d)
                b = torch.randint(-8, 8, (K, N), device="cuda", dtype=d)
                c = _poisoned((M, N), torch.int32)
            else:
                a = torch.randn(M, K, device="cuda").to(d)
                b = torch.randn(K, N, device="cuda").to(d)
                c = _poisoned((M, N), torch.float32)
            a_store = a.t().contiguous() if a_mn else a
            b_store = b.t().contiguous() if b_k else b
            dot_kernel[(1,)](a_store, b_store, c, M=M, N=N, K=K, A_MN=a_mn, B_KMAJOR=b_k, num_warps=nw)
            torch.cuda.synchronize()
            a64, b64 = _np(a).astype(np.float64), _np(b).astype(np.float64)
            want = a64 @ b64
            if dt == "float32":  # tf32 inputs: 10-bit mantissas
                bound = (2.0 ** -10 + K * 2.0 ** -22) * (np.abs(a64) @ np.abs(b64)) + 1e-30
                return _cmp(_np(c), want, 0, bound, "tf32 wgmma")
            # fp8 wgmma accumulates with a narrower adder than fp32 on Hopper (about 14 bits)
            step = 2.0 ** -14 if dt.startswith("float8") else 2.0 ** -22
            atol = K * step * (np.abs(a64) @ np.abs(b64)) + 1e-30
            return _cmp(_np(c), want, 0, atol if dt != "int8" else 0, f"wgmma {spec}")
        check(f"wgmma {_d[0]} {_d[1]}x{_d[2]}x{_d[3]} A={'MN' if _d[4] else 'K'}-major "
              f"B={'K' if _d[5] else 'MN'}-major warps={_nw}")(_dot)


@check("wgmma with A from registers (chained on one accumulator)")
def _dot_reg():
    torch = _torch()
    M, N, K = 64, 128, 64
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = _poisoned((M, N), torch.float32)
    dot_reg_a_kernel[(1,)](a, b, c, M=M, N=N, K=K, num_warps=4)
    torch.cuda.synchronize()
    a64, b64 = _np(a), _np(b)
    want = 3 * (a64 @ b64)
    return _cmp(_np(c), want, 0, 3 * K * 2.0 ** -21 * (np.abs(a64) @ np.abs(b64)) + 1e-30, "register A")


for _bn, _dt in ((64, "float16"), (128, "float16"), (256, "bfloat16"), (64, "float32")):
    def _tma(bn=_bn, dt=_dt):
        torch = _torch()
        d = getattr(torch, dt)
        M, N, BM = 200, 3 * bn, 64
        x = torch.randn(M, N, device="cuda").to(d)
        y = _poisoned((M, N), d)
        xd = tlx.TensorDescriptor(x, [M, N], [N, 1], [BM, bn])
        yd = tlx.TensorDescriptor(y, [M, N], [N, 1], [BM, bn])
        tma_copy_kernel[(math.ceil(M / BM), N // bn)](xd, yd, BM=BM, BN=bn, num_warps=4)
        torch.cuda.synchronize()
        return _cmp(_np(y), _np((x.float() + 1).to(d)), 0, 0, f"tma {bn}")
    check(f"TMA load/store {_dt} box inner {_bn} (split into 128-byte boxes)")(_tma)


@check("device-side tensor descriptors (tensormap built in the kernel)")
def _device_desc():
    torch = _torch()
    M, N = 256, 192
    x = torch.randn(M, N, device="cuda").half()
    y = _poisoned((M, N), torch.float16)
    device_desc_kernel[(M // 64, N // 64)](x, y, M, N, BM=64, BN=64, num_warps=4)
    torch.cuda.synchronize()
    return _cmp(_np(y), _np(x) * 2, 0, 0, "device descriptor")


@check("descriptor load in a loop (its mbarrier re-initialized every iteration)")
def _desc_load_loop():
    torch = _torch()
    M, N, BM, BN = 64 * 37, 256, 64, 64  # 37 iterations of the loop
    x = torch.randn(M, N, device="cuda").half()
    y = _poisoned((BM, N), torch.float32)
    desc_load_loop_kernel[(N // BN,)](x, y, M, N, BM=BM, BN=BN, num_warps=4)
    torch.cuda.synchronize()
    ref = _np(x).astype("float64").reshape(M // BM, BM, N).sum(axis=0)
    return _cmp(_np(y), ref, 1e-5, 1e-3, "descriptor load loop")


@check("control flow: while, if, early return, 3-D grid, thread ids, clock64")
def _control():
    torch = _torch()
    n, BLOCK = 1000, 128
    grid = (2, 2, 3)
    x = torch.randn(n, device="cuda")
    y = _poisoned((n,), torch.float32)
    ids = torch.full((12 * 128,), -1, device="cuda", dtype=torch.int32)
    clk = torch.zeros(12, device="cuda", dtype=torch.int64)
    control_kernel[grid](x, y, ids, clk, n, BLOCK=BLOCK, num_warps=4)
    torch.cuda.synchronize()
    xn = _np(x)
    pid = np.arange(n) // BLOCK
    want = np.where(pid % 2 == 0, -10 * xn, 10 * xn)
    e = _cmp(_np(y), want, 1e-6, 1e-6, "while/if")
    live = (n + BLOCK - 1) // BLOCK
    got_ids = _np(ids).reshape(12, 128)
    assert (got_ids[:live] == np.arange(128)).all() and (got_ids[live:] == -1).all(), "early return / ids"
    assert (_np(clk)[:live] > 0).all(), "clock64 did not advance"
    return e


@check("warp specialization: mbarrier hand-off, setmaxnreg 232")
def _ws():
    torch = _torch()
    BLOCK = 512
    x = torch.randn(4 * BLOCK, device="cuda")
    y = _poisoned((4 * BLOCK,), torch.float32)
    ws_kernel[(4,)](x, y, BLOCK=BLOCK, num_warps=4)
    torch.cuda.synchronize()
    xn = _np(x).astype(np.float64)
    # x * 3 + 1 in fp32, possibly fused into one fma by ptxas: within 2 ulps of the terms
    return _cmp(_np(y), xn * 3 + 1, 0, 2.0 ** -22 * (np.abs(3 * xn) + 1), "ws")


def _gemm_ref_check(c, a, b, what):
    a64, b64 = _np(a), _np(b)
    want = a64 @ b64
    bound = a.shape[1] * 2.0 ** -22 * (np.abs(a64) @ np.abs(b64)) + 2.0 ** -10 * np.abs(want) + 1e-30
    got = _np(c)
    bad = ~(np.abs(got - want) <= bound)
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} bad, first {i}: got {got[i]} want {want[i]}")
    return float(np.max(np.abs(got - want) / bound))


for _bn, _nw in ((256, 8), (128, 8), (128, 4)):
    def _gemm_pipe(bn=_bn, nw=_nw):
        from catalog import load_tlx_source
        torch = _torch()
        gp = load_tlx_source("gemm_pipelined_tlx.py")
        M, N, K = 512, 768, 640
        a = torch.randn(M, K, device="cuda").half()
        b = torch.randn(K, N, device="cuda").half()
        c = _poisoned((M, N), torch.float16)
        grid = (math.ceil(M / 128) * math.ceil(N / bn),)
        gp.gemm_pipelined_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                       c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8,
                                       STAGES=3, num_warps=nw)
        torch.cuda.synchronize()
        return _gemm_ref_check(c, a, b, f"cp.async GEMM BN={bn} warps={nw}")
    check(f"cp.async pipelined GEMM 128x{_bn}x64, {_nw} warps")(_gemm_pipe)


@check("warp-specialized TMA GEMM (tlx_sources/gemm_ws_tlx.py)")
def _gemm_ws():
    from catalog import load_tlx_source
    torch = _torch()
    gw = load_tlx_source("gemm_ws_tlx.py")
    M, N, K = 512, 512, 512
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = _poisoned((M, N), torch.float16)
    ad = tlx.TensorDescriptor(a, [M, K], [K, 1], [64, 64])
    bd = tlx.TensorDescriptor(b, [K, N], [N, 1], [64, 256])
    cd = tlx.TensorDescriptor(c, [M, N], [N, 1], [64, 256])
    gw.gemm_ws_kernel[(math.ceil(M / 128) * math.ceil(N / 256),)](ad, bd, cd, M, N, K, BM=128, BN=256, BK=64,
                                                                   STAGES=3, GROUPS=2, num_warps=4)
    torch.cuda.synchronize()
    return _gemm_ref_check(c, a, b, "WS GEMM")


@check("flash attention forward (register-A wgmma, online softmax)")
def _fa():
    from catalog import load_tlx_source
    torch = _torch()
    fa = load_tlx_source("fa_fwd_tlx.py")
    Z, N_CTX, D = 2, 256, 128
    q = torch.randn(Z * N_CTX, D, device="cuda").half()
    k = torch.randn(Z * N_CTX, D, device="cuda").half()
    v = torch.randn(Z * N_CTX, D, device="cuda").half()
    o = _poisoned((Z * N_CTX, D), torch.float16)
    qd = tlx.TensorDescriptor(q, [Z * N_CTX, D], [D, 1], [64, D])
    kd = tlx.TensorDescriptor(k, [Z * N_CTX, D], [D, 1], [128, D])
    vd = tlx.TensorDescriptor(v, [Z * N_CTX, D], [D, 1], [128, D])
    od = tlx.TensorDescriptor(o, [Z * N_CTX, D], [D, 1], [64, D])
    scale = 1.0 / math.sqrt(D)
    fa.fa_fwd_kernel[(N_CTX // 128, Z)](qd, kd, vd, od, scale, N_CTX, HEAD_DIM=D, BLOCK_M=128, BLOCK_N=128,
                                        SLOTS=2, GROUPS=2, num_warps=4)
    torch.cuda.synchronize()
    q64, k64, v64 = (_np(t).reshape(Z, N_CTX, D) for t in (q, k, v))
    s = q64 @ k64.transpose(0, 2, 1) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v64
    return _cmp(_np(o).reshape(Z, N_CTX, D), want, 2e-2, 2e-2, "flash attention")


# =============================================================================================
# compile-only (CPU) and the driver
# =============================================================================================

COMPILE_SPECS: List[Tuple[str, object, Dict[str, str], Dict[str, object], int]] = []


def _spec(name, fn, sig, consts, nw=4):
    COMPILE_SPECS.append((name, fn, sig, consts, nw))


for _op in UNARY:
    _spec(f"unary {_op}", unary_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"OP": _op, "BLOCK": 1024})
for _op in BINARY_F:
    for _t in ("fp32", "fp16", "bf16"):
        if _op == "mod" and _t != "fp32":
            continue
        _spec(f"binary {_t} {_op}", binary_kernel, {"x_ptr": f"*{_t}", "y_ptr": f"*{_t}", "z_ptr": f"*{_t}", "n": "i32"},
              {"OP": _op, "BLOCK": 1024})
for _op in BINARY_I:
    _spec(f"binary i32 {_op}", binary_kernel, {"x_ptr": "*i32", "y_ptr": "*i32", "z_ptr": "*i32", "n": "i32"},
          {"OP": _op, "BLOCK": 1024})
_TS = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int32": "i32", "int8": "i8", "uint8": "u8",
       "int16": "i16", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float64": "fp64", "int64": "i64"}
for _s, _d in CASTS:
    _spec(f"cast {_s}->{_d}", cast_kernel, {"x_ptr": f"*{_TS[_s]}", "y_ptr": f"*{_TS[_d]}", "n": "i32"}, {"BLOCK": 1024})
for _kind, _axis in REDUCTIONS:
    for _nw in (4, 8):
        t = "*i32" if _kind == "xor_sum" else "*fp32"
        o = "*i32" if _kind in ("argmax", "argmin", "xor_sum") else "*fp32"
        _spec(f"reduce {_kind} {_axis} {_nw}", reduce_kernel, {"x_ptr": t, "y_ptr": o},
              {"M": 64, "N": 256, "AXIS": _axis, "KIND": _kind}, _nw)
_spec("full reduce", full_reduce_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 2048}, 8)
_spec("trans", trans_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"M": 64, "N": 128})
_spec("split/join", split_join_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32"}, {"M": 64, "N": 128})
_spec("atomics", atomic_kernel, {"cnt_ptr": "*i32", "fsum_ptr": "*fp32", "mx_ptr": "*i32", "ticket_ptr": "*i32",
                                 "cas_ptr": "*i32"}, {"SLOTS": 8, "BLOCK": 64})
for _dt, _n in (("fp16", 128), ("fp32", 64), ("i8", 128)):
    _spec(f"smem {_dt}", smem_kernel, {"x_ptr": f"*{_dt}", "y_ptr": f"*{_dt}", "z_ptr": f"*{_dt}"}, {"M": 64, "N": _n})
_spec("dynamic slice", dyn_slice_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp16", "row0": "i32"}, {"M": 64, "N": 64, "R": 16})
_spec("cp.async", cp_async_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp32"}, {"M": 64, "N": 64, "STAGES": 3})
for _d in DOTS:
    for _nw in ((4, 8) if _d[1] >= 128 else (4,)):
        o = "*i32" if _d[0] == "int8" else "*fp32"
        _spec(f"wgmma {_d} {_nw}", dot_kernel, {"a_ptr": f"*{_TS[_d[0]]}", "b_ptr": f"*{_TS[_d[0]]}", "c_ptr": o},
              {"M": _d[1], "N": _d[2], "K": _d[3], "A_MN": _d[4], "B_KMAJOR": _d[5]}, _nw)
_spec("wgmma register A", dot_reg_a_kernel, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"},
      {"M": 64, "N": 128, "K": 64})
for _bn, _dt in ((64, "fp16"), (128, "fp16"), (256, "bf16"), (64, "fp32")):
    _spec(f"tma {_bn} {_dt}", tma_copy_kernel, {"x_desc": f"tensordesc<{_dt}[64, {_bn}]>",
                                                  "y_desc": f"tensordesc<{_dt}[64, {_bn}]>"}, {"BM": 64, "BN": _bn})
_spec("device descriptors", device_desc_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp16", "M": "i32", "N": "i32"},
      {"BM": 64, "BN": 64})
_spec("descriptor load loop", desc_load_loop_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp32", "M": "i32", "N": "i32"},
      {"BM": 64, "BN": 64})
_spec("control", control_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "ids_ptr": "*i32", "clk_ptr": "*i64", "n": "i32"},
      {"BLOCK": 128})
_spec("ws", ws_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 512})


def compile_all(verbose: bool = True) -> List[Tuple[str, Optional[str]]]:
    """Compile (and ptxas) every kernel of this script for its specializations; (name, error)."""
    out = []
    for name, fn, sig, consts, nw in COMPILE_SPECS:
        try:
            div = {k: 16 for k in sig}
            k = tlx.compile(fn, sig, consts, num_warps=nw, divisibility=div)
            if "cubin" not in k.asm:
                raise RuntimeError(f"no cubin: {k.resources}")
            out.append((name, None))
        except Exception as e:  # noqa: BLE001 - reported in the table
            out.append((name, f"{type(e).__name__}: {str(e).splitlines()[0]}"))
        if verbose:
            print(f"{'ok  ' if out[-1][1] is None else 'FAIL'} {name}" + (f"  {out[-1][1]}" if out[-1][1] else ""))
    return out


def run_checks(pattern: str = "") -> List[Result]:
    results = []
    for name, fn in CHECKS:
        if pattern and pattern not in name:
            continue
        t0 = time.perf_counter()
        try:
            err = fn()
            results.append(Result(name, True, float(err or 0.0), "", time.perf_counter() - t0))
        except Exception as e:  # noqa: BLE001 - every failure goes in the table
            results.append(Result(name, False, float("nan"), "", time.perf_counter() - t0,
                                  f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))
            traceback.print_exc()
    return results


def main(argv: List[str]) -> int:
    if "--compile" in argv:
        res = compile_all()
        bad = [r for r in res if r[1]]
        print(f"\n{len(res) - len(bad)}/{len(res)} kernels compile and assemble")
        return 1 if bad else 0
    pattern = next((a for a in argv if not a.startswith("-")), "")
    results = run_checks(pattern)
    w = max(len(r.name) for r in results) if results else 10
    print("\n" + "check".ljust(w) + "  result  err/bound  seconds")
    for r in results:
        print(f"{r.name.ljust(w)}  {'ok    ' if r.ok else 'FAIL  '}  {r.err:9.3g}  {r.seconds:7.2f}"
              + (f"  {r.detail}" if r.detail else ""))
    n_bad = sum(not r.ok for r in results)
    print(f"\n{len(results) - n_bad}/{len(results)} checks passed")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

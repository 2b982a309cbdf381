"""Small kernels that each exercise one part of the PTX code generator (math and casts,
reductions across lanes and warps, layout conversions, shape ops, atomics, shared-memory layouts
and views, cp.async, TMA with split boxes, device-side descriptors, every wgmma form, warp
specialization, control flow), with the specializations tests/gpu/test_codegen_gpu.py launches
them in (one list of Specs per family), and three kernels written for the real TLX
(tests/tlx_sources: a cp.async GEMM, a warp-specialized TMA GEMM, flash attention)."""

from __future__ import annotations

import tlx
import tlx.language as tl
from catalog import load_tlx_source

from . import spec

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
def const_div_kernel(x_ptr, q_ptr, r_ptr, n, D: tl.constexpr, UNSIGNED: tl.constexpr, BLOCK: tl.constexpr):
    """x // D and x % D for a compile-time D (the code generator's multiply-high sequences), on
    int32 or, with UNSIGNED, on the same bits as uint32."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if UNSIGNED:
        u = x.to(tl.uint32, bitcast=True)
        du = tl.full([BLOCK], D, tl.uint32)  # (an int literal is int32: the signedness must match)
        tl.store(q_ptr + offs, (u // du).to(tl.int32, bitcast=True), mask=m)
        tl.store(r_ptr + offs, (u % du).to(tl.int32, bitcast=True), mask=m)
    else:
        tl.store(q_ptr + offs, x // D, mask=m)
        tl.store(r_ptr + offs, x % D, mask=m)


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
def scalar_masked_load_kernel(x_ptr, y_ptr, n):
    """Program i loads x[i] as a scalar where i < n, else `other` (-5), and stores it to y[i]."""
    pid = tl.program_id(0)
    tl.store(y_ptr + pid, tl.load(x_ptr + pid, mask=pid < n, other=-5))


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
def row_tile_tma_kernel(x_ptr, y_ptr, n, ROWS: tl.constexpr, COLS: tl.constexpr):
    """y = 3 * x over a flat fp16 vector: each program moves ROWS * COLS elements as one [1, ROWS * COLS]
    TMA tile (a single row far wider than one 256-element TMA box) through device-made descriptors
    into ROWS row buffers viewed as that one row, triples each row buffer, and stores the tile back."""
    xd = tl.make_tensor_descriptor(x_ptr, [1, n], [n, 1], [1, ROWS * COLS])
    yd = tl.make_tensor_descriptor(y_ptr, [1, n], [n, 1], [1, ROWS * COLS])
    rows_in = tlx.local_alloc((1, COLS), tl.float16, ROWS)
    rows_out = tlx.local_alloc((1, COLS), tl.float16, ROWS)
    bars = tlx.alloc_barriers(1)
    start = tl.program_id(0) * (ROWS * COLS)
    tlx.barrier_expect_bytes(bars[0], ROWS * COLS * 2)
    tlx.async_descriptor_load(xd, tlx.local_reinterpret(rows_in, tl.float16, [1, ROWS * COLS]), [0, start], bars[0])
    tlx.barrier_wait(bars[0], 0)
    for r in range(0, ROWS):
        tlx.local_store(rows_out[r], tlx.local_load(rows_in[r]) * 3)
    tlx.async_descriptor_store(yd, tlx.local_reinterpret(rows_out, tl.float16, [1, ROWS * COLS]), [0, start])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def mbarrier_rounds_kernel(x_ptr, y_ptr, ROUNDS: tl.constexpr, BLOCK: tl.constexpr):
    """y = (ROUNDS + 1) * x, one mbarrier phase a round without warp specialization: the leader
    arrives (count 1), every thread waits for that round's parity, then adds x once more. A thread
    that fell two phases behind the leader would wait for a parity that never comes back (a hang)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    bars = tlx.alloc_barriers(1)
    acc = x
    for i in tl.static_range(ROUNDS):  # unrolled: straight-line wait-then-arrive pairs
        tlx.barrier_arrive(bars[0])
        tlx.barrier_wait(bars[0], i % 2)
        acc = acc + x
    tl.store(y_ptr + offs, acc)


@tlx.jit
def rank1_desc_ws_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = x + 1 through rank-1 device-made descriptors, loaded and stored in a worker partition."""
    xd = tl.make_tensor_descriptor(x_ptr, shape=[n], strides=[1], block_shape=[BLOCK])
    yd = tl.make_tensor_descriptor(y_ptr, shape=[n], strides=[1], block_shape=[BLOCK])
    off = tl.program_id(0) * BLOCK
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4):
            yd.store([off], xd.load([off]) + 1)


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
# the specializations tests/gpu/test_codegen_gpu.py launches
# =============================================================================================

# signature spelling of each torch dtype name the tests use
SIG = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int32": "i32", "int8": "i8", "uint8": "u8",
       "int16": "i16", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float64": "fp64", "int64": "i64"}
TORCH = {v: k for k, v in SIG.items()}

UNARY_OPS = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "erf", "tanh", "floor", "ceil", "abs",
             "neg", "sigmoid"]
UNARY = [spec(f"unary fp32 {op}", unary_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
              {"OP": op, "BLOCK": 1024}) for op in UNARY_OPS]

FLOAT_OPS = ["add", "sub", "mul", "div", "max", "min", "fma", "mod", "lt"]
INT_OPS = ["add", "sub", "mul", "floordiv", "mod", "max", "min", "and", "xor", "shr", "shl", "eq"]
BINARY = [spec(f"binary {t} {op}", binary_kernel, {"x_ptr": f"*{t}", "y_ptr": f"*{t}", "z_ptr": f"*{t}", "n": "i32"},
               {"OP": op, "BLOCK": 1024})
          for t in ("fp32", "fp16", "bf16") for op in FLOAT_OPS if op != "mod" or t == "fp32"]
BINARY += [spec(f"binary i32 {op}", binary_kernel, {"x_ptr": "*i32", "y_ptr": "*i32", "z_ptr": "*i32", "n": "i32"},
                {"OP": op, "BLOCK": 1024}) for op in INT_OPS]

#: divisors of the division-by-a-constant kernel: small odd and even, powers of two, ones whose
#: magic multiplier needs the add-back (7, 641), near the int32 limits, and negative (signed only)
CONST_DIVISORS = [1, 2, 3, 5, 7, 10, 64, 641, 1000, 65537, 2 ** 30 + 1, 2 ** 31 - 1]
CONST_DIV = [spec(f"division by {d} {'u32' if u else 'i32'}", const_div_kernel,
                  {"x_ptr": "*i32", "q_ptr": "*i32", "r_ptr": "*i32", "n": "i32"},
                  {"D": d, "UNSIGNED": u, "BLOCK": 1024})
             for u in (False, True) for d in CONST_DIVISORS + ([] if u else [-1, -3, -7, -2 ** 31 + 1])]

CASTS = [("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32"), ("bfloat16", "float32"),
         ("float16", "bfloat16"), ("float32", "int32"), ("int32", "float32"), ("int32", "int8"),
         ("int8", "int32"), ("uint8", "int32"), ("int32", "int16"), ("float32", "float8_e4m3fn"),
         ("float32", "float8_e5m2"), ("float8_e4m3fn", "float32"), ("float8_e5m2", "float16"),
         ("float64", "float32"), ("float32", "float64"), ("int64", "int32"), ("int32", "int64")]
CAST = [spec(f"cast {s}->{d}", cast_kernel, {"x_ptr": f"*{SIG[s]}", "y_ptr": f"*{SIG[d]}", "n": "i32"},
             {"BLOCK": 1024}) for s, d in CASTS]

REDUCTIONS = [("sum", 0), ("sum", 1), ("max", 0), ("max", 1), ("min", 1), ("argmax", 0), ("argmax", 1),
              ("argmin", 0), ("xor_sum", 1)]
REDUCE = [spec(f"reduce {kind} axis={axis} warps={nw}", reduce_kernel,
               {"x_ptr": "*i32" if kind == "xor_sum" else "*fp32",
                "y_ptr": "*i32" if kind in ("argmax", "argmin", "xor_sum") else "*fp32"},
               {"M": 64, "N": 256, "AXIS": axis, "KIND": kind}, nw)
          for kind, axis in REDUCTIONS for nw in (4, 8)]
FULL_REDUCE = spec("reduce to a scalar", full_reduce_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 2048}, 8)
TRANS = spec("trans", trans_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"M": 64, "N": 128})
SPLIT_JOIN = spec("split/join", split_join_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32"},
                  {"M": 64, "N": 128})
ATOMICS = spec("atomics", atomic_kernel, {"cnt_ptr": "*i32", "fsum_ptr": "*fp32", "mx_ptr": "*i32",
                                          "ticket_ptr": "*i32", "cas_ptr": "*i32"}, {"SLOTS": 8, "BLOCK": 64})
SCALAR_MASKED_LOAD = spec("scalar masked load", scalar_masked_load_kernel, {"x_ptr": "*i32", "y_ptr": "*i32", "n": "i32"})
SMEM = [spec(f"smem {t}", smem_kernel, {"x_ptr": f"*{t}", "y_ptr": f"*{t}", "z_ptr": f"*{t}"},
             {"M": 64, "N": 64 if t == "fp32" else 128}) for t in ("fp16", "fp32", "i8")]
DYN_SLICE = spec("dynamic slice", dyn_slice_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp16", "row0": "i32"},
                 {"M": 64, "N": 64, "R": 16}, divisible=["row0"])  # row0 in (0, 16, 48)
CP_ASYNC = spec("cp.async", cp_async_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp32"}, {"M": 64, "N": 64, "STAGES": 3})

# (dtype, M, N, K, A stored MN-major, B stored K-major)
DOT_SHAPES = [("float16", 64, 64, 64, False, False), ("float16", 128, 128, 64, False, False),
              ("bfloat16", 64, 256, 32, False, False), ("float16", 64, 128, 64, True, False),
              ("float16", 64, 128, 64, False, True), ("float16", 128, 64, 128, True, True),
              ("float32", 64, 64, 32, False, True), ("float8_e4m3fn", 64, 128, 64, False, True),
              ("float8_e5m2", 64, 64, 128, False, True), ("int8", 64, 64, 64, False, True),
              ("float16", 256, 64, 32, False, False)]
DOT = [spec(f"wgmma {dt} {M}x{N}x{K} A={'MN' if a_mn else 'K'}-major B={'K' if b_k else 'MN'}-major warps={nw}",
            dot_kernel, {"a_ptr": f"*{SIG[dt]}", "b_ptr": f"*{SIG[dt]}", "c_ptr": "*i32" if dt == "int8" else "*fp32"},
            {"M": M, "N": N, "K": K, "A_MN": a_mn, "B_KMAJOR": b_k}, nw)
       for dt, M, N, K, a_mn, b_k in DOT_SHAPES for nw in ((4, 8) if M >= 128 else (4,))]
DOT_REG_A = spec("wgmma with A from registers", dot_reg_a_kernel, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"},
                 {"M": 64, "N": 128, "K": 64})
TMA = [spec(f"TMA load/store {t} box 64x{bn}", tma_copy_kernel,
            {"x_desc": f"tensordesc<{t}[64, {bn}]>", "y_desc": f"tensordesc<{t}[64, {bn}]>"}, {"BM": 64, "BN": bn})
       for bn, t in ((64, "fp16"), (128, "fp16"), (256, "bf16"), (64, "fp32"))]
DEVICE_DESC = spec("device-side descriptors", device_desc_kernel,
                   {"x_ptr": "*fp16", "y_ptr": "*fp16", "M": "i32", "N": "i32"}, {"BM": 64, "BN": 64},
                   divisible=["M", "N"])  # 256 x 192
DESC_LOAD_LOOP = spec("descriptor load in a loop", desc_load_loop_kernel,
                      {"x_ptr": "*fp16", "y_ptr": "*fp32", "M": "i32", "N": "i32"}, {"BM": 64, "BN": 64},
                      divisible=["M", "N"])  # 37 * 64 x 256
ROW_TILE_TMA = spec("one-row TMA tile wider than a box", row_tile_tma_kernel,
                    {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32"}, {"ROWS": 32, "COLS": 128},
                    divisible=["n"])  # 6 programs of 4096 elements
MBARRIER_ROUNDS = spec("mbarrier rounds without warp specialization", mbarrier_rounds_kernel,
                       {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"ROUNDS": 16, "BLOCK": 1024})
RANK1_DESC_WS = spec("rank-1 descriptors in a worker partition", rank1_desc_ws_kernel,
                     {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 1024}, divisible=["n"])
CONTROL = spec("control flow", control_kernel,
               {"x_ptr": "*fp32", "y_ptr": "*fp32", "ids_ptr": "*i32", "clk_ptr": "*i64", "n": "i32"}, {"BLOCK": 128})
WS = spec("warp specialization", ws_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 512})

_gp = load_tlx_source("gemm_pipelined_tlx.py")
_gw = load_tlx_source("gemm_ws_tlx.py")
_fa = load_tlx_source("fa_fwd_tlx.py")
_GEMM_INTS = ["M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"]
_UNIT_STRIDES = ("stride_ak", "stride_bn", "stride_cn")
GEMM_PIPELINED = [spec(f"cp.async pipelined GEMM 128x{bn}x64, {nw} warps", _gp.gemm_pipelined_kernel,
                       {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **{n: "i32" for n in _GEMM_INTS}},
                       {"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": 64, "GROUP_M": 8, "STAGES": 3}, nw,
                       divisible=[n for n in _GEMM_INTS if n not in _UNIT_STRIDES], equal_to_one=_UNIT_STRIDES)
                  for bn, nw in ((256, 8), (128, 8), (128, 4))]  # 512 x 768 x 640, row-major
GEMM_WS = spec("warp-specialized TMA GEMM", _gw.gemm_ws_kernel,
               {"a_desc": "tensordesc<fp16[64, 64]>", "b_desc": "tensordesc<fp16[64, 256]>",
                "c_desc": "tensordesc<fp16[64, 256]>", "M": "i32", "N": "i32", "K": "i32"},
               {"BM": 128, "BN": 256, "BK": 64, "STAGES": 3, "GROUPS": 2}, divisible=["M", "N", "K"])
FLASH_ATTENTION = spec("flash attention forward", _fa.fa_fwd_kernel,
                       {"q_desc": "tensordesc<fp16[64, 128]>", "k_desc": "tensordesc<fp16[128, 128]>",
                        "v_desc": "tensordesc<fp16[128, 128]>", "o_desc": "tensordesc<fp16[64, 128]>",
                        "sm_scale": "fp32", "N_CTX": "i32"},
                       {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 128, "SLOTS": 2, "GROUPS": 2},
                       divisible=["N_CTX"])

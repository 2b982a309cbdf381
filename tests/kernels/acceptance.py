"""The kernels of the runtime acceptance tests (tests/gpu/test_runtime_acceptance.py), written as
TLX kernels are (only the imports differ), the shapes those tests run, and the Specs they launch:
one per specialization the shapes produce (dtype, constexprs, which sizes are multiples of 16).
The CPU interpreter runs the same kernels in tests/test_runtime_acceptance_kernels.py."""

from __future__ import annotations

import os
from typing import Dict, Tuple

import tlx
import tlx.language as tl

from . import Spec, spec

SMALL = os.environ.get("TLX_SANITIZE") == "1"  # under compute-sanitizer: fewer, smaller shapes


@tlx.jit
def tma_store_kernel(x_ptr, y_desc, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     USER_FENCE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask, other=0.0)
    buf = tlx.local_alloc((BLOCK_M, BLOCK_N), tlx.dtype_of(x_ptr), 1)
    tlx.local_store(buf[0], x)
    if USER_FENCE:
        tlx.fence("async_shared")
    tlx.async_descriptor_store(y_desc, buf[0], [pid_m * BLOCK_M, pid_n * BLOCK_N])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def wgmma_inside_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Each K step: global -> registers -> local_store -> async_dot. The generic stores are
    # read by wgmma (async proxy) right after: the compiler must fence inside the loop.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_buf = tlx.local_alloc((BLOCK_M, BLOCK_K), tlx.dtype_of(a_ptr), 1)
    b_buf = tlx.local_alloc((BLOCK_K, BLOCK_N), tlx.dtype_of(b_ptr), 1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * K + kk[None, :],
                    mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + offs_n[None, :],
                    mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        tlx.local_store(a_buf[0], a)
        tlx.local_store(b_buf[0], b)
        acc = tlx.async_dot(a_buf[0], b_buf[0], acc)
        acc = tlx.async_dot_wait(0, acc)
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=c_mask)


@tlx.jit
def wgmma_outside_kernel(a_ptr, b_ptr, c_ptr, M, N, K, REPEAT, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # The tiles are stored once, before a loop of REPEAT wgmmas reading them: one fence,
    # hoisted out of the loop, is enough. C = REPEAT * A @ B (K == BLOCK_K).
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :],
                mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
    b = tl.load(b_ptr + offs_k[:, None] * N + offs_n[None, :],
                mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    a_buf = tlx.local_alloc((BLOCK_M, BLOCK_K), tlx.dtype_of(a_ptr), 1)
    b_buf = tlx.local_alloc((BLOCK_K, BLOCK_N), tlx.dtype_of(b_ptr), 1)
    tlx.local_store(a_buf[0], a)
    tlx.local_store(b_buf[0], b)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r in range(0, REPEAT):
        acc = tlx.async_dot(a_buf[0], b_buf[0], acc)
        acc = tlx.async_dot_wait(0, acc)
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc, mask=c_mask)


@tlx.jit
def gemm_tma_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    bufs_a = tlx.local_alloc((BLOCK_M, BLOCK_K), tl.float16, NUM_STAGES)
    bufs_b = tlx.local_alloc((BLOCK_K, BLOCK_N), tl.float16, NUM_STAGES)
    full = tlx.alloc_barriers(NUM_STAGES, arrive_count=1)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for i in tl.static_range(NUM_STAGES - 1):
        if i < k_tiles:
            tlx.barrier_expect_bytes(full[i], (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2)
            tlx.async_descriptor_load(a_desc, bufs_a[i], [off_m, i * BLOCK_K], full[i])
            tlx.async_descriptor_load(b_desc, bufs_b[i], [i * BLOCK_K, off_n], full[i])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, k_tiles):
        buf = k % NUM_STAGES
        phase = (k // NUM_STAGES) & 1
        tlx.barrier_wait(full[buf], phase)
        acc = tlx.async_dot(bufs_a[buf], bufs_b[buf], acc)
        # at most one wgmma in flight: the one of step k-1 is done, its stage is free
        acc = tlx.async_dot_wait(1, acc)
        nxt = k + NUM_STAGES - 1
        if nxt < k_tiles:
            nb = nxt % NUM_STAGES
            tlx.barrier_expect_bytes(full[nb], (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2)
            tlx.async_descriptor_load(a_desc, bufs_a[nb], [off_m, nxt * BLOCK_K], full[nb])
            tlx.async_descriptor_load(b_desc, bufs_b[nb], [nxt * BLOCK_K, off_n], full[nb])
    acc = tlx.async_dot_wait(0, acc)
    c_buf = tlx.local_alloc((BLOCK_M, BLOCK_N), tl.float16, 1)
    tlx.local_store(c_buf[0], acc.to(tl.float16))
    tlx.fence("async_shared")
    tlx.async_descriptor_store(c_desc, c_buf[0], [off_m, off_n])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def last_cta_sum_kernel(x_ptr, partials_ptr, counter_ptr, out_ptr, n, BLOCK: tl.constexpr,
                        MAX_PROGRAMS: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partials_ptr + pid, tl.sum(x, axis=0))
    tlx.fence("gpu")                                   # release the partial ...
    ticket = tl.atomic_add(counter_ptr, 1, sem="relaxed")  # ... before taking a ticket
    if ticket == nprog - 1:
        tlx.fence("gpu")                               # acquire every CTA's partial
        p_offs = tl.arange(0, MAX_PROGRAMS)
        p = tl.load(partials_ptr + p_offs, mask=p_offs < nprog, other=0.0)
        tl.store(out_ptr, tl.sum(p, axis=0))
        tl.store(counter_ptr, 0)                       # ready for the next launch


@tlx.jit
def publish_sys_kernel(data_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for start in range(0, n, BLOCK):
        o = start + offs
        tl.store(data_ptr + o, o * 3 + 1, mask=o < n)
    tlx.fence("sys")                                   # data before the flag, system-wide
    tl.store(flag_ptr, 1)


@tlx.jit
def big_smem_kernel(x_ptr, y_ptr, ROWS: tl.constexpr, COLS: tl.constexpr,
                    NUM_BUF: tl.constexpr):
    # NUM_BUF buffers of ROWS x COLS fp32 (3 x 32 KB = 96 KB): the data goes through the
    # last one, which starts beyond the default 48 KB window.
    r = tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    offs = r[:, None] * COLS + c[None, :]
    bufs = tlx.local_alloc((ROWS, COLS), tl.float32, NUM_BUF)
    x = tl.load(x_ptr + offs)
    tlx.local_store(bufs[NUM_BUF - 1], x * 2.0)
    y = tlx.local_load(bufs[NUM_BUF - 1])
    tl.store(y_ptr + offs, y + 1.0)


@tlx.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


@tlx.jit
def axpy_native_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    # axpy_kernel again, as its own kernel: the native-dispatcher test counts this one's launches
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@tlx.jit
def axpy_guard_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    # axpy_kernel again, as its own kernel: the guard test counts this one's specializations
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@tlx.jit
def twice_plus_one_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, (x * 2 + 1).to(tl.float32), mask=mask)


# ---- the shapes the GPU tests run, and one Spec per specialization they produce -------------

def div16(*sizes: int) -> Tuple[bool, ...]:
    """Which of `sizes` are multiples of 16 (each is one specialization bit of an int argument)."""
    return tuple(s % 16 == 0 for s in sizes)


def _divisible(names: str, sizes: Tuple[int, ...]) -> list:
    return [n for n, d in zip(names.split(), div16(*sizes)) if d]


TMA_SHAPES = [(128, 128), (200, 72)] if SMALL else [(64, 64), (128, 128), (200, 72), (257, 136)]
TMA_STORE: Dict[Tuple, Spec] = {}
for _M, _N in TMA_SHAPES:
    for _t, _bn in (("fp16", 64), ("fp32", 32)):
        for _fence in (True, False):
            _key = (_t, _fence, *div16(_M, _N))
            if _key not in TMA_STORE:
                TMA_STORE[_key] = spec(f"TMA store {_key}", tma_store_kernel,
                                       {"x_ptr": f"*{_t}", "y_desc": f"tensordesc<{_t}[64, {_bn}]>", "M": "i32",
                                        "N": "i32"}, {"BLOCK_M": 64, "BLOCK_N": _bn, "USER_FENCE": _fence},
                                       divisible=_divisible("M N", (_M, _N)))

WGMMA_INSIDE_SHAPES = ([(64, 64, 64), (100, 72, 96)] if SMALL else
                       [(64, 64, 64), (128, 128, 128), (100, 72, 96), (256, 192, 320), (64, 256, 512)])
WGMMA_OUTSIDE_SHAPES = [(64, 64, 32), (128, 64, 64), (96, 128, 64)]
WGMMA_REPEAT = 3
WGMMA_INSIDE: Dict[Tuple, Spec] = {}
WGMMA_OUTSIDE: Dict[Tuple, Spec] = {}
for _t in ("fp16", "bf16"):
    _sig = {"a_ptr": f"*{_t}", "b_ptr": f"*{_t}", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
    for _M, _N, _K in WGMMA_INSIDE_SHAPES:
        _key = (_t, *div16(_M, _N, _K))
        if _key not in WGMMA_INSIDE:
            WGMMA_INSIDE[_key] = spec(f"wgmma, stores inside the K loop {_key}", wgmma_inside_kernel, _sig,
                                      {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
                                      divisible=_divisible("M N K", (_M, _N, _K)))
    for _M, _N, _K in WGMMA_OUTSIDE_SHAPES:
        _key = (_t, _K, *div16(_M, _N))
        if _key not in WGMMA_OUTSIDE:
            WGMMA_OUTSIDE[_key] = spec(f"wgmma, stores outside the K loop {_key}", wgmma_outside_kernel,
                                       {**_sig, "REPEAT": "i32"}, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": _K},
                                       divisible=_divisible("M N K REPEAT", (_M, _N, _K, WGMMA_REPEAT)))

GEMM_SHAPES = ([(128, 128, 128), (200, 136, 72)] if SMALL else
               [(128, 128, 64), (256, 256, 256), (200, 136, 72), (512, 384, 1000), (64, 520, 48),
                (1024, 1024, 512)])
GEMM_TMA: Dict[Tuple, Spec] = {}
for _M, _N, _K in GEMM_SHAPES:
    for _stages in (2, 3):
        _key = (_stages, *div16(_M, _N, _K))
        if _key not in GEMM_TMA:
            GEMM_TMA[_key] = spec(f"multi-stage TMA GEMM {_key}", gemm_tma_kernel,
                                  {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
                                   "c_desc": "tensordesc<fp16[128, 128]>", "M": "i32", "N": "i32", "K": "i32"},
                                  {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_STAGES": _stages},
                                  divisible=_divisible("M N K", (_M, _N, _K)))

LAST_CTA_N = 256 * 97 + 13
LAST_CTA_SUM = spec("last CTA sums the partials", last_cta_sum_kernel,
                    {"x_ptr": "*fp32", "partials_ptr": "*fp32", "counter_ptr": "*i32", "out_ptr": "*fp32", "n": "i32"},
                    {"BLOCK": 256, "MAX_PROGRAMS": 128}, divisible=_divisible("n", (LAST_CTA_N,)))
PUBLISH_N = 1 << 16
PUBLISH_SYS = spec("publish to host memory", publish_sys_kernel, {"data_ptr": "*i32", "flag_ptr": "*i32", "n": "i32"},
                   {"BLOCK": 1024}, divisible=_divisible("n", (PUBLISH_N,)))
BIG_SMEM = spec("96 KB of shared memory", big_smem_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"},
                {"ROWS": 64, "COLS": 128, "NUM_BUF": 3})
AXPY_N = 10_000
AXPY = spec("axpy", axpy_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "alpha": "fp32"},
            {"BLOCK": 1024}, divisible=_divisible("n", (AXPY_N,)))
AXPY_NATIVE_N = 5_000
AXPY_NATIVE = spec("axpy through the native dispatcher", axpy_native_kernel,
                   {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "alpha": "fp32"},
                   {"BLOCK": 256}, divisible=_divisible("n", (AXPY_NATIVE_N,)))
AXPY_GUARD: Dict[Tuple[int, int], Spec] = {}  # (x's offset in elements, n): x 4 bytes off alignment when 1
for _offset in (0, 1):
    for _n in (4096, 4095):
        AXPY_GUARD[(_offset, _n)] = _s = spec(f"axpy guard, x offset {_offset}, n {_n}", axpy_guard_kernel,
                                              {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                               "alpha": "fp32"}, {"BLOCK": 256}, divisible=_divisible("n", (_n,)))
        if _offset:
            del _s.divisibility["x_ptr"]
TWICE_N = 3_000
TWICE_PLUS_ONE = {t: spec(f"x * 2 + 1 of {t}", twice_plus_one_kernel, {"x_ptr": f"*{t}", "out_ptr": "*fp32", "n": "i32"},
                          {"BLOCK": 256}, divisible=_divisible("n", (TWICE_N,)))
                  for t in ("fp32", "fp16", "bf16", "i32", "i16")}

"""The test suite's kernel catalogue: TLX-style kernels written in the tlx DSL, each with the
signature and constexprs it is compiled for. Tests iterate over `CASES` (tracing, IR round
trips, PTX assembly, the interpreter); new kernels are added here so every layer sees them.

The `tlx_sources/` kernels are written for the real TLX (triton imports) and enter the catalogue
after their imports are swapped (see `load_tlx_source`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List

import tlx
import tlx.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class KernelCase:
    """One kernel and the specialization it is compiled for."""

    name: str
    fn: Any
    signature: Dict[str, str]
    constexprs: Dict[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    # what a launch with contiguous, 16-byte aligned arrays specializes (as Triton does):
    divisibility: Dict[str, int] = field(default_factory=dict)
    equal_to_one: tuple = ()

    def trace(self):
        from tlx.signature import signature_to_types

        return self.fn.trace(signature_to_types(self.signature), self.constexprs, num_warps=self.num_warps,
                             divisibility=self.divisibility, equal_to_one=self.equal_to_one)


def swap_imports(src: str) -> str:
    """The only edits a real TLX kernel needs: its imports and its decorator."""
    src = src.replace("import triton.language.extra.tlx as tlx", "import tlx")
    src = src.replace("import triton.language as tl", "import tlx.language as tl")
    src = re.sub(r"^import triton\n", "", src, flags=re.M)
    return src.replace("@triton.jit", "@tlx.jit")


def load_tlx_source(filename: str):
    """Import tests/tlx_sources/<filename> with its imports swapped for tlx's."""
    with open(os.path.join(HERE, "tlx_sources", filename)) as f:
        src = swap_imports(f.read())
    d = tempfile.mkdtemp(prefix="tlx_src_")
    path = os.path.join(d, filename)
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("swapped_" + filename[:-3], path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


# ---------------------------------------------------------------------------------------------
# Triton core language kernels
# ---------------------------------------------------------------------------------------------

@tlx.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x + y, mask=mask)


@tlx.jit
def row_softmax(x_ptr, out_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride + cols, y.to(tlx.dtype_of(out_ptr)), mask=mask)


@tlx.jit
def dot_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@tlx.jit
def _bufidx_phase(cnt, NUM: tl.constexpr):
    return cnt % NUM, (cnt // NUM) & 1


@tlx.jit
def ring_counter(out_ptr, n, NUM: tl.constexpr):
    """A helper returning a tuple, a runtime if with results and a while loop."""
    i = 0
    total = 0
    while i < n:
        buf, phase = _bufidx_phase(i, NUM)
        if phase == 1:
            total += buf
        else:
            total -= 1
        i += 1
    tl.store(out_ptr + tl.program_id(0), total)


@tlx.jit
def early_exit(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, x * 2, mask=offs < n)


# ---------------------------------------------------------------------------------------------
# TLX kernels: shared memory, fences, TMA, wgmma
# ---------------------------------------------------------------------------------------------

@tlx.jit
def smem_roundtrip(x_ptr, y_ptr, BLOCK: tl.constexpr):
    """local_store / local_load / local_trans / local_slice on a 2-D tile."""
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r[:, None] * BLOCK + r[None, :])
    buf = tlx.local_alloc((BLOCK, BLOCK), tl.float32, 1)
    tlx.local_store(buf[0], x)
    t = tlx.local_load(tlx.local_trans(buf[0]))
    top = tlx.local_load(tlx.local_slice(buf[0], [0, 0], [BLOCK // 2, BLOCK]))
    tl.store(y_ptr + r[:, None] * BLOCK + r[None, :], t)
    tl.store(y_ptr + BLOCK * BLOCK + tl.arange(0, BLOCK // 2)[:, None] * BLOCK + r[None, :], top)


@tlx.jit
def tma_store_fenced(x_desc, y_desc, BLOCK: tl.constexpr):
    """The canonical pattern: local_store -> fence -> TMA store -> store wait (with the user fence)."""
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 2)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    pid = tl.program_id(0)
    tlx.barrier_expect_bytes(bars[0], BLOCK * BLOCK * 2)
    tlx.async_descriptor_load(x_desc, bufs[0], [pid * BLOCK, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    x = tlx.local_load(bufs[0])
    tlx.local_store(bufs[1], x + 1.0)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(y_desc, bufs[1], [pid * BLOCK, 0])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def tma_store_unfenced(x_desc, y_desc, BLOCK: tl.constexpr):
    """The same kernel with the fence left out (the compiler must insert it)."""
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 2)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    pid = tl.program_id(0)
    tlx.barrier_expect_bytes(bars[0], BLOCK * BLOCK * 2)
    tlx.async_descriptor_load(x_desc, bufs[0], [pid * BLOCK, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    x = tlx.local_load(bufs[0])
    tlx.local_store(bufs[1], x + 1.0)
    tlx.async_descriptor_store(y_desc, bufs[1], [pid * BLOCK, 0])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def wgmma_store_outside_loop(a_ptr, b_ptr, c_ptr, ITERS, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """register -> SMEM once, then wgmma reads it every iteration (the fence hoists out)."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    a_s = tlx.local_alloc((BM, BK), tlx.dtype_of(a_ptr), 1)
    b_s = tlx.local_alloc((BK, BN), tlx.dtype_of(b_ptr), 1)
    tlx.local_store(a_s[0], a)
    tlx.local_store(b_s[0], b)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(0, ITERS):
        acc = tlx.async_dot(a_s[0], b_s[0], acc)
        acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@tlx.jit
def wgmma_store_inside_loop(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """register -> SMEM every iteration, then wgmma (the fence stays in the loop)."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_s = tlx.local_alloc((BM, BK), tlx.dtype_of(a_ptr), 1)
    b_s = tlx.local_alloc((BK, BN), tlx.dtype_of(b_ptr), 1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        tlx.local_store(a_s[0], a)
        tlx.local_store(b_s[0], b)
        acc = tlx.async_dot(a_s[0], b_s[0], acc)
        acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@tlx.jit
def tma_gemm_pipelined(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       STAGES: tl.constexpr):
    """TMA loads into a ring of STAGES buffers with mbarriers, wgmma with one group in flight,
    and a register-level TMA-store epilogue."""
    pid = tl.program_id(0)
    n_tiles_n = tl.cdiv(N, BN)
    off_m = (pid // n_tiles_n) * BM
    off_n = (pid % n_tiles_n) * BN
    a_s = tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), STAGES)
    b_s = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    k_tiles = tl.cdiv(K, BK)
    for s in tl.range(0, STAGES - 1):
        if s < k_tiles:
            tlx.barrier_expect_bytes(full[s], (BM * BK + BK * BN) * tlx.size_of(tlx.dtype_of(a_desc)))
            tlx.async_descriptor_load(a_desc, a_s[s], [off_m, s * BK], full[s])
            tlx.async_descriptor_load(b_desc, b_s[s], [s * BK, off_n], full[s])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kt in range(0, k_tiles):
        slot = kt % STAGES
        tlx.barrier_wait(full[slot], (kt // STAGES) & 1)
        acc = tlx.async_dot(a_s[slot], b_s[slot], acc)
        acc = tlx.async_dot_wait(1, acc)
        nxt = kt + STAGES - 1
        if nxt < k_tiles:
            ns = nxt % STAGES
            tlx.barrier_expect_bytes(full[ns], (BM * BK + BK * BN) * tlx.size_of(tlx.dtype_of(a_desc)))
            tlx.async_descriptor_load(a_desc, a_s[ns], [off_m, nxt * BK], full[ns])
            tlx.async_descriptor_load(b_desc, b_s[ns], [nxt * BK, off_n], full[ns])
    acc = tlx.async_dot_wait(0, acc)
    c_desc.store([off_m, off_n], acc.to(tlx.dtype_of(c_desc)))


@tlx.jit
def fence_gpu_last_block_sum(part_ptr, counter_ptr, out_ptr, BLOCK: tl.constexpr):
    """Every program writes a partial sum, fences at gpu scope and bumps a counter; the last one
    adds up all partials."""
    pid = tl.program_id(0)
    n = tl.num_programs(0)
    x = tl.arange(0, BLOCK).to(tl.float32) + pid
    tl.store(part_ptr + pid, tl.sum(x, axis=0))
    tlx.fence("gpu")
    ticket = tl.atomic_add(counter_ptr, 1)
    if ticket == n - 1:
        tlx.fence("gpu")
        offs = tl.arange(0, BLOCK)
        parts = tl.load(part_ptr + offs, mask=offs < n, other=0.0, volatile=True)
        tl.store(out_ptr, tl.sum(parts, axis=0))


@tlx.jit
def fence_sys_flag(data_ptr, flag_ptr, BLOCK: tl.constexpr):
    """Write data to host-mapped memory, fence at system scope, then raise a flag."""
    offs = tl.arange(0, BLOCK)
    tl.store(data_ptr + offs, offs * 3 + 1)
    tlx.fence("sys")
    if tlx.thread_id(0) == 0:
        tl.atomic_xchg(flag_ptr, 1, sem="release", scope="sys")


@tlx.jit
def bulk_copy(src_ptr, dst_ptr, CHUNK: tl.constexpr):
    """cp.async.bulk global -> shared on an mbarrier, then bulk shared -> global."""
    buf = tlx.local_alloc((CHUNK,), tl.uint8, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], CHUNK)
    tlx.async_load(src_ptr, buf[0], bulk=True, barrier=bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.async_store(dst_ptr, buf[0], CHUNK)
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def named_barrier_pingpong(x_ptr, y_ptr, BLOCK: tl.constexpr):
    """Two tasks hand a shared buffer back and forth over named barriers."""
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tlx.local_store(buf[0], tl.load(x_ptr + offs))
            tlx.named_barrier_arrive(9, 256)
        with tlx.async_task(num_warps=4, registers=96):
            tlx.named_barrier_wait(9, 256)
            offs = tl.arange(0, BLOCK)
            v = tlx.local_load(buf[0])
            tl.store(y_ptr + offs, v * v)


@tlx.jit
def persistent_tiles(x_ptr, out_ptr, n_tiles, NUM_SMS: tl.constexpr, BLOCK: tl.constexpr):
    """A persistent while loop over tiles with a loop-carried tile id and accumulator."""
    tile = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    while tile < n_tiles:
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs)
        tile += NUM_SMS
    tl.store(out_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), acc)


def _cases() -> List[KernelCase]:
    gp = load_tlx_source("gemm_pipelined_tlx.py")
    gw = load_tlx_source("gemm_ws_tlx.py")
    fa = load_tlx_source("fa_fwd_tlx.py")
    ts = load_tlx_source("tma_store_tlx.py")
    f16, f32, i32 = "*fp16", "*fp32", "i32"
    gemm_sig = {n: (f16 if n.endswith("ptr") else i32) for n in
                ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                 "stride_cm", "stride_cn"]}
    return [
        KernelCase("vector_add", vector_add, {"x_ptr": f32, "y_ptr": f32, "out_ptr": f32, "n": i32}, {"BLOCK": 1024}),
        KernelCase("row_softmax", row_softmax, {"x_ptr": f16, "out_ptr": f16, "n_rows": i32, "n_cols": i32,
                                                "stride": i32}, {"BLOCK": 1024}),
        KernelCase("dot_matmul", dot_matmul, {"a_ptr": f16, "b_ptr": f16, "c_ptr": f16, "M": i32, "N": i32, "K": i32,
                                              "stride_am": i32, "stride_bk": i32, "stride_cm": i32},
                   {"BM": 64, "BN": 64, "BK": 32}),
        KernelCase("ring_counter", ring_counter, {"out_ptr": "*i32", "n": i32}, {"NUM": 3}),
        KernelCase("early_exit", early_exit, {"x_ptr": f32, "n": i32}, {"BLOCK": 256}),
        KernelCase("smem_roundtrip", smem_roundtrip, {"x_ptr": f32, "y_ptr": f32}, {"BLOCK": 32}),
        KernelCase("tma_store_fenced", tma_store_fenced,
                   {"x_desc": "tensordesc<fp16[64, 64]>", "y_desc": "tensordesc<fp16[64, 64]>"}, {"BLOCK": 64}),
        KernelCase("tma_store_unfenced", tma_store_unfenced,
                   {"x_desc": "tensordesc<fp16[64, 64]>", "y_desc": "tensordesc<fp16[64, 64]>"}, {"BLOCK": 64}),
        KernelCase("wgmma_store_outside_loop", wgmma_store_outside_loop,
                   {"a_ptr": f16, "b_ptr": f16, "c_ptr": f32, "ITERS": i32}, {"BM": 64, "BN": 64, "BK": 64}),
        KernelCase("wgmma_store_inside_loop", wgmma_store_inside_loop,
                   {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": f32, "K": i32}, {"BM": 64, "BN": 128, "BK": 64}),
        KernelCase("tma_gemm_pipelined", tma_gemm_pipelined,
                   {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 256]>",
                    "c_desc": "tensordesc<fp16[128, 256]>", "M": i32, "N": i32, "K": i32},
                   {"BM": 128, "BN": 256, "BK": 64, "STAGES": 3}, num_warps=8),
        KernelCase("fence_gpu_last_block_sum", fence_gpu_last_block_sum,
                   {"part_ptr": f32, "counter_ptr": "*i32", "out_ptr": f32}, {"BLOCK": 256}),
        KernelCase("fence_sys_flag", fence_sys_flag, {"data_ptr": "*i32", "flag_ptr": "*i32"}, {"BLOCK": 128}),
        KernelCase("bulk_copy", bulk_copy, {"src_ptr": "*u8", "dst_ptr": "*u8"}, {"CHUNK": 1024}, num_warps=1),
        KernelCase("named_barrier_pingpong", named_barrier_pingpong, {"x_ptr": f32, "y_ptr": f32}, {"BLOCK": 256}),
        KernelCase("persistent_tiles", persistent_tiles, {"x_ptr": f32, "out_ptr": f32, "n_tiles": i32},
                   {"NUM_SMS": 132, "BLOCK": 256}),
        KernelCase("tlx_gemm_pipelined", gp.gemm_pipelined_kernel, gemm_sig,
                   {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "STAGES": 3}, num_warps=8,
                   divisibility={n: 16 for n in gemm_sig if n not in ("stride_ak", "stride_bn", "stride_cn")},
                   equal_to_one=("stride_ak", "stride_bn", "stride_cn")),
        KernelCase("tlx_gemm_ws", gw.gemm_ws_kernel,
                   {"a_desc": "tensordesc<fp16[64, 64]>", "b_desc": "tensordesc<fp16[64, 256]>",
                    "c_desc": "tensordesc<fp16[64, 256]>", "M": i32, "N": i32, "K": i32},
                   {"BM": 128, "BN": 256, "BK": 64, "STAGES": 3, "GROUPS": 2}),
        KernelCase("tlx_fa_fwd", fa.fa_fwd_kernel,
                   {"q_desc": "tensordesc<fp16[64, 128]>", "k_desc": "tensordesc<fp16[128, 128]>",
                    "v_desc": "tensordesc<fp16[128, 128]>", "o_desc": "tensordesc<fp16[64, 128]>",
                    "sm_scale": "fp32", "N_CTX": i32},
                   {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 128, "SLOTS": 2, "GROUPS": 2}),
        KernelCase("tlx_tma_dot_store", ts.tma_dot_store_kernel,
                   {"a_desc": "tensordesc<fp16[64, 64]>", "b_desc": "tensordesc<fp16[64, 64]>",
                    "c_desc": "tensordesc<fp16[64, 64]>"}, {"BLOCK": 64}),
    ]


CASES: List[KernelCase] = _cases()
CASES_BY_NAME: Dict[str, KernelCase] = {c.name: c for c in CASES}

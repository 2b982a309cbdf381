"""Issue 5 acceptance on the H200: tlx kernels compiled by the whole stack (frontend, passes,
codegen) and launched by tlx.runtime, compared against numpy in float64 with bounds suited to
the dtype; outputs are poisoned first and inputs are random each run (the seed is printed in
every failure message).

    1. canonical TMA store, with and without the user's fence (the compiler inserts it)
    2. register -> SMEM -> wgmma, stores outside and inside the K loop, fp16/bf16, several M/N/K
    3. multi-stage TMA + mbarrier + wgmma GEMM with a TMA-store epilogue, ragged shapes
    4. tlx.fence("gpu") in a last-CTA-sums pattern, 100 launches
    5. tlx.fence("sys") publishing data to host-mapped pinned memory behind a flag
    6. more than 48 KB of dynamic shared memory
    7. torch, CuPy and numba arrays, and non-default streams of each
    8. compute-sanitizer memcheck/racecheck on 1-3: scripts/sanitize_runtime_gpu.sh

Kernels are written exactly as TLX kernels are (only the imports differ) and are built lazily
inside the tests, so collecting this file on a machine without a GPU (CI) needs no frontend
feature and no torch.
"""

from __future__ import annotations

import functools
import os
import random
import time

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SMALL = os.environ.get("TLX_SANITIZE") == "1"  # under compute-sanitizer: fewer, smaller shapes


def _seed() -> int:
    seed = random.SystemRandom().randrange(2 ** 31)
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % (2 ** 32))
    return seed


def _check_bound(got: np.ndarray, want: np.ndarray, bound: np.ndarray, what: str) -> None:
    """|got - want| <= bound elementwise (all float64), with NaN (poison) always failing."""
    got = got.astype(np.float64)
    err = np.abs(got - want)
    bad = ~(err <= bound)  # NaN compares False -> bad
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements out of bound; first "
                             f"at {idx}: got {got[idx]!r} want {want[idx]!r} bound {bound[idx]!r}")


@functools.lru_cache(maxsize=None)
def kernels():
    """The TLX kernels of this file (built once, lazily)."""
    import tlx
    import tlx.language as tl

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

    return dict(tma_store=tma_store_kernel, wgmma_inside=wgmma_inside_kernel,
                wgmma_outside=wgmma_outside_kernel, gemm_tma=gemm_tma_kernel,
                last_cta_sum=last_cta_sum_kernel, publish_sys=publish_sys_kernel,
                big_smem=big_smem_kernel, axpy=axpy_kernel)


def _asm_of(handle):
    """The PTX of a launched kernel if the launch returned a compiled handle (else None)."""
    asm = getattr(handle, "asm", None)
    return asm.get("ptx") if isinstance(asm, dict) else None


# -- 1 ----------------------------------------------------------------------------------------

TMA_SHAPES = [(128, 128), (200, 72)] if SMALL else [(64, 64), (128, 128), (200, 72), (257, 136)]


@pytest.mark.parametrize("user_fence", [True, False], ids=["user-fence", "compiler-fence"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("M,N", TMA_SHAPES)
def test_1_canonical_tma_store(M, N, dtype, user_fence):
    import torch

    import tlx

    seed = _seed()
    BM, BN = 64, 64 if dtype == "float16" else 32
    x = torch.randn(M, N, device="cuda").to(getattr(torch, dtype))
    y = torch.full((M, N), float("nan"), device="cuda", dtype=x.dtype)
    y_desc = tlx.TensorDescriptor(y, [M, N], [N, 1], [BM, BN])
    h = kernels()["tma_store"][(triton_cdiv(M, BM), triton_cdiv(N, BN))](
        x, y_desc, M, N, BLOCK_M=BM, BLOCK_N=BN, USER_FENCE=user_fence, num_warps=4)
    torch.cuda.synchronize()
    assert torch.equal(y, x), f"seed {seed}"
    ptx = _asm_of(h)
    if ptx is not None:  # exactly one proxy fence either way: the user's, or the inserted one
        assert ptx.count("fence.proxy.async.shared::cta") == 1, f"seed {seed}"


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


# -- 2 ----------------------------------------------------------------------------------------

WGMMA_SHAPES = ([(64, 64, 64), (100, 72, 96)] if SMALL else
                [(64, 64, 64), (128, 128, 128), (100, 72, 96), (256, 192, 320), (64, 256, 512)])


def _fp32_accum_bound(a64: np.ndarray, b64: np.ndarray, k: int) -> np.ndarray:
    """Error bound of an fp32-accumulated product of exactly representable inputs:
    k * 2^-22 * (|A| @ |B|) (4x the classic gamma_k bound), plus a denormal floor."""
    return k * 2.0 ** -22 * (np.abs(a64) @ np.abs(b64)) + 1e-30


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K", WGMMA_SHAPES)
def test_2_wgmma_stores_inside_the_k_loop(M, N, K, dtype):
    import torch

    seed = _seed()
    BM, BN, BK = 64, 64, 32
    a = torch.randn(M, K, device="cuda").to(getattr(torch, dtype))
    b = torch.randn(K, N, device="cuda").to(getattr(torch, dtype))
    c = torch.full((M, N), float("nan"), device="cuda")
    kernels()["wgmma_inside"][(triton_cdiv(M, BM), triton_cdiv(N, BN))](
        a, b, c, M, N, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=4)
    torch.cuda.synchronize()
    a64, b64 = a.float().cpu().numpy().astype(np.float64), b.float().cpu().numpy().astype(np.float64)
    _check_bound(c.cpu().numpy(), a64 @ b64, _fp32_accum_bound(a64, b64, K),
                 f"wgmma inside {M}x{N}x{K} {dtype} seed {seed}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("M,N,K", [(64, 64, 32), (128, 64, 64), (96, 128, 64)])
def test_2_wgmma_stores_outside_the_k_loop(M, N, K, dtype):
    import torch

    seed = _seed()
    BM, BN, BK, R = 64, 64, K, 3
    a = torch.randn(M, K, device="cuda").to(getattr(torch, dtype))
    b = torch.randn(K, N, device="cuda").to(getattr(torch, dtype))
    c = torch.full((M, N), float("nan"), device="cuda")
    kernels()["wgmma_outside"][(triton_cdiv(M, BM), triton_cdiv(N, BN))](
        a, b, c, M, N, K, R, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=4)
    torch.cuda.synchronize()
    a64, b64 = a.float().cpu().numpy().astype(np.float64), b.float().cpu().numpy().astype(np.float64)
    _check_bound(c.cpu().numpy(), R * (a64 @ b64), R * _fp32_accum_bound(a64, b64, R * K),
                 f"wgmma outside {M}x{N}x{K} {dtype} seed {seed}")


# -- 3 ----------------------------------------------------------------------------------------

GEMM_SHAPES = ([(128, 128, 128), (200, 136, 72)] if SMALL else
               [(128, 128, 64), (256, 256, 256), (200, 136, 72), (512, 384, 1000), (64, 520, 48),
                (1024, 1024, 512)])


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("M,N,K", GEMM_SHAPES)
def test_3_multistage_tma_gemm(M, N, K, stages):
    import torch

    import tlx

    seed = _seed()
    BM, BN, BK = 128, 128, 64
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    a_desc = tlx.TensorDescriptor(a, [M, K], [K, 1], [BM, BK])
    b_desc = tlx.TensorDescriptor(b, [K, N], [N, 1], [BK, BN])
    c_desc = tlx.TensorDescriptor(c, [M, N], [N, 1], [BM, BN])
    kernels()["gemm_tma"][(triton_cdiv(M, BM), triton_cdiv(N, BN))](
        a_desc, b_desc, c_desc, M, N, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, NUM_STAGES=stages,
        num_warps=4)
    torch.cuda.synchronize()
    a64, b64 = a.cpu().numpy().astype(np.float64), b.cpu().numpy().astype(np.float64)
    want = a64 @ b64
    bound = 2.0 ** -11 * np.abs(want) + _fp32_accum_bound(a64, b64, K) + 2.0 ** -24
    _check_bound(c.cpu().numpy(), want, bound, f"TMA GEMM {M}x{N}x{K} stages {stages} seed {seed}")


# -- 4 ----------------------------------------------------------------------------------------

def test_4_fence_gpu_last_cta_sums_partials():
    import torch

    seed = _seed()
    BLOCK, n = 256, 256 * 97 + 13
    programs = triton_cdiv(n, BLOCK)
    k = kernels()["last_cta_sum"]
    partials = torch.empty(programs, device="cuda")
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    for rep in range(100):
        x = torch.randn(n, device="cuda")
        partials.fill_(float("nan"))
        out = torch.full((1,), float("nan"), device="cuda")
        k[(programs,)](x, partials, counter, out, n, BLOCK=BLOCK, MAX_PROGRAMS=128, num_warps=4)
        torch.cuda.synchronize()
        x64 = x.cpu().numpy().astype(np.float64)
        want = x64.sum()
        bound = 2 * n * 2.0 ** -24 * np.abs(x64).sum()   # two fp32 reduction levels
        got = float(out.item())
        assert abs(got - want) <= bound, f"launch {rep}: got {got} want {want} (seed {seed})"
        assert int(counter.item()) == 0, f"launch {rep}: counter not reset (seed {seed})"


# -- 5 ----------------------------------------------------------------------------------------

def test_5_fence_sys_publishes_to_pinned_host_memory():
    import torch

    _seed()
    n = 1 << 16
    data = torch.full((n,), -1, dtype=torch.int32, pin_memory=True)
    flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)
    data_np, flag_np = data.numpy(), flag.numpy()
    kernels()["publish_sys"][(1,)](data, flag, n, BLOCK=1024, num_warps=4)
    deadline = time.monotonic() + 20
    while flag_np[0] == 0:          # the host polls the mapped memory while the kernel runs
        if time.monotonic() > deadline:
            torch.cuda.synchronize()
            pytest.fail("the flag never became visible to the host")
    seen = data_np.copy()           # read right after the flag, before any synchronization
    torch.cuda.synchronize()
    want = np.arange(n, dtype=np.int64) * 3 + 1
    assert np.array_equal(seen.astype(np.int64), want), \
        f"{int((seen != want).sum())} elements not yet visible when the flag was"


# -- 6 ----------------------------------------------------------------------------------------

def test_6_more_than_48kb_dynamic_shared_memory():
    import torch

    seed = _seed()
    ROWS, COLS, NB = 64, 128, 3            # 3 x 32 KB
    x = torch.randn(ROWS, COLS, device="cuda")
    y = torch.full((ROWS, COLS), float("nan"), device="cuda")
    h = kernels()["big_smem"][(1,)](x, y, ROWS=ROWS, COLS=COLS, NUM_BUF=NB, num_warps=4)
    torch.cuda.synchronize()
    x64 = x.cpu().numpy().astype(np.float64)
    # x*2 and +1 are each one fp32 rounding
    _check_bound(y.cpu().numpy(), x64 * 2 + 1, 2.0 ** -23 * (np.abs(x64 * 2) + 1) * 2,
                 f"big smem seed {seed}")
    abi = getattr(h, "abi", None)
    if abi is not None:
        assert abi.shared_bytes > 48 * 1024


# -- 7 ----------------------------------------------------------------------------------------

def test_7_torch_cupy_numba_arrays_and_streams():
    import torch

    seed = _seed()
    k = kernels()["axpy"]
    n, BLOCK, alpha = 10_000, 1024, 1.5
    xh = np.random.randn(n).astype(np.float32)
    yh = np.random.randn(n).astype(np.float32)
    want = np.float64(np.float32(alpha)) * xh.astype(np.float64) + yh
    bound = 2.0 ** -23 * (np.abs(want) + np.abs(yh)) * 2
    grid = (triton_cdiv(n, BLOCK),)
    # torch, on its current stream and on a side stream
    xt, yt = torch.from_numpy(xh).cuda(), torch.from_numpy(yh).cuda()
    for stream in (None, torch.cuda.Stream()):
        out = torch.full((n,), float("nan"), device="cuda")
        torch.cuda.synchronize()
        k[grid](xt, yt, out, n, alpha, BLOCK=BLOCK, num_warps=4, stream=stream)
        (stream or torch.cuda.current_stream()).synchronize()
        _check_bound(out.cpu().numpy(), want, bound, f"torch stream={stream} seed {seed}")
    # CuPy arrays on a CuPy stream
    cp = pytest.importorskip("cupy")
    s = cp.cuda.Stream(non_blocking=True)
    xc, yc = cp.asarray(xh), cp.asarray(yh)
    oc = cp.full(n, cp.nan, dtype=cp.float32)
    k[grid](xc, yc, oc, n, alpha, BLOCK=BLOCK, num_warps=4, stream=s)
    s.synchronize()
    _check_bound(cp.asnumpy(oc), want, bound, f"cupy seed {seed}")
    # numba device arrays on a numba stream
    from numba import cuda as ncuda

    ns = ncuda.stream()
    xn, yn = ncuda.to_device(xh, stream=ns), ncuda.to_device(yh, stream=ns)
    on = ncuda.to_device(np.full(n, np.nan, np.float32), stream=ns)
    k[grid](xn, yn, on, n, alpha, BLOCK=BLOCK, num_warps=4, stream=ns)
    ns.synchronize()
    _check_bound(on.copy_to_host(), want, bound, f"numba seed {seed}")
    # mixed: torch x, CuPy y, numba out, raw stream handle
    hs = torch.cuda.Stream()
    on2 = ncuda.to_device(np.full(n, np.nan, np.float32))
    k[grid](xt, yc, on2, n, alpha, BLOCK=BLOCK, num_warps=4, stream=hs.cuda_stream)
    hs.synchronize()
    _check_bound(on2.copy_to_host(), want, bound, f"mixed seed {seed}")


def test_7_repeated_launches_take_the_fast_path():
    """The launch path of every loop over kernel[grid](torch tensors, ints, floats): after the
    first launch, each call is its key, one dict lookup and the native launch (tlx/launch.py).
    Fresh data each launch, torch's current stream changed in between, two threads at once:
    every output checked against numpy."""
    import threading

    import torch

    import tlx
    import tlx.language as tl
    from tlx.runtime import native_launch

    @tlx.jit
    def axpy_native(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
                 mask=mask)

    seed = _seed()
    n, BLOCK = 5_000, 256
    grid = (triton_cdiv(n, BLOCK),)

    def one(alpha, stream_ctx=None):
        xh, yh = np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32)
        x, y = torch.from_numpy(xh).cuda(), torch.from_numpy(yh).cuda()
        out = torch.full((n,), float("nan"), device="cuda")
        torch.cuda.synchronize()
        axpy_native[grid](x, y, out, n, alpha, BLOCK=BLOCK)
        torch.cuda.current_stream().synchronize()
        want = np.float64(np.float32(alpha)) * xh.astype(np.float64) + yh
        return out.cpu().numpy(), want, 2.0 ** -23 * (np.abs(want) + np.abs(yh)) * 2

    for i in range(4):
        got, want, bound = one(0.5 + i)
        _check_bound(got, want, bound, f"launch {i}, seed {seed}")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # the C path reads torch's current stream per launch
        got, want, bound = one(-2.0)
    _check_bound(got, want, bound, f"side stream, seed {seed}")
    if native_launch.entry() is None:
        pytest.skip(f"native launch unavailable here: {native_launch.status()}")
    assert axpy_native.launch_path.misses == 1  # the other four launches took the fast path

    errors = []

    def work(t):
        try:
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                for i in range(20):
                    g, w, b = one(float(t) + 0.25 * i)
                    _check_bound(g, w, b, f"thread {t} launch {i}, seed {seed}")
        except Exception as exc:  # reported below, from the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    # A thread's first launch may find no current context (the launcher makes numba's current
    # and launches again); no launch of the threads needed the general path.
    assert axpy_native.launch_path.misses == 1


def test_7_each_dtype_launches_its_own_specialization():
    """Tensors of five dtypes through one kernel, interleaved: the call key holds each tensor's
    dtype, so one dtype's specialization never launches for another. The output (float32,
    x * 2 + 1 in the input's type) is checked exactly against numpy after every launch."""
    import torch

    import tlx
    import tlx.language as tl
    from tlx.runtime import native_launch

    @tlx.jit
    def twice_plus_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, (x * 2 + 1).to(tl.float32), mask=mask)

    seed = _seed()
    n, BLOCK = 3_000, 256
    grid = (triton_cdiv(n, BLOCK),)
    kinds = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int16]
    for rnd in range(3):
        for dt in kinds:
            if dt.is_floating_point:
                xh = np.random.randint(-64, 64, n).astype(np.float32) / 4  # exact in every float type here
            else:
                xh = np.random.randint(-1000, 1000, n).astype(np.float32)
            x = torch.from_numpy(xh).to(device="cuda", dtype=dt)
            out = torch.full((n,), float("nan"), device="cuda")
            twice_plus_one[grid](x, out, n, BLOCK=BLOCK)
            want = xh.astype(np.float64) * 2 + 1
            _check_bound(out.cpu().numpy(), want, np.zeros(n), f"{dt} round {rnd}, seed {seed}")
    if native_launch.entry() is None:
        pytest.skip(f"native launch unavailable here: {native_launch.status()}")
    assert twice_plus_one.launch_path.misses == len(kinds)  # rounds 2 and 3: all on the fast path

"""The whole stack on the GPU: kernels written as TLX kernels (tests/kernels/acceptance.py),
traced, fenced and compiled by tlx and launched by tlx.runtime, compared against numpy in float64
with bounds suited to the dtype. Outputs are poisoned first and inputs are random each run (the
seed is printed in every failure message). tests/gpu/test_sanitizer.py runs the TMA-store, wgmma
and TMA-GEMM tests again under compute-sanitizer's memcheck and racecheck."""

from __future__ import annotations

import os
import random
import threading
import time

import numpy as np
import pytest

from bounds import check_bound, fp32_accum_bound
from kernels import acceptance as A

pytestmark = pytest.mark.gpu
native_on = pytest.mark.skipif(os.environ.get("TLX_NATIVE_LAUNCH") == "0",
                               reason="TLX_NATIVE_LAUNCH=0 switches the native launch path off")


def _seed() -> int:
    import torch

    seed = random.SystemRandom().randrange(2 ** 31)
    torch.manual_seed(seed)
    np.random.seed(seed % (2 ** 32))
    return seed


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


@pytest.mark.parametrize("user_fence", [True, False], ids=["user-fence", "compiler-fence"])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("M,N", A.TMA_SHAPES)
def test_tma_store_of_a_register_tile_gets_exactly_one_fence(M, N, dtype, user_fence):
    """local_store -> TMA store: with or without the user's fence, the kernel runs exactly one
    proxy fence (the user's, or the one the compiler inserts) and stores the tile exactly."""
    import torch

    import tlx

    seed = _seed()
    spec = A.TMA_STORE[(dtype, user_fence, *A.div16(M, N))]
    BM, BN = spec.constexprs["BLOCK_M"], spec.constexprs["BLOCK_N"]
    x = torch.randn(M, N, device="cuda").to({"fp16": torch.float16, "fp32": torch.float32}[dtype])
    y = torch.full((M, N), float("nan"), device="cuda", dtype=x.dtype)
    compiled = spec[(cdiv(M, BM), cdiv(N, BN))](x, tlx.TensorDescriptor(y, [M, N], [N, 1], [BM, BN]), M, N)
    torch.cuda.synchronize()
    assert torch.equal(y, x), f"seed {seed}"
    assert compiled.asm["ptx"].count("fence.proxy.async.shared::cta") == 1


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("M,N,K", A.WGMMA_INSIDE_SHAPES)
def test_wgmma_reads_tiles_stored_inside_the_k_loop(M, N, K, dtype):
    import torch

    seed = _seed()
    spec = A.WGMMA_INSIDE[(dtype, *A.div16(M, N, K))]
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a, b = torch.randn(M, K, device="cuda").to(tdt), torch.randn(K, N, device="cuda").to(tdt)
    c = torch.full((M, N), float("nan"), device="cuda")
    spec[(cdiv(M, 64), cdiv(N, 64))](a, b, c, M, N, K)
    torch.cuda.synchronize()
    a64, b64 = a.float().cpu().numpy().astype(np.float64), b.float().cpu().numpy().astype(np.float64)
    check_bound(c.cpu().numpy(), a64 @ b64, fp32_accum_bound(a64, b64, K),
                f"wgmma, stores inside the K loop, {M}x{N}x{K} {dtype} seed {seed}")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("M,N,K", A.WGMMA_OUTSIDE_SHAPES)
def test_wgmma_loop_reads_tiles_stored_once_before_it(M, N, K, dtype):
    """C = REPEAT * A @ B: the tiles are stored once, before a loop of wgmmas (one fence,
    hoisted out of the loop)."""
    import torch

    seed = _seed()
    R = A.WGMMA_REPEAT
    spec = A.WGMMA_OUTSIDE[(dtype, K, *A.div16(M, N))]
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a, b = torch.randn(M, K, device="cuda").to(tdt), torch.randn(K, N, device="cuda").to(tdt)
    c = torch.full((M, N), float("nan"), device="cuda")
    spec[(cdiv(M, 64), cdiv(N, 64))](a, b, c, M, N, K, R)
    torch.cuda.synchronize()
    a64, b64 = a.float().cpu().numpy().astype(np.float64), b.float().cpu().numpy().astype(np.float64)
    check_bound(c.cpu().numpy(), R * (a64 @ b64), R * fp32_accum_bound(a64, b64, R * K),
                f"wgmma, stores outside the K loop, {M}x{N}x{K} {dtype} seed {seed}")


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("M,N,K", A.GEMM_SHAPES)
def test_multistage_tma_gemm_with_a_tma_store_epilogue(M, N, K, stages):
    import torch

    import tlx

    seed = _seed()
    spec = A.GEMM_TMA[(stages, *A.div16(M, N, K))]
    BM, BN, BK = 128, 128, 64
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    spec[(cdiv(M, BM), cdiv(N, BN))](tlx.TensorDescriptor(a, [M, K], [K, 1], [BM, BK]),
                                     tlx.TensorDescriptor(b, [K, N], [N, 1], [BK, BN]),
                                     tlx.TensorDescriptor(c, [M, N], [N, 1], [BM, BN]), M, N, K)
    torch.cuda.synchronize()
    a64, b64 = a.cpu().numpy().astype(np.float64), b.cpu().numpy().astype(np.float64)
    want = a64 @ b64
    check_bound(c.cpu().numpy(), want, 2.0 ** -11 * np.abs(want) + fp32_accum_bound(a64, b64, K) + 2.0 ** -24,
                f"TMA GEMM {M}x{N}x{K} stages {stages} seed {seed}")


def test_gpu_fences_let_the_last_cta_sum_every_partial():
    """tlx.fence("gpu") releases each CTA's partial before its ticket and acquires them all in
    the last CTA: 100 launches, each sum right and the counter reset."""
    import torch

    seed = _seed()
    BLOCK, n = 256, A.LAST_CTA_N
    programs = cdiv(n, BLOCK)
    partials = torch.empty(programs, device="cuda")
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    for rep in range(100):
        x = torch.randn(n, device="cuda")
        partials.fill_(float("nan"))
        out = torch.full((1,), float("nan"), device="cuda")
        A.LAST_CTA_SUM[(programs,)](x, partials, counter, out, n)
        torch.cuda.synchronize()
        x64 = x.cpu().numpy().astype(np.float64)
        got = float(out.item())
        assert abs(got - x64.sum()) <= 2 * n * 2.0 ** -24 * np.abs(x64).sum(), \
            f"launch {rep}: got {got} want {x64.sum()} (seed {seed})"  # two fp32 reduction levels
        assert int(counter.item()) == 0, f"launch {rep}: counter not reset (seed {seed})"


def test_sys_fence_publishes_data_before_its_flag_to_pinned_host_memory():
    import torch

    _seed()
    n = A.PUBLISH_N
    data = torch.full((n,), -1, dtype=torch.int32, pin_memory=True)
    flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)
    data_np, flag_np = data.numpy(), flag.numpy()
    A.PUBLISH_SYS[(1,)](data, flag, n)
    deadline = time.monotonic() + 20
    while flag_np[0] == 0:  # the host polls the mapped memory while the kernel runs
        if time.monotonic() > deadline:
            torch.cuda.synchronize()
            pytest.fail("the flag never became visible to the host")
    seen = data_np.copy()  # read right after the flag, before any synchronization
    torch.cuda.synchronize()
    want = np.arange(n, dtype=np.int64) * 3 + 1
    assert np.array_equal(seen.astype(np.int64), want), \
        f"{int((seen != want).sum())} elements not yet visible when the flag was"


def test_more_than_48_kb_of_dynamic_shared_memory():
    import torch

    seed = _seed()
    ROWS, COLS = 64, 128  # 3 buffers of 32 KB; the data goes through the last one
    x = torch.randn(ROWS, COLS, device="cuda")
    y = torch.full((ROWS, COLS), float("nan"), device="cuda")
    compiled = A.BIG_SMEM[(1,)](x, y)
    torch.cuda.synchronize()
    x64 = x.cpu().numpy().astype(np.float64)
    # x*2 and +1 are each one fp32 rounding
    check_bound(y.cpu().numpy(), x64 * 2 + 1, 2.0 ** -23 * (np.abs(x64 * 2) + 1) * 2, f"big smem seed {seed}")
    assert compiled.abi.shared_bytes > 48 * 1024


def _axpy_case():
    """(x, y, alpha, want, bound, launch) of the axpy test kernel on fresh inputs."""
    n, alpha = A.AXPY_N, 1.5
    xh, yh = np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32)
    want = np.float64(np.float32(alpha)) * xh.astype(np.float64) + yh
    bound = 2.0 ** -23 * (np.abs(want) + np.abs(yh)) * 2
    return xh, yh, alpha, want, bound, A.AXPY[(cdiv(n, A.AXPY.constexprs["BLOCK"]),)]


def test_torch_and_numba_arrays_on_their_own_streams():
    import torch
    from numba import cuda as ncuda

    seed = _seed()
    xh, yh, alpha, want, bound, launch = _axpy_case()
    n = len(xh)
    xt, yt = torch.from_numpy(xh).cuda(), torch.from_numpy(yh).cuda()
    for stream in (None, torch.cuda.Stream()):  # torch's current stream, and a side stream
        out = torch.full((n,), float("nan"), device="cuda")
        torch.cuda.synchronize()
        launch(xt, yt, out, n, alpha, stream=stream)
        (stream or torch.cuda.current_stream()).synchronize()
        check_bound(out.cpu().numpy(), want, bound, f"torch stream={stream} seed {seed}")
    ns = ncuda.stream()
    xn, yn = ncuda.to_device(xh, stream=ns), ncuda.to_device(yh, stream=ns)
    on = ncuda.to_device(np.full(n, np.nan, np.float32), stream=ns)
    launch(xn, yn, on, n, alpha, stream=ns)
    ns.synchronize()
    check_bound(on.copy_to_host(), want, bound, f"numba seed {seed}")


def test_cupy_arrays_on_a_cupy_stream_and_three_libraries_in_one_launch():
    cp = pytest.importorskip("cupy")
    import torch
    from numba import cuda as ncuda

    seed = _seed()
    xh, yh, alpha, want, bound, launch = _axpy_case()
    n = len(xh)
    s = cp.cuda.Stream(non_blocking=True)
    xc, yc = cp.asarray(xh), cp.asarray(yh)
    oc = cp.full(n, cp.nan, dtype=cp.float32)
    launch(xc, yc, oc, n, alpha, stream=s)
    s.synchronize()
    check_bound(cp.asnumpy(oc), want, bound, f"cupy seed {seed}")
    hs = torch.cuda.Stream()  # torch x, CuPy y, numba out, a raw stream handle
    on = ncuda.to_device(np.full(n, np.nan, np.float32))
    launch(torch.from_numpy(xh).cuda(), yc, on, n, alpha, stream=hs.cuda_stream)
    hs.synchronize()
    check_bound(on.copy_to_host(), want, bound, f"mixed seed {seed}")


@native_on
def test_repeated_launches_take_the_fast_path():
    """The launch path of every loop over kernel[grid](torch tensors, ints, floats): after the
    first launch, each call is its key, one dict lookup and the native launch (tlx/launch.py).
    Fresh data each launch, torch's current stream changed in between, two threads at once:
    every output checked against numpy."""

    import torch

    from tlx.runtime import native_launch

    seed = _seed()
    kernel, n = A.axpy_native_kernel, A.AXPY_NATIVE_N
    BLOCK = A.AXPY_NATIVE.constexprs["BLOCK"]
    grid = (cdiv(n, BLOCK),)

    def one(alpha):
        xh, yh = np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32)
        x, y = torch.from_numpy(xh).cuda(), torch.from_numpy(yh).cuda()
        out = torch.full((n,), float("nan"), device="cuda")
        torch.cuda.synchronize()
        A.AXPY_NATIVE.check(x, y, out, n, alpha)
        kernel[grid](x, y, out, n, alpha, BLOCK=BLOCK)  # as a user writes it: no stream=, no num_warps=
        torch.cuda.current_stream().synchronize()
        want = np.float64(np.float32(alpha)) * xh.astype(np.float64) + yh
        return out.cpu().numpy(), want, 2.0 ** -23 * (np.abs(want) + np.abs(yh)) * 2

    for i in range(4):
        check_bound(*one(0.5 + i), f"launch {i}, seed {seed}")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # the C path reads torch's current stream per launch
        got, want, bound = one(-2.0)
    check_bound(got, want, bound, f"side stream, seed {seed}")
    assert native_launch.entry() is not None, native_launch.status()
    assert kernel.launch_path.misses == 1  # the other four launches took the fast path

    errors = []

    def work(t):
        try:
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                for i in range(20):
                    check_bound(*one(float(t) + 0.25 * i), f"thread {t} launch {i}, seed {seed}")
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
    assert kernel.launch_path.misses == 1


@native_on
def test_each_dtype_launches_its_own_specialization():
    """Tensors of five dtypes through one kernel, interleaved: the call key holds each tensor's
    dtype, so one dtype's specialization never launches for another. The output (float32,
    x * 2 + 1 in the input's type) is checked exactly against numpy after every launch."""
    import torch

    from tlx.runtime import native_launch

    seed = _seed()
    kernel, n = A.twice_plus_one_kernel, A.TWICE_N
    BLOCK = A.TWICE_PLUS_ONE["fp32"].constexprs["BLOCK"]
    grid = (cdiv(n, BLOCK),)
    kinds = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32,
             "i16": torch.int16}
    for rnd in range(3):
        for name, dt in kinds.items():
            if dt.is_floating_point:
                xh = np.random.randint(-64, 64, n).astype(np.float32) / 4  # exact in every float type here
            else:
                xh = np.random.randint(-1000, 1000, n).astype(np.float32)
            x = torch.from_numpy(xh).to(device="cuda", dtype=dt)
            out = torch.full((n,), float("nan"), device="cuda")
            A.TWICE_PLUS_ONE[name].check(x, out, n)
            kernel[grid](x, out, n, BLOCK=BLOCK)
            check_bound(out.cpu().numpy(), xh.astype(np.float64) * 2 + 1, 0, f"{dt} round {rnd}, seed {seed}")
    assert native_launch.entry() is not None, native_launch.status()
    assert kernel.launch_path.misses == len(kinds)  # rounds 2 and 3: all on the fast path


@native_on
def test_alignment_and_int_flips_of_real_tensors_launch_their_own_specialization():
    """Real torch tensors through the guard (native_launch.c compares a tensor's is_cuda, dtype
    object and data_ptr() alignment and an int's class): calls alternating between an aligned
    and an unaligned view (4 bytes in) and between n a multiple of 16 or not launch four
    specializations; from the second round on every call matches a guard. Every output checked
    against numpy."""
    import torch

    seed = _seed()
    kernel, BLOCK = A.axpy_guard_kernel, 256
    seen = {}
    for rnd in range(3):
        for offset in (0, 1):
            for n in (4096, 4095):
                xh, yh = np.random.randn(n + 1).astype(np.float32), np.random.randn(n).astype(np.float32)
                x = torch.from_numpy(xh).cuda()[offset:offset + n]
                y = torch.from_numpy(yh).cuda()
                out = torch.full((n,), float("nan"), device="cuda")
                A.AXPY_GUARD[(offset, n)].check(x, y, out, n, 0.5)
                k = kernel[(cdiv(n, BLOCK),)](x, y, out, n, 0.5, BLOCK=BLOCK)
                assert seen.setdefault((offset, n), k) is k
                torch.cuda.synchronize()
                want = 0.5 * xh[offset:offset + n].astype(np.float64) + yh
                check_bound(out.cpu().numpy(), want, 2.0 ** -23 * (np.abs(want) + np.abs(yh)) * 2,
                            f"round {rnd}, offset {offset}, n {n}, seed {seed}")
    assert len(set(map(id, seen.values()))) == 4
    assert kernel.launch_path.misses == 4 and len(kernel.launch_path.recent) == 4


@native_on
def test_a_tensor_whose_data_is_reassigned_launches_what_it_holds_now():
    """`x.data = other` changes a real torch tensor's dtype, alignment or device under the same
    Python object. The guard reads torch's getters (through their descriptors) at every call, so
    each call launches the specialization of what x holds now, and x moved to host memory is
    refused. The output (float32, x * 2 + 1) is checked exactly against numpy after every launch."""
    import torch

    import tlx
    from tlx.runtime.errors import TLXRuntimeError

    seed = _seed()
    kernel, n = tlx.jit(A.twice_plus_one_kernel.fn), A.TWICE_N  # its own launch path and guards
    BLOCK = A.TWICE_PLUS_ONE["fp32"].constexprs["BLOCK"]
    grid = (cdiv(n, BLOCK),)
    xh = np.random.randint(-64, 64, n + 1).astype(np.float32) / 4  # exact in fp16 and bf16
    x = torch.from_numpy(xh[:n]).cuda()
    seen = {}
    for rnd in range(2):
        for dt, offset in ((torch.float32, 0), (torch.float16, 0), (torch.float32, 1), (torch.bfloat16, 0)):
            x.data = torch.from_numpy(xh).to(device="cuda", dtype=dt)[offset:offset + n]
            out = torch.full((n,), float("nan"), device="cuda")
            k = kernel[grid](x, out, n, BLOCK=BLOCK)
            assert seen.setdefault((dt, offset), k) is k
            torch.cuda.synchronize()
            want = xh[offset:offset + n].astype(np.float64) * 2 + 1
            check_bound(out.cpu().numpy(), want, 0, f"{dt}, offset {offset}, round {rnd}, seed {seed}")
    assert len(set(map(id, seen.values()))) == 4 and kernel.launch_path.misses == 4
    x.data = torch.from_numpy(xh[:n])  # host memory, not pinned
    with pytest.raises(TLXRuntimeError, match="torch tensor on 'cpu'"):
        kernel[grid](x, out, n, BLOCK=BLOCK)

"""The kernels of the GPU acceptance tests (tests/kernels/acceptance.py) run on the CPU
interpreter with its proxy-hazard checker: so CI knows they trace, pass the fence passes without
a hazard and compute the right thing before a GPU ever sees them. Outputs are poisoned with
NaN/-1 first and compared with numpy in float64."""

import os
import types

import numpy as np
import pytest

from bounds import check_bound, fp32_accum_bound
from kernels import acceptance as A
from tlx.interpreter import interpret


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def desc(base, block):
    """A host descriptor over a numpy array, as the interpreter takes it."""
    rows, cols = base.shape
    return types.SimpleNamespace(base=base, shape=[rows, cols], strides=[cols, 1],
                                 block_shape=list(block), padding="zero")


@pytest.fixture
def rng():
    seed = int.from_bytes(os.urandom(4), "little")
    print("seed", seed)
    return np.random.default_rng(seed)


@pytest.mark.parametrize("user_fence", [True, False])
def test_tma_store_kernel(rng, user_fence):
    M, N = 100, 72
    x = rng.standard_normal((M, N)).astype(np.float16)
    y = np.full((M, N), np.nan, np.float16)
    interpret(A.tma_store_kernel, (cdiv(M, 64), cdiv(N, 64)), x, desc(y, (64, 64)), M, N,
              BLOCK_M=64, BLOCK_N=64, USER_FENCE=user_fence)
    assert np.array_equal(x, y)


def test_wgmma_kernels(rng):
    M, N, Kd = 70, 64, 96
    a = rng.standard_normal((M, Kd)).astype(np.float16)
    b = rng.standard_normal((Kd, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    interpret(A.wgmma_inside_kernel, (cdiv(M, 64), 1), a, b, c, M, N, Kd, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    check_bound(c, a64 @ b64, fp32_accum_bound(a64, b64, Kd), "wgmma inside")
    a2, b2 = a[:64, :32], b[:32, :]
    c2 = np.full((64, N), np.nan, np.float32)
    interpret(A.wgmma_outside_kernel, (1, 1), np.ascontiguousarray(a2), np.ascontiguousarray(b2), c2,
              64, N, 32, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    a64, b64 = a2.astype(np.float64), b2.astype(np.float64)
    check_bound(c2, 3 * (a64 @ b64), 3 * fp32_accum_bound(a64, b64, 96), "wgmma outside")


def test_multistage_tma_gemm_kernel(rng):
    M, N, Kd = 130, 136, 200   # ragged in every dimension
    a = rng.standard_normal((M, Kd)).astype(np.float16)
    b = rng.standard_normal((Kd, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    interpret(A.gemm_tma_kernel, (cdiv(M, 128), cdiv(N, 128)), desc(a, (128, 64)), desc(b, (64, 128)),
              desc(c, (128, 128)), M, N, Kd, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, NUM_STAGES=3)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    check_bound(c, want, 2.0 ** -11 * np.abs(want) + fp32_accum_bound(a64, b64, Kd) + 2.0 ** -24,
                   "TMA GEMM")


def test_fence_kernels(rng):
    n = 256 * 5 + 13
    x = rng.standard_normal(n).astype(np.float32)
    partials = np.full(cdiv(n, 256), np.nan, np.float32)
    counter = np.zeros(1, np.int32)
    out = np.full(1, np.nan, np.float32)
    interpret(A.last_cta_sum_kernel, (cdiv(n, 256),), x, partials, counter, out, n, BLOCK=256,
              MAX_PROGRAMS=128)
    x64 = x.astype(np.float64)
    assert abs(out[0] - x64.sum()) <= 2 * n * 2.0 ** -24 * np.abs(x64).sum()
    assert counter[0] == 0
    data = np.full(3000, -1, np.int32)
    flag = np.zeros(1, np.int32)
    interpret(A.publish_sys_kernel, (1,), data, flag, 3000, BLOCK=1024)
    assert np.array_equal(data, np.arange(3000) * 3 + 1) and flag[0] == 1


def test_big_smem_and_axpy_kernels(rng):
    x = rng.standard_normal((64, 128)).astype(np.float32)
    y = np.full((64, 128), np.nan, np.float32)
    interpret(A.big_smem_kernel, (1,), x, y, ROWS=64, COLS=128, NUM_BUF=3)
    x64 = x.astype(np.float64)
    check_bound(y, x64 * 2 + 1, 2.0 ** -23 * (np.abs(x64 * 2) + 1) * 2, "big smem")
    n = 3000
    xs = rng.standard_normal(n).astype(np.float32)
    ys = rng.standard_normal(n).astype(np.float32)
    o = np.full(n, np.nan, np.float32)
    interpret(A.axpy_kernel, (cdiv(n, 1024),), xs, ys, o, n, 1.5, BLOCK=1024)
    want = 1.5 * xs.astype(np.float64) + ys
    check_bound(o, want, 2.0 ** -23 * (np.abs(want) + np.abs(ys)) * 2, "axpy")


def test_tma_store_without_any_fence_is_a_hazard(rng):
    # the same kernel with the user fence left out AND the fence passes off: the interpreter
    # must report the missing generic->async fence (this suite can fail)
    from tlx.compiler.errors import TLXError

    x = rng.standard_normal((64, 64)).astype(np.float16)
    y = np.full((64, 64), np.nan, np.float16)
    with pytest.raises(TLXError):
        interpret(A.tma_store_kernel, (1, 1), x, desc(y, (64, 64)), 64, 64, BLOCK_M=64, BLOCK_N=64,
                  USER_FENCE=False, fence_passes=False)
    hazards = interpret(A.tma_store_kernel, (1, 1), x, desc(y, (64, 64)), 64, 64, BLOCK_M=64,
                        BLOCK_N=64, USER_FENCE=False, fence_passes=False, raise_on_hazard=False)
    assert len(hazards) >= 1

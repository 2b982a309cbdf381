"""Every kernel of the test catalogue (tests/catalog.py: Triton-core kernels, TLX kernels and the
rewritten TLX tutorials) traced by the frontend and executed by the interpreter on the CPU, its
outputs (poisoned first) compared with numpy in float64.

The traced IR has only the user's fences, so kernels that rely on the compiler's fences report
exactly those missing fences (`WITHOUT_PASSES`); after the fence passes none may remain."""

from __future__ import annotations

import linecache

import numpy as np
import pytest

import catalog
from interp_kernels import HostDesc
from tlx.interpreter import run

rng = np.random.default_rng(11)


def f16(*shape):
    return (rng.standard_normal(shape) / 2).astype(np.float16)


def poison(shape, dt):
    return np.full(shape, np.nan, dt) if np.dtype(dt).kind == "f" else np.full(shape, -7, dt)


def rel_err(got, ref):
    return float(np.abs(got.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """fp32 values truncated to bf16, as their 16-bit patterns."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


# Each entry: name -> function returning (grid, args, check) where check() asserts the outputs.
SETUPS = {}


def setup(name):
    def deco(fn):
        SETUPS[name] = fn
        return fn
    return deco


@setup("vector_add")
def _():
    n = 3000
    x, y, out = rng.random(n, np.float32), rng.random(n, np.float32), poison(n, np.float32)
    return (3,), [x, y, out, n], lambda: np.testing.assert_array_equal(out, x + y)


@setup("row_softmax")
def _():
    rows, cols = 5, 700
    x = np.zeros((rows, 1024), np.float16)
    x[:, :cols] = f16(rows, cols) * 4
    out = poison((rows, 1024), np.float16)

    def check():
        e = np.exp(x[:, :cols].astype(np.float64) - x[:, :cols].astype(np.float64).max(1, keepdims=True))
        ref = e / e.sum(1, keepdims=True)
        assert np.allclose(out[:, :cols].astype(np.float64), ref, rtol=2e-3, atol=1e-6)
        assert np.isnan(out[:, cols:].astype(np.float32)).all()  # masked columns untouched
    return (rows,), [x, out, rows, cols, 1024], check


@setup("dot_matmul")
def _():
    M, N, K = 100, 70, 80
    a, b, c = f16(M, K), f16(K, N), poison((M, N), np.float16)
    return (2, 2), [a, b, c, M, N, K, K, N, N], lambda: rel_err(c, a.astype(np.float64) @ b) < 2e-3 or pytest.fail(
        f"error {rel_err(c, a.astype(np.float64) @ b)}")


@setup("ring_counter")
def _():
    n, out = 10, poison(2, np.int32)
    total = 0
    for i in range(n):
        buf, phase = i % 3, (i // 3) & 1
        total = total + buf if phase == 1 else total - 1
    return (2,), [out, n], lambda: np.testing.assert_array_equal(out, [total, total])


@setup("early_exit")
def _():
    n = 300
    x = rng.random(1024, np.float32)
    x0 = x.copy()
    return (4,), [x, n], lambda: (np.testing.assert_array_equal(x[:n], 2 * x0[:n]),
                                  np.testing.assert_array_equal(x[n:], x0[n:]))


@setup("smem_roundtrip")
def _():
    x = rng.random((32, 32), np.float32)
    y = poison(32 * 32 + 16 * 32, np.float32)
    return (1,), [x, y], lambda: (np.testing.assert_array_equal(y[:1024].reshape(32, 32), x.T),
                                  np.testing.assert_array_equal(y[1024:].reshape(16, 32), x[:16]))


def _tma_store():
    x = f16(128, 64)
    y = poison((128, 64), np.float16)
    return (2,), [HostDesc.of(x, (64, 64)), HostDesc.of(y, (64, 64))], lambda: np.testing.assert_array_equal(
        y, (x.astype(np.float32) + 1).astype(np.float16))


SETUPS["tma_store_fenced"] = _tma_store
SETUPS["tma_store_unfenced"] = _tma_store


@setup("wgmma_store_outside_loop")
def _():
    a, b, c = f16(64, 64), f16(64, 64), poison((64, 64), np.float32)
    return (1,), [a, b, c, 3], lambda: rel_err(c, 3 * (a.astype(np.float64) @ b)) < 1e-6 or pytest.fail("wrong")


@setup("wgmma_store_inside_loop")
def _():
    K = 128
    a, b = bf16_bits(rng.standard_normal((64, K))), bf16_bits(rng.standard_normal((K, 128)))
    c = poison((64, 128), np.float32)
    return (1,), [a, b, c, K], lambda: rel_err(c, bf16_values(a) @ bf16_values(b)) < 1e-6 or pytest.fail("wrong")


@setup("tma_gemm_pipelined")
def _():
    M, N, K = 256, 256, 320
    a, b, c = f16(M, K), f16(K, N), poison((M, N), np.float16)
    args = [HostDesc.of(a, (128, 64)), HostDesc.of(b, (64, 256)), HostDesc.of(c, (128, 256)), M, N, K]
    return (2,), args, lambda: rel_err(c, a.astype(np.float64) @ b) < 2e-3 or pytest.fail("wrong")


@setup("fence_gpu_last_block_sum")
def _():
    part, cnt, out = poison(5, np.float32), np.zeros(1, np.int32), poison(1, np.float32)
    ref = [sum(range(256)) + 256 * p for p in range(5)]
    return (5,), [part, cnt, out], lambda: (np.testing.assert_array_equal(part, ref), np.testing.assert_array_equal(cnt, [5]),
                                            np.testing.assert_array_equal(out, [sum(ref)]))


@setup("bulk_copy")
def _():
    src = rng.integers(0, 256, 1024).astype(np.uint8)
    dst = np.zeros(1024, np.uint8)
    return (1,), [src, dst], lambda: np.testing.assert_array_equal(dst, src)


@setup("named_barrier_pingpong")
def _():
    x, y = rng.random(256, np.float32), poison(256, np.float32)
    return (1,), [x, y], lambda: np.testing.assert_array_equal(y, x * x)


@setup("persistent_tiles")
def _():
    n_tiles, grid = 300, 132
    x = rng.random((n_tiles, 256)).astype(np.float32)
    out = poison((grid, 256), np.float32)
    ref = np.stack([x[p::grid].astype(np.float64).sum(0) for p in range(grid)])
    return (grid,), [x, out, n_tiles], lambda: np.testing.assert_allclose(out, ref, rtol=1e-6)


@setup("tlx_gemm_pipelined")
def _():
    M, N, K = 256, 256, 200  # K is not a multiple of BLOCK_K: the masked tail
    a, b, c = f16(M, K), f16(K, N), poison((M, N), np.float16)
    return (2,), [a, b, c, M, N, K, K, 1, N, 1, N, 1], lambda: rel_err(c, a.astype(np.float64) @ b) < 2e-3 or pytest.fail("wrong")


@setup("tlx_gemm_ws")
def _():
    M, N, K = 256, 256, 256
    a, b, c = f16(M, K), f16(K, N), poison((M, N), np.float16)
    args = [HostDesc.of(a, (64, 64)), HostDesc.of(b, (64, 256)), HostDesc.of(c, (64, 256)), M, N, K]
    return (2,), args, lambda: rel_err(c, a.astype(np.float64) @ b) < 2e-3 or pytest.fail("wrong")


@setup("tlx_fa_fwd")
def _():
    heads, n_ctx, d = 2, 256, 128
    q, k, v = f16(heads * n_ctx, d), f16(heads * n_ctx, d), f16(heads * n_ctx, d)
    o = poison((heads * n_ctx, d), np.float16)

    def check():
        for h in range(heads):
            s = slice(h * n_ctx, (h + 1) * n_ctx)
            z = 0.5 * q[s].astype(np.float64) @ k[s].astype(np.float64).T
            p = np.exp(z - z.max(1, keepdims=True))
            ref = (p / p.sum(1, keepdims=True)) @ v[s].astype(np.float64)
            assert rel_err(o[s], ref) < 1e-2, rel_err(o[s], ref)  # P is rounded to fp16 for P @ V
    args = [HostDesc.of(q, (64, 128)), HostDesc.of(k, (128, 128)), HostDesc.of(v, (128, 128)),
            HostDesc.of(o, (64, 128)), 0.5, n_ctx]
    return (n_ctx // 128, heads), args, check


@setup("tlx_tma_dot_store")
def _():
    a, b, c = f16(64, 64), f16(64, 64), poison((64, 64), np.float16)
    args = [HostDesc.of(a, (64, 64)), HostDesc.of(b, (64, 64)), HostDesc.of(c, (64, 64))]
    return (1,), args, lambda: rel_err(c, a.astype(np.float64) @ b) < 2e-3 or pytest.fail("wrong")


# The hazards the traced IR (user fences only) must show: (kind, first op, second op).
WITHOUT_PASSES = {
    "tma_store_unfenced": {("raw", "tlx.local_store", "tlx.tma_store")},
    "wgmma_store_outside_loop": {("raw", "tlx.local_store", "tlx.async_dot")},
    "wgmma_store_inside_loop": {("raw", "tlx.local_store", "tlx.async_dot")},
    "tlx_gemm_pipelined": {("raw", "tlx.async_load", "tlx.async_dot")},  # cp.async is generic proxy
}

@setup("fence_sys_flag")
def _():
    data, flag = poison(128, np.int32), np.zeros(1, np.int32)
    return (1,), [data, flag], lambda: (np.testing.assert_array_equal(data, np.arange(128) * 3 + 1),
                                        np.testing.assert_array_equal(flag, [1]))


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_catalogue_kernel_numerics(case):
    grid, args, check = SETUPS[case.name]()
    hs = run(case.trace(), grid, args, raise_on_hazard=False)
    check()
    got = {(h.kind, h.first.op, h.second.op) for h in hs}
    assert got == WITHOUT_PASSES.get(case.name, set()), "\n".join(str(h) for h in hs)
    for h in hs:  # both lines point at the kernel source that does the access
        assert "local_store" in linecache.getline(h.first.loc.file, h.first.line) or \
            "async_load" in linecache.getline(h.first.loc.file, h.first.line)
        src = linecache.getline(h.second.loc.file, h.second.line)
        assert "async_dot" in src or "async_descriptor_store" in src


def test_every_catalogue_kernel_has_a_numeric_check():
    assert {c.name for c in catalog.CASES} == set(SETUPS)


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_catalogue_kernel_after_the_fence_passes_has_no_hazard(case):
    from tlx.compiler.options import CompileOptions
    from tlx.compiler.pipeline import PIPELINE, compile_module

    names = [p.name for p in PIPELINE]
    passes = PIPELINE[:names.index("cta_barriers") + 1]
    m = compile_module(case.trace(), CompileOptions(num_warps=case.num_warps, verify_each_pass=True), passes=passes,
                       snapshots=False).module
    grid, args, check = SETUPS[case.name]()
    hs = run(m, grid, args, raise_on_hazard=False)
    assert hs == [], "\n".join(str(h) for h in hs)
    check()

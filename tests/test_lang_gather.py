"""`tlx.local_gather` / `tlx.local_scatter`: shared-memory accesses at run-time indices along one axis.
Their numerics on the interpreter against numpy (float64), their IR and its place in the fence and
barrier passes (a gather is a generic read, a scatter a generic write), their PTX (assembled for
sm_90a), and the bad inputs the real TLX rejects."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import tlx  # noqa: E402
import tlx.language as tl  # noqa: E402
from filecheck import filecheck  # noqa: E402
from tlx.compiler.errors import TLXCompileError  # noqa: E402
from tlx.interpreter.hazards import ProxyHazard  # noqa: E402
from tlx.interpreter.memory import InterpreterError  # noqa: E402


@tlx.jit
def gather_1d(src_ptr, idx_ptr, out_ptr, N: tl.constexpr, K: tl.constexpr):
    buf = tlx.local_alloc((N,), tlx.dtype_of(src_ptr), 1)
    tlx.local_store(buf[0], tl.load(src_ptr + tl.arange(0, N)))
    k = tl.arange(0, K)
    g = tlx.local_gather(buf[0], tl.load(idx_ptr + k), 0)
    tl.store(out_ptr + k, g)


@tlx.jit
def gather_2d(src_ptr, idx_ptr, out_ptr, N: tl.constexpr, M: tl.constexpr, R: tl.constexpr, AXIS: tl.constexpr):
    """Gather from an N x M buffer with R x M indices (R <= N unless AXIS == 0)."""
    offs = tl.arange(0, N)[:, None] * M + tl.arange(0, M)[None, :]
    buf = tlx.local_alloc((N, M), tlx.dtype_of(src_ptr), 1)
    tlx.local_store(buf[0], tl.load(src_ptr + offs))
    io = tl.arange(0, R)[:, None] * M + tl.arange(0, M)[None, :]
    g = tlx.local_gather(buf[0], tl.load(idx_ptr + io), axis=AXIS)
    tl.store(out_ptr + io, g)


@tlx.jit
def gather_3d(src_ptr, idx_ptr, out_ptr, N: tl.constexpr, M: tl.constexpr, P: tl.constexpr, AXIS: tl.constexpr):
    offs = (tl.arange(0, N)[:, None, None] * (M * P) + tl.arange(0, M)[None, :, None] * P
            + tl.arange(0, P)[None, None, :])
    buf = tlx.local_alloc((N, M, P), tl.float32, 1)
    tlx.local_store(buf[0], tl.load(src_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_gather(buf[0], tl.load(idx_ptr + offs), axis=AXIS))


@tlx.jit
def scatter_2d(idx_ptr, val_ptr, out_ptr, N: tl.constexpr, M: tl.constexpr, AXIS: tl.constexpr):
    offs = tl.arange(0, N)[:, None] * M + tl.arange(0, M)[None, :]
    buf = tlx.local_alloc((N, M), tlx.dtype_of(val_ptr), 1)
    tlx.local_store(buf[0], tl.zeros([N, M], tlx.dtype_of(val_ptr)))
    tlx.local_scatter(buf[0], tl.load(val_ptr + offs), tl.load(idx_ptr + offs), axis=AXIS)
    tl.store(out_ptr + offs, tlx.local_load(buf[0]))


@tlx.jit
def scatter_3d(idx_ptr, val_ptr, out_ptr, N: tl.constexpr, M: tl.constexpr, P: tl.constexpr, AXIS: tl.constexpr):
    offs = (tl.arange(0, N)[:, None, None] * (M * P) + tl.arange(0, M)[None, :, None] * P
            + tl.arange(0, P)[None, None, :])
    buf = tlx.local_alloc((N, M, P), tl.float32, 1)
    tlx.local_store(buf[0], tl.full([N, M, P], -1.0, tl.float32))
    tlx.local_scatter(buf[0], tl.load(val_ptr + offs), tl.load(idx_ptr + offs), axis=AXIS)
    tl.store(out_ptr + offs, tlx.local_load(buf[0]))


RNG = np.random.default_rng(20261207)


def permutations_along(shape, axis):
    """Indices that permute every line along `axis` (a scatter with them writes each place once)."""
    keys = RNG.random(shape)
    return np.ascontiguousarray(np.argsort(keys, axis=axis), dtype=np.int32)


@pytest.mark.parametrize("dtype,idx_dtype", [(np.float32, np.int32), (np.float16, np.int64), (np.int8, np.int16)])
@pytest.mark.parametrize("nw", [1, 4])
def test_gather_1d_reads_the_indexed_elements(dtype, idx_dtype, nw):
    n, k = 1024, 64
    src = (RNG.standard_normal(n) * 50).astype(dtype)
    idx = RNG.integers(0, n, k).astype(idx_dtype)
    out = np.zeros(k, dtype=dtype) + (np.array(np.nan, dtype) if np.issubdtype(dtype, np.floating) else 77)
    tlx.interpret(gather_1d, (1,), src, idx, out, N=n, K=k, num_warps=nw)
    np.testing.assert_array_equal(out.astype(np.float64), src.astype(np.float64)[idx])


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("n,m,r", [(32, 32, 32), (64, 32, 16), (16, 128, 8)])
def test_gather_2d_is_take_along_axis(axis, n, m, r):
    src = RNG.standard_normal((n, m)).astype(np.float32)
    idx = RNG.integers(0, (n, m)[axis], (r, m)).astype(np.int32)
    out = np.full((r, m), np.nan, np.float32)
    tlx.interpret(gather_2d, (1,), src, idx, out, N=n, M=m, R=r, AXIS=axis, num_warps=4)
    want = np.take_along_axis(src.astype(np.float64)[:, :m] if axis == 0 else src.astype(np.float64)[:r], idx, axis)
    np.testing.assert_array_equal(out.astype(np.float64), want)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gather_3d_is_take_along_axis(axis):
    shape = (16, 8, 4)
    src = RNG.standard_normal(shape).astype(np.float32)
    idx = RNG.integers(0, shape[axis], shape).astype(np.int32)
    out = np.full(shape, np.nan, np.float32)
    tlx.interpret(gather_3d, (1,), src, idx, out, N=16, M=8, P=4, AXIS=axis, num_warps=2)
    np.testing.assert_array_equal(out.astype(np.float64), np.take_along_axis(src.astype(np.float64), idx, axis))


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_scatter_2d_is_put_along_axis(axis, dtype):
    n, m = 32, 64
    idx = permutations_along((n, m), axis)
    vals = (RNG.standard_normal((n, m)) * 100).astype(dtype)
    out = np.zeros((n, m), dtype=dtype) + 3
    tlx.interpret(scatter_2d, (1,), idx, vals, out, N=n, M=m, AXIS=axis, num_warps=4)
    want = np.zeros((n, m))
    np.put_along_axis(want, idx, vals.astype(np.float64), axis)
    np.testing.assert_array_equal(out.astype(np.float64), want)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_3d_leaves_unwritten_places_alone(axis):
    shape = (16, 8, 4)
    moved = np.moveaxis(np.empty(shape), axis, -1).shape  # the axis last
    half = moved[-1] // 2
    # every line writes half of its places, each twice with the same value; the rest keep -1
    targets = np.argsort(RNG.random(moved), axis=-1)[..., :half]
    v = RNG.standard_normal(moved[:-1] + (half,))
    # (C-contiguous: the kernel reads them through plain pointers)
    idx = np.ascontiguousarray(np.moveaxis(np.concatenate([targets, targets], axis=-1), -1, axis), dtype=np.int32)
    vals = np.ascontiguousarray(np.moveaxis(np.concatenate([v, v], axis=-1), -1, axis), dtype=np.float32)
    out = np.full(shape, np.nan, np.float32)
    tlx.interpret(scatter_3d, (1,), idx, vals, out, N=16, M=8, P=4, AXIS=axis, num_warps=1)
    want = np.full(shape, -1.0)
    np.put_along_axis(want, idx, vals.astype(np.float64), axis)
    np.testing.assert_array_equal(out.astype(np.float64), want)
    assert (out == -1).sum() == out.size // 2


def test_an_index_outside_the_axis_is_an_interpreter_error_at_the_gather():
    src = np.zeros(256, np.float32)
    idx = np.arange(64, dtype=np.int32)
    idx[17] = 256
    with pytest.raises(InterpreterError, match=r"index 256 at position \[17\]") as e:
        tlx.interpret(gather_1d, (1,), src, idx, np.zeros(64, np.float32), N=256, K=64)
    assert e.value.loc.line == gather_1d.fn.__code__.co_firstlineno + 5
    idx[17] = -1
    with pytest.raises(InterpreterError, match=r"index -1"):
        tlx.interpret(gather_1d, (1,), src, idx, np.zeros(64, np.float32), N=256, K=64)


# ---- IR, fences, barriers ------------------------------------------------------------------------

def compile_scatter(axis=1, nw=4):
    return tlx.compile(scatter_2d, signature={"idx_ptr": "*i32", "val_ptr": "*fp32", "out_ptr": "*fp32"},
                       constexprs={"N": 32, "M": 64, "AXIS": axis}, num_warps=nw)


def test_the_ops_in_the_ir_and_the_barriers_around_them():
    k = compile_scatter()
    filecheck(k.asm["ir"], """
    CHECK: %buf = tlx.local_alloc
    CHECK: tlx.local_store
    CHECK: tlx.local_scatter {{%.*}}, [[V:%.*]], [[I:%.*]] {axis = 1} loc(
    CHECK: tlx.local_load
    """)
    # the scatter's threads write what other threads stored before and load after: a CTA barrier each way
    filecheck(k.asm["ir.cta_barriers"], """
    CHECK: tlx.local_store
    CHECK: tlx.cta_barrier
    CHECK-NEXT: tlx.local_scatter
    CHECK: tlx.cta_barrier
    CHECK-NEXT: tlx.local_load
    """)


@tlx.jit
def scatter_then_tma_store(d, idx_ptr, val_ptr):
    buf = tlx.local_alloc((64, 64), tl.float16, 1)
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    tlx.local_store(buf[0], tl.zeros([64, 64], tl.float16))
    tlx.local_scatter(buf[0], tl.load(val_ptr + offs), tl.load(idx_ptr + offs), axis=1)
    tlx.async_descriptor_store(d, buf[0], [0, 0])
    tlx.async_descriptor_store_wait(0)


SCATTER_TMA_SIG = {"d": "tensordesc<fp16[64, 64]>", "idx_ptr": "*i32", "val_ptr": "*fp16"}


def test_a_scatter_is_a_generic_write_so_a_tma_store_after_it_gets_a_proxy_fence():
    k = tlx.compile(scatter_then_tma_store, signature=SCATTER_TMA_SIG)
    filecheck(k.asm["ir.fence_insertion"], """
    CHECK: tlx.local_scatter
    CHECK-NOT: tlx.tma_store
    CHECK: tlx.fence_async_shared {{.*}}origin = "fence_insertion"
    CHECK-NEXT: tlx.tma_store
    """)
    (rec,) = k.fences
    assert "tlx.local_scatter" in " ".join(str(w) for w in rec.writers)


def test_without_the_fence_the_interpreter_reports_the_scatter_to_tma_race():
    idx = permutations_along((64, 64), 1)
    vals = RNG.standard_normal((64, 64)).astype(np.float16)
    out = np.zeros((64, 64), np.float16)
    d = tlx.TensorDescriptor(out, [64, 64], [64, 1], [64, 64])
    with pytest.raises(ProxyHazard, match="raw|RAW|fence.proxy.async") as e:
        tlx.interpret(scatter_then_tma_store, (1,), d, idx, vals, fence_passes=False)
    assert e.value.lines[0] == scatter_then_tma_store.fn.__code__.co_firstlineno + 5
    tlx.interpret(scatter_then_tma_store, (1,), d, idx, vals)  # with the passes: no hazard
    want = np.zeros((64, 64))
    np.put_along_axis(want, idx, vals.astype(np.float64), 1)
    np.testing.assert_array_equal(out.astype(np.float64), want)


def test_the_ptx_reads_and_writes_one_element_per_instruction_at_index_driven_addresses():
    ptx = compile_scatter(axis=1, nw=4).asm["ptx"]  # assembled by ptxas for sm_90a
    # 32 x 64 f32 over 128 threads: 16 elements per thread, one scalar st.shared.b32 each for the
    # scatter (the zeros before it are stored as 16-byte vectors)
    assert ptx.count("\tst.shared.b32 ") == 16
    assert "bfe.u32" in ptx  # the index's bits select the column
    k = tlx.compile(gather_1d, signature={"src_ptr": "*fp16", "idx_ptr": "*i64", "out_ptr": "*fp16"},
                    constexprs={"N": 1024, "K": 128}, num_warps=4)
    ptx = k.asm["ptx"]
    assert ptx.count("ld.shared.b16") == 1 and "cvt.u32.u64" in ptx  # 128 indices over 128 threads


# ---- bad inputs: the classes the real TLX raises -------------------------------------------------

@tlx.jit
def bad_gather(x_ptr, WHAT: tl.constexpr):
    buf = tlx.local_alloc((32, 32), tl.float32, 2)
    r = tl.arange(0, 32)
    i2 = r[:, None] + r[None, :]
    if WHAT == "axis":
        tlx.local_gather(buf[0], i2, axis=2)
    elif WHAT == "float_indices":
        tlx.local_gather(buf[0], i2.to(tl.float32), axis=0)
    elif WHAT == "rank":
        tlx.local_gather(buf[0], r, axis=0)
    elif WHAT == "too_wide":
        tlx.local_gather(buf[0], tl.join(i2, i2).reshape(32, 64), axis=0)
    elif WHAT == "array":
        tlx.local_gather(buf, i2[None, :, :], axis=0)
    elif WHAT == "scatter_dtype":
        tlx.local_scatter(buf[0], i2, i2, axis=1)
    elif WHAT == "scatter_shape":
        tlx.local_scatter(buf[0], r.to(tl.float32), i2, axis=1)


@pytest.mark.parametrize("what,cls,match", [
    ("axis", ValueError, "axis must be a dimension"),
    ("float_indices", TypeError, "indices must be an integer tensor"),
    ("rank", ValueError, "must have the rank of the buffer"),
    ("too_wide", ValueError, "exceed the buffer"),
    ("array", TLXCompileError, "whole buffer array"),
    ("scatter_dtype", TypeError, "int32 values into a fp32 buffer"),
    ("scatter_shape", ValueError, "differ in shape"),
])
def test_bad_gathers_and_scatters_are_refused_at_their_line(what, cls, match):
    with pytest.raises(cls, match=match) as e:
        tlx.compile(bad_gather, signature={"x_ptr": "*fp32"}, constexprs={"WHAT": what})
    assert isinstance(e.value, TLXCompileError) and e.value.loc is not None
    assert "local_gather" in open(e.value.loc.file).read().splitlines()[e.value.loc.line - 1] or \
           "local_scatter" in open(e.value.loc.file).read().splitlines()[e.value.loc.line - 1]

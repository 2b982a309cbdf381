"""Launch arguments on the interpreter (tlx/interpreter/arguments.py): numpy arrays and torch
tensors run on in place, views read and written through the strides the kernel receives, every
element outside a view left alone, aliasing and out-of-allocation accesses as on the GPU,
descriptors over tensors and views, scalars typed as the GPU launch types them.

Outputs are poisoned (NaN) first and compared with float64 references computed here from the
inputs' own values."""

from __future__ import annotations

import os

import numpy as np
import pytest

import catalog
import tlx
import tlx.language as tl
from interp_kernels import HostDesc
from tlx.interpreter import InterpreterError, run
from tlx.runtime.tma import TMARuleError
from tlx.signature import signature_to_types

try:
    import torch
except ImportError:  # the numpy tests still run; the torch ones skip
    torch = None

HERE = os.path.basename(__file__)
needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (a CPU build is enough)")


@tlx.jit
def affine_2d(x_ptr, y_ptr, M, N, sxm, sxn, sym, syn, alpha, BM: tl.constexpr, BN: tl.constexpr):
    """y = x * alpha + 1 over an M x N view, each operand addressed through its own strides."""
    m = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    n = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
    mask = (m < M) & (n < N)
    x = tl.load(x_ptr + m * sxm + n * sxn, mask=mask)
    tl.store(y_ptr + m * sym + n * syn, (x.to(tl.float32) * alpha + 1.0).to(y_ptr.dtype.element_ty), mask=mask)


@tlx.jit
def shifted_copy(x_ptr, y_ptr, src, dst, n, BLOCK: tl.constexpr):
    """y[dst + i] = x[src + i] for i < n: offsets relative to the pointers passed, any sign."""
    i = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + src + i, mask=i < n)
    tl.store(y_ptr + dst + i, v, mask=i < n)


@tlx.jit
def scaled_by_pointer(x_ptr, s_ptr, out_ptr, BLOCK: tl.constexpr):
    """out = x * s[0]: a 0-d tensor is a pointer, as in Triton."""
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i) * tl.load(s_ptr))


@tlx.jit
def store_scalar(out_ptr, v):
    tl.store(out_ptr, v)


def run_affine(x, y, alpha=0.75):
    """Run `affine_2d` over x's (M, N) view into y's, with strides read from each (elements)."""
    M, N = x.shape
    sx = x.stride() if hasattr(x, "stride") and callable(x.stride) else tuple(s // x.itemsize for s in x.strides)
    sy = y.stride() if hasattr(y, "stride") and callable(y.stride) else tuple(s // y.itemsize for s in y.strides)
    grid = (tlx.cdiv(M, 4), tlx.cdiv(N, 8))
    assert tlx.interpret(affine_2d, grid, x, y, M, N, *sx, *sy, alpha, BM=4, BN=8) == []


# ---------------------------------------------------------------------------------------------
# numpy
# ---------------------------------------------------------------------------------------------

NUMPY_VIEWS = {
    "contiguous": lambda a: a[:6, :10],
    "transposed": lambda a: a[:10, :6].T,
    "sliced": lambda a: a[1:13:2, 3:23:2],
    "reversed": lambda a: a[6:0:-1, 19:9:-1],
}


@pytest.mark.parametrize("out_view", ["contiguous", "transposed", "sliced", "reversed"])
@pytest.mark.parametrize("in_view", list(NUMPY_VIEWS))
@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_numpy_views_in_and_out(in_view, out_view, dt):
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((16, 24)).astype(dt)
    x = NUMPY_VIEWS[in_view](xs)
    if not x.flags.c_contiguous:
        assert x.base is not None  # a real view: the kernel must read it through its strides
    ys = np.full((16, 24), np.nan, dt)
    y = NUMPY_VIEWS[out_view](ys)
    assert x.shape == y.shape == (6, 10)
    run_affine(x, y)
    eps = float(np.finfo(dt).eps)
    np.testing.assert_allclose(y.astype(np.float64), x.astype(np.float64) * 0.75 + 1, rtol=eps, atol=eps)
    touched = np.zeros(ys.shape, bool)
    NUMPY_VIEWS[out_view](touched)[...] = True
    assert np.isnan(ys[~touched]).all()  # nothing written outside the view
    assert not np.isnan(ys[touched]).any()


def test_numpy_pointer_reaches_the_whole_allocation_and_no_further():
    t = np.arange(16, dtype=np.float32)
    out = np.full(8, np.nan, np.float32)
    tlx.interpret(shifted_copy, (1,), t[4:], out, -4, 0, 8, BLOCK=8)  # before the view, inside the array
    np.testing.assert_array_equal(out, np.arange(8))
    with pytest.raises(InterpreterError, match=rf"{HERE}:\d+.*out-of-bounds load"):
        tlx.interpret(shifted_copy, (1,), t[4:], out, -5, 0, 8, BLOCK=8)
    with pytest.raises(InterpreterError, match=rf"{HERE}:\d+.*out-of-bounds store"):
        tlx.interpret(shifted_copy, (1,), t, t[12:], 0, 0, 5, BLOCK=8)


def test_views_of_one_numpy_array_alias():
    t = np.arange(16, dtype=np.int32)
    tlx.interpret(shifted_copy, (1,), t[:8], t[8:], 0, 0, 8, BLOCK=8)  # y = the upper half of x's array
    np.testing.assert_array_equal(t, np.r_[np.arange(8), np.arange(8)])
    t = np.arange(16, dtype=np.int32)
    tlx.interpret(shifted_copy, (1,), t[8:], t[8:], -8, 0, 4, BLOCK=8)  # one allocation: x reaches t[0]
    np.testing.assert_array_equal(t[8:12], np.arange(4))


def test_read_only_arrays_are_read_and_never_written():
    x = np.arange(8, dtype=np.float32)
    x.setflags(write=False)
    out = np.full(8, np.nan, np.float32)
    tlx.interpret(shifted_copy, (1,), x, out, 0, 0, 8, BLOCK=8)
    np.testing.assert_array_equal(out, x)
    with pytest.raises(InterpreterError, match=rf"{HERE}:\d+.*store into argument 'y_ptr', whose memory is read-only"):
        tlx.interpret(shifted_copy, (1,), out, x, 0, 0, 8, BLOCK=8)
    np.testing.assert_array_equal(x, np.arange(8))


def test_scalars_are_typed_as_the_gpu_launch_types_them():
    out = np.full(1, np.nan, np.float64)
    tlx.interpret(store_scalar, (1,), out, np.float64(1 / 3))  # a numpy scalar keeps its type: fp64
    assert out[0] == 1 / 3
    out32 = np.full(1, np.nan, np.float32)
    tlx.interpret(store_scalar, (1,), out32, 1 / 3)  # a Python float is fp32
    assert out32[0] == np.float32(1 / 3)
    i64 = np.full(1, -1, np.int64)
    tlx.interpret(store_scalar, (1,), i64, 2 ** 40)  # beyond int32: i64
    assert i64[0] == 2 ** 40
    i32 = np.full(1, -1, np.int32)
    tlx.interpret(store_scalar, (1,), i32, np.int32(-7))
    assert i32[0] == -7


def test_bad_arrays_and_scalars_are_clear_errors():
    x = np.zeros(8, np.float32)
    with pytest.raises(InterpreterError, match="argument 'n': the kernel takes an integer"):
        tlx.interpret(shifted_copy, (1,), x, x, 0, 0, 2.5, BLOCK=8, signature={"n": "i32"})
    with pytest.raises(InterpreterError, match="argument 'y_ptr': expected an array, a tensor descriptor or a number"):
        tlx.interpret(shifted_copy, (1,), x, [0.0] * 8, 0, 0, 8, BLOCK=8)
    with pytest.raises(InterpreterError, match="argument 'y_ptr': expected an array"):  # a module typed already
        run(shifted_copy.trace(signature_to_types({"x_ptr": "*fp32", "y_ptr": "*fp32", "src": "i32", "dst": "i32",
                                                   "n": "i32"}), {"BLOCK": 8}), (1,), [x, [0.0] * 8, 0, 0, 8])
    with pytest.raises(InterpreterError, match="element type complex64 has no kernel type"):
        tlx.interpret(shifted_copy, (1,), np.zeros(8, np.complex64), x, 0, 0, 8, BLOCK=8)
    with pytest.raises(InterpreterError, match="argument 'n' is None"):
        tlx.interpret(shifted_copy, (1,), x, x, 0, 0, None, BLOCK=8)


# ---------------------------------------------------------------------------------------------
# torch CPU tensors
# ---------------------------------------------------------------------------------------------

TORCH_VIEWS = {
    "contiguous": lambda a: a[:6, :10],
    "transposed": lambda a: a[:10, :6].t(),
    "sliced": lambda a: a[1:13:2, 3:23:2],
}
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def tensor_with_nans(shape, dt):
    return torch.full(shape, float("nan"), dtype=dt)


@needs_torch
@pytest.mark.parametrize("out_view", list(TORCH_VIEWS))
@pytest.mark.parametrize("in_view", list(TORCH_VIEWS))
@pytest.mark.parametrize("dtype", list(EPS))
def test_torch_views_in_and_out_in_place(in_view, out_view, dtype):
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(5)
    xs = torch.randn((16, 24), generator=g).to(dt)
    x = TORCH_VIEWS[in_view](xs)
    ys = tensor_with_nans((16, 24), dt)
    y = TORCH_VIEWS[out_view](ys)
    before = ys.data_ptr()
    run_affine(x, y)
    assert ys.data_ptr() == before  # in place: the user's storage, not a copy
    ref = x.double().numpy() * 0.75 + 1
    eps = EPS[dtype]
    np.testing.assert_allclose(y.double().numpy(), ref, rtol=eps, atol=eps)
    touched = torch.zeros((16, 24), dtype=torch.bool)
    TORCH_VIEWS[out_view](touched)[...] = True
    assert torch.isnan(ys[~touched]).all() and not torch.isnan(ys[touched]).any()


@needs_torch
def test_torch_fp8_in_bf16_out():
    g = torch.Generator().manual_seed(6)
    for fp8 in (torch.float8_e4m3fn, torch.float8_e5m2):
        x = (torch.randn((8, 16), generator=g) * 4).to(fp8)
        y = tensor_with_nans((16, 8), torch.bfloat16).t()  # a transposed output
        run_affine(x, y, alpha=0.5)
        ref = x.double().numpy() * 0.5 + 1  # torch's own decoding of the fp8 bits
        np.testing.assert_allclose(y.double().numpy(), ref, rtol=2.0 ** -7, atol=2.0 ** -7)


@needs_torch
def test_torch_storage_is_the_allocation():
    t = torch.arange(16, dtype=torch.float32)
    out = torch.full((8,), float("nan"))
    tlx.interpret(shifted_copy, (1,), t[4:], out, -4, 0, 8, BLOCK=8)  # storage offset 4: t[0] is reachable
    assert torch.equal(out, torch.arange(8, dtype=torch.float32))
    with pytest.raises(InterpreterError, match=rf"{HERE}:\d+.*out-of-bounds load at .* argument 'x_ptr'"):
        tlx.interpret(shifted_copy, (1,), t[4:], out, 9, 0, 8, BLOCK=8)  # past the storage's 16 elements
    # a numpy view of a tensor lives in the tensor's storage: both arguments are one allocation
    t = torch.arange(16, dtype=torch.int32)
    tlx.interpret(shifted_copy, (1,), t, t.numpy()[8:], 0, -8, 4, BLOCK=8)
    assert t.tolist() == list(range(16))
    tlx.interpret(shifted_copy, (1,), t[12:], t.numpy()[8:], 0, -8, 4, BLOCK=8)
    assert t[:4].tolist() == [12, 13, 14, 15]


@needs_torch
def test_torch_scalars_and_zero_d_tensors():
    x = torch.arange(8, dtype=torch.float32)
    out = torch.full((8,), float("nan"))
    tlx.interpret(scaled_by_pointer, (1,), x, torch.tensor(2.5), out, BLOCK=8)
    assert torch.equal(out, x * 2.5)
    m = store_scalar.trace(signature_to_types({"out_ptr": "*fp32", "v": "fp32"}), {})
    with pytest.raises(InterpreterError, match="argument 'v': the kernel takes a f32 scalar here, not an array"):
        run(m, (1,), [out, torch.tensor(1.0)])


@needs_torch
def test_lazy_views_and_meta_tensors_are_refused():
    x = torch.arange(8, dtype=torch.float32)
    out = torch.zeros(8)
    with pytest.raises(InterpreterError, match="lazily conjugated or negated"):
        tlx.interpret(shifted_copy, (1,), torch._neg_view(x), out, 0, 0, 8, BLOCK=8)
    with pytest.raises(InterpreterError, match="meta device has no data"):
        tlx.interpret(shifted_copy, (1,), torch.empty(8, device="meta"), out, 0, 0, 8, BLOCK=8)


@needs_torch
def test_kernel_launch_with_interpret_runs_on_torch_tensors(monkeypatch):
    monkeypatch.setenv("TLX_INTERPRET", "1")
    xs = torch.randn((10, 6), generator=torch.Generator().manual_seed(7)).half()
    x = xs.t()
    y = tensor_with_nans((6, 10), torch.float16)
    affine_2d[(2, 2)](x, y, 6, 10, *x.stride(), *y.stride(), 2.0, BM=4, BN=8)
    np.testing.assert_allclose(y.double().numpy(), x.double().numpy() * 2 + 1, rtol=2.0 ** -10, atol=2.0 ** -10)


# ---------------------------------------------------------------------------------------------
# descriptors over torch tensors
# ---------------------------------------------------------------------------------------------

@needs_torch
def test_tensor_descriptors_over_torch_views_and_a_late_block_shape(monkeypatch):
    monkeypatch.setenv("TLX_INTERPRET", "1")
    g = torch.Generator().manual_seed(8)
    big = torch.randn((256, 96), generator=g).half()
    x = big[64:192, 16:80]  # rows 64.., columns 16..: 32-byte aligned start, row pitch 192 bytes
    ys = tensor_with_nans((128, 128), torch.float16)
    y = ys[:, 64:]
    xd = tlx.TensorDescriptor(x, shape=list(x.shape), strides=list(x.stride()), block_shape=[32, 32])
    yd = tlx.TensorDescriptor.from_tensor(y)
    xd.block_shape = [64, 64]  # what a tutorial's autotune pre_hook does
    yd.block_shape = [64, 64]
    catalog.tma_store_fenced[(2,)](xd, yd, BLOCK=64)
    np.testing.assert_allclose(y.double().numpy(), x.double().numpy() + 1, rtol=2.0 ** -10, atol=2.0 ** -10)
    assert torch.isnan(ys[:, :64]).all()


@needs_torch
def test_descriptors_the_gpu_refuses_are_refused():
    x = torch.zeros((128, 64), dtype=torch.float16)
    y = torch.zeros((128, 64), dtype=torch.float16)
    with pytest.raises(TMARuleError, match="inner-stride"):
        tlx.interpret(catalog.tma_store_fenced, (2,), HostDesc(x.t(), (64, 128), (1, 64), (64, 64)),
                      HostDesc(y, (128, 64), (64, 1), (64, 64)), BLOCK=64)
    odd = torch.zeros((129, 64), dtype=torch.float16)[1:]  # starts 128 bytes in: aligned
    tlx.interpret(catalog.tma_store_fenced, (2,), HostDesc(odd, (128, 64), (64, 1), (64, 64)),
                  HostDesc(y, (128, 64), (64, 1), (64, 64)), BLOCK=64)
    shifted = torch.zeros(128 * 64 + 1, dtype=torch.float16)[1:].view(128, 64)  # starts 2 bytes in
    with pytest.raises(TMARuleError, match="base-align"):
        tlx.interpret(catalog.tma_store_fenced, (2,), HostDesc(shifted, (128, 64), (64, 1), (64, 64)),
                      HostDesc(y, (128, 64), (64, 1), (64, 64)), BLOCK=64)
    with pytest.raises(TMARuleError, match="extent"):
        tlx.interpret(catalog.tma_store_fenced, (2,), HostDesc(x[64:], (128, 64), (64, 1), (64, 64)),
                      HostDesc(y, (128, 64), (64, 1), (64, 64)), BLOCK=64)


@pytest.mark.parametrize("lib", ["numpy", pytest.param("torch", marks=needs_torch)])
def test_flash_attention_on_views(lib, monkeypatch):
    """The catalogue's warp-specialized flash-attention forward (TMA producer, two consumer
    warpgroups, online softmax) through `kernel[grid]` with TLX_INTERPRET=1, on
    `tlx.TensorDescriptor`s over q / k / v column slices of one packed qkv array, at a small shape."""
    monkeypatch.setenv("TLX_INTERPRET", "1")
    heads, n_ctx, d = 2, 128, 64
    qkv64 = np.random.default_rng(9).standard_normal((heads * n_ctx, 3 * d)) / 2
    if lib == "torch":
        qkv = torch.from_numpy(qkv64).half()
        o = tensor_with_nans((heads * n_ctx, d), torch.float16)
    else:
        qkv = qkv64.astype(np.float16)
        o = np.full((heads * n_ctx, d), np.nan, np.float16)
    q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]

    def desc(t, rows):
        strides = t.stride() if lib == "torch" else [s // 2 for s in t.strides]
        return tlx.TensorDescriptor(t, shape=list(t.shape), strides=list(strides), block_shape=[rows, d])
    fa = catalog.CASES_BY_NAME["tlx_fa_fwd"].fn
    fa[(1, heads)](desc(q, 64), desc(k, 64), desc(v, 64), desc(o, 64), 0.5, n_ctx,
                   HEAD_DIM=d, BLOCK_M=128, BLOCK_N=64, SLOTS=2, GROUPS=2)
    q64, k64, v64, got = (np.asarray(x, dtype=np.float64) if lib == "numpy" else x.double().numpy()
                          for x in (q, k, v, o))
    for h in range(heads):
        s = slice(h * n_ctx, (h + 1) * n_ctx)
        z = 0.5 * q64[s] @ k64[s].T
        p = np.exp(z - z.max(1, keepdims=True))
        ref = (p / p.sum(1, keepdims=True)) @ v64[s]
        err = np.abs(got[s] - ref).max() / np.abs(ref).max()
        assert err < 1e-2, err  # P is rounded to fp16 for P @ V


# ---------------------------------------------------------------------------------------------
# device arrays
# ---------------------------------------------------------------------------------------------

class FakeNumbaArray:
    """A device array as numba exports one: CAI (never dereferenced) and copy_to_host /
    copy_to_device over a host buffer standing for device memory."""

    def __init__(self, mem: np.ndarray, start: int, n: int, ptr: int = 0x7000_0000, step: int = 1):
        self.mem, self.start, self.n, self.step = mem, start, n, step
        isz = mem.itemsize
        self.__cuda_array_interface__ = {"data": (ptr + start * isz, False), "shape": (n,), "typestr": mem.dtype.str,
                                         "strides": (step * isz,), "version": 3}
        self.dtype = mem.dtype

    def copy_to_host(self):
        return self.mem[self.start:self.start + self.n * self.step:self.step].copy()

    def copy_to_device(self, host):
        self.mem[self.start:self.start + self.n * self.step:self.step] = host


def test_numba_style_device_arrays_are_staged_and_overlaps_refused():
    mem = np.arange(16, dtype=np.float32)
    a, b = FakeNumbaArray(mem, 0, 8), FakeNumbaArray(mem, 8, 8)
    tlx.interpret(shifted_copy, (1,), a, b, 0, 0, 8, BLOCK=8)
    np.testing.assert_array_equal(mem, np.r_[np.arange(8), np.arange(8)])
    with pytest.raises(InterpreterError, match="'x_ptr' and 'y_ptr' overlap in device memory"):
        tlx.interpret(shifted_copy, (1,), FakeNumbaArray(mem, 0, 8), FakeNumbaArray(mem, 4, 8), 0, 0, 8, BLOCK=8)
    with pytest.raises(InterpreterError, match="non-contiguous"):
        tlx.interpret(shifted_copy, (1,), FakeNumbaArray(mem, 0, 8, step=2), b, 0, 0, 8, BLOCK=8)


@needs_torch
@pytest.mark.gpu
def test_cuda_tensors_are_copied_to_the_host_and_back_per_storage():
    t = torch.arange(16, dtype=torch.float32, device="cuda")
    tlx.interpret(shifted_copy, (1,), t[8:], t[:8], -8, 8, 4, BLOCK=8)  # one storage, one host copy
    assert t.cpu().tolist()[8:12] == [0.0, 1.0, 2.0, 3.0]
    x = torch.randn((10, 6), device="cuda").t()
    y = torch.full((6, 10), float("nan"), device="cuda")
    run_affine(x, y)
    torch.testing.assert_close(y, x * 0.75 + 1)

"""`kernel[grid](...)` without a GPU: the kernels are really traced and compiled, only the
driver's cuLaunchKernelEx is replaced by a recorder of what it receives (grid, block, stream,
each parameter's bytes). Every test runs through the native launch (runtime/native_launch.c,
the recorder behind it as a C function pointer) and through the cuda.bindings fallback
(``TLX_NATIVE_LAUNCH=0``): specialization (pointer alignment, dtype, int range, == 1,
constexprs, options), packing, streams, grids, errors, threads and TLX_INTERPRET."""

import itertools
import struct
import sys
import threading
import traceback
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tlx
import tlx.language as tl
from runtime_fakes import CAIArray, DriverRecorder, Tensor, TorchStream
from tlx.compiler.errors import TLXCompileError
from tlx.runtime import driver, host_copy, native_launch, streams
from tlx.runtime.errors import TLXRuntimeError
from tlx.runtime.launcher import Launcher
from tlx.runtime.loader import LoadedKernel

_HANDLES = itertools.count(0x10_0000, 0x100)
MODES = ["native launch", "cuda.bindings"]


def no_bindings_call(*args):
    raise AssertionError("cuda.bindings' cuLaunchKernelEx called with the native launch in use")


@pytest.fixture(params=MODES)
def launches(request, monkeypatch, tmp_path, tmp_path_factory):
    """The recorded launches, through the native launch or the cuda.bindings fallback."""
    return record_launches(request.param, monkeypatch, tmp_path, tmp_path_factory)


def record_launches(mode, monkeypatch, tmp_path, tmp_path_factory):
    """Fake loading and the driver call (`mode`: one of MODES) and return the recorder."""
    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TLX_INTERPRET", raising=False)
    rec = DriverRecorder()
    native = None
    if mode == "native launch":
        missing = native_launch.missing_prerequisite()
        if missing is not None:  # a build failure for any other reason is an error, not a skip
            pytest.skip(f"the native module cannot be built here: {missing}")
        module = native_launch.load_module(tmp_path_factory.getbasetemp() / "native")
        module.set_entry(rec.native_address)
        native = module.launch

    def fake_load(self):
        if self.loaded is None:
            handle = next(_HANDLES)
            rec.register(handle, self.abi)
            self.install(LoadedKernel(self.name, None, None, handle, 0, 0, 0), native,
                         no_bindings_call if native is not None else rec.bindings)
        return self.loaded

    monkeypatch.setattr(Launcher, "load", fake_load)
    monkeypatch.setattr("tlx.launch.current_context", lambda kernel=None: None)
    monkeypatch.setattr(driver, "current_context", lambda kernel=None: None)
    rec.mode = mode
    return rec


def fake_torch(monkeypatch, current_stream):
    """A `torch` module in sys.modules whose current stream is `current_stream[0]`, and whose
    Tensor class is runtime_fakes.Tensor (so the launch path sees those tensors as torch's)."""
    mod = types.ModuleType("torch")
    mod.Tensor = Tensor
    mod._C = types.SimpleNamespace(_cuda_getDevice=lambda: 0,
                                   _cuda_getCurrentRawStream=lambda device: current_stream[0])
    monkeypatch.setitem(sys.modules, "torch", mod)
    monkeypatch.setattr(streams, "_TORCH_STREAM", None)


def make_scale():
    """A fresh kernel (its own specialization caches) for each test."""

    @tlx.jit
    def scale(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)

    return scale


def func_attrs(compiled):
    return next(line for line in compiled.asm["ir"].splitlines() if "tt.func" in line)


def Q(v):
    return struct.pack("<Q", v)


@pytest.fixture(params=["plain", "torch imported"])
def torch_mode(request, monkeypatch):
    """Each test runs without torch and with a (fake) torch imported: torch tensors are read
    on the key's inline path only when they are torch's."""
    if request.param == "torch imported":
        fake_torch(monkeypatch, [0])
    return request.param


def test_launch_packs_arguments_grid_and_block(launches, torch_mode):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    k1 = scale[(4,)](x, out, 1000, 2.0, BLOCK=256)
    call = launches.calls[-1]
    assert call["grid"] == (4, 1, 1) and call["block"] == 128 and call["stream"] == 0 and call["cluster_attr"] is None
    assert call["params"] == [Q(0x10000), Q(0x20000), struct.pack("<i", 1000), struct.pack("<f", 2.0)]
    assert "divisibility = [16, 16, 1, 1]" in func_attrs(k1) and "equal_to_one" not in func_attrs(k1)
    # same specialization, new values: nothing recompiled, nothing looked up again
    misses = scale.launch_path.misses
    y, out2 = Tensor(0x30000, (1024,)), Tensor(0x40000, (1024,))
    k2 = scale[(2, 3)](y, out2, 1032, -0.5, BLOCK=256)
    call = launches.calls[-1]
    assert k2 is k1 and call["grid"] == (2, 3, 1) and scale.launch_path.misses == misses
    assert call["params"] == [Q(0x30000), Q(0x40000), struct.pack("<i", 1032), struct.pack("<f", -0.5)]
    # keywords for runtime parameters, positional constexprs
    k3 = scale[(1,)](x_ptr=x, out_ptr=out, n=5, alpha=1.5, BLOCK=256)
    k4 = scale[(1,)](x, out, 5, 1.5, 256)
    assert k3 is k1 and k4 is k1
    assert launches.calls[-1]["params"] == launches.calls[-2]["params"] == [
        Q(0x10000), Q(0x20000), struct.pack("<i", 5), struct.pack("<f", 1.5)]
    assert len(launches.calls) == 4


def test_repeated_calls_of_each_shape_are_found_without_binding(launches, torch_mode):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    g = (2,)
    k = scale[g](x, out, 64, 1.0, BLOCK=64)
    k_pos = scale[g](x, out, 64, 1.0, 64)  # a positional constexpr: another call shape, one miss
    misses = scale.launch_path.misses
    launch = scale[g]
    assert scale[g] is launch  # the same grid object, the same launch function
    for i in range(5):
        assert launch(Tensor(0x30000 + 0x100 * i, (64,)), out, 64 + 16 * i, 0.5 * i, BLOCK=64) is k
        assert launches.calls[-1]["params"][0] == Q(0x30000 + 0x100 * i)
        assert launches.calls[-1]["params"][2:] == [struct.pack("<i", 64 + 16 * i), struct.pack("<f", 0.5 * i)]
        assert launch(x, out, 80, 2.0, 64) is k_pos is k
    assert scale.launch_path.misses == misses
    # runtime arguments by keyword are bound every time: correct, not looked up
    assert scale[g](x_ptr=x, out_ptr=out, n=96, alpha=1.0, BLOCK=64) is k
    assert scale.launch_path.misses == misses + 1
    assert launches.calls[-1]["params"][2] == struct.pack("<i", 96)


def test_specializes_on_alignment_dtype_int_range_and_one(launches, torch_mode):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    base = scale[(1,)](x, out, 1024, 2.0, BLOCK=256)
    assert "divisibility = [16, 16, 16, 1]" in func_attrs(base)
    unaligned = scale[(1,)](Tensor(0x10004, (1024,)), out, 1024, 2.0, BLOCK=256)
    assert unaligned is not base and "divisibility = [1, 16, 16, 1]" in func_attrs(unaligned)
    assert launches.calls[-1]["params"][0] == Q(0x10004)
    half = scale[(1,)](Tensor(0x10000, (1024,), "float16"), Tensor(0x20000, (1024,), "float16"), 1024, 2.0,
                       BLOCK=256)
    assert half not in (base, unaligned) and [p.dtype for p in half.abi.params[:2]] == ["fp16", "fp16"]
    one = scale[(1,)](x, out, 1, 2.0, BLOCK=256)
    assert 'equal_to_one = ["n"]' in func_attrs(one) and one is not base
    assert launches.calls[-1]["params"][2] == struct.pack("<i", 1)
    odd = scale[(1,)](x, out, 1023, 2.0, BLOCK=256)
    assert odd not in (base, one) and "divisibility = [16, 16, 1, 1]" in func_attrs(odd)
    assert "equal_to_one" not in func_attrs(odd)
    assert scale[(1,)](x, out, 3, 2.0, BLOCK=256) is odd and scale[(1,)](x, out, 1, 2.0, BLOCK=256) is one
    wide = scale[(1,)](x, out, 2 ** 40, 2.0, BLOCK=256)
    assert wide.abi.params[2].dtype == "i64" and launches.calls[-1]["params"][2] == struct.pack("<q", 2 ** 40)
    negative_wide = scale[(1,)](x, out, -2 ** 40 - 1, 2.0, BLOCK=256)
    assert negative_wide.abi.params[2].dtype == "i64" and negative_wide is not wide
    unsigned = scale[(1,)](x, out, 2 ** 63 + 16, 2.0, BLOCK=256)
    assert unsigned.abi.params[2].dtype == "u64"
    assert launches.calls[-1]["params"][2] == struct.pack("<Q", 2 ** 63 + 16)
    assert scale[(1,)](x, out, 2 ** 64 - 16, 2.0, BLOCK=256) is unsigned
    assert launches.calls[-1]["params"][2] == struct.pack("<Q", 2 ** 64 - 16)
    int_alpha = scale[(1,)](x, out, 1024, 3, BLOCK=256)  # an int where a float was: i32, not fp32
    assert int_alpha.abi.params[3].dtype == "i32" and launches.calls[-1]["params"][3] == struct.pack("<i", 3)
    bool_alpha = scale[(1,)](x, out, 1024, True, BLOCK=256)  # True is i1, never "== 1"
    assert bool_alpha.abi.params[3].dtype == "i1" and "equal_to_one" not in func_attrs(bool_alpha)
    np_alpha = scale[(1,)](x, out, 1024, np.float16(0.5), BLOCK=256)
    assert np_alpha.abi.params[3].dtype == "fp16"
    assert launches.calls[-1]["params"][3] == np.float16(0.5).tobytes()
    cai = scale[(1,)](CAIArray(0x50000, (1024,), "<f4"), out, 1024, 2.0, BLOCK=256)
    assert cai is base and launches.calls[-1]["params"][0] == Q(0x50000)
    block = scale[(1,)](x, out, 1024, 2.0, BLOCK=128)
    assert block is not base and block.abi.num_warps == 4
    warps = scale[(1,)](x, out, 1024, 2.0, BLOCK=256, num_warps=8)
    assert warps is not base and warps.abi.threads_per_cta == 256 and launches.calls[-1]["block"] == 256
    # every specialization is found again, none recompiled
    assert scale[(1,)](x, out, 1024, 2.0, BLOCK=256) is base
    assert scale[(1,)](x, out, 1, 2.0, BLOCK=256) is one
    assert scale[(1,)](x, out, 2 ** 40, 2.0, BLOCK=256) is wide
    assert scale[(1,)](x, out, 1024, 2.0, BLOCK=256, num_warps=8) is warps
    assert scale[(1,)](Tensor(0x10008, (1024,)), out, 1024, 2.0, BLOCK=256) is unaligned
    assert scale[(1,)](x, out, 1024, -7, BLOCK=256) is int_alpha
    assert launches.calls[-1]["params"][3] == struct.pack("<i", -7)


def test_streams_are_honoured(launches, monkeypatch):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert launches.calls[-1]["stream"] == 0  # no torch imported: the legacy default stream
    scale[(1,)](x, out, 64, 1.0, BLOCK=64, stream=TorchStream(0xABC))
    assert launches.calls[-1]["stream"] == 0xABC
    scale[(1,)](x, out, 64, 1.0, BLOCK=64, stream=0x55)
    assert launches.calls[-1]["stream"] == 0x55
    with pytest.raises(TLXRuntimeError, match="negative"):
        scale[(1,)](x, out, 64, 1.0, BLOCK=64, stream=-1)
    current = [0x77]
    fake_torch(monkeypatch, current)  # torch imported after the first launch
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert launches.calls[-1]["stream"] == 0x77
    current[0] = 0x88  # `with torch.cuda.stream(s):` changes torch's current stream
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert launches.calls[-1]["stream"] == 0x88
    scale[(1,)](x, out, 64, 1.0, BLOCK=64, stream=0x99)
    assert launches.calls[-1]["stream"] == 0x99
    fresh = make_scale()  # a kernel first launched while torch is imported
    fresh[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert launches.calls[-1]["stream"] == 0x88
    current[0] = 0
    fresh[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert launches.calls[-1]["stream"] == 0


def test_producer_streams_of_cai_arrays_are_waited_for(launches, monkeypatch):
    waits = []
    monkeypatch.setattr("tlx.runtime.arrays._wait_for_producer", lambda producer, stream: waits.append((producer, stream)))
    scale = make_scale()
    for _ in range(2):  # the first launch and a repeated one
        scale[(1,)](CAIArray(0x10000, (64,), "<f4", stream=0x42), Tensor(0x20000, (64,)), 64, 1.0, BLOCK=64,
                    stream=0x55)
        assert waits[-1] == (0x42, 0x55)
    assert launches.calls[-1]["params"][0] == Q(0x10000)


def test_grids(launches, torch_mode):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (tlx.cdiv(meta["n"], meta["BLOCK"]),)

    scale[grid](x, out, 1000, 2.0, BLOCK=256)
    assert launches.calls[-1]["grid"] == (4, 1, 1)
    assert seen == [{"x_ptr": x, "out_ptr": out, "n": 1000, "alpha": 2.0, "BLOCK": 256}]
    scale[grid](x, out, 100, 2.0, BLOCK=64)
    assert launches.calls[-1]["grid"] == (2, 1, 1)
    scale[grid](x, out, 1000, 2.0, BLOCK=64)  # a repeated call: the callable sees its arguments
    assert launches.calls[-1]["grid"] == (16, 1, 1) and seen[-1]["n"] == 1000
    g = (5, 2)
    launch = scale[g]
    launch(x, out, 100, 2.0, BLOCK=64)
    launch(x, out, 100, 2.0, BLOCK=64)
    assert [c["grid"] for c in launches.calls[-2:]] == [(5, 2, 1)] * 2
    scale[7](x, out, 100, 2.0, BLOCK=64)
    assert launches.calls[-1]["grid"] == (7, 1, 1)
    as_list = [3]
    scale[as_list](x, out, 100, 2.0, BLOCK=64)
    as_list[0] = 6  # a list is read at every launch
    scale[as_list](x, out, 100, 2.0, BLOCK=64)
    assert [c["grid"] for c in launches.calls[-2:]] == [(3, 1, 1), (6, 1, 1)]
    n = len(launches.calls)
    scale[(0,)](x, out, 100, 2.0, BLOCK=64)  # an empty grid launches nothing
    scale[(3, 0)](x, out, 100, 2.0, BLOCK=64)
    assert len(launches.calls) == n
    with pytest.raises(TLXRuntimeError, match="grid"):
        scale[("a",)](x, out, 100, 2.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match="grid"):
        scale[(1, 1, 1, 1)](x, out, 100, 2.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match="outside"):
        scale[(1, 70000)](x, out, 100, 2.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match="outside"):
        scale[(-1,)](x, out, 100, 2.0, BLOCK=64)
    scale[(1,)](x, out, 100, 2.0, BLOCK=64)
    assert launches.calls[-1]["grid"] == (1, 1, 1)


def test_bad_calls_after_a_launch_are_clear_errors(launches, torch_mode):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    with pytest.raises(TLXCompileError, match="bad launch of kernel scale: missing a required argument: 'n'"):
        scale[(1,)](x, out)
    with pytest.raises(TLXCompileError, match="bad launch of kernel scale: too many positional"):
        scale[(1,)](x, out, 64, 1.0, 64, 5)
    with pytest.raises(TLXCompileError, match="bad launch of kernel scale: got an unexpected keyword argument 'nope'"):
        scale[(1,)](x, out, 64, 1.0, BLOCK=64, nope=1)
    with pytest.raises(TLXCompileError, match="bad launch of kernel scale: multiple values for argument 'x_ptr'"):
        scale[(1,)](x, out, 64, 1.0, BLOCK=64, x_ptr=x)
    with pytest.raises(TLXCompileError, match="bad launch of kernel scale: missing a required argument: 'x_ptr'"):
        scale[(1,)](out_ptr=out, n=64, alpha=1.0, BLOCK=64)
    with pytest.raises(TLXCompileError, match="bad launch of kernel scale: missing a required argument: 'BLOCK'"):
        scale[(1,)](x, out, 64, 1.0, num_warps=8)
    with pytest.raises(TLXCompileError, match="argument 'n' is None"):
        scale[(1,)](x, out, None, 1.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match="host array"):
        scale[(1,)](np.zeros(4, np.float32), out, 64, 1.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match="does not fit in 64 bits"):
        scale[(1,)](x, out, 2 ** 70, 1.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match="torch tensor on 'cpu'"):
        scale[(1,)](Tensor(0x10000, (4,), cuda=False), out, 64, 1.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match="torch dtype torch.complex64 has no kernel type"):
        scale[(1,)](Tensor(0x10000, (4,), "complex64"), out, 64, 1.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match="cannot pass object"):
        scale[(1,)](object(), out, 64, 1.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match=r"parameter 'alpha' \(fp32\).*out of range"):
        scale[(1,)](x, out, 64, 1e300, BLOCK=64)  # a float key, a value fp32 cannot hold
    n = len(launches.calls)
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)  # the kernel still launches
    assert len(launches.calls) == n + 1


def test_a_bad_argument_is_one_error_not_a_chain(launches, torch_mode):
    """The fast paths hand a call they cannot take to the general path (or the launcher) after
    their `except` blocks: its error is reported once, not chained under a KeyError, a TypeError
    or the fast path's own error ("During handling of the above exception...")."""
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    bad_calls = [((np.zeros(4, np.float32), out, 64, 1.0), TLXRuntimeError),  # key_of refuses it
                 ((object(), out, 64, 1.0), TLXRuntimeError),
                 ((x, out, 2 ** 70, 1.0), TLXRuntimeError),
                 ((Tensor(0x10000, (4,), cuda=False), out, 64, 1.0), TLXRuntimeError),
                 ((x, out, 64, 1e300), TLXRuntimeError),  # keyed, then refused by the native packer
                 ((x, out, None, 1.0), TLXCompileError)]
    for first in (True, False):  # the kernel's first call (no key yet), and after a launch
        for args, error in bad_calls:
            scale = make_scale()
            if not first:
                scale[(1,)](x, out, 64, 1.0, BLOCK=64)
                scale[(1,)](x, out, 64, 2.0, BLOCK=64)  # a float key cached: 1e300 takes the keyed path
            with pytest.raises(error) as info:
                scale[(1,)](*args, BLOCK=64)
            text = "".join(traceback.format_exception(info.value))
            assert "During handling of the above exception" not in text, text
            assert "direct cause" not in text, text


def test_pinned_tensors_and_host_copies(launches, torch_mode, monkeypatch):
    staged = []  # the copying launch needs a driver: record what the launcher would copy in
    monkeypatch.setattr(Launcher, "_stage", lambda self, host, s, done: staged.append(host) or 0x7700)
    monkeypatch.setattr(Launcher, "_finish_staging", lambda self, done, s: None)
    scale = make_scale()
    out = Tensor(0x20000, (64,))
    scale[(1,)](Tensor(0x10000, (64,), cuda=False, pinned=True), out, 64, 1.0, BLOCK=64)
    assert launches.calls[-1]["params"][0] == Q(0x10000)
    hc = host_copy(np.zeros(64, np.float32))
    for _ in range(2):
        scale[(1,)](hc, out, 64, 1.0, BLOCK=64)
        assert staged[-1] is hc and launches.calls[-1]["params"][0] == Q(0x7700)


def test_defaults_constexpr_values_and_unhashable_constexprs(launches, torch_mode):
    @tlx.jit
    def fill(out_ptr, value, n=256, BLOCK: tl.constexpr = 128, SHAPE: tl.constexpr = (2, 3)):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, value, mask=offs < n * SHAPE[0])

    out = Tensor(0x20000, (1024,))
    k = fill[(1,)](out, 1.5)
    assert launches.calls[-1]["params"] == [Q(0x20000), struct.pack("<f", 1.5), struct.pack("<i", 256)]
    assert fill[(1,)](out, 2.5) is k  # the default n comes with the repeated call too
    assert launches.calls[-1]["params"] == [Q(0x20000), struct.pack("<f", 2.5), struct.pack("<i", 256)]
    assert fill[(1,)](out, 2.5, 256, 128) is k
    listed = fill[(1,)](out, 1.5, SHAPE=[2, 3])  # a list constexpr: no call key, still right
    assert fill[(1,)](out, 1.5, SHAPE=[2, 3]) is listed
    other = fill[(1,)](out, 1.5, SHAPE=(4, 3))
    assert other is not k
    assert fill[(1,)](out, 1.5, BLOCK=tl.constexpr(128)) is k
    assert fill[(1,)](out, 1.5, 64) is k  # n given: the same specialization (64 % 16 == 0), n packed
    assert launches.calls[-1]["params"][2] == struct.pack("<i", 64)


def test_constexprs_of_another_type_are_another_specialization(launches):
    @tlx.jit
    def typed(out_ptr, V: tl.constexpr):
        tl.store(out_ptr + tl.arange(0, 16), tl.full((16,), V, tl.float32))

    out = Tensor(0x20000, (16,))
    as_int = typed[(1,)](out, V=1)
    as_float = typed[(1,)](out, V=1.0)
    assert as_float is not as_int  # 1 == 1.0, but they trace differently
    assert typed[(1,)](out, V=1) is as_int and typed[(1,)](out, V=1.0) is as_float


def test_interpret_set_after_a_fast_launch(launches, torch_mode, monkeypatch):
    @tlx.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    g = (2,)
    add[g](Tensor(0x10000, (128,)), Tensor(0x20000, (128,)), Tensor(0x30000, (128,)), 128, BLOCK=64)
    misses = add.launch_path.misses
    add[g](Tensor(0x10000, (128,)), Tensor(0x20000, (128,)), Tensor(0x30000, (128,)), 128, BLOCK=64)
    assert len(launches.calls) == 2 and add.launch_path.misses == misses  # the repeated launch's path
    monkeypatch.setenv("TLX_INTERPRET", "1")
    rng = np.random.default_rng()
    x, y = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    out = np.full(100, np.nan, np.float32)
    add[g](x, y, out, 100, BLOCK=64)
    np.testing.assert_allclose(out.astype(np.float64), x.astype(np.float64) + y, rtol=1e-6)
    assert len(launches.calls) == 2  # the interpreter ran it, not the GPU path
    monkeypatch.setenv("TLX_INTERPRET", "0")
    add[g](Tensor(0x10000, (128,)), Tensor(0x20000, (128,)), Tensor(0x30000, (128,)), 128, BLOCK=64)
    assert len(launches.calls) == 3


def test_parameter_names_never_clash_with_the_launch_path(launches, torch_mode):
    """Parameters named like the launch path's own variables (the stream `s`, `grid`, `key`...)
    get their own values."""

    @tlx.jit
    def clash(grid, s, key, specs, spec, values, compiled, bind, Tensor, v0, k0, d0, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(grid + offs * s, 1.0 * key + specs + spec + values + compiled + bind + v0 + k0 + d0)

    args = [Tensor(0x10000, (64,)), 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37]
    for _ in range(2):
        clash[(2,)](*args, BLOCK=64, stream=0x55)
        call = launches.calls[-1]
        assert call["grid"] == (2, 1, 1) and call["stream"] == 0x55
        assert call["params"][0] == Q(0x10000)
        assert call["params"][1:] == [struct.pack("<i", v) for v in args[1:]]
    clash[lambda meta: (meta["s"],)](*args, BLOCK=64)
    assert launches.calls[-1]["grid"] == (3, 1, 1)

    @tlx.jit
    def named_stream(out_ptr, stream, num_warps):  # parameters named like launch options are parameters
        tl.store(out_ptr + tl.arange(0, 16), tl.full((16,), stream + num_warps, tl.int32))

    for _ in range(2):
        k = named_stream[(1,)](Tensor(0x20000, (16,), "int32"), stream=5, num_warps=7)
        assert launches.calls[-1]["stream"] == 0 and launches.calls[-1]["block"] == 128
        assert launches.calls[-1]["params"][1:] == [struct.pack("<i", 5), struct.pack("<i", 7)]
    assert k.metadata.num_warps == 4


def test_threads_launch_their_own_arguments(launches, torch_mode):
    """Four threads launch one kernel at once, each with its own tensors, n and grid: every
    recorded launch carries one thread's values, never a mix."""
    scale = make_scale()
    out = Tensor(0x20000, (4096,))
    scale[(1,)](Tensor(0x10000, (64,)), out, 64, 1.0, BLOCK=64)
    together = threading.Barrier(4)
    errors = []

    def work(t):
        try:
            together.wait()
            for i in range(50):
                n = 16 * (t + 1)  # the same specialization (aligned, i32), one value per thread
                scale[(t + 1,)](Tensor(0x100000 * (t + 1) + 0x100 * i, (64,)), out, n, float(t), BLOCK=64)
        except Exception as exc:  # reported from the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    calls = launches.calls[1:]
    assert len(calls) == 200
    for c in calls:
        t = c["grid"][0] - 1
        ptr = struct.unpack("<Q", c["params"][0])[0]
        assert ptr // 0x100000 == t + 1 and c["params"][2:] == [struct.pack("<i", 16 * (t + 1)), struct.pack("<f", float(t))]
    assert scale.launch_path.misses == 1


_VALUES = st.one_of(
    st.builds(lambda a, d: Tensor(0x10000 + a, (64,), d), st.sampled_from([0, 4, 16, 48]),
              st.sampled_from(["float32", "float16", "int32"])),
    st.integers(-2 ** 63, 2 ** 64 - 1), st.floats(-1e30, 1e30, allow_nan=False), st.booleans(),
    st.builds(np.float16, st.floats(-100, 100)), st.builds(np.int8, st.integers(-128, 127)))


@pytest.fixture(scope="module")
def agreeing_kernel():
    @tlx.jit
    def pack4(a, b, c, d):
        pass

    return pack4


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(_VALUES, _VALUES, _VALUES, _VALUES), min_size=1, max_size=4))
def test_native_launch_and_the_python_packer_agree(agreeing_kernel, monkeypatch, tmp_path, tmp_path_factory, calls):
    """The same calls through both launch paths: the same specializations, the same bytes."""
    got = {}
    for mode in MODES:
        with monkeypatch.context() as m:
            rec = record_launches(mode, m, tmp_path / mode.replace(" ", "_"), tmp_path_factory)
            fake_torch(m, [0])
            k = tlx.jit(agreeing_kernel.fn)
            for args in calls:
                k[(1,)](*args)
                k[(1,)](*args)
            got[mode] = [(c["grid"], c["block"], c["params"]) for c in rec.calls]
    assert got["native launch"] == got["cuda.bindings"]


def test_kernel_object_surface_without_a_gpu(launches):
    scale = make_scale()
    x, out = np.zeros(1024, np.float32), np.zeros(1024, np.float32)
    # warmup: compile only, from host arrays standing for device arrays of their dtype
    k = scale.warmup(x, out, 1024, 2.0, BLOCK=256, grid=(4,))
    assert launches.calls == []
    assert isinstance(k, tlx.CompiledKernel) and ".entry scale" in k.asm["ptx"] and "ir.cta_barriers" in k.asm
    assert k.metadata.num_warps == 4 and k.metadata.num_ctas == 1 and k.metadata.cluster_dims == (1, 1, 1)
    assert k.metadata.name == "scale" and k.metadata.shared == k.abi.shared_bytes and k.metadata.threads == 128
    assert k.metadata["num_warps"] == 4 and dict(k.metadata)["target"] == "sm_90a"
    with pytest.raises(KeyError):
        k.metadata["keys"]
    assert scale.warmup(x, out, 1024, 2.0, BLOCK=256) is k  # found again, not recompiled
    assert scale.warmup(x, out, 1024, 2.0, BLOCK=256, num_warps=8).metadata.num_warps == 8
    # a launch of the same specialization uses the warmed-up kernel
    xt, outt = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    assert scale[(4,)](xt, outt, 1024, 2.0, BLOCK=256) is k
    assert scale.run(xt, outt, 1024, 2.0, grid=(2,), BLOCK=256) is k and launches.calls[-1]["grid"] == (2, 1, 1)
    assert scale.run(xt, outt, 1024, 2.0, grid=(2,), warmup=True, BLOCK=256) is k and len(launches.calls) == 2
    # cache_key: the source's digest, and its helpers'
    assert scale.cache_key == make_scale().cache_key and len(scale.cache_key) == 64

    @tlx.jit
    def other(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        pass

    assert other.cache_key != scale.cache_key


# -- the guard: a repeated call is matched in C against the last specializations' arguments ----

def make_takes_anything():
    """A kernel whose body compiles for any argument types, so that every kind of argument can
    be passed in every position."""

    @tlx.jit
    def takes_anything(a, b, n, alpha, BLOCK: tl.constexpr):
        pass

    return takes_anything


def expected_kernel(kernel, args, kwargs):
    """The specialization the specializer (the one source of truth) gives this call, looked up
    among those the kernel compiled: a KeyError when the launch path never compiled it."""
    path = kernel.launch_path
    kwargs = {k: v for k, v in kwargs.items() if k != "stream"}
    spec = path.specializer.specialize(*path.specializer.bind(args, kwargs))
    return path.compiled[spec.key]


def test_guard_gives_every_call_the_specializers_kernel(launches, torch_mode):
    """Calls that differ from each other in one property each (alignment, dtype, int class,
    int -> float, tensor vs int, numpy scalars, bool, constexpr value and type, keyword vs
    positional, options), in a shuffled order, twice: each launches the kernel the specializer
    picks for it, with its own arguments, however the calls before it left the guards."""
    k = make_takes_anything()
    x, y = Tensor(0x10000, (64,)), Tensor(0x20000, (64,))
    calls = [
        ((x, y, 1024, 2.0), {"BLOCK": 64}),
        ((Tensor(0x10004, (64,)), y, 1024, 2.0), {"BLOCK": 64}),  # pointer alignment flips
        ((x, Tensor(0x20008, (64,)), 1024, 2.0), {"BLOCK": 64}),
        ((Tensor(0x10000, (64,), "float16"), y, 1024, 2.0), {"BLOCK": 64}),  # dtype
        ((CAIArray(0x10000, (64,)), y, 1024, 2.0), {"BLOCK": 64}),  # not a torch tensor, same key
        ((Tensor(0x10000, (64,), cuda=False, pinned=True), y, 1024, 2.0), {"BLOCK": 64}),  # not CUDA
        ((x, y, 1023, 2.0), {"BLOCK": 64}),  # divisibility of an int
        ((x, y, 1, 2.0), {"BLOCK": 64}),  # == 1
        ((x, y, 0, 2.0), {"BLOCK": 64}),
        ((x, y, -16, 2.0), {"BLOCK": 64}),
        ((x, y, -3, 2.0), {"BLOCK": 64}),
        ((x, y, 2 ** 31 - 16, 2.0), {"BLOCK": 64}),  # the ends of i32
        ((x, y, 2 ** 31, 2.0), {"BLOCK": 64}),  # i64
        ((x, y, -2 ** 31, 2.0), {"BLOCK": 64}),
        ((x, y, -2 ** 31 - 1, 2.0), {"BLOCK": 64}),
        ((x, y, 2 ** 63 + 16, 2.0), {"BLOCK": 64}),  # u64
        ((x, y, True, 2.0), {"BLOCK": 64}),  # bool is i1, not the int 1
        ((x, y, np.int32(1024), 2.0), {"BLOCK": 64}),  # numpy int32: the same key as 1024
        ((x, y, np.int64(1024), 2.0), {"BLOCK": 64}),
        ((x, y, 1024.0, 2.0), {"BLOCK": 64}),  # int -> float
        ((x, y, x, 2.0), {"BLOCK": 64}),  # tensor where an int was
        ((x, y, 1024, 2), {"BLOCK": 64}),  # float -> int
        ((x, y, 1024, y), {"BLOCK": 64}),  # tensor where a float was
        ((x, y, 1024, np.float32(2.0)), {"BLOCK": 64}),
        ((x, y, 1024, 2.0), {"BLOCK": 128}),  # constexpr value
        ((x, y, 1024, 2.0), {"BLOCK": 64.0}),  # constexpr type (64 == 64.0)
        ((x, y, 1024, 2.0), {"BLOCK": True}),
        ((x, y, 1024, 2.0), {"BLOCK": "64"}),
        ((x, y, 1024, 2.0), {"BLOCK": None}),
        ((x, y, 1024, 2.0), {"BLOCK": tl.float16}),
        ((x, y, 1024, 2.0), {"BLOCK": tl.bfloat16}),
        ((x, y, 1024, 2.0), {"BLOCK": (64, 32)}),  # not guarded: found by key
        ((x, y, 1024, 2.0, 64), {}),  # positional constexpr
        ((x, y, 1024, 2.0, 128), {}),
        ((x, y), {"n": 1024, "alpha": 2.0, "BLOCK": 64}),  # runtime arguments by keyword
        ((x, y, 1024, 2.0), {"BLOCK": 64, "num_warps": 8}),  # a launch option
        ((x, y, 1024, 2.0), {"num_warps": 8, "BLOCK": 64}),  # keywords in another order
        ((x, y, 1024, 2.0), {"BLOCK": 64, "stream": 0x55}),
    ]
    order = list(range(len(calls))) * 3
    np.random.default_rng(7).shuffle(order)
    for i in order:
        args, kwargs = calls[i]
        before = len(launches.calls)
        got = k[(3,)](*args, **dict(kwargs))
        assert got is expected_kernel(k, args, kwargs), (i, args, kwargs)
        assert len(launches.calls) == before + 1
        call = launches.calls[-1]
        assert call["block"] == got.abi.threads_per_cta and call["stream"] == kwargs.get("stream", 0)
        a = args[0]
        assert call["params"][0] == Q(a.data_ptr() if hasattr(a, "data_ptr") else a.__cuda_array_interface__["data"][0])
        n = args[2] if len(args) > 2 else kwargs["n"]
        if type(n) is int and got.abi.params[2].dtype == "i32":
            assert call["params"][2] == struct.pack("<i", n)
    if launches.mode == "native launch":  # the guards hold the latest specializations
        assert 0 < len(k.launch_path.recent) <= 4


def test_guard_errors_for_none_and_unpassable_values(launches, torch_mode):
    k = make_takes_anything()
    x, y = Tensor(0x10000, (64,)), Tensor(0x20000, (64,))
    for _ in range(2):
        k[(1,)](x, y, 64, 1.0, BLOCK=64)
        with pytest.raises(TLXCompileError, match="argument 'n' is None"):
            k[(1,)](x, y, None, 1.0, BLOCK=64)
        with pytest.raises(TLXRuntimeError, match="cannot pass object"):
            k[(1,)](x, y, 64, object(), BLOCK=64)
        with pytest.raises(TLXRuntimeError, match="torch tensor on 'cpu'"):
            k[(1,)](Tensor(0x10000, (64,), cuda=False), y, 64, 1.0, BLOCK=64)
    assert len(launches.calls) == 2


def test_repeated_calls_are_matched_by_their_guard_without_a_key(launches, torch_mode, monkeypatch):
    """The hot path: once a call's guard is known, a call with the same key (new addresses, new
    values of the same class) launches without `key_of`; alternating among up to four
    specializations too. A grid callable and a stream are read at every launch."""
    k = make_takes_anything()
    keys = []
    real_key_of = tlx.launch.key_of
    monkeypatch.setattr("tlx.launch.key_of", lambda args: keys.append(args) or real_key_of(args))
    x, y = Tensor(0x10000, (64,)), Tensor(0x20000, (64,))
    seen = []
    grid = lambda meta: seen.append(meta["n"]) or (max(1, meta["n"] // 64),)  # noqa: E731
    variants = [(x, y, 128, 1.0), (x, y, 129, 1.0), (Tensor(0x10004, (64,)), y, 128, 1.0), (x, y, 1, 1.0)]
    first = [k[grid](*v, BLOCK=64) for v in variants]
    assert len(set(map(id, first))) == 4
    keyed, misses = len(keys), k.launch_path.misses
    for i in range(8):
        for v, kernel in zip(variants, first):
            moved = (Tensor(v[0].data_ptr() + 0x1000 * i, (64,)),) + v[1:3] + (0.5 * i,)
            assert k[grid](*moved, BLOCK=64, stream=0x40 + i) is kernel
            call = launches.calls[-1]
            assert call["grid"] == (max(1, v[2] // 64), 1, 1) and seen[-1] == v[2]
            assert call["stream"] == 0x40 + i and call["params"][0] == Q(v[0].data_ptr() + 0x1000 * i)
            assert call["params"][3] == struct.pack("<f", 0.5 * i)
    assert k.launch_path.misses == misses and len(seen) == 4 + 8 * 4
    if launches.mode == "native launch":
        assert len(keys) == keyed  # no call key computed: every call matched a guard


def test_calls_no_guard_describes_are_found_by_key_and_later_guardable_ones_get_a_guard(launches, torch_mode,
                                                                                       monkeypatch):
    """A numpy int has the same key as a Python int but no guard: it is found by key every time
    (and the guard is not tried again for it); a Python int of that key afterwards gets a guard."""
    k = make_takes_anything()
    x, y = Tensor(0x10000, (64,)), Tensor(0x20000, (64,))
    tried = []
    real_guard_of = tlx.launch.guard_of
    monkeypatch.setattr("tlx.launch.guard_of", lambda *a: tried.append(a[0]) or real_guard_of(*a))
    first = k[(1,)](x, y, np.int32(64), 1.0, BLOCK=64)
    for i in range(3):
        assert k[(1,)](x, y, np.int32(16 * i), 1.0, BLOCK=64) is first
        assert launches.calls[-1]["params"][2] == struct.pack("<i", 16 * i)
    assert k.launch_path.recent == ()
    if launches.mode == "native launch":
        assert len(tried) == 1  # the first call's; not again for the same argument types
        assert k[(1,)](x, y, 32, 1.0, BLOCK=64) is first and len(k.launch_path.recent) == 1
        assert k[(1,)](x, y, np.int32(48), 1.0, BLOCK=64) is first  # found by key again
        assert launches.calls[-1]["params"][2] == struct.pack("<i", 48)


def test_a_driver_error_answered_by_any_guard_is_raised_with_its_kernel(monkeypatch, tmp_path, tmp_path_factory,
                                                                        torch_mode):
    """The newest guard and an older one each meet a driver error (the recorder answers
    CUDA_ERROR_INVALID_VALUE): the call raises it, naming the kernel, after one launch attempt;
    once the driver answers 0 again, each call launches its own specialization."""
    launches = record_launches("native launch", monkeypatch, tmp_path, tmp_path_factory)  # (guards are its)
    k = make_scale()
    x32, x16 = Tensor(0x10000, (64,)), Tensor(0x20000, (64,), "float16")
    f32, f16 = k[(2,)](x32, x32, 64, 2.0, BLOCK=64), k[(2,)](x16, x16, 64, 2.0, BLOCK=64)
    assert f32 is not f16 and [e[3] for e in k.launch_path.recent[:2]] == [f16, f32]
    launches.result = 1
    for x in (x16, x32):  # the newest guard's, then an older one's
        before = len(launches.calls)
        with pytest.raises(TLXRuntimeError, match="CUDA_ERROR_INVALID_VALUE") as err:
            k[(2,)](x, x, 64, 2.0, BLOCK=64)
        assert "scale" in str(err.value) and len(launches.calls) == before + 1
    launches.result = 0
    assert k[(2,)](x32, x32, 64, 2.0, BLOCK=64) is f32 and k[(2,)](x16, x16, 64, 2.0, BLOCK=64) is f16
    assert launches.calls[-1]["params"][0] == Q(0x20000)

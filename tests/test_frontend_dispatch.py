"""`kernel[grid](...)` through the generated dispatcher, without a GPU: the kernels are really
traced and compiled, only the driver's cuLaunchKernelEx is replaced by a recorder of the packed
parameter bytes, grid and stream. Checks the fast path's specialization (pointer alignment,
dtype, int range, == 1, constexprs, options), packing, streams, grids, errors and TLX_INTERPRET."""

import ctypes
import itertools
import struct
import sys
import types

import numpy as np
import pytest

import tlx
import tlx.language as tl
from runtime_fakes import CAIArray, Tensor, TorchStream
from tlx.compiler.errors import TLXCompileError
from tlx.jit import JITFunction
from tlx.runtime import driver, host_copy, native_launch, streams
from tlx.runtime.errors import TLXRuntimeError
from tlx.runtime.launcher import Launcher
from tlx.runtime.loader import LoadedKernel


class Launches:
    """Every faked cuLaunchKernelEx: the launcher, grid, stream and each parameter's bytes."""

    def __init__(self):
        self.calls = []

    def recorder(self, launcher):
        sizes = [p.size for p in launcher.abi.params]

        def launch_ex(cfg, handle, params, extra):
            ptrs = (ctypes.c_void_p * max(len(sizes), 1)).from_address(params)
            self.calls.append({"launcher": launcher, "grid": (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
                               "block": cfg.blockDimX, "stream": int(cfg.hStream),
                               "params": [ctypes.string_at(ptrs[i], n) for i, n in enumerate(sizes)]})
            return (0,)

        return launch_ex


class NativeLaunches:
    """The same record, read from the native module's C stand-in for cuLaunchKernelEx: every
    launch goes through C (the native dispatcher's own, or the launcher's native entry when the
    dispatcher takes the Python path), which logs the parameter bytes during the call."""

    def __init__(self, module):
        self.module = module
        self.by_handle = {}
        self._calls = []

    def register(self, launcher, handle):
        self.by_handle[handle] = launcher
        self.module.record_param_sizes(handle, tuple(p.size for p in launcher.abi.params))

    @property
    def calls(self):
        for c in self.module.logged_calls():
            self._calls.append({"launcher": self.by_handle[c["function"]], "grid": c["grid"],
                                "block": c["block"][0], "stream": c["stream"], "params": c["params"]})
        return self._calls


_HANDLES = itertools.count(0x10_0000, 0x100)


def no_bindings_call(*args):
    raise AssertionError("cuda.bindings' cuLaunchKernelEx called with the native entry in use")


@pytest.fixture(params=["python dispatcher", "native dispatcher"])
def launches(request, monkeypatch, tmp_path, tmp_path_factory):
    """The recorded launches; every test runs with the generated Python dispatcher alone and with
    the native dispatcher (native_dispatch.c) in front of it."""
    return record_launches(request.param, monkeypatch, tmp_path, tmp_path_factory)


def record_launches(mode, monkeypatch, tmp_path, tmp_path_factory):
    """Fake loading and launching (`mode`: "python dispatcher" or "native dispatcher") and
    return the record of the launches."""
    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TLX_INTERPRET", raising=False)
    # whatever the test does, kernel[grid] ends as the Python method it started as
    monkeypatch.setattr(JITFunction, "__getitem__", JITFunction._getitem)
    if mode == "native dispatcher":
        module = bind_recording_entry(monkeypatch, tmp_path_factory)
        rec = NativeLaunches(module)

        def fake_load(self):
            if self.loaded is None:
                handle = next(_HANDLES)
                self._install(LoadedKernel(self.name, None, None, handle, 0, 0, 0), no_bindings_call, module.launch)
                rec.register(self, handle)
            return self.loaded
    else:
        monkeypatch.setattr(native_launch, "_entry", None)  # as on a machine without the entry
        monkeypatch.setattr(native_launch, "_tried", True)
        rec = Launches()

        def fake_load(self):
            if self.loaded is None:
                self._install(LoadedKernel(self.name, None, None, "HANDLE", 0, 0, 0), rec.recorder(self))
            return self.loaded

    monkeypatch.setattr(Launcher, "load", fake_load)
    monkeypatch.setattr(driver, "current_context", lambda kernel=None: None)
    rec.mode = mode
    return rec


def bind_recording_entry(monkeypatch, tmp_path_factory):
    """The native module (built once per session), bound as the launch entry to its recording
    stand-in for cuLaunchKernelEx; `monkeypatch` restores native_launch's entry state after."""
    missing = native_launch.missing_prerequisite()
    if missing is not None:  # a build failure for any other reason is an error, not a skip
        pytest.skip(f"the native module cannot be built here: {missing}")
    for name in ("_entry", "_tried", "_status"):
        monkeypatch.setattr(native_launch, name, getattr(native_launch, name))
    module = native_launch.load_module(tmp_path_factory.getbasetemp() / "native")
    module.reset_log()
    native_launch.bind_entry(module.recording_entry(0))
    return module


def fake_torch(monkeypatch, current_stream):
    """A `torch` module in sys.modules whose current stream is `current_stream[0]`, and whose
    Tensor class is runtime_fakes.Tensor (so the dispatcher sees torch tensors as torch's)."""
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
    """Each test runs without torch and with a (fake) torch imported: the dispatcher reads torch
    tensors on its own fast path only when torch is imported."""
    if request.param == "torch imported":
        fake_torch(monkeypatch, [0])
    return request.param


def test_launch_packs_arguments_grid_and_block(launches, torch_mode):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    k1 = scale[(4,)](x, out, 1000, 2.0, BLOCK=256)
    call = launches.calls[-1]
    assert call["grid"] == (4, 1, 1) and call["block"] == 128 and call["stream"] == 0
    assert call["params"] == [Q(0x10000), Q(0x20000), struct.pack("<i", 1000), struct.pack("<f", 2.0)]
    assert "divisibility = [16, 16, 1, 1]" in func_attrs(k1) and "equal_to_one" not in func_attrs(k1)
    # same specialization, new values: nothing recompiled, the buffer follows
    y, out2 = Tensor(0x30000, (1024,)), Tensor(0x40000, (1024,))
    k2 = scale[(2, 3)](y, out2, 1032, -0.5, BLOCK=256)
    call = launches.calls[-1]
    assert k2 is k1 and call["grid"] == (2, 3, 1)
    assert call["params"] == [Q(0x30000), Q(0x40000), struct.pack("<i", 1032), struct.pack("<f", -0.5)]
    # keywords for runtime parameters, positional constexprs
    k3 = scale[(1,)](x_ptr=x, out_ptr=out, n=5, alpha=1.5, BLOCK=256)
    k4 = scale[(1,)](x, out, 5, 1.5, 256)
    assert k3 is k1 and k4 is k1
    assert launches.calls[-1]["params"] == launches.calls[-2]["params"] == [
        Q(0x10000), Q(0x20000), struct.pack("<i", 5), struct.pack("<f", 1.5)]
    assert len(launches.calls) == 4


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
    fresh = make_scale()  # a dispatcher made while torch is imported
    fresh[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert launches.calls[-1]["stream"] == 0x88
    current[0] = 0
    fresh[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert launches.calls[-1]["stream"] == 0


def test_producer_streams_of_cai_arrays_are_waited_for(launches, monkeypatch):
    waits = []
    monkeypatch.setattr("tlx.runtime.arrays._wait_for_producer", lambda producer, stream: waits.append((producer, stream)))
    scale = make_scale()
    scale[(1,)](CAIArray(0x10000, (64,), "<f4", stream=0x42), Tensor(0x20000, (64,)), 64, 1.0, BLOCK=64,
                stream=0x55)
    assert (0x42, 0x55) in waits


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
    g = (5, 2)
    launch = scale[g]
    launch(x, out, 100, 2.0, BLOCK=64)
    launch(x, out, 100, 2.0, BLOCK=64)
    assert [c["grid"] for c in launches.calls[-2:]] == [(5, 2, 1)] * 2
    scale[7](x, out, 100, 2.0, BLOCK=64)
    assert launches.calls[-1]["grid"] == (7, 1, 1)
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
    # An argument passed twice is the one mistake Python itself reports, naming the kernel (no
    # wrapper frame around every launch to translate it).
    with pytest.raises(TypeError, match=r"^scale\(\) got multiple values for argument 'x_ptr'$"):
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
    n = len(launches.calls)
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)  # the kernel still launches
    assert len(launches.calls) == n + 1


def test_pinned_tensors_and_host_copies(launches, torch_mode, monkeypatch):
    staged = []  # the copying launch needs a driver: record that the fast path diverts to it
    monkeypatch.setattr(Launcher, "_staged_launch", lambda self, grid, args, s, bound: staged.append((args, bound)))
    scale = make_scale()
    out = Tensor(0x20000, (64,))
    scale[(1,)](Tensor(0x10000, (64,), cuda=False, pinned=True), out, 64, 1.0, BLOCK=64)
    assert launches.calls[-1]["params"][0] == Q(0x10000)
    hc = host_copy(np.zeros(64, np.float32))
    scale[(1,)](hc, out, 64, 1.0, BLOCK=64)
    assert staged and staged[-1][0][0] is hc and staged[-1][1] is True


def test_defaults_constexpr_values_and_unhashable_constexprs(launches, torch_mode):
    @tlx.jit
    def fill(out_ptr, value, n=256, BLOCK: tl.constexpr = 128, SHAPE: tl.constexpr = (2, 3)):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, value, mask=offs < n * SHAPE[0])

    out = Tensor(0x20000, (1024,))
    k = fill[(1,)](out, 1.5)
    assert launches.calls[-1]["params"] == [Q(0x20000), struct.pack("<f", 1.5), struct.pack("<i", 256)]
    assert fill[(1,)](out, 2.5, 256, 128) is k
    listed = fill[(1,)](out, 1.5, SHAPE=[2, 3])  # a list constexpr: no fast-path cache, still right
    assert fill[(1,)](out, 1.5, SHAPE=[2, 3]) is listed
    other = fill[(1,)](out, 1.5, SHAPE=(4, 3))
    assert other is not k
    assert fill[(1,)](out, 1.5, BLOCK=tl.constexpr(128)) is k


def test_interpret_set_after_a_fast_launch(launches, torch_mode, monkeypatch):
    @tlx.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    g = (2,)
    add[g](Tensor(0x10000, (128,)), Tensor(0x20000, (128,)), Tensor(0x30000, (128,)), 128, BLOCK=64)
    add[g](Tensor(0x10000, (128,)), Tensor(0x20000, (128,)), Tensor(0x30000, (128,)), 128, BLOCK=64)
    assert len(launches.calls) == 2
    native = launches.mode == "native dispatcher" and torch_mode == "torch imported"
    if native:  # the second launch came from C: the C path must see the variable too
        assert add._dispatch.native.stats()["hits"] == 1
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
    if native:
        assert add._dispatch.native.stats()["hits"] == 2


def test_parameter_names_never_clash_with_the_dispatcher(launches, torch_mode):
    """Parameters named like the dispatcher's own variables (the stream `s`, `grid`, `key`,
    `specs`...) get their own values."""

    @tlx.jit
    def clash(grid, s, key, specs, spec, values, compiled, bind, Tensor, v0, k0, d0, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(grid + offs * s, 1.0 * key + specs + spec + values + compiled + bind + v0 + k0 + d0)

    args = [Tensor(0x10000, (64,)), 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37]
    clash[(2,)](*args, BLOCK=64, stream=0x55)
    call = launches.calls[-1]
    assert call["grid"] == (2, 1, 1) and call["stream"] == 0x55
    assert call["params"][0] == Q(0x10000)
    assert call["params"][1:] == [struct.pack("<i", v) for v in args[1:]]
    clash[lambda meta: (meta["s"],)](*args, BLOCK=64)
    assert launches.calls[-1]["grid"] == (3, 1, 1)

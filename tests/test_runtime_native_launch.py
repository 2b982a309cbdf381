"""The native launch (runtime/native_launch.c), built with the machine's C compiler (no GPU
needed): what it hands the driver — checked against cuda.bindings' own struct layouts and the
Python packer's bytes — its refusals, and its build: recorded, checked before loading, rebuilt
when damaged (truncated, emptied, overwritten: never a crash), built once by concurrent
processes, removed by `tlx cache clear`."""

import ctypes
import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from runtime_fakes import CAIArray, DriverRecorder, Tensor, TorchStream
from tlx.compiler.abi import KernelABI, ParamABI
from tlx.runtime import native_launch
from tlx.runtime.errors import TLXRuntimeError
from tlx.runtime.launcher import Launcher
from tlx.runtime.loader import LoadedKernel

pytestmark = pytest.mark.skipif(native_launch.missing_prerequisite() is not None,
                                reason=f"the native module cannot be built here: {native_launch.missing_prerequisite()}")


def P(name, kind, dtype, size, **kw):
    return ParamABI(name, kind, dtype, size, min(size, 64), **kw)


ADD = KernelABI(entry="add", params=(P("x", "pointer", "fp32", 8), P("y", "pointer", "fp32", 8),
                                     P("n", "scalar", "u32", 4), P("alpha", "scalar", "fp32", 4)),
                threads_per_cta=128, num_warps=4, shared_bytes=0)
HANDLE = 0x5678_9ABC


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    return native_launch.load_module(tmp_path_factory.mktemp("native"))


def installed(module, abi, native=True):
    """A launcher on the native launch (or the Python packer), the driver call recorded."""
    rec = DriverRecorder()
    rec.register(HANDLE, abi)
    if native:
        module.set_entry(rec.native_address)
    launcher = Launcher(abi, ptx=".version 8.0\n.target sm_90a\n")

    def no_bindings_call(*args):
        raise AssertionError("cuda.bindings' cuLaunchKernelEx called on the native path")

    launcher.install(LoadedKernel(abi.entry, None, None, HANDLE, 0, 0, 0), module.launch if native else None,
                     no_bindings_call if native else rec.bindings)
    return launcher, rec


def test_the_driver_receives_config_handle_and_params(module):
    launcher, rec = installed(module, ADD)
    assert launcher.fast is not None and launcher.fast[0] is module.launch
    x, y = Tensor(0x7000_0000, (1000,)), CAIArray(0x7000_1000, (1000,), "<f4")
    launcher.launch((8,), [x, y, 1000, 2.0])
    (call,) = rec.calls
    assert call["grid"] == (8, 1, 1) and call["block"] == 128 and call["shared"] == 0 and call["stream"] == 0
    assert call["handle"] == HANDLE and call["cluster_attr"] is None
    assert call["params"] == [struct.pack("<Q", 0x7000_0000), struct.pack("<Q", 0x7000_1000),
                              struct.pack("<I", 1000), struct.pack("<f", 2.0)]
    launcher.launch((3, 2), [y, x, 7, np.float32(0.5)], stream=TorchStream(0xABC))
    assert rec.calls[-1]["grid"] == (3, 2, 1) and rec.calls[-1]["stream"] == 0xABC
    assert rec.calls[-1]["params"][:2] == [struct.pack("<Q", 0x7000_1000), struct.pack("<Q", 0x7000_0000)]


def test_the_config_is_cuda_bindings_own_layout(module):
    """The CUlaunchConfig the C call fills, byte for byte what cuda.bindings lays out (cuda.h's)."""
    from cuda.bindings import driver as drv

    abi = KernelABI(entry="k", params=(P("x", "pointer", "fp32", 8),), threads_per_cta=256, num_warps=8,
                    shared_bytes=70_000)
    launcher, rec = installed(module, abi)
    launcher.launch((5, 6, 7), [Tensor(0x7100_0000, (16,))], stream=0xABCD0)
    want = drv.CUlaunchConfig()
    want.gridDimX, want.gridDimY, want.gridDimZ = 5, 6, 7
    want.blockDimX, want.blockDimY, want.blockDimZ = 256, 1, 1
    want.sharedMemBytes = 70_000
    want.hStream = drv.CUstream(0xABCD0)
    want.numAttrs = 0
    got = rec.calls[-1]["config_bytes"]
    assert len(got) == 56 and got[:28] == ctypes.string_at(want.getPtr(), 28)  # grid, block, shared memory
    assert got[32:40] == ctypes.string_at(want.getPtr() + 32, 8)  # the stream
    assert got[40:48] == bytes(8) and got[48:52] == ctypes.string_at(want.getPtr() + 48, 4)  # no attributes


def test_the_cluster_attribute_is_cuda_bindings_own_layout(module):
    from cuda.bindings import driver as drv

    abi = KernelABI(entry="k", params=(P("x", "pointer", "fp32", 8),), threads_per_cta=384, num_warps=12,
                    shared_bytes=200_000, cluster=(2, 1, 1))
    launcher, rec = installed(module, abi)
    launcher.launch((4, 3), [Tensor(0x7100_0000, (16,))])
    call = rec.calls[-1]
    assert call["grid"] == (4, 3, 1) and call["block"] == 384 and call["shared"] == 200_000
    want = drv.CUlaunchAttribute()
    want.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    want.value.clusterDim.x, want.value.clusterDim.y, want.value.clusterDim.z = 2, 1, 1
    assert call["cluster_attr"][:20] == ctypes.string_at(want.getPtr(), 20)
    with pytest.raises(TLXRuntimeError, match="not a multiple of the cluster dimension 2"):
        launcher.launch((3,), [Tensor(0x7100_0000, (16,))])
    grid_in_clusters = KernelABI(entry="c", params=(), threads_per_cta=32, num_warps=1, shared_bytes=0,
                                 cluster=(2, 1, 1), extra={"grid_unit": "cluster"})
    launcher, rec = installed(module, grid_in_clusters)
    launcher.launch((4,), [])
    assert rec.calls[-1]["grid"] == (8, 1, 1)
    launch, spec = launcher.fast
    # a grid of clusters whose CTA count would wrap 64 bits (2**63 * 2 == 0: an "empty" grid)
    # or pass 2**31 - 1 is refused, not launched as the wrapped count or silently dropped
    for grid in [(2 ** 63,), (2 ** 63, 1, 1), (2 ** 64 - 1,), (2 ** 30,)]:
        with pytest.raises(ValueError, match="grid: out of range"):
            launch(spec, grid, 0, (), None)
    assert launch(spec, (2 ** 30 - 1,), 0, (), None) == 0 and rec.calls[-1]["grid"] == (2 ** 31 - 2, 1, 1)


SCALARS = KernelABI(entry="s", params=(P("p", "pointer", "fp16", 8), P("b", "scalar", "i1", 4),
                                       P("i8", "scalar", "i8", 4), P("u16", "scalar", "u16", 4),
                                       P("i32", "scalar", "i32", 4), P("u32", "scalar", "u32", 4),
                                       P("i64", "scalar", "i64", 8), P("u64", "scalar", "u64", 8),
                                       P("h", "scalar", "fp16", 2), P("bf", "scalar", "bf16", 2),
                                       P("f", "scalar", "fp32", 4), P("d", "scalar", "fp64", 8)),
                   threads_per_cta=32, num_warps=1, shared_bytes=0)


@pytest.mark.parametrize("values", [
    [Tensor(0x10, (1,), "float16"), True, -128, 65535, -2 ** 31, 2 ** 32 - 1, -2 ** 63, 2 ** 64 - 1, 1.5, 1.00390625, 3.25, -1e300],
    [Tensor(2 ** 64 - 16, (1,), "float16"), False, 127, 0, 2 ** 31 - 1, 0, 2 ** 63 - 1, 2 ** 63, -0.0, float("nan"), float("inf"), 1e-310],
    [CAIArray(0, (1,), "<f2"), 1, np.int8(-3), np.uint16(9), np.int64(-5), 7, np.int32(6), np.uint64(2 ** 63 + 1), np.float16(0.25),
     float("-inf"), np.float32(2.5), np.float64(1 / 3)],
])
def test_every_scalar_type_packs_as_the_python_packer_does(module, values):
    native, rec_n = installed(module, SCALARS)
    python, rec_p = installed(module, SCALARS, native=False)
    native.launch((1,), values)
    python.launch((1,), values)
    assert rec_n.calls[-1]["params"] == rec_p.calls[-1]["params"]


@pytest.mark.parametrize("index,bad,words", [
    (2, 128, r"'i8' \(i8\): 128 is out of range"), (3, -1, r"'u16' \(u16\): -1 is out of range"),
    (4, 2 ** 31, r"'i32' \(i32\): 2147483648 is out of range"), (7, -1, r"'u64' \(u64\): -1 is out of range"),
    (1, 2, r"'b' \(i1\): 2 is out of range"), (4, 2.5, r"'i32' \(i32\): expected an integer"),
    (10, 1e39, r"'f' \(fp32\).*out of range"), (8, 1e6, r"'h' \(fp16\).*out of range"),
    (11, "x", r"'d' \(fp64\): expected a number"),
])
def test_a_bad_value_is_refused_before_anything_launches(module, index, bad, words):
    values = [Tensor(0x10, (1,), "float16"), True, 1, 1, 1, 1, 1, 1, 1.0, 1.0, 1.0, 1.0]
    values[index] = bad
    launcher, rec = installed(module, SCALARS)
    with pytest.raises(TLXRuntimeError, match=words):
        launcher.launch((1,), values)
    assert rec.calls == []


def test_the_call_itself_refuses_what_it_cannot_pack(module):
    launcher, rec = installed(module, ADD)
    launch, spec = launcher.fast
    x = Tensor(0x7000_0000, (4,))
    assert launch(spec, (2,), 0, (x, x, 4, 1.0), None) == 0 and len(rec.calls) == 1
    with pytest.raises(TypeError):  # a CAI array: the Python launcher reads it
        launch(spec, (2,), 0, (CAIArray(0x1000, (4,)), x, 4, 1.0), None)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        launch(spec, (2,), 0, (x, x, 4), None)
    for grid in [(1, 2, 3, 4), (), (2 ** 31,), (1, 70000), ("a",), [2], 1.5]:
        with pytest.raises(ValueError, match="grid"):
            launch(spec, grid, 0, (x, x, 4, 1.0), None)
    assert launch(spec, (0, 5), 0, (x, x, 4, 1.0), None) == 0  # an empty grid launches nothing
    with pytest.raises(ValueError, match="not a launch spec"):
        launch(spec[:-1], (2,), 0, (x, x, 4, 1.0), None)
    with pytest.raises(TypeError):
        launch(spec, (2,), 0, [x, x, 4, 1.0], None)
    assert len(rec.calls) == 1


def test_a_guard_launches_only_the_arguments_it_describes(module):
    """launch(..., guard, kwargs): the C side compares the call with a guard (tlx/specialize.py
    `guard_of` makes them; here they are written by hand) and returns -2, launching nothing, on
    any difference: tensor type, is_cuda, dtype object, alignment; an int's exact type, int32
    range, == 1 and % 16; a float's exact type; constexprs and keywords by type and value."""
    launcher, rec = installed(module, ADD)
    launch, spec = launcher.fast
    x, y = Tensor(0x7000_0000, (4,)), Tensor(0x7000_0100, (4,))
    f32 = x.dtype
    guard = (b"PPIfc", (Tensor, f32, Tensor, f32, int, None, float, None, int, 64), ("BLOCK", int, 64, "W", str, "a"))
    kw = {"W": "a", "BLOCK": 64}
    assert launch(spec, (2,), 0, (x, y, 32, 1.5, 64), None, guard, kw) == 0
    assert rec.calls[-1]["params"] == [struct.pack("<Q", 0x7000_0000), struct.pack("<Q", 0x7000_0100),
                                       struct.pack("<i", 32), struct.pack("<f", 1.5)]
    assert launch(spec, (2,), 0, (x, y, 0, 1.5, 64), None, guard, kw) == 0  # (n is a u32 here)
    assert launch(spec, (2,), 0, (x, y, 2 ** 31 - 16, 1.5, 64), None, guard, kw) == 0
    misses = [((Tensor(0x7000_0004, (4,)), y, 32, 1.5, 64), kw),  # unaligned
              ((Tensor(0x7000_0000, (4,), "float16"), y, 32, 1.5, 64), kw),  # another dtype
              ((Tensor(0x7000_0000, (4,), cuda=False), y, 32, 1.5, 64), kw),  # not on the GPU
              ((CAIArray(0x7000_0000, (4,)), y, 32, 1.5, 64), kw),  # another type
              ((0x7000_0000, y, 32, 1.5, 64), kw),  # an int where the tensor was
              ((x, y, 33, 1.5, 64), kw), ((x, y, 1, 1.5, 64), kw), ((x, y, 2 ** 31, 1.5, 64), kw),
              ((x, y, True, 1.5, 64), kw), ((x, y, 32.0, 1.5, 64), kw), ((x, y, 32, 1, 64), kw),
              ((x, y, 32, 1.5, 128), kw), ((x, y, 32, 1.5, 64.0), kw), ((x, y, 32, 1.5), kw),  # constexprs
              ((x, y, 32, 1.5, 64, 1), kw),
              ((x, y, 32, 1.5, 64), {"W": "a"}), ((x, y, 32, 1.5, 64), {"W": "b", "BLOCK": 64}),  # keywords
              ((x, y, 32, 1.5, 64), {"W": "a", "BLOCK": 64, "num_warps": 8}),
              ((x, y, 32, 1.5, 64), {"W": "a", "BLOCK": True})]
    for args, kwargs in misses:
        assert launch(spec, (2,), 0, args, None, guard, kwargs) == -2, (args, kwargs)
    assert len(rec.calls) == 3
    one = (b"PPcf1", (Tensor, f32, Tensor, f32, int, 5, float, None, int, None), ())  # 'c' compares 5 by value
    assert launch(spec, (2,), 0, (x, y, 5, 2.0, 1), None, one, {}) == 0 and len(rec.calls) == 4
    assert rec.calls[-1]["params"][2:] == [struct.pack("<I", 5), struct.pack("<f", 2.0)]
    for args in [(x, y, 6, 2.0, 1), (x, y, 5, 2.0, 2), (x, y, 5, 2.0, 17), (x, y, 5, 2.0, True)]:
        assert launch(spec, (2,), 0, args, None, one, {}) == -2
    for malformed in [(b"PPIf", (Tensor,) * 8), ("PPIfc", guard[1], guard[2]), [b"PPIfc", guard[1], guard[2]]]:
        with pytest.raises(TypeError):
            launch(spec, (2,), 0, (x, y, 32, 1.5, 64), None, malformed, kw)
    assert launch(spec, (2,), 0, (x, y, 32, 1.5, 64), None, (b"PP", (), ()), {}) == -2  # too short: no match
    assert len(rec.calls) == 4


class DescriptorTensor:
    """A tensor whose is_cuda and dtype are the class's data descriptors reading its storage, as
    torch's getters are: the guard calls those directly (`getattr_of`), so what it reads must be
    the storage at every call, and a descriptor rebound on the class must be the one it calls."""

    __module__ = "torch"

    def __init__(self, ptr, dtype, cuda=True):
        self.storage = {"ptr": ptr, "dtype": dtype, "cuda": cuda}

    is_cuda = property(lambda self: self.storage["cuda"])
    dtype = property(lambda self: self.storage["dtype"])

    def data_ptr(self):
        return self.storage["ptr"]


def test_a_guard_reads_descriptor_getters_at_every_call(module, monkeypatch):
    """A tensor whose storage changes under the same object (torch's `t.data = other`: another
    dtype, device or pointer) misses the guard it matched before; so does one whose class's
    getter was rebound, or whose getter raises (the error comes through, nothing launches)."""
    launcher, rec = installed(module, ADD)
    launch, spec = launcher.fast
    f32, f16 = Tensor.DTYPES.setdefault("float32", Tensor._Dtype("float32")), Tensor._Dtype("float16")
    x, y = DescriptorTensor(0x7000_0000, f32), DescriptorTensor(0x7000_0100, f32)
    guard = (b"PPIf", (DescriptorTensor, f32, DescriptorTensor, f32, int, None, float, None), ())
    assert launch(spec, (1,), 0, (x, y, 32, 1.5), None, guard, {}) == 0
    assert rec.calls[-1]["params"][0] == struct.pack("<Q", 0x7000_0000)
    for change in [{"dtype": f16}, {"cuda": False}, {"ptr": 0x7000_0008}]:
        x.storage.update(change)
        assert launch(spec, (1,), 0, (x, y, 32, 1.5), None, guard, {}) == -2, change
        x.storage.update(ptr=0x7000_0000, dtype=f32, cuda=True)
    x.storage["ptr"] = 0x7000_0200  # another aligned pointer: it matches, and is the one launched
    assert launch(spec, (1,), 0, (x, y, 32, 1.5), None, guard, {}) == 0
    assert rec.calls[-1]["params"][0] == struct.pack("<Q", 0x7000_0200)
    monkeypatch.setattr(DescriptorTensor, "is_cuda", property(lambda self: False))
    assert launch(spec, (1,), 0, (x, y, 32, 1.5), None, guard, {}) == -2
    monkeypatch.setattr(DescriptorTensor, "is_cuda", property(lambda self: 1 / 0))
    with pytest.raises(ZeroDivisionError):
        launch(spec, (1,), 0, (x, y, 32, 1.5), None, guard, {})
    assert len(rec.calls) == 2


def test_a_guard_refuses_a_host_torch_tensor_and_another_dtype(module):
    """A real torch tensor in host memory: torch's is_cuda getter, which the guard calls through
    its descriptor, says False, so the guard of CUDA float32 tensors refuses it, launching nothing."""
    torch = pytest.importorskip("torch")
    launcher, rec = installed(module, ADD)
    launch, spec = launcher.fast
    t = torch.empty(64)
    guard = (b"PPIf", (torch.Tensor, torch.float32, torch.Tensor, torch.float32, int, None, float, None), ())
    assert launch(spec, (1,), 0, (t, t, 32, 1.5), None, guard, {}) == -2
    assert rec.calls == []


def test_skip_if_env_launches_nothing_while_the_variable_is_set(module, monkeypatch):
    launcher, rec = installed(module, ADD)
    launch, spec = launcher.fast
    x = Tensor(0x7000_0000, (4,))
    for value, launched in [("1", False), ("", True), ("0", True), ("yes", False)]:
        monkeypatch.setenv("TLX_TEST_SKIP", value)
        assert launch(spec, (1,), 0, (x, x, 4, 1.0), b"TLX_TEST_SKIP") == (0 if launched else -1)
    monkeypatch.delenv("TLX_TEST_SKIP")
    assert launch(spec, (1,), 0, (x, x, 4, 1.0), b"TLX_TEST_SKIP") == 0
    assert len(rec.calls) == 3


def test_stream_none_is_the_default_stream_the_namespace_names(module):
    """launch(spec, grid, None, ...): the stream is getter(arg) while namespace[name] is a pair
    (getter, arg) — read at every launch, so rebinding the name takes effect at once — getter()
    when arg is None, else fallback(); the answer must be an int."""
    from tlx.runtime import streams
    launcher, rec = installed(module, ADD)
    launch, spec = launcher.fast
    x = Tensor(0x7000_0000, (4,))
    ns, asked = {}, []
    try:
        module.set_default_stream(ns, "current", lambda: 0x11)
        assert launch(spec, (1,), None, (x, x, 4, 1.0), None) == 0 and rec.calls[-1]["stream"] == 0x11
        ns["current"] = (lambda device: asked.append(device) or 0x22, -1)
        assert launch(spec, (1,), None, (x, x, 4, 1.0), None) == 0 and rec.calls[-1]["stream"] == 0x22
        assert asked == [-1]
        ns["current"] = (lambda: 0x33, None)
        assert launch(spec, (1,), None, (x, x, 4, 1.0), None) == 0 and rec.calls[-1]["stream"] == 0x33
        assert launch(spec, (1,), 0x44, (x, x, 4, 1.0), None) == 0 and rec.calls[-1]["stream"] == 0x44
        ns["current"] = (lambda: "stream", None)
        with pytest.raises(TypeError, match="stream handle is an int"):
            launch(spec, (1,), None, (x, x, 4, 1.0), None)
        ns["current"] = (lambda: 1 / 0, None)
        with pytest.raises(ZeroDivisionError):
            launch(spec, (1,), None, (x, x, 4, 1.0), None)
        with pytest.raises(TypeError):
            module.set_default_stream(ns, "current", "not callable")
    finally:
        module.set_default_stream(vars(streams), "_TORCH_STREAM", streams.default_stream)
    assert len(rec.calls) == 4


def test_a_driver_error_names_kernel_error_and_launch(module):
    launcher, rec = installed(module, ADD)
    rec.result = 1  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(TLXRuntimeError) as err:
        launcher.launch((8,), [Tensor(0x7000_0000, (1,)), Tensor(0x7000_0000, (1,)), 1, 1.0])
    text = str(err.value)
    assert "CUDA_ERROR_INVALID_VALUE" in text and "add" in text and "grid (8, 1, 1)" in text


def test_disabled_by_env_falls_back_to_bindings(monkeypatch):
    monkeypatch.setattr(native_launch, "_tried", False)
    monkeypatch.setattr(native_launch, "_entry", None)
    monkeypatch.setattr(native_launch, "_status", "not built yet")
    monkeypatch.setenv("TLX_NATIVE_LAUNCH", "0")
    assert native_launch.entry() is None
    assert native_launch.status() == "cuda.bindings (TLX_NATIVE_LAUNCH=0)"


def test_no_compiler_falls_back_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(native_launch, "_tried", False)
    monkeypatch.setattr(native_launch, "_entry", None)
    monkeypatch.setattr(native_launch, "_module", None)
    monkeypatch.setattr(native_launch, "compiler_command", lambda: None)
    monkeypatch.setattr(native_launch, "driver_entry_address", lambda: 0x1234)
    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TLX_NATIVE_LAUNCH", raising=False)
    assert native_launch.entry() is None
    assert native_launch.status().startswith("cuda.bindings") and "no C compiler" in native_launch.status()


LOAD_AND_LAUNCH = """
    import ctypes, sys
    from pathlib import Path
    from tlx.runtime import native_launch
    m = native_launch.load_module(Path(sys.argv[1]))
    m.set_entry(m.noop_entry())
    # a kernel without parameters: function 0, 32 threads, no shared memory, a 1x1x1 cluster
    spec = (0).to_bytes(8, "little") + (32).to_bytes(4, "little") + bytes(4) + (1).to_bytes(4, "little") * 3 + bytes(12)
    print(m.launch(spec, (1,), 0, (), None))
"""


def run_loader(directory):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(LOAD_AND_LAUNCH), str(directory)],
                          capture_output=True, text=True, timeout=300)


def test_the_build_is_recorded_and_checked(tmp_path):
    path = native_launch.build(tmp_path)
    record = json.loads(native_launch.record_path(path).read_text())
    data = path.read_bytes()
    assert record["size"] == len(data) > 0 and len(record["sha256"]) == 64 and native_launch.intact(path)
    first = run_loader(tmp_path)
    assert first.returncode == 0 and first.stdout.strip() == "0", first.stderr


@pytest.mark.parametrize("damage", ["truncated", "emptied", "garbage", "record lost"])
def test_a_damaged_module_is_rebuilt_not_loaded(tmp_path, damage):
    path = native_launch.build(tmp_path)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 3])
    elif damage == "emptied":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(data)))
    else:
        native_launch.record_path(path).unlink()
    assert not native_launch.intact(path)
    r = run_loader(tmp_path)  # a fresh process: no SIGBUS, no ImportError; the module rebuilt
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.strip() == "0"
    assert native_launch.intact(path) and path.stat().st_size > 0


def test_two_processes_building_at_once_both_load_a_whole_module(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(LOAD_AND_LAUNCH), str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.strip() == "0"
    path = native_launch.module_path(tmp_path)
    assert native_launch.intact(path)
    left = sorted(f for f in os.listdir(tmp_path) if not f.endswith(".lock"))
    assert left == sorted([path.name, native_launch.record_path(path).name])  # no temporary file left


def test_cache_clear_removes_the_native_build(tmp_path, monkeypatch):
    from tlx.cli import main

    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))
    path = native_launch.build()
    assert path.parent == tmp_path / "native" and path.exists()
    assert main(["cache", "clear"]) == 0
    assert not path.exists() and not native_launch.record_path(path).exists()

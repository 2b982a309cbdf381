"""The native launch entry (runtime/native_launch.c), built with the machine's C compiler and
driven through the C stand-in for cuLaunchKernelEx that records what it was given: the launcher's
generated code hands it the real CUlaunchConfig struct (grid, block, smem, stream, cluster
attribute as cuda.bindings laid them out), the function handle and the packed void**."""

import ctypes
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from runtime_fakes import CAIArray, Tensor, TorchStream
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


def native_launcher(module, abi, result=0):
    """A launcher whose fast path calls the native entry, bound to the recording stand-in."""
    module.set_entry(module.recording_entry(result))
    launcher = Launcher(abi, ptx=".version 8.0\n.target sm_90a\n")

    def no_bindings_call(*args):  # the cuda.bindings path must not be taken
        raise AssertionError("cuda.bindings' cuLaunchKernelEx called on the native path")

    launcher._install(LoadedKernel(abi.entry, None, None, HANDLE, 0, 0, 0), no_bindings_call,
                      module.launch)
    return launcher


def packed(launcher, n_params):
    """The bytes behind each of the launcher's void** slots, read as the driver reads them."""
    ptrs = (ctypes.c_void_p * n_params).from_address(launcher.pack.address)
    return [ctypes.string_at(ptrs[i], p.size) for i, p in enumerate(launcher.abi.params)]


def test_native_entry_receives_config_handle_and_params(module):
    launcher = native_launcher(module, ADD)
    assert "native(cfg_address, handle_address," in launcher.source
    assert "launch_ex(" not in launcher.source
    x, y = Tensor(0x7000_0000, (1000,)), CAIArray(0x7000_1000, (1000,), "<f4")
    launcher.launch((8,), [x, y, 1000, 2.0])
    seen = module.last_recorded()
    assert seen["calls"] == 1
    assert seen["grid"] == (8, 1, 1) and seen["block"] == (128, 1, 1)
    assert seen["shared_bytes"] == 0 and seen["stream"] == 0 and seen["num_attrs"] == 0
    assert seen["function"] == HANDLE and seen["params"] == launcher.pack.address
    assert seen["first_param"] == 0x7000_0000
    assert packed(launcher, 4) == [struct.pack("<Q", 0x7000_0000), struct.pack("<Q", 0x7000_1000),
                                   struct.pack("<I", 1000), struct.pack("<f", 2.0)]
    # a new grid and stream reach the struct the C side reads
    launcher.launch((3, 2), [y, x, 7, np.float32(0.5)], stream=TorchStream(0xABC))
    seen = module.last_recorded()
    assert seen["calls"] == 2 and seen["grid"] == (3, 2, 1) and seen["stream"] == 0xABC
    assert seen["first_param"] == 0x7000_1000


def test_native_entry_sees_cluster_attribute_and_dynamic_smem(module):
    abi = KernelABI(entry="k", params=(P("x", "pointer", "fp32", 8),), threads_per_cta=384,
                    num_warps=12, shared_bytes=200_000, cluster=(2, 1, 1))
    launcher = native_launcher(module, abi)
    launcher.launch((4, 3), [Tensor(0x7100_0000, (16,))])
    seen = module.last_recorded()
    assert seen["grid"] == (4, 3, 1) and seen["block"] == (384, 1, 1)
    assert seen["shared_bytes"] == 200_000 and seen["num_attrs"] == 1


def test_empty_grid_launches_nothing(module):
    launcher = native_launcher(module, ADD)
    launcher.launch((0,), [Tensor(0x7000_0000, (1,)), Tensor(0x7000_0000, (1,)), 1, 1.0])
    assert module.last_recorded()["calls"] == 0


def test_driver_error_from_native_entry_names_kernel_and_error(module):
    launcher = native_launcher(module, ADD, result=1)  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(TLXRuntimeError) as err:
        launcher.launch((8,), [Tensor(0x7000_0000, (1,)), Tensor(0x7000_0000, (1,)), 1, 1.0])
    text = str(err.value)
    assert "CUDA_ERROR_INVALID_VALUE" in text and "add" in text and "grid (8, 1, 1)" in text


def test_bad_argument_still_caught_before_the_native_call(module):
    launcher = native_launcher(module, ADD)
    with pytest.raises(TLXRuntimeError, match="'n'"):
        launcher.launch((1,), [Tensor(0x7000_0000, (1,)), Tensor(0x7000_0000, (1,)), -1, 1.0])
    assert module.last_recorded()["calls"] == 0


def test_launch_checks_its_arguments(module):
    with pytest.raises(TypeError):
        module.launch(1, 2)
    with pytest.raises(TypeError):
        module.launch("config", 2, 3)


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
    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TLX_NATIVE_LAUNCH", raising=False)
    assert native_launch.entry() is None
    assert "no C compiler" in native_launch.status()
    assert native_launch.status().startswith("cuda.bindings")


def test_two_processes_building_at_once_both_load_a_whole_module(tmp_path):
    code = textwrap.dedent(f"""
        import ctypes
        from pathlib import Path
        from tlx.runtime import native_launch
        m = native_launch.load_module(Path({str(tmp_path)!r}))
        m.set_entry(m.recording_entry(7))
        config = ctypes.create_string_buffer(56)  # a zeroed CUlaunchConfig
        print(m.launch(ctypes.addressof(config), 2, 0))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == "7"
    built = [f for f in os.listdir(tmp_path) if f.startswith("native_launch-")]
    assert built == [native_launch.module_path(tmp_path).name]  # no temporary file left behind

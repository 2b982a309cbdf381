"""The launcher on its Python packer (cuda.bindings' path, ``TLX_NATIVE_LAUNCH=0``), with the
driver call replaced by a recorder: it packs exactly the ABI's bytes, sets grid/stream/cluster in
the CUlaunchConfig, and turns every bad argument into an error naming the parameter. Without a
GPU, a launch says so. (tests/test_runtime_native_launch.py holds the native launch to the same
bytes.)"""

import ctypes
import struct

import numpy as np
import pytest

from runtime_fakes import CAIArray, Tensor, TorchStream
from tlx.compiler.abi import KernelABI, ParamABI, TMAEncoding
from tlx.runtime import tma
from tlx.runtime.errors import NoCUDADeviceError, TLXRuntimeError
from tlx.runtime.launcher import Launcher
from tlx.runtime.loader import LoadedKernel, check_device_can_run, ptx_target
from tlx.runtime.tma import TensorDescriptor


def P(name, kind, dtype, size, **kw):
    return ParamABI(name, kind, dtype, size, min(size, 64), **kw)


ADD = KernelABI(entry="add", params=(P("x", "pointer", "fp32", 8), P("y", "pointer", "fp32", 8),
                                     P("n", "scalar", "u32", 4), P("alpha", "scalar", "fp32", 4)),
                threads_per_cta=128, num_warps=4, shared_bytes=0)


class Recorder:
    """Stands in for cuLaunchKernelEx: records the config and the parameter bytes."""

    def __init__(self, layout_sizes):
        self.calls = []
        self.sizes = layout_sizes
        self.result = (0,)

    def __call__(self, cfg, handle, params, extra):
        ptrs = (ctypes.c_void_p * max(len(self.sizes), 1)).from_address(params)
        blobs = [ctypes.string_at(ptrs[i], n) for i, n in enumerate(self.sizes)]
        cluster = None
        if cfg.numAttrs:
            dims = cfg.attrs[0].value.clusterDim
            cluster = (dims.x, dims.y, dims.z)
        self.calls.append({"grid": (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
                           "block": (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ),
                           "smem": cfg.sharedMemBytes, "stream": int(cfg.hStream),
                           "nattrs": cfg.numAttrs, "cluster": cluster, "handle": handle, "params": blobs})
        return self.result


def installed(abi):
    launcher = Launcher(abi, ptx=".version 8.0\n.target sm_90a\n")
    rec = Recorder([p.size for p in abi.params])
    launcher.install(LoadedKernel(abi.entry, None, None, "HANDLE", 0, 0, 0), None, rec)
    return launcher, rec


def test_add_kernel_packs_pointers_and_typed_scalars():
    launcher, rec = installed(ADD)
    x, y = Tensor(0x7000_0000, (1000,)), CAIArray(0x7000_1000, (1000,), "<f4")
    launcher.launch((8,), [x, y, 1000, 2.0])
    call = rec.calls[-1]
    assert call["grid"] == (8, 1, 1) and call["block"] == (128, 1, 1)
    assert call["smem"] == 0 and call["stream"] == 0 and call["handle"] == "HANDLE"
    assert call["params"] == [struct.pack("<Q", 0x7000_0000), struct.pack("<Q", 0x7000_1000),
                              struct.pack("<I", 1000), struct.pack("<f", 2.0)]
    # the next launch changes values and grid; the buffer follows
    launcher.launch((3, 2), [y, x, 7, np.float32(0.5)], stream=TorchStream(0xABC))
    call = rec.calls[-1]
    assert call["grid"] == (3, 2, 1) and call["stream"] == 0xABC
    assert call["params"] == [struct.pack("<Q", 0x7000_1000), struct.pack("<Q", 0x7000_0000),
                              struct.pack("<I", 7), struct.pack("<f", 0.5)]
    assert len(rec.calls) == 2


def test_wrong_argument_count():
    launcher, rec = installed(ADD)
    with pytest.raises(TLXRuntimeError, match=r"takes 4 arguments \(x, y, n, alpha\), got 3"):
        launcher.launch((1,), [Tensor(0, (1,)), Tensor(0, (1,)), 3])
    assert rec.calls == []


def test_wrong_pointer_dtype():
    launcher, rec = installed(ADD)
    with pytest.raises(TLXRuntimeError, match="parameter 'y' is a pointer to fp32, but the array "
                                              "passed holds fp16"):
        launcher.launch((1,), [Tensor(0, (1,)), Tensor(0, (1,), "float16"), 3, 1.0])
    assert rec.calls == []


def test_out_of_range_scalar_names_the_parameter():
    launcher, rec = installed(ADD)
    x = Tensor(0x1000, (1,))
    with pytest.raises(TLXRuntimeError, match=r"parameter 'n' \(u32\): -1 is out of range for u32"):
        launcher.launch((1,), [x, x, -1, 1.0])
    with pytest.raises(TLXRuntimeError, match=r"parameter 'n' \(u32\): expected an integer"):
        launcher.launch((1,), [x, x, 2.5, 1.0])
    with pytest.raises(TLXRuntimeError, match=r"parameter 'alpha' \(fp32\).*out of range"):
        launcher.launch((1,), [x, x, 1, 1e300])
    assert rec.calls == []


def test_host_array_argument_is_refused():
    launcher, rec = installed(ADD)
    with pytest.raises(TLXRuntimeError, match="host array.*\n.*host_copy"):
        launcher.launch((1,), [np.zeros(4, np.float32), Tensor(0, (1,)), 4, 1.0])


def test_grid_rules():
    launcher, rec = installed(ADD)
    x = Tensor(0x1000, (1,))
    launcher.launch(5, [x, x, 1, 1.0])
    assert rec.calls[-1]["grid"] == (5, 1, 1)
    launcher.launch((0, 4), [x, x, 1, 1.0])   # empty grid: nothing launched, as in Triton
    assert len(rec.calls) == 1
    launcher.launch((2, 3, 4), [x, x, 1, 1.0])
    assert rec.calls[-1]["grid"] == (2, 3, 4)
    for bad, words in [((1, 2, 3, 4), "1 to 3 dimensions"), ((1, 70000), "outside 0..65535"),
                       ((-1,), "outside"), (lambda meta: (1,), "resolve a grid callable"),
                       ((1.5,), "tuple of 1 to 3 integers")]:
        with pytest.raises(TLXRuntimeError, match=words):
            launcher.launch(bad, [x, x, 1, 1.0])


def test_cluster_launch():
    abi = KernelABI(entry="c", params=(P("out", "pointer", "i32", 8),), threads_per_cta=64,
                    num_warps=2, shared_bytes=100 * 1024, cluster=(2, 1, 1))
    launcher, rec = installed(abi)
    launcher.launch((8,), [Tensor(0x4000, (8,), "int32")])
    call = rec.calls[-1]
    assert call["grid"] == (8, 1, 1) and call["nattrs"] == 1 and call["smem"] == 100 * 1024
    assert call["cluster"] == (2, 1, 1)
    with pytest.raises(TLXRuntimeError, match="not a multiple of the cluster dimension 2"):
        launcher.launch((7,), [Tensor(0x4000, (8,), "int32")])


def test_grid_in_clusters_convention():
    abi = KernelABI(entry="c", params=(), threads_per_cta=32, num_warps=1, shared_bytes=0,
                    cluster=(2, 1, 1), extra={"grid_unit": "cluster"})
    launcher, rec = installed(abi)
    launcher.launch((4,), [])
    assert rec.calls[-1]["grid"] == (8, 1, 1)


def test_descriptor_parameter(monkeypatch):
    maps = []

    class FakeMap:
        def __init__(self, ptr):
            self.buf = (ctypes.c_uint8 * 128)(*([len(maps) + 1] * 128))
            maps.append(self)

        def getPtr(self):
            return ctypes.addressof(self.buf)

    monkeypatch.setattr(tma, "encode_tiled", lambda enc, ptr, kernel=None: FakeMap(ptr))
    monkeypatch.setattr(tma.DescriptorEncoder, "_replace_address", lambda self, m, p: None)
    enc = TMAEncoding("fp16", 2, (64, 64), (64, 64), 128)
    abi = KernelABI(entry="tma", params=(P("d", "tensordesc", "fp16", 128, tma=enc),
                                         P("n", "scalar", "i32", 4)),
                    threads_per_cta=128, num_warps=4, shared_bytes=64 * 1024)
    launcher, rec = installed(abi)
    a = Tensor(0x10000, (128, 64), "float16")
    launcher.launch((2,), [TensorDescriptor(a, [128, 64], [64, 1], [64, 64]), 5])
    assert rec.calls[-1]["params"] == [bytes([1] * 128), struct.pack("<i", 5)]
    launcher.launch((2,), [TensorDescriptor(a, [64, 64], [64, 1], [64, 64]), 6])
    assert rec.calls[-1]["params"] == [bytes([2] * 128), struct.pack("<i", 6)]
    with pytest.raises(tma.TMARuleError, match="block-shape"):
        launcher.launch((2,), [TensorDescriptor(a, [64, 64], [64, 1], [32, 64]), 6])


def test_driver_error_names_kernel_call_and_shape():
    launcher, rec = installed(ADD)
    from cuda.bindings import driver as drv

    rec.result = (drv.CUresult.CUDA_ERROR_INVALID_VALUE,)
    x = Tensor(0x1000, (1,))
    with pytest.raises(TLXRuntimeError) as e:
        launcher.launch((4,), [x, x, 1, 1.0])
    text = str(e.value)
    assert text.startswith("kernel 'add': cuLaunchKernelEx failed: CUDA_ERROR_INVALID_VALUE")
    assert "grid (4, 1, 1)" in text and "block (128, 1, 1)" in text
    assert e.value.call == "cuLaunchKernelEx" and e.value.cuda_error == "CUDA_ERROR_INVALID_VALUE"


def test_hidden_non_pointer_params_are_refused():
    abi = KernelABI(entry="h", params=(P("s", "scalar", "i32", 4, hidden=True),),
                    threads_per_cta=32, num_warps=1, shared_bytes=0)
    with pytest.raises(TLXRuntimeError, match="hidden parameter 's'"):
        Launcher(abi, ptx="x")


def test_hidden_scratch_pointer_is_null_without_scratch():
    abi = KernelABI(entry="h", params=(P("x", "pointer", "fp32", 8),
                                       P("scratch", "pointer", "i8", 8, hidden=True)),
                    threads_per_cta=32, num_warps=1, shared_bytes=0)
    launcher, rec = installed(abi)
    launcher.launch((1,), [Tensor(0x2000, (1,))])   # the user passes only x
    assert rec.calls[-1]["params"] == [struct.pack("<Q", 0x2000), struct.pack("<Q", 0)]


def test_global_scratch_comes_from_the_allocator_set_with_set_allocator():
    """Triton's set_allocator: the launch asks fn(size, alignment, stream) for its scratch (128 bytes
    of descriptor per program here), passes that address as the hidden pointer, and drops the
    buffer once the kernel is queued; a misaligned buffer is refused; None restores the default."""
    import tlx

    abi = KernelABI(entry="h", params=(P("x", "pointer", "fp32", 8),
                                       P("scratch", "pointer", "i8", 8, hidden=True)),
                    threads_per_cta=32, num_warps=1, shared_bytes=0, scratch_bytes_per_program=128)
    launcher, rec = installed(abi)
    asked = []

    class Buffer:
        def __init__(self, addr):
            self.addr = addr

        def data_ptr(self):
            return self.addr

    def alloc(size, alignment, stream):
        asked.append((size, alignment, stream))
        return Buffer(0x7000_0000)

    tlx.set_allocator(alloc)
    try:
        launcher.launch((3, 2), [Tensor(0x2000, (1,))], stream=0x55)
        assert asked == [(128 * 6, 128, 0x55)]  # 6 programs
        assert rec.calls[-1]["params"] == [struct.pack("<Q", 0x2000), struct.pack("<Q", 0x7000_0000)]
        tlx.set_allocator(lambda size, alignment, stream: Buffer(0x7000_0040))
        with pytest.raises(TLXRuntimeError, match="not 128-byte aligned"):
            launcher.launch((1,), [Tensor(0x2000, (1,))], stream=0x55)
        with pytest.raises(TLXRuntimeError, match="needs a function"):
            tlx.set_allocator(42)
    finally:
        tlx.set_allocator(None)
    assert tlx.runtime.get_allocator() is None


def test_ptx_target_and_device_check():
    assert ptx_target(".version 8.0\n.target sm_90a\n.address_size 64") == "sm_90a"
    assert ptx_target("no target") is None
    check_device_can_run("sm_90a", (9, 0), "k")
    check_device_can_run("sm_80", (9, 0), "k")
    with pytest.raises(TLXRuntimeError, match="runs only on compute capability 9.0; this GPU is 8.9"):
        check_device_can_run("sm_90a", (8, 9), "k")
    with pytest.raises(TLXRuntimeError, match="runs only on compute capability 9.0; this GPU is 10.0"):
        check_device_can_run("sm_90a", (10, 0), "k")
    with pytest.raises(TLXRuntimeError, match="only 7.5"):
        check_device_can_run("sm_80", (7, 5), "k")


def _no_gpu():
    try:
        from numba import cuda

        return not cuda.is_available()
    except Exception:
        return True


@pytest.mark.skipif(not _no_gpu(), reason="checks the behaviour on machines without a GPU")
def test_launch_without_a_gpu_says_so():
    launcher = Launcher(ADD, ptx=".version 8.0\n.target sm_90a\n", name="add_kernel")
    with pytest.raises(NoCUDADeviceError) as e:
        launcher.launch((1,), [Tensor(0x1000, (1,)), Tensor(0x1000, (1,)), 1, 1.0])
    text = str(e.value)
    assert text.startswith("kernel 'add_kernel': cannot launch: no CUDA device is available")
    assert "hint:" in text and "NVIDIA GPU" in text
    with pytest.raises(NoCUDADeviceError):
        launcher.load()


@pytest.mark.skipif(not _no_gpu(), reason="checks the behaviour on machines without a GPU")
def test_driver_calls_without_a_gpu_say_so():
    from tlx.runtime import driver

    with pytest.raises(NoCUDADeviceError, match="no CUDA device"):
        driver.call("cuInit", 0, kernel="k")
    enc = tma.tiled_encoding("fp16", [64, 64], [64, 1], TMAEncoding("fp16", 2, (64, 64), (64, 64), 128))
    with pytest.raises(NoCUDADeviceError, match="kernel 'k'"):
        tma.encode_tiled(enc, 0x10000, kernel="k")


def test_import_does_not_load_the_driver():
    import subprocess
    import sys

    # What tlx.runtime itself adds on top of `import tlx` must not include the driver layers.
    code = ("import sys, tlx; before = set(sys.modules); import tlx.runtime; "
            "bad = [m for m in set(sys.modules) - before "
            "if m.startswith(('numba', 'cuda.bindings', 'cuda.core'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_grid_given_as_a_list_is_read_every_time():
    launcher, rec = installed(ADD)
    x = Tensor(0x1000, (1,))
    grid = [2]
    launcher.launch(grid, [x, x, 1, 1.0])
    grid[0] = 5
    launcher.launch(grid, [x, x, 1, 1.0])
    assert [c["grid"] for c in rec.calls] == [(2, 1, 1), (5, 1, 1)]


def test_cai_arrays_with_a_producer_stream_are_ordered(monkeypatch):
    from tlx.runtime import arrays

    waits = []
    monkeypatch.setattr(arrays, "_wait_for_producer", lambda prod, s: waits.append((prod, s)))
    launcher, rec = installed(ADD)
    x = CAIArray(0x1000, (4,), stream=0x55)
    launcher.launch((1,), [x, x, 4, 1.0], stream=0x66)
    assert waits == [(0x55, 0x66), (0x55, 0x66)] and rec.calls[-1]["stream"] == 0x66


def test_host_copy_takes_the_staging_path(monkeypatch):
    from tlx.runtime import host_copy

    launcher, rec = installed(ADD)
    staged = []
    monkeypatch.setattr(Launcher, "_stage", lambda self, host, s, done: staged.append((host, s)) or 0x5500)
    monkeypatch.setattr(Launcher, "_finish_staging", lambda self, done, s: staged.append(("synchronized", s)))
    hc = host_copy(np.zeros(3, np.float32))
    launcher.launch((1,), [hc, Tensor(0x1000, (3,)), 3, 1.0], stream=0x22)
    assert staged == [(hc, 0x22)]  # nothing was staged for real, so nothing to wait for
    assert rec.calls[-1]["params"][0] == struct.pack("<Q", 0x5500)
    with pytest.raises(TLXRuntimeError, match="parameter 'y' is a pointer to fp32"):
        launcher.launch((1,), [hc, host_copy(np.zeros(3, np.int32)), 3, 1.0])


def test_other_threads_launch_through_their_own_buffer():
    import threading

    launcher, rec = installed(ADD)
    x, y = Tensor(0x1000, (1,)), Tensor(0x2000, (1,))
    launcher.launch((1,), [x, y, 1, 1.0])
    seen = []
    together = threading.Barrier(2)   # both alive at once: distinct thread idents

    def work(n):
        together.wait()
        for _ in range(20):
            launcher.launch((n,), [y, x, n, 2.0])
            launcher.launch((n,), [Tensor(0x3000, (1,)), Tensor(0x4000, (1,)), n, 3.0])
        seen.append(launcher._local.pack.address)
        together.wait()

    threads = [threading.Thread(target=work, args=(n,)) for n in (2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    addrs = {c["params"][0] for c in rec.calls}
    assert len(rec.calls) == 81 and addrs == {struct.pack("<Q", a) for a in (0x1000, 0x2000, 0x3000)}
    assert len(set(seen)) == 2 and launcher._local.pack.address not in seen  # a buffer per thread
    for n in (2, 3):   # each thread's calls carry its own n and grid
        mine = [c for c in rec.calls if c["grid"] == (n, 1, 1)]
        assert [c["params"][2] for c in mine] == [struct.pack("<I", n)] * 40


def _import_fake_torch(monkeypatch):
    """A `torch` in sys.modules whose Tensor is runtime_fakes.Tensor."""
    import sys
    import types

    mod = types.ModuleType("torch")
    mod.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", mod)
    monkeypatch.setattr("tlx.runtime.streams._TORCH_STREAM", None)


def test_torch_tensors_keep_every_check(monkeypatch):
    _import_fake_torch(monkeypatch)
    launcher, rec = installed(ADD)
    x, y = Tensor(0x7000_0000, (10,)), Tensor(0x7000_1000, (10,))
    launcher.launch((2,), [x, y, 10, 0.25], stream=0)
    launcher.launch((2,), [y, x, 11, 0.5], stream=0)
    assert [c["params"] for c in rec.calls] == [
        [struct.pack("<Q", 0x7000_0000), struct.pack("<Q", 0x7000_1000), struct.pack("<I", 10), struct.pack("<f", 0.25)],
        [struct.pack("<Q", 0x7000_1000), struct.pack("<Q", 0x7000_0000), struct.pack("<I", 11), struct.pack("<f", 0.5)]]
    with pytest.raises(TLXRuntimeError, match="parameter 'y' is a pointer to fp32, but the array "
                                              "passed holds fp16"):
        launcher.launch((1,), [x, Tensor(0, (1,), "float16"), 3, 1.0])
    with pytest.raises(TLXRuntimeError, match="parameter 'x' is a pointer to fp32, but the array "
                                              "passed holds i8"):
        launcher.launch((1,), [Tensor(0, (1,), "int8"), y, 3, 1.0])  # a dtype seen for the first time
    with pytest.raises(TLXRuntimeError, match="torch tensor on 'cpu'"):
        launcher.launch((1,), [x, Tensor(0x9000, (1,), cuda=False), 3, 1.0])
    with pytest.raises(TLXRuntimeError, match="torch dtype torch.complex64 has no kernel type"):
        launcher.launch((1,), [x, Tensor(0x9000, (1,), "complex64"), 3, 1.0])
    with pytest.raises(TLXRuntimeError, match=r"takes 4 arguments \(x, y, n, alpha\), got 5"):
        launcher.launch((1,), [x, y, 3, 1.0, 2])
    assert len(rec.calls) == 2
    launcher.launch((1,), [x, Tensor(0x9000, (1,), cuda=False, pinned=True), 3, 1.0], stream=0)
    assert rec.calls[-1]["params"][1] == struct.pack("<Q", 0x9000)


_NO_GPU_SCRIPT = '''
import os
import numpy as np, tlx, tlx.language as tl

@tlx.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr = 256):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

x = np.arange(1000, dtype=np.float32)
out = np.zeros_like(x)
if hasattr(copy, "warmup"):
    assert "st.global" in copy.warmup(x, out, 1000, grid=(4,)).asm["ptx"]
if os.environ.get("TLX_INTERPRET"):
    copy[(4,)](x, out, 1000)
else:  # (device copies of host arrays: a launch that only lacks the GPU)
    copy[(4,)](tlx.host_copy(x), tlx.host_copy(out), 1000)
assert (out == x).all()
print("ran")
'''


@pytest.mark.skipif(not _no_gpu(), reason="checks the behaviour on machines without a GPU")
def test_the_no_gpu_error_is_one_clear_error_whose_suggestions_work(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "launch_without_gpu.py"
    script.write_text(_NO_GPU_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TLX_INTERPRET"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "ran" not in r.stdout
    err = r.stderr
    assert err.count("Traceback") == 1, err  # no chain of numba's internals
    assert "During handling" not in err and "direct cause" not in err and "numba_cuda" not in err, err
    last = err.strip().splitlines()[-2:]
    assert last[0].startswith("tlx.runtime.errors.NoCUDADeviceError: kernel 'copy': cannot launch: "
                              "no CUDA device is available ("), last
    assert "TLX_INTERPRET=1" in last[1] and "kernel.warmup(" in last[1], last
    # what it suggests works: the script compiled with warmup above; TLX_INTERPRET=1 runs it
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env={**env, "TLX_INTERPRET": "1"})
    assert r.returncode == 0 and r.stdout.strip() == "ran", r.stderr

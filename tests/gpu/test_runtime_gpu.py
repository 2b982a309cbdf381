"""tlx.runtime alone on the GPU (no frontend, no code generator): the hand-written PTX kernels of
tests/kernels/runtime_ptx.py loaded and launched through `tlx.runtime.Launcher` and checked
against numpy; outputs are poisoned (NaN) first. CI assembles the same PTX and checks its ABIs
(tests/test_runtime_ptx_kernels.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from kernels.runtime_ptx import PTX, abis, launcher

pytestmark = pytest.mark.gpu


def rel_err(got, want) -> float:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30)))


def test_a_cubin_assembled_by_ptxas_loads_and_computes_what_its_ptx_does():
    import torch

    from tlx.compiler.ptxas import assemble
    from tlx.runtime import Launcher

    cubin = assemble(PTX["add"])[0]
    n = 1000
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    for la in (launcher("add", "add"), Launcher(abis()["add"], cubin=cubin)):
        out = torch.full((n,), float("nan"), device="cuda")
        la.launch(((n + 127) // 128,), [x, y, out, n, 3.0])
        torch.cuda.synchronize()
        assert rel_err(out.cpu().numpy(), x.cpu().numpy().astype("f8") + 3.0 * y.cpu().numpy()) < 1e-6


@pytest.mark.parametrize("n", [1, 1000, 4096, 100_003])
def test_pointer_u32_and_f32_arguments_reach_the_kernel(n):
    import torch

    la = launcher("add", "add")
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n + 64,), float("nan"), device="cuda")  # poisoned, with a guard tail
    alpha = float(np.random.uniform(-3, 3))
    la.launch(((n + 127) // 128,), [x, y, out, n, alpha])
    torch.cuda.synchronize()
    o = out.cpu().numpy()
    want = x.cpu().numpy().astype(np.float64) + np.float64(np.float32(alpha)) * y.cpu().numpy()
    assert rel_err(o[:n], want) < 2e-6
    assert np.isnan(o[n:]).all(), "the kernel wrote past n"


@pytest.mark.parametrize("bad", [-1, 2 ** 32, 2.5])
def test_a_scalar_out_of_its_parameter_range_is_refused(bad):
    import torch

    from tlx.runtime import TLXRuntimeError

    x = torch.zeros(4, device="cuda")
    with pytest.raises(TLXRuntimeError, match="parameter 'n'"):
        launcher("add", "add").launch((1,), [x, x, x, bad, 1.0])


def test_an_array_of_the_wrong_dtype_is_refused():
    import torch

    from tlx.runtime import TLXRuntimeError

    x = torch.zeros(4, device="cuda")
    with pytest.raises(TLXRuntimeError):
        launcher("add", "add").launch((1,), [x, x, x.to(torch.float16), 4, 1.0])


@pytest.mark.parametrize("rows,cols,pitch", [(64, 64, 64), (100, 72, 80), (33, 200, 208), (256, 128, 136)])
def test_tma_reads_a_padded_ragged_tile_into_80_kb_of_dynamic_shared_memory(rows, cols, pitch):
    import torch

    from tlx.runtime import TensorDescriptor

    lt = launcher("tma_read", "tma_read")
    base = torch.randn(rows, pitch, device="cuda")
    out = torch.full((rows, cols), float("nan"), device="cuda")
    lt.launch(((cols + 31) // 32, (rows + 31) // 32), [TensorDescriptor(base, [rows, cols], [pitch, 1], [32, 32]),
                                                       out, rows, cols])
    torch.cuda.synchronize()
    assert np.array_equal(out.cpu().numpy(), base.cpu().numpy()[:, :cols])


def test_tma_round_trip_with_128_byte_swizzle_encodes_each_shape_once():
    import torch

    from tlx.runtime import TensorDescriptor

    lr = launcher("tma_roundtrip", "tma_roundtrip")
    for rows, cols in ((128, 128), (200, 136), (64, 320)):
        for rep in range(2):  # the second tensor of a shape only replaces the descriptor's address
            src = torch.randn(rows, cols, device="cuda").to(torch.float16)
            dst = torch.full((rows, cols), float("nan"), device="cuda", dtype=torch.float16)
            lr.launch(((cols + 63) // 64, (rows + 63) // 64),
                      [TensorDescriptor(src, [rows, cols], [cols, 1], [64, 64]),
                       TensorDescriptor(dst, [rows, cols], [cols, 1], [64, 64])])
            torch.cuda.synchronize()
            assert torch.equal(src, dst), (rows, cols, rep)
    assert lr.encoders[0].encodes == 3 and lr.encoders[1].encodes == 3


def test_a_cluster_launch_gives_each_cta_its_rank():
    import torch

    out = torch.full((8,), -1, device="cuda", dtype=torch.int32)
    launcher("cluster_ids", "cluster").launch((8,), [out])
    torch.cuda.synchronize()
    # cluster_ctarank | clusterid.x << 8 | cluster_nctarank << 16, clusters of 2
    assert out.cpu().tolist() == [(i % 2) | ((i // 2) << 8) | (2 << 16) for i in range(8)]


def test_torch_numba_and_dlpack_arrays_on_each_kind_of_stream():
    import torch
    from numba import cuda as ncuda

    la = launcher("add", "add")
    n = 5000
    grid = ((n + 127) // 128,)
    xh, yh = np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32)
    want = xh.astype(np.float64) + 2.0 * yh

    def ok(name, got):
        assert rel_err(got, want) < 2e-6, name

    xt, yt = torch.from_numpy(xh).cuda().requires_grad_(True), torch.from_numpy(yh).cuda()
    out = torch.full((n,), float("nan"), device="cuda")
    la.launch(grid, [xt, yt, out, n, 2.0])
    torch.cuda.synchronize()
    ok("torch", out.cpu().numpy())
    s = torch.cuda.Stream()
    for name, stream in (("torch stream", s), ("raw handle", s.cuda_stream)):
        out.fill_(float("nan"))
        torch.cuda.synchronize()
        la.launch(grid, [xt, yt, out, n, 2.0], stream=stream)
        s.synchronize()
        ok(name, out.cpu().numpy())

    class StreamProtocol:
        def __init__(self, handle):
            self.handle = handle

        def __cuda_stream__(self):
            return (0, self.handle)

    out.fill_(float("nan"))
    torch.cuda.synchronize()
    la.launch(grid, [xt, yt, out, n, 2.0], stream=StreamProtocol(s.cuda_stream))
    s.synchronize()
    ok("__cuda_stream__", out.cpu().numpy())

    class DLPackOnly:  # a producer that exports DLPack and nothing else
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kw):
            return self.t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    out.fill_(float("nan"))
    torch.cuda.synchronize()
    la.launch(grid, [DLPackOnly(xt.detach()), DLPackOnly(yt), DLPackOnly(out), n, 2.0])
    torch.cuda.synchronize()
    ok("dlpack", out.cpu().numpy())

    xn, yn = ncuda.to_device(xh), ncuda.to_device(yh)
    on = ncuda.to_device(np.full(n, np.nan, np.float32))
    ns = ncuda.stream()
    la.launch(grid, [xn, yn, on, n, 2.0], stream=ns)
    ns.synchronize()
    ok("numba", on.copy_to_host())


def test_cupy_arrays_on_a_cupy_stream():
    cp = pytest.importorskip("cupy")
    n = 5000
    xh, yh = np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32)
    oc = cp.full(n, cp.nan, dtype=cp.float32)
    cs = cp.cuda.Stream(non_blocking=True)
    launcher("add", "add").launch(((n + 127) // 128,), [cp.asarray(xh), cp.asarray(yh), oc, n, 2.0], stream=cs)
    cs.synchronize()
    assert rel_err(cp.asnumpy(oc), xh.astype(np.float64) + 2.0 * yh) < 2e-6


def test_host_arrays_are_copied_in_and_back_only_when_asked():
    from tlx.runtime import host_copy

    n = 3000
    x, y = np.random.randn(n).astype(np.float32), np.random.randn(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    launcher("add", "add").launch(((n + 127) // 128,), [host_copy(x, False), host_copy(y, False), host_copy(out), n, 0.5])
    assert rel_err(out, x.astype(np.float64) + 0.5 * y) < 2e-6


def test_bad_launches_are_refused_with_a_clear_error():
    import torch

    from tlx.compiler.abi import KernelABI
    from tlx.runtime import Launcher, TensorDescriptor, TLXRuntimeError
    from tlx.runtime.tma import TMARuleError

    x = torch.zeros(8, device="cuda")
    with pytest.raises(TLXRuntimeError, match=r"x\.cuda\(\)"):
        launcher("add", "add").launch((1,), [x.cpu(), x, x, 8, 1.0])
    base = torch.zeros(64 * 65, device="cuda")
    with pytest.raises(TMARuleError):  # a base 4 bytes past a 16-byte boundary
        launcher("tma_read", "tma_read").launch((1, 1), [TensorDescriptor(base[1:], [64, 64], [64, 1], [32, 32]),
                                                         torch.zeros(64, 64, device="cuda"), 64, 64])
    add = abis()["add"]
    big = KernelABI(add.entry, add.params, add.threads_per_cta, add.num_warps, 300 * 1024)
    with pytest.raises(TLXRuntimeError, match="more than the"):
        Launcher(big, ptx=PTX["add"]).load()


def test_a_launch_from_a_new_thread_finds_its_context():
    import torch

    la = launcher("add", "add")
    la.load()
    n = 256
    x = torch.ones(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    errors = []

    def work():
        try:
            la.launch((2,), [x, x, out, n, 1.0])
        except Exception as exc:  # reported from the main thread
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join(30)
    torch.cuda.synchronize()
    assert not errors and bool((out == 2.0).all()), errors

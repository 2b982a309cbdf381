#!/usr/bin/env python3
"""GPU smoke test of tlx.runtime alone (no frontend, no code generator): hand-written PTX kernels
loaded and launched through `tlx.runtime.Launcher`, checked against numpy, then launch overhead
timed against raw cuLaunchKernelEx and Triton on the same machine. Prints one table last.

Run from the repository root on the GPU machine (nothing needs installing)::

    python3 scripts/gpu_runtime_smoke.py            # every check, each in its own subprocess
    python3 scripts/gpu_runtime_smoke.py --check add --inline   # one check, in this process

Each check runs in a subprocess with a timeout (a hung kernel cannot hang the run), inside
try/except, and reports one JSON line; the parent prints every result, then the table.

Checks: load (PTX and ptxas cubin), add (pointer/u32/f32), scalars (range errors), tma_read
(2-D TMA through a 128-byte by-value descriptor, 80 KB dynamic smem, padded pitch, ragged
edges), tma_roundtrip (128B swizzle, TMA load + TMA store, descriptor cache address
replacement), cluster (grid 8, cluster 2), interop (torch/CuPy/numba arrays, DLPack, streams
of each kind), host_copy, errors (CPU tensor, misaligned descriptor, >optin smem), thread
(launch from a fresh thread), overhead (µs per launch, 7 paths).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from typing import Any, Callable, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------------------------
# The PTX (also assembled by ptxas in CI: tests/test_runtime_smoke_ptx.py).

PTX_HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n\n"

PTX_EMPTY = PTX_HEADER + """
.visible .entry empty()
{
    ret;
}

.visible .entry empty4(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)
{
    ret;
}
"""

# out[i] = x[i] + alpha * y[i] for i < n
PTX_ADD = PTX_HEADER + """
.visible .entry add(.param .u64 x, .param .u64 y, .param .u64 out, .param .u32 n,
                    .param .f32 alpha)
{
    .reg .pred %p;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<5>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    ld.param.u32 %r1, [n];
    ld.param.f32 %f1, [alpha];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p, %r5, %r1;
    @%p bra DONE;
    mul.wide.u32 %rd4, %r5, 4;
    add.u64 %rd5, %rd1, %rd4;
    add.u64 %rd6, %rd2, %rd4;
    add.u64 %rd7, %rd3, %rd4;
    ld.global.f32 %f2, [%rd5];
    ld.global.f32 %f3, [%rd6];
    fma.rn.f32 %f4, %f1, %f3, %f2;
    st.global.f32 [%rd7], %f4;
DONE:
    ret;
}
"""

# out[ctaid.x] = cluster_ctarank | clusterid.x << 8 | cluster_nctarank << 16
PTX_CLUSTER = PTX_HEADER + """
.visible .entry cluster_ids(.param .u64 out)
{
    .reg .pred %p;
    .reg .b32 %r<7>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    setp.ne.u32 %p, %r2, 0;
    @%p bra DONE;
    mov.u32 %r3, %cluster_ctarank;
    mov.u32 %r4, %clusterid.x;
    mov.u32 %r5, %cluster_nctarank;
    shl.b32 %r4, %r4, 8;
    or.b32 %r3, %r3, %r4;
    shl.b32 %r5, %r5, 16;
    or.b32 %r3, %r3, %r5;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
DONE:
    ret;
}
"""

# One 32x32 fp32 tile per CTA: TMA (no swizzle) into dynamic smem at offset 64 KB (so the
# kernel needs the >48 KB attribute), mbarrier wait, then a generic copy smem -> out[rows, cols]
# for the in-bounds elements. Checks the descriptor's dims/strides order directly.
PTX_TMA_READ = PTX_HEADER + """
.extern .shared .align 1024 .b8 dsmem[];

.visible .entry tma_read(.param .align 64 .b8 desc[128], .param .u64 out, .param .u32 rows,
                         .param .u32 cols)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .reg .f32 %f1;
    mov.b64 %rd1, desc;
    cvta.param.u64 %rd2, %rd1;
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd3, %rd3;
    ld.param.u32 %r1, [rows];
    ld.param.u32 %r2, [cols];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ctaid.y;
    shl.b32 %r6, %r4, 5;
    shl.b32 %r7, %r5, 5;
    mov.u32 %r8, dsmem;
    add.u32 %r9, %r8, 65536;
    setp.eq.u32 %p1, %r3, 0;
    @!%p1 bra INIT_DONE;
    mbarrier.init.shared::cta.b64 [%r8], 1;
    fence.mbarrier_init.release.cluster;
    fence.proxy.async.shared::cta;
INIT_DONE:
    bar.sync 0;
    @!%p1 bra ISSUED;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd4, [%r8], 4096;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r9], [%rd2, {%r6, %r7}], [%r8];
ISSUED:
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], 0;
    @!%p2 bra WAIT;
    mov.u32 %r10, 0;
COPY:
    mad.lo.u32 %r11, %r10, 128, %r3;
    shr.u32 %r12, %r11, 5;
    and.b32 %r13, %r11, 31;
    add.u32 %r14, %r7, %r12;
    add.u32 %r15, %r6, %r13;
    setp.ge.u32 %p3, %r14, %r1;
    setp.ge.or.u32 %p3, %r15, %r2, %p3;
    shl.b32 %r16, %r11, 2;
    add.u32 %r16, %r9, %r16;
    ld.shared.f32 %f1, [%r16];
    @%p3 bra SKIP;
    mad.lo.u32 %r17, %r14, %r2, %r15;
    mul.wide.u32 %rd5, %r17, 4;
    add.u64 %rd6, %rd3, %rd5;
    st.global.f32 [%rd6], %f1;
SKIP:
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p3, %r10, 8;
    @%p3 bra COPY;
    ret;
}
"""

# One 64x64 fp16 tile per CTA: TMA load with 128B swizzle into smem, then TMA store of the
# same tile through the destination descriptor. Identity on the in-bounds region.
PTX_TMA_ROUNDTRIP = PTX_HEADER + """
.extern .shared .align 1024 .b8 dsmem[];

.visible .entry tma_roundtrip(.param .align 64 .b8 src[128], .param .align 64 .b8 dst[128])
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<6>;
    mov.b64 %rd1, src;
    cvta.param.u64 %rd2, %rd1;
    mov.b64 %rd3, dst;
    cvta.param.u64 %rd4, %rd3;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ctaid.y;
    shl.b32 %r6, %r4, 6;
    shl.b32 %r7, %r5, 6;
    mov.u32 %r8, dsmem;
    add.u32 %r9, %r8, 1024;
    setp.eq.u32 %p1, %r3, 0;
    @!%p1 bra DONE;
    mbarrier.init.shared::cta.b64 [%r8], 1;
    fence.mbarrier_init.release.cluster;
    fence.proxy.async.shared::cta;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r8], 8192;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r9], [%rd2, {%r6, %r7}], [%r8];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], 0;
    @!%p2 bra WAIT;
    cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd4, {%r6, %r7}], [%r9];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
DONE:
    ret;
}
"""

SMOKE_PTX = {"empty": PTX_EMPTY, "add": PTX_ADD, "cluster": PTX_CLUSTER, "tma_read": PTX_TMA_READ,
             "tma_roundtrip": PTX_TMA_ROUNDTRIP}


# ---------------------------------------------------------------------------------------------
# ABIs of those kernels (what the code generator would produce).

def _abis() -> Dict[str, Any]:
    from tlx.compiler.abi import KernelABI, ParamABI, TMAEncoding

    def ptr(n, dt):
        return ParamABI(n, "pointer", dt, 8, 8)

    def sc(n, dt, size=4):
        return ParamABI(n, "scalar", dt, size, size)

    def desc(n, enc):
        return ParamABI(n, "tensordesc", enc.dtype, 128, 64, tma=enc)

    read_enc = TMAEncoding("fp32", 4, (32, 32), (32, 32), 0)
    rt_enc = TMAEncoding("fp16", 2, (64, 64), (64, 64), 128)
    return {
        "empty": KernelABI("empty", (), 32, 1, 0),
        "empty4": KernelABI("empty4", (ptr("a", "fp32"), ptr("b", "fp32"), ptr("c", "fp32"),
                                       sc("n", "u32")), 128, 4, 0),
        "add": KernelABI("add", (ptr("x", "fp32"), ptr("y", "fp32"), ptr("out", "fp32"),
                                 sc("n", "u32"), sc("alpha", "fp32")), 128, 4, 0),
        "cluster_ids": KernelABI("cluster_ids", (ptr("out", "i32"),), 32, 1, 0, cluster=(2, 1, 1)),
        "tma_read": KernelABI("tma_read", (desc("desc", read_enc), ptr("out", "fp32"),
                                           sc("rows", "u32"), sc("cols", "u32")),
                              128, 4, 65536 + 4096),
        "tma_roundtrip": KernelABI("tma_roundtrip", (desc("src", rt_enc), desc("dst", rt_enc)),
                                   128, 4, 1024 + 8192),
    }


def _launcher(kernel: str, ptx_key: str, **kw: Any) -> Any:
    from tlx.runtime import Launcher

    return Launcher(_abis()[kernel], ptx=SMOKE_PTX[ptx_key], **kw)


def _rel_err(got: Any, want: Any) -> float:
    import numpy as np

    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-30)))


# ---------------------------------------------------------------------------------------------
# Checks. Each returns (ok, detail[, rows]); an exception is a failure with its traceback.

def check_load() -> Any:
    import tempfile

    from tlx.runtime import Launcher

    t0 = time.perf_counter()
    la = _launcher("add", "add")
    la.load()
    t_ptx = time.perf_counter() - t0
    ptxas = "/usr/local/cuda/bin/ptxas"
    detail = f"PTX load {t_ptx * 1e3:.0f} ms"
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        open(src, "w").write(PTX_ADD)
        subprocess.run([ptxas, "-arch=sm_90a", "-o", out, src], check=True, timeout=60)
        cubin = open(out, "rb").read()
    t0 = time.perf_counter()
    lc = Launcher(_abis()["add"], cubin=cubin)
    lc.load()
    detail += f"; cubin load {(time.perf_counter() - t0) * 1e3:.1f} ms"
    # the cubin kernel computes the same thing
    import torch

    n = 1000
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    lc.launch(((n + 127) // 128,), [x, y, out, n, 3.0])
    torch.cuda.synchronize()
    err = _rel_err(out.cpu().numpy(), x.cpu().numpy().astype("f8") + 3.0 * y.cpu().numpy())
    return err < 1e-6, detail + f"; cubin add rel err {err:.1e}"


def check_add() -> Any:
    import numpy as np
    import torch

    la = _launcher("add", "add")
    results = []
    for n in (1, 1000, 4096, 100_003):
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        out = torch.full((n + 64,), float("nan"), device="cuda")   # poisoned, with a guard tail
        alpha = float(np.random.uniform(-3, 3))
        la.launch(((n + 127) // 128,), [x, y, out, n, alpha])
        torch.cuda.synchronize()
        o = out.cpu().numpy()
        want = x.cpu().numpy().astype(np.float64) + np.float64(np.float32(alpha)) * y.cpu().numpy()
        err = _rel_err(o[:n], want)
        tail_ok = bool(np.isnan(o[n:]).all())
        results.append((n, err, tail_ok))
    ok = all(e < 2e-6 and t for _, e, t in results)
    return ok, "; ".join(f"n={n} err {e:.1e} tail {'ok' if t else 'WRITTEN'}" for n, e, t in results)


def check_scalars() -> Any:
    import torch

    from tlx.runtime import TLXRuntimeError

    la = _launcher("add", "add")
    x = torch.zeros(4, device="cuda")
    msgs = []
    for bad in (-1, 2 ** 32, 2.5):
        try:
            la.launch((1,), [x, x, x, bad, 1.0])
            msgs.append(f"{bad!r}: NOT REFUSED")
        except TLXRuntimeError as e:
            msgs.append(f"{bad!r}: refused")
            assert "parameter 'n'" in str(e), str(e)
    try:
        la.launch((1,), [x, x, x.to(torch.float16), 4, 1.0])
        msgs.append("fp16 out: NOT REFUSED")
    except TLXRuntimeError:
        msgs.append("fp16 out: refused")
    return all("NOT" not in m for m in msgs), "; ".join(msgs)


def check_tma_read() -> Any:
    import numpy as np
    import torch

    from tlx.runtime import TensorDescriptor

    lt = _launcher("tma_read", "tma_read")
    results = []
    for rows, cols, pitch in ((64, 64, 64), (100, 72, 80), (33, 200, 208), (256, 128, 136)):
        base = torch.randn(rows, pitch, device="cuda")
        desc = TensorDescriptor(base, [rows, cols], [pitch, 1], [32, 32])
        out = torch.full((rows, cols), float("nan"), device="cuda")
        lt.launch(((cols + 31) // 32, (rows + 31) // 32), [desc, out, rows, cols])
        torch.cuda.synchronize()
        got = out.cpu().numpy()
        want = base.cpu().numpy()[:, :cols]
        results.append((rows, cols, pitch, bool(np.array_equal(got, want))))
    enc = lt.encoders[0]
    ok = all(r[-1] for r in results)
    return ok, ("; ".join(f"{r}x{c} pitch {p}: {'exact' if e else 'WRONG'}" for r, c, p, e in results)
                + f"; encodes {enc.encodes}, smem {lt.abi.shared_bytes} B")


def check_tma_roundtrip() -> Any:
    import numpy as np
    import torch

    from tlx.runtime import TensorDescriptor

    lr = _launcher("tma_roundtrip", "tma_roundtrip")
    results = []
    for rows, cols in ((128, 128), (200, 136), (64, 320)):
        for rep in range(2):   # second rep: new tensors, same shape -> address replacement only
            src = torch.randn(rows, cols, device="cuda").to(torch.float16)
            dst = torch.full((rows, cols), float("nan"), device="cuda", dtype=torch.float16)
            lr.launch(((cols + 63) // 64, (rows + 63) // 64),
                      [TensorDescriptor(src, [rows, cols], [cols, 1], [64, 64]),
                       TensorDescriptor(dst, [rows, cols], [cols, 1], [64, 64])])
            torch.cuda.synchronize()
            results.append((rows, cols, rep, bool(torch.equal(src, dst))))
    e0, e1 = lr.encoders[0], lr.encoders[1]
    # one encode per shape: the second tensor of a shape only replaces the address
    ok = all(r[-1] for r in results) and e0.encodes == 3 and e1.encodes == 3
    return ok, ("; ".join(f"{r}x{c}#{k}: {'exact' if e else 'WRONG'}" for r, c, k, e in results)
                + f"; src encodes {e0.encodes} replacements {e0.replacements}, dst {e1.encodes}/{e1.replacements}")


def check_cluster() -> Any:
    import torch

    lc = _launcher("cluster_ids", "cluster")
    out = torch.full((8,), -1, device="cuda", dtype=torch.int32)
    lc.launch((8,), [out])
    torch.cuda.synchronize()
    got = out.cpu().tolist()
    want = [(i % 2) | ((i // 2) << 8) | (2 << 16) for i in range(8)]
    return got == want, f"got {[hex(v) for v in got]}"


def check_interop() -> Any:
    import numpy as np
    import torch

    la = _launcher("add", "add")
    n = 5000
    grid = ((n + 127) // 128,)
    xh = np.random.randn(n).astype(np.float32)
    yh = np.random.randn(n).astype(np.float32)
    want = xh.astype(np.float64) + 2.0 * yh
    notes = []
    ok = True

    def verdict(name: str, out_host: Any) -> None:
        nonlocal ok
        err = _rel_err(out_host, want)
        good = err < 2e-6
        ok &= good
        notes.append(f"{name} {'ok' if good else f'WRONG {err:.1e}'}")

    # torch, default and non-default streams, requires_grad inputs
    xt = torch.from_numpy(xh).cuda().requires_grad_(True)
    yt = torch.from_numpy(yh).cuda()
    out = torch.full((n,), float("nan"), device="cuda")
    la.launch(grid, [xt, yt, out, n, 2.0])
    torch.cuda.synchronize()
    verdict("torch", out.cpu().numpy())
    s = torch.cuda.Stream()
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    la.launch(grid, [xt, yt, out, n, 2.0], stream=s)
    s.synchronize()
    verdict("torch-stream", out.cpu().numpy())
    # CuPy arrays and stream
    try:
        import cupy as cp

        xc, yc = cp.asarray(xh), cp.asarray(yh)
        oc = cp.full(n, cp.nan, dtype=cp.float32)
        cs = cp.cuda.Stream(non_blocking=True)
        la.launch(grid, [xc, yc, oc, n, 2.0], stream=cs)
        cs.synchronize()
        verdict("cupy-stream", cp.asnumpy(oc))
    except ImportError:
        notes.append("cupy n/a")
    # numba device arrays and stream
    from numba import cuda as ncuda

    xn, yn = ncuda.to_device(xh), ncuda.to_device(yh)
    on = ncuda.to_device(np.full(n, np.nan, np.float32))
    ns = ncuda.stream()
    la.launch(grid, [xn, yn, on, n, 2.0], stream=ns)
    ns.synchronize()
    verdict("numba-stream", on.copy_to_host())

    # DLPack-only producer (wraps a torch tensor, hides its CAI)
    class DLPackOnly:
        def __init__(self, t: Any):
            self.t = t

        def __dlpack__(self, **kw: Any) -> Any:
            return self.t.__dlpack__(**kw)

        def __dlpack_device__(self) -> Any:
            return self.t.__dlpack_device__()

    out.fill_(float("nan"))
    torch.cuda.synchronize()
    la.launch(grid, [DLPackOnly(xt.detach()), DLPackOnly(yt), DLPackOnly(out), n, 2.0])
    torch.cuda.synchronize()
    verdict("dlpack", out.cpu().numpy())

    # raw int handle and a __cuda_stream__ object
    class Proto:
        def __init__(self, h: int):
            self.h = h

        def __cuda_stream__(self) -> Any:
            return (0, self.h)

    out.fill_(float("nan"))
    torch.cuda.synchronize()
    la.launch(grid, [xt, yt, out, n, 2.0], stream=s.cuda_stream)
    s.synchronize()
    verdict("raw-handle", out.cpu().numpy())
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    la.launch(grid, [xt, yt, out, n, 2.0], stream=Proto(s.cuda_stream))
    s.synchronize()
    verdict("__cuda_stream__", out.cpu().numpy())
    return ok, "; ".join(notes)


def check_host_copy() -> Any:
    import numpy as np

    from tlx.runtime import host_copy

    la = _launcher("add", "add")
    n = 3000
    x = np.random.randn(n).astype(np.float32)
    y = np.random.randn(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    la.launch(((n + 127) // 128,), [host_copy(x, False), host_copy(y, False), host_copy(out), n, 0.5])
    err = _rel_err(out, x.astype(np.float64) + 0.5 * y)
    return err < 2e-6, f"rel err {err:.1e}"


def check_errors() -> Any:
    import torch

    from tlx.runtime import TensorDescriptor, TLXRuntimeError
    from tlx.runtime.tma import TMARuleError

    notes = []
    la = _launcher("add", "add")
    x = torch.zeros(8, device="cuda")
    try:
        la.launch((1,), [x.cpu(), x, x, 8, 1.0])
        notes.append("cpu tensor NOT REFUSED")
    except TLXRuntimeError as e:
        notes.append("cpu tensor refused" if "x.cuda()" in str(e) else f"cpu tensor: {e}")
    lt = _launcher("tma_read", "tma_read")
    base = torch.zeros(64 * 65, device="cuda")
    try:
        lt.launch((1, 1), [TensorDescriptor(base[1:], [64, 64], [64, 1], [32, 32]),
                           torch.zeros(64, 64, device="cuda"), 64, 64])
        notes.append("misaligned desc NOT REFUSED")
    except TMARuleError as e:
        notes.append(f"misaligned desc refused ({e.rule})")
    from tlx.compiler.abi import KernelABI

    big = _abis()["add"]
    big = KernelABI(big.entry, big.params, big.threads_per_cta, big.num_warps, 300 * 1024)
    from tlx.runtime import Launcher

    try:
        Launcher(big, ptx=PTX_ADD).load()
        notes.append("300 KB smem NOT REFUSED")
    except TLXRuntimeError as e:
        notes.append("300 KB smem refused" if "more than the" in str(e) else f"300 KB: {e}")
    return all("NOT" not in n and ":" not in n for n in notes), "; ".join(notes)


def check_thread() -> Any:
    import threading

    import torch

    la = _launcher("add", "add")
    la.load()
    n = 256
    x = torch.ones(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    errors: List[str] = []

    def work() -> None:
        try:
            la.launch((2,), [x, x, out, n, 1.0])
        except Exception as e:  # reported below
            errors.append(repr(e))

    t = threading.Thread(target=work)
    t.start()
    t.join(30)
    torch.cuda.synchronize()
    ok = not errors and bool((out == 2.0).all())
    return ok, "launched from a new thread" if ok else f"errors {errors}"


def _time_loop(fn: Callable[[], Any], n: int, sync: Callable[[], Any]) -> float:
    for _ in range(200):
        fn()
    sync()
    best = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best.append((time.perf_counter() - t0) / n * 1e6)
    best.sort()
    return best[1]  # median of 3


def check_overhead() -> Any:
    import ctypes

    import torch
    from cuda.bindings import driver as drv

    from tlx.specialize import key_of

    N = 20000
    sync = torch.cuda.synchronize
    rows = []
    e0 = _launcher("empty", "empty")
    e4 = _launcher("empty4", "empty")
    e0.load()
    e4.load()
    a, b, c = (torch.empty(1024, device="cuda") for _ in range(3))
    # raw floor: prebuilt config, pre-packed params, bound locals
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32, 1, 1
    cfg.sharedMemBytes = 0
    cfg.hStream = drv.CUstream(0)
    cfg.numAttrs = 0
    L = drv.cuLaunchKernelEx
    h0, h4 = e0.loaded.handle, e4.loaded.handle
    slots = [ctypes.c_uint64(a.data_ptr()), ctypes.c_uint64(b.data_ptr()),
             ctypes.c_uint64(c.data_ptr()), ctypes.c_uint32(1024)]
    ptrs = (ctypes.c_void_p * 4)(*[ctypes.addressof(s) for s in slots])
    addr4 = ctypes.addressof(ptrs)
    raw0 = _time_loop(lambda: L(cfg, h0, 0, 0), N, sync)
    raw4 = _time_loop(lambda: L(cfg, h4, addr4, 0), N, sync)
    rows.append(("raw cuLaunchKernelEx, 0 args", raw0, 1.0))
    rows.append(("raw cuLaunchKernelEx, 4 args pre-packed", raw4, 1.0))
    g = (1,)
    args0: List[Any] = []
    args4 = [a, b, c, 1024]
    l0, l4 = e0.launch, e4.launch
    t = _time_loop(lambda: l0(g, args0), N, sync)
    rows.append(("Launcher.launch, 0 args", t, t / raw0))
    t = _time_loop(lambda: l4(g, args4), N, sync)
    rows.append(("Launcher.launch, 3 tensors + int", t, t / raw4))

    if e4.fast is not None:  # the frontend's repeated launch: the call key, then the native launch
        native, spec = e4.fast
        targs4 = tuple(args4)

        def frontend_like() -> None:
            if key_of(targs4) is None:
                raise AssertionError
            native(spec, g, 0, targs4, None)

        t = _time_loop(frontend_like, N, sync)
        rows.append(("key_of + native launch (frontend path)", t, t / raw4))
    # experiment: libcuda's cuLaunchKernelEx through ctypes, everything pre-converted
    try:
        class CfgC(ctypes.Structure):
            _fields_ = [("gx", ctypes.c_uint), ("gy", ctypes.c_uint), ("gz", ctypes.c_uint),
                        ("bx", ctypes.c_uint), ("by", ctypes.c_uint), ("bz", ctypes.c_uint),
                        ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                        ("attrs", ctypes.c_void_p), ("nattrs", ctypes.c_uint)]

        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuLaunchKernelEx
        fn.restype = ctypes.c_int
        cc = CfgC(1, 1, 1, 32, 1, 1, 0, None, None, 0)
        ref, hk, pa = ctypes.byref(cc), ctypes.c_void_p(int(h4)), ctypes.c_void_p(addr4)
        assert fn(ref, hk, pa, None) == 0
        t = _time_loop(lambda: fn(ref, hk, pa, None), N, sync)
        rows.append(("(experiment) ctypes libcuda cuLaunchKernelEx, 4 args", t, t / raw4))
    except Exception as exc:  # an experiment only
        rows.append((f"(experiment) ctypes path failed: {exc}", float("nan"), float("nan")))
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def t_empty():
            pass

        @triton.jit
        def t_empty4(x, y, z, n):
            pass

        t = _time_loop(lambda: t_empty[g](), N, sync)
        rows.append(("Triton @jit, 0 args", t, t / raw0))
        t = _time_loop(lambda: t_empty4[g](a, b, c, 1024), N, sync)
        rows.append(("Triton @jit, 3 tensors + int", t, t / raw4))
        del tl
    except Exception as exc:
        rows.append((f"Triton n/a ({type(exc).__name__}: {exc})"[:80], float("nan"), float("nan")))
    target_ok = min(r[1] for r in rows if r[0].startswith("Launcher.launch, 3")) <= 4.0
    detail = "; ".join(f"{name}: {us:.2f} us (x{ratio:.2f} raw)" for name, us, ratio in rows)
    return True, detail + f"; Launcher 4-arg <= 4 us: {'yes' if target_ok else 'NO'}", rows


CHECKS: Dict[str, Callable[[], Any]] = {
    "load": check_load, "add": check_add, "scalars": check_scalars, "tma_read": check_tma_read,
    "tma_roundtrip": check_tma_roundtrip, "cluster": check_cluster, "interop": check_interop,
    "host_copy": check_host_copy, "errors": check_errors, "thread": check_thread,
    "overhead": check_overhead,
}


def run_inline(name: str) -> Dict[str, Any]:
    """Run one check in this process; never raises."""
    sys.path.insert(0, ROOT) if ROOT not in sys.path else None
    t0 = time.perf_counter()
    try:
        res = CHECKS[name]()
        ok, detail = bool(res[0]), str(res[1])
        rows = res[2] if len(res) > 2 else None
    except Exception as exc:
        ok, detail, rows = False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", None
    return {"check": name, "ok": ok, "detail": detail, "rows": rows,
            "seconds": round(time.perf_counter() - t0, 2)}


def _ensure_importable() -> None:
    """Make `tlx` importable from the repository without installing it."""
    try:
        import tlx.runtime  # noqa: F401
    except ImportError:
        import importlib.util
        import types

        pkg = types.ModuleType("tlx")
        pkg.__path__ = [os.path.join(ROOT, "tlx")]  # type: ignore[attr-defined]
        sys.modules["tlx"] = pkg
        for sub, folder in (("compiler", "compiler"), ("runtime", "runtime")):
            spec = importlib.util.spec_from_file_location(
                f"tlx.{sub}", os.path.join(ROOT, folder, "__init__.py"),
                submodule_search_locations=[os.path.join(ROOT, folder)])
            mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            sys.modules[f"tlx.{sub}"] = mod
            spec.loader.exec_module(mod)  # type: ignore[union-attr]


def main(argv: List[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="append", choices=sorted(CHECKS), help="run only these")
    ap.add_argument("--inline", action="store_true", help="run in this process (no isolation)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per check")
    ap.add_argument("--json", help="also write the results to this file")
    opts = ap.parse_args(argv)
    names = opts.check or list(CHECKS)
    results = []
    for name in names:
        if opts.inline:
            _ensure_importable()
            res = run_inline(name)
        else:
            try:
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name],
                                   capture_output=True, text=True, timeout=opts.timeout, cwd=ROOT)
                line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
                if line:
                    res = json.loads(line[-1][len("RESULT "):])
                else:
                    res = {"check": name, "ok": False, "rows": None, "seconds": None,
                           "detail": f"no result (rc {p.returncode}): {p.stderr[-1500:]}"}
            except subprocess.TimeoutExpired:
                res = {"check": name, "ok": False, "rows": None, "seconds": opts.timeout,
                       "detail": f"TIMEOUT after {opts.timeout:.0f} s (hung kernel?)"}
        results.append(res)
        print(f"[{'PASS' if res['ok'] else 'FAIL'}] {name}: {res['detail']}", flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=1)
    print("\n== tlx.runtime GPU smoke ==")
    print(f"{'check':<16} {'result':<6} {'s':>6}")
    for r in results:
        print(f"{r['check']:<16} {'PASS' if r['ok'] else 'FAIL':<6} {r['seconds'] or 0:>6}")
    for r in results:
        if r.get("rows"):
            print(f"\n{'launch path':<58} {'us/launch':>10} {'x raw':>7}")
            for label, us, ratio in r["rows"]:
                print(f"{label:<58} {us:>10.2f} {ratio:>7.2f}")
    failed = [r["check"] for r in results if not r["ok"]]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed" +
          (f" ({', '.join(failed)})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _ensure_importable()
        print("RESULT " + json.dumps(run_inline(sys.argv[2])), flush=True)
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))

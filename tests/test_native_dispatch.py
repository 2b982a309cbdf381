"""The native launch dispatcher (runtime/native_dispatch.c) without a GPU: kernels are really
traced and compiled; cuLaunchKernelEx is the native module's C stand-in, which logs every call's
parameter bytes, grid, block and stream while it is made. (tests/test_frontend_dispatch.py runs
all its cases through this dispatcher too; these check what only it does: which calls launch
from C, that C and the Python dispatcher agree on every call, threads, plan eviction, errors.)"""

import struct
import sys
import threading
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tlx
import tlx.language as tl
from runtime_fakes import CAIArray, Tensor
from test_frontend_dispatch import Q, fake_torch, record_launches
from tlx.jit import JITFunction
from tlx.runtime.errors import TLXRuntimeError


def install_exchange(monkeypatch, module, read=None, stream=None, **version):
    """Give the stand-in tensor class a DLPack C exchange API (the native module's test one):
    `read(x) -> (address, DLPack device type)`, `stream(device) -> int`; by default what the
    getters and the (fake) torch's current stream say."""
    read = read or (lambda x: (x.data_ptr(), 2 if x.is_cuda else 1))
    stream = stream or (lambda device: sys.modules["torch"]._C._cuda_getCurrentRawStream(device))
    monkeypatch.setattr(Tensor, "__dlpack_c_exchange_api__",
                        module.exchange_for_tests(read, stream, *version.values()), raising=False)


def _native(reader, monkeypatch, tmp_path, tmp_path_factory):
    rec = record_launches("native dispatcher", monkeypatch, tmp_path, tmp_path_factory)
    fake_torch(monkeypatch, [0])
    if reader == "exchange":
        install_exchange(monkeypatch, rec.module)
    rec.exchange = reader == "exchange"
    return rec


@pytest.fixture(params=["getters", "exchange"])
def native(request, monkeypatch, tmp_path, tmp_path_factory):
    """The recorded launches through the native dispatcher, with a (fake) torch imported so that
    tensors are torch's: the calls C repeats. Each test runs with tensors read through their
    getters and through DLPack's C exchange API (as torch >= 2.10 offers it)."""
    return _native(request.param, monkeypatch, tmp_path, tmp_path_factory)


@pytest.fixture
def native_exchange(monkeypatch, tmp_path, tmp_path_factory):
    """`native` with the exchange API only (the cases about it)."""
    return _native("exchange", monkeypatch, tmp_path, tmp_path_factory)


def make_scale():
    @tlx.jit
    def scale(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)

    return scale


def stats(kernel):
    """The native dispatcher's counts (hits, misses, plans)."""
    s = kernel._dispatch.native.stats()
    return {k: s[k] for k in ("hits", "misses", "plans")}


def test_repeated_calls_launch_from_c(native):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    k = scale[(4,)](x, out, 1000, 2.0, BLOCK=256)
    assert stats(scale) == {"hits": 0, "misses": 1, "plans": 1}
    assert isinstance(JITFunction.__dict__["__getitem__"], native.module.Subscript)
    g = (2, 3)
    launch = scale[g]
    assert scale[g] is launch  # kernel[grid]'s cache hit, in C
    for i in range(5):
        y, o = Tensor(0x30000 + 0x100 * i, (1024,)), Tensor(0x80000 + 0x100 * i, (1024,))
        assert launch(y, o, 1032 + 16 * i, -0.5 * i, BLOCK=256) is k
        call = native.calls[-1]
        assert call["grid"] == (2, 3, 1) and call["block"] == 128 and call["stream"] == 0
        assert call["params"] == [Q(0x30000 + 0x100 * i), Q(0x80000 + 0x100 * i),
                                  struct.pack("<i", 1032 + 16 * i), struct.pack("<f", -0.5 * i)]
    assert stats(scale)["hits"] == 5
    # another shape of call (keywords for runtime parameters, a positional constexpr): one miss, then hits
    assert scale[(1,)](x_ptr=x, out_ptr=out, n=5, alpha=1.5, BLOCK=256) is k
    assert scale[(1,)](x_ptr=x, out_ptr=out, n=7, alpha=2.5, BLOCK=256) is k
    assert native.calls[-1]["params"] == [Q(0x10000), Q(0x20000), struct.pack("<i", 7), struct.pack("<f", 2.5)]
    assert scale[(1,)](x, out, 9, 3.5, 256) is k
    assert scale[(1,)](x, out, 11, 4.5, 256) is k
    assert native.calls[-1]["params"][2:] == [struct.pack("<i", 11), struct.pack("<f", 4.5)]
    assert stats(scale) == {"hits": 7, "misses": 3, "plans": 3}
    assert len(native.calls) == 10


def test_every_key_change_is_a_new_plan_and_each_is_found_again(native):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    variants = [
        ((x, out, 1024, 2.0), {"BLOCK": 256}),
        ((Tensor(0x10004, (1024,)), out, 1024, 2.0), {"BLOCK": 256}),                 # unaligned
        ((Tensor(0x10000, (1024,), "float16"), out, 1024, 2.0), {"BLOCK": 256}),      # dtype
        ((x, out, 1, 2.0), {"BLOCK": 256}),                                            # == 1
        ((x, out, 1023, 2.0), {"BLOCK": 256}),                                         # % 16 != 0
        ((x, out, 2 ** 40, 2.0), {"BLOCK": 256}),                                      # i64
        ((x, out, 2 ** 63 + 16, 2.0), {"BLOCK": 256}),                                 # u64
        ((x, out, 1024, 3), {"BLOCK": 256}),                                           # int alpha
        ((x, out, 1024, 2.0), {"BLOCK": 128}),                                         # constexpr
        ((x, out, 1024, 2.0), {"BLOCK": 256, "num_warps": 8}),                         # option
    ]
    first = [scale[(1,)](*a, **kw) for a, kw in variants]
    assert len({id(k) for k in first}) == len(variants)
    assert stats(scale)["misses"] == len(variants) and stats(scale)["hits"] == 0
    for (a, kw), k in zip(variants, first):
        assert scale[(1,)](*a, **kw) is k
    assert stats(scale)["hits"] == len(variants)
    # the values C packed, against the compiled parameter types
    assert scale[(1,)](x, out, 2 ** 40 + 32, 2.0, BLOCK=256) is first[5]
    assert native.calls[-1]["params"][2] == struct.pack("<q", 2 ** 40 + 32)
    assert scale[(1,)](x, out, 2 ** 64 - 16, 2.0, BLOCK=256) is first[6]
    assert native.calls[-1]["params"][2] == struct.pack("<Q", 2 ** 64 - 16)
    assert scale[(1,)](x, out, 1024, -7, BLOCK=256) is first[7]
    assert native.calls[-1]["params"][3] == struct.pack("<i", -7)
    assert native.calls[-1]["block"] == 128
    assert scale[(1,)](x, out, 1024, 2.0, BLOCK=256, num_warps=8) is first[9]
    assert native.calls[-1]["block"] == 256


def test_calls_c_does_not_repeat_take_the_python_path(native, monkeypatch):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    k = scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    before = stats(scale)
    assert scale[(1,)](x, out, 64, 1.0, BLOCK=64, stream=0x55) is k  # stream=: resolved in Python
    assert native.calls[-1]["stream"] == 0x55
    assert scale[(1,)](CAIArray(0x50000, (64,), "<f4"), out, 64, 1.0, BLOCK=64) is k
    assert native.calls[-1]["params"][0] == Q(0x50000)
    scale[(1,)](x, out, np.int32(64), 1.0, BLOCK=64)  # numpy scalars and bools
    scale[(1,)](x, out, 64, True, BLOCK=64)
    assert native.calls[-1]["params"][3] == struct.pack("<i", 1)
    assert stats(scale)["hits"] == before["hits"]
    # a callable grid, a list grid: the Python dispatcher, never a BoundLaunch
    assert type(scale[lambda meta: (2,)]).__name__ == "partial"
    scale[lambda meta: (2,)](x, out, 64, 1.0, BLOCK=64)
    assert native.calls[-1]["grid"] == (2, 1, 1)
    scale[[3]](x, out, 64, 1.0, BLOCK=64)
    assert native.calls[-1]["grid"] == (3, 1, 1)
    # a float that fp32 cannot hold: C declines to pack it, Python says why
    with pytest.raises(TLXRuntimeError, match="alpha"):
        scale[(1,)](x, out, 64, 1e300, BLOCK=64)
    # torch's current stream is read on every C launch
    current = [0x77]
    fresh = make_scale()
    fake_torch(monkeypatch, current)
    fresh[(1,)](x, out, 64, 1.0, BLOCK=64)
    fresh[(1,)](x, out, 64, 1.0, BLOCK=64)
    current[0] = 0x88
    fresh[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert [c["stream"] for c in native.calls[-3:]] == [0x77, 0x77, 0x88]
    assert stats(fresh)["hits"] == 2


def test_empty_and_out_of_range_grids_with_a_plan(native):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    k = scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    n = len(native.calls)
    assert scale[(0,)](x, out, 64, 1.0, BLOCK=64) is k
    assert scale[(4, 0, 2)](x, out, 64, 1.0, BLOCK=64) is k
    assert len(native.calls) == n
    with pytest.raises(TLXRuntimeError, match="outside"):
        scale[(1, 70000)](x, out, 64, 1.0, BLOCK=64)
    with pytest.raises(TLXRuntimeError, match="outside"):
        scale[(2 ** 31,)](x, out, 64, 1.0, BLOCK=64)
    assert scale[(2 ** 31 - 1, 65535, 65535)](x, out, 64, 1.0, BLOCK=64) is k
    assert native.calls[-1]["grid"] == (2 ** 31 - 1, 65535, 65535)


def test_a_driver_error_goes_to_the_python_path(native):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    module = native.module
    module.recording_entry(2)  # the stand-in now answers CUDA_ERROR_OUT_OF_MEMORY
    try:
        with pytest.raises(TLXRuntimeError, match="cuLaunchKernelEx"):
            scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    finally:
        module.recording_entry(0)
    hits = stats(scale)["hits"]
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert stats(scale)["hits"] == hits + 1


def test_more_specializations_than_plans(native):
    @tlx.jit
    def times(out_ptr, n, C: tl.constexpr):
        tl.store(out_ptr + tl.arange(0, 16), n * C)

    out = Tensor(0x20000, (16,))
    limit = native.module.MAX_PLANS
    consts = list(range(3, limit + 7))
    compiled = {c: times[(1,)](out, 64, C=c) for c in consts}
    assert len({id(k) for k in compiled.values()}) == len(consts)
    for _ in range(2):
        for c in reversed(consts):
            assert times[(1,)](out, 16 * c, C=c) is compiled[c]
            assert native.calls[-1]["params"] == [Q(0x20000), struct.pack("<i", 16 * c)]
    assert stats(times)["plans"] == limit


def test_threads_launch_their_own_arguments(native):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    k = scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    native.calls.clear()
    expected = set()
    per_thread = 200

    def work(t):
        for i in range(per_thread):
            n = 16 * (t * per_thread + i) + 32
            assert scale[(t + 1,)](Tensor(0x100000 * (t + 1) + 16 * i, (64,)), out, n, float(t), BLOCK=64) is k

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in range(4):
        for i in range(per_thread):
            expected.add(((t + 1, 1, 1), Q(0x100000 * (t + 1) + 16 * i), struct.pack("<i", 16 * (t * per_thread + i) + 32),
                          struct.pack("<f", float(t))))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    seen = {(c["grid"], c["params"][0], c["params"][2], c["params"][3]) for c in native.calls}
    assert len(native.calls) == 4 * per_thread and seen == expected


_INTS = st.sampled_from([0, 1, 2, 16, 17, 1024, 2 ** 31 - 1, -2 ** 31, 2 ** 31, -2 ** 31 - 1, 2 ** 40,
                         2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1])
_SCALARS = st.one_of(_INTS, st.floats(-1e30, 1e30, allow_nan=False), st.just(1e300))
_TENSORS = st.builds(lambda base, off, dt: Tensor(base + off, (64,), dt), st.sampled_from([0x10000, 0x7F00_0000_0000]),
                     st.sampled_from([0, 4, 16, 48]), st.sampled_from(["float32", "float16"]))
_CALLS = st.tuples(_TENSORS, _TENSORS, _SCALARS, _SCALARS, st.sampled_from([32, 64]), st.sampled_from([4, 8]),
                   st.booleans(), st.sampled_from([(1,), (3, 2), (1, 1, 5), 4]))


@pytest.fixture
def shared_scale(native):
    """One kernel for all of a test's hypothesis examples (each specialization compiles once)."""
    return make_scale()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(_CALLS, min_size=1, max_size=6))
def test_native_and_python_dispatchers_agree(native, shared_scale, calls):
    """Every call through kernel[grid] (native, possibly from C) and through the generated Python
    dispatcher alone returns the same compiled kernel and makes the same launch, or both raise."""
    scale = shared_scale
    for x, out, n, alpha, block, warps, by_name, grid in calls:
        kw = {"BLOCK": block, "num_warps": warps}
        args = (x, out, n, alpha)
        if by_name:
            kw.update(x_ptr=x, out_ptr=out, n=n, alpha=alpha)
            args = ()
        outcome = []
        for launch in (scale[grid], lambda *a, **k: scale._dispatch(grid, *a, **k)):
            try:
                result = launch(*args, **kw)
            except TLXRuntimeError as exc:
                outcome.append(("error", str(exc)))
                continue
            call = native.calls[-1]
            outcome.append((result, call["grid"], call["block"], call["stream"], call["params"]))
        assert outcome[0] == outcome[1]
        if outcome[0][0] != "error":  # every such call is one C repeats: the same call again is a hit
            hits = stats(scale)["hits"]
            assert scale[grid](*args, **kw) is outcome[0][0] and stats(scale)["hits"] == hits + 1
            assert native.calls[-1]["params"] == outcome[0][4]


def test_threads_while_plans_are_evicted(native):
    """Four threads cycle through more specializations than the dispatcher keeps plans for, so
    plans are added, moved and evicted while other threads match against them (the fake torch's
    stream query is Python code: threads switch inside the C launch path too)."""

    @tlx.jit
    def times(out_ptr, n, C: tl.constexpr):
        tl.store(out_ptr + tl.arange(0, 16), n * C)

    limit = native.module.MAX_PLANS
    consts = list(range(3, limit + 7))
    out = Tensor(0x20000, (16,))
    compiled = {c: times[(1,)](out, 16, C=c) for c in consts}
    native.calls.clear()
    failures = []

    def work(t):
        try:
            for i in range(3):
                for c in consts[t:] + consts[:t]:
                    n = 16 * (10000 * t + 100 * i + c)
                    if times[(t + 1,)](Tensor(0x100000 * (t + 1), (16,)), n, C=c) is not compiled[c]:
                        failures.append((t, i, c))
        except Exception as exc:  # reported from the main thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures
    want = {((t + 1, 1, 1), Q(0x100000 * (t + 1)), struct.pack("<i", 16 * (10000 * t + 100 * i + c)))
            for t in range(4) for i in range(3) for c in consts}
    got = [(c["grid"], c["params"][0], c["params"][1]) for c in native.calls]
    assert len(got) == len(want) and set(got) == want
    assert stats(times)["plans"] <= limit


def test_the_exchange_api_reads_tensors_and_the_stream_when_torch_offers_it(native):
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    s = scale._dispatch.native.stats()
    assert (s["exchange"], s["exchange_stream"]) == (native.exchange, native.exchange)
    scale[(1,)](Tensor(0x30000, (1024,)), out, 64, 1.0, BLOCK=64)
    assert native.calls[-1]["params"][0] == Q(0x30000) and stats(scale)["hits"] == 1


def test_a_tensor_the_exporter_refuses_takes_the_python_path(native_exchange, monkeypatch):
    refused = {0x40000}

    def read(x):
        if x.data_ptr() in refused:
            raise RuntimeError("not exportable")
        return x.data_ptr(), 2 if x.is_cuda else 1

    install_exchange(monkeypatch, native_exchange.module, read=read)
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    k = scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert scale[(1,)](Tensor(0x40000, (1024,)), out, 64, 1.0, BLOCK=64) is k  # Python launches it
    assert native_exchange.calls[-1]["params"][0] == Q(0x40000)
    assert stats(scale) == {"hits": 0, "misses": 2, "plans": 1}
    # a host tensor (device type kDLCPU): the Python path, which refuses it
    with pytest.raises(TLXRuntimeError, match="on 'cpu'"):
        scale[(1,)](Tensor(0x50000, (1024,), cuda=False), out, 64, 1.0, BLOCK=64)
    assert stats(scale)["hits"] == 0
    assert scale[(1,)](x, out, 64, 1.0, BLOCK=64) is k and stats(scale)["hits"] == 1


@pytest.mark.parametrize("version", [(0, 9), (1, 1), (2, 0)])
def test_an_exchange_api_of_another_version_is_not_used(native_exchange, monkeypatch, version):
    install_exchange(monkeypatch, native_exchange.module, major=version[0], minor=version[1])
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    s = scale._dispatch.native.stats()
    assert (s["exchange"], s["exchange_stream"], s["hits"]) == (False, False, 1)


def test_an_exchange_stream_that_disagrees_with_torch_is_not_used(native_exchange, monkeypatch):
    install_exchange(monkeypatch, native_exchange.module, stream=lambda device: 0xBAD)
    current = [0x77]
    fake_torch(monkeypatch, current)
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    current[0] = 0x88
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    s = scale._dispatch.native.stats()
    assert (s["exchange"], s["exchange_stream"], s["hits"]) == (True, False, 1)
    assert [c["stream"] for c in native_exchange.calls[-2:]] == [0x77, 0x88]  # torch's, read the Python way


def test_a_torch_function_mode_makes_c_read_tensors_through_their_getters(native_exchange, monkeypatch):
    # the exporter reports another address than data_ptr(): which one is launched shows the path
    install_exchange(monkeypatch, native_exchange.module, read=lambda x: (x.data_ptr() + 0x1000, 2))
    mode = [False]
    torch = sys.modules["torch"]
    monkeypatch.setattr(torch, "_C", types.SimpleNamespace(**vars(torch._C),
                                                           _is_torch_function_mode_enabled=lambda: mode[0]))
    scale = make_scale()
    x, out = Tensor(0x10000, (1024,)), Tensor(0x20000, (1024,))
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert native_exchange.calls[-1]["params"][:2] == [Q(0x11000), Q(0x21000)]  # the exchange API's
    mode[0] = True
    scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert native_exchange.calls[-1]["params"][:2] == [Q(0x10000), Q(0x20000)]  # the getters'
    assert stats(scale)["hits"] == 2


def torch_dtypes(monkeypatch, module, exported):
    """Give the (fake) torch the dtypes in `exported` (a name -> the DLPack (code, bits, lanes) its
    tensors export, in that order as module attributes) and `torch.empty`, and the exchange API
    that reports those types; every read of a tensor's dtype getter is counted in the list
    returned."""
    torch = sys.modules["torch"]
    monkeypatch.setattr(torch, "dtype", Tensor._Dtype, raising=False)
    monkeypatch.setattr(torch, "empty", lambda n, dtype: Tensor(0x1000, (n,), dtype.name, cuda=False), raising=False)
    for name in exported:
        monkeypatch.setattr(torch, name, Tensor.DTYPES.setdefault(name, Tensor._Dtype(name)), raising=False)
    reads = []

    def get(self):
        reads.append(self)
        return self.__dict__["_dtype"]

    def put(self, value):
        self.__dict__["_dtype"] = value

    monkeypatch.setattr(Tensor, "dtype", property(get, put), raising=False)
    install_exchange(monkeypatch, module,
                     read=lambda x: (x.data_ptr(), 2 if x.is_cuda else 1, exported.get(x.__dict__["_dtype"].name, (0, 0, 0))))
    return reads


def test_the_exchange_api_gives_a_tensors_dtype_where_one_torch_dtype_exports_its_type(native_exchange, monkeypatch):
    reads = torch_dtypes(monkeypatch, native_exchange.module, {"float32": (2, 32, 1), "float16": (2, 16, 1)})
    scale = make_scale()
    x, x16, out = Tensor(0x10000, (1024,)), Tensor(0x30000, (1024,), "float16"), Tensor(0x20000, (1024,))
    k32 = scale[(1,)](x, out, 64, 1.0, BLOCK=64)
    k16 = scale[(1,)](x16, out, 64, 1.0, BLOCK=64)
    assert k16 is not k32 and scale._dispatch.native.stats()["dtype_table"] == 2
    before = len(reads)
    for _ in range(3):
        assert scale[(1,)](x, out, 64, 1.0, BLOCK=64) is k32
        assert scale[(1,)](x16, out, 64, 1.0, BLOCK=64) is k16
    assert stats(scale) == {"hits": 6, "misses": 2, "plans": 2}
    assert len(reads) == before  # no getter call on a hit: the exchange API named every dtype


@pytest.mark.parametrize("first", ["float16", "bfloat16"])
def test_a_dlpack_type_two_torch_dtypes_export_is_not_taken_for_either(native_exchange, monkeypatch, first):
    torch_dtypes(monkeypatch, native_exchange.module,
                 {"float32": (2, 32, 1), "float16": (2, 16, 1), "bfloat16": (2, 16, 1)})
    other = {"float16": "bfloat16", "bfloat16": "float16"}[first]
    scale = make_scale()
    out = Tensor(0x20000, (1024,))
    ka = scale[(1,)](Tensor(0x10000, (1024,), first), out, 64, 1.0, BLOCK=64)
    kb = scale[(1,)](Tensor(0x10000, (1024,), other), out, 64, 1.0, BLOCK=64)
    assert kb is not ka and "bf16" in func_attrs_of(kb if other == "bfloat16" else ka)
    assert stats(scale) == {"hits": 0, "misses": 2, "plans": 2}
    assert scale._dispatch.native.stats()["dtype_table"] == 1  # float32 only
    assert scale[(1,)](Tensor(0x10000, (1024,), other), out, 64, 1.0, BLOCK=64) is kb
    assert scale[(1,)](Tensor(0x10000, (1024,), first), out, 64, 1.0, BLOCK=64) is ka
    assert stats(scale)["hits"] == 2


def test_a_plan_that_finds_the_dtype_table_wrong_switches_it_off(native_exchange, monkeypatch):
    # int32 is no attribute of this torch (so no sample) and its tensors export float32's type
    exported = {"float32": (2, 32, 1)}
    torch_dtypes(monkeypatch, native_exchange.module, exported)
    exported["int32"] = (2, 32, 1)
    scale = make_scale()
    out = Tensor(0x20000, (1024,))
    ki = scale[(1,)](Tensor(0x10000, (1024,), "int32"), out, 64, 1.0, BLOCK=64)
    assert scale._dispatch.native.stats()["dtype_table"] == 0
    kf = scale[(1,)](Tensor(0x10000, (1024,)), out, 64, 1.0, BLOCK=64)
    assert kf is not ki and stats(scale)["misses"] == 2
    assert scale[(1,)](Tensor(0x10000, (1024,), "int32"), out, 64, 1.0, BLOCK=64) is ki
    assert scale[(1,)](Tensor(0x10000, (1024,)), out, 64, 1.0, BLOCK=64) is kf
    assert stats(scale)["hits"] == 2


def func_attrs_of(compiled):
    return next(line for line in compiled.asm["ir"].splitlines() if "tt.func" in line)

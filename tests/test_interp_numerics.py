"""The interpreter's numerics: integer wraparound, signed/unsigned division and shifts as on
PTX, float casts with fp16/bf16/fp8 rounding, masked loads/stores, atomics, reductions, TMA
bounds and padding, and GEMM kernels against numpy in float64. References are computed here
independently (Python integers, exhaustive value tables), outputs are poisoned before each run."""

import math
import struct

import numpy as np
import pytest

from int_reference import truncating_divmod
from interp_kernels import HostDesc, gemm_cp_async, gemm_tma, gemm_ws, module_text
from tlx.compiler.ir import parse_module
from tlx.interpreter import InterpreterError, run

N = 64


def elementwise(op: str, t: str, rt: str = "", attrs: str = "", ot: str = "") -> str:
    """out[i] = op(x[i], y[i]) (or op(x[i]) for casts) over N elements of type t."""
    rt = rt or t
    ot = ot or rt
    binary = not op.startswith("cast:")
    name = op.split(":")[-1]
    opline = (f"%r = {name} %xv, %yv {attrs} : tensor<{N}x{rt}>" if binary
              else f"%r = {name} %xv {attrs} : tensor<{N}x{rt}>")
    body = f"""
    %i = tt.make_range {{start = 0, end = {N}}} : tensor<{N}xi32>
    %xp = tt.splat %x : tensor<{N}x!ptr<{t}>>
    %xa = tt.addptr %xp, %i : tensor<{N}x!ptr<{t}>>
    %xv = tt.load %xa : tensor<{N}x{t}>
    %yp = tt.splat %y : tensor<{N}x!ptr<{t}>>
    %ya = tt.addptr %yp, %i : tensor<{N}x!ptr<{t}>>
    %yv = tt.load %ya : tensor<{N}x{t}>
    {opline}
    %op = tt.splat %o : tensor<{N}x!ptr<{ot}>>
    %oa = tt.addptr %op, %i : tensor<{N}x!ptr<{ot}>>
    tt.store %oa, %r"""
    return module_text(body, f"%x: !ptr<{t}>, %y: !ptr<{t}>, %o: !ptr<{ot}>")


def run_elementwise(op, t, x, y, out_dtype, **kw):
    m = parse_module(elementwise(op, t, **kw))
    out = np.full(N, 0x5A, dtype=out_dtype) if np.dtype(out_dtype).kind in "iub" else np.full(N, np.nan, out_dtype)
    assert run(m, (1,), [x, y, out]) == []
    return out


def wrap(v, bits, signed=True):
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


@pytest.fixture
def ints():
    rng = np.random.default_rng(7)
    x = rng.integers(-2**31, 2**31, N, dtype=np.int64).astype(np.int32)
    y = rng.integers(-100, 100, N).astype(np.int32)
    x[:6] = [7, -7, 7, -7, -2**31, 2**31 - 1]
    y[:6] = [2, 2, -2, -2, -1, 1]
    y[y == 0] = 3
    return x, y


def test_signed_division_truncates_toward_zero(ints):
    x, y = ints
    q = run_elementwise("arith.divsi", "i32", x, y, np.int32)
    r = run_elementwise("arith.remsi", "i32", x, y, np.int32)
    assert list(q) == [wrap(truncating_divmod(int(a), int(b))[0], 32) for a, b in zip(x, y)]
    assert list(r) == [wrap(truncating_divmod(int(a), int(b))[1], 32) for a, b in zip(x, y)]


def test_unsigned_division_reads_the_bits_unsigned(ints):
    x, y = ints
    q = run_elementwise("arith.divui", "i32", x, y, np.int32)
    assert list(q) == [wrap((int(a) % 2**32) // (int(b) % 2**32), 32) for a, b in zip(x, y)]


def test_integer_wraparound(ints):
    x, y = ints
    s = run_elementwise("arith.addi", "i32", x, y, np.int32)
    p = run_elementwise("arith.muli", "i32", x, x, np.int32)
    assert list(s) == [wrap(int(a) + int(b), 32) for a, b in zip(x, y)]
    assert list(p) == [wrap(int(a) * int(a), 32) for a in x]


def test_shifts_clamp_the_amount_like_ptx():
    x = np.array([1, -8, 0x7FFFFFFF, -1] * (N // 4), np.int32)
    y = np.array([3, 31, 32, 40] * (N // 4), np.int32)
    shl = run_elementwise("arith.shli", "i32", x, y, np.int32)
    sra = run_elementwise("arith.shrsi", "i32", x, y, np.int32)
    srl = run_elementwise("arith.shrui", "i32", x, y, np.int32)
    for i in range(4):
        a, b = int(x[i]), int(y[i])
        assert shl[i] == (wrap(a << b, 32) if b < 32 else 0)
        assert sra[i] == (a >> min(b, 31))
        assert srl[i] == (wrap((a % 2**32) >> b, 32) if b < 32 else 0)


def test_unsigned_compare_and_max(ints):
    x, y = ints
    lt = run_elementwise("arith.cmpi", "i32", x, y, np.bool_, rt="i1", attrs='{predicate = "ult"}')
    mx = run_elementwise("arith.maxui", "i32", x, y, np.int32)
    assert list(lt) == [(int(a) % 2**32) < (int(b) % 2**32) for a, b in zip(x, y)]
    assert list(mx) == [wrap(max(int(a) % 2**32, int(b) % 2**32), 32) for a, b in zip(x, y)]


def test_float_to_int_saturates_and_maps_nan_to_zero():
    x = np.array([3.7, -3.7, 1e20, -1e20, np.nan, 2.5, -0.5, 255.9] * (N // 8), np.float32)
    r = run_elementwise("cast:arith.fptosi", "f32", x, x, np.int32, rt="i32")
    u = run_elementwise("cast:arith.fptoui", "f32", x, x, np.uint8, rt="u8")
    assert list(r[:8]) == [3, -3, 2**31 - 1, -2**31, 0, 2, 0, 255]
    assert list(u[:8]) == [3, 0, 255, 0, 0, 2, 0, 255]


def _bf16_reference(v: float) -> float:
    """Round an fp32 value to bf16 with round-to-nearest-even on its bit pattern (Python ints)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", v))
    if math.isnan(v):
        return v
    lower = bits & 0xFFFF
    up = bits >> 16
    if lower > 0x8000 or (lower == 0x8000 and up & 1):
        up += 1
    return struct.unpack("<f", struct.pack("<I", (up << 16) & 0xFFFFFFFF))[0]


def test_truncf_to_bf16_and_f16_round_to_nearest_even():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(N) * 1000).astype(np.float32)
    x[:4] = [1.00390625, 1.01171875, 3.0e38, 65520.0]  # ties and overflow
    np.seterr(over="ignore")
    bf = run_elementwise("cast:arith.truncf", "f32", x, x, np.uint16, rt="bf16")
    h = run_elementwise("cast:arith.truncf", "f32", x, x, np.float16, rt="f16")
    got = (bf.astype(np.uint32) << 16).view(np.float32)
    assert [float(g) for g in got] == [_bf16_reference(float(v)) for v in x]
    assert np.array_equal(h, x.astype(np.float16))  # numpy's float16 cast rounds to nearest even
    assert np.isinf(h[3])


def test_exp2_and_exp_flush_results_below_the_smallest_normal_f32_to_zero():
    """As the GPU's ex2.approx.ftz.f32 (the compiler's lowering of exp2 and exp): a result below
    2^-126 is 0, one at or above it is kept; f16 / bf16 are computed in f32 the same way.
    References in float64 here."""
    x = np.zeros(N, np.float32)
    x[:10] = [-130.0, -126.5, -126.0, -125.0, -1.0, 0.0, 3.5, 200.0, -np.inf, np.nan]
    tiny = 2.0 ** -126

    def ftz(v):
        return 0.0 if abs(v) < tiny else v

    want2 = [ftz(2.0 ** float(v)) if np.isfinite(v) else None for v in x]
    np.seterr(over="ignore")
    got = run_elementwise("cast:math.exp2", "f32", x, x, np.float32)
    assert got[0] == 0.0 and got[1] == 0.0 and not np.signbit(got[0])
    assert got[2] == np.float32(tiny) and got[3] == np.float32(2.0 ** -125)
    for g, w, v in zip(got, want2, x):
        if w is None:
            assert (np.isnan(g) and np.isnan(v)) or g == (0.0 if v < 0 else np.inf)
        else:
            assert g == np.float32(w) or abs(g - w) <= 2e-7 * w, (v, g, w)
    assert np.isinf(got[7])

    e = np.zeros(N, np.float32)
    e[:4] = [-90.0, -87.5, -87.0, 1.0]  # e^-87.5 = 9.9e-39 (subnormal), e^-87 = 1.6e-38 (normal)
    got = run_elementwise("cast:math.exp", "f32", e, e, np.float32)
    for g, v in zip(got, e):
        w = ftz(math.exp(float(v)))
        assert abs(g - w) <= 1e-6 * w, (v, g, w)
    assert got[0] == 0.0 and got[1] == 0.0 and got[2] > 0.0

    xb = (x.view(np.uint32) >> 16).astype(np.uint16)  # x's values are exact in bf16
    bf = run_elementwise("cast:math.exp2", "bf16", xb, xb, np.uint16)
    got = (bf.astype(np.uint32) << 16).view(np.float32)
    assert got[0] == 0.0 and got[1] == 0.0 and got[2] == np.float32(tiny) and got[3] == np.float32(2.0 ** -125)


def _fp8_e4m3_values():
    vals = []
    for b in range(0x7F):  # every non-negative finite e4m3 (0x7F is NaN)
        e, m = b >> 3, b & 7
        vals.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return vals


def test_fp8_e4m3_rounds_to_nearest_even_and_saturates():
    table = _fp8_e4m3_values()
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(N - 8) * 50, [500.0, -1e6, 0.001, 2.0 ** -10, 3 * 2.0 ** -10, 464.0, 17.0, 0.0]])
    x = x.astype(np.float32)
    bits = run_elementwise("cast:tt.fp_to_fp", "f32", x, x, np.uint8, rt="f8e4m3")

    def ref(v):
        a = abs(float(v))
        if a >= 448:
            return 0x7E | (0x80 if v < 0 else 0)  # satfinite
        best = min(range(len(table)), key=lambda i: (abs(table[i] - a), i & 1))  # ties to even mantissa
        return best | (0x80 if v < 0 and best else 0)
    assert [int(b) for b in bits] == [ref(v) for v in x]


def test_masked_load_other_and_masked_store():
    body = f"""
    %i = tt.make_range {{start = 0, end = 16}} : tensor<16xi32>
    %n = tt.splat %len : tensor<16xi32>
    %m = arith.cmpi %i, %n {{predicate = "slt"}} : tensor<16xi1>
    %xp = tt.splat %x : tensor<16x!ptr<f32>>
    %xa = tt.addptr %xp, %i : tensor<16x!ptr<f32>>
    %o = arith.constant {{value = -1.0}} : tensor<16xf32>
    %v = tt.load %xa mask(%m) other(%o) : tensor<16xf32>
    %yp = tt.splat %y : tensor<16x!ptr<f32>>
    %ya = tt.addptr %yp, %i : tensor<16x!ptr<f32>>
    tt.store %ya, %v
    %v2 = arith.addf %v, %v : tensor<16xf32>
    %zp = tt.splat %z : tensor<16x!ptr<f32>>
    %za = tt.addptr %zp, %i : tensor<16x!ptr<f32>>
    tt.store %za, %v2 mask(%m) loc(#f:9:0)"""
    m = parse_module(module_text(body, "%x: !ptr<f32>, %y: !ptr<f32>, %z: !ptr<f32>, %len: i32"))
    x = np.arange(16, dtype=np.float32)
    y = np.full(16, np.nan, np.float32)
    z = np.full(10, np.nan, np.float32)
    run(m, (1,), [x, y, z, 10])
    assert list(y) == list(range(10)) + [-1.0] * 6  # z has 10 elements: lanes 10..15 stay masked
    assert list(z) == [2.0 * i for i in range(10)]
    with pytest.raises(InterpreterError, match=r"k.py:9.*out-of-bounds store at byte 40 of argument 'z'"):
        run(m, (1,), [x, y, z, 11])


def test_atomic_add_from_every_program_and_cas():
    body = """
    %one = arith.constant {value = 1} : i32
    %old = tt.atomic_rmw %cnt, %one {op = "add", sem = "acq_rel", scope = "gpu"} : i32
    %pid = tt.get_program_id {axis = 0} : i32
    %slot = tt.addptr %olds, %pid : !ptr<i32>
    tt.store %slot, %old
    %z = arith.constant {value = 0} : i32
    %pp = arith.addi %pid, %one : i32
    %prev = tt.atomic_cas %flag, %z, %pp : i32
    %slot2 = tt.addptr %prevs, %pid : !ptr<i32>
    tt.store %slot2, %prev"""
    m = parse_module(module_text(body, "%cnt: !ptr<i32>, %olds: !ptr<i32>, %flag: !ptr<i32>, %prevs: !ptr<i32>"))
    cnt, olds, flag, prevs = np.zeros(1, np.int32), np.full(5, -7, np.int32), np.zeros(1, np.int32), np.full(5, -7, np.int32)
    run(m, (5,), [cnt, olds, flag, prevs])
    assert cnt[0] == 5 and sorted(olds) == [0, 1, 2, 3, 4]
    assert flag[0] == 1  # only the first program's compare (0 == 0) succeeds
    assert list(prevs) == [0, 1, 1, 1, 1]


def test_atomic_add_with_colliding_lanes():
    body = """
    %i = tt.make_range {start = 0, end = 8} : tensor<8xi32>
    %four = arith.constant {value = 4} : tensor<8xi32>
    %b = arith.remsi %i, %four : tensor<8xi32>
    %p = tt.splat %h : tensor<8x!ptr<f32>>
    %a = tt.addptr %p, %b : tensor<8x!ptr<f32>>
    %v = arith.constant {value = 0.5} : tensor<8xf32>
    %old = tt.atomic_rmw %a, %v {op = "fadd", sem = "relaxed", scope = "gpu"} : tensor<8xf32>"""
    m = parse_module(module_text(body, "%h: !ptr<f32>"))
    h = np.zeros(4, np.float32)
    run(m, (3,), [h])
    assert list(h) == [3.0] * 4


def test_reductions():
    body = """
    %i = tt.make_range {start = 0, end = 32} : tensor<32xi32>
    %xp = tt.splat %x : tensor<32x!ptr<f32>>
    %xa = tt.addptr %xp, %i : tensor<32x!ptr<f32>>
    %v = tt.load %xa : tensor<32xf32>
    %r = tt.reshape %v : tensor<4x8xf32>
    %s = tt.reduce %r {axis = 1, kind = "sum"} : tensor<4xf32>
    %mx = tt.reduce %v {axis = 0, kind = "max"} : f32
    %am = tt.reduce %v {axis = 0, kind = "argmax"} : i32
    %j = tt.make_range {start = 0, end = 4} : tensor<4xi32>
    %op = tt.splat %o : tensor<4x!ptr<f32>>
    %oa = tt.addptr %op, %j : tensor<4x!ptr<f32>>
    tt.store %oa, %s
    tt.store %m, %mx
    tt.store %a, %am"""
    mod = parse_module(module_text(body, "%x: !ptr<f32>, %o: !ptr<f32>, %m: !ptr<f32>, %a: !ptr<i32>"))
    x = np.random.default_rng(2).standard_normal(32).astype(np.float32)
    o, mx, am = np.full(4, np.nan, np.float32), np.full(1, np.nan, np.float32), np.full(1, -1, np.int32)
    run(mod, (1,), [x, o, mx, am])
    assert np.allclose(o, x.astype(np.float64).reshape(4, 8).sum(1), rtol=1e-6)
    assert mx[0] == x.max() and am[0] == int(np.argmax(x))


def _gemm_inputs(M, N_, K, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N_)).astype(np.float16)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def _close(got, ref, tol):
    err = np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max()
    assert err < tol, err


@pytest.mark.parametrize("shape", [(128, 128, 256), (192, 128, 128)])
def test_tma_gemm_matches_numpy(shape):
    M, N_, K = shape
    a, b, ref = _gemm_inputs(M, N_, K)
    c = np.full((M, N_), np.nan, np.float16)
    args = [HostDesc.of(a, (64, 64)), HostDesc.of(b, (64, 64)), HostDesc.of(c, (64, 64)), K]
    assert run(parse_module(gemm_tma(64, 64, 64)), (M // 64, N_ // 64), args) == []
    _close(c, ref, 2e-3)  # fp16 output rounding


def test_tma_zero_padding_and_clipped_store():
    """M = 100 is not a multiple of the 64-row tile: loads past the edge read zeros and the
    store writes only the 100 rows that exist."""
    M, N_, K = 100, 64, 64
    a, b, ref = _gemm_inputs(M, N_, K, seed=4)
    c = np.full((M, N_), np.nan, np.float16)
    args = [HostDesc.of(a, (64, 64)), HostDesc.of(b, (64, 64)), HostDesc.of(c, (64, 64)), K]
    assert run(parse_module(gemm_tma(64, 64, 64)), (2, 1), args) == []
    _close(c, ref, 2e-3)


def test_warp_specialized_gemm_matches_numpy():
    M, N_, K = 128, 128, 320
    a, b, ref = _gemm_inputs(M, N_, K, seed=1)
    c = np.full((M, N_), np.nan, np.float16)
    args = [HostDesc.of(a, (64, 64)), HostDesc.of(b, (64, 64)), HostDesc.of(c, (64, 64)), K]
    assert run(parse_module(gemm_ws(64, 64, 64, stages=3)), (2, 2), args) == []
    _close(c, ref, 2e-3)


def test_cp_async_gemm_accumulates_in_fp32():
    M, N_, K = 128, 128, 128
    a, b, ref = _gemm_inputs(M, N_, K, seed=2)
    c = np.full((M, N_), np.nan, np.float32)
    assert run(parse_module(gemm_cp_async(64, 64, 32)), (2, 2), [a, b, c, M, N_, K]) == []
    _close(c, ref, 1e-6)


def test_missing_wait_gives_stale_data_as_on_the_gpu():
    """Without the mbarrier wait the wgmma reads the buffer before the TMA data lands: the
    result is wrong (poisoned shared memory), and report mode says why."""
    M, N_, K = 64, 64, 64
    a, b, ref = _gemm_inputs(M, N_, K)
    c = np.zeros((M, N_), np.float16)
    args = [HostDesc.of(a, (64, 64)), HostDesc.of(b, (64, 64)), HostDesc.of(c, (64, 64)), K]
    hs = run(parse_module(gemm_tma(64, 64, 64, wait_loads=False)), (1, 1), args, raise_on_hazard=False)
    assert hs and not np.allclose(c, ref, atol=1e-1)


def test_bad_arguments_are_clear_errors():
    m = parse_module(gemm_tma(64, 64, 64))
    a = np.zeros((64, 64), np.float32)
    with pytest.raises(InterpreterError, match="reads it as f16, but the array holds float32"):
        run(m, (1, 1), [HostDesc.of(a, (64, 64))] * 3 + [64])
    h = np.zeros((64, 64), np.float16)
    with pytest.raises(InterpreterError, match="block_shape"):
        run(m, (1, 1), [HostDesc.of(h, (32, 64))] * 3 + [64])
    with pytest.raises(InterpreterError, match="takes 4 arguments"):
        run(m, (1, 1), [h])


class _FakeDeviceArray:
    """A stand-in for a numba device array: only copy_to_host / copy_to_device."""

    def __init__(self, host):
        self._mem = host.copy()
        self.copies = 0

    def copy_to_host(self):
        self.copies += 1
        return self._mem.copy()

    def copy_to_device(self, h):
        self.copies += 1
        self._mem[...] = h


def test_device_arrays_are_copied_to_the_host_and_back():
    body = """
    %i = tt.make_range {start = 0, end = 8} : tensor<8xi32>
    %p = tt.splat %x : tensor<8x!ptr<i32>>
    %a = tt.addptr %p, %i : tensor<8x!ptr<i32>>
    %v = tt.load %a : tensor<8xi32>
    %w = arith.addi %v, %i : tensor<8xi32>
    tt.store %a, %w"""
    m = parse_module(module_text(body, "%x: !ptr<i32>"))
    dev = _FakeDeviceArray(np.arange(8, dtype=np.int32))
    run(m, (1,), [dev])
    assert dev.copies == 2 and list(dev._mem) == [2 * i for i in range(8)]


def test_host_descriptor_without_block_shape():
    h = np.zeros((64, 64), np.float16)
    d = HostDesc.of(h, (64, 64))
    d.block_shape = None
    with pytest.raises(InterpreterError, match="has no block_shape"):
        run(parse_module(gemm_tma(64, 64, 64)), (1, 1), [d, d, d, 64])

"""`tl.dot` kernels over every tile shape and operand type, shared by the CPU tests (PTX through
ptxas, the interpreter) and the GPU test (tests/gpu/test_dot_gpu.py); and their references,
computed here in float64 from the operands' exact values."""

from __future__ import annotations

from typing import Dict, Tuple

import numpy as np

import tlx
import tlx.language as tl


@tlx.jit
def dot_tile(x_ptr, y_ptr, z_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FROM_SMEM: tl.constexpr,
             PRECISION: tl.constexpr, OUT_F16: tl.constexpr):
    """Z = X @ Y for one BM x BK by BK x BN tile, row-major; the operands straight from global
    loads, or (FROM_SMEM) stored to shared buffers and read back with local_load (the peer's
    `tl.load -> local_store -> local_load -> tl.dot`)."""
    m = tl.arange(0, BM)
    n = tl.arange(0, BN)
    k = tl.arange(0, BK)
    a = tl.load(x_ptr + m[:, None] * BK + k[None, :])
    b = tl.load(y_ptr + k[:, None] * BN + n[None, :])
    if FROM_SMEM:
        a_buf = tlx.local_alloc((BM, BK), tlx.dtype_of(x_ptr), 1)
        b_buf = tlx.local_alloc((BK, BN), tlx.dtype_of(y_ptr), 1)
        tlx.local_store(a_buf[0], a)
        tlx.local_store(b_buf[0], b)
        a = tlx.local_load(a_buf[0])
        b = tlx.local_load(b_buf[0])
    if OUT_F16:
        c = tl.dot(a, b, out_dtype=tl.float16)
    else:
        c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(z_ptr + m[:, None] * BN + n[None, :], c)


@tlx.jit
def dot_k_loop(x_ptr, y_ptr, z_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Z = X @ Y over a K loop (X is BM x K, Y is K x BN), accumulating in registers; the B tile of
    the first step is loop-invariant and added once more every step: Z = X @ Y + X @ Y0 where Y0
    is Y's first BK rows repeated."""
    m = tl.arange(0, BM)
    n = tl.arange(0, BN)
    k = tl.arange(0, BK)
    b0 = tl.load(y_ptr + k[:, None] * BN + n[None, :])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(x_ptr + m[:, None] * K + (k0 + k)[None, :])
        b = tl.load(y_ptr + (k0 + k)[:, None] * BN + n[None, :])
        acc = tl.dot(a, b, acc)
        acc = tl.dot(a, b0, acc)
    tl.store(z_ptr + m[:, None] * BN + n[None, :], acc)


@tlx.jit
def dot_chain(q_ptr, k_ptr, v_ptr, o_ptr, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    """O = (Q @ K^T as fp16) @ V, attention's two chained dots (without the softmax)."""
    m = tl.arange(0, BM)
    n = tl.arange(0, BN)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + m[:, None] * D + d[None, :])
    kt = tl.load(k_ptr + d[:, None] + n[None, :] * D)
    v = tl.load(v_ptr + n[:, None] * D + d[None, :])
    s = tl.dot(q, kt)
    o = tl.dot(s.to(tl.float16), v)
    tl.store(o_ptr + m[:, None] * D + d[None, :], o)


# operand dtype -> (signature type, numpy storage dtype, result signature type)
DTYPES: Dict[str, Tuple[str, type, str]] = {
    "fp16": ("fp16", np.float16, "fp32"), "bf16": ("bf16", np.uint16, "fp32"), "fp32": ("fp32", np.float32, "fp32"),
    "int8": ("i8", np.int8, "i32"), "e4m3": ("fp8e4nv", np.uint8, "fp32"), "e5m2": ("fp8e5", np.uint8, "fp32"),
    "fp64": ("fp64", np.float64, "fp64"),
}


def kmin(dt: str) -> int:
    """The smallest K tl.dot takes for `dt` operands."""
    return 32 if dt in ("int8", "e4m3", "e5m2") else 16


def fp8_value(bits: np.ndarray, kind: str) -> np.ndarray:
    """float64 values of fp8 bit patterns (e4m3: bias 7, 3 mantissa bits, no infinities, 0x7f /
    0xff NaN; e5m2: bias 15, 2 mantissa bits, IEEE-like)."""
    bits = bits.astype(np.int64)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    eb, mb = (4, 3) if kind == "e4m3" else (5, 2)
    bias = (1 << (eb - 1)) - 1
    e = (bits >> mb) & ((1 << eb) - 1)
    f = bits & ((1 << mb) - 1)
    normal = (1.0 + f / (1 << mb)) * np.exp2(e.astype(np.float64) - bias)
    sub = (f / (1 << mb)) * 2.0 ** (1 - bias)
    return sign * np.where(e == 0, sub, normal)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    """float64 values of bf16 bit patterns (the high half of an fp32)."""
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def operands(dt: str, shape: Tuple[int, int], rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """(what the kernel reads, its exact float64 value) for random operands of `dt`: small values
    of every sign (fp8: every finite bit pattern of magnitude <= 8 and >= 2^-4 or zero)."""
    if dt == "int8":
        raw = rng.integers(-128, 128, shape).astype(np.int8)
        return raw, raw.astype(np.float64)
    if dt in ("e4m3", "e5m2"):
        pats = np.arange(256, dtype=np.uint8)
        vals = fp8_value(pats, dt)
        ok = np.isfinite(vals) & (np.abs(vals) <= 8) & ((np.abs(vals) >= 2.0 ** -4) | (vals == 0))
        raw = rng.choice(pats[ok], shape).astype(np.uint8)
        return raw, fp8_value(raw, dt)
    x = rng.standard_normal(shape)
    if dt == "bf16":
        raw = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # truncated: exact bf16 values
        return raw, bf16_value(raw)
    raw = x.astype({"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}[dt])
    return raw, raw.astype(np.float64)


def dot_bound(dt: str, a64: np.ndarray, b64: np.ndarray, precision: str = "tf32", out_f16: bool = False) -> np.ndarray:
    """Elementwise error bound of a tensor-core product against the exact float64 one: operand
    rounding (tf32 keeps 10 mantissa bits; truncation as well as rounding fits 2^-10), fp32
    accumulation (K additions at 2^-23 relative; fp64's FMA loop at 2^-52), fp8 on Hopper's narrower wgmma adder (about 14
    bits), an f16 accumulator rounding at every k16 step (2^-10 each). int8 is exact."""
    k = a64.shape[1]
    mag = np.abs(a64) @ np.abs(b64)
    if dt == "int8":
        return np.zeros_like(mag)
    step = 2.0 ** -52 if dt == "fp64" else 2.0 ** -23
    if dt in ("e4m3", "e5m2"):
        step = 2.0 ** -13
    if out_f16:
        step = 2.0 ** -10
    rel = k * step
    # operand rounding: tf32 (10 bits; truncation as well as rounding), and what the split
    # precisions leave: tf32x3 drops a_lo b_lo and truncates the lo parts (~2^-20 each), bf16x3
    # the same at bf16's 8 bits (~2^-18), bf16x6 only third-order terms (~2^-24)
    rel += {"tf32": 2 * 2.0 ** -10, "tf32x3": 3 * 2.0 ** -20, "bf16x3": 3 * 2.0 ** -18,
            "bf16x6": 6 * 2.0 ** -24}.get(precision, 0.0) if dt == "fp32" else 0.0
    return rel * mag + 1e-30


# ---------------------------------------------------------------------------------------------
# the cases the GPU test runs (tests/gpu/test_dot_gpu.py); tests/test_dot_codegen.py compiles
# every one of them on the CPU, through ptxas, so they stay valid
# ---------------------------------------------------------------------------------------------

# (operand dtype, M, N, K, operands from shared buffers): M = 16, 32 (mma.sync), 64, 128 (wgmma)
TILE_CASES = [(dt, m, 32, 2 * kmin(dt), smem) for dt in DTYPES for m in (16, 32, 64, 128) for smem in (False, True)]
# tiles smaller than one m16n8 instruction (fp16, K = 16): (M, N, mma.sync instructions per warp)
SMALL_TILES = [(1, 1, 1), (1, 16, 1), (8, 8, 1), (16, 1, 1), (4, 64, 2), (2, 2, 1)]
# (num_warps, M, N): fp16, K = 32, from shared buffers
WARP_CASES = [(nw, m, n) for nw in (1, 2, 8) for m, n in ((64, 64), (16, 128), (128, 16))]
# (M, x dtype, y dtype, K, precision, f16 accumulator), N = 32
SPECIAL_CASES = [(m, x, y, k, p, f16) for m in (16, 64) for x, y, k, p, f16 in
                 (("fp16", "fp16", 64, "tf32", True), ("fp32", "fp32", 32, "ieee", False),
                  ("e4m3", "e5m2", 64, "tf32", False), ("fp32", "fp32", 32, "tf32x3", False),
                  ("fp32", "fp32", 32, "bf16x3", False), ("fp32", "fp32", 32, "bf16x6", False))]
K_LOOP_BMS = (16, 32, 64, 128)  # BN = 64, BK = 32
CHAIN_CASES = [(16, 32, 32), (32, 64, 64), (64, 64, 64)]  # (BM, BN, D)


def tile_signature(x: str, y: str, out: str) -> Dict[str, str]:
    """dot_tile's signature for operand dtypes x, y and result type `out`."""
    return {"x_ptr": f"*{DTYPES[x][0]}", "y_ptr": f"*{DTYPES[y][0]}", "z_ptr": f"*{out}"}


def gpu_compile_cases(tiles: bool = True):
    """(kernel, signature, constexprs, num_warps) of every launch of the GPU test (without the
    TILE_CASES when `tiles` is False)."""
    def tile(m, n, k, smem=False, precision="tf32", f16=False):
        return {"BM": m, "BN": n, "BK": k, "FROM_SMEM": smem, "PRECISION": precision, "OUT_F16": f16}

    for dt, m, n, k, smem in (TILE_CASES if tiles else ()):
        yield dot_tile, tile_signature(dt, dt, DTYPES[dt][2]), tile(m, n, k, smem), 4
    for m, n, _ in SMALL_TILES:
        yield dot_tile, tile_signature("fp16", "fp16", "fp32"), tile(m, n, 16), 4
    for nw, m, n in WARP_CASES:
        yield dot_tile, tile_signature("fp16", "fp16", "fp32"), tile(m, n, 32, True), nw
    for m, x, y, k, p, f16 in SPECIAL_CASES:
        yield dot_tile, tile_signature(x, y, "fp16" if f16 else "fp32"), tile(m, 32, k, False, p, f16), 4
    for bm in K_LOOP_BMS:
        yield dot_k_loop, {"x_ptr": "*fp16", "y_ptr": "*fp16", "z_ptr": "*fp32", "K": "i32"}, \
            {"BM": bm, "BN": 64, "BK": 32}, 4
    for bm, bn, d in CHAIN_CASES:
        yield dot_chain, {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32"}, \
            {"BM": bm, "BN": bn, "D": d}, 4

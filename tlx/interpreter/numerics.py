"""GPU number semantics on numpy arrays: which numpy dtype holds each IR scalar type, how values
are stored in memory, rounding to fp16 / bf16 / fp8 / tf32, casts, and the integer division,
shift and signedness rules of Triton/PTX.

Values in registers are numpy arrays (or numpy scalars) of a *compute* dtype:
``i1`` → bool, ``iN``/``uN`` → the numpy integer of that width, ``f16`` → float16, ``f32`` →
float32, ``f64`` → float64, ``bf16`` and the fp8 types → float32 holding only values that the type
can represent (every op that produces them rounds). Pointers are int64 byte addresses.
In memory (global or shared) every value has a *storage* dtype of the type's width: bf16 is its
16-bit pattern (uint16), fp8 its byte (uint8), i1 a byte.
"""

from __future__ import annotations

import math
from typing import Dict

import numpy as np

from tlx.compiler.ir import types as T

_COMPUTE = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
    "f8e4m3": np.float32, "f8e5m2": np.float32,
}
_STORAGE = dict(_COMPUTE, i1=np.uint8, bf16=np.uint16, f8e4m3=np.uint8, f8e5m2=np.uint8)

_SIGNED = {1: np.int8, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_UNSIGNED = {1: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def compute_dtype(t: T.Type) -> np.dtype:
    """The numpy dtype that holds values of element type `t` in registers."""
    return np.dtype(np.int64 if isinstance(t, T.PointerType) else _COMPUTE[t.name])  # type: ignore[union-attr]


def storage_dtype(t: T.Type) -> np.dtype:
    """The numpy dtype of element type `t` in memory (same width as the GPU's)."""
    return np.dtype(np.int64 if isinstance(t, T.PointerType) else _STORAGE[t.name])  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# float formats
# ---------------------------------------------------------------------------------------------

class FloatFormat:
    """A binary float format: `mant` explicit mantissa bits, smallest normal exponent `emin`,
    largest finite value `maxfin`; `satfinite` conversions clamp overflow to ±maxfin (what
    `cvt.rn.satfinite` does for fp8), otherwise overflow gives ±inf."""

    def __init__(self, name: str, mant: int, emin: int, maxfin: float, satfinite: bool):
        self.name, self.mant, self.emin, self.maxfin, self.satfinite = name, mant, emin, maxfin, satfinite


FORMATS: Dict[str, FloatFormat] = {
    "f16": FloatFormat("f16", 10, -14, 65504.0, False),
    "bf16": FloatFormat("bf16", 7, -126, float((2 - 2 ** -7) * 2.0 ** 127), False),
    "f32": FloatFormat("f32", 23, -126, float(np.finfo(np.float32).max), False),
    "tf32": FloatFormat("tf32", 10, -126, float(np.finfo(np.float32).max), False),
    "f8e4m3": FloatFormat("f8e4m3", 3, -6, 448.0, True),
    "f8e5m2": FloatFormat("f8e5m2", 2, -14, 57344.0, True),
}


def round_float(x, fmt: FloatFormat, mode: str = "rtne") -> np.ndarray:
    """Round float64 values to `fmt` (round to nearest even, or toward zero with mode='rtz'),
    with subnormals, overflow to inf or saturation; NaN stays NaN. One rounding, from float64."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    _, e = np.frexp(ax)  # ax = m * 2**e, m in [0.5, 1)
    lead = np.maximum(e.astype(np.int64) - 1, fmt.emin)
    ulp = np.ldexp(1.0, (lead - fmt.mant).astype(np.int32))
    q = ax / ulp
    r = (np.rint(q) if mode == "rtne" else np.trunc(q)) * ulp
    over = r > fmt.maxfin
    if np.any(over):
        if fmt.satfinite:
            r = np.where(over, fmt.maxfin, r)
        elif mode == "rtz":  # toward zero never reaches inf from a finite value
            r = np.where(over & np.isfinite(ax), fmt.maxfin, r)
        else:
            r = np.where(over, np.inf, r)
    return np.copysign(r, x)


def round_bf16_from_f32(x) -> np.ndarray:
    """Round float32 values to bf16 (round to nearest even on the bit pattern), as float32."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    r = (u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    r = np.where(np.isnan(x), np.uint32(0x7FC00000), r).astype(np.uint32)
    return r.view(np.float32)


def round_to(x, t: T.ScalarType, mode: str = "rtne") -> np.ndarray:
    """Float values rounded to float type `t`, in `t`'s compute dtype."""
    name = t.name
    if name == "f64":
        return np.asarray(x, dtype=np.float64)
    if mode == "rtne":
        xa = np.asarray(x)
        if name == "f32":
            return xa.astype(np.float32)
        if name == "f16":
            return xa.astype(np.float16)
        if name == "bf16" and xa.dtype != np.float64:
            return round_bf16_from_f32(xa.astype(np.float32))
    return round_float(x, FORMATS[name], mode).astype(compute_dtype(t))


def _fp8_table(name: str) -> np.ndarray:
    vals = np.zeros(256, dtype=np.float32)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        if name == "f8e4m3":
            e, m = (b >> 3) & 0xF, b & 0x7
            if e == 15 and m == 7:
                v = math.nan
            elif e == 0:
                v = m / 8 * 2.0 ** -6
            else:
                v = (1 + m / 8) * 2.0 ** (e - 7)
        else:
            e, m = (b >> 2) & 0x1F, b & 0x3
            if e == 31:
                v = math.inf if m == 0 else math.nan
            elif e == 0:
                v = m / 4 * 2.0 ** -14
            else:
                v = (1 + m / 4) * 2.0 ** (e - 15)
        vals[b] = s * v
    return vals


_FP8_DECODE = {n: _fp8_table(n) for n in ("f8e4m3", "f8e5m2")}
# positive finite values in bit order (bits 0..maxfinite), for encoding by search
_FP8_POS = {n: t[:0x7F] if n == "f8e4m3" else t[:0x7C] for n, t in _FP8_DECODE.items()}


def decode(raw: np.ndarray, t: T.Type) -> np.ndarray:
    """Values stored in memory (storage dtype) → register values (compute dtype)."""
    if isinstance(t, T.PointerType):
        return raw.astype(np.int64, copy=False)
    name = t.name  # type: ignore[union-attr]
    if name == "bf16":
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
    if name in _FP8_DECODE:
        return _FP8_DECODE[name][raw]
    if name == "i1":
        return raw != 0
    return raw


def encode(vals, t: T.Type) -> np.ndarray:
    """Register values (already of `t`'s values) → their storage bit patterns."""
    vals = np.asarray(vals)
    if isinstance(t, T.PointerType):
        return vals.astype(np.int64, copy=False)
    name = t.name  # type: ignore[union-attr]
    if name == "bf16":
        return (round_bf16_from_f32(vals).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    if name in _FP8_POS:
        pos = _FP8_POS[name]
        v = vals.astype(np.float32)
        a = np.abs(v)
        bits = np.searchsorted(pos, np.minimum(a, pos[-1])).astype(np.uint8)
        bits = np.where(np.signbit(v), bits | np.uint8(0x80), bits)
        if name == "f8e5m2":
            bits = np.where(np.isinf(v), np.where(v > 0, 0x7C, 0xFC), bits)
        return np.where(np.isnan(v), np.uint8(0x7F), bits).astype(np.uint8)
    if name == "i1":
        return vals.astype(np.uint8)
    return vals.astype(storage_dtype(t), copy=False)


def round_tf32(x: np.ndarray) -> np.ndarray:
    """What wgmma does with an fp32 (tf32) operand: it uses only the top 19 bits (the low 13
    mantissa bits are ignored, i.e. truncated)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return u.view(np.float32)


# ---------------------------------------------------------------------------------------------
# integers
# ---------------------------------------------------------------------------------------------

def as_signed(x, t: T.ScalarType) -> np.ndarray:
    """The same bits read as a signed integer of `t`'s width."""
    return np.asarray(x).astype(_SIGNED[t.bits], copy=False) if t.bits == 1 else np.asarray(x).view(_SIGNED[t.bits])


def as_unsigned(x, t: T.ScalarType) -> np.ndarray:
    """The same bits read as an unsigned integer of `t`'s width."""
    return np.asarray(x).astype(np.uint8, copy=False) if t.bits == 1 else np.asarray(x).view(_UNSIGNED[t.bits])


def back(x: np.ndarray, t: T.ScalarType) -> np.ndarray:
    """Bits of the right width back into `t`'s compute dtype."""
    if t.bits == 1:
        return (np.asarray(x) & 1).astype(np.bool_)
    return np.asarray(x).astype(_UNSIGNED[t.bits] if not t.is_signed else _SIGNED[t.bits], copy=False).view(compute_dtype(t))


def div_trunc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (C/PTX `div.s` / `div.u`, by the arrays' dtype);
    division by zero gives all ones (-1 signed), as the hardware does."""
    zero = b == 0
    bb = np.where(zero, 1, b).astype(a.dtype)
    q = np.floor_divide(a, bb)
    r = a - q * bb
    q = q + ((r != 0) & ((a < 0) != (bb < 0))).astype(a.dtype)  # floor → toward zero
    return np.where(zero, np.array(-1).astype(a.dtype), q).astype(a.dtype)


def rem_trunc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer remainder with the sign of the dividend (C/PTX `rem.s` / `rem.u`, by the arrays'
    dtype); x % 0 gives x."""
    zero = b == 0
    bb = np.where(zero, 1, b).astype(a.dtype)
    return np.where(zero, a, np.fmod(a, bb)).astype(a.dtype)


def shift(kind: str, a: np.ndarray, b: np.ndarray, t: T.ScalarType) -> np.ndarray:
    """PTX shifts: an amount of the register width or more is clamped to the width (so `shl`
    and `shr.u` give 0 and `shr.s` gives the sign fill)."""
    bits = t.bits
    ua = as_unsigned(a, t)
    amt = as_unsigned(b, t).astype(np.uint64)
    big = amt >= bits
    s = np.minimum(amt, bits - 1).astype(ua.dtype)
    if kind == "shli":
        r = np.where(big, 0, ua << s).astype(ua.dtype)
    elif kind == "shrui":
        r = np.where(big, 0, ua >> s).astype(ua.dtype)
    else:
        sa = as_signed(a, t)
        r = as_unsigned(np.where(big, sa >> np.array(bits - 1).astype(sa.dtype), sa >> s.astype(sa.dtype)).astype(sa.dtype), t)
    return back(r, t)


def float_to_int(x: np.ndarray, t: T.ScalarType, signed: bool) -> np.ndarray:
    """`cvt.rzi` to an integer: truncate toward zero, saturate to the target range, NaN → 0."""
    x64 = np.asarray(x, dtype=np.float64)
    if t.bits == 1:
        return x64 != 0
    info = np.iinfo(_SIGNED[t.bits] if signed else _UNSIGNED[t.bits])
    r = np.trunc(np.nan_to_num(x64, nan=0.0, posinf=float(info.max), neginf=float(info.min)))
    if t.bits == 64:  # float64 cannot hold the int64 bounds exactly: compare before converting
        hi = r >= float(info.max)
        lo = r <= float(info.min)
        out = np.where(hi | lo, 0, r).astype(info.dtype)
        out = np.where(hi, info.max, np.where(lo, info.min, out)).astype(info.dtype)
    else:
        out = np.clip(r, info.min, info.max).astype(info.dtype)
    return back(out, t)


def int_constant(value: int, t: T.ScalarType) -> np.generic:
    """An integer constant wrapped to `t`'s width (so 0xFFFFFFFF as i32 is -1)."""
    if t.bits == 1:
        return np.bool_(bool(value))
    v = int(value) & ((1 << t.bits) - 1)
    if t.is_signed and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return compute_dtype(t).type(v)

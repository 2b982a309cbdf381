"""Lowering of scalar and elementwise ops: constants, integer and float arithmetic, math
functions, comparisons, select, every cast (fp8 and bf16 included), program ids, ranges,
splats, thread ids, a CTA's cluster rank, the cluster's size and clocks.

Each elementwise op applies one PTX instruction sequence per register: scalars are one
register, tensors one per element the thread holds. 8-bit integers and fp8 live in the low byte
of a 16-bit register; instructions whose answer depends on the high byte (comparisons, division,
right shifts, widening) normalize it first.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Callable, List, Optional

from ..abi import bf16_bits
from ..errors import TLXCompileError
from ..ir import types as T
from ..ir.core import Operation
from .const_div import lower_const_div
from .ptx import braces
from .values import Scalar, Tensor, float_suffix, int_bits, reg_kind

if TYPE_CHECKING:
    from .lower import KernelLowering

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
_FLOAT_IMM = {"f16": ("0x", ">e"), "f32": ("0f", ">f"), "f64": ("0d", ">d")}  # PTX prefix, struct format


def f32_hex(x: float) -> str:
    """A PTX f32 immediate (0fXXXXXXXX)."""
    return "0f" + struct.pack(">f", x).hex().upper()


def immediate(e: T.ScalarType, value) -> str:
    """The immediate text of `value` as element type `e` (for mov into its register kind)."""
    if e.name == "bf16":
        return "0x%04X" % bf16_bits(value)
    if e.name in _FLOAT_IMM:
        prefix, fmt = _FLOAT_IMM[e.name]
        return prefix + struct.pack(fmt, float(value)).hex().upper()
    if e.is_float:
        raise TLXCompileError(f"a constant of type {e.name} cannot be materialized directly",
                              hint="write the constant in f16 or f32 and convert it")
    return str(int(value) & ((1 << int_bits(e)) - 1))


# ---------------------------------------------------------------------------------------------
# elementwise plumbing
# ---------------------------------------------------------------------------------------------

def elementwise(lw: KernelLowering, op: Operation, body: Callable[[str, List[str]], None]) -> None:
    """Lower an elementwise op: `body(dst, srcs)` emits one element's instructions. Registers
    whose sources repeat an earlier register's (splats, broadcasts) reuse its result."""
    res = op.result
    t = res.type
    if not isinstance(t, T.TensorType):
        d = lw.e.named(reg_kind(t), lw.hint(res))
        body(d, [lw.regs(v, 1)[0] for v in op.operands])
        lw.set(res, Scalar(d, t))
        return
    regs, m = lw.new_regs(t, lw.hint(res))
    srcs = [lw.regs(v, len(regs)) for v in op.operands]
    seen: dict = {}
    want = lw.needed(res)
    for i, d in enumerate(regs):
        if want is not None and i not in want:
            continue  # nothing reads it (a pointer register inside a vector)
        key = tuple(s[i] for s in srcs)
        if key in seen:
            regs[i] = seen[key]
            continue
        seen[key] = d
        body(d, list(key))
    lw.set(res, Tensor(regs, m, t.element))


def norm8(lw: KernelLowering, r: str, e: T.ScalarType, signed: Optional[bool] = None) -> str:
    """An 8-bit value with its high byte made valid (sign- or zero-extended to 16 bits)."""
    if e.bits != 8:
        return r
    if e.is_signed if signed is None else signed:
        return lw.e.new("b16", "cvt.s16.s8", r)
    return lw.e.new("b16", "and.b16", r, "255")


def to_f32(lw: KernelLowering, r: str, e: T.ScalarType) -> str:
    """A register holding f16 / bf16 / f32 / f64 value r as f32."""
    if e.name == "f32":
        return r
    t = lw.e.tmp("b32")
    float_convert(lw, t, r, e, T.f32)
    return t


# ---------------------------------------------------------------------------------------------
# constants, ids, ranges, splats
# ---------------------------------------------------------------------------------------------

def _constant(lw: KernelLowering, op: Operation) -> None:
    t = op.result.type
    e = T.element_of(t)
    v = op.attrs["value"]
    if e.bits == 1:  # type: ignore[union-attr]
        reg = lw.const("pred", "1" if v else "0")
    else:
        reg = lw.const(reg_kind(e), immediate(e, v))  # type: ignore[arg-type]
    if isinstance(t, T.TensorType):
        m = lw.lmap(t)
        lw.set(op.result, Tensor([reg] * m.num_regs, m, t.element))
    else:
        lw.set(op.result, Scalar(reg, t))


def _program_id(lw: KernelLowering, op: Operation) -> None:
    axis = "xyz"[op.attrs["axis"]]
    sreg = ("%ctaid." if op.name == "tt.get_program_id" else "%nctaid.") + axis
    name = ("pid_" if op.name == "tt.get_program_id" else "nprog_") + axis

    def make() -> str:
        r = lw.e.named("b32", name)
        lw.e("mov.u32", r, sreg)
        return r

    r = lw.once(("sreg", sreg), make)
    lw.set(op.result, Scalar(r, T.i32))


def _read_sreg(lw: KernelLowering, op: Operation, sreg: str, name: str) -> None:
    """The i32 result of `op`: special register `sreg` read into a register named `name`."""
    r = lw.e.named("b32", name)
    lw.e("mov.u32", r, sreg)
    lw.set(op.result, Scalar(r, T.i32))


def _thread_id(lw: KernelLowering, op: Operation) -> None:
    axis = op.attrs.get("axis", 0)
    if axis == 0:
        lw.set(op.result, Scalar(lw.part.tid, T.i32))
    else:
        _read_sreg(lw, op, "%tid." + "xyz"[axis], "tid_" + "xyz"[axis])


# cluster ops that read one special register: op name -> (the register, the result's name)
_CLUSTER_SREGS = {"tlx.cluster_cta_rank": ("%cluster_ctarank", "cta_rank"),
                  "tlx.cluster_size": ("%cluster_nctarank", "cluster_size")}


def _cluster_sreg(lw: KernelLowering, op: Operation) -> None:
    _read_sreg(lw, op, *_CLUSTER_SREGS[op.name])


def _clock(lw: KernelLowering, op: Operation) -> None:
    r = lw.e.named("b64", lw.hint(op.result, "clock"))
    lw.e.root("mov.u64", r, "%clock64")
    lw.set(op.result, Scalar(r, op.result.type))


def _make_range(lw: KernelLowering, op: Operation) -> None:
    t = op.result.type
    regs, m = lw.new_regs(t, lw.hint(op.result, "range"))
    start = op.attrs["start"]
    tc, tmask = lw.thread_coord(m, 0)
    for i, c in enumerate(m.reg_coords()):
        k = c[0]
        if tc is None:
            lw.e("mov.b32", regs[i], str(start + k))
        elif k & tmask:
            x = lw.e.new("b32", "xor.b32", tc, str(k))
            lw.e("add.s32", regs[i], x, str(start))
        else:
            lw.e("add.s32", regs[i], tc, str(start + k))
    lw.set(op.result, Tensor(regs, m, T.i32))


def _splat(lw: KernelLowering, op: Operation) -> None:
    s = lw.val(op.arg("src"))
    t = op.result.type
    m = lw.lmap(t)
    lw.set(op.result, Tensor([s.reg] * m.num_regs, m, t.element))  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# integer arithmetic
# ---------------------------------------------------------------------------------------------

_INT_BIN = {"arith.addi": "add", "arith.subi": "sub", "arith.muli": "mul.lo", "arith.divsi": "div",
            "arith.divui": "div", "arith.remsi": "rem", "arith.remui": "rem", "arith.andi": "and",
            "arith.ori": "or", "arith.xori": "xor", "arith.shli": "shl", "arith.shrsi": "shr", "arith.shrui": "shr",
            "arith.maxsi": "max", "arith.maxui": "max", "arith.minsi": "min", "arith.minui": "min"}
_BOOL_BIN = {"arith.andi": "and", "arith.ori": "or", "arith.xori": "xor", "arith.addi": "xor", "arith.subi": "xor",
             "arith.muli": "and", "arith.maxui": "or", "arith.minui": "and", "arith.maxsi": "and", "arith.minsi": "or"}


def _int_binary(lw: KernelLowering, op: Operation) -> None:
    e = T.element_of(op.operands[0].type)
    n = op.name
    em = lw.e
    if e.bits == 1:
        if n not in _BOOL_BIN:
            raise TLXCompileError(f"{n} is not defined on i1", op.loc)
        elementwise(lw, op, lambda d, s: em(_BOOL_BIN[n] + ".pred", d, s[0], s[1]))
        return
    base = _INT_BIN[n]
    # the op's own signedness (divsi / divui ...), else the type's
    signed = n.endswith("si") or (not n.endswith("ui") and e.is_signed)
    sg = "s" if signed else "u"
    bits = int_bits(e)
    # a constant right operand goes in as an immediate; a 32-bit division or remainder by one
    # becomes a multiply-high sequence, or shifts and masks for a power of two (const_div: ptxas
    # itself would emit its generic division)
    rc = lw.axis.info(op.operands[1]).constant if e.bits >= 32 else None
    imm = str(rc) if rc is not None and -(1 << 31) <= rc < (1 << 31) else None
    by_constant = rc is not None and bits == 32 and base in ("div", "rem")

    def body(d: str, s: List[str]) -> None:
        a, b = s
        if base in ("shl", "shr"):
            amt = b if bits == 32 else em.new("b32", f"cvt.u32.u{bits}", norm8(lw, b, e, False))
            if base == "shl":
                em(f"shl.b{bits}", d, a, amt)
            else:
                em(f"shr.{sg}{bits}", d, norm8(lw, a, e, signed), amt)
            return
        if by_constant and lower_const_div(em, em.new, d, a, rc, signed, base == "rem"):
            return
        b = imm or b
        if base in ("and", "or", "xor"):
            em(f"{base}.b{bits}", d, a, b)
            return
        if base in ("div", "rem", "max", "min"):
            a, b = norm8(lw, a, e, signed), norm8(lw, b, e, signed)
        em(f"{base}.{sg}{bits}", d, a, b)

    elementwise(lw, op, body)


def _absi(lw: KernelLowering, op: Operation) -> None:
    e = T.element_of(op.operands[0].type)
    elementwise(lw, op, lambda d, s: lw.e(f"abs.s{int_bits(e)}", d, norm8(lw, s[0], e, True)))


def _cmpi(lw: KernelLowering, op: Operation) -> None:
    e = T.element_of(op.operands[0].type)
    pred = op.attrs["predicate"]
    em = lw.e
    if isinstance(e, T.ScalarType) and e.bits == 1:
        if pred not in ("eq", "ne"):
            raise TLXCompileError(f"cmpi {pred} on i1 values is not supported", op.loc, hint="compare i32 values")

        def bbody(d: str, s: List[str]) -> None:
            if pred == "ne":
                em("xor.pred", d, s[0], s[1])
            else:
                t = em.new("pred", "xor.pred", s[0], s[1])
                em("not.pred", d, t)

        elementwise(lw, op, bbody)
        return
    if isinstance(e, T.PointerType):
        ty = "u64"
    else:
        ty = f"b{int_bits(e)}" if pred in ("eq", "ne") else f"{pred[0]}{int_bits(e)}"
    cmp = pred if pred in ("eq", "ne") else pred[1:]  # slt -> lt, uge -> ge

    def body(d: str, s: List[str]) -> None:
        a, b = s
        if isinstance(e, T.ScalarType) and e.bits == 8:
            a, b = norm8(lw, a, e, pred[0] == "s"), norm8(lw, b, e, pred[0] == "s")
        em(f"setp.{cmp}.{ty}", d, a, b)

    elementwise(lw, op, body)


_CMPF = {"oeq": "eq", "one": "ne", "olt": "lt", "ole": "le", "ogt": "gt", "oge": "ge", "ueq": "equ", "une": "neu",
         "ult": "ltu", "ule": "leu", "ugt": "gtu", "uge": "geu", "ord": "num", "uno": "nan"}


def _cmpf(lw: KernelLowering, op: Operation) -> None:
    e = T.element_of(op.operands[0].type)
    cmp = _CMPF[op.attrs["predicate"]]
    if e.storage_only:  # type: ignore[union-attr]
        raise TLXCompileError(f"cmpf on {e.name} is not supported", op.loc, hint="convert fp8 values to f16 first")

    def body(d: str, s: List[str]) -> None:
        if e.name == "bf16":  # type: ignore[union-attr]
            lw.e(f"setp.{cmp}.f32", d, to_f32(lw, s[0], e), to_f32(lw, s[1], e))  # type: ignore[arg-type]
        else:
            lw.e(f"setp.{cmp}.{e.name}", d, s[0], s[1])  # type: ignore[union-attr]

    elementwise(lw, op, body)


def _select(lw: KernelLowering, op: Operation) -> None:
    k = reg_kind(T.element_of(op.operands[1].type))  # type: ignore[arg-type]
    em = lw.e

    def body(d: str, s: List[str]) -> None:
        c, a, b = s
        if k == "pred":
            t1, t2, nc = em.tmp("pred"), em.tmp("pred"), em.tmp("pred")
            em("and.pred", t1, c, a)
            em("not.pred", nc, c)
            em("and.pred", t2, nc, b)
            em("or.pred", d, t1, t2)
        else:
            em(f"selp.b{k[1:]}", d, a, b, c)

    elementwise(lw, op, body)


# ---------------------------------------------------------------------------------------------
# float arithmetic and math
# ---------------------------------------------------------------------------------------------

_FLT_BIN = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div", "arith.remf": "rem",
            "arith.maximumf": "max.NaN", "arith.minimumf": "min.NaN", "arith.maxnumf": "max", "arith.minnumf": "min"}


def _float_binary(lw: KernelLowering, op: Operation) -> None:
    e = T.element_of(op.operands[0].type)
    kind = _FLT_BIN[op.name]
    em = lw.e
    ty = float_suffix(e)  # type: ignore[arg-type]
    wide = ty in ("f32", "f64")  # division and fmod run in the type itself (else in f32)

    def body(d: str, s: List[str]) -> None:
        a, b = s
        if kind == "div" and wide:
            em(f"div.rn.{ty}", d, a, b)
        elif kind == "div":
            fa, fb = to_f32(lw, a, e), to_f32(lw, b, e)  # type: ignore[arg-type]
            q = em.new("b32", "div.rn.f32", fa, fb)
            float_convert(lw, d, q, T.f32, e)  # type: ignore[arg-type]
        elif kind == "rem":
            # fmod: a - trunc(a / b) * b, in f32 (f64 for f64)
            w = T.f64 if ty == "f64" else T.f32
            rk = reg_kind(w)
            fa, fb = (a, b) if wide else (to_f32(lw, a, e), to_f32(lw, b, e))  # type: ignore[arg-type]
            q, t, r = em.tmp(rk), em.tmp(rk), em.tmp(rk)
            em(f"div.rn.{w}", q, fa, fb)
            em(f"cvt.rzi.{w}.{w}", t, q)
            em(f"neg.{w}", q, t)
            em(f"fma.rn.{w}", r, q, fb, fa)
            float_convert(lw, d, r, w, e)  # type: ignore[arg-type]
        elif ty == "f64" and kind.endswith(".NaN"):
            # PTX has no max.NaN.f64: the plain max, then either operand if it is a NaN
            t = em.new("b64", f"{kind[:3]}.f64", a, b)
            isn = em.new("pred", "testp.notanumber.f64", a)
            t2 = em.new("b64", "selp.b64", a, t, isn)
            isn2 = em.new("pred", "testp.notanumber.f64", b)
            em("selp.b64", d, b, t2, isn2)
        else:
            em(f"{kind}.{ty}", d, a, b)

    elementwise(lw, op, body)


# float ops that are one instruction on every arithmetic float type: its opcode without the type
_FLT_ONE = {"arith.negf": "neg", "math.absf": "abs", "math.fma": "fma.rn"}


def _float_one(lw: KernelLowering, op: Operation) -> None:
    ins = f"{_FLT_ONE[op.name]}.{float_suffix(T.element_of(op.operands[0].type))}"  # type: ignore[arg-type]
    elementwise(lw, op, lambda d, s: lw.e(ins, d, *s))


# f32 exp2 is `ex2.approx.ftz.f32`, also inside exp, tanh and erf: subnormal inputs are read as
# zero and results below 2^-126 (the smallest normal f32) flush to +-0, as CUDA's fast-math exp2f,
# Triton's ExpOpConversionApprox (the ex2.approx intrinsic) and FlashAttention do. Without .ftz,
# ptxas wraps every ex2 in a subnormal range check and two scalings (3 more SASS slots each); in
# the flash-attention forward that cost 7 points of cuDNN's speed (benchmarks/attention_sweep.py).
# The interpreter flushes the same results (tlx/interpreter/executor.py, _flush_subnormal).
EX2_F32 = "ex2.approx.ftz.f32"

# math functions that are one PTX instruction: its opcode without the type
_MATH_INS = {"math.exp2": "ex2.approx.ftz", "math.log2": "lg2.approx", "math.sqrt": "sqrt.rn", "math.rsqrt": "rsqrt.approx",
             "math.sin": "sin.approx", "math.cos": "cos.approx", "math.floor": "cvt.rmi", "math.ceil": "cvt.rpi"}
_F64_MATH = ("math.sqrt", "math.rsqrt", "math.floor", "math.ceil")  # what PTX has for f64 (f16: floor, ceil)


def _math_ins(name: str, ty: str) -> str:
    stem = _MATH_INS[name]
    return f"{stem}.{ty}.{ty}" if stem.startswith("cvt") else f"{stem}.{ty}"


def _f32_math(lw: KernelLowering, name: str, d: str, x: str) -> None:
    """One f32 math function (fast hardware approximations where PTX has them). exp2, and the
    exp2 inside exp, tanh and erf, is `ex2.approx.ftz.f32`: results below 2^-126 are +-0 and
    subnormal inputs count as zero (see EX2_F32)."""
    em = lw.e
    if name in _MATH_INS:
        em(_math_ins(name, "f32"), d, x)
    elif name == "math.exp":
        t = em.new("b32", "mul.f32", x, f32_hex(LOG2E))
        em(EX2_F32, d, t)
    elif name == "math.log":
        t = em.new("b32", "lg2.approx.f32", x)
        em("mul.f32", d, t, f32_hex(LN2))
    elif name == "math.tanh":
        # tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)), saturating for large |x|
        ax = em.new("b32", "abs.f32", x)
        ex = em.new("b32", EX2_F32, em.new("b32", "mul.f32", ax, f32_hex(2 * LOG2E)))
        q = em.new("b32", "rcp.rn.f32", em.new("b32", "add.f32", ex, f32_hex(1.0)))
        em("copysign.f32", d, x, em.new("b32", "fma.rn.f32", q, f32_hex(-2.0), f32_hex(1.0)))
    elif name == "math.erf":
        # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): 1 - poly(t) * exp(-x^2), t = 1 / (1 + p|x|)
        ax, t, den, poly, x2, ex, r = (em.tmp("b32") for _ in range(7))
        em("abs.f32", ax, x)
        em("fma.rn.f32", den, ax, f32_hex(0.3275911), f32_hex(1.0))
        em("rcp.rn.f32", t, den)
        coeffs = [1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592]
        em("mov.b32", poly, f32_hex(coeffs[0]))
        for c in coeffs[1:]:
            poly = em.new("b32", "fma.rn.f32", poly, t, f32_hex(c))
        p3 = em.new("b32", "mul.f32", poly, t)
        em("mul.f32", x2, ax, ax)
        nx = em.new("b32", "mul.f32", x2, f32_hex(-LOG2E))
        em(EX2_F32, ex, nx)
        em("mul.f32", r, p3, ex)
        one_minus = em.new("b32", "sub.f32", f32_hex(1.0), r)
        em("copysign.f32", d, x, one_minus)
    else:
        raise TLXCompileError(f"internal: no f32 lowering of {name}")


_MATH = ("math.exp", "math.exp2", "math.log", "math.log2", "math.sqrt", "math.rsqrt", "math.sin", "math.cos",
         "math.floor", "math.ceil", "math.erf", "math.tanh")


def _math(lw: KernelLowering, op: Operation) -> None:
    e: T.ScalarType = T.element_of(op.operands[0].type)  # type: ignore[assignment]
    n = op.name
    em = lw.e
    if e.name == "f64" and n not in _F64_MATH:
        raise TLXCompileError(f"{n} on f64 is not supported (PTX has no f64 {n[5:]})", op.loc,
                              hint="convert to f32 first")
    if e.storage_only:
        raise TLXCompileError(f"{n} on {e.name} is not supported", op.loc)

    def body(d: str, s: List[str]) -> None:
        x = s[0]
        if e.name == "f32":
            _f32_math(lw, n, d, x)
        elif e.name == "f64" or (e.name == "f16" and n in ("math.floor", "math.ceil")):
            em(_math_ins(n, e.name), d, x)
        else:  # f16, bf16: in f32
            t = em.tmp("b32")
            _f32_math(lw, n, t, to_f32(lw, x, e))
            float_convert(lw, d, t, T.f32, e)

    elementwise(lw, op, body)


# ---------------------------------------------------------------------------------------------
# casts
# ---------------------------------------------------------------------------------------------

def _int_cast(lw: KernelLowering, d: str, s: str, se: T.ScalarType, de: T.ScalarType, signed: bool) -> None:
    em = lw.e
    if se.bits == 1:
        em(f"selp.b{int_bits(de)}", d, "-1" if signed else "1", "0", s)
        return
    if de.bits == 1:
        b = int_bits(se)
        t = em.new(f"b{b}", f"and.b{b}", s, "1")
        em(f"setp.ne.b{b}", d, t, "0")
        return
    sb, db = int_bits(se), int_bits(de)
    src = norm8(lw, s, se, signed) if se.bits == 8 and de.bits > 8 else s
    sg = "s" if signed else "u"
    if sb == db:
        em(f"mov.b{db}", d, src)
    else:
        em(f"cvt.{sg}{db}.{sg}{sb}", d, src)


def _int_casts(lw: KernelLowering, op: Operation) -> None:
    se, de = T.element_of(op.operands[0].type), T.element_of(op.result.type)
    signed = op.name == "arith.extsi"
    elementwise(lw, op, lambda d, s: _int_cast(lw, d, s[0], se, de, signed))  # type: ignore[arg-type]


def _int_to_float(lw: KernelLowering, op: Operation) -> None:
    se, de = T.element_of(op.operands[0].type), T.element_of(op.result.type)
    signed = op.name == "arith.sitofp"
    em = lw.e

    def body(d: str, s: List[str]) -> None:
        x = s[0]
        if se.bits == 1:  # type: ignore[union-attr]
            k = reg_kind(de)  # type: ignore[arg-type]
            one = immediate(de, -1.0 if signed else 1.0)  # type: ignore[arg-type]
            em(f"selp.b{k[1:]}", d, lw.const(k, one), lw.const(k, immediate(de, 0.0)), x)  # type: ignore[arg-type]
            return
        x = norm8(lw, x, se, signed)  # type: ignore[arg-type]
        st = f"{'s' if signed else 'u'}{int_bits(se)}"
        if de.name in ("f16", "f32", "f64"):  # type: ignore[union-attr]
            em(f"cvt.rn.{de.name}.{st}", d, x)  # type: ignore[union-attr]
        else:  # bf16, fp8: through f32
            t = em.new("b32", f"cvt.rn.f32.{st}", x)
            float_convert(lw, d, t, T.f32, de)  # type: ignore[arg-type]

    elementwise(lw, op, body)


def _float_to_int(lw: KernelLowering, op: Operation) -> None:
    se, de = T.element_of(op.operands[0].type), T.element_of(op.result.type)
    signed = op.name == "arith.fptosi"
    em = lw.e

    def body(d: str, s: List[str]) -> None:
        x, sname = s[0], se.name  # type: ignore[union-attr]
        if se.storage_only or se.name == "bf16":  # type: ignore[union-attr]
            x, sname = (_fp8_to_f32 if se.storage_only else to_f32)(lw, x, se), "f32"  # type: ignore
        if de.bits == 1:  # type: ignore[union-attr]
            em("mov.pred", d, em.new("pred", f"setp.ne.{sname}", x, immediate(T.SCALAR_TYPES[sname], 0.0)))
            return
        em(f"cvt.rzi.{'s' if signed else 'u'}{int_bits(de)}.{sname}", d, x)  # type: ignore[arg-type]

    elementwise(lw, op, body)


def _f32_to_fp8(lw: KernelLowering, d: str, x: str, de: T.ScalarType) -> None:
    """One f32 → fp8 (round to nearest even, saturating to the largest finite value)."""
    em = lw.e
    fmt = "e4m3" if de.name == "f8e4m3" else "e5m2"
    t = em.new("b16", f"cvt.rn.satfinite.{fmt}x2.f32", x, x)
    em("and.b16", d, t, "255")


def _fp8_to_f32(lw: KernelLowering, x: str, se: T.ScalarType) -> str:
    """One fp8 → f32 (exact)."""
    em = lw.e
    fmt = "e4m3" if se.name == "f8e4m3" else "e5m2"
    lo = em.new("b16", "and.b16", x, "255")
    h2 = em.new("b32", f"cvt.rn.f16x2.{fmt}x2", lo)
    h, hi = em.tmp("b16"), em.tmp("b16")
    em("mov.b32", braces([h, hi]), h2)
    return em.new("b32", "cvt.f32.f16", h)


def float_convert(lw: KernelLowering, d: str, x: str, se: T.ScalarType, de: T.ScalarType) -> None:
    """Any float → float conversion (round to nearest even when narrowing); fp8 and the pairs
    PTX has no cvt for (bf16 <-> f16 / f64) go through f32."""
    em = lw.e
    if se == de:
        em(f"mov.{reg_kind(de)}", d, x)
    elif se.storage_only:
        float_convert(lw, d, _fp8_to_f32(lw, x, se), T.f32, de)
    elif de.storage_only:
        _f32_to_fp8(lw, d, to_f32(lw, x, se), de)
    elif "bf16" in (se.name, de.name) and "f32" not in (se.name, de.name):
        float_convert(lw, d, to_f32(lw, x, se), T.f32, de)
    elif de.bits > se.bits:
        em(f"cvt.{de.name}.{se.name}", d, x)
    else:
        em(f"cvt.rn.{de.name}.{se.name}", d, x)


def _float_casts(lw: KernelLowering, op: Operation) -> None:
    se, de = T.element_of(op.operands[0].type), T.element_of(op.result.type)
    src = lw.val(op.arg("src"))
    em = lw.e
    # f32 → f16/bf16 pairs: one cvt.rn.f16x2.f32 per pair of registers
    if isinstance(src, Tensor) and se.name == "f32" and de.name in ("f16", "bf16") and len(src.regs) >= 2:
        t = op.result.type
        regs, m = lw.new_regs(t, lw.hint(op.result))
        for i in range(0, len(regs) - 1, 2):
            p = em.new("b32", f"cvt.rn.{de.name}x2.f32", src.regs[i + 1], src.regs[i])  # type: ignore[union-attr]
            em("mov.b32", braces(regs[i:i + 2]), p)
        if len(regs) % 2:
            float_convert(lw, regs[-1], src.regs[-1], se, de)  # type: ignore[arg-type]
        lw.set(op.result, Tensor(regs, m, de))  # type: ignore[arg-type]
        return
    elementwise(lw, op, lambda d, s: float_convert(lw, d, s[0], se, de))  # type: ignore[arg-type]


def _bitcast(lw: KernelLowering, op: Operation) -> None:
    x = lw.val(op.arg("src"))
    t = op.result.type
    if isinstance(x, Tensor):
        lw.set(op.result, Tensor(list(x.regs), x.lmap, t.element))  # type: ignore[union-attr]
        lw.alias(op.result, op.arg("src"))
    else:
        lw.set(op.result, Scalar(x.reg, t))  # type: ignore[union-attr]


def _addptr(lw: KernelLowering, op: Operation) -> None:
    eb = T.element_of(op.result.type).pointee.bytes  # type: ignore[union-attr]
    oe: T.ScalarType = T.element_of(op.arg("offset").type)  # type: ignore[assignment]
    sg = "s" if oe.is_signed else "u"
    em = lw.e

    def body(d: str, s: List[str]) -> None:
        p, o = s
        if oe.bits == 64:
            em("mad.lo.s64", d, o, str(eb), p)
            return
        if oe.bits < 32:
            o = em.new("b32", f"cvt.{sg}32.{sg}16", norm8(lw, o, oe))
        em(f"mad.wide.{'s' if oe.is_signed or oe.bits == 1 else 'u'}32", d, o, str(eb), p)

    elementwise(lw, op, body)


#: op name -> its lowering (lower.py merges the tables of the lower_* modules)
LOWERINGS = {
    "arith.constant": _constant, "tt.get_program_id": _program_id, "tt.get_num_programs": _program_id,
    "tlx.thread_id": _thread_id, "tlx.clock64": _clock, **dict.fromkeys(_CLUSTER_SREGS, _cluster_sreg),
    "tt.make_range": _make_range, "tt.splat": _splat, **dict.fromkeys(_INT_BIN, _int_binary), "math.absi": _absi,
    "arith.cmpi": _cmpi, "arith.cmpf": _cmpf, "arith.select": _select, **dict.fromkeys(_FLT_BIN, _float_binary),
    **dict.fromkeys(_FLT_ONE, _float_one), **dict.fromkeys(_MATH, _math),
    "arith.extsi": _int_casts, "arith.extui": _int_casts, "arith.trunci": _int_casts, "arith.sitofp": _int_to_float,
    "arith.uitofp": _int_to_float, "arith.fptosi": _float_to_int, "arith.fptoui": _float_to_int,
    "arith.extf": _float_casts, "arith.truncf": _float_casts, "tt.fp_to_fp": _float_casts, "arith.bitcast": _bitcast,
    "tt.int_to_ptr": _bitcast, "tt.ptr_to_int": _bitcast, "tt.addptr": _addptr,
}

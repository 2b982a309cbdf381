"""Lowering of scalar and elementwise ops: constants, integer and float arithmetic, math
functions, comparisons, select, every cast (fp8 and bf16 included), program ids, ranges,
splats, thread ids and clocks.

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
from .values import Scalar, Tensor, float_suffix, int_suffix, reg_kind

if TYPE_CHECKING:
    from .lower import KernelLowering

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def f32_hex(x: float) -> str:
    """A PTX f32 immediate (0fXXXXXXXX)."""
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


def f64_hex(x: float) -> str:
    return "0d%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


def f16_bits(x: float) -> int:
    return struct.unpack("<H", struct.pack("<e", x))[0]


def immediate(e: T.ScalarType, value) -> str:
    """The immediate text of `value` as element type `e` (for mov into its register kind)."""
    if e.is_float:
        v = float(value)
        if e.name == "f32":
            return f32_hex(v)
        if e.name == "f64":
            return f64_hex(v)
        if e.name == "f16":
            return "0x%04X" % f16_bits(v)
        if e.name == "bf16":
            return "0x%04X" % bf16_bits(v)
        raise TLXCompileError(f"a constant of type {e.name} cannot be materialized directly",
                              hint="write the constant in f16 or f32 and convert it")
    v = int(value)
    width = 16 if e.bits <= 16 else e.bits
    return str(v & ((1 << width) - 1))


# ---------------------------------------------------------------------------------------------
# elementwise plumbing
# ---------------------------------------------------------------------------------------------

def _operand_regs(lw: KernelLowering, op: Operation, n: int) -> List[List[str]]:
    """Registers of each operand, per register index of the result (scalars broadcast)."""
    xs = [lw.val(v) for v in op.operands]
    out = []
    for x in xs:
        if isinstance(x, Tensor):
            out.append(x.regs)
        elif isinstance(x, Scalar):
            out.append([x.reg] * n)
        else:
            raise TLXCompileError(f"internal: {op.name} operand is not a register value", op.loc)
    return out


def elementwise(lw: KernelLowering, op: Operation, body: Callable[[str, List[str]], None],
                result_index: int = 0) -> None:
    """Lower an elementwise op: `body(dst, srcs)` emits one element's instructions. Registers
    whose sources repeat an earlier register's (splats, broadcasts) reuse its result."""
    res = op.results[result_index]
    t = res.type
    hint = lw.hint(res)
    if isinstance(t, T.TensorType):
        regs, m = lw.new_regs(t, hint)
        srcs = _operand_regs(lw, op, len(regs))
        seen: dict = {}
        want = lw.needed(res)
        for i, d in enumerate(regs):
            if want is not None and i not in want:
                continue  # nothing reads it (a pointer register inside a vector)
            key = tuple(s[i] for s in srcs)
            prev = seen.get(key)
            if prev is not None:
                regs[i] = prev
                continue
            seen[key] = d
            body(d, list(key))
        lw.set(res, Tensor(regs, m, t.element))
    else:
        d = lw.e.named(reg_kind(t), hint)
        srcs = _operand_regs(lw, op, 1)
        body(d, [s[0] for s in srcs])
        lw.set(res, Scalar(d, t))


def _elem(v) -> T.ScalarType:
    e = T.element_of(v.type)
    return e  # type: ignore[return-value]


def norm8(lw: KernelLowering, r: str, e: T.ScalarType, signed: Optional[bool] = None) -> str:
    """An 8-bit value with its high byte made valid (sign- or zero-extended to 16 bits)."""
    if e.bits != 8:
        return r
    s = e.is_signed if signed is None else signed
    t = lw.e.tmp("b16")
    if s:
        lw.e("cvt.s16.s8", t, r)
    else:
        lw.e("and.b16", t, r, "255")
    return t


def _to_f32(lw: KernelLowering, r: str, e: T.ScalarType) -> str:
    if e.name == "f32":
        return r
    t = lw.e.tmp("b32")
    if e.name in ("f16", "bf16"):
        lw.e(f"cvt.f32.{e.name}", t, r)
    elif e.name == "f64":
        lw.e("cvt.rn.f32.f64", t, r)
    else:
        raise TLXCompileError(f"internal: no f32 view of {e.name}")
    return t


def _from_f32(lw: KernelLowering, d: str, r: str, e: T.ScalarType) -> None:
    if e.name == "f32":
        lw.e("mov.b32", d, r)
    elif e.name in ("f16", "bf16"):
        lw.e(f"cvt.rn.{e.name}.f32", d, r)
    else:
        raise TLXCompileError(f"internal: no f32 rounding to {e.name}")


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
    key = ("sreg", sreg)
    r = lw.part.cache.get(key)
    if r is None:
        with lw.in_prologue():
            r = lw.e.named("b32", "pid_" + axis if "ctaid." in sreg and "nctaid" not in sreg else "nprog_" + axis)
            lw.e("mov.u32", r, sreg)
        lw.part.cache[key] = r
        lw.pinned.add(r)
    lw.set(op.result, Scalar(r, T.i32))


def _thread_id(lw: KernelLowering, op: Operation) -> None:
    axis = op.attrs.get("axis", 0)
    if axis == 0:
        lw.set(op.result, Scalar(lw.part.tid, T.i32))
        return
    r = lw.e.named("b32", "tid_" + "xyz"[axis])
    lw.e("mov.u32", r, "%tid." + "xyz"[axis])
    lw.set(op.result, Scalar(r, T.i32))


def _cta_rank(lw: KernelLowering, op: Operation) -> None:
    r = lw.e.named("b32", "cta_rank")
    lw.e("mov.u32", r, "%cluster_ctarank")
    lw.set(op.result, Scalar(r, T.i32))


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
            x = lw.e.tmp("b32")
            lw.e("xor.b32", x, tc, str(k))
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
_UNSIGNED_OPS = {"arith.divui", "arith.remui", "arith.shrui", "arith.maxui", "arith.minui"}
_SIGNED_OPS = {"arith.divsi", "arith.remsi", "arith.shrsi", "arith.maxsi", "arith.minsi"}
_BOOL_BIN = {"arith.andi": "and", "arith.ori": "or", "arith.xori": "xor", "arith.addi": "xor", "arith.subi": "xor",
             "arith.muli": "and", "arith.maxui": "or", "arith.minui": "and", "arith.maxsi": "and", "arith.minsi": "or"}


def _int_binary(lw: KernelLowering, op: Operation) -> None:
    e = _elem(op.operands[0])
    n = op.name
    em = lw.e
    if e.bits == 1:
        if n not in _BOOL_BIN:
            raise TLXCompileError(f"{n} is not defined on i1", op.loc)
        ins = _BOOL_BIN[n] + ".pred"
        elementwise(lw, op, lambda d, s: em(ins, d, s[0], s[1]))
        return
    base = _INT_BIN[n]
    signed = True if n in _SIGNED_OPS else False if n in _UNSIGNED_OPS else e.is_signed
    bits = 16 if e.bits <= 16 else e.bits
    # a constant right operand goes in as an immediate (divisions by constants become
    # multiplications in ptxas without relying on its constant propagation)
    rc = lw.axis.info(op.operands[1]).constant if e.bits >= 32 else None
    imm = None
    if rc is not None and -(1 << 31) <= rc < (1 << 31):
        imm = str(rc)

    def body(d: str, s: List[str]) -> None:
        a, b = s
        if imm is not None and base not in ("shl", "shr"):
            b = imm
        if base in ("and", "or", "xor"):
            em(f"{base}.b{bits}", d, a, b)
            return
        if base in ("shl", "shr"):
            amt = b
            if bits != 32:
                amt = em_tmp = lw.e.tmp("b32")
                em(f"cvt.u32.u{bits}", em_tmp, norm8(lw, b, e, False))
            if base == "shl":
                em(f"shl.b{bits}", d, a, amt)
            else:
                em(f"shr.{'s' if signed else 'u'}{bits}", d, norm8(lw, a, e, signed), amt)
            return
        if base in ("div", "rem", "max", "min"):
            a, b = norm8(lw, a, e, signed), norm8(lw, b, e, signed)
        em(f"{base}.{'s' if signed else 'u'}{bits}", d, a, b)

    elementwise(lw, op, body)


def _absi(lw: KernelLowering, op: Operation) -> None:
    e = _elem(op.operands[0])
    bits = 16 if e.bits <= 16 else e.bits
    elementwise(lw, op, lambda d, s: lw.e(f"abs.s{bits}", d, norm8(lw, s[0], e, True)))


_CMPI = {"eq": "eq", "ne": "ne", "slt": "lt", "sle": "le", "sgt": "gt", "sge": "ge", "ult": "lt", "ule": "le",
         "ugt": "gt", "uge": "ge"}


def _cmpi(lw: KernelLowering, op: Operation) -> None:
    e = T.element_of(op.operands[0].type)
    pred = op.attrs["predicate"]
    em = lw.e
    if isinstance(e, T.PointerType):
        ty = "u64"
    elif e.bits == 1:
        if pred not in ("eq", "ne"):
            raise TLXCompileError(f"cmpi {pred} on i1 values is not supported", op.loc, hint="compare i32 values")

        def bbody(d: str, s: List[str]) -> None:
            if pred == "ne":
                em("xor.pred", d, s[0], s[1])
            else:
                t = em.tmp("pred")
                em("xor.pred", t, s[0], s[1])
                em("not.pred", d, t)

        elementwise(lw, op, bbody)
        return
    else:
        signed = pred.startswith("s") or (pred in ("eq", "ne"))
        bits = 16 if e.bits <= 16 else e.bits
        ty = f"{'s' if pred.startswith('s') else 'u'}{bits}" if pred not in ("eq", "ne") else f"b{bits}"
    cmp = _CMPI[pred]

    def body(d: str, s: List[str]) -> None:
        a, b = s
        if isinstance(e, T.ScalarType) and e.bits == 8:
            sg = pred.startswith("s")
            a, b = norm8(lw, a, e, sg), norm8(lw, b, e, sg)
        em(f"setp.{cmp}.{ty}", d, a, b)

    elementwise(lw, op, body)


_CMPF = {"oeq": "eq", "one": "ne", "olt": "lt", "ole": "le", "ogt": "gt", "oge": "ge", "ueq": "equ", "une": "neu",
         "ult": "ltu", "ule": "leu", "ugt": "gtu", "uge": "geu", "ord": "num", "uno": "nan"}


def _cmpf(lw: KernelLowering, op: Operation) -> None:
    e = _elem(op.operands[0])
    cmp = _CMPF[op.attrs["predicate"]]
    em = lw.e
    if e.name in ("f16", "bf16", "f32", "f64"):
        ty = e.name

        def body(d: str, s: List[str]) -> None:
            a, b = s
            if ty == "bf16":
                a, b = _to_f32(lw, a, e), _to_f32(lw, b, e)
                em(f"setp.{cmp}.f32", d, a, b)
            else:
                em(f"setp.{cmp}.{ty}", d, a, b)

        elementwise(lw, op, body)
    else:
        raise TLXCompileError(f"cmpf on {e.name} is not supported", op.loc, hint="convert fp8 values to f16 first")


def _select(lw: KernelLowering, op: Operation) -> None:
    e = _elem(op.operands[1])
    em = lw.e
    k = reg_kind(e)

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
    e = _elem(op.operands[0])
    kind = _FLT_BIN[op.name]
    em = lw.e
    ty = float_suffix(e)

    def body(d: str, s: List[str]) -> None:
        a, b = s
        if kind in ("add", "sub", "mul"):
            em(f"{kind}.{ty}", d, a, b)
        elif kind == "div":
            if ty in ("f32", "f64"):
                em(f"div.rn.{ty}", d, a, b)
            else:
                fa, fb = _to_f32(lw, a, e), _to_f32(lw, b, e)
                q = em.tmp("b32")
                em("div.rn.f32", q, fa, fb)
                _from_f32(lw, d, q, e)
        elif kind == "rem":
            # fmod: a - trunc(a / b) * b, in f32 (f64 for f64)
            w = "f64" if ty == "f64" else "f32"
            rk = "b64" if ty == "f64" else "b32"
            fa, fb = (a, b) if ty in ("f32", "f64") else (_to_f32(lw, a, e), _to_f32(lw, b, e))
            q, t, r = em.tmp(rk), em.tmp(rk), em.tmp(rk)
            em(f"div.rn.{w}", q, fa, fb)
            em(f"cvt.rzi.{w}.{w}", t, q)
            em(f"neg.{w}", q, t)
            em(f"fma.rn.{w}", r, q, fb, fa)
            if ty in ("f32", "f64"):
                em(f"mov.b{rk[1:]}", d, r)
            else:
                _from_f32(lw, d, r, e)
        else:
            if ty == "f64" and kind.endswith(".NaN"):
                base = kind.split(".")[0]
                t, isn = em.tmp("b64"), em.tmp("pred")
                em(f"{base}.f64", t, a, b)
                em("testp.notanumber.f64", isn, a)
                t2 = em.tmp("b64")
                em("selp.b64", t2, a, t, isn)
                isn2 = em.tmp("pred")
                em("testp.notanumber.f64", isn2, b)
                em("selp.b64", d, b, t2, isn2)
            else:
                em(f"{kind}.{ty}", d, a, b)

    elementwise(lw, op, body)


def _neg_abs(lw: KernelLowering, op: Operation) -> None:
    e = _elem(op.operands[0])
    ins = "neg" if op.name == "arith.negf" else "abs"
    elementwise(lw, op, lambda d, s: lw.e(f"{ins}.{float_suffix(e)}", d, s[0]))


def _fma(lw: KernelLowering, op: Operation) -> None:
    e = _elem(op.operands[0])
    elementwise(lw, op, lambda d, s: lw.e(f"fma.rn.{float_suffix(e)}", d, s[0], s[1], s[2]))


def _f32_math(lw: KernelLowering, name: str, d: str, x: str) -> None:
    """One f32 math function (fast hardware approximations where PTX has them)."""
    em = lw.e
    if name == "math.exp":
        t = em.tmp("b32")
        em("mul.f32", t, x, f32_hex(LOG2E))
        em("ex2.approx.f32", d, t)
    elif name == "math.exp2":
        em("ex2.approx.f32", d, x)
    elif name == "math.log":
        t = em.tmp("b32")
        em("lg2.approx.f32", t, x)
        em("mul.f32", d, t, f32_hex(LN2))
    elif name == "math.log2":
        em("lg2.approx.f32", d, x)
    elif name == "math.sqrt":
        em("sqrt.rn.f32", d, x)
    elif name == "math.rsqrt":
        em("rsqrt.approx.f32", d, x)
    elif name == "math.sin":
        em("sin.approx.f32", d, x)
    elif name == "math.cos":
        em("cos.approx.f32", d, x)
    elif name == "math.floor":
        em("cvt.rmi.f32.f32", d, x)
    elif name == "math.ceil":
        em("cvt.rpi.f32.f32", d, x)
    elif name == "math.tanh":
        # tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)), saturating for large |x|
        ax, t, ex, den, q, r = (em.tmp("b32") for _ in range(6))
        em("abs.f32", ax, x)
        em("mul.f32", t, ax, f32_hex(2 * LOG2E))
        em("ex2.approx.f32", ex, t)
        em("add.f32", den, ex, f32_hex(1.0))
        em("rcp.rn.f32", q, den)
        em("fma.rn.f32", r, q, f32_hex(-2.0), f32_hex(1.0))
        em("copysign.f32", d, x, r)
    elif name == "math.erf":
        # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): 1 - poly(t) * exp(-x^2), t = 1 / (1 + p|x|)
        ax, t, den, poly, x2, ex, r = (em.tmp("b32") for _ in range(7))
        em("abs.f32", ax, x)
        em("fma.rn.f32", den, ax, f32_hex(0.3275911), f32_hex(1.0))
        em("rcp.rn.f32", t, den)
        coeffs = [1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592]
        em("mov.b32", poly, f32_hex(coeffs[0]))
        for c in coeffs[1:]:
            p2 = em.tmp("b32")
            em("fma.rn.f32", p2, poly, t, f32_hex(c))
            poly = p2
        p3 = em.tmp("b32")
        em("mul.f32", p3, poly, t)
        em("mul.f32", x2, ax, ax)
        nx = em.tmp("b32")
        em("mul.f32", nx, x2, f32_hex(-LOG2E))
        em("ex2.approx.f32", ex, nx)
        em("mul.f32", r, p3, ex)
        one_minus = em.tmp("b32")
        em("sub.f32", one_minus, f32_hex(1.0), r)
        em("copysign.f32", d, x, one_minus)
    else:
        raise TLXCompileError(f"internal: no f32 lowering of {name}")


_MATH = ("math.exp", "math.exp2", "math.log", "math.log2", "math.sqrt", "math.rsqrt", "math.sin", "math.cos",
         "math.floor", "math.ceil", "math.erf", "math.tanh")


def _math(lw: KernelLowering, op: Operation) -> None:
    e = _elem(op.operands[0])
    n = op.name
    em = lw.e

    def body(d: str, s: List[str]) -> None:
        x = s[0]
        if e.name == "f32":
            _f32_math(lw, n, d, x)
        elif e.name == "f64":
            if n == "math.sqrt":
                em("sqrt.rn.f64", d, x)
            elif n == "math.rsqrt":
                em("rsqrt.approx.f64", d, x)
            elif n == "math.floor":
                em("cvt.rmi.f64.f64", d, x)
            elif n == "math.ceil":
                em("cvt.rpi.f64.f64", d, x)
            else:
                raise TLXCompileError(f"{n} on f64 is not supported (PTX has no f64 {n[5:]})", op.loc,
                                      hint="convert to f32 first")
        elif e.name in ("f16", "bf16"):
            if n in ("math.floor", "math.ceil") and e.name == "f16":
                em(f"cvt.{'rmi' if n == 'math.floor' else 'rpi'}.f16.f16", d, x)
                return
            t = em.tmp("b32")
            _f32_math(lw, n, t, _to_f32(lw, x, e))
            _from_f32(lw, d, t, e)
        else:
            raise TLXCompileError(f"{n} on {e.name} is not supported", op.loc)

    elementwise(lw, op, body)


# ---------------------------------------------------------------------------------------------
# casts
# ---------------------------------------------------------------------------------------------

def _int_cast(lw: KernelLowering, d: str, s: str, se: T.ScalarType, de: T.ScalarType, signed: bool) -> None:
    em = lw.e
    if se.bits == 1:
        v = "-1" if signed else "1"
        em(f"selp.b{16 if de.bits <= 16 else de.bits}", d, v if de.bits >= 16 else "1" if not signed else "-1", "0", s)
        return
    if de.bits == 1:
        t = em.tmp("b16" if se.bits <= 16 else f"b{se.bits}")
        b = 16 if se.bits <= 16 else se.bits
        em(f"and.b{b}", t, s, "1")
        em(f"setp.ne.b{b}", d, t, "0")
        return
    sb = 16 if se.bits <= 16 else se.bits
    db = 16 if de.bits <= 16 else de.bits
    src = norm8(lw, s, se, signed) if se.bits == 8 and de.bits > 8 else s
    if sb == db:
        em(f"mov.b{db}", d, src)
    else:
        em(f"cvt.{'s' if signed else 'u'}{db}.{'s' if signed else 'u'}{sb}", d, src)


def _int_casts(lw: KernelLowering, op: Operation) -> None:
    se, de = _elem(op.operands[0]), _elem(op.result)
    signed = op.name == "arith.extsi"
    elementwise(lw, op, lambda d, s: _int_cast(lw, d, s[0], se, de, signed))


def _int_to_float(lw: KernelLowering, op: Operation) -> None:
    se, de = _elem(op.operands[0]), _elem(op.result)
    signed = op.name == "arith.sitofp"
    em = lw.e

    def body(d: str, s: List[str]) -> None:
        x = s[0]
        if se.bits == 1:
            one = immediate(de, -1.0 if signed else 1.0) if de.name in ("f32", "f64", "f16", "bf16") else None
            k = reg_kind(de)
            em(f"selp.b{k[1:]}", d, lw.const(k, one), lw.const(k, immediate(de, 0.0)), x)  # type: ignore[arg-type]
            return
        x = norm8(lw, x, se, signed)
        sb = 16 if se.bits <= 16 else se.bits
        st = f"{'s' if signed else 'u'}{sb}"
        if de.name in ("f16", "f32", "f64"):
            em(f"cvt.rn.{de.name}.{st}", d, x)
        elif de.name == "bf16":
            t = em.tmp("b32")
            em(f"cvt.rn.f32.{st}", t, x)
            em("cvt.rn.bf16.f32", d, t)
        else:
            t = em.tmp("b32")
            em(f"cvt.rn.f32.{st}", t, x)
            _f32_to_fp8(lw, d, t, de)

    elementwise(lw, op, body)


def _float_to_int(lw: KernelLowering, op: Operation) -> None:
    se, de = _elem(op.operands[0]), _elem(op.result)
    signed = op.name == "arith.fptosi"
    em = lw.e

    def body(d: str, s: List[str]) -> None:
        x = s[0]
        if se.storage_only:
            x = _fp8_to_f32(lw, x, se)
            sname = "f32"
        elif se.name == "bf16":
            x = _to_f32(lw, x, se)
            sname = "f32"
        else:
            sname = se.name
        if de.bits == 1:
            z = em.tmp("pred")
            em(f"setp.ne.{sname}", z, x, immediate(T.SCALAR_TYPES[sname], 0.0))
            em("mov.pred", d, z)
            return
        db = 16 if de.bits <= 16 else de.bits
        em(f"cvt.rzi.{'s' if signed else 'u'}{db}.{sname}", d, x)

    elementwise(lw, op, body)


def _f32_to_fp8(lw: KernelLowering, d: str, x: str, de: T.ScalarType) -> None:
    """One f32 → fp8 (round to nearest even, saturating to the largest finite value)."""
    em = lw.e
    fmt = "e4m3" if de.name == "f8e4m3" else "e5m2"
    t = em.tmp("b16")
    em(f"cvt.rn.satfinite.{fmt}x2.f32", t, x, x)
    em("and.b16", d, t, "255")


def _fp8_to_f32(lw: KernelLowering, x: str, se: T.ScalarType) -> str:
    """One fp8 → f32 (exact)."""
    em = lw.e
    fmt = "e4m3" if se.name == "f8e4m3" else "e5m2"
    lo = em.tmp("b16")
    em("and.b16", lo, x, "255")
    h2 = em.tmp("b32")
    em(f"cvt.rn.f16x2.{fmt}x2", h2, lo)
    h, hi = em.tmp("b16"), em.tmp("b16")
    em("mov.b32", "{" + h + ", " + hi + "}", h2)
    f = em.tmp("b32")
    em("cvt.f32.f16", f, h)
    return f


def float_convert(lw: KernelLowering, d: str, x: str, se: T.ScalarType, de: T.ScalarType) -> None:
    """Any float → float conversion (round to nearest even when narrowing)."""
    em = lw.e
    if se == de:
        em(f"mov.b{reg_kind(de)[1:]}", d, x)
        return
    if se.storage_only:
        f = _fp8_to_f32(lw, x, se)
        if de.storage_only:
            _f32_to_fp8(lw, d, f, de)
        elif de.name == "f32":
            em("mov.b32", d, f)
        elif de.name == "f64":
            em("cvt.f64.f32", d, f)
        else:
            em(f"cvt.rn.{de.name}.f32", d, f)
        return
    if de.storage_only:
        f = x if se.name == "f32" else em.tmp("b32")
        if se.name in ("f16", "bf16"):
            em(f"cvt.f32.{se.name}", f, x)
        elif se.name == "f64":
            em("cvt.rn.f32.f64", f, x)
        _f32_to_fp8(lw, d, f, de)
        return
    if de.bits > se.bits:
        if se.name == "bf16" and de.name == "f64":
            t = em.tmp("b32")
            em("cvt.f32.bf16", t, x)
            em("cvt.f64.f32", d, t)
        else:
            em(f"cvt.{de.name}.{se.name}", d, x)
    elif de.bits < se.bits:
        if de.name == "bf16" and se.name == "f64":
            t = em.tmp("b32")
            em("cvt.rn.f32.f64", t, x)
            em("cvt.rn.bf16.f32", d, t)
        else:
            em(f"cvt.rn.{de.name}.{se.name}", d, x)
    else:  # f16 <-> bf16
        t = em.tmp("b32")
        em(f"cvt.f32.{se.name}", t, x)
        em(f"cvt.rn.{de.name}.f32", d, t)


def _float_casts(lw: KernelLowering, op: Operation) -> None:
    se, de = _elem(op.operands[0]), _elem(op.result)
    src = lw.val(op.arg("src"))
    em = lw.e
    # f32 → f16/bf16 pairs: one cvt.rn.f16x2.f32 per pair of registers
    if isinstance(src, Tensor) and se.name == "f32" and de.name in ("f16", "bf16") and len(src.regs) >= 2:
        t = op.result.type
        regs, m = lw.new_regs(t, lw.hint(op.result))
        for i in range(0, len(regs) - 1, 2):
            p = em.tmp("b32")
            em(f"cvt.rn.{de.name}x2.f32", p, src.regs[i + 1], src.regs[i])
            em("mov.b32", "{" + regs[i] + ", " + regs[i + 1] + "}", p)
        if len(regs) % 2:
            float_convert(lw, regs[-1], src.regs[-1], se, de)
        lw.set(op.result, Tensor(regs, m, de))
        return
    elementwise(lw, op, lambda d, s: float_convert(lw, d, s[0], se, de))


def _bitcast(lw: KernelLowering, op: Operation) -> None:
    x = lw.val(op.arg("src"))
    t = op.result.type
    if isinstance(x, Tensor):
        lw.set(op.result, Tensor(list(x.regs), x.lmap, t.element))  # type: ignore[union-attr]
        lw.alias(op.result, op.arg("src"))
    else:
        lw.set(op.result, Scalar(x.reg, t))  # type: ignore[union-attr]


def _addptr(lw: KernelLowering, op: Operation) -> None:
    pe = T.element_of(op.result.type).pointee  # type: ignore[union-attr]
    eb = max(1, pe.bits // 8)
    oe = _elem(op.arg("offset"))
    em = lw.e

    def body(d: str, s: List[str]) -> None:
        p, o = s
        if oe.bits == 64:
            em("mad.lo.s64", d, o, str(eb), p)
        else:
            o32 = o
            if oe.bits < 32:
                o32 = em.tmp("b32")
                em(f"cvt.{'s' if oe.is_signed else 'u'}32.{'s' if oe.is_signed else 'u'}16", o32, norm8(lw, o, oe))
            em(f"mad.wide.{'s' if oe.is_signed or oe.bits == 1 else 'u'}32", d, o32, str(eb), p)

    elementwise(lw, op, body)


#: op name -> its lowering (lower.py merges the tables of the lower_* modules)
LOWERINGS = {
    "arith.constant": _constant, "tt.get_program_id": _program_id, "tt.get_num_programs": _program_id,
    "tlx.thread_id": _thread_id, "tlx.cluster_cta_rank": _cta_rank, "tlx.clock64": _clock,
    "tt.make_range": _make_range, "tt.splat": _splat, **dict.fromkeys(_INT_BIN, _int_binary), "math.absi": _absi,
    "arith.cmpi": _cmpi, "arith.cmpf": _cmpf, "arith.select": _select, **dict.fromkeys(_FLT_BIN, _float_binary),
    "arith.negf": _neg_abs, "math.absf": _neg_abs, "math.fma": _fma, **dict.fromkeys(_MATH, _math),
    "arith.extsi": _int_casts, "arith.extui": _int_casts, "arith.trunci": _int_casts, "arith.sitofp": _int_to_float,
    "arith.uitofp": _int_to_float, "arith.fptosi": _float_to_int, "arith.fptoui": _float_to_int,
    "arith.extf": _float_casts, "arith.truncf": _float_casts, "tt.fp_to_fp": _float_casts, "arith.bitcast": _bitcast,
    "tt.int_to_ptr": _bitcast, "tt.ptr_to_int": _bitcast, "tt.addptr": _addptr,
}

"""32-bit division and remainder by a constant become multiply-high sequences (const_div): the
emitted instructions, run by a model of their PTX semantics, agree with Python's integer
division (truncating toward zero for signed operands, as PTX's div / rem) on edge values and
random ones; kernels lose their div/rem instructions and still assemble."""

from __future__ import annotations

import os
import random
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from int_reference import truncating_divmod  # noqa: E402
from tests_ir_helpers import compile_ir_text  # noqa: E402
from tlx.compiler.codegen.const_div import lower_const_div, magic_signed, magic_unsigned  # noqa: E402

MASK = (1 << 32) - 1


def _s32(x: int) -> int:
    x &= MASK
    return x - (1 << 32) if x >> 31 else x


# the PTX ISA's meaning of each instruction the sequences may use, on 32-bit registers
PTX = {
    "mov.b32": lambda a: a,
    "neg.s32": lambda a: -a,
    "mul.hi.s32": lambda a, b: (_s32(a) * _s32(b)) >> 32,
    "mul.hi.u32": lambda a, b: (a * b) >> 32,
    "mul.lo.s32": lambda a, b: a * b,
    "mul.lo.u32": lambda a, b: a * b,
    "add.s32": lambda a, b: a + b,
    "sub.s32": lambda a, b: a - b,
    "shr.s32": lambda a, b: _s32(a) >> b,
    "shr.u32": lambda a, b: a >> b,
    "and.b32": lambda a, b: a & b,
}


def _sequence(d: int, signed: bool, remainder: bool):
    seq = []

    def emit(op, dst, *srcs):
        seq.append((op, dst, srcs))

    def new(kind, op, *srcs):
        dst = f"%t{len(seq)}"
        seq.append((op, dst, srcs))
        return dst

    emitted = lower_const_div(emit, new, "%dst", "%n", d, signed, remainder)
    return seq if emitted else None


def _run(seq, n: int) -> int:
    regs = {"%n": n & MASK}
    for op, dst, srcs in seq:
        vals = [regs[s] if s in regs else int(s) & MASK for s in srcs]
        regs[dst] = PTX[op](*vals) & MASK
    return regs["%dst"]


def _expected(n: int, d: int, signed: bool, remainder: bool) -> int:
    if signed:
        return truncating_divmod(n, d)[1 if remainder else 0] & MASK
    return n % d if remainder else n // d


RNG = random.Random(20261206)
SIGNED_DIVISORS = [1, -1, 2, -2, 3, -3, 5, 6, 7, -7, 9, 10, 12, 25, 64, 100, -100, 641, 1000, 65537, 1 << 30,
                   (1 << 30) + 1, (1 << 31) - 1, -(1 << 31) + 1] + [RNG.randrange(2, 1 << 31) * RNG.choice((1, -1))
                                                                     for _ in range(24)]
UNSIGNED_DIVISORS = [1, 2, 3, 7, 10, 641, 1 << 31, (1 << 31) + 1, MASK, MASK - 1] + [RNG.randrange(2, 1 << 32)
                                                                                  for _ in range(16)]


def _operands(d: int, signed: bool):
    lo, hi = (-(1 << 31), (1 << 31) - 1) if signed else (0, MASK)
    edges = [0, 1, 2, lo, hi, lo + 1, hi - 1] + ([-1, -2] if signed else [1 << 31, (1 << 31) - 1])
    near = [k * d + o for k in (-3, -1, 1, 2, 1000) for o in (-1, 0, 1)]
    rand = [RNG.randrange(lo, hi + 1) for _ in range(600)]
    return [n for n in edges + near + rand if lo <= n <= hi]


@pytest.mark.parametrize("remainder", [False, True], ids=["div", "rem"])
@pytest.mark.parametrize("d", SIGNED_DIVISORS)
def test_signed_sequence_truncates_toward_zero(d, remainder):
    seq = _sequence(d, True, remainder)
    assert seq is not None and len(seq) <= 8
    assert not any(op.startswith(("div", "rem")) for op, _, _ in seq)
    for n in _operands(d, True):
        assert _run(seq, n) == _expected(n, d, True, remainder), (n, d)


@pytest.mark.parametrize("remainder", [False, True], ids=["div", "rem"])
@pytest.mark.parametrize("d", UNSIGNED_DIVISORS)
def test_unsigned_sequence_matches_floor_division(d, remainder):
    seq = _sequence(d, False, remainder)
    assert seq is not None and len(seq) <= 8
    for n in _operands(d, False):
        assert _run(seq, n) == _expected(n, d, False, remainder), (n, d)


# (divisor, signed): +-2**k as int32 divisors, 2**k up to 2**31 as uint32 ones
POWERS = [((1 << k) * sgn, True) for k in (1, 2, 6, 13, 30) for sgn in (1, -1)] + \
         [(1 << k, False) for k in (1, 2, 6, 13, 30, 31)]


@pytest.mark.parametrize("remainder", [False, True], ids=["div", "rem"])
@pytest.mark.parametrize("d,signed", POWERS)
def test_a_power_of_two_is_shifts_and_masks(d, signed, remainder):
    """No multiply: unsigned one shift or mask, signed at most 5 instructions (bias, shift or mask)."""
    seq = _sequence(d, signed, remainder)
    assert seq is not None and not any(op.startswith("mul") for op, _, _ in seq), seq
    assert len(seq) == 1 if not signed else len(seq) <= 5, seq
    for n in _operands(d, signed):
        assert _run(seq, n) == _expected(n, d, signed, remainder), (n, d)


def test_no_sequence_for_a_zero_or_out_of_range_divisor():
    assert _sequence(0, True, False) is None and _sequence(0, False, True) is None
    assert _sequence(-3, False, False) is None  # a negative unsigned divisor is not a 32-bit value
    with pytest.raises(ValueError):
        magic_signed(1)
    with pytest.raises(ValueError):
        magic_unsigned(0)


def test_the_signed_multiplier_is_negative_so_the_add_cannot_overflow():
    for d in SIGNED_DIVISORS:
        if abs(d) >= 2:
            m, _ = magic_signed(d)
            assert -(1 << 31) <= m < 0


T = "tensor<256xi32>"


KERNEL_CASES = [(op, gone, d) for op, gone in [("arith.divsi", "div.s32"), ("arith.remsi", "rem.s32"),
                                               ("arith.divui", "div.u32"), ("arith.remui", "rem.u32")]
                for d in (3, 4, -8) if d > 0 or op.endswith("si")]  # -8 is no uint32 divisor


@pytest.mark.parametrize("op,want_gone,d", KERNEL_CASES)
def test_kernel_division_by_a_constant_has_no_division_instruction(op, want_gone, d):
    body = f"""
    %r = tt.make_range {{start = 0, end = 256}} : {T}
    %ps = tt.splat %x : tensor<256x!ptr<i32>>
    %p = tt.addptr %ps, %r : tensor<256x!ptr<i32>>
    %a = tt.load %p : {T}
    %c = arith.constant {{value = {d}}} : i32
    %cs = tt.splat %c : {T}
    %y = {op} %a, %cs : {T}
    tt.store %p, %y
"""
    ptx = compile_ir_text(body, "%x: !ptr<i32>", divs="[16]")  # assembled by ptxas
    assert want_gone not in ptx
    power_of_two = abs(d) & (abs(d) - 1) == 0
    assert ("mul.hi." in ptx) != power_of_two  # a power of two shifts and masks instead

"""Integer division and remainder by a compile-time constant as multiply-high sequences.

ptxas does not strength-reduce `div` / `rem` by an immediate: `rem.s32 r, x, 3` becomes its
generic division (I2F, MUFU.RCP, F2I, three IMAD.HI and fix-ups, ~20 SASS instructions with a
MUFU on the path), so a ring slot `count % NUM_STAGES` in a K loop costs that before every
barrier wait. LLVM (and so Triton) lowers these itself; this module does the same with the
Granlund–Montgomery constructions ("Division by invariant integers using multiplication",
PLDI 1994): unsigned division by d (Figure 4.1) and signed division truncating toward zero
(Figure 5.2), for 32-bit operands. `magic_unsigned` / `magic_signed` compute the constants and
`lower_const_div` emits the instructions (5 to 8, no MUFU; a power of two 1 to 5 shifts and masks).
"""

from __future__ import annotations

from typing import Callable, Tuple

N = 32
MASK = (1 << N) - 1


def _ceil_log2(d: int) -> int:
    return (d - 1).bit_length()


def magic_unsigned(d: int) -> Tuple[int, int, int]:
    """(m, sh1, sh2) with n // d == (t + ((n - t) >> sh1)) >> sh2, t = mulhi_u32(m, n), for
    every 32-bit unsigned n (1 <= d < 2**32)."""
    if not 1 <= d <= MASK:
        raise ValueError(f"unsigned 32-bit divisor out of range: {d}")
    ell = _ceil_log2(d)
    m = ((1 << N) * ((1 << ell) - d)) // d + 1
    return m & MASK, min(ell, 1), max(ell - 1, 0)


def magic_signed(d: int) -> Tuple[int, int]:
    """(m, sh) with trunc(n / d) == sign-fix((n + mulhi_s32(m, n)) >> sh) for every 32-bit
    signed n (2 <= |d| < 2**31); m is negative (so the add cannot overflow)."""
    ad = abs(d)
    if not 2 <= ad < (1 << (N - 1)):
        raise ValueError(f"signed 32-bit divisor out of range for a multiply: {d}")
    ell = max(_ceil_log2(ad), 1)
    m = 1 + (1 << (N + ell - 1)) // ad
    return m - (1 << N), ell - 1


def lower_const_div(emit: Callable[..., None], new: Callable[..., str], dst: str, n: str, d: int,
                    signed: bool, remainder: bool) -> bool:
    """Emit dst = n / d (or n % d) for 32-bit n and the constant d, truncating toward zero when
    `signed`, as PTX's div/rem do. Returns False (nothing emitted) where no sequence applies:
    d == 0 (left to the hardware's division), or a divisor outside the 32-bit range."""
    t = "s32" if signed else "u32"
    if d == 0 or (not signed and not 0 < d <= MASK) or (signed and not -(1 << 31) < d < (1 << 31)):
        return False
    if d == 1 or (signed and d == -1):
        if remainder:
            emit("mov.b32", dst, "0")
        elif d == 1:
            emit("mov.b32", dst, n)
        else:
            emit("neg.s32", dst, n)
        return True
    k = abs(d).bit_length() - 1
    if abs(d) == 1 << k:  # a power of two: shifts and masks, no multiply
        _lower_power_of_two(emit, new, dst, n, d, k, signed, remainder)
        return True
    if signed:
        m, sh = magic_signed(d)
        hi = new("b32", "mul.hi.s32", n, str(m))
        q0 = new("b32", "add.s32", n, hi)
        if sh:
            q0 = new("b32", "shr.s32", q0, str(sh))
        sign = new("b32", "shr.s32", n, "31")  # -1 for a negative n, else 0: rounds toward zero
        q = new("b32", "sub.s32", q0, sign)
        if d < 0:
            q = new("b32", "neg.s32", q)
    else:
        m, sh1, sh2 = magic_unsigned(d)
        hi = new("b32", "mul.hi.u32", n, str(m))
        q = new("b32", "sub.s32", n, hi)
        if sh1:
            q = new("b32", "shr.u32", q, str(sh1))
        q = new("b32", "add.s32", hi, q)
        if sh2:
            q = new("b32", "shr.u32", q, str(sh2))
    if remainder:
        prod = new("b32", f"mul.lo.{t}", q, str(d))
        emit("sub.s32", dst, n, prod)
    else:
        emit("mov.b32", dst, q)
    return True


def _lower_power_of_two(emit: Callable[..., None], new: Callable[..., str], dst: str, n: str, d: int, k: int,
                        signed: bool, remainder: bool) -> None:
    """n / d or n % d for d = +-2**k (k >= 1). Unsigned: a shift or a mask. Signed, truncating
    toward zero: a negative n is first biased by 2**k - 1 (the sign spread, shifted down), so the
    arithmetic shift rounds up instead of down; the remainder is n minus the biased n's multiple
    of 2**k (its sign follows n, and d's sign does not change it)."""
    low = (1 << k) - 1
    if not signed:
        emit("and.b32" if remainder else "shr.u32", dst, n, str(low if remainder else k))
        return
    spread = new("b32", "shr.s32", n, "31")  # -1 for a negative n, else 0
    bias = new("b32", "shr.u32", spread, str(N - k))  # 2**k - 1 for a negative n, else 0
    biased = new("b32", "add.s32", n, bias)
    if remainder:
        multiple = new("b32", "and.b32", biased, str(MASK & ~low))
        emit("sub.s32", dst, n, multiple)
    elif d > 0:
        emit("shr.s32", dst, biased, str(k))
    else:
        q = new("b32", "shr.s32", biased, str(k))
        emit("neg.s32", dst, q)

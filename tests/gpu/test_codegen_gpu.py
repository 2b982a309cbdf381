"""The PTX code generator on the GPU: every kernel of tests/kernels/codegen.py runs through the
whole stack in the specialization CI compiles (tests/test_gpu_kernels_compile.py) and is compared
with numpy in float64, with a bound suited to the dtype. Outputs are poisoned first (NaN for
floats, 0x7f for integers); inputs are random (the seed is printed with every failure)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from int_reference import truncating_divmod
from kernels import codegen as K

pytestmark = pytest.mark.gpu



def check(got, want, rtol, atol, what: str) -> None:
    """|got - want| <= atol + rtol * |want| elementwise, in float64; NaN (poison) always fails."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    bad = ~(np.abs(got - want) <= atol + rtol * np.abs(want))
    if bad.any():
        i = tuple(int(x) for x in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())}/{bad.size} out of bound, first at {i}: got {got[i]!r} "
                             f"want {want[i]!r}")


def poisoned(torch, shape, dtype):
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), device="cuda", dtype=dtype)
    return torch.full(shape, 0x7F, device="cuda", dtype=dtype)


def host(t) -> np.ndarray:
    """A device tensor's values on the host: float64 for floats, the integers as they are."""
    return t.detach().float().cpu().numpy().astype(np.float64) if t.dtype.is_floating_point else t.cpu().numpy()


def dtype_of(torch, sig: str):
    """The torch dtype of a pointer signature entry ('*fp16' -> torch.float16)."""
    return getattr(torch, K.TORCH[sig.lstrip("*")])


# ---- elementwise math, arithmetic, casts -----------------------------------------------------

UNARY_REFERENCE = {  # op -> (numpy reference, input range, rtol, atol)
    "exp": (np.exp, (-4, 4), 2e-6, 1e-7), "exp2": (np.exp2, (-6, 6), 2e-6, 1e-7),
    "log": (np.log, (0.05, 20), 0, 3e-6), "log2": (np.log2, (0.05, 20), 0, 3e-6),
    "sqrt": (np.sqrt, (0, 100), 1.2e-7, 0), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 100), 3e-7, 0),
    "sin": (np.sin, (-3.14, 3.14), 0, 2e-6), "cos": (np.cos, (-3.14, 3.14), 0, 2e-6),
    "erf": (np.vectorize(math.erf), (-4, 4), 0, 1e-6), "tanh": (np.tanh, (-6, 6), 0, 1e-6),
    "floor": (np.floor, (-50, 50), 0, 0), "ceil": (np.ceil, (-50, 50), 0, 0),
    "abs": (np.abs, (-5, 5), 0, 0), "neg": (np.negative, (-5, 5), 0, 0),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-8, 8), 4e-6, 1e-7)}


@pytest.mark.parametrize("spec", K.UNARY, ids=lambda s: s.name)
def test_unary_math_matches_numpy(spec, torch):
    op = spec.constexprs["OP"]
    fn, (lo, hi), rtol, atol = UNARY_REFERENCE[op]
    n = 5000
    x = torch.empty(n, device="cuda").uniform_(lo, hi)
    y = poisoned(torch, (n,), torch.float32)
    spec[(math.ceil(n / 1024),)](x, y, n)
    torch.cuda.synchronize()
    check(host(y), fn(host(x)), rtol, atol, op)


FLOAT_REFERENCE = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
                   "min": np.minimum, "fma": lambda x, y: x * y + x, "mod": np.fmod,
                   "lt": lambda x, y: np.where(x < y, x, y)}
INT_REFERENCE = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
                 "floordiv": lambda x, y: np.trunc(x / y).astype(np.int64), "mod": np.fmod,
                 "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "xor": np.bitwise_xor,
                 "shr": lambda x, y: x >> (y & 7), "shl": lambda x, y: x << (y & 7),
                 "eq": lambda x, y: np.where(x == y, x + 1, y)}


@pytest.mark.parametrize("spec", K.BINARY, ids=lambda s: s.name)
def test_binary_arithmetic_matches_numpy(spec, torch):
    op, n = spec.constexprs["OP"], 3000
    dt = dtype_of(torch, spec.signature["x_ptr"])
    if dt == torch.int32:
        x = torch.randint(-1000, 1000, (n,), device="cuda", dtype=dt)
        y = torch.randint(1, 50, (n,), device="cuda", dtype=dt)
    else:
        x = torch.empty(n, device="cuda").uniform_(-8, 8).to(dt)
        y = torch.empty(n, device="cuda").uniform_(0.5, 4).to(dt)
    z = poisoned(torch, (n,), dt)
    spec[(3,)](x, y, z, n)
    torch.cuda.synchronize()
    if dt == torch.int32:
        want = INT_REFERENCE[op](host(x).astype(np.int64), host(y).astype(np.int64))
        check(host(z), (want + 2 ** 31) % 2 ** 32 - 2 ** 31, 0, 0, f"i32 {op}")  # wraps as int32 does
        return
    eps = {torch.float32: 2 ** -23, torch.float16: 2 ** -10, torch.bfloat16: 2 ** -7}[dt]
    check(host(z), FLOAT_REFERENCE[op](host(x), host(y)), eps * (2 if op == "fma" else 1),
          1e-6 if op == "mod" else 0, f"{op} {dt}")


@pytest.mark.parametrize("spec", K.CONST_DIV, ids=lambda s: s.name)
def test_division_by_a_constant_matches_numpy(spec, torch):
    d, unsigned = spec.constexprs["D"], spec.constexprs["UNSIGNED"]
    edges = [0, 1, -1, 2, -2, d - 1, d, d + 1, -d + 1, -d, -d - 1, 2 * d, -2 * d, 2 ** 31 - 1, -2 ** 31,
             -2 ** 31 + 1, 2 ** 31 - 2, 2 ** 30, -2 ** 30, 12345678, -12345678]
    edges = [e for e in edges if -2 ** 31 <= e < 2 ** 31]
    gen = torch.Generator(device="cuda").manual_seed(abs(d) % 1000 + 7 * unsigned)
    rand = torch.randint(-2 ** 31, 2 ** 31, (8000,), device="cuda", dtype=torch.int64, generator=gen)
    x = torch.cat([torch.tensor(edges, device="cuda", dtype=torch.int64), rand]).to(torch.int32)
    n = x.numel()
    q, r = poisoned(torch, (n,), torch.int32), poisoned(torch, (n,), torch.int32)
    spec[(math.ceil(n / 1024),)](x, q, r, n)
    torch.cuda.synchronize()
    xs = host(x).astype(np.int64)
    if unsigned:
        xu = xs % 2 ** 32  # the same bits read as uint32
        want_q, want_r = xu // d, xu % d
        want_q, want_r = (want_q + 2 ** 31) % 2 ** 32 - 2 ** 31, (want_r + 2 ** 31) % 2 ** 32 - 2 ** 31
    else:
        keep = ~((xs == -2 ** 31) & (d == -1))  # INT_MIN / -1 overflows int32 (undefined in C and PTX)
        xs = xs[keep]
        want_q, want_r = truncating_divmod(xs, d)
        q, r = q[torch.as_tensor(keep, device="cuda")], r[torch.as_tensor(keep, device="cuda")]
    check(host(q), want_q, 0, 0, f"{spec.name}: quotient")
    check(host(r), want_r, 0, 0, f"{spec.name}: remainder")


@pytest.mark.parametrize("spec", K.CAST, ids=lambda s: s.name)
def test_casts_convert_like_torch(spec, torch):
    n = 3000
    sd, dd = dtype_of(torch, spec.signature["x_ptr"]), dtype_of(torch, spec.signature["y_ptr"])
    if sd.is_floating_point:
        base = torch.empty(n, device="cuda", dtype=torch.float64).uniform_(-300, 300)
        if not dd.is_floating_point:
            base = base.clamp(-100, 100)
        x = base.to(sd)
    else:
        lo, hi = {torch.int8: (-128, 127), torch.uint8: (0, 255)}.get(sd, (-40000, 40000))
        x = torch.randint(lo, hi, (n,), device="cuda").to(sd)
    y = poisoned(torch, (n,), dd)
    spec[(3,)](x, y, n)
    torch.cuda.synchronize()
    if not sd.is_floating_point and not dd.is_floating_point and dd.itemsize < sd.itemsize:
        bits = 8 * dd.itemsize  # narrowing integer casts wrap, as C casts do
        want = (x.cpu().numpy().astype(np.int64) + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)
    elif sd.is_floating_point and not dd.is_floating_point:
        want = host(torch.trunc(x.double()).to(dd))  # float -> int truncates toward zero
    else:
        want = host(x.to(dd))  # torch rounds to nearest even, as PTX's cvt.rn does
    check(host(y), want, 0, 0, spec.name)


# ---- reductions and shape ops ----------------------------------------------------------------

@pytest.mark.parametrize("spec", K.REDUCE, ids=lambda s: s.name)
def test_reductions_across_lanes_and_warps(spec, torch):
    kind, axis, (M, N) = spec.constexprs["KIND"], spec.constexprs["AXIS"], (spec.constexprs["M"], spec.constexprs["N"])
    if kind == "xor_sum":
        x = torch.randint(0, 2 ** 20, (M, N), device="cuda", dtype=torch.int32)
    elif kind.startswith("arg"):
        x = torch.randint(-20, 20, (M, N), device="cuda").float()  # ties: the smallest index must win
    else:
        x = torch.randn(M, N, device="cuda")
    y = poisoned(torch, (N if axis == 0 else M,), torch.int32 if kind in ("argmax", "argmin", "xor_sum")
                 else torch.float32)
    spec[(1,)](x, y)
    torch.cuda.synchronize()
    xn = host(x)
    want = {"sum": lambda a: a.sum(axis), "max": lambda a: a.max(axis), "min": lambda a: a.min(axis),
            "argmax": lambda a: a.argmax(axis), "argmin": lambda a: a.argmin(axis),
            "xor_sum": lambda a: np.bitwise_xor.reduce(a, axis=axis)}[kind](xn)
    check(host(y), want, 1e-6 if kind == "sum" else 0, 1e-5 if kind == "sum" else 0, spec.name)


def test_full_reduction_to_a_scalar_over_8_warps(torch):
    x = torch.randn(4 * 2048, device="cuda")
    y = poisoned(torch, (4,), torch.float32)
    K.FULL_REDUCE[(4,)](x, y)
    torch.cuda.synchronize()
    check(host(y), host(x).reshape(4, 2048).sum(1), 1e-5, 1e-4, "full sum")


def test_transpose_converts_its_layout_through_shared_memory(torch):
    M, N = 64, 128
    x = torch.randn(M, N, device="cuda")
    y = poisoned(torch, (N, M), torch.float32)
    K.TRANS[(1,)](x, y)
    torch.cuda.synchronize()
    check(host(y), host(x).T, 0, 0, "trans")


def test_reshape_permute_split_and_join_move_the_right_elements(torch):
    M, N = 64, 128
    x = torch.randn(M, N, device="cuda")
    y = poisoned(torch, (M, N // 2), torch.float32)
    z = poisoned(torch, (M, N), torch.float32)
    K.SPLIT_JOIN[(1,)](x, y, z)
    torch.cuda.synchronize()
    xn = host(x)
    lo, hi = xn[:, :N // 2], xn[:, N // 2:]
    # the kernel subtracts in fp32: so does the reference (one correctly rounded subtraction)
    check(host(y), hi.astype(np.float32) - lo.astype(np.float32), 0, 0, "split")
    check(host(z), np.stack([hi, lo], axis=-1).transpose(0, 2, 1).reshape(M, N), 0, 0, "join")


def test_a_masked_scalar_load_gives_other_where_the_mask_is_off(torch):
    """Programs at or past n read `other`, not what the load's register held before (the
    scalar path used to overwrite `other` with the unloaded word)."""
    P, n = 64, 37
    x = torch.arange(100, 100 + P, device="cuda", dtype=torch.int32)
    y = poisoned(torch, (P,), torch.int32)
    K.SCALAR_MASKED_LOAD[(P,)](x, y, n)
    torch.cuda.synchronize()
    want = np.where(np.arange(P) < n, np.arange(100, 100 + P), -5)
    check(host(y), want, 0, 0, "masked scalar load")


def test_atomics_add_once_per_element_and_return_the_old_value(torch):
    P, SLOTS, BLOCK = 50, 8, 64
    cnt = torch.zeros(SLOTS, device="cuda", dtype=torch.int32)
    fsum = torch.zeros(SLOTS, device="cuda", dtype=torch.float32)
    mx = torch.full((SLOTS,), -1, device="cuda", dtype=torch.int32)
    ticket = torch.zeros(1 + P, device="cuda", dtype=torch.int32)
    cas = torch.zeros(2048, device="cuda", dtype=torch.int32)
    K.ATOMICS[(P,)](cnt, fsum, mx, ticket, cas)
    torch.cuda.synchronize()
    per = BLOCK // SLOTS * P  # 64 elements on 128 threads: a copy held by two threads adds once
    check(host(cnt), np.full(SLOTS, per), 0, 0, "atomic_add counts")
    check(host(fsum), np.full(SLOTS, 0.5 * per), 0, 0, "atomic fadd")
    want_mx = [max(p * BLOCK + i for p in range(P) for i in range(BLOCK) if i % SLOTS == s) for s in range(SLOTS)]
    check(host(mx), want_mx, 0, 0, "atomic_max")
    t = host(ticket)
    assert t[0] == P and sorted(t[1:].tolist()) == list(range(P)), f"tickets {t}"
    c = host(cas)
    check(c[:P], np.arange(P) + 7, 0, 0, "cas new values")
    check(c[1024:1024 + P], np.zeros(P), 0, 0, "cas old values")


# ---- shared memory, cp.async, TMA ------------------------------------------------------------

@pytest.mark.parametrize("spec", K.SMEM, ids=lambda s: s.name)
def test_swizzled_tile_reads_back_through_transposed_and_sliced_views(spec, torch):
    M, N = spec.constexprs["M"], spec.constexprs["N"]
    dt = dtype_of(torch, spec.signature["x_ptr"])
    if dt == torch.int8:
        x = torch.randint(-100, 100, (M, N), device="cuda", dtype=dt)
    else:
        x = (torch.randn(M, N, device="cuda") * 20).to(dt)
    y = poisoned(torch, (N, M), dt)
    z = poisoned(torch, (M // 2, N // 2), dt)
    spec[(1,)](x, y, z)
    torch.cuda.synchronize()
    check(host(y), host(x).T, 0, 0, "local_trans view")
    check(host(z), host(x)[M // 2:, N // 2:], 0, 0, "local_slice view")


def test_sub_slice_at_a_runtime_row_offset(torch):
    M, N, R = 64, 64, 16
    x = torch.randn(M, N, device="cuda").half()
    for row0 in (0, 16, 48):
        y = poisoned(torch, (R, N), torch.float16)
        K.DYN_SLICE[(1,)](x, y, row0)
        torch.cuda.synchronize()
        check(host(y), host(x)[row0:row0 + R], 0, 0, f"slice at row {row0}")


def test_cp_async_zero_fills_masked_tails(torch):
    M, N, S = 64, 64, 3
    x = torch.randn(S * M, N, device="cuda").half()
    y = poisoned(torch, (M, N), torch.float32)
    K.CP_ASYNC[(1,)](x, y)
    torch.cuda.synchronize()
    xn = host(x).reshape(S, M, N)
    want = sum(np.where(np.arange(M)[:, None] < M - s, xn[s], 0) for s in range(S))
    check(host(y), want, 1e-6, 1e-6, "cp.async")


@pytest.mark.parametrize("spec", K.TMA, ids=lambda s: s.name)
def test_tma_load_and_store_split_wide_boxes_into_128_byte_boxes(spec, torch):
    import tlx

    bn = spec.constexprs["BN"]
    dt = dtype_of(torch, spec.signature["x_desc"].split("<")[1].split("[")[0])
    M, N, BM = 200, 3 * bn, 64
    x = torch.randn(M, N, device="cuda").to(dt)
    y = poisoned(torch, (M, N), dt)
    xd = tlx.TensorDescriptor(x, [M, N], [N, 1], [BM, bn])
    yd = tlx.TensorDescriptor(y, [M, N], [N, 1], [BM, bn])
    spec[(math.ceil(M / BM), N // bn)](xd, yd)
    torch.cuda.synchronize()
    check(host(y), host((x.float() + 1).to(dt)), 0, 0, spec.name)


def test_device_side_descriptors_built_in_the_kernel(torch):
    M, N = 256, 192
    x = torch.randn(M, N, device="cuda").half()
    y = poisoned(torch, (M, N), torch.float16)
    K.DEVICE_DESC[(M // 64, N // 64)](x, y, M, N)
    torch.cuda.synchronize()
    check(host(y), host(x) * 2, 0, 0, "device descriptor")


def test_one_row_tile_wider_than_a_tma_box_lands_at_aligned_smem(torch):
    """A [1, 4096] fp16 tile moves as 16 boxes of 256 elements at 512-byte steps (16-byte boxes at
    16-byte steps were a misaligned-address fault); the allocator Triton's API sets serves the scratch."""
    import tlx

    n = 6 * 32 * 128
    x = torch.randn(n, device="cuda").half()
    y = poisoned(torch, (n,), torch.float16)
    tlx.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    try:
        K.ROW_TILE_TMA[(n // (32 * 128),)](x, y, n)
    finally:
        tlx.set_allocator(None)
    torch.cuda.synchronize()
    check(host(y), host(x) * 3, 1e-3, 0, "one-row TMA tile")


def test_wait_then_arrive_rounds_on_one_mbarrier_do_not_hang(torch):
    """16 arrive/wait rounds on one mbarrier in 264 CTAs of 4 warps: with no barrier between a
    wait and the leader's next arrive a lagging warp misses a parity and hangs the launch."""
    n = 264 * 1024
    x = torch.randn(n, device="cuda")
    y = poisoned(torch, (n,), torch.float32)
    K.MBARRIER_ROUNDS[(n // 1024,)](x, y)
    torch.cuda.synchronize()
    check(host(y), host(x) * 17, 1e-5, 1e-5, "mbarrier rounds")


def test_rank_1_descriptors_in_a_worker_partition(torch):
    n = 37 * 1024
    x = torch.randn(n, device="cuda")
    y = poisoned(torch, (n,), torch.float32)
    K.RANK1_DESC_WS[(n // 1024,)](x, y, n)
    torch.cuda.synchronize()
    want = (host(x).astype(np.float32) + np.float32(1)).astype(np.float64)  # one fp32 add: rounded as the GPU rounds
    check(host(y), want, 0, 0, "rank-1 descriptors")


def test_descriptor_load_in_a_loop_reinitializes_its_mbarrier_every_iteration(torch):
    M, N, BM, BN = 64 * 37, 256, 64, 64  # 37 iterations
    x = torch.randn(M, N, device="cuda").half()
    y = poisoned(torch, (BM, N), torch.float32)
    K.DESC_LOAD_LOOP[(N // BN,)](x, y, M, N)
    torch.cuda.synchronize()
    check(host(y), host(x).reshape(M // BM, BM, N).sum(axis=0), 1e-5, 1e-3, "descriptor load loop")


# ---- wgmma -----------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", K.DOT, ids=lambda s: s.name)
def test_wgmma_matches_numpy_for_every_operand_form(spec, torch):
    c = spec.constexprs
    M, N, Kd, a_mn, b_k = c["M"], c["N"], c["K"], c["A_MN"], c["B_KMAJOR"]
    dt = dtype_of(torch, spec.signature["a_ptr"])
    if dt == torch.int8:
        a = torch.randint(-8, 8, (M, Kd), device="cuda", dtype=dt)
        b = torch.randint(-8, 8, (Kd, N), device="cuda", dtype=dt)
        out = poisoned(torch, (M, N), torch.int32)
    else:
        a = torch.randn(M, Kd, device="cuda").to(dt)
        b = torch.randn(Kd, N, device="cuda").to(dt)
        out = poisoned(torch, (M, N), torch.float32)
    spec[(1,)](a.t().contiguous() if a_mn else a, b.t().contiguous() if b_k else b, out)
    torch.cuda.synchronize()
    a64, b64 = host(a).astype(np.float64), host(b).astype(np.float64)
    if dt == torch.int8:
        check(host(out), a64 @ b64, 0, 0, spec.name)
    elif dt == torch.float32:  # tf32 inputs: 10-bit mantissas
        bound = (2.0 ** -10 + Kd * 2.0 ** -22) * (np.abs(a64) @ np.abs(b64)) + 1e-30
        check(host(out), a64 @ b64, 0, bound, spec.name)
    else:  # fp8 wgmma accumulates with a narrower adder than fp32 on Hopper (about 14 bits)
        step = 2.0 ** -14 if "float8" in str(dt) else 2.0 ** -22
        check(host(out), a64 @ b64, 0, Kd * step * (np.abs(a64) @ np.abs(b64)) + 1e-30, spec.name)


def test_wgmma_with_a_from_registers_chains_on_one_accumulator(torch):
    M, N, Kd = 64, 128, 64
    a = torch.randn(M, Kd, device="cuda").half()
    b = torch.randn(Kd, N, device="cuda").half()
    c = poisoned(torch, (M, N), torch.float32)
    K.DOT_REG_A[(1,)](a, b, c)
    torch.cuda.synchronize()
    a64, b64 = host(a), host(b)
    check(host(c), 3 * (a64 @ b64), 0, 3 * Kd * 2.0 ** -21 * (np.abs(a64) @ np.abs(b64)) + 1e-30, "register A")


# ---- control flow and warp specialization --------------------------------------------------------

def test_while_if_early_return_3d_grid_thread_ids_and_clock(torch):
    n, BLOCK, grid = 1000, 128, (2, 2, 3)
    x = torch.randn(n, device="cuda")
    y = poisoned(torch, (n,), torch.float32)
    ids = torch.full((12 * 128,), -1, device="cuda", dtype=torch.int32)
    clk = torch.zeros(12, device="cuda", dtype=torch.int64)
    K.CONTROL[grid](x, y, ids, clk, n)
    torch.cuda.synchronize()
    pid = np.arange(n) // BLOCK
    check(host(y), np.where(pid % 2 == 0, -10 * host(x), 10 * host(x)), 1e-6, 1e-6, "while / if")
    live = (n + BLOCK - 1) // BLOCK
    got_ids = host(ids).reshape(12, 128)
    assert (got_ids[:live] == np.arange(128)).all() and (got_ids[live:] == -1).all(), "early return / thread ids"
    assert (host(clk)[:live] > 0).all(), "clock64 did not advance"


def test_warp_specialized_partitions_hand_off_through_an_mbarrier(torch):
    BLOCK = 512
    x = torch.randn(4 * BLOCK, device="cuda")
    y = poisoned(torch, (4 * BLOCK,), torch.float32)
    K.WS[(4,)](x, y)
    torch.cuda.synchronize()
    xn = host(x)
    # x * 3 + 1 in fp32, possibly fused into one fma by ptxas: within 2 ulps of the terms
    check(host(y), xn * 3 + 1, 0, 2.0 ** -22 * (np.abs(3 * xn) + 1), "warp specialization")


# ---- whole kernels written for the real TLX ------------------------------------------------------

def check_gemm(c, a, b, what: str) -> None:
    """fp32-accumulated product rounded to fp16: k * 2^-22 * (|A| @ |B|) plus the output rounding."""
    a64, b64 = host(a), host(b)
    want = a64 @ b64
    check(host(c), want, 2.0 ** -10, a.shape[1] * 2.0 ** -22 * (np.abs(a64) @ np.abs(b64)) + 1e-30, what)


@pytest.mark.parametrize("spec", K.GEMM_PIPELINED, ids=lambda s: s.name)
def test_cp_async_pipelined_gemm(spec, torch):
    M, N, Kd = 512, 768, 640
    a = torch.randn(M, Kd, device="cuda").half()
    b = torch.randn(Kd, N, device="cuda").half()
    c = poisoned(torch, (M, N), torch.float16)
    grid = (math.ceil(M / 128) * math.ceil(N / spec.constexprs["BLOCK_N"]),)
    spec[grid](a, b, c, M, N, Kd, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    torch.cuda.synchronize()
    check_gemm(c, a, b, spec.name)


def test_warp_specialized_tma_gemm(torch):
    import tlx

    M = N = Kd = 512
    a = torch.randn(M, Kd, device="cuda").half()
    b = torch.randn(Kd, N, device="cuda").half()
    c = poisoned(torch, (M, N), torch.float16)
    ad = tlx.TensorDescriptor(a, [M, Kd], [Kd, 1], [64, 64])
    bd = tlx.TensorDescriptor(b, [Kd, N], [N, 1], [64, 256])
    cd = tlx.TensorDescriptor(c, [M, N], [N, 1], [64, 256])
    K.GEMM_WS[(math.ceil(M / 128) * math.ceil(N / 256),)](ad, bd, cd, M, N, Kd)
    torch.cuda.synchronize()
    check_gemm(c, a, b, "warp-specialized GEMM")


def test_flash_attention_forward_matches_softmax_attention(torch):
    import tlx

    Z, N_CTX, D = 2, 256, 128
    q, k, v = (torch.randn(Z * N_CTX, D, device="cuda").half() for _ in range(3))
    o = poisoned(torch, (Z * N_CTX, D), torch.float16)
    qd = tlx.TensorDescriptor(q, [Z * N_CTX, D], [D, 1], [64, D])
    kd = tlx.TensorDescriptor(k, [Z * N_CTX, D], [D, 1], [128, D])
    vd = tlx.TensorDescriptor(v, [Z * N_CTX, D], [D, 1], [128, D])
    od = tlx.TensorDescriptor(o, [Z * N_CTX, D], [D, 1], [64, D])
    scale = 1.0 / math.sqrt(D)
    K.FLASH_ATTENTION[(N_CTX // 128, Z)](qd, kd, vd, od, scale, N_CTX)
    torch.cuda.synchronize()
    q64, k64, v64 = (host(t).reshape(Z, N_CTX, D) for t in (q, k, v))
    s = q64 @ k64.transpose(0, 2, 1) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    check(host(o).reshape(Z, N_CTX, D), (p / p.sum(-1, keepdims=True)) @ v64, 2e-2, 2e-2, "flash attention")

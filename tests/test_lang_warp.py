"""Warp-level constructs, inline PTX and prefetch hints: `tlx.vote_ballot_sync`, `tlx.warp_redux`,
`tl.inline_asm_elementwise`, `tlx.prefetch`. Interpreter numerics against an independent model of
which lanes hold which elements (the blocked layout the compiler chose, decoded here from its
parameters), the PTX they become (assembled by ptxas for sm_90a), and their errors."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import tlx  # noqa: E402
import tlx.language as tl  # noqa: E402
from tlx.compiler.errors import TLXCompileError  # noqa: E402
from tlx.compiler.ir import layouts as L  # noqa: E402
from tlx.interpreter.memory import InterpreterError  # noqa: E402

RNG = np.random.default_rng(90)


# ---- an independent model of a 1-D blocked layout ---------------------------------------------------

def blocked_1d_holders(layout: L.BlockedLayout, n: int):
    """For each element i of a 1-D tensor of n elements in `layout`: (warp, register, lane), from the
    blocked layout's definition (spt consecutive elements per lane, 32 lanes, then the warps, the
    tile repeated over registers)."""
    (spt,), (tpw,), (wpc,) = layout.spt, layout.tpw, layout.wpc
    assert tpw == 32 and spt * 32 * wpc <= n, layout  # no element held twice
    tile = spt * 32 * wpc
    i = np.arange(n)
    t, rep = i % tile, i // tile
    return t // (spt * 32), rep * spt + t % spt, (t // spt) % 32


def traced_layout(kernel, args, consts, op_name, nw):
    """The layout the compiler gives the first operand of `op_name` (what the interpreter runs)."""
    from tlx.interpreter.entry import prepare_module
    from tlx.specialize import Specializer

    bound, _ = Specializer(kernel).bind(args, consts)
    m = prepare_module(kernel, bound, num_warps=nw)
    op = next(o for o in m.ops() if o.name == op_name)
    return op.operands[0].type.layout


# ---- vote_ballot_sync --------------------------------------------------------------------------------

@tlx.jit
def ballot_scalar(out_ptr):
    tid = tlx.thread_id(0)
    b = tlx.vote_ballot_sync(0xFFFFFFFF, tid < 16)
    if tid == 0:
        tl.store(out_ptr, b)


@tlx.jit
def ballot_in_branch(out_ptr, MASK: tl.constexpr):
    tid = tlx.thread_id(0)
    if tid < 16:
        b = tlx.vote_ballot_sync(MASK, tid % 3 == 0)
        if tid == 0:
            tl.store(out_ptr, b)


@tlx.jit
def ballot_tensor(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tlx.vote_ballot_sync(0xFFFFFFFF, x))  # a non-boolean pred votes x != 0


def test_a_scalar_ballot_has_a_bit_per_lane_whose_predicate_holds():
    out = np.zeros(1, np.int32)
    tlx.interpret(ballot_scalar, (1,), out, num_warps=1)
    assert int(out[0]) == 0x0000FFFF


def test_a_ballot_in_a_branch_names_exactly_the_lanes_that_take_it():
    out = np.full(1, -7, np.int32)
    tlx.interpret(ballot_in_branch, (1,), out, MASK=0x0000FFFF, num_warps=1)
    assert int(out[0]) == sum(1 << lane for lane in range(16) if lane % 3 == 0)
    with pytest.raises(InterpreterError, match="lane 16 is in the mask but does not execute it"):
        tlx.interpret(ballot_in_branch, (1,), out, MASK=0xFFFFFFFF, num_warps=1)
    with pytest.raises(InterpreterError, match="lane 8 executes it but is not in the mask"):
        tlx.interpret(ballot_in_branch, (1,), out, MASK=0x000000FF, num_warps=1)


@pytest.mark.parametrize("n,nw", [(128, 4), (512, 4), (1024, 8), (64, 2)])
def test_a_tensor_ballot_is_per_register_of_each_warp(n, nw):
    x = (RNG.random(n) < 0.4).astype(np.int32) * RNG.integers(1, 9, n).astype(np.int32)
    out = np.full(n, 12345, np.int32)
    tlx.interpret(ballot_tensor, (1,), x, out, BLOCK=n, num_warps=nw)
    lay = traced_layout(ballot_tensor, (x, out), {"BLOCK": n}, "tlx.vote_ballot_sync", nw)
    warp, reg, lane = blocked_1d_holders(lay, n)
    want = np.zeros(n, np.int64)
    for i in range(n):
        same = (warp == warp[i]) & (reg == reg[i])
        want[i] = sum(1 << int(lane[j]) for j in np.flatnonzero(same) if x[j] != 0)
    np.testing.assert_array_equal(out.astype(np.int64) & 0xFFFFFFFF, want)


def test_the_ballot_ptx_is_one_vote_per_register():
    k = tlx.compile(ballot_tensor, signature={"x_ptr": "*i32", "out_ptr": "*i32"}, constexprs={"BLOCK": 1024},
                    num_warps=4, divisibility={"x_ptr": 16, "out_ptr": 16})
    votes = re.findall(r"vote\.sync\.ballot\.b32 %\w+, %\w+, (\d+);", k.asm["ptx"])
    assert votes == ["4294967295"] * 8  # 1024 elements / 128 threads
    k = tlx.compile(ballot_in_branch, signature={"out_ptr": "*i32"}, constexprs={"MASK": 0xFFFF}, num_warps=1)
    assert re.search(r"vote\.sync\.ballot\.b32 %\w+, %\w+, 65535;", k.asm["ptx"])


@tlx.jit
def bad_ballot(x_ptr, WHAT: tl.constexpr):
    v = tl.load(x_ptr)
    if WHAT == "runtime_mask":
        tlx.vote_ballot_sync(v, v > 0)
    elif WHAT == "wide_mask":
        tlx.vote_ballot_sync(1 << 32, v > 0)
    elif WHAT == "redux_op":
        tlx.warp_redux(v.to(tl.float32), "sum")
    elif WHAT == "redux_dtype":
        tlx.warp_redux(v, "max")
    elif WHAT == "prefetch_level":
        tlx.prefetch(x_ptr, level="L3")
    elif WHAT == "prefetch_value":
        tlx.prefetch(v)
    elif WHAT == "subslice":
        buf = tlx.local_alloc((128, 64), tl.float32, 1)
        tlx.subslice(buf[0], 0, 32)


@pytest.mark.parametrize("what,cls,match", [
    ("runtime_mask", TLXCompileError, "mask must be a compile-time constant"),
    ("wide_mask", ValueError, "32-bit integer"),
    ("redux_op", ValueError, "must be one of max, min, abs_max, abs_min"),
    ("redux_dtype", TypeError, "needs a float32 value"),
    ("prefetch_level", ValueError, "'L1' or 'L2'"),
    ("prefetch_value", TypeError, "needs a pointer"),
    ("subslice", AssertionError, "tensor memory"),
])
def test_bad_warp_op_and_prefetch_arguments_are_refused_at_their_line(what, cls, match):
    with pytest.raises(cls, match=match) as e:
        tlx.compile(bad_ballot, signature={"x_ptr": "*i32"}, constexprs={"WHAT": what})
    assert isinstance(e.value, TLXCompileError) and e.value.loc is not None
    assert e.value.loc.line > bad_ballot.fn.__code__.co_firstlineno + 2


# ---- warp_redux ------------------------------------------------------------------------------------

@tlx.jit
def redux_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, OP: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tlx.warp_redux(tl.load(x_ptr + offs), OP))


@tlx.jit
def redux_scalar(out_ptr, OP: tl.constexpr):
    tid = tlx.thread_id(0)
    r = tlx.warp_redux(((tid * 7) % 32 - 20).to(tl.float32), OP)
    if tid == 0:
        tl.store(out_ptr, r)


_NP = {"max": lambda v: np.nanmax(v), "min": lambda v: np.nanmin(v), "abs_max": lambda v: np.nanmax(np.abs(v)),
       "abs_min": lambda v: np.nanmin(np.abs(v))}


@pytest.mark.parametrize("op", ["max", "min", "abs_max", "abs_min"])
@pytest.mark.parametrize("n,nw", [(256, 4), (2048, 8)])
def test_warp_redux_reduces_each_register_over_its_warp(op, n, nw):
    x = RNG.standard_normal(n).astype(np.float32) * 10
    x[RNG.integers(0, n, n // 16)] = np.nan  # NaN lanes are ignored (unless a whole group is NaN)
    out = np.full(n, np.nan, np.float32)
    tlx.interpret(redux_kernel, (1,), x, out, BLOCK=n, OP=op, num_warps=nw)
    lay = traced_layout(redux_kernel, (x, out), {"BLOCK": n, "OP": op}, "tlx.warp_redux", nw)
    warp, reg, _ = blocked_1d_holders(lay, n)
    want = np.empty(n)
    for i in range(n):
        want[i] = _NP[op](x[(warp == warp[i]) & (reg == reg[i])].astype(np.float64))
    np.testing.assert_array_equal(out.astype(np.float64), want)


def test_warp_redux_of_a_per_thread_scalar_reduces_the_warp():
    vals = np.array([(t * 7) % 32 - 20 for t in range(32)], np.float64)
    for op in _NP:
        out = np.full(1, np.nan, np.float32)
        tlx.interpret(redux_scalar, (1,), out, OP=op, num_warps=1)
        assert float(out[0]) == _NP[op](vals), op


def test_warp_redux_is_a_butterfly_of_five_shuffles_per_register_on_hopper():
    k = tlx.compile(redux_kernel, signature={"x_ptr": "*fp32", "out_ptr": "*fp32"},
                    constexprs={"BLOCK": 512, "OP": "abs_max"}, num_warps=4, divisibility={"x_ptr": 16, "out_ptr": 16})
    ptx = k.asm["ptx"]
    regs = 512 // 128
    assert len(re.findall(r"shfl\.sync\.bfly\.b32 %\w+, %\w+, (?:16|8|4|2|1), 31, -1;", ptx)) == 5 * regs
    assert ptx.count("max.f32") == 5 * regs and ptx.count("and.b32") >= regs and "redux.sync" not in ptx


# ---- inline asm ----------------------------------------------------------------------------------------

@tlx.jit
def asm_shift(x_ptr, y_ptr, BLOCK: tl.constexpr, PURE: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("shl.b32 $0, $1, 3;", "=r,r", [x], dtype=tl.int32, is_pure=PURE, pack=1)
    tl.store(y_ptr + offs, y)


@tlx.jit
def asm_bytes(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    # four int8 per call in one register; two results: the sign-extended bytes, and x + 1 per byte
    a, b = tl.inline_asm_elementwise(
        "{ .reg .b8 t<4>; mov.b32 {t0, t1, t2, t3}, $8; cvt.s32.s8 $0, t0; cvt.s32.s8 $1, t1; cvt.s32.s8 $2, t2; "
        "cvt.s32.s8 $3, t3; add.s32 $4, $0, 1; add.s32 $5, $1, 1; add.s32 $6, $2, 1; add.s32 $7, $3, 1; }",
        "=r,=r,=r,=r,=r,=r,=r,=r,r", [x], dtype=(tl.int32, tl.int32), is_pure=True, pack=4)
    tl.store(y_ptr + offs, a)
    tl.store(z_ptr + offs, b)


@tlx.jit
def asm_tied(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("add.f16x2 $0, $0, $1;", "=r,0,r", [x, x], dtype=tl.float16, is_pure=True, pack=2)
    tl.store(y_ptr + offs, y)


def test_inline_asm_substitutes_registers_for_every_element():
    k = tlx.compile(asm_shift, signature={"x_ptr": "*i32", "y_ptr": "*i32"}, constexprs={"BLOCK": 256, "PURE": True},
                    num_warps=4)
    asm = re.findall(r"\tshl\.b32 (%\w+), (%\w+), 3;", k.asm["ptx"])
    assert len(asm) == 2 and len({d for d, _ in asm} | {s for _, s in asm}) == 4  # 256 / 128 threads


def test_pure_inline_asm_whose_result_is_unused_is_dropped_and_impure_asm_is_kept():
    @tlx.jit
    def unused(x_ptr, PURE: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, 128))
        tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=PURE, pack=1)

    for pure, n in ((True, 0), (False, 1)):
        ptx = tlx.compile(unused, signature={"x_ptr": "*i32"}, constexprs={"PURE": pure}).asm["ptx"]
        assert ptx.count("begin inline asm") == n


def test_packed_bytes_and_tied_halves_follow_the_constraints():
    k = tlx.compile(asm_bytes, signature={"x_ptr": "*i8", "y_ptr": "*i32", "z_ptr": "*i32"}, constexprs={"BLOCK": 512},
                    num_warps=4, divisibility={"x_ptr": 16, "y_ptr": 16, "z_ptr": 16})
    ptx = k.asm["ptx"]
    assert ptx.count("begin inline asm") == 1  # 4 int8 per thread, 4 per call
    text = ptx[ptx.index("begin inline asm"):ptx.index("end inline asm")]
    assert re.search(r"mov\.b32 \{t0, t1, t2, t3\}, %\w+;", text) and "$" not in text
    k = tlx.compile(asm_tied, signature={"x_ptr": "*fp16", "y_ptr": "*fp16"}, constexprs={"BLOCK": 1024}, num_warps=4,
                    divisibility={"x_ptr": 16, "y_ptr": 16})
    calls = re.findall(r"add\.f16x2 (%\w+), (%\w+), (%\w+);", k.asm["ptx"])
    assert len(calls) == 4 and all(d == a for d, a, _ in calls)  # "0": the input arrives in output 0's register


@pytest.mark.parametrize("cons,dtype,pack,match", [
    ("=r,r,r", tl.int32, 1, "name 1 outputs and 2 inputs; with pack=1 one call has 1 output and 1 input"),
    ("=h,r", tl.int32, 1, "takes a 16-bit register"),
    ("=r,x", tl.int32, 1, "not supported"),
    ("=r,r", tl.float16, 3, "pack=3 does not split"),
])
def test_constraints_that_do_not_fit_the_operands_are_refused(cons, dtype, pack, match):
    @tlx.jit
    def k(x_ptr, CONS: tl.constexpr, DT: tl.constexpr, PACK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, 128))
        tl.store(x_ptr + tl.arange(0, 128), tl.inline_asm_elementwise("mov.b32 $0, $1;", CONS, [x], dtype=DT,
                                                                       is_pure=True, pack=PACK))

    with pytest.raises(TLXCompileError, match=re.escape(match)) as e:
        tlx.compile(k, signature={"x_ptr": "*i32"}, constexprs={"CONS": cons, "DT": dtype, "PACK": pack})
    assert e.value.loc is not None


def test_the_interpreter_refuses_inline_asm_with_the_line():
    x = np.arange(128, dtype=np.int32)
    with pytest.raises(InterpreterError, match="inline PTX the CPU interpreter cannot run: 'shl.b32 \\$0, \\$1, 3'") as e:
        tlx.interpret(asm_shift, (1,), x, x.copy(), BLOCK=128, PURE=True)
    assert e.value.loc.line == asm_shift.fn.__code__.co_firstlineno + 4


@tlx.jit
def asm_sleep_and_moves(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    # a delay (peer kernels hold one CTA back this way), a constant, a copy of the input
    flag = tl.inline_asm_elementwise("nanosleep.u32 1000; mov.u32 $0, -7;", "=r", [], dtype=tl.int32,
                                     is_pure=False, pack=1)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y + flag)
    tl.store(z_ptr + offs, tl.full((BLOCK,), 0, tl.int32) + flag)


@tlx.jit
def asm_mov(x_ptr, y_ptr, BLOCK: tl.constexpr, ASM: tl.constexpr, CONS: tl.constexpr, OUT: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise(ASM, CONS, [x], dtype=OUT, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y)


@pytest.mark.parametrize("asm,cons,out,why", [
    ("mov.b32 $0, 0x3f800000;", "=r,r", tl.float32, "an immediate into a float output is a bit pattern"),
    ("mov.b32 $0, $1;", "=r,r", tl.float32, "a i32 register moved into a f32 output"),
    ("mov.b32 $0, $0;", "=r,r", tl.int32, "$0 is read before it is set"),
], ids=["float-immediate", "int-into-float", "unset-output"])
def test_the_interpreter_refuses_a_mov_it_would_get_wrong(asm, cons, out, why):
    """A mov whose meaning is a bit copy the interpreter does not model, or that reads an output
    before any statement sets it, is an error naming the statement, not a wrong value."""
    x = np.arange(32, dtype=np.int32)
    y = np.zeros(32, np.float32 if out == tl.float32 else np.int32)
    with pytest.raises(InterpreterError, match=re.escape(why)):
        tlx.interpret(asm_mov, (1,), x, y, BLOCK=32, ASM=asm, CONS=cons, OUT=out)


def test_the_interpreter_runs_inline_nanosleep_and_mov():
    """`nanosleep` changes no value; `mov` sets an output from an immediate or an input (outputs
    come first in the operand numbering)."""
    x = np.arange(128, dtype=np.int32) * 3
    y = np.full(128, 12345, np.int32)
    z = np.full(128, 12345, np.int32)
    tlx.interpret(asm_sleep_and_moves, (1,), x, y, z, BLOCK=128)
    np.testing.assert_array_equal(y, np.arange(128) * 3 - 7)
    np.testing.assert_array_equal(z, np.full(128, -7))
    res = tlx.compile(asm_sleep_and_moves, {"x_ptr": "*i32", "y_ptr": "*i32", "z_ptr": "*i32"}, {"BLOCK": 128})
    assert "nanosleep.u32 1000;" in res.asm["ptx"] and res.asm["cubin"]  # ptxas assembled it for sm_90a


# ---- prefetch ----------------------------------------------------------------------------------------

@tlx.jit
def prefetch_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, LEVEL: tl.constexpr, USE_MASK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n if USE_MASK else None
    tlx.prefetch(x_ptr + offs, level=LEVEL, mask=mask)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@tlx.jit
def prefetch_desc(a, b):
    tlx.prefetch(a, tensormap=True)
    tlx.prefetch(b, tensormap=True)


@pytest.mark.parametrize("level", ["L1", "L2"])
@pytest.mark.parametrize("use_mask", [False, True])
def test_prefetch_is_one_predicated_hint_per_16_bytes(level, use_mask):
    k = tlx.compile(prefetch_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
                    constexprs={"BLOCK": 1024, "LEVEL": level, "USE_MASK": use_mask}, num_warps=4,
                    divisibility={"x_ptr": 16, "y_ptr": 16, "n": 16})
    hints = re.findall(r"\t(@%\w+ )?prefetch\.global\.(L1|L2) \[%\w+\];", k.asm["ptx"])
    assert len(hints) == 1024 // 128 // 4 and {h[1] for h in hints} == {level}
    assert all(bool(h[0]) == use_mask for h in hints)


def test_prefetch_hints_change_nothing_on_the_interpreter():
    x = RNG.standard_normal(3000).astype(np.float32)
    y = np.full(3072, np.nan, np.float32)
    tlx.interpret(prefetch_kernel, (3,), x, y, 3000, BLOCK=1024, LEVEL="L1", USE_MASK=True)
    np.testing.assert_array_equal(y[:3000], x)
    assert np.isnan(y[3000:]).all()


def test_a_tensormap_prefetch_uses_the_generic_address_of_each_descriptor():
    k = tlx.compile(prefetch_desc, signature={"a": "tensordesc<fp16[64, 64]>", "b": "tensordesc<fp32[32, 32]>"})
    ptx = k.asm["ptx"]
    assert len(re.findall(r"@%leader\w* prefetch\.tensormap \[%\w+\];", ptx)) == 2
    assert "prefetch.param.tensormap" not in ptx


# ---- a register layout the user pins decides what a warp holds --------------------------------

@tlx.jit
def pinned_rows_redux(x_ptr, out_ptr, LAYOUT: tl.constexpr):
    offs = tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]
    buf = tlx.local_alloc((128, 64), tl.float32, 1)
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    v = tlx.local_load(buf[0], layout=LAYOUT)
    tl.store(out_ptr + offs, tlx.warp_redux(v, "max"))


# lane l of warp w holds row 32 w + l, its 64 registers the columns
ROW_PER_LANE = tlx.layout(shape=((32, 4), (64,)), stride=((64, 2048), (1,)))


def test_a_pinned_register_layout_is_kept_and_decides_the_warp_groups():
    k = tlx.compile(pinned_rows_redux, signature={"x_ptr": "*fp32", "out_ptr": "*fp32"},
                    constexprs={"LAYOUT": ROW_PER_LANE}, num_warps=4)
    lin = ("#linear<reg=[[0,1],[0,2],[0,4],[0,8],[0,16],[0,32]], lane=[[1,0],[2,0],[4,0],[8,0],[16,0]], "
           "warp=[[32,0],[64,0]], shape=[128,64]>")
    traced = next(ln for ln in k.asm["ir"].splitlines() if "tlx.local_load" in ln)
    assert f"layout = {lin}" in traced, traced  # asked for on the op ...
    laid = next(ln for ln in k.asm["ir.layouts"].splitlines() if "tlx.local_load" in ln)
    assert laid.endswith(f": tensor<128x64xf32, {lin}>") or f"tensor<128x64xf32, {lin}>" in laid, laid  # ... kept
    x = RNG.standard_normal((128, 64)).astype(np.float32)
    out = np.full_like(x, np.nan)
    tlx.interpret(pinned_rows_redux, (1,), x, out, LAYOUT=ROW_PER_LANE, num_warps=4)
    # each register is one column of a warp's 32 rows: every element becomes that column's max
    want = np.repeat(x.astype(np.float64).reshape(4, 32, 64).max(axis=1), 32, axis=0)
    np.testing.assert_array_equal(out.astype(np.float64), want)


@pytest.mark.parametrize("layout,nw,cls,match", [
    (tlx.layout(shape=((16,), (64,)), stride=((64,), (1,))), 4, ValueError, "4 lane bits"),
    (tlx.layout(shape=((32, 4), (32,)), stride=((64, 2048), (1,))), 4, ValueError, "unheld"),
    (ROW_PER_LANE, 2, TLXCompileError, "spans 4 warps; the code runs on 2"),
    (tlx.swizzled_layout(3, 0, 6), 4, TypeError, "register layout"),
])
def test_a_register_layout_that_does_not_fit_is_refused(layout, nw, cls, match):
    with pytest.raises(cls, match=match):
        tlx.compile(pinned_rows_redux, signature={"x_ptr": "*fp32", "out_ptr": "*fp32"}, constexprs={"LAYOUT": layout},
                    num_warps=nw)


def test_ptx_the_asm_author_got_wrong_is_blamed_on_the_asm_not_the_compiler():
    from tlx.compiler.ptxas import PTXASError

    @tlx.jit
    def wrong(x_ptr):
        x = tl.load(x_ptr + tl.arange(0, 128))
        tl.store(x_ptr + tl.arange(0, 128), tl.inline_asm_elementwise("mov.b16 $0, $1;", "=r,r", [x], dtype=tl.int32,
                                                                       is_pure=True, pack=1))

    with pytest.raises(PTXASError, match=r"PTX of an inline asm .*\n    mov\.b16 %\w+, %\w+;") as e:
        tlx.compile(wrong, signature={"x_ptr": "*i32"})
    assert "compiler bug" not in str(e.value)


# ---- named barriers beside the compiler's own ----------------------------------------------------

@tlx.jit
def named_beside_worker_barrier(x_ptr, out_ptr, USER_ID: tl.constexpr):
    buf = tlx.local_alloc((128,), tl.float32, 1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.named_barrier_arrive(USER_ID, 256)
        with tlx.async_task(num_warps=4):
            v = tlx.local_view(buf, 0)
            tlx.local_store(v, tl.load(x_ptr + tl.arange(0, 128)))
            w = tlx.local_load(v)  # other threads' elements: the worker's own CTA barrier orders it
            tl.store(out_ptr + tl.arange(0, 128), w)
            tlx.named_barrier_wait(USER_ID, 256)


def _bar_syncs(ptx: str):
    return re.findall(r"bar\.(?:sync|arrive) (\d+)(?:, (\d+))?;", ptx)


@pytest.mark.parametrize("user_id", [2, 3, 9])
def test_a_worker_partition_barrier_never_takes_an_id_the_kernel_names(user_id):
    k = tlx.compile(named_beside_worker_barrier, signature={"x_ptr": "*fp32", "out_ptr": "*fp32"},
                    constexprs={"USER_ID": user_id}, num_warps=4)
    syncs = _bar_syncs(k.asm["ptx"])
    worker = {int(i) for i, n in syncs if n == "128"}  # the 4-warp worker's own barrier
    assert worker == {3 if user_id == 2 else 2}
    assert (str(user_id), "256") in syncs  # the user's barrier is left as written
    assert k.asm["cubin"]


@tlx.jit
def named_ids_everywhere(out_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in tl.static_range(2, 16):
                tlx.named_barrier_arrive(i, 256)
        with tlx.async_task(num_warps=4):
            buf = tlx.local_alloc((128,), tl.float32, 1)
            v = tlx.local_view(buf, 0)
            tlx.local_store(v, tl.full((128,), 1.0, tl.float32))
            tl.store(out_ptr + tl.arange(0, 128), tlx.local_load(v))


def test_a_kernel_that_leaves_no_named_barrier_id_for_its_workers_is_refused():
    with pytest.raises(TLXCompileError, match="need 1 named barriers of their own"):
        tlx.compile(named_ids_everywhere, signature={"out_ptr": "*fp32"}, num_warps=4)

"""Bugs the kernel fuzzer (tests/fuzz) found, each as the smallest kernel that showed it: compiled
through ptxas for sm_90a and run on the interpreter against numpy (outputs poisoned first)."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import tlx
import tlx.language as tl
from tlx.compiler.errors import TLXCompileError


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn.fn)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


@tlx.jit
def tma_local_roundtrip(x_desc, y_desc, BR: tl.constexpr, BC: tl.constexpr):
    buf = tlx.local_alloc((BR, BC), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    out = tlx.local_alloc((BR, BC), tl.float16, 1)
    tlx.barrier_expect_bytes(bars[0], BR * BC * 2)
    tlx.async_descriptor_load(x_desc, buf[0], [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    t = tlx.local_load(buf[0])
    tlx.local_store(out[0], t + 1.0)
    tlx.async_descriptor_store(y_desc, out[0], [0, 0])
    tlx.async_descriptor_store_wait(0)


@pytest.mark.parametrize("shape", [(16, 16), (8, 32)])
def test_one_matrix_ldmatrix_and_stmatrix_take_a_vector_operand(shape):
    # fuzz seed 22 (tma family): a 16x16 fp16 tile moves as one 8x8 matrix per warp; PTX wants
    # `ldmatrix.x1 {%r}, [..]`, the code generator wrote `%r`, and ptxas rejected the kernel
    R, C = shape
    sig = {"x_desc": f"tensordesc<fp16[{R}, {C}]>", "y_desc": f"tensordesc<fp16[{R}, {C}]>"}
    k = tlx.compile(tma_local_roundtrip, signature=sig, constexprs={"BR": R, "BC": C})
    assert "cubin" in k.asm
    ptx = k.asm["ptx"]
    assert "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {" in ptx and "stmatrix.sync.aligned.m8n8.x1.shared.b16" in ptx
    x = (np.arange(R * C) % 61 - 30).astype(np.float16).reshape(R, C)
    y = np.full((R, C), np.nan, np.float16)
    tlx.interpret(tma_local_roundtrip, (1,), tlx.TensorDescriptor(x, [R, C], [C, 1], [R, C]),
                  tlx.TensorDescriptor(y, [R, C], [C, 1], [R, C]), BR=R, BC=C)
    np.testing.assert_array_equal(y, x + np.float16(1))


@tlx.jit
def short_tile_roundtrip(x_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    buf = tlx.local_alloc((R, C), tl.float32, 2)
    tlx.local_store(buf[1], tl.load(x_ptr + r[:, None] * C + c[None, :]))
    tl.store(y_ptr + c[:, None] * R + r[None, :], tlx.local_load(tlx.local_trans(buf[1])))


@pytest.mark.parametrize("shape", [(4, 32), (2, 64), (4, 8)])
def test_a_tile_of_fewer_than_8_rows_gets_a_layout_it_can_hold(shape):
    # fuzz seed 1 (smem family): local_alloc picked a 128-byte swizzle for a 4x32 fp32 tile,
    # whose 512 bytes hold no whole swizzle pattern (1024 bytes: 8 rows), and the layouts pass
    # then rejected the kernel's own allocation
    R, C = shape
    k = tlx.compile(short_tile_roundtrip, signature={"x_ptr": "*fp32", "y_ptr": "*fp32"}, constexprs={"R": R, "C": C})
    assert "cubin" in k.asm
    assert "swizzle=0" in k.asm["ir"].split("tlx.local_alloc")[1].splitlines()[0]
    x = np.arange(R * C, dtype=np.float32).reshape(R, C) * 0.5
    y = np.full((C, R), np.nan, np.float32)
    tlx.interpret(short_tile_roundtrip, (1,), x, y, R=R, C=C)
    np.testing.assert_array_equal(y, x.T)


@tlx.jit
def cp_async_masked(x_ptr, y_ptr, n, C: tl.constexpr, ZERO: tl.constexpr):
    r = tl.arange(0, 16)
    c = tl.arange(0, C)
    buf = tlx.local_alloc((16, C), tl.float16, 1)
    tok = tlx.async_load(x_ptr + r[:, None] * C + c[None, :], buf[0], mask=c[None, :] < n, other=ZERO)
    tlx.async_load_commit_group([tok])
    tlx.async_load_wait_group(0)
    tl.store(y_ptr + r[:, None] * C + c[None, :], tlx.local_load(buf[0]))


@pytest.mark.parametrize("zero", [0, 0.0])
def test_cp_async_with_other_zero_compiles_and_fills_zeros(zero):
    # fuzz seed 0 (cp_async family): `other=0` reached the code generator as a splat of a
    # converted constant, which its zero check did not recognize ("fills ... with zeros only")
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32"}
    k = tlx.compile(cp_async_masked, signature=sig, constexprs={"C": 64, "ZERO": zero},
                    divisibility={"x_ptr": 16, "y_ptr": 16, "n": 16})
    assert "cubin" in k.asm and re.search(r"cp\.async\.c[ag]\.shared\.global", k.asm["ptx"])
    x = (np.arange(16 * 64) % 13 + 1).astype(np.float16).reshape(16, 64)
    y = np.full((16, 64), np.nan, np.float16)
    tlx.interpret(cp_async_masked, (1,), x, y, 32, C=64, ZERO=zero)
    want = x.copy()
    want[:, 32:] = 0
    np.testing.assert_array_equal(y, want)


def test_cp_async_with_a_nonzero_other_is_an_error_at_its_line():
    sig = {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32"}
    with pytest.raises(TLXCompileError, match="zeros only") as e:
        tlx.compile(cp_async_masked, signature=sig, constexprs={"C": 64, "ZERO": 1.0})
    assert e.value.lineno == _line_of(cp_async_masked, "tlx.async_load(")


@tlx.jit
def constant_index_past_the_array(x_ptr, NUM: tl.constexpr, IDX: tl.constexpr, BAR: tl.constexpr):
    r = tl.arange(0, 16)
    buf = tlx.local_alloc((16,), tl.float32, NUM)
    bars = tlx.alloc_barriers(num_barriers=NUM, arrive_count=1)
    tlx.local_store(buf[IDX], tl.load(x_ptr + r))
    tlx.barrier_arrive(bars[BAR])


@pytest.mark.parametrize("idx, bar, what", [(2, 0, "buffer index 2 is out of range 0..1"),
                                            (-1, 0, "buffer index -1 is out of range 0..1"),
                                            (0, 2, "mbarrier index 2 is out of range 0..1")])
def test_a_constant_buffer_index_past_the_array_is_a_compile_error(idx, bar, what):
    # fuzz (smem family, index_out_of_range): buf[NUM] compiled, and only the interpreter caught it
    line = _line_of(constant_index_past_the_array, "local_store" if bar == 0 else "barrier_arrive")
    with pytest.raises(TLXCompileError, match=what) as e:
        tlx.compile(constant_index_past_the_array, signature={"x_ptr": "*fp32"},
                    constexprs={"NUM": 2, "IDX": idx, "BAR": bar})
    assert e.value.lineno == line
    k = tlx.compile(constant_index_past_the_array, signature={"x_ptr": "*fp32"},
                    constexprs={"NUM": 2, "IDX": 1, "BAR": 1})
    assert "cubin" in k.asm


@tlx.jit
def carried_value_retyped_then_reassigned(x_ptr, n):
    acc = tl.zeros((64,), dtype=tl.float32)
    for i in range(0, n):
        acc = acc.to(tl.float16)
        acc = acc * 0.5
    tl.store(x_ptr + tl.arange(0, 64), acc)


def test_a_carried_value_that_changes_type_is_reported_where_it_changes():
    # fuzz seed 3042 (control family, carried_type_change): the error named the body's last
    # assignment of `acc` (acc * 0.5, which only keeps the new type), not the .to() that changed it
    with pytest.raises(TLXCompileError, match="changes type in the loop") as e:
        tlx.compile(carried_value_retyped_then_reassigned, signature={"x_ptr": "*fp32", "n": "i32"})
    line = _line_of(carried_value_retyped_then_reassigned, "acc.to(tl.float16)")
    assert e.value.lineno == line and f"at line {line}" in e.value.message
    # the hint in Triton's words too, so a Triton user recognizes the rule
    assert "Please make sure that the type stays consistent" in e.value.hint

"""A buffer view or a barrier chosen by a run-time `if` (`s = slice(buf, top) if rank == 0 else
slice(buf, bottom)`, as the real TLX's hopper_gemm_ws does for its multicast half of B): compiled
with the view's origin in a register (ptxas assembles it), run on the interpreter against numpy,
and a clear error where the branches disagree on the buffer."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tlx
import tlx.language as tl
from tlx import interpret
from tlx.compiler.errors import TLXCompileError


@tlx.jit
def store_into_chosen_half(x_ptr, out_ptr, HALF: tl.constexpr):
    buf = tlx.local_alloc((2 * HALF, 64), tl.float32, 1)
    rows = tl.arange(0, 2 * HALF)[:, None] * 64 + tl.arange(0, 64)[None, :]
    tlx.local_store(buf[0], tl.zeros((2 * HALF, 64), tl.float32))
    pid = tl.program_id(0)
    if pid == 0:
        half = tlx.local_slice(buf[0], [0, 0], [HALF, 64])
    else:
        half = tlx.local_slice(buf[0], [HALF, 0], [HALF, 64])
    hr = tl.arange(0, HALF)[:, None] * 64 + tl.arange(0, 64)[None, :]
    tlx.local_store(half, tl.load(x_ptr + pid * HALF * 64 + hr))
    tl.store(out_ptr + pid * 2 * HALF * 64 + rows, tlx.local_load(buf[0]))


@tlx.jit
def arrive_on_chosen_barrier(out_ptr):
    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    pid = tl.program_id(0)
    if pid == 0:
        bar = tlx.local_view(bars, 0)
    else:
        bar = tlx.local_view(bars, 1)
    tlx.barrier_arrive(bar)
    tlx.barrier_wait(bar, 0)
    tl.store(out_ptr + pid, pid + 1)


@tlx.jit
def choose_between_two_buffers(out_ptr):
    a = tlx.local_alloc((64, 64), tl.float32, 1)
    b = tlx.local_alloc((64, 64), tl.float16, 1)
    if tl.program_id(0) == 0:
        v = a[0]
    else:
        v = b[0]
    tl.store(out_ptr, tlx.local_load(v).to(tl.float32).sum())


def test_a_view_chosen_by_an_if_compiles_with_its_origin_in_a_register():
    k = tlx.compile(store_into_chosen_half, signature={"x_ptr": "*fp32", "out_ptr": "*fp32"},
                    constexprs={"HALF": 32})
    assert isinstance(k.asm.get("cubin"), bytes), "ptxas did not assemble the PTX"
    # each branch moves its slice's offset into the if-result's origin register: 0 and the bottom's
    moves = re.findall(r"mov\.b32\s+(%half_origin\w*),\s*(\d+);", k.asm["ptx"])
    assert len(moves) == 2 and moves[0][0] == moves[1][0], moves
    assert {int(m[1]) == 0 for m in moves} == {True, False}, moves


def test_a_view_chosen_by_an_if_is_stored_through_on_the_interpreter():
    x = np.random.default_rng(0).random((64, 64)).astype(np.float32)
    out = np.full((2, 64, 64), np.nan, np.float32)
    interpret(store_into_chosen_half, (2,), x, out, HALF=32)
    expect = np.zeros((2, 64, 64))
    expect[0, :32] = x[:32]
    expect[1, 32:] = x[32:]
    np.testing.assert_array_equal(out.astype(np.float64), expect)


def test_a_barrier_chosen_by_an_if_compiles_and_runs():
    k = tlx.compile(arrive_on_chosen_barrier, signature={"out_ptr": "*i32"})
    assert isinstance(k.asm.get("cubin"), bytes), "ptxas did not assemble the PTX"
    out = np.full(2, -1, np.int32)
    interpret(arrive_on_chosen_barrier, (2,), out)
    np.testing.assert_array_equal(out, [1, 2])


def test_an_if_choosing_between_different_buffers_is_a_clear_error():
    with pytest.raises(TLXCompileError) as e:
        tlx.compile(choose_between_two_buffers, signature={"out_ptr": "*fp32"})
    assert "internal" not in str(e.value)
    assert e.value.loc is not None and e.value.loc.line > 0

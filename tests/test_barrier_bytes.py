"""BarrierBytes: a barrier_expect_bytes that provably cannot match the bytes that arrive is a
compile error naming both lines; where the sum cannot be proven, the check stays silent. IR text
in; the IR passes through unchanged (FileCheck) or the error says what and where."""

import textwrap

import numpy as np
import pytest

import tlx
import tlx.language as tl
from fence_ir import module, run
from filecheck import filecheck
from tlx.compiler.errors import TLXCompileError

ONLY = ("barrier_bytes",)
ARGS = "%d: !tensordesc<64x64xf16>, %p: !ptr<i8>, %cond: i1"  # a 64x64 fp16 box: 8192 bytes
HEAD = """
    %c0 = arith.constant {value = 0} : i32 loc(#f0:2:0)
    %c1 = arith.constant {value = 1} : i32 loc(#f0:2:0)
    %c4 = arith.constant {value = 4} : i32 loc(#f0:2:0)
    %buf = tlx.local_alloc : !smem<2x64x64xf16, buffers=2, mutable> loc(#f0:3:0)
    %s0 = tlx.memdesc_index %buf, %c0 : !smem<64x64xf16, alloc=2x64x64, mutable> loc(#f0:4:0)
    %s1 = tlx.memdesc_index %buf, %c1 : !smem<64x64xf16, alloc=2x64x64, mutable> loc(#f0:4:0)
    %bars = tlx.alloc_barriers {num = 2, arrive_count = 1} : !mbarriers<2> loc(#f0:5:0)
    %b0 = tlx.memdesc_index %bars, %c0 : !mbarrier loc(#f0:6:0)
    %b1 = tlx.memdesc_index %bars, %c1 : !mbarrier loc(#f0:6:0)"""


def ir(body: str) -> str:
    return module(HEAD + textwrap.indent(textwrap.dedent(body), "    "), ARGS)


def passes(body: str, checks: str = "CHECK: tlx.barrier_expect_bytes") -> None:
    text, _ = run(ir(body), ONLY)
    filecheck(text, checks)


def error(body: str) -> str:
    with pytest.raises(TLXCompileError) as e:
        run(ir(body), ONLY)
    return str(e.value)


def test_twice_the_box_bytes_before_the_wait_is_an_error_naming_both_lines():
    msg = error("""
    tlx.barrier_expect_bytes %b0 {bytes = 16384} loc(#f0:10:4)
    tlx.tma_load %d, %s0, %b0 offsets(%c0, %c0) loc(#f0:11:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)""")
    assert msg.startswith("kernel.py:10:5: error: barrier_expect_bytes: 16384 bytes expected on this mbarrier "
                          "before the barrier_wait at line 12, but the loads that complete on it deliver 8192 "
                          "bytes: 8192 (tma_load at line 11)"), msg
    assert "never completes" in msg


def test_an_expect_without_any_arrival_is_an_error():
    msg = error("""
    tlx.barrier_expect_bytes %b0 {bytes = 8192} loc(#f0:10:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)""")
    assert "8192 bytes expected on this mbarrier before the barrier_wait at line 12, but no load completes on it" in msg


def test_expecting_less_than_arrives_is_an_error_too():
    msg = error("""
    tlx.barrier_expect_bytes %b0 {bytes = 4096} loc(#f0:10:4)
    tlx.tma_load %d, %s0, %b0 offsets(%c0, %c0) loc(#f0:11:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)""")
    assert "4096 bytes expected" in msg and "still landing" in msg


def test_matching_counts_pass_also_split_over_several_expects_and_loads():
    passes("""
    tlx.barrier_expect_bytes %b0 {bytes = 8192} loc(#f0:10:4)
    tlx.tma_load %d, %s0, %b0 offsets(%c0, %c0) loc(#f0:11:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)
    tlx.barrier_expect_bytes %b0 {bytes = 8192} loc(#f0:13:4)
    tlx.barrier_expect_bytes %b0 {bytes = 8192} loc(#f0:13:4)
    tlx.tma_load %d, %s0, %b0 offsets(%c0, %c0) loc(#f0:14:4)
    tlx.tma_load %d, %s1, %b0 offsets(%c0, %c0) loc(#f0:14:4)
    tlx.barrier_wait %b0, %c1 loc(#f0:15:4)""", """
    CHECK: tlx.barrier_expect_bytes %b0 {bytes = 8192}
    CHECK: tlx.barrier_wait %b0, %c0
    CHECK-COUNT-2: tlx.barrier_expect_bytes %b0 {bytes = 8192}
    CHECK: tlx.barrier_wait %b0, %c1""")


def test_phases_are_split_by_the_waits_and_other_barriers_do_not_count():
    # the second phase of b0 lacks a load; b1's load (a provably other barrier) is not counted
    msg = error("""
    tlx.barrier_expect_bytes %b0 {bytes = 8192} loc(#f0:10:4)
    tlx.tma_load %d, %s0, %b0 offsets(%c0, %c0) loc(#f0:11:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)
    tlx.barrier_expect_bytes %b0 {bytes = 8192} loc(#f0:20:4)
    tlx.barrier_expect_bytes %b1 {bytes = 8192} loc(#f0:21:4)
    tlx.tma_load %d, %s1, %b1 offsets(%c0, %c0) loc(#f0:22:4)
    tlx.barrier_wait %b1, %c0 loc(#f0:23:4)
    tlx.barrier_wait %b0, %c1 loc(#f0:24:4)""")
    assert msg.startswith("kernel.py:20:5:") and "before the barrier_wait at line 24, but no load" in msg


def test_a_bulk_copy_delivers_its_size():
    passes("""
    tlx.barrier_expect_bytes %b0 {bytes = 4096} loc(#f0:10:4)
    tlx.async_bulk_load %p, %s0, %b0 {size = 4096} loc(#f0:11:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)""")
    assert "1024 bytes expected" in error("""
    tlx.barrier_expect_bytes %b0 {bytes = 1024} loc(#f0:10:4)
    tlx.async_bulk_load %p, %s0, %b0 {size = 4096} loc(#f0:11:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)""")


LOOP = """
scf.for %c0, %c4, %c1 {{
^body(%i: i32):
  %j = arith.remsi %i, %c4 : i32 loc(#f0:8:4)
  %b = tlx.memdesc_index %bars, %j : !mbarrier loc(#f0:9:4)
  %j2 = arith.remsi %i, %c4 : i32 loc(#f0:8:4)
  %bb = tlx.memdesc_index %bars, %j2 : !mbarrier loc(#f0:9:4)
  {body}
  scf.yield loc(#f0:7:0)
}} loc(#f0:7:0)"""


def test_a_loop_body_is_checked_with_the_same_barrier_named_twice():
    # %b and %bb are both bars[i % 4]: the same index value, so the same barrier
    msg = error(LOOP.format(body="""tlx.barrier_expect_bytes %b {bytes = 16384} loc(#f0:10:4)
  tlx.tma_load %d, %s0, %bb offsets(%c0, %c0) loc(#f0:11:4)
  tlx.barrier_wait %bb, %c0 loc(#f0:12:4)"""))
    assert msg.startswith("kernel.py:10:5:") and "before the barrier_wait at line 12" in msg
    # a producer loop that never waits: each iteration is a whole phase's worth
    msg = error(LOOP.format(body="""tlx.barrier_expect_bytes %b {bytes = 16384} loc(#f0:10:4)
  tlx.tma_load %d, %s0, %b offsets(%c0, %c0) loc(#f0:11:4)"""))
    assert "before the end of the loop body" in msg
    passes(LOOP.format(body="""tlx.barrier_expect_bytes %b {bytes = 8192} loc(#f0:10:4)
  tlx.tma_load %d, %s0, %b offsets(%c0, %c0) loc(#f0:11:4)
  tlx.barrier_wait %b, %c0 loc(#f0:12:4)"""))


@pytest.mark.parametrize("body", [
    # a load on bars[i] next to an expect on bars[0]: maybe the same barrier
    LOOP.format(body="""tlx.barrier_expect_bytes %b0 {bytes = 16384} loc(#f0:10:4)
  tlx.tma_load %d, %s0, %b offsets(%c0, %c0) loc(#f0:11:4)
  tlx.barrier_wait %b0, %c0 loc(#f0:12:4)"""),
    # a predicated load may not happen
    """tlx.barrier_expect_bytes %b0 {bytes = 16384} loc(#f0:10:4)
    tlx.tma_load %d, %s0, %b0 offsets(%c0, %c0) pred(%cond) loc(#f0:11:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)""",
    # a load under an if
    """tlx.barrier_expect_bytes %b0 {bytes = 16384} loc(#f0:10:4)
    scf.if %cond {
    ^then:
      tlx.tma_load %d, %s0, %b0 offsets(%c0, %c0) loc(#f0:11:4)
      scf.yield
    }
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)""",
    # the expect is in a branch that ends before the phase does
    """scf.if %cond {
    ^then:
      tlx.barrier_expect_bytes %b0 {bytes = 16384} loc(#f0:10:4)
      scf.yield
    }
    tlx.tma_load %d, %s0, %b0 offsets(%c0, %c0) loc(#f0:11:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)""",
    # a load on a barrier an `if` chose: it may be b0
    """%v = scf.if %cond : !mbarrier {
    ^then:
      scf.yield %b0
    } {
    ^else:
      scf.yield %b1
    }
    tlx.barrier_expect_bytes %b0 {bytes = 16384} loc(#f0:10:4)
    tlx.tma_load %d, %s0, %v offsets(%c0, %c0) loc(#f0:11:4)
    tlx.tma_load %d, %s1, %b0 offsets(%c0, %c0) loc(#f0:11:4)
    tlx.barrier_wait %b0, %c0 loc(#f0:12:4)""",
    # a loop that loads onto the array before it (a prologue): the iterations are not whole phases
    "tlx.tma_load %d, %s1, %b1 offsets(%c0, %c0) loc(#f0:6:4)\n" + LOOP.format(
        body="""tlx.barrier_expect_bytes %b {bytes = 8192} loc(#f0:10:4)"""),
])
def test_what_cannot_be_proven_stays_silent(body):
    passes(body, "CHECK: tlx.barrier_expect_bytes")


def test_a_producer_partition_is_checked_to_its_end():
    body = """
    tlx.warp_specialize %d, %bars, %buf {partition_num_warps = [1]} {
    ^default:
      tlx.ws_yield
    } {
    ^partition0(%pd: !tensordesc<64x64xf16>, %pbars: !mbarriers<2>, %pbuf: !smem<2x64x64xf16, buffers=2, mutable>):
      %z = arith.constant {value = 0} : i32 loc(#f0:30:4)
      %pb = tlx.memdesc_index %pbars, %z : !mbarrier loc(#f0:31:4)
      %ps = tlx.memdesc_index %pbuf, %z : !smem<64x64xf16, alloc=2x64x64, mutable> loc(#f0:32:4)
      tlx.barrier_expect_bytes %pb {bytes = @N@} loc(#f0:33:4)
      tlx.tma_load %pd, %ps, %pb offsets(%z, %z) loc(#f0:34:4)
      tlx.ws_return
    }
    tlx.barrier_wait %b0, %c0 loc(#f0:40:4)"""
    passes(body.replace("@N@", "8192"))
    msg = error(body.replace("@N@", "24576"))
    assert msg.startswith("kernel.py:33:5:") and "before the end of the partition" in msg and "(tma_load at line 34)" in msg


@tlx.jit
def _double_expect(desc, out_ptr, BLOCK: tl.constexpr, EXTRA: tl.constexpr):
    buf = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1)
    bars = tlx.alloc_barriers(1)
    bar = tlx.local_view(bars, 0)
    tlx.barrier_expect_bytes(bar, EXTRA * BLOCK * BLOCK * 2)  # EXTRA=2: twice the box
    tlx.async_descriptor_load(desc, tlx.local_view(buf, 0), [0, 0], bar)
    tlx.barrier_wait(bar, 0)
    x = tlx.local_load(tlx.local_view(buf, 0))
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], x)


def test_a_kernel_that_would_hang_the_gpu_does_not_compile():
    x = np.zeros((64, 64), np.float16)
    desc = tlx.TensorDescriptor.from_tensor(x, [64, 64])
    assert "cp.async.bulk.tensor" in _double_expect.warmup(desc, x, BLOCK=64, EXTRA=1, grid=(1,)).asm["ptx"]
    with pytest.raises(TLXCompileError) as e:
        _double_expect.warmup(desc, x, BLOCK=64, EXTRA=2, grid=(1,))
    line = _double_expect.fn.__code__.co_firstlineno + 5
    assert e.value.filename == __file__ and e.value.lineno == line
    assert f"before the barrier_wait at line {line + 2}" in str(e.value) and f"(tma_load at line {line + 1})" in str(e.value)

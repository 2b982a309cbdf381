"""Shared-memory allocation: offsets from liveness with reuse, alignment, scratch, the 227 KB limit."""

import re

import pytest

from fence_ir import T16, module, run
from tlx.compiler.errors import TLXCompileError

ALLOC = ("smem_allocation",)
NV128 = "#nvmma<swizzle=128, bits=16, transposed=false>"


def offsets(text):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"%(\w+) = tlx\.(?:local_alloc|alloc_barriers)[^{]*\{[^}]*offset = (\d+)", text)}


def test_disjoint_lifetimes_share_bytes_overlapping_ones_do_not():
    text, res = run(module(f"""
    %x = tlx.local_alloc src(%t) : !smem<128x128xf16>
    %vx = tlx.local_load %x : {T16}
    %y = tlx.local_alloc src(%t) : !smem<128x128xf16>
    %z = tlx.local_alloc src(%t) : !smem<128x128xf16>
    %vy = tlx.local_load %y : {T16}
    %vz = tlx.local_load %z : {T16}""", f"%t: {T16}"), ALLOC)
    off = offsets(text)
    assert off["x"] == off["y"] or off["x"] == off["z"]  # x is dead before y and z are born
    assert off["y"] != off["z"]
    assert res.module.attrs["shared_bytes"] == 2 * 32768 == res.resources["shared_bytes"]


def test_a_view_nothing_uses_does_not_keep_its_buffer_alive_one_that_is_used_does():
    # x's last access is its local_load; a view of x made after y is born, that nothing reads, is
    # no use: y may take x's bytes. When the view is read, x lives until then.
    body = f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc : !smem<1x128x128xf16, buffers=1, mutable>
    %v0 = tlx.memdesc_index %x, %c0 : !smem<128x128xf16, alloc=1x128x128, mutable>
    tlx.local_store %v0, %t
    %r = tlx.local_load %v0 : {T16}
    %y = tlx.local_alloc src(%t) : !smem<128x128xf16>
    %v1 = tlx.memdesc_index %x, %c0 : !smem<128x128xf16, alloc=1x128x128, mutable>
    %ry = tlx.local_load %y : {T16}
    READ"""
    text, _ = run(module(body.replace("READ", ""), f"%t: {T16}"), ALLOC)
    off = offsets(text)
    assert off["x"] == off["y"]
    text, _ = run(module(body.replace("READ", f"%r1 = tlx.local_load %v1 : {T16}"), f"%t: {T16}"), ALLOC)
    off = offsets(text)
    assert off["x"] != off["y"]


def test_alignment_follows_the_swizzle_and_mbarriers_take_8_bytes():
    text, _ = run(module("""
    %bars = tlx.alloc_barriers {num = 1, arrive_count = 1} : !mbarriers<1>
    %a = tlx.local_alloc : !smem<8x64xf16, #nvmma<swizzle=128, bits=16, transposed=false>, mutable>
    %b = tlx.local_alloc : !smem<8x32xf16, #nvmma<swizzle=64, bits=16, transposed=false>, mutable>
    %c = tlx.local_alloc : !smem<8x16xf16, #nvmma<swizzle=32, bits=16, transposed=false>, mutable>
    %d = tlx.local_alloc : !smem<24xf32, mutable>
    %bars2 = tlx.alloc_barriers {num = 3, arrive_count = 1} : !mbarriers<3>
    %c0 = arith.constant {value = 0} : i32
    %b0 = tlx.memdesc_index %bars, %c0 : !mbarrier
    %b1 = tlx.memdesc_index %bars2, %c0 : !mbarrier
    tlx.barrier_wait %b0, %c0
    tlx.barrier_wait %b1, %c0
    %va = tlx.local_load %a : tensor<8x64xf16>
    %vb = tlx.local_load %b : tensor<8x32xf16>
    %vc = tlx.local_load %c : tensor<8x16xf16>
    %vd = tlx.local_load %d : tensor<24xf32>"""), ALLOC)
    off = offsets(text)
    assert off["a"] % 1024 == 0 and off["b"] % 512 == 0 and off["c"] % 256 == 0 and off["d"] % 16 == 0
    assert off["bars"] % 8 == 0 and off["bars2"] % 8 == 0
    spans = sorted([(off["a"], 1024), (off["b"], 512), (off["c"], 256), (off["d"], 96), (off["bars"], 8),
                    (off["bars2"], 24)])
    assert all(a + n <= b for (a, n), (b, _) in zip(spans, spans[1:]))  # all live at once: no overlap


def test_scratch_offsets_and_a_use_in_a_loop_keeps_the_buffer_alive_for_the_whole_loop():
    text, _ = run(module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %x = tlx.local_alloc src(%t) : !smem<128x128xf16>
    scf.for %c0, %n, %c1 {{
    ^body(%i: i32):
      %v = tlx.local_load %x : {T16}
      %cv = tt.convert_layout %v {{scratch_bytes = 32768}} : {T16}
      scf.yield
    }}""", f"%t: {T16}, %n: i32"), ALLOC)
    assert "scratch_offset = 32768" in text and "offset = 0" in text


def test_async_store_source_lives_until_its_store_wait():
    text, _ = run(module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc src(%t) : !smem<128x128xf16>
    tlx.tma_store %d, %x offsets(%c0, %c0)
    %y = tlx.local_alloc src(%t) : !smem<128x128xf16>
    tlx.tma_store_wait {{pendings = 0}}
    %z = tlx.local_alloc src(%t) : !smem<128x128xf16>""", f"%t: {T16}, %d: !tensordesc<128x128xf16>"), ALLOC)
    off = offsets(text)
    assert off["x"] != off["y"]  # the TMA store may still read x while y is written
    assert off["z"] in (off["x"], off["y"])  # after the wait, x's bytes are free


def test_buffers_of_concurrent_partitions_never_share_bytes():
    text, _ = run(module(f"""
    tlx.warp_specialize %t {{partition_num_warps = [4]}} {{
    ^default:
      %a = tlx.local_alloc src(%t) : !smem<128x128xf16>
      %va = tlx.local_load %a : {T16}
      tlx.ws_yield
    }} {{
    ^partition0(%pt: {T16}):
      %b = tlx.local_alloc src(%pt) : !smem<128x128xf16>
      %vb = tlx.local_load %b : {T16}
      tlx.ws_return
    }}""", f"%t: {T16}"), ALLOC)
    off = offsets(text)
    assert off["a"] != off["b"]


def test_buffers_of_one_partition_reuse_bytes_in_its_program_order_apart_from_the_other_partitions():
    """Two epilogue staging buffers made one after the other in each of two partitions: within a
    partition the second takes the first's bytes once the first is dead (the persistent ping-pong
    GEMM's two TMA-store subtiles per consumer); across partitions, never."""
    text, res = run(module(f"""
    tlx.warp_specialize %t {{partition_num_warps = [4, 4]}} {{
    ^default:
      tlx.ws_yield
    }} {{
    ^partition0(%p0: {T16}):
      %a0 = tlx.local_alloc src(%p0) : !smem<128x128xf16>
      %va0 = tlx.local_load %a0 : {T16}
      %a1 = tlx.local_alloc src(%p0) : !smem<128x128xf16>
      %va1 = tlx.local_load %a1 : {T16}
      tlx.ws_return
    }} {{
    ^partition1(%p1: {T16}):
      %b0 = tlx.local_alloc src(%p1) : !smem<128x128xf16>
      %vb0 = tlx.local_load %b0 : {T16}
      %b1 = tlx.local_alloc src(%p1) : !smem<128x128xf16>
      %vb1 = tlx.local_load %b1 : {T16}
      tlx.ws_return
    }}""", f"%t: {T16}"), ALLOC)
    off = offsets(text)
    assert off["a0"] == off["a1"] and off["b0"] == off["b1"]
    assert off["a0"] != off["b0"]
    assert res.module.attrs["shared_bytes"] == 2 * 32768


def test_over_the_sm90_limit_lists_the_buffers():
    ir = module("""
    %a = tlx.local_alloc : !smem<4x128x128xf16, buffers=4, mutable> loc(#f0:7:4)
    %b = tlx.local_alloc : !smem<4x128x128xf16, buffers=4, mutable> loc(#f0:8:4)
    %c0 = arith.constant {value = 0} : i32
    %va = tlx.memdesc_index %a, %c0 : !smem<128x128xf16, alloc=4x128x128, mutable>
    %vb = tlx.memdesc_index %b, %c0 : !smem<128x128xf16, alloc=4x128x128, mutable>
    %x = tlx.local_load %va : tensor<128x128xf16>
    %y = tlx.local_load %vb : tensor<128x128xf16>""")
    with pytest.raises(TLXCompileError) as ei:
        run(ir, ALLOC)
    msg = str(ei.value)
    assert "196608 bytes" not in msg and "262144 bytes of shared memory, more than the 232448 bytes (227 KB)" in msg
    assert "tlx.local_alloc at kernel.py:7 (4x128x128xf16): 131072 bytes" in msg
    assert "tlx.local_alloc at kernel.py:8 (4x128x128xf16): 131072 bytes" in msg
    assert ei.value.loc.line == 7
    # fits on sm_90 once one of them is smaller
    smaller = ir.replace("!smem<4x128x128xf16, buffers=4, mutable> loc(#f0:7:4)",
                         "!smem<3x128x128xf16, buffers=3, mutable> loc(#f0:7:4)").replace(
        "%va = tlx.memdesc_index %a, %c0 : !smem<128x128xf16, alloc=4x128x128", "%va = tlx.memdesc_index %a, %c0 : "
        "!smem<128x128xf16, alloc=3x128x128")
    _, res = run(smaller, ALLOC)
    assert res.resources["shared_bytes"] == 98304 + 131072


def test_a_buffer_allocated_in_a_loop_and_carried_to_the_next_iteration_is_an_error():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %x0 = tlx.local_alloc src(%t) : !smem<128x128xf16>
    %r = scf.for %c0, %n, %c1 inits(%x0) : !smem<128x128xf16> {{
    ^body(%i: i32, %prev: !smem<128x128xf16>):
      %v = tlx.local_load %prev : {T16}
      %x = tlx.local_alloc src(%v) : !smem<128x128xf16> loc(#f0:12:6)
      scf.yield %x
    }}""", f"%t: {T16}, %n: i32")
    with pytest.raises(TLXCompileError, match="carried into the next iteration"):
        run(ir, ALLOC)

"""The layout pass: IR text in, IR text out (FileCheck), one rule per test."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from filecheck import filecheck  # noqa: E402
from tlx.compiler.errors import TLXCompileError  # noqa: E402
from tlx.compiler.ir import parse_module, print_module, verify_module  # noqa: E402
from tlx.compiler.passes import layouts  # noqa: E402


def run(body: str, args: str = "", nw: int = 4, divs=None) -> str:
    d = f", divisibility = {divs}" if divs else ""
    text = (f'module attributes {{num_warps = {nw}, target = "sm_90a"}} {{\n  tt.func @k({args}) '
            f'attributes {{arg_names = []{d}}} {{\n{body}\n    tt.return\n  }}\n}}\n')
    m = parse_module(text)
    verify_module(m)
    layouts.run(m)
    verify_module(m)
    return print_module(m, locs=False)


VADD = """
    %r = tt.make_range {start = 0, end = 1024} : tensor<1024xi32>
    %xp = tt.splat %x : tensor<1024x!ptr<f32>>
    %p = tt.addptr %xp, %r : tensor<1024x!ptr<f32>>
    %v = tt.load %p : tensor<1024xf32>
    %w = arith.addf %v, %v : tensor<1024xf32>
    tt.store %p, %w
"""


def test_aligned_contiguous_loads_get_16_byte_vectors():
    out = run(VADD, "%x: !ptr<f32>", divs="[16]")
    filecheck(out, """
    CHECK: tt.make_range {{.*}} #blocked<spt=[4], tpw=[32], wpc=[4], order=[0]>
    CHECK: tt.load {{.*}} #blocked<spt=[4], tpw=[32], wpc=[4], order=[0]>
    CHECK: arith.addf {{.*}} #blocked<spt=[4]
    CHECK-NOT: tt.convert_layout
    CHECK: tt.store
    """)


def test_unaligned_base_gets_one_element_per_access():
    out = run(VADD, "%x: !ptr<f32>", divs="[1]")
    filecheck(out, "CHECK: tt.load {{.*}} #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>")


def test_hints_give_alignment():
    body = VADD.replace("%p = tt.addptr %xp, %r : tensor<1024x!ptr<f32>>",
                        "%p0 = tt.addptr %xp, %r : tensor<1024x!ptr<f32>>\n"
                        "    %p = tt.hint %p0 {divisibility = [16], contiguity = [1024]} : tensor<1024x!ptr<f32>>")
    out = run(body, "%x: !ptr<f32>", divs="[1]")
    filecheck(out, "CHECK: tt.load {{.*}} #blocked<spt=[4]")


def test_2d_tiles_vectorize_along_the_contiguous_dim_and_fill_lanes_there_first():
    body = """
    %r = tt.make_range {start = 0, end = 128} : tensor<128xi32>
    %c = tt.make_range {start = 0, end = 64} : tensor<64xi32>
    %re = tt.expand_dims %r {axis = 1} : tensor<128x1xi32>
    %s = tt.splat %st : tensor<128x1xi32>
    %rs = arith.muli %re, %s : tensor<128x1xi32>
    %ce = tt.expand_dims %c {axis = 0} : tensor<1x64xi32>
    %rb = tt.broadcast %rs : tensor<128x64xi32>
    %cb = tt.broadcast %ce : tensor<128x64xi32>
    %o = arith.addi %rb, %cb : tensor<128x64xi32>
    %xp = tt.splat %x : tensor<128x64x!ptr<f16>>
    %p = tt.addptr %xp, %o : tensor<128x64x!ptr<f16>>
    %v = tt.load %p : tensor<128x64xf16>
    tt.store %p, %v
"""
    out = run(body, "%x: !ptr<f16>, %st: i32", nw=8, divs="[16, 16]")
    filecheck(out, """
    CHECK: tt.make_range {{.*}} tensor<128xi32, #slice<dim=1, parent=#blocked<spt=[1,8], tpw=[4,8], wpc=[8,1], order=[1,0]>>>
    CHECK: tt.make_range {{.*}} tensor<64xi32, #slice<dim=0, parent=#blocked<spt=[1,8], tpw=[4,8], wpc=[8,1], order=[1,0]>>>
    CHECK: tt.load {{.*}} #blocked<spt=[1,8], tpw=[4,8], wpc=[8,1], order=[1,0]>
    CHECK-NOT: tt.convert_layout
    """)


DOT = """
    %a = tlx.local_alloc : !smem<128x64xf16, mutable>
    %b = tlx.local_alloc : !smem<64x256xf16, mutable>
    %d = tlx.async_dot %a, %b : tensor<128x256xf32>
    %w = tlx.async_dot_wait %d {pendings = 0} : tensor<128x256xf32>
    %h = arith.truncf %w : tensor<128x256xf16>
    %r = tt.make_range {start = 0, end = 256} : tensor<256xi32>
    %re = tt.expand_dims %r {axis = 0} : tensor<1x256xi32>
    %rb = tt.broadcast %re : tensor<128x256xi32>
    %xp = tt.splat %x : tensor<128x256x!ptr<f16>>
    %p = tt.addptr %xp, %rb : tensor<128x256x!ptr<f16>>
    tt.store %p, %h
"""


def test_wgmma_accumulator_layout_and_nvmma_operands():
    out = run(DOT, "%x: !ptr<f16>", nw=8, divs="[16]")
    filecheck(out, """
    CHECK: tlx.local_alloc : !smem<128x64xf16, #nvmma<swizzle=128, bits=16, transposed=false>, mutable>
    CHECK: tlx.local_alloc : !smem<64x256xf16, #nvmma<swizzle=128, bits=16, transposed=false>, mutable>
    CHECK: tlx.async_dot {{.*}} #mma<version=3, wpc=[8,1], instr=[16,256,16]>
    CHECK: tlx.async_dot_wait {{.*}} #mma<version=3, wpc=[8,1], instr=[16,256,16]>
    CHECK: arith.truncf {{.*}} tensor<128x256xf16, #mma<
    CHECK: tt.convert_layout {{.*}}scratch_bytes = 65536{{.*}} tensor<128x256xf16, #blocked<
    CHECK: tt.store
    """)


def test_wgmma_over_two_warpgroups_splits_n_when_m_is_one_tile():
    out = run(DOT.replace("128x64", "64x64").replace("128x256", "64x256"), "%x: !ptr<f16>", nw=8, divs="[16]")
    filecheck(out, "CHECK: tlx.async_dot {{.*}} #mma<version=3, wpc=[4,2], instr=[16,128,16]>")


def test_register_a_operand_gets_the_dot_operand_layout():
    body = """
    %b = tlx.local_alloc : !smem<64x128xf16, mutable>
    %a0 = tlx.local_alloc : !smem<64x64xf16, mutable>
    %q = tlx.async_dot %a0, %b : tensor<64x128xf32>
    %qw = tlx.async_dot_wait %q {pendings = 0} : tensor<64x128xf32>
    %p = arith.truncf %qw : tensor<64x128xf16>
    %v = tlx.local_alloc : !smem<128x64xf16, mutable>
    %o = tlx.async_dot %p, %v : tensor<64x64xf32>
    %ow = tlx.async_dot_wait %o {pendings = 0} : tensor<64x64xf32>
"""
    out = run(body)
    filecheck(out, """
    CHECK: arith.truncf {{.*}} #mma<version=3, wpc=[4,1], instr=[16,128,16]>
    CHECK: tt.convert_layout {{.*}} #dotop<idx=0, parent=#mma<version=3, wpc=[4,1], instr=[16,64,16]>, kwidth=2>
    CHECK-NOT: scratch_bytes
    CHECK: tlx.async_dot %
    """)


def test_reductions_use_slice_layouts_and_scratch_only_across_warps():
    body = """
    %c = tt.make_range {start = 0, end = 128} : tensor<128xi32>
    %ce = tt.expand_dims %c {axis = 0} : tensor<1x128xi32>
    %cb = tt.broadcast %ce : tensor<64x128xi32>
    %xs = tt.splat %x : tensor<64x128x!ptr<f32>>
    %xp = tt.addptr %xs, %cb : tensor<64x128x!ptr<f32>>
    %v = tt.load %xp : tensor<64x128xf32>
    %s1 = tt.reduce %v {axis = 1, kind = "sum"} : tensor<64xf32>
    %s0 = tt.reduce %v {axis = 0, kind = "max"} : tensor<128xf32>
"""
    out = run(body, "%x: !ptr<f32>", nw=8, divs="[16]")
    filecheck(out, """
    CHECK: tt.load {{.*}} : tensor<64x128xf32, #blocked<spt=[1,4], tpw=[1,32], wpc=[8,1], order=[1,0]>>
    CHECK: tt.reduce {{.*}}kind = "sum"} : tensor<64xf32, #slice<dim=1, parent=#blocked<spt=[1,4], tpw=[1,32], wpc=[8,1], order=[1,0]>>>
    CHECK: tt.reduce {{.*}}kind = "max", scratch_bytes = 4096{{.*}} : tensor<128xf32, #slice<dim=0, parent=#blocked<spt=[1,4], tpw=[1,32], wpc=[8,1], order=[1,0]>>>
    """)


def test_cheap_producers_are_rematerialized_not_converted():
    """One range feeds two layouts: the range is cloned, no conversion through shared memory."""
    body = """
    %k = tt.make_range {start = 0, end = 64} : tensor<64xi32>
    %a = tt.expand_dims %k {axis = 0} : tensor<1x64xi32>
    %ab = tt.broadcast %a : tensor<128x64xi32>
    %b = tt.expand_dims %k {axis = 1} : tensor<64x1xi32>
    %bb = tt.broadcast %b : tensor<64x256xi32>
    %pa = tt.splat %x : tensor<128x64x!ptr<f16>>
    %qa = tt.addptr %pa, %ab : tensor<128x64x!ptr<f16>>
    %va = tt.load %qa : tensor<128x64xf16>
    %pb = tt.splat %x : tensor<64x256x!ptr<f16>>
    %qb = tt.addptr %pb, %bb : tensor<64x256x!ptr<f16>>
    %vb = tt.load %qb : tensor<64x256xf16>
"""
    out = run(body, "%x: !ptr<f16>", nw=8, divs="[16]")
    assert out.count("tt.make_range") == 2
    assert "tt.convert_layout" not in out


def test_transposed_view_flips_the_nvmma_layout():
    body = """
    %k = tlx.local_alloc : !smem<128x64xf16, mutable>
    %kt = tlx.memdesc_trans %k {order = [1, 0]} : !smem<64x128xf16, mutable>
"""
    filecheck(run(body), """
    CHECK: tlx.local_alloc : !smem<128x64xf16, #nvmma<swizzle=128, bits=16, transposed=false>
    CHECK: tlx.memdesc_trans {{.*}} !smem<64x128xf16, #nvmma<swizzle=128, bits=16, transposed=true>
    """)


@pytest.mark.parametrize("shape,swizzle", [("2x64x64xf16", 128), ("64x32xf16", 64), ("64x16xf16", 32),
                                            ("64x8xf16", 0), ("4x64xf16", 0), ("256xf32", None)])
def test_allocation_swizzles(shape, swizzle):
    out = run(f"    %a = tlx.local_alloc : !smem<{shape}{', buffers=2' if shape.startswith('2x') else ''}, mutable>")
    if swizzle is None:
        assert "#swizzled<vec=1, per_phase=1, max_phase=1, order=[0]>" in out
    else:
        assert f"#nvmma<swizzle={swizzle}," in out


def test_a_swizzle_the_buffer_cannot_hold_is_an_error():
    with pytest.raises(TLXCompileError, match="swizzle"):
        run("    %a = tlx.local_alloc : !smem<4x64xf16, #nvmma<swizzle=128, bits=16, transposed=false>, mutable>")


def test_async_dot_needs_whole_warpgroups():
    body = """
    %a = tlx.local_alloc : !smem<64x64xf16, mutable>
    %d = tlx.async_dot %a, %a : tensor<64x64xf32>
"""
    with pytest.raises(TLXCompileError, match="whole warpgroups"):
        run(body, nw=2)


def test_loop_carried_values_share_one_layout():
    body = """
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    %z = arith.constant {value = 0.0} : tensor<64x64xf32>
    %a = tlx.local_alloc : !smem<64x64xf16, mutable>
    %r = scf.for %c0, %n, %c1 inits(%z) : tensor<64x64xf32> {
    ^body(%i: i32, %acc: tensor<64x64xf32>):
      %d = tlx.async_dot %a, %a acc(%acc) : tensor<64x64xf32>
      %w = tlx.async_dot_wait %d {pendings = 1} : tensor<64x64xf32>
      scf.yield %w
    }
    %f = tlx.async_dot_wait %r {pendings = 0} : tensor<64x64xf32>
"""
    out = run(body, "%n: i32")
    filecheck(out, """
    CHECK: arith.constant {value = 0.0} : tensor<64x64xf32, #mma<[[M:.*]]>>
    CHECK: scf.for {{.*}} : tensor<64x64xf32, #mma<[[M]]>>
    CHECK: ^body(%i: i32, %acc: tensor<64x64xf32, #mma<[[M]]>>)
    CHECK-NOT: tt.convert_layout
    CHECK: tlx.async_dot_wait %r
    """)

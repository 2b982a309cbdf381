"""`tt.dot` for every tile shape: which instruction LowerDot picks (wgmma or mma.sync, as Triton's
AccelerateMatmul on Hopper), how wgmma operands are staged (once: read in place, hoisted out of
loops, shared between dots), and the layouts the layout pass gives an mma.sync dot. IR text in,
IR text out, FileCheck-style."""

from __future__ import annotations

import pytest

from fence_ir import check, module, run
from tlx.compiler.ir.ops import get_opdef

FENCE = "tlx.fence_async_shared"


def dot_ir(m: int, n: int, k: int, t: str = "f16", acc: str = "f32", attrs: str = "", num_warps: int = 4,
           bt: str = "") -> str:
    """One `tt.dot` of register operands (function arguments) with a zero accumulator."""
    bt = bt or t
    return module(f"""
    %a = tt.load %ap : tensor<{m}x{k}x{t}>
    %b = tt.load %bp : tensor<{k}x{n}x{bt}>
    %z = arith.constant {{value = 0}} : tensor<{m}x{n}x{acc}>
    %d = tt.dot %a, %b, %z {attrs} : tensor<{m}x{n}x{acc}> loc(#f0:7:8)
    tt.store %c, %d""", f"%ap: tensor<{m}x{k}x!ptr<{t}>>, %bp: tensor<{k}x{n}x!ptr<{bt}>>, "
                        f"%c: tensor<{m}x{n}x!ptr<{acc}>>", attrs=f'num_warps = {num_warps}, target = "sm_90a"')


WGMMA = """
    CHECK: tlx.local_alloc src(%a)
    CHECK: tlx.local_alloc src(%b)
    CHECK: tlx.async_dot
    CHECK: tlx.async_dot_wait
    CHECK-NOT: tt.dot
"""
MMA_SYNC = """
    CHECK-NOT: tlx.local_alloc
    CHECK: tt.dot %a, %b, %z
    CHECK-NOT: tlx.async_dot
"""


@pytest.mark.parametrize("m,n,k,t,acc,attrs,nw,want", [
    # M a multiple of 64 over whole warpgroups: wgmma, for every operand type
    (64, 64, 16, "f16", "f32", "", 4, WGMMA),
    (128, 8, 16, "bf16", "f32", "", 8, WGMMA),
    (64, 32, 8, "f32", "f32", "", 4, WGMMA),
    (64, 64, 32, "i8", "i32", "", 4, WGMMA),
    (64, 64, 32, "f8e4m3", "f32", "", 4, WGMMA),
    # below one wgmma (M < 64, or not a multiple of it) or warps short of a warpgroup: mma.sync
    (16, 64, 16, "f16", "f32", "", 4, MMA_SYNC),
    (32, 32, 32, "f8e5m2", "f32", "", 4, MMA_SYNC),
    (1, 16, 16, "bf16", "f32", "", 4, MMA_SYNC),
    (64, 64, 16, "f16", "f32", "", 2, MMA_SYNC),
    (64, 64, 16, "f16", "f32", "", 1, MMA_SYNC),
    # N not a multiple of 8
    (64, 4, 16, "f16", "f32", "", 4, MMA_SYNC),
    # an f16 accumulator (tlx's wgmma accumulates in f32): mma.sync's .f16 form
    (64, 64, 16, "f16", "f16", "", 4, MMA_SYNC),
    # fp8 into f32 with full-precision accumulation asked for (max_num_imprecise_acc < 32)
    (64, 64, 64, "f8e4m3", "f32", "{max_num_imprecise_acc = 16}", 4, MMA_SYNC),
    (64, 64, 64, "f8e4m3", "f32", "{max_num_imprecise_acc = 32}", 4, WGMMA),
    # exact fp32: no tensor core (the FMA loop)
    (64, 64, 16, "f32", "f32", '{input_precision = "ieee"}', 4, MMA_SYNC),
])
def test_lower_dot_picks_the_instruction(m, n, k, t, acc, attrs, nw, want):
    check(dot_ir(m, n, k, t, acc, attrs, nw), want, ("lower_dot",))


def test_mixed_fp8_operands_go_to_wgmma_with_a_k_major_b():
    """wgmma reads 8-bit (and tf32) operands K-major only: B (K x N, N contiguous in registers)
    is staged into the transposed NVMMA layout, K contiguous."""
    check(dot_ir(64, 64, 64, "f8e4m3", bt="f8e5m2"), """
    CHECK: tlx.local_alloc src(%a) : !smem<64x64xf8e4m3, #nvmma<swizzle=64, bits=8, transposed=false>>
    CHECK: tlx.local_alloc src(%b) : !smem<64x64xf8e5m2, #nvmma<swizzle=64, bits=8, transposed=true>>
    CHECK: tlx.async_dot
    """, ("lower_dot",))


def test_below_sm90_every_dot_stays():
    text, _ = run(dot_ir(64, 64, 16), ("lower_dot",), target="sm_80")
    assert "tt.dot" in text and "tlx.async_dot" not in text


def test_mma_sync_dot_has_no_shared_memory_effect_and_no_fence():
    """mma.sync reads registers: the catalogue gives tt.dot no effect, and a dot whose operands come
    from buffers (local_load -> tl.dot, mma.sync) needs no proxy fence — the wgmma one does."""
    assert get_opdef("tt.dot").effects == ()
    body = """
    %sa = tlx.local_alloc : !smem<{m}x16xf16, mutable>
    %sb = tlx.local_alloc : !smem<16x64xf16, mutable>
    tlx.local_store %sa, %a
    tlx.local_store %sb, %b
    %la = tlx.local_load %sa : tensor<{m}x16xf16>
    %lb = tlx.local_load %sb : tensor<16x64xf16>
    %z = arith.constant {{value = 0}} : tensor<{m}x64xf32>
    %d = tt.dot %la, %lb, %z : tensor<{m}x64xf32> loc(#f0:9:8)
    tt.store %c, %d"""
    args = "%a: tensor<{m}x16xf16>, %b: tensor<16x64xf16>, %c: tensor<{m}x64x!ptr<f32>>"
    text, res = run(module(body.format(m=32), args.format(m=32)))
    assert FENCE not in text and res.fences == [] and "tt.dot %la, %lb" in text
    text, res = run(module(body.format(m=64), args.format(m=64)))
    assert text.count(FENCE) == 1 and "tlx.async_dot %sa, %sb" in text  # read in place, fenced once


LOOP = """
    %b = tt.load %bp : tensor<64x64xf16>
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %z = arith.constant {{value = 0}} : tensor<{m}x64xf32>
    %acc = scf.for %c0, %n, %c1 inits(%z) : tensor<{m}x64xf32> {{
    ^body(%i: i32, %x: tensor<{m}x64xf32>):
      %a = tt.load %ap : tensor<{m}x64xf16> loc(#f0:20:10)
      %d = tt.dot %a, %b, %x : tensor<{m}x64xf32> loc(#f0:21:10)
      scf.yield %d
    }} loc(#f0:19:4)
    tt.store %c, %acc"""
LOOP_ARGS = "%ap: tensor<{m}x64x!ptr<f16>>, %bp: tensor<64x64x!ptr<f16>>, %c: tensor<{m}x64x!ptr<f32>>, %n: i32"


def test_loop_invariant_operands_are_staged_and_fenced_once_before_the_loop():
    """Both operands are defined outside the loop: their staging (generic writes) and the proxy
    fence for them run once, before the loop; the loop body is the wgmma alone."""
    ir = module(LOOP.format(m=64).replace("%a = tt.load %ap", "%ld = tt.load %ap"),
                LOOP_ARGS.format(m=64).replace("%ap: tensor<64x64x!ptr<f16>>", "%ap: tensor<64x64x!ptr<f16>>, "
                                               "%a: tensor<64x64xf16>"))
    res = check(ir, f"""
    CHECK: tlx.local_alloc src(%a)
    CHECK-NEXT: tlx.local_alloc src(%b)
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: scf.for
    CHECK-NOT: tlx.local_alloc
    CHECK-NOT: {FENCE}
    CHECK: tlx.async_dot
    CHECK-NOT: {FENCE}
    CHECK: scf.yield
    """, ("lower_dot", "tma_lowering", "fence_insertion"))
    assert len(res.fences) == 1


def test_loop_invariant_operand_is_staged_once_before_the_loop():
    """B is defined outside the K loop and staged once, before it; A, loaded every iteration, is
    staged in the loop, and the one fence there orders both writes before the wgmma."""
    res = check(module(LOOP.format(m=64), LOOP_ARGS.format(m=64)), f"""
    CHECK: tlx.local_alloc src(%b)
    CHECK-NEXT: scf.for
    CHECK: tt.load
    CHECK-NEXT: tlx.local_alloc src(%a)
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: tlx.async_dot
    CHECK-NOT: tlx.local_alloc
    CHECK: scf.yield
    """, ("lower_dot", "tma_lowering", "fence_insertion"))
    assert len(res.fences) == 1


def test_loop_invariant_operand_of_an_mma_sync_dot_is_converted_once_before_the_loop():
    """mma.sync: B's conversion into the operand layout (through scratch shared memory) is computed
    once, right after B's definition, not in every iteration."""
    check(module(LOOP.format(m=16), LOOP_ARGS.format(m=16)), """
    CHECK: tt.convert_layout %b {{.*}} #dotop<idx=1, parent=#mma<version=2,
    CHECK: scf.for
    CHECK: tt.load
    CHECK: tt.convert_layout %a {{.*}} #dotop<idx=0, parent=#mma<version=2,
    CHECK-NEXT: tt.dot
    CHECK-NOT: tt.convert_layout %b
    CHECK: scf.yield
    """, ("lower_dot", "layouts"))


def test_staging_is_not_hoisted_out_of_an_if():
    ir = module("""
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    %z = arith.constant {value = 0} : tensor<64x64xf32>
    scf.for %c0, %n, %c1 {
    ^body(%i: i32):
      %p = arith.cmpi %i, %n {predicate = "slt"} : i1
      scf.if %p {
      ^then:
        %d = tt.dot %a, %b, %z : tensor<64x64xf32>
        tt.store %c, %d
        scf.yield
      } {
      ^else:
        scf.yield
      }
      scf.yield
    }""", "%a: tensor<64x64xf16>, %b: tensor<64x64xf16>, %c: tensor<64x64x!ptr<f32>>, %n: i32")
    check(ir, """
    CHECK: scf.for
    CHECK: scf.if
    CHECK-NEXT: ^then:
    CHECK-NEXT: tlx.local_alloc src(%a)
    CHECK-NEXT: tlx.local_alloc src(%b)
    CHECK-NEXT: tlx.async_dot
    """, ("lower_dot",))


def test_an_operand_two_dots_share_is_staged_once():
    ir = module("""
    %z = arith.constant {value = 0} : tensor<64x64xf32>
    %d1 = tt.dot %a, %b1, %z : tensor<64x64xf32>
    %d2 = tt.dot %a, %b2, %d1 : tensor<64x64xf32>
    tt.store %c, %d2""", "%a: tensor<64x64xf16>, %b1: tensor<64x64xf16>, %b2: tensor<64x64xf16>, "
                         "%c: tensor<64x64x!ptr<f32>>")
    text, _ = run(ir, ("lower_dot",))
    assert text.count("tlx.local_alloc src(%a)") == 1 and text.count("tlx.local_alloc") == 3
    check(ir, """
    CHECK: [[A:%[0-9]+]] = tlx.local_alloc src(%a)
    CHECK: tlx.async_dot [[A]],
    CHECK: tlx.async_dot [[A]],
    """, ("lower_dot",))


@pytest.mark.parametrize("m,n,k,t,acc,nw,layout,kw", [
    (16, 16, 16, "f16", "f32", 4, "#mma<version=2, wpc=[2,2], instr=[16,8,16]>", 2),
    (32, 64, 16, "bf16", "f32", 4, "#mma<version=2, wpc=[1,4], instr=[16,8,16]>", 2),
    (16, 128, 16, "f32", "f32", 4, "#mma<version=2, wpc=[1,4], instr=[16,8,8]>", 1),
    (32, 32, 32, "i8", "i32", 8, "#mma<version=2, wpc=[2,4], instr=[16,8,32]>", 4),
    (64, 64, 32, "f8e4m3", "f32", 2, "#mma<version=2, wpc=[1,2], instr=[16,8,32]>", 4),
])
def test_mma_sync_layouts(m, n, k, t, acc, nw, layout, kw):
    """The accumulator gets Triton's MMAv2 warps (instruction repetitions per warp balanced
    between M/16 and N/8, ties to M), the operands the A and B fragment layouts."""
    check(dot_ir(m, n, k, t, acc, num_warps=nw), f"""
    CHECK: tt.convert_layout %a {{{{.*}}}} : tensor<{m}x{k}x{t}, #dotop<idx=0, parent={layout}, kwidth={kw}>>
    CHECK: tt.convert_layout %b {{{{.*}}}} : tensor<{k}x{n}x{t}, #dotop<idx=1, parent={layout}, kwidth={kw}>>
    CHECK: tt.dot {{{{.*}}}} : tensor<{m}x{n}x{acc}, {layout}>
    """, ("lower_dot", "layouts"))


def test_operand_loaded_from_a_buffer_is_read_in_the_operand_layout():
    """local_load -> tl.dot (mma.sync): the load produces the fragment layout itself (ldmatrix from
    the buffer), no conversion through scratch."""
    ir = module("""
    %sa = tlx.local_alloc src(%a) : !smem<32x32xf16>
    %la = tlx.local_load %sa : tensor<32x32xf16>
    %z = arith.constant {value = 0} : tensor<32x32xf32>
    %d = tt.dot %la, %b, %z : tensor<32x32xf32>
    tt.store %c, %d""", "%a: tensor<32x32xf16>, %b: tensor<32x32xf16>, %c: tensor<32x32x!ptr<f32>>")
    check(ir, """
    CHECK: %la = tlx.local_load %sa : tensor<32x32xf16, #dotop<idx=0,
    CHECK-NOT: tt.convert_layout %la
    CHECK: tt.dot %la,
    """, ("lower_dot", "layouts"))


def test_chained_dots_put_every_warp_along_m():
    """A dot that feeds another (attention's P @ V) keeps its warps along M, so its result is the
    next dot's A fragment without an exchange between warps."""
    ir = module("""
    %z = arith.constant {value = 0} : tensor<32x32xf32>
    %s = tt.dot %q, %k, %z : tensor<32x32xf32>
    %p = arith.truncf %s : tensor<32x32xf16>
    %o = tt.dot %p, %v, %z : tensor<32x32xf32>
    tt.store %c, %o""", "%q: tensor<32x16xf16>, %k: tensor<16x32xf16>, %v: tensor<32x32xf16>, %c: tensor<32x32x!ptr<f32>>")
    check(ir, """
    CHECK: %s = tt.dot {{.*}} #mma<version=2, wpc=[4,1], instr=[16,8,16]>
    CHECK: %p_1 = tt.convert_layout %p : tensor<32x32xf16, #dotop<idx=0, parent=#mma<version=2, wpc=[4,1],
    CHECK: %o = tt.dot {{.*}} #mma<version=2, wpc=[4,1], instr=[16,8,16]>
    """, ("lower_dot", "layouts"))
    # the accumulator is already the next dot's A fragment: a renaming, no scratch
    text, _ = run(ir, ("lower_dot", "layouts"))
    (line,) = [ln for ln in text.splitlines() if "tt.convert_layout %p" in ln]
    assert "scratch_bytes" not in line


def test_fma_dot_layouts():
    """input_precision = "ieee": a blocked accumulator; each thread's rows of A and columns of B
    for the whole K."""
    check(dot_ir(16, 16, 16, "f32", attrs='{input_precision = "ieee"}'), """
    CHECK: tt.convert_layout %a {{.*}} #dotop<idx=0, parent=#blocked<
    CHECK: tt.dot {{.*}} : tensor<16x16xf32, #blocked<
    """, ("lower_dot", "layouts"))

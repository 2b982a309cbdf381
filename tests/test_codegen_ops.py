"""Ops the catalogue kernels do not reach, each lowered from IR text and assembled by ptxas,
with the instruction it must become."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from tests_ir_helpers import compile_ir_text  # noqa: E402

T = "tensor<256xi32>"
F = "tensor<256xf32>"

LOAD = f"""
    %r = tt.make_range {{start = 0, end = 256}} : {T}
    %ps = tt.splat %x : tensor<256x!ptr<i32>>
    %p = tt.addptr %ps, %r : tensor<256x!ptr<i32>>
    %a = tt.load %p : {T}
    %fs = tt.splat %f : tensor<256x!ptr<f32>>
    %fp = tt.addptr %fs, %r : tensor<256x!ptr<f32>>
    %b = tt.load %fp : {F}
"""
ARGS = "%x: !ptr<i32>, %f: !ptr<f32>"


@pytest.mark.parametrize("op,ty,want", [
    ("arith.divui %a, %a", T, "div.u32"), ("arith.remui %a, %a", T, "rem.u32"),
    ("arith.shrui %a, %a", T, "shr.u32"), ("arith.maxui %a, %a", T, "max.u32"),
    ("arith.minui %a, %a", T, "min.u32"), ("arith.ori %a, %a", T, "or.b32"),
    ("math.absi %a", T, "abs.s32"), ("arith.maximumf %b, %b", F, "max.NaN.f32"),
    ("arith.minimumf %b, %b", F, "min.NaN.f32"), ("arith.uitofp %a", F, "cvt.rn.f32.u32"),
    ("arith.fptoui %b", T, "cvt.rzi.u32.f32"),
])
def test_elementwise_op(op, ty, want):
    body = LOAD + f"    %y = {op} : {ty}\n    %o = tt.addptr %ps, %r : tensor<256x!ptr<i32>>\n"
    if ty == F:
        body += "    tt.store %fp, %y\n"
    else:
        body += "    tt.store %o, %y\n"
    ptx = compile_ir_text(body, ARGS, divs="[16, 16]")
    assert want in ptx


def test_bitcast_and_pointer_int_casts_move_no_data():
    body = LOAD + f"""
    %y = arith.bitcast %b : {T}
    tt.store %p, %y
    %pi = tt.ptr_to_int %x : i64
    %c = arith.constant {{value = 1024}} : i64
    %q = arith.addi %pi, %c : i64
    %xp = tt.int_to_ptr %q : !ptr<i32>
    %v = arith.constant {{value = 7}} : i32
    tt.store %xp, %v
"""
    ptx = compile_ir_text(body, ARGS, divs="[16, 16]")
    assert "cvt" not in ptx.split("ld.global")[-1].split("st.global")[0] and "st.global" in ptx


def test_hint_gives_vector_width():
    body = """
    %r = tt.make_range {start = 0, end = 256} : tensor<256xi32>
    %ps = tt.splat %x : tensor<256x!ptr<i32>>
    %p0 = tt.addptr %ps, %r : tensor<256x!ptr<i32>>
    %p = tt.hint %p0 {divisibility = [16], contiguity = [256]} : tensor<256x!ptr<i32>>
    %a = tt.load %p : tensor<256xi32>
    tt.store %p, %a
"""
    assert "ld.global.v2.b32" in compile_ir_text(body, "%x: !ptr<i32>")


def test_cluster_rank_reinterpret_and_prefetch():
    body = """
    %rank = tlx.cluster_cta_rank : i32
    %c0 = arith.constant {value = 0} : i32
    tlx.tma_prefetch %d offsets(%rank, %c0)
    %buf = tlx.local_alloc : !smem<64x64xf16, mutable>
    %as_i16 = tlx.memdesc_reinterpret %buf : !smem<64x64xi16, mutable>
    %r = tt.make_range {start = 0, end = 64} : tensor<64xi32>
    %v = tlx.local_load %as_i16 : tensor<64x64xi16>
    %s = tt.reduce %v {axis = 1, kind = "sum"} : tensor<64xi16>
    %e = arith.extsi %s : tensor<64xi32>
    %ps = tt.splat %x : tensor<64x!ptr<i32>>
    %p = tt.addptr %ps, %r : tensor<64x!ptr<i32>>
    tt.store %p, %e
"""
    ptx = compile_ir_text(body, "%d: !tensordesc<64x64xf16>, %x: !ptr<i32>")
    assert "%cluster_ctarank" in ptx and "cp.async.bulk.prefetch.tensor.2d.L2.global.tile" in ptx


@pytest.mark.parametrize("fn", ["math.exp2", "math.exp", "math.tanh", "math.erf"])
@pytest.mark.parametrize("ty", ["f32", "bf16", "f16"])
def test_exp2_and_the_functions_built_on_it_use_the_flush_to_zero_ex2(fn, ty):
    """f32 exp2 (also inside exp, tanh, erf; f16 / bf16 in f32) is ex2.approx.ftz.f32: without
    .ftz ptxas wraps each ex2 in a subnormal range check and two scalings."""
    body = f"""
    %r = tt.make_range {{start = 0, end = 256}} : {T}
    %ps = tt.splat %x : tensor<256x!ptr<{ty}>>
    %p = tt.addptr %ps, %r : tensor<256x!ptr<{ty}>>
    %a = tt.load %p : tensor<256x{ty}>
    %y = {fn} %a : tensor<256x{ty}>
    tt.store %p, %y
"""
    ptx = compile_ir_text(body, f"%x: !ptr<{ty}>", divs="[16]")
    assert ptx.count("ex2.approx.ftz.f32") >= 2  # 256 elements over 128 threads
    assert "ex2.approx.f32" not in ptx


def test_f64_math_that_ptx_lacks_is_a_clear_error():
    from tlx.compiler.errors import TLXCompileError

    body = """
    %r = tt.make_range {start = 0, end = 128} : tensor<128xi32>
    %ps = tt.splat %x : tensor<128x!ptr<f64>>
    %p = tt.addptr %ps, %r : tensor<128x!ptr<f64>>
    %a = tt.load %p : tensor<128xf64>
    %y = math.exp %a : tensor<128xf64>
    tt.store %p, %y
"""
    with pytest.raises(TLXCompileError, match="math.exp on f64 is not supported"):
        compile_ir_text(body, "%x: !ptr<f64>")


def test_warp_barrier_arrive_is_made_by_every_thread_and_a_plain_barrier_arrive_by_the_leader():
    """alloc_warp_barrier counts num_warps * 32 * num_arrivals arrivals: each thread arrives by
    itself (the real TLX's semantics). A leader-only arrive there never completes the phase: the
    warp-barrier GEMM tutorial hung on the GPU that way."""
    import tlx
    import tlx.language as tl

    @tlx.jit
    def arrive_both(out_ptr):
        wb = tlx.alloc_warp_barrier(num_barriers=1, num_warps=4, num_arrivals=1)
        b = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
        tlx.barrier_arrive(wb[0])
        tlx.barrier_arrive(b[0])
        tlx.barrier_wait(wb[0], 0)
        tlx.barrier_wait(b[0], 0)
        tl.store(out_ptr + tl.arange(0, 128), tl.arange(0, 128))

    ck = tlx.compile(arrive_both, signature={"out_ptr": "*i32"})
    ptx = ck.asm["ptx"]
    inits = [ln.split() for ln in ptx.splitlines() if "mbarrier.init" in ln]
    assert [i[-1] for i in inits] == ["128;", "1;"]  # 4 warps x 32 threads; one leader arrival
    warp_addr, plain_addr = inits[0][-2], inits[1][-2]
    arrives = [ln.split() for ln in ptx.splitlines() if "mbarrier.arrive.shared" in ln]
    by_addr = {a[-1].rstrip(";"): a for a in arrives}
    assert not by_addr[warp_addr.rstrip(",")][0].startswith("@")      # every thread
    assert by_addr[plain_addr.rstrip(",")][0].startswith("@%leader")  # the leader only
    assert ck.asm["cubin"]


def test_masked_scalar_load_reads_other_where_masked_off():
    """A scalar tl.load with mask and other: `other` is moved into the load's destination word
    before the predicated ld.global, and the word then goes to the result (the masked-off value
    is `other`, not what the word held before)."""
    import re

    import tlx
    import tlx.language as tl

    @tlx.jit
    def scalar_masked_load(out, p, n):
        tl.store(out, tl.load(p, mask=n > 0, other=7))

    ck = tlx.compile(scalar_masked_load, signature={"out": "*i32", "p": "*i32", "n": "i32"})
    ptx = ck.asm["ptx"]
    seven = re.search(r"mov\.b32 (%\w+), 7;", ptx).group(1)
    m = re.search(rf"mov\.b32 (%\w+), {seven};\s*(?:\.loc[^\n]*\n\s*)?@%\w+ ld\.global\.b32 \1, \[%\w+\];"
                  rf"\s*(?:\.loc[^\n]*\n\s*)?mov\.b32 (%\w+), \1;", ptx)
    assert m, ptx
    assert re.search(rf"st\.global\.b32 \[%\w+\], {m.group(2)};", ptx), ptx
    assert ck.asm["cubin"]

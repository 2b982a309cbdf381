"""`tl.dot` code for every tile shape: the mma.sync fragment layouts against the PTX ISA's, the PTX
of M = 16, 32, 64, 128 for every operand type assembled by ptxas for sm_90a (mma.sync below one
wgmma, wgmma from M = 64), layout conversions in rounds through a bounded scratch, and the
interpreter's products against numpy in float64."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dot_kernels as DK
import tlx
from tlx.compiler.analysis import layout_math as LM
from tlx.compiler.codegen import layout_rules as R
from tlx.compiler.ir import layouts as L

# ---------------------------------------------------------------------------------------------
# the fragments, as the PTX ISA describes mma.sync.m16n8k{8,16,32} (one warp, one instruction)
# ---------------------------------------------------------------------------------------------


def isa_a(bits: int, lane: int, i: int):
    """Element (row, k) of register element a_i of lane `lane`: gid = lane/4, tig = lane%4."""
    gid, tig = divmod(lane, 4)
    if bits == 16:  # a0..a7 (f16/bf16 pairs)
        return gid + 8 * ((i // 2) % 2), tig * 2 + i % 2 + 8 * (i // 4)
    if bits == 32:  # a0..a3 (tf32)
        return gid + 8 * (i % 2), tig + 4 * (i // 2)
    return gid + 8 * ((i // 4) % 2), tig * 4 + i % 4 + 16 * (i // 8)  # a0..a15 (8-bit)


def isa_b(bits: int, lane: int, i: int):
    """Element (k, col) of register element b_i."""
    gid, tig = divmod(lane, 4)
    if bits == 16:
        return tig * 2 + i % 2 + 8 * (i // 2), gid
    if bits == 32:
        return tig + 4 * i, gid
    return tig * 4 + i % 4 + 16 * (i // 4), gid


def isa_c(lane: int, i: int):
    """Element (row, col) of accumulator register c_i (f32 / s32, and the halves of f16x2)."""
    gid, tig = divmod(lane, 4)
    return gid + 8 * (i // 2), tig * 2 + i % 2


@pytest.mark.parametrize("bits", [16, 32, 8])
def test_mma_sync_fragments_match_the_ptx_isa(bits):
    k = 256 // bits
    mma = L.MmaLayout(2, (1, 1), (16, 8, k))
    a = LM.to_map(L.DotOperandLayout(0, mma, 32 // bits), (16, k))
    b = LM.to_map(L.DotOperandLayout(1, mma, 32 // bits), (k, 8))
    c = LM.to_map(mma, (16, 8))
    for lane in range(32):
        assert [a.coord(i, lane) for i in range(a.num_regs)] == [isa_a(bits, lane, i) for i in range(a.num_regs)]
        assert [b.coord(i, lane) for i in range(b.num_regs)] == [isa_b(bits, lane, i) for i in range(b.num_regs)]
        assert [c.coord(i, lane) for i in range(4)] == [isa_c(lane, i) for i in range(4)]


def test_mma_sync_warps_tile_m_and_n_and_repeat_in_registers():
    """Warps take m16n8 tiles along M then N (wpc); a warp's repetitions follow in registers."""
    mma = L.MmaLayout(2, (2, 2), (16, 8, 16))
    c = LM.to_map(mma, (64, 32))
    for w in range(4):
        wm, wn = w % 2, w // 2
        got = {c.coord(r, ln, w) for r in range(c.num_regs) for ln in range(32)}
        want = {(32 * rm + 16 * wm + row, 16 * rn + 8 * wn + col)
                for rm in range(2) for rn in range(2) for row in range(16) for col in range(8)}
        assert got == want
    b = LM.to_map(L.DotOperandLayout(1, mma, 2), (16, 32))
    for w in range(4):  # warps along M hold copies of B
        assert {b.coord(r, ln, w) for r in range(b.num_regs) for ln in range(32)} == \
            {(kk, 16 * rn + 8 * (w // 2) + col) for kk in range(16) for rn in range(2) for col in range(8)}


@pytest.mark.parametrize("m,n,nw,want", [(16, 16, 4, (2, 2)), (16, 128, 4, (1, 4)), (128, 16, 4, (4, 1)),
                                         (64, 64, 8, (2, 4)), (1, 1, 4, (4, 1)), (32, 32, 1, (1, 1))])
def test_mma_sync_warps_balance_the_repetitions(m, n, nw, want):
    assert R.mma_sync_warps(m, n, nw) == want


# ---------------------------------------------------------------------------------------------
# PTX through ptxas
# ---------------------------------------------------------------------------------------------

OPCODE = {"fp16": "m16n8k16.row.col.f32.f16.f16.f32", "bf16": "m16n8k16.row.col.f32.bf16.bf16.f32",
          "fp32": "m16n8k8.row.col.f32.tf32.tf32.f32", "int8": "m16n8k32.row.col.s32.s8.s8.s32",
          "e4m3": "m16n8k32.row.col.f32.e4m3.e4m3.f32", "e5m2": "m16n8k32.row.col.f32.e5m2.e5m2.f32",
          "fp64": None}


def compile_tile(dt, m, n, k, from_smem=False, precision="tf32", out_f16=False, nw=4, yt=None):
    sig = DK.tile_signature(dt, yt or dt, "fp16" if out_f16 else DK.DTYPES[dt][2])
    # as a launch specializes contiguous arrays: 16-byte aligned pointers
    res = tlx.compile(DK.dot_tile, sig, {"BM": m, "BN": n, "BK": k, "FROM_SMEM": from_smem, "PRECISION": precision,
                                         "OUT_F16": out_f16}, num_warps=nw, divisibility={p: 16 for p in sig})
    assert "cubin" in res.asm, res.resources  # ptxas assembled it for sm_90a
    return res


@pytest.mark.parametrize("dt,m,n,k,from_smem", DK.TILE_CASES)
def test_dot_ptx_per_tile_shape_and_type(dt, m, n, k, from_smem):
    ptx = compile_tile(dt, m, n, k, from_smem).asm["ptx"]
    if dt == "fp64":  # no tensor core: one fma per result element and K step
        assert "mma.sync" not in ptx and "wgmma" not in ptx and ptx.count("fma.rn.f64") == m * n * k // 128
    elif m < 64:
        # mma.sync: (this warp's m16n8 tiles) x (K steps) instructions, no wgmma, no proxy fence
        wm, wn = R.mma_sync_warps(m, n, 4)
        tiles = max(1, m // (16 * wm)) * max(1, n // (8 * wn))
        steps = k // int(re.search(r"k(\d+)\.", OPCODE[dt]).group(1))
        assert ptx.count(f"mma.sync.aligned.{OPCODE[dt]}") == tiles * steps, ptx
        assert "wgmma" not in ptx and "fence.proxy.async" not in ptx
    else:
        assert "mma.sync" not in ptx and f"wgmma.mma_async.sync.aligned.m64n{n}" in ptx
        assert "fence.proxy.async.shared::cta" in ptx


def test_every_other_gpu_test_kernel_assembles():
    """The GPU test's launches beyond TILE_CASES (small tiles, warps, accumulator and precision
    forms, K loops, chains), compiled as its launches specialize them."""
    for fn, sig, consts, nw in DK.gpu_compile_cases(tiles=False):
        res = tlx.compile(fn, sig, consts, num_warps=nw, divisibility={p: 16 for p in sig})
        assert "cubin" in res.asm, (fn.__name__, consts, nw, res.resources)


def regs_of(text):
    """The registers of a PTX vector operand {a, b, ...}."""
    return [x.strip() for x in text[1:-1].split(",")]


def _word_elements(defs, w, elems=()):
    """The element registers a 32-bit operand word holds, low bits first (a b32 element of
    `elems` itself; mov.b32 {x, y}; the 8-bit packing prmt.b32 w, {e0, e1}, {e2, e3}, 0x6420),
    or None for the zero word of padding."""
    ins = defs.get(w)
    if w in elems or ins is None:
        return [w]
    if ins.op == "mov.b32" and ins.args[1].startswith("{"):
        return [x.strip() for x in ins.args[1][1:-1].split(",")]
    if ins.op == "mov.b32" and ins.args[1] == "0":
        return None
    if ins.op == "prmt.b32" and ins.args[3] == "0x6420":
        lo, hi = _word_elements(defs, ins.args[1]), _word_elements(defs, ins.args[2])
        return [lo[0], lo[1], hi[0], hi[1]]
    raise AssertionError(f"unexpected definition of an mma word: {ins.op} {ins.args}")


@pytest.mark.parametrize("dt,m,n,k,yt", [("fp16", 32, 32, 32, None), ("bf16", 16, 64, 16, None),
                                         ("fp32", 32, 16, 16, None), ("int8", 16, 32, 64, None),
                                         ("e4m3", 32, 32, 32, "e5m2"), ("fp16", 4, 8, 16, None),
                                         ("fp16", 1, 1, 32, None), ("int8", 8, 2, 32, None)])
def test_mma_sync_instructions_compute_the_product(dt, m, n, k, yt):
    """Read back every mma.sync the lowering emits as the hardware executes it: per warp, the
    tile slot (row, k) of A that lane l supplies in word j, element e is the ISA's a_(j*kw+e) of
    lane l, and so on for B and the accumulator. Mapping each slot to the element its register
    holds (the operand tensors' layouts), every instruction must multiply A[r, k] by B[k, c]
    into D[r, c] (padding rows / columns only into results nobody keeps), and each kept D[r, c]
    must see every k exactly once along its chain of instructions."""
    from tlx.compiler.codegen import lower_arith, lower_async, lower_control, lower_memory, lower_mma, lower_tensor  # noqa: F401
    from tlx.compiler.codegen.lower import KernelLowering

    res = compile_tile(dt, m, n, k, yt=yt)
    lw = KernelLowering(res.module, "sm_90a")
    ptx, _ = lw.run()
    assert ptx == res.asm["ptx"]  # the code ptxas assembled
    (dot,) = [o for o in res.module.ops() if o.name == "tt.dot"]
    a, b, d = lw.tensor(dot.arg("a")), lw.tensor(dot.arg("b")), lw.tensor(dot.result)
    acc = lw.tensor(dot.arg("acc"))
    bits = a.elem.bits
    kw = 32 // bits
    defs = {ins.args[0]: ins for ins in lw.e.code if ins.args and not ins.op.startswith(("mma", ":"))}
    mmas = [ins for ins in lw.e.code if ins.op.startswith("mma.sync")]
    assert mmas
    ai, bi, di = ({r: i for i, r in enumerate(t.regs)} for t in (a, b, d))
    unpack = {ins.args[1]: regs_of(ins.args[0]) for ins in lw.e.code
              if ins.op == "mov.b32" and ins.args[0].startswith("{")}
    seen = {}  # (warp, lane, result register) -> its element (r, c), the k multiplied into it so far
    for ins in mmas:
        dregs, awords, bwords, cregs = (regs_of(x) for x in ins.args)
        f16 = len(dregs) == 2
        for w in range(d.lmap.num_warps):
            # what each hardware slot holds: (row, k) of A, (k, col) of B
            ha, hb = {}, {}
            for lane in range(32):
                for j, word in enumerate(awords):
                    els = _word_elements(defs, word, ai)
                    for e in range(kw):
                        ha[isa_a(bits, lane, j * kw + e)] = None if els is None else a.lmap.coord(ai[els[e]], lane, w)
                for j, word in enumerate(bwords):
                    els = _word_elements(defs, word, bi)
                    for e in range(kw):
                        hb[isa_b(bits, lane, j * kw + e)] = b.lmap.coord(bi[els[e]], lane, w)
            outs = dregs
            if f16:  # the f16x2 words are unpacked into the result registers after the chain
                outs = [x for dr in dregs for x in unpack.get(dr, [None, None])]
            for lane in range(32):
                for i, r in enumerate(outs):
                    if r not in di:
                        continue  # a padding slot: its result is dropped
                    rc = d.lmap.coord(di[r], lane, w)
                    hr, hc = isa_c(lane, i)
                    for hk in range(256 // bits):
                        ak, bk = ha[(hr, hk)], hb[(hk, hc)]
                        assert ak is not None and ak[0] == rc[0] and bk[1] == rc[1] and ak[1] == bk[0], \
                            (ins.args, w, lane, i, hk, ak, bk, rc)
                        seen.setdefault((w, lane, r), (rc, []))[1].append(ak[1])
    for (w, lane, r), (rc, ks) in seen.items():
        assert sorted(ks) == list(range(k)), (w, lane, r, rc)
    assert {rc for rc, _ in seen.values()} == {(r, c) for r in range(m) for c in range(n)}
    # the chain: the first instruction into a result reads the accumulator, the others the result
    first = {}
    for ins in mmas:
        dregs, cregs = regs_of(ins.args[0]), regs_of(ins.args[3])
        for dr, cr in zip(dregs, cregs):
            if dr in first:
                assert cr == dr
            else:
                first[dr] = cr
    for dr, cr in first.items():
        if dr in di:  # (f16: packed words, checked above through the results)
            assert cr == acc.regs[di[dr]]


def test_operands_from_buffers_are_read_with_ldmatrix():
    """local_load -> tl.dot (mma.sync): A by ldmatrix, a K x N B of 16-bit elements by
    ldmatrix.trans, from the user's buffers (no scratch round trip)."""
    res = compile_tile("fp16", 32, 64, 32, from_smem=True)
    ptx = res.asm["ptx"]
    assert re.search(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16", ptx)
    assert re.search(r"ldmatrix\.sync\.aligned\.m8n8\.x[24]\.trans\.shared\.b16", ptx)
    assert "tt.convert_layout %a" not in res.asm["ir.layouts"] and "tt.convert_layout %b" not in res.asm["ir.layouts"]


@pytest.mark.parametrize("m,n,tiles", DK.SMALL_TILES)
def test_tiles_smaller_than_one_instruction_run_padded(m, n, tiles):
    """M < 16 or N < 8: one m16n8 instruction per warp tile all the same (4 x 64: warps 1 x 4,
    16 columns each)."""
    ptx = compile_tile("fp16", m, n, 16).asm["ptx"]
    assert ptx.count("mma.sync.aligned.m16n8k16") == tiles


def test_f16_accumulator_and_mixed_fp8():
    ptx = compile_tile("fp16", 32, 32, 16, out_f16=True).asm["ptx"]
    assert "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16" in ptx
    ptx = compile_tile("fp16", 64, 32, 16, out_f16=True).asm["ptx"]  # tlx's wgmma accumulates in f32
    assert "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16" in ptx and "wgmma" not in ptx
    ptx = compile_tile("e4m3", 16, 32, 32, yt="e5m2").asm["ptx"]
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32" in ptx
    ptx = compile_tile("e4m3", 64, 32, 32, yt="e5m2").asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e5m2" in ptx


def test_ieee_fp32_dot_is_an_fma_loop():
    ptx = compile_tile("fp32", 16, 16, 16, precision="ieee").asm["ptx"]
    assert "mma.sync" not in ptx and "wgmma" not in ptx and ptx.count("fma.rn.f32") == 16 * 16 * 16 // 128


def test_one_warp_and_two_warps():
    for nw in (1, 2):
        ptx = compile_tile("bf16", 64, 64, 16, nw=nw).asm["ptx"]
        assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx and "wgmma" not in ptx


def test_k_loop_stages_the_invariant_operand_once():
    res = tlx.compile(DK.dot_k_loop, {"x_ptr": "*fp16", "y_ptr": "*fp16", "z_ptr": "*fp32", "K": "i32"},
                      {"BM": 64, "BN": 64, "BK": 32})
    assert "cubin" in res.asm
    ir = res.asm["ir.lower_dot"]
    loop = ir.index("scf.for")
    assert ir.count("tlx.local_alloc src(%b0)") == 1 and ir.index("tlx.local_alloc src(%b0)") < loop
    assert ir[loop:].count("tlx.local_alloc src(%a)") == 1  # A staged once for its two dots
    assert len(res.fences) == 1


def test_chained_dots_compile():
    res = tlx.compile(DK.dot_chain, {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32"},
                      {"BM": 32, "BN": 32, "D": 32})
    assert "cubin" in res.asm and res.asm["ptx"].count("mma.sync") == 2 * 2 * 2 + 2 * 2 * 2


# ---------------------------------------------------------------------------------------------
# layout conversions in rounds
# ---------------------------------------------------------------------------------------------

def test_conversion_rounds_hold_the_same_elements_on_both_sides():
    """Each round of a conversion moves one sub-tile: for every round, the elements the source
    layout's threads hold in it are those the destination's threads hold in it, and the round's
    sub-layouts are the full layouts with the round bits squeezed out."""
    src = LM.to_map(L.MmaLayout(3, (4, 1), (16, 64, 16)), (256, 64))
    dst = LM.to_map(L.BlockedLayout((1, 8), (4, 8), (4, 1), (1, 0)), (256, 64))
    rounds = R.convert_rounds(src, dst, 2)
    assert rounds == ((64, 0), (128, 0))
    sub_s, sub_d = R.drop_round_bits(src, rounds), R.drop_round_bits(dst, rounds)
    assert sub_s.shape == sub_d.shape == (64, 64)

    def squeeze(c):
        return (c[0] & 63, c[1])

    for r in range(4):
        def held(m, sub):
            pos = [m.reg.index(b) for b in rounds]
            out = set()
            for i in range(m.num_regs):
                if [(i >> p) & 1 for p in pos] != [(r >> j) & 1 for j in range(2)]:
                    continue
                for ln in range(32):
                    for w in range(m.num_warps):
                        c = m.coord(i, ln, w)
                        assert c[0] // 64 == r  # the round is the sub-tile of rows 64r..64r+63
                        out.add(c)
            assert {squeeze(c) for c in out} == {sub.coord(i, ln, w) for i in range(sub.num_regs)
                                                 for ln in range(32) for w in range(sub.num_warps)}
            return out
        assert held(src, sub_s) == held(dst, sub_d)


def test_dot_result_converts_in_rounds():
    """A 128 x 128 wgmma result stored as fp16 is converted to a coalesced layout for its store
    in two rounds of 64 rows through 16 KB of scratch, not 32 KB at once (a 512 x 512 result:
    eight rounds instead of 512 KB, more than one CTA's 227 KB)."""
    sig = DK.tile_signature("fp16", "fp16", "fp16")  # the fp32 result is cast to z's fp16 by the store
    res = tlx.compile(DK.dot_tile, sig, {"BM": 128, "BN": 128, "BK": 16, "FROM_SMEM": False, "PRECISION": "tf32",
                                         "OUT_F16": False}, num_warps=4, divisibility={p: 16 for p in sig})
    cvt = [ln for ln in res.asm["ir.layouts"].splitlines() if "tt.convert_layout" in ln and "scratch_bytes" in ln]
    assert len(cvt) == 1 and "scratch_bytes = 16384" in cvt[0] and "128x128xf16" in cvt[0], cvt
    assert res.resources["shared_bytes"] <= 16384


def test_fp32_dot_result_is_stored_in_the_accumulator_layout():
    """A 32-bit wgmma result goes to global memory straight from the accumulator registers: each
    lane quad writes 8 consecutive elements of a row (a whole 32-byte sector), so there is no
    conversion through shared memory — 64 8-byte stores per thread for 128 x 128 fp32 on 128
    threads, and no scratch beyond the operands' staging for wgmma."""
    res = compile_tile("fp16", 128, 128, 16)
    assert "tt.convert_layout" not in res.asm["ir.layouts"]
    ptx = res.asm["ptx"]
    assert "wgmma.mma_async" in ptx
    assert ptx.count("st.global.v2.b32") == 64 and ptx.count("st.global") == 64, ptx.count("st.global")
    assert res.resources["shared_bytes"] == 2 * 128 * 16 * 2  # A (128 x 16) and B (16 x 128), fp16


# ---------------------------------------------------------------------------------------------
# the interpreter computes them too
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", list(DK.DTYPES))
@pytest.mark.parametrize("m,n", [(16, 32), (32, 16), (64, 64), (1, 8)])
def test_interpreter_dot_numerics(dt, m, n):
    rng = np.random.default_rng(m * 131 + n)
    k = DK.kmin(dt) * 2
    x, x64 = DK.operands(dt, (m, k), rng)
    y, y64 = DK.operands(dt, (k, n), rng)
    sig, _, out = DK.DTYPES[dt]
    z = np.full((m, n), 0x5A5A5A5A if out == "i32" else np.nan, {"i32": np.int32, "fp32": np.float32, "fp64": np.float64}[out])
    tlx.interpret(DK.dot_tile, (1,), x, y, z, BM=m, BN=n, BK=k, FROM_SMEM=m >= 8, PRECISION="tf32", OUT_F16=False,
                  signature={"x_ptr": f"*{sig}", "y_ptr": f"*{sig}"})
    want = x64 @ y64
    err = np.abs(z.astype(np.float64) - want)
    assert (err <= DK.dot_bound(dt, x64, y64)).all(), (err.max(), dt)


def test_interpreter_ieee_and_f16_accumulator():
    rng = np.random.default_rng(7)
    x, x64 = DK.operands("fp32", (16, 32), rng)
    y, y64 = DK.operands("fp32", (32, 16), rng)
    z = np.full((16, 16), np.nan, np.float32)
    tlx.interpret(DK.dot_tile, (1,), x, y, z, BM=16, BN=16, BK=32, FROM_SMEM=False, PRECISION="ieee", OUT_F16=False)
    assert (np.abs(z - x64 @ y64) <= DK.dot_bound("fp32", x64, y64, "ieee")).all()
    # tf32 truncates the operands: the exact-fp32 bound does not hold for it
    z2 = np.full((16, 16), np.nan, np.float32)
    tlx.interpret(DK.dot_tile, (1,), x, y, z2, BM=16, BN=16, BK=32, FROM_SMEM=False, PRECISION="tf32", OUT_F16=False)
    assert not (np.abs(z2 - x64 @ y64) <= DK.dot_bound("fp32", x64, y64, "ieee")).all()
    h, h64 = DK.operands("fp16", (32, 32), rng)
    g, g64 = DK.operands("fp16", (32, 32), rng)
    z3 = np.full((32, 32), np.nan, np.float16)
    tlx.interpret(DK.dot_tile, (1,), h, g, z3, BM=32, BN=32, BK=32, FROM_SMEM=True, PRECISION="tf32", OUT_F16=True)
    assert (np.abs(z3 - h64 @ g64) <= DK.dot_bound("fp16", h64, g64, out_f16=True) + 2.0 ** -11 * np.abs(h64 @ g64)).all()


def test_interpreter_k_loop_and_chain():
    rng = np.random.default_rng(3)
    x, x64 = DK.operands("fp16", (32, 128), rng)
    y, y64 = DK.operands("fp16", (128, 32), rng)
    z = np.full((32, 32), np.nan, np.float32)
    tlx.interpret(DK.dot_k_loop, (1,), x, y, z, 128, BM=32, BN=32, BK=32)
    y0 = np.tile(y64[:32], (4, 1))
    want = x64 @ y64 + x64 @ y0
    assert (np.abs(z - want) <= 2 * DK.dot_bound("fp16", x64, np.abs(y64) + np.abs(y0))).all()
    q, q64 = DK.operands("fp16", (16, 32), rng)
    kk, k64 = DK.operands("fp16", (32, 32), rng)
    v, v64 = DK.operands("fp16", (32, 32), rng)
    o = np.full((16, 32), np.nan, np.float32)
    tlx.interpret(DK.dot_chain, (1,), q, kk, v, o, BM=16, BN=32, D=32)
    s = (q64 @ k64.T).astype(np.float32).astype(np.float16).astype(np.float64)  # s rounded to fp16 as the kernel does
    want = s @ v64
    bound = DK.dot_bound("fp16", s, v64) + 2.0 ** -11 * (np.abs(q64) @ np.abs(k64.T)) @ np.abs(v64) * 2
    assert (np.abs(o - want) <= bound).all()


@pytest.mark.parametrize("precision,passes,opcode", [("tf32x3", 3, "m16n8k8.row.col.f32.tf32.tf32.f32"),
                                                     ("bf16x3", 3, "m16n8k16.row.col.f32.bf16.bf16.f32"),
                                                     ("bf16x6", 6, "m16n8k16.row.col.f32.bf16.bf16.f32")])
def test_split_precisions(precision, passes, opcode):
    """fp32 operands split into tf32 / bf16 parts, the leading products on the tensor cores (as
    Triton's F32DotTC): three or six dots, each mma.sync (M = 16) or wgmma (M = 64); the
    interpreter's result is within the split's bound, well inside plain tf32's."""
    ptx = compile_tile("fp32", 16, 16, 32, precision=precision).asm["ptx"]
    wm, wn = R.mma_sync_warps(16, 16, 4)  # the passes share the accumulator, not an A operand
    tiles = max(1, 16 // (16 * wm)) * max(1, 16 // (8 * wn))
    steps = 32 // int(re.search(r"k(\d+)\.", opcode).group(1))
    assert ptx.count(f"mma.sync.aligned.{opcode}") == passes * tiles * steps
    ptx = compile_tile("fp32", 64, 32, 32, precision=precision).asm["ptx"]
    assert ptx.count("wgmma.commit_group") == passes
    rng = np.random.default_rng(11)
    x, x64 = DK.operands("fp32", (32, 64), rng)
    y, y64 = DK.operands("fp32", (64, 32), rng)
    z = np.full((32, 32), np.nan, np.float32)
    tlx.interpret(DK.dot_tile, (1,), x, y, z, BM=32, BN=32, BK=64, FROM_SMEM=False, PRECISION=precision, OUT_F16=False)
    err = np.abs(z - x64 @ y64)
    assert (err <= DK.dot_bound("fp32", x64, y64, precision)).all()
    assert err.max() < DK.dot_bound("fp32", x64, y64, "tf32").min() / 16


@pytest.mark.parametrize("dt,view", [("bf16", "bfloat16"), ("e4m3", "float8_e4m3fn"), ("e5m2", "float8_e5m2")])
def test_interpreter_takes_torch_tensors_numpy_cannot_hold(dt, view):
    """bf16 and fp8 torch tensors in host memory (the peer's tests under TLX_INTERPRET=1): the
    interpreter reads their bits; the product is the float64 one within the dtype's bound."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, x64 = DK.operands(dt, (16, 32), rng)
    y, y64 = DK.operands(dt, (32, 16), rng)
    as_torch = lambda raw: torch.from_numpy(raw.view(np.int16) if raw.dtype == np.uint16 else raw).view(  # noqa: E731
        getattr(torch, view))
    z = torch.full((16, 16), float("nan"))
    tlx.interpret(DK.dot_tile, (1,), as_torch(x), as_torch(y), z, BM=16, BN=16, BK=32, FROM_SMEM=True,
                  PRECISION="tf32", OUT_F16=False)
    assert (np.abs(z.numpy() - x64 @ y64) <= DK.dot_bound(dt, x64, y64)).all()

"""The layouts' index math, checked against a second implementation written here from the
definitions (Triton's blocked layout, the PTX ISA's wgmma fragments, the NVMMA / TMA swizzle
described row by row), for every layout and shape the catalogue's kernels use after the
layout pass, plus a sweep of small shapes."""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from tlx.compiler.analysis import layout_math as LM  # noqa: E402
from tlx.compiler.ir import layouts as L  # noqa: E402
from tlx.compiler.ir import types as T  # noqa: E402


# ---------------------------------------------------------------------------------------------
# the second implementation
# ---------------------------------------------------------------------------------------------

def split_index(x, sizes, order):
    """Per-dim ids of a linear id (dims in `order`, fastest first)."""
    out = [0] * len(sizes)
    for d in order:
        out[d] = x % sizes[d]
        x //= sizes[d]
    return out


def blocked_elements(b: L.BlockedLayout, shape, lane, warp):
    """The set of coordinates thread (lane, warp) holds under Triton's blocked layout: per dim,
    spt contiguous elements at lane*spt + warp*spt*tpw, the CTA tile repeated over the shape,
    coordinates wrapping (copies) when the tile is larger than the shape."""
    ln = split_index(lane, b.tpw, b.order)
    wp = split_index(warp, b.wpc, b.order)
    per_dim = []
    for d, size in enumerate(shape):
        tile = b.spt[d] * b.tpw[d] * b.wpc[d]
        base = wp[d] * b.spt[d] * b.tpw[d] + ln[d] * b.spt[d]
        reps = max(1, size // tile)
        per_dim.append({(rep * tile + base + s) % size for rep in range(reps) for s in range(b.spt[d])})
    return set(itertools.product(*per_dim))


def map_elements(m: LM.LinearMap, lane, warp):
    regs = [m.coord(r, lane, warp) for r in range(m.num_regs)]
    assert len(set(regs)) == len(regs), "a thread holds one element in two registers"
    return set(regs)


def mma_coord(m: L.MmaLayout, shape, lane, warp, reg):
    """PTX ISA wgmma D fragment (f32 accumulator, m64nN): within a warp's 16 rows, lane t holds
    d[i] at row t/4 + 8*((i/2)%2) and column 2*(t%4) + i%2 + 8*(i/4). Warps of a warpgroup stack
    along M; warpgroups split M then N; instruction tiles repeat along N then M."""
    wm, wn = m.wpc
    n = m.instr[1]
    per = n // 2
    nN = shape[1] // (n * wn)
    tile, i = divmod(reg, per)
    mi, nj = divmod(tile, nN)
    w_m, w_n = warp % wm, warp // wm
    row = 16 * w_m + lane // 4 + 8 * ((i // 2) % 2) + mi * 16 * wm
    col = w_n * n + 2 * (lane % 4) + (i % 2) + 8 * (i // 4) + nj * n * wn
    return row, col


def dotop_coord(d: L.DotOperandLayout, shape, lane, warp, reg):
    """PTX ISA wgmma register A fragment: four 32-bit registers a0..a3 per thread, each holding
    kw = 32/bits consecutive K elements; a0: row t/4, cols kw*(t%4) + [0, kw); a1: row +8; a2: col
    +4*kw; a3: both. Instruction tiles repeat along K then M; warps along N hold copies."""
    wm, wn = d.parent.wpc
    kw = d.kwidth
    per = 4 * kw
    nK = shape[1] // (8 * kw)
    tile, r = divmod(reg, per)
    mi, kk = divmod(tile, nK)
    q, e = divmod(r, kw)
    w_m = warp % wm
    row = 16 * w_m + lane // 4 + 8 * (q % 2) + mi * 16 * wm
    col = kw * (lane % 4) + e + 4 * kw * (q // 2) + kk * 8 * kw
    return row, col


def nvmma_rowwise(lay: L.NVMMASharedLayout, shape, ebytes):
    """Byte offset of every element of an NVMMA tile, as TMA writes it: the inner dim is cut into
    columns of `atom` bytes, each column stores all rows `atom` bytes apart, and in each row the
    16-byte chunk index is XORed with the row's phase (128B: row % 8, 64B: (row/2) % 4, 32B:
    (row/4) % 2)."""
    if lay.transposed:
        inner = nvmma_rowwise(L.NVMMASharedLayout(lay.swizzle, lay.bits, False), (shape[1], shape[0]), ebytes)
        return inner.T
    rows = int(np.prod(shape[:-1]))
    cols = shape[-1]
    atom = max(lay.swizzle, 16)
    out = np.zeros((rows, cols), dtype=np.int64)
    for r in range(rows):
        for c in range(cols):
            b = c * ebytes
            j, inrow = divmod(b, atom)
            chunk, byte = divmod(inrow, 16)
            if lay.swizzle == 128:
                chunk ^= r % 8
            elif lay.swizzle == 64:
                chunk ^= (r // 2) % 4
            elif lay.swizzle == 32:
                chunk ^= (r // 4) % 2
            out[r, c] = j * rows * atom + r * atom + chunk * 16 + byte
    return out.reshape(shape)


def swizzled_rowwise(lay: L.SwizzledSharedLayout, shape, ebytes):
    """Triton's classic shared layout for 1-D and row-major 2-D buffers."""
    if len(shape) == 1:
        return np.arange(shape[0]) * ebytes
    inner = lay.order[0]
    outer = lay.order[1]
    out = np.zeros(shape, dtype=np.int64)
    for idx in itertools.product(*[range(s) for s in shape]):
        r, c = idx[outer], idx[inner]
        phase = (r // lay.per_phase) % lay.max_phase
        cs = ((c // lay.vec) ^ phase) * lay.vec + c % lay.vec
        out[idx] = (r * shape[inner] + cs) * ebytes
    return out


# ---------------------------------------------------------------------------------------------
# the layouts and shapes the catalogue uses
# ---------------------------------------------------------------------------------------------

def _catalog_layouts():
    from catalog import CASES
    from tlx.compiler.options import CompileOptions
    from tlx.compiler.pipeline import PIPELINE, compile_module

    upto = []
    for p in PIPELINE:
        upto.append(p)
        if p.name == "layouts":
            break
    dist, shared = set(), set()
    for c in CASES:
        try:
            m = c.trace()
            compile_module(m, CompileOptions(num_warps=c.num_warps), passes=upto, snapshots=False)
        except Exception:
            continue
        vals = []
        for op in m.ops():
            vals += list(op.results) + [a for r in op.regions for a in r.block.args]
        for v in vals:
            t = v.type
            if isinstance(t, T.TensorType) and t.layout is not None:
                dist.add((t.layout, tuple(t.shape)))
            if isinstance(t, T.MemDescType) and t.layout is not None and not t.buffers:
                shared.add((t.layout, tuple(t.buffer_shape), max(1, t.element.bits // 8)))
    return sorted(dist, key=str), sorted(shared, key=str)


DIST, SHARED = _catalog_layouts()


def _threads(m: LM.LinearMap):
    return range(m.num_warps), range(32)


def _check_against(layout, shape, elements_fn):
    m = LM.to_map(layout, shape)
    covered = set()
    for w in range(m.num_warps):
        for ln in range(32):
            got = map_elements(m, ln, w)
            assert got == elements_fn(ln, w), f"{layout} over {shape}: thread (warp {w}, lane {ln})"
            covered |= got
    assert covered == set(itertools.product(*[range(s) for s in shape])), "some element has no thread"


def test_the_catalogue_uses_every_kind_of_layout():
    kinds = {type(lay).__name__ for lay, _ in DIST}
    assert {"BlockedLayout", "SliceLayout", "MmaLayout", "DotOperandLayout"} <= kinds
    assert any(isinstance(lay, L.NVMMASharedLayout) and lay.swizzle == 128 for lay, _, _ in SHARED)


@pytest.mark.parametrize("layout,shape", [x for x in DIST if isinstance(x[0], L.BlockedLayout)], ids=str)
def test_blocked_layouts_of_the_catalogue(layout, shape):
    _check_against(layout, shape, lambda ln, w: blocked_elements(layout, shape, ln, w))


def _slice_elements(s: L.SliceLayout, shape, ln, w):
    pshape = tuple(shape[:s.dim]) + (1,) + tuple(shape[s.dim:])
    if isinstance(s.parent, L.BlockedLayout):
        parent = blocked_elements(s.parent, pshape, ln, w)
    elif isinstance(s.parent, L.MmaLayout):
        parent = set()
        # the parent's fragment over a whole instruction tile, folded onto the (size-1) slice dim
        fshape = (max(pshape[0], 16 * s.parent.wpc[0]), max(pshape[1], s.parent.instr[1] * s.parent.wpc[1]))
        fm = LM.to_map(s.parent, fshape)
        for r in range(fm.num_regs):
            row, col = mma_coord(s.parent, fshape, ln, w, r)
            parent.add((row % pshape[0], col % pshape[1]))
    elif isinstance(s.parent, L.SliceLayout):
        parent = {c[:s.parent.dim] + (0,) + c[s.parent.dim:] for c in _slice_elements(s.parent, pshape[:s.parent.dim] + pshape[s.parent.dim + 1:], ln, w)}
    elif isinstance(s.parent, L.LinearLayout):
        # a linear parent (from reshape / trans, checked in their own test): its elements as the
        # bases say, then the projection is what is under test
        parent = map_elements(LM.to_map(s.parent, pshape), ln, w)
    else:
        raise AssertionError(f"no second implementation for slices of {type(s.parent).__name__}")
    return {c[:s.dim] + c[s.dim + 1:] for c in parent}


@pytest.mark.parametrize("layout,shape", [x for x in DIST if isinstance(x[0], L.SliceLayout)], ids=str)
def test_slice_layouts_of_the_catalogue(layout, shape):
    _check_against(layout, shape, lambda ln, w: _slice_elements(layout, shape, ln, w))


@pytest.mark.parametrize("layout,shape", [x for x in DIST if isinstance(x[0], L.MmaLayout)], ids=str)
def test_mma_layouts_of_the_catalogue_match_the_wgmma_fragment(layout, shape):
    m = LM.to_map(layout, shape)
    wm, wn = layout.wpc
    fshape = (max(shape[0], 16 * wm), max(shape[1], layout.instr[1] * wn))
    if fshape != tuple(shape):
        # smaller than one instruction tile (a broadcast operand): the fragment folded onto it
        fm = LM.to_map(layout, fshape)

        def folded(ln, w):
            return {(r_ % shape[0], c_ % shape[1])
                    for r_, c_ in (mma_coord(layout, fshape, ln, w, r) for r in range(fm.num_regs))}

        _check_against(layout, shape, folded)
        return
    for w in range(m.num_warps):
        for ln in range(32):
            for r in range(m.num_regs):
                assert m.coord(r, ln, w) == mma_coord(layout, shape, ln, w, r), (w, ln, r)


@pytest.mark.parametrize("layout,shape", [x for x in DIST if isinstance(x[0], L.DotOperandLayout)], ids=str)
def test_dot_operand_layouts_of_the_catalogue_match_the_wgmma_a_fragment(layout, shape):
    m = LM.to_map(layout, shape)
    for w in range(m.num_warps):
        for ln in range(32):
            for r in range(m.num_regs):
                assert m.coord(r, ln, w) == dotop_coord(layout, shape, ln, w, r), (w, ln, r)


@pytest.mark.parametrize("layout,shape", [x for x in DIST if isinstance(x[0], L.LinearLayout)], ids=str)
def test_linear_layouts_of_the_catalogue_are_complete(layout, shape):
    m = LM.to_map(layout, shape)
    seen = set()
    for w in range(m.num_warps):
        for ln in range(32):
            seen |= map_elements(m, ln, w)
    assert seen == set(itertools.product(*[range(s) for s in shape]))


# ---------------------------------------------------------------------------------------------
# sweeps beyond the catalogue
# ---------------------------------------------------------------------------------------------

BLOCKED_SWEEP = [
    (L.BlockedLayout((1, 8), (4, 8), (8, 1), (1, 0)), (128, 64)),
    (L.BlockedLayout((1, 8), (1, 32), (8, 1), (1, 0)), (64, 256)),
    (L.BlockedLayout((4,), (32,), (4,), (0,)), (1024,)),
    (L.BlockedLayout((4,), (32,), (4,), (0,)), (64,)),
    (L.BlockedLayout((2, 1), (8, 4), (1, 4), (0, 1)), (32, 32)),
    (L.BlockedLayout((1, 4), (2, 16), (2, 2), (1, 0)), (8, 16)),
    (L.BlockedLayout((1, 1, 4), (2, 4, 4), (1, 2, 2), (2, 1, 0)), (4, 16, 32)),
]


@pytest.mark.parametrize("layout,shape", BLOCKED_SWEEP, ids=str)
def test_blocked_sweep(layout, shape):
    _check_against(layout, shape, lambda ln, w: blocked_elements(layout, shape, ln, w))


MMA_SWEEP = [
    (L.MmaLayout(3, (4, 1), (16, 256, 16)), (64, 256)),
    (L.MmaLayout(3, (8, 1), (16, 256, 16)), (128, 256)),
    (L.MmaLayout(3, (8, 1), (16, 128, 16)), (128, 128)),
    (L.MmaLayout(3, (4, 2), (16, 64, 16)), (64, 128)),
    (L.MmaLayout(3, (4, 1), (16, 128, 16)), (256, 256)),
    (L.MmaLayout(3, (4, 1), (16, 8, 32)), (64, 8)),
]


@pytest.mark.parametrize("layout,shape", MMA_SWEEP, ids=str)
def test_mma_sweep(layout, shape):
    test_mma_layouts_of_the_catalogue_match_the_wgmma_fragment(layout, shape)


@pytest.mark.parametrize("layout,shape", [
    (L.DotOperandLayout(0, L.MmaLayout(3, (4, 1), (16, 128, 16)), 2), (64, 128)),
    (L.DotOperandLayout(0, L.MmaLayout(3, (8, 1), (16, 64, 32)), 4), (128, 64)),
    (L.DotOperandLayout(0, L.MmaLayout(3, (4, 2), (16, 64, 8)), 1), (64, 32)),
], ids=str)
def test_dot_operand_sweep(layout, shape):
    test_dot_operand_layouts_of_the_catalogue_match_the_wgmma_a_fragment(layout, shape)


def test_mma_accumulator_is_the_register_a_operand_for_16_bit_inputs():
    """P = softmax(QK^T) feeds the next wgmma from registers: for 16-bit operands the f32
    accumulator layout of an N=K tile is the register-A layout (a renaming, no data movement)."""
    mma = L.MmaLayout(3, (4, 1), (16, 128, 16))
    acc = LM.to_map(mma, (64, 128))
    a = LM.to_map(L.DotOperandLayout(0, mma, 2), (64, 128))
    assert acc.lane == a.lane and acc.warp == a.warp and set(acc.reg_coords()) == set(a.reg_coords())


def test_reshape_trans_join_split_move_no_element():
    base = LM.to_map(L.MmaLayout(3, (4, 1), (16, 256, 16)), (64, 256))
    r = LM.reshape_map(base, (64, 2, 128))
    t = LM.permute_map(r, (0, 2, 1))
    assert LM.split_bit(t) is not None
    half = LM.split_map(t)
    for w in range(4):
        for ln in range(32):
            for reg in range(base.num_regs):
                row, col = base.coord(reg, ln, w)
                c3 = r.coord(reg, ln, w)
                assert c3 == (row, col // 128, col % 128)
                assert t.coord(reg, ln, w) == (row, col % 128, col // 128)
    assert half.shape == (64, 128) and half.num_regs == base.num_regs // 2
    j = LM.join_map(half)
    assert j.shape == (64, 128, 2) and j.lane == t.lane


# ---------------------------------------------------------------------------------------------
# shared memory
# ---------------------------------------------------------------------------------------------

def _offsets(sm: LM.SharedMap):
    idx = np.indices(sm.shape).reshape(len(sm.shape), -1).T
    return np.array([sm.offset(tuple(c)) for c in idx]).reshape(sm.shape)


SHARED_SWEEP = [(L.NVMMASharedLayout(sw, bits, tr), shape, bits // 8)
                for sw, bits, tr, shape in [(128, 16, False, (64, 64)), (128, 16, False, (64, 256)),
                                            (128, 16, True, (64, 128)), (64, 16, False, (16, 32)),
                                            (32, 16, False, (8, 16)), (0, 16, False, (8, 8)),
                                            (128, 8, False, (64, 128)), (128, 32, False, (32, 64)),
                                            (64, 32, True, (16, 64)), (0, 16, False, (4, 64))]]


@pytest.mark.parametrize("layout,shape,eb", SHARED + SHARED_SWEEP, ids=str)
def test_shared_layout_offsets(layout, shape, eb):
    sm = LM.shared_map(layout, shape, eb)
    got = _offsets(sm)
    if isinstance(layout, L.NVMMASharedLayout):
        want = nvmma_rowwise(layout, shape, eb)
    else:
        want = swizzled_rowwise(layout, shape, eb)
    np.testing.assert_array_equal(got, want)
    # a bijection onto the buffer's element slots
    assert sorted(got.ravel().tolist()) == list(range(0, int(np.prod(shape)) * eb, eb))


def test_register_to_shared_offsets_compose_linearly():
    """One address per thread plus a constant per register: the XOR of the per-bit offsets is
    the offset of the element, for every register of every thread."""
    m = LM.to_map(L.MmaLayout(3, (4, 1), (16, 128, 16)), (64, 128))
    sm = LM.shared_map(L.NVMMASharedLayout(128, 16, False), (64, 128), 2)
    reg, lane, warp = LM.compose(m, sm)
    for w in range(4):
        for ln in range(32):
            for r in range(m.num_regs):
                x = 0
                for bases, bits in ((reg, r), (lane, ln), (warp, w)):
                    for i, b in enumerate(bases):
                        if (bits >> i) & 1:
                            x ^= b
                assert x == LM.nvmma_offset(L.NVMMASharedLayout(128, 16, False), (64, 128), 2, m.coord(r, ln, w))


def test_contiguous_registers_give_16_byte_vectors():
    m = LM.to_map(L.BlockedLayout((1, 8), (4, 8), (4, 1), (1, 0)), (64, 64))
    sm = LM.shared_map(L.NVMMASharedLayout(128, 16, False), (64, 64), 2)
    reg, _, _ = LM.compose(m, sm)
    assert LM.contiguous_regs(reg, 2) == 8


@pytest.mark.parametrize("layout,shape,smem", [
    (L.MmaLayout(3, (4, 1), (16, 128, 16)), (64, 128), L.NVMMASharedLayout(128, 16, False)),
    (L.MmaLayout(3, (8, 1), (16, 256, 16)), (128, 256), L.NVMMASharedLayout(128, 16, False)),
    (L.DotOperandLayout(0, L.MmaLayout(3, (4, 1), (16, 64, 16)), 2), (64, 64), L.NVMMASharedLayout(64, 16, False)),
    (L.MmaLayout(3, (4, 1), (16, 64, 16)), (64, 64), L.NVMMASharedLayout(32, 16, True)),
], ids=str)
def test_stmatrix_ldmatrix_row_addresses(layout, shape, smem):
    """ldmatrix/stmatrix semantics (PTX ISA): lane t supplies the address of row t%8 of matrix
    t//8; in matrix j, lane l holds in its register j the two elements at row l/4, columns
    2(l%4), +1 of that matrix. Every element of every register must land at its buffer offset."""
    from tlx.compiler.codegen.lower_memory import _matrix_groups, matrix_plan

    m = LM.to_map(layout, shape)
    sm = LM.shared_map(smem, shape, 2)
    reg, lane, warp = LM.compose(m, sm)
    plan = matrix_plan(2, list(reg), list(lane), list(warp))
    if smem.transposed:  # neighbours are a row apart: no 8x8-matrix instruction
        assert plan is None
        return
    assert plan is not None
    sel, lane_vals = plan

    def xor_bits(vals, x):
        o = 0
        for i, v in enumerate(vals):
            if (x >> i) & 1:
                o ^= v
        return o

    for w in range(m.num_warps):
        for g, mats in _matrix_groups(m.num_regs, sel):
            static = xor_bits(reg, g)
            row_addr = [static ^ xor_bits(lane_vals, t) ^ xor_bits(warp, w) for t in range(32)]
            for j, r in enumerate(mats):
                for ln in range(32):
                    for e in range(2):
                        want = sm.offset(m.coord(r | e, ln, w))
                        got = row_addr[8 * j + ln // 4] + 2 * (2 * (ln % 4) + e)
                        assert got == want, (w, g, j, ln, e)


# ---------------------------------------------------------------------------------------------
# wgmma shared-memory descriptors, read back as the hardware reads them
# ---------------------------------------------------------------------------------------------

def _wgmma_reads(start, lbo, sbo, swizzle, mn_major, ebytes, mn, k):
    """The byte address wgmma reads element (mn, k) of an operand tile from (PTX ISA canonical
    layouts): 8-row swizzle atoms of `S` bytes per row (S = swizzle width, 16 without one); K-major:
    rows = MN at S bytes, 8-row groups SBO apart, K beyond one atom row LBO apart; MN-major: rows
    = K, 8-row groups SBO apart, MN beyond one atom row LBO apart (no swizzle: the two swap). The
    swizzle XORs address bits 7.. into the 16-byte chunk bits 4.. of the final address."""
    S = max(swizzle, 16)
    if mn_major:
        if swizzle == 0:
            lbo, sbo = sbo, lbo
        a = start + ((mn * ebytes) // S) * lbo + (k // 8) * sbo + (k % 8) * S + (mn * ebytes) % S
    else:
        a = start + (mn // 8) * sbo + (mn % 8) * S + ((k * ebytes) // S) * lbo + (k * ebytes) % S
    if swizzle >= 32:
        a ^= ((a >> 7) & (swizzle // 16 - 1)) << 4
    return a


DESCRIPTOR_CASES = [
    # (storage shape, swizzle, bits, view transposed?, operand, MN extent of one instruction)
    ((128, 64), 128, 16, False, "A", 64),     # A K-major, two warpgroups' / m-reps' rows
    ((64, 256), 128, 16, False, "B", 256),    # B MN-major: four atom columns per instruction
    ((128, 64), 128, 16, True, "B", 128),     # B K-major (a transposed [N, K] buffer)
    ((64, 128), 128, 16, True, "A", 64),      # A MN-major (a transposed [K, M] buffer)
    ((64, 32), 64, 16, False, "A", 64),       # 64-byte swizzle
    ((32, 64), 64, 16, False, "B", 64),       # MN-major, 64-byte swizzle, one atom column per 32
    ((64, 16), 32, 16, False, "A", 64),       # 32-byte swizzle
    ((64, 128), 128, 8, False, "A", 64),      # fp8 K-major (k32)
    ((64, 32), 128, 32, False, "A", 64),      # tf32 K-major (k8)
    ((64, 16), 0, 16, False, "A", 64),        # no swizzle: 16-byte atoms, LBO steps along K
    ((64, 16), 0, 16, True, "B", 64),         # no swizzle, K-major B (storage [N=64, K=16])
    ((16, 64), 0, 16, False, "B", 64),        # no swizzle, MN-major B (LBO and SBO swap)
]


@pytest.mark.parametrize("case", DESCRIPTOR_CASES, ids=str)
def test_wgmma_descriptor_addresses_match_the_buffer_layout(case):
    from tlx.compiler.codegen.lower_async import operand_geometry
    from tlx.compiler.codegen.values import SmemView

    shape, sw, bits, trans, which, mn_ext = case
    eb = bits // 8
    lay = L.NVMMASharedLayout(sw, bits, False)
    perm = (1, 0) if trans else (0, 1)
    vshape = (shape[1], shape[0]) if trans else shape
    view = SmemView("%base", T.SCALAR_TYPES[{16: "f16", 8: "f8e4m3", 32: "f32"}[bits]], lay, shape, perm, vshape)
    kstep = 32 // eb
    mn_dim = 0 if which == "A" else 1
    k_dim = 1 - mn_dim
    lbo, sbo, mode, mn_major = operand_geometry(view, mn_dim, mn_ext, kstep)
    sm = view.smap()
    assert mode == {0: 0, 128: 1, 64: 2, 32: 3}[sw]
    for t0 in range(0, vshape[mn_dim], mn_ext):
        for k0 in range(0, vshape[k_dim], kstep):
            origin = [0, 0]
            origin[mn_dim], origin[k_dim] = t0, k0
            start = view.element_bases(tuple(origin))
            if sw:
                assert (start >> 7) & (sw // 16 - 1) == 0, "a tile starts inside a swizzle pattern"
            for mn in range(mn_ext):
                for k in range(kstep):
                    c = [0, 0]
                    c[mn_dim], c[k_dim] = t0 + mn, k0 + k
                    want = sm.offset(view.storage_coord(tuple(c)))
                    got = _wgmma_reads(start, lbo, sbo, sw, mn_major, eb, mn, k)
                    assert got == want, (case, t0, k0, mn, k, got, want)


def _tma_writes(dst, ebytes, swizzle, box, r, c):
    """Where a TMA box copy puts element (r, c) of its box: rows of the box's inner extent
    (box_inner * ebytes bytes, at most the swizzle width), consecutive; the swizzle XORs the
    16-byte chunk index with address bits 7.. (CUDA's CU_TENSOR_MAP_SWIZZLE_*)."""
    row = box[-1] * ebytes
    a = dst + r * row + c * ebytes
    if swizzle >= 32:
        a ^= ((a >> 7) & (swizzle // 16 - 1)) << 4
    return a


@pytest.mark.parametrize("shape,sw,bits", [((64, 64), 128, 16), ((64, 256), 128, 16), ((128, 32), 64, 16),
                                            ((64, 16), 32, 16),
                                            ((512, 64), 128, 16), ((64, 128), 128, 8), ((32, 64), 128, 32)],
                         ids=str)
def test_tma_boxes_land_where_the_layout_expects(shape, sw, bits):
    """The code generator splits a tile into TMA copies (atom columns, 256-row chunks); each
    copy's box, written by the TMA unit, must put every element at its NVMMA offset."""
    from tlx.compiler.codegen.lower_async import tma_box
    from tlx.compiler.codegen.values import SmemView

    eb = bits // 8
    lay = L.NVMMASharedLayout(sw, bits, False)
    view = SmemView("%b", T.SCALAR_TYPES[{16: "f16", 8: "f8e4m3", 32: "f32"}[bits]], lay, shape, (0, 1), shape)
    box = tma_box(shape, eb, sw)
    sm = view.smap()
    seen = set()
    for c0 in range(0, shape[1], box[1]):
        for r0 in range(0, shape[0], box[0]):
            dst = view.element_bases((r0, c0))
            for r in range(box[0]):
                for c in range(box[1]):
                    got = _tma_writes(dst, eb, sw, box, r, c)
                    assert got == sm.offset((r0 + r, c0 + c)), (r0, c0, r, c)
                    seen.add(got)
    assert len(seen) == shape[0] * shape[1]

"""User shared-memory layouts: `tlx.local_alloc(..., layout=...)` with the real TLX's layout objects,
their index math against independent formulas, the IR and PTX they give, and the combinations the
hardware cannot do (TMA and wgmma read NVMMA buffers only), rejected with a clear error."""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import tlx  # noqa: E402
import tlx.language as tl  # noqa: E402
from filecheck import filecheck  # noqa: E402
from tlx.compiler.analysis import layout_math as LM  # noqa: E402
from tlx.compiler.errors import TLXCompileError  # noqa: E402
from tlx.compiler.ir import layouts as L  # noqa: E402

RNG_L = np.random.default_rng(7)


# ---- the layout objects ------------------------------------------------------------------------

@pytest.mark.parametrize("bits,base,shift,shape,want", [
    # (vec, perPhase, maxPhase) = (2**M, 2**(S+M) // contiguous extent, 2**B)
    ((3, 0, 6), None, None, [128, 64], (1, 1, 8)),
    ((3, 0, 7), None, None, [128, 64], (1, 2, 8)),
    ((2, 1, 3), None, None, [16, 8], (2, 2, 4)),
    ((3, 3, 4), None, None, [64, 128], (8, 1, 8)),
])
def test_a_cute_swizzle_resolves_to_vec_per_phase_max_phase(bits, base, shift, shape, want):
    enc = tlx.swizzled_layout(*bits, order=[1, 0])._to_encoding(shape=shape)
    assert type(enc) is tlx.swizzled_shared_layout_encoding
    assert (enc.vectorSize, enc.perPhase, enc.maxPhase) == want
    assert enc.order == [1, 0]


def test_a_swizzle_whose_phase_advances_inside_a_row_is_an_assertion_error_and_a_tlx_error():
    with pytest.raises(AssertionError, match="perPhase < 1") as e:
        tlx.swizzled_layout(3, 0, 4, order=[1, 0])._to_encoding(shape=[64, 64])
    assert isinstance(e.value, tlx.TLXError)


def test_the_unswizzled_default_resolves_without_a_shape_and_a_real_swizzle_needs_one():
    a = tlx.layout(tlx.swizzled_layout.make_default(rank=3))
    assert type(a) is tlx.swizzled_shared_layout_encoding
    assert (a.vectorSize, a.perPhase, a.maxPhase, a.order) == (1, 1, 1, [2, 1, 0])
    s = tlx.swizzled_layout(2, 0, 2, order=[1, 0])
    assert tlx.layout(s) is s
    with pytest.raises(ValueError, match="needs the buffer shape"):
        s._to_encoding()


def test_a_register_layout_is_not_a_shared_layout_and_needs_shape_and_stride():
    r = tlx.layout(shape=((32, 4), (8,)), stride=((8, 256), (1,)))
    assert isinstance(r, tlx.layout) and not isinstance(r, tlx.shared_layout_encoding)
    reg, lane, warp = r.linear_bases([32, 32])
    assert reg == [[0, 1], [0, 2], [0, 4]]
    assert lane == [[0, 8], [0, 16], [1, 0], [2, 0], [4, 0]]
    assert warp == [[8, 0], [16, 0]]
    with pytest.raises(AssertionError):
        tlx.layout()


def test_layouts_are_values_equal_by_fields_with_a_repr_that_names_them():
    a = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [128, 64])
    b = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [128, 64], [1, 0])
    c = tlx.padded_shared_layout_encoding.with_identity_for([(64, 4)], [128, 64])
    assert a == b and hash(a) == hash(b) and a != c
    assert "intervals=[64]" in repr(a) and "paddings=[8]" in repr(a) and "0x" not in repr(a)
    assert tlx.swizzled_layout(3, 0, 6) == tlx.swizzled_layout(3, 0, 6)
    assert len({tlx.swizzled_layout(3, 0, 6), tlx.swizzled_layout(3, 0, 6), tlx.swizzled_layout(3, 0, 7)}) == 2


def test_padded_with_bases_keeps_the_linear_component():
    bases = [[0, 1], [0, 2], [1, 0], [2, 0]]
    enc = tlx.padded_shared_layout_encoding.with_bases([(8, 2)], bases, [4, 4])
    assert (enc.intervals, enc.paddings, enc.offset_bases, enc.block_bases, enc.order, enc.shape) == \
           ([8], [2], bases, [], [1, 0], [4, 4])
    with pytest.raises(ValueError, match="length rank=2"):
        tlx.padded_shared_layout_encoding.with_bases([(8, 2)], [[0, 1, 0]], [4, 4])
    with pytest.raises(ValueError, match="power of two"):
        tlx.padded_shared_layout_encoding.with_identity_for([(48, 8)], [4, 4])


# ---- index math against independent formulas -----------------------------------------------------

def _swizzled_reference(shape, vec, per_phase, max_phase, c):
    """Triton's swizzled_shared, written out: in the two fastest dims (order [1, 0]) column groups of
    `vec` are XORed with the row's phase, wrapping around the row; row-major otherwise."""
    rows, cols = shape
    r, col = c
    phase = (r // per_phase) % max_phase
    return r * cols + (col ^ ((phase * vec) % cols))


@pytest.mark.parametrize("shape,vec,pp,mp", [((64, 64), 1, 1, 8), ((32, 16), 2, 2, 4), ((16, 4), 1, 1, 8),
                                             ((8, 128), 8, 1, 8)])
def test_swizzled_offsets_match_the_reference_and_are_a_bijection(shape, vec, pp, mp):
    m = LM.shared_map(L.SwizzledSharedLayout(vec, pp, mp, (1, 0)), shape, 2)
    seen = set()
    for c in itertools.product(range(shape[0]), range(shape[1])):
        off = m.byte_of(c)
        assert off == 2 * _swizzled_reference(shape, vec, pp, mp, c), c
        seen.add(off)
    assert len(seen) == shape[0] * shape[1]


def test_padded_offsets_insert_the_padding_after_every_interval():
    enc = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8), (256, 4)], [32, 32])
    lay = enc.resolve((32, 32), tl.float16)
    m = LM.shared_map(lay, (32, 32), 2)
    for r, c in itertools.product(range(32), range(32)):
        o = r * 32 + c
        assert m.byte_of((r, c)) == 2 * (o + (o // 64) * 8 + (o // 256) * 4)
    assert lay.padded_numel(1024) == 1024 + 16 * 8 + 4 * 4


def test_a_shared_linear_layout_puts_each_element_where_its_bases_say():
    bases = [[0, 1], [0, 2], [1, 0], [2, 0], [0, 4], [4, 0], [0, 8]]  # 8 x 16, columns and rows interleaved
    lay = tlx.shared_linear_layout_encoding(bases, [], 32).resolve((8, 16), tl.float32)
    m = LM.shared_map(lay, (8, 16), 4)
    for o in range(128):
        coord = [0, 0]
        for k, b in enumerate(bases):  # the element at offset o: XOR of the bases of o's set bits
            if o >> k & 1:
                coord = [coord[0] ^ b[0], coord[1] ^ b[1]]
        assert m.byte_of(tuple(coord)) == 4 * o, (o, coord)


@pytest.mark.parametrize("bases,match", [
    ([[0, 1], [0, 2], [0, 1], [1, 0], [2, 0], [4, 0], [0, 4]], "map two offsets to one element"),
    ([[0, 1], [0, 2], [1, 0]], "needs 7 offset bases"),
    ([[0, 1], [0, 2], [1, 0], [2, 0], [4, 0], [8, 0], [0, 4]], "is not a coordinate"),
])
def test_offset_bases_that_are_not_a_bijection_are_refused(bases, match):
    with pytest.raises(TLXCompileError, match=match):
        LM.shared_map(L.SharedLinearLayout(tuple(map(tuple, bases))), (8, 16), 4)


# ---- through the compiler ----------------------------------------------------------------------

@tlx.jit
def roundtrip_kernel(x_ptr, y_ptr, LAYOUT: tl.constexpr, M: tl.constexpr, N: tl.constexpr, NUM: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    buf = tlx.local_alloc((M, N), tl.float16, NUM, layout=LAYOUT)
    v = tlx.local_view(buf, NUM - 1)
    tlx.local_store(v, x)
    tl.store(y_ptr + offs, tlx.local_load(v))


SIG = {"x_ptr": "*fp16", "y_ptr": "*fp16"}
DIV = {"x_ptr": 16, "y_ptr": 16}


def compile_roundtrip(layout, num=1, m=128, n=64):
    return tlx.compile(roundtrip_kernel, signature=SIG, constexprs={"LAYOUT": layout, "M": m, "N": n, "NUM": num},
                       divisibility=DIV)


def test_the_buffer_keeps_the_users_swizzle_through_every_pass():
    k = compile_roundtrip(tlx.swizzled_layout(3, 0, 6, order=[1, 0]), num=2)
    for stage in ("ir", "ir.layouts", "ir.cta_barriers"):
        filecheck(k.asm[stage], """
        CHECK: tlx.local_alloc {{.*}}!smem<2x128x64xf16, #swizzled<vec=1, per_phase=1, max_phase=8, order=[1,0]>, buffers=2
        CHECK: tlx.memdesc_index {{.*}}#swizzled<vec=1, per_phase=1, max_phase=8, order=[1,0]>
        CHECK-NOT: #nvmma
        CHECK: tlx.local_store
        CHECK: tlx.local_load
        """)


@pytest.mark.parametrize("layout,store", [
    # a one-element swizzle permutes elements inside every 16 bytes: no vector may span it
    (tlx.swizzled_layout(3, 0, 6, order=[1, 0]), "st.shared.b16"),
    (tlx.swizzled_shared_layout_encoding(2, 1, 8, [1, 0], [1, 1], [1, 1], [1, 1], [1, 0]), "st.shared.b32"),
    (tlx.swizzled_shared_layout_encoding(8, 1, 8, [1, 0], [1, 1], [1, 1], [1, 1], [1, 0]), "st.shared.v4.b32"),
    (tlx.nv_mma_shared_layout_encoding.make_default([128, 64], tl.float16), "st.shared.v4.b32"),
    # padding keeps only its own alignment: 8 halves (16 bytes) keep vectors, 1 half does not
    (tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [128, 64]), "st.shared.v4.b32"),
    (tlx.padded_shared_layout_encoding.with_identity_for([(64, 1)], [128, 64]), "st.shared.b16"),
    (tlx.shared_linear_layout_encoding([[0, 1], [0, 2], [0, 4], [0, 8], [1, 0], [2, 0], [4, 0], [8, 0], [0, 16],
                                        [0, 32], [16, 0], [32, 0], [64, 0]]), "st.shared.v4.b32"),
    # column-major: the loaded rows are not contiguous in memory
    (tlx.swizzled_shared_layout_encoding(1, 1, 1, [0, 1], [1, 1], [1, 1], [1, 1], [0, 1]), "st.shared.b16"),
])
def test_shared_accesses_vectorize_only_as_far_as_the_layout_keeps_elements_contiguous(layout, store):
    ptx = compile_roundtrip(layout).asm["ptx"]  # assembled by ptxas for sm_90a
    stores = {ln.split()[0] for ln in ptx.splitlines() if ln.strip().startswith("st.shared")}
    assert stores == {store}, stores


def test_a_padded_buffer_allocates_its_padding_and_a_linear_one_its_alignment():
    pad = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [128, 64])
    k = compile_roundtrip(pad, num=2)
    assert k.metadata["shared"] == 2 * 2 * (128 * 64 + 128 * 8)
    assert "#padded<intervals=[64], paddings=[8]" in k.asm["ir.layouts"]
    lin = tlx.shared_linear_layout_encoding([[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [0, 32], [1, 0], [2, 0],
                                             [4, 0], [8, 0], [16, 0], [32, 0], [64, 0]], alignment=1024)
    k = compile_roundtrip(lin)
    assert "alignment=1024" in k.asm["ir"]


@pytest.mark.parametrize("layout", [
    tlx.swizzled_layout(3, 0, 6, order=[1, 0]),
    tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [128, 64]),
    tlx.shared_linear_layout_encoding([[0, 1], [0, 2], [0, 4], [0, 8], [1, 0], [2, 0], [4, 0], [8, 0], [0, 16],
                                       [0, 32], [16, 0], [32, 0], [64, 0]]),
])
def test_a_round_trip_through_a_user_layout_gives_back_the_tile_on_the_interpreter(layout):
    x = np.random.default_rng(3).standard_normal((128, 64)).astype(np.float16)
    y = np.full_like(x, np.nan)
    tlx.interpret(roundtrip_kernel, (1,), x, y, LAYOUT=layout, M=128, N=64, NUM=2)
    np.testing.assert_array_equal(y.astype(np.float64), x.astype(np.float64))


@tlx.jit
def tma_into_kernel(d, LAYOUT: tl.constexpr):
    buf = tlx.local_alloc((64, 64), tl.float16, 1, layout=LAYOUT)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], 8192)
    tlx.async_descriptor_load(d, buf[0], [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)


@tlx.jit
def wgmma_from_kernel(c_ptr, LAYOUT: tl.constexpr):
    a = tlx.local_alloc((64, 64), tl.float16, 1, layout=LAYOUT)
    b = tlx.local_alloc((64, 64), tl.float16, 1)
    acc = tlx.async_dot(a[0], b[0])
    acc = tlx.async_dot_wait(0, acc)
    r = tl.arange(0, 64)
    tl.store(c_ptr + r[:, None] * 64 + r[None, :], acc)


@pytest.mark.parametrize("layout", [tlx.swizzled_layout(3, 0, 6, order=[1, 0]),
                                    tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [64, 64])])
def test_tma_and_wgmma_refuse_a_buffer_that_is_not_nvmma_at_the_line_that_asks(layout):
    with pytest.raises(TLXCompileError, match="TMA buffer needs a non-transposed NVMMA layout") as e:
        tlx.compile(tma_into_kernel, signature={"d": "tensordesc<fp16[64, 64]>"}, constexprs={"LAYOUT": layout})
    assert e.value.loc.line == tma_into_kernel.fn.__code__.co_firstlineno + 5 and "nv_mma_shared_layout" in e.value.hint
    with pytest.raises(TLXCompileError, match="operand A must be in an NVMMA shared layout") as e:
        tlx.compile(wgmma_from_kernel, signature={"c_ptr": "*fp32"}, constexprs={"LAYOUT": layout})
    assert e.value.loc.line == wgmma_from_kernel.fn.__code__.co_firstlineno + 4


def test_an_unswizzled_nvmma_layout_feeds_tma_with_16_byte_columns():
    lay = tlx.nv_mma_shared_layout_encoding([64, 64], [1, 0], tl.float16, [1, 1], [1, 1], [1, 0], False, False)
    k = tlx.compile(tma_into_kernel, signature={"d": "tensordesc<fp16[64, 64]>"}, constexprs={"LAYOUT": lay})
    assert "#nvmma<swizzle=0, bits=16" in k.asm["ir"]
    copies = [ln for ln in k.asm["ptx"].splitlines() if "cp.async.bulk.tensor.2d" in ln]
    assert len(copies) == 8  # 64 halves = 128 bytes per row, in 16-byte columns


@pytest.mark.parametrize("layout,cls,match", [
    (tlx.layout(shape=((32, 4), (8,)), stride=((8, 256), (1,))), TypeError, "register layout"),
    (1, TypeError, "must be a tlx.shared_layout_encoding"),
    (tlx.nv_mma_shared_layout_encoding.make_default([64, 64], tl.float16), ValueError, "made for shape"),
    (tlx.nv_mma_shared_layout_encoding.make_default([128, 64], tl.float32), ValueError, "made for fp32"),
    (tlx.nv_mma_shared_layout_encoding.make_default([128, 64], tl.float16, fp4Padded=True), ValueError, "Blackwell"),
    (tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [64, 128]), ValueError, "made for shape"),
    (tlx.swizzled_shared_layout_encoding(1, 1, 1, [0, 1], [1, 1], [2, 1], [1, 1], [0, 1]), ValueError, "cluster"),
    (tlx.shared_linear_layout_encoding([[0, 1], [1, 0]]), TLXCompileError, "needs 13 offset bases"),
])
def test_a_layout_that_does_not_fit_the_buffer_is_refused_with_the_real_tlx_error_class(layout, cls, match):
    with pytest.raises(cls, match=match) as e:
        compile_roundtrip(layout)
    assert isinstance(e.value, TLXCompileError)
    assert e.value.loc is not None and e.value.loc.line == roundtrip_kernel.fn.__code__.co_firstlineno + 4


@tlx.jit
def reinterpret_kernel(x_ptr, y_ptr, LAYOUT: tl.constexpr):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    buf = tlx.local_alloc((64, 64), tl.float16, 1, layout=LAYOUT)
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    flat = tlx.local_reinterpret(buf[0], tl.float16, [64 * 64],
                                 layout=tlx.swizzled_shared_layout_encoding.make_default(1))
    tl.store(y_ptr + tl.arange(0, 64 * 64), tlx.local_load(flat))


def test_reinterpret_takes_the_layout_it_is_given():
    k = tlx.compile(reinterpret_kernel, signature=SIG, constexprs={"LAYOUT": tlx.swizzled_layout(3, 0, 6)},
                    divisibility=DIV)
    filecheck(k.asm["ir.layouts"], """
    CHECK: tlx.local_alloc {{.*}}#swizzled<vec=1, per_phase=1, max_phase=8
    CHECK: tlx.memdesc_reinterpret {{.*}}!smem<4096xf16, #swizzled<vec=1, per_phase=1, max_phase=1, order=[0]>
    """)


@pytest.mark.parametrize("lay", [
    L.PaddedSharedLayout((64, 256), (8, 4), ((0, 1), (0, 2), (1, 0))),
    L.SharedLinearLayout(((0, 1), (1, 0)), 128),
    L.SwizzledSharedLayout(2, 1, 4, (0, 1)),
])
def test_the_new_shared_layouts_print_and_parse_back(lay):
    from tlx.compiler.ir import types as T
    from tlx.compiler.ir.parser import parse_type

    t = T.MemDescType((2, 4, 2), T.f16, lay, 2)
    assert parse_type(str(t)) == t


@tlx.jit
def rows_kernel(x_ptr, R: tl.constexpr, LAYOUT: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * 128 + tl.arange(0, 128)[None, :]
    buf = tlx.local_alloc((R, 128), tl.float16, 2, layout=LAYOUT)
    tlx.local_store(buf[1], tl.load(x_ptr + offs))


@pytest.mark.parametrize("rows,swizzle", [(1, 0), (4, 0), (8, 128), (64, 128)])
@pytest.mark.parametrize("explicit", [False, True])
def test_a_tile_of_fewer_than_8_rows_is_not_swizzled_as_in_tlx(rows, swizzle, explicit):
    lay = tlx.nv_mma_shared_layout_encoding.make_default([rows, 128], tl.float16) if explicit else None
    k = tlx.compile(rows_kernel, signature={"x_ptr": "*fp16"}, constexprs={"R": rows, "LAYOUT": lay})
    assert f"#nvmma<swizzle={swizzle}, bits=16, transposed=false>, buffers=2" in k.asm["ir"]


@tlx.jit
def rows_through_a_flat_view(d_in, d_out, ROWS: tl.constexpr, W: tl.constexpr):
    """A TMA load of one ROWS*W-element row into ROWS one-row buffers seen flat, each buffer
    scaled by its index + 1, and a TMA store of them seen flat again."""
    src = tlx.local_alloc((1, W), tl.float16, ROWS)
    dst = tlx.local_alloc((1, W), tl.float16, ROWS)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], ROWS * W * 2)
    tlx.async_descriptor_load(d_in, tlx.local_reinterpret(src, tl.float16, [1, ROWS * W]), [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    for k in tl.static_range(ROWS):
        tlx.local_store(dst[k], tlx.local_load(src[k]) * (k + 1))
    tlx.async_descriptor_store(d_out, tlx.local_reinterpret(dst, tl.float16, [1, ROWS * W]), [0, 0])
    tlx.async_descriptor_store_wait(0)


def test_a_buffer_array_seen_flat_is_one_unswizzled_row_for_tma():
    rows, w = 8, 32
    k = tlx.compile(rows_through_a_flat_view, signature={"d_in": f"tensordesc<fp16[1, {rows * w}]>",
                                                         "d_out": f"tensordesc<fp16[1, {rows * w}]>"},
                    constexprs={"ROWS": rows, "W": w})
    filecheck(k.asm["ir"], """
    CHECK: tlx.local_alloc {{.*}}!smem<8x1x32xf16, #nvmma<swizzle=0, bits=16, transposed=false>, buffers=8
    CHECK: tlx.memdesc_reinterpret {{.*}}!smem<1x256xf16, #nvmma<swizzle=0, bits=16, transposed=false>
    """)
    x = RNG_L.standard_normal((1, rows * w)).astype(np.float16)
    y = np.full_like(x, np.nan)
    tlx.interpret(rows_through_a_flat_view, (1,), tlx.TensorDescriptor(x, [1, rows * w], [rows * w, 1], [1, rows * w]),
                  tlx.TensorDescriptor(y, [1, rows * w], [rows * w, 1], [1, rows * w]), ROWS=rows, W=w)
    want = x.astype(np.float64).reshape(rows, w) * np.arange(1, rows + 1)[:, None]
    np.testing.assert_allclose(y.astype(np.float64).reshape(rows, w), want, rtol=1e-3)



def test_an_amd_mfma_layout_is_a_host_value_with_one_tile_factor_per_warp_axis():
    lay = tlx.amd_mfma_layout(3, [16, 16, 16], False, [2, 2])
    assert lay.tiles_per_warp == [1, 1] and lay.element_bitwidth == 32 and lay.cga_layout == []
    assert lay == tlx.amd_mfma_layout(3, [16, 16, 16], False, [2, 2], tiles_per_warp=[1, 1])
    assert lay != tlx.amd_mfma_layout(3, [16, 16, 16], False, [2, 2], tiles_per_warp=[1, 2])
    assert "tiles_per_warp=[1, 1]" in repr(lay)
    for bad in (dict(version=5), dict(instr_shape=[8, 8, 4]), dict(tiles_per_warp=[2, 2, 1]),
                dict(element_bitwidth=16)):
        args = dict(version=3, instr_shape=[16, 16, 16], transposed=False, warps_per_cta=[2, 2], **{})
        args.update(bad)
        with pytest.raises(AssertionError) as e:
            tlx.amd_mfma_layout(**args)
        assert isinstance(e.value, TLXCompileError), e.value


@tlx.jit
def _load_with_mfma(out_ptr):
    buf = tlx.local_alloc((32, 32), tl.float32, 1)
    tlx.local_store(buf[0], tl.zeros((32, 32), tl.float32))
    x = tlx.local_load(buf[0], layout=tlx.amd_mfma_layout(3, [32, 32, 8], False, [4, 1]))
    tl.store(out_ptr + tl.arange(0, 32)[:, None] * 32 + tl.arange(0, 32)[None, :], x)


def test_a_kernel_laying_a_tensor_out_as_amd_mfma_is_refused_at_its_line():
    with pytest.raises(TLXCompileError, match="amd_mfma_layout") as e:
        _load_with_mfma.warmup(np.zeros((32, 32), np.float32), grid=(1,))
    assert "test_lang_layouts.py" in str(e.value)


@tlx.jit
def _dumped(BLOCK: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    x = tl.arange(0, BLOCK)
    tlx.dump_layout(x)
    buf = tlx.local_alloc((BLOCK,), tl.int32, 1)
    tlx.local_store(buf[0], x)
    tlx.dump_layout(buf[0])
    tile = tlx.local_alloc((R, C), tl.float16, 1)
    tlx.dump_layout(tile[0])
    t2 = tl.zeros((R, C), tl.float32)
    tlx.dump_layout(t2)


def test_dump_layout_prints_the_resolved_layouts_in_cute_form_and_leaves_no_op(capfd, monkeypatch, tmp_path):
    """64 int32 over 4 warps of 32 lanes: lane l holds element l (one mode 32:1), warp bit 0 adds
    32, warp bit 1 copies (stride 0), no register bits (_1:_0); the plain 64-element buffer is
    64:1; a 128-byte-swizzled NVMMA tile is an XOR swizzle, not integer-strided."""
    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))  # it prints when the kernel compiles, not on a cache hit
    k = _dumped.warmup(BLOCK=64, R=64, C=64, grid=(1,), num_warps=4)
    err = capfd.readouterr().err
    blocks = err.split("// tlx.dump_layout @ ")[1:]
    assert len(blocks) == 4, err
    line = _dumped.fn.__code__.co_firstlineno
    assert blocks[0].startswith(f"{__file__}:{line + 3}:5")
    assert "//   cute: ((_32,_2,_2),_1):((_1,_32,_0),_0)" in blocks[0]
    assert "//   cute: _64:_1" in blocks[1]
    assert "not representable as a CuTe layout" in blocks[2] and "nvmma" in blocks[2]
    # 64 x 64 fp32 (flat index 64 r + c), blocked 1x4 per thread, 2x16 lanes, 4x1 warps: lanes step the
    # column by 4 to 32 then the row (64): one mode 32:4; warps rows 2, 4: 4:128; registers columns
    # 1, 2 (4:1) and the 8 row repeats 8, 16, 32 (8:512)
    assert "#blocked<spt=[1,4], tpw=[2,16], wpc=[4,1]" in blocks[3]
    assert "//   cute: ((_32,_4),(_4,_8)):((_4,_128),(_1,_512))" in blocks[3]
    assert "tlx.dump_layout" in k.asm["ir"]  # traced, then erased by the layout pass
    assert all("dump_layout" not in k.asm[key] for key in ("ir.layouts", "ir.smem_allocation", "ir.cta_barriers", "ptx"))


def test_cute_modes_collapse_runs_of_doubling_strides_and_of_copies():
    from tlx.compiler.passes.dump_layout import collapse_modes

    assert collapse_modes([1, 2, 4, 8, 16]) == [(32, 1)]
    assert collapse_modes([32, 0]) == [(2, 32), (2, 0)]
    assert collapse_modes([0, 0, 64, 128, 1]) == [(4, 0), (4, 64), (2, 1)]
    assert collapse_modes([]) == []


def test_dump_layout_of_a_scalar_is_a_value_error():
    @tlx.jit
    def k(x):
        tlx.dump_layout(x)

    with pytest.raises(ValueError, match="dump_layout takes a block tensor"):
        k.warmup(3, grid=(1,))

"""The parameter buffer: every parameter kind lands at the offset and size the ABI implies, the
void** array points at those slots, and scalar values are typed from the ABI, never guessed."""

import ctypes
import struct

import pytest

from tlx.compiler.abi import ParamABI, TMAEncoding, bf16_bits
from tlx.runtime.packing import ArgLayout, ArgPack, explain_bad_value, scalar_code
from tlx.runtime.errors import TLXRuntimeError

ENC = TMAEncoding("fp16", 2, (64, 64), (64, 64), 128)


def P(name, kind, dtype, size, align=None, **kw):
    return ParamABI(name, kind, dtype, size, align if align is not None else min(size, 64), **kw)


def test_every_param_kind_has_its_offset_and_size():
    params = [
        P("x", "pointer", "fp16", 8),
        P("flag", "scalar", "i1", 4),
        P("desc", "tensordesc", "fp16", 128, 64, tma=ENC),
        P("n", "scalar", "i32", 4),
        P("big", "scalar", "i64", 8),
        P("h", "scalar", "fp16", 2),
        P("alpha", "scalar", "fp32", 4),
        P("d2", "tensordesc", "bf16", 128, 64, tma=ENC),
        P("u", "scalar", "u64", 8),
        P("b", "scalar", "bf16", 2),
        P("dd", "scalar", "fp64", 8),
    ]
    layout = ArgLayout(params)
    got = {s.name: (s.offset, s.size) for s in layout.slots}
    # descriptors first, 64-aligned, then the rest in ABI order at natural alignment
    assert got == {
        "desc": (0, 128), "d2": (128, 128),
        "x": (256, 8), "flag": (264, 4), "n": (268, 4), "big": (272, 8), "h": (280, 2),
        "alpha": (284, 4), "u": (288, 8), "b": (296, 2), "dd": (304, 8),
    }
    assert [s.index for s in layout.slots] == list(range(len(params)))
    assert layout.values_offset == 256
    assert layout.struct.format == "<Qiiqe2xfQH6xd"
    assert layout.size == 312


def test_void_star_array_points_at_each_slot():
    params = [P("x", "pointer", "fp32", 8), P("d", "tensordesc", "fp16", 128, 64, tma=ENC),
              P("n", "scalar", "u32", 4)]
    pack = ArgPack(ArgLayout(params))
    ptrs = (ctypes.c_void_p * 3).from_address(pack.address)
    assert pack.base % 64 == 0
    assert [ptrs[i] for i in range(3)] == [pack.base + 128, pack.base + 0, pack.base + 136]


def test_values_are_written_as_the_abi_types():
    params = [P("x", "pointer", "fp32", 8), P("n", "scalar", "i32", 4), P("u", "scalar", "u32", 4),
              P("a", "scalar", "fp32", 4), P("q", "scalar", "i64", 8), P("f", "scalar", "i1", 4),
              P("s8", "scalar", "i8", 4), P("h", "scalar", "fp16", 2), P("b", "scalar", "bf16", 2)]
    pack = ArgPack(ArgLayout(params))
    pack.write([0x7F00_0000_1230, -5, 4_000_000_000, 2.5, -(2 ** 40), True, -3, 1.5, 1.0])
    assert struct.unpack("<Q", pack.read(0))[0] == 0x7F00_0000_1230
    assert struct.unpack("<i", pack.read(1))[0] == -5
    assert struct.unpack("<I", pack.read(2))[0] == 4_000_000_000
    assert struct.unpack("<f", pack.read(3))[0] == 2.5
    assert struct.unpack("<q", pack.read(4))[0] == -(2 ** 40)
    assert pack.read(5) == b"\x01\x00\x00\x00"          # bool widened to 32 bits
    assert pack.read(6) == b"\xfd\xff\xff\xff"          # i8 sign-extended to 32 bits
    assert pack.read(7) == b"\x00\x3e"                  # fp16 1.5 = 0x3E00
    assert pack.read(8) == b"\x80\x3f"                  # bf16 1.0 = 0x3F80


def test_a_python_int_for_an_fp32_param_is_a_float_not_8_bytes():
    pack = ArgPack(ArgLayout([P("a", "scalar", "fp32", 4), P("n", "scalar", "u32", 4)]))
    pack.write([2, 7])
    assert struct.unpack("<fI", ctypes.string_at(pack.base, 8)) == (2.0, 7)


@pytest.mark.parametrize("dtype,size,bad", [
    ("i32", 4, 2 ** 31), ("i32", 4, -(2 ** 31) - 1), ("u32", 4, -1), ("u32", 4, 2 ** 32),
    ("i64", 8, 2 ** 63), ("u64", 8, -1), ("i8", 4, 128), ("u16", 4, 70000), ("i1", 4, 2),
])
def test_out_of_range_ints_are_refused(dtype, size, bad):
    layout = ArgLayout([P("n", "scalar", dtype, size)])
    pack = ArgPack(layout)
    with pytest.raises((struct.error, OverflowError)):
        pack.write([bad])
    why = explain_bad_value(layout.slots[0], bad)
    assert why is not None and "out of range" in why and str(bad) in why


def test_floats_are_not_truncated_into_int_params():
    layout = ArgLayout([P("n", "scalar", "i32", 4)])
    with pytest.raises(struct.error):
        ArgPack(layout).write([2.5])
    assert "expected an integer" in explain_bad_value(layout.slots[0], 2.5)
    layout8 = ArgLayout([P("n", "scalar", "i8", 4)])
    with pytest.raises(TypeError):
        ArgPack(layout8).write([2.0])


def test_fp32_overflow_is_refused():
    layout = ArgLayout([P("a", "scalar", "fp32", 4)])
    with pytest.raises(OverflowError):
        ArgPack(layout).write([1e39])
    assert "out of range for fp32" in explain_bad_value(layout.slots[0], 1e39)
    assert explain_bad_value(layout.slots[0], 3.0) is None


@pytest.mark.parametrize("value,bits", [
    (1.0, 0x3F80), (-2.0, 0xC000), (0.0, 0x0000), (3.140625, 0x4049),
    (1.00390625, 0x3F80),   # exactly half an ulp above 1.0: ties to even (down)
    (1.01171875, 0x3F82),   # 1.5 ulp: ties to even (up)
    (1.0078125 + 2 ** -12, 0x3F81), (float("inf"), 0x7F80),
])
def test_bf16_rounding(value, bits):
    assert bf16_bits(value) == bits


def test_bf16_nan_stays_nan():
    assert bf16_bits(float("nan")) & 0x7F80 == 0x7F80 and bf16_bits(float("nan")) & 0x7F


def test_unknown_scalar_size_is_an_error():
    with pytest.raises(TLXRuntimeError, match="4-byte fp16"):
        scalar_code("fp16", 4, "h")
    with pytest.raises(TLXRuntimeError, match="128 bytes"):
        ArgLayout([P("d", "tensordesc", "fp16", 64, 64, tma=ENC)])
    with pytest.raises(TLXRuntimeError, match="unknown kind"):
        ArgLayout([P("w", "weird", "fp16", 8)])


def test_ir_spellings_are_accepted():
    layout = ArgLayout([P("a", "scalar", "f32", 4), P("x", "pointer", "f16", 8)])
    assert layout.struct.format == "<f4xQ"
    assert [(s.offset, s.size) for s in layout.slots] == [(0, 4), (8, 8)]


def test_descriptor_bytes_are_copied_whole():
    pack = ArgPack(ArgLayout([P("n", "scalar", "i32", 4), P("d", "tensordesc", "fp16", 128, 64, tma=ENC)]))
    pack.write([9, bytes(range(128))])
    assert pack.read(1) == bytes(range(128))
    assert struct.unpack("<i", pack.read(0))[0] == 9
    with pytest.raises(TypeError, match="encoded bytes"):
        pack.write([9, bytes(64)])


def test_the_native_spec_describes_every_parameter():
    from tlx.runtime.packing import SPEC_HEADER, SPEC_PARAM

    layout = ArgLayout([P("x", "pointer", "fp16", 8), P("d", "tensordesc", "fp16", 128, 64, tma=ENC),
                        P("f", "scalar", "i1", 4), P("q", "scalar", "u64", 8), P("b", "scalar", "bf16", 2)])
    spec = layout.launch_spec(0xABC, 256, 1024, (2, 1, 1), True)
    head = SPEC_HEADER.unpack_from(spec)
    assert head == (0xABC, 256, 1024, 2, 1, 1, 1, 5, layout.size)
    params = [SPEC_PARAM.unpack_from(spec, SPEC_HEADER.size + i * SPEC_PARAM.size) for i in range(5)]
    assert params == [(ord("p"), 64, 8, 128), (ord("d"), 0, 128, 0), (ord("u"), 1, 4, 136),
                      (ord("u"), 64, 8, 144), (ord("b"), 16, 2, 152)]
    assert len(spec) == SPEC_HEADER.size + 5 * SPEC_PARAM.size
    big = ArgLayout([P(f"d{i}", "tensordesc", "fp16", 128, 64, tma=ENC) for i in range(40)])
    assert big.launch_spec(1, 32, 0, (1, 1, 1), False) is None  # over 4 KB: the Python packer launches it

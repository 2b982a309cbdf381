"""Host TMA descriptors: every cuTensorMapEncodeTiled rule is checked before the driver sees the
descriptor, the error names the rule; the encode arguments are what the driver documents
(innermost first, byte strides); maps are cached and only the address is replaced."""

import numpy as np
import pytest

from runtime_fakes import CAIArray, Tensor
from tlx.compiler.abi import TMAEncoding
from tlx.runtime import tma
from tlx.runtime.errors import TLXRuntimeError
from tlx.runtime.tma import (DescriptorEncoder, TensorDescriptor, TMARuleError, check_tma_rules,
                             parse_tensordesc_type, tiled_encoding)

ENC = TMAEncoding(dtype="fp16", elem_bytes=2, block_shape=(64, 128), box=(64, 64), swizzle=128)


def good(**over):
    kw = dict(ptr=0x10000, dtype="fp16", shape=[256, 512], strides=[512, 1], block_shape=[64, 128],
              padding="zero", encoding=ENC, base_extent=256 * 512)
    kw.update(over)
    return kw


def rule_of(**over):
    with pytest.raises(TMARuleError) as e:
        check_tma_rules(**good(**over))
    return e.value.rule, str(e.value)


def test_a_good_descriptor_passes():
    check_tma_rules(**good())
    check_tma_rules(**good(shape=[1], strides=[1], block_shape=[64],
                           encoding=TMAEncoding("fp32", 4, (64,), (32,), 128), dtype="fp32",
                           base_extent=None))


@pytest.mark.parametrize("over,rule,words", [
    (dict(shape=[2] * 6, strides=[1] * 6, block_shape=None, encoding=None), "rank", "1 to 5"),
    (dict(strides=[1]), "rank", "strides has 1"),
    (dict(block_shape=[64]), "rank", "block_shape has 1"),
    (dict(shape=[0, 512]), "dim-range", "shape[0] = 0"),
    (dict(shape=[2 ** 32 + 1, 512], base_extent=None), "dim-range", "2**32"),
    (dict(strides=[512, 2]), "inner-stride", "last stride is 2"),
    (dict(strides=[100, 1], base_extent=None), "stride-align", "200 bytes, not a multiple of 16"),
    (dict(strides=[-512, 1], base_extent=None), "stride-align", "positive"),
    (dict(strides=[2 ** 40, 1], base_extent=None), "stride-range", "2**40"),
    (dict(ptr=0x10008), "base-align", "0x10008 is not 16-byte aligned"),
    (dict(padding="one"), "padding", "'zero' or 'nan'"),
    (dict(padding="nan", dtype="i16", encoding=None), "padding", "floating-point"),
    (dict(round_f32_to_tf32=True), "tf32", "fp32"),
    (dict(base_extent=256 * 512 - 1), "extent", "only 131071 elements"),
    (dict(dtype="bf16"), "dtype", "compiled for fp16"),
    (dict(block_shape=None), "block-shape", "not set"),
    (dict(block_shape=[128, 64]), "block-shape", "[128, 64] differs"),
    (dict(block_shape=[0, 128]), "block-shape", "positive"),
    (dict(encoding=TMAEncoding("fp16", 2, (64, 128), (300, 64), 128)), "box-range", "box[0] = 300"),
    (dict(encoding=TMAEncoding("fp16", 2, (64, 128), (64,), 128)), "box-range", "rank 1"),
    (dict(encoding=TMAEncoding("fp16", 2, (64, 128), (64, 4), 0)), "box-inner-bytes", "8 bytes"),
    (dict(encoding=TMAEncoding("fp16", 2, (64, 128), (64, 64), 96)), "swizzle", "swizzle 96"),
    (dict(encoding=TMAEncoding("fp16", 2, (64, 128), (64, 64), 64)), "swizzle-span",
     "128 bytes, wider than the 64-byte"),
])
def test_each_rule(over, rule, words):
    got, text = rule_of(**over)
    assert got == rule
    assert words in text
    assert f"TMA rule '{rule}'" in text


def test_error_names_the_parameter_and_kernel():
    with pytest.raises(TMARuleError) as e:
        check_tma_rules(**good(ptr=0x10004), param="a_desc", kernel="matmul")
    assert str(e.value).startswith("kernel 'matmul': TensorDescriptor for parameter 'a_desc'")
    assert isinstance(e.value, TLXRuntimeError)


def test_tiled_encoding_2d_fp16():
    enc = tiled_encoding("fp16", [256, 512], [512, 1], ENC)
    assert enc.data_type == 6 and enc.rank == 2
    assert enc.global_dims == (512, 256)          # innermost first
    assert enc.global_strides == (1024,)          # bytes, rank-1 entries
    assert enc.box == (64, 64)
    assert enc.element_strides == (1, 1)
    assert (enc.interleave, enc.swizzle, enc.l2_promotion, enc.oob_fill) == (0, 3, 2, 0)


def test_tiled_encoding_3d_and_options():
    e3 = TMAEncoding("bf16", 2, (2, 64, 32), (2, 64, 32), 64)
    enc = tiled_encoding("bf16", [4, 128, 96], [128 * 96, 96, 1], e3, padding="nan")
    assert enc.data_type == 9
    assert enc.global_dims == (96, 128, 4)
    assert enc.global_strides == (192, 128 * 96 * 2)
    assert enc.box == (32, 64, 2)
    assert enc.swizzle == 2 and enc.oob_fill == 1
    f32 = TMAEncoding("fp32", 4, (64, 32), (64, 32), 128)
    assert tiled_encoding("fp32", [64, 64], [64, 1], f32, round_f32_to_tf32=True).data_type == 11
    fp8 = TMAEncoding("fp8e4nv", 1, (64, 128), (64, 128), 128)
    assert tiled_encoding("fp8e4nv", [64, 128], [128, 1], fp8).data_type == 0   # bytes


def test_descriptor_construction_checks_what_triton_asserts():
    base = CAIArray(0x10000, (256, 512), "<f2")
    TensorDescriptor(base, [256, 512], [512, 1], [64, 64])
    with pytest.raises(TMARuleError, match="inner-stride"):
        TensorDescriptor(base, [256, 512], [1, 256], [64, 64])
    with pytest.raises(TMARuleError, match="base-align"):
        TensorDescriptor(CAIArray(0x10002, (256, 512), "<f2"), [256, 512], [512, 1], [64, 64])
    with pytest.raises(TMARuleError, match="padding"):
        TensorDescriptor(base, [256, 512], [512, 1], [64, 64], padding="inf")



def test_host_numpy_base_is_for_the_interpreter_and_refused_at_gpu_encode():
    import numpy as np

    from tlx.runtime.tma import base_pointer

    host = TensorDescriptor(np.zeros((64, 64), np.float16), [64, 64], [64, 1], [64, 64])
    assert host.signature() == "tensordesc<fp16[64, 64]>"
    with pytest.raises(TMARuleError, match="stride-align"):  # the rules still apply to host bases
        TensorDescriptor(np.zeros((4, 4), np.float16), [4, 4], [4, 1], [4, 4])
    with pytest.raises(TLXRuntimeError, match="host array"):  # what encoding for a launch reads
        base_pointer(host.base, -1)


def test_host_torch_base_is_for_the_interpreter_and_refused_at_gpu_encode():
    from tlx.runtime.tma import base_pointer

    host = TensorDescriptor(Tensor(0x40000, (64, 64), "float16", cuda=False), [64, 64], [64, 1], [64, 64])
    assert host.signature() == "tensordesc<fp16[64, 64]>"
    with pytest.raises(TLXRuntimeError, match="on 'cpu'"):  # what encoding for a launch reads
        base_pointer(host.base, -1)


def test_from_tensor_reads_shape_and_strides():
    t = Tensor(0x20000, (128, 64), "float16", strides=(72, 1))
    d = TensorDescriptor.from_tensor(t, [64, 64])
    assert (d.shape, d.strides, d.block_shape) == ([128, 64], [72, 1], [64, 64])
    assert d.dtype == "fp16"


def test_parse_tensordesc_type():
    assert parse_tensordesc_type("tensordesc<fp16[64, 64]>") == ("fp16", (64, 64))
    assert parse_tensordesc_type("tensordesc<bf16[1, 2, 128]>") == ("bf16", (1, 2, 128))
    with pytest.raises(ValueError):
        parse_tensordesc_type("*fp16")


class FakeMap:
    def __init__(self, ptr):
        self.ptr = ptr


def test_encoder_caches_and_replaces_only_the_address(monkeypatch):
    log = []

    def fake_encode(enc, ptr, kernel=None):
        log.append(("encode", enc.global_dims, ptr))
        return FakeMap(ptr)

    def fake_replace(self, tmap, ptr):
        log.append(("replace", ptr))
        tmap.ptr = ptr

    monkeypatch.setattr(tma, "encode_tiled", fake_encode)
    monkeypatch.setattr(DescriptorEncoder, "_replace_address", fake_replace)
    enc = DescriptorEncoder(ENC, "a_desc", "k")
    a = Tensor(0x10000, (256, 512), "float16")
    b = Tensor(0x90000, (256, 512), "float16")
    m1 = enc.tensor_map(TensorDescriptor(a, [256, 512], [512, 1], [64, 128]))
    m2 = enc.tensor_map(TensorDescriptor(a, [256, 512], [512, 1], [64, 128]))   # same: cached
    m3 = enc.tensor_map(TensorDescriptor(b, [256, 512], [512, 1], [64, 128]))   # address only
    assert m1 is m2 is m3 and m3.ptr == 0x90000
    m4 = enc.tensor_map(TensorDescriptor(b, [128, 512], [512, 1], [64, 128]))   # new shape
    assert m4 is not m1
    assert log == [("encode", (512, 256), 0x10000), ("replace", 0x90000),
                   ("encode", (512, 128), 0x90000)]
    assert (enc.encodes, enc.replacements) == (2, 1)
    # a misaligned new address is caught before cuTensorMapReplaceAddress
    c = Tensor(0x10000, (256, 512), "float16")
    desc = TensorDescriptor(c, [256, 512], [512, 1], [64, 128])
    c._ptr = 0x10008
    with pytest.raises(TMARuleError, match="base-align"):
        enc.tensor_map(desc)


def test_encoder_checks_rules_against_the_kernel_encoding(monkeypatch):
    monkeypatch.setattr(tma, "encode_tiled", lambda enc, ptr, kernel=None: pytest.fail("encoded"))
    enc = DescriptorEncoder(ENC, "a_desc", "k")
    a = Tensor(0x10000, (256, 512), "float16")
    with pytest.raises(TMARuleError, match="block-shape"):
        enc.tensor_map(TensorDescriptor(a, [256, 512], [512, 1], [64, 64]))
    with pytest.raises(TMARuleError, match="extent"):
        enc.tensor_map(TensorDescriptor(a, [512, 512], [512, 1], [64, 128]))
    with pytest.raises(TLXRuntimeError, match="got int"):
        enc.tensor_map(5)


def test_encoder_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(tma, "encode_tiled", lambda enc, ptr, kernel=None: FakeMap(ptr))
    enc = DescriptorEncoder(TMAEncoding("fp16", 2, (16, 64), (16, 64), 128), "d", capacity=4)
    a = Tensor(0x10000, (4096, 64), "float16")
    for rows in range(16, 16 * 11, 16):
        enc.tensor_map(TensorDescriptor(a, [rows, 64], [64, 1], [16, 64]))
    assert enc.encodes == 10 and len(enc._maps) == 4


def test_new_base_is_checked_again_before_the_address_is_replaced(monkeypatch):
    monkeypatch.setattr(tma, "encode_tiled", lambda enc, ptr, kernel=None: FakeMap(ptr))
    monkeypatch.setattr(DescriptorEncoder, "_replace_address", lambda self, m, p: None)
    enc = DescriptorEncoder(ENC, "a_desc", "k")
    enc.tensor_map(TensorDescriptor(Tensor(0x10000, (256, 512), "float16"), [256, 512], [512, 1], [64, 128]))
    small = Tensor(0x90000, (128, 512), "float16")     # same descriptor, a base half as big
    with pytest.raises(TMARuleError, match="extent"):
        enc.tensor_map(TensorDescriptor(small, [256, 512], [512, 1], [64, 128]))
    assert enc.replacements == 0


def test_host_copy_cannot_be_a_descriptor_base():
    import numpy as np

    from tlx.runtime import host_copy

    with pytest.raises(TLXRuntimeError, match="base must be a device array"):
        TensorDescriptor(host_copy(np.zeros((64, 64), np.float16)), [64, 64], [64, 1], [64, 64])


def test_from_tensor_on_numpy_reads_element_strides():
    base = np.zeros((96, 80), np.float16)
    view = base[:, 8:72]  # a column slice: row pitch 80 elements
    d = TensorDescriptor.from_tensor(view, [32, 64])
    assert (d.shape, d.strides, d.block_shape) == ([96, 64], [80, 1], [32, 64])
    assert d.dtype == "fp16"
    odd = np.lib.stride_tricks.as_strided(np.zeros(64, np.uint8).view(np.float16)[:30], (3, 10), (7, 2))
    with pytest.raises(TLXRuntimeError, match="not whole elements"):
        TensorDescriptor.from_tensor(odd, [1, 8])

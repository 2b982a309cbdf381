"""Kernel arguments: device arrays are read without copies through torch's data_ptr, the CUDA
array interface or DLPack; host arrays are refused unless the user opts in; signatures follow
Triton's spellings and divisibility rules."""

import numpy as np
import pytest

from runtime_fakes import CAIArray, Tensor
from tlx.runtime import arrays
from tlx.runtime.arrays import ArgSignature, describe, host_copy, pointer_and_dtype, signature_of
from tlx.runtime.errors import TLXRuntimeError
from tlx.runtime.tma import TensorDescriptor


def test_signature_table():
    assert signature_of(CAIArray(0x1000, (4,), "<f2")) == ArgSignature("*fp16", 16)
    assert signature_of(CAIArray(0x1004, (4,), "<f4")) == ArgSignature("*fp32", 1)
    assert signature_of(Tensor(0x2000, (8,), "bfloat16")) == ("*bf16", 16)
    assert signature_of(Tensor(0x2008, (8,), "int64")) == ("*i64", 1)
    assert signature_of(True) == ("i1", 1)
    assert signature_of(np.bool_(False)) == ("i1", 1)
    assert signature_of(7) == ("i32", 1)
    assert signature_of(32) == ("i32", 16)
    assert signature_of(0) == ("i32", 16)
    assert signature_of(2 ** 31 - 1) == ("i32", 1)
    assert signature_of(2 ** 31) == ("i64", 16)
    assert signature_of(-(2 ** 31)) == ("i32", 16)
    assert signature_of(-(2 ** 31) - 1) == ("i64", 1)
    assert signature_of(2 ** 63) == ("u64", 16)
    assert signature_of(2 ** 64 - 1) == ("u64", 1)
    assert signature_of(1.5) == ("fp32", 1)
    assert signature_of(np.float16(1.5)) == ("fp16", 1)
    assert signature_of(np.float64(1.5)) == ("fp64", 1)
    assert signature_of(np.int64(48)) == ("i64", 16)
    assert signature_of(np.uint32(3)) == ("u32", 1)
    assert signature_of(None) == ("constexpr", 1)


def test_signature_key():
    from tlx.runtime import signature_key

    key = signature_key([Tensor(0x1000, (4,), "float16"), 16, 2.0, True])
    assert key == (("*fp16", 16), ("i32", 16), ("fp32", 1), ("i1", 1))
    assert hash(key) == hash(signature_key([Tensor(0x2000, (9,), "float16"), 32, 1.0, False]))


def test_ints_beyond_64_bits_are_refused():
    with pytest.raises(TLXRuntimeError, match="64 bits"):
        signature_of(2 ** 64)
    with pytest.raises(TLXRuntimeError, match="64 bits"):
        signature_of(-(2 ** 63) - 1)


@pytest.mark.parametrize("typestr,dtype", [
    ("<f2", "fp16"), ("<f4", "fp32"), ("<f8", "fp64"), ("|b1", "i1"), ("|i1", "i8"),
    ("<i2", "i16"), ("<i4", "i32"), ("<i8", "i64"), ("|u1", "u8"), ("<u2", "u16"),
    ("<u4", "u32"), ("<u8", "u64"),
])
def test_cai_typestrs(typestr, dtype):
    assert pointer_and_dtype(CAIArray(64, (2,), typestr)) == (64, dtype)


@pytest.mark.parametrize("name,dtype", [
    ("float16", "fp16"), ("bfloat16", "bf16"), ("float32", "fp32"), ("float64", "fp64"),
    ("int8", "i8"), ("int32", "i32"), ("uint8", "u8"), ("bool", "i1"),
    ("float8_e4m3fn", "fp8e4nv"), ("float8_e5m2", "fp8e5"),
])
def test_torch_dtypes(name, dtype):
    assert pointer_and_dtype(Tensor(0x100, (1,), name)) == (0x100, dtype)


def test_unsupported_element_types_are_named():
    with pytest.raises(TLXRuntimeError, match=">f4"):
        pointer_and_dtype(CAIArray(0, (1,), ">f4"))
    with pytest.raises(TLXRuntimeError, match="complex64"):
        pointer_and_dtype(Tensor(0, (1,), "complex64"))


def test_torch_uses_data_ptr_even_with_requires_grad():
    t = Tensor(0x5000, (4,), requires_grad=True)
    assert pointer_and_dtype(t) == (0x5000, "fp32")   # the CAI property would raise here
    assert signature_of(t) == ("*fp32", 16)


def test_cpu_torch_tensor_is_refused_with_a_hint():
    with pytest.raises(TLXRuntimeError, match=r"on 'cpu'.*\n.*x\.cuda\(\)"):
        pointer_and_dtype(Tensor(0x5000, (4,), cuda=False))


def test_pinned_cpu_torch_tensor_is_host_mapped_memory():
    t = Tensor(0x7F00_0000_0000, (16,), "int32", cuda=False, pinned=True)
    assert pointer_and_dtype(t) == (0x7F00_0000_0000, "i32")
    assert signature_of(t) == ("*i32", 16)


def test_host_numpy_array_is_refused_with_the_opt_in_named():
    with pytest.raises(TLXRuntimeError) as e:
        signature_of(np.zeros(4, np.float32))
    assert "host array" in str(e.value) and "host_copy" in str(e.value)
    with pytest.raises(TLXRuntimeError, match="host array"):
        pointer_and_dtype(np.zeros(4, np.float32), 0)


def test_host_dlpack_object_is_refused():
    class HostDLPack:  # a DLPack producer whose memory is on the CPU, without CAI
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    with pytest.raises(TLXRuntimeError, match="DLPack device CPU"):
        pointer_and_dtype(HostDLPack(np.zeros(3, np.float32)), 0)


def test_other_objects_are_not_arrays():
    with pytest.raises(TLXRuntimeError, match="cannot pass str"):
        signature_of("hello")
    with pytest.raises(TLXRuntimeError, match="not a device array"):
        pointer_and_dtype(object(), 0)


def test_masked_cai_is_refused():
    a = CAIArray(0, (4,))
    a.__cuda_array_interface__["mask"] = CAIArray(0, (4,), "|b1")
    with pytest.raises(TLXRuntimeError, match="mask"):
        pointer_and_dtype(a)


def test_describe_converts_byte_strides_to_elements():
    a = CAIArray(0x100, (3, 4), "<f4", strides=(64, 4))
    assert describe(a) == (0x100, "fp32", (3, 4), (16, 1))
    b = CAIArray(0x100, (3, 4, 5), "<f2")
    assert describe(b).strides == (20, 5, 1)
    t = Tensor(0x200, (2, 8), "float16", strides=(16, 1))
    assert describe(t) == (0x200, "fp16", (2, 8), (16, 1))
    with pytest.raises(TLXRuntimeError, match="multiples of its element size"):
        describe(CAIArray(0x100, (3, 4), "<f4", strides=(6, 4)))


def test_cai_producer_stream_is_waited_for(monkeypatch):
    calls = []
    monkeypatch.setattr(arrays, "_order_event", lambda: "EVENT")
    import tlx.runtime.driver as driver

    class FakeDrv:
        @staticmethod
        def CUstream(h):
            return ("stream", h)

    monkeypatch.setattr(driver, "bindings", lambda: FakeDrv)
    monkeypatch.setattr(driver, "call", lambda name, *a, **k: calls.append((name,) + a))
    pointer_and_dtype(CAIArray(0x100, (1,), stream=0x77), 0x99)
    assert calls == [("cuEventRecord", "EVENT", ("stream", 0x77)),
                     ("cuStreamWaitEvent", ("stream", 0x99), "EVENT", 0)]
    calls.clear()
    pointer_and_dtype(CAIArray(0x100, (1,), stream=0x99), 0x99)   # same stream: nothing
    pointer_and_dtype(CAIArray(0x100, (1,), stream=1), 0)          # legacy == default: nothing
    pointer_and_dtype(CAIArray(0x100, (1,)), 0x99)                 # no producer stream: nothing
    pointer_and_dtype(CAIArray(0x100, (1,), stream=0x77), -1)      # ordering off: nothing
    assert calls == []


def test_host_copy_opt_in():
    a = np.arange(6, dtype=np.float32)
    hc = host_copy(a)
    assert signature_of(hc) == ("*fp32", 16)
    assert hc.nbytes == 24 and hc.write_back
    with pytest.raises(arrays.StagingNeeded):
        pointer_and_dtype(hc, 0)
    with pytest.raises(TLXRuntimeError, match="C-contiguous"):
        host_copy(np.zeros((4, 4), np.float32)[:, ::2])
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(TLXRuntimeError, match="writeable"):
        host_copy(ro)
    assert host_copy(ro, write_back=False).dtype == "fp32"
    with pytest.raises(TLXRuntimeError, match="numpy array"):
        host_copy([1, 2, 3])


def test_tensor_descriptor_signature():
    d = TensorDescriptor(CAIArray(0x1000, (128, 64), "<f2"), [128, 64], [64, 1], [64, 64])
    assert signature_of(d) == ("tensordesc<fp16[64, 64]>", 1)
    d2 = TensorDescriptor(CAIArray(0x1000, (128, 64), "<f2"), [128, 64], [64, 1])
    with pytest.raises(TLXRuntimeError, match="block_shape is not set"):
        signature_of(d2)
    d2.block_shape = [32, 64]                 # set later, as TLX pre_hooks do
    assert signature_of(d2).type == "tensordesc<fp16[32, 64]>"

"""Kernel arguments: device arrays are read without copies through torch's data_ptr, the CUDA
array interface or DLPack; host arrays are refused unless the user opts in. (Their signatures:
tests/test_specialize.py.)"""

import numpy as np
import pytest

from runtime_fakes import CAIArray, Tensor
from tlx.runtime import arrays
from tlx.runtime.arrays import describe, host_copy, pointer_and_dtype
from tlx.runtime.errors import TLXRuntimeError


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


def test_cpu_torch_tensor_is_refused_with_a_hint():
    with pytest.raises(TLXRuntimeError, match=r"on 'cpu'.*\n.*x\.cuda\(\)"):
        pointer_and_dtype(Tensor(0x5000, (4,), cuda=False))


def test_pinned_cpu_torch_tensor_is_host_mapped_memory():
    t = Tensor(0x7F00_0000_0000, (16,), "int32", cuda=False, pinned=True)
    assert pointer_and_dtype(t) == (0x7F00_0000_0000, "i32")


def test_host_numpy_array_is_refused_with_the_opt_in_named():
    with pytest.raises(TLXRuntimeError) as e:
        pointer_and_dtype(np.zeros(4, np.float32), 0)
    assert "host array" in str(e.value) and "host_copy" in str(e.value)


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
    assert hc.dtype == "fp32" and hc.nbytes == 24 and hc.write_back
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

"""Kernel arguments as the runtime reads them: device arrays, scalars, host arrays.

Public API (the frontend's specializer, tlx/specialize.py, reads arguments through these):

* ``describe(arg, stream=-1) -> ArrayInfo`` — pointer, dtype, shape, strides (in elements) of a
  device array, never copying; host numpy arrays are rejected with a `TLXRuntimeError`.
* ``pointer_and_dtype(arg, stream) -> (ptr, dtype)`` — the launch fast path: one cached getter
  per argument *type* (torch uses ``data_ptr()``, never building the CAI dict).
* ``host_copy(array, write_back=True) -> HostCopy`` — the explicit opt-in for host numpy arrays:
  the launcher copies the array to the device before the launch and (with ``write_back``) back
  after it, then synchronizes the stream. Without it a host array is an error.

Stream ordering follows each protocol: a CAI ``stream`` other than the launch stream makes the
launch stream wait for it (an event, no host sync); DLPack producers are handed the launch stream.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, NamedTuple, Tuple

import numpy as np

from .dtypes import ELEMENT_BYTES, dtype_of_numpy, dtype_of_typestr, require_dtype
from .errors import TLXRuntimeError


class ArrayInfo(NamedTuple):
    """A device array, read without copying: address, Triton dtype, shape, strides in
    elements (C-contiguous strides when the producer gave none)."""

    ptr: int
    dtype: str
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]


class HostCopy:
    """A host numpy array that the user asked to have copied to the device for a launch.

    Made by `host_copy`. The launch allocates device memory, copies the array in, launches,
    copies it back when ``write_back`` is true, frees the memory and synchronizes the stream:
    convenient for tests and notebooks, never the fast path.
    """

    __slots__ = ("array", "write_back", "dtype")

    def __init__(self, array: Any, write_back: bool = True):
        if not isinstance(array, np.ndarray):
            raise TLXRuntimeError(f"host_copy() takes a numpy array, not {type(array).__name__}")
        if not array.flags.c_contiguous:
            raise TLXRuntimeError("host_copy() needs a C-contiguous array (the kernel sees raw "
                                  "memory)", hint="pass numpy.ascontiguousarray(x), and read the "
                                  "result from that array")
        if write_back and not array.flags.writeable:
            raise TLXRuntimeError("host_copy(write_back=True) needs a writeable array",
                                  hint="pass write_back=False for inputs")
        self.array = array
        self.write_back = write_back
        self.dtype = require_dtype(array.dtype, "numpy")

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    def __repr__(self) -> str:
        return f"host_copy({self.dtype}{list(self.array.shape)}, write_back={self.write_back})"


def host_copy(array: Any, write_back: bool = True) -> HostCopy:
    """Opt in to passing a host numpy array: it is copied to the device for the launch and,
    with ``write_back=True``, copied back afterwards (the launch then synchronizes)."""
    return HostCopy(array, write_back)


class StagingNeeded(Exception):
    """Raised by the fast path for a `HostCopy` argument: the launcher then takes the slow,
    copying path. Internal; never reaches the user."""


# ---------------------------------------------------------------------------------------------
# What kind of argument is it? Decided once per type, cached.

_HOST_HINT = ("pass a device array (torch tensor on 'cuda', cupy array, numba.cuda.to_device(x)), "
              "or wrap it as tlx.host_copy(x) to have it copied to the device and back for this "
              "launch")


def _is_torch_tensor(tp: type) -> bool:
    return any(c.__module__.startswith("torch") and c.__name__ == "Tensor" for c in tp.__mro__)


def _is_numpy_array(tp: type) -> bool:
    return any(c.__module__ == "numpy" and c.__name__ == "ndarray" for c in tp.__mro__)


def _kind_of(tp: type, arg: Any) -> str:
    """'torch' | 'cai' | 'dlpack' | 'host' | 'hostcopy' | 'other' for an argument type."""
    if tp is HostCopy:
        return "hostcopy"
    if _is_torch_tensor(tp):
        return "torch"
    if hasattr(arg, "__cuda_array_interface__"):
        return "cai"
    if _is_numpy_array(tp):
        return "host"
    if hasattr(arg, "__dlpack__") and hasattr(arg, "__dlpack_device__"):
        return "dlpack"
    if hasattr(arg, "__array_interface__") or hasattr(arg, "__array__"):
        return "host"
    return "other"


_KINDS: Dict[type, str] = {}


def kind_of(arg: Any) -> str:
    """The kind of an argument (see `_kind_of`), cached by exact type."""
    tp = type(arg)
    kind = _KINDS.get(tp)
    if kind is None:
        kind = _KINDS[tp] = _kind_of(tp, arg)
    return kind


# ---------------------------------------------------------------------------------------------
# Reading device arrays.

_TORCH_DTYPES: Dict[Any, str] = {}  # torch dtype object -> Triton spelling, filled on first sight


def _torch_pointer(t: Any, stream: int) -> Tuple[int, str]:
    # The hot path of every torch argument: no CAI dict, no device object, two dict-free reads.
    if t.is_cuda:
        dtype = _TORCH_DTYPES.get(t.dtype)
        if dtype is not None:
            return t.data_ptr(), dtype
    return _torch_pointer_slow(t)


def _torch_pointer_slow(t: Any) -> Tuple[int, str]:
    # A pinned (page-locked) CPU tensor is device-accessible at the same address (UVA maps every
    # cudaHostAlloc allocation): the way to hand a kernel host-mapped memory.
    if not t.is_cuda and not _is_pinned(t):
        raise TLXRuntimeError(f"a torch tensor on '{t.device}' was passed where a device array is "
                              "expected", hint="move it to the GPU first (x.cuda()), or pin it "
                              "(x.pin_memory()) to pass host-mapped memory")
    dtype = _TORCH_DTYPES[t.dtype] = require_dtype(t.dtype, "torch")
    return t.data_ptr(), dtype


def _is_pinned(t: Any) -> bool:
    try:
        return bool(t.is_pinned())
    except Exception:
        return False


def _cai_of(arg: Any, stream: int) -> Tuple[Dict[str, Any], str]:
    """A CAI array's interface dict and dtype, the launch `stream` ordered after its producer."""
    try:
        cai = arg.__cuda_array_interface__
    except Exception as exc:  # e.g. torch refuses for requires_grad; others may refuse too
        raise TLXRuntimeError(f"{type(arg).__name__}.__cuda_array_interface__ failed: {exc}") from exc
    if cai.get("mask") is not None:
        raise TLXRuntimeError("masked CUDA arrays (CAI 'mask') cannot be kernel arguments")
    _wait_for_producer(cai.get("stream"), stream)
    dtype = dtype_of_typestr(cai["typestr"])
    if dtype is None:
        raise TLXRuntimeError(f"{type(arg).__name__} has element type '{cai['typestr']}', "
                              "which has no kernel type", hint="use a little-endian integer, "
                              "float16/32/64 or bool array")
    return cai, dtype


def _wait_for_producer(producer: Any, stream: int) -> None:
    """CAI stream semantics: make the launch `stream` wait for the producer's stream (an event
    on it, no host synchronization). CAI streams are driver handles: 1 legacy, 2 per-thread."""
    if producer is None or stream < 0:
        return
    producer = int(producer)
    if producer == stream or (producer == 1 and stream == 0):
        return
    from . import driver

    drv = driver.bindings()
    event = _order_event()
    driver.call("cuEventRecord", event, drv.CUstream(producer))
    driver.call("cuStreamWaitEvent", drv.CUstream(stream), event, 0)


_EVENTS = threading.local()  # one ordering event per thread: record+wait pairs never interleave


def _order_event() -> Any:
    event = getattr(_EVENTS, "event", None)
    if event is None:
        from . import driver

        drv = driver.bindings()
        driver.current_context()
        event = driver.call("cuEventCreate", drv.CUevent_flags.CU_EVENT_DISABLE_TIMING.value)
        _EVENTS.event = event
    return event


def _cai_pointer(arg: Any, stream: int) -> Tuple[int, str]:
    cai, dtype = _cai_of(arg, stream)
    return int(cai["data"][0]), dtype


def _dlpack_view(arg: Any, stream: int) -> Tuple[Any, str]:
    """A DLPack producer's device memory view (handed the launch `stream`) and its dtype."""
    device_type = arg.__dlpack_device__()[0]
    if int(device_type) == 1:  # kDLCPU
        raise TLXRuntimeError(f"a {type(arg).__name__} in host memory (DLPack device CPU) was "
                              "passed where a device array is expected", hint=_HOST_HINT)
    from cuda.core.utils import StridedMemoryView

    # DLPack consumer stream: None/-1 means "no ordering"; the legacy default stream is 1 there.
    consumer = -1 if stream < 0 else (1 if stream == 0 else stream)
    try:
        view = StridedMemoryView.from_dlpack(arg, stream_ptr=consumer)
    except Exception as exc:
        raise TLXRuntimeError(f"could not read {type(arg).__name__} through DLPack: {exc}") from exc
    if not view.is_device_accessible:
        raise TLXRuntimeError(f"{type(arg).__name__} is not accessible from the GPU",
                              hint=_HOST_HINT)
    dtype = dtype_of_numpy(view.dtype) if view.dtype is not None else None
    if dtype is None:
        raise TLXRuntimeError(f"{type(arg).__name__} has a DLPack element type with no kernel type")
    return view, dtype


def _dlpack_pointer(arg: Any, stream: int) -> Tuple[int, str]:
    view, dtype = _dlpack_view(arg, stream)
    return int(view.ptr), dtype


def _host_pointer(arg: Any, stream: int) -> Tuple[int, str]:
    raise TLXRuntimeError(f"a host array ({type(arg).__module__}.{type(arg).__name__}) was passed "
                          "where a device array is expected", hint=_HOST_HINT)


def _hostcopy_pointer(arg: Any, stream: int) -> Tuple[int, str]:
    raise StagingNeeded()


def _other_pointer(arg: Any, stream: int) -> Tuple[int, str]:
    raise TLXRuntimeError(f"{type(arg).__name__} is not a device array",
                          hint="pass a torch/CuPy/numba device array, or anything with "
                               "__cuda_array_interface__ or __dlpack__")


_GETTERS: Dict[str, Callable[[Any, int], Tuple[int, str]]] = {
    "torch": _torch_pointer, "cai": _cai_pointer, "dlpack": _dlpack_pointer,
    "host": _host_pointer, "hostcopy": _hostcopy_pointer, "other": _other_pointer,
}
_GETTER_BY_TYPE: Dict[type, Callable[[Any, int], Tuple[int, str]]] = {}


def pointer_and_dtype(arg: Any, stream: int = -1) -> Tuple[int, str]:
    """The device address and Triton dtype of a device-array argument (the launch fast path).
    `stream` is the launch stream (for the producer's stream ordering; -1: no ordering)."""
    getter = _GETTER_BY_TYPE.get(type(arg))
    if getter is None:
        getter = _GETTER_BY_TYPE[type(arg)] = _GETTERS[kind_of(arg)]
    return getter(arg, stream)


def _contiguous_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    strides = []
    step = 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))


def describe(arg: Any, stream: int = -1) -> ArrayInfo:
    """Pointer, dtype, shape and strides (in elements) of a device array, without copying."""
    kind = kind_of(arg)
    if kind == "torch":
        ptr, dtype = _torch_pointer(arg, stream)  # checks the device
        return ArrayInfo(ptr, dtype, tuple(int(s) for s in arg.shape),
                         tuple(int(s) for s in arg.stride()))
    if kind == "cai":
        cai, dtype = _cai_of(arg, stream)
        shape = tuple(int(s) for s in cai["shape"])
        byte_strides = cai.get("strides")
        if byte_strides is None:
            strides = _contiguous_strides(shape)
        else:
            size = ELEMENT_BYTES[dtype]
            if any(int(s) % size for s in byte_strides):
                raise TLXRuntimeError(f"{type(arg).__name__} has byte strides {tuple(byte_strides)} "
                                      f"that are not multiples of its element size {size}")
            strides = tuple(int(s) // size for s in byte_strides)
        return ArrayInfo(int(cai["data"][0]), dtype, shape, strides)
    if kind == "dlpack":
        view, dtype = _dlpack_view(arg, stream)
        shape = tuple(int(s) for s in view.shape)
        strides = tuple(int(s) for s in view.strides) if view.strides is not None \
            else _contiguous_strides(shape)
        return ArrayInfo(int(view.ptr), dtype, shape, strides)
    ptr, dtype = _GETTERS[kind](arg, stream)  # raises for host / other / hostcopy
    raise AssertionError("unreachable")  # pragma: no cover

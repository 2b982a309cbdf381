"""Kernel arguments as the runtime reads them: device arrays, scalars, host arrays.

Public API (the frontend builds its specialization key with `signature_of`):

* ``signature_of(arg) -> ArgSignature(type, divisibility)`` — the Triton spelling of an
  argument's type and its divisibility, as Triton specializes:

  ====================================  ==========================  ============================
  argument                              ``type``                    ``divisibility``
  ====================================  ==========================  ============================
  device array (torch/CuPy/numba/DLPack) ``*fp16``, ``*i32``, ...   16 if the address % 16 == 0
  ``bool`` / ``numpy.bool_``            ``i1``                      1
  ``int`` / numpy integer               ``i32`` (fits), ``i64``,    16 if the value % 16 == 0
                                        ``u64`` (>= 2**63)
  ``float`` / numpy float               ``fp32`` (numpy: its type)  1
  `TensorDescriptor`                    ``tensordesc<fp16[64, 64]>`` 1
  ``None``                              ``constexpr``               1 (a constexpr None)
  `HostCopy`                            ``*<dtype>``                16
  ====================================  ==========================  ============================

* ``signature_key(args) -> tuple`` — `signature_of` over a sequence, for the cache key.
* ``bind(args, stream) -> (key, values)`` — the key and the values `Launcher.launch_bound`
  packs, in one pass (each array is read once per launch).
* ``bind_source(names, stream) -> (lines, env)`` — the same binding as straight-line Python for
  a generated per-kernel dispatcher (the frontend's ``kernel[grid](...)``): no loop, no call for
  CUDA torch tensors, Python ints and floats; ``bind_arg`` for everything else.
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

import sys
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Sequence, Tuple

import numpy as np

from .dtypes import ELEMENT_BYTES, dtype_of_numpy, dtype_of_torch, dtype_of_typestr
from .errors import TLXRuntimeError


class ArgSignature(NamedTuple):
    """How an argument specializes a kernel: its Triton type spelling and divisibility (16 or 1)."""

    type: str
    divisibility: int


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
        dtype = dtype_of_numpy(array.dtype)
        if dtype is None:
            raise TLXRuntimeError(f"numpy dtype {array.dtype} has no kernel type")
        self.array = array
        self.write_back = write_back
        self.dtype = dtype

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
        kind = _kind_of(tp, arg)
        _KINDS[tp] = kind
    return kind


# ---------------------------------------------------------------------------------------------
# Reading device arrays.

_TORCH_DTYPES: Dict[Any, str] = {}  # torch dtype object -> Triton spelling, filled on first sight
_TORCH_PTR_SIGS: Dict[Any, Tuple[Any, Any]] = {}  # ... -> its (unaligned, aligned) pointer signatures


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
    dtype = dtype_of_torch(t.dtype)
    if dtype is None:
        raise TLXRuntimeError(f"torch dtype {t.dtype} has no kernel type")
    _TORCH_DTYPES[t.dtype] = dtype
    _TORCH_PTR_SIGS[t.dtype] = (_sig("*" + dtype, False), _sig("*" + dtype, True))
    return t.data_ptr(), dtype


def _is_pinned(t: Any) -> bool:
    try:
        return bool(t.is_pinned())
    except Exception:
        return False


def _cai_of(arg: Any) -> Dict[str, Any]:
    try:
        cai = arg.__cuda_array_interface__
    except Exception as exc:  # e.g. torch refuses for requires_grad; others may refuse too
        raise TLXRuntimeError(f"{type(arg).__name__}.__cuda_array_interface__ failed: {exc}") from exc
    if cai.get("mask") is not None:
        raise TLXRuntimeError("masked CUDA arrays (CAI 'mask') cannot be kernel arguments")
    return cai


def _cai_dtype(cai: Dict[str, Any], arg: Any) -> str:
    dtype = dtype_of_typestr(cai["typestr"])
    if dtype is None:
        raise TLXRuntimeError(f"{type(arg).__name__} has element type '{cai['typestr']}', "
                              "which has no kernel type", hint="use a little-endian integer, "
                              "float16/32/64 or bool array")
    return dtype


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
    cai = _cai_of(arg)
    _wait_for_producer(cai.get("stream"), stream)
    return int(cai["data"][0]), _cai_dtype(cai, arg)


def _dlpack_view(arg: Any, stream: int) -> Any:
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
    return view


def _dlpack_pointer(arg: Any, stream: int) -> Tuple[int, str]:
    view = _dlpack_view(arg, stream)
    dtype = dtype_of_numpy(view.dtype) if view.dtype is not None else None
    if dtype is None:
        raise TLXRuntimeError(f"{type(arg).__name__} has a DLPack element type with no kernel type")
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
        getter = _GETTERS[kind_of(arg)]
        _GETTER_BY_TYPE[type(arg)] = getter
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
        cai = _cai_of(arg)
        _wait_for_producer(cai.get("stream"), stream)
        dtype = _cai_dtype(cai, arg)
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
        view = _dlpack_view(arg, stream)
        dtype = dtype_of_numpy(view.dtype) if view.dtype is not None else None
        if dtype is None:
            raise TLXRuntimeError(f"{type(arg).__name__} has a DLPack element type with no kernel type")
        shape = tuple(int(s) for s in view.shape)
        strides = tuple(int(s) for s in view.strides) if view.strides is not None \
            else _contiguous_strides(shape)
        return ArrayInfo(int(view.ptr), dtype, shape, strides)
    ptr, dtype = _GETTERS[kind](arg, stream)  # raises for host / other / hostcopy
    raise AssertionError("unreachable")  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# Specialization signatures.

_I32_MIN, _I32_MAX = -(2 ** 31), 2 ** 31 - 1
_I64_MIN, _U64_MAX = -(2 ** 63), 2 ** 64 - 1


# Signatures are interned: building a NamedTuple costs more than the rest of signature_of.
_SIGS: Dict[str, Tuple[ArgSignature, ArgSignature]] = {}


def _sig(ty: str, divisible: bool) -> ArgSignature:
    pair = _SIGS.get(ty)
    if pair is None:
        pair = _SIGS[ty] = (ArgSignature(ty, 1), ArgSignature(ty, 16))
    return pair[divisible]


_PTR_SIGS = {d: (ArgSignature("*" + d, 1), ArgSignature("*" + d, 16)) for d in ELEMENT_BYTES}
_I1 = ArgSignature("i1", 1)
_I32_SIGS = (_sig("i32", False), _sig("i32", True))
_FP32 = ArgSignature("fp32", 1)
_CONSTEXPR = ArgSignature("constexpr", 1)


def int_signature(value: int) -> ArgSignature:
    """i32 when the value fits, i64, or u64 for 2**63..2**64-1 (Triton's rule); divisibility 16
    when the value is a multiple of 16."""
    if _I32_MIN <= value <= _I32_MAX:
        ty = "i32"
    elif value >= 2 ** 63:
        if value > _U64_MAX:
            raise TLXRuntimeError(f"integer argument {value} does not fit in 64 bits")
        ty = "u64"
    elif value >= _I64_MIN:
        ty = "i64"
    else:
        raise TLXRuntimeError(f"integer argument {value} does not fit in 64 bits")
    return _sig(ty, value % 16 == 0)


def _numpy_scalar_signature(arg: Any) -> ArgSignature:
    dtype = dtype_of_numpy(arg.dtype)
    if dtype is None:
        raise TLXRuntimeError(f"numpy scalar of type {arg.dtype} has no kernel type")
    if dtype == "i1":
        return _I1
    if dtype[0] in "iu":
        return _sig(dtype, int(arg) % 16 == 0)
    return _sig(dtype, False)


def signature_of(arg: Any) -> ArgSignature:
    """The specialization signature of one (non-constexpr) kernel argument; see the table in
    the module docstring. Raises `TLXRuntimeError` for host arrays and unsupported objects."""
    tp = type(arg)
    if tp is int:
        return int_signature(arg)
    getter = _GETTER_BY_TYPE.get(tp)
    if getter is _torch_pointer or getter is _cai_pointer:  # the common case, first
        ptr, dtype = getter(arg, -1)
        pair = _PTR_SIGS.get(dtype)
        if pair is not None:
            return pair[ptr % 16 == 0]
        return _sig("*" + dtype, ptr % 16 == 0)
    if tp is bool:
        return _I1
    if tp is float:
        return _FP32
    if arg is None:
        return _CONSTEXPR
    kind = kind_of(arg)
    if kind in ("torch", "cai", "dlpack"):
        ptr, dtype = pointer_and_dtype(arg, -1)
        return _sig("*" + dtype, ptr % 16 == 0)
    if kind == "hostcopy":
        return _sig("*" + arg.dtype, True)
    from .tma import TensorDescriptor

    if isinstance(arg, TensorDescriptor):
        return ArgSignature(arg.signature(), 1)
    if isinstance(arg, np.generic):
        return _numpy_scalar_signature(arg)
    if isinstance(arg, bool):
        return _I1
    if isinstance(arg, int):
        return int_signature(int(arg))
    if isinstance(arg, float):
        return _FP32
    if kind == "host":
        _host_pointer(arg, -1)
    raise TLXRuntimeError(f"cannot pass {tp.__name__} as a kernel argument",
                          hint="kernel arguments are device arrays, ints, floats, bools, "
                               "TensorDescriptors or constexprs")


def signature_key(args: Any) -> Tuple[ArgSignature, ...]:
    """The runtime-argument part of a specialization key: ``signature_of`` of each argument, as
    one tuple (interned signatures, so hashing and comparing it is cheap)."""
    return tuple(map(signature_of, args))


def bind(args: Any, stream: int = -1) -> Tuple[Tuple[ArgSignature, ...], list]:
    """One pass over the runtime arguments for the frontend's hot path: the specialization key
    (``signature_of`` of each) and the values `Launcher.launch_bound` packs (device arrays read
    as their address, with the producer's stream ordered before `stream`; everything else as
    given: scalars, TensorDescriptors, HostCopy)."""
    if not args:
        return (), []
    key: list = []
    values: list = []
    kadd, vadd = key.append, values.append  # bound once: this loop runs on every launch
    getters, torch_sigs, i32_sigs = _GETTER_BY_TYPE, _TORCH_PTR_SIGS, _I32_SIGS
    for arg in args:
        tp = type(arg)
        if tp is int:  # inline: int32 is the common case
            kadd(i32_sigs[arg & 15 == 0] if _I32_MIN <= arg <= _I32_MAX else int_signature(arg))
            vadd(arg)
            continue
        if getters.get(tp) is _torch_pointer and arg.is_cuda:  # torch inline: no call, no tuple
            pair = torch_sigs.get(arg.dtype)
            if pair is not None:
                ptr = arg.data_ptr()
                kadd(pair[ptr & 15 == 0])
                vadd(ptr)
                continue
        sig, value = bind_arg(arg, stream)
        kadd(sig)
        vadd(value)
    return tuple(key), values


def bind_arg(arg: Any, stream: int) -> Tuple[ArgSignature, Any]:
    """One argument as `bind` reads it: its signature and the value `Launcher.launch_bound`
    packs (a device array's address, with its producer's stream ordered before `stream`; any
    other argument as given)."""
    getter = _GETTER_BY_TYPE.get(type(arg))
    if getter is _torch_pointer or getter is _cai_pointer or getter is _dlpack_pointer:
        ptr, dtype = getter(arg, stream)
        return _sig("*" + dtype, ptr % 16 == 0), ptr
    sig = signature_of(arg)
    if sig.type.startswith("*") and kind_of(arg) != "hostcopy":  # first sight of this type
        return sig, pointer_and_dtype(arg, stream)[0]
    return sig, arg


def wide_int_type(value: int) -> str:
    """The type of an integer argument outside int32: ``i64`` or ``u64`` (an error beyond)."""
    return int_signature(value).type


class _NoTorch:
    """Stands for torch.Tensor where torch is not imported: no argument has this type."""


def torch_tensor_class() -> type:
    """``torch.Tensor`` if torch is imported, else a class no argument has: generated launch
    code reads tensors of exactly this type inline (subclasses take the general path)."""
    return getattr(sys.modules.get("torch"), "Tensor", _NoTorch)


def torch_dtype_cache() -> Dict[Any, str]:
    """The torch dtype -> Triton spelling map the fast path fills as it meets dtypes (a dtype
    missing here is not unknown, only not yet seen: read it through `pointer_and_dtype`)."""
    return _TORCH_DTYPES


def bind_source(names: Sequence[str], stream: str, prefix: str = "__") -> Tuple[List[str], Dict[str, Any]]:
    """Straight-line Python (lines indented for a function body, and the globals they use, all
    named `prefix`...) that binds the arguments held in the locals `names` for a launch on the
    stream handle held in the local `stream`. For argument ``i`` it sets

    * ``<prefix>v<i>`` — the value `Launcher.launch_bound` packs, as `bind` gives it;
    * ``<prefix>k<i>``, ``<prefix>d<i>`` — a pair that determines the argument's
      specialization: its `signature_of` and, for a Python ``int``, whether it equals 1. A CUDA
      torch tensor gives (its torch dtype, address % 16 == 0); an ``int`` (``value == 1``
      within int32, else ``"i64"``/``"u64"``; value % 16 == 0); a ``float`` (fp32, None);
      anything else (`signature_of`, None) through `bind_arg`, which raises `bind`'s errors.

    A dispatcher keys its specializations by the tuple of these pairs: equal pairs, equal
    specialization. CUDA torch tensors take the inline branch when torch is imported as the code
    is generated (else `bind_arg`: slower, the same result); an unknown torch dtype reaches
    `signature_of`'s error when its key misses."""
    env: Dict[str, Any] = {f"{prefix}Tensor": torch_tensor_class(), f"{prefix}bind_arg": bind_arg,
                           f"{prefix}wide_int_type": wide_int_type, f"{prefix}FP32": _FP32}
    lines: List[str] = []
    for i, x in enumerate(names):
        v, k, d = f"{prefix}v{i}", f"{prefix}k{i}", f"{prefix}d{i}"
        lines += [
            f"    if type({x}) is {prefix}Tensor and {x}.is_cuda:",
            f"        {v} = {x}.data_ptr()",
            f"        {k} = {x}.dtype",
            f"        {d} = {v} & 15 == 0",
            f"    elif type({x}) is int:",
            f"        {v} = {x}",
            f"        {k} = {x} == 1 if {_I32_MIN} <= {x} <= {_I32_MAX} else {prefix}wide_int_type({x})",
            f"        {d} = {x} & 15 == 0",
            f"    elif type({x}) is float:",
            f"        {v}, {k}, {d} = {x}, {prefix}FP32, None",
            "    else:",
            f"        {k}, {v} = {prefix}bind_arg({x}, {stream})",
            f"        {d} = None",
        ]
    return lines, env

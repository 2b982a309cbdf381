"""Which CUDA stream a launch goes on: `stream_handle(stream)` turns whatever the user passed as
``stream=`` into the raw ``CUstream`` handle (an int).

Accepted, checked in this order:

* ``None`` — `default_stream()`: torch's current stream when torch is imported (as Triton
  launches, so ``with torch.cuda.stream(s):`` works), else 0, the legacy default stream;
* an ``int`` — a raw handle (0 default, 1 ``CU_STREAM_LEGACY``, 2 ``CU_STREAM_PER_THREAD``);
* a torch ``torch.cuda.Stream`` / ``ExternalStream`` — its ``.cuda_stream``;
* a CuPy ``cupy.cuda.Stream`` — its ``.ptr``;
* anything with ``__cuda_stream__()`` (the CUDA stream protocol: numba ``Stream``,
  ``cuda.core.Stream``, recent torch/CuPy) — the second element of the pair it returns;
* a numba ``Stream`` or a cuda.bindings ``CUstream`` — ``int()`` of its handle.

The resolver for each stream *type* is found once and cached, so the per-launch cost is one
dict lookup and one attribute read.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional, Tuple

from .errors import TLXRuntimeError

_RESOLVERS: Dict[type, Callable[[Any], int]] = {}
# once torch is bound: the default stream is getter(arg), or getter() when arg is None — torch's
# current-raw-stream function and -1 when it answers -1 for the current device (one C call), else
# a function asking torch for the current device first. The native launch reads this variable
# itself for a launch without ``stream=`` (runtime/native_launch.c, `stream_of`).
_TORCH_STREAM: Optional[Tuple[Callable[..., int], Optional[int]]] = None


def default_stream() -> int:
    """The stream a launch without ``stream=`` goes on: torch's current stream on its current
    device when torch has been imported (as Triton launches), else 0 (legacy default)."""
    fns = _TORCH_STREAM
    if fns is None:
        if "torch" not in sys.modules:
            return 0
        fns = _bind_torch_stream()
        if fns is None:
            return 0
    getter, arg = fns
    return getter() if arg is None else getter(arg)


def _bind_torch_stream() -> Optional[Tuple[Callable[..., int], Optional[int]]]:
    global _TORCH_STREAM
    C = getattr(sys.modules["torch"], "_C", None)
    get_device = getattr(C, "_cuda_getDevice", None)
    get_stream = getattr(C, "_cuda_getCurrentRawStream", None)
    if get_device is None or get_stream is None:  # a CPU-only torch build
        return None
    try:  # torch's getCurrentCUDAStream(-1) is the current device's: checked once, not assumed
        one_call = get_stream(-1) == get_stream(get_device())
    except Exception:  # noqa: BLE001 - a torch that refuses -1 (or no device yet): two calls
        one_call = False
    _TORCH_STREAM = (get_stream, -1) if one_call else (lambda: get_stream(get_device()), None)
    return _TORCH_STREAM


def _from_int(s: Any) -> int:
    return int(s)


def _from_torch(s: Any) -> int:
    return int(s.cuda_stream)


def _from_cupy(s: Any) -> int:
    return int(s.ptr)


def _from_protocol(s: Any) -> int:
    version_and_handle = s.__cuda_stream__()
    if not (isinstance(version_and_handle, tuple) and len(version_and_handle) == 2):
        raise TLXRuntimeError(f"{type(s).__name__}.__cuda_stream__() returned "
                              f"{version_and_handle!r}, not a (version, handle) pair")
    return int(version_and_handle[1])


def _from_handle_attr(s: Any) -> int:
    return int(s.handle)


def _resolver_for(tp: type, s: Any) -> Callable[[Any], int]:
    """Pick how to read a handle out of a stream of type `tp` (called once per type)."""
    if issubclass(tp, bool):
        raise TLXRuntimeError(f"stream={s!r} is a bool, not a stream")
    if issubclass(tp, int):
        return _from_int
    module = tp.__module__ or ""
    if module.startswith("torch") and hasattr(s, "cuda_stream"):
        return _from_torch
    if module.startswith("cupy") and hasattr(s, "ptr"):
        return _from_cupy
    if hasattr(s, "__cuda_stream__"):
        return _from_protocol
    if hasattr(s, "handle"):
        return _from_handle_attr
    if module.startswith("cuda.bindings") or hasattr(s, "__int__"):
        return _from_int
    raise TLXRuntimeError(f"stream={s!r} is not a CUDA stream",
                          hint="pass a torch.cuda.Stream, cupy.cuda.Stream, numba.cuda stream, "
                               "an object with __cuda_stream__, or a raw int handle")


def stream_handle(stream: Any) -> int:
    """The raw CUstream handle (int) for `stream` (see the module docstring for what is
    accepted). A negative or non-integer handle is a `TLXRuntimeError`."""
    if stream is None:
        return default_stream()
    tp = type(stream)
    if tp is int:
        handle = stream
    else:
        resolver = _RESOLVERS.get(tp)
        if resolver is None:
            resolver = _RESOLVERS[tp] = _resolver_for(tp, stream)
        try:
            handle = resolver(stream)
        except TLXRuntimeError:
            raise
        except Exception as exc:
            raise TLXRuntimeError(f"could not read a CUDA stream handle from {stream!r}: {exc}") from exc
    if handle < 0:
        raise TLXRuntimeError(f"stream handle {handle} is negative")
    if handle >= 2 ** 64:
        raise TLXRuntimeError(f"stream handle {handle} does not fit in 64 bits")
    return handle

"""The thin layer between the runtime and the CUDA driver.

* `bindings()` — the `cuda.bindings.driver` module, imported on first use (importing
  `tlx.runtime` never touches the driver, so it works on machines without a GPU).
* `call(name, *args, kernel=)` — one driver call through cuda.bindings: a failed CUresult
  becomes a `TLXRuntimeError` naming the kernel and the call; a missing driver becomes a
  `NoCUDADeviceError`.
* `current_context(kernel)` — numba.cuda's current (primary) context, pushed on this thread.
  torch, CuPy and cuda.core share that primary context, so their pointers and streams work here.
* `has_sm90_gpu()` — whether there is a Hopper-class GPU to run on (the demo and the GPU tests ask).
"""

from __future__ import annotations

from typing import Any, Optional

from .errors import TLXRuntimeError, driver_error, is_no_device_exception, no_device_error

_DRV: Any = None


def bindings() -> Any:
    """`cuda.bindings.driver`, imported once (it imports without a driver; calls then fail)."""
    global _DRV
    if _DRV is None:
        try:
            from cuda.bindings import driver as drv
        except ImportError as exc:  # pragma: no cover - cuda-bindings is a dependency of numba-cuda
            raise TLXRuntimeError("cuda-bindings is not installed, so nothing can be launched",
                                  hint="pip install 'numba-cuda[cu13]'") from exc
        _DRV = drv
    return _DRV


def call(name: str, *args: Any, kernel: Optional[str] = None) -> Any:
    """Run ``cuda.bindings.driver.<name>(*args)``, which returns ``(CUresult, *outputs)``: raise
    the `driver_error` on failure, else return the single output, the tuple of outputs, or None."""
    fn = getattr(bindings(), name)
    try:
        result = fn(*args)
    except Exception as exc:
        if is_no_device_exception(exc):
            raise no_device_error(kernel, exc) from None  # (numba's chain is noise)
        raise TLXRuntimeError(f"{name} raised {type(exc).__name__}: {exc}", kernel=kernel,
                              call=name) from exc
    if result[0]:
        raise driver_error(result[0], name, kernel)
    return None if len(result) == 1 else result[1] if len(result) == 2 else result[1:]


def current_context(kernel: Optional[str] = None) -> Any:
    """numba.cuda's current context (the device's primary context, made current on this
    thread). Raises `NoCUDADeviceError` where there is no driver or no device."""
    try:
        from numba import cuda
    except ImportError as exc:  # pragma: no cover - numba-cuda is a dependency
        raise TLXRuntimeError("numba-cuda is not installed, so nothing can be launched",
                              kernel=kernel, hint="pip install 'numba-cuda[cu13]'") from exc
    try:
        return cuda.current_context()
    except Exception as exc:
        if is_no_device_exception(exc):
            raise no_device_error(kernel, exc) from None  # (numba's chain is noise)
        raise TLXRuntimeError(f"numba.cuda.current_context() raised {type(exc).__name__}: {exc}",
                              kernel=kernel, call="current_context") from exc


def has_sm90_gpu() -> bool:
    """True when numba.cuda sees a GPU of compute capability 9.0 or newer; False without a
    driver or a device (never raises)."""
    try:
        from numba import cuda

        return cuda.is_available() and cuda.get_current_device().compute_capability >= (9, 0)
    except Exception:
        return False


def device_attribute(device_id: int, name: str, kernel: Optional[str] = None) -> int:
    """``cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_<name>, device_id)`` as an int."""
    drv = bindings()
    attr = getattr(drv.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name)
    return int(call("cuDeviceGetAttribute", attr, drv.CUdevice(device_id), kernel=kernel))

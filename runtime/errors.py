"""The runtime's error class and the two ways errors reach it: a failed driver call and a
machine without a usable CUDA device.

Every error the runtime raises on purpose is a `TLXRuntimeError` (a `TLXError`). A failed driver
call names the kernel, the driver call and the CUDA error (``CUDA_ERROR_INVALID_VALUE: invalid
argument``); a machine without a GPU or driver gets a `NoCUDADeviceError` saying so. Bad
arguments (a host array, an out-of-range scalar, a descriptor that breaks a TMA rule) name the
kernel parameter and say what to change.
"""

from __future__ import annotations

from typing import Any, Optional

from tlx.compiler.errors import TLXError


class TLXRuntimeError(TLXError):
    """A problem found while loading or launching a kernel.

    ``kernel`` is the kernel's name when known, ``call`` the driver call that failed (or None),
    ``hint`` what to change. The message reads ``kernel 'k': <what>`` then ``hint: ...``.
    """

    def __init__(self, message: str, kernel: Optional[str] = None, call: Optional[str] = None,
                 hint: Optional[str] = None, cuda_error: Optional[str] = None):
        self.message = message
        self.kernel = kernel
        self.call = call
        self.hint = hint
        self.cuda_error = cuda_error  # e.g. "CUDA_ERROR_INVALID_VALUE" for a failed driver call
        text = f"kernel '{kernel}': {message}" if kernel else message
        if hint:
            text += f"\nhint: {hint}"
        super().__init__(text)


class NoCUDADeviceError(TLXRuntimeError):
    """There is no CUDA driver or no CUDA device on this machine, so nothing can be launched."""


_NO_DEVICE_HINT = ("launching needs an NVIDIA GPU (sm_90a for Hopper kernels) and its driver. Without one: "
                   "run the launch on the CPU interpreter with TLX_INTERPRET=1 (or "
                   "tlx.interpret(kernel, grid, *args)), or compile only with kernel.warmup(*args, grid=grid)")


def _first_line(cause: BaseException) -> str:
    """The one line of a driver exception that says what is wrong: numba's "Error at driver
    init:" preamble and its advice lines dropped ("CUDA driver library cannot be found.")."""
    lines = [ln.strip(" :") for ln in str(cause).splitlines()]
    lines = [ln for ln in lines if ln and not ln.lower().startswith("error at driver init")]
    line = lines[0] if lines else type(cause).__name__
    return line if len(line) <= 200 else line[:200] + "..."


def no_device_error(kernel: Optional[str], cause: BaseException) -> NoCUDADeviceError:
    """The error for a launch on a machine without a CUDA driver or device; `cause` is the
    exception numba.cuda or cuda.bindings raised. Only its one useful line is quoted: callers
    raise this ``from None``, since the chain of numba's internals says nothing more. The
    cause stays reachable as ``.driver_exception`` for whoever debugs the driver itself."""
    err = NoCUDADeviceError(f"cannot launch: no CUDA device is available ({_first_line(cause)})",
                            kernel=kernel, hint=_NO_DEVICE_HINT)
    err.driver_exception = cause
    return err


def is_no_device_exception(exc: BaseException) -> bool:
    """True for the exceptions that mean "no driver or no device": numba's CudaSupportError,
    cuda.pathfinder's DynamicLibNotFoundError (libcuda.so missing) and CUDA_ERROR_NO_DEVICE."""
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"CudaSupportError", "DynamicLibNotFoundError", "NoCUDADeviceError"}:
        return True
    text = str(exc)
    return "CUDA_ERROR_NO_DEVICE" in text or "CUDA driver library cannot be found" in text


def driver_error(result: Any, call: str, kernel: Optional[str] = None,
                 hint: Optional[str] = None) -> TLXRuntimeError:
    """The error for a driver call that returned `result` (a CUresult other than success):
    it names the call, the kernel and the CUDA error with the driver's own description."""
    name = getattr(result, "name", None)  # the CUresult's enum name, or its number if unknown
    name = name if isinstance(name, str) else f"CUresult {int(result)}"
    description = ""
    try:  # the driver's text for the error ("invalid argument"); needs libcuda, so best effort
        from cuda.bindings import driver as drv

        res, text = drv.cuGetErrorString(result)
        if int(res) == 0 and text:
            description = text.decode() if isinstance(text, bytes) else str(text)
    except Exception:  # pragma: no cover - no driver: the name alone is still precise
        pass
    message = f"{call} failed: {name}" + (f" ({description})" if description else "")
    if hint is None:
        hint = _HINTS.get(name)
    if name == "CUDA_ERROR_NO_DEVICE":
        return NoCUDADeviceError(message, kernel=kernel, call=call, hint=hint or _NO_DEVICE_HINT,
                                 cuda_error=name)
    return TLXRuntimeError(message, kernel=kernel, call=call, hint=hint, cuda_error=name)


# What usually causes a driver error at launch, in words a kernel author can act on.
_HINTS = {
    "CUDA_ERROR_INVALID_PTX": "the PTX does not assemble for this GPU; sm_90a kernels run only on "
                              "compute capability 9.0 (H100/H200)",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the driver is older than the PTX ISA version the kernel "
                                          "uses; update the driver or compile for an older ISA",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the kernel was compiled for another architecture than this GPU",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "the kernel read or wrote out of bounds (check masks and the sizes "
                                  "passed); the CUDA context is now unusable, restart the process",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "a pointer argument is not aligned as the kernel assumes "
                                     "(divisibility specialization or a TMA base)",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "too many registers per thread for this block size; "
                                          "lower num_warps or maxnreg",
}

"""Stand-ins for device arrays and streams, so the runtime's CPU tests need no GPU: objects
that export __cuda_array_interface__ like numba/CuPy do, a class that looks like torch.Tensor
to the runtime's type check, and stream objects of each protocol."""

from typing import Optional, Tuple


class CAIArray:
    """A device array as numba/CuPy export it (CAI v3): pointer, shape, typestr, byte strides."""

    def __init__(self, ptr: int, shape: Tuple[int, ...], typestr: str = "<f4",
                 strides: Optional[Tuple[int, ...]] = None, stream: Optional[int] = None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": tuple(shape),
                                         "typestr": typestr, "strides": strides, "version": 3}
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream


class Tensor:
    """Looks like a torch.Tensor to the runtime (module 'torch', class name 'Tensor')."""

    __module__ = "torch"

    class _Dtype:
        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return "torch." + self.name

        __str__ = __repr__

    DTYPES = {}

    def __init__(self, ptr, shape, dtype="float32", strides=None, cuda=True, requires_grad=False,
                 pinned=False):
        self._ptr = ptr
        self._pinned = pinned
        self.shape = tuple(shape)
        self.dtype = Tensor.DTYPES.setdefault(dtype, Tensor._Dtype(dtype))
        self.is_cuda = cuda
        self.device = "cuda:0" if cuda else "cpu"
        self.requires_grad = requires_grad
        if strides is None:
            strides, step = [], 1
            for d in reversed(self.shape):
                strides.append(step)
                step *= d
            strides = tuple(reversed(strides))
        self._strides = tuple(strides)

    def data_ptr(self):
        return self._ptr

    def is_pinned(self):
        return self._pinned

    def stride(self):
        return self._strides

    @property
    def __cuda_array_interface__(self):
        if self.requires_grad:  # what torch does
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad.")
        return {"data": (self._ptr, False), "shape": self.shape, "typestr": "<f4", "version": 2}


class TorchStream:
    __module__ = "torch.cuda.streams"

    def __init__(self, handle):
        self.cuda_stream = handle


class CupyStream:
    __module__ = "cupy.cuda.stream"

    def __init__(self, handle):
        self.ptr = handle


class ProtocolStream:
    def __init__(self, handle):
        self._h = handle

    def __cuda_stream__(self):
        return (0, self._h)


class HandleStream:
    """numba.cuda Stream-like: an int()-able .handle."""

    def __init__(self, handle):
        self.handle = handle


# ---- stand-ins for cuLaunchKernelEx ---------------------------------------------------------------

import ctypes  # noqa: E402


class LaunchConfig(ctypes.Structure):
    """cuda.h's CUlaunchConfig, as the native launch fills it."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


LAUNCH_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(LaunchConfig), ctypes.c_void_p,
                             ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


class DriverRecorder:
    """Records every launch as the driver would receive it: grid, block, dynamic shared memory,
    stream, the cluster attribute's 72 bytes (None without one), the function handle and each
    parameter's bytes (sizes from the registered ABI of each handle). `native_address` is a C
    function pointer for the native launch's `set_entry` (a ctypes callback: the GIL, released
    around the driver call, is taken again inside); `bindings` takes cuda.bindings' arguments."""

    def __init__(self):
        self.calls = []
        self.sizes = {}
        self.result = 0
        self._callback = LAUNCH_FN(self._native)
        self.native_address = ctypes.cast(self._callback, ctypes.c_void_p).value

    def register(self, handle, abi):
        self.sizes[handle] = [p.size for p in abi.params]

    def _record(self, grid, block, shared, stream, attr, handle, params, config_bytes=None):
        sizes = self.sizes[handle]
        self.calls.append({"grid": grid, "block": block, "shared": shared, "stream": stream, "cluster_attr": attr,
                           "handle": handle, "params": [ctypes.string_at(params[i], n) for i, n in enumerate(sizes)],
                           "config_bytes": config_bytes})

    def _native(self, config, function, params, extra):
        c = config.contents
        attr = ctypes.string_at(c.attrs, 72) if c.numAttrs else None
        self._record((c.gridDimX, c.gridDimY, c.gridDimZ), c.blockDimX, c.sharedMemBytes, c.hStream or 0, attr,
                     function or 0, params, ctypes.string_at(ctypes.addressof(c), ctypes.sizeof(LaunchConfig)))
        return self.result

    def bindings(self, cfg, handle, params, extra):
        attr = ctypes.string_at(cfg.attrs[0].getPtr(), 72) if cfg.numAttrs else None
        self._record((cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ), cfg.blockDimX, cfg.sharedMemBytes, int(cfg.hStream),
                     attr, handle, (ctypes.c_void_p * max(len(self.sizes[handle]), 1)).from_address(params))
        return (self.result,)

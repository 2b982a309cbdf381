"""Launching one compiled kernel specialization: `Launcher`.

Integration API::

    from tlx.runtime.launcher import Launcher
    launcher = Launcher(abi, ptx=ptx_text, cubin=cubin_bytes, name="matmul_kernel")
    launcher.launch(grid, args, stream=None)   # grid: (x,) (x, y) (x, y, z) or int, in CTAs
    launcher.load()                            # optional: load now instead of at the first launch
    launcher.fast                              # (native launch, spec) for the frontend, or None

``args`` are the kernel's user (non-hidden) parameters in ABI order: device arrays for
pointers, Python/numpy numbers for scalars, `TensorDescriptor`s for descriptors, `HostCopy`
for host arrays the user opted to copy. ``stream`` is anything `streams.stream_handle` accepts;
without it the launch goes on torch's current stream when torch is imported, else on the
legacy default stream (handle 0). ``grid`` counts CTAs (as TLX's ``ctas_per_cga`` and the
driver do) and must be a multiple of ``abi.cluster``; if ``abi.extra["grid_unit"] ==
"cluster"`` it counts clusters (Triton's ``num_ctas`` convention) and is multiplied by the
cluster shape. A grid with a zero dimension launches nothing, as in Triton.

A launch reads every argument into a plain value (a device array's address, checked against
the compiled dtype; a descriptor's 128 encoded bytes; a host copy staged on the device) and
hands them to the native launch (``native_launch.c``: packs on its stack, calls
cuLaunchKernelEx) or, where that module could not be built or ``TLX_NATIVE_LAUNCH=0``, packs
them in Python and calls cuda.bindings' ``cuLaunchKernelEx``. The frontend's hot path calls the
native launch itself with the arguments as given (`fast`), and comes back here for anything
it cannot pack. Nothing per launch is shared between threads: the native launch packs on its
stack, the Python packer uses a buffer and config per thread.

Hidden parameters: a hidden pointer is the kernel's global scratch; with
``abi.scratch_bytes_per_program > 0`` the launch takes ``scratch * num_programs`` bytes from
the allocator `tlx.set_allocator` set, or allocates them stream-ordered itself, and gives them
back once the kernel is queued (runtime/scratch.py), so concurrent launches never share
scratch; otherwise it passes a null pointer.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tlx.compiler.abi import KernelABI

from . import driver, native_launch, scratch
from .arrays import HostCopy, StagingNeeded, pointer_and_dtype
from .dtypes import canonical_dtype
from .errors import TLXRuntimeError, driver_error
from .loader import LoadedKernel, configure_for_device, load_kernel
from .packing import TENSOR_MAP_BYTES, ArgLayout, ArgPack, explain_bad_value
from .streams import default_stream, stream_handle
from .tma import DescriptorEncoder

MAX_GRID = (2 ** 31 - 1, 65535, 65535)
BAD_VALUE = (struct.error, OverflowError, TypeError)
NativeLaunch = Callable[[bytes, Any, int, tuple, Optional[bytes]], int]


class Launcher:
    """Loads and launches one kernel specialization (see the module docstring)."""

    def __init__(self, abi: KernelABI, ptx: Optional[str] = None, cubin: Optional[bytes] = None,
                 name: Optional[str] = None):
        self.abi = abi
        self.ptx = ptx
        self.cubin = cubin
        self.name = name or abi.entry
        self.layout = ArgLayout(abi.params)
        self.user_params = [i for i, p in enumerate(abi.params) if not p.hidden]
        self.loaded: Optional[LoadedKernel] = None
        self.fast: Optional[Tuple[NativeLaunch, bytes]] = None
        for p in abi.params:
            if p.kind == "tensordesc" and p.tma is None:
                raise TLXRuntimeError(f"parameter '{p.name}' is a tensor descriptor without a TMA "
                                      "encoding in the ABI", kernel=self.name)
            if p.hidden and p.kind != "pointer":
                raise TLXRuntimeError(f"hidden parameter '{p.name}' of kind {p.kind} is not one the "
                                      "runtime can fill (only a global scratch pointer is)", kernel=self.name)
        self.encoders: Dict[int, DescriptorEncoder] = {
            i: DescriptorEncoder(p.tma, p.name, self.name) for i, p in enumerate(abi.params) if p.kind == "tensordesc"}
        unit = abi.extra.get("grid_unit", "cta")
        if unit not in ("cta", "cluster"):
            raise TLXRuntimeError(f"abi.extra['grid_unit'] = {unit!r}; use 'cta' or 'cluster'", kernel=self.name)
        self.grid_in_clusters = unit == "cluster"
        self._encode_lock = threading.Lock()  # an encoder retargets its cached maps in place
        self._local = threading.local()  # the Python packer's buffer and config, per thread

    # -- once per specialization ---------------------------------------------------------------

    def load(self) -> LoadedKernel:
        """Load the kernel now (the first launch does it otherwise)."""
        if self.loaded is None:
            self.install(load_kernel(self.name, self.abi, self.ptx, self.cubin), native_launch.entry())
        return self.loaded  # type: ignore[return-value]

    def install(self, loaded: LoadedKernel, native: Optional[NativeLaunch] = None,
                launch_ex: Optional[Callable[..., Any]] = None) -> None:
        """Bind a loaded kernel to its launch entries: `native` (`native_launch.entry()`) when
        there is one, else `launch_ex` (cuda.bindings' cuLaunchKernelEx, the default). Tests
        on machines without a GPU pass stand-ins for both."""
        self._launch_ex = launch_ex if launch_ex is not None else driver.bindings().cuLaunchKernelEx
        self._native = native
        self._devices = {loaded.device_id}  # devices whose launch attributes are set
        self._spec = None
        if native is not None:
            self._spec = self.layout.launch_spec(int(loaded.handle), int(self.abi.threads_per_cta),
                                                 int(self.abi.shared_bytes), [int(c) for c in self.abi.cluster],
                                                 self.grid_in_clusters)
        # The frontend may call the native launch with the user's arguments as given when they
        # are exactly the ABI's parameters (no hidden scratch pointer, no descriptor to encode).
        plain = not self.layout.desc_slots and len(self.user_params) == len(self.abi.params)
        self.fast = (native, self._spec) if native is not None and self._spec is not None and plain else None
        self.loaded = loaded

    # -- launching ------------------------------------------------------------------------------

    def launch(self, grid: Any, args: Sequence[Any], stream: Any = None) -> None:
        """Launch with the user's arguments (see the module docstring)."""
        s = default_stream() if stream is None else stream_handle(stream)
        if self.loaded is None:
            self.load()
        if len(args) != len(self.user_params):
            names = [self.abi.params[i].name for i in self.user_params]
            raise TLXRuntimeError(f"takes {len(names)} arguments ({', '.join(names)}), got {len(args)}",
                                  kernel=self.name)
        staged: List[Tuple[HostCopy, int]] = []
        held: Any = 0  # the scratch's handle (runtime/scratch.py), given back once the launch is queued
        try:
            values = self._values(args, s, staged)
            if len(values) != len(self.abi.params):  # the hidden scratch pointer, last in the ABI
                ptr, held = self._scratch_alloc(grid, s)
                values += [ptr] * (len(self.abi.params) - len(values))
            err = self._call(grid, values, s)
            if err and self._recover(err):
                err = self._call(grid, values, s)
            if err:
                raise self._launch_error(err, grid, s)
            scratch.release(held, s, self.name)
            held = 0
            if staged:
                self._finish_staging(staged, s)
        finally:
            for _, ptr in staged:
                driver.call("cuMemFree", ptr, kernel=self.name)
            scratch.release(held, s, self.name)

    def relaunch_after(self, err: int, grid: Any, args: Sequence[Any], stream: int) -> None:
        """The frontend's fast call returned driver error `err`: recover (a thread without a
        current context, another device) and launch again, or raise the error."""
        if err > 0 and self._recover(err):
            self.launch(grid, args, stream)
            return
        raise self._launch_error(err, grid, stream)

    def _values(self, args: Sequence[Any], s: int, staged: List[Tuple[HostCopy, int]]) -> List[Any]:
        """The user's arguments as plain values, in ABI order (hidden parameters left out)."""
        values: List[Any] = []
        for i, arg in zip(self.user_params, args):
            p = self.abi.params[i]
            if p.kind == "pointer":
                try:
                    ptr, dtype = pointer_and_dtype(arg, s)
                except StagingNeeded:
                    ptr, dtype = self._stage(arg, s, staged), arg.dtype
                if canonical_dtype(dtype) != canonical_dtype(p.dtype):
                    raise TLXRuntimeError(f"parameter '{p.name}' is a pointer to {canonical_dtype(p.dtype)}, "
                                          f"but the array passed holds {dtype}", kernel=self.name,
                                          hint="pass an array of the compiled dtype (the frontend compiles "
                                               "one specialization per dtype)")
                values.append(ptr)
            elif p.kind == "tensordesc":
                with self._encode_lock:
                    tmap = self.encoders[i].tensor_map(arg, s)
                    values.append(ctypes.string_at(tmap.getPtr(), TENSOR_MAP_BYTES))
            else:
                values.append(arg)
        return values

    def _call(self, grid: Any, values: List[Any], s: int) -> int:
        """One launch of plain values: the native launch, or the Python packer and cuda.bindings."""
        if self._spec is not None:
            try:
                return self._native(self._spec, grid, s, tuple(values), None)  # type: ignore[misc]
            except ValueError:  # the grid: say which rule it breaks
                self.grid_dims(grid)
                raise
            except BAD_VALUE:
                raise self._value_error(values) from None
        dims = self.grid_dims(grid)
        if 0 in dims:
            return 0
        local = self._local
        if getattr(local, "pack", None) is None:
            local.pack, local.config = ArgPack(self.layout), self._build_config()
        try:
            local.pack.write(values)
        except BAD_VALUE:
            raise self._value_error(values) from None
        cfg = local.config
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = dims
        cfg.hStream = driver.bindings().CUstream(s)
        return self._launch_ex(cfg, self.loaded.handle, local.pack.address, 0)[0]  # type: ignore[union-attr]

    def _build_config(self) -> Any:
        drv = driver.bindings()
        cfg = drv.CUlaunchConfig()
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = int(self.abi.threads_per_cta), 1, 1
        cfg.sharedMemBytes = int(self.abi.shared_bytes)
        cfg.numAttrs = 0
        if tuple(self.abi.cluster) != (1, 1, 1):
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = (int(c) for c in self.abi.cluster)
            cfg.attrs = [attr]
            cfg.numAttrs = 1
        return cfg

    def grid_dims(self, grid: Any) -> Tuple[int, int, int]:
        """The launch grid in CTAs, checked: 1-3 non-negative ints within the driver's limits,
        a multiple of the cluster shape. (0 in any dimension: nothing is launched.)"""
        if isinstance(grid, int) and not isinstance(grid, bool):
            grid = (grid,)
        try:
            dims = [int(g.__index__()) for g in grid]
        except (TypeError, AttributeError):
            raise TLXRuntimeError(f"grid {grid!r} must be a tuple of 1 to 3 integers", kernel=self.name,
                                  hint="resolve a grid callable before the launch: grid = grid(meta)") from None
        if not 1 <= len(dims) <= 3:
            raise TLXRuntimeError(f"grid {grid!r} must have 1 to 3 dimensions", kernel=self.name)
        dims += [1] * (3 - len(dims))
        cluster = [int(c) for c in self.abi.cluster]
        if self.grid_in_clusters:
            dims = [d * c for d, c in zip(dims, cluster)]
        for axis, (d, limit) in enumerate(zip(dims, MAX_GRID)):
            if d < 0 or d > limit:
                raise TLXRuntimeError(f"grid dimension {'xyz'[axis]} = {d} is outside 0..{limit}", kernel=self.name)
        for axis, (d, c) in enumerate(zip(dims, cluster)):
            if d % c:
                raise TLXRuntimeError(f"grid dimension {'xyz'[axis]} = {d} CTAs is not a multiple "
                                      f"of the cluster dimension {c}", kernel=self.name,
                                      hint="the grid counts CTAs; round it up to whole clusters")
        return dims[0], dims[1], dims[2]

    # -- errors, recovery, staging, scratch ------------------------------------------------------

    def _recover(self, err: int) -> bool:
        """Whether a failed launch can be made to work: with no current context on this thread
        (a new thread), make numba's context current; in another device's context (a CUkernel
        runs in any context; the driver loads it there itself), set that device's launch
        attributes once. Then the caller launches once more."""
        drv = driver.bindings()
        loaded = self.loaded
        assert loaded is not None
        if int(err) == int(drv.CUresult.CUDA_ERROR_INVALID_CONTEXT):
            driver.current_context(self.name)
            return True
        if isinstance(loaded.handle, drv.CUkernel):
            try:
                device_id = int(driver.call("cuCtxGetDevice", kernel=self.name))
            except TLXRuntimeError:
                return False
            if device_id not in self._devices:
                configure_for_device(loaded.handle, self.abi, device_id, loaded.static_shared_bytes, self.name)
                self._devices.add(device_id)
                return True
        return False

    def _launch_error(self, err: Any, grid: Any, stream: int) -> TLXRuntimeError:
        try:  # the native launch returns a plain int
            err = driver.bindings().CUresult(int(err))
        except ValueError:
            pass
        e = driver_error(err, "cuLaunchKernelEx", self.name)
        detail = (f" (grid {self.grid_dims(grid)}, block ({self.abi.threads_per_cta}, 1, 1), dynamic smem "
                  f"{self.abi.shared_bytes} B, cluster {tuple(self.abi.cluster)}, stream 0x{stream:x})")
        return TLXRuntimeError(e.message + detail, kernel=self.name, call="cuLaunchKernelEx", hint=e.hint,
                               cuda_error=e.cuda_error)

    def _value_error(self, values: Sequence[Any]) -> TLXRuntimeError:
        for slot in self.layout.value_slots:
            if slot.kind == "scalar":
                why = explain_bad_value(slot, values[slot.index])
                if why:
                    return TLXRuntimeError(f"parameter '{slot.name}' ({canonical_dtype(slot.dtype)}): {why}",
                                           kernel=self.name)
        return TLXRuntimeError("could not pack the kernel arguments", kernel=self.name)

    def _stage(self, host: HostCopy, s: int, staged: List[Tuple[HostCopy, int]]) -> int:
        """Copy a HostCopy array to new device memory (freed after the launch); its address."""
        if not host.nbytes:
            return 0
        ptr = int(driver.call("cuMemAlloc", host.nbytes, kernel=self.name))
        staged.append((host, ptr))
        driver.call("cuMemcpyHtoDAsync", ptr, host.array.ctypes.data, host.nbytes, driver.bindings().CUstream(s),
                    kernel=self.name)
        return ptr

    def _finish_staging(self, staged: List[Tuple[HostCopy, int]], s: int) -> None:
        """Copy the written-back host arrays home and wait for the stream."""
        hs = driver.bindings().CUstream(s)
        for host, ptr in staged:
            if host.write_back:
                driver.call("cuMemcpyDtoHAsync", host.array.ctypes.data, ptr, host.nbytes, hs, kernel=self.name)
        driver.call("cuStreamSynchronize", hs, kernel=self.name)

    def _scratch_alloc(self, grid: Any, stream: int) -> Tuple[int, Any]:
        """The hidden global scratch of one launch (runtime/scratch.py): (address, handle)."""
        per_program = int(self.abi.scratch_bytes_per_program)
        gx, gy, gz = self.grid_dims(grid)
        if per_program <= 0 or gx * gy * gz == 0:
            return 0, 0
        return scratch.allocate(per_program * gx * gy * gz, stream, self.name)

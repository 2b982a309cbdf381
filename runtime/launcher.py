"""Launching one compiled kernel specialization: `Launcher`.

Integration API (what the frontend calls)::

    from tlx.runtime.launcher import Launcher
    launcher = Launcher(abi, ptx=ptx_text, cubin=cubin_bytes, name="matmul_kernel")
    launcher.launch(grid, args, stream=None)   # grid: (x,) (x, y) (x, y, z) or int, in CTAs
    launcher.load()                            # optional: load now instead of at the first launch
    key, values = bind(args, s)                # tlx.runtime.arrays.bind: key and values in one pass
    launcher.launch_bound(grid, values, s)     # the frontend's path: no second read of the arrays

``args`` are the kernel's user (non-hidden) parameters in ABI order: device arrays for
pointers, Python/numpy numbers for scalars, `TensorDescriptor`s for descriptors, `HostCopy`
for host arrays the user opted to copy. ``launch_bound`` takes what `arrays.bind` returned
(pointers already read as ints, the stream already a handle) and skips the dtype checks (the
specialization key already holds the dtypes). ``stream`` is anything `streams.stream_handle`
accepts; without it the launch goes on torch's current stream when torch is imported, else on
the legacy default stream (handle 0).
``grid`` counts CTAs (as TLX's ``ctas_per_cga`` and the driver do) and must be a multiple of
``abi.cluster``; if ``abi.extra["grid_unit"] == "cluster"`` it counts clusters (Triton's
``num_ctas`` convention) and is multiplied by the cluster shape. A grid with a zero dimension
launches nothing, as in Triton.

What happens once, at the first launch: load (`loader.load_kernel`: module, function, smem and
cluster attributes), build the ``CUlaunchConfig`` (block, dynamic smem, cluster attribute), and
generate this specialization's launch function (``launcher.source`` shows it). Per launch, that
function does only: resolve the stream, read each array's pointer and check its dtype, refill
descriptor slots that changed, ONE ``struct.pack_into`` for all pointers and scalars (typed from
the ABI and range-checked by it), update the grid/stream fields only when they changed, and
call cuLaunchKernelEx with the config and the pre-packed ``void**``: through the native entry
(`native_launch`: three ints into C, 0.6-1.2 us less per launch on the H200's host) where it could be built, else through
``cuda.bindings.driver.cuLaunchKernelEx``.

Threads: each thread launches through its own parameter buffer and config (the first thread
owns the launcher's; others get a per-thread copy sharing the loaded kernel), so concurrent
launches never see each other's arguments.

Hidden parameters: a hidden pointer is the kernel's global scratch; with
``abi.scratch_bytes_per_program > 0`` the launch allocates ``scratch * num_programs`` bytes
stream-ordered (``cuMemAllocAsync``) and frees them after the kernel (``cuMemFreeAsync``), so
concurrent launches never share scratch; otherwise it passes a null pointer.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tlx.compiler.abi import KernelABI

from . import driver, native_launch
from .arrays import HostCopy, StagingNeeded, pointer_and_dtype, torch_dtype_cache, torch_tensor_class
from .dtypes import canonical_dtype
from .errors import TLXRuntimeError, driver_error
from .loader import LoadedKernel, configure_for_device, load_kernel
from .packing import INT_RANGES, ArgLayout, ArgPack, TENSOR_MAP_BYTES, explain_bad_value
from .streams import default_stream, stream_handle
from .tma import DescriptorEncoder

MAX_GRID = (2 ** 31 - 1, 65535, 65535)
_CLONE_LOCK = threading.Lock()
_BAD_VALUE = (struct.error, OverflowError, TypeError, ValueError)
# The native dispatcher's writer codes (native_dispatch.c W_*): a tensor's address, a
# range-checked integer, fp32, fp64, constant bytes.
W_PTR, W_INT, W_F32, W_F64, W_CONST = range(5)


class _DescriptorSlot:
    """Keeps one descriptor parameter's 128 bytes in the ArgPack up to date."""

    __slots__ = ("encoder", "address", "map", "replacements")

    def __init__(self, encoder: DescriptorEncoder, address: int):
        self.encoder = encoder
        self.address = address
        self.map: Any = None  # the CUtensorMap last copied in ...
        self.replacements = -1  # ... and the encoder's address-replacement count at that time

    def fill(self, desc: Any, stream: int) -> None:
        tmap = self.encoder.tensor_map(desc, stream)
        if tmap is not self.map or self.encoder.replacements != self.replacements:
            ctypes.memmove(self.address, tmap.getPtr(), TENSOR_MAP_BYTES)
            self.map = tmap
            self.replacements = self.encoder.replacements


class _StagedArray:
    """A device copy of a HostCopy array, seen by the fast path as a CAI array."""

    def __init__(self, ptr: int, host: HostCopy):
        a = host.array
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": tuple(a.shape),
                                         "typestr": a.dtype.str, "strides": None, "version": 3,
                                         "stream": None}


class Launcher:
    """Loads and launches one kernel specialization (see the module docstring)."""

    def __init__(self, abi: KernelABI, ptx: Optional[str] = None, cubin: Optional[bytes] = None,
                 name: Optional[str] = None):
        self.abi = abi
        self.ptx = ptx
        self.cubin = cubin
        self.name = name or abi.entry
        self.layout = ArgLayout(abi.params)
        self.pack = ArgPack(self.layout)
        self.user_params = [i for i, p in enumerate(abi.params) if not p.hidden]
        self.loaded: Optional[LoadedKernel] = None
        self.encoders: Dict[int, DescriptorEncoder] = {
            i: DescriptorEncoder(p.tma, p.name, self.name) for i, p in enumerate(abi.params)
            if p.kind == "tensordesc" and p.tma is not None}
        for i, p in enumerate(abi.params):
            if p.kind == "tensordesc" and p.tma is None:
                raise TLXRuntimeError(f"parameter '{p.name}' is a tensor descriptor without a TMA "
                                      "encoding in the ABI", kernel=self.name)
            if p.hidden and p.kind != "pointer":
                raise TLXRuntimeError(f"hidden parameter '{p.name}' of kind {p.kind} is not one the "
                                      "runtime can fill (only a global scratch pointer is)",
                                      kernel=self.name)
        unit = abi.extra.get("grid_unit", "cta")
        if unit not in ("cta", "cluster"):
            raise TLXRuntimeError(f"abi.extra['grid_unit'] = {unit!r}; use 'cta' or 'cluster'",
                                  kernel=self.name)
        self.grid_in_clusters = unit == "cluster"
        self.source = self._generate_source()
        self.launch = self._first_launch  # replaced by the generated functions once loaded
        self.launch_bound = self._first_launch_bound

    # -- once per specialization ---------------------------------------------------------------

    def load(self) -> LoadedKernel:
        """Load the kernel now (the first launch does it otherwise) and build the fast path."""
        if self.loaded is None:
            self._install(load_kernel(self.name, self.abi, self.ptx, self.cubin),
                          driver.bindings().cuLaunchKernelEx, native_launch.entry())
        return self.loaded  # type: ignore[return-value]

    def _install(self, loaded: LoadedKernel, launch_ex: Any,
                 native: Optional[Callable[[int, int, int], int]] = None) -> None:
        """Bind a loaded kernel and the launch entry points and build the fast path: `native`
        (`native_launch.entry()`: C straight into cuLaunchKernelEx) when there is one, else
        `launch_ex` (cuda.bindings' cuLaunchKernelEx, also the retry path; tests on machines
        without a GPU pass recorders for either)."""
        self.loaded = loaded
        self._native = native
        self._owner = threading.get_ident()  # the thread whose buffer and config these are
        self._clones: Dict[int, "Launcher"] = {}
        self._devices = {loaded.device_id}  # devices whose launch attributes are set
        self._launch_ex = launch_ex
        self._config = self._build_config()
        self.launch, self.launch_bound = self._build_fast_path()

    def _first_launch(self, grid: Any, args: Sequence[Any], stream: Any = None) -> None:
        self.load()
        self.launch(grid, args, stream)

    def _first_launch_bound(self, grid: Any, values: Sequence[Any], stream: int) -> None:
        self.load()
        self.launch_bound(grid, values, stream)

    def _build_config(self) -> Any:
        drv = driver.bindings()
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = 1, 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = int(self.abi.threads_per_cta), 1, 1
        cfg.sharedMemBytes = int(self.abi.shared_bytes)
        cfg.hStream = drv.CUstream(0)
        if tuple(self.abi.cluster) != (1, 1, 1):
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = (
                int(c) for c in self.abi.cluster)
            cfg.attrs = [attr]
            cfg.numAttrs = 1
        else:
            cfg.numAttrs = 0
        return cfg

    def grid_dims(self, grid: Any) -> Tuple[int, int, int]:
        """The launch grid in CTAs, checked: 1-3 non-negative ints within the driver's limits,
        a multiple of the cluster shape. (0 in any dimension: nothing is launched.)"""
        if isinstance(grid, int) and not isinstance(grid, bool):
            grid = (grid,)
        try:
            dims = [int(g.__index__()) for g in grid]
        except (TypeError, AttributeError):
            raise TLXRuntimeError(f"grid {grid!r} must be a tuple of 1 to 3 integers",
                                  kernel=self.name, hint="resolve a grid callable before the "
                                  "launch: grid = grid(meta)") from None
        if not 1 <= len(dims) <= 3:
            raise TLXRuntimeError(f"grid {grid!r} must have 1 to 3 dimensions", kernel=self.name)
        dims += [1] * (3 - len(dims))
        cluster = [int(c) for c in self.abi.cluster]
        if self.grid_in_clusters:
            dims = [d * c for d, c in zip(dims, cluster)]
        for axis, (d, limit) in enumerate(zip(dims, MAX_GRID)):
            if d < 0 or d > limit:
                raise TLXRuntimeError(f"grid dimension {'xyz'[axis]} = {d} is outside 0..{limit}",
                                      kernel=self.name)
        for axis, (d, c) in enumerate(zip(dims, cluster)):
            if d % c:
                raise TLXRuntimeError(f"grid dimension {'xyz'[axis]} = {d} CTAs is not a multiple "
                                      f"of the cluster dimension {c}", kernel=self.name,
                                      hint="the grid counts CTAs; round it up to whole clusters")
        return dims[0], dims[1], dims[2]

    # -- the generated per-launch function -------------------------------------------------------

    def _generate_source(self, native: bool = False) -> str:
        """The Python source of this specialization's two launch functions (straight-line code:
        one local per argument, no loops, no dicts built per call): ``launch`` reads the
        arrays itself; ``launch_bound`` takes the values `arrays.bind` already read. `native`:
        they call the native entry instead of cuda.bindings' cuLaunchKernelEx."""
        return (self._generate_one(bound=False, native=native) + "\n"
                + self._generate_one(bound=True, native=native))

    def _generate_one(self, bound: bool, native: bool) -> str:
        params = self.abi.params
        n_user = len(self.user_params)
        arg_of = {pi: ai for ai, pi in enumerate(self.user_params)}
        lines: List[str] = []
        emit = lines.append
        if bound:
            emit("def launch_bound(grid, args, s):")
        else:
            emit("def launch(grid, args, stream=None):")
        emit("    nonlocal last_grid, last_stream, nonempty")
        # The buffer and config are this thread's: another thread gets its own copy.
        emit("    if get_ident() != owner:")
        emit(f"        return other_thread(grid, args, {'s' if bound else 'stream'}, {bound})")
        if not bound:
            emit("    s = default_stream() if stream is None else stream_handle(stream)")
        names = [f"a{i}" for i in range(n_user)]
        if n_user:  # unpacking checks the count (a ValueError), no len() per launch
            emit("    try:")
            emit(f"        {', '.join(names)}, = args")
            emit("    except ValueError:")
            emit("        raise count_error(args) from None")
        else:
            emit("    if args:")
            emit("        raise count_error(args)")
        reads: List[str] = []  # reading arrays and descriptors (a HostCopy diverts to staging)
        has_scratch = False
        for pi, p in enumerate(params):
            if p.hidden:
                has_scratch = True
                continue
            a = f"a{arg_of[pi]}"
            if p.kind == "pointer" and not bound:
                # A CUDA torch tensor of the compiled dtype is read inline; anything else (and a
                # dtype mismatch, for its message) through pointer_and_dtype.
                dt = repr(canonical_dtype(p.dtype))
                reads.append(f"        if type({a}) is Tensor and {a}.is_cuda and torch_dtypes.get({a}.dtype) == {dt}:")
                reads.append(f"            p{pi} = {a}.data_ptr()")
                reads.append("        else:")
                reads.append(f"            p{pi}, t{pi} = pointer_and_dtype({a}, s)")
                reads.append(f"            if t{pi} != {dt}:")
                reads.append(f"                raise dtype_error({pi}, t{pi})")
            elif p.kind == "tensordesc":
                reads.append(f"        desc{pi}.fill({a}, s)")
        if reads:
            emit("    try:")
            lines.extend(reads)
            emit("    except StagingNeeded:")
            emit(f"        return staged_launch(grid, args, s, {bound})")
        values = []
        for slot in self.layout.value_slots:
            pi = slot.index
            p = params[pi]
            if p.hidden:
                values.append("sp")
            elif p.kind == "pointer":
                values.append(f"a{arg_of[pi]}" if bound else f"p{pi}")
            elif slot.convert is not None:
                values.append(f"cv{pi}(a{arg_of[pi]})")
            else:
                values.append(f"a{arg_of[pi]}")
        emit("    if grid is not last_grid and grid != last_grid:")
        emit("        nonempty = set_grid(grid)")
        emit("        last_grid = grid if type(grid) is tuple else None")
        emit("    if not nonempty:")
        emit("        return")
        if has_scratch:
            emit("    sp = scratch_alloc(s)")
        if values:
            emit("    try:")
            emit(f"        pack_into(buf, {self.layout.values_offset}, {', '.join(values)})")
            emit("    except BAD_VALUE:")
            if bound:  # a bound HostCopy is not an int: it lands here, off the fast path
                emit("        if has_host_copy(args):")
                emit("            return staged_launch(grid, args, s, True)")
            emit("        raise value_error(args)")
        emit("    if s != last_stream:")
        emit("        cfg.hStream = CUstream(s)")
        emit("        last_stream = s")
        if native:  # the config's address and the handle as ints, prepared once
            emit(f"    err = native(cfg_address, handle_address, {self.pack.address})")
        else:
            emit(f"    err = launch_ex(cfg, handle, {self.pack.address}, 0)[0]")
        emit("    if err:")
        emit("        retry(err, grid, s)")
        if has_scratch:
            emit("    scratch_free(sp, s)")
        return "\n".join(lines) + "\n"

    def _build_fast_path(self) -> Any:
        drv = driver.bindings()
        env: Dict[str, Any] = {
            "stream_handle": stream_handle, "default_stream": default_stream, "pointer_and_dtype": pointer_and_dtype,
            "StagingNeeded": StagingNeeded, "staged_launch": self._staged_launch,
            "count_error": self._count_error, "dtype_error": self._dtype_error,
            "value_error": self._value_error, "set_grid": self._set_grid, "retry": self._retry,
            "scratch_alloc": self._scratch_alloc, "scratch_free": self._scratch_free,
            "get_ident": threading.get_ident, "owner": self._owner,
            "other_thread": self._other_thread,
            "Tensor": torch_tensor_class(), "torch_dtypes": torch_dtype_cache(),
            "has_host_copy": _has_host_copy, "pack_into": self.layout.struct.pack_into, "buf": self.pack.buffer, "BAD_VALUE": _BAD_VALUE,
            "cfg": self._config, "CUstream": drv.CUstream, "launch_ex": self._launch_ex,
            "handle": self.loaded.handle,  # type: ignore[union-attr]
        }
        if self._native is not None:
            env["native"] = self._native
            env["cfg_address"] = int(self._config.getPtr())
            env["handle_address"] = int(self.loaded.handle)  # type: ignore[union-attr]
        for slot in self.layout.value_slots:
            if slot.convert is not None:
                env[f"cv{slot.index}"] = slot.convert
        for pi, enc in self.encoders.items():
            env[f"desc{pi}"] = _DescriptorSlot(enc, self.pack.slot_address(pi))
        # The function closes over its mutable state (last grid and stream) as nonlocals.
        outer = "def make(" + ", ".join(sorted(env)) + "):\n"
        outer += "    last_grid = None\n    last_stream = 0\n    nonempty = False\n"
        self.source = self._generate_source(native=self._native is not None)
        outer += "".join("    " + line + "\n" for line in self.source.splitlines())
        outer += "    return launch, launch_bound\n"
        namespace: Dict[str, Any] = {}
        exec(compile(outer, f"<tlx launcher {self.name}>", "exec"), namespace)
        return namespace["make"](**env)

    # -- the native dispatcher's plan ------------------------------------------------------------

    def native_plan(self, sources: Sequence[Tuple[str, Any]]) -> Optional[Tuple[Any, ...]]:
        """What the native dispatcher (native_dispatch.c) needs to repeat this specialization's
        launch from C, or None where it cannot (not loaded or not on the native entry, tensor
        descriptors, global scratch, fp16/bf16 scalars, a default it cannot pack).

        `sources` gives each user parameter, in ABI order: ``("arg", i)`` — the call's argument
        *i* (positional, then keyword values in call order) — or ``("const", value)`` — a default.
        Returns ``(writers, offsets, config_address, function_handle, cluster,
        grid_in_clusters, keepalive)``: one writer ``(code, source, offset, size, lo, hi, bits)``
        per pointer/scalar (codes `native_writer_codes`), each ABI parameter's byte offset, and
        the config and handle this launcher launches with."""
        if self.loaded is None or self._native is None or self.layout.desc_slots:
            return None
        if int(self.abi.scratch_bytes_per_program) > 0:  # scratch is allocated per launch
            return None
        if len(sources) != len(self.user_params):
            return None
        source_of = dict(zip(self.user_params, sources))
        writers = []
        for slot in self.layout.value_slots:
            if slot.hidden:  # the global scratch pointer, null without scratch
                writers.append((W_CONST, -1, slot.offset, 8, 0, 0, 0))
                continue
            how, what = source_of[slot.index]
            if how == "const":
                try:
                    value = slot.convert(what) if slot.convert is not None else what
                    raw = struct.pack("<" + (slot.code or "Q"), value)
                except _BAD_VALUE:
                    return None
                writers.append((W_CONST, -1, slot.offset, len(raw), 0, 0, int.from_bytes(raw, "little")))
                continue
            if slot.kind == "pointer":
                writers.append((W_PTR, what, slot.offset, 8, 0, 0, 0))
                continue
            d = canonical_dtype(slot.dtype)
            if d in INT_RANGES:
                lo, hi = INT_RANGES[d]
                writers.append((W_INT, what, slot.offset, slot.size, lo, hi, 0))
            elif (d, slot.size) in (("fp32", 4), ("fp64", 8)):
                writers.append((W_F32 if d == "fp32" else W_F64, what, slot.offset, slot.size, 0, 0, 0))
            else:  # fp16 / bf16 scalars: the Python path converts them
                return None
        offsets = tuple(s.offset for s in self.layout.slots)
        cluster = tuple(int(c) for c in self.abi.cluster)
        return (tuple(writers), offsets, int(self._config.getPtr()), int(self.loaded.handle), cluster,
                self.grid_in_clusters, (self, self._config))

    # -- slow paths (other threads, errors, staging, scratch) ----------------------------------

    def _other_thread(self, grid: Any, args: Sequence[Any], stream: Any, bound: bool) -> None:
        """A launch from a thread other than the first one: the parameter buffer and launch
        config are per thread (another thread could refill them between pack and launch), so
        each thread launches through its own copy of this launcher, sharing the loaded kernel."""
        ident = threading.get_ident()
        clone = self._clones.get(ident)
        if clone is None:
            with _CLONE_LOCK:
                clone = self._clones.get(ident)
                if clone is None:
                    clone = Launcher(self.abi, self.ptx, self.cubin, self.name)
                    clone._install(self.loaded, self._launch_ex, self._native)  # type: ignore[arg-type]
                    clone._devices = self._devices
                    self._clones[ident] = clone
        if bound:
            clone.launch_bound(grid, args, stream)
        else:
            clone.launch(grid, args, stream)


    def _set_grid(self, grid: Any) -> bool:
        gx, gy, gz = self.grid_dims(grid)
        cfg = self._config
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = gx, gy, gz
        return gx * gy * gz > 0

    def _retry(self, err: Any, grid: Any, stream: int) -> None:
        """A failed launch. With no current context on this thread (a new thread), make numba's
        context current and retry once. In another device's context (a CUkernel runs in any
        context; the driver loads it there itself), set that device's launch attributes once
        and retry. Otherwise raise the driver error with the launch shape."""
        drv = driver.bindings()
        if not isinstance(err, drv.CUresult):  # the native entry returns a plain int
            try:
                err = drv.CUresult(int(err))
            except ValueError:
                pass
        loaded = self.loaded
        assert loaded is not None
        retried = False
        if err == drv.CUresult.CUDA_ERROR_INVALID_CONTEXT:
            driver.current_context(self.name)
            retried = True
        elif isinstance(loaded.handle, drv.CUkernel):
            try:
                device_id = int(driver.call("cuCtxGetDevice", kernel=self.name))
            except TLXRuntimeError:
                device_id = loaded.device_id
            if device_id not in self._devices:
                configure_for_device(loaded.handle, self.abi, device_id, loaded.static_shared_bytes,
                                     self.name)
                self._devices.add(device_id)
                retried = True
        if retried:
            err = self._launch_ex(self._config, loaded.handle, self.pack.address, 0)[0]
            if not err:
                return
        cfg = self._config
        raise _launch_error(err, self.name, (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ), self.abi,
                            stream)

    def _count_error(self, args: Sequence[Any]) -> TLXRuntimeError:
        names = [self.abi.params[i].name for i in self.user_params]
        return TLXRuntimeError(f"takes {len(names)} arguments ({', '.join(names)}), got "
                               f"{len(args)}", kernel=self.name)

    def _dtype_error(self, index: int, got: str) -> TLXRuntimeError:
        p = self.abi.params[index]
        return TLXRuntimeError(f"parameter '{p.name}' is a pointer to {canonical_dtype(p.dtype)}, "
                               f"but the array passed holds {got}", kernel=self.name,
                               hint="pass an array of the compiled dtype (the frontend compiles "
                                    "one specialization per dtype)")

    def _value_error(self, args: Sequence[Any]) -> TLXRuntimeError:
        arg_of = {pi: ai for ai, pi in enumerate(self.user_params)}
        for slot in self.layout.value_slots:
            if slot.kind != "scalar" or slot.hidden:
                continue
            value = args[arg_of[slot.index]]
            why = explain_bad_value(slot, value)
            if why:
                return TLXRuntimeError(f"parameter '{slot.name}' ({canonical_dtype(slot.dtype)}): "
                                       f"{why}", kernel=self.name)
        return TLXRuntimeError("could not pack the kernel arguments", kernel=self.name)

    def _staged_launch(self, grid: Any, args: Sequence[Any], s: int, bound: bool) -> None:
        """The launch for HostCopy arguments: copy in, launch, copy back, synchronize, free."""
        drv = driver.bindings()
        hs = drv.CUstream(s)
        staged: List[Tuple[HostCopy, int]] = []
        new_args = list(args)
        try:
            for i, a in enumerate(args):
                if isinstance(a, HostCopy):
                    ptr = 0
                    if a.nbytes:
                        ptr = int(driver.call("cuMemAlloc", a.nbytes, kernel=self.name))
                        staged.append((a, ptr))
                        driver.call("cuMemcpyHtoDAsync", ptr, a.array.ctypes.data, a.nbytes, hs,
                                    kernel=self.name)
                    new_args[i] = ptr if bound else _StagedArray(ptr, a)
            if bound:
                self.launch_bound(grid, new_args, s)
            else:
                self.launch(grid, new_args, s)
            for a, ptr in staged:
                if a.write_back:
                    driver.call("cuMemcpyDtoHAsync", a.array.ctypes.data, ptr, a.nbytes, hs,
                                kernel=self.name)
            driver.call("cuStreamSynchronize", hs, kernel=self.name)
        finally:
            for _, ptr in staged:
                try:
                    driver.call("cuMemFree", ptr, kernel=self.name)
                except TLXRuntimeError:  # pragma: no cover - freeing after a failed launch
                    pass

    def _scratch_alloc(self, stream: int) -> int:
        per_program = int(self.abi.scratch_bytes_per_program)
        if per_program <= 0:
            return 0
        cfg = self._config
        programs = cfg.gridDimX * cfg.gridDimY * cfg.gridDimZ  # one scratch slice per CTA
        drv = driver.bindings()
        return int(driver.call("cuMemAllocAsync", per_program * programs, drv.CUstream(stream),
                               kernel=self.name))

    def _scratch_free(self, ptr: int, stream: int) -> None:
        if ptr:
            drv = driver.bindings()
            driver.call("cuMemFreeAsync", ptr, drv.CUstream(stream), kernel=self.name)


def _has_host_copy(args: Sequence[Any]) -> bool:
    return any(type(a) is HostCopy for a in args)


def _launch_error(err: Any, kernel: str, grid: Tuple[int, int, int], abi: KernelABI,
                  stream: int) -> TLXRuntimeError:
    e = driver_error(err, "cuLaunchKernelEx", kernel)
    detail = (f" (grid {grid}, block ({abi.threads_per_cta}, 1, 1), dynamic smem "
              f"{abi.shared_bytes} B, cluster {tuple(abi.cluster)}, stream 0x{stream:x})")
    return TLXRuntimeError(e.message + detail, kernel=kernel, call="cuLaunchKernelEx",
                           hint=e.hint, cuda_error=e.cuda_error)

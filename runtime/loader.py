"""Loading compiled kernels through numba.cuda's driver layer.

``load_kernel(name, abi, ptx=None, cubin=None) -> LoadedKernel`` loads the cubin (preferred:
ptxas already ran) or the PTX (the driver JITs it) into numba's current context with
``Context.create_module_image`` / ``create_module_ptx``, gets the entry with ``get_function``,
and sets, once, the attributes the launch needs:

* ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` when the kernel asks for more than 48 KB
  of dynamic shared memory (checked first against the device's opt-in limit minus the
  kernel's static shared memory, for a readable error instead of CUDA_ERROR_INVALID_VALUE);
* ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`` for clusters of more than 8 CTAs.

numba-cuda >= 0.23 hands out ``CUkernel`` handles (cuLibrary); those take ``cuKernelSetAttribute``
with a device. Older numba gives ``CUfunction`` handles (``cuFuncSetAttribute``); both work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from tlx.compiler.abi import KernelABI

from . import driver
from .errors import TLXRuntimeError

DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024
PORTABLE_CLUSTER_SIZE = 8


@dataclass
class LoadedKernel:
    """A kernel entry loaded in one context: numba's module and function objects (kept alive
    here), the driver handle the launch uses, and where it lives."""

    name: str
    module: Any
    function: Any
    handle: Any  # cuda.bindings CUkernel (numba >= 0.23) or CUfunction
    context_handle: int
    device_id: int
    static_shared_bytes: int


def ptx_target(ptx: Optional[str]) -> Optional[str]:
    """The ``.target`` of a PTX text (``sm_90a``), or None."""
    if not ptx:
        return None
    m = re.search(r"^\s*\.target\s+(sm_\d+a?)", ptx, re.MULTILINE)
    return m.group(1) if m else None


def check_device_can_run(target: Optional[str], capability: tuple, kernel: str) -> None:
    """An ``sm_90a`` kernel runs only on compute capability 9.0 exactly; ``sm_XY`` on XY or
    newer. Raises a `TLXRuntimeError` naming both otherwise."""
    if target is None:
        return
    m = re.fullmatch(r"sm_(\d+)(a?)", target)
    if not m:
        return
    want = int(m.group(1))
    have = capability[0] * 10 + capability[1]
    if m.group(2) == "a" and have != want:
        raise TLXRuntimeError(f"compiled for {target}, which runs only on compute capability "
                              f"{want // 10}.{want % 10}; this GPU is {capability[0]}.{capability[1]}",
                              kernel=kernel, hint="run on an H100/H200 (sm_90a kernels use wgmma, "
                                                  "TMA and setmaxnreg)")
    if have < want:
        raise TLXRuntimeError(f"compiled for {target}; this GPU is only {capability[0]}."
                              f"{capability[1]}", kernel=kernel)


def _object_code_from_cubin(cubin: bytes) -> Any:
    try:
        from cuda.core import ObjectCode
    except ImportError:  # pragma: no cover - older cuda-core layouts
        from cuda.core.experimental import ObjectCode
    return ObjectCode.from_cubin(bytes(cubin))


def _set_kernel_attribute(handle: Any, attr: Any, value: int, device_id: int, kernel: str) -> None:
    drv = driver.bindings()
    if isinstance(handle, drv.CUkernel):
        driver.call("cuKernelSetAttribute", attr, value, handle, drv.CUdevice(device_id),
                    kernel=kernel)
    else:
        driver.call("cuFuncSetAttribute", handle, attr, value, kernel=kernel)


def load_kernel(name: str, abi: KernelABI, ptx: Optional[str] = None,
                cubin: Optional[bytes] = None) -> LoadedKernel:
    """Load `abi.entry` from `cubin` (preferred) or `ptx` into the current context and set the
    launch attributes it needs (see the module docstring)."""
    if not ptx and not cubin:
        raise TLXRuntimeError("nothing to load: the compile result has neither PTX nor cubin",
                              kernel=name)
    ctx = driver.current_context(name)
    device = ctx.device
    capability = tuple(device.compute_capability)
    check_device_can_run(ptx_target(ptx) or abi.extra.get("target"), capability, name)
    try:
        if cubin:
            module = ctx.create_module_image(_object_code_from_cubin(cubin))
        else:
            module = ctx.create_module_ptx(ptx)
        function = module.get_function(abi.entry)
    except TLXRuntimeError:
        raise
    except Exception as exc:
        what = "create_module_image" if cubin else "create_module_ptx"
        raise TLXRuntimeError(f"loading the {'cubin' if cubin else 'PTX'} failed in {what}: "
                              f"{type(exc).__name__}: {exc}", kernel=name, call=what) from exc
    handle = function.handle
    static_smem = int(getattr(function.attrs, "shared", 0) or 0)
    configure_for_device(handle, abi, int(device.id), static_smem, name)
    return LoadedKernel(name=name, module=module, function=function, handle=handle,
                        context_handle=int(ctx.handle), device_id=int(device.id),
                        static_shared_bytes=static_smem)


def configure_for_device(handle: Any, abi: KernelABI, device_id: int, static_smem: int,
                         name: str) -> None:
    """Set the per-device launch attributes of a loaded kernel (once per device): the dynamic
    shared memory limit when it needs more than 48 KB (checked against the opt-in maximum
    first) and non-portable cluster sizes above 8."""
    drv = driver.bindings()
    dyn = int(abi.shared_bytes)
    if dyn + static_smem > DEFAULT_DYNAMIC_SMEM_LIMIT:
        optin = driver.device_attribute(device_id, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", name)
        if dyn + static_smem > optin:
            raise TLXRuntimeError(f"needs {dyn} bytes of dynamic shared memory (+{static_smem} "
                                  f"static), more than the {optin} bytes this GPU allows per block",
                                  kernel=name, hint="use fewer pipeline stages or smaller tiles")
        if dyn > DEFAULT_DYNAMIC_SMEM_LIMIT - static_smem:
            _set_kernel_attribute(
                handle, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dyn, device_id, name)
    cluster_size = abi.cluster[0] * abi.cluster[1] * abi.cluster[2]
    if cluster_size > PORTABLE_CLUSTER_SIZE:
        _set_kernel_attribute(
            handle, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
            1, device_id, name)

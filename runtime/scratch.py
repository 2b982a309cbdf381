"""Global scratch for kernels that need it: `set_allocator(fn)` and the per-launch allocation.

A kernel that builds TMA descriptors on the device (`tl.make_tensor_descriptor`) writes each one
into global memory, 128 bytes per descriptor per program, and its launch passes a hidden pointer
to that scratch. With an allocator set (`tlx.set_allocator(fn)`, Triton's API), the launch asks
it for the bytes: ``fn(size, alignment, stream)`` returns an object with the device address
(a torch tensor's `data_ptr()`, or anything `int()` accepts), kept alive until the launch has
been queued — a stream-ordered allocator such as torch's may then reuse the memory for work
queued after the kernel. Without one, the launch allocates and frees the bytes itself on its
stream (`cuMemAllocAsync` / `cuMemFreeAsync`). The allocator is per thread context, as Triton's
(a `contextvars.ContextVar`), so a thread or task that sets its own does not change another's.
"""

from __future__ import annotations

import contextvars
from typing import Any, Callable, Optional, Tuple

from . import driver
from .errors import TLXRuntimeError

ALIGNMENT = 128  # a tensormap's alignment in global memory
Allocator = Callable[[int, int, Optional[int]], Any]
_allocator: contextvars.ContextVar[Optional[Allocator]] = contextvars.ContextVar("tlx_allocator", default=None)


def set_allocator(fn: Optional[Allocator]) -> None:
    """Use `fn(size, alignment, stream)` for the global scratch of later launches (None: the
    launch allocates its scratch itself)."""
    if fn is not None and not callable(fn):
        raise TLXRuntimeError(f"set_allocator needs a function (size, alignment, stream) -> buffer, got {fn!r}")
    _allocator.set(fn)


def get_allocator() -> Optional[Allocator]:
    """The allocator `set_allocator` set in this context (None when none is)."""
    return _allocator.get()


def allocate(nbytes: int, stream: int, kernel: str) -> Tuple[int, Any]:
    """`nbytes` of global scratch for one launch on `stream`: (device address, what to keep alive
    until the launch is queued, or to free: the allocator's buffer, or the address itself)."""
    fn = _allocator.get()
    if fn is None:
        ptr = int(driver.call("cuMemAllocAsync", nbytes, driver.bindings().CUstream(stream), kernel=kernel))
        return ptr, ptr
    buf = fn(nbytes, ALIGNMENT, stream)
    ptr = buf.data_ptr() if hasattr(buf, "data_ptr") else int(buf)
    if ptr % ALIGNMENT:
        raise TLXRuntimeError(f"the allocator set with set_allocator returned address {ptr:#x} for {nbytes} bytes, "
                              f"not {ALIGNMENT}-byte aligned", kernel=kernel,
                              hint="return memory aligned to the `alignment` argument (torch.empty is)")
    return ptr, buf


def release(handle: Any, stream: int, kernel: str) -> None:
    """Give back what `allocate` returned, after the launch was queued on `stream`."""
    if isinstance(handle, int):
        if handle:
            driver.call("cuMemFreeAsync", handle, driver.bindings().CUstream(stream), kernel=kernel)
    # an allocator's buffer: dropping the reference is enough (its allocator orders reuse)

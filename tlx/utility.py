"""TLX utilities: thread ids, clocks, dtype helpers and the replica id of a warp-specialized task."""

from __future__ import annotations

from typing import Any

from tlx.compiler.errors import TLXAssertionError, TLXCompileError, TLXValueError

from .language import core, semantic
from .language.core import builtin, tensor, unwrap


@builtin
def thread_id(axis: Any) -> tensor:
    """threadIdx along `axis` (0, 1, 2) as int32."""
    a = unwrap(axis)
    if a not in (0, 1, 2):
        raise TLXValueError(f"thread_id axis must be 0, 1 or 2, got {a!r}")
    return semantic.emit1("tlx.thread_id", [], core.int32, (), {"axis": a})


@builtin
def clock64() -> tensor:
    """The 64-bit SM cycle counter."""
    return semantic.emit1("tlx.clock64", [], core.int64)


@builtin
def dump_layout(x: Any) -> None:
    """Print the layout the compiler resolves for `x` (a register tensor or a shared-memory buffer)
    to stderr while compiling, in CuTe Shape:Stride form over the logical row-major element index:
    (thread, value) -> element for a tensor, offset -> element for a buffer. Emits no code; prints
    when the kernel compiles (a kernel the cache serves prints nothing)."""
    v = unwrap(x)
    if not isinstance(v, (tensor, core.buffered_tensor)) or (isinstance(v, tensor) and not v.shape):
        raise TLXValueError(f"tlx.dump_layout takes a block tensor or a shared-memory buffer, got {v!r}")
    semantic.emit("tlx.dump_layout", [v.handle], [])


@builtin
def cluster_cta_rank() -> tensor:
    """This CTA's rank in its cluster."""
    return semantic.emit1("tlx.cluster_cta_rank", [], core.int32)


@builtin
def cluster_size_1d() -> tensor:
    """The number of CTAs in this CTA's cluster (all dimensions), as int32."""
    return semantic.emit1("tlx.cluster_size", [], core.int32)


@builtin
def dtype_of(v: Any) -> core.dtype:
    """The element dtype of a pointer (or block of pointers), a tensor descriptor or a buffer."""
    v = unwrap(v)
    if isinstance(v, tensor):
        return v.dtype.element_ty if v.dtype.is_ptr() else v.dtype  # type: ignore[attr-defined]
    if isinstance(v, (core.tensor_descriptor, core.buffered_tensor)):
        return v.dtype
    raise TLXValueError(f"dtype_of needs a pointer, a tensor descriptor or a buffer, got {type(v).__name__}")


@builtin
def size_of(dtype: Any) -> int:
    """Bytes per element of `dtype` (a compile-time int)."""
    d = unwrap(dtype)
    if not isinstance(d, core.dtype):
        raise TLXAssertionError(f"size_of needs a dtype, got {d!r}")
    return 8 if d.is_ptr() else max(1, d.primitive_bitwidth // 8)


@builtin
def get_fp8_format_name(dtype: Any) -> str:
    """'e5m2' or 'e4m3' for the fp8 dtypes."""
    d = unwrap(dtype)
    if d == core.float8e5:
        return "e5m2"
    if d == core.float8e4nv:
        return "e4m3"
    raise TLXAssertionError(f"get_fp8_format_name only supports tl.float8e5 (e5m2) and tl.float8e4nv (e4m3), but "
                            f"got {d}")


@builtin
def async_task_replica_id() -> int:
    """The compile-time replica index of the enclosing async_task (0 for the first replica)."""
    rid = core.current().replica_id
    if rid is None:
        raise TLXCompileError("async_task_replica_id() is only meaningful inside an async_task")
    return rid

"""TLX warpgroup MMA: `tlx.async_dot` (wgmma, asynchronous) and `tlx.async_dot_wait`."""

from __future__ import annotations

from typing import Any

from tlx.compiler.errors import TLXCompileError
from tlx.compiler.ir import types as T

from .language import core, semantic
from .language.core import buffered_tensor, builtin, tensor, unwrap

_MMA_DTYPES = ("fp16", "bf16", "fp8e4nv", "fp8e5", "int8", "fp32")


@builtin
def async_dot(A: Any, B: Any, acc: Any = None, use_acc: Any = None, pred: Any = None, mBarriers: Any = (),
              two_ctas: Any = False, force_async: Any = False, input_precision: Any = None,
              out_dtype: Any = core.float32) -> tensor:
    """Issue an asynchronous warpgroup MMA D = A @ B (+ acc): A a shared-memory view or a register
    tensor, B a shared-memory view. The result is valid after `async_dot_wait`."""
    A, B, acc = unwrap(A), unwrap(B), unwrap(acc)
    if not isinstance(B, buffered_tensor):
        raise TLXCompileError("async_dot's B operand must be a shared-memory view",
                              hint="tlx.local_store it into a buffer first")
    if isinstance(A, buffered_tensor):
        ashape, adt = A.mtype.shape, A.dtype
    elif isinstance(A, tensor):
        ashape, adt = A.shape, A.dtype
    else:
        raise TLXCompileError(f"async_dot's A operand must be a shared-memory view or a tensor, got {type(A).__name__}")
    bshape = B.mtype.shape
    if len(ashape) != 2 or len(bshape) != 2:
        raise TLXCompileError(f"async_dot needs 2-D operands, got {list(ashape)} and {list(bshape)}",
                              hint="index the buffer arrays first (buf[i])")
    (m, k), (k2, n) = ashape, bshape
    if k != k2:
        raise TLXCompileError(f"async_dot inner dimensions differ: {list(ashape)} @ {list(bshape)}")
    if adt != B.dtype:
        raise TLXCompileError(f"async_dot operands must share a dtype, got {adt} and {B.dtype}")
    if adt.name not in _MMA_DTYPES:
        raise TLXCompileError(f"wgmma does not take {adt} operands", hint="use fp16, bf16, fp8 or int8")
    if m % 64:
        raise TLXCompileError(f"async_dot needs M to be a multiple of 64 (one warpgroup covers 64 rows), got M={m}")
    if not (8 <= n <= 256 and n % 8 == 0):
        raise TLXCompileError(f"async_dot needs 8 <= N <= 256 with N a multiple of 8, got N={n}")
    kmin = 32 if adt.primitive_bitwidth == 8 else (8 if adt.name == "fp32" else 16)
    if k < kmin or k % kmin:
        raise TLXCompileError(f"async_dot needs K a multiple of {kmin} for {adt}, got K={k}")
    odt = unwrap(out_dtype)
    if adt.name == "int8":
        odt = core.int32
    if acc is not None:
        if not isinstance(acc, tensor) or acc.shape != (m, n):
            raise TLXCompileError(f"async_dot's accumulator must be a {m}x{n} tensor")
        odt = acc.dtype
    if odt.name not in ("fp32", "fp16", "int32"):
        raise TLXCompileError(f"async_dot accumulates in fp32, fp16 or int32, not {odt}")
    attrs = {}
    ip = unwrap(input_precision)
    if ip is not None:
        attrs["input_precision"] = str(ip)
    if unwrap(use_acc) is not None and not isinstance(unwrap(use_acc), bool):
        raise TLXCompileError("async_dot's use_acc must be a compile-time bool on Hopper")
    if unwrap(use_acc) is False:
        acc = None
    op = semantic.emit("tlx.async_dot", [A.handle, B.handle, acc.handle if acc is not None else None],
                       [T.TensorType((m, n), odt.ir)], attrs)
    return tensor(op.result, odt, (m, n))


@builtin
def async_dot_wait(pendings: Any, inp: Any) -> Any:
    """Wait until at most `pendings` wgmma groups are in flight; returns `inp` made valid (use the
    result in place of `inp`)."""
    n = semantic.constexpr_int(pendings, "async_dot_wait's pendings")
    inp = unwrap(inp)
    vals = list(inp) if isinstance(inp, (tuple, list)) else [inp]
    for v in vals:
        if not isinstance(v, tensor):
            raise TLXCompileError(f"async_dot_wait takes the tensor(s) that async_dot returned, got {type(v).__name__}")
    op = semantic.emit("tlx.async_dot_wait", [[v.handle for v in vals]], [v.handle.type for v in vals], {"pendings": n})
    outs = [tensor(r, v.dtype, v.shape) for r, v in zip(op.results, vals)]
    if isinstance(inp, (tuple, list)):
        return type(inp)(outs)
    return outs[0]

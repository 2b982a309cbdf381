"""The interpreter's entry point: `run(module, grid, args)`.

Argument conventions (one argument per `tt.func` block argument, in order — the kernel's
non-constexpr parameters):

* ``!ptr<T>`` — a numpy array whose dtype matches T (bf16: uint16 bit patterns or an
  ``ml_dtypes.bfloat16`` array; fp8: uint8 bit patterns or an ml_dtypes fp8 array; i1: bool or
  int8/uint8). The kernel gets the address of its first element; views of one array share memory.
  A device array is accepted too: anything with ``copy_to_host()`` / ``copy_to_device()`` (numba),
  or a tensor with ``.cpu()`` / ``.copy_()`` (torch): it is copied to the host, run on, and
  copied back. The runtime's ``host_copy(x)`` wrapper runs on ``x`` itself (on a copy with
  ``write_back=False``).
* ``!tensordesc<...>`` — a host descriptor: any object with ``base`` (an array as above),
  ``shape``, ``strides`` (in elements), ``block_shape`` and optionally ``padding``
  ("zero" or "nan") and ``round_f32_to_tf32`` — e.g. the runtime's ``TensorDescriptor(base, shape, strides, block_shape, padding)``.
* scalars (``i1``/``iN``/``uN``/``fN``) — Python or numpy numbers; integers must fit the type.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple, Union

import numpy as np

from tlx.compiler.ir import types as T
from tlx.compiler.ir.core import Module
from tlx.compiler.ir.verifier import verify_module

from . import numerics as N
from .executor import Interpreter
from .hazards import Hazard
from .memory import Descriptor, GlobalMemory, InterpreterError

Grid = Union[int, Sequence[int]]


def _grid3(grid: Grid) -> Tuple[int, int, int]:
    g = (int(grid),) if isinstance(grid, (int, np.integer)) else tuple(int(x) for x in grid)
    if not 1 <= len(g) <= 3 or any(x < 0 for x in g):
        raise InterpreterError(f"grid {grid!r}: give 1 to 3 non-negative sizes")
    return (g + (1, 1, 1))[:3]  # type: ignore[return-value]


class _HostCopy:
    """A device array copied to the host for the run, copied back afterwards."""

    def __init__(self, obj: Any):
        self.obj = obj
        if hasattr(obj, "copy_to_host") and hasattr(obj, "copy_to_device"):
            self.host = obj.copy_to_host()
            self._back = lambda: obj.copy_to_device(self.host)
        else:  # a torch-like tensor
            t = obj.detach().cpu() if hasattr(obj, "detach") else obj.cpu()
            try:
                self.host = t.numpy()
            except TypeError:  # bf16 / fp8, which numpy lacks: their bits (the interpreter reads those)
                import torch

                self.host = t.view({2: torch.int16, 1: torch.uint8}[t.element_size()]).numpy()
            self._back = (lambda: obj.copy_(t)) if t is not obj else (lambda: None)

    def write_back(self) -> None:
        self._back()


def _as_host_array(x: Any, name: str, copies: List[_HostCopy]) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    inner = getattr(x, "array", None)  # the runtime's host_copy(x): run on x itself
    if isinstance(inner, np.ndarray):
        return inner if getattr(x, "write_back", True) else inner.copy()
    if hasattr(x, "copy_to_host") or (hasattr(x, "cpu") and hasattr(x, "copy_")):
        c = _HostCopy(x)
        copies.append(c)
        return c.host
    raise InterpreterError(f"argument '{name}': expected a numpy array (or a device array), got {type(x).__name__}")


def _check_dtype(arr: np.ndarray, et: T.ScalarType, name: str) -> None:
    dt = arr.dtype
    ok: bool
    if et.name == "bf16":
        ok = dt.itemsize == 2 and (dt.kind in "iu" or dt.name == "bfloat16")
    elif et.name.startswith("f8"):
        ok = dt.itemsize == 1 and (dt.kind in "iu" or dt.name.startswith("float8"))
    elif et.name == "i1":
        ok = dt.itemsize == 1 and dt.kind in "biu"
    elif et.is_float:
        ok = dt == N.storage_dtype(et)
    else:
        ok = dt.kind in "iu" and dt.itemsize == et.bytes
    if not ok:
        raise InterpreterError(f"argument '{name}': the kernel reads it as {et}, but the array holds {dt}",
                               hint=f"pass an array of {N.storage_dtype(et)} (bf16/fp8: their bit patterns)")


def _bind(module: Module, args: Sequence[Any], gmem: GlobalMemory, copies: List[_HostCopy]) -> List[Any]:
    func = module.func
    params = func.regions[0].block.args
    names = list(func.attrs.get("arg_names") or [p.name or f"arg{i}" for i, p in enumerate(params)])
    if len(args) != len(params):
        raise InterpreterError(f"kernel @{func.attrs.get('sym_name')} takes {len(params)} arguments "
                               f"({', '.join(names)}), got {len(args)}")
    out: List[Any] = []
    for p, a, name in zip(params, args, names):
        t = p.type
        if isinstance(t, T.PointerType):
            arr = _as_host_array(a, name, copies)
            _check_dtype(arr, t.pointee, name)
            out.append(np.int64(gmem.add_array(arr, name)))
        elif isinstance(t, T.TensorDescType):
            for attr in ("base", "shape", "strides", "block_shape"):
                if not hasattr(a, attr):
                    raise InterpreterError(f"argument '{name}': a tensor descriptor needs .{attr}")
            arr = _as_host_array(a.base, name, copies)
            _check_dtype(arr, t.element, name)
            if a.block_shape is None:
                raise InterpreterError(f"argument '{name}': the descriptor has no block_shape",
                                       hint=f"set block_shape={list(t.block_shape)} (the kernel's tile)")
            if tuple(int(x) for x in a.block_shape) != tuple(t.block_shape):
                raise InterpreterError(f"argument '{name}': descriptor block_shape {tuple(a.block_shape)} differs from "
                                       f"the kernel's {t.block_shape}")
            shape = tuple(int(x) for x in a.shape)
            strides = tuple(int(x) for x in a.strides)
            if len(shape) != t.rank or len(strides) != t.rank:
                raise InterpreterError(f"argument '{name}': a rank-{t.rank} descriptor needs {t.rank} sizes and strides")
            addr = gmem.add_array(arr, name)
            reg = gmem.region_at(addr) or gmem.regions[-1]
            d = Descriptor(reg, (addr - reg.base) // t.element.bytes, shape, strides, tuple(t.block_shape), t.element,
                           str(getattr(a, "padding", "zero") or "zero"),
                           bool(getattr(a, "round_f32_to_tf32", False)) and t.element.name == "f32")
            d.check_extent(None, name)
            out.append(d)
        elif isinstance(t, T.ScalarType):
            if t.is_float:
                out.append(N.round_to(np.float64(a), t)[()])
            else:
                v = int(a)
                lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed else (0, (1 << t.bits) - 1)
                if t.bits == 1:
                    lo, hi = 0, 1
                if not lo <= v <= hi:
                    raise InterpreterError(f"argument '{name}' = {v} does not fit {t}")
                out.append(N.int_constant(v, t))
        else:
            raise InterpreterError(f"argument '{name}': parameters of type {t} are not supported")
    return out


def run(module: Module, grid: Grid, args: Sequence[Any], *, raise_on_hazard: bool = True,
        verify: bool = True, max_while_iterations: int = 1_000_000) -> List[Hazard]:
    """Execute `module` (traced IR, or IR after the fence passes, before layouts) on the CPU for
    every program of `grid`; `args` follow the conventions in this module's docstring and arrays
    are updated in place.

    Returns the hazards found (`ProxyHazard` / `SyncHazard`, one per distinct pair of ops, with a
    `count`). With `raise_on_hazard` (the default) the first hazard is raised instead. A deadlock
    raises `DeadlockError`; an out-of-bounds access or bad argument raises `InterpreterError`, and
    so does an `scf.while` that runs `max_while_iterations` times (a spin-wait that cannot end when
    programs run one after another).
    """
    if verify:
        verify_module(module)
    gmem = GlobalMemory()
    copies: List[_HostCopy] = []
    bound = _bind(module, args, gmem, copies)
    interp = Interpreter(module, _grid3(grid), bound, raise_on_hazard, gmem)
    interp.max_while_iterations = max_while_iterations
    try:
        with np.errstate(all="ignore"):
            interp.run()
    finally:
        for c in copies:
            c.write_back()
    return interp.checker.hazards

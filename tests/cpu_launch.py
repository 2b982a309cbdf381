"""`CPULaunch`: a @tlx.jit kernel's launch surface — `k[grid](*args, **kwargs)`, `k.warmup(*args,
grid=..., **kwargs)`, `params`, `fn`, `__name__` — served by the CPU interpreter, so that what
builds on that surface (tlx.autotune, tlx.heuristics) runs end to end on a machine without a GPU.
Kernels really run (on numpy arrays, `tlx.interpret`); "compiling" is the interpreter's own trace
and pass pipeline. Every launch and compile is recorded."""

from __future__ import annotations

import inspect
import threading
from typing import Any, Dict, List, Tuple

import tlx
from tlx.interpreter.entry import prepare_module

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "ctas_per_cga")


class CPULaunch:
    """See the module docstring. `launches`: the keywords of every launch (launch options
    included); `compiles`: (thread name, {descriptor parameter: block shape}, keywords) of every
    `warmup`."""

    def __init__(self, kernel: tlx.JITFunction):
        self.fn = kernel
        self.params = kernel.params
        self.__name__ = kernel.__name__
        self.launches: List[Dict[str, Any]] = []
        self.compiles: List[Tuple[str, Dict[str, Any], Dict[str, Any]]] = []

    def _split(self, kwargs: Dict[str, Any]) -> Tuple[Dict[str, Any], int]:
        kw = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS}
        return kw, int(kwargs.get("num_warps", 4))

    def __getitem__(self, grid: Any):
        def launch(*args: Any, **kwargs: Any) -> Any:
            self.launches.append(dict(kwargs))
            kw, num_warps = self._split(kwargs)
            return tlx.interpret(self.fn, grid, *args, num_warps=num_warps, **kw)

        return launch

    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> Any:
        kw, num_warps = self._split(kwargs)
        sig = inspect.signature(self.fn.fn).bind(*args, **kw)
        sig.apply_defaults()
        bound = dict(sig.arguments)
        shapes = {k: list(v.block_shape) for k, v in bound.items() if hasattr(v, "block_shape")}
        self.compiles.append((threading.current_thread().name, shapes, dict(kwargs)))
        return prepare_module(self.fn, bound, num_warps=num_warps)

"""`@tlx.jit`: the kernel decorator. A `JITFunction` is the `KernelFunction` the tracer reads
(source, parameters, dependencies), traced for one specialization with `trace`, inlined when
another kernel calls it, and the Triton kernel object users launch:

* ``kernel[grid](*args, num_warps=..., stream=..., **constexprs)`` launches and returns the
  compiled kernel (`tlx.launch`);
* ``kernel.run(*args, grid=..., warmup=False, **kwargs)`` — the same call, spelled out;
* ``kernel.warmup(*args, grid=None, **kwargs)`` compiles without launching and returns the
  compiled kernel (no GPU needed; host numpy arrays stand for device arrays);
* ``kernel.cache_key`` — the digest of its source and of every helper it calls.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence

from tlx.compiler.ir import Module
from tlx.compiler.ir import types as T

from .compile import CompiledKernel
from .function import KernelFunction
from .launch import KernelLaunch
from .tracer import trace

_NO_GRID = object()


class JITFunction(KernelFunction):
    """A function decorated with `@tlx.jit`: launched with `kernel[grid](...)` or `run`,
    compiled ahead with `warmup`, traced with `trace`; `cache_key` digests its source."""

    def __init__(self, fn: Callable, launch_defaults: Optional[Dict[str, Any]] = None):
        super().__init__(fn)
        self.launch_defaults = dict(launch_defaults or {})
        self.launch_path = KernelLaunch(self, self.launch_defaults)
        # the last `kernel[grid]`: (grid, its launch function), one attribute so that threads
        # never pair one's grid with another's function; the grid is kept alive, so `is` holds
        self._last_launch: tuple = (_NO_GRID, None)

    def __getitem__(self, grid: Any) -> Callable[..., CompiledKernel]:
        """`kernel[grid]`: the launch function for `grid` (a tuple of 1-3 ints, an int, or a
        callable of the parameters). The same grid object gives back the same function."""
        last = self._last_launch
        if last[0] is grid:
            return last[1]
        launch = self.launch_path.bind_grid(grid)
        self._last_launch = (grid, launch)
        return launch

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> CompiledKernel:
        """Launch on `grid` (as `kernel[grid](*args, **kwargs)`), or with `warmup` compile only."""
        stream = self.launch_path.pop_stream(kwargs)
        return self.launch_path.run(grid, args, kwargs, stream, warmup=warmup)

    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> CompiledKernel:
        """Compile the specialization these arguments ask for, without launching (no GPU
        needed); returns the compiled kernel, which later launches of the same key use."""
        self.launch_path.pop_stream(kwargs)
        return self.launch_path.run(grid, args, kwargs, warmup=True)

    @property
    def cache_key(self) -> str:
        """The digest of this kernel's source and of every helper and constant it names."""
        return self.cache_hash()

    def trace(self, arg_types: Dict[str, T.Type], constexprs: Dict[str, Any], num_warps: int = 4,
              target: str = "sm_90a", num_ctas: int = 1, divisibility: Optional[Dict[str, int]] = None,
              equal_to_one: Sequence[str] = ()) -> Module:
        """Trace this kernel into a verified Module for one specialization (`tlx.tracer.trace`)."""
        return trace(self, arg_types, constexprs, num_warps, target, num_ctas, divisibility, equal_to_one)


def jit(fn: Optional[Callable] = None, **launch_defaults: Any) -> Any:
    """Decorate a kernel (or a helper that kernels call): `@tlx.jit` or `@tlx.jit(num_warps=8)`."""
    if fn is None:
        return lambda f: JITFunction(f, launch_defaults)
    return JITFunction(fn, launch_defaults)

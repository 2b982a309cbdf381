"""The interpreter's entry point: `run(module, grid, args)`.

Arguments: one per `tt.func` block argument, in order (the kernel's non-constexpr parameters).
`arguments.py` says what each may be: for ``!ptr<T>`` an array or tensor whose element type is
T (numpy, torch CPU — run on in place, views through their strides —, device arrays copied to
the host and back; bf16/fp8 also as integer bit patterns), for ``!tensordesc<...>`` a host
descriptor (``tlx.TensorDescriptor``: ``base``, ``shape``, ``strides``, ``block_shape``,
``padding``), for scalars Python or numpy numbers that fit the type.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple, Union

import numpy as np

from tlx.compiler.ir.core import Module
from tlx.compiler.ir.verifier import verify_module

from .arguments import bind_arguments
from .executor import Interpreter
from .hazards import Hazard
from .memory import GlobalMemory, InterpreterError

Grid = Union[int, Sequence[int]]


def _grid3(grid: Grid) -> Tuple[int, int, int]:
    g = (int(grid),) if isinstance(grid, (int, np.integer)) else tuple(int(x) for x in grid)
    if not 1 <= len(g) <= 3 or any(x < 0 for x in g):
        raise InterpreterError(f"grid {grid!r}: give 1 to 3 non-negative sizes")
    return (g + (1, 1, 1))[:3]  # type: ignore[return-value]


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
    bound, staging = bind_arguments(module, args, gmem)
    interp = Interpreter(module, _grid3(grid), bound, raise_on_hazard, gmem, max_while_iterations)
    try:
        with np.errstate(all="ignore"):
            interp.run()
    finally:
        staging.write_back()
    return interp.checker.hazards

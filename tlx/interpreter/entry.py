"""`tlx.interpret(kernel, grid, *args, **constexprs)`: run a kernel on the CPU interpreter, with the
proxy-hazard checker, after the compiler's passes up to (not including) code generation.

Arguments are numpy arrays and torch tensors (run on in place; device arrays are copied to the host
and back), numbers and host tensor descriptors (`tlx/interpreter/arguments.py`). The signature is
inferred from them; `signature=` overrides entries (e.g. ``{"a_ptr": "*bf16"}`` for bf16 data held as uint16 bit
patterns). `TLX_INTERPRET=1` routes `kernel[grid](...)` here.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tlx.compiler.errors import TLXCompileError, TLXError
from tlx.compiler.ir import Module
from tlx.compiler.options import CompileOptions
from tlx.compiler.pipeline import PIPELINE, compile_module

from ..function import KernelFunction
from ..language import core
from ..signature import type_from_signature
from ..specialize import Specializer, arg_spec
from ..tracer import trace
from .api import run
from .arguments import kernel_signature


def prepare_module(fn: KernelFunction, bound: Dict[str, Any], signature: Optional[Mapping[str, str]] = None,
                   num_warps: int = 4, fence_passes: bool = True,
                   cluster: Tuple[int, int, int] = (1, 1, 1)) -> Module:
    """Trace for these arguments (every parameter by name) and run the passes the interpreter
    executes after."""
    sig: Dict[str, str] = {}
    consts: Dict[str, Any] = {}
    div: Dict[str, int] = {}
    for p in fn.params:
        v = bound[p.name]
        if p.is_constexpr:
            consts[p.name] = core.unwrap(v)
        else:
            sig[p.name] = (signature or {}).get(p.name) or kernel_signature(p.name, v)
            div[p.name] = _divisibility(v)
    types = {k: type_from_signature(v, k) for k, v in sig.items()}
    # the divisibility a GPU launch of these arguments would see: it can change the layouts the
    # compiler picks (wider vectors), and with them which thread holds which element
    module = trace(fn, types, consts, num_warps=num_warps, divisibility=div)
    # every IR pass (PTX generation is not one: compile_module runs it only without a pass list)
    result = compile_module(module, CompileOptions(num_warps=num_warps, fence_passes=fence_passes,
                                                   cluster=tuple(cluster)),  # type: ignore[arg-type]
                            passes=PIPELINE, snapshots=False)
    return result.module


def _divisibility(value: Any) -> int:
    """16 when a GPU launch would specialize `value` as divisible by 16 (an int multiple of 16, an
    array whose data is 16-byte aligned), else 1."""
    try:
        return arg_spec(value, host_arrays=True).divisibility
    except TLXError:  # what the interpreter takes but a launch would not (it is checked elsewhere)
        return 1


def grid_tuple(grid: Any, meta: Dict[str, Any]) -> Tuple[int, ...]:
    """A launch grid (an int, a tuple, or a callable of the parameters) as a tuple of 1-3 ints."""
    g = grid(meta) if callable(grid) else grid
    if isinstance(g, int):
        g = (g,)
    try:
        g = tuple(int(x) for x in g)
    except TypeError:
        raise TLXError(f"the launch grid must be an int, a tuple of ints or a callable returning one, got {g!r}") from None
    if not 1 <= len(g) <= 3:
        raise TLXError(f"the launch grid has {len(g)} dimensions; give 1 to 3")
    return g


def interpret(kernel: Any, grid: Any, *args: Any, fence_passes: bool = True, raise_on_hazard: bool = True,
              signature: Optional[Mapping[str, str]] = None, num_warps: int = 4,
              ctas_per_cga: Optional[Sequence[int]] = None, **kwargs: Any) -> List[Any]:
    """Run `kernel` over `grid` on the CPU; returns the hazards found (report mode:
    `raise_on_hazard=False`; otherwise the first hazard raises). `ctas_per_cga`: run the grid in
    thread-block clusters of that shape (every CTA of a cluster runs together)."""
    if not isinstance(kernel, KernelFunction):
        raise TLXCompileError(f"tlx.interpret needs a @tlx.jit kernel, got {type(kernel).__name__}")
    bound, _ = Specializer(kernel).bind(args, kwargs)
    module = prepare_module(kernel, bound, signature, num_warps, fence_passes,
                            tuple(ctas_per_cga) if ctas_per_cga else (1, 1, 1))  # type: ignore[arg-type]
    runtime_args = [bound[p.name] for p in kernel.params if not p.is_constexpr]
    return run(module, grid_tuple(grid, bound), runtime_args, raise_on_hazard=raise_on_hazard)

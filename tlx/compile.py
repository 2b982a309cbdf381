"""`tlx.compile`: trace and compile a kernel for one specialization without a GPU, and the
`CompiledKernel` it returns (its `asm`, fence records and launch)."""

from __future__ import annotations

import html
import os
import time
from typing import Any, Dict, List, Mapping, Optional

from tlx.compiler.errors import TLXCompileError
from tlx.compiler.ir import Module, print_module
from tlx.compiler.options import CompileOptions

from .jit import JITFunction
from .signature import signature_to_types


class CompiledKernel:
    """One compiled specialization: `asm` ("ir", "ir.<pass>", "ptx", "cubin"), `fences` (one record
    per fence, with its reason), `pass_times`, `abi`, `resources`, and `kernel[grid](*args)`."""

    def __init__(self, fn: JITFunction, result: Any, trace_time: float, options: CompileOptions):
        self.fn = fn
        self.result = result
        self.options = options
        self.asm: Dict[str, Any] = result.asm
        self.abi = result.abi
        self.fences = result.fences
        self.pass_times: Dict[str, float] = dict(result.pass_times)
        self.pass_times = {"trace": trace_time, **self.pass_times}
        self.resources = result.resources
        self.module: Module = result.module
        self.name = fn.__name__

    def explain_fences(self) -> str:
        """A readable report: every fence, where it sits, what it separates and why."""
        from tlx.compiler.fences import explain_fences

        return explain_fences(self.fences)

    @property
    def unfenced_hazards(self) -> List[str]:
        """Compiled with `fence_passes=False`: every generic -> async shared-memory hazard left
        without a proxy fence, each once, in program order (empty with the fence passes on)."""
        return self.result.unfenced_hazards

    @property
    def metadata(self) -> Dict[str, Any]:
        abi = self.abi
        return {"name": self.name, "num_warps": self.options.num_warps, "target": self.options.target,
                "shared": getattr(abi, "shared_bytes", None), "threads": getattr(abi, "threads_per_cta", None)}

    def __getitem__(self, grid: Any):
        from .launch import launch_compiled

        return lambda *args, **kwargs: launch_compiled(self, grid, args, kwargs)

    def _repr_html_(self) -> str:
        from .display import compiled_kernel_html

        return compiled_kernel_html(self)

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} ({self.options.target}, {self.options.num_warps} warps, {len(self.fences)} fences)>"


def compile(fn: Any, signature: Optional[Mapping[str, str]] = None, constexprs: Optional[Mapping[str, Any]] = None,
            num_warps: int = 4, target: str = "sm_90a", fence_passes: bool = True, num_ctas: int = 1,
            divisibility: Optional[Mapping[str, int]] = None, **options: Any) -> CompiledKernel:
    """Trace `fn` (a @tlx.jit kernel) for `signature` (parameter -> '*fp16', 'i32', ...,
    'tensordesc<fp16[64, 64]>') and `constexprs`, run the pass pipeline and generate PTX; works
    without a GPU. Extra keyword options go to CompileOptions (e.g. verify_each_pass=True)."""
    if not isinstance(fn, JITFunction):
        raise TLXCompileError(f"tlx.compile needs a @tlx.jit kernel, got {type(fn).__name__}",
                              hint="decorate the function with @tlx.jit")
    types = signature_to_types(signature or {})
    unknown = set(types) - {p.name for p in fn.params}
    if unknown:
        raise TLXCompileError(f"signature names {sorted(unknown)}, which are not parameters of {fn.__name__}")
    opts = CompileOptions(target=target, num_warps=num_warps, num_ctas=num_ctas, fence_passes=fence_passes,
                          print_ir_after_all=options.pop("print_ir_after_all",
                                                         os.environ.get("TLX_PRINT_IR_AFTER_ALL", "") not in ("", "0")),
                          **options)
    t0 = time.perf_counter()
    module = fn.trace(types, dict(constexprs or {}), num_warps=num_warps, target=target, num_ctas=num_ctas,
                      divisibility=dict(divisibility or {}))
    trace_time = time.perf_counter() - t0
    return compile_module(fn, module, opts, trace_time)


def compile_module(fn: JITFunction, module: Module, opts: CompileOptions, trace_time: float) -> CompiledKernel:
    """Run the compiler on a traced module."""
    from tlx.compiler.pipeline import compile_module as run_pipeline

    result = run_pipeline(module, opts)
    return CompiledKernel(fn, result, trace_time, opts)

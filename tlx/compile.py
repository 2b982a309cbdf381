"""Compiling: `tlx.compile` (trace and compile one specialization, no GPU needed), the
`CompiledKernel` it returns, and `compile_specialization` — the launch path's compile step,
through the disk cache (`tlx.runtime.cache`), keyed by the kernel's source and helpers, the
specialization, the options and the compiler's own sources."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import tlx.compiler
from tlx.compiler.errors import TLXCompileError, TLXError
from tlx.compiler.fence_serial import records_from_json
from tlx.compiler.fences import explain_fences
from tlx.compiler.ir import Module
from tlx.compiler.options import CompileOptions
from tlx.compiler.pipeline import compile_module as run_pipeline
from tlx.runtime.cache import CacheEntry, default_cache, entry_from_compile_result
from tlx.runtime.launcher import Launcher

from .display import compiled_kernel_html
from .function import KernelFunction
from .signature import signature_to_types, type_from_signature
from .specialize import Specialization
from .tracer import trace


@dataclass(frozen=True)
class KernelMetadata(Mapping):
    """What a compiled kernel launches with, as attributes (``metadata.num_warps``) and as a
    read-only dict (``metadata["num_warps"]``), like Triton's ``CompiledKernel.metadata``."""

    name: str
    target: str
    num_warps: int
    num_ctas: int
    cluster_dims: Tuple[int, int, int]
    shared: int  # dynamic shared memory, bytes
    threads: int  # per CTA
    maxnreg: Optional[int]
    fence_passes: bool

    @property
    def ctas_per_cga(self) -> Tuple[int, int, int]:
        """The thread-block cluster shape (TLX's name for `cluster_dims`)."""
        return self.cluster_dims

    def __getitem__(self, key: str) -> Any:
        if key == "ctas_per_cga":
            return self.cluster_dims
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(asdict(self))

    def __len__(self) -> int:
        return len(asdict(self))


class CompiledKernel:
    """One compiled specialization: `asm` ("ir", "ir.<pass>", "ptx", "cubin"), `fences` (one
    record per fence, with its reason), `pass_times`, `abi`, `resources`, `metadata` (name,
    num_warps, num_ctas, cluster_dims, shared, ...: attributes and a dict view),
    `unfenced_hazards` (with the fence passes off), `options` (the CompileOptions) and
    `kernel[grid](*runtime_args)`. Built from a fresh compile (`from_result`, which keeps the
    final `module` and the compiler's `result`) or read back from the disk cache
    (`from_entry`)."""

    def __init__(self, name: str, asm: Dict[str, Any], abi: Any, fences: List[Any], pass_times: Dict[str, float],
                 resources: Dict[str, Any], unfenced_hazards: List[str], options: CompileOptions,
                 metadata: KernelMetadata, compile_time_s: float = 0.0, module: Optional[Module] = None,
                 result: Any = None):
        self.name = name
        self.asm = asm
        self.abi = abi
        self.fences = fences
        self.pass_times = pass_times
        self.resources = resources
        self.unfenced_hazards = unfenced_hazards  # with fence_passes=False: hazards left unfenced
        self.options = options
        self.metadata = metadata
        self.compile_time_s = compile_time_s
        self.module = module
        self.result = result
        self._launcher: Optional[Launcher] = None

    @classmethod
    def from_result(cls, name: str, result: Any, options: CompileOptions, trace_time: float) -> "CompiledKernel":
        """A kernel the pipeline just compiled."""
        abi = result.abi
        meta = KernelMetadata(name, options.target, options.num_warps, options.num_ctas, tuple(options.cluster),
                              int(getattr(abi, "shared_bytes", 0) or 0), int(getattr(abi, "threads_per_cta", 0) or 0),
                              options.maxnreg, options.fence_passes)
        return cls(name, result.asm, abi, result.fences, {"trace": trace_time, **result.pass_times}, result.resources,
                   list(result.unfenced_hazards), options, meta, trace_time + sum(result.pass_times.values()),
                   result.module, result)

    @classmethod
    def from_entry(cls, entry: CacheEntry) -> "CompiledKernel":
        """A kernel read back from the disk cache: the same asm, fences and metadata."""
        asm = dict(entry.asm)
        if entry.ptx is not None:
            asm["ptx"] = entry.ptx
        if entry.cubin is not None:
            asm["cubin"] = entry.cubin
        m = entry.meta["metadata"]
        meta = KernelMetadata(**{**m, "cluster_dims": tuple(m["cluster_dims"])})
        fences = records_from_json(entry.fences_json) if entry.fences_json else []
        options = CompileOptions(target=meta.target, num_warps=meta.num_warps, num_ctas=meta.num_ctas,
                                 cluster=meta.cluster_dims, fence_passes=meta.fence_passes, maxnreg=meta.maxnreg)
        return cls(entry.name, asm, entry.abi(), fences, entry.meta.get("pass_times", {}),
                   entry.meta.get("resources", {}), list(entry.meta.get("unfenced_hazards", [])), options, meta,
                   entry.compile_time_s)

    @property
    def launcher(self) -> Launcher:
        """The runtime's launcher of this kernel (made on first use; loads at the first launch)."""
        if self._launcher is None:
            self._launcher = Launcher(self.abi, ptx=self.asm.get("ptx"), cubin=self.asm.get("cubin"), name=self.name)
        return self._launcher

    def explain_fences(self) -> str:
        """A readable report: every fence, where it sits, what it separates and why."""
        return explain_fences(self.fences)

    def __getitem__(self, grid: Any):
        """`compiled[grid](*runtime_args, stream=None)`: launch this specialization."""
        def launch(*args: Any, stream: Any = None, **kwargs: Any) -> None:
            if kwargs:
                raise TLXError(f"a compiled kernel takes only its runtime arguments (and stream=), not {sorted(kwargs)}")
            self.launcher.launch(grid(self.metadata) if callable(grid) else grid, list(args), stream)

        return launch

    def _repr_html_(self) -> str:
        return compiled_kernel_html(self)

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.name} ({self.metadata.target}, {self.metadata.num_warps} warps, {len(self.fences)} fences)>"


def compile(fn: Any, signature: Optional[Dict[str, str]] = None, constexprs: Optional[Dict[str, Any]] = None,
            num_warps: int = 4, target: str = "sm_90a", fence_passes: bool = True, num_ctas: int = 1,
            divisibility: Optional[Dict[str, int]] = None, **options: Any) -> CompiledKernel:
    """Trace `fn` (a @tlx.jit kernel) for `signature` (parameter -> '*fp16', 'i32', ...,
    'tensordesc<fp16[64, 64]>') and `constexprs`, run the pass pipeline and generate PTX; works
    without a GPU. `ctas_per_cga=(x, y, z)` compiles for thread-block clusters of that shape.
    Extra keyword options go to CompileOptions (e.g. verify_each_pass=True)."""
    if not isinstance(fn, KernelFunction):
        raise TLXCompileError(f"tlx.compile needs a @tlx.jit kernel, got {type(fn).__name__}",
                              hint="decorate the function with @tlx.jit")
    types = signature_to_types(signature or {})
    unknown = set(types) - {p.name for p in fn.params}
    if unknown:
        raise TLXCompileError(f"signature names {sorted(unknown)}, which are not parameters of {fn.__name__}")
    cga = options.pop("ctas_per_cga", None)
    if cga is not None:
        options["cluster"] = tuple(cga)
    opts = CompileOptions(target=target, num_warps=num_warps, num_ctas=num_ctas, fence_passes=fence_passes,
                          print_ir_after_all=options.pop("print_ir_after_all",
                                                         os.environ.get("TLX_PRINT_IR_AFTER_ALL", "") not in ("", "0")),
                          **options)
    return trace_and_compile(fn, types, dict(constexprs or {}), opts, dict(divisibility or {}))


def trace_and_compile(fn: KernelFunction, types: Dict[str, Any], constexprs: Dict[str, Any], opts: CompileOptions,
                      divisibility: Dict[str, int], equal_to_one: Sequence[str] = ()) -> CompiledKernel:
    """Trace `fn` for these parameter types and constexprs and run the pass pipeline on it."""
    t0 = time.perf_counter()
    module = trace(fn, types, constexprs, num_warps=opts.num_warps, target=opts.target, num_ctas=opts.num_ctas,
                   divisibility=divisibility, equal_to_one=equal_to_one)
    trace_time = time.perf_counter() - t0
    return CompiledKernel.from_result(fn.__name__, run_pipeline(module, opts), opts, trace_time)


def compile_fresh(fn: KernelFunction, spec: Specialization) -> Tuple[CacheEntry, CompiledKernel]:
    """Trace and compile one specialization: the disk cache's entry and the kernel."""
    t0 = time.perf_counter()
    types = {k: type_from_signature(v, k) for k, v in spec.signature.items()}
    compiled = trace_and_compile(fn, types, spec.constexprs, spec.options, spec.divisibility, spec.equal_to_one)
    entry = entry_from_compile_result(fn.__name__, compiled.result, time.perf_counter() - t0,
                                      meta={"options": repr(spec.options), "metadata": dict(compiled.metadata),
                                            "pass_times": compiled.pass_times})
    return entry, compiled


def compile_specialization(fn: KernelFunction, spec: Specialization) -> CompiledKernel:
    """The kernel of one specialization: from the disk cache when it holds it, else compiled
    (and stored)."""
    fresh: List[CompiledKernel] = []

    def build() -> CacheEntry:
        entry, compiled = compile_fresh(fn, spec)
        fresh.append(compiled)
        return entry

    entry = default_cache().get_or_compile(cache_digest(fn, spec), build)
    return fresh[0] if fresh else CompiledKernel.from_entry(entry)


def cache_digest(fn: KernelFunction, spec: Specialization) -> str:
    """The disk cache's key: the kernel's source and helpers, the specialization, the options
    and the compiler's fingerprint."""
    blob = json.dumps({"fn": fn.__qualname__, "src": fn.cache_hash(), "sig": spec.signature,
                       "div": spec.divisibility, "ones": spec.equal_to_one,
                       "consts": {k: repr(v) for k, v in spec.constexprs.items()}, "options": repr(spec.options),
                       "compiler": compiler_fingerprint()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


_FINGERPRINT: List[str] = []


def compiler_fingerprint() -> str:
    """A digest of the compiler's and the frontend's own sources (and tlx's version): part of
    every cache key, so a changed compiler never serves stale kernels."""
    if not _FINGERPRINT:
        h = hashlib.sha256()
        for root in (os.path.dirname(tlx.compiler.__file__), os.path.dirname(os.path.abspath(__file__))):
            for dirpath, _, files in sorted(os.walk(root)):
                for f in sorted(files):
                    if f.endswith(".py"):
                        with open(os.path.join(dirpath, f), "rb") as fh:
                            h.update(f.encode())
                            h.update(fh.read())
        _FINGERPRINT.append(h.hexdigest()[:32])
    return _FINGERPRINT[0]

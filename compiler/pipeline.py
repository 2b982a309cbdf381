"""The compile pipeline: `compile_module(module, options) -> CompileResult`.

`PIPELINE` is the ordered list of passes; each pass is one module of `compiler/passes` (or of
`compiler/codegen`) with its rule in the docstring. To add a pass, insert a `Pass(name, run)`
at its place in the list; `run(module, ctx)` gets the module and the shared `PassContext`
(options, fence log, `asm`, `abi`, `resources`, `analyses`). A pass that keeps analyses valid
names them in ``preserves`` (the others are dropped after it); a pass that produces no IR (PTX
emission) sets ``changes_ir=False``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .analysis import barrier_bytes
from .analysis.access_index import AccessIndex
from .analysis.memory import FENCE, RegionAnalysis
from .codegen import emit
from .fences import FenceLog, FenceRecord, explain_fences
from .gc_pause import gc_paused
from .ir.core import Module
from .ir.printer import print_module
from .options import CompileOptions
from .passes import (cluster_sync, cta_barriers, fence_insertion, layouts, lower_dot, proxy_fence_insertion, smem_allocation,
                     tma_lowering)
from .passes.manager import Pass, PassContext, run_passes

# what each pass keeps valid: no pass changes what an existing memdesc value names (the lowering
# passes only add values), and the access index (absolute bytes, after allocation) is unchanged by
# the fences and barriers the last two insert or remove
_REGIONS = (RegionAnalysis,)
_ACCESSES = (RegionAnalysis, AccessIndex)
PIPELINE: List[Pass] = [
    Pass("lower_dot", lower_dot.run, preserves=_REGIONS),
    Pass("tma_lowering", tma_lowering.run, preserves=_REGIONS),
    Pass("barrier_bytes", barrier_bytes.run, changes_ir=False, preserves=_ACCESSES),  # a check: changes nothing
    Pass("fence_insertion", fence_insertion.run, fence_mechanism=True, preserves=_REGIONS),
    Pass("layouts", layouts.run, preserves=_REGIONS),
    Pass("smem_allocation", smem_allocation.run, preserves=_REGIONS),
    Pass("proxy_fence_insertion", proxy_fence_insertion.run, preserves=_ACCESSES),
    Pass("cta_barriers", cta_barriers.run, preserves=_ACCESSES),
    Pass("cluster_sync", cluster_sync.run, preserves=_ACCESSES),
]

# After the IR passes: PTX generation and ptxas. `compile_module` runs them after PIPELINE when
# no explicit pass list is given (pass-level tests run only the IR passes they name).
BACKEND: List[Pass] = [
    Pass("codegen", emit.run, changes_ir=False),
]


@dataclass
class CompileResult:
    """What compiling one kernel gives: the final module, `asm` ("ir" = the input IR,
    "ir.<pass>" = the IR after each pass, later "ptx" / "cubin"), the launch ABI, the fence
    records of the fences in the output (`fences`, in program order), per-pass wall times in
    seconds, and resource usage (``shared_bytes``, registers, ...)."""

    module: Module
    asm: Dict[str, Any]
    abi: Any
    fences: List[FenceRecord]
    pass_times: Dict[str, float]
    resources: Dict[str, Any]
    fence_log: FenceLog = field(repr=False, default_factory=FenceLog)
    stats: Dict[str, Any] = field(repr=False, default_factory=dict)  # the passes' counters (PassContext.stats)

    @property
    def unfenced_hazards(self) -> List[str]:
        """With the fence passes off: every generic -> async hazard ProxyFenceInsertion found and
        left without a fence, worded as a fence's guards ("RAW: tlx.local_store at k.py:12 ->
        tlx.tma_store at k.py:14 on <buffer>, bytes [lo, hi)"), each once, in program order; empty
        when the passes ran (they fence every one)."""
        return list(self.stats.get("proxy_fence_insertion.unfenced", []))

    @property
    def removed_fences(self) -> List[FenceRecord]:
        """Records of fences a pass placed and a later pass removed (with the reason)."""
        return [r for r in self.fence_log.records.values() if r.removed]

    @property
    def redundant_fences(self) -> List[FenceRecord]:
        """User fences that guard nothing (kept in the output)."""
        return [r for r in self.fences if r.redundant]

    def explain_fences(self, include_removed: bool = True) -> str:
        """A readable report of every fence (see `compiler.fences.explain_fences`)."""
        recs = list(self.fences) + (self.removed_fences if include_removed else [])
        return explain_fences(recs, include_removed)


def fence_records_in_order(module: Module, log: FenceLog) -> List[FenceRecord]:
    """The records of the fence ops in `module`, in program order."""
    return [log.of(op) for op in module.ops() if op.name == FENCE]


def compile_module(module: Module, options: Optional[CompileOptions] = None, passes: Optional[List[Pass]] = None,
                   snapshots: bool = True) -> CompileResult:
    """Run the pipeline on `module` (modified in place). `snapshots=False` skips keeping the IR
    text after every pass (benchmarks); `passes` replaces the pipeline (tests). Python's cyclic
    garbage collector is paused meanwhile (compiler/gc_pause.py says why)."""
    with gc_paused():
        return _compile(module, options, passes, snapshots)


def _compile(module: Module, options: Optional[CompileOptions], passes: Optional[List[Pass]],
             snapshots: bool) -> CompileResult:
    options = options or CompileOptions()
    ctx = PassContext(options)
    if snapshots:
        ctx.asm["ir"] = print_module(module)
    fence_records_in_order(module, ctx.fences)  # the user's fences get their records (ids in program order) first
    run_passes(module, PIPELINE + BACKEND if passes is None else passes, ctx, snapshots)
    return CompileResult(module, ctx.asm, ctx.abi, fence_records_in_order(module, ctx.fences), ctx.pass_times,
                         ctx.resources, ctx.fences, ctx.stats)

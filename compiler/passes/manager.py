"""The pass manager: runs an ordered list of passes over one module.

For every pass it records the wall time (`ctx.pass_times[name]`, seconds), keeps the IR text
after it (`ctx.asm["ir.<name>"]`, unless snapshots are off), prints that text to stderr as it
goes when ``options.print_ir_after_all`` or ``TLX_PRINT_IR_AFTER_ALL=1``, and runs the IR
verifier after it when ``options.verify_each_pass`` (an `IRVerifyError` then names the pass that
broke the IR). After every pass it drops the analyses (`ctx.analyses`, compiler/analysis/) the
pass does not declare it preserves (`Pass.preserves`).

Which passes run: a pass named in ``options.disabled_passes`` is skipped; a *fence mechanism*
(FenceInsertion) is skipped when ``options.fence_passes`` is False or the target is below sm_90.
TMALowering and ProxyFenceInsertion always run, because they do more than fence: TMALowering
lowers the descriptor ops (and emits its fence only when fences are on), ProxyFenceInsertion
fills the records of the user's fences (and inserts or removes fences only when they are on;
below sm_90 it removes every proxy fence, since that target has no async proxy).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

from ..analysis.manager import AnalysisManager
from ..errors import IRVerifyError
from ..fences import FenceLog
from ..ir.core import Module
from ..ir.printer import print_module
from ..ir.verifier import verify_module
from ..options import CompileOptions


@dataclass
class PassContext:
    """What the passes of one compilation share besides the module."""

    options: CompileOptions
    fences: FenceLog = field(default_factory=FenceLog)
    asm: Dict[str, Any] = field(default_factory=dict)
    pass_times: Dict[str, float] = field(default_factory=dict)
    resources: Dict[str, Any] = field(default_factory=dict)
    abi: Any = None  # a KernelABI, filled by the code generator
    stats: Dict[str, Any] = field(default_factory=dict)  # per-pass counters (fences inserted, ...)
    analyses: AnalysisManager = field(default_factory=AnalysisManager)  # kept while passes preserve them

    @property
    def capability(self) -> int:
        return self.options.capability

    @property
    def proxy_fences_enabled(self) -> bool:
        """Whether the compiler may place proxy fences: fence passes on and a target with an async
        proxy (sm_90 and newer)."""
        return self.options.fence_passes and self.options.capability >= 90


@dataclass(frozen=True)
class Pass:
    """One step of the pipeline. `run(module, ctx)` transforms the module in place (or, for the
    code generator, fills `ctx.asm` / `ctx.abi` / `ctx.resources`)."""

    name: str
    run: Callable[[Module, PassContext], None]
    fence_mechanism: bool = False  # skipped when fence passes are off or below sm_90
    changes_ir: bool = True  # False: no IR snapshot / verification after it (e.g. PTX emission)
    preserves: Tuple[type, ...] = ()  # the analyses the pass leaves valid (the others are dropped)


def _print_after_all(options: CompileOptions) -> bool:
    return options.print_ir_after_all or os.environ.get("TLX_PRINT_IR_AFTER_ALL", "") not in ("", "0")


def run_passes(module: Module, passes: List[Pass], ctx: PassContext, snapshots: bool = True) -> None:
    """Run `passes` in order on `module` (see the module docstring)."""
    opts = ctx.options
    show = _print_after_all(opts)
    for p in passes:
        if p.name in opts.disabled_passes:
            continue
        if p.fence_mechanism and not ctx.proxy_fences_enabled:
            continue
        t0 = time.perf_counter()
        p.run(module, ctx)
        ctx.pass_times[p.name] = time.perf_counter() - t0
        ctx.analyses.invalidate(p.preserves)
        if not p.changes_ir:
            continue
        if opts.verify_each_pass:
            try:
                verify_module(module)
            except IRVerifyError as e:
                raise IRVerifyError(f"the IR is broken after pass '{p.name}': {e}") from e
        if snapshots or show:
            text = print_module(module)
            if snapshots:
                ctx.asm[f"ir.{p.name}"] = text
            if show:
                sys.stderr.write(f"// -----// IR after {p.name} //----- //\n{text}\n")

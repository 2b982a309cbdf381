"""The code-generation pass of the pipeline: PTX for the laid-out, allocated module, then ptxas.

Fills ``asm["ptx"]``, ``asm["cubin"]`` (when ptxas ran), the `KernelABI`, and the resource
report (registers, spills, stack, shared memory) from ``ptxas -v``. When ptxas, left to pick
the register count itself, spills, the kernel is assembled once more under the even split of the
register file (``.maxnreg``) and that PTX is kept if it spills less. When `options.assemble` is
on but ptxas cannot be found, the PTX is kept and ``resources["ptxas"]`` says so (assembling is
what needs ptxas, not compiling: the runtime can also hand PTX to the driver).
"""

from __future__ import annotations

import re
import time

from ..ptxas import assemble, find_ptxas
from .lower import hopper_only_op, lower_module
from .values import even_register_split


def run(module, ctx) -> None:
    """Emit PTX into ctx.asm / ctx.abi, and assemble it when asked."""
    opts = ctx.options
    missing = [n for n in ("layouts", "smem_allocation") if n in opts.disabled_passes]
    if missing:
        # PTX needs layouts and byte offsets: say why there is none instead of failing deep inside
        ctx.resources["codegen"] = f"skipped: {', '.join(missing)} disabled"
        return
    if opts.capability < 90:
        bad = hopper_only_op(module)
        if bad is not None:
            # the IR passes still run for such a target (they decide about fences); PTX cannot be
            # made: say why instead of emitting instructions the target does not have
            ctx.resources["codegen"] = f"not generated: {bad.name} needs sm_90a, the target is {opts.target}"
            return
    ptx, abi = lower_module(module, opts.target, opts.maxnreg)
    ctx.asm["ptx"] = ptx
    ctx.abi = abi
    ctx.resources["threads_per_cta"] = abi.threads_per_cta
    ctx.resources["shared_bytes"] = abi.shared_bytes
    if not opts.assemble:
        return
    if find_ptxas() is None:
        ctx.resources["ptxas"] = "not found"
        return
    t0 = time.perf_counter()
    cubin, res, log = assemble(ptx, opts.target)
    if (res.spill_stores or res.spill_loads) and ".maxnreg" not in ptx:
        # ptxas trades registers for occupancy on its own and may spill; a kernel that spills
        # gets the register file's even split as its cap instead (one more ptxas run)
        cap = even_register_split(abi.threads_per_cta)
        capped = re.sub(r"^(\.reqntid \d+)$", rf"\1\n.maxnreg {cap}", ptx, count=1, flags=re.M)
        cubin2, res2, log2 = assemble(capped, opts.target)
        if res2.spill_stores + res2.spill_loads < res.spill_stores + res.spill_loads:
            ptx, cubin, res, log = capped, cubin2, res2, log2
            ctx.asm["ptx"] = ptx
            abi.extra["maxnreg"] = cap
    ctx.pass_times["ptxas"] = time.perf_counter() - t0
    ctx.asm["cubin"] = cubin
    ctx.asm["ptxas_log"] = log
    ctx.resources.update(res.as_dict())


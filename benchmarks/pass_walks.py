"""The fence passes' inner parts, each timed many times in one process on the same IR.

`fence_passes.py` times whole compilations, and on a noisy machine two runs of it a minute apart
can differ by 20 %. This script times the parts that do not change the IR — FenceInsertion's
module facts, allocation's lifetimes, ProxyFenceInsertion's model (with the access index) and its
forward and backward walks (no insertion), the CTA-barrier classification and walk (its barriers
planned, not inserted) — each the best of N runs in one process, on 100 000 catalogue ops compiled once. Compare
two checkouts by running it in each, in turn.

    python benchmarks/pass_walks.py          # best of 15
    python benchmarks/pass_walks.py 30       # best of 30
"""

from __future__ import annotations

import gc
import os
import sys
import time
from typing import Callable, Dict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fence_passes as fp  # noqa: E402  (sets the benchmark's shared-memory limit too)
from tlx.compiler.ir import parse_module  # noqa: E402
from tlx.compiler.analysis.access_index import AccessIndex  # noqa: E402
from tlx.compiler.analysis.memory import RegionAnalysis  # noqa: E402
from tlx.compiler.options import CompileOptions  # noqa: E402
from tlx.compiler.passes import cta_barriers as C  # noqa: E402
from tlx.compiler.passes import fence_insertion as F  # noqa: E402
from tlx.compiler.passes import proxy_fence_insertion as P  # noqa: E402
from tlx.compiler.passes import smem_allocation as S  # noqa: E402
from tlx.compiler.passes.manager import PassContext  # noqa: E402
from tlx.compiler.pipeline import compile_module  # noqa: E402


def _upto(text: str, last: str):
    m = parse_module(text)
    names = [p.name for p in fp.PASSES]
    return compile_module(m, CompileOptions(), passes=fp.PASSES[:names.index(last) + 1], snapshots=False).module


def main(argv) -> None:
    reps = int(argv[0]) if argv else 15
    text = fp.catalogue_text(100000)
    before_fi = _upto(text, "tma_lowering")
    allocated = _upto(text, "smem_allocation")
    fenced = _upto(text, "proxy_fence_insertion")
    gc.disable()  # as compile_module does (compiler/gc_pause.py)
    best: Dict[str, float] = {}

    def t(name: str, f: Callable[[], object]):
        t0 = time.perf_counter()
        r = f()
        best[name] = min(best.get(name, float("inf")), time.perf_counter() - t0)
        return r

    ra_fi = RegionAnalysis()
    F._Info(before_fi, ra_fi)  # warm: the regions the later parts reuse are asked here first
    for _ in range(reps):
        gc.collect()  # the last round's garbage, outside the timings
        t("fence_insertion facts (regions warm)", lambda: F._Info(before_fi, ra_fi))
        t("allocation lifetimes (regions cold)", lambda: S.collect_buffers(allocated, RegionAnalysis()))
        ctx = PassContext(CompileOptions())
        idx = ctx.analyses.get(AccessIndex, fenced)  # (resolved on demand: the model's first build pays)
        model = t("proxy fence model (accesses and regions cold)", lambda: P._Model(fenced, idx))
        t("proxy fence model (accesses known)", lambda: P._Model(fenced, idx))
        fwd = P._Forward(model, None, False)
        t("proxy fence forward walk", fwd.run)
        bwd = P._Backward(model)
        t("proxy fence backward walk", bwd.run)
        walker = t("cta classification", lambda: C._Walker(fenced, ctx))
        t("cta walk", walker.walk)  # (its barriers planned, not inserted: the IR stays as it is)
    ops = sum(1 for _ in fenced.ops())
    print(f"{ops} ops, best of {reps} runs in one process (ms)")
    for name, v in best.items():
        print(f"  {name:40s} {v * 1e3:7.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])

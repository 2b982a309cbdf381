"""ClusterSync: the cluster-wide synchronization a kernel that reaches other CTAs' shared memory
needs around its own lifetime. Runs after the CTA-barrier pass.

The launch's cluster shape is recorded on the module (``cluster``: the ABI's cluster dims).

A kernel *reaches other CTAs* when it has a remote view (`tlx.remote_view`: remote stores, remote
bulk copies, remote arrives) or a multicast TMA load. Such a kernel launched with a cluster of
more than one CTA gets:

* **after its mbarrier initializations** (the last top-level `tlx.alloc_barriers`):
  `tlx.fence_mbarrier_init` and a cluster barrier (`relaxed` arrive: the fence releases the
  inits). Another CTA may arrive on, or complete bytes on, this CTA's barriers as soon as it
  runs; without this, its arrive can land before the barrier is initialized (the real TLX's
  compiler inserts the same sync).
* **before the kernel returns** (top level, before `tt.return`): a cluster barrier, so that no
  CTA exits while another may still write into its shared memory or while its own bulk copy
  still reads the source (a CTA's shared memory is gone when it exits). Kernels with warp
  specialization are left to the author (every partition's warps must reach a cluster barrier;
  the worker partitions end inside the warp_specialize op).

Both are skipped when the kernel does not reach other CTAs, or when its mbarriers are allocated
inside control flow (no top-level point all threads pass after them): then the author places
`tlx.fence_mbarrier_init_cluster()` and `tlx.cluster_barrier()`.
"""

from __future__ import annotations

from ..ir.core import Module, Operation
from .manager import PassContext


def reaches_other_ctas(op: Operation) -> bool:
    """True for an op through which a CTA touches another CTA's shared memory or mbarriers."""
    return op.name == "tlx.remote_view" or (op.name == "tlx.tma_load" and bool(op.attrs.get("multicast")))


def run(module: Module, ctx: PassContext) -> None:
    """Record the cluster shape and place the entry and exit cluster barriers (module docstring)."""
    cluster = tuple(int(c) for c in ctx.options.cluster)
    if cluster != (1, 1, 1):
        module.attrs["cluster"] = list(cluster)
    n = cluster[0] * cluster[1] * cluster[2]
    ops = list(module.ops())
    if n == 1 or not any(reaches_other_ctas(op) for op in ops):
        return
    body = module.func.regions[0].block  # type: ignore[union-attr]
    top = list(body.ops)
    inits = [op for op in top if op.name == "tlx.alloc_barriers"]
    nested = any(op.name == "tlx.alloc_barriers" and op.parent is not body for op in ops)
    placed = 0
    if inits and not nested:
        fence = Operation("tlx.fence_mbarrier_init", [], [], {"origin": "compiler"}, loc=inits[-1].loc)
        bar = Operation("tlx.cluster_barrier", [], [], {"origin": "compiler", "relaxed": True}, loc=inits[-1].loc)
        body.insert_after(inits[-1], fence)
        body.insert_after(fence, bar)
        placed += 1
    ret = body.last_op
    if ret is not None and ret.name == "tt.return" and not any(op.name == "tlx.warp_specialize" for op in ops):
        body.insert_before(ret, Operation("tlx.cluster_barrier", [], [], {"origin": "compiler"}, loc=ret.loc))
        placed += 1
    ctx.stats["cluster_sync.inserted"] = placed

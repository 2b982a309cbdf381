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

**Memory scope of the mbarrier hand-offs** (every kernel launched in a cluster of more than one
CTA). A cluster-scope release or acquire is not free: on sm_90 a `release.cluster` arrive is
`MEMBAR.ALL.GPU` + `ERRBAR` + `CGAERRBAR` before the arrive, and an `acquire.cluster` wait is an
L1 invalidation (`CCTL.IVALL`) after it — in a K loop, a third of a GEMM's speed. So the pass
gives each one the narrowest scope that still orders what it must (attribute ``scope``):

* a **remote arrive** (`tlx.barrier_arrive` on a remote view) gets ``scope = "cluster"``
  (`mbarrier.arrive.release.cluster`) when the kernel shares memory with other CTAs through
  the generic proxy — a generic write into another CTA (`remote_store`, `async_remote_store`),
  a generic global access (`tt.load`, `tt.store`, atomics, cp.async, inline asm), or a generic
  access of a local buffer that another CTA writes (a multicast TMA destination, a buffer named
  through `remote_view`): the arrive must then publish those accesses to the other CTA. Otherwise
  ``scope = "cta"`` (`mbarrier.arrive.shared::cluster`, release at CTA scope, as CUTLASS's and
  Triton's pipelines do): it only says that this CTA is done with buffers it read through the
  async proxy (wgmma, TMA), whose completion it has already waited for. (TMA stores to global
  memory do not count: a kernel that hands TMA-stored global data to another CTA of its cluster
  through an mbarrier orders it itself with `tlx.fence("gpu")`, and a kernel with such a memory
  fence gets cluster-scope arrives too.)
* a **wait** gets ``scope = "cluster"`` (`acquire.cluster`) when its mbarrier may complete by a
  cluster-scope release of another CTA: a remote arrive of scope cluster, or the complete-tx of
  `st.async` / a bulk copy into this CTA (`async_remote_store`, `async_remote_copy`), so that
  the writes the other CTA made before it are visible after the wait. Otherwise ``scope = "cta"``:
  local arrives, and TMA loads (multicast ones included), whose complete-tx makes their bytes
  visible to the waiter.
"""

from __future__ import annotations

from typing import Iterable, List, Tuple

from ..analysis.memory import GENERIC, FUNC_ARG, Region, RegionAnalysis
from ..ir import types as T
from ..ir.core import Module, Operation, Value
from ..ir.ops import effects_of
from .manager import PassContext

# generic-proxy accesses of global memory (what another CTA may also read or write); inline asm
# is opaque, so it counts as one
GLOBAL_GENERIC_OPS = frozenset({"tt.load", "tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tlx.async_load",
                                "tt.elementwise_inline_asm"})
# generic writes into another CTA's shared memory, and the author's memory fences (fence.acq_rel
# .gpu/.sys: the kernel orders memory between CTAs itself, so its arrives must publish too)
REMOTE_GENERIC_WRITES = frozenset({"tlx.remote_store", "tlx.async_remote_store", "tlx.fence"})
# ops whose mbarrier completes with a cluster-scope release by the CTA that issues them
CLUSTER_RELEASING_COMPLETIONS = frozenset({"tlx.async_remote_store", "tlx.async_remote_copy"})


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
    if n > 1:
        mark_barrier_scopes(ops, ctx.analyses.get(RegionAnalysis, module))
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


def _is_remote(v: Value) -> bool:
    return bool(getattr(v.type, "remote", False))


def _remote_arrives(ops: Iterable[Operation]) -> List[Operation]:
    return [op for op in ops if op.name == "tlx.barrier_arrive" and _is_remote(op.arg("bar"))]


def _overlaps(rs: Tuple[Region, ...], targets: List[Region]) -> bool:
    """True when a region of `rs` may share bytes with a target (a region of unknown allocation
    may share bytes with any)."""
    if not targets:
        return False
    return any(r.root is FUNC_ARG or any(r.overlaps_rel(t) or t.root is FUNC_ARG for t in targets) for r in rs)


def shares_generic_memory(ops: List[Operation], ra: RegionAnalysis) -> bool:
    """True when the kernel's generic-proxy accesses may meet another CTA's accesses: a generic
    write into another CTA, a generic global access, a memory fence of the author, or a generic
    access of a local buffer that another CTA writes (multicast TMA destination, source of a
    remote view)."""
    if any(op.name in REMOTE_GENERIC_WRITES or op.name in GLOBAL_GENERIC_OPS for op in ops):
        return True
    written: List[Region] = []  # local buffers another CTA of the cluster writes
    for op in ops:
        if op.name == "tlx.tma_load" and op.attrs.get("multicast"):
            written.extend(ra.regions_of(op.arg("dst")))
        elif op.name == "tlx.remote_view" and not isinstance(op.arg("src").type, T.BarrierType):
            written.extend(ra.regions_of(op.arg("src")))
    return any(e.proxy == GENERIC and _overlaps(ra.regions_of(v), written)
               for op in ops for v, e in effects_of(op))


def mark_barrier_scopes(ops: List[Operation], ra: RegionAnalysis) -> None:
    """Set ``scope`` ("cta" or "cluster") on every remote arrive and every mbarrier wait of a
    kernel launched in a cluster (module docstring: the narrowest scope that orders what the
    hand-off must)."""
    arrives = _remote_arrives(ops)
    arrive_scope = "cluster" if arrives and shares_generic_memory(ops, ra) else "cta"
    released: List[Region] = []  # mbarriers another CTA completes with a cluster-scope release
    for op in arrives:
        op.attrs["scope"] = arrive_scope
        if arrive_scope == "cluster":
            released.extend(ra.regions_of(op.arg("bar")))
    for op in ops:
        if op.name in CLUSTER_RELEASING_COMPLETIONS:
            released.extend(ra.regions_of(op.arg("bar")))
    for op in ops:
        if op.name == "tlx.barrier_wait":
            op.attrs["scope"] = "cluster" if _overlaps(ra.regions_of(op.arg("bar")), released) else "cta"

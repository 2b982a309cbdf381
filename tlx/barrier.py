"""TLX mbarriers and named barriers (`tlx.alloc_barriers`, `barrier_expect_bytes`, `barrier_wait`,
`barrier_arrive`, `named_barrier_wait/arrive`). Names and defaults follow TLX's `barrier.py`."""

from __future__ import annotations

from typing import Any

from tlx.compiler.errors import TLXCompileError
from tlx.compiler.ir import types as T

from .language import core, semantic
from .language.core import builtin, mbarrier, unwrap
from .mem_ops import cta_rank_operand, remote_buffer


def _one_barrier(bar: Any, what: str) -> mbarrier:
    bar = unwrap(bar)
    if not isinstance(bar, mbarrier):
        raise TLXCompileError(f"{what} needs an mbarrier, got {type(bar).__name__}",
                              hint="allocate barriers with tlx.alloc_barriers and index them: bars[i]")
    if bar.handle.type.array:  # type: ignore[union-attr]
        raise TLXCompileError(f"{what} needs one mbarrier, got an array of {bar.num}", hint="index it: bars[i]")
    if bar.handle.type.remote:  # type: ignore[union-attr]
        # as the real TLX: only this CTA waits on / expects bytes on its own barriers, and a remote
        # arrive names the rank (barrier_arrive(bar, remote_cta_rank=r)) rather than a remote view
        raise TLXCompileError(f"{what} does not take a remote_view of an mbarrier: pass the local mbarrier",
                              hint="signal another CTA's barrier with barrier_arrive(bar, remote_cta_rank=r)")
    return bar


@builtin
def alloc_barriers(num_barriers: Any, arrive_count: Any = 1) -> mbarrier:
    """Allocate `num_barriers` mbarriers in shared memory, each initialized to expect
    `arrive_count` arrivals per phase (both compile-time constants)."""
    n = semantic.constexpr_int(num_barriers, "alloc_barriers' num_barriers")
    c = semantic.constexpr_int(arrive_count, "alloc_barriers' arrive_count")
    if n < 1 or c < 1:
        raise TLXCompileError(f"alloc_barriers needs num_barriers >= 1 and arrive_count >= 1, got {n}, {c}")
    op = semantic.emit("tlx.alloc_barriers", [], [T.BarrierType(n, True)], {"num": n, "arrive_count": c})
    return mbarrier(op.result, c)


@builtin
def alloc_warp_barrier(num_barriers: Any, num_warps: Any = 1, num_arrivals: Any = 1) -> mbarrier:
    """mbarriers every thread arrives on by itself: count = num_warps * 32 * num_arrivals."""
    n = semantic.constexpr_int(num_barriers, "num_barriers")
    c = semantic.constexpr_int(num_warps, "num_warps") * 32 * semantic.constexpr_int(num_arrivals, "num_arrivals")
    op = semantic.emit("tlx.alloc_barriers", [], [T.BarrierType(n, True)],
                       {"num": n, "arrive_count": c, "per_thread": True})
    return mbarrier(op.result, c, True)


@builtin
def barrier_expect_bytes(bar: Any, size: Any, pred: Any = None) -> None:
    """Expect `size` bytes of TMA transactions on `bar`, and arrive once (one elected thread)."""
    b = _one_barrier(bar, "barrier_expect_bytes")
    n = semantic.constexpr_int(size, "barrier_expect_bytes' size",
                       hint="compute the byte count from tl.constexpr values (e.g. BM * BK * tlx.size_of(dtype))")
    if n <= 0:
        raise TLXCompileError(f"barrier_expect_bytes needs a positive byte count, got {n}")
    semantic.emit("tlx.barrier_expect_bytes", [b.handle, semantic.predicate(pred)], [], {"bytes": n})


@builtin
def barrier_wait(bar: Any, phase: Any, pred: Any = None) -> None:
    """Wait until `bar`'s phase with parity `phase` has completed."""
    b = _one_barrier(bar, "barrier_wait")
    p = semantic.to_tensor(unwrap(phase))
    if p.shape or not (p.dtype.is_int() or p.dtype.is_bool()):
        raise TLXCompileError(f"barrier_wait's phase must be an integer scalar, got {p.type}")
    semantic.emit("tlx.barrier_wait", [b.handle, semantic.cast(p, core.int32).handle, semantic.predicate(pred)], [])


@builtin
def barrier_arrive(bar: Any, arrive_count: Any = 1, remote_cta_rank: Any = None, pred: Any = None) -> None:
    """Arrive on `bar` (`arrive_count` arrivals; the partition's leader thread arrives, unless the
    barrier was made with alloc_warp_barrier); with `remote_cta_rank`, on the same barrier of that
    CTA of the cluster (mbarrier.arrive.shared::cluster; release at cluster scope when the kernel
    shares memory with other CTAs through the generic proxy, see ClusterSync)."""
    b = _one_barrier(bar, "barrier_arrive")
    c = semantic.constexpr_int(arrive_count, "barrier_arrive's arrive_count")
    if unwrap(remote_cta_rank) is not None:  # the same barrier in that CTA of the cluster (mapa)
        b = remote_buffer(b, cta_rank_operand(remote_cta_rank, "barrier_arrive"))
    attrs = {"count": c}
    if b.is_warp_barrier:
        attrs["per_thread"] = True
    semantic.emit("tlx.barrier_arrive", [b.handle, semantic.predicate(pred)], [], attrs)


def _named(bar: Any, count: Any, what: str) -> dict:
    i = semantic.constexpr_int(bar, f"{what}'s barrier id")
    n = semantic.constexpr_int(count, f"{what}'s thread count")
    if not 0 <= i < 16:
        raise TLXCompileError(f"named barrier ids are 0..15, got {i}")
    if n <= 0 or n % 32:
        raise TLXCompileError(f"{what} counts threads in whole warps (a positive multiple of 32), got {n}")
    return {"id": i, "count": n}


@builtin
def named_barrier_wait(bar: Any, arrive_count: Any) -> None:
    """bar.sync on hardware barrier `bar` with `arrive_count` participating threads."""
    semantic.emit("tlx.named_barrier_wait", [], [], _named(bar, arrive_count, "named_barrier_wait"))


@builtin
def named_barrier_arrive(bar: Any, arrive_count: Any) -> None:
    """bar.arrive on hardware barrier `bar` (does not wait)."""
    semantic.emit("tlx.named_barrier_arrive", [], [], _named(bar, arrive_count, "named_barrier_arrive"))


@builtin
def cluster_barrier() -> None:
    """Synchronize every thread of every CTA of the cluster (barrier.cluster.arrive.aligned +
    barrier.cluster.wait.aligned: release / acquire at cluster scope). Every warp of every
    partition must reach it, as with the CTA's own barrier."""
    semantic.emit("tlx.cluster_barrier", [], [])


@builtin
def fence_mbarrier_init_cluster() -> None:
    """fence.mbarrier_init.release.cluster: make this CTA's mbarrier initializations visible to
    the other CTAs of the cluster before they arrive on them remotely (follow it with a
    cluster_barrier)."""
    semantic.emit("tlx.fence_mbarrier_init", [], [])


# ---- cluster launch control (Blackwell) ------------------------------------------------------------

def _clc_needs_blackwell(name: str):
    """The cluster-launch-control builtin `name`: it needs sm_100, so here it is always a TLXCompileError."""
    def fn(*args: Any, **kwargs: Any) -> None:
        raise TLXCompileError(f"tlx.{name}: cluster launch control (clusterlaunchcontrol.try_cancel) needs sm_100 "
                              "(Blackwell); tlx targets sm_90a",
                              hint="on Hopper, schedule tiles with a persistent loop over tl.program_id / "
                                   "tl.num_programs instead")
    fn.__name__ = name
    fn.__doc__ = "Cluster launch control exists only on sm_100: always a TLXCompileError here."
    return builtin(fn)


clc_create_context = _clc_needs_blackwell("clc_create_context")
clc_producer = _clc_needs_blackwell("clc_producer")
clc_consumer = _clc_needs_blackwell("clc_consumer")

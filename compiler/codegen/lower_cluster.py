"""Lowering of thread-block cluster ops (sm_90): the cluster barrier, the mbarrier-init fence,
remote views (mapa) and the stores and bulk copies into another CTA's shared memory
(distributed shared memory). The cluster's size and a CTA's rank are special registers
(`lower_arith`).

A remote view keeps the view's geometry and swaps its base for the shared::cluster address of the
same bytes in the other CTA: `mapa` maps an address of this CTA's shared window to the other's,
and the window is contiguous, so mapa(base) + offset addresses every element of the view.

The stores from registers are made by one thread per element (a layout that holds copies of an
element in several threads or registers stores it once): for `st.async` each store adds its bytes
to the remote mbarrier's transaction count, so a copy stored twice would complete the phase early.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, List, Optional

from ..errors import TLXCompileError
from ..ir.core import Operation
from .lower_memory import SmemAccess, _vec_text, _width_ops, pack_words
from .ptx import address
from .values import Barriers, SmemView, Tensor

if TYPE_CHECKING:
    from .lower import KernelLowering


def _cluster_barrier(lw: KernelLowering, op: Operation) -> None:
    # the default arrive has release semantics and the wait acquire: writes before the barrier
    # (remote stores included) are visible to every thread of the cluster after it; a
    # compiler-placed barrier after mbarrier init orders only the init (its fence releases it)
    relaxed = ".relaxed" if op.attrs.get("relaxed") else ""
    lw.e(f"barrier.cluster.arrive{relaxed}.aligned")
    lw.e("barrier.cluster.wait.aligned")


def _fence_mbarrier_init(lw: KernelLowering, op: Operation) -> None:
    lw.e("fence.mbarrier_init.release.cluster")


def _mapa(lw: KernelLowering, addr: str, rank_reg: str) -> str:
    return lw.e.new("b32", "mapa.shared::cluster.u32", addr, rank_reg)


def _remote_view(lw: KernelLowering, op: Operation) -> None:
    src = lw.val(op.arg("src"))
    rank = lw.scalar(op.arg("rank"))
    if isinstance(src, Barriers):
        lw.set(op.result, Barriers(_mapa(lw, src.addr, rank), 1, False, True))
    elif isinstance(src, SmemView):
        lw.set(op.result, replace(src, base=_mapa(lw, src.base, rank)))
    else:
        raise TLXCompileError("internal: remote_view of a value that is not in shared memory", op.loc)


def _unique_groups(x: Tensor, vec: int) -> List[int]:
    """The first registers of the vector groups of x that hold elements no earlier register of
    this thread holds (a register basis of zero repeats the elements of the registers below it)."""
    dup = 0
    for i, b in enumerate(x.lmap.reg):
        if not any(b):
            dup |= 1 << i
    return [r0 for r0 in range(0, len(x.regs), vec) if not r0 & dup]


def _store_words(lw: KernelLowering, op: Operation, instr: str, bar: Optional[str]) -> None:
    """Store the register tensor `src` into the remote view `dst` with `instr` (its vector and word
    type appended), one thread per element; `bar` is the remote mbarrier operand of st.async."""
    view: SmemView = lw.val(op.arg("dst"))  # type: ignore[assignment]
    x = lw.tensor(op.arg("src"))
    acc = SmemAccess(lw, view, x.lmap, x.elem)
    vec = acc.vec
    if bar is not None and acc.eb < 4:
        raise TLXCompileError("async_remote_shmem_store moves 32- or 64-bit elements (st.async has no narrower "
                              "store)", op.loc, hint="store a 32-bit dtype, or bulk-copy a buffer with "
                                                     "async_remote_shmem_copy")
    owner = lw.owner_pred(x.lmap)
    nbytes = vec * acc.eb
    vsuf, _, _ = _width_ops(nbytes, acc.eb)
    for r0 in _unique_groups(x, vec):
        words, wt = pack_words(lw, x.regs[r0:r0 + vec], x.elem, nbytes)
        args = [acc.address(r0), _vec_text(words)] + ([f"[{bar}]"] if bar is not None else [])
        lw.e(f"{instr}{vsuf}.{wt}", *args, pred=owner)


def _remote_store(lw: KernelLowering, op: Operation) -> None:
    _store_words(lw, op, "st.shared::cluster", None)


def _async_remote_store(lw: KernelLowering, op: Operation) -> None:
    bar = lw.val(op.arg("bar"))
    assert isinstance(bar, Barriers) and bar.remote
    _store_words(lw, op, "st.async.shared::cluster.mbarrier::complete_tx::bytes", bar.addr)


def _async_remote_copy(lw: KernelLowering, op: Operation) -> None:
    dst: SmemView = lw.val(op.arg("dst"))  # type: ignore[assignment]
    src: SmemView = lw.val(op.arg("src"))  # type: ignore[assignment]
    bar = lw.val(op.arg("bar"))
    assert isinstance(bar, Barriers) and bar.remote
    if not (isinstance(dst.origin, int) and isinstance(src.origin, int)):
        raise TLXCompileError("async_remote_shmem_copy needs whole buffers (not a dynamic sub-slice)", op.loc)
    nbytes = op.arg("src").type.nbytes  # type: ignore[union-attr]
    lw.e("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes", address(dst.base, dst.origin),
         address(src.base, src.origin), str(nbytes), f"[{bar.addr}]", pred=lw.part.leader)


#: op name -> its lowering (lower.py merges the tables of the lower_* modules)
LOWERINGS = {
    "tlx.cluster_barrier": _cluster_barrier,
    "tlx.fence_mbarrier_init": _fence_mbarrier_init, "tlx.remote_view": _remote_view,
    "tlx.remote_store": _remote_store, "tlx.async_remote_store": _async_remote_store,
    "tlx.async_remote_copy": _async_remote_copy,
}

"""Lowering of shared-memory accesses at run-time indices (`tlx.local_gather`,
`tlx.local_scatter`) and of prefetch hints (`tlx.prefetch`, `tlx.prefetch_tensormap`).

Gather / scatter: the element a thread holds in register r has view coordinates c (its layout);
the access goes to c with c[axis] replaced by the index it holds. The buffer's element -> byte
map is linear, so that address is the XOR of three parts: the thread's part of c without the
axis (computed once per partition), a constant per register, and the XOR of the byte offsets of
the index's set bits (only the bits below the axis length are read, so every access stays inside
the buffer: an out-of-range index wraps, where the hardware would read another CTA's memory). A
padded layout's padding is added last. One ld.shared / st.shared per element; a scatter is made
by one thread of each group holding copies of the same element.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from ..errors import TLXCompileError
from ..ir import types as T
from ..ir.core import Operation
from ..analysis import layout_math as LM
from .layout_rules import elem_bytes
from .lower_memory import _ld_type, global_access, index_u32, pack_words, pad_reg, unpack_words, word_regs
from .ptx import address
from .values import Desc, SmemView, Tensor, reg_kind

if TYPE_CHECKING:  # pragma: no cover
    from .lower import KernelLowering


def _index_part(lw: KernelLowering, idx: str, offs: List[int]) -> Optional[str]:
    """XOR over the set bits k of register `idx` of offs[k] (None when every offset is 0).
    Runs of bits whose offsets double (a plain stride) are extracted and scaled at once."""
    em = lw.e
    acc: Optional[str] = None
    k = 0
    while k < len(offs):
        o = offs[k]
        if not o:
            k += 1
            continue
        n = 1
        while k + n < len(offs) and offs[k + n] == o << n:
            n += 1
        t = em.new("b32", "bfe.u32", idx, str(k), str(n))
        if LM.is_pow2(o):
            s = em.new("b32", "shl.b32", t, str(LM.log2(o)))
        else:
            s = em.new("b32", "mul.lo.u32", t, str(o))
        acc = s if acc is None else em.new("b32", "xor.b32", acc, s)
        k += n
    return acc


class IndexedAccess:
    """Addresses of the elements of a register tensor with layout `m` in `view`, with the
    coordinate along `axis` taken from an index register per element."""

    def __init__(self, lw: KernelLowering, view: SmemView, m: LM.LinearMap, axis: int, loc):
        if view.buffers:
            raise TLXCompileError("a gather / scatter needs one buffer (index the buffer array first)", loc)
        self.lw, self.view, self.axis = lw, view, axis

        def off(b: LM.Basis) -> int:
            return view.element_bases(tuple(0 if d == axis else x for d, x in enumerate(b)))

        self.reg_off = [off(b) for b in m.reg]
        t, tmask = lw.thread_linear([off(b) for b in m.lane], [off(b) for b in m.warp])
        origin = view.origin
        self.K = origin if isinstance(origin, int) else 0
        if isinstance(origin, str) and origin:
            t = origin if t is None else lw.e.new("b32", "xor.b32", t, origin)
        self.t = t
        rank = len(view.shape)
        self.axis_off = [view.element_bases(tuple((1 << k) if d == axis else 0 for d in range(rank)))
                         for k in range(LM.log2(view.shape[axis]))]
        self.padding = view.smap().padding

    def address(self, r: int, idx: str) -> str:
        """The address operand of register r's element, whose axis coordinate is in `idx`."""
        em = self.lw.e
        K = self.K
        for i, off in enumerate(self.reg_off):
            if r >> i & 1:
                K ^= off
        parts = [p for p in (self.t, _index_part(self.lw, idx, self.axis_off)) if p is not None]
        if not parts:
            return address(self.view.base, self.view.smap().padded(K))
        u = parts[0] if len(parts) == 1 else em.new("b32", "xor.b32", *parts)
        if K:
            u = em.new("b32", "xor.b32", u, str(K))
        a = em.tmp("b32")
        em("add.s32", a, self.view.base, pad_reg(self.lw, u, self.padding))
        return f"[{a}]"


def _local_gather(lw: KernelLowering, op: Operation) -> None:
    view: SmemView = lw.val(op.arg("src"))  # type: ignore[assignment]
    t = op.result.type
    m = lw.lmap(t)
    idx = lw.tensor(op.arg("indices"))
    ie = op.arg("indices").type.element
    acc = IndexedAccess(lw, view, m, int(op.attrs["axis"]), op.loc)
    elem = t.element
    eb = elem_bytes(elem)
    regs = lw.e.named_array(reg_kind(elem), m.num_regs, lw.hint(op.result, "gather"))
    for r in range(m.num_regs):
        words, wt = word_regs(lw, elem, eb)
        lw.e(f"ld.shared.{_ld_type(wt)}", words[0], acc.address(r, index_u32(lw, idx.regs[r], ie)))
        unpack_words(lw, words, wt, [regs[r]], elem)
    lw.set(op.result, Tensor(regs, m, elem))


def _local_scatter(lw: KernelLowering, op: Operation) -> None:
    view: SmemView = lw.val(op.arg("dst"))  # type: ignore[assignment]
    vals = lw.tensor(op.arg("values"))
    idx = lw.tensor(op.arg("indices"))
    ie = op.arg("indices").type.element
    m = vals.lmap
    acc = IndexedAccess(lw, view, m, int(op.attrs["axis"]), op.loc)
    owner = lw.owner_pred(m)
    for r in range(m.num_regs):
        words, wt = pack_words(lw, [vals.regs[r]], vals.elem, elem_bytes(vals.elem))
        lw.e(f"st.shared.{wt}", acc.address(r, index_u32(lw, idx.regs[r], ie)), words[0], pred=owner)


def _prefetch(lw: KernelLowering, op: Operation) -> None:
    ptr_v = op.arg("ptr")
    eb = elem_bytes(T.element_of(ptr_v.type).pointee)  # type: ignore[union-attr]
    m, n, v, ptrs, masks = global_access(lw, ptr_v, op.arg("mask"), eb)
    # one prefetch per contiguous vector, by the leader (a scalar) or one owner of each element
    owner = lw.owner_pred(m) if m is not None else lw.part.leader
    for r0 in range(0, n, v):
        pred = lw.and_pred(owner, masks[r0] if masks else None)
        lw.e(f"prefetch.global.{op.attrs['level']}", f"[{ptrs[r0]}]", pred=pred)


def _prefetch_tensormap(lw: KernelLowering, op: Operation) -> None:
    desc: Desc = lw.val(op.arg("desc"))  # type: ignore[assignment]
    lw.e("prefetch.tensormap", f"[{desc.addr}]", pred=lw.part.leader)


#: op name -> its lowering (lower.py merges the tables of the lower_* modules)
LOWERINGS = {"tlx.local_gather": _local_gather, "tlx.local_scatter": _local_scatter, "tlx.prefetch": _prefetch,
             "tlx.prefetch_tensormap": _prefetch_tensormap}

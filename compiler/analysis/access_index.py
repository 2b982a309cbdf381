"""The shared-memory accesses of the allocated IR in absolute bytes.

ProxyFenceInsertion and the CTA-barrier pass both compare accesses of the allocated IR by their
real bytes: allocation's ``offset`` of a buffer plus the interval inside it a value names
(`RegionAnalysis`), or an op's scratch area. `AccessIndex` (an analysis) resolves them on demand
and remembers them per op and per value. They depend on the offsets and the regions only, so the
fences and barriers those passes insert or remove leave it valid (they preserve it); allocation,
which decides the offsets, does not.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from ..ir.core import Module, Operation
from ..ir.layouts import default_shared_layout
from .memory import (EFFECT_NAMES, FENCE, FUNC_ARG, HANDOFF_ACQUIRE, HANDOFF_RELEASE, WRITE, RegionAnalysis,
                     accesses_of, const_int)

# ops that order shared-memory accesses without touching shared memory themselves
ORDERING_OPS = frozenset({FENCE, "tlx.cta_barrier", "tlx.async_commit_group", "tlx.async_wait_group",
                          "tlx.tma_store_wait", "tlx.async_dot_wait"}) | HANDOFF_RELEASE | HANDOFF_ACQUIRE

# one byte range an access may touch: (lo, hi, box key or None, root: the allocation or scratch owner)
Bytes = Tuple[int, int, Optional[tuple], object]
# one access: (write, proxy, the byte ranges it may touch)
AbsAccess = Tuple[bool, str, Tuple[Bytes, ...]]


def trip_count(op: Operation) -> Optional[int]:
    """The constant trip count of an `scf.for`, or None when a bound is not a constant."""
    lb, ub, st = (const_int(op.arg(n)) for n in ("lb", "ub", "step"))
    if lb is None or ub is None or st is None or st <= 0:
        return None
    return max(0, -(-(ub - lb) // st))


class AccessIndex:
    """`of(op)`: the shared-memory accesses of `op` in absolute bytes, remembered per op."""

    def __init__(self, module: Optional[Module] = None, analyses=None):
        self.ra: RegionAnalysis = analyses.get(RegionAnalysis, module) if analyses is not None else RegionAnalysis()
        self._of: Dict[Operation, Tuple[AbsAccess, ...]] = {}  # (keyed by the objects: hashed in C)
        self._bytes_of: Dict[object, Tuple[Bytes, ...]] = {}  # value -> `_bytes` (views are shared by their users)

    def of(self, op: Operation) -> Tuple[AbsAccess, ...]:
        """`op`'s accesses (its regions' excluded): (write, proxy, byte ranges) each; empty for an
        op that touches no shared memory."""
        r = self._of.get(op)
        if r is None:
            r = self._of[op] = self._accesses(op)
        return r

    def _accesses(self, op: Operation) -> Tuple[AbsAccess, ...]:
        if op.name not in EFFECT_NAMES and not (op.attrs and op.attrs.get("scratch_bytes")):
            return ()
        memo = self._bytes_of
        out = []
        for a in accesses_of(op):
            v = a.value
            b = memo.get(v) if v is not None else None
            if b is None:
                b = self._bytes(v, op)
                if v is not None:
                    memo[v] = b
            out.append((a.kind == WRITE, a.proxy, b))
        return tuple(out)

    def _bytes(self, v, op: Operation) -> Tuple[Bytes, ...]:
        """(lo, hi, box key, root) for every allocated byte range `v` may name (`op`'s scratch area
        when `v` is None); a function argument and an unallocated buffer name none we can compare."""
        if v is None:
            off = op.attrs.get("scratch_offset")
            if not isinstance(off, int):
                return ()
            return ((off, off + op.attrs.get("scratch_bytes", 0), None, op),)
        out = []
        for rg in self.ra.regions_of(v):
            if rg.root is FUNC_ARG:
                continue
            off = rg.root.attrs.get("offset")
            if not isinstance(off, int):
                continue  # not allocated (allocation disabled): nothing to compare
            box = None
            if rg.box is not None:  # boxes compare within one slab layout
                t = rg.root.result.type
                lay = t.layout if t.layout is not None else default_shared_layout(tuple(t.buffer_shape), t.element.bits)
                box = ((rg.box[0], str(lay)), rg.box[1], rg.box[2])
            out.append((off + rg.lo, off + rg.hi, box, rg.root))
        return tuple(out)

"""LowerDot: register-level `tt.dot` becomes shared-memory staging plus an async wgmma.

Rule (sm_90+, like Triton's accelerate_matmul on Hopper): ``%d = tt.dot %a, %b, %acc`` becomes

    %sa = tlx.local_alloc src(%a)          # generic write of A into an NVMMA-swizzled tile
    %sb = tlx.local_alloc src(%b)          # generic write of B
    %r  = tlx.async_dot %sa, %sb acc(%acc) # wgmma: async-proxy read of both tiles
    %d' = tlx.async_dot_wait %r {pendings = 0}

so that the fence passes see the generic shared-memory writes that feed wgmma (they need a
proxy fence before it). An operand that is itself a `tlx.local_load` of a buffer with an NVMMA
(or not yet assigned) layout and the operand's shape, with nothing in between that may write
shared memory, is read in place instead of being copied again. An accumulator that is an
all-zero constant is dropped (`async_dot` without `acc` starts from zero).

Below sm_90 the pass does nothing (there is no wgmma; the code generator lowers `tt.dot`).
"""

from __future__ import annotations

from typing import List, Optional

from ..analysis.memory import READ, accesses_of
from ..ir import types as T
from ..ir.core import Operation, Value
from ..ir.layouts import NVMMASharedLayout, default_shared_layout
from .manager import PassContext


def staging_type(t: T.TensorType) -> T.MemDescType:
    """The immutable shared tile a register tensor is staged in (the layout local_alloc picks)."""
    bits = t.element.bits  # type: ignore[union-attr]
    return T.MemDescType(tuple(t.shape), t.element, default_shared_layout(tuple(t.shape), bits), 0, False)  # type: ignore[arg-type]


def buffer_read_in_place(v: Value, user: Operation) -> Optional[Value]:
    """If tensor `v` is a `tlx.local_load` of an NVMMA (or unassigned-layout) buffer of the same
    shape in `user`'s block, and no op between the load and `user` may write shared memory,
    return that buffer (the consumer can read it in place); else None."""
    d = v.defining_op
    if d is None or d.name != "tlx.local_load" or d.arg("token") is not None or d.parent is not user.parent:
        return None
    buf = d.arg("src")
    bt = buf.type
    if not isinstance(bt, T.MemDescType) or tuple(bt.shape) != tuple(v.type.shape):  # type: ignore[union-attr]
        return None
    if bt.layout is not None and not isinstance(bt.layout, NVMMASharedLayout):
        return None
    if bt.layout is None and not isinstance(default_shared_layout(tuple(bt.shape), bt.element.bits), NVMMASharedLayout):
        return None
    op = d.next_op  # (the load defines an operand of `user`: it comes first)
    while op is not None and op is not user:
        if op.regions or any(a.kind != READ for a in accesses_of(op)):
            return None
        op = op.next_op
    return buf


def _is_zero(v: Value) -> bool:
    d = v.defining_op
    return d is not None and d.name == "arith.constant" and d.attrs.get("value") in (0, 0.0) and not isinstance(d.attrs.get("value"), bool)


def lower_one(op: Operation, in_place: List[Optional[Value]]) -> None:
    """Rewrite one `tt.dot` (see the module docstring); `in_place` holds, for A and B, the buffer
    to read in place (`buffer_read_in_place`) or None for a staging copy."""
    a, b, acc = op.arg("a"), op.arg("b"), op.arg("acc")
    operands = []
    for x, buf in zip((a, b), in_place):
        if buf is None:
            alloc = Operation("tlx.local_alloc", [x], [staging_type(x.type)], loc=op.loc)  # type: ignore[arg-type]
            op.parent.insert_before(op, alloc)
            buf = alloc.result
        operands.append(buf)
    acc_in = None if _is_zero(acc) else acc
    dot = Operation("tlx.async_dot", [operands[0], operands[1], acc_in], [op.result.type], loc=op.loc)
    op.parent.insert_before(op, dot)
    wait = Operation("tlx.async_dot_wait", [[dot.result]], [op.result.type], {"pendings": 0}, loc=op.loc)
    op.parent.insert_before(op, wait)
    op.result.replace_all_uses_with(wait.results[0])
    op.erase()


def run(module, ctx: PassContext) -> None:
    """Lower every `tt.dot` of the module (sm_90 and newer)."""
    if ctx.capability < 90:
        return
    dots = [op for op in module.ops() if op.name == "tt.dot"]
    # decided on the input IR, before any dot is rewritten: what lowering inserts writes only new
    # staging buffers, never a buffer another dot reads in place
    in_place = [[buffer_read_in_place(op.arg(x), op) for x in ("a", "b")] for op in dots]
    for op, bufs in zip(dots, in_place):
        lower_one(op, bufs)
    ctx.stats["lower_dot.dots"] = len(dots)

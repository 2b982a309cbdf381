"""LowerDot: each register-level `tt.dot` gets its instruction; those that go to wgmma become
shared-memory staging plus an async wgmma.

**The choice** (`dot_instruction`, as Triton's AccelerateMatmul picks on Hopper): wgmma when the
target is sm_90+, the dot's warps form whole warpgroups (num_warps a multiple of 4), M is a
multiple of 64 (one wgmma is m64 per warpgroup), N a multiple of 8, K at least one instruction
(256 / element bits), the operands are fp16, bf16, fp8, int8 or fp32 read as tf32, and the
accumulator is f32 (i32 for int8). fp8 with an f32 accumulator and ``max_num_imprecise_acc`` below
32 asks for full-precision accumulation, which wgmma does not give: mma.sync. Otherwise the dot
stays a `tt.dot` and the code generator lowers it to ``mma.sync`` (m16n8k16 for 16-bit operands,
m16n8k8 for tf32, m16n8k32 for int8 and fp8) on register operands — no shared-memory access of
its own, so nothing for the fence passes. fp32 operands with ``input_precision = "ieee"`` and
fp64 operands take no tensor core at all: the code generator's FMA loop.

**wgmma staging** (sm_90+): ``%d = tt.dot %a, %b, %acc`` becomes

    %sa = tlx.local_alloc src(%a)          # generic write of A into an NVMMA-swizzled tile
    %sb = tlx.local_alloc src(%b)          # generic write of B
    %r  = tlx.async_dot %sa, %sb acc(%acc) # wgmma: async-proxy read of both tiles
    %d' = tlx.async_dot_wait %r {pendings = 0}

so that the fence passes see the generic shared-memory writes that feed wgmma (they need a
proxy fence before it). wgmma reads 8- and 32-bit operands K-major only, so such a B (K x N) is
staged into the transposed NVMMA layout, K contiguous, as Triton does. Each operand is staged
at most once:

* an operand that is itself a `tlx.local_load` of a buffer with an NVMMA (or not yet assigned)
  layout and the operand's shape, with nothing in between that may write shared memory, is read
  in place;
* an operand defined outside the loops around the dot is staged before the outermost of those
  loops (loop-invariant staging, and its proxy fence, run once; the fence passes then keep the
  fence out of the loop too) — never out of an `scf.if` or a warp-specialize region;
* an operand another dot already staged at a place that dominates this one reuses that tile.

An accumulator that is an all-zero constant is dropped (`async_dot` without `acc` starts from
zero). Below sm_90 every dot stays a `tt.dot` (mma.sync).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..analysis.memory import READ, accesses_of
from ..ir import types as T
from ..ir.core import Operation, Value
from ..ir.layouts import NVMMASharedLayout, default_shared_layout
from .layouts import partition_warps
from .manager import PassContext

WGMMA, MMA_SYNC, FMA = "wgmma", "mma_sync", "fma"

_WGMMA_OPERANDS = ("f16", "bf16", "f8e4m3", "f8e5m2", "i8", "f32")


def dot_instruction(op: Operation, num_warps: int, capability: int = 90) -> str:
    """What `tt.dot` `op`, run by `num_warps` warps, lowers to: WGMMA, MMA_SYNC or FMA (the
    rule is the module docstring's)."""
    a, b = op.arg("a").type, op.arg("b").type
    ae, be, re = a.element.name, b.element.name, op.result.type.element.name  # type: ignore[union-attr]
    (m, k), n = a.shape, b.shape[1]  # type: ignore[union-attr]
    if ae == "f64" or (ae == "f32" and op.attrs.get("input_precision", "tf32") == "ieee"):
        return FMA
    if capability < 90 or num_warps % 4 or m % 64 or n % 8 or ae not in _WGMMA_OPERANDS or be not in _WGMMA_OPERANDS:
        return MMA_SYNC
    if k < 256 // a.element.bits:  # type: ignore[union-attr]
        return MMA_SYNC
    if re != ("i32" if ae == "i8" else "f32"):
        return MMA_SYNC  # an f16 accumulator: tlx's wgmma accumulates in f32 (mma.sync has .f16)
    if ae.startswith("f8") and int(op.attrs.get("max_num_imprecise_acc", 1 << 30)) < 32:
        return MMA_SYNC
    return WGMMA


def staging_type(t: T.TensorType, k_major_b: bool = False) -> T.MemDescType:
    """The immutable shared tile a register tensor is staged in: the layout local_alloc picks,
    or for a B operand that wgmma must read K-major (8- and 32-bit elements: only 16-bit ones
    may be MN-major) the transposed NVMMA layout, K contiguous (as Triton stages it)."""
    bits = t.element.bits  # type: ignore[union-attr]
    shape = tuple(t.shape)
    lay = default_shared_layout(shape, bits)
    if k_major_b:
        sw = default_shared_layout((shape[1], shape[0]), bits)
        lay = NVMMASharedLayout(sw.swizzle if isinstance(sw, NVMMASharedLayout) else 0, bits, True)
    return T.MemDescType(shape, t.element, lay, 0, False)  # type: ignore[arg-type]


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


def _defined_inside(v: Value, loop: Operation) -> bool:
    d = v.defining_op
    if d is not None:
        return loop.is_ancestor_of(d)
    owner = v.owner.parent_op  # type: ignore[attr-defined]
    return owner is loop or (owner is not None and loop.is_ancestor_of(owner))


def staging_point(v: Value, user: Operation) -> Operation:
    """Where operand `v` of `user` is staged: before the outermost loop around `user` (with only
    loops in between) that `v` is defined outside of; `user` itself when there is none."""
    at = user
    while True:
        p = at.parent_op
        if p is None or not p.has_trait("loop") or _defined_inside(v, p):
            return at
        at = p


def _dominates(anchor: Operation, op: Operation) -> bool:
    """Whether `anchor` runs before `op` on every path to it (structured IR: `op` is in
    `anchor`'s block, or nested in an op of it, after `anchor`)."""
    blk = anchor.parent
    x: Optional[Operation] = op
    while x is not None and x.parent is not blk:
        x = x.parent_op
    return x is not None and anchor.is_before_in_block(x)


def _is_zero(v: Value) -> bool:
    d = v.defining_op
    return d is not None and d.name == "arith.constant" and d.attrs.get("value") in (0, 0.0) and not isinstance(d.attrs.get("value"), bool)


Staged = Dict[Tuple[int, bool], List[Value]]


def lower_one(op: Operation, in_place: List[Optional[Value]], staged: Optional[Staged] = None) -> None:
    """Rewrite one `tt.dot` into wgmma staging (see the module docstring), in place. `in_place`
    holds, for A and B, the buffer to read in place (`buffer_read_in_place`) or None; `staged`:
    (operand value id, K-major B) -> the tiles the dots rewritten so far staged it in, for reuse."""
    staged = {} if staged is None else staged
    a, b, acc = op.arg("a"), op.arg("b"), op.arg("acc")
    operands = []
    for idx, (x, buf) in enumerate(zip((a, b), in_place)):
        k_major_b = idx == 1 and x.type.element.bits != 16  # type: ignore[union-attr]
        if buf is not None and k_major_b and not getattr(buf.type.layout, "transposed", False):  # type: ignore[union-attr]
            buf = None  # an MN-major buffer: wgmma cannot read it for this type
        key = (id(x), k_major_b)
        if buf is None:
            for tile in staged.get(key, ()):
                if _dominates(tile.defining_op, op):  # type: ignore[arg-type]
                    buf = tile
                    break
        if buf is None:
            at = staging_point(x, op)
            alloc = Operation("tlx.local_alloc", [x], [staging_type(x.type, k_major_b)], loc=op.loc)  # type: ignore[arg-type]
            at.parent.insert_before(at, alloc)  # type: ignore[union-attr]
            buf = alloc.result
            staged.setdefault(key, []).append(buf)
        operands.append(buf)
    acc_in = None if _is_zero(acc) else acc
    dot = Operation("tlx.async_dot", [operands[0], operands[1], acc_in], [op.result.type], loc=op.loc)
    op.parent.insert_before(op, dot)  # type: ignore[union-attr]
    wait = Operation("tlx.async_dot_wait", [[dot.result]], [op.result.type], {"pendings": 0}, loc=op.loc)
    op.parent.insert_before(op, wait)  # type: ignore[union-attr]
    op.result.replace_all_uses_with(wait.results[0])
    op.erase()


def run(module, ctx: PassContext) -> None:
    """Give every `tt.dot` of the module its instruction; stage the wgmma ones (sm_90+)."""
    dots = [op for op in module.ops() if op.name == "tt.dot"]
    if ctx.capability < 90:
        return
    nw = int(module.attrs.get("num_warps", ctx.options.num_warps))
    wgmma = [op for op in dots if dot_instruction(op, partition_warps(op, nw), ctx.capability) == WGMMA]
    # decided on the input IR, before any dot is rewritten: what lowering inserts writes only new
    # staging buffers, never a buffer another dot reads in place
    in_place = [[buffer_read_in_place(op.arg(x), op) for x in ("a", "b")] for op in wgmma]
    staged: Staged = {}
    for op, bufs in zip(wgmma, in_place):
        lower_one(op, bufs, staged)
    ctx.stats["lower_dot.dots"] = len(wgmma)
    ctx.stats["lower_dot.mma_sync"] = len(dots) - len(wgmma)

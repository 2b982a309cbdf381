"""TMALowering: register-level TMA descriptor ops become explicit shared-memory TMA.

Rules (fence-passes.md §2.B):

* ``tt.descriptor_store %desc, %tile offsets(..)`` becomes ::

      %buf = tlx.local_alloc src(%tile)                   # generic write
      tlx.fence_async_shared {origin = "tma_lowering"}    # generic -> async proxy
      tlx.tma_store %desc, %buf offsets(..)               # async read
      tlx.tma_store_wait {pendings = 0}

  When the tile is a `tlx.local_load` of a buffer of the descriptor's block in the same block
  with nothing in between that may write shared memory, that buffer is stored in place (no
  copy); the fence is still emitted (whatever wrote that buffer may have been generic) and
  ProxyFenceInsertion removes it later if it separates nothing. No fence is emitted when an
  equal fence already precedes with only pure ops in between, when fence passes are off, or
  below sm_90.

* ``%t = tt.descriptor_load %desc offsets(..)`` becomes ::

      %buf  = tlx.local_alloc                       (mutable, the descriptor's block)
      %bars = tlx.alloc_barriers {num = 1, arrive_count = 1}
      %bar  = tlx.memdesc_index %bars, %c0
      tlx.barrier_expect_bytes %bar {bytes = <tile bytes>}
      tlx.tma_load %desc, %buf, %bar offsets(..)    # async write
      tlx.barrier_wait %bar, %c0                    # completion orders the data: no fence
      tlx.barrier_inval %bar
      %t = tlx.local_load %buf

  An async write followed by a generic read needs no proxy fence: the mbarrier's complete-tx
  and the wait order it. The barrier is invalidated after its one use (as Triton does), so a
  load inside a loop initializes it afresh each iteration; the CTA-barrier pass makes every
  thread pass its wait before the leader invalidates it (a thread still polling the old phase
  would otherwise see the next iteration's barrier and read the next tile).
"""

from __future__ import annotations

from typing import Optional

from ..fences import make_fence, op_text, preceding_fence
from ..ir import types as T
from ..ir.core import Operation, Value
from ..ir.layouts import default_shared_layout
from .lower_dot import buffer_read_in_place, staging_type
from .manager import PassContext


def _lower_store(op: Operation, buf: Optional[Value], ctx: PassContext) -> None:
    """Rewrite one `tt.descriptor_store`, storing `buf` in place when it is not None."""
    desc, tile, offs = op.arg("desc"), op.arg("value"), op.group("offsets")
    blk = op.parent
    writer = dead_load = None
    if buf is None:
        alloc = Operation("tlx.local_alloc", [tile], [staging_type(tile.type)], loc=op.loc)
        blk.insert_before(op, alloc)
        buf, writer = alloc.result, alloc
    elif tile.defining_op is not None and len(tile.uses) == 1:
        dead_load = tile.defining_op  # stored in place: the register copy is not needed
    store = Operation("tlx.tma_store", [desc, buf, offs], [], loc=op.loc)
    wait = Operation("tlx.tma_store_wait", [], [], {"pendings": 0}, loc=op.loc)
    op.drop_operands()
    if dead_load is not None and not dead_load.result.uses:
        dead_load.erase()
    fence = None
    if ctx.proxy_fences_enabled:
        prev = None if writer is not None else preceding_fence(op)
        if prev is not None:
            rec = ctx.fences.of(prev)
            rec.add_reader(store)
            rec.notes.append(f"also covers the TMA store lowered at {op_text(store).split(' at ')[1]} (TMALowering added no second fence)")
        else:
            fence, rec = make_fence("tma_lowering", ctx.fences, op.loc)
            rec.reason = "a TMA store reads its shared-memory source through the async proxy"
            rec.hazard = "RAW"
            if writer is not None:
                rec.add_writer(writer)
                rec.reason += "; the tile was just written there by generic stores"
            else:
                rec.reason += "; the buffer it stores in place may have been written by generic stores"
            rec.add_reader(store)
            rec.placement.append("right before the TMA store (TMALowering always fences the store it builds)")
    for o in ([fence] if fence is not None else []) + [store, wait]:
        blk.insert_before(op, o)
    op.erase()


def _lower_load(op: Operation) -> None:
    desc, offs = op.arg("desc"), op.group("offsets")
    dt = desc.type
    loc = op.loc
    shape = tuple(dt.block_shape)
    bt = T.MemDescType(shape, dt.element, default_shared_layout(shape, dt.element.bits), 0, True)
    new = []

    def add(name, operands, types, attrs=None):
        o = Operation(name, operands, types, attrs, loc=loc)
        op.parent.insert_before(op, o)
        new.append(o)
        return o

    buf = add("tlx.local_alloc", [None], [bt]).result
    bars = add("tlx.alloc_barriers", [], [T.BarrierType(1, True)], {"num": 1, "arrive_count": 1}).result
    c0 = add("arith.constant", [], [T.i32], {"value": 0}).result
    bar = add("tlx.memdesc_index", [bars, c0], [T.BarrierType(1, False)]).result
    nbytes = bt.nbytes
    add("tlx.barrier_expect_bytes", [bar, None], [], {"bytes": nbytes})
    add("tlx.tma_load", [desc, buf, bar, offs, None, None], [])
    add("tlx.barrier_wait", [bar, c0, None], [])
    add("tlx.barrier_inval", [bar], [])
    ld = add("tlx.local_load", [buf, None], [op.result.type])
    op.result.replace_all_uses_with(ld.result)
    op.erase()


def run(module, ctx: PassContext) -> None:
    """Lower every `tt.descriptor_store` / `tt.descriptor_load` of the module."""
    loads, stores = [], []
    for op in module.ops():
        if op.name == "tt.descriptor_load":
            loads.append(op)
        elif op.name == "tt.descriptor_store":
            stores.append(op)
    # loads first, so that a store of a loaded tile sees the lowered local_load (and reads in place)
    for op in loads:
        _lower_load(op)
    # which stores read in place is decided before any is rewritten: what lowering a store
    # inserts writes only its new staging buffer, never a buffer another store reads in place
    in_place = [buffer_read_in_place(op.arg("value"), op) for op in stores]
    for op, buf in zip(stores, in_place):
        _lower_store(op, buf, ctx)

"""The module skeleton (compiler/passes/skeleton.py): what it holds, that the passes' edits keep it
equal to a fresh read of the IR, that it is never used stale, and that allocating over it gives
exactly the offsets a walk over every op gives."""

from __future__ import annotations

import pytest

import catalog
from fence_ir import SM, T16, module
from tlx.compiler.errors import IRVerifyError
from tlx.compiler.ir import parse_module
from tlx.compiler.ir.core import Operation
from tlx.compiler.options import CompileOptions
from tlx.compiler.passes import smem_allocation as SA
from tlx.compiler.passes.edits import Edits
from tlx.compiler.passes.manager import Pass, PassContext, run_passes
from tlx.compiler.passes.memory import all_ops, shared_regions, take_census
from tlx.compiler.passes.skeleton import Skeleton, check_skeleton, edits_for, kept_skeleton, skeleton_of
from tlx.compiler.pipeline import PIPELINE

ARGS = f"%t: {T16}, %n: i32, %desc: !tensordesc<128x128xf16>"
BODY = f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %a = tlx.local_alloc : {SM}
    %x = arith.addf %t, %t : {T16}
    tlx.local_store %a, %x
    scf.for %c0, %n, %c1 {{
    ^body(%i: i32):
      %y = arith.mulf %x, %x : {T16}
      tlx.local_store %a, %y
      scf.yield
    }}
    %z = arith.subf %x, %x : {T16}
    tlx.tma_store %desc, %a offsets(%c0, %c0)
    tlx.tma_store_wait {{pendings = 0}}
"""


def _fresh_ctx(m):
    ctx = PassContext(CompileOptions())
    take_census(m, ctx)  # reads the skeleton, as compile_module does
    return ctx


def _names(sk: Skeleton, blk) -> list:
    return [o.name for o in sk.ops(blk)]


def test_the_skeleton_holds_the_shared_memory_and_control_ops_and_skips_arithmetic():
    m = parse_module(module(BODY, ARGS))
    sk = Skeleton(m)
    top = m.func.regions[0].block
    assert _names(sk, top) == ["tlx.local_alloc", "tlx.local_store", "scf.for", "tlx.tma_store",
                               "tlx.tma_store_wait"]
    loop = next(o for o in top.ops if o.name == "scf.for")
    assert _names(sk, loop.regions[0].block) == ["tlx.local_store", "scf.yield"]
    # program order: the loop's ops right after the loop op
    assert [o.name for o in sk.preorder()] == ["tlx.local_alloc", "tlx.local_store", "scf.for", "tlx.local_store",
                                               "scf.yield", "tlx.tma_store", "tlx.tma_store_wait"]


def _fence() -> Operation:
    return Operation("tlx.fence_async_shared", [], [], {"origin": "user"})


def test_edits_made_for_the_compilation_keep_its_skeleton_current():
    m = parse_module(module(BODY, ARGS))
    ctx = _fresh_ctx(m)
    sk = kept_skeleton(ctx)
    top = m.func.regions[0].block
    store = next(o for o in top.ops if o.name == "tlx.tma_store")
    first = next(o for o in top.ops if o.name == "tlx.local_store")
    ed = edits_for(ctx)
    ed.insert_before(store, _fence())
    ed.erase(first)
    ed.apply()
    assert kept_skeleton(ctx) is sk  # updated in place, still current
    assert _names(sk, top) == ["tlx.local_alloc", "scf.for", "tlx.fence_async_shared", "tlx.tma_store",
                               "tlx.tma_store_wait"]
    check_skeleton(m, ctx)  # equal to a fresh read


def test_a_fence_before_an_op_outside_the_skeleton_rereads_its_block():
    m = parse_module(module(BODY, ARGS))
    ctx = _fresh_ctx(m)
    top = m.func.regions[0].block
    sub = next(o for o in top.ops if o.name == "arith.subf")  # arithmetic: not in the skeleton
    ed = edits_for(ctx)
    ed.insert_before(sub, _fence())
    ed.apply()
    sk = kept_skeleton(ctx)
    assert sk is not None
    assert _names(sk, top) == ["tlx.local_alloc", "tlx.local_store", "scf.for", "tlx.fence_async_shared",
                               "tlx.tma_store", "tlx.tma_store_wait"]
    check_skeleton(m, ctx)


def test_an_edit_the_skeleton_does_not_see_makes_it_stale_and_it_is_read_again():
    m = parse_module(module(BODY, ARGS))
    ctx = _fresh_ctx(m)
    old = kept_skeleton(ctx)
    top = m.func.regions[0].block
    ed = Edits()  # not bound to the skeleton
    ed.insert_before(next(o for o in top.ops if o.name == "tlx.tma_store"), _fence())
    ed.apply()
    assert kept_skeleton(ctx) is None  # stale: never answered
    new = skeleton_of(m, ctx)
    assert new is not old and "tlx.fence_async_shared" in _names(new, top)


def _direct_insert(m, ctx) -> None:
    """A pass that edits a block without `Edits` (as the layout pass does)."""
    top = m.func.regions[0].block
    top.insert_before(next(o for o in top.ops if o.name == "tlx.tma_store"), _fence())


def test_the_manager_drops_the_skeleton_after_a_pass_that_does_not_keep_it():
    m = parse_module(module(BODY, ARGS))
    ctx = _fresh_ctx(m)
    run_passes(m, [Pass("direct", _direct_insert)], ctx, snapshots=False)
    assert kept_skeleton(ctx) is None
    assert "tlx.fence_async_shared" in _names(skeleton_of(m, ctx), m.func.regions[0].block)


def test_verification_catches_a_pass_that_claims_to_keep_the_skeleton_but_edits_behind_it():
    m = parse_module(module(BODY, ARGS))
    ctx = PassContext(CompileOptions(verify_each_pass=True))
    take_census(m, ctx)
    with pytest.raises(IRVerifyError, match="after pass 'liar'.*skeleton"):
        run_passes(m, [Pass("liar", _direct_insert, keeps_skeleton=True)], ctx, snapshots=False)


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_the_pipeline_keeps_the_skeleton_equal_to_the_ir_after_every_pass(case):
    # verify_each_pass runs check_skeleton after every pass (layouts drops it: it is read again
    # for allocation, then kept through ProxyFenceInsertion's and the barrier pass's edits)
    m = case.trace()
    ctx = PassContext(CompileOptions(verify_each_pass=True))
    take_census(m, ctx)
    run_passes(m, PIPELINE, ctx, snapshots=False)
    assert kept_skeleton(ctx) is not None  # kept to the end: the check above had something to check
    check_skeleton(m, ctx)


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_allocating_over_the_skeleton_gives_the_offsets_of_a_walk_over_every_op(case):
    m = case.trace()
    ctx = _fresh_ctx(m)
    names = [p.name for p in PIPELINE]
    run_passes(m, PIPELINE[:names.index("smem_allocation")], ctx, snapshots=False)
    ra = shared_regions(ctx)
    placed = []
    for live in (SA._Liveness(m), SA._Liveness(m, Skeleton(m))):
        bufs = SA.collect_buffers(m, ra, live)
        data = [b for b in bufs if b.scratch or b.op.name != "tlx.alloc_barriers"]
        SA._interference(data)
        total = SA._place(data)
        pos = {id(o): i for i, o in enumerate(all_ops(m))}
        placed.append((total, sorted((pos[id(b.op)], b.scratch, b.offset, len(b.conflicts)) for b in data)))
    assert placed[0] == placed[1]

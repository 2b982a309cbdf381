"""The access index after edits: updating it from the planned edits (`AccessIndex.apply`) gives
exactly the index a fresh walk of the edited IR builds."""

from __future__ import annotations

import pytest

import catalog
from tlx.compiler.ir.core import Operation
from tlx.compiler.options import CompileOptions
from tlx.compiler.passes.access_index import AccessIndex, access_index
from tlx.compiler.passes.edits import Edits
from tlx.compiler.passes.manager import PassContext, run_passes
from tlx.compiler.passes.memory import all_ops, shared_regions, take_census
from tlx.compiler.pipeline import PIPELINE


def _compiled_to(case, last: str):
    m = case.trace()
    ctx = PassContext(CompileOptions())
    take_census(m, ctx)
    names = [p.name for p in PIPELINE]
    run_passes(m, PIPELINE[:names.index(last) + 1], ctx, snapshots=False)
    return m, ctx


def _as_text(idx: AccessIndex, m) -> list:
    """Every block's entries as (op name, position in the module, accesses): comparable across
    two indexes of the same module."""
    pos = {id(op): i for i, op in enumerate(all_ops(m))}
    return sorted([(e[0].name, pos[id(e[0])], e[1]) for e in entries] for entries in idx.blocks.values())


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_the_index_kept_through_proxy_fence_insertion_equals_a_fresh_one(case):
    m, ctx = _compiled_to(case, "proxy_fence_insertion")  # fences inserted and pruned through apply
    kept = access_index(m, ctx)
    fresh = AccessIndex(m, shared_regions(ctx))
    assert _as_text(kept, m) == _as_text(fresh, m)


def _fence_before(ed: Edits, anchor: Operation) -> Operation:
    return ed.insert_before(anchor, Operation("tlx.fence_async_shared", [], [], loc=anchor.loc))


@pytest.mark.parametrize("outside", [False, True], ids=["anchors_in_the_index", "an_anchor_outside_it"])
def test_fences_inserted_and_ops_removed_update_the_index_like_a_fresh_walk(outside):
    m, ctx = _compiled_to(catalog.CASES_BY_NAME["tma_store_unfenced"], "smem_allocation")
    idx = access_index(m, ctx)
    top = m.func.regions[0].block
    indexed = [e[0] for e in idx.entries(top)]
    ed = Edits()
    fences = [_fence_before(ed, indexed[0]), _fence_before(ed, indexed[-1])]
    if outside:  # an anchor the index does not keep: the block is re-read
        plain = next(op for op in top.ops if op not in indexed and op.name != "tt.return")
        fences.append(_fence_before(ed, plain))
    gone = next(op for op in indexed if op.name == "tlx.fence_async_shared")  # placed before allocation
    ed.erase(gone)
    idx.apply(ed)
    got = [e[0] for e in idx.entries(top)]
    assert all(f in got for f in fences) and gone not in got
    assert _as_text(idx, m) == _as_text(AccessIndex(m, shared_regions(ctx)), m)


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_the_index_built_from_allocations_op_lists_equals_a_walk_of_every_op(case):
    m, ctx = _compiled_to(case, "smem_allocation")  # keeps its per-block op lists for the index
    assert "access_index.block_ops" in ctx.cache
    built = access_index(m, ctx)
    assert "access_index.block_ops" not in ctx.cache  # used once
    assert _as_text(built, m) == _as_text(AccessIndex(m, shared_regions(ctx)), m)


def test_allocations_op_lists_are_not_used_after_an_edit():
    # a fence inserted after allocation (by any Edits) is not in allocation's lists: the index
    # must read the block itself, or it would miss the fence
    m, ctx = _compiled_to(catalog.CASES_BY_NAME["tma_store_unfenced"], "smem_allocation")
    top = m.func.regions[0].block
    anchor = next(op for op in top.ops if op.name == "tlx.tma_store")
    ed = Edits()
    fence = _fence_before(ed, anchor)
    ed.apply()
    idx = access_index(m, ctx)
    assert fence in [e[0] for e in idx.entries(top)]
    assert _as_text(idx, m) == _as_text(AccessIndex(m, shared_regions(ctx)), m)

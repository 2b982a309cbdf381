"""The analysis manager (compiler/analysis/manager.py): an analysis is computed when first asked
for, kept while the passes preserve it, and dropped after a pass that does not; the pipeline's
declarations are true (a kept analysis answers what a fresh one computed on the final IR does)."""

from __future__ import annotations

import pytest

import catalog
from fence_ir import SM, T16, module
from tlx.compiler.analysis.access_index import AccessIndex
from tlx.compiler.analysis.manager import AnalysisManager
from tlx.compiler.analysis.memory import RegionAnalysis
from tlx.compiler.ir import parse_module
from tlx.compiler.ir import types as T
from tlx.compiler.options import CompileOptions
from tlx.compiler.passes.manager import Pass, PassContext, run_passes
from tlx.compiler.pipeline import PIPELINE

IR = module(f"""
    %a = tlx.local_alloc : {SM}
    tlx.local_store %a, %t""", f"%t: {T16}")


class Counted:
    """An analysis that counts how often it is computed."""

    built = 0

    def __init__(self, module, analyses):
        type(self).built += 1
        self.module = module


class Dependent:
    """An analysis built on another one."""

    def __init__(self, module, analyses):
        self.base = analyses.get(Counted, module)


@pytest.fixture(autouse=True)
def reset_count():
    Counted.built = 0


def test_an_analysis_is_computed_on_first_request_and_then_kept():
    m = parse_module(IR)
    am = AnalysisManager()
    assert not am.is_kept(Counted) and Counted.built == 0
    a = am.get(Counted, m)
    assert a.module is m and Counted.built == 1 and am.is_kept(Counted)
    assert am.get(Counted, m) is a and Counted.built == 1
    assert am.get(Dependent, m).base is a and Counted.built == 1


def test_invalidate_drops_what_is_not_preserved():
    m = parse_module(IR)
    am = AnalysisManager()
    a, d = am.get(Counted, m), am.get(Dependent, m)
    am.invalidate(preserved=(Counted,))
    assert am.is_kept(Counted) and not am.is_kept(Dependent)
    assert am.get(Counted, m) is a and am.get(Dependent, m) is not d
    am.invalidate()
    assert am.get(Counted, m) is not a and Counted.built == 2


def test_another_module_gets_its_own_analyses():
    m1, m2 = parse_module(IR), parse_module(IR)
    am = AnalysisManager()
    a1 = am.get(Counted, m1)
    a2 = am.get(Counted, m2)
    assert a2 is not a1 and a2.module is m2


def test_the_pass_manager_drops_analyses_a_pass_does_not_preserve():
    m = parse_module(IR)
    ctx = PassContext(CompileOptions())
    seen = []

    def ask(module, c):
        seen.append(c.analyses.get(Counted, module))

    passes = [Pass("first", ask), Pass("keeps", ask, preserves=(Counted,)), Pass("drops", ask), Pass("last", ask)]
    run_passes(m, passes, ctx, snapshots=False)
    # "first" computes it and does not preserve it; "keeps" computes it anew and keeps it for
    # "drops", after which it is dropped again
    assert seen[0] is not seen[1] and seen[1] is seen[2] and seen[3] is not seen[2]
    assert Counted.built == 3 and not ctx.analyses.is_kept(Counted)


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_the_analyses_the_pipeline_keeps_answer_like_fresh_ones(case):
    # RegionAnalysis is asked by fence_insertion and kept to the end; the access index is built by
    # proxy_fence_insertion and kept through its fence edits and the CTA barriers: both must still
    # describe the final IR exactly
    m = case.trace()
    ctx = PassContext(CompileOptions())
    run_passes(m, PIPELINE, ctx, snapshots=False)
    assert ctx.analyses.is_kept(RegionAnalysis) and ctx.analyses.is_kept(AccessIndex)
    kept_ra, kept_idx = ctx.analyses.get(RegionAnalysis, m), ctx.analyses.get(AccessIndex, m)
    fresh_ra, fresh_idx = RegionAnalysis(), AccessIndex()
    smem = (T.MemDescType, T.BarrierType)
    for op in m.ops():
        for v in list(op.results) + [a for r in op.regions for a in r.block.args]:
            if isinstance(v.type, smem):
                assert set(kept_ra.regions_of(v)) == set(fresh_ra.regions_of(v)), op.name
        assert kept_idx.of(op) == fresh_idx.of(op), op.name

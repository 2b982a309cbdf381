"""The canonical fence patterns end to end, from @tlx.jit source through `tlx.compile`:
local_store -> fence -> TMA store keeps exactly one fence; without the fence it gets exactly one;
register -> SMEM -> wgmma gets one, hoisted out of the K loop when the store is outside it and
kept inside when it is inside; TMA load + mbarrier wait -> wgmma gets none; a pre-sm90 target
gets none. Every kernel is compiled with the verifier after each pass."""

import pytest

import tlx
import tlx.language as tl
import catalog
from filecheck import filecheck
from tlx.compiler.ir import print_module

DESC64 = "tensordesc<fp16[64, 64]>"


# the patterns, written for the real TLX (scripts/fence_oracle.py compiles the same file with it)
PATTERNS = catalog.load_tlx_source("fence_patterns_tlx.py")
store_fence_tma = PATTERNS.store_fence_tma
reg_smem_wgmma = PATTERNS.reg_smem_wgmma
tma_wgmma = PATTERNS.tma_wgmma


def compile_(fn, sig, const, **kw):
    k = tlx.compile(fn, sig, const, verify_each_pass=True, **kw)
    return k, print_module(k.module, locs=False)


def fence_lines(text):
    return [l.strip() for l in text.splitlines() if "tlx.fence_async_shared" in l]


@pytest.mark.parametrize("with_fence", [True, False])
def test_local_store_fence_tma_store_exactly_one_fence(with_fence):
    k, text = compile_(store_fence_tma, {"x_desc": DESC64, "y_desc": DESC64}, {"BLOCK": 64, "FENCE": with_fence})
    assert len(fence_lines(text)) == 1
    (rec,) = k.fences
    assert rec.origin == ("user" if with_fence else "fence_insertion")
    assert not rec.redundant and [g.kind for g in rec.guards] == ["RAW"]
    assert rec.writers[0].startswith("tlx.local_store at fence_patterns_tlx.py:")
    filecheck(text, """
    CHECK: tlx.local_store
    CHECK-NOT: tlx.tma_store
    CHECK: tlx.fence_async_shared
    CHECK-NOT: tlx.local_store
    CHECK: tlx.cta_barrier
    CHECK-NEXT: tlx.tma_store
    CHECK-NOT: tlx.fence_async_shared
    """)


def test_register_smem_wgmma_store_outside_the_k_loop_fence_is_hoisted():
    k, text = compile_(reg_smem_wgmma, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"},
                       {"BM": 64, "BN": 64, "BK": 64, "STORE_IN_LOOP": False})
    filecheck(text, """
    CHECK: tlx.local_store
    CHECK: tlx.local_store
    CHECK-NOT: scf.for
    CHECK: tlx.fence_async_shared {cluster = false, origin = "fence_insertion"
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: scf.for
    CHECK-NOT: tlx.fence_async_shared
    CHECK-NOT: tlx.cta_barrier
    CHECK: tlx.async_dot
    CHECK-NOT: tlx.fence_async_shared
    """)
    (rec,) = k.fences
    assert "hoisted out of the loop at fence_patterns_tlx.py:" in rec.placement_text


def test_register_smem_wgmma_store_inside_the_k_loop_fence_stays_inside():
    k, text = compile_(reg_smem_wgmma, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"},
                       {"BM": 64, "BN": 64, "BK": 64, "STORE_IN_LOOP": True})
    filecheck(text, """
    CHECK-NOT: tlx.fence_async_shared
    CHECK: scf.for
    CHECK: tlx.local_store
    CHECK: tlx.local_store
    CHECK-NOT: tlx.async_dot
    CHECK: tlx.fence_async_shared {cluster = false, origin = "fence_insertion"
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.async_dot
    CHECK-NOT: tlx.fence_async_shared
    """)
    (rec,) = k.fences
    assert "kept in the loop at fence_patterns_tlx.py:" in rec.placement_text
    assert "writes the buffer every iteration" in rec.placement_text


def test_tma_load_and_mbarrier_wait_then_wgmma_needs_no_fence():
    k, text = compile_(tma_wgmma, {"a_desc": DESC64, "b_desc": DESC64, "c_ptr": "*fp32", "K": "i32"},
                       {"BM": 64, "BN": 64, "BK": 64})
    assert fence_lines(text) == [] and k.fences == []
    assert "removed" not in k.result.explain_fences()


def test_tl_dot_through_lower_dot_gets_one_fence():
    k, text = compile_(reg_smem_wgmma, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"},
                       {"BM": 64, "BN": 64, "BK": 64, "STORE_IN_LOOP": True})
    assert len(k.fences) == 1


@pytest.mark.parametrize("fn,sig,const", [
    (store_fence_tma, {"x_desc": DESC64, "y_desc": DESC64}, {"BLOCK": 64, "FENCE": True}),
    (reg_smem_wgmma, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"},
     {"BM": 64, "BN": 64, "BK": 64, "STORE_IN_LOOP": True}),
])
def test_pre_sm90_target_gets_no_proxy_fence(fn, sig, const):
    k = tlx.compile(fn, sig, const, target="sm_80", verify_each_pass=True, assemble=False)
    assert fence_lines(print_module(k.module)) == [] and k.fences == []


def test_fence_passes_false_keeps_only_the_users_fence():
    k, text = compile_(store_fence_tma, {"x_desc": DESC64, "y_desc": DESC64}, {"BLOCK": 64, "FENCE": True},
                       fence_passes=False)
    assert [r.origin for r in k.fences] == ["user"]
    k, text = compile_(store_fence_tma, {"x_desc": DESC64, "y_desc": DESC64}, {"BLOCK": 64, "FENCE": False},
                       fence_passes=False)
    assert k.fences == [] and fence_lines(text) == []
    # what the user gave up: the one hazard, on the kernel's own lines
    (hazard,) = k.unfenced_hazards
    assert hazard.startswith("RAW: tlx.local_store at fence_patterns_tlx.py:") and "-> tlx.tma_store at" in hazard
    k, _ = compile_(store_fence_tma, {"x_desc": DESC64, "y_desc": DESC64}, {"BLOCK": 64, "FENCE": False})
    assert k.unfenced_hazards == [] and len(k.fences) == 1


def test_explain_fences_names_both_lines():
    k, _ = compile_(reg_smem_wgmma, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"},
                    {"BM": 64, "BN": 64, "BK": 64, "STORE_IN_LOOP": False})
    report = k.explain_fences()
    assert "[fence_insertion, cta]" in report
    assert "RAW: tlx.local_store at fence_patterns_tlx.py:" in report and "-> tlx.async_dot at fence_patterns_tlx.py:" in report

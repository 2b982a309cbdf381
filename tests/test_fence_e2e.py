"""The canonical fence patterns end to end, from @tlx.jit source through `tlx.compile`:
local_store -> fence -> TMA store keeps exactly one fence; without the fence it gets exactly one;
register -> SMEM -> wgmma gets one, hoisted out of the K loop when the store is outside it and
kept inside when it is inside; TMA load + mbarrier wait -> wgmma gets none; a pre-sm90 target
gets none. Every kernel is compiled with the verifier after each pass."""

import pytest

import tlx
import tlx.language as tl
from filecheck import filecheck
from tlx.compiler.ir import print_module

DESC64 = "tensordesc<fp16[64, 64]>"


@tlx.jit
def store_fence_tma(x_desc, y_desc, BLOCK: tl.constexpr, FENCE: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 2)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], BLOCK * BLOCK * 2)
    tlx.async_descriptor_load(x_desc, bufs[0], [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    x = tlx.local_load(bufs[0])
    tlx.local_store(bufs[1], x * 2.0)
    if FENCE:
        tlx.fence("async_shared")
    tlx.async_descriptor_store(y_desc, bufs[1], [0, 0])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def reg_smem_wgmma(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   STORE_IN_LOOP: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_s = tlx.local_alloc((BM, BK), tl.float16, 1)
    b_s = tlx.local_alloc((BK, BN), tl.float16, 1)
    if not STORE_IN_LOOP:
        tlx.local_store(a_s[0], tl.load(a_ptr + rm[:, None] * BK + rk[None, :]))
        tlx.local_store(b_s[0], tl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        if STORE_IN_LOOP:
            tlx.local_store(a_s[0], tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :]))
            tlx.local_store(b_s[0], tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :]))
        acc = tlx.async_dot(a_s[0], b_s[0], acc)
        acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@tlx.jit
def tma_wgmma(a_desc, b_desc, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    a_s = tlx.local_alloc((BM, BK), tl.float16, 2)
    b_s = tlx.local_alloc((BK, BN), tl.float16, 2)
    full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BK)):
        s = kt % 2
        tlx.barrier_expect_bytes(full[s], (BM * BK + BK * BN) * 2)
        tlx.async_descriptor_load(a_desc, a_s[s], [0, kt * BK], full[s])
        tlx.async_descriptor_load(b_desc, b_s[s], [kt * BK, 0], full[s])
        tlx.barrier_wait(full[s], (kt // 2) & 1)
        acc = tlx.async_dot(a_s[s], b_s[s], acc)
        acc = tlx.async_dot_wait(0, acc)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


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
    assert rec.writers[0].startswith("tlx.local_store at test_fence_e2e.py:")
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
    assert "hoisted out of the loop at test_fence_e2e.py:" in rec.placement_text


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
    assert "kept in the loop at test_fence_e2e.py:" in rec.placement_text
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


def test_explain_fences_names_both_lines():
    k, _ = compile_(reg_smem_wgmma, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"},
                    {"BM": 64, "BN": 64, "BK": 64, "STORE_IN_LOOP": False})
    report = k.explain_fences()
    assert "[fence_insertion, cta]" in report
    assert "RAW: tlx.local_store at test_fence_e2e.py:" in report and "-> tlx.async_dot at test_fence_e2e.py:" in report

"""The fence passes checked by execution: every conformance kernel with the user's fence removed
is compiled through the pre-layout passes (lower_dot, TMA lowering, FenceInsertion, allocation,
ProxyFenceInsertion, CTA barriers) and interpreted. With the passes the interpreter finds no
hazard; with `fence_passes=False` it reports the hazard on the right two lines."""

import numpy as np
import pytest

import test_interp_hazards as H
from interp_kernels import HostDesc, gemm_cp_async, gemm_tma, gemm_ws
from tlx.compiler import pipeline
from tlx.compiler.ir import parse_module, print_module
from tlx.compiler.options import CompileOptions
from tlx.interpreter import run

PRE_LAYOUT = ("lower_dot", "tma_lowering", "fence_insertion", "smem_allocation", "proxy_fence_insertion", "cta_barriers")


def compiled(text: str, fence_passes: bool):
    m = parse_module(text)
    passes = [p for p in pipeline.PIPELINE if p.name in PRE_LAYOUT]
    res = pipeline.compile_module(m, CompileOptions(fence_passes=fence_passes, verify_each_pass=True),
                                  passes=passes, snapshots=False)
    return res.module


def check(text: str, args, grid, bad_lines):
    """After the passes: no hazard. Without them: the hazards are exactly `bad_lines`."""
    fixed = compiled(text, True)
    hs = run(fixed, grid, args, raise_on_hazard=False)
    assert hs == [], "\n".join(str(h) for h in hs) + "\n" + print_module(fixed)
    hs = run(compiled(text, False), grid, args, raise_on_hazard=False)
    assert sorted(h.lines for h in hs) == sorted(bad_lines), [str(h) for h in hs]


def _desc():
    return HostDesc.of(np.zeros((64, 64), np.float16), (64, 64))


D = f"%desc: {H.DESC}"


def test_wgmma_on_allocs_with_source():
    text = H.module_text(H.CONSTS + f"""
    %a = tlx.local_alloc src(%t0) : {H.S64} loc(#f:3:0)
    %b = tlx.local_alloc src(%t1) : {H.S64} loc(#f:4:0)
    %d = tlx.async_dot %a, %b : {H.ACC} loc(#f:6:0)
    %w = tlx.async_dot_wait %d {{pendings = 0}} : {H.ACC}""", "")
    check(text, [], (1,), [(3, 6), (4, 6)])


@pytest.mark.parametrize("store_inside", [False, True])
def test_loop_nest_storing_inside_or_outside_the_loops(store_inside):
    text = H.module_text(H._nested(store_inside, "none"), "")
    check(text, [], (1,), [(4, 10), (8, 10)] if store_inside else [(3, 10), (4, 10)])


def test_wgmma_in_a_warp_specialize_partition():
    check(H.module_text(H._ws_mma("none"), ""), [], (1,), [(3, 12), (3, 13)])


def test_fence_in_a_loop_that_may_run_zero_times():
    check(H.module_text(H._zero_trip(0, False), D), [_desc()], (1,), [(4, 9)])


def test_fence_on_one_path_only():
    check(H.module_text(H._if_fence(0), D), [_desc()], (1,), [(4, 11)])


def test_ws_handoff():
    out = np.zeros((64, 64), np.float16)
    check(H.module_text(H._ws_handoff("none"), D), [HostDesc.of(out, (64, 64))], (1,), [(9, 19)])


def test_gemm_epilogues():
    a = np.ones((128, 128), np.float16)
    args = [HostDesc.of(a, (64, 64)), HostDesc.of(a, (64, 64)), HostDesc.of(np.zeros((128, 128), np.float16), (64, 64)), 128]
    check(gemm_tma(64, 64, 64, fence=False), args, (2, 2), [(30, 32)])
    check(gemm_ws(64, 64, 64, fence="none"), args, (2, 2), [(70, 72)])


@pytest.mark.parametrize("index_view", [False, True])
def test_generic_read_then_tma_load_into_the_same_bytes(index_view):
    check(H.module_text(H._war("none", index_view), D), [_desc()], (1,), [(8, 11)])


def test_cp_async_gemm():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 128)).astype(np.float16)
    c = np.full((128, 128), np.nan, np.float32)
    check(gemm_cp_async(64, 64, 32, fence=False), [a, b, c, 128, 128, 64], (2, 2), [(20, 25), (21, 25)])


def test_tma_lowering_output_interprets_without_hazard():
    """TMALowering's `local_alloc(src); fence; tma_store; store_wait` for a register-level
    descriptor store, executed: correct data, no hazard."""
    text = H.module_text(H.CONSTS + """
    %v = tt.descriptor_load %desc offsets(%c0, %c0) : tensor<64x64xf16> loc(#f:3:0)
    %w = arith.addf %v, %t1 : tensor<64x64xf16>
    tt.descriptor_store %out, %w offsets(%c0, %c0) loc(#f:5:0)""", f"{D}, %out: {H.DESC}")
    src = np.arange(64 * 64, dtype=np.float16).reshape(64, 64) / 64
    out = np.full((64, 64), np.nan, np.float16)
    m = compiled(text, True)
    assert any(op.name == "tlx.tma_store" for op in m.ops())
    assert run(m, (1,), [HostDesc.of(src, (64, 64)), HostDesc.of(out, (64, 64))]) == []
    assert np.array_equal(out, src + np.float16(2.0))

"""The interpreter's proxy-hazard checker on the fence passes' cases (each with the fence the pass
would insert written by hand) and on the proxy bugs found in real kernels (a TMA-store epilogue
without a fence, a fence on one path only, aliasing views, a hand-off across partitions, a fence
in a loop that may run zero times): with the fence in place no hazard; without it the hazard
names the buffer and the right two lines. Also the synchronization bugs (missing waits, early
releases, expect_bytes) and the deadlock report."""

import time

import numpy as np
import pytest

from interp_kernels import HostDesc, gemm_cp_async, gemm_tma, gemm_ws, module_text
import tlx
from tlx.compiler.ir import parse_module
from tlx.interpreter import DeadlockError, ProxyHazard, SyncHazard, run

FENCE = 'tlx.fence_async_shared {cluster = false, origin = "user"}'
T64 = "tensor<64x64xf16>"
S64 = "!smem<64x64xf16, mutable>"
ACC = "tensor<64x64xf32>"
DESC = "!tensordesc<64x64xf16>"


def kernel(body: str, args: str = "", num_warps: int = 4):
    return parse_module(module_text(body, args, num_warps))


def hazards(m, args=(), grid=(1,)):
    return run(m, grid, list(args), raise_on_hazard=False)


def only(hs, cls=ProxyHazard):
    assert len(hs) == 1, [str(h) for h in hs]
    assert type(hs[0]) is cls, str(hs[0])
    return hs[0]


CONSTS = f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %c2 = arith.constant {{value = 2}} : i32
    %t0 = arith.constant {{value = 1.0}} : {T64}
    %t1 = arith.constant {{value = 2.0}} : {T64}"""


def _desc():
    return HostDesc.of(np.zeros((64, 64), np.float16), (64, 64))


# ---- FenceInsertion's cases ----------------------------------------------------------------------

def test_wgmma_on_allocs_with_source_needs_a_fence():
    def body(fence):
        return CONSTS + f"""
    %a = tlx.local_alloc src(%t0) : {S64} loc(#f:3:0)
    %b = tlx.local_alloc src(%t1) : {S64} loc(#f:4:0)
    {FENCE if fence else ""}
    %d = tlx.async_dot %a, %b : {ACC} loc(#f:6:0)
    %w = tlx.async_dot_wait %d {{pendings = 0}} : {ACC}"""
    assert hazards(kernel(body(True))) == []
    hs = hazards(kernel(body(False)))
    assert sorted(h.lines for h in hs) == [(3, 6), (4, 6)]
    assert all(type(h) is ProxyHazard and h.kind == "raw" for h in hs)
    assert "%a" in hs[0].buffer and "fence" in str(hs[0])


def test_local_store_of_one_wgmma_operand_needs_a_fence():
    def body(fence):
        return CONSTS + f"""
    %a = tlx.local_alloc : {S64} loc(#f:3:0)
    %b = tlx.local_alloc : {S64} loc(#f:4:0)
    tlx.local_store %a, %t0 loc(#f:5:0)
    {FENCE if fence else ""}
    %d = tlx.async_dot %a, %b : {ACC} loc(#f:7:0)"""
    assert hazards(kernel(body(True))) == []
    assert only(hazards(kernel(body(False)))).lines == (5, 7)


def _nested(store_inside: bool, fence_at: str):
    st = f"tlx.local_store %a, %t0 loc(#f:8:0)" if store_inside else ""
    return CONSTS + f"""
    %a = tlx.local_alloc src(%t0) : {S64} loc(#f:3:0)
    %b = tlx.local_alloc src(%t1) : {S64} loc(#f:4:0)
    {FENCE if fence_at == "outside" else ""}
    scf.for %c0, %c2, %c1 {{
    ^body(%i: i32):
      scf.for %c0, %c2, %c1 {{
      ^body(%j: i32):
        {st}
        {FENCE if fence_at == "inside" else ""}
        %d = tlx.async_dot %a, %b : {ACC} loc(#f:10:0)
        %w = tlx.async_dot_wait %d {{pendings = 0}} : {ACC}
        scf.yield
      }} loc(#f:7:0)
      scf.yield
    }} loc(#f:6:0)"""


def test_fence_hoisted_out_of_both_loops_covers_writers_outside():
    assert hazards(kernel(_nested(False, "outside"))) == []
    hs = hazards(kernel(_nested(False, "none")))
    assert sorted(h.lines for h in hs) == [(3, 10), (4, 10)]


def test_store_in_the_loop_needs_the_fence_in_the_loop():
    assert hazards(kernel(_nested(True, "inside"))) == []
    h = only(hazards(kernel(_nested(True, "outside"))))
    assert h.lines == (8, 10)
    # the write and the read of the first failing trip, each with its loop iterations
    assert [i for _, i in h.second.iteration] == [0, 0]
    assert "iteration 0 of the loop at k.py:7" in str(h)


def test_register_operand_and_unwritten_buffer_need_no_fence():
    m = kernel(CONSTS + f"""
    %b = tlx.local_alloc : {S64} loc(#f:4:0)
    %d = tlx.async_dot %t0, %b : {ACC} loc(#f:6:0)
    %w = tlx.async_dot_wait %d {{pendings = 0}} : {ACC}""")
    assert hazards(m) == []


def _ws_mma(fence_at: str) -> str:
    """The operand is written before the warp_specialize, read by wgmma in a loop in a
    worker partition; partition 2 reads an operand nobody wrote."""
    return CONSTS + f"""
    %A = tlx.local_alloc src(%t0) : {S64} loc(#f:3:0)
    %B = tlx.local_alloc : {S64} loc(#f:4:0)
    {FENCE if fence_at == "before_ws" else ""}
    tlx.warp_specialize %A, %B {{partition_num_warps = [4, 4]}} {{
    ^default:
      tlx.ws_yield
    }} {{
    ^partition0(%lhs: {S64}, %rhs: {S64}):
      %k0 = arith.constant {{value = 0}} : i32
      %k1 = arith.constant {{value = 1}} : i32
      %k3 = arith.constant {{value = 3}} : i32
      {FENCE if fence_at == "partition" else ""}
      scf.for %k0, %k3, %k1 {{
      ^body(%i: i32):
        %d = tlx.async_dot %lhs, %rhs : {ACC} loc(#f:12:0)
        %d2 = tlx.async_dot %lhs, %rhs : {ACC} loc(#f:13:0)
        %w, %w2 = tlx.async_dot_wait %d, %d2 {{pendings = 0}} : {ACC}, {ACC}
        scf.yield
      }} loc(#f:11:0)
      tlx.ws_return
    }} {{
    ^partition1(%lhs: {S64}, %rhs: {S64}):
      %d = tlx.async_dot %rhs, %rhs : {ACC} loc(#f:20:0)
      %w = tlx.async_dot_wait %d {{pendings = 0}} : {ACC}
      tlx.ws_return
    }} loc(#f:6:0)"""


def test_wgmma_in_a_warp_specialize_partition_needs_a_fence():
    assert hazards(kernel(_ws_mma("partition"))) == []
    assert hazards(kernel(_ws_mma("before_ws"))) == []  # the fence runs before the workers fork
    hs = hazards(kernel(_ws_mma("none")))
    assert sorted(h.lines for h in hs) == [(3, 12), (3, 13)]
    assert all(h.second.partition.startswith("1 ") for h in hs)


def test_user_fence_before_pure_ops_then_tma_store():
    def body(fence):
        return CONSTS + f"""
    %s = tlx.local_alloc : {S64} loc(#f:3:0)
    tlx.local_store %s, %t0 loc(#f:4:0)
    {FENCE if fence else ""}
    %x = arith.addi %c1, %c2 : i32
    tlx.tma_store %desc, %s offsets(%c0, %c0) loc(#f:7:0)
    tlx.tma_store_wait {{pendings = 0}}"""
    assert hazards(kernel(body(True), f"%desc: {DESC}"), [_desc()]) == []
    assert only(hazards(kernel(body(False), f"%desc: {DESC}"), [_desc()])).lines == (4, 7)


# ---- ProxyFenceInsertion's cases -----------------------------------------------------------------

def _war(fence_at: str, index_view: bool) -> str:
    buf = "!smem<1x64x64xf16, buffers=1, mutable>" if index_view else S64
    view = (f"%v = tlx.memdesc_index %B, %c0 : !smem<64x64xf16, alloc=1x64x64, mutable>" if index_view
            else "%v = tlx.memdesc_trans %B {order = [0, 1]} : " + S64)
    return CONSTS + f"""
    %B = tlx.local_alloc : {buf} loc(#f:3:0)
    %bars = tlx.alloc_barriers {{num = 1, arrive_count = 1}} : !mbarriers<1>
    %bar = tlx.memdesc_index %bars, %c0 : !mbarrier
    {view}
    {FENCE if fence_at == "before_read" else ""}
    %x = tlx.local_load %v : {T64} loc(#f:8:0)
    {FENCE if fence_at == "after_read" else ""}
    tlx.barrier_expect_bytes %bar {{bytes = 8192}}
    tlx.tma_load %desc, %v, %bar offsets(%c0, %c0) loc(#f:11:0)
    tlx.barrier_wait %bar, %c0"""


@pytest.mark.parametrize("index_view", [False, True])
def test_generic_read_then_tma_load_needs_a_fence_after_the_read(index_view):
    m = lambda f: kernel(_war(f, index_view), f"%desc: {DESC}")  # noqa: E731
    assert hazards(m("after_read"), [_desc()]) == []
    for bad in ("none", "before_read"):  # C2: a fence before the read does not order it
        h = only(hazards(m(bad), [_desc()]))
        assert (h.kind, h.lines) == ("war", (8, 11))


def test_async_write_after_async_write_needs_no_fence():
    m = kernel(CONSTS + f"""
    %X = tlx.local_alloc : {S64} loc(#f:3:0)
    %bars = tlx.alloc_barriers {{num = 1, arrive_count = 1}} : !mbarriers<1>
    %bar = tlx.memdesc_index %bars, %c0 : !mbarrier
    tlx.barrier_expect_bytes %bar {{bytes = 8192}}
    tlx.tma_load %desc, %X, %bar offsets(%c0, %c0) loc(#f:7:0)
    tlx.barrier_wait %bar, %c0
    tlx.tma_store_wait {{pendings = 0}}
    tlx.barrier_expect_bytes %bar {{bytes = 8192}}
    tlx.tma_load %desc, %X, %bar offsets(%c0, %c0) loc(#f:11:0)
    tlx.barrier_wait %bar, %c1""", f"%desc: {DESC}")
    assert hazards(m, [_desc()]) == []


def test_local_store_then_tma_store_needs_a_fence_regardless_of_store_wait():
    def body(fence):
        return CONSTS + f"""
    %X = tlx.local_alloc : {S64} loc(#f:3:0)
    tlx.tma_store_wait {{pendings = 1}}
    tlx.local_store %X, %t0 loc(#f:5:0)
    {FENCE if fence else ""}
    tlx.tma_store %desc, %X offsets(%c0, %c0) loc(#f:7:0)"""
    assert hazards(kernel(body(True), f"%desc: {DESC}"), [_desc()]) == []
    assert only(hazards(kernel(body(False), f"%desc: {DESC}"), [_desc()])).lines == (5, 7)


def test_cp_async_is_generic_and_its_wait_is_no_fence():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 128)).astype(np.float16)
    c = np.full((128, 128), np.nan, np.float32)
    args = [a, b, c, 128, 128, 64]
    assert hazards(parse_module(gemm_cp_async(64, 64, 32, fence=True)), args, (2, 2)) == []
    hs = hazards(parse_module(gemm_cp_async(64, 64, 32, fence=False)), args, (2, 2))
    assert sorted(h.lines for h in hs) == [(20, 25), (21, 25)]
    assert hs[0].count == 8  # every program, both k steps


# ---- proxy bugs found in real kernels ------------------------------------------------------------

def _zero_trip(trips: int, fence_after_loop: bool) -> str:
    return CONSTS + f"""
    %n = arith.constant {{value = {trips}}} : i32
    %s = tlx.local_alloc : {S64} loc(#f:3:0)
    tlx.local_store %s, %t0 loc(#f:4:0)
    scf.for %c0, %n, %c1 {{
    ^body(%i: i32):
      {FENCE} loc(#f:6:0)
      scf.yield
    }} loc(#f:5:0)
    {FENCE if fence_after_loop else ""}
    tlx.tma_store %desc, %s offsets(%c0, %c0) loc(#f:9:0)
    tlx.tma_store_wait {{pendings = 0}}"""


def test_fence_in_a_loop_that_runs_zero_times_fences_nothing():
    assert hazards(kernel(_zero_trip(2, False), f"%desc: {DESC}"), [_desc()]) == []
    h = only(hazards(kernel(_zero_trip(0, False), f"%desc: {DESC}"), [_desc()]))
    assert h.lines == (4, 9)
    assert hazards(kernel(_zero_trip(0, True), f"%desc: {DESC}"), [_desc()]) == []


def test_tma_store_epilogue_without_fence():
    a = np.ones((128, 128), np.float16)
    args = [HostDesc.of(a, (64, 64)), HostDesc.of(a, (64, 64)), HostDesc.of(np.zeros((128, 128), np.float16), (64, 64)), 128]
    h = only(hazards(parse_module(gemm_tma(64, 64, 64, fence=False)), args, (2, 2)))
    assert h.lines == (30, 32) and h.program_id == (0, 0, 0) and h.count == 4
    assert "%c_s" in h.buffer


def _if_fence(cond: int) -> str:
    return CONSTS + f"""
    %p = arith.constant {{value = {cond}}} : i1
    %s = tlx.local_alloc : {S64} loc(#f:3:0)
    tlx.local_store %s, %t0 loc(#f:4:0)
    scf.if %p {{
    ^then:
      {FENCE}
      scf.yield
    }} {{
    ^else:
      scf.yield
    }} loc(#f:5:0)
    tlx.tma_store %desc, %s offsets(%c0, %c0) loc(#f:11:0)
    tlx.tma_store_wait {{pendings = 0}}"""


def test_fence_on_one_path_only():
    assert hazards(kernel(_if_fence(1), f"%desc: {DESC}"), [_desc()]) == []
    assert only(hazards(kernel(_if_fence(0), f"%desc: {DESC}"), [_desc()])).lines == (4, 11)


def test_aliasing_views_share_bytes():
    """A write through a reinterpreted view of an allocation, a TMA store through the original."""
    def body(fence):
        return CONSTS + f"""
    %s = tlx.local_alloc : {S64} loc(#f:3:0)
    %flat = tlx.memdesc_reinterpret %s : !smem<4096xi16, mutable>
    %half = tlx.memdesc_subslice %flat {{static_offsets = [2048]}} : !smem<2048xi16, mutable>
    %v = arith.constant {{value = 7}} : tensor<2048xi16>
    tlx.local_store %half, %v loc(#f:7:0)
    {FENCE if fence else ""}
    tlx.tma_store %desc, %s offsets(%c0, %c0) loc(#f:9:0)
    tlx.tma_store_wait {{pendings = 0}}"""
    assert hazards(kernel(body(True), f"%desc: {DESC}"), [_desc()]) == []
    h = only(hazards(kernel(body(False), f"%desc: {DESC}"), [_desc()]))
    assert h.lines == (7, 9) and h.buffer.startswith("%s ")


def _ws_handoff(fence_at: str) -> str:
    """The default partition writes a tile and hands it to worker 1 through an mbarrier;
    the worker TMA-stores it. The fence must be in the writer before its arrive, or in the reader
    after its wait."""
    return CONSTS + f"""
    %s = tlx.local_alloc : {S64} loc(#f:3:0)
    %bars = tlx.alloc_barriers {{num = 1, arrive_count = 1}} : !mbarriers<1>
    tlx.warp_specialize %s, %bars, %desc {{partition_num_warps = [4]}} {{
    ^default:
      %z = arith.constant {{value = 0}} : i32
      %b0 = tlx.memdesc_index %bars, %z : !mbarrier
      %t = arith.constant {{value = 3.0}} : {T64}
      tlx.local_store %s, %t loc(#f:9:0)
      {FENCE if fence_at == "producer" else ""}
      tlx.barrier_arrive %b0 {{count = 1}} loc(#f:11:0)
      {FENCE if fence_at == "producer_late" else ""}
      tlx.ws_yield
    }} {{
    ^partition0(%s2: {S64}, %bars2: !mbarriers<1>, %d2: {DESC}):
      %z = arith.constant {{value = 0}} : i32
      %b = tlx.memdesc_index %bars2, %z : !mbarrier
      tlx.barrier_wait %b, %z loc(#f:17:0)
      {FENCE if fence_at == "consumer" else ""}
      tlx.tma_store %d2, %s2 offsets(%z, %z) loc(#f:19:0)
      tlx.tma_store_wait {{pendings = 0}}
      tlx.ws_return
    }} loc(#f:5:0)"""


def test_fence_across_partitions_in_the_writer_or_the_reader():
    out = np.zeros((64, 64), np.float16)
    run_ = lambda f: hazards(kernel(_ws_handoff(f), f"%desc: {DESC}"), [HostDesc.of(out, (64, 64))])  # noqa: E731
    assert run_("producer") == []
    assert run_("consumer") == []
    assert np.all(out == 3.0)
    for bad in ("none", "producer_late"):  # a fence after the hand-off orders nothing for the reader
        h = only(run_(bad))
        assert h.lines == (9, 19) and h.first.partition == "default" and h.second.partition.startswith("1 ")


def test_partitions_without_a_handoff_race():
    text = _ws_handoff("producer").replace("tlx.barrier_wait %b, %z loc(#f:17:0)", "")
    h = only(hazards(kernel(text, f"%desc: {DESC}"), [_desc()]), SyncHazard)
    assert h.kind == "race" and h.lines == (9, 19)


# ---- synchronization bugs ------------------------------------------------------------------------

def _gemm_args(M=128, N=128, K=128):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    return a, b, c, [HostDesc.of(a, (64, 64)), HostDesc.of(b, (64, 64)), HostDesc.of(c, (64, 64)), K]


def test_read_of_a_tma_load_without_its_mbarrier_wait():
    *_, args = _gemm_args()
    hs = hazards(parse_module(gemm_tma(64, 64, 64, wait_loads=False)), args, (2, 2))
    kinds = {(h.kind, h.lines) for h in hs}
    assert ("in-flight-write", (21, 24)) in kinds and ("in-flight-write", (22, 24)) in kinds
    assert all(type(h) is SyncHazard for h in hs)


def test_wgmma_operand_released_before_async_dot_wait():
    a, b, c, args = _gemm_args(K=256)
    hs = hazards(parse_module(gemm_ws(64, 64, 64, release_before_wait=True)), args, (2, 2))
    assert {(h.kind, h.lines) for h in hs} == {("in-flight-read", (61, 42)), ("in-flight-read", (61, 43))}
    assert "async_dot_wait" in hs[0].hint


def test_generic_write_over_wgmma_operand_before_wait():
    m = kernel(CONSTS + f"""
    %a = tlx.local_alloc src(%t0) : {S64} loc(#f:3:0)
    {FENCE}
    %d = tlx.async_dot %a, %a : {ACC} loc(#f:5:0)
    tlx.local_store %a, %t1 loc(#f:6:0)
    %w = tlx.async_dot_wait %d {{pendings = 0}} : {ACC} loc(#f:7:0)""")
    h = only(hazards(m), SyncHazard)
    assert (h.kind, h.lines) == ("in-flight-read", (5, 6))


def test_tma_store_source_overwritten_before_store_wait():
    def body(wait):
        return CONSTS + f"""
    %s = tlx.local_alloc src(%t0) : {S64} loc(#f:3:0)
    {FENCE}
    tlx.tma_store %desc, %s offsets(%c0, %c0) loc(#f:5:0)
    {"tlx.tma_store_wait {pendings = 0}" if wait else ""}
    tlx.local_store %s, %t1 loc(#f:7:0)"""
    out = np.zeros((64, 64), np.float16)
    assert hazards(kernel(body(True), f"%desc: {DESC}"), [HostDesc.of(out, (64, 64))]) == []
    assert np.all(out == 1.0)
    h = only(hazards(kernel(body(False), f"%desc: {DESC}"), [HostDesc.of(out, (64, 64))]), SyncHazard)
    assert (h.kind, h.lines) == ("in-flight-read", (5, 7))
    assert np.all(out == 2.0)  # the store read its source late, as the hardware may


def test_expect_bytes_larger_than_the_loads_deadlocks_with_the_reason():
    *_, args = _gemm_args()
    with pytest.raises(DeadlockError) as e:
        run(parse_module(gemm_tma(64, 64, 64, expect_bytes=3 * 8192)), (2, 2), args)
    msg = str(e.value)
    assert "24576 bytes" in msg and "16384 bytes" in msg and "k.py:23" in msg
    assert any(h.kind == "expect-bytes" for h in e.value.hazards)


def test_expect_bytes_smaller_than_the_loads():
    *_, args = _gemm_args()
    hs = hazards(parse_module(gemm_ws(64, 64, 64, expect_bytes=8192)), args, (2, 2))
    assert any(h.kind == "expect-bytes" and h.second.line == 43 for h in hs)


def test_async_dot_result_used_before_its_wait():
    m = kernel(CONSTS + f"""
    %a = tlx.local_alloc src(%t0) : {S64} loc(#f:3:0)
    {FENCE}
    %d = tlx.async_dot %a, %a : {ACC} loc(#f:5:0)
    %e = arith.addf %d, %d : {ACC} loc(#f:6:0)""")
    h = only(hazards(m), SyncHazard)
    assert (h.kind, h.lines) == ("use-before-wait", (5, 6))


def test_raise_mode_raises_the_first_hazard():
    with pytest.raises(ProxyHazard) as e:
        run(kernel(_zero_trip(0, False), f"%desc: {DESC}"), (1,), [_desc()])
    assert e.value.lines == (4, 9)
    assert "k.py:4" in str(e.value) and "k.py:9" in str(e.value) and "program: (0, 0, 0)" in str(e.value)


# ---- deadlocks -----------------------------------------------------------------------------------

def test_deadlock_wrong_phase_reports_within_a_second():
    *_, args = _gemm_args()
    t = time.perf_counter()
    with pytest.raises(DeadlockError) as e:
        run(parse_module(gemm_ws(64, 64, 64, producer_phase_flip=True)), (2, 2), args)
    assert time.perf_counter() - t < 1.0
    msg = str(e.value)
    assert "%empty[0]" in msg and "k.py:40" in msg and "partition default" in msg
    assert "%full[0]" in msg and "k.py:60" in msg and "partition 1" in msg
    assert "parity 0" in msg
    assert {w["loc"].line for w in e.value.waits} == {40, 60}


def test_deadlock_named_barrier_count_never_reached():
    m = kernel(CONSTS + """
    tlx.warp_specialize {partition_num_warps = [4]} {
    ^default:
      tlx.named_barrier_wait {id = 9, count = 384} loc(#f:4:0)
      tlx.ws_yield
    } {
    ^partition0:
      tlx.named_barrier_arrive {id = 9, count = 384} loc(#f:8:0)
      tlx.ws_return
    } loc(#f:2:0)""")
    with pytest.raises(DeadlockError) as e:
        run(m, (1,), [])
    assert "named barrier 9 (384 threads)" in str(e.value) and "256 threads have arrived" in str(e.value)
    assert "k.py:4" in str(e.value)


def test_generic_read_of_a_tma_load_still_in_flight():
    def body(wait):
        return CONSTS + f"""
    %X = tlx.local_alloc : {S64} loc(#f:3:0)
    %bars = tlx.alloc_barriers {{num = 1, arrive_count = 1}} : !mbarriers<1>
    %bar = tlx.memdesc_index %bars, %c0 : !mbarrier
    tlx.barrier_expect_bytes %bar {{bytes = 8192}}
    tlx.tma_load %desc, %X, %bar offsets(%c0, %c0) loc(#f:7:0)
    {"tlx.barrier_wait %bar, %c0" if wait else ""}
    %v = tlx.local_load %X : {T64} loc(#f:9:0)"""
    src = np.full((64, 64), 5.0, np.float16)
    assert hazards(kernel(body(True), f"%desc: {DESC}"), [HostDesc.of(src, (64, 64))]) == []
    h = only(hazards(kernel(body(False), f"%desc: {DESC}"), [HostDesc.of(src, (64, 64))]), SyncHazard)
    assert (h.kind, h.lines) == ("in-flight-write", (7, 9)) and "mbarrier" in h.hint


def test_generic_read_of_a_cp_async_before_its_wait_group():
    def body(wait):
        return CONSTS + f"""
    %X = tlx.local_alloc : !smem<64xf32, mutable> loc(#f:3:0)
    %i = tt.make_range {{start = 0, end = 64}} : tensor<64xi32>
    %p = tt.splat %src : tensor<64x!ptr<f32>>
    %a = tt.addptr %p, %i : tensor<64x!ptr<f32>>
    %t = tlx.async_load %a, %X : !token loc(#f:7:0)
    %g = tlx.async_commit_group %t : !token
    {"%w = tlx.async_wait_group %g {pendings = 0} : !token" if wait else ""}
    %v = tlx.local_load %X : tensor<64xf32> loc(#f:10:0)
    %op = tt.splat %out : tensor<64x!ptr<f32>>
    %oa = tt.addptr %op, %i : tensor<64x!ptr<f32>>
    tt.store %oa, %v"""
    src = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    assert hazards(kernel(body(True), "%src: !ptr<f32>, %out: !ptr<f32>"), [src, out]) == []
    assert np.array_equal(out, src)
    h = only(hazards(kernel(body(False), "%src: !ptr<f32>, %out: !ptr<f32>"), [src, out]), SyncHazard)
    assert (h.kind, h.lines) == ("in-flight-write", (7, 10)) and "wait_group" in h.hint
    assert np.all(np.isnan(out))  # the copy had not landed: poisoned shared memory was read


def _warp_barrier_handoff(arrive_count: int) -> str:
    """alloc_warp_barrier: every thread of the 4-warp producer arrives by itself (128 arrivals)."""
    return CONSTS + f"""
    %s = tlx.local_alloc : !smem<64xf32, mutable> loc(#f:3:0)
    %bars = tlx.alloc_barriers {{num = 1, arrive_count = {arrive_count}, per_thread = true}} : !mbarriers<1>
    tlx.warp_specialize %s, %bars, %x, %y {{partition_num_warps = [4]}} {{
    ^default:
      %z = arith.constant {{value = 0}} : i32
      %b0 = tlx.memdesc_index %bars, %z : !mbarrier
      %i = tt.make_range {{start = 0, end = 64}} : tensor<64xi32>
      %p = tt.splat %x : tensor<64x!ptr<f32>>
      %a = tt.addptr %p, %i : tensor<64x!ptr<f32>>
      %v = tt.load %a : tensor<64xf32>
      tlx.local_store %s, %v loc(#f:12:0)
      tlx.barrier_arrive %b0 {{count = 1, per_thread = true}} loc(#f:13:0)
      tlx.ws_yield
    }} {{
    ^partition0(%s2: !smem<64xf32, mutable>, %bars2: !mbarriers<1>, %x2: !ptr<f32>, %y2: !ptr<f32>):
      %z = arith.constant {{value = 0}} : i32
      %b = tlx.memdesc_index %bars2, %z : !mbarrier
      tlx.barrier_wait %b, %z loc(#f:19:0)
      %v = tlx.local_load %s2 : tensor<64xf32> loc(#f:20:0)
      %w = arith.mulf %v, %v : tensor<64xf32>
      %i = tt.make_range {{start = 0, end = 64}} : tensor<64xi32>
      %p = tt.splat %y2 : tensor<64x!ptr<f32>>
      %a = tt.addptr %p, %i : tensor<64x!ptr<f32>>
      tt.store %a, %w
      tlx.ws_return
    }} loc(#f:5:0)"""


def test_warp_barrier_counts_every_thread():
    x = np.arange(64, dtype=np.float32)
    y = np.full(64, np.nan, np.float32)
    assert hazards(kernel(_warp_barrier_handoff(128), "%x: !ptr<f32>, %y: !ptr<f32>"), [x, y]) == []
    assert np.array_equal(y, x * x)
    with pytest.raises(DeadlockError, match="128 of 256 arrivals"):
        run(kernel(_warp_barrier_handoff(256), "%x: !ptr<f32>, %y: !ptr<f32>"), (1,), [x, y])


# ---- thread-divergent code (tlx.thread_id) -------------------------------------------------------

def test_fence_run_by_one_thread_does_not_fence_the_partition():
    def body(divergent):
        cond = "%t0i = tlx.thread_id {axis = 0} : i32\n    %is0 = arith.cmpi %t0i, %c0 {predicate = \"eq\"} : i1" if divergent \
            else "%is0 = arith.cmpi %c0, %c0 {predicate = \"eq\"} : i1"
        return CONSTS + f"""
    %s = tlx.local_alloc : {S64} loc(#f:3:0)
    tlx.local_store %s, %t0 loc(#f:4:0)
    {cond}
    scf.if %is0 {{
    ^then:
      {FENCE} loc(#f:8:0)
      scf.yield
    }} {{
    ^else:
      scf.yield
    }} loc(#f:7:0)
    tlx.tma_store %desc, %s offsets(%c0, %c0) loc(#f:12:0)
    tlx.tma_store_wait {{pendings = 0}}"""
    assert hazards(kernel(body(False), f"%desc: {DESC}"), [_desc()]) == []
    h = only(hazards(kernel(body(True), f"%desc: {DESC}"), [_desc()]))
    assert h.lines == (4, 12) and "ran in only 1 of the 128 threads" in str(h)


def test_per_thread_values_and_divergent_branches():
    m = kernel(CONSTS + """
    %tid = tlx.thread_id {axis = 0} : i32
    %c64 = arith.constant {value = 64} : i32
    %lo = arith.cmpi %tid, %c64 {predicate = "slt"} : i1
    %v = scf.if %lo : i32 {
    ^then:
      %a = arith.muli %tid, %c2 : i32
      scf.yield %a
    } {
    ^else:
      %b = arith.subi %c0, %tid : i32
      scf.yield %b
    }
    %p = tt.addptr %out, %tid : !ptr<i32>
    tt.store %p, %v
    %is0 = arith.cmpi %tid, %c0 {predicate = "eq"} : i1
    scf.if %is0 {
    ^then:
      %old = tt.atomic_rmw %cnt, %c1 {op = "add", sem = "relaxed", scope = "gpu"} : i32
      scf.yield
    } {
    ^else:
      scf.yield
    }""", "%out: !ptr<i32>, %cnt: !ptr<i32>")
    out, cnt = np.full(128, -7, np.int32), np.zeros(1, np.int32)
    assert hazards(m, [out, cnt]) == []
    assert list(out) == [2 * t if t < 64 else -t for t in range(128)]
    assert cnt[0] == 1  # the scalar atomic of thread 0's branch happens once


def test_the_interpreter_specializes_arrays_as_a_gpu_launch_would():
    """The divisibility a GPU launch would see (16 for 16-byte aligned data and multiples of 16)
    is traced for the interpreter too: it decides layouts (vector widths), and with them which
    thread holds which element of a tensor stored in a thread-divergent branch."""
    from kernels.lang import one_thread_tensor_store_kernel
    from tlx.interpreter.entry import prepare_module
    from tlx.specialize import Specializer

    buf = np.zeros(80, np.int32)
    aligned = buf[(-buf.ctypes.data % 16) // 4:][:64]
    for arr, want in ((aligned, [16]), (aligned[1:], [1])):
        bound, _ = Specializer(one_thread_tensor_store_kernel).bind((arr,), {"TID": 3, "BLOCK": 32})
        m = prepare_module(one_thread_tensor_store_kernel, bound, num_warps=1)
        assert m.func.attrs["divisibility"] == want, (arr.ctypes.data % 16, m.func.attrs["divisibility"])


@pytest.mark.parametrize("num_warps,block", [(1, 32), (4, 128), (4, 32)])
def test_a_tensor_store_in_a_divergent_branch_writes_only_the_elements_its_threads_own(num_warps, block):
    """Inside `if thread_id == 3` a tensor store writes what thread 3 holds: one element per
    thread (a tile of 32 * num_warps), element 3; a 32-element tile over 4 warps is held by warp 0
    (the other warps hold copies that never store)."""
    from kernels.lang import one_thread_tensor_store_kernel

    out = np.zeros(block, np.int32)
    tlx.interpret(one_thread_tensor_store_kernel, (1,), out, TID=3, BLOCK=block, num_warps=num_warps)
    want = np.zeros(block, np.int32)
    held = np.arange(3, block, 32 * num_warps)
    want[held] = held + 1
    assert out.tolist() == want.tolist()
    out[:] = 0
    tlx.interpret(one_thread_tensor_store_kernel, (1,), out, TID=32 * num_warps + 3, BLOCK=block,
                  num_warps=num_warps)
    assert out.tolist() == [0] * block  # no thread takes the branch


def test_shared_memory_op_in_a_divergent_branch_is_rejected():
    m = kernel(CONSTS + f"""
    %s = tlx.local_alloc : {S64}
    %tid = tlx.thread_id {{axis = 0}} : i32
    %is0 = arith.cmpi %tid, %c0 {{predicate = "eq"}} : i1
    scf.if %is0 {{
    ^then:
      tlx.local_store %s, %t0 loc(#f:7:0)
      scf.yield
    }} {{
    ^else:
      scf.yield
    }}""")
    from tlx.interpreter import InterpreterError
    with pytest.raises(InterpreterError, match="k.py:7.*only some threads take"):
        run(m, (1,), [])


def test_spin_wait_on_another_program_ends_with_an_error():
    m = kernel("""
    %one = arith.constant {value = 1} : i32
    %z = arith.constant {value = 0} : i32
    %pid = tt.get_program_id {axis = 0} : i32
    %r = scf.while %z : i32 {
    ^before(%x: i32):
      %f = tt.load %flag : i32
      %wait = arith.cmpi %f, %one {predicate = "ne"} : i1
      scf.condition %wait values(%x)
    } {
    ^after(%y: i32):
      scf.yield %y
    } loc(#f:5:0)
    tt.store %flag, %pid""", "%flag: !ptr<i32>")
    from tlx.interpreter import InterpreterError
    t = time.perf_counter()
    with pytest.raises(InterpreterError, match="k.py:5.*scf.while ran 1000 iterations in program"):
        run(m, (2,), [np.zeros(1, np.int32)], max_while_iterations=1000)
    assert time.perf_counter() - t < 1.0


def test_barrier_invalidated_while_its_tma_load_is_in_flight():
    def body(wait_first):
        wait = "tlx.barrier_wait %bar, %c0 loc(#f:7:0)"
        return CONSTS + f"""
    %buf = tlx.local_alloc : {S64} loc(#f:3:0)
    %bars = tlx.alloc_barriers {{num = 1, arrive_count = 1}} : !mbarriers<1> loc(#f:4:0)
    %bar = tlx.memdesc_index %bars, %c0 : !mbarrier loc(#f:4:0)
    tlx.barrier_expect_bytes %bar {{bytes = 8192}} loc(#f:5:0)
    tlx.tma_load %desc, %buf, %bar offsets(%c0, %c0) loc(#f:6:0)
    {wait if wait_first else ""}
    tlx.barrier_inval %bar loc(#f:8:0)
    {"" if wait_first else wait}"""
    src = np.arange(64 * 64, dtype=np.float16).reshape(64, 64)
    assert hazards(kernel(body(True), f"%desc: {DESC}"), [HostDesc.of(src, (64, 64))]) == []
    hs = hazards(kernel(body(False), f"%desc: {DESC}"), [HostDesc.of(src, (64, 64))])
    h = [h for h in hs if h.kind == "inval-in-flight"]
    assert len(h) == 1 and type(h[0]) is SyncHazard and h[0].lines == (6, 8), [str(x) for x in hs]
    assert "barrier_wait" in h[0].hint


def test_descriptor_load_in_a_loop_interprets_without_hazards():
    """The frontend's register-level descriptor load in a loop (lowered with an mbarrier that is
    initialized, waited on and invalidated each iteration) sums a column of tiles exactly."""
    import tlx
    from kernels.codegen import desc_load_loop_kernel

    M, N, BM, BN = 64 * 5, 128, 64, 64
    x = np.random.default_rng(3).standard_normal((M, N)).astype(np.float16)
    y = np.full((BM, N), np.nan, np.float32)
    assert tlx.interpret(desc_load_loop_kernel, (N // BN,), x, y, M, N, BM=BM, BN=BN, raise_on_hazard=False) == []
    ref = x.astype(np.float64).reshape(M // BM, BM, N).sum(axis=0)
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max()


def test_a_missing_async_dot_wait_is_reported_at_the_source_line_that_uses_the_result():
    """The store of the accumulator reads it through a layout conversion the compiler inserts
    with the async_dot's line; the report names the store's line, where the wait is missing."""
    import numpy as np

    import tlx
    import tlx.language as tl
    from tlx.interpreter import SyncHazard as Sync

    @tlx.jit
    def dot_without_wait(a_ptr, b_ptr, c_ptr):
        offs = tl.arange(0, 64)
        a = tlx.local_alloc((64, 64), tl.float16, 1)
        b = tlx.local_alloc((64, 64), tl.float16, 1)
        tlx.local_store(a[0], tl.load(a_ptr + offs[:, None] * 64 + offs[None, :]))
        tlx.local_store(b[0], tl.load(b_ptr + offs[:, None] * 64 + offs[None, :]))
        acc = tlx.async_dot(a[0], b[0], tl.zeros((64, 64), dtype=tl.float32))
        tl.store(c_ptr + offs[:, None] * 64 + offs[None, :], acc)  # the use without a wait

    import inspect
    first = inspect.getsourcelines(dot_without_wait.fn)[1]
    a = np.ones((64, 64), np.float16)
    with pytest.raises(Sync) as e:
        tlx.interpret(dot_without_wait, (1,), a, a, np.zeros((64, 64), np.float32))
    assert e.value.kind == "use-before-wait"
    assert e.value.lines == (first + 7, first + 8)
    assert "tt.store" in str(e.value)

"""Thread-block clusters: tracing and verification of the cluster ops, the PTX they lower to
(assembled by ptxas for sm_90a), the cluster-scope proxy fence (IR text in, IR text out), the
ClusterSync pass, the launch metadata and ABI, the errors, and the interpreter running every CTA
of a cluster together (remote stores, st.async, bulk copies, remote arrives, multicast, and the
missing cluster barrier it reports). The GPU side is tests/gpu/test_cluster_gpu.py."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tlx
import tlx.language as tl
from fence_ir import check, module, run
from kernels import cluster as C
from tlx.compiler.errors import IRVerifyError, TLXCompileError, TLXError, TLXValueError
from tlx.compiler.ir import parse_module
from tlx.compiler.ir.verifier import verify_module


def ptx_of(spec) -> str:
    r = spec.compile()
    assert isinstance(r.asm.get("cubin"), bytes), "ptxas did not assemble the PTX"
    return r.asm["ptx"]


# ---- PTX ------------------------------------------------------------------------------------------------

def test_cluster_kernels_declare_their_cluster_and_read_rank_and_size():
    ptx = ptx_of(C.RANK_SIZE)
    assert ".explicitcluster" in ptx and ".reqnctapercluster 2, 1, 3" in ptx
    assert "%cluster_ctarank" in ptx and "%cluster_nctarank" in ptx


def test_remote_store_maps_the_buffer_and_stores_through_the_cluster_window_between_cluster_barriers():
    ptx = ptx_of(C.RING_STORE)
    assert ptx.count("mapa.shared::cluster.u32") == 1
    assert re.search(r"st\.shared::cluster(\.v\d)?\.b32", ptx)
    # the user's two barriers and the exit barrier ClusterSync places (no mbarriers: no entry sync)
    assert ptx.count("barrier.cluster.arrive.aligned") == 3 and ptx.count("barrier.cluster.wait.aligned") == 3
    assert "fence.mbarrier_init" not in ptx


def test_st_async_stores_once_per_element_and_completes_on_the_remote_barrier():
    ptx = ptx_of(C.GATHER_SUM)
    stores = re.findall(r"st\.async\.shared::cluster\.mbarrier::complete_tx::bytes(\.v\d)?\.b32 \[%\w+\], .*, \[(%\w+)\]",
                        ptx)
    # 128 fp32 over 128 threads: one 4-byte store per thread, so the 512 expected bytes arrive once
    assert len(stores) == 1
    assert ptx.count("mapa.shared::cluster.u32") == 2  # the slot and the barrier
    # the receiver's barriers are initialized and published to the cluster before any st.async
    init_sync = ptx.index("fence.mbarrier_init.release.cluster")
    assert init_sync < ptx.index("barrier.cluster.arrive.relaxed.aligned") < ptx.index("st.async")
    assert "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64" in ptx


def test_bulk_copy_to_another_cta_after_a_cta_fence_of_its_staged_source():
    ptx = ptx_of(C.RING_COPY)
    assert ptx.count("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes") == 1
    assert ptx.count("mapa.shared::cluster.u32") == 2
    # the generic write of the staged source is read by the copy (async proxy, this CTA's memory)
    assert ptx.count("fence.proxy.async.shared::cta") == 1 and "fence.proxy.async.shared::cluster" not in ptx
    assert ptx.index("fence.proxy.async.shared::cta") < ptx.index("cp.async.bulk.shared::cluster")


def test_remote_arrive_releases_at_cluster_scope():
    ptx = ptx_of(C.PINGPONG)
    assert re.search(r"mbarrier\.arrive\.release\.cluster\.shared::cluster\.b64 _, \[%\w+\];", ptx)
    assert ptx.index("bar.sync") < ptx.index("mbarrier.arrive.release.cluster")  # every thread's store first


def test_multicast_tma_load_names_the_cta_mask():
    ptx = ptx_of(C.MULTICAST)
    m = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                   r"\.multicast::cluster \[.*\], \[.*\], \[%\w+\], (%rs\d+);", ptx)
    assert len(m) == 1
    assert re.search(rf"cvt\.u16\.u32 {re.escape(m[0])}, ", ptx)


# ---- the cluster-scope proxy fence (IR in, IR out) ------------------------------------------------------

REMOTE_THEN_TMA = """
    %c0 = arith.constant {value = 0} : i32
    %buf = tlx.local_alloc : !smem<64x64xf16, mutable>
    %r = tlx.cluster_cta_rank : i32
    %rv = tlx.remote_view %buf, %r : !smem<64x64xf16, mutable, remote>
    tlx.remote_store %rv, %t
    tlx.cluster_barrier
    tlx.tma_store %d, %buf offsets(%c0, %c0)
    tlx.tma_store_wait {pendings = 0}"""
ARGS = "%d: !tensordesc<64x64xf16>, %t: tensor<64x64xf16>"


def test_a_store_into_another_ctas_buffer_that_its_tma_reads_is_fenced_at_cluster_scope_by_the_writer():
    res = check(module(REMOTE_THEN_TMA, ARGS), """
    CHECK: tlx.remote_store
    CHECK-NEXT: tlx.fence_async_shared {cluster = true, origin = "proxy_fence_insertion"
    CHECK-NEXT: tlx.cluster_barrier
    CHECK-NOT: tlx.fence_async_shared
    CHECK: tlx.tma_store
    """, ("lower_dot", "tma_lowering", "fence_insertion", "layouts", "smem_allocation", "proxy_fence_insertion"),
        cluster=(2, 1, 1))
    (rec,) = res.fences
    assert rec.scope == "cluster" and "another CTA" in " ".join(rec.notes)
    assert [g for g in res.fences[0].guards]  # it separates the remote store from the TMA store
    assert any(r.removed and r.origin == "fence_insertion" for r in res.removed_fences)


def test_a_user_cta_fence_does_not_order_a_remote_store_before_the_readers_async_access():
    body = REMOTE_THEN_TMA.replace("tlx.remote_store %rv, %t",
                                   'tlx.remote_store %rv, %t\n    tlx.fence_async_shared {cluster = false, origin = "user"}')
    res = check(module(body, ARGS), """
    CHECK: tlx.remote_store
    CHECK-NEXT: tlx.fence_async_shared {cluster = true, origin = "proxy_fence_insertion"
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "user"
    """, ("layouts", "smem_allocation", "proxy_fence_insertion"), cluster=(2, 1, 1))
    user = next(r for r in res.fences if r.origin == "user")
    assert user.redundant


def test_a_remote_store_no_async_op_reads_needs_no_fence():
    body = REMOTE_THEN_TMA.replace("tlx.tma_store %d, %buf offsets(%c0, %c0)\n    tlx.tma_store_wait {pendings = 0}",
                                   "%x = tlx.local_load %buf : tensor<64x64xf16>")
    text, res = run(module(body, ARGS), ("layouts", "smem_allocation", "proxy_fence_insertion"), cluster=(2, 1, 1))
    assert "tlx.fence_async_shared" not in text and not res.fences


# ---- ClusterSync --------------------------------------------------------------------------------------

def test_cluster_sync_publishes_the_mbarrier_inits_and_keeps_every_cta_alive_to_the_end():
    body = """
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    %bars = tlx.alloc_barriers {num = 1, arrive_count = 1} : !mbarriers<1>
    %bar = tlx.memdesc_index %bars, %c0 : !mbarrier
    %rb = tlx.remote_view %bar, %c1 : !mbarrier<remote>
    tlx.barrier_arrive %rb
    tlx.barrier_wait %bar, %c0"""
    check(module(body), """
    CHECK: tlx.alloc_barriers
    CHECK-NEXT: tlx.fence_mbarrier_init {origin = "compiler"}
    CHECK-NEXT: tlx.cluster_barrier {origin = "compiler", relaxed = true}
    CHECK: tlx.barrier_wait
    CHECK-NEXT: tlx.cluster_barrier {origin = "compiler"}
    CHECK-NEXT: tt.return
    """, ("cluster_sync",), cluster=(2, 1, 1))
    # without a cluster (or without remote accesses) it places nothing
    text, _ = run(module(body), ("cluster_sync",))
    assert "tlx.cluster_barrier" not in text


# a GEMM stage ring as a 2-CTA cluster runs it: B multicast into both CTAs' stage, the full barrier
# completed by the loads, the stage released on both CTAs' empty barriers (one of them remote)
STAGE_RING = """
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    %c3 = arith.constant {value = 3} : i32
    %b = tlx.local_alloc : !smem<64x64xf16, mutable>
    %full = tlx.alloc_barriers {num = 1, arrive_count = 1} : !mbarriers<1>
    %empty = tlx.alloc_barriers {num = 1, arrive_count = 2} : !mbarriers<1>
    %fb = tlx.memdesc_index %full, %c0 : !mbarrier
    %eb = tlx.memdesc_index %empty, %c0 : !mbarrier
    %r = tlx.cluster_cta_rank : i32
    %peer = arith.xori %r, %c1 : i32
    tlx.barrier_wait %eb, %c1
    tlx.barrier_expect_bytes %fb {bytes = 8192}
    tlx.tma_load %d, %b, %fb offsets(%c0, %c0) mask(%c3) {multicast = true}
    tlx.barrier_wait %fb, %c0
    READ
    tlx.barrier_arrive %eb
    %reb = tlx.remote_view %eb, %peer : !mbarrier<remote>
    tlx.barrier_arrive %reb"""


def test_stage_ring_read_through_the_async_proxy_hands_off_at_cta_scope():
    """wgmma reads the multicast stage: the remote release only returns a buffer read through the
    async proxy (and waited for), so no arrive or wait needs cluster scope (CUTLASS's pipeline)."""
    body = STAGE_RING.replace("READ", "%x = tlx.async_dot %b, %b : tensor<64x64xf32>")
    check(module(body, ARGS), """
    CHECK: tlx.barrier_wait %eb, %c1 {scope = "cta"}
    CHECK: tlx.barrier_wait %fb, %c0 {scope = "cta"}
    CHECK: tlx.barrier_arrive %eb
    CHECK-NOT: scope
    CHECK: tlx.barrier_arrive %reb {scope = "cta"}
    """, ("cluster_sync",), cluster=(2, 1, 1))


def test_a_generic_read_of_a_buffer_another_cta_writes_hands_off_at_cluster_scope():
    """A generic load of the multicast stage: the remote arrive must order it before the other
    CTA's next multicast write (release.cluster), and the empty barrier it completes is acquired
    at cluster scope; the full barrier, completed by TMA bytes only, stays at CTA scope."""
    body = STAGE_RING.replace("READ", "%x = tlx.local_load %b : tensor<64x64xf16>")
    check(module(body, ARGS), """
    CHECK: tlx.barrier_wait %eb, %c1 {scope = "cluster"}
    CHECK: tlx.barrier_wait %fb, %c0 {scope = "cta"}
    CHECK: tlx.barrier_arrive %reb {scope = "cluster"}
    """, ("cluster_sync",), cluster=(2, 1, 1))


def test_a_global_store_anywhere_makes_remote_arrives_publish_at_cluster_scope():
    body = STAGE_RING.replace("READ", "tt.store %p, %c0")
    check(module(body, ARGS + ", %p: !ptr<i32>"), """
    CHECK: tlx.barrier_wait %eb, %c1 {scope = "cluster"}
    CHECK: tlx.barrier_arrive %reb {scope = "cluster"}
    """, ("cluster_sync",), cluster=(2, 1, 1))
    # launched without a cluster, nothing is marked (every wait acquires at CTA scope)
    text, _ = run(module(body, ARGS + ", %p: !ptr<i32>"), ("cluster_sync",))
    assert "scope" not in text


def test_a_memory_fence_of_the_author_makes_remote_arrives_publish_at_cluster_scope():
    """TMA-stored global data handed to the other CTA: the author's fence.acq_rel.gpu orders it,
    and the arrive after it must be a cluster-scope release for the hand-off to carry it."""
    body = STAGE_RING.replace("READ", 'tlx.fence {scope = "gpu"}')
    check(module(body, ARGS), """
    CHECK: tlx.barrier_wait %eb, %c1 {scope = "cluster"}
    CHECK: tlx.barrier_arrive %reb {scope = "cluster"}
    """, ("cluster_sync",), cluster=(2, 1, 1))


def test_scopes_reach_the_ptx():
    """The clustered GEMM example's K loop hands off at CTA scope (no MEMBAR.GPU per remote arrive,
    no L1 invalidation per wait), while a remote arrive after a remote store releases at cluster
    scope and its waiter acquires at cluster scope."""
    from kernels.gemm_cluster_examples import SPECS
    gemm_ptx = ptx_of(next(iter(SPECS.values())))
    assert gemm_ptx.count("mbarrier.arrive.shared::cluster.b64") == 4  # two consumers, loop and tail
    assert ".release.cluster" not in gemm_ptx.replace("fence.mbarrier_init.release.cluster", "")
    assert ".acquire.cluster" not in gemm_ptx
    pp = ptx_of(C.PINGPONG)
    assert "mbarrier.arrive.release.cluster.shared::cluster.b64" in pp
    assert "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64" in pp


# ---- verification and errors ----------------------------------------------------------------------------

def test_the_verifier_keeps_remote_views_out_of_local_ops():
    text = module("""
    %buf = tlx.local_alloc : !smem<64xf32, mutable>
    %c1 = arith.constant {value = 1} : i32
    %rv = tlx.remote_view %buf, %c1 : !smem<64xf32, mutable, remote>
    tlx.local_store %rv, %t""", "%t: tensor<64xf32>")
    with pytest.raises(IRVerifyError, match="must be a local buffer"):
        verify_module(parse_module(text))
    bad_type = module("""
    %buf = tlx.local_alloc : !smem<64xf32, mutable>
    %c1 = arith.constant {value = 1} : i32
    %rv = tlx.remote_view %buf, %c1 : !smem<64xf32, mutable>""")
    with pytest.raises(IRVerifyError, match="remote"):
        verify_module(parse_module(bad_type))


@tlx.jit
def _wait_on_remote(out_ptr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_wait(tlx.remote_view(bars[0], 1), phase=0)


@tlx.jit
def _clc(out_ptr):
    tlx.clc_create_context(1)


@tlx.jit
def _bad_multicast(d, out_ptr):
    buf = tlx.local_alloc((64, 64), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=1)
    tlx.async_descriptor_load(d, buf[0], [0, 0], bars[0], multicast_targets=[0, 16])


def test_errors_name_what_to_change():
    with pytest.raises(TLXCompileError, match="barrier_wait does not take a remote_view"):
        tlx.compile(_wait_on_remote, signature={"out_ptr": "*i32"}, ctas_per_cga=(2, 1, 1))
    with pytest.raises(TLXCompileError, match="sm_100"):
        tlx.compile(_clc, signature={"out_ptr": "*i32"})
    with pytest.raises(TLXValueError, match="rank 16"):
        tlx.compile(_bad_multicast, signature={"d": "tensordesc<fp16[64, 64]>", "out_ptr": "*i32"})
    with pytest.raises(TLXCompileError, match="num_ctas=0 must be a positive int"):
        tlx.compile(C.rank_size_kernel, signature={"out_ptr": "*i32"}, num_ctas=0)
    with pytest.raises(TLXCompileError, match="at most 8"):
        tlx.compile(C.rank_size_kernel, signature={"out_ptr": "*i32"}, ctas_per_cga=(4, 4, 1))


def test_num_ctas_runs_each_program_in_one_cta_as_given():
    """Triton's num_ctas > 1 splits one program over a cluster's CTAs, with the same results: tlx
    runs the program in one CTA, so the kernel is the num_ctas=1 kernel (no cluster directives)."""
    one = tlx.compile(C.rank_size_kernel, signature={"out_ptr": "*i32"}, num_warps=1)
    two = tlx.compile(C.rank_size_kernel, signature={"out_ptr": "*i32"}, num_warps=1, num_ctas=2)
    assert two.asm["ptx"] == one.asm["ptx"] and ".reqnctapercluster" not in two.asm["ptx"]
    assert two.metadata.num_ctas == 2 and two.metadata.ctas_per_cga == (1, 1, 1)


def test_metadata_and_abi_carry_the_cluster():
    k = tlx.compile(C.rank_size_kernel, signature={"out_ptr": "*i32"}, num_warps=1, ctas_per_cga=(2, 1, 3))
    assert k.metadata.ctas_per_cga == (2, 1, 3) == k.metadata["ctas_per_cga"] == k.metadata.cluster_dims
    assert k.metadata.num_ctas == 1 and tuple(k.abi.cluster) == (2, 1, 3)
    plain = tlx.compile(C.rank_size_kernel, signature={"out_ptr": "*i32"}, num_warps=1)
    assert plain.metadata.ctas_per_cga == (1, 1, 1) and ".reqnctapercluster" not in plain.asm["ptx"]


# ---- the interpreter: every CTA of a cluster ------------------------------------------------------------

def test_interpreter_ranks_and_sizes_follow_the_cluster_shape():
    out = np.full(4 * 2 * 3 * 2, -1, np.int32)
    tlx.interpret(C.rank_size_kernel, (4, 2, 3), out, num_warps=1, ctas_per_cga=(2, 1, 3))
    o = out.reshape(3, 2, 4, 2)
    want = np.array([[[x % 2 + 2 * (z % 3) for x in range(4)] for _ in range(2)] for z in range(3)])
    np.testing.assert_array_equal(o[..., 0], want)
    assert (o[..., 1] == 6).all()


def test_interpreter_remote_stores_copies_arrives_and_multicast():
    rng = np.random.default_rng(0)
    x = rng.random(8 * 256, dtype=np.float32)
    y = np.full_like(x, np.nan)
    tlx.interpret(C.ring_store_kernel, (8,), x, y, BLOCK=256, ctas_per_cga=(4, 1, 1))
    xr = x.reshape(8, 256)
    np.testing.assert_array_equal(y.reshape(8, 256), xr[[3, 0, 1, 2, 7, 4, 5, 6]])

    x = rng.random(2 * 4 * 128, dtype=np.float32)
    y = np.full(2 * 128, np.nan, np.float32)
    tlx.interpret(C.gather_sum_kernel, (1, 8), x, y, BLOCK=128, NCTA=4, ctas_per_cga=(1, 4, 1))
    want = x.reshape(2, 4, 128).astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(y.reshape(2, 128), want, rtol=1e-6)

    x = rng.random(4 * 1024, dtype=np.float32)
    y = np.full_like(x, np.nan)
    tlx.interpret(C.ring_copy_kernel, (4,), x, y, BLOCK=1024, ctas_per_cga=(2, 1, 1))
    np.testing.assert_array_equal(y.reshape(4, 1024), x.reshape(4, 1024)[[1, 0, 3, 2]])

    x = rng.random(4 * 128, dtype=np.float32)
    y = np.full_like(x, np.nan)
    tlx.interpret(C.pingpong_arrive_kernel, (4,), x, y, BLOCK=128, ctas_per_cga=(2, 1, 1))
    np.testing.assert_array_equal(y.reshape(4, 128), x.reshape(4, 128)[[1, 0, 3, 2]])

    xs = rng.random((4 * 64, 64)).astype(np.float16)
    out = np.full((4, 2, 64, 64), np.nan, np.float16)
    d = tlx.TensorDescriptor(xs, xs.shape, [64, 1], [64, 64])
    tlx.interpret(C.multicast_kernel, (4,), d, out, BM=64, BN=64, ctas_per_cga=(2, 1, 1))
    tiles = xs.reshape(4, 64, 64)
    np.testing.assert_array_equal(out, np.stack([tiles[[p // 2 * 2, p // 2 * 2 + 1]] for p in range(4)]))


@tlx.jit
def _no_second_barrier(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    tlx.local_store(buf[0], tl.full((BLOCK,), -1.0, tl.float32))
    tlx.cluster_barrier()
    tlx.remote_shmem_store(buf[0], tl.load(x_ptr + pid * BLOCK + offs), remote_cta_rank=tlx.cluster_cta_rank() ^ 1)
    tl.store(out_ptr + pid * BLOCK + offs, tlx.local_load(buf[0]))  # no cluster barrier before this read


def test_interpreter_reports_a_read_of_a_remote_store_with_no_cluster_barrier_between():
    x = np.ones(256, np.float32)
    hz = tlx.interpret(_no_second_barrier, (2,), x, np.zeros_like(x), BLOCK=128, ctas_per_cga=(2, 1, 1),
                       raise_on_hazard=False)
    races = [h for h in hz if "remote generic write" in str(h)]
    assert races, [str(h) for h in hz]
    text = str(races[0])
    assert "CTA rank 1" in text and "CTA rank 0" in text and "tlx.cluster_barrier" in text


def test_interpreter_refuses_a_grid_that_is_not_whole_clusters():
    with pytest.raises(TLXError, match="whole number of clusters"):
        tlx.interpret(C.rank_size_kernel, (3,), np.zeros(6, np.int32), num_warps=1, ctas_per_cga=(2, 1, 1))


def test_clustered_gemm_example_is_exact_enough_and_hazard_free_on_the_interpreter():
    """2 clusters of 2 CTAs, 2 blocks of 2 tiles each (the stage ring runs on across blocks), a
    ragged M (the second CTA's last tile is partly outside A), B multicast: no hazard, no NaN left,
    relative error of an fp16 product."""
    from tlx.examples import gemm

    rng = np.random.default_rng(3)
    M, N, K = 640, 512, 192
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    out = np.full((M, N), np.nan, np.float16)
    plan = gemm.plan_persistent_cluster(a, b, out=out, sms=4)
    assert plan.cluster == (2, 1, 1) and plan.grid == (4,)
    assert plan.interpret() == []
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert not np.isnan(out).any()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-3

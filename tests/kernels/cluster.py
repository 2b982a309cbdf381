"""Kernels of thread-block clusters (tests/gpu/test_cluster_gpu.py launches them): the CTA's rank
and the cluster's size, stores into another CTA's shared memory (plain, st.async completing on the
receiver's mbarrier, bulk copies), remote mbarrier arrives and TMA multicast, each with the
cluster shape it is launched in."""

from __future__ import annotations

import tlx
import tlx.language as tl

from . import spec


@tlx.jit
def rank_size_kernel(out_ptr):
    """out[linear program id] = (cluster_cta_rank, cluster_size_1d)."""
    pid = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))
    tl.store(out_ptr + 2 * pid, tlx.cluster_cta_rank())
    tl.store(out_ptr + 2 * pid + 1, tlx.cluster_size_1d())


@tlx.jit
def ring_store_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Each CTA writes its block of x into the next CTA's buffer (rank + 1 mod the cluster size),
    then stores the block it received: out[pid] = x[the previous CTA of its cluster]."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    n = tlx.cluster_size_1d()
    offs = tl.arange(0, BLOCK)
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    tlx.local_store(buf[0], tl.full((BLOCK,), -1.0, tl.float32))
    tlx.cluster_barrier()  # every CTA has initialized its buffer before any remote store lands
    tlx.remote_shmem_store(buf[0], tl.load(x_ptr + pid * BLOCK + offs), remote_cta_rank=(rank + 1) % n)
    tlx.cluster_barrier()  # every remote store has landed
    tl.store(out_ptr + pid * BLOCK + offs, tlx.local_load(buf[0]))


@tlx.jit
def gather_sum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, NCTA: tl.constexpr):
    """A cluster of NCTA CTAs along y sums NCTA blocks: CTA r > 0 sends its block to slot r of
    CTA 0 with st.async (completing on CTA 0's barrier r); CTA 0 waits on each and writes
    out[cluster] = sum of the blocks."""
    cid = tl.program_id(1) // NCTA
    rank = tlx.cluster_cta_rank()
    offs = tl.arange(0, BLOCK)
    slots = tlx.local_alloc((BLOCK,), tl.float32, NCTA)
    bars = tlx.alloc_barriers(num_barriers=NCTA, arrive_count=1)
    for i in tl.static_range(1, NCTA):
        tlx.barrier_expect_bytes(bars[i], BLOCK * 4)
    v = tl.load(x_ptr + (cid * NCTA + rank) * BLOCK + offs)
    if rank != 0:
        tlx.async_remote_shmem_store(slots[rank], v * 1.0, remote_cta_rank=0, barrier=bars[rank])
    if rank == 0:
        acc = v
        for i in tl.static_range(1, NCTA):
            tlx.barrier_wait(bars[i], 0)
            acc += tlx.local_load(slots[i])
        tl.store(out_ptr + cid * BLOCK + offs, acc)


@tlx.jit
def ring_copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """As ring_store_kernel, through shared memory: each CTA stages its block, bulk-copies it into
    the next CTA's buffer (completing on that CTA's barrier) and stores what it received."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    n = tlx.cluster_size_1d()
    offs = tl.arange(0, BLOCK)
    stage = tlx.local_alloc((BLOCK,), tl.float32, 1)
    inbox = tlx.local_alloc((BLOCK,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], BLOCK * 4)
    tlx.local_store(stage[0], tl.load(x_ptr + pid * BLOCK + offs))
    tlx.async_remote_shmem_copy(inbox[0], stage[0], remote_cta_rank=(rank + 1) % n, barrier=bars[0])
    tlx.barrier_wait(bars[0], 0)
    tl.store(out_ptr + pid * BLOCK + offs, tlx.local_load(inbox[0]))


@tlx.jit
def pingpong_arrive_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Pairs of CTAs: each writes its block into its partner's buffer, then arrives on the
    partner's barrier (a remote arrive); each waits on its own barrier and stores what its partner
    sent: out[pid] = x[pid ^ 1]."""
    pid = tl.program_id(0)
    partner = tlx.cluster_cta_rank() ^ 1
    offs = tl.arange(0, BLOCK)
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.remote_shmem_store(buf[0], tl.load(x_ptr + pid * BLOCK + offs), remote_cta_rank=partner)
    tlx.barrier_arrive(bars[0], remote_cta_rank=partner)
    tlx.barrier_wait(bars[0], 0)
    tl.store(out_ptr + pid * BLOCK + offs, tlx.local_load(buf[0]))


@tlx.jit
def multicast_kernel(x_desc, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    """A cluster of 2 CTAs along x loads two tiles of x, each once, into both CTAs: rank r issues
    tile r of its cluster (rows (2 * cluster + r) * BM) multicast to ranks 0 and 1. Every CTA
    stores both tiles: out[pid, t] = tile t of its cluster."""
    pid = tl.program_id(0)
    rank = tlx.cluster_cta_rank()
    cid = pid // 2
    bufs = tlx.local_alloc((BM, BN), tl.float16, 2)
    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    for t in tl.static_range(2):
        tlx.barrier_expect_bytes(bars[t], BM * BN * 2)
    tlx.async_descriptor_load(x_desc, bufs[rank], [(cid * 2 + rank) * BM, 0], bars[rank], multicast_targets=[0, 1])
    rows = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    for t in tl.static_range(2):
        tlx.barrier_wait(bars[t], 0)
        tl.store(out_ptr + (pid * 2 + t) * BM * BN + rows, tlx.local_load(bufs[t]))


# ---- the specializations the GPU tests launch --------------------------------------------------------

RANK_SIZE = spec("cluster rank and size 2x1x3", rank_size_kernel, {"out_ptr": "*i32"}, {}, 1, cluster=(2, 1, 3))
RING_STORE = spec("remote store ring of 4", ring_store_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                  {"BLOCK": 256}, 4, cluster=(4, 1, 1))
GATHER_SUM = spec("st.async gather-sum over 4 CTAs along y", gather_sum_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                  {"BLOCK": 128, "NCTA": 4}, 4, cluster=(1, 4, 1))
RING_COPY = spec("bulk copy ring of 2", ring_copy_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                 {"BLOCK": 1024}, 4, cluster=(2, 1, 1))
PINGPONG = spec("remote arrive ping-pong", pingpong_arrive_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                {"BLOCK": 128}, 4, cluster=(2, 1, 1))
MULTICAST = spec("TMA multicast to a pair", multicast_kernel, {"x_desc": "tensordesc<fp16[64, 64]>", "out_ptr": "*fp16"},
                 {"BM": 64, "BN": 64}, 4, cluster=(2, 1, 1))

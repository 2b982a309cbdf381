"""A warp-specialized TMA + wgmma Hopper GEMM written for the real TLX: one TMA producer task and
two consumer warpgroups that split the tile along M, full/empty mbarrier rings, and a
register-level TMA-store epilogue. Our own kernel, in the style of TLX's hopper_gemm_ws tutorial."""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def gemm_ws_kernel(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   STAGES: tl.constexpr, GROUPS: tl.constexpr):
    HALF_M: tl.constexpr = BM // GROUPS
    a_smem = tlx.local_alloc((HALF_M, BK), tlx.dtype_of(a_desc), STAGES * GROUPS)
    b_smem = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), STAGES)
    a_ready = tlx.alloc_barriers(num_barriers=STAGES * GROUPS, arrive_count=1)
    a_free = tlx.alloc_barriers(num_barriers=STAGES * GROUPS, arrive_count=1)
    b_ready = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    b_free = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=GROUPS)

    with tlx.async_tasks():
        with tlx.async_task("default"):
            pid = tl.program_id(0)
            n_tiles_n = tl.cdiv(N, BN)
            off_m = (pid // n_tiles_n) * BM
            off_n = (pid % n_tiles_n) * BN
            phase = 1
            slot = 0
            for kt in range(0, tl.cdiv(K, BK)):
                tlx.barrier_wait(b_free[slot], phase)
                tlx.barrier_expect_bytes(b_ready[slot], BK * BN * tlx.size_of(tlx.dtype_of(b_desc)))
                tlx.async_descriptor_load(b_desc, b_smem[slot], [kt * BK, off_n], b_ready[slot])
                for g in tl.static_range(GROUPS):
                    tlx.barrier_wait(a_free[slot + STAGES * g], phase)
                    tlx.barrier_expect_bytes(a_ready[slot + STAGES * g], HALF_M * BK * tlx.size_of(tlx.dtype_of(a_desc)))
                    tlx.async_descriptor_load(a_desc, a_smem[slot + STAGES * g], [off_m + g * HALF_M, kt * BK],
                                              a_ready[slot + STAGES * g])
                phase = phase ^ (slot == STAGES - 1)
                slot = (slot + 1) % STAGES
        with tlx.async_task(num_warps=4, replicate=GROUPS, registers=232):
            cid: tl.constexpr = tlx.async_task_replica_id()
            pid = tl.program_id(0)
            n_tiles_n = tl.cdiv(N, BN)
            off_m = (pid // n_tiles_n) * BM
            off_n = (pid % n_tiles_n) * BN
            acc = tl.zeros((HALF_M, BN), dtype=tl.float32)
            phase = 0
            slot = 0
            for kt in range(0, tl.cdiv(K, BK)):
                tlx.barrier_wait(a_ready[slot + STAGES * cid], phase)
                tlx.barrier_wait(b_ready[slot], phase)
                acc = tlx.async_dot(a_smem[slot + STAGES * cid], b_smem[slot], acc)
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(a_free[slot + STAGES * cid])
                tlx.barrier_arrive(b_free[slot])
                phase = phase ^ (slot == STAGES - 1)
                slot = (slot + 1) % STAGES
            c_desc.store([off_m + HALF_M * cid, off_n], acc.to(tlx.dtype_of(c_desc)))

"""A warp-specialized flash-attention forward kernel written for the real TLX: a TMA producer
task loads Q once and streams K/V through a two-slot ring; consumer warpgroups compute
S = Q K^T (SMEM x transposed SMEM), an online softmax with exp2, and O += P V with P in
registers. Our own kernel, in the style of TLX's hopper_fa_ws tutorial."""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def fa_fwd_kernel(q_desc, k_desc, v_desc, o_desc, sm_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, SLOTS: tl.constexpr, GROUPS: tl.constexpr):
    M_PER_GROUP: tl.constexpr = BLOCK_M // GROUPS
    q_smem = tlx.local_alloc((M_PER_GROUP, HEAD_DIM), tlx.dtype_of(q_desc), GROUPS)
    k_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), tlx.dtype_of(k_desc), SLOTS)
    v_smem = tlx.local_alloc((BLOCK_N, HEAD_DIM), tlx.dtype_of(v_desc), SLOTS)
    q_ready = tlx.alloc_barriers(num_barriers=GROUPS, arrive_count=1)
    k_ready = tlx.alloc_barriers(num_barriers=SLOTS, arrive_count=1)
    v_ready = tlx.alloc_barriers(num_barriers=SLOTS, arrive_count=1)
    k_free = tlx.alloc_barriers(num_barriers=SLOTS, arrive_count=GROUPS)
    v_free = tlx.alloc_barriers(num_barriers=SLOTS, arrive_count=GROUPS)

    with tlx.async_tasks():
        with tlx.async_task("default"):
            start_m = tl.program_id(0)
            row0 = tl.program_id(1) * N_CTX
            for g in tl.static_range(GROUPS):
                tlx.barrier_expect_bytes(q_ready[g], M_PER_GROUP * HEAD_DIM * tlx.size_of(tlx.dtype_of(q_desc)))
                tlx.async_descriptor_load(q_desc, q_smem[g], [row0 + start_m * BLOCK_M + g * M_PER_GROUP, 0], q_ready[g])
            phase = 1
            slot = 0
            for start_n in range(0, N_CTX, BLOCK_N):
                tlx.barrier_wait(k_free[slot], phase)
                tlx.barrier_expect_bytes(k_ready[slot], BLOCK_N * HEAD_DIM * tlx.size_of(tlx.dtype_of(k_desc)))
                tlx.async_descriptor_load(k_desc, k_smem[slot], [row0 + start_n, 0], k_ready[slot])
                tlx.barrier_wait(v_free[slot], phase)
                tlx.barrier_expect_bytes(v_ready[slot], BLOCK_N * HEAD_DIM * tlx.size_of(tlx.dtype_of(v_desc)))
                tlx.async_descriptor_load(v_desc, v_smem[slot], [row0 + start_n, 0], v_ready[slot])
                phase = phase ^ (slot == SLOTS - 1)
                slot = (slot + 1) % SLOTS
        with tlx.async_task(num_warps=4, replicate=GROUPS, registers=240):
            cid: tl.constexpr = tlx.async_task_replica_id()
            start_m = tl.program_id(0)
            row0 = tl.program_id(1) * N_CTX
            qk_scale = sm_scale * 1.44269504
            m_i = tl.zeros([M_PER_GROUP], dtype=tl.float32) - float("inf")
            l_i = tl.zeros([M_PER_GROUP], dtype=tl.float32) + 1.0
            acc = tl.zeros([M_PER_GROUP, HEAD_DIM], dtype=tl.float32)
            tlx.barrier_wait(q_ready[cid], 0)
            phase = 0
            slot = 0
            for start_n in range(0, N_CTX, BLOCK_N):
                tlx.barrier_wait(k_ready[slot], phase)
                qk = tlx.async_dot(q_smem[cid], tlx.local_trans(k_smem[slot]))
                qk = tlx.async_dot_wait(0, qk)
                tlx.barrier_arrive(k_free[slot])
                m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                qk = qk * qk_scale - m_ij[:, None]
                p = tl.math.exp2(qk)
                alpha = tl.math.exp2(m_i - m_ij)
                l_i = l_i * alpha + tl.sum(p, 1)
                acc = acc * alpha[:, None]
                tlx.barrier_wait(v_ready[slot], phase)
                acc = tlx.async_dot(p.to(tlx.dtype_of(v_desc)), v_smem[slot], acc)
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(v_free[slot])
                m_i = m_ij
                phase = phase ^ (slot == SLOTS - 1)
                slot = (slot + 1) % SLOTS
            acc = acc / l_i[:, None]
            o_desc.store([row0 + start_m * BLOCK_M + cid * M_PER_GROUP, 0], acc.to(tlx.dtype_of(o_desc)))

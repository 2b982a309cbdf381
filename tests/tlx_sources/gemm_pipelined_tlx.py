"""A cp.async-pipelined Hopper GEMM written for the real TLX (Meta's triton fork): our own
rewrite of the pipelined-GEMM tutorial's idea. The tests swap its imports for tlx's and trace it."""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def gemm_pipelined_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                          stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    group = pid // tiles_per_group
    group_first_m = group * GROUP_M
    group_rows = min(tiles_m - group_first_m, GROUP_M)
    tile_m = group_first_m + (pid % tiles_per_group) % group_rows
    tile_n = (pid % tiles_per_group) // group_rows

    rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_tile_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_tile_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn

    a_smem = tlx.local_alloc((BLOCK_M, BLOCK_K), tlx.dtype_of(a_ptr), STAGES)
    b_smem = tlx.local_alloc((BLOCK_K, BLOCK_N), tlx.dtype_of(b_ptr), STAGES)

    # fill STAGES - 1 stages ahead
    for s in tl.range(0, STAGES - 1, loop_unroll_factor=STAGES - 1):
        ta = tlx.async_load(a_tile_ptrs, a_smem[s], mask=ks[None, :] < K - s * BLOCK_K)
        tb = tlx.async_load(b_tile_ptrs, b_smem[s], mask=ks[:, None] < K - s * BLOCK_K)
        tlx.async_load_commit_group([ta, tb])
        a_tile_ptrs += BLOCK_K * stride_ak
        b_tile_ptrs += BLOCK_K * stride_bk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=1):
        slot = kt % STAGES
        tlx.async_load_wait_group(STAGES - 2)
        acc = tlx.async_dot(a_smem[slot], b_smem[slot], acc)
        # the wgmma issued one iteration ago read the slot we refill next
        acc = tlx.async_dot_wait(1, acc)
        nxt = kt + STAGES - 1
        ta = tlx.async_load(a_tile_ptrs, a_smem[nxt % STAGES], mask=ks[None, :] < K - nxt * BLOCK_K)
        tb = tlx.async_load(b_tile_ptrs, b_smem[nxt % STAGES], mask=ks[:, None] < K - nxt * BLOCK_K)
        tlx.async_load_commit_group([ta, tb])
        a_tile_ptrs += BLOCK_K * stride_ak
        b_tile_ptrs += BLOCK_K * stride_bk
    acc = tlx.async_dot_wait(0, acc)

    out_rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tlx.dtype_of(c_ptr)), mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))

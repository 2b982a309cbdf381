"""Fence-placement patterns written for the real TLX (triton imports), compiled by
`scripts/fence_oracle.py` with the real TLX (differential oracle) and, imports swapped, with ours.
Our own kernels; each one isolates one canonical pattern or one of the issue's "where the real
TLX falls short" claims."""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def store_fence_tma(x_desc, y_desc, BLOCK: tl.constexpr, FENCE: tl.constexpr):
    """local_store -> (user fence) -> TMA store."""
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


@triton.jit
def reg_smem_wgmma(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   STORE_IN_LOOP: tl.constexpr):
    """register -> SMEM -> wgmma in a K loop; the stores before the loop or inside it. The view
    `a_s[0]` has several users (local_store, async_dot, async_dot_wait): falls-short claim (1)."""
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


@triton.jit
def tma_wgmma(a_desc, b_desc, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """TMA load + mbarrier wait -> wgmma: no fence is needed."""
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


@triton.jit
def ws_handoff(a_ptr, c_ptr, BM: tl.constexpr, BK: tl.constexpr):
    """Falls-short claim (2): the default task writes a tile with local_store and arrives on an
    mbarrier; a worker task waits on it and reads the tile with wgmma."""
    a_s = tlx.local_alloc((BM, BK), tl.float16, 1)
    full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            rm = tl.arange(0, BM)
            rk = tl.arange(0, BK)
            tlx.local_store(a_s[0], tl.load(a_ptr + rm[:, None] * BK + rk[None, :]))
            tlx.barrier_arrive(full[0])
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(full[0], 0)
            acc = tlx.async_dot(a_s[0], a_s[0])
            acc = tlx.async_dot_wait(0, acc)
            rm2 = tl.arange(0, BM)
            rn2 = tl.arange(0, BK)
            tl.store(c_ptr + rm2[:, None] * BK + rn2[None, :], acc)


@triton.jit
def branch_writer(x_ptr, y_desc, flag, BLOCK: tl.constexpr):
    """Falls-short claim (3): only one branch of an `if` writes the buffer the TMA store reads."""
    buf = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1)
    r = tl.arange(0, BLOCK)
    if flag > 0:
        tlx.local_store(buf[0], tl.load(x_ptr + r[:, None] * BLOCK + r[None, :]))
    tlx.async_descriptor_store(y_desc, buf[0], [0, 0])
    tlx.async_descriptor_store_wait(0)


@triton.jit
def gpu_sys_fences(x_ptr, flag_ptr):
    """Falls-short claim (4): tlx.fence("gpu") and tlx.fence("sys") must emit their fences."""
    tl.store(x_ptr, 1)
    tlx.fence("gpu")
    tl.store(flag_ptr, 1)
    tlx.fence("sys")
    tl.store(flag_ptr + 1, 1)


D64 = "tensordesc<fp16[64, 64]>"
CASES = [
    # name, kernel, signature, constexprs, num_warps
    ("local_store -> user fence -> TMA store", store_fence_tma, {"x_desc": D64, "y_desc": D64}, {"BLOCK": 64, "FENCE": True}, 4),
    ("local_store -> TMA store (no user fence)", store_fence_tma, {"x_desc": D64, "y_desc": D64}, {"BLOCK": 64, "FENCE": False}, 4),
    ("reg -> SMEM -> wgmma, stores before the K loop", reg_smem_wgmma,
     {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"}, {"BM": 64, "BN": 64, "BK": 64, "STORE_IN_LOOP": False}, 4),
    ("reg -> SMEM -> wgmma, stores inside the K loop", reg_smem_wgmma,
     {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"}, {"BM": 64, "BN": 64, "BK": 64, "STORE_IN_LOOP": True}, 4),
    ("TMA load + mbarrier wait -> wgmma", tma_wgmma,
     {"a_desc": D64, "b_desc": D64, "c_ptr": "*fp32", "K": "i32"}, {"BM": 64, "BN": 64, "BK": 64}, 4),
    ("WS: local_store + arrive -> wait + wgmma", ws_handoff, {"a_ptr": "*fp16", "c_ptr": "*fp32"}, {"BM": 64, "BK": 64}, 4),
    ("only one branch writes, TMA store after the if", branch_writer,
     {"x_ptr": "*fp16", "y_desc": D64, "flag": "i32"}, {"BLOCK": 64}, 4),
    ("tlx.fence gpu / sys", gpu_sys_fences, {"x_ptr": "*i32", "flag_ptr": "*i32"}, {}, 4),
]

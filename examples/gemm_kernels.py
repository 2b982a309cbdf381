"""The Hopper GEMM kernels of tlx.examples, written as TLX users write them: device code only.

This file uses nothing but the TLX API: with its imports (and decorators) swapped for
``triton`` / ``triton.language`` / ``triton.language.extra.tlx`` it compiles with Meta's TLX
unchanged (`scripts/tlxref_gemm_fences.py` does exactly that to compare proxy fences). The host
side (configs, descriptors, launches) is `tlx.examples.gemm`.

Kernels (C = A @ B, A: M x K, B: K x N, row-major, bf16/fp16 in and out, fp32 accumulation):

* `matmul_pipelined_kernel` — one CTA per C tile: TMA loads into a NUM_STAGES ring with full
  mbarriers, wgmma with one group in flight, TMA-store epilogue.
* `matmul_ws_kernel` — one CTA per C tile, warp-specialized: a TMA producer task and
  NUM_MMA_GROUPS consumer warpgroups splitting the tile along M, full/empty mbarrier rings.
* `matmul_persistent_kernel` — the warp-specialized kernel made persistent (cooperative): at
  most one CTA per SM walks the tiles in the grouped order (as few as finish in the same number
  of waves: `gemm.persistent_programs`); each consumer's TMA store of one tile
  overlaps its main loop of the next. EPI_SPLIT > 1 stores C in column chunks through two small
  buffers (`store_in_chunks`), leaving shared memory for a fourth stage.
* `matmul_streamk_kernel` — the persistent kernel with a stream-K tail: the tiles of whole waves
  as above, the last partial wave's k-iterations split evenly over all CTAs; partial sums go
  through an fp32 workspace to the CTA that owns the tile's last k-tile (flags, reset by it).
* `matmul_persistent_cluster_kernel` — the persistent kernel on 2-CTA clusters along M: each B
  tile is loaded once per cluster (half by each CTA) and multicast to both CTAs, stages are
  released on both CTAs' empty barriers (remote arrives), the two CTAs walk their tile pairs in
  lockstep with no cluster barrier per tile; EPI_SPLIT and stages as in the persistent kernel.

Proxy fences: every shared-memory access inside the K loops is async-proxy (TMA writes, wgmma
reads), ordered by mbarriers and wgmma waits, so no fence belongs there. The only generic write
is the epilogue's register -> shared store of C, fenced once before each TMA store of it.
"""
import tlx
import tlx.language as tl


@tlx.jit
def grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    """(pid_m, pid_n) of tile `tile_id` in the grouped order: tiles are numbered down a column
    group of GROUP_SIZE_M tile rows before moving one tile column right, so the tiles running at
    the same time share A row panels and B column panels in L2."""
    tiles_per_group = GROUP_SIZE_M * num_pid_n
    group = tile_id // tiles_per_group
    first_m = group * GROUP_SIZE_M
    rows = min(num_pid_m - first_m, GROUP_SIZE_M)  # the last group may be shorter
    in_group = tile_id % tiles_per_group
    return first_m + in_group % rows, in_group // rows


@tlx.jit
def add_partials(chunk, parts, q_first, q_end, PITCH: tl.constexpr, SLOT: tl.constexpr):
    """`chunk` plus the partial sums of stream-K workspace slots q_first .. q_end - 1 (fp32,
    SLOT elements apart): `parts` points at the chunk's first element in slot 0, rows PITCH
    apart. The read follows the chunk's register layout (no conversion)."""
    ROWS: tl.constexpr = chunk.shape[0]
    COLS: tl.constexpr = chunk.shape[1]
    ptrs = parts + tl.arange(0, ROWS)[:, None] * PITCH + tl.arange(0, COLS)[None, :]
    for q in range(q_first, q_end):
        chunk += tl.load(ptrs + q * SLOT)
    return chunk


@tlx.jit
def store_chunk(c_desc, c_smem, buf, chunk, off_m, off_n, parts=None, q_first=0, q_end=0,
                PITCH: tl.constexpr = 0, SLOT: tl.constexpr = 0, COL: tl.constexpr = 0):
    """TMA-store the register tile `chunk` at (off_m, off_n) through c_smem[buf], one of two
    buffers used in turn: the store issued from it two chunks ago must have read it first.
    With `parts` (stream-K: the tile's rows in workspace slot 0), the partial sums of slots
    q_first .. q_end - 1 at the chunk's columns (COL on) are added first: a chunk at a time, so
    a consumer never holds more than one chunk of them in registers."""
    if parts is not None:
        chunk = add_partials(chunk, parts + COL, q_first, q_end, PITCH, SLOT)
    tlx.async_descriptor_store_wait(1)
    tlx.local_store(c_smem[buf], chunk.to(tlx.dtype_of(c_desc)))
    tlx.fence("async_shared")  # generic stores above, a TMA (async proxy) read below
    tlx.async_descriptor_store(c_desc, c_smem[buf], [off_m, off_n])


@tlx.jit
def halves(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    """The left and right column halves of the ROWS x COLS register tile `x` (no data moves:
    the split is on a register bit of the wgmma accumulator layout)."""
    return tl.split(tl.permute(tl.reshape(x, (ROWS, 2, COLS // 2)), (0, 2, 1)))


@tlx.jit
def store_in_chunks(c_desc, c_smem, first_buf: tl.constexpr, acc, off_m, off_n,
                    ROWS: tl.constexpr, BN: tl.constexpr, EPI_SPLIT: tl.constexpr,
                    parts=None, q_first=0, q_end=0, SLOT: tl.constexpr = 0):
    """The sub-tiled epilogue: `acc` (rows x BN) stored as EPI_SPLIT (2 or 4) column chunks,
    alternating between c_smem[first_buf] and c_smem[first_buf + 1]; with `parts` (the rows
    of stream-K workspace slot 0) each chunk adds its partial sums (`store_chunk`)."""
    left, right = halves(acc, ROWS, BN)
    if EPI_SPLIT == 2:
        store_chunk(c_desc, c_smem, first_buf, left, off_m, off_n, parts, q_first, q_end, BN, SLOT, 0)
        store_chunk(c_desc, c_smem, first_buf + 1, right, off_m, off_n + BN // 2, parts, q_first, q_end, BN, SLOT,
                    BN // 2)
    else:
        q0, q1 = halves(left, ROWS, BN // 2)
        q2, q3 = halves(right, ROWS, BN // 2)
        store_chunk(c_desc, c_smem, first_buf, q0, off_m, off_n, parts, q_first, q_end, BN, SLOT, 0)
        store_chunk(c_desc, c_smem, first_buf + 1, q1, off_m, off_n + BN // 4, parts, q_first, q_end, BN, SLOT,
                    BN // 4)
        store_chunk(c_desc, c_smem, first_buf, q2, off_m, off_n + BN // 2, parts, q_first, q_end, BN, SLOT,
                    BN // 2)
        store_chunk(c_desc, c_smem, first_buf + 1, q3, off_m, off_n + 3 * (BN // 4), parts, q_first, q_end, BN,
                    SLOT, 3 * (BN // 4))


@tlx.jit
def release_stage(empty, slot, partner):
    """Hand ring slot `slot` back: on this CTA's empty barrier, and with a `partner` rank (2-CTA
    clusters, whose producers multicast into both CTAs) on the partner's too."""
    tlx.barrier_arrive(empty[slot])
    if partner is not None:
        tlx.barrier_arrive(empty[slot], remote_cta_rank=partner)


@tlx.jit
def consume_tile(a_smem, b_smem, full, empty, count, k_tiles, cid: tl.constexpr, NUM_STAGES: tl.constexpr,
                 NUM_MMA_GROUPS: tl.constexpr, partner=None):
    """A cooperative consumer's K loop over one tile whose first k-tile sits at ring position
    `count`: wait full, wgmma on its A rows and the whole B tile, release each stage as soon as
    the wgmma after it is issued and the one reading it is done (`release_stage`); returns the
    finished accumulator and the ring position after the tile."""
    slot = count % NUM_STAGES
    tlx.barrier_wait(full[slot], (count // NUM_STAGES) & 1)  # k-tile 0, peeled
    acc = tlx.async_dot(a_smem[slot * NUM_MMA_GROUPS + cid], b_smem[slot])
    for kt in range(1, k_tiles):
        slot = (count + kt) % NUM_STAGES
        tlx.barrier_wait(full[slot], ((count + kt) // NUM_STAGES) & 1)
        acc = tlx.async_dot(a_smem[slot * NUM_MMA_GROUPS + cid], b_smem[slot], acc)
        acc = tlx.async_dot_wait(1, acc)  # the wgmma of k-tile kt-1 is done with its stage
        release_stage(empty, (count + kt - 1) % NUM_STAGES, partner)
    acc = tlx.async_dot_wait(0, acc)
    count += k_tiles
    release_stage(empty, (count - 1) % NUM_STAGES, partner)
    return acc, count


@tlx.jit
def produce_k_tiles(a_desc, b_desc, a_smem, b_smem, full, empty, count, off_m, off_n, k_first, k_end,
                    BM_SPLIT: tl.constexpr, BK: tl.constexpr, NUM_STAGES: tl.constexpr,
                    NUM_MMA_GROUPS: tl.constexpr, STAGE_BYTES: tl.constexpr):
    """The producer's TMA loads of k-tiles k_first .. k_end - 1 of the C tile at (off_m, off_n)
    into the ring from position `count` (a stage is refilled once both consumers released it);
    returns the ring position after them."""
    for kt in range(k_first, k_end):
        pos = count + kt - k_first
        slot = pos % NUM_STAGES
        # a fresh barrier passes a wait on parity 1: the first lap does not block
        tlx.barrier_wait(empty[slot], ((pos // NUM_STAGES) & 1) ^ 1)
        tlx.barrier_expect_bytes(full[slot], STAGE_BYTES)
        for g in tl.static_range(NUM_MMA_GROUPS):
            tlx.async_descriptor_load(a_desc, a_smem[slot * NUM_MMA_GROUPS + g],
                                      [off_m + g * BM_SPLIT, kt * BK], full[slot])
        tlx.async_descriptor_load(b_desc, b_smem[slot], [kt * BK, off_n], full[slot])
    return count + k_end - k_first


@tlx.jit
def store_c_tile(c_desc, c_smem, cid: tl.constexpr, acc, off_m, off_n,
                 ROWS: tl.constexpr, BN: tl.constexpr, EPI_SPLIT: tl.constexpr):
    """Consumer `cid`'s C tile (ROWS x BN) out by TMA: EPI_SPLIT 1, whole through c_smem[cid]
    once its previous store has read it; else in chunks through c_smem[2 cid], [2 cid + 1]."""
    if EPI_SPLIT == 1:
        tlx.async_descriptor_store_wait(0)  # the previous tile's store has read c_smem[cid]
        tlx.local_store(c_smem[cid], acc.to(tlx.dtype_of(c_desc)))
        tlx.fence("async_shared")  # generic stores above, a TMA (async proxy) read below
        tlx.async_descriptor_store(c_desc, c_smem[cid], [off_m, off_n])
    else:
        store_in_chunks(c_desc, c_smem, 2 * cid, acc, off_m, off_n, ROWS, BN, EPI_SPLIT)


@tlx.jit
def produce_whole_tiles(a_desc, b_desc, a_smem, b_smem, full, empty, count, first_tile, end_tile, num_pid_m,
                        num_pid_n, k_tiles, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                        GROUP_SIZE_M: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_MMA_GROUPS: tl.constexpr,
                        NUM_SMS: tl.constexpr, STAGE_BYTES: tl.constexpr):
    """A persistent producer's loads of every k-tile of tiles first_tile, first_tile + NUM_SMS,
    ... below end_tile (grouped order) from ring position `count`; returns the position after."""
    for tile_id in range(first_tile, end_tile, NUM_SMS):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        count = produce_k_tiles(a_desc, b_desc, a_smem, b_smem, full, empty, count, pid_m * BM, pid_n * BN, 0,
                                k_tiles, BM // NUM_MMA_GROUPS, BK, NUM_STAGES, NUM_MMA_GROUPS, STAGE_BYTES)
    return count


@tlx.jit
def consume_whole_tiles(a_smem, b_smem, full, empty, c_desc, c_smem, count, first_tile, end_tile, num_pid_m,
                        num_pid_n, k_tiles, cid: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                        GROUP_SIZE_M: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_MMA_GROUPS: tl.constexpr,
                        NUM_SMS: tl.constexpr, EPI_SPLIT: tl.constexpr):
    """A persistent consumer's share of the tiles `produce_whole_tiles` loads: its rows of each,
    consumed from ring position `count` and stored (`store_c_tile`); returns the position after."""
    BM_SPLIT: tl.constexpr = BM // NUM_MMA_GROUPS
    for tile_id in range(first_tile, end_tile, NUM_SMS):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        acc, count = consume_tile(a_smem, b_smem, full, empty, count, k_tiles, cid, NUM_STAGES, NUM_MMA_GROUPS)
        store_c_tile(c_desc, c_smem, cid, acc, pid_m * BM + cid * BM_SPLIT, pid_n * BN, BM_SPLIT, BN, EPI_SPLIT)
    return count


@tlx.jit
def matmul_pipelined_kernel(a_desc, b_desc, c_desc, M, N, K,
                            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                            GROUP_SIZE_M: tl.constexpr, NUM_STAGES: tl.constexpr):
    """Software-pipelined TMA + wgmma GEMM, one BM x BN tile per CTA. Schedule (S = NUM_STAGES,
    k-tile kt lives in slot kt % S): the prologue issues the loads of k-tiles 0 .. S-2; then for
    each kt: wait full[kt % S], issue wgmma kt, async_dot_wait(1) (wgmma kt-1 is done, so its
    slot is free), issue the loads of k-tile kt+S-1 into that slot. Epilogue: wait(0), C to
    shared memory, fence, TMA store."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    pid_m, pid_n = grouped_tile(tl.program_id(0), num_pid_m, num_pid_n, GROUP_SIZE_M)
    off_m = pid_m * BM
    off_n = pid_n * BN

    a_smem = tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), NUM_STAGES)
    b_smem = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), NUM_STAGES)
    c_smem = tlx.local_alloc((BM, BN), tlx.dtype_of(c_desc), 1)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(tlx.dtype_of(a_desc))

    k_tiles = tl.cdiv(K, BK)
    for s in tl.static_range(NUM_STAGES - 1):  # prologue: NUM_STAGES - 1 k-tiles in flight
        if s < k_tiles:
            tlx.barrier_expect_bytes(full[s], STAGE_BYTES)
            tlx.async_descriptor_load(a_desc, a_smem[s], [off_m, s * BK], full[s])
            tlx.async_descriptor_load(b_desc, b_smem[s], [s * BK, off_n], full[s])

    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kt in range(0, k_tiles):
        slot = kt % NUM_STAGES
        tlx.barrier_wait(full[slot], (kt // NUM_STAGES) & 1)
        acc = tlx.async_dot(a_smem[slot], b_smem[slot], acc)
        acc = tlx.async_dot_wait(1, acc)  # the wgmma of k-tile kt-1 has read its slot
        nxt = kt + NUM_STAGES - 1
        if nxt < k_tiles:
            ns = nxt % NUM_STAGES  # the slot k-tile kt-1 used
            tlx.barrier_expect_bytes(full[ns], STAGE_BYTES)
            tlx.async_descriptor_load(a_desc, a_smem[ns], [off_m, nxt * BK], full[ns])
            tlx.async_descriptor_load(b_desc, b_smem[ns], [nxt * BK, off_n], full[ns])
    acc = tlx.async_dot_wait(0, acc)

    tlx.local_store(c_smem[0], acc.to(tlx.dtype_of(c_desc)))
    tlx.fence("async_shared")  # generic stores above, a TMA (async proxy) read below
    tlx.async_descriptor_store(c_desc, c_smem[0], [off_m, off_n])
    tlx.async_descriptor_store_wait(0)  # the CTA's shared memory must outlive the store


@tlx.jit
def matmul_ws_kernel(a_desc, b_desc, c_desc, M, N, K,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                     NUM_STAGES: tl.constexpr, NUM_MMA_GROUPS: tl.constexpr):
    """Warp-specialized TMA + wgmma GEMM, one BM x BN tile per CTA. The default task (4 warps,
    few registers) is the TMA producer; NUM_MMA_GROUPS consumer warpgroups (232 registers each)
    own BM / NUM_MMA_GROUPS rows of the tile. Stage s of the ring: full[s] (one expect-tx arrive
    by the producer, completed by the TMA bytes) and empty[s] (one arrive per consumer). Each
    consumer keeps one wgmma in flight and releases a stage one k-tile late."""
    BM_SPLIT: tl.constexpr = BM // NUM_MMA_GROUPS
    a_smem = tlx.local_alloc((BM_SPLIT, BK), tlx.dtype_of(a_desc), NUM_STAGES * NUM_MMA_GROUPS)
    b_smem = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), NUM_STAGES)
    c_smem = tlx.local_alloc((BM_SPLIT, BN), tlx.dtype_of(c_desc), NUM_MMA_GROUPS)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_MMA_GROUPS)
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(tlx.dtype_of(a_desc))

    with tlx.async_tasks():
        with tlx.async_task("default"):  # producer: TMA loads
            pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_SIZE_M)
            produce_k_tiles(a_desc, b_desc, a_smem, b_smem, full, empty, 0, pid_m * BM, pid_n * BN, 0,
                            tl.cdiv(K, BK), BM_SPLIT, BK, NUM_STAGES, NUM_MMA_GROUPS, STAGE_BYTES)

        with tlx.async_task(num_warps=4, replicate=NUM_MMA_GROUPS, registers=232):  # consumers: wgmma
            cid: tl.constexpr = tlx.async_task_replica_id()
            pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_SIZE_M)
            off_m = pid_m * BM + cid * BM_SPLIT
            off_n = pid_n * BN
            k_tiles = tl.cdiv(K, BK)
            tlx.barrier_wait(full[0], 0)  # k-tile 0, peeled: a fresh accumulator
            acc = tlx.async_dot(a_smem[cid], b_smem[0])
            for kt in range(1, k_tiles):
                slot = kt % NUM_STAGES
                tlx.barrier_wait(full[slot], (kt // NUM_STAGES) & 1)
                acc = tlx.async_dot(a_smem[slot * NUM_MMA_GROUPS + cid], b_smem[slot], acc)
                acc = tlx.async_dot_wait(1, acc)  # the wgmma of k-tile kt-1 is done with its stage
                tlx.barrier_arrive(empty[(kt - 1) % NUM_STAGES])
            acc = tlx.async_dot_wait(0, acc)
            tlx.barrier_arrive(empty[(k_tiles - 1) % NUM_STAGES])

            tlx.local_store(c_smem[cid], acc.to(tlx.dtype_of(c_desc)))
            tlx.fence("async_shared")  # generic stores above, a TMA (async proxy) read below
            tlx.async_descriptor_store(c_desc, c_smem[cid], [off_m, off_n])
            tlx.async_descriptor_store_wait(0)


@tlx.jit
def matmul_persistent_kernel(a_desc, b_desc, c_desc, M, N, K,
                             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                             NUM_STAGES: tl.constexpr, NUM_MMA_GROUPS: tl.constexpr, NUM_SMS: tl.constexpr,
                             EPI_SPLIT: tl.constexpr = 1):
    """The warp-specialized GEMM made persistent and cooperative: NUM_SMS CTAs (at most one per SM);
    CTA p computes tiles p, p + NUM_SMS, ... in the grouped order, its consumers splitting each
    tile along M. The mbarrier ring runs on across tiles (a running k-tile count gives slot and
    phase), so the producer loads the next tile while the consumers finish this one, and each
    consumer's TMA store of a tile is waited for only before it writes its C buffer again.

    EPI_SPLIT (1, 2 or 4) sub-tiles the epilogue: each consumer stores its BM_SPLIT x BN rows in
    EPI_SPLIT column chunks through two BM_SPLIT x (BN / EPI_SPLIT) buffers in turn (c_desc's
    block is one chunk), so a chunk's conversion overlaps the TMA store of the one before, and
    at EPI_SPLIT = 4 the C staging takes a quarter of the shared memory a whole tile does —
    room for a fourth 128x256x64 stage (CUTLASS's 4-stage ring with a sub-tiled epilogue)."""
    BM_SPLIT: tl.constexpr = BM // NUM_MMA_GROUPS
    a_smem = tlx.local_alloc((BM_SPLIT, BK), tlx.dtype_of(a_desc), NUM_STAGES * NUM_MMA_GROUPS)
    b_smem = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), NUM_STAGES)
    if EPI_SPLIT == 1:
        c_smem = tlx.local_alloc((BM_SPLIT, BN), tlx.dtype_of(c_desc), NUM_MMA_GROUPS)
    else:
        c_smem = tlx.local_alloc((BM_SPLIT, BN // EPI_SPLIT), tlx.dtype_of(c_desc), 2 * NUM_MMA_GROUPS)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_MMA_GROUPS)
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(tlx.dtype_of(a_desc))

    with tlx.async_tasks():
        with tlx.async_task("default"):  # producer: TMA loads for every tile of this CTA
            num_pid_m = tl.cdiv(M, BM)
            num_pid_n = tl.cdiv(N, BN)
            k_tiles = tl.cdiv(K, BK)
            count = 0  # k-tiles loaded so far: slot count % NUM_STAGES, lap count // NUM_STAGES
            produce_whole_tiles(a_desc, b_desc, a_smem, b_smem, full, empty, count, tl.program_id(0),
                                num_pid_m * num_pid_n, num_pid_m, num_pid_n, k_tiles, BM, BN, BK, GROUP_SIZE_M,
                                NUM_STAGES, NUM_MMA_GROUPS, NUM_SMS, STAGE_BYTES)

        with tlx.async_task(num_warps=4, replicate=NUM_MMA_GROUPS, registers=232):  # consumers: wgmma + store
            cid: tl.constexpr = tlx.async_task_replica_id()
            num_pid_m = tl.cdiv(M, BM)
            num_pid_n = tl.cdiv(N, BN)
            k_tiles = tl.cdiv(K, BK)
            count = 0  # k-tiles consumed so far (the producer's count, one tile behind at most)
            consume_whole_tiles(a_smem, b_smem, full, empty, c_desc, c_smem, count, tl.program_id(0),
                                num_pid_m * num_pid_n, num_pid_m, num_pid_n, k_tiles, cid, BM, BN, GROUP_SIZE_M,
                                NUM_STAGES, NUM_MMA_GROUPS, NUM_SMS, EPI_SPLIT)
            tlx.async_descriptor_store_wait(0)  # the CTA's shared memory must outlive the last store


@tlx.jit
def streamk_range(pid, total, NUM_SMS: tl.constexpr):
    """[start, end) of CTA `pid`'s share of the `total` stream-K k-iterations: equal shares,
    the first total % NUM_SMS CTAs one more."""
    base = total // NUM_SMS
    extra = total % NUM_SMS
    start = pid * base + min(pid, extra)
    end = start + base
    if pid < extra:
        end += 1
    return start, end


@tlx.jit
def store_partial(acc, rows_ptr, ROWS: tl.constexpr, BN: tl.constexpr):
    """Store the ROWS x BN fp32 partial sum `acc` to the row-major rows at `rows_ptr`, a column
    quarter at a time in the accumulator's own layout (each lane quad writes whole 32-byte
    sectors; the pointers of one quarter are live at a time)."""
    left, right = halves(acc, ROWS, BN)
    q0, q1 = halves(left, ROWS, BN // 2)
    q2, q3 = halves(right, ROWS, BN // 2)
    ptrs = rows_ptr + tl.arange(0, ROWS)[:, None] * BN + tl.arange(0, BN // 4)[None, :]
    tl.store(ptrs, q0)
    tl.store(ptrs + BN // 4, q1)
    tl.store(ptrs + BN // 2, q2)
    tl.store(ptrs + 3 * (BN // 4), q3)


@tlx.jit
def publish_partial(flag, cid: tl.constexpr):
    """Say on `flag` that consumer `cid`'s partial sum is in its workspace slot: the warpgroup's
    stores happen before its leader's gpu-scope fence (named barrier), which orders them
    before the flag."""
    tlx.named_barrier_wait(11 + cid, 128)
    tlx.fence("gpu")
    tl.atomic_xchg(flag, 1, sem="relaxed")


@tlx.jit
def await_partial(flag):
    """Wait until `flag` says a partial sum is published (an acquire: the reads after it see the
    sum), then zero the flag again for the next launch."""
    while tl.atomic_add(flag, 0, sem="acquire") == 0:
        pass
    tl.atomic_xchg(flag, 0, sem="relaxed")


@tlx.jit
def matmul_streamk_kernel(a_desc, b_desc, c_desc, ws_ptr, flag_ptr, M, N, K,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                          NUM_STAGES: tl.constexpr, NUM_MMA_GROUPS: tl.constexpr, NUM_SMS: tl.constexpr,
                          EPI_SPLIT: tl.constexpr = 4):
    """The persistent cooperative GEMM with a stream-K tail (hybrid data-parallel + stream-K):
    the tiles that fill whole waves of NUM_SMS CTAs run as in `matmul_persistent_kernel`; the
    k-iterations of the last, partial wave's tiles are split evenly over all CTAs, so no SM idles
    while others finish that wave (the 2-4 % a 128x256 tile grid loses on 132 SMs).

    CTA p's stream-K share is a run of k-iterations that may start and end inside a tile. It
    takes its pieces last tile first: a piece that does not reach its tile's last k-tile (only
    ever the first piece) is a partial sum, stored in fp32 to the CTA's workspace slot ws_ptr[p]
    (each consumer its rows) and published on flag_ptr[p, consumer] after the next piece's main
    loop, so the stores land while the tensor cores work; the piece that does is the tile's owner,
    which adds the partial sums of the CTAs before it (acquire, then the flag is reset to 0 for
    the next launch) and stores the tile, adding the partial sums a column chunk at a time as it
    stores them (the sub-tiled epilogue, EPI_SPLIT 2 or 4: a whole 64 x 256 fp32 partial would
    want 128 more registers than a consumer has). Every CTA publishes before it waits and waits only for
    lower CTAs, so all CTAs resident at once (one per SM) never deadlock. The whole tiles come
    first, walked in step by all CTAs as in the persistent kernel, the stream-K pieces after them
    (pieces first measured 1.7-8.8 points slower: docs/performance.md). The flags must be zero at
    launch (the host keeps them zeroed) and the workspace holds NUM_SMS x BM x BN fp32."""
    BM_SPLIT: tl.constexpr = BM // NUM_MMA_GROUPS
    a_smem = tlx.local_alloc((BM_SPLIT, BK), tlx.dtype_of(a_desc), NUM_STAGES * NUM_MMA_GROUPS)
    b_smem = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), NUM_STAGES)
    c_smem = tlx.local_alloc((BM_SPLIT, BN // EPI_SPLIT), tlx.dtype_of(c_desc), 2 * NUM_MMA_GROUPS)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_MMA_GROUPS)
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(tlx.dtype_of(a_desc))

    with tlx.async_tasks():
        with tlx.async_task("default"):  # producer: the whole tiles, then the stream-K pieces
            num_pid_m = tl.cdiv(M, BM)
            num_pid_n = tl.cdiv(N, BN)
            k_tiles = tl.cdiv(K, BK)
            tiles = num_pid_m * num_pid_n
            dp_tiles = tiles - tiles % NUM_SMS  # whole waves; the rest is split by k-iteration
            pid = tl.program_id(0)
            sk_start, sk_end = streamk_range(pid, (tiles - dp_tiles) * k_tiles, NUM_SMS)
            count = 0  # a run-time 0: passed as a literal it would be a constexpr the helper's loop cannot carry
            count = produce_whole_tiles(a_desc, b_desc, a_smem, b_smem, full, empty, count, pid, dp_tiles, num_pid_m,
                                        num_pid_n, k_tiles, BM, BN, BK, GROUP_SIZE_M, NUM_STAGES, NUM_MMA_GROUPS,
                                        NUM_SMS, STAGE_BYTES)
            it_end = sk_end
            while it_end > sk_start:  # this CTA's pieces, last tile first
                t0 = ((it_end - 1) // k_tiles) * k_tiles  # the piece's tile starts at iteration t0
                k0 = max(sk_start, t0) - t0
                pid_m, pid_n = grouped_tile(dp_tiles + t0 // k_tiles, num_pid_m, num_pid_n, GROUP_SIZE_M)
                count = produce_k_tiles(a_desc, b_desc, a_smem, b_smem, full, empty, count, pid_m * BM, pid_n * BN,
                                        k0, it_end - t0, BM_SPLIT, BK, NUM_STAGES, NUM_MMA_GROUPS, STAGE_BYTES)
                it_end = t0 + k0

        with tlx.async_task(num_warps=4, replicate=NUM_MMA_GROUPS, registers=232):  # consumers
            cid: tl.constexpr = tlx.async_task_replica_id()
            num_pid_m = tl.cdiv(M, BM)
            num_pid_n = tl.cdiv(N, BN)
            k_tiles = tl.cdiv(K, BK)
            tiles = num_pid_m * num_pid_n
            dp_tiles = tiles - tiles % NUM_SMS
            pid = tl.program_id(0)
            total = (tiles - dp_tiles) * k_tiles
            sk_start, sk_end = streamk_range(pid, total, NUM_SMS)
            count = 0  # run-time, as the producer's
            count = consume_whole_tiles(a_smem, b_smem, full, empty, c_desc, c_smem, count, pid, dp_tiles, num_pid_m,
                                        num_pid_n, k_tiles, cid, BM, BN, GROUP_SIZE_M, NUM_STAGES, NUM_MMA_GROUPS,
                                        NUM_SMS, EPI_SPLIT)
            unpublished = 0
            it_end = sk_end
            while it_end > sk_start:
                t0 = ((it_end - 1) // k_tiles) * k_tiles
                k0 = max(sk_start, t0) - t0
                k1 = it_end - t0
                pid_m, pid_n = grouped_tile(dp_tiles + t0 // k_tiles, num_pid_m, num_pid_n, GROUP_SIZE_M)
                acc, count = consume_tile(a_smem, b_smem, full, empty, count, k1 - k0, cid, NUM_STAGES, NUM_MMA_GROUPS)
                if unpublished:  # the first piece's partial sum had this piece's main loop to land
                    publish_partial(flag_ptr + pid * NUM_MMA_GROUPS + cid, cid)
                    unpublished = 0
                if k1 < k_tiles:  # a partial sum (only ever the first piece): store it, publish it later
                    store_partial(acc, ws_ptr + (pid * BM + cid * BM_SPLIT) * BN, BM_SPLIT, BN)
                    unpublished = 1
                else:  # the owner: wait for the partial sums of CTAs pid - 1, pid - 2, ... back to k-tile 0
                    q_first = pid
                    more = k0 > 0
                    while more:
                        q_first -= 1
                        await_partial(flag_ptr + q_first * NUM_MMA_GROUPS + cid)
                        q_start, q_end = streamk_range(q_first, total, NUM_SMS)
                        more = q_start > t0
                    # ... and add them chunk by chunk as the tile is stored
                    store_in_chunks(c_desc, c_smem, 2 * cid, acc, pid_m * BM + cid * BM_SPLIT, pid_n * BN, BM_SPLIT,
                                    BN, EPI_SPLIT, ws_ptr + cid * BM_SPLIT * BN, q_first, pid, BM * BN)
                it_end = t0 + k0
            if unpublished:  # the CTA's only piece was a partial sum
                publish_partial(flag_ptr + pid * NUM_MMA_GROUPS + cid, cid)
            tlx.async_descriptor_store_wait(0)  # the CTA's shared memory must outlive the last store


@tlx.jit
def matmul_pingpong_kernel(a_desc, b_desc, c_desc, M, N, K,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                           NUM_STAGES: tl.constexpr, NUM_SMS: tl.constexpr):
    """The persistent warp-specialized GEMM in ping-pong form: each of the two consumer
    warpgroups owns whole BM x BN tiles, taking this CTA's tiles in turn (consumer c gets its
    j-th, j = c, c + 2, ...), and their main loops alternate — named barriers 9 and 10 hand the
    tensor cores over once one consumer has issued all its wgmmas of a tile — so one consumer's
    epilogue runs while the other computes. The hand-over also keeps every mbarrier wait at
    most one ring lap ahead (a consumer only starts on its tile's k-tiles once the other has
    waited for all of its own), which parity waits need. Producer as in the cooperative kernel,
    one expect-tx arrive and two TMA loads per stage; a stage is released by the one consumer
    that read it."""
    a_smem = tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), NUM_STAGES)
    b_smem = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), NUM_STAGES)
    c_smem = tlx.local_alloc((BM, BN), tlx.dtype_of(c_desc), 2)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(tlx.dtype_of(a_desc))

    with tlx.async_tasks():
        with tlx.async_task("default"):  # producer: TMA loads for every tile of this CTA, in order
            num_pid_m = tl.cdiv(M, BM)
            num_pid_n = tl.cdiv(N, BN)
            k_tiles = tl.cdiv(K, BK)
            count = 0
            for tile_id in range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
                pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
                for kt in range(0, k_tiles):
                    slot = count % NUM_STAGES
                    tlx.barrier_wait(empty[slot], ((count // NUM_STAGES) & 1) ^ 1)
                    tlx.barrier_expect_bytes(full[slot], STAGE_BYTES)
                    tlx.async_descriptor_load(a_desc, a_smem[slot], [pid_m * BM, kt * BK], full[slot])
                    tlx.async_descriptor_load(b_desc, b_smem[slot], [kt * BK, pid_n * BN], full[slot])
                    count += 1

        with tlx.async_task(num_warps=4, replicate=2, registers=232):  # two consumers, whole tiles each
            cid: tl.constexpr = tlx.async_task_replica_id()
            num_pid_m = tl.cdiv(M, BM)
            num_pid_n = tl.cdiv(N, BN)
            k_tiles = tl.cdiv(K, BK)
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)  # consumer 0 computes first
            j = cid  # this consumer's tiles are the CTA's j-th, j = cid, cid + 2, ...
            for tile_id in range(tl.program_id(0) + cid * NUM_SMS, num_pid_m * num_pid_n, 2 * NUM_SMS):
                pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
                count = j * k_tiles  # ring position of this tile's first k-tile
                if cid == 0:
                    tlx.named_barrier_wait(9, 256)  # the other consumer has issued its main loop
                else:
                    tlx.named_barrier_wait(10, 256)
                slot = count % NUM_STAGES
                tlx.barrier_wait(full[slot], (count // NUM_STAGES) & 1)  # k-tile 0, peeled
                acc = tlx.async_dot(a_smem[slot], b_smem[slot])
                for kt in range(1, k_tiles):
                    slot = (count + kt) % NUM_STAGES
                    tlx.barrier_wait(full[slot], ((count + kt) // NUM_STAGES) & 1)
                    acc = tlx.async_dot(a_smem[slot], b_smem[slot], acc)
                    acc = tlx.async_dot_wait(1, acc)  # the wgmma of k-tile kt-1 is done with its stage
                    tlx.barrier_arrive(empty[(count + kt - 1) % NUM_STAGES])
                if cid == 0:
                    tlx.named_barrier_arrive(10, 256)  # all wgmmas issued: the other consumer's turn
                else:
                    tlx.named_barrier_arrive(9, 256)
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(empty[(count + k_tiles - 1) % NUM_STAGES])

                tlx.async_descriptor_store_wait(0)  # this consumer's previous store has read c_smem[cid]
                tlx.local_store(c_smem[cid], acc.to(tlx.dtype_of(c_desc)))
                tlx.fence("async_shared")  # generic stores above, a TMA (async proxy) read below
                tlx.async_descriptor_store(c_desc, c_smem[cid], [pid_m * BM, pid_n * BN])
                j += 2
            tlx.async_descriptor_store_wait(0)


@tlx.jit
def matmul_persistent_cluster_kernel(a_desc, b_desc, c_desc, M, N, K,
                                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                                     GROUP_SIZE_M: tl.constexpr, NUM_STAGES: tl.constexpr,
                                     NUM_MMA_GROUPS: tl.constexpr, NUM_SMS: tl.constexpr,
                                     EPI_SPLIT: tl.constexpr = 1):
    """The persistent warp-specialized GEMM on clusters of 2 CTAs along M (launched with
    ctas_per_cga=(2, 1, 1)): the two CTAs of a cluster compute the two C tiles of one 2*BM x BN
    block, which share their B panel, and walk the blocks in lockstep (grouped order over
    blocks; GROUP_SIZE_M counts blocks, i.e. pairs of tile rows). Each CTA loads its own A
    tiles and one half of the B tile (b_desc moves BK x BN/2: CTA r the columns r * BN/2 ...),
    multicast into both CTAs — half the B traffic from L2, the TMA issue split evenly between
    the two producers (CUTLASS's multicast split).

    Both CTAs' buffers of a stage must be free before either CTA's producer refills it (its
    multicast writes the partner's B), so every consumer releases a stage on the empty barrier of
    both CTAs (a remote arrive to the partner): empty counts 2 * NUM_MMA_GROUPS arrivals. Every
    CTA's full barrier expects its A tiles and the B tile, whichever CTA issued it. The stage
    hand-offs need no cluster-scope fence (the compiler releases the remote arrive at CTA scope:
    the consumers read the stage through wgmma only), and nothing synchronizes the cluster per
    tile: one cluster barrier after the mbarrier inits (placed by the compiler) and one at the
    end of every task, so that no CTA exits while its partner may still multicast into it or
    arrive on its barriers. EPI_SPLIT as in `matmul_persistent_kernel`."""
    BM_SPLIT: tl.constexpr = BM // NUM_MMA_GROUPS
    a_smem = tlx.local_alloc((BM_SPLIT, BK), tlx.dtype_of(a_desc), NUM_STAGES * NUM_MMA_GROUPS)
    b_smem = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), NUM_STAGES)
    if EPI_SPLIT == 1:
        c_smem = tlx.local_alloc((BM_SPLIT, BN), tlx.dtype_of(c_desc), NUM_MMA_GROUPS)
    else:
        c_smem = tlx.local_alloc((BM_SPLIT, BN // EPI_SPLIT), tlx.dtype_of(c_desc), 2 * NUM_MMA_GROUPS)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2 * NUM_MMA_GROUPS)
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(tlx.dtype_of(a_desc))
    NUM_CLUSTERS: tl.constexpr = NUM_SMS // 2

    with tlx.async_tasks():
        with tlx.async_task("default"):  # producer: this CTA's A tiles, half of each B tile (multicast)
            rank = tlx.cluster_cta_rank()
            num_pid_m2 = tl.cdiv(M, 2 * BM)  # blocks of two tile rows, one per cluster
            num_pid_n = tl.cdiv(N, BN)
            k_tiles = tl.cdiv(K, BK)
            count = 0
            for tile_id in range(tl.program_id(0) // 2, num_pid_m2 * num_pid_n, NUM_CLUSTERS):
                pid_m2, pid_n = grouped_tile(tile_id, num_pid_m2, num_pid_n, GROUP_SIZE_M)
                off_m = (pid_m2 * 2 + rank) * BM
                off_n = pid_n * BN
                for kt in range(0, k_tiles):
                    slot = count % NUM_STAGES
                    tlx.barrier_wait(empty[slot], ((count // NUM_STAGES) & 1) ^ 1)  # free in both CTAs
                    tlx.barrier_expect_bytes(full[slot], STAGE_BYTES)
                    for g in tl.static_range(NUM_MMA_GROUPS):
                        tlx.async_descriptor_load(a_desc, a_smem[slot * NUM_MMA_GROUPS + g],
                                                  [off_m + g * BM_SPLIT, kt * BK], full[slot])
                    b_half = tlx.local_slice(b_smem[slot], [0, rank * (BN // 2)], [BK, BN // 2])
                    tlx.async_descriptor_load(b_desc, b_half, [kt * BK, off_n + rank * (BN // 2)], full[slot],
                                              multicast_targets=[0, 1])
                    count += 1
            tlx.cluster_barrier()

        with tlx.async_task(num_warps=4, replicate=NUM_MMA_GROUPS, registers=232):  # consumers: wgmma + store
            cid: tl.constexpr = tlx.async_task_replica_id()
            partner = tlx.cluster_cta_rank() ^ 1
            rank = tlx.cluster_cta_rank()
            num_pid_m2 = tl.cdiv(M, 2 * BM)
            num_pid_n = tl.cdiv(N, BN)
            k_tiles = tl.cdiv(K, BK)
            count = 0
            for tile_id in range(tl.program_id(0) // 2, num_pid_m2 * num_pid_n, NUM_CLUSTERS):
                pid_m2, pid_n = grouped_tile(tile_id, num_pid_m2, num_pid_n, GROUP_SIZE_M)
                off_m = (pid_m2 * 2 + rank) * BM + cid * BM_SPLIT
                off_n = pid_n * BN
                acc, count = consume_tile(a_smem, b_smem, full, empty, count, k_tiles, cid, NUM_STAGES,
                                          NUM_MMA_GROUPS, partner)

                store_c_tile(c_desc, c_smem, cid, acc, off_m, off_n, BM_SPLIT, BN, EPI_SPLIT)
            tlx.async_descriptor_store_wait(0)
            tlx.cluster_barrier()

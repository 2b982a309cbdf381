"""The Hopper flash-attention kernels of tlx.examples, written as TLX users write them: device
code only (the host side — configs, descriptors, launches, autograd — is `tlx.examples.attention`).

This file uses nothing but the TLX API: with its imports (and decorators) swapped for
``triton`` / ``triton.language`` / ``triton.language.extra.tlx`` it is TLX source.

Tensors are (batch, heads, seq, head_dim) — ``Z, H, N, D`` — and reach the kernels as 4-D TMA
descriptors whose blocks are ``[1, 1, rows, D]``: a block that runs past ``N`` reads zeros and a
store that runs past it is clipped by the TMA unit, so any sequence length works without padding
and no tile ever touches another head. The log-sum-exp rows (``LSE``, fp32, natural log) and the
backward's ``Delta`` rows are (Z, H, N) fp32 arrays; the forward writes LSE contiguous, the
backward reads both with the rows of (batch, head) zh at zh * zh_stride, N rounded up to a
multiple of 4 (a TMA stride must be 16-byte aligned), so that the dK/dV kernel can move them by
TMA.

Forward (FlashAttention-3's design for Hopper):

* `attn_fwd_kernel` — one CTA per (128-row Q block, batch x head), the longest causal blocks
  launched first. A producer warpgroup (24 registers) streams K and V through a NUM_STAGES ring
  with separate full/empty mbarriers for K and for V (QK^T starts before V lands); two consumer
  warpgroups (240 registers) own 64 Q rows each and share every K/V tile. Each consumer
  overlaps the softmax of block j with its own PV wgmma of block j-1 (intra-warpgroup
  pipelining) and the two consumers take turns at the tensor cores through named barriers
  (ping-pong), so one's softmax runs under the other's wgmmas. exp2 with log2(e) folded into the
  scale; P is converted in registers and fed to wgmma as the register A operand; causal masking
  only on the blocks that cross the diagonal or the sequence end; O goes out by TMA store
  through the consumer's Q buffer (dead by then), LSE by a masked store.
* `attn_fwd_persistent_kernel` — the same pipeline in one CTA per SM, walking (batch x head,
  Q block) tiles, longest first for causal; the K/V ring and the ping-pong run on across tiles.
* `attn_fwd_overlap_kernel` — persistent, with the tile boundary overlapped: Q double-buffered
  (loaded a tile ahead), each consumer's first S wgmma of a tile issued with the previous tile's
  last PV wgmma and the previous O stored (smem + TMA store, not waited for) under the other
  consumer's turn; heads-major tiles, causal ones in balanced long/short pairs (d64 and d128).

Backward (FlashAttention-2's algorithm on Hopper's asynchronous units):

* `attn_bwd_preprocess_kernel` — Delta = rowsum(dO * O) (and LSE's rows copied to a 16-byte
  aligned stride when N is not a multiple of 4).
* `attn_bwd_dkdv_kernel` — one CTA per (K/V block, batch x head): a producer streams Q, dO and
  their LSE and Delta rows through a ring by TMA; the consumers recompute
  P^T = exp2(K Q^T * scale - LSE) and accumulate dV += P^T dO, dK += dS^T Q with
  dS^T = P^T * (V dO^T - Delta). For head_dim 256 the two
  consumers split the head dimension of dK/dV instead of the K/V rows (64 x 256 fp32 twice does
  not fit a warpgroup's registers).
* `attn_bwd_dq_kernel` — one CTA per (Q block, batch x head): dQ += dS K over the K/V blocks.

Proxy fences: every shared-memory write of the main loops is async-proxy (TMA), and every read
is a wgmma's, ordered by mbarriers and wgmma waits — but for the dK/dV consumers' ld.shared of
the LSE and Delta rows, which the next TMA into the stage overwrites: a generic read then an
async write, so the dK/dV producer fences once per stage before that TMA. The only generic
writes are the epilogues' register -> shared stores of O / dQ / dK / dV before their TMA
stores, fenced there once.
"""
import tlx
import tlx.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) == exp2(x * LOG2E); a constexpr global, as Triton requires
LN2 = tl.constexpr(0.6931471805599453)


# ---- forward: the producer ------------------------------------------------------------------------

@tlx.jit
def _fwd_kv_blocks(start_m, N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """How many K/V blocks Q block `start_m` visits, and how many of them need no mask (they lie
    wholly below the diagonal and inside the sequence for every row of the block)."""
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
        n_blocks = tl.cdiv(hi, BLOCK_N)
        n_full = tl.minimum((start_m * BLOCK_M + 1) // BLOCK_N, N_CTX // BLOCK_N)
    else:
        n_blocks = tl.cdiv(N_CTX, BLOCK_N)
        n_full = N_CTX // BLOCK_N
    return n_blocks, n_full


@tlx.jit
def _fwd_produce_tile(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty,
                      v_full, v_empty, off_z, off_h, start_m, tile_phase, kv_count, n_blocks,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                      NUM_STAGES: tl.constexpr):
    """TMA loads of one Q block (one half per consumer) and its K/V blocks. K of the first block
    goes first, so a persistent CTA fetches it while the consumers still hold the previous
    tile's Q; V's of a block follow K's (the consumers need K first). Returns the ring count."""
    SPLIT: tl.constexpr = BLOCK_M // 2
    Q_BYTES: tl.constexpr = SPLIT * HEAD_DIM * tlx.size_of(tlx.dtype_of(q_desc))
    KV_BYTES: tl.constexpr = BLOCK_N * HEAD_DIM * tlx.size_of(tlx.dtype_of(k_desc))
    slot = kv_count % NUM_STAGES
    phase = (kv_count // NUM_STAGES) & 1
    tlx.barrier_wait(k_empty[slot], phase ^ 1)  # a fresh barrier passes a wait on parity 1
    tlx.barrier_expect_bytes(k_full[slot], KV_BYTES)
    tlx.async_descriptor_load(k_desc, k_smem[slot], [off_z, off_h, 0, 0], k_full[slot])
    for g in tl.static_range(2):
        tlx.barrier_wait(q_empty[g], tile_phase ^ 1)
        tlx.barrier_expect_bytes(q_full[g], Q_BYTES)
        tlx.async_descriptor_load(q_desc, q_smem[g], [off_z, off_h, start_m * BLOCK_M + g * SPLIT, 0], q_full[g])
    tlx.barrier_wait(v_empty[slot], phase ^ 1)
    tlx.barrier_expect_bytes(v_full[slot], KV_BYTES)
    tlx.async_descriptor_load(v_desc, v_smem[slot], [off_z, off_h, 0, 0], v_full[slot])
    kv_count += 1
    for j in range(1, n_blocks):
        slot = kv_count % NUM_STAGES
        phase = (kv_count // NUM_STAGES) & 1
        tlx.barrier_wait(k_empty[slot], phase ^ 1)
        tlx.barrier_expect_bytes(k_full[slot], KV_BYTES)
        tlx.async_descriptor_load(k_desc, k_smem[slot], [off_z, off_h, j * BLOCK_N, 0], k_full[slot])
        tlx.barrier_wait(v_empty[slot], phase ^ 1)
        tlx.barrier_expect_bytes(v_full[slot], KV_BYTES)
        tlx.async_descriptor_load(v_desc, v_smem[slot], [off_z, off_h, j * BLOCK_N, 0], v_full[slot])
        kv_count += 1
    return kv_count


# ---- forward: the consumers -----------------------------------------------------------------------

@tlx.jit
def _tensor_core_turn(cid: tl.constexpr):
    """Wait for this consumer's turn at the tensor cores (named barrier 9 for consumer 0, 10 for
    consumer 1: the other consumer arrives on it once it has issued its wgmmas)."""
    if cid == 0:
        tlx.named_barrier_wait(9, 256)
    else:
        tlx.named_barrier_wait(10, 256)


@tlx.jit
def _tensor_core_pass(cid: tl.constexpr):
    """Give the tensor cores to the other consumer (all of this turn's wgmmas are issued)."""
    if cid == 0:
        tlx.named_barrier_arrive(10, 256)
    else:
        tlx.named_barrier_arrive(9, 256)


@tlx.jit
def _online_softmax(qk, m_i, l_i, qk_scale, offs_m, n0, N_CTX, P_DTYPE: tl.constexpr,
                    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr):
    """One block of the online softmax in base 2: the new running max m (of qk * qk_scale),
    P = exp2(qk * qk_scale - m) converted to P_DTYPE (the PV wgmma's register operand: converted
    here, not in the tensor-core turn, and half the registers to carry), the rescale factor
    alpha = exp2(m_old - m) and the running sum l (of the fp32 P). With MASK, columns past the
    sequence end (and above the diagonal when CAUSAL) are -inf. A row never sees only -inf:
    block 0, always visited first, holds column 0 (valid for every row)."""
    if MASK:
        offs_n = n0 + tl.arange(0, BLOCK_N)
        keep = offs_n[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(keep, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    return p.to(P_DTYPE), m_new, l_i, alpha


@tlx.jit
def _fwd_kv_step(q_view, k_smem, v_smem, k_full, k_empty, v_full, v_empty, p, alpha, m_i, l_i, acc, qk_scale,
                 offs_m, j, kv_count, N_CTX, cid: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                 NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr, MASK: tl.constexpr, RESCALE_EARLY: tl.constexpr):
    """K/V block j (ring position kv_count) for one consumer, with block j-1's P and rescale
    factor alpha in registers. In this consumer's tensor-core turn: issue S = Q K_j^T, then
    O += P_{j-1} V_{j-1}. Then wait for S only (one wgmma group still in flight), run the softmax
    of block j under the PV wgmma and wait for it. O is rescaled by alpha_{j-1} before its PV
    wgmma: with RESCALE_EARLY between the two issues, under this consumer's own S wgmma
    (FlashAttention-3's order; the returned alpha is alpha_j, still to apply), otherwise right
    after the previous PV wait (O leaves the step rescaled by alpha_j)."""
    slot = kv_count % NUM_STAGES
    prev = (kv_count - 1) % NUM_STAGES
    tlx.barrier_wait(k_full[slot], (kv_count // NUM_STAGES) & 1)
    tlx.barrier_wait(v_full[prev], ((kv_count - 1) // NUM_STAGES) & 1)
    _tensor_core_turn(cid)
    qk = tlx.async_dot(q_view, tlx.local_trans(tlx.local_reshape(k_smem[slot], (BLOCK_N, HEAD_DIM))))
    if RESCALE_EARLY:
        acc = acc * alpha[:, None]  # CUDA cores, while the S wgmma runs
    acc = tlx.async_dot(p, tlx.local_reshape(v_smem[prev], (BLOCK_N, HEAD_DIM)), acc)
    _tensor_core_pass(cid)
    qk = tlx.async_dot_wait(1, qk)  # S is done (wgmmas retire in order); the PV wgmma runs on
    tlx.barrier_arrive(k_empty[slot])
    p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, offs_m, j * BLOCK_N, N_CTX,
                                         tlx.dtype_of(v_smem), BLOCK_N, CAUSAL, MASK)
    acc = tlx.async_dot_wait(0, acc)
    tlx.barrier_arrive(v_empty[prev])
    if not RESCALE_EARLY:
        acc = acc * alpha[:, None]
    return p, alpha, m_i, l_i, acc


@tlx.jit
def _fwd_consume_tile(q_smem, k_smem, v_smem, o_smem, q_full, q_empty, k_full, k_empty, v_full, v_empty,
                      o_desc, lse_ptr, qk_scale, off_z, off_h, off_zh, start_m, tile_phase, kv_count, N_CTX,
                      n_blocks, n_full, cid: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      HEAD_DIM: tl.constexpr, NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr,
                      Q_HOLDS_O: tl.constexpr, RESCALE_EARLY: tl.constexpr, LAZY_FIRST_MASK: tl.constexpr):
    """One consumer's 64 rows of Q block `start_m`: block 0 peeled (masked, as it may hold the
    diagonal or the sequence end; with LAZY_FIRST_MASK only when it does, a branch on n_full),
    the unmasked blocks, the masked ones, the last PV, then
    O = acc / l to shared memory and out by TMA store, and LSE. With Q_HOLDS_O the O tile goes
    through this consumer's Q buffer, released to the producer once the store has read it;
    otherwise Q is released after the last S wgmma and O has its own buffer (`o_smem`).
    Returns the ring count after this tile."""
    SPLIT: tl.constexpr = BLOCK_M // 2
    offs_m = start_m * BLOCK_M + cid * SPLIT + tl.arange(0, SPLIT)
    q_view = tlx.local_reshape(q_smem[cid], (SPLIT, HEAD_DIM))
    m_i = tl.full([SPLIT], float("-inf"), tl.float32)
    l_i = tl.zeros([SPLIT], dtype=tl.float32)
    acc = tl.zeros([SPLIT, HEAD_DIM], dtype=tl.float32)

    tlx.barrier_wait(q_full[cid], tile_phase)
    slot = kv_count % NUM_STAGES
    tlx.barrier_wait(k_full[slot], (kv_count // NUM_STAGES) & 1)
    _tensor_core_turn(cid)
    qk = tlx.async_dot(q_view, tlx.local_trans(tlx.local_reshape(k_smem[slot], (BLOCK_N, HEAD_DIM))))
    _tensor_core_pass(cid)
    qk = tlx.async_dot_wait(0, qk)
    tlx.barrier_arrive(k_empty[slot])
    if LAZY_FIRST_MASK:
        if n_full > 0:  # block 0 lies below the diagonal and inside the sequence
            p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, offs_m, 0, N_CTX, tlx.dtype_of(v_smem),
                                                 BLOCK_N, CAUSAL, False)
        else:
            p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, offs_m, 0, N_CTX, tlx.dtype_of(v_smem),
                                                 BLOCK_N, CAUSAL, True)
    else:
        p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, offs_m, 0, N_CTX, tlx.dtype_of(v_smem),
                                             BLOCK_N, CAUSAL, True)
    kv_count += 1

    for j in range(1, n_full):
        p, alpha, m_i, l_i, acc = _fwd_kv_step(q_view, k_smem, v_smem, k_full, k_empty, v_full, v_empty, p, alpha,
                                               m_i, l_i, acc, qk_scale, offs_m, j, kv_count, N_CTX, cid, BLOCK_N,
                                               HEAD_DIM, NUM_STAGES, CAUSAL, False, RESCALE_EARLY)
        kv_count += 1
    for j in range(tl.maximum(n_full, 1), n_blocks):
        p, alpha, m_i, l_i, acc = _fwd_kv_step(q_view, k_smem, v_smem, k_full, k_empty, v_full, v_empty, p, alpha,
                                               m_i, l_i, acc, qk_scale, offs_m, j, kv_count, N_CTX, cid, BLOCK_N,
                                               HEAD_DIM, NUM_STAGES, CAUSAL, True, RESCALE_EARLY)
        kv_count += 1
    if not Q_HOLDS_O:
        tlx.barrier_arrive(q_empty[cid])  # the last S wgmma has read Q

    prev = (kv_count - 1) % NUM_STAGES
    tlx.barrier_wait(v_full[prev], ((kv_count - 1) // NUM_STAGES) & 1)
    if RESCALE_EARLY:
        acc = acc * alpha[:, None]  # the last block's alpha (block 0's is 0 and O is 0: harmless)
    _tensor_core_turn(cid)
    acc = tlx.async_dot(p, tlx.local_reshape(v_smem[prev], (BLOCK_N, HEAD_DIM)), acc)
    _tensor_core_pass(cid)
    acc = tlx.async_dot_wait(0, acc)
    tlx.barrier_arrive(v_empty[prev])

    acc = acc * (1.0 / l_i)[:, None]  # two divisions a thread (one a row), not 64
    lse = (m_i + tl.math.log2(l_i)) * LN2
    tl.store(lse_ptr + off_zh * N_CTX + offs_m, lse, mask=offs_m < N_CTX)
    if Q_HOLDS_O:
        tlx.local_store(q_view, acc.to(tlx.dtype_of(o_desc)))
        tlx.fence("async_shared")  # generic stores above, a TMA (async proxy) read below
        tlx.async_descriptor_store(o_desc, q_smem[cid], [off_z, off_h, start_m * BLOCK_M + cid * SPLIT, 0])
        tlx.async_descriptor_store_wait(0)  # the store has read the Q buffer: the producer may refill it
        tlx.barrier_arrive(q_empty[cid])
    else:
        tlx.async_descriptor_store_wait(0)  # this consumer's previous O store has read o_smem
        tlx.local_store(tlx.local_reshape(o_smem[cid], (SPLIT, HEAD_DIM)), acc.to(tlx.dtype_of(o_desc)))
        tlx.fence("async_shared")  # generic stores above, a TMA (async proxy) read below
        tlx.async_descriptor_store(o_desc, o_smem[cid], [off_z, off_h, start_m * BLOCK_M + cid * SPLIT, 0])
    return kv_count


# ---- forward kernels ------------------------------------------------------------------------------

@tlx.jit
def _grouped_tile(tile, num_m, ZH, HEAD_GROUP: tl.constexpr):
    """(batch x head, Q block) of tile number `tile` when the tiles go in groups of HEAD_GROUP
    heads, the longest causal blocks of the whole group first: the short blocks of every group
    come last (balance) while the tiles in flight share the K/V of a few heads (L2)."""
    per_group = HEAD_GROUP * num_m
    first = (tile // per_group) * HEAD_GROUP
    heads = tl.minimum(ZH - first, HEAD_GROUP)
    r = tile % per_group
    return first + r % heads, num_m - 1 - r // heads


@tlx.jit
def _fwd_program_tile(N_CTX, BLOCK_M: tl.constexpr, HEAD_GROUP: tl.constexpr):
    """(batch x head, Q block) of this CTA, the longest causal blocks first. HEAD_GROUP == 0:
    grid (cdiv(N, BLOCK_M), Z*H), head by head (each head's blocks longest first). HEAD_GROUP > 0:
    a 1-D grid of cdiv(N, BLOCK_M) * Z*H CTAs in head groups (`_grouped_tile`)."""
    if HEAD_GROUP == 0:
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
        off_zh = tl.program_id(1)
    else:
        num_m = tl.cdiv(N_CTX, BLOCK_M)
        off_zh, start_m = _grouped_tile(tl.program_id(0), num_m, tl.num_programs(0) // num_m, HEAD_GROUP)
    return off_zh, start_m


@tlx.jit
def attn_fwd_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, qk_scale, H, N_CTX,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr, RESCALE_EARLY: tl.constexpr,
                    LAZY_FIRST_MASK: tl.constexpr, HEAD_GROUP: tl.constexpr):
    """Flash-attention forward, one CTA per (Q block, batch x head): grid (cdiv(N, BLOCK_M), Z*H),
    or with HEAD_GROUP > 0 a 1-D grid in head groups (`_fwd_program_tile`). `qk_scale` is
    sm_scale * log2(e). The O tile goes out through each consumer's Q buffer. RESCALE_EARLY and
    LAZY_FIRST_MASK: see `_fwd_kv_step` and `_fwd_consume_tile`."""
    SPLIT: tl.constexpr = BLOCK_M // 2
    q_smem = tlx.local_alloc((1, 1, SPLIT, HEAD_DIM), tlx.dtype_of(q_desc), 2)
    k_smem = tlx.local_alloc((1, 1, BLOCK_N, HEAD_DIM), tlx.dtype_of(k_desc), NUM_STAGES)
    v_smem = tlx.local_alloc((1, 1, BLOCK_N, HEAD_DIM), tlx.dtype_of(v_desc), NUM_STAGES)
    q_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    q_empty = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    k_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    k_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    v_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    v_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=24):  # producer: TMA loads
            off_zh, start_m = _fwd_program_tile(N_CTX, BLOCK_M, HEAD_GROUP)
            n_blocks, n_full = _fwd_kv_blocks(start_m, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
            _fwd_produce_tile(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty, k_full, k_empty,
                              v_full, v_empty, off_zh // H, off_zh % H, start_m, 0, 0, n_blocks,
                              BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES)

        with tlx.async_task(num_warps=4, replicate=2, registers=240):  # consumers: wgmma + softmax
            cid: tl.constexpr = tlx.async_task_replica_id()
            off_zh, start_m = _fwd_program_tile(N_CTX, BLOCK_M, HEAD_GROUP)
            n_blocks, n_full = _fwd_kv_blocks(start_m, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)  # consumer 0 takes the first turn
            _fwd_consume_tile(q_smem, k_smem, v_smem, q_smem, q_full, q_empty, k_full, k_empty, v_full, v_empty,
                              o_desc, lse_ptr, qk_scale, off_zh // H, off_zh % H, off_zh, start_m, 0, 0, N_CTX,
                              n_blocks, n_full, cid, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES, CAUSAL, True,
                              RESCALE_EARLY, LAZY_FIRST_MASK)


@tlx.jit
def _persistent_tile(tile, num_m, ZH, CAUSAL: tl.constexpr, HEAD_GROUP: tl.constexpr):
    """(batch x head, Q block) of tile number `tile`. Causal: the last Q blocks (the longest,
    whole K/V prefix) of every head first, so the static round-robin over CTAs stays balanced;
    with HEAD_GROUP > 0 so within groups of that many heads (`_grouped_tile`: less K/V in flight).
    Otherwise head by head, so consecutive tiles share K/V in L2."""
    if CAUSAL and HEAD_GROUP > 0:
        off_zh, start_m = _grouped_tile(tile, num_m, ZH, HEAD_GROUP)
    elif CAUSAL:
        start_m = num_m - 1 - tile // ZH
        off_zh = tile % ZH
    else:
        start_m = tile % num_m
        off_zh = tile // num_m
    return off_zh, start_m


@tlx.jit
def attn_fwd_persistent_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, qk_scale, ZH, H, N_CTX,
                               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr, Q_HOLDS_O: tl.constexpr,
                               RESCALE_EARLY: tl.constexpr, LAZY_FIRST_MASK: tl.constexpr,
                               HEAD_GROUP: tl.constexpr):
    """Persistent flash-attention forward on a 1-D grid of P CTAs (one per SM at most): CTA p
    takes tiles p, p + P, ... of the cdiv(N, BLOCK_M) * ZH tiles (ZH = batch x heads). The K/V
    ring count and the consumers' ping-pong run on across tiles, so the producer loads the next
    tile's K/V while the consumers finish this one. Q_HOLDS_O: O goes out through the Q buffer
    (head_dim 256, where a separate O tile does not fit); otherwise a separate O buffer lets the
    next Q load as soon as the last S wgmma of a tile has read the current one."""
    SPLIT: tl.constexpr = BLOCK_M // 2
    q_smem = tlx.local_alloc((1, 1, SPLIT, HEAD_DIM), tlx.dtype_of(q_desc), 2)
    k_smem = tlx.local_alloc((1, 1, BLOCK_N, HEAD_DIM), tlx.dtype_of(k_desc), NUM_STAGES)
    v_smem = tlx.local_alloc((1, 1, BLOCK_N, HEAD_DIM), tlx.dtype_of(v_desc), NUM_STAGES)
    q_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    q_empty = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    k_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    k_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    v_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    v_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    if Q_HOLDS_O:
        o_smem = q_smem
    else:
        o_smem = tlx.local_alloc((1, 1, SPLIT, HEAD_DIM), tlx.dtype_of(o_desc), 2)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=24):  # producer: TMA loads for every tile of this CTA
            num_m = tl.cdiv(N_CTX, BLOCK_M)
            kv_count = 0
            i = 0
            for tile in range(tl.program_id(0), num_m * ZH, tl.num_programs(0)):
                off_zh, start_m = _persistent_tile(tile, num_m, ZH, CAUSAL, HEAD_GROUP)
                n_blocks, n_full = _fwd_kv_blocks(start_m, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
                kv_count = _fwd_produce_tile(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_full, q_empty,
                                             k_full, k_empty, v_full, v_empty, off_zh // H, off_zh % H, start_m,
                                             i & 1, kv_count, n_blocks, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES)
                i += 1

        with tlx.async_task(num_warps=4, replicate=2, registers=240):  # consumers: wgmma + softmax + O
            cid: tl.constexpr = tlx.async_task_replica_id()
            num_m = tl.cdiv(N_CTX, BLOCK_M)
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)  # consumer 0 takes the first turn
            kv_count = 0
            i = 0
            for tile in range(tl.program_id(0), num_m * ZH, tl.num_programs(0)):
                off_zh, start_m = _persistent_tile(tile, num_m, ZH, CAUSAL, HEAD_GROUP)
                n_blocks, n_full = _fwd_kv_blocks(start_m, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
                kv_count = _fwd_consume_tile(q_smem, k_smem, v_smem, o_smem, q_full, q_empty, k_full, k_empty,
                                             v_full, v_empty, o_desc, lse_ptr, qk_scale, off_zh // H, off_zh % H,
                                             off_zh, start_m, i & 1, kv_count, N_CTX, n_blocks, n_full, cid,
                                             BLOCK_M, BLOCK_N, HEAD_DIM, NUM_STAGES, CAUSAL, Q_HOLDS_O,
                                             RESCALE_EARLY, LAZY_FIRST_MASK)
                i += 1
            tlx.async_descriptor_store_wait(0)  # the CTA's shared memory must outlive the last store


# ---- forward: persistent, tile boundaries overlapped ---------------------------------------------

@tlx.jit
def _overlap_tiles(pid, programs, total, CAUSAL: tl.constexpr):
    """How many tiles CTA `pid` of `programs` walks in `attn_fwd_overlap_kernel` (see
    `_overlap_tile` for the order)."""
    if CAUSAL:
        pairs = tl.cdiv(total, 2)
        mine = tl.cdiv(pairs - pid, programs)
        return 2 * (mine - 1) + tl.minimum(total - 2 * (pid + (mine - 1) * programs), 2)
    else:
        return tl.cdiv(total - pid, programs)


@tlx.jit
def _overlap_tile(it, pid, programs, num_m, CAUSAL: tl.constexpr):
    """(batch x head, Q block) of local tile `it` of CTA `pid`. The tiles are numbered heads-major
    (all Q blocks of a head, then the next head), so the CTAs of one wave share the K/V of a few
    heads in L2. Not causal: CTA p takes tiles p, p + P, ... (equal work). Causal: the Q blocks of
    a head are numbered zig-zag (the longest, the shortest, the second longest, ...) and CTA p
    takes the pairs p, p + P, ... of consecutive tiles: with num_m even a pair is Q blocks
    num_m-1-k and k of one head, num_m + 1 K/V blocks whatever k, so a static round-robin is
    balanced, and each CTA runs its long tile first."""
    if CAUSAL:
        tile = 2 * (pid + (it // 2) * programs) + it % 2
        r = tile % num_m
        start_m = tl.where(r % 2 == 0, num_m - 1 - r // 2, r // 2)
    else:
        tile = pid + it * programs
        start_m = tile % num_m
    return tile // num_m, start_m


@tlx.jit
def _fwd_load_q(q_desc, q_smem, q_full, q_empty, off_zh, start_m, it, H, BLOCK_M: tl.constexpr,
                HEAD_DIM: tl.constexpr):
    """TMA loads of Q block `start_m` of local tile `it` into Q buffer it % 2 (one 64-row half per
    consumer: buffer b of consumer g is q_smem[2 * b + g]), once the consumers released the
    buffer's previous Q (tile it - 2)."""
    SPLIT: tl.constexpr = BLOCK_M // 2
    Q_BYTES: tl.constexpr = SPLIT * HEAD_DIM * tlx.size_of(tlx.dtype_of(q_desc))
    buf = it % 2
    phase = (it // 2) & 1
    for g in tl.static_range(2):
        tlx.barrier_wait(q_empty[2 * buf + g], phase ^ 1)  # a fresh barrier passes a wait on parity 1
        tlx.barrier_expect_bytes(q_full[2 * buf + g], Q_BYTES)
        tlx.async_descriptor_load(q_desc, q_smem[2 * buf + g],
                                  [off_zh // H, off_zh % H, start_m * BLOCK_M + g * SPLIT, 0], q_full[2 * buf + g])


@tlx.jit
def _fwd_load_kv(k_desc, v_desc, k_smem, v_smem, k_full, k_empty, v_full, v_empty, off_zh, n0, kv_count, H,
                 BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, NUM_STAGES: tl.constexpr):
    """TMA loads of the K and the V block at row n0 into ring position kv_count."""
    KV_BYTES: tl.constexpr = BLOCK_N * HEAD_DIM * tlx.size_of(tlx.dtype_of(k_desc))
    slot = kv_count % NUM_STAGES
    phase = (kv_count // NUM_STAGES) & 1
    tlx.barrier_wait(k_empty[slot], phase ^ 1)
    tlx.barrier_expect_bytes(k_full[slot], KV_BYTES)
    tlx.async_descriptor_load(k_desc, k_smem[slot], [off_zh // H, off_zh % H, n0, 0], k_full[slot])
    tlx.barrier_wait(v_empty[slot], phase ^ 1)
    tlx.barrier_expect_bytes(v_full[slot], KV_BYTES)
    tlx.async_descriptor_load(v_desc, v_smem[slot], [off_zh // H, off_zh % H, n0, 0], v_full[slot])


@tlx.jit
def _fwd_first_softmax(qk, qk_scale, offs_m, n_full, N_CTX, P_DTYPE: tl.constexpr, BLOCK_N: tl.constexpr,
                       SPLIT: tl.constexpr, CAUSAL: tl.constexpr, LAZY_FIRST_MASK: tl.constexpr):
    """The online softmax of a tile's K/V block 0 from a fresh row state (max -inf, sum 0): masked,
    or with LAZY_FIRST_MASK only when the block crosses the diagonal or the sequence end."""
    m_i = tl.full([SPLIT], float("-inf"), tl.float32)
    l_i = tl.zeros([SPLIT], dtype=tl.float32)
    if LAZY_FIRST_MASK:
        if n_full > 0:
            p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, offs_m, 0, N_CTX, P_DTYPE, BLOCK_N,
                                                 CAUSAL, False)
        else:
            p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, offs_m, 0, N_CTX, P_DTYPE, BLOCK_N,
                                                 CAUSAL, True)
    else:
        p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, offs_m, 0, N_CTX, P_DTYPE, BLOCK_N, CAUSAL, True)
    return p, m_i, l_i, alpha


@tlx.jit
def _fwd_store_o(acc, m_i, l_i, o_smem, o_desc, lse_ptr, off_zh, start_m, H, N_CTX, cid: tl.constexpr,
                 BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
    """One consumer's epilogue of a tile: O = acc / l into its O buffer and out by TMA store (not
    waited for: the next wait is before this buffer is written again, a tile later), LSE rows by
    a masked store."""
    SPLIT: tl.constexpr = BLOCK_M // 2
    offs_m = start_m * BLOCK_M + cid * SPLIT + tl.arange(0, SPLIT)
    acc = acc * (1.0 / l_i)[:, None]  # two divisions a thread (one a row), not 64
    lse = (m_i + tl.math.log2(l_i)) * LN2
    tl.store(lse_ptr + off_zh * N_CTX + offs_m, lse, mask=offs_m < N_CTX)
    tlx.async_descriptor_store_wait(0)  # this consumer's previous O store has read o_smem
    tlx.local_store(tlx.local_reshape(o_smem[cid], (SPLIT, HEAD_DIM)), acc.to(tlx.dtype_of(o_desc)))
    tlx.fence("async_shared")  # generic stores above, a TMA (async proxy) read below
    tlx.async_descriptor_store(o_desc, o_smem[cid], [off_zh // H, off_zh % H, start_m * BLOCK_M + cid * SPLIT, 0])


@tlx.jit
def _fwd_kv_blocks_rest(q_view, k_smem, v_smem, k_full, k_empty, v_full, v_empty, p, alpha, m_i, l_i, acc, qk_scale,
                        offs_m, kv0, N_CTX, n_blocks, n_full, cid: tl.constexpr, BLOCK_N: tl.constexpr,
                        HEAD_DIM: tl.constexpr, NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr,
                        RESCALE_EARLY: tl.constexpr):
    """K/V blocks 1 .. n_blocks - 1 of a tile whose block 0 took ring position kv0
    (`_fwd_kv_step`): the unmasked ones, then those crossing the diagonal or the sequence end.
    Returns the carried state and the ring position after the tile."""
    for j in range(1, n_full):
        p, alpha, m_i, l_i, acc = _fwd_kv_step(q_view, k_smem, v_smem, k_full, k_empty, v_full, v_empty, p, alpha,
                                               m_i, l_i, acc, qk_scale, offs_m, j, kv0 + j, N_CTX, cid, BLOCK_N,
                                               HEAD_DIM, NUM_STAGES, CAUSAL, False, RESCALE_EARLY)
    for j in range(tl.maximum(n_full, 1), n_blocks):
        p, alpha, m_i, l_i, acc = _fwd_kv_step(q_view, k_smem, v_smem, k_full, k_empty, v_full, v_empty, p, alpha,
                                               m_i, l_i, acc, qk_scale, offs_m, j, kv0 + j, N_CTX, cid, BLOCK_N,
                                               HEAD_DIM, NUM_STAGES, CAUSAL, True, RESCALE_EARLY)
    return p, alpha, m_i, l_i, acc, kv0 + n_blocks


@tlx.jit
def attn_fwd_overlap_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, qk_scale, ZH, H, N_CTX,
                            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr, RESCALE_EARLY: tl.constexpr,
                            LAZY_FIRST_MASK: tl.constexpr):
    """Persistent flash-attention forward whose tile boundaries cost no tensor-core time: on a 1-D
    grid of P CTAs (P <= SMs; causal: P <= the tile pairs), CTA p walks its tiles in
    `_overlap_tile`'s order (heads-major for L2, causal in balanced long/short pairs).

    * Q is double-buffered per consumer: the producer loads the next tile's Q after the first two
      K/V blocks of the current tile (the buffer was released when the consumers finished the
      previous tile's last S wgmma), a tile ahead of its use; the K/V ring runs on across tiles.
    * Each consumer's block loop is software-pipelined across tiles: the first step of tile t
      issues S_0(t) = Q(t) K_0^T and the last O += P V of tile t-1 together, runs block 0's
      softmax of tile t under that PV wgmma, then the epilogue of tile t-1 (O / l to its own O
      buffer, TMA store not waited for, LSE) while the other consumer has the tensor cores.
      No step of a tile's start waits for a wgmma with nothing else in flight.
    * O has its own buffer per consumer (a TMA store is waited on, for reading, only before the
      buffer is written again a tile later). Shared memory: 2 x Q + O + the ring, 224 KiB at
      d128 with 2 stages; d256 does not fit (use `attn_fwd_persistent_kernel`)."""
    SPLIT: tl.constexpr = BLOCK_M // 2
    q_smem = tlx.local_alloc((1, 1, SPLIT, HEAD_DIM), tlx.dtype_of(q_desc), 4)  # [2 * buffer + consumer]
    k_smem = tlx.local_alloc((1, 1, BLOCK_N, HEAD_DIM), tlx.dtype_of(k_desc), NUM_STAGES)
    v_smem = tlx.local_alloc((1, 1, BLOCK_N, HEAD_DIM), tlx.dtype_of(v_desc), NUM_STAGES)
    o_smem = tlx.local_alloc((1, 1, SPLIT, HEAD_DIM), tlx.dtype_of(o_desc), 2)
    q_full = tlx.alloc_barriers(num_barriers=4, arrive_count=1)
    q_empty = tlx.alloc_barriers(num_barriers=4, arrive_count=1)
    k_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    k_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    v_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    v_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=24):  # producer: Q a tile ahead, K/V through the ring
            pid = tl.program_id(0)
            programs = tl.num_programs(0)
            num_m = tl.cdiv(N_CTX, BLOCK_M)
            n_tiles = _overlap_tiles(pid, programs, num_m * ZH, CAUSAL)
            off_zh, start_m = _overlap_tile(0, pid, programs, num_m, CAUSAL)
            _fwd_load_q(q_desc, q_smem, q_full, q_empty, off_zh, start_m, 0, H, BLOCK_M, HEAD_DIM)
            kv_count = 0
            for it in range(0, n_tiles):
                n_blocks, n_full = _fwd_kv_blocks(start_m, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
                for j in range(0, tl.minimum(n_blocks, 2)):
                    _fwd_load_kv(k_desc, v_desc, k_smem, v_smem, k_full, k_empty, v_full, v_empty, off_zh,
                                 j * BLOCK_N, kv_count, H, BLOCK_N, HEAD_DIM, NUM_STAGES)
                    kv_count += 1
                # the next tile's Q, a tile ahead, into the buffer of tile it - 1, which the consumers
                # release at the end of that tile: once the ring has let V_1 in they are there (with
                # 2 stages V_1 waits for their first step of this tile), so this wait does not hold
                # up this tile's K_1 / V_1 as it would right after block 0
                if it + 1 < n_tiles:
                    next_zh, next_m = _overlap_tile(it + 1, pid, programs, num_m, CAUSAL)
                    _fwd_load_q(q_desc, q_smem, q_full, q_empty, next_zh, next_m, it + 1, H, BLOCK_M, HEAD_DIM)
                for j in range(2, n_blocks):
                    _fwd_load_kv(k_desc, v_desc, k_smem, v_smem, k_full, k_empty, v_full, v_empty, off_zh,
                                 j * BLOCK_N, kv_count, H, BLOCK_N, HEAD_DIM, NUM_STAGES)
                    kv_count += 1
                off_zh, start_m = _overlap_tile(it + 1, pid, programs, num_m, CAUSAL)

        with tlx.async_task(num_warps=4, replicate=2, registers=240):  # consumers: wgmma + softmax + O
            cid: tl.constexpr = tlx.async_task_replica_id()
            P_DTYPE: tl.constexpr = tlx.dtype_of(v_smem)
            pid = tl.program_id(0)
            programs = tl.num_programs(0)
            num_m = tl.cdiv(N_CTX, BLOCK_M)
            n_tiles = _overlap_tiles(pid, programs, num_m * ZH, CAUSAL)
            if cid == 1:
                tlx.named_barrier_arrive(9, 256)  # consumer 0 takes the first turn

            kv_count = 0
            off_zh = 0
            start_m = 0
            p = tl.zeros([SPLIT, BLOCK_N], dtype=P_DTYPE)
            alpha = tl.zeros([SPLIT], dtype=tl.float32)
            m_i = tl.full([SPLIT], float("-inf"), tl.float32)
            l_i = tl.zeros([SPLIT], dtype=tl.float32)
            acc = tl.zeros([SPLIT, HEAD_DIM], dtype=tl.float32)
            for it in range(0, n_tiles):
                prev_zh = off_zh
                prev_m = start_m
                off_zh, start_m = _overlap_tile(it, pid, programs, num_m, CAUSAL)
                n_blocks, n_full = _fwd_kv_blocks(start_m, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
                offs_m = start_m * BLOCK_M + cid * SPLIT + tl.arange(0, SPLIT)
                q_buf = 2 * (it % 2) + cid
                q_view = tlx.local_reshape(q_smem[q_buf], (SPLIT, HEAD_DIM))
                slot = kv_count % NUM_STAGES
                tlx.barrier_wait(q_full[q_buf], (it // 2) & 1)
                tlx.barrier_wait(k_full[slot], (kv_count // NUM_STAGES) & 1)
                if it == 0:  # the first S_0 alone: nothing is in flight yet
                    _tensor_core_turn(cid)
                    qk = tlx.async_dot(q_view, tlx.local_trans(tlx.local_reshape(k_smem[slot], (BLOCK_N, HEAD_DIM))))
                    _tensor_core_pass(cid)
                    qk = tlx.async_dot_wait(0, qk)
                    tlx.barrier_arrive(k_empty[slot])
                    p, m_i, l_i, alpha = _fwd_first_softmax(qk, qk_scale, offs_m, n_full, N_CTX, P_DTYPE, BLOCK_N,
                                                            SPLIT, CAUSAL, LAZY_FIRST_MASK)
                else:  # S_0 of this tile and the last PV of the previous one in one tensor-core turn
                    prev = (kv_count - 1) % NUM_STAGES
                    tlx.barrier_wait(v_full[prev], ((kv_count - 1) // NUM_STAGES) & 1)
                    _tensor_core_turn(cid)
                    qk = tlx.async_dot(q_view, tlx.local_trans(tlx.local_reshape(k_smem[slot], (BLOCK_N, HEAD_DIM))))
                    if RESCALE_EARLY:
                        acc = acc * alpha[:, None]  # the previous tile's last alpha, under the S wgmma
                    acc = tlx.async_dot(p, tlx.local_reshape(v_smem[prev], (BLOCK_N, HEAD_DIM)), acc)
                    _tensor_core_pass(cid)
                    qk = tlx.async_dot_wait(1, qk)  # S_0 is done; the PV wgmma runs on
                    tlx.barrier_arrive(k_empty[slot])
                    m_prev = m_i
                    l_prev = l_i
                    p, m_i, l_i, alpha = _fwd_first_softmax(qk, qk_scale, offs_m, n_full, N_CTX, P_DTYPE, BLOCK_N,
                                                            SPLIT, CAUSAL, LAZY_FIRST_MASK)
                    acc = tlx.async_dot_wait(0, acc)
                    tlx.barrier_arrive(v_empty[prev])
                    _fwd_store_o(acc, m_prev, l_prev, o_smem, o_desc, lse_ptr, prev_zh, prev_m, H, N_CTX, cid,
                                 BLOCK_M, HEAD_DIM)
                    acc = tl.zeros([SPLIT, HEAD_DIM], dtype=tl.float32)
                p, alpha, m_i, l_i, acc, kv_count = _fwd_kv_blocks_rest(
                    q_view, k_smem, v_smem, k_full, k_empty, v_full, v_empty, p, alpha, m_i, l_i, acc, qk_scale,
                    offs_m, kv_count, N_CTX, n_blocks, n_full, cid, BLOCK_N, HEAD_DIM, NUM_STAGES, CAUSAL,
                    RESCALE_EARLY)
                tlx.barrier_arrive(q_empty[q_buf])  # the tile's last S wgmma has read Q

            # the last tile's last PV and epilogue
            prev = (kv_count - 1) % NUM_STAGES
            tlx.barrier_wait(v_full[prev], ((kv_count - 1) // NUM_STAGES) & 1)
            if RESCALE_EARLY:
                acc = acc * alpha[:, None]
            _tensor_core_turn(cid)
            acc = tlx.async_dot(p, tlx.local_reshape(v_smem[prev], (BLOCK_N, HEAD_DIM)), acc)
            _tensor_core_pass(cid)
            acc = tlx.async_dot_wait(0, acc)
            tlx.barrier_arrive(v_empty[prev])
            _fwd_store_o(acc, m_i, l_i, o_smem, o_desc, lse_ptr, off_zh, start_m, H, N_CTX, cid, BLOCK_M, HEAD_DIM)
            tlx.async_descriptor_store_wait(0)  # the CTA's shared memory must outlive the last store


# ---- backward -------------------------------------------------------------------------------------

@tlx.jit
def attn_bwd_preprocess_kernel(o_ptr, do_ptr, delta_ptr, lse_ptr, lse_rows_ptr, zh_stride, N_CTX,
                               HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr, COPY_LSE: tl.constexpr):
    """Delta[zh, n] = sum_d O[zh, n, d] * dO[zh, n, d] in fp32 (O, dO contiguous (Z*H, N, D);
    Delta's rows of (batch, head) zh start at zh * zh_stride): grid (cdiv(N, BLOCK), Z*H). With
    COPY_LSE it also copies the contiguous LSE rows (`lse_ptr`, zh * N) to rows zh_stride apart
    (`lse_rows_ptr`): the dK/dV kernel's TMA needs a 16-byte aligned row stride."""
    off_zh = tl.program_id(1)
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < N_CTX
    base = off_zh * N_CTX * HEAD_DIM
    ptrs = base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    o = tl.load(o_ptr + ptrs, mask=rows[:, None], other=0.0).to(tl.float32)
    do = tl.load(do_ptr + ptrs, mask=rows[:, None], other=0.0).to(tl.float32)
    tl.store(delta_ptr + off_zh * zh_stride + offs_m, tl.sum(o * do, 1), mask=rows)
    if COPY_LSE:
        lse = tl.load(lse_ptr + off_zh * N_CTX + offs_m, mask=rows)
        tl.store(lse_rows_ptr + off_zh * zh_stride + offs_m, lse, mask=rows)


@tlx.jit
def _bwd_q_blocks(start_n, N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """The Q blocks K/V block `start_n` meets: [lo, hi), and [lo, full_lo) (the blocks crossing
    the diagonal) and [full_hi, hi) (the block crossing the sequence end) need a mask."""
    hi = tl.cdiv(N_CTX, BLOCK_M)
    full_hi = N_CTX // BLOCK_M
    if CAUSAL:
        lo = (start_n * BLOCK_N) // BLOCK_M
        full_lo = tl.minimum(tl.cdiv(start_n * BLOCK_N + BLOCK_N - 1, BLOCK_M), full_hi)
    else:
        lo = 0
        full_lo = 0
    return lo, full_lo, tl.maximum(full_hi, full_lo), hi


@tlx.jit
def _bwd_dkdv_step(q_smem, do_smem, k_smem, v_smem, lse_smem, delta_smem, full, empty, dk, dv, qk_scale,
                   offs_n, j, count, N_CTX, cid: tl.constexpr, BLOCK_M: tl.constexpr,
                   HEAD_DIM: tl.constexpr, D_SPLIT: tl.constexpr, NUM_STAGES: tl.constexpr,
                   CAUSAL: tl.constexpr, MASK: tl.constexpr):
    """Q block j (ring position `count`) against this consumer's K/V rows `offs_n`:
    S^T = K Q^T and dP^T = V dO^T issued together; P^T = exp2(S^T * qk_scale - LSE * log2(e))
    while dP^T runs (the block's LSE rows, natural log, and Delta rows came into the ring stage by
    TMA with Q and dO; LSE goes to base 2 here, one multiply per row); dV += P^T dO issued;
    dS^T = P^T (dP^T - Delta) under it; dK += dS^T Q.
    With D_SPLIT == 2 the head dimension is in two chunk buffers: S^T and dP^T sum over both,
    and this consumer accumulates the chunk `cid` of dK and dV."""
    DC: tl.constexpr = HEAD_DIM // D_SPLIT
    ROWS: tl.constexpr = 64
    slot = count % NUM_STAGES
    tlx.barrier_wait(full[slot], (count // NUM_STAGES) & 1)
    kb: tl.constexpr = cid if D_SPLIT == 1 else 0  # this consumer's K/V rows (chunk 0 of them)
    st = tlx.async_dot(tlx.local_reshape(k_smem[kb], (ROWS, DC)),
                       tlx.local_trans(tlx.local_reshape(q_smem[slot * D_SPLIT], (BLOCK_M, DC))))
    if D_SPLIT == 2:
        st = tlx.async_dot(tlx.local_reshape(k_smem[1], (ROWS, DC)),
                           tlx.local_trans(tlx.local_reshape(q_smem[slot * D_SPLIT + 1], (BLOCK_M, DC))), st)
    dpt = tlx.async_dot(tlx.local_reshape(v_smem[kb], (ROWS, DC)),
                        tlx.local_trans(tlx.local_reshape(do_smem[slot * D_SPLIT], (BLOCK_M, DC))))
    if D_SPLIT == 2:
        dpt = tlx.async_dot(tlx.local_reshape(v_smem[1], (ROWS, DC)),
                            tlx.local_trans(tlx.local_reshape(do_smem[slot * D_SPLIT + 1], (BLOCK_M, DC))), dpt)
    offs_m = j * BLOCK_M + tl.arange(0, BLOCK_M)
    lse2 = tlx.local_load(tlx.local_reshape(lse_smem[slot], (BLOCK_M,))) * LOG2E
    st = tlx.async_dot_wait(D_SPLIT, st)  # S^T is done (wgmma groups retire in order), dP^T may still run
    pt = tl.math.exp2(st * qk_scale - lse2[None, :])
    if MASK:
        keep = offs_m[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (offs_m[None, :] >= offs_n[:, None])
        pt = tl.where(keep, pt, 0.0)
    oc: tl.constexpr = cid % D_SPLIT  # the dK/dV chunk this consumer owns
    pt16 = pt.to(tlx.dtype_of(q_smem))
    dv = tlx.async_dot(pt16, tlx.local_reshape(do_smem[slot * D_SPLIT + oc], (BLOCK_M, DC)), dv)
    dpt = tlx.async_dot_wait(1, dpt)  # dP^T is done, dV may still run
    delta = tlx.local_load(tlx.local_reshape(delta_smem[slot], (BLOCK_M,)))  # here: not live across the exp2s
    dst = (pt * (dpt - delta[None, :])).to(tlx.dtype_of(q_smem))
    dk = tlx.async_dot(dst, tlx.local_reshape(q_smem[slot * D_SPLIT + oc], (BLOCK_M, DC)), dk)
    dk = tlx.async_dot_wait(0, dk)
    dv = tlx.async_dot_wait(0, dv)
    tlx.barrier_arrive(empty[slot])
    return dk, dv


@tlx.jit
def attn_bwd_dkdv_kernel(q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, lse_desc, delta_desc, qk_scale, sm_scale,
                         H, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         D_SPLIT: tl.constexpr, NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr):
    """dK and dV of one K/V block per CTA: grid (cdiv(N, BLOCK_N), Z*H). A producer loads the
    block's K and V once and streams (Q, dO) blocks of BLOCK_M rows and their LSE and Delta rows
    through a ring, all by TMA (`lse_desc` / `delta_desc`: 3-D descriptors over the (Z, H, N)
    fp32 rows moving [1, 1, BLOCK_M] blocks; rows past N read zeros); with
    D_SPLIT == 1 (head_dim <= 128, BLOCK_N 128) each consumer owns 64 K/V rows, with D_SPLIT == 2
    (head_dim 256, BLOCK_N 64) the two consumers share the 64 rows and own one half of the head
    dimension each. Every tile of head_dim columns lives as D_SPLIT chunk buffers (the descriptors
    move [1, 1, rows, head_dim / D_SPLIT] blocks). dK and dV go out by TMA store through the K and
    V buffers, once both consumers are done reading them.

    Why LSE and Delta come by TMA: the producer's threads make no shared-memory write at all, so
    a stage is published by the TMA's complete_tx alone (`full` counts one arrive, the expect).
    Stores by the producer's threads published by one thread's arrive after a named barrier are
    ordered in PTX's model, but compute-sanitizer's racecheck cannot see that order and reports
    them. The cost: the consumers read the rows with ld.shared (generic) and the next TMA into
    the stage overwrites them (async), a WAR across proxies, so the fence passes put one
    fence.proxy.async in the producer's loop, after its wait on `empty` (off the consumers'
    path). Loading the rows from global memory in the consumers instead needs no shared memory
    and no fence, but costs them registers they lack (ptxas spills at head_dim 128 and 256) or,
    through a layout conversion, bar.syncs and an L2 round trip per block
    (docs/performance.md)."""
    DC: tl.constexpr = HEAD_DIM // D_SPLIT
    q_smem = tlx.local_alloc((1, 1, BLOCK_M, DC), tlx.dtype_of(q_desc), NUM_STAGES * D_SPLIT)
    do_smem = tlx.local_alloc((1, 1, BLOCK_M, DC), tlx.dtype_of(do_desc), NUM_STAGES * D_SPLIT)
    k_smem = tlx.local_alloc((1, 1, 64, DC), tlx.dtype_of(k_desc), 2)
    v_smem = tlx.local_alloc((1, 1, 64, DC), tlx.dtype_of(v_desc), 2)
    lse_smem = tlx.local_alloc((1, 1, BLOCK_M), tlx.dtype_of(lse_desc), NUM_STAGES)
    delta_smem = tlx.local_alloc((1, 1, BLOCK_M), tlx.dtype_of(delta_desc), NUM_STAGES)
    kv_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=24):  # producer: K, V once, then (Q, dO, LSE, Delta) blocks
            start_n = tl.program_id(0)
            off_zh = tl.program_id(1)
            off_z = off_zh // H
            off_h = off_zh % H
            KV_BYTES: tl.constexpr = 2 * 2 * 64 * DC * tlx.size_of(tlx.dtype_of(k_desc))
            tlx.barrier_expect_bytes(kv_full[0], KV_BYTES)
            for b in tl.static_range(2):
                row: tl.constexpr = b * 64 if D_SPLIT == 1 else 0
                col: tl.constexpr = 0 if D_SPLIT == 1 else b * DC
                tlx.async_descriptor_load(k_desc, k_smem[b], [off_z, off_h, start_n * BLOCK_N + row, col], kv_full[0])
                tlx.async_descriptor_load(v_desc, v_smem[b], [off_z, off_h, start_n * BLOCK_N + row, col], kv_full[0])
            lo, full_lo, full_hi, hi = _bwd_q_blocks(start_n, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
            STAGE_BYTES: tl.constexpr = (2 * BLOCK_M * HEAD_DIM * tlx.size_of(tlx.dtype_of(q_desc))
                                         + 2 * BLOCK_M * tlx.size_of(tlx.dtype_of(lse_desc)))
            count = 0
            for j in range(lo, hi):
                slot = count % NUM_STAGES
                tlx.barrier_wait(empty[slot], ((count // NUM_STAGES) & 1) ^ 1)
                tlx.barrier_expect_bytes(full[slot], STAGE_BYTES)
                for d in tl.static_range(D_SPLIT):
                    tlx.async_descriptor_load(q_desc, q_smem[slot * D_SPLIT + d], [off_z, off_h, j * BLOCK_M, d * DC],
                                              full[slot])
                    tlx.async_descriptor_load(do_desc, do_smem[slot * D_SPLIT + d], [off_z, off_h, j * BLOCK_M, d * DC],
                                              full[slot])
                tlx.async_descriptor_load(lse_desc, lse_smem[slot], [off_z, off_h, j * BLOCK_M], full[slot])
                tlx.async_descriptor_load(delta_desc, delta_smem[slot], [off_z, off_h, j * BLOCK_M], full[slot])
                count += 1

        with tlx.async_task(num_warps=4, replicate=2, registers=240):  # consumers: dK, dV
            cid: tl.constexpr = tlx.async_task_replica_id()
            start_n = tl.program_id(0)
            off_zh = tl.program_id(1)
            ROW0: tl.constexpr = cid * 64 if D_SPLIT == 1 else 0
            offs_n = start_n * BLOCK_N + ROW0 + tl.arange(0, 64)
            lo, full_lo, full_hi, hi = _bwd_q_blocks(start_n, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
            dk = tl.zeros([64, DC], dtype=tl.float32)
            dv = tl.zeros([64, DC], dtype=tl.float32)
            tlx.barrier_wait(kv_full[0], 0)
            count = 0
            for j in range(lo, full_lo):
                dk, dv = _bwd_dkdv_step(q_smem, do_smem, k_smem, v_smem, lse_smem, delta_smem, full, empty, dk, dv,
                                        qk_scale, offs_n, j, count, N_CTX, cid, BLOCK_M, HEAD_DIM, D_SPLIT,
                                        NUM_STAGES, CAUSAL, True)
                count += 1
            for j in range(full_lo, full_hi):
                dk, dv = _bwd_dkdv_step(q_smem, do_smem, k_smem, v_smem, lse_smem, delta_smem, full, empty, dk, dv,
                                        qk_scale, offs_n, j, count, N_CTX, cid, BLOCK_M, HEAD_DIM, D_SPLIT,
                                        NUM_STAGES, CAUSAL, False)
                count += 1
            for j in range(full_hi, hi):
                dk, dv = _bwd_dkdv_step(q_smem, do_smem, k_smem, v_smem, lse_smem, delta_smem, full, empty, dk, dv,
                                        qk_scale, offs_n, j, count, N_CTX, cid, BLOCK_M, HEAD_DIM, D_SPLIT,
                                        NUM_STAGES, CAUSAL, True)
                count += 1
            if D_SPLIT == 2:
                tlx.named_barrier_wait(9, 256)  # both consumers are done reading K and V
            COL0: tl.constexpr = 0 if D_SPLIT == 1 else cid * DC
            tlx.local_store(tlx.local_reshape(k_smem[cid], (64, DC)), (dk * sm_scale).to(tlx.dtype_of(dk_desc)))
            tlx.local_store(tlx.local_reshape(v_smem[cid], (64, DC)), dv.to(tlx.dtype_of(dv_desc)))
            tlx.fence("async_shared")  # generic stores above, TMA (async proxy) reads below
            tlx.async_descriptor_store(dk_desc, k_smem[cid], [off_zh // H, off_zh % H, start_n * BLOCK_N + ROW0, COL0])
            tlx.async_descriptor_store(dv_desc, v_smem[cid], [off_zh // H, off_zh % H, start_n * BLOCK_N + ROW0, COL0])
            tlx.async_descriptor_store_wait(0)


@tlx.jit
def _bwd_dq_step(q_view, do_view, k_smem, v_smem, full, empty, dq, lse2, delta, qk_scale, offs_m, j, count, N_CTX,
                 BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, NUM_STAGES: tl.constexpr,
                 CAUSAL: tl.constexpr, MASK: tl.constexpr):
    """K/V block j (ring position `count`) for this consumer's 64 Q rows: S = Q K^T and
    dP = dO V^T issued together, P = exp2(S * qk_scale - LSE * log2(e)) while dP runs,
    dS = P (dP - Delta), dQ += dS K."""
    slot = count % NUM_STAGES
    tlx.barrier_wait(full[slot], (count // NUM_STAGES) & 1)
    k_view = tlx.local_reshape(k_smem[slot], (BLOCK_N, HEAD_DIM))
    s = tlx.async_dot(q_view, tlx.local_trans(k_view))
    dp = tlx.async_dot(do_view, tlx.local_trans(tlx.local_reshape(v_smem[slot], (BLOCK_N, HEAD_DIM))))
    s = tlx.async_dot_wait(1, s)
    p = tl.math.exp2(s * qk_scale - lse2[:, None])
    if MASK:
        offs_n = j * BLOCK_N + tl.arange(0, BLOCK_N)
        keep = offs_n[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        p = tl.where(keep, p, 0.0)
    dp = tlx.async_dot_wait(0, dp)
    ds = (p * (dp - delta[:, None])).to(tlx.dtype_of(k_smem))
    dq = tlx.async_dot(ds, k_view, dq)
    dq = tlx.async_dot_wait(0, dq)
    tlx.barrier_arrive(empty[slot])
    return dq


@tlx.jit
def attn_bwd_dq_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, lse_ptr, delta_ptr, zh_stride, qk_scale, sm_scale,
                       H, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr):
    """dQ of one 128-row Q block per CTA: grid (cdiv(N, BLOCK_M), Z*H), the longest causal blocks
    first. A producer loads the consumers' Q and dO halves and streams (K, V) blocks through a
    ring; each consumer owns 64 rows, and loads their LSE and Delta rows (which start at
    zh * zh_stride for batch x head zh) once, into registers (no shared memory). dQ goes out by
    TMA store through the consumer's Q buffer."""
    SPLIT: tl.constexpr = BLOCK_M // 2
    q_smem = tlx.local_alloc((1, 1, SPLIT, HEAD_DIM), tlx.dtype_of(q_desc), 2)
    do_smem = tlx.local_alloc((1, 1, SPLIT, HEAD_DIM), tlx.dtype_of(do_desc), 2)
    k_smem = tlx.local_alloc((1, 1, BLOCK_N, HEAD_DIM), tlx.dtype_of(k_desc), NUM_STAGES)
    v_smem = tlx.local_alloc((1, 1, BLOCK_N, HEAD_DIM), tlx.dtype_of(v_desc), NUM_STAGES)
    q_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=24):  # producer: Q, dO once, then (K, V) blocks
            start_m = tl.num_programs(0) - 1 - tl.program_id(0)
            off_zh = tl.program_id(1)
            off_z = off_zh // H
            off_h = off_zh % H
            Q_BYTES: tl.constexpr = 2 * SPLIT * HEAD_DIM * tlx.size_of(tlx.dtype_of(q_desc))
            for g in tl.static_range(2):
                tlx.barrier_expect_bytes(q_full[g], Q_BYTES)
                tlx.async_descriptor_load(q_desc, q_smem[g], [off_z, off_h, start_m * BLOCK_M + g * SPLIT, 0], q_full[g])
                tlx.async_descriptor_load(do_desc, do_smem[g], [off_z, off_h, start_m * BLOCK_M + g * SPLIT, 0],
                                          q_full[g])
            n_blocks, n_full = _fwd_kv_blocks(start_m, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
            STAGE_BYTES: tl.constexpr = 2 * BLOCK_N * HEAD_DIM * tlx.size_of(tlx.dtype_of(k_desc))
            for j in range(0, n_blocks):
                slot = j % NUM_STAGES
                tlx.barrier_wait(empty[slot], ((j // NUM_STAGES) & 1) ^ 1)
                tlx.barrier_expect_bytes(full[slot], STAGE_BYTES)
                tlx.async_descriptor_load(k_desc, k_smem[slot], [off_z, off_h, j * BLOCK_N, 0], full[slot])
                tlx.async_descriptor_load(v_desc, v_smem[slot], [off_z, off_h, j * BLOCK_N, 0], full[slot])

        with tlx.async_task(num_warps=4, replicate=2, registers=240):  # consumers: dQ
            cid: tl.constexpr = tlx.async_task_replica_id()
            start_m = tl.num_programs(0) - 1 - tl.program_id(0)
            off_zh = tl.program_id(1)
            offs_m = start_m * BLOCK_M + cid * SPLIT + tl.arange(0, SPLIT)
            lse2 = tl.load(lse_ptr + off_zh * zh_stride + offs_m, mask=offs_m < N_CTX, other=0.0) * LOG2E
            delta = tl.load(delta_ptr + off_zh * zh_stride + offs_m, mask=offs_m < N_CTX, other=0.0)
            n_blocks, n_full = _fwd_kv_blocks(start_m, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
            q_view = tlx.local_reshape(q_smem[cid], (SPLIT, HEAD_DIM))
            do_view = tlx.local_reshape(do_smem[cid], (SPLIT, HEAD_DIM))
            dq = tl.zeros([SPLIT, HEAD_DIM], dtype=tl.float32)
            tlx.barrier_wait(q_full[cid], 0)
            for j in range(0, n_full):
                dq = _bwd_dq_step(q_view, do_view, k_smem, v_smem, full, empty, dq, lse2, delta, qk_scale, offs_m, j,
                                  j, N_CTX, BLOCK_N, HEAD_DIM, NUM_STAGES, CAUSAL, False)
            for j in range(n_full, n_blocks):
                dq = _bwd_dq_step(q_view, do_view, k_smem, v_smem, full, empty, dq, lse2, delta, qk_scale, offs_m, j,
                                  j, N_CTX, BLOCK_N, HEAD_DIM, NUM_STAGES, CAUSAL, True)
            tlx.local_store(q_view, (dq * sm_scale).to(tlx.dtype_of(dq_desc)))
            tlx.fence("async_shared")  # generic stores above, a TMA (async proxy) read below
            tlx.async_descriptor_store(dq_desc, q_smem[cid], [off_zh // H, off_zh % H, start_m * BLOCK_M + cid * SPLIT, 0])
            tlx.async_descriptor_store_wait(0)

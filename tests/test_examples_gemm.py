"""The Hopper GEMM examples (tlx.examples.gemm) on the CPU interpreter: every kernel's numerics at
small shapes (ragged edges, K tails, one k-tile, several tiles per persistent CTA, ring wrap
across tiles) against numpy in float64, outputs poisoned first, fresh random inputs, bf16 and
fp16, and no proxy or synchronization hazard. A kernel with its epilogue fence removed must
report the race (so the no-hazard checks can fail). Plus the host wrappers' checks and the
grouped tile order."""

from __future__ import annotations

import numpy as np
import pytest

import tlx
from tlx.examples import gemm
from tlx.examples.gemm import GemmConfig

rng = np.random.default_rng(20261202)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 bit patterns, rounding to nearest even."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def operands(M: int, N: int, K: int, dtype: str):
    """Random A, B in the kernel's representation and their float64 values."""
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    if dtype == "fp16":
        a16, b16 = a.astype(np.float16), b.astype(np.float16)
        return a16, b16, a16.astype(np.float64), b16.astype(np.float64)
    abits, bbits = bf16_bits(a), bf16_bits(b)
    return abits, bbits, bf16_values(abits), bf16_values(bbits)


def values(c: np.ndarray, dtype: str) -> np.ndarray:
    return c.astype(np.float64) if dtype == "fp16" else bf16_values(c)


def poisoned_out(M: int, N: int, dtype: str) -> np.ndarray:
    if dtype == "fp16":
        return np.full((M, N), np.nan, np.float16)
    return np.full((M, N), 0x7FC0, np.uint16)  # bf16 NaN


def check_product(got: np.ndarray, ref: np.ndarray) -> None:
    """Every element written (no NaN), relative error <= 1e-2 as a whole (||.||_F) and per
    element against the largest reference value (bf16 output rounding is ~4e-3 relative)."""
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} output elements were never written"
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    worst = np.abs(got - ref).max() / np.abs(ref).max()
    assert rel <= 1e-2, f"relative error {rel:.3e}"
    assert worst <= 1e-2, f"worst element error {worst:.3e} of max |ref|"


KINDS = ["pipelined", "ws", "persistent", "pingpong", "streamk"]

# (M, N, K, dtype, config overrides, persistent SM count): ragged M/N edges, a K tail, a single
# k-tile, more k-tiles than stages, several tiles per persistent CTA with the ring wrapping.
SHAPES = [
    (256, 256, 256, "fp16", {}, None),
    (200, 136, 72, "bf16", {}, None),
    (130, 264, 40, "fp16", {}, None),
    (384, 520, 200, "bf16", {"BN": 128, "NUM_STAGES": 2}, 2),
]


def config_for(kind: str, overrides: dict) -> GemmConfig:
    base = {"pipelined": gemm.H200_PIPELINED, "ws": gemm.H200_WS, "persistent": gemm.H200_PERSISTENT,
            "pingpong": gemm.H200_PINGPONG, "streamk": gemm.H200_STREAMK}[kind]
    if "BN" in overrides and "EPI_SPLIT" not in overrides:  # chunks stay whole 64-column boxes
        overrides = {**overrides, "EPI_SPLIT": min(base.EPI_SPLIT, overrides["BN"] // 64)}
    return GemmConfig(**{**base.__dict__, **overrides})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("M,N,K,dtype,overrides,sms", SHAPES, ids=lambda v: str(v) if not isinstance(v, dict) else
                         ",".join(f"{k}={x}" for k, x in v.items()) or "h200")
def test_gemm_example_numerics_without_hazards(kind, M, N, K, dtype, overrides, sms):
    a, b, av, bv = operands(M, N, K, dtype)
    out = poisoned_out(M, N, dtype)
    kw = {"sms": sms} if kind in ("persistent", "pingpong", "streamk") and sms else {}
    plan = gemm.ALL_PLANS[kind](a, b, config_for(kind, overrides), out=out, **kw)
    assert plan.out is out
    hazards = plan.interpret(raise_on_hazard=False)
    assert hazards == [], "\n".join(str(h) for h in hazards)
    check_product(values(out, dtype), av @ bv)


def test_persistent_ctas_each_take_several_tiles():
    """With 3 CTAs for 12 tiles every CTA runs its producer/consumer ring across 4 tiles."""
    a, b, av, bv = operands(512, 384, 136, "fp16")
    cfg = GemmConfig(BM=128, BN=128, BK=64, NUM_STAGES=3, NUM_MMA_GROUPS=2, GROUP_SIZE_M=2)
    plan = gemm.plan_persistent(a, b, cfg, out=poisoned_out(512, 384, "fp16"), sms=3)
    assert plan.grid == (3,) and plan.constexprs["NUM_SMS"] == 3
    assert plan.interpret() == []
    check_product(values(plan.out, "fp16"), av @ bv)


def test_pingpong_consumers_alternate_over_many_laps_of_the_ring():
    """12 tiles on 2 CTAs: each consumer takes 3 tiles of 11 k-tiles through a 3-stage ring, so
    a consumer's first k-tile is several ring laps past the other's; the named-barrier hand-over
    must keep every parity wait within one lap (a wrong lap reads stale tiles)."""
    a, b, av, bv = operands(512, 384, 704, "bf16")
    cfg = GemmConfig(BM=128, BN=128, BK=64, NUM_STAGES=3, GROUP_SIZE_M=8)
    plan = gemm.plan_pingpong(a, b, cfg, out=poisoned_out(512, 384, "bf16"), sms=2)
    assert plan.interpret() == []
    check_product(values(plan.out, "bf16"), av @ bv)


def streamk_pieces(tiles: int, k_tiles: int, ctas: int):
    """The host's view of matmul_streamk_kernel's split: per CTA, its (tile, k0, k1) pieces of
    the stream-K tiles (those past the whole waves), in the order the CTA takes them."""
    dp = tiles - tiles % ctas
    total = (tiles - dp) * k_tiles
    base, extra = divmod(total, ctas)
    out = []
    for p in range(ctas):
        start = p * base + min(p, extra)
        end = start + base + (1 if p < extra else 0)
        pieces, it = [], end
        while it > start:
            t0 = (it - 1) // k_tiles * k_tiles
            k0 = max(start, t0) - t0
            pieces.append((dp + t0 // k_tiles, k0, it - t0))
            it = t0 + k0
        out.append(pieces)
    return out


# (M, N, K, dtype, config overrides, CTAs, what the split must contain): 128x256 tiles unless
# overridden; the split of each case is checked first, so the case tests what it says
STREAMK_CASES = [
    # 4 tiles of 8 k-tiles on 3 CTAs: 3 whole tiles, the 4th in three pieces (a middle one)
    (256, 512, 512, "fp16", {"NUM_STAGES": 2, "EPI_SPLIT": 2}, 3, "three pieces"),
    # 4 tiles on 5 CTAs: no whole wave, every tile split, owners wait on the CTA before them
    (256, 512, 512, "bf16", {}, 5, "no whole wave"),
    # 3 tiles of 4 k-tiles (a K tail) on 5 CTAs: a CTA owns one tile's end and starts the next
    (384, 128, 200, "bf16", {"BN": 128, "NUM_STAGES": 2}, 5, "two pieces in one CTA"),
    # ragged M and N, 6 tiles of 4 k-tiles on 4 CTAs: one whole wave, then 2 tiles in 4 pieces
    (264, 200, 248, "fp16", {"BN": 128, "EPI_SPLIT": 2}, 4, "a wave then pieces"),
]


@pytest.mark.parametrize("M,N,K,dtype,overrides,ctas,what", STREAMK_CASES, ids=[c[-1] for c in STREAMK_CASES])
def test_streamk_splits_tiles_across_ctas(M, N, K, dtype, overrides, ctas, what):
    """The stream-K kernel: partial sums published by one CTA and added by the tile's owner in
    another, with and without whole waves before them; every flag is zero again afterwards (the
    next launch relies on it) and the product is right (a lost or doubled piece is not)."""
    cfg = config_for("streamk", overrides)
    tiles = -(-M // cfg.BM) * -(-N // cfg.BN)
    pieces = streamk_pieces(tiles, -(-K // cfg.BK), ctas)
    flat = [pc for ps in pieces for pc in ps]
    split = [pc for pc in flat if pc[1] > 0 or pc[2] < -(-K // cfg.BK)]
    assert split, f"{what}: no tile is split"
    if what == "three pieces":
        assert any(0 < k0 and k1 < -(-K // cfg.BK) for _, k0, k1 in flat)
    if what == "no whole wave":
        assert tiles < ctas and all(pc[1] > 0 or pc[2] < -(-K // cfg.BK) for pc in flat)
    if what == "two pieces in one CTA":
        assert any(len(ps) == 2 and ps[0][2] < -(-K // cfg.BK) and ps[1][1] > 0 for ps in pieces)
    if what == "a wave then pieces":
        assert tiles - tiles % ctas == ctas
    a, b, av, bv = operands(M, N, K, dtype)
    plan = gemm.plan_streamk(a, b, cfg, out=poisoned_out(M, N, dtype), sms=ctas)
    assert plan.grid == (ctas,)
    ws, flags = plan.args[3], plan.args[4]
    assert ws.dtype == np.float32 and ws.size == ctas * cfg.BM * cfg.BN and not flags.any()
    assert plan.interpret() == []
    assert not flags.any(), f"flags left set: {flags}"
    check_product(values(plan.out, dtype), av @ bv)


@pytest.mark.parametrize("M,N,K,dtype,overrides", [
    (384, 520, 200, "bf16", {"BN": 128, "NUM_STAGES": 2, "EPI_SPLIT": 2}),
    (260, 600, 136, "fp16", {"NUM_STAGES": 4, "EPI_SPLIT": 4}),
], ids=["epi2", "epi4"])
def test_persistent_sub_tiled_epilogue(M, N, K, dtype, overrides):
    """EPI_SPLIT: each consumer stores its rows in column chunks through two buffers in turn,
    across several tiles per CTA (the buffers' store waits run on from tile to tile) and ragged
    edges (chunks past N are clipped by TMA); c_desc moves one chunk."""
    a, b, av, bv = operands(M, N, K, dtype)
    cfg = config_for("persistent", overrides)
    plan = gemm.plan_persistent(a, b, cfg, out=poisoned_out(M, N, dtype), sms=2)
    assert list(plan.args[2].block_shape) == [cfg.BM // 2, cfg.BN // cfg.EPI_SPLIT]
    assert plan.interpret() == []
    check_product(values(plan.out, dtype), av @ bv)


def test_even_waves_launches_the_fewest_ctas_for_the_same_waves():
    """EVEN_WAVES: as many waves as one CTA per SM needs, on the fewest CTAs that take them, each
    CTA as many tiles as the busiest; correct on the interpreter."""
    assert [gemm.persistent_programs(t, 132, True) for t in (512, 2048, 256, 132, 133, 200, 90, 1)] == \
        [128, 128, 128, 132, 67, 100, 90, 1]
    assert [gemm.persistent_programs(t, 132) for t in (512, 200, 90)] == [132, 132, 90]
    for tiles in range(1, 700):
        even = gemm.persistent_programs(tiles, 132, True)
        waves = -(-tiles // min(tiles, 132))
        assert -(-tiles // even) == waves and (even == 1 or -(-tiles // (even - 1)) > waves), tiles
    a, b, av, bv = operands(520, 392, 200, "bf16")  # 10 tiles of 128x128 on 4 SMs: 3 waves on 4 CTAs
    cfg = config_for("persistent", {"BN": 128, "NUM_STAGES": 3})
    assert cfg.EVEN_WAVES  # the default
    plan = gemm.plan_persistent(a, b, cfg, out=poisoned_out(520, 392, "bf16"), sms=4)
    assert plan.grid == (4,) and plan.constexprs["NUM_SMS"] == 4
    plan = gemm.plan_persistent(a, b, cfg, out=poisoned_out(520, 392, "bf16"), sms=6)  # 2 waves: 5 CTAs, not 6
    assert plan.grid == (5,) and plan.constexprs["NUM_SMS"] == 5
    assert plan.interpret() == []
    check_product(values(plan.out, "bf16"), av @ bv)


@pytest.mark.parametrize("M,N,K,dtype,overrides,ctas", [
    (384, 520, 200, "bf16", {"BN": 128, "NUM_STAGES": 2, "EPI_SPLIT": 2}, 4),
    (640, 520, 328, "fp16", {}, 7),
    (520, 392, 200, "bf16", {"GROUP_SIZE_M": 1}, 3),
], ids=["bn128", "default", "g1"])
def test_streamk_whole_waves_then_pieces(M, N, K, dtype, overrides, ctas):
    """Every CTA runs its whole tiles, then its stream-K pieces; the partial sums still reach
    their owners (every CTA publishes before it waits), every flag is reset."""
    a, b, av, bv = operands(M, N, K, dtype)
    cfg = config_for("streamk", overrides)
    plan = gemm.plan_streamk(a, b, cfg, out=poisoned_out(M, N, dtype), sms=ctas)
    tiles = -(-M // cfg.BM) * -(-N // cfg.BN)
    assert tiles >= ctas and tiles % ctas, "the case needs whole waves and stream-K pieces"
    assert plan.interpret() == []
    assert not plan.args[4].any(), "flags left set"
    check_product(values(plan.out, dtype), av @ bv)


# the 2-CTA clustered kernel: (M, N, K, dtype, config overrides, SMs): several blocks per cluster
# with the ring wrapping across them, ragged M (the second CTA's tile partly, or wholly, outside
# A), ragged N (the second CTA's half of B partly or wholly past N) and K tails, odd k-tile
# counts, the whole-tile and the chunked epilogue
CLUSTER_SHAPES = [
    (640, 520, 200, "bf16", {}, 4),
    (300, 264, 136, "fp16", {}, 2),
    (100, 136, 72, "bf16", {"NUM_STAGES": 3, "EPI_SPLIT": 1}, 2),
    (520, 384, 328, "fp16", {"BN": 128, "NUM_STAGES": 2, "EPI_SPLIT": 2, "GROUP_SIZE_M": 1}, 2),
]


@pytest.mark.parametrize("M,N,K,dtype,overrides,sms", CLUSTER_SHAPES, ids=lambda v: str(v) if not isinstance(v, dict)
                         else ",".join(f"{k}={x}" for k, x in v.items()) or "default")
def test_clustered_gemm_numerics_without_hazards(M, N, K, dtype, overrides, sms):
    a, b, av, bv = operands(M, N, K, dtype)
    cfg = GemmConfig(**{**gemm.H200_PERSISTENT_CLUSTER.__dict__, **overrides})
    plan = gemm.plan_persistent_cluster(a, b, cfg, out=poisoned_out(M, N, dtype), sms=sms)
    assert plan.cluster == (2, 1, 1) and plan.grid[0] % 2 == 0
    assert [list(d.block_shape) for d in plan.args[1:3]] == [[cfg.BK, cfg.BN // 2], [cfg.BM // 2, cfg.BN // cfg.EPI_SPLIT]]
    hazards = plan.interpret(raise_on_hazard=False)
    assert hazards == [], "\n".join(str(h) for h in hazards)
    check_product(values(plan.out, dtype), av @ bv)


@pytest.mark.parametrize("kind", KINDS)
def test_matmul_wrapper_on_numpy_runs_the_interpreter(kind):
    a, b, av, bv = operands(136, 264, 96, "bf16")
    fn = {"pipelined": gemm.matmul_pipelined, "ws": gemm.matmul_ws, "persistent": gemm.matmul_persistent,
          "pingpong": gemm.matmul_pingpong, "streamk": gemm.matmul_streamk}[kind]
    c = fn(a, b)
    assert c.shape == (136, 264) and c.dtype == np.uint16
    check_product(bf16_values(c), av @ bv)


@pytest.mark.parametrize("kind", KINDS + ["persistent-epi4", "persistent_cluster"])
def test_epilogue_without_its_fence_is_a_reported_race(kind):
    """Delete the user's fence from the traced kernel: the interpreter must report the generic
    store of C racing the TMA store that reads it (so `hazards == []` above means something)."""
    from tlx.interpreter import prepare_module, run
    from tlx.specialize import Specializer

    a, b, _, _ = operands(128, 256, 64, "fp16")
    if kind == "persistent-epi4":
        plan = gemm.plan_persistent(a, b, config_for("persistent", {"EPI_SPLIT": 4}), out=poisoned_out(128, 256, "fp16"))
    elif kind == "persistent_cluster":
        plan = gemm.plan_persistent_cluster(a, b, out=poisoned_out(128, 256, "fp16"), sms=2)
    else:
        plan = gemm.ALL_PLANS[kind](a, b, out=poisoned_out(128, 256, "fp16"))
    bound, _ = Specializer(plan.kernel).bind(plan.args, plan.constexprs)
    module = prepare_module(plan.kernel, bound, None, plan.num_warps, fence_passes=False, cluster=plan.cluster)
    fences = [op for op in module.ops() if op.name == "tlx.fence_async_shared"]
    assert fences, "the example lost its epilogue fence"
    for op in fences:
        op.erase()
    hazards = run(module, plan.grid, plan.args, raise_on_hazard=False)
    assert {(h.kind, h.first.op, h.second.op) for h in hazards} == {("raw", "tlx.local_store", "tlx.tma_store")}


def test_grouped_tile_order_matches_its_host_twin_and_covers_every_tile():
    """The device helper (run through a tiny kernel on the interpreter) and the host formula
    give the same order, and the order is a permutation of the tiles."""
    import tlx.language as tl
    from tlx.examples.gemm_kernels import grouped_tile

    @tlx.jit
    def order(out_ptr, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
        pid = tl.program_id(0)
        pm, pn = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)
        tl.store(out_ptr + 2 * pid, pm)
        tl.store(out_ptr + 2 * pid + 1, pn)

    for pm_, pn_, g in [(5, 3, 2), (7, 4, 8), (3, 9, 1)]:
        out = np.full(2 * pm_ * pn_, -1, np.int32)
        tlx.interpret(order, (pm_ * pn_,), out, pm_, pn_, GROUP_SIZE_M=g)
        got = [tuple(out[2 * t:2 * t + 2]) for t in range(pm_ * pn_)]
        assert got == [gemm.grouped_tile_host(t, pm_, pn_, g) for t in range(pm_ * pn_)]
        assert sorted(got) == [(i, j) for i in range(pm_) for j in range(pn_)]
    # grouping: with GROUP_SIZE_M=2 the first tiles walk down a 2-row column group
    assert [gemm.grouped_tile_host(t, 4, 3, 2) for t in range(4)] == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_wrappers_reject_bad_operands_clearly():
    a = np.zeros((64, 64), np.float16)
    with pytest.raises(tlx.TLXError, match="inner dimensions differ"):
        gemm.plan_ws(a, np.zeros((32, 64), np.float16))
    with pytest.raises(tlx.TLXError, match="bf16 or fp16"):
        gemm.plan_ws(a.astype(np.float32), np.zeros((64, 64), np.float32))
    with pytest.raises(tlx.TLXError, match="share a dtype"):
        gemm.plan_ws(a, np.zeros((64, 64), np.uint16))
    with pytest.raises(tlx.TLXError, match="16-byte aligned rows"):
        gemm.plan_pipelined(np.zeros((64, 20), np.float16), np.zeros((20, 64), np.float16))
    with pytest.raises(tlx.TLXError, match="row-major"):
        gemm.plan_pipelined(np.zeros((64, 64), np.float16).T, a)
    with pytest.raises(tlx.TLXError, match="shared memory"):
        gemm.plan_ws(a, a, GemmConfig(NUM_STAGES=5))
    with pytest.raises(tlx.TLXError, match="EPI_SPLIT must be 1, 2 or 4"):
        gemm.plan_persistent(a, a, GemmConfig(EPI_SPLIT=3))
    with pytest.raises(tlx.TLXError, match="option of the persistent kernels only"):
        gemm.plan_ws(a, a, GemmConfig(EPI_SPLIT=2))
    with pytest.raises(tlx.TLXError, match="EPI_SPLIT must be 2 or 4"):
        gemm.plan_streamk(a, a, GemmConfig(EPI_SPLIT=1))
    with pytest.raises(tlx.TLXError, match="EVEN_WAVES is an option of the persistent kernel only"):
        gemm.plan_pingpong(a, a, GemmConfig(EVEN_WAVES=True, BN=128, NUM_STAGES=4))
    with pytest.raises(tlx.TLXError, match="out must be"):
        gemm.plan_persistent(a, a, out=np.zeros((64, 32), np.float16))


def test_h200_configs_fit_shared_memory_and_match_the_descriptors():
    for kind, cfg in (("pipelined", gemm.H200_PIPELINED), ("ws", gemm.H200_WS), ("persistent", gemm.H200_PERSISTENT),
                      ("pingpong", gemm.H200_PINGPONG), ("persistent", gemm.H200_PERSISTENT_CLUSTER)):
        cfg.check(kind)
        assert cfg.smem_bytes(kind=kind) <= gemm.SM90_SMEM_BYTES
    a = np.zeros((256, 256), np.float16)
    p = gemm.plan_ws(a, a)
    assert [list(d.block_shape) for d in p.args[:3]] == [[64, 64], [64, 256], [64, 256]]
    p = gemm.plan_pipelined(a, a)
    assert [list(d.block_shape) for d in p.args[:3]] == [[128, 64], [64, 256], [128, 256]] and p.num_warps == 8


def test_plans_list_the_three_benchmarked_kernels_and_all_single_cta_examples():
    assert list(gemm.PLANS) == ["pipelined", "ws", "persistent"]
    assert list(gemm.ALL_PLANS) == ["pipelined", "ws", "persistent", "pingpong", "streamk"]


def test_descriptors_from_numpy_with_from_tensor_run_on_the_interpreter():
    """`tlx.TensorDescriptor.from_tensor` over host numpy arrays (as Triton code builds them from
    torch tensors) reads shape and element strides, and the interpreted kernel uses them."""
    from tlx.examples.gemm_kernels import matmul_pipelined_kernel

    M, N, K = 128, 192, 160
    a, b, av, bv = operands(M, N, K, "fp16")
    c = poisoned_out(M, N, "fp16")
    BM, BN, BK = 64, 64, 32
    descs = [tlx.TensorDescriptor.from_tensor(x, blk) for x, blk in ((a, [BM, BK]), (b, [BK, BN]), (c, [BM, BN]))]
    assert (descs[0].shape, descs[0].strides) == ([M, K], [K, 1])
    grid = (tlx.cdiv(M, BM) * tlx.cdiv(N, BN),)
    hazards = tlx.interpret(matmul_pipelined_kernel, grid, *descs, M, N, K, BM=BM, BN=BN, BK=BK,
                            GROUP_SIZE_M=2, NUM_STAGES=3, raise_on_hazard=False)
    assert hazards == []
    check_product(values(c, "fp16"), av @ bv)

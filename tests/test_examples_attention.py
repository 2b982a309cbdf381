"""The flash-attention examples (tlx.examples.attention) without a GPU.

* Numerics on the CPU interpreter: forward (O and the log-sum-exp rows) and backward (dQ, dK,
  dV) against float64 numpy at small shapes — sequence lengths that end mid-block or are not a
  multiple of 16, causal and not, fp16 and bf16, head_dim 64 and 128 (256 and the whole cross
  product under -m slow) — outputs poisoned with NaN first, fresh random inputs, and no proxy or
  synchronization hazard; the persistent forward with several tiles per CTA and the ring
  wrapping across tiles; `attention()` with torch autograd on CPU tensors.
* A kernel with its epilogue fences removed must report the race, and the dK/dV kernel compiled
  without the fence passes the WAR its producer's fence guards (so `hazards == []` means
  something).
* The compiled kernels (the specializations of tests/kernels/attention_examples.py: the
  benchmark's and the GPU tests'): register budgets (setmaxnreg 24 / 240), no spills, the shared
  memory the config accounts for, and the proxy fences — one per consumer, in the epilogue, none
  inside a K/V loop (but for the dK/dV producer's one WAR fence per stage), counted in the PTX
  and located against its loops; no producer partition touches shared memory but by TMA.
* The backward's LSE and Delta rows reach the dK/dV kernel by TMA, with 16-byte aligned strides.
* Bad inputs are clear errors.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import kernels
from kernels import attention_examples as ae
import tlx
import tlx.language as tl
from tlx.examples import attention
from tlx.examples import attention_kernels as ak
from tlx.examples.ptx_fences import fence_report

rng = np.random.default_rng(20261207)

#: relative error bounds (||.||_F / ||ref||_F, and the worst element against max |ref|). P is
#: rounded to the input dtype before P V (as in every flash attention), outputs are rounded to
#: it: fp16 keeps 11 significant bits, bf16 8.
BOUNDS = {"fp16": (2e-3, 6e-3), "bf16": (1.2e-2, 3e-2)}
LSE_ABS = 1e-4  # LSE is computed in fp32 from the exact products of the inputs


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 bit patterns (uint16), rounding to nearest even."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def values(x: np.ndarray) -> np.ndarray:
    """The float64 values of a kernel array (fp16, bf16 bit patterns, fp32)."""
    if x.dtype == np.uint16:
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def random_array(shape, dtype: str) -> np.ndarray:
    x = rng.standard_normal(shape)
    return x.astype(np.float16) if dtype == "fp16" else bf16_bits(x)


def poisoned(shape, dtype: str) -> np.ndarray:
    if dtype == "fp32":
        return np.full(shape, np.nan, np.float32)
    if dtype == "fp16":
        return np.full(shape, np.nan, np.float16)
    return np.full(shape, 0x7FC0, np.uint16)  # bf16 NaN


def reference(q, k, v, do, causal: bool, scale: float):
    """o, lse, dq, dk, dv in float64 from the definition: S = scale q k^T (-inf above the diagonal
    when causal), P = softmax(S), o = P v, lse = log sum exp S; dv = P^T do, dP = do v^T,
    dS = P (dP - rowsum(dP P)), dq = scale dS k, dk = scale dS^T q."""
    s = scale * q @ np.swapaxes(k, -1, -2)
    if causal:
        n = q.shape[-2]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    denom = e.sum(-1, keepdims=True)
    p = e / denom
    o = p @ v
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return o, (m + np.log(denom))[..., 0], scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ do


def check(what: str, got: np.ndarray, ref: np.ndarray, dtype: str) -> None:
    g = values(got)
    nan = int(np.isnan(g).sum())
    assert nan == 0, f"{what}: {nan} elements never written"
    rel = np.linalg.norm(g - ref) / np.linalg.norm(ref)
    worst = np.abs(g - ref).max() / np.abs(ref).max()
    bound, worst_bound = BOUNDS[dtype]
    assert rel <= bound and worst <= worst_bound, f"{what} {dtype}: relative error {rel:.2e}, worst {worst:.2e}"


def check_lse(got: np.ndarray, ref: np.ndarray) -> None:
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} LSE rows never written"
    err = np.abs(got.astype(np.float64) - ref).max()
    assert err <= LSE_ABS, f"LSE off by {err:.2e}"


def run_and_check(Z, H, N, D, causal, dtype, persistent=False, config=None, sms=None, backward=True,
                  sm_scale=None):
    q, k, v, do = (random_array((Z, H, N, D), dtype) for _ in range(4))
    scale = sm_scale if sm_scale is not None else 1 / np.sqrt(D)
    ro, rlse, rdq, rdk, rdv = reference(*(values(x) for x in (q, k, v, do)), causal, scale)
    fwd = attention.plan_forward(q, k, v, causal, sm_scale, persistent=persistent, config=config, sms=sms,
                                 out=poisoned((Z, H, N, D), dtype), lse=poisoned((Z, H, N), "fp32"))
    o, lse = fwd.run(raise_on_hazard=False)
    assert fwd.hazards == [], "\n".join(map(str, fwd.hazards))
    check("o", o, ro, dtype)
    check_lse(lse, rlse)
    if not backward:
        return fwd
    bwd = attention.plan_backward(q, k, v, o, lse, do, causal, sm_scale, dq=poisoned((Z, H, N, D), dtype),
                                  dk=poisoned((Z, H, N, D), dtype), dv=poisoned((Z, H, N, D), dtype))
    dq, dk, dv = bwd.run(raise_on_hazard=False)
    assert bwd.hazards == [], "\n".join(map(str, bwd.hazards))
    for name, got, ref in (("dq", dq, rdq), ("dk", dk, rdk), ("dv", dv, rdv)):
        check(name, got, ref, dtype)
    return fwd


# (seq, head_dim, causal, dtype): a single block; sequences ending mid-block, not multiples of 16,
# one not of 4 (the backward then copies LSE into padded rows for TMA); two Q blocks with the
# diagonal in the second; both dtypes, both head dims
CASES = [(64, 64, False, "fp16"), (100, 64, True, "bf16"), (192, 128, True, "fp16"), (102, 128, False, "bf16")]
SLOW_CASES = [(n, d, c, t) for n in (64, 100, 192) for d in (64, 128) for c in (False, True) for t in ("fp16", "bf16")
              if (n, d, c, t) not in CASES] + [(130, 256, True, "bf16"), (64, 256, False, "fp16")]


@pytest.mark.parametrize("N,D,causal,dtype", CASES + [pytest.param(*c, marks=pytest.mark.slow) for c in SLOW_CASES],
                         ids=lambda v: str(v))
def test_forward_and_backward_match_float64(N, D, causal, dtype):
    run_and_check(1, 2, N, D, causal, dtype)


def test_unmasked_blocks_before_the_diagonal_and_a_custom_scale():
    """Three K/V blocks for the last Q block (N=300, d64: BLOCK_N 128): two run the unmasked
    loop, the third the masked one; the dK/dV kernel meets Q blocks below, on and past the
    diagonal. sm_scale 0.3 instead of 1/sqrt(64)."""
    run_and_check(1, 1, 300, 64, True, "fp16", sm_scale=0.3)


@pytest.mark.parametrize("D,causal,dtype,stages", [(64, True, "bf16", 3), (128, False, "fp16", 3)])
def test_persistent_forward_walks_several_tiles_per_cta(D, causal, dtype, stages):
    """2 CTAs for 9 (causal) or 6 tiles: the K/V ring count, the Q buffers' phases and the
    consumers' ping-pong run on across tiles. At d128 with 3 stages a separate O tile does not fit
    and O leaves through the Q buffers (Q_HOLDS_O); at d64 it has its own buffers."""
    cfg = dataclasses.replace(attention.FORWARD_CONFIGS[D], NUM_STAGES=stages)
    H, N = (3, 300) if causal else (2, 300)
    fwd = run_and_check(1, H, N, D, causal, dtype, persistent=True, config=cfg, sms=2, backward=False)
    launch = fwd.launches[0]
    assert launch.grid == (2,) and launch.constexprs["Q_HOLDS_O"] == (D == 128)


# the forward's schedule options (benchmarks/attention_sweep.py times them on the GPU): (config
# fields, persistent, H, N, causal, dtype). N=320 gives three Q blocks and three K/V blocks, so
# block 0 is unmasked for Q blocks 1 and 2 when causal and for every block when not (LAZY_FIRST_MASK
# takes both branches); 4 heads in groups of 3, 3 in groups of 2 leave a partial last group
# (HEAD_GROUP; the persistent case's 2 CTAs walk 9 tiles).
OPTION_CASES = [
    (dict(RESCALE_EARLY=True, LAZY_FIRST_MASK=True, HEAD_GROUP=3), False, 4, 320, True, "fp16"),
    (dict(RESCALE_EARLY=True, LAZY_FIRST_MASK=True), False, 2, 320, False, "bf16"),
    (dict(RESCALE_EARLY=True, LAZY_FIRST_MASK=True, HEAD_GROUP=2), True, 3, 320, True, "bf16"),
]
SLOW_OPTION_CASES = [
    (dict(LAZY_FIRST_MASK=True), False, 2, 320, True, "fp16"),
    (dict(BLOCK_N=64, NUM_STAGES=3, RESCALE_EARLY=True), False, 2, 200, True, "bf16"),
]


@pytest.mark.parametrize("fields,persistent,H,N,causal,dtype",
                         OPTION_CASES + [pytest.param(*c, marks=pytest.mark.slow) for c in SLOW_OPTION_CASES],
                         ids=lambda v: str(v))
def test_forward_schedule_options_match_float64(fields, persistent, H, N, causal, dtype):
    """RESCALE_EARLY (O rescaled between the S and the PV wgmma issues), LAZY_FIRST_MASK (block 0
    masked only when it needs it) and HEAD_GROUP (a 1-D grid in head groups, longest causal blocks
    first) give the same O and LSE as the definition, with no hazard; every (head, Q block) is
    written once (the outputs start as NaN)."""
    cfg = dataclasses.replace(attention.FORWARD_CONFIGS[128], **fields)
    fwd = run_and_check(1, H, N, 128, causal, dtype, persistent=persistent, config=cfg, sms=2 if persistent else None,
                        backward=False)
    launch = fwd.launches[0]
    for name in ("RESCALE_EARLY", "LAZY_FIRST_MASK"):
        assert launch.constexprs[name] == fields.get(name, False)
    assert launch.constexprs["HEAD_GROUP"] == fields.get("HEAD_GROUP", 0)
    if not persistent:
        num_m = -(-N // 128)
        assert launch.grid == ((num_m, H) if not fields.get("HEAD_GROUP") else (num_m * H, 1))


# the overlapped persistent forward (OVERLAP_TILES): (head_dim, H, N, causal, dtype, CTAs, more fields).
# Several tiles per CTA, so both Q buffers, the ring and the cross-tile step wrap; causal tile
# pairs inside a head (N=512: 4 Q blocks), straddling heads (N=300: 3), a last pair of one tile
# (3 heads x 3 blocks = 9 tiles), one CTA for everything; the diagonal and a ragged end in one
# block (N=100), LAZY_FIRST_MASK's two branches and RESCALE_EARLY's order across the tile step.
OVERLAP_CASES = [
    (128, 3, 300, True, "bf16", 2, {}),
    (128, 2, 512, True, "fp16", 3, {}),
    (128, 2, 300, False, "fp16", 1, {}),
    (64, 3, 100, True, "fp16", 2, dict(NUM_STAGES=3)),
    (128, 3, 320, True, "bf16", 2, dict(RESCALE_EARLY=True, LAZY_FIRST_MASK=True)),
]
SLOW_OVERLAP_CASES = [
    (64, 2, 330, False, "bf16", 3, dict(LAZY_FIRST_MASK=True)),
    (128, 2, 320, False, "fp16", 2, dict(RESCALE_EARLY=True)),
]


@pytest.mark.parametrize("D,H,N,causal,dtype,sms,fields",
                         OVERLAP_CASES + [pytest.param(*c, marks=pytest.mark.slow) for c in SLOW_OVERLAP_CASES],
                         ids=lambda v: str(v))
def test_overlapped_persistent_forward_matches_float64(D, H, N, causal, dtype, sms, fields):
    """`attn_fwd_overlap_kernel`: every (head, Q block) written once (outputs start as NaN), O and
    LSE as the definition, no proxy or synchronization hazard; one CTA per SM up to the tiles
    (causal: the tile pairs)."""
    cfg = dataclasses.replace(attention.FORWARD_CONFIGS[D], OVERLAP_TILES=True, **fields)
    fwd = run_and_check(1, H, N, D, causal, dtype, persistent=True, config=cfg, sms=sms, backward=False)
    launch = fwd.launches[0]
    tiles = H * -(-N // 128)
    assert launch.kernel.__name__ == "attn_fwd_overlap_kernel"
    assert launch.grid == (min(sms, -(-tiles // 2) if causal else tiles),)


@tlx.jit
def _overlap_order_probe(out_ptr, num_m, total, MAX_TILES: tl.constexpr, CAUSAL: tl.constexpr):
    """Writes (batch x head, Q block) of each local tile of this CTA, in its order, to
    out_ptr[pid, it, :] (-1 past its last tile)."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    n = ak._overlap_tiles(pid, programs, total, CAUSAL)
    for it in range(0, MAX_TILES):
        zh, m = ak._overlap_tile(it, pid, programs, num_m, CAUSAL)
        base = out_ptr + (pid * MAX_TILES + it) * 2
        tl.store(base, tl.where(it < n, zh, -1))
        tl.store(base + 1, tl.where(it < n, m, -1))


@pytest.mark.parametrize("num_m,zh,programs,causal", [(16, 8, 5, True), (4, 3, 4, True), (3, 3, 2, True),
                                                      (5, 1, 3, True), (7, 2, 3, False)])
def test_overlap_tile_order_covers_every_tile_once_and_balances_causal_work(num_m, zh, programs, causal):
    """The overlapped kernel's tile order: each (head, Q block) goes to exactly one CTA; causal:
    with an even number of Q blocks each pair of a CTA is Q blocks num_m-1-k and k of one head
    (num_m + 1 K/V blocks), the long one first, so the CTAs' work differs by at most one pair."""
    total = num_m * zh
    max_tiles = 2 * -(-total // (2 * programs)) + 2
    out = np.zeros((programs, max_tiles, 2), np.int32)
    tlx.interpret(_overlap_order_probe, (programs,), out, num_m, total, MAX_TILES=max_tiles, CAUSAL=causal)
    walked = [(int(h), int(m)) for row in out for h, m in row if h >= 0]
    assert sorted(walked) == [(h, m) for h in range(zh) for m in range(num_m)]
    for row in out:  # a CTA's tiles come first, then only padding
        n = int((row[:, 0] >= 0).sum())
        assert (row[:n, 0] >= 0).all() and (row[n:] == -1).all()
    if causal and num_m % 2 == 0:
        work = [sum(m + 1 for h, m in row if h >= 0) for row in out]
        assert max(work) - min(work) <= num_m + 1, work
        for row in out:
            tiles = [(int(h), int(m)) for h, m in row if h >= 0]
            for a, b in zip(tiles[0::2], tiles[1::2]):
                assert a[0] == b[0] and a[1] + b[1] == num_m - 1 and a[1] > b[1], tiles


def test_attention_autograd_on_torch_cpu_tensors(monkeypatch):
    """`attention()` on CPU tensors: the forward (each head dim's default kernel) and, through
    torch autograd, the backward run on the interpreter; every output tensor starts as NaN (the
    allocations are poisoned)."""
    import torch

    def nan_empty(shape, dtype, device):
        return torch.full(tuple(shape), float("nan"), dtype=dtype, device=device)

    monkeypatch.setattr(attention, "_torch_empty", nan_empty)
    forwards = []
    plan_forward = attention.plan_forward

    def recording_plan_forward(*args, **kwargs):
        plan = plan_forward(*args, **kwargs)
        forwards.append(plan.launches[0].kernel.__name__)
        return plan

    monkeypatch.setattr(attention, "plan_forward", recording_plan_forward)
    for dtype, tdt, causal, D in (("fp16", torch.float16, True, 64), ("bf16", torch.bfloat16, False, 64),
                                  ("fp16", torch.float16, True, 128)):
        q, k, v, do = (torch.randn(1, 2, 100, D).to(tdt) for _ in range(4))
        ro, _, rdq, rdk, rdv = reference(*(x.double().numpy() for x in (q, k, v, do)), causal, D ** -0.5)
        q, k, v = (x.requires_grad_() for x in (q, k, v))
        o = attention.attention(q, k, v, causal=causal)
        # the head dim's default forward: the overlapped persistent kernel at d64 and d128 (OVERLAP_BY_DEFAULT)
        assert forwards[-1] == "attn_fwd_overlap_kernel", forwards
        assert o.dtype == tdt and o.shape == q.shape
        o.backward(do)
        for name, got, ref in (("o", o, ro), ("dq", q.grad, rdq), ("dk", k.grad, rdk), ("dv", v.grad, rdv)):
            check(name, got.detach().double().numpy(), ref, dtype)


def test_epilogue_without_its_fences_is_a_reported_race():
    """Delete the user's fences from the traced forward: the interpreter must report the generic
    store of O racing the TMA store that reads the same shared memory."""
    from tlx.interpreter.entry import prepare_module
    from tlx.interpreter import run
    from tlx.specialize import Specializer

    q = random_array((1, 1, 128, 64), "fp16")
    launch = attention.plan_forward(q, q, q, True).launches[0]
    bound, _ = Specializer(launch.kernel).bind(launch.args, launch.constexprs)
    module = prepare_module(launch.kernel, bound, launch.signature(), launch.num_warps, fence_passes=False)
    fences = [op for op in module.ops() if op.name == "tlx.fence_async_shared"]
    assert len(fences) == 2, "the forward lost its epilogue fences (one per consumer)"
    for op in fences:
        op.erase()
    hazards = run(module, launch.grid, launch.args, raise_on_hazard=False)
    assert ("raw", "tlx.local_store", "tlx.tma_store") in {(h.kind, h.first.op, h.second.op) for h in hazards}



def test_dkdv_without_its_war_fence_is_a_reported_hazard():
    """Compile the dK/dV kernel with the fence passes off: the interpreter must report the
    consumers' ld.shared of a stage's LSE / Delta rows against the TMA that refills the stage (a
    generic read, then an async write), the hazard the producer's one fence per stage guards.
    (N=256, d64: four Q blocks through three stages, so the ring wraps.)"""
    from tlx.interpreter.entry import prepare_module
    from tlx.interpreter import run
    from tlx.specialize import Specializer

    x = np.zeros((1, 1, 256, 64), np.float16)
    launch = attention.plan_backward(x, x, x, x, np.zeros((1, 1, 256), np.float32), x).launches[1]
    assert launch.kernel.__name__ == "attn_bwd_dkdv_kernel"
    bound, _ = Specializer(launch.kernel).bind(launch.args, launch.constexprs)
    module = prepare_module(launch.kernel, bound, launch.signature(), launch.num_warps, fence_passes=False)
    hazards = run(module, launch.grid, launch.args, raise_on_hazard=False)
    found = {(h.kind, h.first.op, h.second.op) for h in hazards}
    assert ("war", "tlx.local_load", "tlx.tma_load") in found, found

# ---- the compiled kernels ------------------------------------------------------------------------

ATTN_SPECS = [s for s in kernels.all_specs() if isinstance(s, ae.AttentionSpec)]


def _spec_param(s):
    return pytest.param(s, marks=pytest.mark.slow) if s.slow else s


def _config_smem(spec) -> int:
    c, d = spec.constexprs, spec.constexprs["HEAD_DIM"]
    if spec.fn.__name__ == "attn_fwd_kernel":
        return attention.ForwardConfig(128, c["BLOCK_N"], c["NUM_STAGES"]).smem_bytes(d, separate_o=False)
    if spec.fn.__name__ == "attn_fwd_persistent_kernel":
        return attention.ForwardConfig(128, c["BLOCK_N"], c["NUM_STAGES"]).smem_bytes(d, not c["Q_HOLDS_O"])
    if spec.fn.__name__ == "attn_fwd_overlap_kernel":
        return attention.ForwardConfig(128, c["BLOCK_N"], c["NUM_STAGES"], OVERLAP_TILES=True).smem_bytes(d, True)
    cfg = attention.BackwardConfig(BLOCK_M1=c["BLOCK_M"], BLOCK_N1=c["BLOCK_N"], D_SPLIT=c["D_SPLIT"],
                                   STAGES1=c["NUM_STAGES"]) if "D_SPLIT" in c else \
        attention.BackwardConfig(BLOCK_N2=c["BLOCK_N"], STAGES2=c["NUM_STAGES"])
    return cfg.smem_bytes(d)[0 if "D_SPLIT" in c else 1]


def test_the_specs_cover_every_combination_and_ci_compiles_the_headline_ones():
    combos = {(s.fn.__name__, s.signature.get("q_desc", "")[11:15], s.constexprs["HEAD_DIM"],
               s.constexprs.get("CAUSAL")) for s in ATTN_SPECS}
    for name in ("attn_fwd_kernel", "attn_fwd_persistent_kernel", "attn_fwd_overlap_kernel", "attn_bwd_dkdv_kernel",
                 "attn_bwd_dq_kernel"):
        dims = ae.OVERLAP_HEAD_DIMS if name == "attn_fwd_overlap_kernel" else ae.HEAD_DIMS
        assert {(d, t, c) for n, t, d, c in combos if n == name} == \
            {(d, t, c) for d in dims for t in ("fp16", "bf16") for c in (False, True)}, name
    assert sum(not s.slow for s in ATTN_SPECS) == len(ae.CORE)


@pytest.mark.parametrize("spec", [_spec_param(s) for s in ATTN_SPECS if s.fn.__name__ != "attn_bwd_preprocess_kernel"],
                         ids=lambda s: s.name)
def test_compiled_kernel_budgets_and_fences(spec):
    """setmaxnreg gives the producer 24 registers and the consumers 240, ptxas spills nothing and
    warns of nothing (it would if it had to serialize the wgmmas), the shared memory is what the config accounts for (plus < 1 KiB of mbarriers and reduction
    scratch), and the PTX has two proxy fences (one per consumer's epilogue store; the overlapped
    forward has two epilogue stores per consumer, the one inside its tile loop and the last
    tile's), none inside a K/V loop. The dK/dV kernel has one more, in its producer's Q loop: the
    consumers read the stage's LSE and Delta rows with ld.shared and the next TMA into the stage
    overwrites them (a generic read, then an async write), so the compiler fences before that TMA."""
    result = spec.compile()
    res = result.resources
    assert isinstance(result.asm.get("cubin"), bytes), res
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    assert res["ptxas_warnings"] == [], res  # e.g. wgmma serialized ("Potential Performance Loss")
    ptx = result.asm["ptx"]
    assert len(re.findall(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)) == 1, "the producer's register budget"
    assert len(re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+240;", ptx)) == 2, "the consumers' budgets"
    assert 0 <= res["shared_bytes"] - _config_smem(spec) < 1024, (res["shared_bytes"], _config_smem(spec))
    war = int(spec.fn.__name__ == "attn_bwd_dkdv_kernel")
    report = fence_report(ptx)
    epilogues = 2 if spec.fn.__name__ == "attn_fwd_overlap_kernel" else 1
    assert report["fences"] == 2 * epilogues + war and report["fences_in_k_loop"] == war, report
    assert report["k_loops"] >= 3, report  # the producer's and each consumer's (found, so the count means something)
    user = [rec for rec in result.fences if rec.origin == "user"]
    assert len(user) == 2 * epilogues, result.fences
    for rec in user:  # each orders an epilogue tile's generic store before its TMA store
        assert any(r.startswith("tlx.tma_store ") for r in rec.readers), rec
    placed = [rec for rec in result.fences if rec.origin != "user"]
    assert len(placed) == war, placed
    for rec in placed:  # the stage's LSE / Delta rows: consumers' ld.shared, then the producer's TMA
        assert rec.origin == "proxy_fence_insertion" and rec.hazard == "WAR", rec
        assert {g.generic.split(" at ")[0] for g in rec.guards} == {"tlx.local_load"}, rec.guards
        assert {g.async_.split(" at ")[0] for g in rec.guards} == {"tlx.tma_load"}, rec.guards
        assert rec.loc.line == _source_line("tlx.async_descriptor_load(lse_desc"), rec.loc


def _source_line(text: str) -> int:
    """The line of tlx.examples.attention_kernels that holds `text` (exactly one does)."""
    import inspect

    from tlx.examples import attention_kernels

    lines = inspect.getsource(attention_kernels).splitlines()
    found = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


GENERIC_SHARED = {"tlx.local_store", "tlx.local_load", "tlx.async_load", "tlx.local_gather", "tlx.local_scatter"}


def test_producers_touch_shared_memory_only_by_tma():
    """No attention kernel's producer partition reads or writes shared memory with its threads:
    a stage reaches the consumers by TMA and its mbarrier's complete_tx alone. (Generic stores by
    a producer's threads, published by one thread's arrive after a named barrier, are ordered in
    PTX's model, but compute-sanitizer's racecheck cannot see that order and reports them.)"""
    from tlx.compiler.ir.core import preorder

    seen = set()
    for spec in ATTN_SPECS:
        if spec.fn.__name__ in seen or spec.fn.__name__ == "attn_bwd_preprocess_kernel":
            continue
        seen.add(spec.fn.__name__)
        ws = [op for op in spec.trace().ops() if op.name == "tlx.warp_specialize"]
        assert len(ws) == 1, spec.name
        producer = {op.name for op in preorder(ws[0].regions[0].block)}
        assert "tlx.tma_load" in producer and not producer & GENERIC_SHARED, (spec.name, producer & GENERIC_SHARED)
    assert len(seen) == 5, seen  # three forwards, dK/dV, dQ


@pytest.mark.parametrize("N,copied", [(100, False), (102, True)])
def test_backward_rows_have_tma_strides(N, copied):
    """The dK/dV kernel moves LSE and Delta rows by TMA, whose strides must be 16-byte aligned:
    a contiguous lse is read in place when seq is a multiple of 4, else the preprocess kernel
    copies it into rows padded to a multiple of 4 (the padding rows stay unread: NaN here);
    Delta is made padded; the preprocess and dQ kernels get the same row stride."""
    x = random_array((2, 3, N, 64), "fp16")
    lse = rng.standard_normal((2, 3, N)).astype(np.float32)
    pre, dkdv, dq = attention.plan_backward(x, x, x, x, lse, x).launches
    lse_desc, delta_desc = dkdv.args[6:8]
    stride = -(-N // 4) * 4
    assert (lse_desc.base is not lse) == copied and pre.constexprs["COPY_LSE"] == copied
    for d in (lse_desc, delta_desc):
        assert d.shape == [2, 3, N] and d.strides == [3 * stride, stride, 1] and d.block_shape == [1, 1, 64]
        if d.base is not lse:
            d.base[...] = np.nan  # poisoned: the preprocess kernel must write every row
    want = lse.copy()
    assert dkdv.signature()["lse_desc"] == dkdv.signature()["delta_desc"] == "tensordesc<fp32[1, 1, 64]>"
    assert pre.args[2] is delta_desc.base and pre.args[3] is lse and pre.args[4] is lse_desc.base
    assert pre.args[5] == stride
    assert dq.args[5] is lse_desc.base and dq.args[6] is delta_desc.base and dq.args[7] == stride
    assert pre.run() == []
    assert not np.isnan(lse_desc.base).any() and not np.isnan(delta_desc.base).any()
    np.testing.assert_array_equal(lse_desc.base, want)
    ref = (values(x) * values(x)).sum(-1)
    np.testing.assert_allclose(delta_desc.base, ref, rtol=1e-5)


# ---- bad inputs ----------------------------------------------------------------------------------

def test_bad_inputs_are_clear_errors():
    x = np.zeros((1, 2, 64, 64), np.float16)
    bad = [
        (lambda: attention.plan_forward(np.zeros((1, 2, 64, 96), np.float16), *[np.zeros((1, 2, 64, 96), np.float16)] * 2),
         "head_dim 96 is not supported"),
        (lambda: attention.plan_forward(x, x, np.zeros((1, 2, 32, 64), np.float16)), "must have one shape"),
        (lambda: attention.plan_forward(*[np.zeros((1, 2, 64, 64), np.float32)] * 3), "fp16 or bf16"),
        (lambda: attention.plan_forward(x, x, x, sm_scale=-1.0), "sm_scale must be positive"),
        (lambda: attention.plan_forward(x, x, np.zeros((1, 2, 64, 128), np.float16)[..., ::2]), "contiguous head_dim"),
        (lambda: attention.plan_forward(np.zeros((2, 64, 64), np.float16), *[np.zeros((2, 64, 64), np.float16)] * 2),
         "batch, heads, seq, head_dim"),
        (lambda: attention.plan_forward(x, x, x, config=attention.ForwardConfig(128, 128, 8)), "shared memory"),
        (lambda: attention.plan_forward(x, x, x, config=attention.ForwardConfig(HEAD_GROUP=-1)), "HEAD_GROUP"),
        (lambda: attention.plan_forward(x, x, x, config=attention.ForwardConfig(OVERLAP_TILES=True)),
         "OVERLAP_TILES is a schedule of the persistent forward"),
        (lambda: attention.plan_forward(x, x, x, persistent=True,
                                        config=attention.ForwardConfig(OVERLAP_TILES=True, HEAD_GROUP=8)),
         "HEAD_GROUP must be 0"),
        (lambda: attention.plan_forward(*[np.zeros((1, 2, 64, 256), np.float16)] * 3, persistent=True,
                                        config=attention.ForwardConfig(BLOCK_N=64, OVERLAP_TILES=True)),
         "without OVERLAP_TILES"),
        (lambda: attention.plan_backward(x, x, x, x, np.zeros((1, 2, 64), np.float32), x[:, :, :32]), "do must be"),
        (lambda: attention.plan_backward(x, x, x, x, np.zeros((1, 64, 2), np.float32).transpose(0, 2, 1), x),
         "lse has strides"),
        (lambda: attention.attention(x, x, x), "torch tensors"),
    ]
    for call, msg in bad:
        with pytest.raises(attention.AttentionArgumentError, match=msg):
            call()

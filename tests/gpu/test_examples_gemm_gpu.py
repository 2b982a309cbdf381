"""Every GEMM example (tlx.examples.gemm) on the GPU, correct at every benchmarked shape (M=N=K=4096
and 8192, 8192x1024x8192, 1024x8192x4096) and at ragged ones, bf16 and fp16: relative error
<= 1e-2 against a float64 reference, outputs poisoned with NaN first, fresh random inputs (the
seed is in every failure message); plus repeated runs that must agree bit for bit (a moving
result is a race) and a launch on a side stream. Each launch is one CI compiled
(tests/kernels/gemm_examples.py)."""

from __future__ import annotations

import random

import pytest

from kernels.gemm_examples import BENCH_SHAPES, DTYPES, FEW_SMS, KINDS, RAGGED_SHAPES, SANITIZE_RUNS, spec_for

pytestmark = pytest.mark.gpu


def _seed() -> int:
    import torch

    seed = random.SystemRandom().randrange(2 ** 31)
    torch.manual_seed(seed)
    return seed


_REF_CACHE: dict = {}


def _inputs(M: int, N: int, K: int, dtype: str):
    """(seed, a, b, float64 reference), shared by the three kernels of one shape and dtype."""
    import torch

    key = (M, N, K, dtype)
    if key not in _REF_CACHE:
        _REF_CACHE.clear()  # keep at most one shape's matrices on the device
        seed = _seed()
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        a = torch.randn(M, K, device="cuda").to(tdt)
        b = torch.randn(K, N, device="cuda").to(tdt)
        ref = torch.matmul(a.double(), b.double())
        _REF_CACHE[key] = (seed, a, b, ref)
    return _REF_CACHE[key]


def _run(kind: str, a, b, sms=None):
    import torch

    from tlx.examples import gemm

    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=a.dtype)
    plan = gemm.ALL_PLANS[kind](a, b, out=c, **({"sms": sms} if sms else {}))
    spec_for(plan).check(*plan.args)
    plan.run()
    torch.cuda.synchronize()
    return c


def _check(kind, M, N, K, dtype, seed, c, ref):
    import torch

    nan = int(torch.isnan(c).sum().item())
    assert nan == 0, f"{kind} {dtype} {M}x{N}x{K} (seed {seed}): {nan} elements never written"
    rel = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
    worst = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert rel <= 1e-2 and worst <= 1e-2, \
        f"{kind} {dtype} {M}x{N}x{K} (seed {seed}): relative error {rel:.3e}, worst element {worst:.3e}"


@pytest.mark.parametrize("kind", KINDS)  # fastest-varying: the three kernels share one shape's inputs
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", BENCH_SHAPES + RAGGED_SHAPES, ids=lambda v: str(v))
def test_gemm_example_on_gpu(kind, M, N, K, dtype):
    seed, a, b, ref = _inputs(M, N, K, dtype)
    c = _run(kind, a, b)
    _check(kind, M, N, K, dtype, seed, c, ref)


@pytest.mark.parametrize("kind", KINDS)
def test_gemm_example_repeats_bit_for_bit(kind):
    """Five runs on the same inputs give identical bits: a missing barrier or fence would make
    the result move between runs."""
    import torch

    seed, a, b, ref = _inputs(4096, 4096, 4096, "bf16")
    first = _run(kind, a, b)
    for i in range(4):
        again = _run(kind, a, b)
        diff = int((again.view(torch.int16) != first.view(torch.int16)).sum().item())
        assert diff == 0, f"{kind} run {i + 2} differs from run 1 in {diff} elements (seed {seed})"
    _check(kind, 4096, 4096, 4096, "bf16", seed, first, ref)


@pytest.mark.parametrize("kind", KINDS)
def test_gemm_example_on_a_side_stream(kind):
    """The wrapper's stream= reaches the launch: the kernel is ordered on that stream."""
    import torch

    from tlx.examples import gemm

    seed, a, b, ref = _inputs(1000, 776, 1000, "fp16")
    s = torch.cuda.Stream()
    c = torch.full((1000, 776), float("nan"), device="cuda", dtype=a.dtype)
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        plan = gemm.ALL_PLANS[kind](a, b, out=c)
        spec_for(plan).check(*plan.args)
        plan.run(stream=s)
    s.synchronize()
    _check(kind, 1000, 776, 1000, "fp16", seed, c, ref)


@pytest.mark.parametrize("kind,M,N,K,dtype,sms", SANITIZE_RUNS,
                         ids=lambda v: "x" if v is None else str(v))
def test_sanitized_gemm_example(kind, M, N, K, dtype, sms):
    """The runs tests/gpu/test_sanitizer.py makes under memcheck, racecheck and synccheck: each
    GEMM example at a ragged shape, and at one where the persistent kernels loop over several
    tiles per CTA (`sms=2`); checked against float64 like the others."""
    seed, a, b, ref = _inputs(M, N, K, dtype)
    c = _run(kind, a, b, sms)
    _check(kind, M, N, K, dtype, seed, c, ref)


@pytest.mark.gpu_timeout(120)
@pytest.mark.parametrize("kind", list(FEW_SMS))
def test_persistent_kernels_survive_many_launches_with_few_k_tiles_per_tile(kind):
    """200 launches of the launch that hung (bf16 520x392x200 on 2 CTAs: 10 tiles per CTA, 4
    k-tiles through a 5-stage ring, so a stage's next fill belongs to another tile): a consumer's
    leader released a stage while another warp of its warpgroup could still poll the stage's
    full barrier, which then waited for a fill that never came (a hang in about 3 of 4 single
    launches). Every launch must finish (the watchdog ends a hang) with the first's bits. The
    stream-K kernel runs on 3 CTAs: its last tile is split over all three, so every launch also
    needs the flags the previous one left zero."""
    import torch

    seed, a, b, ref = _inputs(520, 392, 200, "bf16")
    first = _run(kind, a, b, FEW_SMS[kind])
    _check(kind, 520, 392, 200, "bf16", seed, first, ref)
    for i in range(199):
        again = _run(kind, a, b, FEW_SMS[kind])
        diff = int((again.view(torch.int16) != first.view(torch.int16)).sum().item())
        assert diff == 0, f"{kind} launch {i + 2} differs from launch 1 in {diff} elements (seed {seed})"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096)] + RAGGED_SHAPES, ids=lambda v: str(v))
def test_persistent_sub_tiled_epilogue_with_four_stages_on_gpu(M, N, K, dtype):
    """The --sweep's main candidate (EPI_SPLIT=4 chunks through two buffers per consumer, a
    4-stage ring in 224 KiB): correct at ragged shapes, and the same bits on a second run."""
    import dataclasses

    from tlx.examples import gemm

    _check_config_twice("persistent-s4e4", dataclasses.replace(gemm.H200_PERSISTENT, NUM_STAGES=4, EPI_SPLIT=4),
                        M, N, K, dtype)


def _check_config_twice(name: str, cfg, M: int, N: int, K: int, dtype: str) -> None:
    """The persistent kernel with `cfg`, run twice: correct against float64, the same bits both times."""
    import torch

    from tlx.examples import gemm

    seed, a, b, ref = _inputs(M, N, K, dtype)
    outs = []
    for _ in range(2):
        c = torch.full((M, N), float("nan"), device="cuda", dtype=a.dtype)
        gemm.plan_persistent(a, b, cfg, out=c).run()
        torch.cuda.synchronize()
        outs.append(c)
    _check(name, M, N, K, dtype, seed, outs[0], ref)
    diff = int((outs[1].view(torch.int16) != outs[0].view(torch.int16)).sum().item())
    assert diff == 0, f"{name} run 2 differs from run 1 in {diff} elements (seed {seed})"


# configs the sweeps measure beside the default (docs/performance.md): the persistent kernel on one
# CTA per SM (the default grid until 2026-12-07), and with 16-row tile groups
PERSISTENT_OPTIONS = [{"EVEN_WAVES": False}, {"GROUP_SIZE_M": 16}]


@pytest.mark.parametrize("changes", PERSISTENT_OPTIONS, ids=lambda v: ",".join(f"{k}={x}" for k, x in v.items()))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", BENCH_SHAPES + RAGGED_SHAPES, ids=lambda v: str(v))
def test_persistent_options_on_gpu(changes, M, N, K, dtype):
    """Each config correct at the benchmarked shapes and at ragged ones, and the same bits on a
    second run."""
    import dataclasses

    from tlx.examples import gemm

    _check_config_twice(f"persistent {changes}", dataclasses.replace(gemm.H200_PERSISTENT, **changes), M, N, K, dtype)

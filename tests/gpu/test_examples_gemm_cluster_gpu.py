"""The clustered GEMM example (tlx.examples.gemm.plan_persistent_cluster: 2-CTA clusters along M,
each B tile loaded once and multicast to both CTAs, stages released on both CTAs' empty barriers
by remote arrives) on the GPU: relative error <= 1e-2 against a float64 reference at benchmarked
and ragged shapes, bf16 and fp16, outputs poisoned with NaN first, fresh random inputs (the seed is
in every failure message); repeated runs must agree bit for bit (a moving result is a race). Each
launch is one CI compiled (tests/kernels/gemm_cluster_examples.py)."""

from __future__ import annotations

import random

import pytest

from kernels.gemm_cluster_examples import DTYPES, SHAPES, spec_for

pytestmark = pytest.mark.gpu


def _run(a, b):
    import torch

    from tlx.examples import gemm

    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=a.dtype)
    plan = gemm.plan_persistent_cluster(a, b, out=c)
    assert plan.cluster == (2, 1, 1)
    spec_for(plan).check(*plan.args)
    plan.run()
    torch.cuda.synchronize()
    assert plan.compiled.metadata.ctas_per_cga == (2, 1, 1)
    return c


@pytest.mark.parametrize("M,N,K", SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", DTYPES)
def test_clustered_gemm_matches_float64(M, N, K, dtype):
    import torch

    seed = random.SystemRandom().randrange(2 ** 31)
    torch.manual_seed(seed)
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    a = torch.randn(M, K, device="cuda").to(tdt)
    b = torch.randn(K, N, device="cuda").to(tdt)
    ref = torch.matmul(a.double(), b.double())
    c = _run(a, b)
    nan = int(torch.isnan(c).sum().item())
    assert nan == 0, f"{dtype} {M}x{N}x{K} (seed {seed}): {nan} elements never written"
    rel = (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item()
    worst = ((c.double() - ref).abs().max() / ref.abs().max()).item()
    assert rel <= 1e-2 and worst <= 1e-2, f"{dtype} {M}x{N}x{K} (seed {seed}): relative error {rel:.3e}, worst {worst:.3e}"
    if (M, N, K) == SHAPES[0]:
        for _ in range(3):
            again = _run(a, b)
            assert torch.equal(again, c), f"{dtype} {M}x{N}x{K} (seed {seed}): a rerun differs (a race)"

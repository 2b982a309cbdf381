"""tlx.testing's timers and tlx.autotune on the GPU: the timers measure what they time, the
autotuner picks the faster config by the real clock (CUDA events, and a CUDA graph), compiles
the configs in its pool through the launch path, and runs the tutorials' descriptor pre_hook
pattern. Kernels and their Specs: tests/kernels/autotune.py. Outputs are poisoned first and
checked against numpy in float64."""

from __future__ import annotations

import numpy as np
import pytest

import tlx
from kernels import autotune as K

pytestmark = pytest.mark.gpu


def test_do_bench_measures_twice_the_work_as_about_twice_the_time():
    import torch

    short = tlx.testing.do_bench(lambda: torch.cuda._sleep(1_000_000), warmup=5, rep=50)
    long = tlx.testing.do_bench(lambda: torch.cuda._sleep(2_000_000), warmup=5, rep=50)
    assert 1.6 < long / short < 2.4, (short, long)
    p50, p20, p80 = tlx.testing.do_bench(lambda: torch.cuda._sleep(1_000_000), quantiles=(0.5, 0.2, 0.8))
    assert p20 <= p50 <= p80 and p50 == pytest.approx(short, rel=0.25)
    samples = tlx.testing.do_bench(lambda: torch.cuda._sleep(1_000_000), rep=20, return_mode="all")
    assert isinstance(samples, list) and len(samples) >= 1 and all(s > 0 for s in samples)
    graph = tlx.testing.do_bench_cudagraph(lambda: torch.cuda._sleep(1_000_000), rep=20)
    assert graph == pytest.approx(short, rel=0.25)


@pytest.mark.parametrize("use_cuda_graph", [False, True], ids=["events", "cuda-graph"])
def test_autotune_launches_the_config_the_clock_finds_faster(use_cuda_graph, tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))
    slow, fast = ({**s.constexprs} for s in K.SPIN)
    configs = [tlx.Config(slow, num_warps=K.SPIN[0].num_warps), tlx.Config(fast, num_warps=K.SPIN[1].num_warps)]
    kernel = K.SpecLaunch(K.add_one_after_spinning, K.SPIN)
    tuned = tlx.autotune(configs, key=["n"], use_cuda_graph=use_cuda_graph, rep=20, warmup=5)(kernel)
    n = K.SPIN_N
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    out = torch.full_like(x, float("nan"))
    tuned[lambda META: (tlx.cdiv(META["n"], META["BLOCK"]),)](x, out, n)
    torch.cuda.synchronize()
    assert tuned.best_config is configs[1]
    slow_ms, fast_ms = (tuned.configs_timings[c][0] for c in configs)
    assert slow_ms > 10 * fast_ms, (slow_ms, fast_ms)
    np.testing.assert_allclose(out.cpu().numpy().astype(np.float64), x.cpu().numpy().astype(np.float64) + 1.0,
                               rtol=2.0 ** -24, atol=0)  # one float32 rounding of the sum


def test_autotune_with_the_tutorials_descriptor_pre_hook(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))
    hooks = []

    def set_block_shapes(nargs):
        hooks.append(nargs["BLOCK"])
        nargs["in_desc"].block_shape = [nargs["BLOCK"], 64]
        nargs["out_desc"].block_shape = [nargs["BLOCK"], 64]

    configs = [tlx.Config(dict(s.constexprs), num_warps=s.num_warps, num_stages=1, pre_hook=set_block_shapes)
               for s in K.COPY]
    kernel = K.SpecLaunch(K.copy_rows_tma, K.COPY)
    tuned = tlx.autotune(configs, key=[], rep=10, warmup=2)(kernel)  # keyed on the dtypes alone
    x = torch.randn(K.COPY_ROWS, 64, device="cuda", dtype=torch.float16)
    out = torch.full_like(x, float("nan"))
    dummy = [1, 1]  # as the tutorials make them: the pre_hook sets the real block shape
    in_desc = tlx.TensorDescriptor(x, x.shape, x.stride(), dummy)
    out_desc = tlx.TensorDescriptor(out, out.shape, out.stride(), dummy)
    tuned[lambda META: (K.COPY_ROWS // META["BLOCK"],)](in_desc, out_desc)
    torch.cuda.synchronize()
    assert set(hooks) == {64, 128} and tuned.best_config in configs
    np.testing.assert_array_equal(out.cpu().numpy(), x.cpu().numpy())
    assert in_desc.block_shape == [tuned.best_config.kwargs["BLOCK"], 64]

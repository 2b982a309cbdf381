"""tlx.testing: the timers' argument handling and their reduction of samples (on the CPU; the
timing itself is tests/gpu/test_autotune_gpu.py)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

import tlx
from tlx.testing import BenchmarkError, do_bench, do_bench_cudagraph, summarize

SAMPLES = list(np.random.default_rng(3).uniform(0.5, 2.0, 37))


@pytest.mark.parametrize("quantiles", [(0.5,), (0.5, 0.2, 0.8), (0.0, 1.0), (0.33, 0.999)])
def test_quantiles_interpolate_linearly_as_numpy(quantiles):
    got = summarize(SAMPLES, quantiles=quantiles)
    want = np.quantile(np.array(SAMPLES, dtype=np.float64), quantiles)  # numpy's default: linear
    if len(quantiles) == 1:
        assert isinstance(got, float) and got == pytest.approx(want[0], rel=1e-12)
    else:
        assert got == pytest.approx(list(want), rel=1e-12)


def test_return_modes():
    assert summarize(SAMPLES, return_mode="min") == min(SAMPLES)
    assert summarize(SAMPLES, return_mode="max") == max(SAMPLES)
    assert summarize(SAMPLES, return_mode="mean") == pytest.approx(float(np.mean(SAMPLES)), rel=1e-12)
    assert summarize(SAMPLES, return_mode="median") == statistics.median(SAMPLES)
    assert summarize(SAMPLES, return_mode="all") == SAMPLES


BAD = {
    "return_mode": (dict(return_mode="avg"), "return_mode='avg': give one of"),
    "quantile above 1": (dict(quantiles=(0.5, 1.5)), "every quantile must lie in [0, 1]"),
    "no quantiles": (dict(quantiles=()), "at least one"),
    "quantiles not numbers": (dict(quantiles=("p50",)), "give a sequence of numbers"),
    "rep 0": (dict(rep=0), "rep=0: give a time in milliseconds greater than 0"),
    "negative warmup": (dict(warmup=-1), "warmup=-1: give a time in milliseconds, 0 or more"),
    "rep nan": (dict(rep=float("nan")), "rep=nan"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arguments_are_refused_before_anything_runs(case):
    kwargs, message = BAD[case]
    calls = []
    with pytest.raises(BenchmarkError, match=message.replace("[", r"\[").replace("]", r"\]")):
        do_bench(lambda: calls.append(1), **kwargs)
    assert not calls
    if "warmup" not in kwargs:
        with pytest.raises(BenchmarkError):
            do_bench_cudagraph(lambda: calls.append(1), **kwargs)
    assert not calls


def test_a_non_callable_is_refused():
    with pytest.raises(BenchmarkError, match="do_bench times a callable taking no arguments, got int"):
        do_bench(5)


def test_without_a_gpu_the_timers_say_so_and_run_nothing():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    calls = []
    for timer in (do_bench, do_bench_cudagraph):
        with pytest.raises(BenchmarkError, match="times kernels on a CUDA GPU, and torch sees none"):
            timer(lambda: calls.append(1))
    assert not calls


def test_tlx_testing_is_exported():
    assert tlx.testing.do_bench is do_bench
    assert isinstance(BenchmarkError("x"), tlx.TLXError)

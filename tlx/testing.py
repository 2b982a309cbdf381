"""Timing kernels on the GPU, as `triton.testing` does: `do_bench` (CUDA events, the L2 cache
flushed before every timed run) and `do_bench_cudagraph` (the calls captured in a CUDA graph,
for kernels whose launch overhead would otherwise dominate). Both use torch for events,
streams and the flush buffer; torch is imported on the first call, so importing this module
needs neither torch nor a GPU.

Both return milliseconds: one number chosen by `return_mode` ("mean", "median", "min", "max",
or "all" for every sample), or, with `quantiles`, the quantiles of the samples (linear
interpolation between the two nearest samples, as numpy's default; one quantile gives a
number, several a list).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, List, Optional, Sequence, Union

from tlx.compiler.errors import TLXError

__all__ = ["do_bench", "do_bench_cudagraph", "summarize", "BenchmarkError"]

RETURN_MODES = ("min", "max", "mean", "median", "all")
L2_FLUSH_BYTES = 256 * 1000 * 1000  # larger than any GPU's L2 (H100: 50 MB), as Triton's buffer


class BenchmarkError(TLXError):
    """Bad arguments to `do_bench` / `do_bench_cudagraph`, or no CUDA GPU to time on."""


Timing = Union[float, List[float]]


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, grad_to_none: Optional[Sequence[Any]] = None,
             quantiles: Optional[Sequence[float]] = None, return_mode: str = "mean") -> Timing:
    """Time `fn()` on the GPU in ms: one call (which may compile), 5 calls to estimate its
    time, then about `warmup` ms of untimed calls and about `rep` ms of calls each timed by its
    own pair of CUDA events, with the L2 cache flushed (a 256 MB buffer zeroed) before each;
    `grad_to_none` tensors get ``.grad = None`` before each timed call."""
    _check_arguments(fn, quantiles, return_mode, rep=rep, warmup=warmup)
    torch = _cuda_torch("do_bench")
    fn()
    torch.cuda.synchronize()
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    # The estimate includes the flushes; a call faster than the events can resolve counts as
    # 1 µs rather than dividing by zero.
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-3)
    n_warmup = max(1, int(warmup / estimate_ms))
    n_repeat = max(1, int(rep / estimate_ms))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        for x in grad_to_none or ():
            x.grad = None
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)], quantiles, return_mode)


def do_bench_cudagraph(fn: Callable[[], Any], rep: float = 20, grad_to_none: Optional[Sequence[Any]] = None,
                       quantiles: Optional[Sequence[float]] = None, return_mode: str = "mean") -> Timing:
    """Time `fn()` in ms from a CUDA graph: on a side stream, one call (which may compile), 5
    calls to estimate its time, then about `rep` ms of calls captured in one graph, replayed 10
    times; each sample is a replay's time divided by the calls in it (no L2 flush: the calls
    run back to back, as in a graph the application replays)."""
    _check_arguments(fn, quantiles, return_mode, rep=rep)
    torch = _cuda_torch("do_bench_cudagraph")
    with torch.cuda.stream(torch.cuda.Stream()):
        fn()  # compiles and loads outside the capture: a capture may not load modules
        for x in grad_to_none or ():
            x.detach_()
            x.requires_grad_(True)
            x.grad = None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate_ms = start.elapsed_time(end) / 5
        n_repeat = 1000 if estimate_ms == 0 else max(1, int(rep / estimate_ms))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n_repeat):
                for x in grad_to_none or ():
                    x.grad = None
                fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / n_repeat)
    return summarize(times, quantiles, return_mode)


def summarize(times: Sequence[float], quantiles: Optional[Sequence[float]] = None,
              return_mode: str = "mean") -> Timing:
    """The samples `times` (ms) reduced as `do_bench` returns them: `quantiles` when given
    (linear interpolation; a single quantile as a number), else by `return_mode`."""
    _check_arguments(None, quantiles, return_mode)
    if not times:
        raise BenchmarkError("no timing samples to summarize")
    if quantiles is not None:
        ordered = sorted(times)
        out = [_quantile(ordered, float(q)) for q in quantiles]
        return out[0] if len(out) == 1 else out
    if return_mode == "all":
        return list(times)
    reduce = {"min": min, "max": max, "mean": statistics.mean, "median": statistics.median}[return_mode]
    return float(reduce(times))


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted samples, interpolating linearly between the nearest two."""
    point = q * (len(ordered) - 1)
    lo, hi = math.floor(point), math.ceil(point)
    t = point - lo
    return (1 - t) * ordered[lo] + t * ordered[hi]


def _check_arguments(fn: Any, quantiles: Optional[Sequence[float]], return_mode: str, **times: float) -> None:
    """Refuse what would otherwise fail deep in a timing loop or give a meaningless number."""
    if fn is not None and not callable(fn):
        raise BenchmarkError(f"do_bench times a callable taking no arguments, got {type(fn).__name__}\n"
                             "hint: pass a lambda, e.g. do_bench(lambda: kernel[grid](x, y))")
    if return_mode not in RETURN_MODES:
        raise BenchmarkError(f"return_mode={return_mode!r}: give one of {', '.join(map(repr, RETURN_MODES))}")
    if quantiles is not None:
        try:
            qs = [float(q) for q in quantiles]
        except (TypeError, ValueError):
            raise BenchmarkError(f"quantiles={quantiles!r}: give a sequence of numbers in [0, 1], "
                                 "e.g. (0.5, 0.2, 0.8)") from None
        bad = [q for q in qs if not 0.0 <= q <= 1.0]
        if bad or not qs:
            raise BenchmarkError(f"quantiles={list(quantiles)!r}: every quantile must lie in [0, 1] and there must "
                                 "be at least one, e.g. (0.5, 0.2, 0.8)")
    for name, value in times.items():
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or value < 0 or (name == "rep" and value == 0):
            raise BenchmarkError(f"{name}={value!r}: give a time in milliseconds"
                                 + (" greater than 0" if name == "rep" else ", 0 or more"))


def _cuda_torch(what: str) -> Any:
    """torch, when it can time on a CUDA GPU; a BenchmarkError saying what is missing otherwise."""
    try:
        import torch
    except ImportError:
        raise BenchmarkError(f"{what} times with torch's CUDA events, and torch is not installed\n"
                             "hint: pip install torch (a CUDA build)") from None
    if not torch.cuda.is_available():
        raise BenchmarkError(f"{what} times kernels on a CUDA GPU, and torch sees none "
                             f"(torch {torch.__version__})\n"
                             "hint: run on a machine with an NVIDIA GPU and a CUDA build of torch")
    return torch

"""What the GPU benchmarks share: waiting on the device — a launch that does not finish within
HANG_S seconds is a `Hang` (the CUDA context cannot be used any more, so the child process stops),
not a benchmark that waits forever — and timing launches with CUDA events, alone or in
alternation with the library they are compared with."""

from __future__ import annotations

import time
from typing import Any, Callable, List, Sequence, Tuple

HANG_S = 20.0  # one kernel launch longer than this is a hang


class Hang(Exception):
    """A launch did not finish within its limit: the CUDA context cannot be used any more."""


def wait_or_hang(torch, what: str, limit: float = HANG_S) -> None:
    """Wait for the work queued on torch's current stream, raising `Hang` after `limit` seconds."""
    ev = torch.cuda.Event()
    ev.record()
    t0 = time.time()
    while not ev.query():
        if time.time() - t0 > limit:
            raise Hang(f"{what} did not finish within {limit:.0f} s")
        time.sleep(0.0005)
    torch.cuda.synchronize()  # surfaces an asynchronous CUDA error here


def time_runs(torch, fns: Sequence[Callable[[], Any]], runs: int, warm: bool = True,
              per_run_s: float = 0.1) -> List[float]:
    """Milliseconds of each of `runs` launches (`fns` rotate, e.g. over input sets that do not
    fit L2 together), each between its own events, queued behind a ~20 ms device sleep so the
    host never starves the GPU; 3 warm-up launches first unless `warm` is False."""
    if warm:
        for i in range(3):
            fns[i % len(fns)]()
        wait_or_hang(torch, "warm-up")
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    torch.cuda._sleep(40_000_000)  # ~20 ms at 1.98 GHz: the host queues everything meanwhile
    for i in range(runs):
        starts[i].record()
        fns[i % len(fns)]()
        ends[i].record()
    wait_or_hang(torch, "timed runs", HANG_S + runs * per_run_s)
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def time_paired(torch, fns: Sequence[Callable[[], Any]], anchor: Sequence[Callable[[], Any]], runs: int,
                rounds: int = 6, per_run_s: float = 0.1) -> Tuple[List[float], List[float]]:
    """Milliseconds of `runs` launches of `fns` and of `anchor` (the library compared with),
    timed in `rounds` alternating batches (which goes first alternates too) after 20 warm-up
    launches of each, so that both see the same clocks and temperature: timed one after the
    other, the second runs on a hotter, more power-limited GPU than the first."""
    for i in range(20):
        fns[i % len(fns)]()
        anchor[i % len(anchor)]()
    wait_or_hang(torch, "paired warm-up", HANG_S + 40 * per_run_s)
    per = max(2, runs // rounds)
    ours: List[float] = []
    theirs: List[float] = []
    for r in range(rounds):
        pair = ((fns, ours), (anchor, theirs))
        for f, out in (pair if r % 2 == 0 else pair[::-1]):
            out.extend(time_runs(torch, f, per, warm=False, per_run_s=per_run_s))
    return ours, theirs

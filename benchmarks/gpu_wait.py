"""What the GPU benchmarks share for waiting on the device: a launch that does not finish within
HANG_S seconds is a `Hang` (the CUDA context cannot be used any more, so the child process stops),
not a benchmark that waits forever."""

from __future__ import annotations

import time

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

"""Python's cyclic garbage collector paused while the compiler runs.

Why: a compile allocates an IR of many small objects with parent pointers (cycles) that all live
until it ends, so every collection the allocations trigger traverses the growing IR and frees
nothing. On a 100 000-op module the fence passes took 1.67–1.85 s with the collector running and
1.25 s without it (benchmarks/fence_passes.py's machine). The collector is switched back on, if
it was on, when the last of any concurrent compiles ends; the garbage of the compile is collected
by the next automatic collection after that.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_active = 0  # compiles running now, in any thread
_reenable = False  # whether the first of them found the collector on


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector for the duration of the block; nested and concurrent blocks
    (threads) share one pause, ended by the last to leave; a collector the user had switched off
    stays off."""
    global _active, _reenable
    with _lock:
        if _active == 0:
            _reenable = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _reenable:
                gc.enable()

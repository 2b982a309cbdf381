"""GPU tests: a watchdog per test. A kernel that never finishes (an mbarrier that is never
completed, a spin on a flag) would otherwise hang the run and burn the shared GPU lease. After
TLX_GPU_TEST_TIMEOUT seconds (default 180) the watchdog writes every thread's traceback to
TLX_GPU_WATCHDOG_LOG (default /tmp/tlx-gpu-watchdog.log; pytest's output capture would swallow
it on stderr) and ends the process with a non-zero status."""

import faulthandler
import os

import pytest

TIMEOUT = float(os.environ.get("TLX_GPU_TEST_TIMEOUT", "180"))
LOG = os.environ.get("TLX_GPU_WATCHDOG_LOG", "/tmp/tlx-gpu-watchdog.log")


@pytest.fixture(autouse=True)
def _gpu_watchdog(request):
    if "gpu" not in request.keywords or TIMEOUT <= 0:
        yield
        return
    log = open(LOG, "w")
    log.write(f"watchdog: {request.node.nodeid} ran past {TIMEOUT:.0f} s (hung kernel?)\n")
    log.flush()
    faulthandler.dump_traceback_later(TIMEOUT, exit=True, file=log)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        log.close()

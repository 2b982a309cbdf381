"""GPU tests: a watchdog per test. A kernel that never finishes (an mbarrier that is never
completed, a spin on a flag) would otherwise hang the run and burn the shared GPU lease. After
TLX_GPU_TEST_TIMEOUT seconds (default 180; a test marked ``gpu_timeout(seconds)`` takes that) the
watchdog writes every thread's traceback to TLX_GPU_WATCHDOG_LOG (default tlx-gpu-watchdog.log in
the temporary directory; pytest's output capture would swallow it on stderr) and ends the process
with a non-zero status."""

import faulthandler
import os
import random
import tempfile

import pytest

TIMEOUT = float(os.environ.get("TLX_GPU_TEST_TIMEOUT", "180"))
LOG = os.environ.get("TLX_GPU_WATCHDOG_LOG", os.path.join(tempfile.gettempdir(), "tlx-gpu-watchdog.log"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu_timeout(seconds): the GPU watchdog's limit for this test")


@pytest.fixture(autouse=True)
def _gpu_watchdog(request):
    marker = request.node.get_closest_marker("gpu_timeout")
    limit = float(marker.args[0]) if marker else TIMEOUT
    if "gpu" not in request.keywords or limit <= 0:
        yield
        return
    log = open(LOG, "w")
    log.write(f"watchdog: {request.node.nodeid} ran past {limit:.0f} s (hung kernel?)\n")
    log.flush()
    faulthandler.dump_traceback_later(limit, exit=True, file=log)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        log.close()


@pytest.fixture
def torch():
    """torch, with a fresh random seed (printed: pytest shows it with a failure)."""
    import torch

    seed = random.SystemRandom().randrange(2 ** 31)
    torch.manual_seed(seed)
    print("seed", seed)
    return torch

"""Shared pytest setup: the `gpu` marker skips cleanly on machines without an sm_90 GPU."""

import pytest


def _have_sm90_gpu() -> bool:
    try:
        from numba import cuda

        if not cuda.is_available():
            return False
        return cuda.get_current_device().compute_capability >= (9, 0)
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if any("gpu" in item.keywords for item in items) and not _have_sm90_gpu():
        skip = pytest.mark.skip(reason="needs an sm_90 GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)

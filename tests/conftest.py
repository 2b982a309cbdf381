"""Shared pytest setup: the `gpu` marker skips cleanly on machines without an sm_90 GPU."""

import pytest

from tlx.runtime.driver import has_sm90_gpu


def pytest_collection_modifyitems(config, items):
    if any("gpu" in item.keywords for item in items) and not has_sm90_gpu():
        skip = pytest.mark.skip(reason="needs an sm_90 GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)

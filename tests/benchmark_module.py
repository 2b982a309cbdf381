"""The scripts of benchmarks/ as modules, for the tests that check them (the folder is not a package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_benchmark(script: str) -> ModuleType:
    """benchmarks/<script>.py executed afresh as module ``bench_<script>`` (not registered in
    sys.modules: each call gets its own copy, so a test may change module globals freely)."""
    spec = importlib.util.spec_from_file_location(f"bench_{script}", BENCHMARKS / f"{script}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

"""Compiled copies of the compiler's hot modules: which modules, how the import system finds them,
and when the Python source is used instead.

The fence passes and the IR they walk are plain Python. `pip install` also compiles the modules
named in `ACCELERATED` with Cython (setup.py's ``build_ext``), from the very same source files,
into extension modules beside them; the compiled copy runs the same code about a third faster
(benchmarks/fence_passes.py). Nothing else changes: same names, same behaviour, same errors.

Which copy is imported, per module (`choose`):

* the compiled one only when it exists and was built from the source file as it is now — the
  build writes the source's SHA-256 next to the extension (``<extension>.sha256``), and an
  edited source no longer matches it, so an editable install never runs stale code;
* the Python source otherwise (no C compiler or no Cython at install time, a source edited since
  the build, or ``TLX_PURE_PYTHON=1`` in the environment).

`install_finder` puts the finder that makes this choice first on ``sys.meta_path`` (the
``tlx.compiler`` package does it on import, before any of these modules loads); `status` says
what was chosen. This module imports nothing of the compiler: setup.py reads it before the package
exists.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from typing import Dict, Optional, Sequence

# (module under tlx.compiler, its source relative to the compiler/ folder): the modules the fence
# passes spend their time in — the passes, the analyses they share, the IR core and fence records
ACCELERATED: Dict[str, str] = {
    "tlx.compiler.ir.core": "ir/core.py",
    "tlx.compiler.ir.types": "ir/types.py",
    "tlx.compiler.ir.layouts": "ir/layouts.py",
    "tlx.compiler.ir.ops": "ir/ops.py",
    "tlx.compiler.fences": "fences.py",
    "tlx.compiler.passes.manager": "passes/manager.py",
    "tlx.compiler.passes.lower_dot": "passes/lower_dot.py",
    "tlx.compiler.passes.memory": "passes/memory.py",
    "tlx.compiler.passes.flights": "passes/flights.py",
    "tlx.compiler.passes.edits": "passes/edits.py",
    "tlx.compiler.passes.skeleton": "passes/skeleton.py",
    "tlx.compiler.passes.access_index": "passes/access_index.py",
    "tlx.compiler.passes.tma_lowering": "passes/tma_lowering.py",
    "tlx.compiler.passes.fence_insertion": "passes/fence_insertion.py",
    "tlx.compiler.passes.smem_allocation": "passes/smem_allocation.py",
    "tlx.compiler.passes.proxy_fence_insertion": "passes/proxy_fence_insertion.py",
    "tlx.compiler.passes.cta_barriers": "passes/cta_barriers.py",
}

PURE_ENV = "TLX_PURE_PYTHON"
EXTENSION_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]  # e.g. .cpython-311-x86_64-linux-gnu.so
HASH_SUFFIX = ".sha256"

_chosen: Dict[str, str] = {}  # module -> "compiled" | "source (why)", as imported in this process


def source_hash(path: str) -> str:
    """SHA-256 (hex) of a source file's bytes: what a compiled copy records it was built from."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def extension_path(source: str) -> str:
    """Where the compiled copy of `source` (a .py path) lies: beside it, with this interpreter's
    extension suffix."""
    return source[:-3] + EXTENSION_SUFFIX


def pure_python_requested() -> bool:
    """Whether ``TLX_PURE_PYTHON`` asks for the Python sources."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def built_from(extension: str, digest: str) -> bool:
    """Whether the compiled copy `extension` exists and records `digest` as its source's hash."""
    try:
        with open(extension + HASH_SUFFIX) as f:
            return os.path.exists(extension) and f.read().strip() == digest
    except OSError:
        return False


def choose(source: str) -> Optional[str]:
    """The compiled copy of `source` to import, or None (with the reason in `why_source`) when the
    source itself must be imported: no copy, no recorded hash, or one of another source."""
    ext = extension_path(source)
    if pure_python_requested() or not built_from(ext, source_hash(source)):
        return None
    return ext


def why_source(source: str) -> str:
    """Why `choose` picked the Python source for `source` (for `status`)."""
    ext = extension_path(source)
    if pure_python_requested():
        return f"{PURE_ENV} is set"
    if not os.path.exists(ext):
        return "not compiled (pip install builds it when Cython and a C compiler are there)"
    if not os.path.exists(ext + HASH_SUFFIX):
        return "compiled copy without its source hash"
    return "the source changed since it was compiled (pip install -e . rebuilds it)"


class CompiledModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of `ACCELERATED`: their compiled copy when `choose` allows it, else their
    Python source; every other module is left to the rest of ``sys.meta_path``."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target=None):
        rel = ACCELERATED.get(fullname)
        if rel is None or not path:
            return None
        base = os.path.basename(rel)
        for folder in path:
            source = os.path.join(folder, base)
            if os.path.exists(source):
                break
        else:
            return None
        ext = choose(source)
        if ext is not None:
            _chosen[fullname] = "compiled"
            loader = importlib.machinery.ExtensionFileLoader(fullname, ext)
            return importlib.util.spec_from_file_location(fullname, ext, loader=loader)
        _chosen[fullname] = f"source ({why_source(source)})"
        return importlib.util.spec_from_file_location(fullname, source)


def install_finder() -> None:
    """Put a `CompiledModuleFinder` first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, CompiledModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, CompiledModuleFinder())


def status() -> Dict[str, str]:
    """For every module of `ACCELERATED`: "compiled" or "source (why)", as imported in this
    process (modules not imported yet are imported here)."""
    for name in ACCELERATED:
        importlib.import_module(name)
    return {name: _chosen.get(name, "source (imported before the finder was installed)") for name in ACCELERATED}


def summary() -> str:
    """One line for reports: how many of the hot modules run compiled."""
    st = status()
    n = sum(1 for v in st.values() if v == "compiled")
    if n == len(st):
        return f"compiled passes: all {n} hot modules (Cython)"
    reasons = sorted({v for v in st.values() if v != "compiled"})
    return f"compiled passes: {n} of {len(st)} hot modules; the others run from source: {'; '.join(reasons)}"

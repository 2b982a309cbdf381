"""The package declares what it imports: every third-party top-level module that tlx, tlx.compiler
and tlx.runtime import names a distribution listed in pyproject.toml's dependencies."""

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# import name -> the distribution that provides it
PROVIDED_BY = {"numpy": "numpy", "numba": "numba", "cuda": None, "typing_extensions": "typing_extensions"}
CUDA_SUBMODULES = {"cuda.bindings": "cuda-bindings", "cuda.core": "cuda-core", "cuda.pathfinder": "cuda-pathfinder"}
OPTIONAL = {"torch", "cupy", "IPython", "matplotlib", "nbformat", "triton", "nvidia"}  # used only when present


def _declared() -> set:
    text = (ROOT / "pyproject.toml").read_text()
    deps = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M).group(1)
    return {re.match(r'\s*"([A-Za-z0-9_.-]+)', line).group(1).lower().replace("_", "-")
            for line in deps.splitlines() if line.strip().startswith('"')}


def _imports():
    for folder in ("tlx", "compiler", "runtime"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        yield path, a.name
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    yield path, node.module + "".join("." + a.name for a in node.names if node.module == "cuda")


def test_every_third_party_import_is_a_declared_dependency():
    declared = _declared()
    stdlib = set(sys.stdlib_module_names)
    missing = set()
    for path, name in _imports():
        top = name.split(".")[0]
        if top in stdlib or top in ("tlx", "__future__") or top in OPTIONAL:
            continue
        if top == "cuda":
            dist = next((d for m, d in CUDA_SUBMODULES.items() if name.startswith(m)), None)
            assert dist is not None, f"{path}: import of {name}: which distribution provides it?"
            if dist == "cuda-pathfinder":  # only probed for ptxas, inside a try
                continue
        else:
            assert top in PROVIDED_BY, f"{path}: third-party import {name} is neither declared nor known optional"
            dist = PROVIDED_BY[top]
        if dist.lower().replace("_", "-") not in declared:
            missing.add((dist, str(path.relative_to(ROOT))))
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"

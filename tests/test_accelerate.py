"""The compiled copies of the hot modules (compiler/accelerate.py): used only while built from the
current source, never when asked not to, and indistinguishable from the source in what they do."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tlx.compiler import accelerate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _module_with_copy(folder, source: str = "X = 1\n", stamp: str = "match"):
    """A module `mod.py` in `folder` with a (fake) compiled copy beside it and, unless `stamp` is
    None, the copy's recorded source hash: the source's own ("match") or another text's."""
    py = folder / "mod.py"
    py.write_text(source)
    ext = folder / ("mod" + accelerate.EXTENSION_SUFFIX)
    ext.write_bytes(b"not really an extension")
    if stamp is not None:
        digest = accelerate.source_hash(str(py)) if stamp == "match" else "0" * 64
        (folder / ("mod" + accelerate.EXTENSION_SUFFIX + accelerate.HASH_SUFFIX)).write_text(digest + "\n")
    return str(py), str(ext)


def test_a_copy_built_from_the_current_source_is_chosen(tmp_path, monkeypatch):
    monkeypatch.delenv(accelerate.PURE_ENV, raising=False)
    py, ext = _module_with_copy(tmp_path)
    assert accelerate.choose(py) == ext


def test_an_edited_source_is_imported_instead_of_its_stale_copy(tmp_path, monkeypatch):
    monkeypatch.delenv(accelerate.PURE_ENV, raising=False)
    py, _ = _module_with_copy(tmp_path)
    with open(py, "a") as f:
        f.write("Y = 2\n")  # edited after the build
    assert accelerate.choose(py) is None
    assert "changed since it was compiled" in accelerate.why_source(py)


def test_a_copy_without_a_matching_hash_is_not_used(tmp_path, monkeypatch):
    monkeypatch.delenv(accelerate.PURE_ENV, raising=False)
    py, _ = _module_with_copy(tmp_path, stamp="other")
    assert accelerate.choose(py) is None
    os.remove(str(tmp_path / ("mod" + accelerate.EXTENSION_SUFFIX + accelerate.HASH_SUFFIX)))
    assert accelerate.choose(py) is None
    assert "without its source hash" in accelerate.why_source(py)


def test_no_copy_means_the_source(tmp_path, monkeypatch):
    monkeypatch.delenv(accelerate.PURE_ENV, raising=False)
    py = tmp_path / "mod.py"
    py.write_text("X = 1\n")
    assert accelerate.choose(str(py)) is None
    assert "not compiled" in accelerate.why_source(str(py))


def test_pure_python_env_wins_over_a_current_copy(tmp_path, monkeypatch):
    py, _ = _module_with_copy(tmp_path)
    monkeypatch.setenv(accelerate.PURE_ENV, "1")
    assert accelerate.choose(py) is None
    assert accelerate.PURE_ENV in accelerate.why_source(py)


def test_the_finder_imports_the_source_of_a_stale_module(tmp_path, monkeypatch):
    # a package whose module has a stale (and unloadable) copy: the finder must import the source
    monkeypatch.delenv(accelerate.PURE_ENV, raising=False)
    pkg = tmp_path / "accel_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    py, _ = _module_with_copy(pkg, source="VALUE = 'from source'\n", stamp="other")
    monkeypatch.setitem(accelerate.ACCELERATED, "accel_probe_pkg.mod", "mod.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = accelerate.CompiledModuleFinder().find_spec("accel_probe_pkg.mod", [str(pkg)])
    assert spec.origin == py
    # and with a matching hash it picks the copy (which the standard finder would take anyway)
    (pkg / ("mod" + accelerate.EXTENSION_SUFFIX + accelerate.HASH_SUFFIX)).write_text(accelerate.source_hash(py))
    spec = accelerate.CompiledModuleFinder().find_spec("accel_probe_pkg.mod", [str(pkg)])
    assert spec.origin.endswith(accelerate.EXTENSION_SUFFIX)
    # a name outside ACCELERATED is none of its business
    assert accelerate.CompiledModuleFinder().find_spec("accel_probe_pkg.other", [str(pkg)]) is None


def test_every_accelerated_module_exists_and_is_imported_through_the_finder():
    st = accelerate.status()
    assert set(st) == set(accelerate.ACCELERATED)
    for name, rel in accelerate.ACCELERATED.items():
        assert os.path.exists(os.path.join(ROOT, "compiler", rel)), name
        assert st[name] == "compiled" or st[name].startswith("source ("), (name, st[name])
        assert "imported before the finder" not in st[name], name


# The catalogue's kernels through the whole IR pipeline, as JSON: the IR after every pass and every
# fence's record. Run once here and once in a subprocess from source only.
_DUMP = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
from catalog import CASES
from tlx.compiler.options import CompileOptions
from tlx.compiler.pipeline import compile_module
from tlx.compiler import accelerate
out = {"compiled": sorted(k for k, v in accelerate.status().items() if v == "compiled")}
for case in CASES:
    res = compile_module(case.trace(), CompileOptions(), snapshots=True)
    out[case.name] = {"ir": {k: v for k, v in res.asm.items() if k.startswith("ir")},
                      "fences": res.explain_fences()}
# (catalog.py writes the TLX-sourced kernels to temporary files: their folders differ per process)
print(re.sub(r'/tmp/tlx_src_[^/"]+/', '<src>/', json.dumps(out)))
"""


def _dump(pure: bool):
    env = dict(os.environ)
    env.pop(accelerate.PURE_ENV, None)
    if pure:
        env[accelerate.PURE_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", _DUMP, os.path.join(ROOT, "tests")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_compiled_modules_compile_every_catalogue_kernel_exactly_like_the_source():
    compiled = _dump(pure=False)
    if not compiled["compiled"]:
        pytest.skip(f"no compiled copies in this install ({accelerate.summary()})")
    source = _dump(pure=True)
    assert source["compiled"] == []
    assert set(compiled) == set(source)
    for name in compiled:
        if name == "compiled":
            continue
        assert compiled[name]["ir"] == source[name]["ir"], name
        assert compiled[name]["fences"] == source[name]["fences"], name

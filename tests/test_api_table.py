"""The README's and docs/api.md's table of the real TLX API (scripts/api_table.py) is what the code
gives today, and the rule that makes it cannot claim more than the code does: every name called
supported or partly is exported by tlx, every name called not yet is absent or refused outright, and a
name tlx starts to export moves to "supported" by itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tlx
import tlx.language as tl
from tlx.compiler.errors import TLXCompileError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import api_table  # noqa: E402

COMMIT, ROWS = api_table.table()


def test_the_committed_readme_table_is_what_the_code_gives():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "api_table.py"), "--check"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_docs_api_md_holds_the_generated_coverage_section():
    assert api_table.render_api_md() in (ROOT / "docs" / "api.md").read_text()


def test_the_names_file_lists_the_real_tlx_at_one_commit():
    assert len(COMMIT) == 40 and int(COMMIT, 16)
    real = {e.real for e, _ in ROWS}
    assert len(real) == len(ROWS), "a name is listed twice"
    # what every TLX kernel names, and names that belong to other GPUs
    for name in ("tlx.local_alloc", "tlx.async_dot", "tlx.barrier_wait", "tlx.async_descriptor_load", "tl.dot",
                 "tlx.warp_spec.get_bufidx_phase", "triton.autotune", "tlx.tcgen05_commit", "tlx.buffer_load"):
        assert name in real, name


def _resolve(path: str):
    obj = tlx if path.startswith("tlx.") else tl
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("entry,status", [r for r in ROWS if r[1].status in (api_table.SUPPORTED, api_table.PARTLY_S)],
                         ids=lambda r: getattr(r, "real", ""))
def test_what_the_table_serves_is_exported_by_tlx(entry, status):
    if entry.section == "tl":
        assert entry.ours[3:] in tl.__all__
    elif entry.section.startswith("tlx.") and entry.section != "tlx.warp_spec":
        assert entry.ours[4:] in tlx.__all__
    assert _resolve(entry.ours) is not None
    if status.status == api_table.PARTLY_S:
        assert status.note, f"{entry.real} is partly supported with no note saying what is missing"


@pytest.mark.parametrize("entry,status", [r for r in ROWS if r[1].status == api_table.NOT_YET],
                         ids=lambda r: getattr(r, "real", ""))
def test_what_the_table_calls_not_yet_is_absent_or_refused_outright(entry, status):
    obj = api_table._exported(entry)
    assert obj is None or api_table.refusals(obj)[0], entry.real


def test_the_registries_name_only_listed_names():
    real = {e.real for e, _ in ROWS}
    assert set(api_table.PARTLY) <= real
    assert set(api_table.NOT_FOR_HOPPER) <= real


# ---- the rule, on names made up here --------------------------------------------------------------------

def _refuse_always(x):
    """A name exported before it works."""
    raise TLXCompileError("tlx.made_up is not supported by tlx yet")


def _refuse_sometimes(x, wide=False):
    if wide:
        raise TLXCompileError(f"made_up(wide=True) on {x} is not supported by tlx yet")
    return x


def _works(x):
    return x


@pytest.mark.parametrize("fn,want,note", [
    (_refuse_always, api_table.NOT_YET, "a compile error: tlx.made_up is not supported by tlx yet"),
    (_refuse_sometimes, api_table.PARTLY_S, "made_up(wide=True) on  is not supported by tlx yet"),
    (_works, api_table.SUPPORTED, ""),
])
def test_a_name_tlx_starts_to_export_is_classified_from_its_code(monkeypatch, fn, want, note):
    entry = api_table.Entry("tlx.mem_ops", "tlx.made_up", "tlx.made_up")
    assert api_table.classify(entry).status == api_table.NOT_YET  # not exported yet
    monkeypatch.setattr(tlx, "made_up", fn, raising=False)
    assert api_table.classify(entry).status == api_table.NOT_YET  # an attribute, but not public (__all__)
    monkeypatch.setattr(tlx, "__all__", [*tlx.__all__, "made_up"])
    assert api_table.classify(entry) == api_table.Status(want, note)


def test_a_declared_partial_name_cannot_be_called_supported_and_other_gpus_names_stay_apart(monkeypatch):
    entry = api_table.Entry("tlx.mem_ops", "tlx.local_alloc", "tlx.local_alloc")
    monkeypatch.setitem(api_table.PARTLY, "tlx.local_alloc", "made-up gap")
    assert api_table.classify(entry) == api_table.Status(api_table.PARTLY_S, "made-up gap")
    blackwell = api_table.Entry("tlx.mma_ops", "tlx.tcgen05_commit", "tlx.tcgen05_commit")
    assert api_table.classify(blackwell).status == api_table.NOT_HOPPER


def test_refresh_reads_the_names_from_a_git_repository(tmp_path):
    """The names file is written from the real repository's files; here a made-up one with its layout."""
    repo = tmp_path / "triton"
    pkg = repo / "third_party" / "tlx" / "language" / "tlx"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .barrier import alloc_barriers, _private\nfrom .warp_ops import warp_redux\n"
                                     "__all__ = ['alloc_barriers', 'ghost', '_private']\n")
    (pkg / "warp_spec.py").write_text("def get_bufidx_phase(i, n):\n    pass\n\ndef _hidden():\n    pass\n")
    lang = repo / "python" / "triton" / "language"
    lang.mkdir(parents=True)
    (lang / "__init__.py").write_text("__all__ = ['dot', 'load']\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    text = api_table.refresh_names(str(repo), "HEAD")
    names = tmp_path / "names.txt"
    names.write_text(text)
    commit, entries = api_table.load_names(names)
    assert len(commit) == 40
    got = {(e.section, e.real) for e in entries}
    assert {("tlx.barrier", "tlx.alloc_barriers"), ("tlx.other", "tlx.ghost"), ("tlx.warp_ops", "tlx.warp_redux"),
            ("tlx.warp_spec", "tlx.warp_spec.get_bufidx_phase"), ("tl", "tl.dot"), ("tl", "tl.load"),
            ("host", "triton.autotune")} <= got
    assert not any("_private" in r or "_hidden" in r for _, r in got)

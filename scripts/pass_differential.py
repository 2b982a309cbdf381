"""Differential check of the IR passes: same IR after every pass, same fence records, as a reference.

For a fixed set of inputs — every kernel of tests/catalog.py at sm_90a, at sm_80 and with fence
passes off (the whole IR pipeline, layouts included), and the 1 000- and 10 000-op modules of the
three modes of benchmarks/fence_passes.py (catalogue copies, synthetic, dense; the passes that
benchmark times) — it records the IR text after every pass, every fence record of the compilation
(removed ones included), the program order of the final fences and the passes' counters
(`ctx.stats`), and compares them with a reference: a saved snapshot or another git revision.

    python scripts/pass_differential.py --save main.json.gz   # record this checkout
    python scripts/pass_differential.py --against main              # compare with a git revision
    python scripts/pass_differential.py --against main.json.gz # compare with a snapshot

`--against REV` extracts REV with `git archive` into a temporary folder and records it there in
a subprocess (its own `tlx` package on PYTHONPATH, in front of the editable install), so the
reference is the revision's own code. `--quick` leaves out the 10 000-op modules.

A record's writer, reader and guard lists (and the parts of its texts that list writers or
buffers) are compared as sets: since 6884f46 ProxyFenceInsertion lists them in program order, but
earlier revisions listed them in the order of sets of ops (object addresses), which may differ
from run to run, and the script compares with those too. Everything else must be equal. Exit status 0 when nothing differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIZES = (1000, 10000)
MODES = ("catalogue", "synthetic", "dense")
SHOWN = 40  # differences printed
# (label, CompileOptions keyword arguments) for the catalogue kernels
CATALOGUE_OPTIONS = (("sm_90a", {}), ("sm_80", {"target": "sm_80"}), ("fences_off", {"fence_passes": False}))


# -- recording ------------------------------------------------------------------------------------
def _plain(v: Any) -> Any:
    """JSON-able form of a record field (dataclasses as dicts, tuples as lists)."""
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v) if not f.name.startswith("_")}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((_plain(x) for x in v), key=repr)
    return v


def _unordered_lists(text: str) -> str:
    """A comma-separated list (of a record's writers or buffers) put in a fixed order."""
    return ", ".join(sorted(text.split(", ")))


_WRITER_LIST = re.compile(r"(on some path )(.*?)( reach\(es\) )")
# tests/catalog.py imports the tlx_sources kernels from a fresh temporary folder each run
_TEMP_SOURCE = re.compile(re.escape(os.path.join(tempfile.gettempdir(), "tlx_src_")) + r"[^/\"]+/")


def _record(rec) -> Dict[str, Any]:
    """A fence record as compared: lists that come from sets sorted (writers with their
    locations, readers, guards), and the parts of its texts that list them (see the module
    docstring)."""
    d = _plain(rec)
    d["writer_pairs"] = sorted(map(repr, zip(d.pop("writers"), d.pop("writer_locs"))))
    d["readers"] = sorted(map(repr, d["readers"]))
    d["guards"] = sorted(map(repr, d["guards"]))
    # ProxyFenceInsertion's reason names its writers (`RAW: on some path A, B reach(es) C over
    # ...`), and its buffer the buffers
    d["reason"] = _WRITER_LIST.sub(lambda m: m.group(1) + _unordered_lists(m.group(2)) + m.group(3), d["reason"])
    d["buffer"] = _unordered_lists(d["buffer"])
    return d


def _compile(module, options, passes) -> Dict[str, Any]:
    """Compile with `passes`, keeping the pass context (for the counters)."""
    from tlx.compiler import pipeline

    seen = {}
    run_passes = pipeline.run_passes

    def keep_ctx(module, passes, ctx, snapshots=True):
        seen["ctx"] = ctx
        run_passes(module, passes, ctx, snapshots)

    pipeline.run_passes = keep_ctx
    try:
        res = pipeline.compile_module(module, options, passes=passes, snapshots=True)
    except Exception as e:  # noqa: BLE001 — an error is an outcome to compare too
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        pipeline.run_passes = run_passes
    ctx = seen["ctx"]
    out = {
        "asm": {k: v for k, v in res.asm.items() if k == "ir" or k.startswith("ir.")},
        "records": [_record(r) for r in sorted(res.fence_log.records.values(), key=lambda r: r.id)],
        "final_fences": [r.id for r in res.fences],
        "stats": _plain(dict(sorted(ctx.stats.items()))),
    }
    return out


def record(root: str, quick: bool) -> Dict[str, Any]:
    """Every case's outputs, for the checkout at `root` (its tests/ and benchmarks/)."""
    import tlx.compiler
    from tlx.compiler.ir import parse_module
    from tlx.compiler.options import CompileOptions
    from tlx.compiler.pipeline import PIPELINE

    here = os.path.realpath(os.path.dirname(tlx.compiler.__file__))
    assert here.startswith(os.path.realpath(root) + os.sep), f"tlx.compiler comes from {here}, not from {root}"
    sys.path[:0] = [os.path.join(root, "tests"), os.path.join(root, "benchmarks")]
    import fence_passes as bench  # noqa: E402 (also lifts the shared-memory limit for copied kernels)
    from catalog import CASES  # noqa: E402

    out: Dict[str, Any] = {}
    for case in CASES:
        for label, kw in CATALOGUE_OPTIONS:
            out[f"catalog/{case.name}/{label}"] = _compile(case.trace(), CompileOptions(**kw), PIPELINE)
    for mode in MODES:
        for size in SIZES[:1] if quick else SIZES:
            if mode == "catalogue":
                text = bench.catalogue_text(size)
            else:
                dense = mode == "dense"
                per_unit = bench.count_ops(parse_module(bench.module_text(1, dense))) - bench.HEAD_OPS
                text = bench.module_text(max(1, round((size - bench.HEAD_OPS) / per_unit)), dense)
            out[f"bench/{mode}/{size}"] = _compile(parse_module(text), CompileOptions(), bench.PASSES)
    # source paths (in locations and the IR's file table) as seen from the checkout
    text = json.dumps(out).replace(json.dumps(os.path.realpath(root) + os.sep)[1:-1], "<checkout>/")
    return json.loads(_TEMP_SOURCE.sub("<tlx_sources>/", text))


def save(snapshot: Dict[str, Any], path: str) -> None:
    with gzip.open(path, "wt") as f:
        json.dump(snapshot, f)


def load(path: str) -> Dict[str, Any]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


# -- a reference from a git revision --------------------------------------------------------------
def record_revision(rev: str, quick: bool) -> Dict[str, Any]:
    """Record `rev`'s outputs: its tree extracted to a temporary folder, run in a subprocess with
    a `tlx` package assembled from that tree first on the path."""
    with tempfile.TemporaryDirectory(prefix="pass_diff_") as tmp:
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
        # the package layout of pyproject.toml: tlx/ plus the top-level compiler/, runtime/, examples/
        pkg = os.path.join(tmp, "pkg", "tlx")
        os.makedirs(pkg)
        for name in os.listdir(os.path.join(src, "tlx")):
            os.symlink(os.path.join(src, "tlx", name), os.path.join(pkg, name))
        for sub in ("compiler", "runtime", "examples"):
            os.symlink(os.path.join(src, sub), os.path.join(pkg, sub))
        snap = os.path.join(tmp, "snapshot.json.gz")
        env = dict(os.environ, PYTHONPATH=os.path.join(tmp, "pkg") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cmd = [sys.executable, os.path.abspath(__file__), "--save", snap, "--root", src] + (["--quick"] if quick else [])
        subprocess.run(cmd, check=True, env=env, cwd=tmp)
        return load(snap)



# -- comparing ------------------------------------------------------------------------------------
def _first_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}:\n      reference: {x.strip()}\n      this:      {y.strip()}"
    return f"{len(la)} lines vs {len(lb)} lines"


def compare(ref: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    """The differences, one text per difference (empty: identical)."""
    out: List[str] = []
    for key in sorted(set(ref) | set(new)):
        a, b = ref.get(key), new.get(key)
        if a is None or b is None:
            out.append(f"{key}: only in {'this checkout' if a is None else 'the reference'}")
            continue
        if "error" in a or "error" in b:
            if a.get("error") != b.get("error"):
                out.append(f"{key}: error {a.get('error')!r} vs {b.get('error')!r}")
            continue
        for name in sorted(set(a["asm"]) | set(b["asm"])):
            x, y = a["asm"].get(name), b["asm"].get(name)
            if x != y:
                detail = "missing on one side" if x is None or y is None else _first_difference(x, y)
                out.append(f"{key}: IR after {name} differs, {detail}")
        ra, rb = a["records"], b["records"]
        if len(ra) != len(rb):
            out.append(f"{key}: {len(ra)} fence records vs {len(rb)}")
        for x, y in zip(ra, rb):
            for f in sorted(set(x) | set(y)):
                if x.get(f) != y.get(f):
                    out.append(f"{key}: fence #{x.get('id')} field {f}: {x.get(f)!r} vs {y.get(f)!r}")
        for f in ("final_fences", "stats"):
            if a[f] != b[f]:
                out.append(f"{key}: {f} differ: {a[f]!r} vs {b[f]!r}")
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--save", metavar="PATH", help="record this checkout's outputs to PATH (.json.gz)")
    ap.add_argument("--against", metavar="REV_OR_PATH",
                    help="a git revision or a saved snapshot")
    ap.add_argument("--root", default=ROOT, help=argparse.SUPPRESS)  # the checkout a --save records
    ap.add_argument("--quick", action="store_true", help="leave out the 10 000-op modules")
    args = ap.parse_args(argv)
    if bool(args.save) == bool(args.against):
        ap.error("give one of --save and --against")
    if args.save:
        save(record(args.root, args.quick), args.save)
        return 0
    if os.path.isfile(args.against):
        ref = load(args.against)
    else:
        ref = record_revision(args.against, args.quick)
    new = record(ROOT, args.quick)
    if args.quick:
        ref = {k: v for k, v in ref.items() if k in new}
    diffs = compare(ref, new)
    for d in diffs[:SHOWN]:
        print(d)
    if len(diffs) > SHOWN:
        print(f"... and {len(diffs) - SHOWN} more")
    errors = sum(1 for v in new.values() if "error" in v)
    print(f"{len(new)} cases ({errors} end in the same compile error on both sides), "
          f"{len(diffs)} difference(s)" if not diffs else f"{len(diffs)} difference(s) in {len(new)} cases")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

"""docs/api.md stays true: every public name of `tlx`, `tlx.language` and `tlx.language.math` is
there with its current parameters and a one-line meaning, and the file is what
scripts/gen_api_docs.py makes of the code today."""

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tlx
import tlx.language as tl
from tlx.language import math as tlmath

ROOT = Path(__file__).resolve().parent.parent
API = (ROOT / "docs" / "api.md").read_text()
# the reference part; the coverage section after it is checked by tests/test_api_table.py
REFERENCE = API.split("## Coverage of the real TLX API")[0]
ROWS = [line for line in REFERENCE.splitlines() if line.startswith("| `")]


def row_for(spelled: str) -> str:
    """The table row documenting `spelled` (e.g. `tlx.fence`): its name cell is `spelled` or
    `spelled(...)`."""
    hits = [r for r in ROWS if re.match(rf"\| `{re.escape(spelled)}(\(|`)", r)]
    assert len(hits) == 1, f"{spelled} is documented {len(hits)} times in docs/api.md"
    return hits[0]


def public():
    out = [("tlx", n, getattr(tlx, n)) for n in tlx.__all__]
    out += [("tl", n, getattr(tl, n)) for n in tl.__all__]
    out += [("tl.math", n, v) for n, v in vars(tlmath).items()
            if not n.startswith("_") and callable(v) and getattr(v, "__tlx_builtin__", False)]
    return out


@pytest.mark.parametrize("prefix,name,obj", public(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_public_name_is_documented_with_its_parameters(prefix, name, obj):
    row = row_for(f"{prefix}.{name}")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert len(cells) == 3 and cells[2], f"{prefix}.{name} has no meaning in docs/api.md"
    if inspect.isfunction(obj) or (inspect.isclass(obj) and not issubclass(obj, BaseException) and "__init__" in vars(obj)):
        sig = inspect.signature(obj).parameters.values()
        params = [p.name for p in sig if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.KEYWORD_ONLY, p.VAR_KEYWORD)]
        params += [p.name for p in sig if p.kind is p.VAR_POSITIONAL]
        params += [p.name for p in sig if p.kind is p.KEYWORD_ONLY]
        params += [p.name for p in sig if p.kind is p.VAR_KEYWORD]
        shown = re.match(r"`[^(`]*\((.*)\)`", cells[0])
        assert shown, f"{prefix}.{name}: no signature in docs/api.md"
        a = ast.parse(f"def f({shown.group(1)}): pass").body[0].args
        names = [x.arg for x in a.posonlyargs + a.args] + ([a.vararg.arg] if a.vararg else []) \
            + [x.arg for x in a.kwonlyargs] + ([a.kwarg.arg] if a.kwarg else [])
        assert names == params, f"{prefix}.{name}: docs/api.md shows ({shown.group(1)}), the code has {params}"


def test_the_launch_forms_are_documented():
    assert any(r.startswith("| `kernel[grid](") for r in ROWS)
    assert any(r.startswith("| `compiled[grid](") for r in ROWS)


def test_api_md_is_what_the_generator_makes_of_the_code():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_api_docs.py"), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr


def test_the_architecture_map_names_files_that_exist_in_order():
    """docs/architecture.md: at most ten files, numbered from `@tlx.jit` to the driver call, each
    one that exists."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    steps = re.findall(r"^(\d+)\. `([^`]+)` — \S", text, re.MULTILINE)
    assert 5 <= len(steps) <= 10, steps
    assert [int(n) for n, _ in steps] == list(range(1, len(steps) + 1))
    assert steps[0][1] == "tlx/jit.py" and steps[-1][1].startswith("runtime/native_launch")
    for _, path in steps:
        assert (ROOT / path).is_file(), f"docs/architecture.md names {path}, which does not exist"

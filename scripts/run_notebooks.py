"""Execute the notebooks headless (nbclient, the python3 kernel of ipykernel) and write the
executed copies — with their outputs — to a folder, leaving the committed notebooks (which carry
no outputs) untouched. Prints one line per notebook with its time and its cells' first lines of
output, and exits non-zero if a cell fails.

    python3 scripts/run_notebooks.py [--out DIR] [NOTEBOOK ...]
    python3 scripts/run_notebooks.py --strip [NOTEBOOK ...]     # clear outputs in place before committing

On a GPU machine the notebooks take their GPU branches (launch, live GEMM timing).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent


def strip(path: Path) -> None:
    """Remove every code cell's outputs, execution count and execution metadata (as committed)."""
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
            c.metadata.pop("execution", None)
    nbformat.write(nb, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "notebooks" / "executed"), help="where the executed copies go")
    p.add_argument("--strip", action="store_true", help="clear outputs and execution counts in place, run nothing")
    p.add_argument("notebooks", nargs="*", help="default: notebooks/*.ipynb")
    args = p.parse_args(argv)
    if args.strip:
        for path in [Path(n) for n in args.notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb")):
            strip(path)
            print(f"stripped {path}")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [Path(n) for n in args.notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    failed = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        try:
            NotebookClient(nb, kernel_name="python3", timeout=600,
                           resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
            status = "ok"
        except CellExecutionError as e:
            status = f"FAILED: {str(e).strip().splitlines()[-1]}"
            failed += 1
        nbformat.write(nb, out / path.name)
        print(f"{path.name:28s} {time.perf_counter() - t0:6.1f} s  {status}  -> {out / path.name}")
        for c in nb.cells:
            if c.cell_type == "code":
                first = next((o.get("text", "") for o in c.outputs if o.output_type == "stream"), "")
                if first.strip():
                    print(f"    [{c.id}] {first.strip().splitlines()[0][:110]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

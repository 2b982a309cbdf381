"""The frontend reads in one direction — tracing -> compile -> cache -> launch — and keeps its
modules honest: every module of `tlx` (and of `tlx.runtime`) imports alone in a fresh
interpreter; no import inside a function points back up the chain (a module that, through
module-level imports, already depends on the importer); no module imports another's private
(`_name`) names; no class is patched at run time; nothing reads `os.environ`'s private dict."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"tlx": ROOT / "tlx", "tlx.runtime": ROOT / "runtime"}


def modules() -> Dict[str, Path]:
    """Module name -> file, for every module of the frontend and the runtime (`python -m tlx`'s
    `__main__` runs the command line when imported: not a module to import)."""
    out = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            if path.name == "__main__.py":
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package] + parts)] = path
    return out


MODULES = modules()


def resolve(importer: str, node: ast.AST) -> Iterator[Tuple[str, List[str]]]:
    """(module, names imported from it) for one import statement, absolute names."""
    is_package = MODULES[importer].name == "__init__.py"
    if isinstance(node, ast.Import):
        for a in node.names:
            yield a.name, []
        return
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        parts = importer.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([base] if base else []))
    yield base, [a.name for a in node.names]


def imports(name: str) -> Tuple[Set[str], List[Tuple[str, int, List[str]]]]:
    """The tlx modules `name` imports at module level, and (module, line, names) of the imports
    inside its functions."""
    tree = ast.parse(MODULES[name].read_text())
    top: Set[str] = set()
    inner: List[Tuple[str, int, List[str]]] = []

    def targets(node: ast.AST) -> Iterator[Tuple[str, List[str]]]:
        for base, names in resolve(name, node):
            for n in names:  # `from package import module`
                if f"{base}.{n}" in MODULES:
                    yield f"{base}.{n}", []
            rest = [n for n in names if f"{base}.{n}" not in MODULES]
            if base in MODULES and (rest or not names):
                yield base, rest

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target, names in targets(child):
                    if in_function:
                        inner.append((target, child.lineno, names))
                    else:
                        top.add(target)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                walk(child, True)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # annotations only
            else:
                walk(child, in_function)

    walk(tree, False)
    return top - {name}, inner


GRAPH = {name: imports(name) for name in MODULES}


def depends_on(start: str, target: str) -> bool:
    """Whether `start` imports `target` through module-level imports (directly or not)."""
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m == target:
            return True
        if m not in seen:
            seen.add(m)
            todo.extend(GRAPH.get(m, (set(), []))[0])
    return False


def test_module_level_imports_form_no_cycle():
    cycles = [(a, b) for a, (top, _) in GRAPH.items() for b in top if depends_on(b, a)
              and not (a.startswith(b + ".") and MODULES[b].name == "__init__.py")]  # a package's own __init__
    assert not cycles, cycles


def test_no_import_inside_a_function_points_back_up_the_chain():
    back = [f"{a}:{line} imports {b}, which imports {a}" for a, (_, inner) in GRAPH.items()
            for b, line, _ in inner if depends_on(b, a)]
    assert not back, back


def test_no_private_name_is_imported_from_another_module():
    private = [f"{a} imports {b}.{n}" for a in MODULES for b, names in _from_names(a)
               for n in names if n.startswith("_") and not n.startswith("__")]
    assert not private, private


def _from_names(name: str) -> Iterator[Tuple[str, List[str]]]:
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.ImportFrom):
            for base, names in resolve(name, node):
                if base in MODULES:
                    yield base, names


def test_no_class_is_patched_at_run_time():
    """No `SomeClass.attr = ...` or `setattr(SomeClass, ...)` anywhere in the sources."""
    patched = []
    for name, path in MODULES.items():
        module = importlib.import_module(name)
        for node in ast.walk(ast.parse(path.read_text())):
            targets: List[ast.AST] = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                targets = [t.value for t in targets if isinstance(t, ast.Attribute)]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                targets = node.args[:1]
            for t in targets:
                if isinstance(t, ast.Name) and inspect.isclass(getattr(module, t.id, None)):
                    patched.append(f"{path.relative_to(ROOT)}:{node.lineno} patches {t.id}")
    assert not patched, patched


def test_nothing_reads_the_private_dict_of_os_environ():
    offenders = [str(p.relative_to(ROOT)) for p in MODULES.values() if "environ._data" in p.read_text()]
    assert not offenders, offenders


def _import_alone(name: str) -> Tuple[str, int, str]:
    r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=300)
    return name, r.returncode, r.stderr[-2000:]


def test_every_module_imports_alone_in_a_fresh_interpreter():
    with ThreadPoolExecutor(4) as pool:
        failed = [(n, err) for n, rc, err in pool.map(_import_alone, MODULES) if rc != 0]
    assert not failed, failed


def test_the_scan_sees_the_chain():
    """The graph the tests above read is the real one (a scan that found nothing would pass them)."""
    assert depends_on("tlx.jit", "tlx.launch") and depends_on("tlx.launch", "tlx.compile")
    assert depends_on("tlx.compile", "tlx.tracer") and depends_on("tlx.tracer", "tlx.function")
    assert depends_on("tlx.launch", "tlx.specialize") and depends_on("tlx.compile", "tlx.runtime.cache")
    assert not depends_on("tlx.tracer", "tlx.launch") and not depends_on("tlx.specialize", "tlx.compile")
    assert len(MODULES) > 30

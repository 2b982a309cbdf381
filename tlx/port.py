"""`tlx port FILE`: rewrite a file written for the real TLX (`triton.language.extra.tlx`) to run on
tlx, and say what could not be carried over.

The rewrite is textual and line by line, so every line keeps its number (tracebacks and the
kernel's file:line diagnostics still match the original):

    import triton.language as tl                    -> import tlx.language as tl
    import triton.language.extra.tlx as tlx         -> import tlx
    from triton.language.extra import tlx           -> import tlx
    triton.language.extra.tlx.<x> (code, imports)   -> tlx.<x>     e.g. from tlx.warp_spec import ...
    triton.language.<x> (code, imports)             -> tlx.language.<x>
    triton.jit, triton.autotune, triton.Config,
    triton.heuristics, triton.set_allocator         -> tlx.jit, tlx.autotune, ...
    from triton.tools.tensor_descriptor import TensorDescriptor -> from tlx import TensorDescriptor
    from triton import jit, autotune, Config, ...   -> from tlx import ... (when tlx has every name)

Then the ported text is read back (with `ast`) and checked: an `import tlx` is added on an
existing one-line import where the file uses `tlx.` without importing it; every `tlx.*` /
`tl.*` name it uses is looked up in this tlx (names tlx lacks are listed); and every `triton.*`
use left is listed — the host helpers `triton.cdiv`, `triton.testing`, `triton.runtime.driver`
as left for upstream triton (they run on the host; tlx has `tlx.cdiv` and `tlx.testing` too),
anything else as not mapped.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

# (what, pattern, replacement, only on import lines); applied in this order to every line
_RULES: List[Tuple[str, "re.Pattern[str]", str, bool]] = [
    ("import tlx", re.compile(r"\bfrom triton\.language\.extra import tlx\b"), "import tlx", True),
    ("import tlx", re.compile(r"\bimport triton\.language\.extra\.tlx as tlx\b"), "import tlx", True),
    ("import tlx", re.compile(r"\bimport triton\.language\.extra\.tlx as\b"), "import tlx as", True),
    ("tlx module", re.compile(r"\btriton\.language\.extra\.tlx\b"), "tlx", False),
    ("tlx.language", re.compile(r"\btriton\.language\b"), "tlx.language", False),
    ("TensorDescriptor import", re.compile(r"\bfrom triton\.tools\.tensor_descriptor import TensorDescriptor\b"),
     "from tlx import TensorDescriptor", True),
    ("TensorDescriptor", re.compile(r"\btriton\.tools\.tensor_descriptor\.TensorDescriptor\b"), "tlx.TensorDescriptor",
     False),
    ("host API", re.compile(r"\btriton\.(jit|autotune|Config|heuristics|set_allocator)\b"), r"tlx.\1", False),
]
_IMPORT_LINE = re.compile(r"^\s*(import|from)\s")
_FROM_TRITON = re.compile(r"^(\s*)from triton import (.*)$")
# what `from triton import a, b` may name to become `from tlx import a, b`
_FROM_TRITON_NAMES = {"jit", "autotune", "Config", "heuristics", "set_allocator", "cdiv"}
# host helpers that stay with upstream triton: (prefix, note)
HOST_HELPERS = (
    ("triton.cdiv", "tlx.cdiv is the same function"),
    ("triton.testing", "tlx.testing has do_bench and do_bench_cudagraph"),
    ("triton.runtime.driver", "the host's driver queries (device, target)"),
)


@dataclass
class Note:
    """One line of the report: where, what, and what to do or know."""

    line: int
    what: str
    note: str = ""


@dataclass
class PortResult:
    """The ported text and the report: `changes` (the renames made), `left` (host helpers left
    for upstream triton), `unmapped` (triton uses with no tlx counterpart), `missing` (tlx /
    tl names this tlx lacks), `warnings` (anything else worth knowing)."""

    text: str
    changes: List[Note] = field(default_factory=list)
    left: List[Note] = field(default_factory=list)
    unmapped: List[Note] = field(default_factory=list)
    missing: List[Note] = field(default_factory=list)
    warnings: List[Note] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when everything the file uses has a tlx counterpart (host helpers aside)."""
        return not self.unmapped and not self.missing


def port_source(src: str) -> PortResult:
    """Port the text of one Python file (see the module docstring)."""
    lines = src.split("\n")
    result = PortResult(text="")
    for i, line in enumerate(lines):
        new = _port_line(line)
        if new != line:
            result.changes.append(Note(i + 1, f"{line.strip()}  ->  {new.strip()}"))
            lines[i] = new
    text = "\n".join(lines)
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        result.text = text
        result.warnings.append(Note(e.lineno or 0, f"the file does not parse as Python ({e.msg}): renamed line by "
                                                  "line, not checked"))
        return result
    text, tree = _ensure_import_tlx(text, tree, result)
    result.text = text
    _check(tree, result)
    return result


def _port_line(line: str) -> str:
    is_import = bool(_IMPORT_LINE.match(line))
    if is_import:
        m = _FROM_TRITON.match(line)
        if m:
            names = [n.strip() for n in m.group(2).split("#")[0].strip().strip("()").split(",") if n.strip()]
            if names and all(n.split(" as ")[0].strip() in _FROM_TRITON_NAMES for n in names):
                return f"{m.group(1)}from tlx import {m.group(2)}"
    for _, rx, rep, imports_only in _RULES:
        if imports_only and not is_import:
            continue
        line = rx.sub(rep, line)
    return line


def _bound_names(tree: ast.Module) -> Dict[str, str]:
    """Module-level names bound by imports: name -> the module path or `module:attr` it is."""
    out: Dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}:{a.name}"
    return out


def _ensure_import_tlx(text: str, tree: ast.Module, result: PortResult) -> Tuple[str, ast.Module]:
    """Add `import tlx` where the ported file uses the name `tlx` without binding it (e.g. a file
    that imported only `triton` and `triton.language as tl`, and used `@triton.jit`)."""
    used = any(isinstance(n, ast.Name) and n.id == "tlx" for n in ast.walk(tree))
    if not used or "tlx" in _bound_names(tree):
        return text, tree
    lines = text.split("\n")
    one_line = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno == n.end_lineno]
    # beside the tlx imports where there are any (`import tlx.language as tl` binds only `tl`)
    one_line.sort(key=lambda n: "tlx" not in lines[n.lineno - 1])
    for node in one_line[:1]:
        i = node.lineno - 1
        code, hash_, comment = lines[i].partition("#")
        lines[i] = f"{code.rstrip()}; import tlx" + (f"  #{comment}" if hash_ else "")
        result.changes.append(Note(node.lineno, "added `import tlx` (the file uses tlx. and did not import it)"))
        new = "\n".join(lines)
        return new, ast.parse(new)
    result.warnings.append(Note(1, "the file uses tlx. without importing it; add `import tlx`"))
    return text, tree


def _dotted(node: ast.AST) -> Optional[List[str]]:
    """`a.b.c` as ["a", "b", "c"] (None for anything but names and attributes)."""
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _host_note(path: str) -> Optional[str]:
    for prefix, note in HOST_HELPERS:
        if path == prefix or path.startswith(prefix + "."):
            return note
    return None


def _check(tree: ast.Module, result: PortResult) -> None:
    """Fill `left`, `unmapped` and `missing` from the ported file's syntax tree."""
    bound = _bound_names(tree)
    triton_names = {n for n, target in bound.items() if target == "triton"}
    tlx_names = {n: target for n, target in bound.items() if target == "tlx" or target.startswith("tlx.")}
    seen: Set[Tuple[int, str]] = set()
    triton_uses = 0
    # the attributes inside a longer chain (`triton.testing` in `triton.testing.do_bench`): only
    # the whole chain is looked at
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}

    def triton_use(line: int, path: str) -> None:
        if (line, path) in seen:
            return
        seen.add((line, path))
        note = _host_note(path)
        if note is not None:
            result.left.append(Note(line, path, note))
        else:
            result.unmapped.append(Note(line, path, "left as it was"))

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "triton" or node.module.startswith("triton."):
                for a in node.names:
                    triton_use(node.lineno, f"{node.module}.{a.name}")
            elif node.module == "tlx" or node.module.startswith("tlx."):
                for a in node.names:
                    if a.name != "*" and _resolve(node.module, [a.name]) is None:
                        result.missing.append(Note(node.lineno, f"{node.module}.{a.name}", f"{node.module} has no such name"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("triton."):
                    triton_use(node.lineno, a.name)
                elif (a.name == "tlx" or a.name.startswith("tlx.")) and _resolve(a.name, []) is None:
                    result.missing.append(Note(node.lineno, a.name, "this tlx has no such module"))
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            parts = _dotted(node)
            if parts is None:
                continue
            head = parts[0]
            if head in triton_names:
                triton_uses += 1
                triton_use(node.lineno, ".".join(["triton"] + parts[1:]))
            elif head in tlx_names:
                module = tlx_names[head]
                if ":" in module:  # from tlx import X as head: check X's attributes only if X is a module
                    continue
                if _resolve(module, parts[1:]) is None:
                    result.missing.append(Note(node.lineno, ".".join(parts), f"{module} has no such name"))
    for node in ast.walk(tree):  # `import triton` that nothing uses any more
        if isinstance(node, ast.Import) and any(a.name == "triton" and not a.asname for a in node.names):
            if triton_uses == 0:
                result.warnings.append(Note(node.lineno, "`import triton` is no longer used (keep it only if "
                                                         "triton is installed)"))
    for notes in (result.left, result.unmapped, result.missing, result.warnings):
        notes.sort(key=lambda n: (n.line, n.what))
    first: Dict[Tuple[int, str], Note] = {}  # a name missing twice on one line: said once
    for n in result.missing:
        first.setdefault((n.line, n.what), n)
    result.missing[:] = first.values()


def _resolve(module: str, attrs: List[str]) -> Any:
    """The object `module.attrs...` in this tlx, following attributes only through modules
    (`tl.math.exp` checks `exp`; `tl.float16.x` stops at `float16`); None when a name is missing."""
    try:
        obj: Any = importlib.import_module(module)
    except ImportError:
        return None
    for name in attrs:
        if not isinstance(obj, type(importlib)):
            return obj
        if not hasattr(obj, name):
            try:  # a submodule not imported by its package
                obj = importlib.import_module(f"{obj.__name__}.{name}")
                continue
            except ImportError:
                return None
        obj = getattr(obj, name)
    return obj


def format_report(result: PortResult, source: str, dest: Optional[str]) -> str:
    """The report `tlx port` prints."""
    out = [f"tlx port: {source}" + (f" -> {dest}" if dest else "") + f": {len(result.changes)} line(s) changed"]
    for n in result.changes:
        out.append(f"  line {n.line}: {n.what}")
    sections = (("left for upstream triton (host helpers):", result.left),
                ("not mapped (no tlx counterpart):", result.unmapped),
                ("names this tlx lacks:", result.missing), ("notes:", result.warnings))
    for title, notes in sections:
        if notes:
            out.append(title)
            out += [f"  line {n.line}: {n.what}" + (f" ({n.note})" if n.note else "") for n in notes]
    out.append("everything has a tlx counterpart" if result.complete else
               "incomplete: the lines above under 'not mapped' / 'names this tlx lacks' need a hand")
    return "\n".join(out)

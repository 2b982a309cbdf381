"""Write docs/api.md from the code: every public name of `tlx` (its `__all__`), of `tlx.language`
(its `__all__`) and of `tlx.language.math`, with its signature and a one-line meaning (the first
line of its docstring). tests/test_docs.py checks that the file names every public name with its
current signature, so rerun this after changing the API:

    python3 scripts/gen_api_docs.py            # rewrites docs/api.md
    python3 scripts/gen_api_docs.py --check    # exit 1 if docs/api.md is out of date
"""

from __future__ import annotations

import argparse
import enum
import inspect
import re
import sys
import types
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import api_table  # noqa: E402  (scripts/api_table.py: the coverage table)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "api.md"

# One-line meanings for public names whose code has no docstring yet (the docstring wins once it
# exists). Keep these short and true; tests/test_docs.py fails on a name with no meaning at all.
MEANINGS: Dict[str, str] = {
    "tl.argmax": "The index of the largest element along `axis`.",
    "tl.argmin": "The index of the smallest element along `axis`.",
    "tl.broadcast_to": "Broadcast a block to `shape`.",
    "tl.cast": "Convert to `dtype` (or reinterpret the bits with `bitcast=True`).",
    "tl.expand_dims": "Insert a size-1 dimension at `axis`.",
    "tl.fdiv": "Floating-point division (`ieee_rounding=True` for the correctly rounded one).",
    "tl.join": "Join two blocks of one shape along a new last dimension of size 2.",
    "tl.max": "The largest element along `axis` (all of them when `axis` is None).",
    "tl.maximum": "The elementwise maximum of two blocks.",
    "tl.min": "The smallest element along `axis` (all of them when `axis` is None).",
    "tl.minimum": "The elementwise minimum of two blocks.",
    "tl.permute": "Reorder the dimensions of a block.",
    "tl.reshape": "The same elements in another shape.",
    "tl.split": "Split a block whose last dimension is 2 into two blocks (the inverse of `join`).",
    "tl.sum": "The sum along `axis` (all elements when `axis` is None).",
    "tl.trans": "Transpose a block (reverse or permute its dimensions).",
    "tl.where": "Elementwise `x` where `condition` holds, else `y`.",
    "tl.xor_sum": "The xor of the elements along `axis`.",
    "tl.zeros_like": "A block of zeros with the shape and dtype of `x`.",
    "tl.cumsum": "Cumulative sum along `axis` (not supported yet: a compile error).",
    "tl.reduce": "Reduce along `axis` with `combine_fn` (custom combine functions are not supported yet: use "
                 "tl.sum / tl.max / ...).",
    "tl.clamp": "Clamp `x` to [`min`, `max`] elementwise.",
    "tl.view": "The same elements in another shape (an alias of `reshape`).",
    "tl.umulhi": "The high 32 bits of the 64-bit product of two int32 blocks (not supported yet: a compile error).",
    "tl.full_like": "A block with the shape and dtype of `x`, filled with `value`.",
    "tlx.CompiledKernel.metadata": "name, num_warps, target, shared bytes and threads per CTA, as a dict.",
    "tl.math.max": "The elementwise maximum of `x` and `y`.",
    "tl.math.min": "The elementwise minimum of `x` and `y`.",
}


def _params(obj: Any) -> str:
    """The signature without annotations (they are all `Any` in the kernel language)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    parts = []
    star = False
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star = True
            continue
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name if p.default is p.empty else f"{p.name}={_default(p.default)}")
    return "(" + ", ".join(parts) + ")"


def _default(v: Any) -> str:
    if isinstance(v, enum.Enum):
        return f"{type(v).__name__}.{v.name}"
    if hasattr(v, "name") and type(v).__name__ == "dtype":
        return f"tl.{v.name}"
    return repr(v)


def _meaning(prefix: str, name: str, obj: Any) -> str:
    """The first sentence of the docstring's first paragraph, else the MEANINGS entry."""
    doc = inspect.getdoc(obj) if not _is_value(obj) else None
    if doc and doc.strip():
        paragraph = " ".join(l.strip() for l in doc.strip().split("\n\n")[0].splitlines())
        first = re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", paragraph)[0]
        return first if first.endswith((".", "!", "?", ")")) else first + "."
    return MEANINGS.get(f"{prefix}.{name}", "")


def _is_value(obj: Any) -> bool:
    return type(obj).__name__ == "dtype" and not isinstance(obj, type)


def entry(prefix: str, name: str, obj: Any) -> Tuple[str, str, str]:
    """(what it is, how it is spelled with its signature, its one-line meaning)."""
    if isinstance(obj, types.ModuleType):
        return "module", f"{prefix}.{name}", _meaning(prefix, name, obj)
    if _is_value(obj):
        return "dtype", f"{prefix}.{name}", f"The `{obj.name}` element type."
    if isinstance(obj, type):
        kind = "enum" if issubclass(obj, enum.Enum) else "class"
        sig = "" if kind == "enum" else _params(obj)
        return kind, f"{prefix}.{name}{sig}", _meaning(prefix, name, obj)
    if isinstance(obj, staticmethod):
        obj = obj.__func__
    if "." in name and isinstance(_owner(prefix, name), types.ModuleType):
        return "function", f"{prefix}.{name}{_params(obj)}", _meaning(prefix, name, obj)
    if "." in name and hasattr(obj, "__code__") and "self" not in inspect.signature(obj).parameters:
        return "static method", f"{prefix}.{name}{_params(obj)}", _meaning(prefix, name, obj)
    if "." in name:
        is_prop = isinstance(inspect.getattr_static(_owner(prefix, name), name.split(".")[1]), property)
        if is_prop:
            return "property", f"{prefix}.{name}", _meaning(prefix, name, obj)
        return "method", f"{prefix}.{name}{_params(obj)}", _meaning(prefix, name, obj)
    return "function", f"{prefix}.{name}{_params(obj)}", _meaning(prefix, name, obj)


def _owner(prefix: str, name: str) -> Any:
    import tlx

    return getattr(tlx, name.split(".")[0])


METHODS_OF = ("CompiledKernel", "JITFunction", "TensorDescriptor", "Config")
MODULES = ("testing",)  # submodules of tlx whose own __all__ is documented


def public_names() -> List[Tuple[str, str, Any]]:
    """(prefix, name, object) for every documented name, in `__all__` order."""
    import tlx
    import tlx.language as tl
    from tlx.language import math as tlmath

    out = []
    for n in tlx.__all__:
        obj = getattr(tlx, n)
        out.append(("tlx", n, obj))
        if n in METHODS_OF:  # the host-side objects a kernel author works with: their public methods
            for m, v in vars(obj).items():
                if not m.startswith("_") and (callable(v) or isinstance(v, property)):
                    out.append(("tlx", f"{n}.{m}", v.fget if isinstance(v, property) else v))
        if n in MODULES:
            out += [("tlx", f"{n}.{m}", getattr(obj, m)) for m in obj.__all__]
    out += [("tl", n, getattr(tl, n)) for n in tl.__all__]
    math_names = [n for n, v in vars(tlmath).items()
                  if not n.startswith("_") and callable(v) and getattr(v, "__tlx_builtin__", False)]
    out += [("tl.math", n, getattr(tlmath, n)) for n in math_names]
    return out


LAUNCH_ROWS = [
    "| `kernel[grid](*args, num_warps=4, num_ctas=1, ctas_per_cga=None, stream=None, maxnreg=None, fence_passes=True, **constexprs)` | "
    "launch | Specialize, compile (through the disk cache) and launch a `@tlx.jit` kernel; `grid` is 1-3 ints or "
    "a callable of the bound arguments; with `TLX_INTERPRET=1` it runs on the CPU interpreter. |",
    "| `compiled[grid](*runtime_args, stream=None)` | launch | Launch one `CompiledKernel` (only its runtime "
    "arguments). |",
]

SECTIONS = [
    ("tlx", "`tlx`: the TLX extensions, compiling, running and showing kernels",
     "`import tlx`. Shared memory, TMA, mbarriers, wgmma, fences and warp specialization are called "
     "inside `@tlx.jit` kernels; `jit`, `compile`, `interpret`, `show`, `TensorDescriptor`, "
     "`host_copy`, `autotune`, `Config`, `heuristics` and `testing` are host-side."),
    ("tl", "`tlx.language` (`tl`): the Triton core language subset",
     "`import tlx.language as tl`; called inside `@tlx.jit` kernels. Names and defaults follow "
     "`triton.language`."),
    ("tl.math", "`tlx.language.math` (`tl.math`): elementwise math", ""),
]


def render() -> str:
    names = public_names()
    lines = ["# API reference", "",
             "Generated from the code by `scripts/gen_api_docs.py` (rerun it after changing the API; "
             "`tests/test_docs.py` checks that every public name is here with its current signature). "
             "What each TLX call does on Hopper, and how much of the real TLX API tlx covers, is in the "
             "README's *Supported API* table; the IR is in `docs/ir.md`, the interpreter in "
             "`docs/interpreter.md`.", ""]
    for prefix, title, intro in SECTIONS:
        lines += [f"## {title}", ""]
        if intro:
            lines += [intro, ""]
        lines += ["| name | kind | meaning |", "|---|---|---|"]
        if prefix == "tlx":
            lines += LAUNCH_ROWS
        for p, name, obj in names:
            if p != prefix:
                continue
            kind, spelled, meaning = entry(p, name, obj)
            lines.append(f"| `{spelled}` | {kind} | {meaning.replace('|', '&#124;')} |")
        lines.append("")
    lines.append(api_table.render_api_md())  # the real TLX's names and how far tlx serves each
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="write docs/api.md from the code")
    p.add_argument("--check", action="store_true", help="exit 1 if docs/api.md differs from what the code gives")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print("docs/api.md is out of date: run python3 scripts/gen_api_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)} ({sum(1 for _ in public_names())} names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `tlx` command line (`python -m tlx ...`, or the `tlx` console script).

    tlx demo                                   trace, fence, compile and run (GPU) or interpret (CPU) a kernel
    tlx compile FILE::KERNEL -s x_ptr=*fp16 -s n=i32 -c BLOCK=64 --emit ir|ptx|fences|asm|passes [--print-after-all]
    tlx explain FILE::KERNEL -s ... -c ...     the fence report: every fence, what it separates, why it sits there
    tlx cache list | clear                     the compile cache (TLX_CACHE_DIR, default ~/.cache/tlx)
    tlx port FILE [-o OUT]                     rewrite a real-TLX file's imports for tlx; list what has no counterpart
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

from tlx.compiler.errors import TLXError
from tlx.runtime.cache import default_cache
from tlx.runtime.native_launch import remove_builds

from . import language as tl
from .compile import compile as compile_kernel
from .demo import main as demo_main
from .jit import JITFunction


def split_top_level(text: str) -> List[str]:
    """Split on commas that are not inside brackets (descriptor types contain commas)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[<(":
            depth += 1
        elif ch in "]>)":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [x.strip() for x in out if x.strip()]


def parse_pairs(items: Optional[Sequence[str]], what: str, literal: bool) -> Dict[str, Any]:
    """`name=value` pairs (repeatable, or comma-separated); constexpr values are Python literals."""
    out: Dict[str, Any] = {}
    for item in items or []:
        for pair in split_top_level(item):
            if "=" not in pair:
                raise TLXError(f"{what} entries are name=value, got {pair!r}")
            k, v = pair.split("=", 1)
            out[k.strip()] = _literal(v.strip()) if literal else v.strip()
    return out


def _literal(v: str) -> Any:
    if v.startswith("tl.") or v.startswith("tlx.language."):
        return getattr(tl, v.split(".")[-1])
    try:
        return ast.literal_eval(v)
    except (ValueError, SyntaxError):
        return v


def load_kernel(spec: str):
    """`path/to/file.py::kernel_name` -> the @tlx.jit function."""
    if "::" not in spec:
        raise TLXError(f"name the kernel as FILE::KERNEL, got {spec!r}")
    path, name = spec.rsplit("::", 1)
    if not os.path.exists(path):
        raise TLXError(f"no such file: {path}")
    modname = "tlx_cli_" + os.path.splitext(os.path.basename(path))[0]
    mspec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(mspec)  # type: ignore[arg-type]
    sys.modules[modname] = mod  # dataclasses and pickling look the module up by name
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        mspec.loader.exec_module(mod)  # type: ignore[union-attr]
    finally:
        sys.path.pop(0)
    fn = getattr(mod, name, None)
    while not isinstance(fn, JITFunction) and hasattr(fn, "params") and hasattr(fn, "fn"):
        fn = fn.fn  # @tlx.autotune / @tlx.heuristics: the kernel they wrap
    if not isinstance(fn, JITFunction):
        found = [k for k, v in vars(mod).items() if isinstance(v, JITFunction)]
        raise TLXError(f"{path} has no @tlx.jit kernel named {name!r}" + (f" (it has: {', '.join(found)})" if found else ""))
    return fn


def _compile(args: argparse.Namespace):
    fn = load_kernel(args.kernel)
    sig = parse_pairs(args.signature, "--signature", literal=False)
    consts = parse_pairs(args.constexpr, "--constexpr", literal=True)
    return compile_kernel(fn, signature=sig, constexprs=consts, num_warps=args.num_warps, target=args.target,
                       fence_passes=not args.no_fence_passes, print_ir_after_all=args.print_after_all)


def cmd_compile(args: argparse.Namespace) -> int:
    k = _compile(args)
    emit = args.emit
    if emit == "ir":
        print(k.asm["ir"])
    elif emit == "ptx":
        print(k.asm.get("ptx") or "(no PTX: the code generator did not run)")
    elif emit == "fences":
        print(k.explain_fences())
    elif emit == "passes":
        for name, t in k.pass_times.items():
            print(f"{name:26s} {t * 1e3:8.3f} ms")
    elif emit == "asm":
        for key in k.asm:
            print(key)
    else:
        final = [key for key in k.asm if key.startswith("ir.")]
        print(k.asm[final[-1]] if final else k.asm["ir"])
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    k = _compile(args)
    print(k.explain_fences())
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    cache = default_cache()
    if args.action == "list":
        rows = cache.list()
        print(f"cache: {cache.directory}  ({len(rows)} entries)")
        if rows:
            print(f"{'kernel':32s} {'compile':>9s} {'size':>9s} {'created':19s} key")
        for r in rows:
            created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created))
            state = "" if r.valid else "  (corrupt: rebuilt on next use)"
            print(f"{r.name:32s} {r.compile_time_s * 1e3:7.1f}ms {r.size:9d} {created} {r.key[:16]}{state}")
    else:
        from .autotune import TuningStore

        n = cache.clear()
        built = remove_builds()
        print(f"removed {n} entries from {cache.directory}" + (f" and the native launch module ({built} files)" if built else ""))
        store = TuningStore(cache.root)
        print(f"removed {store.clear()} autotuning choices from {store.directory}")
    return 0


def cmd_port(args: argparse.Namespace) -> int:
    from .port import format_report, port_source

    if not os.path.isfile(args.file):
        raise TLXError(f"no such file: {args.file}")
    with open(args.file, encoding="utf-8") as f:
        result = port_source(f.read())
    report = format_report(result, args.file, args.output)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(result.text)
        print(report)
    else:
        sys.stdout.write(result.text)
        print(report, file=sys.stderr)
    return 0 if result.complete else 1


def cmd_demo(args: argparse.Namespace) -> int:
    return demo_main()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tlx", description="tlx: Hopper kernels in Python with proxy fences that explain themselves")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="trace, fence, compile and run (or interpret) a kernel").set_defaults(func=cmd_demo)
    for name, func, helptext in (("compile", cmd_compile, "compile a kernel and print a stage"),
                                 ("explain", cmd_explain, "print the fence report of a kernel")):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("kernel", help="FILE::KERNEL")
        c.add_argument("-s", "--signature", action="append", help="name=type, e.g. x_ptr=*fp16 (repeatable)")
        c.add_argument("-c", "--constexpr", action="append", help="NAME=value, e.g. BLOCK=64 (repeatable)")
        c.add_argument("--num-warps", type=int, default=4)
        c.add_argument("--target", default="sm_90a")
        c.add_argument("--no-fence-passes", action="store_true", help="run none of the fence mechanisms")
        c.add_argument("--print-after-all", action="store_true", help="print the IR after every pass")
        if name == "compile":
            c.add_argument("--emit", choices=["ir", "final", "ptx", "fences", "asm", "passes"], default="final",
                           help="ir: as traced; final: after the last pass; ptx; fences: the report; "
                                "asm: the stages kept; passes: per-pass times")
        c.set_defaults(func=func)
    c = sub.add_parser("cache", help="list or clear the compile cache")
    c.add_argument("action", choices=["list", "clear"])
    c.set_defaults(func=cmd_cache)
    c = sub.add_parser("port", help="rewrite a file written for the real TLX to run on tlx",
                       description="Rename the imports and host API of a real-TLX file for tlx (line numbers kept) "
                                   "and list what has no tlx counterpart. Exit status 1 when something does.")
    c.add_argument("file", help="the Python file to port")
    c.add_argument("-o", "--output", help="write the ported file here (default: print it; the report goes to stderr)")
    c.set_defaults(func=cmd_port)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of `tlx` / `python -m tlx`."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TLXError as e:
        print(str(e), file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

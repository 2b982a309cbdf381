"""`@tlx.jit`: the kernel decorator. A `JITFunction` knows its source, parameters and
dependencies; it traces itself into IR for one specialization (`trace`), is inlined when another
kernel calls it, and launches with `kernel[grid](*args, **constexprs)`."""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import os
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tlx.compiler.errors import IRVerifyError, TLXCompileError
from tlx.compiler.ir import Builder, Location, Module, Operation, verify_module
from tlx.compiler.ir import types as T

from .language import core
from .language.core import TraceContext

_TRACE_DEPTH = [0]

# Every launch asks whether TLX_INTERPRET is set (tests and users set it at any time), and
# `os.environ.get` costs about a microsecond (Mapping.get -> __getitem__ -> encodekey, all in
# Python). So the launch reads the dict in which CPython's os.environ keeps its encoded entries:
# the same mapping, kept current by every `os.environ[k] = v`, `del`, `monkeypatch.setenv`.
# Anywhere os.environ is not CPython's _Environ, it falls back to os.environ.get.
if hasattr(os.environ, "_data") and hasattr(os.environ, "encodekey") and hasattr(os.environ, "encodevalue"):
    _ENV: Any = os.environ._data  # type: ignore[attr-defined]
    _INTERPRET_KEY: Any = os.environ.encodekey("TLX_INTERPRET")  # type: ignore[attr-defined]
    _INTERPRET_OFF: Tuple[Any, ...] = (None, os.environ.encodevalue(""), os.environ.encodevalue("0"))  # type: ignore[attr-defined]
else:  # pragma: no cover - not CPython
    _ENV, _INTERPRET_KEY, _INTERPRET_OFF = os.environ, "TLX_INTERPRET", (None, "", "0")
_NO_GRID = object()


def interpret_requested() -> bool:
    """Whether ``TLX_INTERPRET`` asks for the CPU interpreter (set, and neither "" nor "0")."""
    return _ENV.get(_INTERPRET_KEY) not in _INTERPRET_OFF


@dataclass(frozen=True)
class Param:
    """One kernel parameter."""

    name: str
    index: int
    is_constexpr: bool
    default: Any = inspect.Parameter.empty

    @property
    def has_default(self) -> bool:
        return self.default is not inspect.Parameter.empty


def _is_constexpr_annotation(ann: Any) -> bool:
    if ann is core.constexpr:
        return True
    return isinstance(ann, str) and ann.replace(" ", "").split(".")[-1] == "constexpr"


class JITFunction:
    """A function decorated with `@tlx.jit`."""

    def __init__(self, fn: Callable, launch_defaults: Optional[Dict[str, Any]] = None):
        if not inspect.isfunction(fn):
            raise TLXCompileError(f"@tlx.jit decorates functions, not {type(fn).__name__}")
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self.signature = inspect.signature(fn)
        self.params: List[Param] = [
            Param(p.name, i, _is_constexpr_annotation(p.annotation), p.default)
            for i, p in enumerate(self.signature.parameters.values())
        ]
        for p in self.signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TLXCompileError(f"kernel {fn.__name__}: *args / **kwargs parameters are not supported")
        self.globals = fn.__globals__
        self.closure: Dict[str, Any] = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass
        self.file = inspect.getsourcefile(fn) or fn.__code__.co_filename
        self.launch_defaults = dict(launch_defaults or {})
        self._src: Optional[str] = None
        self._ast: Optional[ast.FunctionDef] = None
        self._hash: Optional[str] = None
        self.line_offset = 0
        self.cache: Dict[Any, Any] = {}  # specialization key -> compiled launcher (filled by the launch path)
        self.loc_cache: Dict[int, Location] = {}  # AST node id -> source location (the AST is kept alive)
        self.assigned_cache: Dict[int, Any] = {}  # loop node id -> names its body binds
        # The last `kernel[grid]`: (grid, its launch function, whether that is a native
        # BoundLaunch). One attribute, so a thread reading it never pairs one thread's grid with
        # another's function.
        self._last_launch: Tuple[Any, Any, bool] = (_NO_GRID, None, False)

    # ---- source --------------------------------------------------------------------------------------
    @property
    def src(self) -> str:
        if self._src is None:
            try:
                lines, start = inspect.getsourcelines(self.fn)
            except (OSError, TypeError) as e:
                raise TLXCompileError(f"cannot read the source of kernel {self.__name__}: {e}",
                                      hint="define kernels in a file or a notebook cell") from None
            self._src = textwrap.dedent("".join(lines))
            self.line_offset = start - 1
        return self._src

    def parse(self) -> ast.FunctionDef:
        if self._ast is None:
            tree = ast.parse(self.src)
            fdefs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if not fdefs or isinstance(fdefs[0], ast.AsyncFunctionDef):
                raise TLXCompileError(f"kernel {self.__name__} is not a plain function definition")
            self._ast = fdefs[0]
        return self._ast

    def body(self) -> List[ast.stmt]:
        return self.parse().body

    @property
    def constexpr_names(self) -> List[str]:
        return [p.name for p in self.params if p.is_constexpr]

    @property
    def arg_names(self) -> List[str]:
        return [p.name for p in self.params]

    # ---- identity for the cache ----------------------------------------------------------------------
    def cache_hash(self) -> str:
        """A digest of this function's source and of every @tlx.jit helper and global constant it
        names (so editing a helper recompiles its callers)."""
        if self._hash is None:
            self._hash = "pending"  # recursion guard
            h = hashlib.sha256(self.src.encode())
            for name, val in sorted(self._dependencies().items()):
                h.update(name.encode())
                if isinstance(val, JITFunction):
                    h.update(val.cache_hash().encode() if val._hash != "pending" else val.src.encode())
                else:
                    h.update(repr(val).encode())
            self._hash = h.hexdigest()
        return self._hash

    def _dependencies(self) -> Dict[str, Any]:
        deps: Dict[str, Any] = {}
        local = set(self.arg_names)
        for node in ast.walk(self.parse()):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                local.add(node.id)
        for node in ast.walk(self.parse()):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
                v = self.globals.get(node.id, self.closure.get(node.id))
                if isinstance(v, JITFunction) or isinstance(v, (bool, int, float, str, core.dtype, core.constexpr)):
                    deps[node.id] = v
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                base = self.globals.get(node.value.id)
                if inspect.ismodule(base):
                    v = getattr(base, node.attr, None)
                    if isinstance(v, JITFunction):
                        deps[f"{node.value.id}.{node.attr}"] = v
        return deps

    # ---- tracing -----------------------------------------------------------------------------------------
    def trace(self, arg_types: Dict[str, T.Type], constexprs: Dict[str, Any], num_warps: int = 4,
              target: str = "sm_90a", num_ctas: int = 1, divisibility: Optional[Dict[str, int]] = None,
              equal_to_one: Sequence[str] = ()) -> Module:
        """Trace this kernel into a verified Module for one specialization: `arg_types` gives the IR
        type of every runtime parameter, `constexprs` the value of every constexpr one (defaults
        fill the rest); parameters named in `equal_to_one` are integers specialized to 1."""
        divisibility = divisibility or {}
        consts = dict(constexprs)
        for p in self.params:
            if p.is_constexpr:
                if p.name not in consts:
                    if not p.has_default:
                        raise TLXCompileError(f"kernel {self.__name__}: no value for constexpr parameter '{p.name}'",
                                              Location(self.file, self.parse().lineno + self.line_offset, 0),
                                              hint=f"pass {p.name}=... when compiling or launching")
                    consts[p.name] = p.default
                consts[p.name] = core.unwrap(consts[p.name])
            elif p.name not in arg_types:
                raise TLXCompileError(f"kernel {self.__name__}: no type for parameter '{p.name}'",
                                      Location(self.file, self.parse().lineno + self.line_offset, 0),
                                      hint="give it in the signature, or mark it `: tl.constexpr`")
        unknown = set(consts) - set(self.constexpr_names)
        if unknown:
            raise TLXCompileError(f"kernel {self.__name__}: {sorted(unknown)} are not constexpr parameters of this kernel",
                                  hint="only parameters annotated `: tl.constexpr` take compile-time values")
        fdef = self.parse()
        func_loc = Location(self.file, fdef.lineno + self.line_offset, fdef.col_offset)
        runtime = [p for p in self.params if not p.is_constexpr]
        func = Operation("tt.func", [], [], {"sym_name": self.__name__}, 1, func_loc)
        func.attrs["arg_names"] = [p.name for p in runtime]
        func.attrs["divisibility"] = [int(divisibility.get(p.name, 1)) for p in runtime]
        if equal_to_one:
            func.attrs["equal_to_one"] = [p.name for p in runtime if p.name in equal_to_one]
        block = func.regions[0].block
        module = Module(func, {"num_warps": num_warps, "target": target, "num_ctas": num_ctas})
        builder = Builder(block)
        builder.loc = func_loc
        ctx = TraceContext(builder, num_warps, target)
        scope: Dict[str, Any] = {}
        for p in self.params:
            if p.is_constexpr:
                scope[p.name] = consts[p.name]
                continue
            t = arg_types[p.name]
            arg = block.add_arg(t, p.name)
            scope[p.name] = core.wrap_value(arg)
        from .language import semantic
        from .tracer import Tracer

        old = core.set_current(ctx)
        _TRACE_DEPTH[0] += 1
        try:
            for p in runtime:
                if p.name in equal_to_one:
                    scope[p.name] = semantic.scalar_constant(1, core.dtype_from_ir(arg_types[p.name]))
            tracer = Tracer(self, ctx, scope)
            ctx.tracer = tracer
            tracer.run_body(self.body())
            builder.set_insertion_point_to_end(block)
            builder.loc = Location(self.file, (fdef.end_lineno or fdef.lineno) + self.line_offset, 0)
            builder.create("tt.return", [], [])
        finally:
            _TRACE_DEPTH[0] -= 1
            core.set_current(old)
        _remove_dead_pure_ops(block)
        try:
            verify_module(module)
        except IRVerifyError as e:  # a tracer bug, not the user's: say so plainly
            raise TLXCompileError(f"internal error: the traced IR does not verify: {e}", func_loc,
                                  hint="please report this kernel to the tlx developers") from e
        return module

    # ---- calling -----------------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TLXCompileError(f"@tlx.jit function {self.__name__} cannot be called directly from Python",
                              hint=f"launch it as {self.__name__}[grid](...), or call it from another @tlx.jit kernel")

    def _getitem(self, grid: Any) -> Callable[..., Any]:
        """`kernel[grid]`: the launch function with the grid bound — the native dispatcher's
        `BoundLaunch` (runtime/native_dispatch.c) where the native launch entry is in use and
        the grid is a tuple of ints, else the generated Python dispatcher; the general path
        under TLX_INTERPRET=1. Launching in a loop with the same grid object gets the same
        function back, nothing built per launch."""
        last = self._last_launch
        if last[0] is grid and last[2]:  # a BoundLaunch reads TLX_INTERPRET itself, per call
            return last[1]
        if _INTERPRET_KEY in _ENV and interpret_requested():  # `in` first: no call when unset
            from .launch import launch_slow

            return lambda *args, **kwargs: launch_slow(self, grid, args, kwargs)
        if last[0] is grid:  # `is`, not ==: (1.0,) == (1,), and a grid is kept alive here
            return last[1]
        d = self.__dict__.get("_dispatch")
        if d is None:
            from .launch import make_dispatcher

            d = self._dispatch = make_dispatcher(self)
        bound: Callable[..., Any]
        if d.native is not None and (type(grid) is tuple or type(grid) is int):
            from tlx.runtime.native_launch import dispatch_module

            try:
                bound = dispatch_module().BoundLaunch(d.native, grid)  # type: ignore[union-attr]
            except (ValueError, OverflowError):  # not a grid C reads: the Python path says why
                bound = functools.partial(d, grid)
        else:
            bound = functools.partial(d, grid)
        self._last_launch = (grid, bound, not isinstance(bound, functools.partial))
        return bound

    # `kernel[grid]`. Where the native dispatcher is in use, tlx/launch.py replaces it with the
    # C `Subscript`, which returns a cached BoundLaunch itself and calls `_getitem` otherwise.
    __getitem__ = _getitem

    def __repr__(self) -> str:
        return f"JITFunction({self.__module__}:{self.__qualname__})"


def _remove_dead_pure_ops(block: Any) -> None:
    """Drop pure ops whose results nothing uses (constants the tracer made for a splat, views taken
    only to be passed to compile-time queries), innermost regions included."""
    from tlx.compiler.ir import is_pure

    for op in reversed(list(block.ops)):
        for r in op.regions:
            _remove_dead_pure_ops(r.block)
        if not op.regions and op.results and is_pure(op) and not any(res.uses for res in op.results):
            op.erase()


def jit(fn: Optional[Callable] = None, **launch_defaults: Any) -> Any:
    """Decorate a kernel (or a helper that kernels call): `@tlx.jit` or `@tlx.jit(num_warps=8)`."""
    if fn is None:
        return lambda f: JITFunction(f, launch_defaults)
    return JITFunction(fn, launch_defaults)

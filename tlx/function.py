"""A `@tlx.jit` function as the tracer reads it: `KernelFunction` — its source and AST, its
parameters (which are `tl.constexpr`), the globals and closure it names, and a digest of all of
it for the cache. `tlx.jit.JITFunction` adds the launch surface on top."""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from tlx.compiler.errors import TLXCompileError
from tlx.compiler.ir import Location

from .language import core


@dataclass(frozen=True)
class Param:
    """One kernel parameter."""

    name: str
    is_constexpr: bool
    default: Any = inspect.Parameter.empty

    @property
    def has_default(self) -> bool:
        return self.default is not inspect.Parameter.empty


def is_constexpr_annotation(ann: Any) -> bool:
    """Whether a parameter annotation marks a compile-time parameter (`tl.constexpr`, also as
    a string annotation)."""
    if ann is core.constexpr:
        return True
    return isinstance(ann, str) and ann.replace(" ", "").split(".")[-1] == "constexpr"


class KernelFunction:
    """A Python function decorated with `@tlx.jit`, as the tracer reads it."""

    def __init__(self, fn: Callable):
        if not inspect.isfunction(fn):
            raise TLXCompileError(f"@tlx.jit decorates functions, not {type(fn).__name__}")
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self.signature = inspect.signature(fn)
        for p in self.signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TLXCompileError(f"kernel {fn.__name__}: *args / **kwargs parameters are not supported")
        self.params: List[Param] = [Param(p.name, is_constexpr_annotation(p.annotation), p.default)
                                    for p in self.signature.parameters.values()]
        self.globals = fn.__globals__
        self.closure: Dict[str, Any] = {}
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                self.closure[name] = cell.cell_contents
            except ValueError:  # a cell not filled yet
                pass
        self.file = inspect.getsourcefile(fn) or fn.__code__.co_filename
        self.line_offset = 0
        self.loc_cache: Dict[int, Location] = {}  # AST node id -> source location (the AST is kept alive)
        self.assigned_cache: Dict[int, Any] = {}  # loop node id -> names its body binds
        self._src: Optional[str] = None
        self._ast: Optional[ast.FunctionDef] = None
        self._hash: Optional[str] = None

    # ---- source --------------------------------------------------------------------------------
    @property
    def src(self) -> str:
        """The function's source, dedented (read once)."""
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
        """The function's AST (parsed once)."""
        if self._ast is None:
            tree = ast.parse(self.src)
            fdefs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if not fdefs or isinstance(fdefs[0], ast.AsyncFunctionDef):
                raise TLXCompileError(f"kernel {self.__name__} is not a plain function definition")
            self._ast = fdefs[0]
        return self._ast

    def body(self) -> List[ast.stmt]:
        """The statements of the function body."""
        return self.parse().body

    def location(self) -> Location:
        """Where the function is defined (its `def` line)."""
        fdef = self.parse()
        return Location(self.file, fdef.lineno + self.line_offset, fdef.col_offset)

    @property
    def constexpr_names(self) -> List[str]:
        return [p.name for p in self.params if p.is_constexpr]

    @property
    def arg_names(self) -> List[str]:
        return [p.name for p in self.params]

    # ---- identity for the cache ------------------------------------------------------------------
    def cache_hash(self) -> str:
        """A digest of this function's source and of every @tlx.jit helper and global constant it
        names (so editing a helper recompiles its callers)."""
        if self._hash is None:
            self._hash = "pending"  # recursion guard
            h = hashlib.sha256(self.src.encode())
            for name, val in sorted(self.dependencies().items()):
                h.update(name.encode())
                if isinstance(val, KernelFunction):
                    h.update(val.cache_hash().encode() if val._hash != "pending" else val.src.encode())
                else:
                    h.update(repr(val).encode())
            self._hash = h.hexdigest()
        return self._hash

    def dependencies(self) -> Dict[str, Any]:
        """The @tlx.jit helpers and global constants the body names."""
        deps: Dict[str, Any] = {}
        local = set(self.arg_names)
        tree = self.parse()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                local.add(node.id)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
                v = self.globals.get(node.id, self.closure.get(node.id))
                if isinstance(v, (KernelFunction, bool, int, float, str, core.dtype, core.constexpr)):
                    deps[node.id] = v
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                base = self.globals.get(node.value.id)
                if inspect.ismodule(base):
                    v = getattr(base, node.attr, None)
                    if isinstance(v, KernelFunction):
                        deps[f"{node.value.id}.{node.attr}"] = v
        return deps

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TLXCompileError(f"@tlx.jit function {self.__name__} cannot be called directly from Python",
                              hint=f"launch it as {self.__name__}[grid](...), or call it from another @tlx.jit kernel")

    def __repr__(self) -> str:
        return f"JITFunction({self.__module__}:{self.__qualname__})"

"""The error classes every layer raises.

Every diagnostic a kernel author sees is a `TLXError`. Errors about the kernel's source are
`TLXCompileError`s: they carry the kernel's source location, show that line and say what to
change. The runtime's errors (`TLXRuntimeError`) live in `tlx.runtime` and subclass `TLXError`.
"""

from __future__ import annotations

import linecache
import sys
from typing import TYPE_CHECKING, Dict, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .ir.core import Location


class TLXError(Exception):
    """Base class of every error tlx raises on purpose."""


class TLXCompileError(TLXError):
    """A problem in the kernel's source or in what it asks the compiler to do.

    The message reads ``file:line:col: error: <what>`` then the source line with a caret, then
    ``hint: <what to change>`` when a hint is given.
    """

    def __init__(self, message: str, loc: Optional["Location"] = None, hint: Optional[str] = None):
        self.__class__ = _with_triton_base(type(self))  # the same class unless triton is loaded
        self.message = message
        self.loc = loc
        self.hint = hint
        # not super(): with Triton's CompilationError among the bases its __init__ would take over
        Exception.__init__(self, self._format())

    def __reduce__(self):
        # rebuilt without __init__ (subclasses take other arguments), as tlx's class, not the twin
        return (_rebuild, (getattr(type(self), "_tlx_class", type(self)), self.args, dict(self.__dict__)))

    @property
    def filename(self) -> Optional[str]:
        return self.loc.file if self.loc is not None else None

    @property
    def lineno(self) -> Optional[int]:
        return self.loc.line if self.loc is not None else None

    def _format(self) -> str:
        parts = []
        if self.loc is not None and self.loc.line > 0:
            parts.append(f"{self.loc.file}:{self.loc.line}:{self.loc.col + 1}: error: {self.message}")
            src = linecache.getline(self.loc.file, self.loc.line).rstrip("\n")
            if src:
                parts.append("    " + src)
                parts.append("    " + " " * self.loc.col + "^")
        else:
            parts.append(f"error: {self.message}")
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


def _rebuild(cls: type, args: tuple, state: dict) -> TLXCompileError:
    """Unpickle a `TLXCompileError`: the message as formatted, the attributes as they were."""
    err = cls.__new__(_with_triton_base(cls), *args)
    err.args = args
    err.__dict__.update(state)
    return err


_TRITON_TWINS: Dict[type, type] = {}


def _with_triton_base(cls: type) -> type:
    """`cls`, or its twin that also derives from upstream Triton's `CompilationError` when the
    process has loaded triton (never imported here: tlx does not depend on it).

    Code ported from Triton catches `triton.CompilationError` around a launch (autotuners pruning
    configs that do not compile, tests expecting a rejection); with the twin, a tlx compile error
    is caught there too. Our message and attributes stay (a twin pickles as tlx's class); Triton's `error_message`, `src`
    and `node` attributes are filled for code that reads them.
    """
    errors = sys.modules.get("triton.compiler.errors")
    base = getattr(errors, "CompilationError", None)
    if base is None or issubclass(cls, base):
        return cls
    twin = _TRITON_TWINS.get(cls)
    if twin is None:
        twin = type(cls.__name__, (cls, base), {
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            "__str__": BaseException.__str__,
            "_tlx_class": cls,
            "error_message": property(lambda self: self.message),
            "src": None,
            "node": None,
        })
        _TRITON_TWINS[cls] = twin
    return twin


class TLXValueError(TLXCompileError, ValueError):
    """A compile-time argument with a value the construct does not accept (a register budget not
    divisible by 8, a count out of range). Also a `ValueError`, as the real TLX raises for these."""


class TLXTypeError(TLXCompileError, TypeError):
    """An argument of a kind the construct does not take (a register layout where a shared-memory
    layout belongs). Also a `TypeError`, as the real TLX raises for these."""


class TLXAssertionError(TLXCompileError, AssertionError):
    """A value the real TLX rejects with a Python `assert` (a CuTe swizzle that does not fit the
    buffer, a layout built from neither a swizzle nor shape/stride). Also an `AssertionError`, so
    code written against the real TLX catches it the same way; unlike a bare `assert`, it is
    raised under `python -O` too."""


class IRParseError(TLXError):
    """The IR text could not be parsed; names the line and column of the text."""


class IRVerifyError(TLXError):
    """The IR breaks an invariant (types, dominance, terminators, region arguments)."""

"""The error classes every layer raises.

Every diagnostic a kernel author sees is a `TLXError`. Errors about the kernel's source are
`TLXCompileError`s: they carry the kernel's source location, show that line and say what to
change. The runtime's errors (`TLXRuntimeError`) live in `tlx.runtime` and subclass `TLXError`.
"""

from __future__ import annotations

import linecache
from typing import TYPE_CHECKING, Optional

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
        self.message = message
        self.loc = loc
        self.hint = hint
        super().__init__(self._format())

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


class TLXValueError(TLXCompileError, ValueError):
    """A compile-time argument with a value the construct does not accept (a register budget not
    divisible by 8, a count out of range). Also a `ValueError`, as the real TLX raises for these."""


class IRParseError(TLXError):
    """The IR text could not be parsed; names the line and column of the text."""


class IRVerifyError(TLXError):
    """The IR breaks an invariant (types, dominance, terminators, region arguments)."""

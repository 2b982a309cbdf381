"""The analysis manager: analyses computed on demand, kept until a pass does not preserve them.

An analysis is a class whose constructor takes `(module, analyses)` (`analyses` is the manager,
to ask for the analyses it builds on). `AnalysisManager.get(cls, module)` returns the kept one or
computes it; the pass manager calls `invalidate(preserved)` after every pass with the analyses
that pass declares it keeps valid (`Pass.preserves`), and drops the others. An analysis that
builds on another is preserved only with it (the passes name both).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Type, TypeVar

A = TypeVar("A")


class AnalysisManager:
    """The analyses of one module (asking with another module drops them all first)."""

    def __init__(self) -> None:
        self._module: Any = None
        self._kept: Dict[type, Any] = {}

    def get(self, cls: Type[A], module: Any) -> A:
        """The analysis `cls` of `module`, computed now unless it is kept."""
        if module is not self._module:
            self._module, self._kept = module, {}
        a = self._kept.get(cls)
        if a is None:
            a = self._kept[cls] = cls(module, self)  # type: ignore[call-arg]
        return a

    def is_kept(self, cls: type) -> bool:
        """Whether `cls` is computed and kept (asking for it would not compute it again)."""
        return cls in self._kept

    def invalidate(self, preserved: Iterable[type] = ()) -> None:
        """Drop every kept analysis not in `preserved`."""
        keep = set(preserved)
        self._kept = {c: a for c, a in self._kept.items() if c in keep}

"""Fence records to JSON and back, so a kernel read from the disk cache still explains its fences."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, List

from .fences import FenceRecord, Guard
from .ir.core import Location

_TYPES = {"FenceRecord": FenceRecord, "Guard": Guard, "Location": Location}


def _encode(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and type(v).__name__ in _TYPES:
        # private bookkeeping fields (such as a record's set of seen op ids) stay behind
        d = {f.name: _encode(getattr(v, f.name)) for f in dataclasses.fields(v) if not f.name.startswith("_")}
        d["__type__"] = type(v).__name__
        return d
    if isinstance(v, (set, frozenset)):
        return {"__set__": sorted((_encode(x) for x in v), key=repr)}
    if isinstance(v, (list, tuple)):
        return {"__tuple__": [_encode(x) for x in v]} if isinstance(v, tuple) else [_encode(x) for x in v]
    return v


def _decode(v: Any) -> Any:
    if isinstance(v, dict):
        if "__tuple__" in v:
            return tuple(_decode(x) for x in v["__tuple__"])
        if "__set__" in v:
            return {_decode(x) for x in v["__set__"]}
        cls = _TYPES[v.pop("__type__")]
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: _decode(x) for k, x in v.items() if k in names})
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return v


def records_to_json(records: List[FenceRecord]) -> str:
    """The records as JSON text."""
    return json.dumps([_encode(r) for r in records])


def records_from_json(text: str) -> List[FenceRecord]:
    """The records `records_to_json` wrote."""
    return [_decode(d) for d in json.loads(text)]

"""Kernel signatures spelled as Triton spells them: `*fp16`, `i32`, `fp32`,
`tensordesc<fp16[64, 64]>`, and their IR types."""

from __future__ import annotations

import re
from typing import Dict, Mapping

from tlx.compiler.errors import TLXCompileError
from tlx.compiler.ir import types as T

from .language import core

_DESC = re.compile(r"^tensordesc\s*<\s*([A-Za-z0-9_]+)\s*\[\s*([0-9,\s]+)\]\s*>$")


def type_from_signature(spec: str, param: str = "") -> T.Type:
    """The IR type of one signature entry."""
    if not isinstance(spec, str):
        raise TLXCompileError(f"signature entry for '{param}' must be a string such as '*fp16' or 'i32', got {spec!r}")
    s = spec.strip()
    m = _DESC.match(s)
    if m:
        dt = core.dtype_from_sig(m.group(1))
        if dt is None or dt.is_ptr():
            raise TLXCompileError(f"unknown descriptor dtype '{m.group(1)}' for '{param}'")
        block = tuple(int(x) for x in m.group(2).split(",") if x.strip())
        if not block:
            raise TLXCompileError(f"descriptor '{param}' needs a block shape, e.g. tensordesc<fp16[64, 64]>")
        return T.TensorDescType(block, dt.ir)
    dt = core.dtype_from_sig(s)
    if dt is None:
        raise TLXCompileError(f"unknown signature type '{spec}' for parameter '{param}'",
                              hint="use '*fp16', '*bf16', '*fp32', 'i32', 'i64', 'fp32' or 'tensordesc<fp16[BM, BK]>'")
    return dt.to_ir()


def signature_to_types(signature: Mapping[str, str]) -> Dict[str, T.Type]:
    """Parse a whole signature dict."""
    return {k: type_from_signature(v, k) for k, v in signature.items()}

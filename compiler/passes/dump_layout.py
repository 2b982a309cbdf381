"""`tlx.dump_layout`: print the layout the layout pass resolved for a value, then erase the op.

Run at the end of the layout pass (the layouts are final there; no later pass changes them).
Each op prints, to stderr, its source location, the value's type and the layout in CuTe
`Shape:Stride` notation over the value's logical row-major element index (static integers as
`_N`), the real TLX's format:

* a register tensor: a thread-value layout `((thread modes),(value modes)):((strides),(strides))`,
  the thread modes from the lane bits then the warp bits, the value modes from the register bits;
* a shared-memory buffer: `size:stride` modes of the element offset (offset -> element).

Consecutive bits whose strides run s, 2s, 4s, ... (or all 0, for copies) make one mode. A layout
that is not integer-strided (an XOR swizzle, padding) has no CuTe form: the op prints its linear
bases instead.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence, TextIO, Tuple

from ..analysis import layout_math as LM
from ..errors import TLXCompileError
from ..ir import types as T
from ..ir.core import Module, Operation

Mode = Tuple[int, int]  # (size, stride)


def collapse_modes(bit_strides: Sequence[int]) -> List[Mode]:
    """CuTe modes of one input dimension from the element stride of each of its bits (bit 0 first)."""
    modes: List[Mode] = []
    i = 0
    while i < len(bit_strides):
        s, size = bit_strides[i], 2
        j = i + 1
        while j < len(bit_strides) and bit_strides[j] == s * size:
            size *= 2
            j += 1
        modes.append((size, s))
        i = j
    return modes


def _group(modes: Sequence[Mode], sizes: bool) -> str:
    if not modes:
        return "_1" if sizes else "_0"
    items = [f"_{m[0] if sizes else m[1]}" for m in modes]
    return items[0] if len(items) == 1 else "(" + ",".join(items) + ")"


def _flat(coord: Sequence[int], shape: Sequence[int]) -> int:
    idx = 0
    for c, s in zip(coord, shape):
        idx = idx * s + c
    return idx


def _integer_strided(strides: Sequence[int]) -> bool:
    """Does the integer sum of these bit strides equal their XOR (distinct powers of two, or 0)?"""
    nz = [s for s in strides if s]
    return all(s & (s - 1) == 0 for s in nz) and len(set(nz)) == len(nz)


def tensor_cute(t: T.TensorType) -> Optional[str]:
    """The CuTe thread-value form of a register tensor's layout (None: not integer-strided)."""
    m = LM.to_map(t.layout, tuple(t.shape))
    shape = tuple(t.shape)
    thread = [_flat(b, shape) for b in m.lane] + [_flat(b, shape) for b in m.warp]
    value = [_flat(b, shape) for b in m.reg]
    if not _integer_strided(thread + value):
        return None
    tm = collapse_modes([_flat(b, shape) for b in m.lane]) + collapse_modes([_flat(b, shape) for b in m.warp])
    vm = collapse_modes(value)
    return f"({_group(tm, True)},{_group(vm, True)}):({_group(tm, False)},{_group(vm, False)})"


def buffer_cute(t: T.MemDescType) -> Optional[str]:
    """The CuTe offset -> element form of a shared buffer's layout (None: not integer-strided)."""
    shape = tuple(t.shape)
    eb = max(1, t.element.bits // 8)
    sm = LM.shared_map(t.layout, shape, eb)
    if sm.padding:
        return None
    by_offset_bit = {}
    for d, bases in enumerate(sm.bases):
        for k, b in enumerate(bases):
            e = b // eb
            if b % eb or e == 0 or e & (e - 1) or e in by_offset_bit:
                return None  # a swizzle (several offset bits) or a copy
            unit = [0] * len(shape)
            unit[d] = 1 << k
            by_offset_bit[e] = _flat(unit, shape)
    strides = [by_offset_bit[e] for e in sorted(by_offset_bit)]
    if not _integer_strided(strides):
        return None
    modes = collapse_modes(strides)
    return f"{_group(modes, True)}:{_group(modes, False)}"


def describe(op: Operation) -> str:
    """The lines `tlx.dump_layout` prints for `op`."""
    v = op.operands[0]
    t = v.type
    loc = op.loc
    where = f"{loc.file}:{loc.line}:{loc.col + 1}" if loc is not None else "<unknown>"
    lines = [f"// tlx.dump_layout @ {where}", f"//   type: {t}"]
    layout = getattr(t, "layout", None)
    if layout is None:
        lines.append("//   encoding: <none>")
        return "\n".join(lines)
    cute = tensor_cute(t) if isinstance(t, T.TensorType) else buffer_cute(t)
    if cute is None:
        lines.append(f"//   (not representable as a CuTe layout; linear layout {layout})")
    else:
        lines.append(f"//   cute: {cute}")
    return "\n".join(lines)


def report_and_erase(module: Module, out: Optional[TextIO] = None) -> None:
    """Print every `tlx.dump_layout` of `module` (to `out`, stderr by default) and erase it."""
    if module.func is None:
        return
    ops = [op for op in module.func.iter_nested() if op.name == "tlx.dump_layout"]
    for op in ops:
        try:
            text = describe(op)
        except TLXCompileError as e:
            text = f"// tlx.dump_layout: {e.message}"
        print(text, file=out if out is not None else sys.stderr)
        op.erase()

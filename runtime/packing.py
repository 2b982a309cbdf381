"""The kernel parameter buffer: where each parameter's bytes live and the ``void**`` array
cuLaunchKernelEx reads (``kernelParams``), built once per kernel specialization.

`ArgLayout(params)` lays the parameters out in one buffer: tensor descriptors first (128 bytes
each, 64-byte aligned), then pointers and scalars in ABI order, each at its natural alignment.
All pointers and scalars are written by ONE ``struct.pack_into`` per launch (``fmt`` below),
which also range-checks every value against its C type; descriptors are copied in with
``ctypes.memmove``. `ArgPack(layout)` owns the buffer and the ``void*[]`` whose entry *i* is
the address of parameter *i*; ``ArgPack.address`` is what the launch passes.

Scalar encodings (the kernel's `.param` types; bool and 8/16-bit integers widen to 32 bits, as
Triton does): ``i1`` -> 4-byte 0/1; ``i8``/``i16`` -> sign-extended int32; ``u8``/``u16`` ->
zero-extended uint32; ``i32 u32 i64 u64`` as themselves; ``fp16`` -> IEEE half; ``bf16`` ->
bfloat16 bits (round to nearest even); ``fp32``/``fp64`` as themselves; pointers -> uint64.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from tlx.compiler.abi import TENSOR_MAP_BYTES, ParamABI, bf16_bits

from .dtypes import canonical_dtype
from .errors import TLXRuntimeError

_DESC_ALIGN = 64

# The values each integer parameter type takes (the native dispatcher range-checks with them too).
INT_RANGES: Dict[str, Tuple[int, int]] = {
    "i8": (-2 ** 7, 2 ** 7 - 1), "i16": (-2 ** 15, 2 ** 15 - 1), "i32": (-2 ** 31, 2 ** 31 - 1),
    "i64": (-2 ** 63, 2 ** 63 - 1), "u8": (0, 2 ** 8 - 1), "u16": (0, 2 ** 16 - 1),
    "u32": (0, 2 ** 32 - 1), "u64": (0, 2 ** 64 - 1), "i1": (0, 1),
}


def _as_int(value: Any) -> int:
    """An integer argument: int, numpy integer or bool; floats are refused, never truncated."""
    if isinstance(value, float) or not hasattr(value, "__index__"):
        raise TypeError(f"expected an integer, got {type(value).__name__} {value!r}")
    return value.__index__()


def _checked_int(dtype: str) -> Callable[[Any], int]:
    lo, hi = INT_RANGES[dtype]

    def convert(value: Any) -> int:
        v = _as_int(value)
        if not lo <= v <= hi:
            raise OverflowError(f"{v} is out of range for {dtype} [{lo}, {hi}]")
        return v

    convert.__name__ = f"to_{dtype}"
    return convert


class ScalarCode(NamedTuple):
    """How one parameter is written: a struct code and an optional converter run first."""

    code: str
    convert: Optional[Callable[[Any], Any]]


def scalar_code(dtype: str, size: int, name: str = "?") -> ScalarCode:
    """The struct code (and converter) for a scalar parameter of `dtype` taking `size` bytes."""
    d = canonical_dtype(dtype)
    table: Dict[Tuple[str, int], ScalarCode] = {
        ("i1", 4): ScalarCode("i", _checked_int("i1")), ("i1", 1): ScalarCode("B", _checked_int("i1")),
        ("i8", 4): ScalarCode("i", _checked_int("i8")), ("i8", 1): ScalarCode("b", None),
        ("i16", 4): ScalarCode("i", _checked_int("i16")), ("i16", 2): ScalarCode("h", None),
        ("u8", 4): ScalarCode("I", _checked_int("u8")), ("u8", 1): ScalarCode("B", None),
        ("u16", 4): ScalarCode("I", _checked_int("u16")), ("u16", 2): ScalarCode("H", None),
        ("i32", 4): ScalarCode("i", None), ("u32", 4): ScalarCode("I", None),
        ("i64", 8): ScalarCode("q", None), ("u64", 8): ScalarCode("Q", None),
        ("fp16", 2): ScalarCode("e", None), ("bf16", 2): ScalarCode("H", bf16_bits),
        ("fp32", 4): ScalarCode("f", None), ("fp64", 8): ScalarCode("d", None),
    }
    try:
        return table[(d, size)]
    except KeyError:
        raise TLXRuntimeError(f"parameter '{name}': a {size}-byte {dtype} scalar is not a "
                              "parameter type the runtime knows") from None


class ParamSlot(NamedTuple):
    """Where one parameter lives: its index in the ABI, kind, dtype, byte offset in the
    buffer, size, and (pointers/scalars) its struct code and converter."""

    index: int
    name: str
    kind: str
    dtype: str
    offset: int
    size: int
    code: Optional[str]
    convert: Optional[Callable[[Any], Any]]
    hidden: bool


def _align(offset: int, alignment: int) -> int:
    return (offset + alignment - 1) // alignment * alignment


class ArgLayout:
    """The parameter buffer layout of one kernel (see the module docstring).

    ``slots`` — one `ParamSlot` per ABI parameter, in ABI order; ``size`` — buffer bytes;
    ``values_offset`` / ``fmt`` — where the pointer+scalar region starts and the struct format
    (little-endian, explicit ``x`` padding) that writes it; ``value_slots`` — the slots that
    format writes, in order; ``desc_slots`` — the descriptor slots.
    """

    def __init__(self, params: Sequence[ParamABI]):
        slots: List[Optional[ParamSlot]] = [None] * len(params)
        offset = 0
        for i, p in enumerate(params):  # descriptors first, so the struct region is one run
            if p.kind == "tensordesc":
                if p.size != TENSOR_MAP_BYTES:
                    raise TLXRuntimeError(f"parameter '{p.name}': a tensor descriptor takes "
                                          f"{TENSOR_MAP_BYTES} bytes, the ABI says {p.size}")
                offset = _align(offset, _DESC_ALIGN)
                slots[i] = ParamSlot(i, p.name, p.kind, p.dtype, offset, p.size, None, None, p.hidden)
                offset += p.size
        self.values_offset = offset
        fmt = ["<"]
        cursor = offset
        value_slots = []
        for i, p in enumerate(params):
            if p.kind == "tensordesc":
                continue
            if p.kind == "pointer":
                if p.size != 8:
                    raise TLXRuntimeError(f"parameter '{p.name}': a pointer takes 8 bytes, the ABI "
                                          f"says {p.size}")
                sc = ScalarCode("Q", None)
            elif p.kind == "scalar":
                sc = scalar_code(p.dtype, p.size, p.name)
            else:
                raise TLXRuntimeError(f"parameter '{p.name}' has unknown kind '{p.kind}'")
            start = _align(cursor, max(1, min(p.align or p.size, 8)))
            if start > cursor:
                fmt.append(f"{start - cursor}x")
            fmt.append(sc.code)
            slot = ParamSlot(i, p.name, p.kind, p.dtype, start, p.size, sc.code, sc.convert, p.hidden)
            slots[i] = slot
            value_slots.append(slot)
            cursor = start + p.size
        self.size = max(_align(cursor, 8), 8)
        self.slots: Tuple[ParamSlot, ...] = tuple(s for s in slots if s is not None)
        self.value_slots: Tuple[ParamSlot, ...] = tuple(value_slots)
        self.desc_slots: Tuple[ParamSlot, ...] = tuple(s for s in self.slots if s.kind == "tensordesc")
        self.fmt = "".join(fmt)
        self.struct = struct.Struct(self.fmt)
        assert self.struct.size == cursor - self.values_offset

    def describe(self) -> str:
        """A table of the slots (for docs and debugging)."""
        rows = [f"{s.index:>3} {s.name:<16} {s.kind:<10} {s.dtype:<8} offset {s.offset:>5} "
                f"size {s.size:>3}" for s in self.slots]
        return "\n".join(rows)


class ArgPack:
    """The storage of one kernel's parameters and its ``void*[]``; built once, refilled per
    launch. ``address`` (int) is the ``kernelParams`` argument of cuLaunchKernelEx."""

    def __init__(self, layout: ArgLayout):
        self.layout = layout
        # 64 spare bytes so the buffer can start on a 64-byte boundary (descriptor alignment).
        self._storage = (ctypes.c_uint8 * (layout.size + _DESC_ALIGN))()
        raw = ctypes.addressof(self._storage)
        self.base = _align(raw, _DESC_ALIGN)
        self.buffer = (ctypes.c_uint8 * layout.size).from_address(self.base)
        self.buffer._keepalive = self._storage  # type: ignore[attr-defined]
        n = len(layout.slots)
        self.pointers = (ctypes.c_void_p * max(n, 1))(*[self.base + s.offset for s in layout.slots])
        self.address = ctypes.addressof(self.pointers)

    def slot_address(self, index: int) -> int:
        """The address of parameter `index`'s bytes (what ``void*[index]`` holds)."""
        return self.base + self.layout.slots[index].offset

    def write_values(self, values: Sequence[Any]) -> None:
        """Write the pointer and scalar values (in ``layout.value_slots`` order), converting and
        range-checking each; raises struct.error/OverflowError/TypeError on a bad value."""
        converted = [s.convert(v) if s.convert is not None else v
                     for s, v in zip(self.layout.value_slots, values)]
        self.layout.struct.pack_into(self.buffer, self.layout.values_offset, *converted)

    def write_descriptor(self, index: int, tensor_map_address: int) -> None:
        """Copy 128 CUtensorMap bytes from `tensor_map_address` into parameter `index`."""
        ctypes.memmove(self.slot_address(index), tensor_map_address, TENSOR_MAP_BYTES)

    def read(self, index: int) -> bytes:
        """The bytes of parameter `index` as the driver will read them (for tests)."""
        s = self.layout.slots[index]
        return ctypes.string_at(self.base + s.offset, s.size)


def explain_bad_value(slot: ParamSlot, value: Any) -> Optional[str]:
    """Why `value` cannot be written into `slot`, or None if it can (for the error message)."""
    d = canonical_dtype(slot.dtype) if slot.kind == "scalar" else "u64"
    what = "a pointer" if slot.kind == "pointer" else d
    if d in INT_RANGES:
        try:
            iv = _as_int(value)
        except TypeError:
            return f"expected an integer for {what}, got {type(value).__name__} {value!r}"
        lo, hi = INT_RANGES[d]
        if not lo <= iv <= hi:
            return f"{iv} is out of range for {what} [{lo}, {hi}]"
        return None
    try:
        v = slot.convert(value) if slot.convert is not None else value
        struct.pack("<" + (slot.code or "Q"), v)
    except (OverflowError, struct.error, TypeError, ValueError) as exc:
        if isinstance(value, (int, float)) or hasattr(value, "__float__"):
            return f"{value!r} is out of range for {d} ({exc})"
        return f"expected a number for {d}, got {type(value).__name__} {value!r}"
    return None

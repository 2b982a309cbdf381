"""The kernel parameter buffer: where each parameter's bytes go and how they are written.

`ArgLayout(params)` lays the parameters of one kernel out in one buffer: tensor descriptors
first (128 bytes each, 64-byte aligned), then pointers and scalars in ABI order, each at its
natural alignment. Two writers use it:

* the native launch (``native_launch.c``) reads `ArgLayout.launch_spec(...)`: the function
  handle, block, shared memory and cluster shape, and per parameter its kind, value bits,
  size and offset; it packs each launch's arguments on its own stack;
* the cuda.bindings fallback (``TLX_NATIVE_LAUNCH=0``, no C compiler) packs with
  `ArgPack.write`: ONE ``struct.pack_into`` for the pointers and scalars, a copy per descriptor.

Scalar encodings (the kernel's ``.param`` types; bool and 8/16-bit integers widen to 32 bits, as
Triton does): ``i1`` -> 4-byte 0/1; ``i8``/``i16`` -> sign-extended int32; ``u8``/``u16`` ->
zero-extended uint32; ``i32 u32 i64 u64`` as themselves; ``fp16`` -> IEEE half; ``bf16`` ->
bfloat16 bits (round to nearest even); ``fp32``/``fp64`` as themselves; pointers -> uint64.
Both writers range-check every integer against its type (``i8`` in 4 bytes still takes only
-128..127) and refuse floats for integers.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from tlx.compiler.abi import TENSOR_MAP_BYTES, ParamABI, bf16_bits

from .dtypes import canonical_dtype
from .errors import TLXRuntimeError

DESCRIPTOR_ALIGN = 64
NATIVE_MAX_BYTES = 4096  # native_launch.c's MAX_PARAM_BYTES
NATIVE_MAX_PARAMS = 512  # native_launch.c's MAX_PARAMS
SPEC_HEADER = struct.Struct("<Q8I")  # native_launch.c's spec_header
SPEC_PARAM = struct.Struct("<BBHI")  # native_launch.c's spec_param: kind, bits, size, offset

# The values each integer parameter type takes.
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

    return convert


class ScalarCode(NamedTuple):
    """How one scalar is written: by Python (a struct code and an optional converter run
    first) and by the native launch (its kind and value bits)."""

    code: str
    convert: Optional[Callable[[Any], Any]]
    native: Tuple[str, int]


def scalar_code(dtype: str, size: int, name: str = "?") -> ScalarCode:
    """How to write a scalar parameter of `dtype` taking `size` bytes."""
    d = canonical_dtype(dtype)
    if d in INT_RANGES:
        bits = int(d[1:])
        codes = {1: "b", 2: "h", 4: "i", 8: "q"} if d[0] == "i" else {1: "B", 2: "H", 4: "I", 8: "Q"}
        if size in codes and size * 8 >= bits:
            exact = size * 8 == bits and d != "i1"
            native = ("i" if d[0] == "i" and d != "i1" else "u", bits)  # i1 takes 0 and 1
            return ScalarCode(codes[size], None if exact else _checked_int(d), native)
    floats = {("fp16", 2): ScalarCode("e", None, ("f", 16)), ("bf16", 2): ScalarCode("H", bf16_bits, ("b", 16)),
              ("fp32", 4): ScalarCode("f", None, ("f", 32)), ("fp64", 8): ScalarCode("d", None, ("f", 64))}
    if (d, size) in floats:
        return floats[(d, size)]
    raise TLXRuntimeError(f"parameter '{name}': a {size}-byte {dtype} scalar is not a "
                          "parameter type the runtime knows")


class ParamSlot(NamedTuple):
    """Where one parameter lives: its index in the ABI, kind, dtype, byte offset in the
    buffer, size, (pointers/scalars) its struct code and converter, and its native kind."""

    index: int
    name: str
    kind: str
    dtype: str
    offset: int
    size: int
    code: Optional[str]
    convert: Optional[Callable[[Any], Any]]
    native: Tuple[str, int]


def _align(offset: int, alignment: int) -> int:
    return (offset + alignment - 1) // alignment * alignment


class ArgLayout:
    """The parameter buffer layout of one kernel (see the module docstring).

    ``slots`` — one `ParamSlot` per ABI parameter, in ABI order; ``size`` — buffer bytes;
    ``values_offset`` / ``struct`` — where the pointer+scalar region starts and the struct
    (little-endian, explicit padding) that writes it; ``value_slots`` — the slots it writes, in
    order; ``desc_slots`` — the descriptor slots.
    """

    def __init__(self, params: Sequence[ParamABI]):
        slots: List[Optional[ParamSlot]] = [None] * len(params)
        offset = 0
        for i, p in enumerate(params):  # descriptors first, so the struct region is one run
            if p.kind == "tensordesc":
                if p.size != TENSOR_MAP_BYTES:
                    raise TLXRuntimeError(f"parameter '{p.name}': a tensor descriptor takes "
                                          f"{TENSOR_MAP_BYTES} bytes, the ABI says {p.size}")
                offset = _align(offset, DESCRIPTOR_ALIGN)
                slots[i] = ParamSlot(i, p.name, p.kind, p.dtype, offset, p.size, None, None, ("d", 0))
                offset += p.size
        self.values_offset = offset
        fmt = ["<"]
        cursor = offset
        for i, p in enumerate(params):
            if p.kind == "tensordesc":
                continue
            if p.kind == "pointer":
                if p.size != 8:
                    raise TLXRuntimeError(f"parameter '{p.name}': a pointer takes 8 bytes, the ABI "
                                          f"says {p.size}")
                sc = ScalarCode("Q", None, ("p", 64))
            elif p.kind == "scalar":
                sc = scalar_code(p.dtype, p.size, p.name)
            else:
                raise TLXRuntimeError(f"parameter '{p.name}' has unknown kind '{p.kind}'")
            start = _align(cursor, max(1, min(p.align or p.size, 8)))
            if start > cursor:
                fmt.append(f"{start - cursor}x")
            fmt.append(sc.code)
            slots[i] = ParamSlot(i, p.name, p.kind, p.dtype, start, p.size, sc.code, sc.convert, sc.native)
            cursor = start + p.size
        self.size = max(_align(cursor, 8), 8)
        self.slots: Tuple[ParamSlot, ...] = tuple(s for s in slots if s is not None)
        self.value_slots: Tuple[ParamSlot, ...] = tuple(s for s in self.slots if s.kind != "tensordesc")
        self.desc_slots: Tuple[ParamSlot, ...] = tuple(s for s in self.slots if s.kind == "tensordesc")
        self.struct = struct.Struct("".join(fmt))

    def launch_spec(self, function: int, block: int, shared: int, cluster: Sequence[int],
                    grid_in_clusters: bool) -> Optional[bytes]:
        """The native launch's spec for a kernel with this layout (native_launch.c's
        ``spec_header`` and one ``spec_param`` per parameter), or None when the buffer is
        larger than the native launch packs (the Python packer launches it)."""
        if self.size > NATIVE_MAX_BYTES or len(self.slots) > NATIVE_MAX_PARAMS:
            return None
        head = SPEC_HEADER.pack(function, block, shared, *cluster, int(grid_in_clusters), len(self.slots), self.size)
        return head + b"".join(SPEC_PARAM.pack(ord(s.native[0]), s.native[1], s.size, s.offset) for s in self.slots)

class ArgPack:
    """One parameter buffer and its ``void*[]``, for the Python packer; ``address`` (int) is
    the ``kernelParams`` argument of cuLaunchKernelEx. Not shared between threads."""

    def __init__(self, layout: ArgLayout):
        self.layout = layout
        # spare bytes so the buffer can start on a 64-byte boundary (descriptor alignment)
        self._storage = (ctypes.c_uint8 * (layout.size + DESCRIPTOR_ALIGN))()
        self.base = _align(ctypes.addressof(self._storage), DESCRIPTOR_ALIGN)
        self.buffer = (ctypes.c_uint8 * layout.size).from_address(self.base)
        self.pointers = (ctypes.c_void_p * max(len(layout.slots), 1))(*[self.base + s.offset for s in layout.slots])
        self.address = ctypes.addressof(self.pointers)

    def write(self, values: Sequence[Any]) -> None:
        """Write one value per parameter, in ABI order: pointers as ints, scalars, descriptors
        as their 128 encoded bytes; raises struct.error/OverflowError/TypeError on a bad value."""
        layout = self.layout
        for s in layout.desc_slots:
            blob = values[s.index]
            if not isinstance(blob, bytes) or len(blob) != TENSOR_MAP_BYTES:
                raise TypeError(f"parameter '{s.name}': a tensor descriptor is passed as its encoded bytes")
            ctypes.memmove(self.base + s.offset, blob, TENSOR_MAP_BYTES)
        layout.struct.pack_into(self.buffer, layout.values_offset,
                                *[s.convert(values[s.index]) if s.convert is not None else values[s.index]
                                  for s in layout.value_slots])

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

"""The kernel ABI: what the runtime needs to know to launch a compiled kernel, and nothing else.

The code generator fills a `KernelABI`; the runtime reads it (this module is data only, so the
runtime can import it without importing any pass). It serializes to JSON for the disk cache.

Parameter order in the PTX entry is `params` order: the kernel's non-constexpr arguments in
source order, then hidden parameters (for example a global scratch pointer). Kinds:

* ``pointer``    — a device address, `.param .u64`
* ``scalar``     — an integer or float, `.param .{u,s,f}{32,64}` (bool and 8/16-bit ints widen
  to 32 bits, as Triton does); `dtype` is the Triton spelling (`i32`, `fp32`, ...)
* ``tensordesc`` — a 128-byte CUtensorMap passed by value, `.param .align 64 .b8 name[128]`;
  `tma` says how the runtime must encode it (element type, box, swizzle)

The encodings both sides must agree on live here too, once: the ABI's dtype spelling of each IR
element type, the bits of a bf16 value (bf16 scalar parameters, bf16 immediates), and the
CUtensorMap enums (data type, swizzle) that the runtime's encoder and the kernel's device-side
`tensormap.replace` both write.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

#: the ABI's (Triton's) spelling of each IR element type
ABI_DTYPE: Dict[str, str] = {
    "i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u8": "u8", "u16": "u16", "u32": "u32",
    "u64": "u64", "f16": "fp16", "bf16": "bf16", "f32": "fp32", "f64": "fp64", "f8e4m3": "fp8e4nv", "f8e5m2": "fp8e5",
}

TENSOR_MAP_BYTES = 128  # a CUtensorMap, passed by value and 64-byte aligned

#: CUtensorMapDataType of each element type (ABI spelling). fp8 has no TMA type of its own: TMA
#: moves bytes, so it is UINT8 (the bits are copied unchanged). The numbers are the driver's enum.
TMA_DATA_TYPE: Dict[str, int] = {
    "u8": 0, "i8": 0, "i1": 0, "fp8e4nv": 0, "fp8e5": 0, "fp8e4b8": 0, "fp8e5b16": 0, "fp8e4b15": 0,
    "u16": 1, "i16": 1, "u32": 2, "i32": 3, "u64": 4, "i64": 5,
    "fp16": 6, "fp32": 7, "fp64": 8, "bf16": 9,
}
TMA_TFLOAT32 = 11  # fp32 rounded to tf32 on load (TensorDescriptor(round_f32_to_tf32=True))
TMA_SWIZZLE: Dict[int, int] = {0: 0, 32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle NONE/32B/64B/128B, by bytes


def bf16_bits(value: Any) -> int:
    """The bfloat16 bit pattern of a float, rounded to nearest even (NaN stays a quiet NaN of
    the same sign); OverflowError beyond the fp32 range."""
    f = float(value)
    bits = struct.unpack("<I", struct.pack("<f", f))[0]
    if math.isnan(f):
        return 0x7FC0 | ((bits >> 16) & 0x8000)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


@dataclass(frozen=True)
class TMAEncoding:
    """How to encode a host TensorDescriptor for this kernel: `box` is the box of one TMA copy
    (outermost first, the kernel's block shape with the inner dimension capped at the swizzle
    span), `swizzle` the swizzle in bytes (0, 32, 64, 128), `elem_bytes` the element size, and
    `dtype` the Triton spelling of the element type."""

    dtype: str
    elem_bytes: int
    block_shape: Tuple[int, ...]
    box: Tuple[int, ...]
    swizzle: int
    padding: str = "zero"


@dataclass(frozen=True)
class ParamABI:
    """One entry-point parameter."""

    name: str
    kind: str  # 'pointer' | 'scalar' | 'tensordesc'
    dtype: str  # pointee dtype for pointers, value dtype for scalars, element dtype for descriptors
    size: int  # bytes in the parameter buffer (8 for pointers, 4/8 for scalars, 128 for descriptors)
    align: int
    hidden: bool = False  # added by the compiler (the user passes no argument for it)
    tma: Optional[TMAEncoding] = None


@dataclass(frozen=True)
class KernelABI:
    """How to launch one compiled kernel."""

    entry: str  # the PTX .entry name
    params: Tuple[ParamABI, ...]
    threads_per_cta: int
    num_warps: int  # warps of the default partition (what the user asked for)
    shared_bytes: int  # dynamic shared memory to request at launch
    cluster: Tuple[int, int, int] = (1, 1, 1)
    scratch_bytes_per_program: int = 0  # size of the hidden global scratch, per program, if any
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def user_params(self) -> List[ParamABI]:
        return [p for p in self.params if not p.hidden]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "KernelABI":
        d = json.loads(text)
        params = []
        for p in d.pop("params"):
            tma = p.pop("tma")
            if tma is not None:
                tma["block_shape"] = tuple(tma["block_shape"])
                tma["box"] = tuple(tma["box"])
                tma = TMAEncoding(**tma)
            params.append(ParamABI(tma=tma, **p))
        d["cluster"] = tuple(d["cluster"])
        return KernelABI(params=tuple(params), **d)

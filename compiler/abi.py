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
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple


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

"""Element types as the runtime sees them: the Triton spellings (``fp16``, ``bf16``, ``fp32``,
``i32``, ``fp8e4nv``, ...), their sizes, and the maps from what arrays carry (numpy typestrs,
torch dtypes, numpy dtypes) to those spellings.

The IR spells some types differently (``f16``, ``f32``, ``f8e4m3``); `canonical_dtype` accepts
both, so the runtime reads a `KernelABI` whichever spelling the code generator used.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from tlx.compiler.abi import ABI_DTYPE

from .errors import TLXRuntimeError

#: bytes per element, by Triton spelling
ELEMENT_BYTES: Dict[str, int] = {
    "i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
    "u8": 1, "u16": 2, "u32": 4, "u64": 8,
    "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8,
    "fp8e4nv": 1, "fp8e5": 1, "fp8e4b8": 1, "fp8e5b16": 1, "fp8e4b15": 1,
}

FLOAT_DTYPES = frozenset({"fp16", "bf16", "fp32", "fp64", "fp8e4nv", "fp8e5", "fp8e4b8", "fp8e5b16",
                          "fp8e4b15"})

# Other spellings of the same types: the IR's (the ABI's table), numpy's and torch's names.
_ALIASES: Dict[str, str] = {
    **{ir: abi for ir, abi in ABI_DTYPE.items() if ir != abi}, "u1": "i1", "bool": "i1",
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64", "int8": "i8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float8_e4m3fnuz": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16",
}


def canonical_dtype(name: str) -> str:
    """The Triton spelling of a dtype name (``f32`` -> ``fp32``); unknown names raise KeyError."""
    if name in ELEMENT_BYTES:
        return name
    return _ALIASES[name]


# __cuda_array_interface__ / numpy typestrs (byte order '<' or '|'; '=' is accepted as native).
_TYPESTR: Dict[str, str] = {
    "b1": "i1", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64",
    "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64",
    "f2": "fp16", "f4": "fp32", "f8": "fp64",
}


def dtype_of_typestr(typestr: str) -> Optional[str]:
    """The Triton spelling of a CAI typestr (``'<f4'`` -> ``fp32``), or None if it has none
    (big-endian, complex, structured or 'V' void types such as an ml_dtypes bfloat16)."""
    if len(typestr) < 3 or typestr[0] not in "<|=":
        return None
    return _TYPESTR.get(typestr[1:])


def dtype_of_numpy(dtype: Any) -> Optional[str]:
    """The Triton spelling of a numpy dtype (or anything `numpy.dtype()` accepts), or None.
    ml_dtypes' ``bfloat16`` / ``float8_*`` are recognised by name."""
    import numpy as np

    dt = np.dtype(dtype)
    if dt.kind in "biuf":
        return dtype_of_typestr(dt.str)
    return _ALIASES.get(dt.name)


_TORCH_CACHE: Dict[Any, Optional[str]] = {}


def dtype_of_torch(dtype: Any) -> Optional[str]:
    """The Triton spelling of a torch dtype (``torch.float16`` -> ``fp16``), or None."""
    try:
        return _TORCH_CACHE[dtype]
    except KeyError:
        name = str(dtype).rsplit(".", 1)[-1]
        result = _ALIASES.get(name, name if name in ELEMENT_BYTES else None)
        _TORCH_CACHE[dtype] = result
        return result


def require_dtype(dtype: Any, library: str, what: str = "dtype") -> str:
    """The Triton spelling of a numpy or torch (`library`) dtype; a `TLXRuntimeError` naming it
    (``numpy dtype complex64 has no kernel type``) where it has none."""
    found = dtype_of_torch(dtype) if library == "torch" else dtype_of_numpy(dtype)
    if found is None:
        raise TLXRuntimeError(f"{library} {what} {dtype} has no kernel type")
    return found

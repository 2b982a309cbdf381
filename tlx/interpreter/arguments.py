"""Kernel arguments as interpreter memory: what a launch passes (numpy arrays, torch tensors,
device arrays, host tensor descriptors, scalars) made into the values a `tt.func` receives.

The rule, as on the GPU: a pointer argument is the address of the argument's first element
inside the memory of its whole *allocation* — a numpy array's base chain, a torch tensor's
untyped storage. Pointer arithmetic with the strides the kernel receives (``x.stride(0)``,
...) therefore reaches exactly the elements it reaches on the GPU, whatever view was passed
(transposed, sliced, negative strides); views of one allocation alias; an access outside the
allocation is an `InterpreterError` naming the kernel's line. Loads and stores go to the host
memory itself, never a copy: results land in the user's array or tensor in place. Every dtype
works the same way, because the interpreter reads memory as bytes (bf16 and fp8 are their bit
patterns: a torch bf16/fp8 tensor needs no numpy dtype).

* numpy arrays (and objects exposing ``__array_interface__``, and host DLPack producers), torch
  tensors on the CPU, the runtime's ``host_copy(x)`` (run on ``x`` itself; on a copy with
  ``write_back=False``): addressed in place. A read-only numpy array makes its allocation
  read-only: a store into it is an error.
* torch tensors on a GPU: each storage is copied to the host once, run on, and copied back
  (as ``TRITON_INTERPRET=1`` does); other device arrays go through torch (``__cuda_array_interface__``
  / DLPack, zero-copy) when torch is installed; objects with ``copy_to_host`` /
  ``copy_to_device`` (numba) are copied to the host and back, and must be contiguous.
* host tensor descriptors: any object with ``base`` (an array as above), ``shape``,
  ``strides`` (elements), ``block_shape`` and optionally ``padding`` and
  ``round_f32_to_tf32`` — ``tlx.TensorDescriptor`` or Triton's. Checked against the rules the
  GPU's ``cuTensorMapEncodeTiled`` enforces (`tlx.runtime.tma.check_tma_rules`).
* scalars: Python / numpy numbers (a 0-d array or tensor is a pointer, as in Triton).

`kernel_signature(name, value)` spells an argument's kernel type (``*bf16``,
``tensordesc<fp16[64, 64]>``, ``i32``) for tracing; `bind_arguments(module, args, gmem)` maps
the arguments of one run and returns the values and the `Staging` to write back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from tlx.compiler.ir import types as T
from tlx.compiler.ir.core import Module
from tlx.runtime.arrays import kind_of
from tlx.specialize import arg_spec
from tlx.runtime.dtypes import ELEMENT_BYTES, canonical_dtype, dtype_of_numpy, dtype_of_torch, dtype_of_typestr

from . import numerics as N
from .memory import Descriptor, GlobalMemory, InterpreterError, Region

_DESCRIPTOR_FIELDS = ("base", "shape", "strides", "block_shape")


# ---------------------------------------------------------------------------------------------
# host memory of one array argument
# ---------------------------------------------------------------------------------------------

@dataclass
class HostMemory:
    """Where one array argument lives on the host: the bytes of its whole allocation and the
    byte offset of its first element (index 0, ..., 0) in them."""

    data: np.ndarray  # uint8 over the allocation; the host memory itself (or a device array's host copy)
    addr: int  # host address of data[0]
    offset: int  # byte offset of the argument's first element in `data`
    dtype: Optional[str]  # the element type's Triton spelling; None: it has none
    type_name: str  # the element type as the user's library names it ("float32", "torch.bfloat16")
    writable: bool


class _RawBytes:
    """An ``__array_interface__`` over `nbytes` of host memory at `addr` that keeps `owner` (what
    owns the memory) alive for as long as a numpy view of it exists."""

    def __init__(self, addr: int, nbytes: int, owner: Any, readonly: bool):
        self.owner = owner
        self.__array_interface__ = {"version": 3, "shape": (nbytes,), "typestr": "|u1", "data": (addr, readonly)}


def _bytes_at(addr: int, nbytes: int, owner: Any, writable: bool) -> np.ndarray:
    if nbytes <= 0:
        return np.zeros(0, np.uint8)
    return np.asarray(_RawBytes(addr, nbytes, owner, not writable))


def _byte_bounds(a: np.ndarray) -> Tuple[int, int]:
    """[low, high) host addresses of the bytes a numpy array spans (any strides)."""
    first = int(a.__array_interface__["data"][0])
    if a.size == 0:
        return first, first
    lo = first + sum((d - 1) * s for d, s in zip(a.shape, a.strides) if s < 0)
    hi = first + sum((d - 1) * s for d, s in zip(a.shape, a.strides) if s > 0) + a.itemsize
    return lo, hi


def _numpy_memory(arr: np.ndarray, name: str, staging: "Staging") -> HostMemory:
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    first = int(arr.__array_interface__["data"][0])
    writable = bool(arr.flags.writeable)
    if kind_of(root.base) == "torch" and root.base.device.type == "cpu":
        # t.numpy(): the tensor's storage is the allocation (so the numpy view and the tensor alias)
        mem = _torch_memory(root.base, name, staging)
        addr = mem.addr
        data = mem.data if writable else _bytes_at(addr, mem.data.size, mem.data, False)
    else:
        addr, hi = _byte_bounds(root)
        writable = writable and bool(root.flags.writeable)
        data = _bytes_at(addr, hi - addr, root, writable)
    offset = min(max(first - addr, 0), data.size) if arr.size == 0 else first - addr
    return HostMemory(data, addr, offset, dtype_of_numpy(arr.dtype), str(arr.dtype), writable)


def _torch_memory(t: Any, name: str, staging: "Staging") -> HostMemory:
    if str(t.layout) != "torch.strided":
        raise InterpreterError(f"argument '{name}': a {t.layout} tensor has no memory a kernel can address",
                               hint="pass x.to_dense()")
    if t.is_conj() or t.is_neg():
        raise InterpreterError(f"argument '{name}': the tensor is a lazily conjugated or negated view, "
                               "whose memory does not hold its values", hint="pass x.resolve_conj().resolve_neg()")
    if t.device.type == "meta":
        raise InterpreterError(f"argument '{name}': a tensor on the meta device has no data")
    storage = t.untyped_storage()
    if t.device.type != "cpu":
        storage = staging.torch_storage(storage, name)
    addr, nbytes = int(storage.data_ptr()), int(storage.nbytes())
    offset = int(t.storage_offset()) * int(t.element_size())
    return HostMemory(_bytes_at(addr, nbytes, storage, True), addr, offset, dtype_of_torch(t.dtype), str(t.dtype), True)


def host_memory(value: Any, name: str, staging: "Staging") -> HostMemory:
    """The host memory of an array argument (see the module docstring for what is accepted);
    device arrays are staged through `staging`. Raises `InterpreterError` for anything else."""
    kind = kind_of(value)
    if kind == "torch":
        return _torch_memory(value, name, staging)
    if isinstance(value, np.ndarray):
        return _numpy_memory(value, name, staging)
    if kind == "hostcopy":  # the runtime's host_copy(x): x itself, or a copy if nothing is written back
        return _numpy_memory(value.array if value.write_back else value.array.copy(), name, staging)
    if hasattr(value, "copy_to_host") and hasattr(value, "copy_to_device"):  # numba device arrays
        return _numpy_memory(staging.device_array(value, name), name, staging)
    if kind in ("cai", "dlpack") and _dlpack_on_cpu(value) is not True:
        return _torch_memory(_as_torch(value, name, kind), name, staging)
    if kind == "dlpack":
        return _numpy_memory(np.from_dlpack(value), name, staging)
    if hasattr(value, "__array_interface__") and not isinstance(value, np.generic):  # zero-copy by the protocol
        return _numpy_memory(np.asarray(value), name, staging)
    raise InterpreterError(f"argument '{name}': expected an array (numpy, torch, or a device array), "
                           f"got {type(value).__name__}",
                           hint="pass a numpy array or a torch tensor (objects that only convert to one by "
                                "copying cannot be written in place)")


def _dlpack_on_cpu(value: Any) -> Optional[bool]:
    dev = getattr(value, "__dlpack_device__", None)
    if dev is None:
        return None
    try:
        return int(dev()[0]) == 1  # kDLCPU
    except Exception:  # noqa: BLE001 - a producer that cannot say: treat it as a device array
        return False


def _as_torch(value: Any, name: str, kind: str) -> Any:
    """A device array as a torch tensor over the same memory (zero-copy), for staging."""
    try:
        import torch
    except ImportError:
        raise InterpreterError(f"argument '{name}': a {type(value).__name__} in device memory can be run on the "
                               "interpreter only through torch, which is not installed",
                               hint="copy it to the host first (a numpy array), or install torch") from None
    try:
        return torch.as_tensor(value) if kind == "cai" else torch.from_dlpack(value)
    except Exception as e:  # noqa: BLE001 - the producer's own error, reported with the argument
        raise InterpreterError(f"argument '{name}': could not read the {type(value).__name__} through torch: {e}",
                               hint="copy it to the host first (a numpy array)") from None


# ---------------------------------------------------------------------------------------------
# device arrays copied to the host for a run
# ---------------------------------------------------------------------------------------------

class Staging:
    """Device memory copied to the host for one run and written back after it: each torch
    storage once (views of one storage share one host copy, so they alias as on the GPU), and
    each ``copy_to_host`` array (numba)."""

    def __init__(self) -> None:
        self._storages: Dict[Tuple[str, int], Tuple[Any, Any, str]] = {}  # (device, address) -> (device, host, name)
        self._arrays: List[Tuple[Any, np.ndarray, str, Optional[Tuple[int, int]]]] = []

    def torch_storage(self, storage: Any, name: str) -> Any:
        """The host copy of a device storage (made on first use)."""
        key = (str(storage.device), int(storage.data_ptr()))
        got = self._storages.get(key)
        if got is None:
            got = self._storages[key] = (storage, storage.cpu(), name)
        self._check_disjoint()
        return got[1]

    def device_array(self, value: Any, name: str) -> np.ndarray:
        """The host copy of a ``copy_to_host`` / ``copy_to_device`` device array."""
        for obj, host, _, _ in self._arrays:
            if obj is value:
                return host
        cai = getattr(value, "__cuda_array_interface__", None)
        span = None
        if isinstance(cai, dict):
            isz = np.dtype(cai["typestr"]).itemsize
            strides = cai.get("strides")
            shape = tuple(cai["shape"])
            if strides is not None and tuple(strides) != _c_strides(shape, isz):
                raise InterpreterError(f"argument '{name}': a non-contiguous {type(value).__name__} cannot be copied "
                                       "to the host with its layout",
                                       hint="pass a contiguous array, or a torch tensor (views of any layout work)")
            span = (int(cai["data"][0]), int(cai["data"][0]) + int(np.prod(shape)) * isz)
        host = np.asarray(value.copy_to_host())
        self._arrays.append((value, host, name, span))
        self._check_disjoint()
        return host

    def _check_disjoint(self) -> None:
        """Two staged device arrays over overlapping device memory would each get their own host
        copy (a write through one unseen by the other): refuse, never a silently wrong result."""
        spans = [(lo, hi, n) for _, _, n, s in self._arrays if s is not None for lo, hi in [s]]
        spans += [(int(d.data_ptr()), int(d.data_ptr()) + int(d.nbytes()), n) for d, _, n in self._storages.values()]
        spans.sort()
        for (lo0, hi0, n0), (lo1, hi1, n1) in zip(spans, spans[1:]):
            if lo1 < hi0 and lo1 < hi1:
                raise InterpreterError(f"device arrays '{n0}' and '{n1}' overlap in device memory; the interpreter "
                                       "copies each to the host, so they would not alias",
                                       hint="pass torch tensors that are views of one tensor (they share one copy), "
                                            "or host arrays")

    def write_back(self) -> None:
        """Copy every staged host copy back to its device memory."""
        for dev, host, _ in self._storages.values():
            dev.copy_(host)
        for obj, host, _, _ in self._arrays:
            obj.copy_to_device(host)


def _c_strides(shape: Tuple[int, ...], itemsize: int) -> Tuple[int, ...]:
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(out))


# ---------------------------------------------------------------------------------------------
# types
# ---------------------------------------------------------------------------------------------

def _is_descriptor(value: Any) -> bool:
    return all(hasattr(value, f) for f in _DESCRIPTOR_FIELDS)


def _array_dtype(value: Any) -> Optional[Tuple[Optional[str], str]]:
    """(Triton spelling or None, the library's name) of an array argument's element type; None
    when `value` is not an array."""
    if isinstance(value, np.generic):  # a numpy scalar has __array_interface__ but is a number
        return None
    kind = kind_of(value)
    if kind == "torch":
        return dtype_of_torch(value.dtype), str(value.dtype)
    if kind == "hostcopy":
        return value.dtype, str(value.array.dtype)
    dt = getattr(value, "dtype", None)
    if isinstance(value, np.ndarray) or (dt is not None and kind in ("host", "dlpack", "cai")) or \
            (dt is not None and hasattr(value, "copy_to_host")):
        try:
            npdt = np.dtype(dt)
        except TypeError:
            return None, str(dt)
        return dtype_of_numpy(npdt), str(npdt)
    if kind == "cai":
        ts = value.__cuda_array_interface__["typestr"]
        return dtype_of_typestr(ts), ts
    return None


def kernel_signature(name: str, value: Any) -> str:
    """The kernel type of a runtime argument, as Triton spells it: an array or tensor (of any
    shape, 0-d included) is a pointer to its element type (``*fp16``, ``*bf16``), a host
    descriptor ``tensordesc<fp16[64, 64]>``, a scalar as the GPU launch types it (int: ``i32``
    / ``i64`` / ``u64``, float: ``fp32``, bool: ``i1``, a numpy scalar: its own type)."""
    if _is_descriptor(value):
        if value.block_shape is None:
            raise InterpreterError(f"tensor descriptor '{name}' has no block_shape",
                                   hint="set desc.block_shape first (e.g. in the autotune pre_hook)")
        elem = _pointee_spelling(name, value.base, "the descriptor's base")
        return f"tensordesc<{elem}[{', '.join(str(int(b)) for b in value.block_shape)}]>"
    if _array_dtype(value) is not None or hasattr(value, "copy_to_host"):
        return "*" + _pointee_spelling(name, value, "it")
    if value is None:
        raise InterpreterError(f"argument '{name}' is None", hint="pass a value, or mark the parameter `: tl.constexpr`")
    if not isinstance(value, (int, float, np.generic)):
        raise InterpreterError(f"argument '{name}': expected an array, a tensor descriptor or a number, got "
                               f"{type(value).__name__}", hint="pass a numpy array or a torch tensor for a pointer")
    try:
        return arg_spec(value).type
    except Exception as e:  # noqa: BLE001 - the runtime's message (a value out of range), for this argument
        raise InterpreterError(f"argument '{name}': {e}") from None


def _pointee_spelling(name: str, value: Any, what: str) -> str:
    got = _array_dtype(value)
    if got is None:
        raise InterpreterError(f"argument '{name}': {what} is a {type(value).__name__}, not an array")
    spelling, lib_name = got
    if spelling is None:
        raise InterpreterError(f"argument '{name}': element type {lib_name} has no kernel type")
    return spelling


def _element_matches(arg: str, et: T.ScalarType) -> bool:
    """Whether memory of element type `arg` (a Triton spelling) may be read as `et`: the same
    type, or the same width where the kernel's type says how to read the bits — bf16 / fp8 from
    integer bit patterns, i1 from bytes, an integer of either signedness."""
    try:
        want = canonical_dtype(et.name)
    except KeyError:
        return False
    if arg == want:
        return True
    size = ELEMENT_BYTES.get(arg)
    if size != ELEMENT_BYTES.get(want) or arg[0] not in "iu":
        return False
    return want == "bf16" or want.startswith("fp8") or want[0] in "iu"


def _check_element(mem: HostMemory, et: T.ScalarType, name: str) -> None:
    if mem.dtype is None or not _element_matches(mem.dtype, et):
        raise InterpreterError(f"argument '{name}': the kernel reads it as {et}, but the array holds {mem.type_name}",
                               hint=f"pass an array of {N.storage_dtype(et)} (bf16/fp8: also their bit patterns)")


# ---------------------------------------------------------------------------------------------
# binding one run's arguments
# ---------------------------------------------------------------------------------------------

class _Pending(NamedTuple):
    index: int
    name: str
    mem: HostMemory
    type: T.Type
    desc: Any  # the host descriptor for a !tensordesc parameter, else None


def _address(reg: Region, mem: HostMemory) -> int:
    return reg.base + mem.addr + mem.offset - reg.host_addr


def _scalar(value: Any, t: T.ScalarType, name: str) -> Any:
    if isinstance(value, np.ndarray) or kind_of(value) in ("torch", "cai", "dlpack"):
        raise InterpreterError(f"argument '{name}': the kernel takes a {t} scalar here, not an array",
                               hint="pass a Python or numpy number (an array or tensor, 0-d too, is a pointer)")
    if t.is_float:
        if not isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
            raise InterpreterError(f"argument '{name}': the kernel takes a {t}, got {type(value).__name__}")
        return N.round_to(np.float64(value), t)[()]
    if isinstance(value, (float, np.floating)) or not isinstance(value, (int, np.integer, np.bool_)):
        raise InterpreterError(f"argument '{name}': the kernel takes an integer ({t}), got {value!r}")
    v = int(value)
    lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed else (0, (1 << t.bits) - 1)
    if t.bits == 1:
        lo, hi = 0, 1
    if not lo <= v <= hi:
        raise InterpreterError(f"argument '{name}' = {v} does not fit {t}")
    return N.int_constant(v, t)


def _descriptor_memory(a: Any, t: T.TensorDescType, name: str, staging: Staging) -> HostMemory:
    for f in _DESCRIPTOR_FIELDS:
        if not hasattr(a, f):
            raise InterpreterError(f"argument '{name}': a tensor descriptor needs .{f}")
    if a.block_shape is None:
        raise InterpreterError(f"argument '{name}': the descriptor has no block_shape",
                               hint=f"set block_shape={list(t.block_shape)} (the kernel's tile)")
    if tuple(int(x) for x in a.block_shape) != tuple(t.block_shape):
        raise InterpreterError(f"argument '{name}': descriptor block_shape {tuple(a.block_shape)} differs from "
                               f"the kernel's {t.block_shape}")
    if len(a.shape) != t.rank or len(a.strides) != t.rank:
        raise InterpreterError(f"argument '{name}': a rank-{t.rank} descriptor needs {t.rank} sizes and strides")
    mem = host_memory(a.base, name, staging)
    _check_element(mem, t.element, name)
    return mem


def _descriptor(a: Any, t: T.TensorDescType, reg: Region, mem: HostMemory, name: str) -> Descriptor:
    from tlx.runtime.tma import check_tma_rules

    isz = t.element.bytes
    addr = _address(reg, mem)
    start = addr - reg.base
    shape = tuple(int(x) for x in a.shape)
    strides = tuple(int(x) for x in a.strides)
    padding = str(getattr(a, "padding", "zero") or "zero")
    tf32 = bool(getattr(a, "round_f32_to_tf32", False))
    # what cuTensorMapEncodeTiled would refuse on the GPU is refused here too (the address is the
    # interpreter's: its allocation 4 KiB aligned, as device allocations are, plus the view's offset)
    check_tma_rules(ptr=addr, dtype=canonical_dtype(t.element.name), shape=shape, strides=strides,
                    block_shape=tuple(t.block_shape), padding=padding, round_f32_to_tf32=tf32,
                    base_extent=(reg.nbytes - start) // isz, param=name)
    return Descriptor(reg, start // isz, shape, strides, tuple(t.block_shape), t.element, padding,
                      tf32 and t.element.name == "f32")


def bind_arguments(module: Module, args: Sequence[Any], gmem: GlobalMemory) -> Tuple[List[Any], Staging]:
    """The values of `module`'s parameters for `args` (one per `tt.func` argument, in order):
    array memory mapped into `gmem` (largest allocations first, so views find the allocation
    they belong to), pointers as int64 addresses, descriptors as `Descriptor`, scalars checked
    and converted. Returns them with the `Staging` whose `write_back()` the run calls at its end."""
    func = module.func
    params = func.regions[0].block.args
    names = list(func.attrs.get("arg_names") or [p.name or f"arg{i}" for i, p in enumerate(params)])
    if len(args) != len(params):
        raise InterpreterError(f"kernel @{func.attrs.get('sym_name')} takes {len(params)} arguments "
                               f"({', '.join(names)}), got {len(args)}")
    staging = Staging()
    out: List[Any] = [None] * len(params)
    pending: List[_Pending] = []
    for i, (p, a, name) in enumerate(zip(params, args, names)):
        t = p.type
        if isinstance(t, T.PointerType):
            mem = host_memory(a, name, staging)
            _check_element(mem, t.pointee, name)
            pending.append(_Pending(i, name, mem, t, None))
        elif isinstance(t, T.TensorDescType):
            pending.append(_Pending(i, name, _descriptor_memory(a, t, name, staging), t, a))
        elif isinstance(t, T.ScalarType):
            out[i] = _scalar(a, t, name)
        else:
            raise InterpreterError(f"argument '{name}': parameters of type {t} are not supported")
    regions = {}
    for pd in sorted(pending, key=lambda pd: (pd.mem.addr, -pd.mem.data.size)):
        regions[pd.index] = gmem.map_host(pd.name, pd.mem.data, pd.mem.addr, pd.mem.writable)
    for pd in pending:
        reg = regions[pd.index]
        if isinstance(pd.type, T.TensorDescType):
            out[pd.index] = _descriptor(pd.desc, pd.type, reg, pd.mem, pd.name)
        else:
            out[pd.index] = np.int64(_address(reg, pd.mem))
    return out, staging

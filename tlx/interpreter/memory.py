"""Memory for the interpreter: a global address space over the host memory of the kernel's
arguments, shared-memory allocations with numpy views, and TMA descriptors.

Global memory: every host allocation an argument lives in (a numpy array's base, a torch
tensor's storage; see `arguments.py`) is a *region* at a made-up base address (bases are 4 KiB
aligned and separated by a gap, so running off the end of one allocation never lands in
another). Pointers are int64 byte addresses; a load or store finds the region, checks bounds,
alignment and writability, and gathers/scatters through a typed view of the region's bytes,
which are the host memory itself: stores land in the user's arrays. Arguments that are views
of one allocation share its region, so aliasing behaves as on the GPU.

Shared memory: each `tlx.local_alloc` / `tlx.alloc_barriers` op owns one allocation per program
(executing the op again — in a loop — reuses its bytes, as the static shared-memory carve-out
does). A memdesc value is a `SmemView`: a numpy array over the allocation's bytes (views of
views are numpy views: index, subslice, transpose, reinterpret).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tlx.compiler.errors import TLXError
from tlx.compiler.ir import types as T
from tlx.compiler.ir.core import Location, Operation

from . import numerics as N


class InterpreterError(TLXError):
    """The kernel did something the GPU would fault on or that has no defined result (an
    out-of-bounds access, a misaligned pointer, a wrong argument); names the op's file:line."""

    def __init__(self, message: str, loc: Optional[Location] = None, hint: Optional[str] = None):
        self.message, self.loc, self.hint = message, loc, hint
        where = f"{loc.full}: " if loc is not None and loc.line > 0 else ""
        super().__init__(where + message + (f"\nhint: {hint}" if hint else ""))


# ---------------------------------------------------------------------------------------------
# global memory
# ---------------------------------------------------------------------------------------------

@dataclass
class Region:
    """One host allocation in the global address space."""

    name: str  # the first argument that lives in it
    base: int
    data: np.ndarray  # uint8, the allocation's bytes (the host memory itself, not a copy)
    host_addr: int = 0  # host address of data[0]
    writable: bool = True
    views: Dict[np.dtype, np.ndarray] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return int(self.data.size)

    @property
    def end(self) -> int:
        return self.base + self.nbytes

    def typed(self, dt: np.dtype) -> np.ndarray:
        """The region's bytes as elements of `dt` (the trailing partial element is dropped)."""
        v = self.views.get(dt)
        if v is None:
            n = self.nbytes // dt.itemsize
            v = self.data[: n * dt.itemsize].view(dt)
            self.views[dt] = v
        return v

    def check_writable(self, what: str, loc: Optional[Location]) -> None:
        """Raise for a write into memory the host marked read-only."""
        if not self.writable:
            raise InterpreterError(f"{what} into argument '{self.name}', whose memory is read-only", loc,
                                   hint="pass a writeable array (numpy: a copy, or one whose flags.writeable is "
                                        "set) for the kernel to write")


class GlobalMemory:
    """The global address space of one interpreter run."""

    GAP = 1 << 16

    def __init__(self) -> None:
        self.regions: List[Region] = []
        self._bases: List[int] = []
        self._next = 1 << 20

    def map_host(self, name: str, data: np.ndarray, host_addr: int, writable: bool = True) -> Region:
        """The region for `data` (uint8 over host memory at `host_addr`): the region of an
        allocation already mapped that contains these bytes — views of one allocation share it,
        and it turns read-only if any of them is —, else a new region. Map larger allocations
        first (`arguments.bind_arguments` does) so that a later view finds its container."""
        end = host_addr + int(data.size)
        for reg in self.regions:
            if data.size and reg.host_addr <= host_addr and end <= reg.host_addr + reg.nbytes:
                reg.writable = reg.writable and writable
                return reg
        reg = Region(name, self._next, data, host_addr, writable)
        self._next += ((reg.nbytes + 4095) // 4096) * 4096 + self.GAP
        self.regions.append(reg)
        self._bases.append(reg.base)
        return reg

    def _below(self, addr: int) -> Optional[Region]:
        """The region with the highest base at or below `addr` (None: below every region)."""
        i = bisect.bisect_right(self._bases, addr) - 1
        return self.regions[i] if i >= 0 else None

    def region_at(self, addr: int) -> Optional[Region]:
        r = self._below(addr)
        return r if r is not None and addr < r.end else None

    def _describe(self, addr: int) -> str:
        r = self._below(addr)
        if r is not None:
            return f"byte {addr - r.base} of argument '{r.name}' ({r.nbytes} bytes)"
        return f"address {addr:#x}, below every argument"

    def locate(self, addrs: np.ndarray, mask: Optional[np.ndarray], dt: np.dtype, loc: Location,
               what: str) -> List[Tuple[Region, np.ndarray, np.ndarray]]:
        """Split the active lanes of a pointer tensor by region: a list of (region, lane mask,
        element index) — the index is valid where the lane mask is set. Raises
        `InterpreterError` for an out-of-bounds or misaligned active lane."""
        a = np.asarray(addrs, dtype=np.int64)
        act = np.ones(a.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), a.shape)
        if not act.any():
            return []
        live = a[act]
        lo, hi = int(live.min()), int(live.max())
        isz = dt.itemsize
        reg = self.region_at(lo)
        writes = what in ("store", "atomic")
        if reg is not None and hi + isz <= reg.end:
            if writes:
                reg.check_writable(what, loc)
            off = a - reg.base
            if np.any(off[act] % isz):
                bad = int(live[(live - reg.base) % isz != 0][0])
                raise InterpreterError(f"misaligned {what}: {self._describe(bad)} is not a multiple of {isz} bytes", loc)
            return [(reg, act, np.where(act, off // isz, 0))]
        out = []
        covered = np.zeros(a.shape, bool)
        for r in self.regions:
            inr = act & (a >= r.base) & (a < r.end)
            if inr.any():
                if np.any(a[inr] + isz > r.end) or np.any((a[inr] - r.base) % isz):
                    bad = int(a[inr][(a[inr] + isz > r.end) | ((a[inr] - r.base) % isz != 0)][0])
                    raise InterpreterError(f"out-of-bounds or misaligned {what} at {self._describe(bad)}", loc)
                if writes:
                    r.check_writable(what, loc)
                out.append((r, inr, np.where(inr, (a - r.base) // isz, 0)))
                covered |= inr
        if not np.array_equal(covered, act):
            bad = int(a[act & ~covered][0])
            raise InterpreterError(f"out-of-bounds {what} at {self._describe(bad)}", loc,
                                   hint="mask the lanes that fall outside the array")
        return out

    def load(self, addrs, mask, et: T.Type, other, loc: Location) -> np.ndarray:
        """A masked gather of element type `et`; masked-off lanes take `other` (or 0)."""
        sd = N.storage_dtype(et)
        shape = np.shape(addrs)
        raw = np.zeros(shape, dtype=sd)
        for reg, m, idx in self.locate(addrs, mask, sd, loc, "load"):
            raw = np.where(m, reg.typed(sd)[idx], raw)
        val = N.decode(raw, et)
        if mask is not None and other is not None:
            val = np.where(mask, val, other)
        return val.astype(N.compute_dtype(et), copy=False)

    def store(self, addrs, values, mask, et: T.Type, loc: Location) -> None:
        """A masked scatter; with several lanes on one address the last lane wins."""
        sd = N.storage_dtype(et)
        raw = np.broadcast_to(N.encode(values, et), np.shape(addrs))
        for reg, m, idx in self.locate(addrs, mask, sd, loc, "store"):
            reg.typed(sd)[idx[m]] = raw[m]


# ---------------------------------------------------------------------------------------------
# shared memory
# ---------------------------------------------------------------------------------------------

class SmemAlloc:
    """One shared-memory allocation of a program, with the shadow state the hazard checker keeps
    per byte (see `hazards.py`)."""

    def __init__(self, op: Operation, mtype: T.MemDescType, name: str):
        self.op = op
        self.type = mtype
        self.name = name
        self.nbytes = mtype.nbytes
        # poison: uninitialized shared memory reads back as NaN / -1
        self.data = np.full(max(self.nbytes, 1), 0xFF, dtype=np.uint8)
        self.base_ptr = self.data.ctypes.data
        self.shadows: Dict[str, np.ndarray] = {}  # created on first use by the checker
        self.root = SmemView(self, np.ndarray(mtype.shape, dtype=N.storage_dtype(mtype.element), buffer=self.data),
                             mtype)  # the value of the allocating op

    def shadow(self, key: str) -> np.ndarray:
        s = self.shadows.get(key)
        if s is None:
            s = np.zeros(self.data.size, dtype=np.int32)
            self.shadows[key] = s
        return s


class SmemView:
    """A memdesc value: `arr` is a numpy view (storage dtype) into `alloc.data`."""

    __slots__ = ("alloc", "arr", "type", "_bytes")

    def __init__(self, alloc: SmemAlloc, arr: np.ndarray, mtype: T.MemDescType):
        self.alloc, self.arr, self.type = alloc, arr, mtype
        self._bytes: Optional[Tuple[int, Tuple[int, ...], Tuple[int, ...]]] = None

    @property
    def element(self) -> T.ScalarType:
        return self.type.element

    def byte_layout(self) -> Tuple[int, Tuple[int, ...], Tuple[int, ...]]:
        """(byte offset in the allocation, shape, byte strides) of the view."""
        if self._bytes is None:
            off = self.arr.__array_interface__["data"][0] - self.alloc.base_ptr
            self._bytes = (off, self.arr.shape, self.arr.strides)
        return self._bytes

    def shadow_view(self, key: str) -> np.ndarray:
        """The shadow array `key` of the allocation, restricted to exactly the bytes this view
        covers (shape: the view's shape plus one axis over the bytes of an element)."""
        sh = self.alloc.shadow(key)
        off, shape, strides = self.byte_layout()
        isz = self.arr.dtype.itemsize
        return np.lib.stride_tricks.as_strided(sh[off:], shape=tuple(shape) + (isz,),
                                               strides=tuple(s * 4 for s in strides) + (4,))

    def byte_range(self) -> Tuple[int, int]:
        off, shape, strides = self.byte_layout()
        if not shape or 0 in shape:
            return off, off + self.arr.dtype.itemsize
        lo = off + sum(min(0, (d - 1) * s) for d, s in zip(shape, strides))
        hi = off + sum(max(0, (d - 1) * s) for d, s in zip(shape, strides)) + self.arr.dtype.itemsize
        return lo, hi

    def read(self) -> np.ndarray:
        """The view's values (compute dtype, a copy)."""
        return np.array(N.decode(self.arr, self.element), dtype=N.compute_dtype(self.element))

    def write(self, values) -> None:
        self.arr[...] = N.encode(values, self.element)


class SlabArrayView(SmemView):
    """An array of aliased buffers that are not evenly spaced (`tlx.local_alias` with group
    sizes): `slabs[i]` is buffer i. No numpy array spans them, so only indexing reaches them: an
    op on the whole array is an `InterpreterError` (the code generator refuses it too)."""

    __slots__ = ("slabs",)

    def __init__(self, alloc: SmemAlloc, slabs: List[np.ndarray], mtype: T.MemDescType):
        self.alloc, self.type, self._bytes = alloc, mtype, None
        self.slabs = slabs

    @property
    def arr(self) -> np.ndarray:  # type: ignore[override]
        raise InterpreterError(f"an array of unevenly placed aliased buffers ({self.type}) can only be indexed",
                               hint="index the array (buf[i]) first")


# ---------------------------------------------------------------------------------------------
# TMA descriptors
# ---------------------------------------------------------------------------------------------

@dataclass
class Descriptor:
    """A TMA tensor descriptor: a global tensor (base address, shape, strides in elements) cut
    into tiles of `block_shape`; coordinates outside the shape read as `padding` (0 or NaN) and
    are not written by stores."""

    region: Region
    base_index: int  # element index of the tensor's origin in the region's typed view
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    block_shape: Tuple[int, ...]
    element: T.ScalarType
    padding: str = "zero"
    round_tf32: bool = False  # CU_TENSOR_MAP_DATA_TYPE_TFLOAT32: f32 tiles round to tf32 on load

    def _coords(self, offsets: Sequence[int]):
        idx, inb = [], None
        rank = len(self.shape)
        for d, (o, b, s) in enumerate(zip(offsets, self.block_shape, self.shape)):
            r = np.arange(int(o), int(o) + b, dtype=np.int64)
            shp = [1] * rank
            shp[d] = b
            r = r.reshape(shp)
            ok = (r >= 0) & (r < s)
            inb = ok if inb is None else inb & ok
            idx.append(np.clip(r, 0, max(s - 1, 0)))
        lin = self.base_index + sum(i * st for i, st in zip(idx, self.strides))
        return np.broadcast_to(lin, self.block_shape), np.broadcast_to(inb, self.block_shape)

    def load_tile(self, offsets: Sequence[int]) -> np.ndarray:
        """The tile at `offsets` (outermost first) as register values, padded out of bounds."""
        sd = N.storage_dtype(self.element)
        lin, inb = self._coords(offsets)
        vals = N.decode(self.region.typed(sd)[lin], self.element).astype(N.compute_dtype(self.element))
        fill = np.nan if self.padding == "nan" and self.element.is_float else 0
        if self.round_tf32:
            vals = N.round_float(vals, N.FORMATS["tf32"]).astype(np.float32)
        return np.where(inb, vals, np.array(fill).astype(vals.dtype))

    def store_tile(self, offsets: Sequence[int], values: np.ndarray, loc: Optional[Location] = None) -> None:
        """Write the in-bounds part of a tile."""
        self.region.check_writable("TMA store", loc)
        sd = N.storage_dtype(self.element)
        lin, inb = self._coords(offsets)
        self.region.typed(sd)[lin[inb]] = N.encode(values, self.element)[inb]

    def check_extent(self, loc: Optional[Location], name: str) -> None:
        n = self.region.nbytes // N.storage_dtype(self.element).itemsize
        hi = self.base_index + sum((s - 1) * st for s, st in zip(self.shape, self.strides) if s > 0)
        lo = self.base_index + sum((s - 1) * st for s, st in zip(self.shape, self.strides) if st < 0)
        if lo < 0 or hi >= n:
            raise InterpreterError(f"descriptor '{name}': shape {self.shape} with strides {self.strides} reaches "
                                   f"element {hi}, past the end of its array ({n} elements)", loc)

"""Host TMA descriptors: `TensorDescriptor` (as ``triton.tools.tensor_descriptor``), the rules a
CUtensorMap must obey, and the encoder that turns a descriptor into the 128 bytes a kernel takes.

* ``TensorDescriptor(base, shape, strides, block_shape=None, padding="zero",
  round_f32_to_tf32=False)`` — shape and strides in elements, outermost first; ``block_shape``
  may be set later (TLX tutorials set it in autotune pre-hooks). ``from_tensor(t, block_shape)``
  reads shape and strides from the array. The frontend re-exports it as ``tlx.TensorDescriptor``.
* ``check_tma_rules(...)`` — every rule of ``cuTensorMapEncodeTiled`` (numba-runtime.md §4a)
  checked in Python *before* the driver sees it; a broken rule raises `TMARuleError` whose
  ``rule`` names it (``base-align``, ``stride-align``, ``box-inner-bytes``, ...).
* ``tiled_encoding(...)`` — the exact arguments for ``cuTensorMapEncodeTiled`` (dims innermost
  first, byte strides, box, swizzle, L2 promotion, OOB fill): pure Python, tested without a GPU.
* ``DescriptorEncoder(encoding)`` — one per kernel descriptor parameter: encodes at launch with
  the kernel's `TMAEncoding` (box and swizzle from its shared layout) and keeps the CUtensorMaps
  it made; when only the address differs from a cached one it calls
  ``cuTensorMapReplaceAddress`` instead of encoding again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

from tlx.compiler.abi import TMA_DATA_TYPE, TMA_SWIZZLE, TMA_TFLOAT32, TMAEncoding

from .dtypes import ELEMENT_BYTES, FLOAT_DTYPES, canonical_dtype, require_dtype
from .errors import TLXRuntimeError

MAX_RANK = 5
MAX_BOX = 256
L2_PROMOTION_128B = 2  # CUtensorMapL2promotion, what Triton uses
OOB_FILL_NONE, OOB_FILL_NAN = 0, 1  # CUtensorMapFloatOOBfill (NaN = NAN_REQUEST_ZERO_FMA)
INTERLEAVE_NONE = 0


class TMARuleError(TLXRuntimeError):
    """A TensorDescriptor that breaks one rule of cuTensorMapEncodeTiled; ``rule`` names it."""

    def __init__(self, rule: str, message: str, param: Optional[str] = None,
                 kernel: Optional[str] = None, hint: Optional[str] = None):
        self.rule = rule
        where = f"TensorDescriptor for parameter '{param}'" if param else "TensorDescriptor"
        super().__init__(f"{where} breaks TMA rule '{rule}': {message}", kernel=kernel, hint=hint)


def _ints(values: Any, what: str) -> Optional[Tuple[int, ...]]:
    if values is None:
        return None
    try:
        return tuple(int(v) for v in values)
    except (TypeError, ValueError) as exc:
        raise TMARuleError("rank", f"{what} must be a sequence of integers, got {values!r}") from exc


class TensorDescriptor:
    """A host-side TMA descriptor over a device array, passed to a kernel parameter typed as a
    tensor descriptor (``tensordesc<fp16[64, 64]>``). Fields are mutable like Triton's
    dataclass; they are validated again at every encode."""

    def __init__(self, base: Any, shape: Sequence[int], strides: Sequence[int],
                 block_shape: Optional[Sequence[int]] = None, padding: str = "zero",
                 round_f32_to_tf32: bool = False):
        self.base = base
        self.shape = list(shape)
        self.strides = list(strides)
        self.block_shape = None if block_shape is None else list(block_shape)
        self.padding = padding
        self.round_f32_to_tf32 = round_f32_to_tf32
        self._check_construction()

    @staticmethod
    def from_tensor(tensor: Any, block_shape: Optional[Sequence[int]] = None, padding: str = "zero",
                    round_f32_to_tf32: bool = False) -> "TensorDescriptor":
        """A descriptor covering the whole array, its shape and strides (in elements) read from
        it: a device array, or a host numpy array or CPU torch tensor (for the interpreter, as
        the constructor takes)."""
        import numpy as np

        if isinstance(tensor, np.ndarray):
            item = tensor.dtype.itemsize
            if any(st % item for st in tensor.strides):
                raise TLXRuntimeError(f"numpy array strides {tensor.strides} are not whole elements "
                                      f"of {item} bytes", hint="pass np.ascontiguousarray(x)")
            return TensorDescriptor(tensor, list(tensor.shape), [st // item for st in tensor.strides],
                                    block_shape, padding, round_f32_to_tf32)
        if _host_tensor(tensor):
            return TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()), block_shape, padding,
                                    round_f32_to_tf32)
        from .arrays import describe

        info = describe(tensor)
        return TensorDescriptor(tensor, info.shape, info.strides, block_shape, padding,
                                round_f32_to_tf32)

    def _check_construction(self) -> None:
        """The rules Triton asserts at construction (those not about the block shape)."""
        ptr, dtype = _described_pointer(self.base)
        check_tma_rules(ptr=ptr, dtype=dtype, shape=self.shape, strides=self.strides,
                        block_shape=self.block_shape, padding=self.padding,
                        round_f32_to_tf32=self.round_f32_to_tf32)

    @property
    def dtype(self) -> str:
        """The Triton spelling of the base array's element type."""
        return _described_pointer(self.base)[1]

    def signature(self) -> str:
        """The specialization type, as Triton spells it: ``tensordesc<fp16[64, 64]>``."""
        if self.block_shape is None:
            raise TLXRuntimeError("TensorDescriptor.block_shape is not set",
                                  hint="pass block_shape= or set desc.block_shape before the launch "
                                       "(e.g. in a pre_hook)")
        return f"tensordesc<{self.dtype}{[int(b) for b in self.block_shape]}>"

    def __repr__(self) -> str:
        return (f"TensorDescriptor(shape={self.shape}, strides={self.strides}, "
                f"block_shape={self.block_shape}, padding={self.padding!r})")


def _host_tensor(base: Any) -> bool:
    """A torch tensor in host memory, not pinned (a pinned one is a device array: UVA)."""
    from .arrays import kind_of

    if kind_of(base) != "torch" or not getattr(base, "is_cpu", False):
        return False
    try:
        return not base.is_pinned()
    except Exception:  # noqa: BLE001 - a torch build without CUDA may refuse the question
        return True


def _described_pointer(base: Any) -> Tuple[int, str]:
    """Address and dtype of a base for checks and signatures: a device array, or a host numpy
    array or CPU torch tensor (a descriptor for the CPU interpreter, `tlx.interpret` and
    ``TLX_INTERPRET=1``; a GPU launch refuses it when it encodes the descriptor, like any host
    array)."""
    import numpy as np

    if isinstance(base, np.ndarray):
        return base.ctypes.data, require_dtype(base.dtype, "numpy")
    if _host_tensor(base):
        return base.data_ptr(), require_dtype(base.dtype, "torch")
    return base_pointer(base, -1)


def base_pointer(base: Any, stream: int) -> Tuple[int, str]:
    """Address and dtype of a descriptor's base array (a device array; `host_copy` is not
    supported under a descriptor)."""
    from .arrays import StagingNeeded, pointer_and_dtype

    try:
        return pointer_and_dtype(base, stream)
    except StagingNeeded:
        raise TLXRuntimeError("a TensorDescriptor's base must be a device array, not host_copy(...)",
                              hint="copy the array to the device first (torch.as_tensor(x, "
                                   "device='cuda'))") from None


def parse_tensordesc_type(text: str) -> Tuple[str, Tuple[int, ...]]:
    """``'tensordesc<fp16[64, 64]>'`` -> ``('fp16', (64, 64))``."""
    if not (text.startswith("tensordesc<") and text.endswith("]>") and "[" in text):
        raise ValueError(f"not a tensordesc type: {text!r}")
    inner = text[len("tensordesc<"):-1]
    dtype, dims = inner.split("[", 1)
    return dtype, tuple(int(d) for d in dims.rstrip("]").split(",") if d.strip())


def check_tma_rules(*, ptr: int, dtype: str, shape: Sequence[int], strides: Sequence[int],
                    block_shape: Optional[Sequence[int]], padding: str = "zero",
                    round_f32_to_tf32: bool = False, encoding: Optional[TMAEncoding] = None,
                    base_extent: Optional[int] = None, param: Optional[str] = None,
                    kernel: Optional[str] = None) -> None:
    """Check a descriptor against the rules of cuTensorMapEncodeTiled before encoding.

    Always: rank 1..5 and equal lengths (``rank``); every dim 1..2**32 (``dim-range``); last
    stride 1 (``inner-stride``); other strides positive, their bytes a multiple of 16 (``stride-
    align``) and < 2**40 (``stride-range``); base address 16-byte aligned (``base-align``);
    padding "zero" or "nan", nan only for floats (``padding``); tf32 rounding only for fp32
    (``tf32``). With the kernel's ``encoding``: element type equal (``dtype``), block shape equal
    (``block-shape``), box dims 1..256 (``box-range``), inner box bytes a multiple of 16
    (``box-inner-bytes``), a known swizzle (``swizzle``) whose span holds the inner box row
    (``swizzle-span``). With ``base_extent`` (elements the base array spans): the descriptor
    stays inside it (``extent``).
    """
    def fail(rule: str, message: str, hint: Optional[str] = None) -> None:
        raise TMARuleError(rule, message, param=param, kernel=kernel, hint=hint)

    shape_t = _ints(shape, "shape")
    strides_t = _ints(strides, "strides")
    block_t = _ints(block_shape, "block_shape")
    rank = len(shape_t)
    if not 1 <= rank <= MAX_RANK:
        fail("rank", f"rank {rank}; TMA supports 1 to {MAX_RANK} dimensions")
    if len(strides_t) != rank:
        fail("rank", f"shape has {rank} dimensions but strides has {len(strides_t)}")
    if block_t is not None and len(block_t) != rank:
        fail("rank", f"shape has {rank} dimensions but block_shape has {len(block_t)}")
    if dtype not in ELEMENT_BYTES:
        fail("dtype", f"element type {dtype} cannot be moved by TMA")
    elem = ELEMENT_BYTES[dtype]
    for i, d in enumerate(shape_t):
        if not 1 <= d <= 2 ** 32:
            fail("dim-range", f"shape[{i}] = {d}; each dimension must be between 1 and 2**32")
    if strides_t[-1] != 1:
        fail("inner-stride", f"the last stride is {strides_t[-1]}; the innermost dimension must "
                             "be contiguous (stride 1)", hint="transpose through the kernel's "
                             "block shape, or make the array contiguous")
    for i, s in enumerate(strides_t[:-1]):
        if s <= 0:
            fail("stride-align", f"strides[{i}] = {s}; strides must be positive")
        if (s * elem) % 16:
            fail("stride-align", f"strides[{i}] = {s} elements = {s * elem} bytes, not a multiple "
                                 "of 16 bytes", hint="pad the rows so each row pitch is a "
                                 "multiple of 16 bytes")
        if s * elem >= 2 ** 40:
            fail("stride-range", f"strides[{i}] = {s * elem} bytes; TMA strides must be < 2**40 bytes")
    if ptr % 16:
        fail("base-align", f"the base address 0x{ptr:x} is not 16-byte aligned",
             hint="TMA needs a 16-byte aligned base: do not slice into the start of the array")
    if padding not in ("zero", "nan"):
        fail("padding", f"padding={padding!r}; use 'zero' or 'nan'")
    if padding == "nan" and dtype not in FLOAT_DTYPES:
        fail("padding", f"padding='nan' needs a floating-point tensor, not {dtype}")
    if round_f32_to_tf32 and dtype != "fp32":
        fail("tf32", f"round_f32_to_tf32 needs an fp32 tensor, not {dtype}")
    if block_t is not None:
        for i, b in enumerate(block_t):
            if b <= 0:
                fail("block-shape", f"block_shape[{i}] = {b}; block dimensions must be positive")
    if base_extent is not None:
        reach = sum((d - 1) * s for d, s in zip(shape_t, strides_t)) + 1
        if reach > base_extent:
            fail("extent", f"the descriptor reaches element {reach - 1} of its base, which has "
                           f"only {base_extent} elements", hint="check shape and strides against "
                           "the array")
    if encoding is None:
        return
    want = canonical_dtype(encoding.dtype)
    if dtype != want:
        fail("dtype", f"the kernel was compiled for {want} elements but the base array holds {dtype}")
    if block_t is None:
        fail("block-shape", "block_shape is not set", hint="set desc.block_shape before the launch")
    if tuple(encoding.block_shape) != block_t:
        fail("block-shape", f"block_shape {list(block_t)} differs from the block shape "
                            f"{list(encoding.block_shape)} the kernel was compiled for")
    box = tuple(int(b) for b in encoding.box)
    if len(box) != rank:
        fail("box-range", f"the kernel's box {list(box)} has rank {len(box)}, the descriptor {rank}")
    for i, b in enumerate(box):
        if not 1 <= b <= MAX_BOX:
            fail("box-range", f"box[{i}] = {b}; each box dimension must be between 1 and {MAX_BOX}")
    inner_bytes = box[-1] * elem
    if inner_bytes % 16:
        fail("box-inner-bytes", f"the inner box dimension is {box[-1]} elements = {inner_bytes} "
                                "bytes, not a multiple of 16 bytes")
    if encoding.swizzle not in TMA_SWIZZLE:
        fail("swizzle", f"swizzle {encoding.swizzle}; use 0, 32, 64 or 128 bytes")
    if encoding.swizzle and inner_bytes > encoding.swizzle:
        fail("swizzle-span", f"the inner box row is {inner_bytes} bytes, wider than the "
                             f"{encoding.swizzle}-byte swizzle span")


class TiledEncoding(NamedTuple):
    """The arguments of cuTensorMapEncodeTiled (all but the global address), innermost first."""

    data_type: int
    rank: int
    global_dims: Tuple[int, ...]
    global_strides: Tuple[int, ...]  # bytes, rank-1 entries (dims 1..rank-1)
    box: Tuple[int, ...]
    element_strides: Tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


def tiled_encoding(dtype: str, shape: Sequence[int], strides: Sequence[int],
                   encoding: TMAEncoding, padding: str = "zero",
                   round_f32_to_tf32: bool = False) -> TiledEncoding:
    """What cuTensorMapEncodeTiled gets for a (checked) descriptor and the kernel's encoding:
    the numpy-order shape and strides reversed, strides in bytes without the innermost, the
    kernel's box reversed, element strides 1, no interleave, the kernel's swizzle, L2 128B
    promotion, and NaN fill for ``padding="nan"``."""
    elem = ELEMENT_BYTES[dtype]
    data_type = TMA_TFLOAT32 if round_f32_to_tf32 else TMA_DATA_TYPE[dtype]
    rank = len(shape)
    return TiledEncoding(
        data_type=data_type, rank=rank,
        global_dims=tuple(int(d) for d in reversed(shape)),
        global_strides=tuple(int(s) * elem for s in reversed(list(strides)[:-1])),
        box=tuple(int(b) for b in reversed(encoding.box)),
        element_strides=(1,) * rank,
        interleave=INTERLEAVE_NONE,
        swizzle=TMA_SWIZZLE[encoding.swizzle],
        l2_promotion=L2_PROMOTION_128B,
        oob_fill=OOB_FILL_NAN if padding == "nan" else OOB_FILL_NONE)


def encode_tiled(enc: TiledEncoding, ptr: int, kernel: Optional[str] = None) -> Any:
    """Run cuTensorMapEncodeTiled; returns the cuda.bindings ``CUtensorMap``."""
    from . import driver

    drv = driver.bindings()
    u32, u64 = drv.cuuint32_t, drv.cuuint64_t  # cuda-bindings 13.3 refuses plain ints here
    return driver.call(
        "cuTensorMapEncodeTiled",
        drv.CUtensorMapDataType(enc.data_type), u32(enc.rank), ptr,
        [u64(d) for d in enc.global_dims], [u64(s) for s in enc.global_strides],
        [u32(b) for b in enc.box], [u32(e) for e in enc.element_strides],
        drv.CUtensorMapInterleave(enc.interleave), drv.CUtensorMapSwizzle(enc.swizzle),
        drv.CUtensorMapL2promotion(enc.l2_promotion), drv.CUtensorMapFloatOOBfill(enc.oob_fill),
        kernel=kernel)


def _base_extent(shape: Tuple[int, ...], strides: Tuple[int, ...]) -> int:
    """Elements spanned by an array (0 when empty)."""
    if any(d == 0 for d in shape):
        return 0
    return sum((d - 1) * abs(s) for d, s in zip(shape, strides)) + 1


class DescriptorEncoder:
    """Encodes TensorDescriptors for one kernel parameter, caching the CUtensorMaps.

    The cache key is everything but the base address (dtype, shape, strides, block shape,
    padding, tf32 rounding); on a hit with another address the cached map is retargeted with
    ``cuTensorMapReplaceAddress``. Entries are evicted least-recently-used beyond ``capacity``.
    """

    def __init__(self, encoding: TMAEncoding, param: str, kernel: Optional[str] = None,
                 capacity: int = 64):
        self.encoding = encoding
        self.param = param
        self.kernel = kernel
        self.capacity = capacity
        self._maps: "OrderedDict[tuple, List[Any]]" = OrderedDict()  # key -> [CUtensorMap, ptr]
        self.encodes = 0  # counters, for tests and `tlx` diagnostics
        self.replacements = 0

    def tensor_map(self, desc: Any, stream: int = -1) -> Any:
        """The CUtensorMap for `desc` (a TensorDescriptor), from the cache when possible."""
        if not isinstance(desc, TensorDescriptor):
            raise TLXRuntimeError(f"parameter '{self.param}' is a tensor descriptor; got "
                                  f"{type(desc).__name__}", kernel=self.kernel,
                                  hint="pass tlx.TensorDescriptor(tensor, shape, strides, block_shape)")
        ptr, dtype = base_pointer(desc.base, stream)
        block = desc.block_shape
        key = (dtype, tuple(desc.shape), tuple(desc.strides),
               None if block is None else tuple(block), desc.padding, desc.round_f32_to_tf32)
        entry = self._maps.get(key)
        if entry is not None:
            self._maps.move_to_end(key)
            if entry[1] != ptr:
                # Another base array: every rule again (alignment, and the extent of the new
                # base), then only the address changes.
                self._check(desc, ptr, dtype, stream)
                self._replace_address(entry[0], ptr)
                entry[1] = ptr
                self.replacements += 1
            return entry[0]
        self._check(desc, ptr, dtype, stream)
        enc = tiled_encoding(dtype, desc.shape, desc.strides, self.encoding, desc.padding, desc.round_f32_to_tf32)
        tmap = encode_tiled(enc, ptr, kernel=self.kernel)
        self._maps[key] = [tmap, ptr]
        if len(self._maps) > self.capacity:
            self._maps.popitem(last=False)
        self.encodes += 1
        return tmap

    def _check(self, desc: TensorDescriptor, ptr: int, dtype: str, stream: int) -> None:
        from .arrays import describe

        info = describe(desc.base, stream)
        check_tma_rules(ptr=ptr, dtype=dtype, shape=desc.shape, strides=desc.strides,
                        block_shape=desc.block_shape, padding=desc.padding,
                        round_f32_to_tf32=desc.round_f32_to_tf32, encoding=self.encoding,
                        base_extent=_base_extent(info.shape, info.strides), param=self.param,
                        kernel=self.kernel)

    def _replace_address(self, tmap: Any, ptr: int) -> None:
        from . import driver

        driver.call("cuTensorMapReplaceAddress", tmap, ptr, kernel=self.kernel)

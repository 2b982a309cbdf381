"""The host side of the Hopper GEMM examples (the kernels are in `tlx.examples.gemm_kernels`):
configs chosen for the H200, shape checks, the output array, TMA descriptors, the grid, and the
switch between the GPU and the CPU interpreter.

A host wrapper (`matmul_pipelined`, `matmul_ws`, `matmul_persistent`, `matmul_pingpong`,
`matmul_streamk`, and `matmul_persistent_cluster` on 2-CTA clusters) takes two row-major
matrices ``a`` (M x K) and ``b`` (K x N) of bf16 or fp16 and returns ``c = a @ b`` (M x N, same
dtype, fp32 accumulation):

* device arrays (torch, CuPy, numba — anything the runtime accepts) run on the GPU through
  ``kernel[grid](...)``;
* numpy arrays run on the CPU interpreter (``tlx.interpret``), which also checks every
  shared-memory access for proxy and synchronization hazards. numpy has no bf16: pass bf16
  matrices as their ``uint16`` bit patterns (an ``ml_dtypes.bfloat16`` array works too); the
  result comes back in the same representation.

Each wrapper builds a `GemmLaunch` first (``plan_*``); tests and benchmarks use it directly
(`GemmLaunch.run`, `GemmLaunch.interpret`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import tlx

class GemmArgumentError(tlx.TLXError):
    """Operands or a config the GEMM examples cannot take; says what to change."""

    def __init__(self, message: str, hint: Optional[str] = None):
        self.message, self.hint = message, hint
        super().__init__(message + (f"\nhint: {hint}" if hint else ""))


#: SMs of an H200 / H100 SXM (used when no GPU can be asked, e.g. on the interpreter)
DEFAULT_NUM_SMS = 132
#: the dynamic shared memory one CTA may use on sm_90 (227 KiB)
SM90_SMEM_BYTES = 232448


def grouped_tile_host(tile_id: int, num_pid_m: int, num_pid_n: int, group_size_m: int) -> Tuple[int, int]:
    """The host twin of `gemm_kernels.grouped_tile` (tests compare the two orders)."""
    tiles_per_group = group_size_m * num_pid_n
    first_m = (tile_id // tiles_per_group) * group_size_m
    rows = min(num_pid_m - first_m, group_size_m)
    in_group = tile_id % tiles_per_group
    return first_m + in_group % rows, in_group // rows


# ---- host side ----------------------------------------------------------------------------------

_NUMPY_DTYPES = {"float16": "fp16", "uint16": "bf16", "bfloat16": "bf16"}


def _library(x: Any) -> str:
    """Which array library `x` comes from: 'numpy' (interpreter), 'torch', 'cupy', 'numba' or
    'other' (a device array the runtime understands through its protocols)."""
    if isinstance(x, np.ndarray):
        return "numpy"
    mod = type(x).__module__ or ""
    for lib in ("torch", "cupy", "numba"):
        if mod.startswith(lib):
            return lib
    return "other"


def element_type(x: Any) -> str:
    """'bf16' or 'fp16' for a GEMM operand; anything else is a clear error."""
    if isinstance(x, np.ndarray):
        dt = _NUMPY_DTYPES.get(x.dtype.name)
    else:
        from tlx.runtime.arrays import describe

        dt = describe(x).dtype
    if dt not in ("bf16", "fp16"):
        raise GemmArgumentError(f"the GEMM examples take bf16 or fp16 matrices, got {getattr(x, 'dtype', type(x))}",
                           hint="convert the inputs first (numpy: bf16 as uint16 bit patterns)")
    return dt


def _shape_strides(x: Any) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    if isinstance(x, np.ndarray):
        return tuple(x.shape), tuple(s // x.itemsize for s in x.strides)
    from tlx.runtime.arrays import describe

    info = describe(x)
    return info.shape, info.strides


def _empty_like(x: Any, shape: Tuple[int, int]) -> Any:
    """An uninitialized (M, N) array of x's dtype, from x's library, on x's device."""
    lib = _library(x)
    if lib == "numpy":
        return np.empty(shape, x.dtype)
    if lib == "torch":
        import torch

        return torch.empty(shape, dtype=x.dtype, device=x.device)
    if lib == "cupy":
        import cupy

        return cupy.empty(shape, dtype=x.dtype)
    if lib == "numba":
        from numba import cuda

        return cuda.device_array(shape, dtype=x.dtype)
    raise GemmArgumentError(f"cannot allocate the output like a {type(x).__name__}", hint="pass out=")


def descriptor(x: Any, block_shape: Sequence[int]) -> Any:
    """A `tlx.TensorDescriptor` over all of the 2-D array `x` (a device array, or a numpy array
    for the interpreter) moving `block_shape` tiles."""
    shape, strides = _shape_strides(x)
    return tlx.TensorDescriptor(x, list(shape), list(strides), list(block_shape))


def check_operands(a: Any, b: Any, out: Any = None) -> Tuple[int, int, int, str]:
    """(M, N, K, dtype) of ``a @ b``, after every check TMA needs (clear errors, never a crash)."""
    (sa, ta), (sb, tb) = _shape_strides(a), _shape_strides(b)
    if len(sa) != 2 or len(sb) != 2:
        raise GemmArgumentError(f"matmul needs 2-D matrices, got shapes {sa} and {sb}")
    (M, K), (K2, N) = sa, sb
    if K != K2:
        raise GemmArgumentError(f"matmul inner dimensions differ: ({M}, {K}) @ ({K2}, {N})")
    if min(M, N, K) < 1:
        raise GemmArgumentError(f"matmul needs non-empty matrices, got ({M}, {K}) @ ({K2}, {N})")
    dt = element_type(a)
    if element_type(b) != dt:
        raise GemmArgumentError(f"matmul operands must share a dtype, got {element_type(a)} and {element_type(b)}")
    if _library(a) != _library(b):
        raise GemmArgumentError("matmul operands must both be numpy arrays (interpreter) or both device arrays")
    for name, st in (("a", ta), ("b", tb)):
        if st[1] != 1:
            raise GemmArgumentError(f"matmul needs row-major operands; {name} has strides {st}",
                               hint="make it contiguous first")
        if (st[0] * 2) % 16:
            raise GemmArgumentError(f"TMA needs 16-byte aligned rows; {name}'s row pitch is {st[0] * 2} bytes",
                               hint="K and N must be multiples of 8 for bf16/fp16 (pad the matrices)")
    if out is not None:
        so, to = _shape_strides(out)
        if so != (M, N) or element_type(out) != dt or to[1] != 1:
            raise GemmArgumentError(f"out must be a row-major ({M}, {N}) {dt} matrix, got {so} strides {to}")
    return M, N, K, dt


def num_sms(x: Any) -> int:
    """Multiprocessors of the GPU holding `x` (DEFAULT_NUM_SMS for numpy arrays)."""
    if isinstance(x, np.ndarray):
        return DEFAULT_NUM_SMS
    if _library(x) == "torch":
        import torch

        return int(torch.cuda.get_device_properties(x.device).multi_processor_count)
    from numba import cuda

    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


@dataclass
class GemmLaunch:
    """One prepared launch of a GEMM example: the kernel, its grid, runtime arguments and
    constexprs, the number of warps of its default partition, and the output array."""

    kernel: Any
    grid: Tuple[int, ...]
    args: List[Any]
    constexprs: Dict[str, Any]
    num_warps: int
    out: Any
    dtype: str
    signature: Dict[str, str] = field(default_factory=dict)
    compiled: Any = None  # what the last GPU launch ran (its asm, fences, ...)
    cluster: Tuple[int, int, int] = (1, 1, 1)  # the thread-block cluster (ctas_per_cga) it launches in

    @property
    def cluster_options(self) -> Dict[str, Any]:
        """The launch option of its cluster (none for a cluster of one CTA)."""
        return {"ctas_per_cga": self.cluster} if self.cluster != (1, 1, 1) else {}

    @property
    def on_cpu(self) -> bool:
        return isinstance(self.out, np.ndarray)

    def run(self, stream: Any = None) -> Any:
        """Launch on the GPU (device arrays) or run on the interpreter (numpy arrays, raising
        the first hazard); returns the output array."""
        if self.on_cpu:
            self.interpret(raise_on_hazard=True)
        else:
            self.compiled = self.kernel[self.grid](*self.args, num_warps=self.num_warps, stream=stream,
                                                   **self.cluster_options, **self.constexprs)
        return self.out

    def interpret(self, raise_on_hazard: bool = False, fence_passes: bool = True) -> List[Any]:
        """Run on the CPU interpreter; returns the hazards it found (report mode by default)."""
        return tlx.interpret(self.kernel, self.grid, *self.args, fence_passes=fence_passes,
                             raise_on_hazard=raise_on_hazard, signature=self.signature or None,
                             num_warps=self.num_warps, **self.cluster_options, **self.constexprs)

    def specialization(self) -> Tuple[Dict[str, str], Dict[str, int]]:
        """(signature, divisibility) of this launch's runtime arguments as a launch specializes
        them: descriptors typed by their block, scratch arrays as 16-byte aligned pointers,
        integers as i32, known multiples of 16 where they are."""
        sig: Dict[str, str] = {}
        div: Dict[str, int] = {}
        names = [p.name for p in self.kernel.params if not p.is_constexpr]
        for name, arg in zip(names, self.args):
            if isinstance(arg, tlx.TensorDescriptor):
                sig[name] = f"tensordesc<{self.dtype}[{', '.join(str(int(b)) for b in arg.block_shape)}]>"
            elif hasattr(arg, "dtype"):  # a scratch array (the stream-K workspace and flags)
                sig[name] = {"float32": "*fp32", "int32": "*i32"}[str(arg.dtype).replace("torch.", "")]
                div[name] = 16
            else:
                sig[name] = "i32"
                if arg % 16 == 0:
                    div[name] = 16
        return sig, div

    def compile(self, **options: Any) -> Any:
        """Compile this specialization without a GPU (`tlx.compile`): its IR, fences and PTX,
        specialized as a launch would be (`specialization`)."""
        sig, div = self.specialization()
        return tlx.compile(self.kernel, sig, self.constexprs, num_warps=self.num_warps, divisibility=div,
                           **{**self.cluster_options, **options})


def make_launch(kernel: Any, grid: Tuple[int, ...], descs: Sequence[Any], M: int, N: int, K: int,
                constexprs: Dict[str, Any], num_warps: int, out: Any, dtype: str) -> GemmLaunch:
    """A `GemmLaunch` for a kernel taking ``(a_desc, b_desc, c_desc, M, N, K, **constexprs)``;
    on numpy bf16 data the descriptors are typed bf16 explicitly (their arrays hold uint16)."""
    sig: Dict[str, str] = {}
    if isinstance(out, np.ndarray) and dtype == "bf16":
        names = [p.name for p in kernel.params if not p.is_constexpr][:3]
        sig = {n: f"tensordesc<bf16[{', '.join(str(int(s)) for s in d.block_shape)}]>" for n, d in zip(names, descs)}
    return GemmLaunch(kernel, grid, [*descs, M, N, K], constexprs, num_warps, out, dtype, sig)


def shared_bytes(*buffers: Tuple[Tuple[int, ...], int, int]) -> int:
    """Bytes of shared memory for buffers given as (shape, element bytes, count)."""
    total = 0
    for shape, elem, count in buffers:
        n = elem * count
        for d in shape:
            n *= d
        total += n
    return total


# ---- configs ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GemmConfig:
    """Tile sizes, ring depth, consumer warpgroups and warps of one GEMM example kernel.
    `num_warps` is the default partition's (the whole CTA for the pipelined kernel, the producer
    task for the warp-specialized ones); GROUP_SIZE_M is the tile-order grouping. EPI_SPLIT
    (persistent kernels only: 1, 2 or 4) stores each consumer's C rows in that many column
    chunks through two chunk buffers instead of one whole-tile buffer. EVEN_WAVES (the persistent
    kernel only) launches the fewest CTAs that still finish in the same number of waves, so that
    every CTA takes as many tiles as the busiest (`persistent_programs`)."""

    BM: int = 128
    BN: int = 256
    BK: int = 64
    GROUP_SIZE_M: int = 8
    NUM_STAGES: int = 3
    NUM_MMA_GROUPS: int = 2
    num_warps: int = 4
    EPI_SPLIT: int = 1
    EVEN_WAVES: bool = False

    def smem_bytes(self, elem: int = 2, kind: str = "ws") -> int:
        """Shared memory the kernel allocates: the A/B ring, the C staging tile(s) (one per
        consumer of whole tiles for the ping-pong kernel), the mbarriers."""
        ring = shared_bytes(((self.BM, self.BK), elem, self.NUM_STAGES), ((self.BK, self.BN), elem, self.NUM_STAGES))
        c_tiles = 2 if kind == "pingpong" else 1
        if self.EPI_SPLIT > 1:  # two chunk buffers per consumer
            return ring + shared_bytes(((self.BM, self.BN // self.EPI_SPLIT), elem, 2)) + 16 * self.NUM_STAGES
        return ring + shared_bytes(((self.BM, self.BN), elem, c_tiles)) + 16 * self.NUM_STAGES

    def check(self, kind: str) -> None:
        """Reject configs the kernels cannot run (a clear error before any tracing)."""
        if self.EPI_SPLIT != 1 and kind not in ("persistent", "streamk", "persistent_cluster"):
            raise GemmArgumentError(f"EPI_SPLIT={self.EPI_SPLIT} is an option of the persistent kernels only, "
                                    f"not of {kind}", hint="leave EPI_SPLIT at 1")
        if self.EVEN_WAVES and kind != "persistent":
            raise GemmArgumentError(f"EVEN_WAVES is an option of the persistent kernel only, not of {kind}",
                                    hint="leave EVEN_WAVES at False")
        if self.EPI_SPLIT not in (1, 2, 4) or self.BN % (64 * self.EPI_SPLIT):
            raise GemmArgumentError(f"EPI_SPLIT must be 1, 2 or 4 and leave chunks of whole 64-column TMA boxes; "
                                    f"got EPI_SPLIT={self.EPI_SPLIT} with BN={self.BN}")
        if self.smem_bytes(kind=kind) > SM90_SMEM_BYTES:
            raise GemmArgumentError(f"{kind} config {self} needs {self.smem_bytes(kind=kind)} B of shared memory; "
                               f"an sm_90 CTA has {SM90_SMEM_BYTES}", hint="use fewer stages or smaller tiles")
        if self.NUM_STAGES < 2:
            raise GemmArgumentError(f"{kind} config needs NUM_STAGES >= 2, got {self.NUM_STAGES}")
        if kind in ("ws", "persistent", "streamk", "persistent_cluster") and self.BM % (64 * self.NUM_MMA_GROUPS):
            raise GemmArgumentError(f"BM={self.BM} must give each of the {self.NUM_MMA_GROUPS} consumer warpgroups a "
                               f"multiple of 64 rows")


#: Pipelined: 128x256x64 tiles — per warpgroup the wgmma m64n256k16 shape (two warpgroups, 8
#: warps, split the 128 rows) —, 3 stages: 3 x 48 KiB of operands + 64 KiB of C = 208 KiB.
H200_PIPELINED = GemmConfig(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=3, NUM_MMA_GROUPS=1, num_warps=8)
#: Warp-specialized: the same tile, a 4-warp TMA producer and two 64x256 consumer warpgroups
#: (232 registers each: the 128 accumulator registers and room to convert the epilogue).
H200_WS = GemmConfig(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=3, NUM_MMA_GROUPS=2, num_warps=4)
#: Persistent cooperative: as H200_WS, with CUTLASS's 4-stage ring and the epilogue in 4 column
#: chunks through two 8 KiB buffers per consumer (4 x 48 + 32 KiB); at most one CTA per SM, the
#: fewest that finish in the same number of waves (EVEN_WAVES: 128 at gemm.py's 8 points).
H200_PERSISTENT = GemmConfig(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=4, NUM_MMA_GROUPS=2, num_warps=4,
                             EPI_SPLIT=4, EVEN_WAVES=True)
#: Persistent on 2-CTA clusters (B multicast): CUTLASS's 2x1 cooperative 128x256x64 — 4 stages
#: (4 x 48 KiB) and the epilogue in 4 column chunks through two 8 KiB buffers per consumer.
#: GROUP_SIZE_M counts blocks of two tile rows.
H200_PERSISTENT_CLUSTER = GemmConfig(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=4, NUM_MMA_GROUPS=2,
                                     num_warps=4, EPI_SPLIT=4)
#: Persistent with a stream-K tail: the cluster kernel's 4-stage ring and 4-chunk epilogue on
#: single CTAs (4 x 48 KiB + 2 x 16 KiB of C chunks), the partial wave split by k-iteration.
H200_STREAMK = GemmConfig(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=4, NUM_MMA_GROUPS=2, num_warps=4,
                          EPI_SPLIT=4)
#: Persistent ping-pong: each consumer owns a 128x128 tile (128 accumulator registers, two
#: m64n128k16 per k16), 32 KiB stages, 5 of them + two 32 KiB C tiles = 224 KiB.
H200_PINGPONG = GemmConfig(BM=128, BN=128, BK=64, GROUP_SIZE_M=8, NUM_STAGES=5, NUM_MMA_GROUPS=2, num_warps=4)


# ---- plans and wrappers -------------------------------------------------------------------------------

def _prepare(a: Any, b: Any, out: Any, cfg: GemmConfig, kind: str):
    cfg.check(kind)
    M, N, K, dt = check_operands(a, b, out)
    c = out if out is not None else _empty_like(a, (M, N))
    return M, N, K, dt, c


def plan_pipelined(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None) -> GemmLaunch:
    """A launch of `matmul_pipelined_kernel`: one CTA per 128x256 tile (grouped order)."""
    from .gemm_kernels import matmul_pipelined_kernel

    cfg = config or H200_PIPELINED
    M, N, K, dt, c = _prepare(a, b, out, cfg, "pipelined")
    descs = [descriptor(a, (cfg.BM, cfg.BK)), descriptor(b, (cfg.BK, cfg.BN)), descriptor(c, (cfg.BM, cfg.BN))]
    grid = (tlx.cdiv(M, cfg.BM) * tlx.cdiv(N, cfg.BN),)
    consts = dict(BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, GROUP_SIZE_M=cfg.GROUP_SIZE_M, NUM_STAGES=cfg.NUM_STAGES)
    return make_launch(matmul_pipelined_kernel, grid, descs, M, N, K, consts, cfg.num_warps, c, dt)


def _ws_descriptors(a: Any, b: Any, c: Any, cfg: GemmConfig) -> List[Any]:
    split = cfg.BM // cfg.NUM_MMA_GROUPS  # each consumer loads and stores its own rows
    return [descriptor(a, (split, cfg.BK)), descriptor(b, (cfg.BK, cfg.BN)),
            descriptor(c, (split, cfg.BN // cfg.EPI_SPLIT))]


def plan_ws(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None) -> GemmLaunch:
    """A launch of `matmul_ws_kernel`: one warp-specialized CTA per tile (grouped order)."""
    from .gemm_kernels import matmul_ws_kernel

    cfg = config or H200_WS
    M, N, K, dt, c = _prepare(a, b, out, cfg, "ws")
    grid = (tlx.cdiv(M, cfg.BM) * tlx.cdiv(N, cfg.BN),)
    consts = dict(BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, GROUP_SIZE_M=cfg.GROUP_SIZE_M, NUM_STAGES=cfg.NUM_STAGES,
                  NUM_MMA_GROUPS=cfg.NUM_MMA_GROUPS)
    return make_launch(matmul_ws_kernel, grid, _ws_descriptors(a, b, c, cfg), M, N, K, consts, cfg.num_warps, c, dt)


def persistent_programs(tiles: int, sms: int, even_waves: bool = False) -> int:
    """CTAs of a persistent launch over `tiles` tiles on `sms` SMs: one per SM, at most one per
    tile; with `even_waves`, the fewest that still finish in the same number of waves
    (ceil(tiles / waves)), so that no CTA idles through part of the last wave — e.g. 512 tiles on
    132 SMs take 4 waves either way, on 128 CTAs of 4 tiles each instead of 116 of 4 and 16 of 3."""
    programs = min(sms, tiles)
    if even_waves:
        programs = tlx.cdiv(tiles, tlx.cdiv(tiles, programs))
    return programs


def plan_persistent(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None,
                    sms: Optional[int] = None) -> GemmLaunch:
    """A launch of `matmul_persistent_kernel`: `persistent_programs` CTAs (at most one per SM and
    per tile) walking the tiles in the grouped order (`sms` overrides the GPU's SM count, e.g. to
    test several tiles per CTA)."""
    from .gemm_kernels import matmul_persistent_kernel

    cfg = config or H200_PERSISTENT
    M, N, K, dt, c = _prepare(a, b, out, cfg, "persistent")
    tiles = tlx.cdiv(M, cfg.BM) * tlx.cdiv(N, cfg.BN)
    programs = persistent_programs(tiles, int(sms) if sms is not None else num_sms(a), cfg.EVEN_WAVES)
    consts = dict(BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, GROUP_SIZE_M=cfg.GROUP_SIZE_M, NUM_STAGES=cfg.NUM_STAGES,
                  NUM_MMA_GROUPS=cfg.NUM_MMA_GROUPS, NUM_SMS=programs, EPI_SPLIT=cfg.EPI_SPLIT)
    return make_launch(matmul_persistent_kernel, (programs,), _ws_descriptors(a, b, c, cfg), M, N, K, consts,
                       cfg.num_warps, c, dt)


#: the stream-K scratch of device launches: (device, stream) -> (workspace, flags), reused (the
#: kernel leaves its flags zero); launches on one stream run in order, so they can share it
_STREAMK_SCRATCH: Dict[Tuple[Any, ...], Tuple[Any, Any]] = {}


def _zeros(x: Any, n: int, dtype: str) -> Any:
    """n zeros of `dtype` ('float32' or 'int32') from x's array library, on x's device."""
    lib = _library(x)
    if lib == "numpy":
        return np.zeros(n, dtype)
    if lib == "torch":
        import torch

        return torch.zeros(n, dtype=getattr(torch, dtype), device=x.device)
    if lib == "cupy":
        import cupy

        return cupy.zeros(n, dtype)
    from numba import cuda

    return cuda.to_device(np.zeros(n, dtype))


def streamk_scratch(x: Any, programs: int, cfg: GemmConfig, stream: Any = None) -> Tuple[Any, Any]:
    """(workspace, flags) of a stream-K launch: `programs` slots of BM x BN fp32 partial sums and
    programs x NUM_MMA_GROUPS int32 flags, all zero. numpy (the interpreter): fresh arrays.
    Device arrays: kept per device and stream and grown when needed, so a launch costs no
    allocation and no memset (the kernel resets every flag it sets)."""
    n_ws, n_flags = programs * cfg.BM * cfg.BN, programs * cfg.NUM_MMA_GROUPS
    if isinstance(x, np.ndarray):
        return _zeros(x, n_ws, "float32"), _zeros(x, n_flags, "int32")
    key = (_library(x), str(getattr(x, "device", "")), stream if stream is None or isinstance(stream, int)
           else getattr(stream, "cuda_stream", id(stream)))
    held = _STREAMK_SCRATCH.get(key)
    if held is None or len(held[0]) < n_ws or len(held[1]) < n_flags:
        held = _STREAMK_SCRATCH[key] = (_zeros(x, n_ws, "float32"), _zeros(x, n_flags, "int32"))
    return held


def plan_streamk(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None,
                 sms: Optional[int] = None, stream: Any = None) -> GemmLaunch:
    """A launch of `matmul_streamk_kernel`: one CTA per SM (at most one per k-iteration); the
    tiles of whole waves go to CTAs as in the persistent kernel, the last partial wave's
    k-iterations are split evenly over all CTAs (`sms` overrides the SM count; `stream` picks
    the scratch the launch reuses)."""
    from .gemm_kernels import matmul_streamk_kernel

    cfg = config or H200_STREAMK
    if cfg.EPI_SPLIT == 1:
        raise GemmArgumentError("the stream-K kernel adds partial sums a column chunk at a time: EPI_SPLIT must be "
                                "2 or 4", hint="use EPI_SPLIT=4 (the default) or 2")
    M, N, K, dt, c = _prepare(a, b, out, cfg, "streamk")
    work = tlx.cdiv(M, cfg.BM) * tlx.cdiv(N, cfg.BN) * tlx.cdiv(K, cfg.BK)
    programs = min(int(sms) if sms is not None else num_sms(a), work)
    ws, flags = streamk_scratch(a, programs, cfg, stream)
    consts = dict(BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, GROUP_SIZE_M=cfg.GROUP_SIZE_M, NUM_STAGES=cfg.NUM_STAGES,
                  NUM_MMA_GROUPS=cfg.NUM_MMA_GROUPS, NUM_SMS=programs, EPI_SPLIT=cfg.EPI_SPLIT)
    launch = make_launch(matmul_streamk_kernel, (programs,), _ws_descriptors(a, b, c, cfg), M, N, K, consts,
                         cfg.num_warps, c, dt)
    launch.args[3:3] = [ws, flags]
    return launch


def plan_pingpong(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None,
                  sms: Optional[int] = None) -> GemmLaunch:
    """A launch of `matmul_pingpong_kernel`: min(SMs, tiles) CTAs, two consumers per CTA taking
    whole tiles in turn."""
    from .gemm_kernels import matmul_pingpong_kernel

    cfg = config or H200_PINGPONG
    M, N, K, dt, c = _prepare(a, b, out, cfg, "pingpong")
    tiles = tlx.cdiv(M, cfg.BM) * tlx.cdiv(N, cfg.BN)
    programs = min(int(sms) if sms is not None else num_sms(a), tiles)
    descs = [descriptor(a, (cfg.BM, cfg.BK)), descriptor(b, (cfg.BK, cfg.BN)), descriptor(c, (cfg.BM, cfg.BN))]
    consts = dict(BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, GROUP_SIZE_M=cfg.GROUP_SIZE_M, NUM_STAGES=cfg.NUM_STAGES,
                  NUM_SMS=programs)
    return make_launch(matmul_pingpong_kernel, (programs,), descs, M, N, K, consts, cfg.num_warps, c, dt)


def plan_persistent_cluster(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None,
                            sms: Optional[int] = None) -> GemmLaunch:
    """A launch of `matmul_persistent_cluster_kernel`: clusters of 2 CTAs along M (an even number
    of CTAs, at most the SMs and the tiles rounded up to pairs) walking 2*BM x BN blocks in the
    grouped order, each CTA loading half of the B tile and multicasting it to both CTAs of the
    cluster."""
    from .gemm_kernels import matmul_persistent_cluster_kernel

    cfg = config or H200_PERSISTENT_CLUSTER
    M, N, K, dt, c = _prepare(a, b, out, cfg, "persistent_cluster")
    blocks = tlx.cdiv(M, 2 * cfg.BM) * tlx.cdiv(N, cfg.BN)
    n_sms = int(sms) if sms is not None else num_sms(a)
    programs = 2 * max(1, min(n_sms // 2, blocks))
    consts = dict(BM=cfg.BM, BN=cfg.BN, BK=cfg.BK, GROUP_SIZE_M=cfg.GROUP_SIZE_M, NUM_STAGES=cfg.NUM_STAGES,
                  NUM_MMA_GROUPS=cfg.NUM_MMA_GROUPS, NUM_SMS=programs, EPI_SPLIT=cfg.EPI_SPLIT)
    descs = _ws_descriptors(a, b, c, cfg)
    descs[1] = descriptor(b, (cfg.BK, cfg.BN // 2))  # each CTA of the pair loads (and multicasts) half of B
    launch = make_launch(matmul_persistent_cluster_kernel, (programs,), descs, M, N, K, consts,
                         cfg.num_warps, c, dt)
    launch.cluster = (2, 1, 1)
    return launch


def matmul_persistent_cluster(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None,
                              stream: Any = None) -> Any:
    """c = a @ b by the persistent GEMM on 2-CTA clusters with B multicast (GPU or interpreter)."""
    return plan_persistent_cluster(a, b, config, out).run(stream)


def matmul_streamk(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None, stream: Any = None) -> Any:
    """c = a @ b by the persistent kernel with a stream-K tail (no SM idles in the last wave)."""
    return plan_streamk(a, b, config, out, stream=stream).run(stream)


def matmul_pipelined(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None, stream: Any = None) -> Any:
    """c = a @ b with the pipelined TMA + wgmma kernel (bf16/fp16 in and out, fp32 accumulation).
    Device arrays run on the GPU, numpy arrays on the CPU interpreter (see the module docstring)."""
    return plan_pipelined(a, b, config, out).run(stream)


def matmul_ws(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None, stream: Any = None) -> Any:
    """c = a @ b with the warp-specialized kernel (one CTA per tile)."""
    return plan_ws(a, b, config, out).run(stream)


def matmul_persistent(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None, stream: Any = None) -> Any:
    """c = a @ b with the persistent cooperative warp-specialized kernel (at most one CTA per SM)."""
    return plan_persistent(a, b, config, out).run(stream)


def matmul_pingpong(a: Any, b: Any, config: Optional[GemmConfig] = None, out: Any = None, stream: Any = None) -> Any:
    """c = a @ b with the persistent ping-pong warp-specialized kernel (one CTA per SM)."""
    return plan_pingpong(a, b, config, out).run(stream)


#: the three kernels of issue 6: (a) pipelined, (b) warp-specialized, (c) persistent (cooperative)
PLANS = {"pipelined": plan_pipelined, "ws": plan_ws, "persistent": plan_persistent}
#: every GEMM example on single CTAs: the persistent ping-pong and stream-K variants too
ALL_PLANS = {**PLANS, "pingpong": plan_pingpong, "streamk": plan_streamk}
#: the kernels launched in thread-block clusters
CLUSTER_PLANS = {"persistent_cluster": plan_persistent_cluster}

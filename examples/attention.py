"""Flash attention on Hopper, the host side (the kernels are in `tlx.examples.attention_kernels`):
configs by head dimension, argument checks, outputs, 4-D TMA descriptors, grids, torch autograd,
and the switch between the GPU and the CPU interpreter.

``attention(q, k, v, causal=False, sm_scale=None)`` takes torch tensors of shape (batch, heads,
seq, head_dim), fp16 or bf16, head_dim 64, 128 or 256, any sequence length, and returns
softmax(q k^T * sm_scale [+ causal mask]) v (sm_scale defaults to 1/sqrt(head_dim)); it is
differentiable through torch autograd (the backward kernels compute dq, dk, dv).
CUDA tensors run on the GPU; CPU tensors run on the CPU interpreter (``TLX_INTERPRET=1``'s
engine: the wrapper hands it numpy views of the tensors, so results land in the torch outputs).

Lower level, for tests and benchmarks (numpy arrays — bf16 as uint16 bit patterns — run on the
interpreter, device arrays on the GPU):

* ``plan_forward(q, k, v, causal, sm_scale, persistent=False, config=None, sms=None)`` -> an
  `AttentionLaunch` whose ``run()`` returns ``(o, lse)``; ``lse`` is (batch, heads, seq) fp32,
  the natural log of each row's softmax denominator (scores scaled by sm_scale).
* ``plan_backward(q, k, v, o, lse, do, causal, sm_scale, config=None)`` -> the three launches
  of the backward (preprocess, dK/dV, dQ); ``run()`` returns ``(dq, dk, dv)``. The dK/dV kernel
  moves the LSE and Delta rows by TMA, which needs a 16-byte aligned row stride: Delta is made
  with rows padded to a multiple of 4, and when seq is not one the preprocess kernel copies
  ``lse`` (contiguous) into such rows; an ``lse`` already laid out so is read in place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import tlx

#: SMs of an H100 / H200 SXM (used when no GPU can be asked, e.g. on the interpreter)
DEFAULT_NUM_SMS = 132
#: the dynamic shared memory one CTA may use on sm_90 (227 KiB)
SM90_SMEM_BYTES = 232448
HEAD_DIMS = (64, 128, 256)
LOG2E = 1.4426950408889634


class AttentionArgumentError(tlx.TLXError):
    """Inputs or a config the attention examples cannot take; says what to change."""

    def __init__(self, message: str, hint: Optional[str] = None):
        self.message, self.hint = message, hint
        super().__init__(message + (f"\nhint: {hint}" if hint else ""))


# ---- configs --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ForwardConfig:
    """Tiles, ring depth and schedule options of the forward kernels: BLOCK_M Q rows per CTA (64
    per consumer warpgroup), BLOCK_N K/V rows per ring stage, NUM_STAGES stages (each holds a K
    and a V tile). RESCALE_EARLY: rescale O under the consumer's own S wgmma (FlashAttention-3's
    order) instead of after the PV wait; LAZY_FIRST_MASK: mask K/V block 0 only when it crosses
    the diagonal or the sequence end; HEAD_GROUP: G > 0 walks the tiles in groups of G heads, the
    longest causal blocks of each group first (the non-persistent kernel then has a 1-D grid;
    the persistent one uses it for causal only), 0 keeps head by head (non-persistent) or all
    heads' longest blocks first (persistent, causal). OVERLAP_TILES (persistent only):
    `attn_fwd_overlap_kernel`, whose consumers overlap each tile's start with the previous tile's
    last PV wgmma and epilogue (double-buffered Q, its own tile order; no HEAD_GROUP)."""

    BLOCK_M: int = 128
    BLOCK_N: int = 128
    NUM_STAGES: int = 2
    RESCALE_EARLY: bool = False
    LAZY_FIRST_MASK: bool = False
    HEAD_GROUP: int = 0
    OVERLAP_TILES: bool = False

    def smem_bytes(self, head_dim: int, separate_o: bool, elem: int = 2) -> int:
        """Shared memory of the forward: Q (two 64-row halves; two such buffers with
        OVERLAP_TILES), the K/V ring, a separate O tile pair when the Q buffers do not carry O
        (always with OVERLAP_TILES), and the mbarriers."""
        q = self.BLOCK_M * head_dim * elem
        ring = 2 * self.NUM_STAGES * self.BLOCK_N * head_dim * elem
        if self.OVERLAP_TILES:
            return 3 * q + ring + 8 * (8 + 4 * self.NUM_STAGES)
        return q * (2 if separate_o else 1) + ring + 8 * (4 + 4 * self.NUM_STAGES)

    def check(self, head_dim: int, separate_o: bool) -> None:
        """Reject configs the kernels cannot run (a clear error before any tracing)."""
        if self.BLOCK_M != 128:
            raise AttentionArgumentError(f"BLOCK_M={self.BLOCK_M}: the forward kernels run two 64-row consumer "
                                         "warpgroups, BLOCK_M must be 128")
        if self.BLOCK_N not in (64, 128) or self.NUM_STAGES < 2:
            raise AttentionArgumentError(f"forward config {self}: BLOCK_N must be 64 or 128, NUM_STAGES >= 2")
        if not isinstance(self.HEAD_GROUP, int) or self.HEAD_GROUP < 0:
            raise AttentionArgumentError(f"forward config {self}: HEAD_GROUP must be an int >= 0 (0: head by head)")
        if self.OVERLAP_TILES and self.HEAD_GROUP:
            raise AttentionArgumentError(f"forward config {self}: OVERLAP_TILES walks its own tile order, "
                                         "HEAD_GROUP must be 0")
        need = self.smem_bytes(head_dim, separate_o)
        if need > SM90_SMEM_BYTES:
            raise AttentionArgumentError(f"forward config {self} at head_dim {head_dim} needs {need} B of shared "
                                         f"memory; an sm_90 CTA has {SM90_SMEM_BYTES}",
                                         hint="use fewer stages or a smaller BLOCK_N" + (
                                             "; or the persistent kernel without OVERLAP_TILES (its O leaves "
                                             "through the Q buffer)" if self.OVERLAP_TILES else ""))


#: head_dim -> forward config. d64: small tiles, a deep ring (each stage 32 KiB); d128: 128x128
#: tiles, two stages (Q 32 KiB + 4 x 32 KiB); d256: BLOCK_N 64 keeps S (64 x 64) and O (64 x 256)
#: of a consumer within 240 registers, two stages of 64 KiB + Q 64 KiB.
FORWARD_CONFIGS: Dict[int, ForwardConfig] = {
    64: ForwardConfig(BLOCK_M=128, BLOCK_N=128, NUM_STAGES=3),
    128: ForwardConfig(BLOCK_M=128, BLOCK_N=128, NUM_STAGES=2),
    256: ForwardConfig(BLOCK_M=128, BLOCK_N=64, NUM_STAGES=2),
}

#: head_dim -> the overlapped persistent forward's config (d256 does not fit its buffers).
OVERLAP_CONFIGS: Dict[int, ForwardConfig] = {
    64: ForwardConfig(BLOCK_M=128, BLOCK_N=128, NUM_STAGES=3, OVERLAP_TILES=True, LAZY_FIRST_MASK=True),
    128: ForwardConfig(BLOCK_M=128, BLOCK_N=128, NUM_STAGES=2, OVERLAP_TILES=True, LAZY_FIRST_MASK=True),
}
#: Head dims whose default forward (`attention`, `attention_forward`) is the overlapped persistent
#: kernel, from H100 runs with cuDNN timed in alternation: d128 (98-105 % of cuDNN against the
#: tile-per-CTA kernel's 94-101 %, benchmarks/attention_sweep.py), d64 (2026-12-07 01:45,
#: benchmarks/attention.py: above the tile-per-CTA kernel at 22 of 24 points, 90-96 % against
#: 86-98 % at N >= 2k, 92-94 % against 73-81 % non-causal below); elsewhere (d256) the
#: tile-per-CTA kernel.
OVERLAP_BY_DEFAULT = (64, 128)


# ---- arrays ---------------------------------------------------------------------------------------

_NUMPY_DTYPES = {"float16": "fp16", "uint16": "bf16", "bfloat16": "bf16"}


def _is_numpy(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def element_type(x: Any) -> str:
    """'bf16' or 'fp16' for an attention input; anything else is a clear error."""
    if _is_numpy(x):
        dt = _NUMPY_DTYPES.get(x.dtype.name)
    else:
        from tlx.runtime.arrays import describe

        dt = describe(x).dtype
    if dt not in ("bf16", "fp16"):
        raise AttentionArgumentError(f"attention takes fp16 or bf16 tensors, got {getattr(x, 'dtype', type(x))}",
                                     hint="convert the inputs first (numpy: bf16 as uint16 bit patterns)")
    return dt


def _shape_strides(x: Any) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    if _is_numpy(x):
        return tuple(x.shape), tuple(s // x.itemsize for s in x.strides)
    from tlx.runtime.arrays import describe

    info = describe(x)
    return tuple(info.shape), tuple(info.strides)


def _empty(like: Any, shape: Tuple[int, ...], fp32: bool = False) -> Any:
    """An uninitialized array of `shape` (like's dtype, or fp32) from like's library and device."""
    if _is_numpy(like):
        return np.empty(shape, np.float32 if fp32 else like.dtype)
    import torch

    return torch.empty(shape, dtype=torch.float32 if fp32 else like.dtype, device=like.device)


def descriptor(x: Any, rows: int, head_dim: int) -> Any:
    """A 4-D TMA descriptor over (batch, heads, seq, head_dim) array `x` moving [1, 1, rows,
    head_dim] blocks (rows past seq read zeros and are not stored)."""
    shape, strides = _shape_strides(x)
    return tlx.TensorDescriptor(x, list(shape), list(strides), [1, 1, rows, head_dim])


def row_stride(N: int) -> int:
    """Elements between the LSE / Delta rows of consecutive (batch, head) pairs in the backward:
    N rounded up to a multiple of 4, so the stride is 16-byte aligned (what TMA needs)."""
    return -(-N // 4) * 4


def padded_rows(like: Any, Z: int, H: int, N: int) -> Any:
    """An uninitialized (Z, H, N) fp32 array from like's library and device with rows
    `row_stride(N)` elements apart: a view of a (Z, H, row_stride(N)) array."""
    return _empty(like, (Z, H, row_stride(N)), fp32=True)[..., :N]


def rows_descriptor(x: Any, rows: int) -> Any:
    """A 3-D TMA descriptor over (batch, heads, seq) fp32 array `x` moving [1, 1, rows] blocks
    (rows past seq read zeros)."""
    shape, strides = _shape_strides(x)
    return tlx.TensorDescriptor(x, list(shape), list(strides), [1, 1, rows])


def _backward_rows(lse: Any, Z: int, H: int, N: int) -> Tuple[Any, bool]:
    """(the LSE rows the backward kernels read, whether the preprocess kernel must copy `lse`
    into them): `lse` itself when its strides are (H * s, s, 1) with s = row_stride(N) (a
    contiguous lse when N is a multiple of 4) at a 16-byte aligned address, else new
    `padded_rows` for a contiguous `lse` (anything else is an error)."""
    s = row_stride(N)
    strides = _shape_strides(lse)[1]
    if strides == (H * s, s, 1) and _data_ptr(lse) % 16 == 0:
        return lse, False
    if strides != (H * N, N, 1):
        raise AttentionArgumentError(f"lse has strides {strides}: the backward reads contiguous LSE rows",
                                     hint="pass what the forward returned (.contiguous())")
    return padded_rows(lse, Z, H, N), True


def _data_ptr(x: Any) -> int:
    """The address of `x`'s first element (numpy, torch, or any array `describe` reads)."""
    if _is_numpy(x):
        return int(x.__array_interface__["data"][0])
    if hasattr(x, "data_ptr"):  # torch
        return int(x.data_ptr())
    from tlx.runtime.arrays import describe

    return int(describe(x).ptr)


def check_inputs(q: Any, k: Any, v: Any) -> Tuple[int, int, int, int, str]:
    """(Z, H, N, D, dtype) of an attention call, after every check the kernels and TMA need."""
    shapes = [_shape_strides(x) for x in (q, k, v)]
    if any(len(s) != 4 for s, _ in shapes):
        raise AttentionArgumentError(f"attention takes (batch, heads, seq, head_dim) tensors, got shapes "
                                     f"{[s for s, _ in shapes]}")
    if not shapes[0][0] == shapes[1][0] == shapes[2][0]:
        raise AttentionArgumentError(f"q, k and v must have one shape, got {[s for s, _ in shapes]}",
                                     hint="grouped-query / cross attention (other K/V shapes) is not supported yet")
    Z, H, N, D = shapes[0][0]
    if D not in HEAD_DIMS:
        raise AttentionArgumentError(f"head_dim {D} is not supported", hint=f"use one of {HEAD_DIMS}")
    if min(Z, H, N) < 1:
        raise AttentionArgumentError(f"attention needs non-empty tensors, got shape {(Z, H, N, D)}")
    dt = element_type(q)
    if element_type(k) != dt or element_type(v) != dt:
        raise AttentionArgumentError("q, k and v must share a dtype")
    if len({_is_numpy(x) for x in (q, k, v)}) != 1:
        raise AttentionArgumentError("q, k and v must all be numpy arrays (interpreter) or all device tensors")
    for name, (_, st) in zip("qkv", shapes):
        if st[3] != 1 or any((s * 2) % 16 for s in st[:3]):
            raise AttentionArgumentError(f"{name} has strides {st}: TMA needs a contiguous head_dim and "
                                         "16-byte aligned strides", hint="call .contiguous() first")
    return Z, H, N, D, dt


def check_scale(sm_scale: Optional[float], head_dim: int) -> float:
    """sm_scale, defaulting to 1/sqrt(head_dim); it must be a positive finite number (the kernels
    take the row maximum of the unscaled scores)."""
    scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)
    if not (scale > 0.0 and math.isfinite(scale)):
        raise AttentionArgumentError(f"sm_scale must be positive and finite, got {sm_scale!r}")
    return scale


def num_sms(x: Any) -> int:
    """Multiprocessors of the GPU holding `x` (DEFAULT_NUM_SMS for numpy arrays)."""
    if _is_numpy(x):
        return DEFAULT_NUM_SMS
    import torch

    return int(torch.cuda.get_device_properties(x.device).multi_processor_count)


# ---- launches -------------------------------------------------------------------------------------

def _signature_entry(arg: Any, dtype: str) -> str:
    if isinstance(arg, tlx.TensorDescriptor):
        if str(arg.base.dtype).endswith("float32"):
            dtype = "fp32"  # the LSE / Delta rows
        return f"tensordesc<{dtype}[{', '.join(str(int(b)) for b in arg.block_shape)}]>"
    if isinstance(arg, bool):
        return "i1"
    if isinstance(arg, int):
        return "i32"
    if isinstance(arg, float):
        return "fp32"
    fp32 = arg.dtype == np.float32 if _is_numpy(arg) else str(arg.dtype).endswith("float32")
    return "*fp32" if fp32 else f"*{dtype}"  # LSE / Delta rows, or O / dO


@dataclass
class KernelLaunch:
    """One launch: kernel, grid, runtime arguments, constexprs, the default partition's warps,
    and the element dtype of the descriptors (their signature on the interpreter, where bf16
    arrays hold uint16)."""

    kernel: Any
    grid: Tuple[int, ...]
    args: List[Any]
    constexprs: Dict[str, Any]
    dtype: str
    num_warps: int = 4
    compiled: Any = None  # what the last GPU launch ran (its asm, fences, resources)

    @property
    def on_cpu(self) -> bool:
        """Whether the arrays are numpy arrays (the launch runs on the interpreter)."""
        return any(_is_numpy(a.base if isinstance(a, tlx.TensorDescriptor) else a) for a in self.args)

    def signature(self) -> Dict[str, str]:
        """Parameter -> type, as the launch specializes it."""
        names = [p.name for p in self.kernel.params if not p.is_constexpr]
        return {n: _signature_entry(a, self.dtype) for n, a in zip(names, self.args)}

    def run(self, stream: Any = None, raise_on_hazard: bool = True) -> List[Any]:
        """Launch on the GPU, or run on the interpreter when the arguments are numpy arrays
        (returns its hazards; the first one raises unless raise_on_hazard=False)."""
        if self.on_cpu:
            return tlx.interpret(self.kernel, self.grid, *self.args, signature=self.signature(),
                                 num_warps=self.num_warps, raise_on_hazard=raise_on_hazard, **self.constexprs)
        self.compiled = self.kernel[self.grid](*self.args, num_warps=self.num_warps, stream=stream, **self.constexprs)
        return []

    def compile(self, **options: Any) -> Any:
        """Compile this specialization without a GPU (`tlx.compile`): IR, fences, PTX, resources."""
        return tlx.compile(self.kernel, self.signature(), self.constexprs, num_warps=self.num_warps, **options)


@dataclass
class AttentionLaunch:
    """The launches of one attention pass (forward: one; backward: three) and its outputs."""

    launches: List[KernelLaunch]
    outputs: Tuple[Any, ...]
    hazards: List[Any] = field(default_factory=list)

    def run(self, stream: Any = None, raise_on_hazard: bool = True) -> Tuple[Any, ...]:
        """Run every launch in order; returns the outputs (hazards found on the interpreter are
        kept in `hazards`)."""
        self.hazards = []
        for launch in self.launches:
            self.hazards += launch.run(stream, raise_on_hazard)
        return self.outputs


def plan_forward(q: Any, k: Any, v: Any, causal: bool = False, sm_scale: Optional[float] = None,
                 persistent: bool = False, config: Optional[ForwardConfig] = None, sms: Optional[int] = None,
                 out: Any = None, lse: Any = None) -> AttentionLaunch:
    """The forward launch: `attn_fwd_kernel` (grid (cdiv(N, 128), Z*H)) or, with `persistent`,
    `attn_fwd_persistent_kernel` on min(SMs, tiles) CTAs (`sms` overrides the SM count), or with
    `persistent` and the config's OVERLAP_TILES `attn_fwd_overlap_kernel` on min(SMs, tiles)
    CTAs (causal: min(SMs, tile pairs)). Outputs (o, lse); `out` / `lse` may be given
    (poisoned arrays in tests)."""
    from .attention_kernels import attn_fwd_kernel, attn_fwd_overlap_kernel, attn_fwd_persistent_kernel

    Z, H, N, D, dt = check_inputs(q, k, v)
    scale = check_scale(sm_scale, D)
    cfg = config or FORWARD_CONFIGS[D]
    if cfg.OVERLAP_TILES and not persistent:
        raise AttentionArgumentError(f"forward config {cfg}: OVERLAP_TILES is a schedule of the persistent forward",
                                     hint="pass persistent=True")
    q_holds_o = not persistent or cfg.smem_bytes(D, separate_o=True) > SM90_SMEM_BYTES
    cfg.check(D, separate_o=not q_holds_o)
    o = out if out is not None else _empty(q, (Z, H, N, D))
    lse = lse if lse is not None else _empty(q, (Z, H, N), fp32=True)
    split = cfg.BLOCK_M // 2
    descs = [descriptor(q, split, D), descriptor(k, cfg.BLOCK_N, D), descriptor(v, cfg.BLOCK_N, D),
             descriptor(o, split, D)]
    consts = dict(HEAD_DIM=D, BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, NUM_STAGES=cfg.NUM_STAGES,
                  CAUSAL=bool(causal), RESCALE_EARLY=bool(cfg.RESCALE_EARLY),
                  LAZY_FIRST_MASK=bool(cfg.LAZY_FIRST_MASK))
    num_m = tlx.cdiv(N, cfg.BLOCK_M)
    if cfg.OVERLAP_TILES:
        units = tlx.cdiv(num_m * Z * H, 2) if causal else num_m * Z * H  # causal CTAs take tile pairs
        programs = min(int(sms) if sms is not None else num_sms(q), units)
        launch = KernelLaunch(attn_fwd_overlap_kernel, (programs,), [*descs, lse, scale * LOG2E, Z * H, H, N],
                              consts, dt)
    elif persistent:
        programs = min(int(sms) if sms is not None else num_sms(q), num_m * Z * H)
        consts.update(Q_HOLDS_O=q_holds_o, HEAD_GROUP=cfg.HEAD_GROUP)
        launch = KernelLaunch(attn_fwd_persistent_kernel, (programs,), [*descs, lse, scale * LOG2E, Z * H, H, N],
                              consts, dt)
    else:
        consts.update(HEAD_GROUP=cfg.HEAD_GROUP)
        grid = (num_m, Z * H) if cfg.HEAD_GROUP == 0 else (num_m * Z * H, 1)
        launch = KernelLaunch(attn_fwd_kernel, grid, [*descs, lse, scale * LOG2E, H, N], consts, dt)
    return AttentionLaunch([launch], (o, lse))


@dataclass(frozen=True)
class BackwardConfig:
    """Tiles and ring depths of the backward kernels. dK/dV: BLOCK_N1 K/V rows per CTA (64 per
    consumer, or 64 shared with the head dimension split in two when D_SPLIT == 2), (Q, dO)
    blocks of BLOCK_M1 rows through STAGES1 stages. dQ: 128 Q rows per CTA, (K, V) blocks of
    BLOCK_N2 rows through STAGES2 stages."""

    BLOCK_M1: int = 64
    BLOCK_N1: int = 128
    D_SPLIT: int = 1
    STAGES1: int = 2
    BLOCK_N2: int = 64
    STAGES2: int = 2

    def smem_bytes(self, head_dim: int, elem: int = 2) -> Tuple[int, int]:
        """Shared memory of the dK/dV kernel (K, V, and per stage Q, dO and the fp32 LSE and Delta
        rows) and of the dQ kernel (Q, dO, and per stage K, V); the mbarriers add < 100 B."""
        dkdv = 2 * self.BLOCK_N1 * head_dim * elem + self.STAGES1 * (2 * self.BLOCK_M1 * head_dim * elem
                                                                    + 2 * self.BLOCK_M1 * 4)
        dq = 2 * 128 * head_dim * elem + self.STAGES2 * 2 * self.BLOCK_N2 * head_dim * elem
        return dkdv, dq

    def check(self, head_dim: int) -> None:
        """Reject configs the kernels cannot run (a clear error before any tracing)."""
        if self.D_SPLIT not in (1, 2) or self.BLOCK_N1 != 128 // self.D_SPLIT:
            raise AttentionArgumentError(f"backward config {self}: D_SPLIT must be 1 (BLOCK_N1 128) or 2 (BLOCK_N1 64)")
        if self.BLOCK_M1 % 16 or self.BLOCK_N2 % 16 or min(self.STAGES1, self.STAGES2) < 2:
            raise AttentionArgumentError(f"backward config {self}: BLOCK_M1 and BLOCK_N2 must be multiples of 16, "
                                         "and both rings need >= 2 stages")
        for what, need in zip(("dK/dV", "dQ"), self.smem_bytes(head_dim)):
            if need + 128 > SM90_SMEM_BYTES:
                raise AttentionArgumentError(f"backward config {self}: the {what} kernel needs {need} B of shared "
                                             f"memory at head_dim {head_dim}; an sm_90 CTA has {SM90_SMEM_BYTES}",
                                             hint="use fewer stages or smaller blocks")


#: head_dim -> backward config. d256: dK and dV (64 x 256 fp32 each) do not fit one warpgroup's
#: registers, so the consumers split the head dimension; dQ's K/V blocks shrink to 32 rows so
#: two stages fit beside the 128 x 256 Q and dO tiles.
BACKWARD_CONFIGS: Dict[int, BackwardConfig] = {
    64: BackwardConfig(BLOCK_M1=64, BLOCK_N1=128, D_SPLIT=1, STAGES1=3, BLOCK_N2=64, STAGES2=3),
    128: BackwardConfig(BLOCK_M1=64, BLOCK_N1=128, D_SPLIT=1, STAGES1=3, BLOCK_N2=64, STAGES2=2),
    256: BackwardConfig(BLOCK_M1=64, BLOCK_N1=64, D_SPLIT=2, STAGES1=2, BLOCK_N2=32, STAGES2=2),
}


def _check_like(name: str, x: Any, shape: Tuple[int, ...], dtype: Optional[str], contiguous: bool = True) -> None:
    got, strides = _shape_strides(x)
    want = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    if got != shape or (dtype is not None and element_type(x) != dtype) or (contiguous and strides != want):
        raise AttentionArgumentError(f"{name} must be a contiguous {shape} {dtype or 'fp32'} array, got shape {got}, "
                                     f"strides {strides}", hint="pass what the forward returned (.contiguous())")


def plan_backward(q: Any, k: Any, v: Any, o: Any, lse: Any, do: Any, causal: bool = False,
                  sm_scale: Optional[float] = None, config: Optional[BackwardConfig] = None,
                  dq: Any = None, dk: Any = None, dv: Any = None) -> AttentionLaunch:
    """The backward launches (Delta, then dK/dV, then dQ) for the forward that returned o, lse;
    outputs (dq, dk, dv). `do` (the gradient of o) and `o` must be contiguous."""
    from .attention_kernels import attn_bwd_dkdv_kernel, attn_bwd_dq_kernel, attn_bwd_preprocess_kernel

    Z, H, N, D, dt = check_inputs(q, k, v)
    scale = check_scale(sm_scale, D)
    cfg = config or BACKWARD_CONFIGS[D]
    cfg.check(D)
    _check_like("o", o, (Z, H, N, D), dt)
    _check_like("do", do, (Z, H, N, D), dt)
    if _shape_strides(lse)[0] != (Z, H, N) or (_is_numpy(lse) and lse.dtype != np.float32):
        raise AttentionArgumentError(f"lse must be the forward's (batch, heads, seq) fp32 array, got {_shape_strides(lse)[0]}")
    dq = dq if dq is not None else _empty(q, (Z, H, N, D))
    dk = dk if dk is not None else _empty(q, (Z, H, N, D))
    dv = dv if dv is not None else _empty(q, (Z, H, N, D))
    lse_rows, copy_lse = _backward_rows(lse, Z, H, N)
    delta = padded_rows(q, Z, H, N)
    zh_stride = row_stride(N)
    qk_scale = scale * LOG2E
    pre_block = 8192 // D  # 64 fp32 of O and of dO per thread
    pre = KernelLaunch(attn_bwd_preprocess_kernel, (tlx.cdiv(N, pre_block), Z * H),
                       [o, do, delta, lse, lse_rows, zh_stride, N], dict(HEAD_DIM=D, BLOCK=pre_block, COPY_LSE=copy_lse),
                       dt)
    dc = D // cfg.D_SPLIT
    dkdv_descs = [descriptor(q, cfg.BLOCK_M1, dc), descriptor(k, 64, dc), descriptor(v, 64, dc),
                  descriptor(do, cfg.BLOCK_M1, dc), descriptor(dk, 64, dc), descriptor(dv, 64, dc)]
    dkdv = KernelLaunch(attn_bwd_dkdv_kernel, (tlx.cdiv(N, cfg.BLOCK_N1), Z * H),
                        [*dkdv_descs, rows_descriptor(lse_rows, cfg.BLOCK_M1), rows_descriptor(delta, cfg.BLOCK_M1),
                         qk_scale, scale, H, N],
                        dict(HEAD_DIM=D, BLOCK_M=cfg.BLOCK_M1, BLOCK_N=cfg.BLOCK_N1, D_SPLIT=cfg.D_SPLIT,
                             NUM_STAGES=cfg.STAGES1, CAUSAL=bool(causal)), dt)
    dq_descs = [descriptor(q, 64, D), descriptor(k, cfg.BLOCK_N2, D), descriptor(v, cfg.BLOCK_N2, D),
                descriptor(do, 64, D), descriptor(dq, 64, D)]
    dql = KernelLaunch(attn_bwd_dq_kernel, (tlx.cdiv(N, 128), Z * H),
                       [*dq_descs, lse_rows, delta, zh_stride, qk_scale, scale, H, N],
                       dict(HEAD_DIM=D, BLOCK_M=128, BLOCK_N=cfg.BLOCK_N2, NUM_STAGES=cfg.STAGES2,
                            CAUSAL=bool(causal)), dt)
    return AttentionLaunch([pre, dkdv, dql], (dq, dk, dv))


# ---- torch: autograd and the public entry -----------------------------------------------------------

def _kernel_array(t: Any) -> Any:
    """What the launches take for torch tensor `t`: the tensor itself on the GPU; on the CPU a
    numpy view of its memory (bf16 as uint16 bit patterns), so the interpreter's writes land in
    the tensor."""
    import torch

    if t.device.type != "cpu":
        return t
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def _tma_ready(t: Any) -> Any:
    """`t` itself when TMA can read it in place (contiguous head_dim, 16-byte aligned strides),
    else a contiguous copy."""
    st = t.stride()
    if st[-1] == 1 and all((s * t.element_size()) % 16 == 0 for s in st[:-1]) and t.data_ptr() % 16 == 0:
        return t
    return t.contiguous()


def _torch_empty(shape: Sequence[int], dtype: Any, device: Any) -> Any:
    """An uninitialized torch tensor for an output (tests replace it with a NaN-filled one)."""
    import torch

    return torch.empty(tuple(shape), dtype=dtype, device=device)


def _check_torch(q: Any, k: Any, v: Any) -> None:
    import torch

    for name, x in zip("qkv", (q, k, v)):
        if not isinstance(x, torch.Tensor):
            raise AttentionArgumentError(f"attention takes torch tensors, got {type(x).__name__} for {name}",
                                         hint="numpy arrays: use plan_forward / plan_backward")
    if len({x.device for x in (q, k, v)}) != 1:
        raise AttentionArgumentError(f"q, k and v are on different devices: {[str(x.device) for x in (q, k, v)]}")


def attention_forward(q: Any, k: Any, v: Any, causal: bool = False, sm_scale: Optional[float] = None,
                      persistent: Optional[bool] = None) -> Tuple[Any, Any]:
    """(o, lse) for torch tensors q, k, v (batch, heads, seq, head_dim): the forward alone, no
    autograd. lse is (batch, heads, seq) fp32, log(sum_j exp(sm_scale * q_i . k_j)) per row.
    `persistent` None: the head dim's measured-best kernel (`OVERLAP_BY_DEFAULT`); True / False:
    the persistent / the tile-per-CTA kernel with the head dim's `FORWARD_CONFIGS` entry."""
    import torch

    _check_torch(q, k, v)
    q, k, v = (_tma_ready(x) for x in (q, k, v))
    o = _torch_empty(q.shape, q.dtype, q.device)
    lse = _torch_empty(q.shape[:3], torch.float32, q.device)
    overlap = persistent is None and q.shape[-1] in OVERLAP_BY_DEFAULT
    plan = plan_forward(*(_kernel_array(x) for x in (q, k, v)), causal=causal, sm_scale=sm_scale,
                        persistent=overlap or bool(persistent), config=OVERLAP_CONFIGS[q.shape[-1]] if overlap else None,
                        out=_kernel_array(o), lse=_kernel_array(lse))
    plan.run()
    return o, lse


def attention_backward(q: Any, k: Any, v: Any, o: Any, lse: Any, do: Any, causal: bool = False,
                       sm_scale: Optional[float] = None) -> Tuple[Any, Any, Any]:
    """(dq, dk, dv) for the forward that gave (o, lse), with `do` the gradient of o."""
    _check_torch(q, k, v)
    q, k, v = (_tma_ready(x) for x in (q, k, v))
    do = do.contiguous()
    dq, dk, dv = (_torch_empty(q.shape, q.dtype, q.device) for _ in range(3))
    plan = plan_backward(*(_kernel_array(x) for x in (q, k, v, o.contiguous(), lse.contiguous(), do)),
                         causal=causal, sm_scale=sm_scale, dq=_kernel_array(dq), dk=_kernel_array(dk),
                         dv=_kernel_array(dv))
    plan.run()
    return dq, dk, dv


def _autograd_function() -> Any:
    import torch

    class FlashAttention(torch.autograd.Function):
        """softmax(q k^T * sm_scale [causal]) v with the tlx forward and backward kernels."""

        @staticmethod
        def forward(ctx: Any, q: Any, k: Any, v: Any, causal: bool, sm_scale: Optional[float]) -> Any:
            o, lse = attention_forward(q, k, v, causal, sm_scale)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal, ctx.sm_scale = causal, sm_scale
            return o

        @staticmethod
        def backward(ctx: Any, do: Any) -> Any:
            q, k, v, o, lse = ctx.saved_tensors
            dq, dk, dv = attention_backward(q, k, v, o, lse, do, ctx.causal, ctx.sm_scale)
            return dq, dk, dv, None, None

    return FlashAttention


_FUNCTION: List[Any] = []


def attention(q: Any, k: Any, v: Any, causal: bool = False, sm_scale: Optional[float] = None) -> Any:
    """softmax(q k^T * sm_scale [+ causal mask]) v for torch tensors (batch, heads, seq,
    head_dim), fp16 or bf16, head_dim 64 / 128 / 256, any seq; sm_scale defaults to
    1/sqrt(head_dim). Differentiable (torch autograd runs the backward kernels). CUDA tensors
    run on the GPU, CPU tensors on the CPU interpreter."""
    if not _FUNCTION:
        _FUNCTION.append(_autograd_function())
    return _FUNCTION[0].apply(q, k, v, bool(causal), sm_scale)

"""The shapes at which tests/gpu/test_examples_attention_gpu.py and benchmarks/attention.py run the
flash-attention examples (tlx.examples.attention), and a Spec for every specialization those runs
launch: each launch of a forward or backward plan (kernel, dtype, constexprs, and which integer
arguments are multiples of 16) at every dtype / head dim / causal combination, for the benchmark
grid and for the ragged shapes. The GPU test checks each launch against `spec_for(launch)`.

Compiling all of them takes minutes (ptxas spends seconds on each of these kernels), so only the
CORE specializations — the benchmark's headline configurations — compile in every CI run; the
others carry `slow` (tests/test_gpu_kernels_compile.py marks them), and `python -m pytest -m slow`
compiles them. Compiled results are kept per process: the resource and fence checks of
tests/test_examples_attention.py reuse what tests/test_gpu_kernels_compile.py compiled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

import numpy as np

from tlx.examples import attention

from . import SPECS, Spec

DTYPES = ["fp16", "bf16"]
HEAD_DIMS = [64, 128, 256]
#: FlashAttention-3's grid: 16k tokens in all (batch = 16384 / seq), hidden size 2048 (heads = 2048 / head_dim)
BENCH_SEQS = [512, 1024, 2048, 4096, 8192, 16384]
#: (batch, seq) with the benchmark's heads: a sequence that ends mid-block (1040 = 8 x 128 + 16), at
#: every combination; and one that is not even a multiple of 16 (its own specialization of the
#: integer arguments) nor of 4 (the backward copies LSE into rows padded for TMA), at head_dim 128
RAGGED_SHAPES = [(2, 1040)]
ODD_SHAPES = [(1, 1001)]
ODD_HEAD_DIMS = [128]
KINDS = ["forward", "persistent", "overlap", "backward"]
#: head dims of the "overlap" forward (`ForwardConfig.OVERLAP_TILES`: at 256 its buffers do not fit)
OVERLAP_HEAD_DIMS = [64, 128]


def bench_shape(seq: int, head_dim: int) -> Tuple[int, int, int, int]:
    """(batch, heads, seq, head_dim) of the benchmark grid at this sequence length."""
    return 16384 // seq, 2048 // head_dim, seq, head_dim


def plan(kind: str, Z: int, H: int, N: int, D: int, dtype: str, causal: bool) -> attention.AttentionLaunch:
    """The plan of `kind` over numpy arrays that are never touched (np.empty: no memory is
    written), with the same kernels, grids, constexprs and integers as a GPU plan of this shape;
    the persistent grid is that of a 132-SM H100 / H200."""
    x = np.empty((Z, H, N, D), np.uint16 if dtype == "bf16" else np.float16)
    if kind == "backward":
        lse = np.empty((Z, H, N), np.float32)
        return attention.plan_backward(x, x, x, x, lse, x, causal)
    return attention.plan_forward(x, x, x, causal, persistent=kind != "forward", config=forward_config(kind, D),
                                  sms=attention.DEFAULT_NUM_SMS)


def forward_config(kind: str, head_dim: int) -> attention.ForwardConfig:
    """The forward config of `kind` ("forward", "persistent": FORWARD_CONFIGS; "overlap":
    OVERLAP_CONFIGS, the config `attention()` and the benchmark run)."""
    return (attention.OVERLAP_CONFIGS if kind == "overlap" else attention.FORWARD_CONFIGS)[head_dim]


@dataclass
class AttentionSpec(Spec):
    """A Spec of an attention example kernel: `slow` ones compile only under ``-m slow``; the
    compile result is kept (one ptxas run per process)."""

    slow: bool = False

    def compile(self) -> Any:
        if self.name not in _COMPILED:
            _COMPILED[self.name] = super().compile()
        return _COMPILED[self.name]


_COMPILED: Dict[str, Any] = {}


def _int_params(launch: attention.KernelLaunch) -> List[Tuple[str, int]]:
    names = [p.name for p in launch.kernel.params if not p.is_constexpr]
    return [(n, a) for n, a in zip(names, launch.args) if isinstance(a, int) and not isinstance(a, bool)]


def _key(launch: attention.KernelLaunch) -> Tuple:
    ints = _int_params(launch)
    return (launch.kernel.__name__, launch.dtype, tuple(sorted(launch.constexprs.items())), launch.num_warps,
            tuple((n, v % 16 == 0, v == 1) for n, v in ints))


#: the benchmark's headline specializations (head_dim 128 and 256, forward and backward): compiled
#: in every CI run
CORE = {
    ("attn_fwd_kernel", "fp16", 128, True), ("attn_fwd_persistent_kernel", "bf16", 128, False),
    ("attn_fwd_kernel", "bf16", 256, True), ("attn_fwd_overlap_kernel", "fp16", 128, True),
    ("attn_bwd_dkdv_kernel", "fp16", 128, True),
    ("attn_bwd_dq_kernel", "fp16", 128, True), ("attn_bwd_preprocess_kernel", "fp16", 128, None),
}

BY_KEY: Dict[Tuple, AttentionSpec] = {}


def _register(kind: str, Z: int, H: int, N: int, D: int, dtype: str, causal: bool, bench: bool) -> None:
    for launch in plan(kind, Z, H, N, D, dtype, causal).launches:
        k = _key(launch)
        if k in BY_KEY:
            continue
        name = launch.kernel.__name__
        core_id = (name, dtype, D, None if name == "attn_bwd_preprocess_kernel" else causal)
        ints = _int_params(launch)
        label = (f"attention {name} {dtype} d{D} {'causal' if causal else 'full'} "
                 f"{'x'.join(map(str, (Z, H, N)))}")
        s = AttentionSpec(label, launch.kernel, launch.signature(), dict(launch.constexprs), launch.num_warps,
                          {**{n: 16 for n, t in launch.signature().items() if t.startswith("*")},
                           **{n: 16 for n, v in ints if v % 16 == 0}},
                          tuple(n for n, v in ints if v == 1), slow=not (bench and core_id in CORE))
        SPECS.append(s)
        BY_KEY[k] = s


for _dtype in DTYPES:
    for _D in HEAD_DIMS:
        for _causal in (False, True):
            for _kind in KINDS:
                if _kind == "overlap" and _D not in OVERLAP_HEAD_DIMS:
                    continue
                for _N in BENCH_SEQS:
                    _register(_kind, *bench_shape(_N, _D)[:3], _D, _dtype, _causal, True)
                for _Z, _N in RAGGED_SHAPES + (ODD_SHAPES if _D in ODD_HEAD_DIMS else []):
                    _register(_kind, _Z, 2048 // _D, _N, _D, _dtype, _causal, False)


def spec_for(launch: attention.KernelLaunch) -> AttentionSpec:
    """The Spec a launch of an attention plan runs (KeyError: CI compiled no such specialization)."""
    return BY_KEY[_key(launch)]

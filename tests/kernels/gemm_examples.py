"""The shapes at which tests/gpu/test_examples_gemm_gpu.py runs the GEMM examples (tlx.examples.gemm),
and a Spec for every specialization those runs launch: kernel, dtype, constexprs (the persistent
kernels' CTA count among them) and which of M, N, K are multiples of 16. The GPU test checks each
launch against `spec_for(plan)`."""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from tlx.examples import gemm

from . import Spec, spec

KINDS = ["pipelined", "ws", "persistent", "pingpong", "streamk"]
PERSISTENT = ("persistent", "pingpong", "streamk")  # kinds whose CTA count is the SM count
DTYPES = ["bf16", "fp16"]
BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 1024, 8192), (1024, 8192, 4096)]
RAGGED_SHAPES = [(1000, 776, 1000), (130, 264, 40), (8192 + 64, 1024 + 8, 520)]
H200_SMS = 132  # what the persistent kernels' CTA count is computed from on the H200 (and the H100 SXM)
# CTAs of the persistent kernels at the 520x392x200 runs below: 10 tiles per CTA on 2; stream-K on 3
# (3 whole waves, the 10th tile's 4 k-tiles split over the 3 CTAs)
FEW_SMS = {"persistent": 2, "pingpong": 2, "streamk": 3}
# what tests/gpu/test_sanitizer.py runs under memcheck, racecheck and synccheck: every example at a
# ragged shape (partial tiles at each edge, one K step), and at one with several K steps where the
# persistent kernels loop over several tiles per CTA: (kind, M, N, K, dtype, sms)
SANITIZE_RUNS = ([(k, 130, 264, 40, "fp16", None) for k in KINDS]
                 + [(k, 520, 392, 200, "bf16", FEW_SMS.get(k)) for k in KINDS])


def _mnk(plan: Any) -> Tuple[int, int, int]:
    """M, N, K of a plan: its last three arguments (the stream-K plan has scratch arrays first)."""
    return tuple(plan.args[-3:])  # type: ignore[return-value]


def _key(plan: Any) -> Tuple:
    M, N, K = _mnk(plan)
    return (plan.kernel.__name__, plan.dtype, tuple(sorted(plan.constexprs.items())), plan.num_warps,
            M % 16 == 0, N % 16 == 0, K % 16 == 0)


def plan(kind: str, M: int, N: int, K: int, dtype: str, sms: Any = None) -> Any:
    """The plan of `kind` for an M x N x K product, over numpy arrays that are never touched (so no
    memory is used): the same kernel, grid, constexprs and integers as the GPU test's plan."""
    np_dtype = np.uint16 if dtype == "bf16" else np.float16
    a, b = np.zeros((M, K), np_dtype), np.zeros((K, N), np_dtype)
    kw = {"sms": sms or H200_SMS} if kind in PERSISTENT else {}
    return gemm.ALL_PLANS[kind](a, b, **kw)


def spec_of_plan(name: str, launch_plan: Any) -> Spec:
    """The Spec of a GEMM example plan: its arguments as the plan specializes them (descriptors as
    tensordesc types, scratch arrays as pointers, M, N, K as i32 divisible by 16 where the plan's
    are), its constexprs, warps and cluster shape."""
    sig, div = launch_plan.specialization()
    return spec(name, launch_plan.kernel, sig, launch_plan.constexprs, launch_plan.num_warps,
                divisible=[n for n in div if sig[n] == "i32"], cluster=launch_plan.cluster)


SPECS: Dict[Tuple, Spec] = {}
for _kind in KINDS:
    for _dtype in DTYPES:
        for _M, _N, _K, _sms in [s + (None,) for s in BENCH_SHAPES + RAGGED_SHAPES] + \
                [r[1:4] + r[5:] for r in SANITIZE_RUNS if r[0] == _kind and r[4] == _dtype]:
            _plan = plan(_kind, _M, _N, _K, _dtype, _sms)
            _k = _key(_plan)
            if _k not in SPECS:
                SPECS[_k] = spec_of_plan(f"GEMM example {_kind} {_dtype} {_M}x{_N}x{_K}", _plan)


def spec_for(launch_plan: Any) -> Spec:
    """The Spec a GEMM example plan launches (KeyError: the CPU test compiled no such specialization)."""
    return SPECS[_key(launch_plan)]

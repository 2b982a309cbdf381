"""The shapes at which tests/gpu/test_examples_gemm_cluster_gpu.py runs the clustered GEMM example
(tlx.examples.gemm.plan_persistent_cluster: 2-CTA clusters, B multicast), and a Spec for every
specialization those runs launch (with its cluster shape), as tests/kernels/gemm_examples.py does
for the other GEMM examples."""

from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from tlx.examples import gemm

from . import Spec
from .gemm_examples import spec_of_plan

DTYPES = ["bf16", "fp16"]
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (1000, 776, 1000), (130, 264, 40)]
H100_SMS = 132


def _key(plan: Any) -> Tuple:
    M, N, K = plan.args[3:6]
    return (plan.dtype, tuple(sorted(plan.constexprs.items())), M % 16 == 0, N % 16 == 0, K % 16 == 0)


def plan(M: int, N: int, K: int, dtype: str) -> Any:
    """The plan for an M x N x K product over untouched numpy arrays (the GPU test's kernel,
    grid, constexprs and cluster)."""
    np_dtype = np.uint16 if dtype == "bf16" else np.float16
    return gemm.plan_persistent_cluster(np.zeros((M, K), np_dtype), np.zeros((K, N), np_dtype), sms=H100_SMS)


SPECS: Dict[Tuple, Spec] = {}
for _dtype in DTYPES:
    for _M, _N, _K in SHAPES:
        _plan = plan(_M, _N, _K, _dtype)
        _k = _key(_plan)
        if _k not in SPECS:
            SPECS[_k] = spec_of_plan(f"GEMM example persistent_cluster {_dtype} {_M}x{_N}x{_K}", _plan)


def spec_for(launch_plan: Any) -> Spec:
    """The Spec a clustered GEMM plan launches (KeyError: the CPU test compiled no such specialization)."""
    return SPECS[_key(launch_plan)]

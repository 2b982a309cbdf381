"""How fast the CPU interpreter runs a 256x256x256 fp16 GEMM (target: <= 2 s on the 2-core CI
machine), for three IR kernels — TMA + wgmma, warp-specialized TMA + wgmma (producer/consumer
partitions on mbarriers), cp.async + wgmma — and, end to end through `tlx.interpret` (trace, fence
passes, interpretation), the @tlx.jit GEMMs of the test catalogue (the TLX tutorial rewrites). The anchor, measured in the same run, is the same
tile schedule written directly in numpy (16 programs x 4 k-steps of fp32 tile products): the
least work any block-level interpreter must do. Prints one row per kernel and the ratio.

    python benchmarks/interpret_speed.py
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import catalog  # noqa: E402
import tlx  # noqa: E402
from interp_kernels import HostDesc, gemm_cp_async, gemm_tma, gemm_ws  # noqa: E402
from tlx.compiler.ir import parse_module  # noqa: E402
from tlx.interpreter import run  # noqa: E402

M = N = K = 256
BM = BN = BK = 64
TARGET_S = 2.0


def best_of(fn, n=3):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def anchor(a, b, c):
    for pm in range(M // BM):
        for pn in range(N // BN):
            acc = np.zeros((BM, BN), np.float32)
            for k in range(0, K, BK):
                acc += a[pm * BM:(pm + 1) * BM, k:k + BK].astype(np.float32) @ b[k:k + BK, pn * BN:(pn + 1) * BN].astype(np.float32)
            c[pm * BM:(pm + 1) * BM, pn * BN:(pn + 1) * BN] = acc.astype(np.float16)


def main() -> int:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c16 = np.zeros((M, N), np.float16)
    t_anchor = best_of(lambda: anchor(a, b, c16))
    descs = lambda c: [HostDesc.of(a, (BM, BK)), HostDesc.of(b, (BK, BN)), HostDesc.of(c, (BM, BN)), K]  # noqa: E731
    cases = [
        ("tma+wgmma", parse_module(gemm_tma(BM, BN, BK, stages=2)), np.float16, descs),
        ("ws tma+wgmma", parse_module(gemm_ws(BM, BN, BK, stages=2)), np.float16, descs),
        ("cp.async+wgmma", parse_module(gemm_cp_async(BM, BN, BK)), np.float32, lambda c: [a, b, c, M, N, K]),
    ]
    print(f"{'kernel':<18} {'interp s':>9} {'anchor s':>9} {'ratio':>7} {'max rel err':>12}  target <= {TARGET_S} s")
    ok = True
    for name, mod, dt, mkargs in cases:
        c = np.full((M, N), np.nan, dt)
        t = best_of(lambda: run(mod, (M // BM, N // BN), mkargs(c)))
        err = np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max()
        ok &= t <= TARGET_S and err < 2e-3
        print(f"{name:<18} {t:9.3f} {t_anchor:9.4f} {t / t_anchor:7.1f} {err:12.2e}  {'ok' if t <= TARGET_S else 'SLOW'}")
    jit_cases = [
        ("tlx_gemm_pipelined", (2,), np.float16, lambda c: (a, b, c, M, N, K, K, 1, N, 1, N, 1)),
        ("tlx_gemm_ws", (2,), np.float16,
         lambda c: (HostDesc.of(a, (64, 64)), HostDesc.of(b, (64, 256)), HostDesc.of(c, (64, 256)), M, N, K)),
        ("tma_gemm_pipelined", (2,), np.float16,
         lambda c: (HostDesc.of(a, (128, 64)), HostDesc.of(b, (64, 256)), HostDesc.of(c, (128, 256)), M, N, K)),
        ("dot_matmul", (4, 4), np.float16, lambda c: (a, b, c, M, N, K, K, N, N)),
    ]
    for name, grid, dt, mkargs in jit_cases:
        case = catalog.CASES_BY_NAME[name]
        c = np.full((M, N), np.nan, dt)
        t = best_of(lambda: tlx.interpret(case.fn, grid, *mkargs(c), num_warps=case.num_warps, **case.constexprs))
        err = np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max()
        ok &= t <= TARGET_S and err < 2e-3
        print(f"{name:<18} {t:9.3f} {t_anchor:9.4f} {t / t_anchor:7.1f} {err:12.2e}  {'ok' if t <= TARGET_S else 'SLOW'}"
              "  (@tlx.jit: trace + passes + run)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Tracing time of the pipelined and warp-specialized GEMM kernels (Python source -> verified IR).

Target (issue 2): <= 10 ms each on the 2-core development machine. Run:
    python benchmarks/trace_speed.py
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import catalog  # noqa: E402

TARGET_MS = 10.0
KERNELS = ["tlx_gemm_pipelined", "tlx_gemm_ws", "tlx_fa_fwd", "tma_gemm_pipelined"]


def main() -> int:
    rows = []
    for name in KERNELS:
        case = catalog.CASES_BY_NAME[name]
        case.trace()  # first trace parses the source; later ones reuse the AST
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            m = case.trace()
            times.append((time.perf_counter() - t0) * 1e3)
        rows.append((name, len(list(m.ops())), statistics.median(times), min(times)))
    print(f"{'kernel':24s} {'ops':>5s} {'median ms':>10s} {'min ms':>8s} {'target':>8s}")
    ok = True
    for name, nops, med, mn in rows:
        flag = "ok" if med <= TARGET_MS else "SLOW"
        ok &= med <= TARGET_MS or name not in ("tlx_gemm_pipelined", "tlx_gemm_ws")
        print(f"{name:24s} {nops:5d} {med:10.2f} {mn:8.2f} {TARGET_MS:6.0f} ms {flag}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

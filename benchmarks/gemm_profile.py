#!/usr/bin/env python3
"""GEMM efficiency per clock, and a hook for Nsight Compute (H100/H200).

A power-limited H100 runs every GEMM at whatever clock its power allows, so TFLOP/s alone
cannot tell a kernel that does more work per cycle from one that happens to run on cooler,
faster clocks. Default mode: at 8192^3, bf16 then fp16, each kernel (cuBLAS through
torch.matmul, Triton's TMA matmul from `gemm.py`, and our pipelined, warp-specialized,
persistent and 2-CTA cluster GEMMs) runs back to back for ~2 s while `nvidia-smi` samples
the SM clock and the board power every 50 ms. It prints TFLOP/s, the mean clock and power, and
TFLOP/s per GHz with its ratio to cuBLAS's in the same round (two rounds, so a drifting
clock shows). Run from the repository root on the GPU machine::

    python3 -m pip install -q --no-deps --no-build-isolation -e . && python3 benchmarks/gemm_profile.py

``--ncu``: one launch of each kernel (after warm-up) between cudaProfilerStart/Stop, for
Nsight Compute at its locked clock, e.g. the stall samples per SASS instruction::

    ncu --profile-from-start off --section WarpStateStats --section SourceCounters -o gemm \\
        python3 benchmarks/gemm_profile.py --ncu
    ncu -i gemm.ncu-rep --page source --print-source sass > gemm_sass.txt

What it measured is in docs/performance.md (GEMM, "Profile").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gemm.py's Triton matmul

SIZE = 8192
SECONDS = 2.0  # per kernel and round
SAMPLE_MS = 50


def kernels(a: Any, b: Any, c: Any) -> Dict[str, Callable[[], Any]]:
    """name -> a launch of c = a @ b: the anchor (cuBLAS) first."""
    import torch

    import gemm as bench
    from tlx.examples import gemm

    triton_run = bench.triton_matmul_factory()
    runs: Dict[str, Callable[[], Any]] = {"cublas": lambda: torch.matmul(a, b, out=c),
                                          "triton": lambda: triton_run(a, b, c)}
    for name in ("pipelined", "ws", "persistent", "persistent_cluster"):
        runs[name] = getattr(gemm, "plan_" + name)(a, b, out=c).run
    return runs


def sample_clock_power(stop: threading.Event, out: List[Tuple[float, float]]) -> None:
    """Append (SM MHz, W) samples from nvidia-smi until `stop` is set."""
    proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                             "-lms", str(SAMPLE_MS)], stdout=subprocess.PIPE, text=True)
    try:
        while not stop.is_set():
            fields = proc.stdout.readline().split(",")  # type: ignore[union-attr]
            if len(fields) == 2:
                try:
                    out.append((float(fields[0]), float(fields[1])))
                except ValueError:
                    pass  # "[N/A]" on a GPU that does not report one of them
    finally:
        proc.terminate()


def run_for(f: Callable[[], Any], ms_per_launch: float) -> Tuple[float, float, float]:
    """Launch `f` back to back for ~SECONDS: (ms per launch, mean SM MHz, mean W) over the
    samples taken while the launches ran (the first and last few dropped)."""
    import torch

    samples: List[Tuple[float, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_clock_power, args=(stop, samples))
    sampler.start()
    time.sleep(0.3)  # nvidia-smi's first samples
    n = max(10, int(SECONDS * 1000 / ms_per_launch))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    first = len(samples)
    start.record()
    for _ in range(n):
        f()
    end.record()
    torch.cuda.synchronize()
    last = len(samples)
    stop.set()
    sampler.join()
    during = samples[first + 2:last - 1] or samples[first:last] or samples
    clock = sum(s[0] for s in during) / max(1, len(during))
    power = sum(s[1] for s in during) / max(1, len(during))
    return start.elapsed_time(end) / n, clock, power


def per_clock(dtypes: List[str]) -> None:
    """The default mode: TFLOP/s, clock, power and TFLOP/s per GHz of every kernel."""
    import torch

    flop = 2.0 * SIZE ** 3
    for dt in dtypes:
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dt]
        a = torch.randn(SIZE, SIZE, device="cuda").to(tdt)
        b = torch.randn(SIZE, SIZE, device="cuda").to(tdt)
        c = torch.empty(SIZE, SIZE, device="cuda", dtype=tdt)
        runs = kernels(a, b, c)
        for rnd in range(2):
            anchor = None
            for name, f in runs.items():
                for _ in range(5):
                    f()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                f()
                torch.cuda.synchronize()
                ms, clock, power = run_for(f, max(0.05, (time.perf_counter() - t0) * 1000))
                tflops = flop / ms / 1e9
                per_ghz = tflops / (clock / 1000) if clock else float("nan")
                anchor = per_ghz if name == "cublas" else anchor
                ratio = f"{100 * per_ghz / anchor:5.1f} % of cuBLAS per GHz" if anchor and name != "cublas" else ""
                print(f"{dt} round {rnd} {name:20s} {tflops:6.0f} TFLOP/s  {clock:5.0f} MHz  {power:4.0f} W  "
                      f"{per_ghz:5.1f} TFLOP/s per GHz  {ratio}", flush=True)


def for_ncu() -> None:
    """--ncu: warm every kernel up, then one launch of each inside the profiler range."""
    import torch

    a = torch.randn(SIZE, SIZE, device="cuda").to(torch.bfloat16)
    b = torch.randn(SIZE, SIZE, device="cuda").to(torch.bfloat16)
    c = torch.empty(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    runs = kernels(a, b, c)
    for f in runs.values():
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for f in runs.values():
        f()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("profiled:", ", ".join(runs))


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description="GEMM TFLOP/s per GHz against cuBLAS; --ncu for Nsight Compute")
    ap.add_argument("--ncu", action="store_true", help="one launch of each kernel in a cudaProfilerStart range")
    ap.add_argument("--dtypes", default="bf16,fp16", help="comma-separated: bf16, fp16")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gemm_profile.py needs a CUDA GPU (sm_90); nothing measured")
        return 2
    if args.ncu:
        for_ncu()
    else:
        per_clock(args.dtypes.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())

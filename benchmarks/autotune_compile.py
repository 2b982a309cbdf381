"""Does compiling autotuning configs in a thread pool pay? tlx.autotune compiles every config
before timing, in a pool of os.cpu_count() threads; tracing, the passes and PTX generation hold
the GIL, ptxas (a child process) does not. This compiles the warp-specialized GEMM (TMA +
wgmma, tests/tlx_sources/gemm_ws_tlx.py) in 8 configs, one after another (the anchor) and in
pools of 2 and 4 threads, in the same run, and prints each time and its ratio to the anchor,
plus how a compile splits between Python and ptxas.

    python benchmarks/autotune_compile.py          # 3 rounds
    TLX_BENCH_ROUNDS=5 python benchmarks/autotune_compile.py

Wall times: a pool can only use idle cores, so on a shared machine the ratio says as much about
the neighbours as about the pool (the load average is printed with each round).
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

ROUNDS = int(os.environ.get("TLX_BENCH_ROUNDS", "3"))


def configs():
    """(signature, constexprs) of 8 GEMM configs that fit in shared memory."""
    out = []
    for groups, bm_split in ((2, 64), (1, 128)):
        for bn in (128, 256):
            for stages in (2, 3):
                sig = {"a_desc": f"tensordesc<fp16[{bm_split}, 64]>", "b_desc": f"tensordesc<fp16[64, {bn}]>",
                       "c_desc": f"tensordesc<fp16[{bm_split}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
                out.append((sig, {"BM": 128, "BN": bn, "BK": 64, "STAGES": stages, "GROUPS": groups}))
    return out


def main() -> int:
    import tlx
    from catalog import load_tlx_source
    from tlx.compiler.analysis import layout_math
    from tlx.compiler.ptxas import assemble, find_ptxas

    if find_ptxas() is None:
        print("ptxas not found: nothing to measure (the pool overlaps ptxas runs)")
        return 1
    kernel = load_tlx_source("gemm_ws_tlx.py").gemm_ws_kernel
    jobs = configs()
    div = {"M": 16, "N": 16, "K": 16}

    def compile_one(job):
        sig, consts = job
        k = tlx.compile(kernel, signature=sig, constexprs=consts, num_warps=4, divisibility=div)
        assert k.asm.get("cubin")

    def clear():  # every round compiles cold
        for f in (layout_math.to_map, layout_math.shared_map, layout_math._reg_coords, layout_math._reg_index):
            f.cache_clear()

    compile_one(jobs[0])  # imports and first-use costs out of the way
    python_ms, ptxas_ms = [], []
    for sig, consts in jobs:
        t0 = time.perf_counter()
        k = tlx.compile(kernel, signature=sig, constexprs=consts, num_warps=4, divisibility=div, assemble=False)
        python_ms.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        assemble(k.asm["ptx"])
        ptxas_ms.append((time.perf_counter() - t0) * 1e3)
    py, px = sum(python_ms) / len(jobs), sum(ptxas_ms) / len(jobs)
    print(f"one config: {py:.0f} ms trace -> PTX (holds the GIL), {px:.0f} ms ptxas (does not): "
          f"{100 * px / (py + px):.0f} % of a compile can overlap")
    print(f"{os.cpu_count()} CPUs; {len(jobs)} configs a round")
    for r in range(ROUNDS):
        times = {}
        for workers in (1, 2, 4):
            clear()
            t0 = time.perf_counter()
            if workers == 1:
                for j in jobs:
                    compile_one(j)
            else:
                with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                    list(pool.map(compile_one, jobs))
            times[workers] = time.perf_counter() - t0
        load = os.getloadavg()[0]
        print(f"round {r}: one after another {times[1]:.2f} s (anchor); pool of 2 {times[2]:.2f} s "
              f"({times[1] / times[2]:.2f}x); pool of 4 {times[4]:.2f} s ({times[1] / times[4]:.2f}x); load {load:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Launch overhead: host microseconds per launch of an empty kernel and of a four-argument
kernel (three tensors + an int), launched in a Python loop, through

* raw ``cuda.bindings.driver.cuLaunchKernelEx`` with a prebuilt config and pre-packed
  arguments — the anchor, measured in the same run (every ratio is against it);
* the bare runtime: ``tlx.runtime.Launcher.launch(grid, args)`` on hand-written PTX, and
  ``bind`` + ``Launcher.launch_bound`` (key and values in one pass: the frontend's path);
* the full frontend path: ``kernel[grid](...)`` of an ``@tlx.jit`` kernel (specialization key,
  cache lookup, launcher) — reported as n/a until the frontend can launch;
* Triton ``@triton.jit`` on the same machine, when installed.

Target (issue 5): <= 4 us per launch. Run from the repository root on the GPU machine::

    python3 benchmarks/launch_overhead.py [--n 20000]

Each figure is the median of 3 timed loops of N launches after a warm-up, synchronizing at the
end of each loop (launches are host-bound: the GPU finishes each empty kernel long before the
next is enqueued). Differences under ~0.3 us are noise.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import sys
import time
from typing import Any, Callable, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_US = 4.0


def _smoke() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_runtime_smoke",
                                                  os.path.join(ROOT, "scripts", "gpu_runtime_smoke.py"))
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    mod._ensure_importable()
    return mod


def time_loop(fn: Callable[[], Any], n: int, sync: Callable[[], Any]) -> float:
    """Median over 3 loops of `n` calls, in microseconds per call."""
    for _ in range(min(n, 500)):
        fn()
    sync()
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return sorted(runs)[1]


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description="tlx launch overhead")
    ap.add_argument("--n", type=int, default=20000, help="launches per timed loop")
    n = ap.parse_args(argv).n
    smoke = _smoke()
    import torch
    from cuda.bindings import driver as drv

    sync = torch.cuda.synchronize
    a, b, c = (torch.empty(4096, device="cuda") for _ in range(3))
    rows: List[Tuple[str, str, Optional[float]]] = []

    # bare runtime on hand-written PTX
    e0 = smoke._launcher("empty", "empty")
    e4 = smoke._launcher("empty4", "empty")
    e0.load()
    e4.load()
    g = (1,)
    args0: List[Any] = []
    args4 = [a, b, c, 4096]

    # anchor: raw cuLaunchKernelEx
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 128, 1, 1
    cfg.sharedMemBytes = 0
    cfg.hStream = drv.CUstream(0)
    cfg.numAttrs = 0
    L = drv.cuLaunchKernelEx
    h0, h4 = e0.loaded.handle, e4.loaded.handle
    slots = [ctypes.c_uint64(a.data_ptr()), ctypes.c_uint64(b.data_ptr()),
             ctypes.c_uint64(c.data_ptr()), ctypes.c_uint32(4096)]
    ptrs = (ctypes.c_void_p * 4)(*[ctypes.addressof(s) for s in slots])
    addr4 = ctypes.addressof(ptrs)
    raw = {"empty": time_loop(lambda: L(cfg, h0, 0, 0), n, sync),
           "4 args": time_loop(lambda: L(cfg, h4, addr4, 0), n, sync)}
    rows.append(("raw cuLaunchKernelEx (anchor)", "empty", raw["empty"]))
    rows.append(("raw cuLaunchKernelEx (anchor)", "4 args", raw["4 args"]))
    l0, l4 = e0.launch, e4.launch
    rows.append(("tlx.runtime Launcher.launch", "empty", time_loop(lambda: l0(g, args0), n, sync)))
    rows.append(("tlx.runtime Launcher.launch", "4 args", time_loop(lambda: l4(g, args4), n, sync)))
    from tlx.runtime import bind

    lb0, lb4 = e0.launch_bound, e4.launch_bound

    def bound(lb: Any, args: List[Any]) -> Callable[[], None]:
        def run() -> None:
            key, values = bind(args, 0)
            lb(g, values, 0)
        return run

    rows.append(("bind + Launcher.launch_bound", "empty", time_loop(bound(lb0, args0), n, sync)))
    rows.append(("bind + Launcher.launch_bound", "4 args", time_loop(bound(lb4, args4), n, sync)))

    # full frontend path
    note = ""
    try:
        import tlx
        import tlx.language as tl  # noqa: F401

        @tlx.jit
        def empty_kernel():
            pass

        @tlx.jit
        def four_arg_kernel(x_ptr, y_ptr, z_ptr, n):
            pass

        empty_kernel[g]()
        four_arg_kernel[g](a, b, c, 4096)
        sync()
        rows.append(("tlx kernel[grid](...)", "empty", time_loop(lambda: empty_kernel[g](), n, sync)))
        rows.append(("tlx kernel[grid](...)", "4 args",
                     time_loop(lambda: four_arg_kernel[g](a, b, c, 4096), n, sync)))
    except Exception as exc:  # the frontend may not launch yet
        note = f"tlx kernel[grid](...): n/a ({type(exc).__name__}: {str(exc)[:120]})"
        rows.append(("tlx kernel[grid](...)", "empty", None))
        rows.append(("tlx kernel[grid](...)", "4 args", None))

    try:
        import triton

        @triton.jit
        def t_empty():
            pass

        @triton.jit
        def t_four(x, y, z, n):
            pass

        rows.append(("Triton @triton.jit", "empty", time_loop(lambda: t_empty[g](), n, sync)))
        rows.append(("Triton @triton.jit", "4 args", time_loop(lambda: t_four[g](a, b, c, 4096), n, sync)))
    except Exception as exc:
        note += f"\nTriton: n/a ({type(exc).__name__}: {str(exc)[:120]})"

    print(f"\n== launch overhead, {n} launches x 3, median (us per launch) ==")
    print(f"{'path':<34} {'kernel':<8} {'us':>7} {'x raw':>7} {'<= 4 us':>8}")
    for path, kernel, us in rows:
        if us is None:
            print(f"{path:<34} {kernel:<8} {'n/a':>7}")
            continue
        print(f"{path:<34} {kernel:<8} {us:>7.2f} {us / raw[kernel]:>7.2f} "
              f"{'yes' if us <= TARGET_US else 'no':>8}")
    if note:
        print(note.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Child process of tests/test_peer_tutorials.py: import one converted tutorial file on a CPU (with the
stand-ins of tests/peer_tutorials.py) and compile, for sm_90a with ptxas, every config of every
autotune list it launches.

    python tests/peer_tutorial_compile.py CONVERTED_TUTORIALS_DIR STEM [--configs all|cover|N]

The tutorial's own host function builds the arguments (descriptors, strides, grids) at a small
shape; each `@tlx.autotune` kernel's launch is taken as the arguments to compile with instead of
running, and every config of its list is compiled by `JITFunction.warmup`, after that config's
`pre_hook` ran on private copies of the descriptors (as Triton's autotuner does), in a thread pool
(`--configs cover`: only configs that together take every value of every parameter).
Prints one line `PEER-COMPILE {json}`: per kernel, the configs compiled and those that failed."""

from __future__ import annotations

import concurrent.futures
import copy
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_tutorials  # noqa: E402


def host_calls(mod: Any, stem: str) -> List[Callable[[], Any]]:
    """The tutorial's host functions at small shapes, reaching each of its autotuned kernels."""
    import torch

    def mats(m: int, n: int, k: int) -> Tuple[Any, Any]:
        return torch.randn((m, k), dtype=torch.float16), torch.randn((k, n), dtype=torch.float16)

    if "_fa_" in stem:
        q, k, v = (torch.randn((1, 2, 256, 128), dtype=torch.float16) for _ in range(3))
        return [lambda: mod.attention(q, k, v, 0.5)]
    if "persistent-gemm" in stem:
        return [lambda: mod.matmul_tlx_ws_persistent(*mats(512, 512, 512))]
    if stem == "hopper_gemm_ws":  # the square kernel, and the two skinny paths (min(M, N) <= 256)
        return [lambda: mod.matmul(*mats(512, 512, 512)), lambda: mod.matmul(*mats(128, 4096, 1024)),
                lambda: mod.matmul(*mats(128, 4096, 16384))]
    return [lambda: mod.matmul(*mats(512, 512, 512))]


def covering(configs: List[Any]) -> List[Any]:
    """The first configs, in list order, that together hold every value of every parameter (each
    meta-parameter and launch option at least once): the quick run's sample of a long list."""
    seen: set = set()
    picked = []
    for c in configs:
        pairs = {(k, repr(v)) for k, v in c.all_kwargs().items()}
        if not pairs <= seen:
            picked.append(c)
            seen |= pairs
    return picked


def _private(value: Any) -> Any:
    """A copy of a host descriptor (the only argument a pre_hook changes in place)."""
    return copy.copy(value) if hasattr(value, "block_shape") else value


def compile_config(tuner: Any, grid: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], config: Any) -> Any:
    call_args = [_private(a) for a in args]
    call_kwargs = {k: _private(v) for k, v in {**kwargs, **config.all_kwargs()}.items()}
    if config.pre_hook is not None:
        config.pre_hook({**dict(zip(tuner.arg_names, call_args)), **call_kwargs})
    compiled = tuner.fn.warmup(*call_args, grid=grid, **call_kwargs)
    if not compiled.asm.get("cubin"):
        raise RuntimeError("no cubin: ptxas did not assemble the PTX")
    return compiled


def main() -> int:
    tutorials, stem = Path(sys.argv[1]), sys.argv[2]
    limit = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--configs" else "all"
    result: Dict[str, Any] = {"tutorial": stem, "kernels": {}, "error": ""}
    t0 = time.perf_counter()
    try:
        peer_tutorials.stand_ins()
        mod = peer_tutorials.load_tutorial(tutorials, stem)
        launches: List[Tuple[str, Any, Any, Tuple[Any, ...], Dict[str, Any]]] = []
        for name, tuner in peer_tutorials.autotuners(mod).items():
            def capture(grid: Any, *args: Any, _name: str = name, _tuner: Any = tuner, **kwargs: Any) -> None:
                launches.append((_name, _tuner, grid, args, kwargs))
            tuner.run = capture  # the launch becomes: compile every config with these arguments
        for call in host_calls(mod, stem):
            call()
        jobs = []
        for name, tuner, grid, args, kwargs in launches:
            configs = list(tuner.configs) if limit == "all" else covering(tuner.configs) if limit == "cover" else \
                tuner.configs[:int(limit)]
            result["kernels"][name] = {"configs": len(tuner.configs), "tried": len(configs), "compiled": 0,
                                       "failed": [], "values": sorted({f"{k}={v!r}" for c in configs
                                                                       for k, v in c.all_kwargs().items()})}
            jobs += [(name, tuner, grid, args, kwargs, c) for c in configs]

        def run(job: Tuple[Any, ...]) -> Tuple[str, Any, str]:
            name, tuner, grid, args, kwargs, c = job
            try:
                compile_config(tuner, grid, args, kwargs, c)
                return name, c, ""
            except Exception as e:  # noqa: BLE001  (reported per config, the test fails on any)
                first = (str(e).strip().splitlines() or [""])[0]
                return name, c, f"{type(e).__name__}: {first}"[:400]

        with concurrent.futures.ThreadPoolExecutor(max(1, os.cpu_count() or 1)) as pool:
            for name, c, error in pool.map(run, jobs):
                entry = result["kernels"][name]
                if error:
                    entry["failed"].append(f"{c}: {error}")
                else:
                    entry["compiled"] += 1
    except Exception:  # noqa: BLE001
        result["error"] = traceback.format_exc()[-3000:]
    result["seconds"] = round(time.perf_counter() - t0, 1)
    print("PEER-COMPILE " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

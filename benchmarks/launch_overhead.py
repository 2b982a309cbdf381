#!/usr/bin/env python3
"""Launch overhead: host microseconds per launch of an empty kernel and of a four-argument
kernel (three tensors + an int), launched in a Python loop, through

* raw ``cuda.bindings.driver.cuLaunchKernelEx`` with a prebuilt config and pre-packed
  arguments — the anchor, measured in the same run (every ratio is against it);
* the native launch alone (``tlx.runtime.native_launch``: one C call that packs the arguments
  from the specialization's spec and calls the driver) — the floor under tlx's launches;
* the runtime's ``Launcher.launch(grid, args)`` on hand-written PTX (through the native launch,
  and once more through cuda.bindings, as with ``TLX_NATIVE_LAUNCH=0``);
* the full frontend path: ``kernel[grid](...)`` of an ``@tlx.jit`` kernel — one native call
  that reads torch's current stream, checks the arguments against the guard of the last
  specialization (``tlx.specialize.guard_of``) and launches; the rows after it say where its
  time goes beyond the driver call (``key_of``, the call key a guard miss computes, for scale);
* Triton ``@triton.jit`` on the same machine, when installed.

Targets (issue 30): ``kernel[grid](...)`` with four arguments within 1.25x of the raw anchor,
and at least 2.5x faster than Triton. Run from the repository root on the GPU machine::

    python3 benchmarks/launch_overhead.py [--n 2000] [--rounds 25]

Rows are timed interleaved: ``--rounds`` rounds, each one loop of N launches of every row in
turn, synchronizing at the end of each loop (launches are host-bound: the GPU finishes each
empty kernel long before the next is enqueued). Each round times the three rows the targets
compare (raw, ``kernel[grid](...)`` and Triton, 4 arguments) back to back, and every other round
visits the rows in reverse order, so a round's three loops see the same host. The host is shared
and its speed drifts from one round to the next: each row reports its best round (the code's own
cost) and its median round; each ratio is taken per round (a row's loop over the raw loop of the
same round) and reported as the median over the rounds, with the ratio of the best rounds beside
it. The targets are judged on the per-round medians, so a disturbed spell, which slows a round's
rows alike, moves neither target.

Without a GPU, ``--cpu-only`` times the same layers with ``cuLaunchKernelEx`` replaced by a C
no-op behind the native launch and torch tensors by look-alikes: each row minus the anchor
(the native launch's own call) is the Python cost tlx adds to it, so a change's gain can be
measured on any machine::

    python3 benchmarks/launch_overhead.py --cpu-only [--n 2000] [--rounds 25]
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import statistics
import sys
import time
import types
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAW_RATIO_TARGET = 1.25  # kernel[grid](...) with four arguments, over the raw anchor
TRITON_SPEEDUP_TARGET = 2.5


def _empty_launchers() -> Tuple[Any, Any]:
    """Two `tlx.runtime.Launcher`s for the bare-runtime rows, of kernels that do nothing (one with
    no argument, one with three pointers and an int), compiled by tlx (no frontend at launch)."""
    import tlx
    from tlx.runtime.launcher import Launcher

    @tlx.jit
    def empty():
        pass

    @tlx.jit
    def empty4(a_ptr, b_ptr, c_ptr, n):
        pass

    out = []
    for fn, sig in ((empty, {}), (empty4, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "n": "i32"})):
        k = tlx.compile(fn, sig)
        out.append(Launcher(k.abi, ptx=k.asm["ptx"], cubin=k.asm.get("cubin")))
    return out[0], out[1]


class Timed:
    """One row's timing, taken later by `run_timings` (rows are timed interleaved): `runs` holds
    its microseconds per call, one entry per round."""

    def __init__(self, fn: Callable[[], Any], sync: Callable[[], Any]):
        self.fn, self.sync = fn, sync
        self.runs: List[float] = []

    @property
    def best(self) -> float:
        return min(self.runs)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


_PENDING: List[Timed] = []


def time_loop(fn: Callable[[], Any], sync: Callable[[], Any]) -> Timed:
    """Register `fn` (one launch) for timing; `sync` ends each timed loop."""
    t = Timed(fn, sync)
    _PENDING.append(t)
    return t


def run_timings(n: int, rounds: int, together: Sequence[Timed] = ()) -> None:
    """Time every registered row: `rounds` rounds, each one loop of `n` calls of every row in
    turn, synchronizing at the end of each loop; microseconds per call. The rows `together`
    (those a target compares) are timed first and back to back; odd rounds go through the rows
    in reverse order, so that drift within a round does not always favour the same row."""
    order = list(together) + [t for t in _PENDING if t not in together]
    for t in order:
        for _ in range(min(n, 500)):
            t.fn()
        t.sync()
    loop = range(n)
    for r in range(rounds):
        for t in (order if r % 2 == 0 else order[::-1]):
            fn = t.fn
            t0 = time.perf_counter()
            for _ in loop:
                fn()
            t.sync()
            t.runs.append((time.perf_counter() - t0) / n * 1e6)


def per_round(numerator: Timed, denominator: Timed) -> List[float]:
    """The ratio of two rows' times in each round (both loops of a round saw the same host)."""
    return [a / b for a, b in zip(numerator.runs, denominator.runs)]


def judge(name: str, ratios: Sequence[float], of_bests: float, target: float, at_most: bool) -> Dict[str, Any]:
    """A target's verdict: `ratios` per round, judged on their median against `target` (a
    ceiling when `at_most`, else a floor); `of_bests` (the ratio of the two rows' best rounds)
    is reported beside it."""
    mid = statistics.median(ratios)
    return {"target": name, "limit": target, "at_most": at_most, "per_round": list(ratios), "median": mid,
            "min": min(ratios), "max": max(ratios), "of_bests": of_bests,
            "met": mid <= target if at_most else mid >= target}


def verdict_line(v: Dict[str, Any]) -> str:
    """One printed line per target: the per-round median, their spread and the ratio of bests."""
    return (f"target: {v['target']} {'<=' if v['at_most'] else '>='} {v['limit']}x: {v['median']:.2f}x, the median of "
            f"{len(v['per_round'])} per-round ratios ({v['min']:.2f}-{v['max']:.2f}; best rounds {v['of_bests']:.2f}x) "
            f"({'met' if v['met'] else 'NOT met'})")


# ---------------------------------------------------------------------------------------------
# --cpu-only: the Python cost of every layer, with the driver call faked (no GPU needed).

class _FakeTorchDtype:
    """What the runtime reads of a torch dtype: its str() (`torch.float32`)."""

    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return "torch." + self.name


class Tensor:
    """Looks like a CUDA torch.Tensor to the runtime (class `Tensor` of a `torch` module), with
    C-speed members as torch's are: `is_cuda` and `dtype` are slots, `data_ptr` a builtin."""

    __module__ = "torch"
    __slots__ = ("is_cuda", "dtype", "data_ptr")

    def __init__(self, ptr: int, dtype: _FakeTorchDtype):
        self.is_cuda = True
        self.dtype = dtype
        self.data_ptr = itertools.repeat(ptr).__next__


def _install_fake_torch() -> None:
    """A `torch` module whose current-stream queries are C builtins (device 0, stream 0), so
    `default_stream()` takes the path it takes on the GPU, where torch is imported."""
    fake = types.ModuleType("torch")
    fake._C = types.SimpleNamespace(_cuda_getDevice=itertools.repeat(0).__next__,  # type: ignore[attr-defined]
                                    _cuda_getCurrentRawStream=[0].__getitem__)
    fake.Tensor = Tensor  # type: ignore[attr-defined]
    sys.modules["torch"] = fake


def cpu_main(n: int, rounds: int) -> int:
    """The per-layer Python cost of a launch with `cuLaunchKernelEx` replaced by a C no-op, on
    fake torch tensors: each row minus the anchor is what tlx adds on top of the driver call."""
    import tempfile

    _install_fake_torch()
    os.environ["TLX_CACHE_DIR"] = tempfile.mkdtemp(prefix="tlx-launch-bench-")
    os.environ.pop("TLX_INTERPRET", None)
    import tlx
    from tlx.runtime import native_launch
    from tlx.runtime.launcher import Launcher
    from tlx.runtime.loader import LoadedKernel
    from tlx.runtime.streams import default_stream
    from tlx.specialize import key_of

    module = native_launch.load_module()
    native = native_launch.bind_entry(module.noop_entry())

    def fake_load(self: Any) -> Any:
        if self.loaded is None:
            self.install(LoadedKernel(self.name, None, None, 0x1234, 0, 0, 0), native, lambda *a: (0,))
        return self.loaded

    Launcher.load = fake_load  # type: ignore[method-assign]
    import tlx.launch

    tlx.launch.current_context = lambda kernel=None: None  # the launch path checks for a device first

    f32 = _FakeTorchDtype("float32")
    a, b, c = (Tensor(0x7F00_0000_0000 + i * 0x10000, f32) for i in range(3))
    g = (1,)
    args0: Tuple[Any, ...] = ()
    args4 = (a, b, c, 4096)
    e0, e4 = _empty_launchers()
    e0.load()
    e4.load()
    (n0, spec0), (n4, spec4) = e0.fast, e4.fast

    @tlx.jit
    def empty_kernel():
        pass

    @tlx.jit
    def four_arg_kernel(x_ptr, y_ptr, z_ptr, n):
        pass

    empty_kernel[g]()
    four_arg_kernel[g](a, b, c, 4096)
    (_, guard0, gspec0, *_), (_, guard4, gspec4, *_) = empty_kernel.launch_path.recent[0], four_arg_kernel.launch_path.recent[0]
    env = b"TLX_INTERPRET"
    rows: List[Tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("native launch alone (anchor)", lambda: n0(spec0, g, 0, args0, None), lambda: n4(spec4, g, 0, args4, None)),
        ("Launcher.launch", lambda: e0.launch(g, args0), lambda: e4.launch(g, args4)),
        ("tlx kernel[grid](...)", lambda: empty_kernel[g](), lambda: four_arg_kernel[g](a, b, c, 4096)),
        ("  of which: kernel[grid]", lambda: empty_kernel[g], lambda: four_arg_kernel[g]),
        ("  of which: native + guard + stream", lambda: n0(gspec0, g, None, args0, env, guard0, {}),
         lambda: n4(gspec4, g, None, args4, env, guard4, {})),
        ("  of which: default_stream()", default_stream, default_stream),
        ("  not used: key_of(args)", lambda: key_of(args0), lambda: key_of(args4)),
    ]
    def nothing() -> None:
        pass

    timed = [(name, time_loop(f0, nothing), time_loop(f4, nothing)) for name, f0, f4 in rows]
    run_timings(n, rounds)
    results = [(name, t0.best, t4.best) for name, t0, t4 in timed]
    anchor = results[0][1:]
    print(f"\n== launch overhead, CPU only (cuLaunchKernelEx a C no-op), {n} launches, best of {rounds} "
          "interleaved rounds (us per launch) ==")
    print(f"{'path':<34} {'empty':>7} {'4 args':>7}   {'over anchor: empty':>18} {'4 args':>7}")
    for i, (name, t0, t4) in enumerate(results):
        over = f"{t0 - anchor[0]:>18.2f} {t4 - anchor[1]:>7.2f}" if 0 < i < 3 else ""
        print(f"{name:<34} {t0:>7.2f} {t4:>7.2f}   {over}")
    print("(rows 2-3 minus the anchor are what tlx adds to the native launch; on the GPU add them to "
          "its row there)")
    return 0


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description="tlx launch overhead")
    ap.add_argument("--n", type=int, default=2000, help="launches per timed loop")
    ap.add_argument("--cpu-only", action="store_true",
                    help="no GPU: time each layer's Python cost with cuLaunchKernelEx faked")
    ap.add_argument("--rounds", type=int, default=25, help="interleaved timed loops per row")
    opts = ap.parse_args(argv)
    if opts.cpu_only:
        return cpu_main(opts.n, opts.rounds)
    n = opts.n
    import torch
    from cuda.bindings import driver as drv

    sync = torch.cuda.synchronize
    a, b, c = (torch.empty(4096, device="cuda") for _ in range(3))
    rows: List[Tuple[str, str, Optional[Timed]]] = []

    # the runtime alone, on hand-written PTX
    e0, e4 = _empty_launchers()
    e0.load()
    e4.load()
    g = (1,)
    args0: Tuple[Any, ...] = ()
    args4 = (a, b, c, 4096)

    # anchor: raw cuLaunchKernelEx, everything prepared
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
    raw = {"empty": time_loop(lambda: L(cfg, h0, 0, 0), sync), "4 args": time_loop(lambda: L(cfg, h4, addr4, 0), sync)}
    rows.append(("raw cuLaunchKernelEx (anchor)", "empty", raw["empty"]))
    rows.append(("raw cuLaunchKernelEx (anchor)", "4 args", raw["4 args"]))
    from tlx.runtime import native_launch

    entry_status = native_launch.status()
    if e4.fast is not None:
        (n0, spec0), (n4, spec4) = e0.fast, e4.fast
        rows.append(("native launch alone", "empty", time_loop(lambda: n0(spec0, g, 0, args0, None), sync)))
        rows.append(("native launch alone", "4 args", time_loop(lambda: n4(spec4, g, 0, args4, None), sync)))
    rows.append(("tlx.runtime Launcher.launch", "empty", time_loop(lambda: e0.launch(g, args0), sync)))
    rows.append(("tlx.runtime Launcher.launch", "4 args", time_loop(lambda: e4.launch(g, args4), sync)))
    b0, b4 = _empty_launchers()
    for via_bindings, loaded in ((b0, e0), (b4, e4)):  # the same kernels, as with TLX_NATIVE_LAUNCH=0
        via_bindings.install(loaded.loaded, None, drv.cuLaunchKernelEx)
    rows.append(("  same via cuda.bindings", "empty", time_loop(lambda: b0.launch(g, args0), sync)))
    rows.append(("  same via cuda.bindings", "4 args", time_loop(lambda: b4.launch(g, args4), sync)))

    # the full frontend path
    note = ""
    kernels: Tuple[Any, Any] = (None, None)
    try:
        import tlx
        from tlx.runtime.streams import default_stream
        from tlx.specialize import key_of

        @tlx.jit
        def empty_kernel():
            pass

        @tlx.jit
        def four_arg_kernel(x_ptr, y_ptr, z_ptr, n):
            pass

        empty_kernel[g]()
        four_arg_kernel[g](a, b, c, 4096)
        sync()
        kernels = (empty_kernel, four_arg_kernel)
        rows.append(("tlx kernel[grid](...)", "empty", time_loop(lambda: empty_kernel[g](), sync)))
        rows.append(("tlx kernel[grid](...)", "4 args", time_loop(lambda: four_arg_kernel[g](a, b, c, 4096), sync)))
        # where kernel[grid]'s time goes beyond the driver call (each also costs one Python call
        # of the timing loop, the first row)
        nat, guard4, gspec4 = four_arg_kernel.launch_path.recent[0][:3]
        env, no_kw = b"TLX_INTERPRET", {}
        for label, fn in (("  of which: a Python call (loop)", lambda: None),
                          ("  of which: kernel[grid]", lambda: four_arg_kernel[g]),
                          ("  of which: native + guard + stream", lambda: nat(gspec4, g, None, args4, env, guard4, no_kw)),
                          ("  of which: torch's current stream", default_stream),
                          ("  not used: key_of(args)", lambda: key_of(args4))):
            rows.append((label, "4 args", time_loop(fn, lambda: None)))
    except Exception as exc:  # the frontend may fail here: report it, time the rest
        note = f"tlx kernel[grid](...): n/a ({type(exc).__name__}: {str(exc)[:120]})"
        rows.append(("tlx kernel[grid](...)", "empty", None))
        rows.append(("tlx kernel[grid](...)", "4 args", None))

    triton_rows: dict = {}
    try:
        import triton

        @triton.jit
        def t_empty():
            pass

        @triton.jit
        def t_four(x, y, z, n):
            pass

        triton_rows = {"empty": time_loop(lambda: t_empty[g](), sync),
                       "4 args": time_loop(lambda: t_four[g](a, b, c, 4096), sync)}
        rows.append(("Triton @triton.jit", "empty", triton_rows["empty"]))
        rows.append(("Triton @triton.jit", "4 args", triton_rows["4 args"]))
    except Exception as exc:
        note += f"\nTriton: n/a ({type(exc).__name__}: {str(exc)[:120]})"

    tlx4 = next((t for p, k, t in rows if p == "tlx kernel[grid](...)" and k == "4 args"), None)
    triton4 = triton_rows.get("4 args")
    run_timings(n, opts.rounds, together=[t for t in (raw["4 args"], tlx4, triton4) if t is not None])
    if kernels[1] is not None:
        note += (f"\ngeneral-path calls (first launches): empty {kernels[0].launch_path.misses}, "
                 f"4 args {kernels[1].launch_path.misses}")
    targets = target_verdicts(raw["4 args"], tlx4, triton4)
    print(f"\n== launch overhead, {opts.rounds} interleaved rounds of {n} launches per row (us per launch) ==")
    print(table(rows, raw))
    for v in targets:
        print(verdict_line(v))
    print(f"launch entry: {entry_status}")
    if note:
        print(note.strip())
    os.makedirs(os.path.join(ROOT, "benchmarks", "results"), exist_ok=True)
    out = os.path.join(ROOT, "benchmarks", "results", time.strftime("launch_overhead-%Y%m%d-%H%M%S.json"))
    with open(out, "w") as f:
        json.dump({"n": n, "rounds": opts.rounds, "entry": entry_status, "gpu": torch.cuda.get_device_name(),
                   "rows": [row_record(p, k, t, raw[k]) for p, k, t in rows], "targets": targets}, f, indent=1)
    print(f"wrote {os.path.relpath(out, ROOT)}")
    return 0


def target_verdicts(raw4: Timed, tlx4: Optional[Timed], triton4: Optional[Timed]) -> List[Dict[str, Any]]:
    """The two targets of issue 30, each judged on the median of its per-round ratios."""
    if tlx4 is None:
        return []
    out = [judge("kernel[grid](...) with 4 arguments over raw", per_round(tlx4, raw4), tlx4.best / raw4.best,
                 RAW_RATIO_TARGET, at_most=True)]
    if triton4 is not None:
        out.append(judge("faster than Triton", per_round(triton4, tlx4), triton4.best / tlx4.best,
                         TRITON_SPEEDUP_TARGET, at_most=False))
    return out


def table(rows: Sequence[Tuple[str, str, Optional[Timed]]], raw: Dict[str, Timed]) -> str:
    """The result table: per row its best and median round, and against the raw row of its
    kernel the ratio of best rounds and the median of the per-round ratios (not for the
    "of which" rows, which time a part of a launch)."""
    lines = [f"{'path':<34} {'kernel':<8} {'best':>7} {'median':>7} {'x raw':>7} {'x raw/rd':>8}"]
    for path, kernel, t in rows:
        if t is None:
            lines.append(f"{path:<34} {kernel:<8} {'n/a':>7}")
        elif path.startswith(("  of which", "  not used")):
            lines.append(f"{path:<34} {kernel:<8} {t.best:>7.2f} {t.median:>7.2f}")
        else:
            mid = statistics.median(per_round(t, raw[kernel]))
            lines.append(f"{path:<34} {kernel:<8} {t.best:>7.2f} {t.median:>7.2f} {t.best / raw[kernel].best:>7.2f} "
                         f"{mid:>8.2f}")
    lines.append("(best: the least disturbed round; median: the typical one; x raw: best over the raw row's best; "
                 "x raw/rd: the median over rounds of the row's time over the raw row's in the same round)")
    return "\n".join(lines)


def row_record(path: str, kernel: str, t: Optional[Timed], raw: Timed) -> Dict[str, Any]:
    """A row in the JSON: best (`us`) and median round, every round, and the per-round ratios to raw."""
    rec: Dict[str, Any] = {"path": path, "kernel": kernel, "us": t.best if t else None,
                           "median_us": t.median if t else None, "runs_us": t.runs if t else None}
    if t is not None and not path.startswith(("  of which", "  not used")):
        rec["x_raw_per_round"] = per_round(t, raw)
    return rec


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""TFLOP/s of the real TLX's Hopper tutorials running on tlx, against torch in the same run: the four
FA tutorials against torch SDPA on its cuDNN backend, the four GEMM tutorials against cuBLAS
(torch.matmul). Measured as the peer's `tutorials/testing/test_hopper_{fa,gemm}_perf.py` measure:
`do_bench` with quantiles (0.5, 0.2, 0.8), the median reported; FA fp16, non-causal, sm_scale 1.3,
B=4, H=32, D=128, N_CTX 1k-8k, 4·B·H·N_CTX²·D FLOPs; GEMM fp16 M=N=K, 2·M·N·K FLOPs. Each
tutorial's first call (compile and autotune) is outside the timing, and its output is checked
against the anchor's (max abs error, WRONG in the table beyond 1e-2 for FA, 1e-2·sqrt(K) for GEMM).
The two persistent GEMM tutorials call the triton fork's `GPUTarget.is_cuda_backend()` at import,
which upstream triton lacks; their child adds that one method (`backend == "cuda"`) and the table
says so under the GEMM rows.

The tutorials come from the peer harness (never vendored; `--peer DIR`, else `.peer` in the
checkout, `$TLX_PEER_DIR` or `../shared/peer`), converted by its own swap.py into a temporary folder.
Each tutorial, and each anchor, runs in its own subprocess with what is left of `--budget` seconds,
so a hang costs one row. Prints a table last and writes benchmarks/results/peer_tutorials-<time>.json.

On the GPU machine, from the checkout root with the harness carried as `.peer`:

    python3 benchmarks/peer_tutorials.py --peer .peer             # about 3-4 minutes on an H100

`--fa-ctx 1024 2048 4096 8192` and `--gemm-sizes 4096 8192` are the defaults (the peer also runs
2048: add it, and hopper_gemm_ws autotunes its 96 configs once more); `--fa-rep`/`--gemm-rep` the
do_bench warmup and rep in ms (the peer's: 500 and 2000; the defaults here 500 and 1000);
`--only NAME ...` a subset of fa_ws, fa_ws_pipelined, fa_ws_pipelined_pingpong,
fa_ws_pipelined_pingpong_persistent, gemm_pipelined, gemm_ws, persistent_gemm_ws_cooperative,
persistent_gemm_ws_pingpong.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import peer_tutorials  # noqa: E402  (finding the harness and converting with its swap.py)

FA = {  # row name -> (tutorial file stem, host function)
    "fa_ws": ("hopper_fa_ws", "attention"),
    "fa_ws_pipelined": ("hopper_fa_ws_pipelined", "attention"),
    "fa_ws_pipelined_pingpong": ("hopper_fa_ws_pipelined_pingpong", "attention"),
    "fa_ws_pipelined_pingpong_persistent": ("hopper_fa_ws_pipelined_pingpong_persistent", "attention"),
}
GEMM = {  # gemm_ws last: it autotunes 96 configs per shape, the longest child
    "gemm_pipelined": ("hopper_gemm_pipelined", "matmul"),
    "persistent_gemm_ws_cooperative": ("hopper-persistent-gemm-ws-cooperative", "matmul_tlx_ws_persistent"),
    "persistent_gemm_ws_pingpong": ("hopper-persistent-gemm-ws-pingpong", "matmul_tlx_ws_persistent"),
    "gemm_ws": ("hopper_gemm_ws", "matmul"),
}
ANCHORS = {"sdpa_cudnn": "FA anchor", "cublas": "GEMM anchor"}
FA_B, FA_H, FA_D, FA_SCALE = 4, 32, 128, 1.3
QUANTILES = [0.5, 0.2, 0.8]


def fa_flops(n_ctx: int) -> float:
    """Two matmuls of B·H·N_CTX²·D multiply-adds (the peer's count)."""
    return 2 * 2.0 * FA_B * FA_H * n_ctx * n_ctx * FA_D


def gemm_flops(n: int) -> float:
    return 2.0 * n * n * n


def tflops(flops: float, ms: float) -> float:
    return flops * 1e-12 / (ms * 1e-3)


# ---- the child: one tutorial or anchor at every shape ----------------------------------------------------

def child(name: str, tutorials: Path, ctxs: List[int], sizes: List[int], fa_rep: float, gemm_rep: float) -> None:
    import torch

    try:
        from triton.testing import do_bench
    except ImportError:  # a user without triton: tlx's own
        from tlx.testing import do_bench

    def emit(rec: Dict[str, Any]) -> None:
        print("PEER-BENCH " + json.dumps({"name": name, **rec}), flush=True)

    def bench(fn: Callable[[], Any], rep: float) -> List[float]:
        return list(do_bench(fn, quantiles=QUANTILES, warmup=rep, rep=rep))

    if name == "sdpa_cudnn" or name in FA:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if name in FA:
            stem, fn_name = FA[name]
            attention = getattr(peer_tutorials.load_tutorial(tutorials, stem), fn_name)
        for n_ctx in ctxs:
            gen = torch.Generator(device="cuda").manual_seed(n_ctx)
            q, k, v = (torch.randn((FA_B, FA_H, n_ctx, FA_D), device="cuda", dtype=torch.float16, generator=gen)
                       for _ in range(3))

            def sdpa() -> Any:
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=FA_SCALE, is_causal=False)

            run = sdpa if name == "sdpa_cudnn" else (lambda: attention(q, k, v, FA_SCALE))
            t0 = time.perf_counter()
            out = run()  # compiles and autotunes, untimed
            torch.cuda.synchronize()
            first_s = time.perf_counter() - t0
            err = None if name == "sdpa_cudnn" else float((out.float() - sdpa().float()).abs().max())
            ms = bench(run, fa_rep)
            emit({"shape": {"B": FA_B, "H": FA_H, "N_CTX": n_ctx, "D": FA_D}, "key": n_ctx, "ms": ms,
                  "tflops": tflops(fa_flops(n_ctx), ms[0]), "max_abs_err": err, "first_call_s": round(first_s, 2)})
        return
    stand_in = False
    if name in GEMM:
        stem, fn_name = GEMM[name]
        stand_in = peer_tutorials.fork_target_method()  # the persistent GEMMs call it at import
        matmul = getattr(peer_tutorials.load_tutorial(tutorials, stem), fn_name)
    for n in sizes:
        gen = torch.Generator(device="cuda").manual_seed(n)
        a = torch.randn((n, n), device="cuda", dtype=torch.float16, generator=gen)
        b = torch.randn((n, n), device="cuda", dtype=torch.float16, generator=gen)
        run = (lambda: torch.matmul(a, b)) if name == "cublas" else (lambda: matmul(a, b))
        t0 = time.perf_counter()
        out = run()
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        err = None if name == "cublas" else float((out.float() - torch.matmul(a, b).float()).abs().max())
        ms = bench(run, gemm_rep)
        emit({"shape": {"M": n, "N": n, "K": n}, "key": n, "ms": ms, "tflops": tflops(gemm_flops(n), ms[0]),
              "max_abs_err": err, "first_call_s": round(first_s, 2), "fork_target_stand_in": stand_in})


# ---- the parent -------------------------------------------------------------------------------------

def run_child(name: str, tutorials: Path, args: argparse.Namespace, timeout: float) -> Dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--tutorials", str(tutorials),
           "--fa-ctx", *map(str, args.fa_ctx), "--gemm-sizes", *map(str, args.gemm_sizes),
           "--fa-rep", str(args.fa_rep), "--gemm-rep", str(args.gemm_rep)]
    t0 = time.time()
    status, out, err = "ok", "", ""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(timeout, 1))
        out, err = p.stdout, p.stderr
        if p.returncode != 0:
            status = f"exit {p.returncode}"
    except subprocess.TimeoutExpired as e:
        status = f"timeout after {timeout:.0f} s"
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    records = [json.loads(ln[len("PEER-BENCH "):]) for ln in out.splitlines() if ln.startswith("PEER-BENCH ")]
    tail = [ln for ln in err.strip().splitlines() if ln.strip()][-3:]
    print(f"[{name}] {status} in {time.time() - t0:.0f} s, {len(records)} results" +
          (f": {' | '.join(tail)[:300]}" if status != "ok" else ""), flush=True)
    return {"name": name, "status": status, "seconds": round(time.time() - t0, 1), "records": records,
            "stderr_tail": tail if status != "ok" else []}


def table(runs: List[Dict[str, Any]], fa_ctx: List[int], gemm_sizes: List[int]) -> str:
    by = {r["name"]: {rec["key"]: rec for rec in r["records"]} for r in runs}
    status = {r["name"]: r["status"] for r in runs}

    def cell(name: str, key: int, anchor: str, bound: float) -> str:
        rec = by.get(name, {}).get(key)
        if rec is None:
            return "—" if name not in status else ("failed" if status[name] == "ok" else status[name].split()[0])
        base = by.get(anchor, {}).get(key)
        ratio = f" ({rec['tflops'] / base['tflops']:.2f}x)" if base and name != anchor else ""
        wrong = " WRONG" if rec["max_abs_err"] is not None and not rec["max_abs_err"] <= bound else ""
        return f"{rec['tflops']:.0f}{ratio}{wrong}"

    lines = []
    for title, rows, keys, anchor, label, bound in (
            ("attention forward fp16, B=4 H=32 D=128, TFLOP/s (ratio to cuDNN SDPA)", FA, fa_ctx, "sdpa_cudnn",
             "N_CTX", lambda k: 1e-2),
            ("GEMM fp16 M=N=K, TFLOP/s (ratio to cuBLAS)", GEMM, gemm_sizes, "cublas", "M=N=K",
             lambda k: 1e-2 * math.sqrt(k))):
        names = [anchor] + [n for n in rows if n in status]
        if len(names) == 1 and anchor not in status:
            continue
        w = max(len(n) for n in names + [label]) + 2
        cells = {n: [cell(n, k, anchor, bound(k)) for k in keys] for n in names}
        cw = max(len(c) for row in cells.values() for c in row + [str(k) for k in keys]) + 2
        lines += ["", title, f"{label:<{w}}" + "".join(f"{k:>{cw}}" for k in keys)]
        for n in names:
            lines.append(f"{n:<{w}}" + "".join(f"{c:>{cw}}" for c in cells[n]))
        shimmed = [n for n in names if any(rec.get("fork_target_stand_in") for rec in by.get(n, {}).values())]
        if shimmed:
            lines.append(f"({', '.join(shimmed)}: with the fork's GPUTarget.is_cuda_backend() added to upstream triton)")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--peer", help="the peer harness folder (default: .peer, $TLX_PEER_DIR or ../shared/peer)")
    p.add_argument("--only", nargs="+", choices=list(FA) + list(GEMM), help="only these tutorials")
    p.add_argument("--fa-ctx", nargs="+", type=int, default=[1024, 2048, 4096, 8192])
    p.add_argument("--gemm-sizes", nargs="+", type=int, default=[4096, 8192])
    p.add_argument("--fa-rep", type=float, default=500.0, help="do_bench warmup and rep for FA, ms")
    p.add_argument("--gemm-rep", type=float, default=1000.0, help="do_bench warmup and rep for GEMM, ms")
    p.add_argument("--budget", type=float, default=230.0, help="seconds for all children together")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--tutorials", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, Path(args.tutorials), args.fa_ctx, args.gemm_sizes, args.fa_rep, args.gemm_rep)
        return 0
    peer = Path(args.peer) if args.peer else (ROOT / ".peer" if (ROOT / ".peer" / "swap.py").is_file()
                                               else peer_tutorials.peer_dir())
    if peer is None or not (peer / "swap.py").is_file():
        print(f"no peer harness: {peer_tutorials.SKIP_REASON}", file=sys.stderr)
        return 2
    t0 = time.time()
    names = args.only or list(FA) + list(GEMM)
    with tempfile.TemporaryDirectory(prefix="peer_bench_") as work:
        tutorials = peer_tutorials.convert(peer, Path(work))
        order = (["sdpa_cudnn"] if any(n in FA for n in names) else []) + [n for n in names if n in FA] + \
            (["cublas"] if any(n in GEMM for n in names) else []) + [n for n in names if n in GEMM]
        runs = []
        for name in order:
            runs.append(run_child(name, tutorials, args, args.budget - (time.time() - t0)))
    import torch

    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"peer_tutorials-{time.strftime('%Y%m%d-%H%M%S')}.json"
    meta = {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
            "fa": {"B": FA_B, "H": FA_H, "D": FA_D, "sm_scale": FA_SCALE, "n_ctx": args.fa_ctx, "rep_ms": args.fa_rep},
            "gemm": {"sizes": args.gemm_sizes, "rep_ms": args.gemm_rep}, "quantiles": QUANTILES,
            "seconds": round(time.time() - t0, 1)}
    path.write_text(json.dumps({**meta, "runs": runs}, indent=1))
    print(f"\nwrote {path.relative_to(ROOT)} ({meta['seconds']} s, {meta['gpu']})")
    print(table(runs, args.fa_ctx, args.gemm_sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())

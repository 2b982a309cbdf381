#!/usr/bin/env python3
"""Flash-attention benchmark (issue 34): the tlx examples (tlx.examples.attention: the
warp-specialized ping-pong forward, its persistent variant and the overlapped persistent one
(OVERLAP_CONFIGS: d64, d128), the backward) against torch's
scaled_dot_product_attention with the cuDNN backend and with the flash backend, measured in the
same run, on FlashAttention-3's grid: 16k tokens in all (batch = 16384 / seq), seq 512 .. 16k,
hidden size 2048 (heads = 2048 / head_dim), head_dim 64 / 128 / 256, causal and not, fp16 and
bf16. Run from the repository root on the GPU machine::

    python3 -m pip install -q --no-deps --no-build-isolation -e . && python3 benchmarks/attention.py [--quick]

Reported per point: TFLOP/s (forward 4 * batch * heads * seq^2 * head_dim, half of it when
causal; backward 2.5 times the forward's), the ratio to cuDNN measured in the same process,
the relative error ||out - ref||_F / ||ref||_F against a float32 reference (torch's math
attention in fp32 on the first and the last head; for the backward, dq / dk / dv of those heads by
fp32 autograd, the worst of the three), and for our kernels the proxy fences in their PTX (count,
how many inside a K/V loop), ptxas's registers / spills and the shared memory (forward kernels on
their result rows; the three backward kernels under the backward row's `kernels`).

Method: each kernel is compiled by its first launch, run 3 times to warm up, then timed over
RUNS launches (median; CUDA events around each launch), queued behind a ~20 ms device sleep so
the host is never what the events measure. Inputs are 3 x 64 MiB (more than the 50 MiB L2), so
no rotation is needed. Outputs are poisoned (NaN) before the checked run. The backward is timed
through torch autograd for every implementation (``torch.autograd.grad`` of the forward's
output), so each includes the same autograd overhead. Our kernels are timed in 6 alternating
batches with cuDNN at the same point (gpu_wait.time_paired), and their ratio is to that cuDNN
median: on a power-limited H100 the later of two back-to-back measurements runs on hotter,
slower clocks.

Robustness: each head_dim runs in its own child process (cuDNN and flash are measured again in
each, so every ratio is against the same process's cuDNN), under a wall-clock limit; a CUDA
error, a wrong result, an unsupported backend or a hang costs only that child's remaining
measurements, and every failure is reported. The parent prints the table last and writes all
numbers to benchmarks/results/attention-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from statistics import median
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the benchmarks' shared module
from gpu_wait import Hang, time_paired, time_runs, wait_or_hang  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQS = [512, 1024, 2048, 4096, 8192, 16384]
HEAD_DIMS = [64, 128, 256]
DTYPES = ["fp16", "bf16"]
QUICK = {"seqs": [2048, 8192], "head_dims": [128], "dtypes": ["bf16"]}
TOKENS, HIDDEN = 16384, 2048
CHILD_LIMIT_S = 200.0
TOTAL_LIMIT_S = 560.0  # the whole run stays under the device machine's 10-minute command limit
FORWARD_KERNELS = ["cudnn", "flash", "tlx", "tlx-persistent", "tlx-overlap"]
BACKWARD_KERNELS = ["cudnn", "flash", "tlx"]
WRONG_REL_ERR = 2e-2  # bf16 outputs carry ~4e-3; this flags a broken kernel, not rounding


def shape(seq: int, head_dim: int) -> Tuple[int, int, int, int]:
    """(batch, heads, seq, head_dim) of the grid point."""
    return TOKENS // seq, HIDDEN // head_dim, seq, head_dim


def flops(seq: int, head_dim: int, causal: bool, backward: bool = False) -> float:
    """FlashAttention-3's count: 4 * batch * heads * seq^2 * head_dim for the forward's two
    matmuls, halved when causal; the backward's five matmuls are 2.5 times that."""
    Z, H, N, D = shape(seq, head_dim)
    f = 4.0 * Z * H * N * N * D * (0.5 if causal else 1.0)
    return f * 2.5 if backward else f


PTXAS = {"registers": r"Used (\d+) registers", "spill_stores": r"(\d+) bytes spill stores",
         "spill_loads": r"(\d+) bytes spill loads"}


def kernel_facts(compiled: Any) -> Dict[str, Any]:
    """Proxy fences in the PTX (total, inside a K/V loop), ptxas's registers and spills, shared
    memory: what a compiled tlx kernel reports."""
    from tlx.examples.ptx_fences import fence_report

    asm = getattr(compiled, "asm", {}) or {}
    facts: Dict[str, Any] = {}
    if asm.get("ptx"):
        rep = fence_report(asm["ptx"])
        facts.update(fences=rep["fences"], fences_in_k_loop=rep["fences_in_k_loop"], k_loops=rep["k_loops"])
    res = getattr(compiled, "resources", None) or {}  # a fresh compile's or the disk cache's
    for key, pat in PTXAS.items():
        m = re.search(pat, asm.get("ptxas_log") or "")
        if key in res:
            facts[key] = int(res[key])
        elif m:
            facts[key] = int(m.group(1))
    if "shared_bytes" in res:
        facts["shared_bytes"] = res["shared_bytes"]
    return facts


def launch_facts(launch: Any) -> Dict[str, Any]:
    """The launch's grid and compile-time constants (the config it ran: a README row can be checked
    against today's default)."""
    consts = {k: v for k, v in launch.constexprs.items() if isinstance(v, (bool, int, float, str))}
    return {"grid": list(launch.grid), "constexprs": consts}


# ---- measuring (child process) -----------------------------------------------------------------

def measure(head_dim: int, seqs: List[int], dtypes: List[str], runs: int, backward: bool, out_path: str) -> int:
    """Child: every implementation at every (dtype, causal, seq) of one head_dim; records are
    appended to `out_path` (JSON lines) as they are made."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sys.path.insert(0, ROOT)
    from tlx.examples import attention as ours

    torch.backends.cuda.matmul.allow_tf32 = False

    def emit(rec: Dict[str, Any]) -> None:
        with open(out_path, "a") as f:
            f.write(json.dumps(rec) + "\n")

    dev = torch.cuda.get_device_properties(0)
    emit({"kind": "device", "head_dim": head_dim, "name": dev.name, "sms": dev.multi_processor_count,
          "capability": list(torch.cuda.get_device_capability(0)), "torch": torch.__version__,
          "cudnn": torch.backends.cudnn.version()})
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}

    def sdpa(backend: str, causal: bool) -> Callable[..., Any]:
        def fn(q, k, v):
            with sdpa_kernel([backends[backend]]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return fn

    for dtype in dtypes:
        for causal in (False, True):
            for seq in seqs:
                Z, H, N, D = shape(seq, head_dim)
                torch.manual_seed(seq + head_dim + int(causal))
                q, k, v, do = (torch.randn(Z, H, N, D, device="cuda", dtype=tdt[dtype]) for _ in range(4))
                heads = [(0, 0), (Z - 1, H - 1)]  # the reference covers the first and the last head

                def reference(with_grad: bool) -> List[Tuple[Any, ...]]:
                    refs = []
                    for z, h in heads:
                        qs, ks, vs = (x[z, h].float().requires_grad_(with_grad) for x in (q, k, v))
                        with sdpa_kernel([SDPBackend.MATH]):
                            o = F.scaled_dot_product_attention(qs[None], ks[None], vs[None], is_causal=causal)[0]
                        if with_grad:
                            g = torch.autograd.grad(o, (qs, ks, vs), do[z, h].float())
                            refs.append((o.detach(),) + tuple(g))
                        else:
                            refs.append((o.detach(),))
                        del qs, ks, vs
                    return refs

                def rel(got, ref) -> float:
                    return (torch.linalg.norm(got.float() - ref) / torch.linalg.norm(ref)).item()

                base = {"dtype": dtype, "head_dim": D, "causal": causal, "seq": N, "batch": Z, "heads": H}
                refs = reference(backward)

                anchors: Dict[str, Callable[[], Any]] = {}  # direction -> cuDNN's run at this point

                def record(kernel: str, direction: str, run: Callable[[], Any], outputs: Callable[[], List[Any]],
                           facts: Optional[Callable[[], Dict[str, Any]]] = None) -> None:
                    rec = dict(base, kind="result", kernel=kernel, direction=direction)
                    try:
                        run()
                        wait_or_hang(torch, f"{kernel} {direction} first run")
                        outs = outputs()
                        rec["nan"] = int(sum(torch.isnan(o).sum().item() for o in outs))
                        errs = []
                        for (z, h), ref in zip(heads, refs):
                            want = ref[:1] if direction == "forward" else ref[1:]
                            errs += [rel(o[z, h], r) for o, r in zip(outs, want)]
                        rec["rel_err"] = max(errs)
                        if not rec["rel_err"] <= WRONG_REL_ERR or rec["nan"]:
                            rec["wrong"] = True
                        if facts:
                            rec.update(facts())
                        f = flops(seq, D, causal, direction == "backward")
                        if kernel == "cudnn":
                            anchors[direction] = run
                        if kernel.startswith("tlx") and direction in anchors:  # in alternation with cuDNN
                            ms, anchor_ms = time_paired(torch, [run], [anchors[direction]], runs, per_run_s=0.5)
                            rec["cudnn_paired_tflops"] = f / (median(anchor_ms) * 1e-3) / 1e12
                        else:
                            ms = time_runs(torch, [run], runs, per_run_s=0.5)
                        rec.update(ms_median=median(ms), ms_min=min(ms), ms_max=max(ms), runs=len(ms),
                                   tflops=f / (median(ms) * 1e-3) / 1e12)
                    except Hang as e:
                        rec["error"] = f"hang: {e}"
                        emit(rec)
                        raise
                    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                        rec["error"] = f"{type(e).__name__}: {e}"[:2000]
                        rec["traceback"] = traceback.format_exc()[-3000:]
                    emit(rec)

                # forward
                for name in ("cudnn", "flash"):
                    box: Dict[str, Any] = {}
                    fn = sdpa(name, causal)
                    record(name, "forward", lambda fn=fn, box=box: box.__setitem__("o", fn(q, k, v)),
                           lambda box=box: [box["o"]])
                overlap = [("tlx-overlap", True, ours.OVERLAP_CONFIGS[D])] if D in ours.OVERLAP_CONFIGS else []
                for name, persistent, config in [("tlx", False, None), ("tlx-persistent", True, None)] + overlap:
                    o = torch.full_like(q, float("nan"))
                    lse = torch.empty((Z, H, N), device="cuda", dtype=torch.float32)
                    plan = ours.plan_forward(q, k, v, causal, persistent=persistent, config=config, out=o, lse=lse)
                    record(name, "forward", plan.run, lambda o=o: [o],
                           lambda plan=plan: dict(kernel_facts(plan.launches[0].compiled),
                                                  **launch_facts(plan.launches[0])))
                    plan = o = lse = None  # free before the next
                # backward, through autograd for everyone
                if backward:
                    def backward_facts() -> Dict[str, Any]:
                        # the three backward launches once more through their plan (the same
                        # specializations autograd launches, compiled already): their PTX facts
                        o, lse = ours.attention_forward(q, k, v, causal)
                        plan = ours.plan_backward(q, k, v, o, lse, do, causal)
                        plan.run()
                        return {"kernels": {ln.kernel.__name__: kernel_facts(ln.compiled) for ln in plan.launches}}

                    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
                    impls = {"cudnn": sdpa("cudnn", causal), "flash": sdpa("flash", causal),
                             "tlx": lambda a, b, c: ours.attention(a, b, c, causal=causal)}
                    for name in BACKWARD_KERNELS:
                        box = {}
                        try:
                            out = impls[name](*leaves)
                        except Exception as e:  # noqa: BLE001 - an unsupported backend
                            emit(dict(base, kind="result", kernel=name, direction="backward",
                                      error=f"forward: {type(e).__name__}: {e}"[:2000]))
                            continue

                        def run(out=out, box=box):
                            box["g"] = torch.autograd.grad(out, leaves, do, retain_graph=True)

                        record(name, "backward", run, lambda box=box: list(box["g"]),
                               backward_facts if name == "tlx" else None)
                        out = None
                    leaves = None
                q = k = v = do = refs = None  # free this point's tensors before the next
                torch.cuda.empty_cache()
    return 0


# ---- orchestration (parent process) ------------------------------------------------------------

def run_children(head_dims: List[int], seqs: List[int], dtypes: List[str], runs: int,
                 backward: bool) -> List[Dict[str, Any]]:
    records: List[Dict[str, Any]] = []
    deadline = time.time() + TOTAL_LIMIT_S
    for d in head_dims:
        left = deadline - time.time()
        if left < 10:
            records.append({"kind": "error", "head_dim": d, "error": "skipped: out of time"})
            continue
        fd, path = tempfile.mkstemp(prefix=f"attention_d{d}_", suffix=".jsonl")
        os.close(fd)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", str(d), "--runs", str(runs), "--out", path,
               "--seqs", ",".join(map(str, seqs)), "--dtypes", ",".join(dtypes)] + ([] if backward else ["--forward-only"])
        t0 = time.time()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=min(CHILD_LIMIT_S, left))
            rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-4000:]
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc, tail = "timeout", out[-2000:]
        with open(path) as f:
            got = [json.loads(ln) for ln in f if ln.strip()]
        os.unlink(path)
        records.extend(got)
        status = {"kind": "child", "head_dim": d, "rc": rc, "seconds": round(time.time() - t0, 1)}
        if rc != 0:
            status["log_tail"] = tail
        records.append(status)
        print(f"[d{d}] rc={rc} in {status['seconds']} s, {sum(r.get('kind') == 'result' for r in got)} results",
              flush=True)
        if rc != 0:
            print(tail[-1500:], flush=True)
    return records


def _find(res, key, kernel, direction):
    return next((r for r in res if _point(r) == key and r["kernel"] == kernel and r["direction"] == direction), None)


def _point(r: Dict[str, Any]) -> Tuple:
    return (r["dtype"], r["head_dim"], r["causal"], r["seq"])


def _cudnn_tflops(res, r) -> Optional[float]:
    """cuDNN's TFLOP/s to compare `r` with: timed in alternation with it where the record has that
    (our kernels), else cuDNN's own row at the same point."""
    if "cudnn_paired_tflops" in r:
        return r["cudnn_paired_tflops"]
    cud = _find(res, _point(r), "cudnn", r["direction"])
    return cud["tflops"] if cud and "tflops" in cud else None


def _cell(res, r, width: int = 17) -> str:
    if r is None:
        return f"{'-':>{width}}"
    if "tflops" not in r:
        return f"{'FAIL':>{width}}"
    cud = _cudnn_tflops(res, r)
    ratio = f"{r['tflops'] / cud:.0%}" if r["kernel"] != "cudnn" and cud else ""
    return f"{r['tflops']:5.0f} {ratio:>4} [{r.get('rel_err', float('nan')):.0e}]".rjust(width)


def target_line(res: List[Dict[str, Any]]) -> str:
    """The issue's target: >= 100 % of cuDNN at head_dim 128 for seq >= 2k, causal and not, fp16
    and bf16 (the best of our forward kernels per point)."""
    ratios = []
    for r in res:
        if (r["kernel"] == "cudnn" and r["direction"] == "forward" and r["head_dim"] == 128 and r["seq"] >= 2048
                and "tflops" in r):
            best = [o["tflops"] / _cudnn_tflops(res, o) for o in res if _point(o) == _point(r)
                    and o["direction"] == "forward" and o["kernel"].startswith("tlx") and "tflops" in o
                    and not o.get("wrong")]
            ratios.append(max(best) if best else 0.0)
    if not ratios:
        return "target (forward, d128, seq >= 2k, >= 100 % of cuDNN): not measured"
    met = sum(x >= 1.0 for x in ratios)
    return (f"target (forward, d128, seq >= 2k, >= 100 % of cuDNN): {met}/{len(ratios)} points met, "
            f"worst {min(ratios):.1%}, best {max(ratios):.1%}")


def table(records: List[Dict[str, Any]]) -> str:
    """The summary printed last: TFLOP/s per point and implementation, ratio to the same
    process's cuDNN, relative error; the target line; PTX facts of our kernels; every failure."""
    res = [r for r in records if r.get("kind") == "result"]
    lines = ["TFLOP/s (ratio to cuDNN timed in alternation with each of ours) [rel. error vs fp32]"]
    for direction, kernels in (("forward", FORWARD_KERNELS), ("backward", BACKWARD_KERNELS)):
        rows = sorted({_point(r) for r in res if r["direction"] == direction})
        if not rows:
            continue
        hdr = f"{direction:8} {'dtype':5} {'d':>3} {'causal':6} {'seq':>5} | " + " | ".join(f"{k:>17}" for k in kernels)
        lines += [hdr, "-" * len(hdr)]
        for key in rows:
            dt, d, c, n = key
            cells = [_cell(res, _find(res, key, k, direction)) for k in kernels]
            lines.append(f"{'':8} {dt:5} {d:>3} {str(c):6} {n:>5} | " + " | ".join(cells))
    lines.append(target_line(res))
    facts = {}  # (kernel, dtype, head_dim, causal) -> its PTX facts, from the first point that has them
    for r in res:
        found = {r["kernel"]: r} if "fences" in r else r.get("kernels", {})
        for k, f in found.items():
            facts.setdefault((k, r["dtype"], r["head_dim"], r["causal"]), f)
    if facts:
        lines.append("our kernels' PTX: proxy fences (total / in a K/V loop), registers / spill bytes, shared:")
        for (k, dt, d, c), f in sorted(facts.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1], kv[0][3])):
            lines.append(f"  {k} {dt} d{d} {'causal' if c else 'full'}: {f.get('fences')}/{f.get('fences_in_k_loop')}, "
                         f"{f.get('registers')} regs / {f.get('spill_stores')} B, {f.get('shared_bytes')} B")
    for r in res:
        if r.get("wrong"):
            lines.append(f"WRONG {r['kernel']} {r['direction']} {r['dtype']} d{r['head_dim']} causal={r['causal']} "
                         f"seq {r['seq']}: rel. error {r.get('rel_err', float('nan')):.2e}, {r.get('nan', 0)} NaN")
    for r in records:
        if r.get("error"):
            where = f" {r['direction']} {r['dtype']} d{r['head_dim']} causal={r['causal']} seq {r['seq']}" \
                if "seq" in r else f" d{r.get('head_dim')}"
            lines.append(f"FAILED {r.get('kernel', 'child')}{where}: {r['error'].splitlines()[0][:200]}")
    for r in records:
        if r.get("kind") == "child" and r.get("rc") != 0:
            lines.append(f"child d{r['head_dim']} exited with {r['rc']}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="tlx flash-attention benchmark")
    ap.add_argument("--quick", action="store_true", help="smoke run: bf16, d128, seq 2k and 8k, 5 timed runs")
    ap.add_argument("--runs", type=int, default=None, help="timed runs per point (default 20; --quick 5)")
    ap.add_argument("--head-dims", default=None, help="comma-separated subset of 64,128,256")
    ap.add_argument("--forward-only", action="store_true", help="skip the backward")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--seqs", help=argparse.SUPPRESS)
    ap.add_argument("--dtypes", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        try:
            return measure(args.child, [int(s) for s in args.seqs.split(",")], args.dtypes.split(","), args.runs,
                           not args.forward_only, args.out)
        except Hang:
            return 3
    seqs = QUICK["seqs"] if args.quick else SEQS
    dtypes = QUICK["dtypes"] if args.quick else DTYPES
    head_dims = [int(d) for d in args.head_dims.split(",")] if args.head_dims else (
        QUICK["head_dims"] if args.quick else HEAD_DIMS)
    runs = args.runs or (5 if args.quick else 20)
    t0 = time.time()
    records = run_children(head_dims, seqs, dtypes, runs, not args.forward_only)
    out_dir = os.path.join(ROOT, "benchmarks", "results")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"attention-{time.strftime('%Y%m%d-%H%M%S')}{'-quick' if args.quick else ''}.json")
    with open(path, "w") as f:
        json.dump({"seqs": seqs, "head_dims": head_dims, "dtypes": dtypes, "runs": runs,
                   "seconds": round(time.time() - t0, 1), "results": records}, f, indent=1)
    if os.environ.get("OUT"):  # the device machine sends back what is under $OUT
        with open(os.path.join(os.environ["OUT"], os.path.basename(path)), "w") as f, open(path) as g:
            f.write(g.read())
    print(f"wrote {path} ({time.time() - t0:.0f} s)")
    print(table(records))
    ok = all(not r.get("error") and not r.get("wrong") for r in records
             if r.get("kernel", "").startswith("tlx") or r.get("kind") != "result") \
        and all(r.get("rc") == 0 for r in records if r.get("kind") == "child")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

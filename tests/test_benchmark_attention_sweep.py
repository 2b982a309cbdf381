"""benchmarks/attention_sweep.py without a GPU: every variant plans the forward it names (kernel,
constexprs, grid), causal-only variants run only causal points, the parent runs one timing
child over every variant with the compile cache its workers filled, and the table reads ratios
against cuDNN at the same point. The numerics of each option run
on the interpreter in tests/test_examples_attention.py; the timing runs on the GPU."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from benchmark_module import load_benchmark


def load():
    return load_benchmark("attention_sweep")


def test_every_variant_plans_the_forward_it_names():
    s = load()
    from tlx.examples import attention as ours

    for name, (persistent, fields, causal_only) in s.VARIANTS.items():
        pts = s.points(name)
        assert pts == ([(dt, True) for dt in s.DTYPES] if causal_only
                       else [(dt, c) for dt in s.DTYPES for c in (False, True)]), name
        for dtype, causal in pts:
            x = np.zeros((2, 16, 256, 128), np.float16 if dtype == "fp16" else np.uint16)
            lse = np.zeros((2, 16, 256), np.float32)
            launch = s.make_plan(ours, name, x, x, x, x, lse, causal).launches[0]
            want = {**{k: v for k, v in vars(ours.FORWARD_CONFIGS[128]).items()}, **fields}
            kernel = ("attn_fwd_overlap_kernel" if want["OVERLAP_TILES"] else
                      "attn_fwd_persistent_kernel" if persistent else "attn_fwd_kernel")
            assert launch.kernel.__name__ == kernel, name
            for key in ("BLOCK_N", "NUM_STAGES", "RESCALE_EARLY", "LAZY_FIRST_MASK"):
                assert launch.constexprs[key] == want[key], (name, key)
            assert launch.constexprs["CAUSAL"] is causal
            if want["OVERLAP_TILES"]:  # its own tile order; 64 tiles (causal: 32 pairs) on 64 CTAs at most
                assert "HEAD_GROUP" not in launch.constexprs and launch.grid == ((32,) if causal else (64,)), name
            else:
                assert launch.constexprs["HEAD_GROUP"] == want["HEAD_GROUP"]
            if not persistent:
                assert launch.grid == ((2, 32) if want["HEAD_GROUP"] == 0 else (64, 1)), name


def test_one_timing_child_times_every_variant_with_the_workers_cache(monkeypatch, tmp_path):
    """Phase 1's workers split the (variant, dtype, causal) jobs; phase 2 is one child given every
    variant, reading the cache folder the workers filled; its records come back unchanged."""
    s = load()
    calls = []

    class Done:
        def __init__(self, cmd, env=None, **kw):
            calls.append(("warm", cmd, env["TLX_CACHE_DIR"]))
            self.cmd = cmd

        def wait(self, timeout=None):
            return 0

    def run(cmd, env=None, **kw):
        calls.append(("time", cmd, env["TLX_CACHE_DIR"]))
        out = cmd[cmd.index("--out") + 1]
        with open(out, "w") as f:
            f.write('{"kind": "result", "kernel": "cudnn", "dtype": "fp16", "causal": false, "seq": 2048}\n')
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(s.subprocess, "Popen", Done)
    monkeypatch.setattr(s.subprocess, "run", run)
    records = s.run_all(["base", "early+lazy+g8", "pers"], 10)
    warm = [c for c in calls if c[0] == "warm"]
    timing = [c for c in calls if c[0] == "time"]
    assert len(timing) == 1
    assert timing[0][1][timing[0][1].index("--time") + 1] == "base,early+lazy+g8,pers"
    jobs = sorted(tuple(j) for c in warm for j in s.json.loads(c[1][c[1].index("--warm") + 1]))
    assert jobs == sorted([(v, dt, c) for v in ("base", "pers") for dt in s.DTYPES for c in (False, True)]
                          + [("early+lazy+g8", dt, True) for dt in s.DTYPES])
    assert {c[2] for c in calls} == {timing[0][2]}  # one cache folder
    assert [r for r in records if r["kind"] == "result"] == [
        dict(kind="result", kernel="cudnn", dtype="fp16", causal=False, seq=2048)]
    assert [r["rc"] for r in records if r["kind"] == "child"] == [0]


def test_table_ratios_are_against_cudnn_at_the_same_point_and_failures_are_listed():
    s = load()

    def res(kernel, tflops, dtype="fp16", causal=False, seq=2048, **kw):
        return {**dict(kind="result", kernel=kernel, dtype=dtype, causal=causal, seq=seq, head_dim=128,
                       tflops=tflops, rel_err=1e-3), **kw}

    records = [
        res("cudnn", 640.0), res("base", 576.0), res("early", 704.0, cudnn_paired_tflops=640.0),
        # timed in alternation with a cuDNN that ran at 800 then: its ratio is to that
        res("lazy", 800.0, dtype="bf16", cudnn_paired_tflops=800.0),
        res("cudnn", 800.0, causal=True), res("pers", 720.0, causal=True),  # its point's cuDNN: 90 %
        res("lazy", 600.0, wrong=True, rel_err=0.5),
        dict(kind="result", kernel="ovl", dtype="fp16", causal=False, seq=2048, error="RuntimeError: boom"),
        dict(kind="warm", variant="pers", dtype="bf16", causal=True, error="TLXCompileError: no"),
        dict(kind="warm", variant="base", dtype="fp16", causal=False, rel_err=1e-3, registers=168, spill_stores=0),
        dict(kind="child", phase="time", rc=3, log_tail="hang"),
    ]
    text = s.table(records)
    rows = {ln.split()[0]: ln for ln in text.splitlines() if ln and ln.split()[0] in s.VARIANTS}
    assert "576/ 90%" in rows["base"] and "704/110%" in rows["early"] and "720/ 90%" in rows["pers"]
    assert "WRONG" in rows["lazy"] and "FAIL" in rows["ovl"] and "800/100%" in rows["lazy"]
    assert rows["base"].rstrip().endswith("90.0%") and rows["early"].rstrip().endswith("110.0%")
    assert "BAD lazy fp16 causal=False seq 2048: rel. error 5.00e-01" in text
    assert "BAD ovl fp16 causal=False seq 2048: RuntimeError: boom" in text
    assert "WARM pers bf16 causal=True: TLXCompileError: no" in text
    assert "child time exited with 3" in text
    assert "ptxas: 168 registers, 0 B spilled: 1 specializations" in text
    assert ("target (>= 100 % of cuDNN): 2/8 points by the best variant; best per point: fp16 f2k early 110%, "
            "fp16 c2k pers 90%, bf16 f2k lazy 100%") in text
    assert [ln.split() for ln in text.splitlines() if ln.startswith("cudnn")] == [
        ["cudnn", "640", "-", "800"] + ["-"] * 5]

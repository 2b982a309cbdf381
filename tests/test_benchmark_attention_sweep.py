"""benchmarks/attention_sweep.py without a GPU: every variant plans the forward it names (kernel,
constexprs, grid), causal-only variants run only causal points, the ftz experiment's patch
changes exactly the exp2 lowering (in a child process: the patch must not leak into this one),
and the table reads ratios against the cuDNN of the same child. The numerics of each option run
on the interpreter in tests/test_examples_attention.py; the timing runs on the GPU."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load():
    spec = importlib.util.spec_from_file_location("bench_attention_sweep",
                                                  os.path.join(ROOT, "benchmarks", "attention_sweep.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_variant_plans_the_forward_it_names():
    s = load()
    from tlx.examples import attention as ours

    for name, (persistent, fields, ftz, causal_only) in s.VARIANTS.items():
        pts = s.points(name)
        assert pts == ([(dt, True) for dt in s.DTYPES] if causal_only
                       else [(dt, c) for dt in s.DTYPES for c in (False, True)]), name
        for dtype, causal in pts:
            x = np.zeros((2, 16, 256, 128), np.float16 if dtype == "fp16" else np.uint16)
            lse = np.zeros((2, 16, 256), np.float32)
            launch = s.make_plan(ours, name, x, x, x, x, lse, causal).launches[0]
            assert launch.kernel.__name__ == ("attn_fwd_persistent_kernel" if persistent else "attn_fwd_kernel")
            want = {**{k: v for k, v in vars(ours.FORWARD_CONFIGS[128]).items()}, **fields}
            for key in ("BLOCK_N", "NUM_STAGES", "RESCALE_EARLY", "LAZY_FIRST_MASK"):
                assert launch.constexprs[key] == want[key], (name, key)
            assert launch.constexprs["CAUSAL"] is causal
            assert launch.constexprs["HEAD_GROUP"] == want["HEAD_GROUP"]
            if not persistent:
                assert launch.grid == ((2, 32) if want["HEAD_GROUP"] == 0 else (64, 1)), name


@pytest.mark.slow
def test_the_ftz_patch_changes_only_the_exp2_lowering():
    """In a child process (the patch is process-wide): the patched compile of the default forward
    has only ex2.approx.ftz.f32, the plain one only ex2.approx.f32, as many of them, and both
    assemble."""
    code = (
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {os.path.join(ROOT, 'benchmarks')!r})\n"
        "import attention_sweep as s\n"
        "from tlx.examples import attention as ours\n"
        "x = np.zeros((1, 16, 256, 128), np.float16)\n"
        "launch = ours.plan_forward(x, x, x, False).launches[0]\n"
        "if sys.argv[1] == 'ftz':\n"
        "    s.patch_ftz()\n"
        "r = launch.compile()\n"
        "ptx = r.asm['ptx']\n"
        "print(ptx.count('ex2.approx.ftz.f32'), ptx.count('ex2.approx.f32'), isinstance(r.asm.get('cubin'), bytes))\n")
    counts = {}
    for mode in ("ftz", "plain"):
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        counts[mode] = out.stdout.split()
    ftz, plain = counts["ftz"], counts["plain"]
    assert ftz[1] == "0" and plain[0] == "0" and int(ftz[0]) == int(plain[1]) > 0, counts
    assert ftz[2] == plain[2] == "True", counts


def test_table_ratios_are_against_the_same_childs_cudnn_and_failures_are_listed():
    s = load()

    def res(kernel, tflops, dtype="fp16", causal=False, seq=2048, ftz=False, **kw):
        return {**dict(kind="result", kernel=kernel, dtype=dtype, causal=causal, seq=seq, head_dim=128, ftz=ftz,
                       tflops=tflops, rel_err=1e-3), **kw}

    records = [
        res("cudnn", 640.0), res("base", 576.0), res("early", 704.0),
        res("cudnn", 800.0, ftz=True), res("ftz", 720.0, ftz=True),  # ftz's own cuDNN: 90 %, not 112 %
        res("lazy", 600.0, wrong=True, rel_err=0.5),
        dict(kind="result", kernel="n64", dtype="fp16", causal=False, seq=2048, error="RuntimeError: boom"),
        dict(kind="warm", variant="pers", dtype="bf16", causal=True, error="TLXCompileError: no"),
        dict(kind="warm", variant="base", dtype="fp16", causal=False, rel_err=1e-3, registers=168, spill_stores=0),
        dict(kind="child", phase="time", ftz=True, rc=3, log_tail="hang"),
    ]
    text = s.table(records)
    rows = {ln.split()[0]: ln for ln in text.splitlines() if ln and ln.split()[0] in s.VARIANTS}
    assert "576/ 90%" in rows["base"] and "704/110%" in rows["early"] and "720/ 90%" in rows["ftz"]
    assert "WRONG" in rows["lazy"] and "FAIL" in rows["n64"]
    assert rows["base"].rstrip().endswith("90.0%") and rows["early"].rstrip().endswith("110.0%")
    assert "BAD lazy fp16 causal=False seq 2048: rel. error 5.00e-01" in text
    assert "BAD n64 fp16 causal=False seq 2048: RuntimeError: boom" in text
    assert "WARM pers bf16 causal=True: TLXCompileError: no" in text
    assert "child time exited with 3" in text
    assert "ptxas: 168 registers, 0 B spilled: 1 specializations" in text
    assert "target (>= 100 % of cuDNN): 1/8 points by the best variant; best per point: fp16 f2k early 110%" in text
    assert [ln.split()[:2] for ln in text.splitlines() if ln.startswith("cudnn")] == [["cudnn", "640"],
                                                                                   ["cudnn", "(ftz"]]

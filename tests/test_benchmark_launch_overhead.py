"""benchmarks/launch_overhead.py without a GPU: the interleaved timing order, the per-round ratios
the targets are judged on, the table it prints last and the JSON rows, from synthetic timings;
and the --cpu-only run end to end. The measuring itself runs on the H100 (the script's docstring)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from benchmark_module import load_benchmark
from tlx.runtime import native_launch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load():
    return load_benchmark("launch_overhead")


def timed(b, runs):
    t = b.Timed(lambda: None, lambda: None)
    t.runs = list(runs)
    return t


def test_rounds_time_the_compared_rows_back_to_back_and_alternate_direction():
    b = load()
    order = []
    rows = {name: b.time_loop(lambda: None, lambda name=name: order.append(name)) for name in "abcde"}
    b.run_timings(3, 4, together=[rows["e"], rows["b"]])
    warm, rounds = order[:5], [order[5 + 5 * r: 10 + 5 * r] for r in range(4)]
    assert warm == list("ebacd") and len(order) == 25
    assert rounds == [list("ebacd"), list("dcabe"), list("ebacd"), list("dcabe")]
    assert all(len(t.runs) == 4 and min(t.runs) > 0 for t in rows.values())


def test_targets_are_judged_on_per_round_ratios_that_a_disturbed_round_does_not_move():
    """Round 3 is a disturbed spell that slows every row by a third: its ratios do not move. In
    round 2 the raw loop, in round 5 Triton's, caught a quiet spell the other rows did not: the
    ratios of best rounds fail both targets, the per-round medians meet both."""
    b = load()
    raw = timed(b, [3.30, 3.10, 4.40, 3.32, 3.28])
    tlx = timed(b, [4.00, 4.02, 5.33, 4.01, 3.99])
    triton = timed(b, [10.40, 10.50, 13.90, 10.30, 9.60])
    over_raw, faster = b.target_verdicts(raw, tlx, triton)
    assert over_raw["per_round"] == pytest.approx([4.00 / 3.30, 4.02 / 3.10, 5.33 / 4.40, 4.01 / 3.32, 3.99 / 3.28])
    assert over_raw["median"] == pytest.approx(4.00 / 3.30) and over_raw["met"] and over_raw["at_most"]
    assert over_raw["of_bests"] == pytest.approx(3.99 / 3.10) and over_raw["of_bests"] > b.RAW_RATIO_TARGET
    assert faster["median"] == pytest.approx(10.40 / 4.00) and faster["met"] and not faster["at_most"]
    assert faster["of_bests"] == pytest.approx(9.60 / 3.99) and faster["of_bests"] < b.TRITON_SPEEDUP_TARGET
    assert faster["min"] == pytest.approx(9.60 / 3.99) and faster["max"] == pytest.approx(10.50 / 4.02)
    line = b.verdict_line(over_raw)
    assert line.startswith("target: kernel[grid](...) with 4 arguments over raw <= 1.25x: 1.21x, the median of 5 "
                           "per-round ratios (1.21-1.30; best rounds 1.29x) (met)"), line
    slow = b.target_verdicts(raw, timed(b, [4.5] * 5), None)
    assert len(slow) == 1 and not slow[0]["met"] and b.verdict_line(slow[0]).endswith("(NOT met)")
    assert b.target_verdicts(raw, None, triton) == []


def test_table_and_json_rows():
    b = load()
    raw = {"4 args": timed(b, [3.0, 4.0, 3.2])}
    rows = [("raw cuLaunchKernelEx (anchor)", "4 args", raw["4 args"]),
            ("tlx kernel[grid](...)", "4 args", timed(b, [3.6, 5.2, 4.0])),
            ("  of which: kernel[grid]", "4 args", timed(b, [0.07, 0.09, 0.08])),
            ("Triton @triton.jit", "4 args", None)]
    lines = b.table(rows, raw).splitlines()
    assert lines[0].split() == ["path", "kernel", "best", "median", "x", "raw", "x", "raw/rd"]
    assert re.fullmatch(r"raw cuLaunchKernelEx \(anchor\)\s+4 args\s+3\.00\s+3\.20\s+1\.00\s+1\.00", lines[1])
    assert re.fullmatch(r"tlx kernel\[grid\]\(\.\.\.\)\s+4 args\s+3\.60\s+4\.00\s+1\.20\s+1\.25", lines[2])
    assert re.fullmatch(r"  of which: kernel\[grid\]\s+4 args\s+0\.07\s+0\.08", lines[3])
    assert re.fullmatch(r"Triton @triton\.jit\s+4 args\s+n/a", lines[4])
    rec = b.row_record(*rows[1], raw["4 args"])
    assert rec["us"] == 3.6 and rec["median_us"] == 4.0 and rec["runs_us"] == [3.6, 5.2, 4.0]
    assert rec["x_raw_per_round"] == pytest.approx([1.2, 1.3, 1.25])
    assert "x_raw_per_round" not in b.row_record(*rows[2], raw["4 args"])
    assert b.row_record(*rows[3], raw["4 args"])["us"] is None


@pytest.mark.skipif(native_launch.missing_prerequisite() is not None, reason="the native launch cannot be built here")
def test_cpu_only_run_prints_every_layer(tmp_path):
    env = dict(os.environ, TLX_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "launch_overhead.py"), "--cpu-only",
                           "--n", "50", "--rounds", "2"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    table = done.stdout[done.stdout.index("== launch overhead, CPU only"):]
    for row in [r"native launch alone \(anchor\)", r"Launcher\.launch", r"tlx kernel\[grid\]\(\.\.\.\)",
                r"  of which: native \+ guard \+ stream"]:
        assert re.search(rf"^{row}\s+\d+\.\d\d\s+\d+\.\d\d", table, re.M), row

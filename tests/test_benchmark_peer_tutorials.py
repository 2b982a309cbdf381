"""benchmarks/peer_tutorials.py without a GPU: its FLOP counts (the peer's), and the table it prints
last from synthetic records (ratios to the same run's anchor, WRONG beyond the bound, a failed or
timed-out child). The measuring runs on the GPU (see the script's docstring)."""

from __future__ import annotations

from benchmark_module import load_benchmark


def load():
    return load_benchmark("peer_tutorials")


def test_flops_are_the_peers_counts():
    b = load()
    # 2 matmuls of 4 * 32 * 1024^2 * 128 multiply-adds, 2 flops each
    assert b.fa_flops(1024) == 4.0 * 4 * 32 * 1024 ** 2 * 128
    assert b.gemm_flops(4096) == 2.0 * 4096 ** 3
    assert abs(b.tflops(b.gemm_flops(4096), 0.2) - 687.19476736) < 1e-6


def rec(key, tf, err=None):
    return {"key": key, "tflops": tf, "max_abs_err": err, "ms": [1.0, 0.9, 1.1]}


def test_the_table_gives_ratios_to_the_same_runs_anchor_and_flags_wrong_results():
    b = load()
    runs = [
        {"name": "sdpa_cudnn", "status": "ok", "records": [rec(1024, 400.0), rec(2048, 500.0)]},
        {"name": "fa_ws", "status": "ok", "records": [rec(1024, 300.0, 1e-3), rec(2048, 450.0, 0.5)]},
        {"name": "fa_ws_pipelined", "status": "timeout after 60 s", "records": [rec(1024, 200.0, 0.0)]},
        {"name": "cublas", "status": "ok", "records": [rec(4096, 700.0)]},
        {"name": "gemm_ws", "status": "exit 1", "records": []},
        {"name": "gemm_pipelined", "status": "ok", "records": [rec(4096, 350.0, 0.3)]},
    ]
    text = b.table(runs, [1024, 2048], [4096]).splitlines()
    row = {ln.split()[0]: ln.split(None, 1)[1] for ln in text if ln and ln.split()[0] in
           ("sdpa_cudnn", "fa_ws", "fa_ws_pipelined", "cublas", "gemm_ws", "gemm_pipelined")}
    assert row["sdpa_cudnn"].split() == ["400", "500"]
    assert row["fa_ws"].split() == ["300", "(0.75x)", "450", "(0.90x)", "WRONG"]  # 0.5 > 1e-2
    assert row["fa_ws_pipelined"].split() == ["200", "(0.50x)", "timeout"]
    assert row["gemm_pipelined"].split() == ["350", "(0.50x)"]  # 0.3 <= 1e-2 * sqrt(4096)
    assert row["gemm_ws"].split() == ["exit"]
    assert "fa_ws_pipelined_pingpong" not in "\n".join(text)  # not run: no row

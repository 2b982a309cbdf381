"""benchmarks/attention.py without a GPU: its grid and FLOP counts, the PTX facts it reads from a
compiled kernel, and the table it prints last (ratios to the same process's cuDNN, the target
line, failures and wrong results), from synthetic records. The measuring runs on the GPU (see
the script's docstring)."""

from __future__ import annotations

from benchmark_module import load_benchmark


def load():
    return load_benchmark("attention")


def test_grid_is_flashattention3s_and_flops_count_two_matmuls():
    b = load()
    for seq in b.SEQS:
        for d in b.HEAD_DIMS:
            Z, H, N, D = b.shape(seq, d)
            assert Z * N == 16384 and H * D == 2048 and (N, D) == (seq, d)
    # batch 8, 16 heads, seq 2048, d128: 4 * 8 * 16 * 2048^2 * 128 = 274.9 GFLOP
    assert b.flops(2048, 128, False) == 4.0 * 8 * 16 * 2048 ** 2 * 128
    assert b.flops(2048, 128, True) == b.flops(2048, 128, False) / 2
    assert b.flops(2048, 128, True, backward=True) == 2.5 * b.flops(2048, 128, True)
    assert b.median([3.0, 1.0, 2.0]) == 2.0 and b.median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_kernel_facts_reads_fences_ptxas_and_shared_memory():
    b = load()

    class Compiled:
        asm = {"ptx": ".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n"
                      "$L_k:\n\twgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%f1}, %rd1, %rd2, 1, 1, 1, 0, 0;\n"
                      "\t@%p1 bra $L_k;\n\tfence.proxy.async.shared::cta;\n\tret;\n}\n",
               "ptxas_log": "ptxas info    : Function properties for k\n    0 bytes stack frame, 0 bytes spill "
                            "stores, 0 bytes spill loads\nptxas info    : Used 168 registers, used 1 barriers\n"}
        resources = {"shared_bytes": 164192}

    facts = b.kernel_facts(Compiled())
    assert facts == {"fences": 1, "fences_in_k_loop": 0, "k_loops": 1, "registers": 168, "spill_stores": 0,
                     "spill_loads": 0, "shared_bytes": 164192}

    class Cached(Compiled):  # read back from the disk cache: the resources hold ptxas's figures
        asm = {"ptx": Compiled.asm["ptx"]}
        resources = {"shared_bytes": 1024, "registers": 40, "spill_stores": 8, "spill_loads": 4}

    assert b.kernel_facts(Cached()) == {"fences": 1, "fences_in_k_loop": 0, "k_loops": 1, "registers": 40,
                                        "spill_stores": 8, "spill_loads": 4, "shared_bytes": 1024}


def test_table_ratios_target_failures_and_wrong_results():
    b = load()

    def res(kernel, tflops=None, direction="forward", seq=2048, causal=False, **kw):
        r = {"kind": "result", "kernel": kernel, "direction": direction, "dtype": "bf16", "head_dim": 128,
             "causal": causal, "seq": seq, "rel_err": 3e-3, **kw}
        if tflops is not None:
            r["tflops"] = tflops
        return r

    recs = [{"kind": "device", "head_dim": 128},
            res("cudnn", 500.0), res("flash", 400.0), res("tlx", 550.0, fences=2, fences_in_k_loop=0, registers=168,
                                                           spill_stores=0, shared_bytes=164192),
            res("tlx-persistent", 450.0),
            # timed in alternation with cuDNN, which ran at 540 then: the ratio is to that, not to cuDNN's own row
            res("cudnn", 600.0, seq=4096), res("tlx", 540.0, seq=4096, cudnn_paired_tflops=540.0),
            res("tlx-persistent", 100.0, seq=4096,
                                                                                rel_err=0.5, wrong=True, nan=7),
            res("cudnn", 300.0, direction="backward"), res("tlx", error="TLXRuntimeError: boom", direction="backward"),
            res("tlx", 250.0, direction="backward", seq=4096, kernels={
                "attn_bwd_dkdv_kernel": {"fences": 2, "fences_in_k_loop": 0, "registers": 168, "spill_stores": 0,
                                         "shared_bytes": 132168}}),
            {"kind": "child", "head_dim": 128, "rc": 3}]
    t = b.table(recs)
    row = next(ln for ln in t.splitlines() if ln.strip().startswith("bf16") and " 2048 |" in ln)
    assert "110%" in row and "80%" in row and "90%" in row  # tlx 550, flash 400, persistent 450 against 500
    row4k = next(ln for ln in t.splitlines() if ln.strip().startswith("bf16") and " 4096 |" in ln)
    assert "540 100%" in row4k
    assert "target (forward, d128, seq >= 2k, >= 100 % of cuDNN): 2/2 points met, worst 100.0%, best 110.0%" in t
    assert "WRONG tlx-persistent forward bf16 d128 causal=False seq 4096" in t
    assert "FAILED tlx backward bf16 d128 causal=False seq 2048: TLXRuntimeError: boom" in t
    assert "tlx bf16 d128 full: 2/0, 168 regs / 0 B, 164192 B" in t
    assert "attn_bwd_dkdv_kernel bf16 d128 full: 2/0, 168 regs / 0 B, 132168 B" in t
    assert "child d128 exited with 3" in t
    bwd = next(ln for ln in t.splitlines() if ln.strip().startswith("bf16") and "FAIL" in ln)
    assert "300" in bwd

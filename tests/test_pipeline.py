"""The pipeline and its pass manager: pass order, per-pass IR snapshots and times, verification
after each pass, printing as it goes, and switching the fence mechanisms off."""

import pytest

from tlx.compiler.errors import IRVerifyError
from tlx.compiler.ir import parse_module
from tlx.compiler.options import CompileOptions
from tlx.compiler.passes.manager import Pass
from tlx.compiler.pipeline import PIPELINE, compile_module

SRC = '''
#f0 = "kernel.py"
module attributes {num_warps = 4, target = "sm_90a"} {
  tt.func @k(%d: !tensordesc<64x64xf16>) {
    %c0 = arith.constant {value = 0} : i32
    %a = arith.constant {value = 1.0} : tensor<64x64xf16> loc(#f0:5:4)
    tt.descriptor_store %d, %a offsets(%c0, %c0) loc(#f0:6:4)
    tt.return
  }
}
'''


def test_pipeline_runs_the_fence_passes_in_their_order():
    names = [p.name for p in PIPELINE]
    want = ["lower_dot", "tma_lowering", "fence_insertion", "smem_allocation", "proxy_fence_insertion", "cta_barriers"]
    assert [n for n in names if n in want] == want


def test_snapshots_times_and_input_ir():
    r = compile_module(parse_module(SRC), CompileOptions(verify_each_pass=True))
    assert "tt.descriptor_store" in r.asm["ir"]
    assert "tt.descriptor_store" not in r.asm["ir.tma_lowering"]
    assert "tlx.tma_store" in r.asm["ir.tma_lowering"]
    assert "offset = 0" in r.asm["ir.smem_allocation"]
    for name in ("lower_dot", "tma_lowering", "fence_insertion", "smem_allocation", "proxy_fence_insertion", "cta_barriers"):
        assert f"ir.{name}" in r.asm
        assert r.pass_times[name] >= 0.0
    assert r.resources["shared_bytes"] == 64 * 64 * 2


def test_print_ir_after_all_env(monkeypatch, capsys):
    monkeypatch.setenv("TLX_PRINT_IR_AFTER_ALL", "1")
    compile_module(parse_module(SRC), CompileOptions(), snapshots=False)
    err = capsys.readouterr().err
    assert "// -----// IR after tma_lowering //----- //" in err
    assert "// -----// IR after cta_barriers //----- //" in err


def test_print_ir_after_all_option(capsys):
    compile_module(parse_module(SRC), CompileOptions(print_ir_after_all=True), snapshots=False)
    assert "IR after smem_allocation" in capsys.readouterr().err


def test_verify_each_pass_names_the_broken_pass():
    def breaker(module, ctx):
        module.body.ops[-1].erase()  # drop tt.return

    with pytest.raises(IRVerifyError, match="after pass 'breaker'"):
        compile_module(parse_module(SRC), CompileOptions(verify_each_pass=True), passes=[Pass("breaker", breaker)])


def test_disabled_passes_are_skipped():
    r = compile_module(parse_module(SRC), CompileOptions(disabled_passes=("smem_allocation",)))
    assert "smem_allocation" not in r.pass_times
    assert "offset =" not in r.asm["ir.cta_barriers"]


def test_the_passes_accesses_agree_with_the_catalogue_effects():
    # memory.accesses_of (what every pass reads) must say what the catalogue's effects_of says
    import sys
    import os
    sys.path.insert(0, os.path.dirname(__file__))
    from catalog import CASES
    from tlx.compiler.ir.ops import effects_of
    from tlx.compiler.analysis.memory import accesses_of

    seen = 0
    for case in CASES:
        m = case.trace()
        for op in m.ops():
            want = [(id(v), e.access, e.proxy) for v, e in effects_of(op)]
            got = [(id(a.value), a.kind, a.proxy) for a in accesses_of(op) if a.value is not None]
            assert got == want, op.name
            seen += bool(want)
    assert seen > 50

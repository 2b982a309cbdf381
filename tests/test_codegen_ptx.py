"""PTX for sm_90a: every catalogue kernel compiles through the whole pipeline to PTX that ptxas
assembles, and the PTX has the structure the fence / wgmma / TMA / warp-specialization rules
call for (checked on the PTX text in program order)."""

from __future__ import annotations

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from catalog import CASES, CASES_BY_NAME, load_tlx_source  # noqa: E402
from tlx.compiler.errors import TLXCompileError, TLXError  # noqa: E402
from tlx.compiler.options import CompileOptions  # noqa: E402
from tlx.compiler.pipeline import compile_module  # noqa: E402
from tlx.compiler.ptxas import PTXASError, assemble, find_ptxas, parse_report  # noqa: E402
from tlx.signature import signature_to_types  # noqa: E402

# what a launch specializes for contiguous row-major arrays: 16-divisible sizes and pointers,
# unit inner strides (Triton's and our launcher's rule)
SPECIALIZE = {
    "tlx_gemm_pipelined": dict(equal_to_one=("stride_ak", "stride_bn", "stride_cn"), div16=True),
}


def compile_case(case, **opts):
    spec = SPECIALIZE.get(case.name)
    if spec:
        div = {n: 16 for n in case.signature} if spec.get("div16") else {}
        m = case.fn.trace(signature_to_types(case.signature), case.constexprs, num_warps=case.num_warps,
                          divisibility=div, equal_to_one=spec.get("equal_to_one", ()))
    else:
        m = case.trace()
    return compile_module(m, CompileOptions(num_warps=case.num_warps, verify_each_pass=True, **opts),
                          snapshots=False)


def ptx_of(name, **opts):
    return compile_case(CASES_BY_NAME[name], **opts).asm["ptx"]


def in_order(text: str, *needles: str) -> None:
    """Each needle occurs after the previous one."""
    pos = 0
    for n in needles:
        i = text.find(n, pos)
        assert i >= 0, f"'{n}' not found after position {pos}:\n{text[pos:pos + 3000]}"
        pos = i + len(n)


def test_ptxas_is_available():
    assert find_ptxas() is not None, "ptxas is needed: put /usr/local/cuda/bin on PATH or set CUDA_HOME"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_catalogue_kernel_assembles(case):
    r = compile_case(case)
    assert isinstance(r.asm.get("cubin"), bytes) and len(r.asm["cubin"]) > 0
    ptx = r.asm["ptx"]
    assert re.search(r"^\.version (\d+)\.(\d+)$", ptx, re.M)
    major, minor = map(int, re.search(r"^\.version (\d+)\.(\d+)$", ptx, re.M).groups())
    assert (major, minor) <= (9, 0)
    assert ".target sm_90a" in ptx
    assert r.resources["spill_stores"] == 0 and r.resources["spill_loads"] == 0, r.resources
    assert r.abi is not None and r.abi.threads_per_cta % 128 == 0 or r.abi.threads_per_cta == 32 * case.num_warps


def test_loc_directives_point_at_the_kernel_source():
    case = CASES_BY_NAME["vector_add"]
    ptx = compile_case(case).asm["ptx"]
    import inspect
    path = inspect.getsourcefile(case.fn.fn) if hasattr(case.fn, "fn") else None
    files = dict(re.findall(r'^\.file (\d+) "([^"]+)"$', ptx, re.M))
    assert any(p.endswith("catalog.py") for p in files.values()), files
    idx = next(k for k, p in files.items() if p.endswith("catalog.py"))
    lines = [int(x) for x in re.findall(rf"^\t\.loc\t{idx} (\d+) \d+$", ptx, re.M)]
    src = open(os.path.join(os.path.dirname(__file__), "catalog.py")).read().splitlines()
    start = next(i for i, s in enumerate(src) if s.startswith("def vector_add")) + 1
    assert lines and all(start <= ln <= start + 12 for ln in lines), (lines, start)
    del path


def test_canonical_tma_store_order():
    """st.shared (the tile) -> fence.proxy.async -> bar.sync -> TMA store -> commit -> wait."""
    for name in ("tma_store_fenced", "tma_store_unfenced"):
        ptx = ptx_of(name)
        in_order(ptx, "st.shared", "fence.proxy.async.shared::cta;", "bar.sync", "cp.async.bulk.tensor.2d.global.shared::cta",
                 "cp.async.bulk.commit_group", "cp.async.bulk.wait_group.read 0")
        assert ptx.count("fence.proxy.async.shared::cta") == 1, name


def test_tma_load_is_issued_by_the_leader_and_completes_on_the_mbarrier():
    ptx = ptx_of("tma_store_fenced")
    in_order(ptx, "mbarrier.init.shared::cta.b64", "bar.sync", "mbarrier.arrive.expect_tx.shared::cta.b64",
             "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
             "mbarrier.try_wait.parity.shared::cta.b64")
    assert re.search(r"@%leader\w* cp\.async\.bulk\.tensor\.2d\.shared::cluster", ptx)
    assert re.search(r"@%leader\w* mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%\w+\], 8192;", ptx)


@pytest.mark.parametrize("name,scope", [("fence_gpu_last_block_sum", "gpu"), ("fence_sys_flag", "sys")])
def test_memory_fences(name, scope):
    assert f"fence.acq_rel.{scope};" in ptx_of(name)


def _loop_body(ptx: str) -> str:
    """The text between the first loop label and its back-edge."""
    m = re.search(r"^(\$L_loop_\d+):$", ptx, re.M)
    assert m, "no loop"
    end = ptx.index(f"bra.uni {m.group(1)};", m.end())
    return ptx[m.end():end]


def test_hoisted_fence_sits_before_the_loop_label():
    ptx = ptx_of("wgmma_store_outside_loop")
    m = re.search(r"^\$L_loop_\d+:$", ptx, re.M)
    assert "fence.proxy.async.shared::cta" in ptx[:m.start()]
    body = _loop_body(ptx)
    assert "fence.proxy.async" not in body and "wgmma.mma_async" in body
    assert "bar.sync" not in body  # the barrier owed by the fence is paid once, before the loop


def test_kept_fence_sits_inside_the_loop():
    ptx = ptx_of("wgmma_store_inside_loop")
    body = _loop_body(ptx)
    in_order(body, "st.shared", "fence.proxy.async.shared::cta;", "bar.sync", "wgmma.fence.sync.aligned",
             "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "wgmma.commit_group.sync.aligned",
             "wgmma.wait_group.sync.aligned 0")


def _gemm_pipelined(block_n: int, num_warps: int = 8):
    gp = load_tlx_source("gemm_pipelined_tlx.py")
    names = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
             "stride_cm", "stride_cn"]
    sig = {n: ("*fp16" if n.endswith("ptr") else "i32") for n in names}
    m = gp.gemm_pipelined_kernel.trace(signature_to_types(sig), {"BLOCK_M": 128, "BLOCK_N": block_n, "BLOCK_K": 64,
                                                                 "GROUP_M": 8, "STAGES": 3},
                                       num_warps=num_warps, divisibility={n: 16 for n in names},
                                       equal_to_one=("stride_ak", "stride_bn", "stride_cn"))
    return compile_module(m, CompileOptions(num_warps=num_warps, verify_each_pass=True), snapshots=False)


def test_pipelined_gemm_wgmma_shape_and_no_spills():
    r = _gemm_pipelined(256)
    ptx = r.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in ptx
    # 128x256 over 2 warpgroups: one m64n256 tile per warpgroup, 4 K steps of 16
    assert ptx.count("wgmma.mma_async") == 4
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 1" in ptx
    assert r.resources["spill_stores"] == 0


def test_128x128_accumulator_over_8_warps_has_no_spills():
    r = _gemm_pipelined(128)
    ptx = r.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert r.resources["spill_stores"] == 0 and r.resources["spill_loads"] == 0 and r.resources["stack_bytes"] == 0
    assert r.resources["registers"] <= 168, r.resources
    # the accumulator stays in one set of registers: no copies of it in the K loop
    assert re.search(r"wgmma\.mma_async\S* \{(%acc_\d+_0),", ptx)


def test_wgmma_descriptors_of_the_pipelined_gemm():
    """A (128x64 fp16, K-major, 128B swizzle): SBO = 8 rows x 128 B, no LBO; B (64x256, N
    contiguous = MN-major): LBO = one 64-row swizzle-atom column (8 KB), SBO = 1 KB; both mode 1."""
    ptx = _gemm_pipelined(256).asm["ptx"]
    his = set(re.findall(r"mov\.b32 %r\d+, (\d+);", ptx))
    assert str((1024 >> 4) | (1 << 30)) in his
    assert "or.b32" in ptx and str((8192 >> 4) << 16) in ptx
    adds = re.findall(r"add\.s64 %rd\d+, %rd\d+, (\d+);", ptx)
    assert {"0", "2", "4", "6"} <= set(adds)  # A: +32 bytes per K step (K-major)
    assert {"128", "256", "384"} <= set(adds)  # B: +16 rows of 128 bytes per K step (MN-major)


def test_warp_specialized_gemm_dispatch_registers_and_barriers():
    r = compile_case(CASES_BY_NAME["tlx_gemm_ws"])
    ptx = r.asm["ptx"]
    assert ".reqntid 384" in ptx and ".maxnreg 168" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx and "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    # partitions' CTA barriers are their own named barriers, with their thread counts
    for bar in re.findall(r"bar\.sync (\d+(?:, \d+)?);", ptx):
        assert bar == "0" or bar in ("0, 128", "2, 128", "3, 128"), bar
    assert r.resources["spill_stores"] == 0
    tma = [p for p in r.abi.params if p.kind == "tensordesc"]
    assert [p.name for p in tma] == ["a_desc", "b_desc", "c_desc"]
    for p in tma:
        assert p.tma.swizzle == 128 and p.tma.box[-1] == 64 and p.size == 128 and p.align == 64
    assert re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx).__len__() == 3


def test_abi_parameter_order_and_kinds():
    r = compile_case(CASES_BY_NAME["vector_add"])
    assert [(p.name, p.kind, p.dtype, p.size) for p in r.abi.params] == [
        ("x_ptr", "pointer", "fp32", 8), ("y_ptr", "pointer", "fp32", 8), ("out_ptr", "pointer", "fp32", 8),
        ("n", "scalar", "i32", 4)]
    assert r.abi.threads_per_cta == 128 and r.abi.shared_bytes == 0


def test_vector_add_uses_16_byte_accesses_when_the_size_is_divisible():
    case = CASES_BY_NAME["vector_add"]
    m = case.fn.trace(signature_to_types(case.signature), case.constexprs, num_warps=4,
                      divisibility={"x_ptr": 16, "y_ptr": 16, "out_ptr": 16, "n": 16})
    ptx = compile_module(m, CompileOptions(num_warps=4), snapshots=False).asm["ptx"]
    assert ptx.count("ld.global.v4.b32") == 4 and ptx.count("st.global.v4.b32") == 2


def test_ptxas_report_parsing():
    log = ("ptxas info    : Used 168 registers, used 4 barriers, 8 bytes smem\n"
           "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n")
    r = parse_report(log)
    assert (r.registers, r.barriers, r.stack_bytes, r.spill_stores, r.spill_loads, r.static_shared_bytes) == \
        (168, 4, 16, 8, 4, 8)


def test_missing_ptxas_is_a_clear_error_only_when_assembling(monkeypatch):
    from tlx.compiler import ptxas as P
    from tlx.compiler.codegen import emit

    monkeypatch.setattr(P, "find_ptxas", lambda: None)
    monkeypatch.setattr(emit, "find_ptxas", lambda: None)
    r = compile_case(CASES_BY_NAME["vector_add"])  # PTX is produced without ptxas
    assert "ptx" in r.asm and "cubin" not in r.asm and r.resources["ptxas"] == "not found"
    with pytest.raises(PTXASError, match="ptxas was not found"):
        P.assemble(r.asm["ptx"])
    assert issubclass(PTXASError, TLXError)


def test_bad_ptx_is_reported_with_the_ptxas_log():
    with pytest.raises(PTXASError, match="ptxas rejected"):
        assemble(".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k() { bogus; }\n")


def test_cp_async_of_unproven_alignment_is_a_compile_error():
    with pytest.raises(TLXCompileError, match="cp.async moves 4, 8 or 16 bytes"):
        compile_case(CASES_BY_NAME["tlx_gemm_pipelined"].__class__(  # the same kernel, strides not specialized
            "unspecialized", CASES_BY_NAME["tlx_gemm_pipelined"].fn, CASES_BY_NAME["tlx_gemm_pipelined"].signature,
            CASES_BY_NAME["tlx_gemm_pipelined"].constexprs, 8))


def test_hopper_only_ops_on_an_older_target_get_no_ptx_and_say_why():
    case = CASES_BY_NAME["wgmma_store_inside_loop"]
    m = case.trace()
    m.attrs["target"] = "sm_80"
    r = compile_module(m, CompileOptions(target="sm_80", num_warps=4), snapshots=False)
    assert "ptx" not in r.asm and "needs sm_90a" in r.resources["codegen"]
    with pytest.raises(TLXCompileError, match="needs sm_90a"):
        from tlx.compiler.codegen.lower import lower_module
        lower_module(m, "sm_80")


def test_an_older_target_gets_plain_ptx_for_plain_kernels():
    m = CASES_BY_NAME["vector_add"].trace()
    m.attrs["target"] = "sm_80"
    r = compile_module(m, CompileOptions(target="sm_80", num_warps=4), snapshots=False)
    assert ".target sm_80" in r.asm["ptx"] and "cubin" in r.asm


def test_one_value_carried_twice_gets_two_homes():
    """scf.for inits(%x, %x) where the two carried values diverge: they must not share registers."""
    from tests_ir_helpers import compile_ir_text

    ptx = compile_ir_text('''
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    %x = arith.addi %n, %c1 : i32
    %a, %b = scf.for %c0, %n, %c1 inits(%x, %x) : i32, i32 {
    ^body(%i: i32, %p: i32, %q: i32):
      %p2 = arith.addi %p, %c1 : i32
      %q2 = arith.muli %q, %n : i32
      scf.yield %p2, %q2
    }
    %s = arith.subi %a, %b : i32
    tt.store %out, %s
''', "%out: !ptr<i32>, %n: i32")
    body = _loop_body(ptx)
    p_reg = re.search(r"add\.s32 %p2_\d+, (%\w+),", body).group(1)
    q_reg = re.search(r"mul\.lo\.s32 %q2_\d+, (%\w+),", body).group(1)
    assert p_reg != q_reg, body  # the two carried values live in different registers
    assert re.search(rf"mov\.b32 {q_reg}, %x_\d+;", ptx) or re.search(rf"mov\.b32 {p_reg}, %x_\d+;", ptx)


def test_subtiled_epilogue_splits_the_accumulator_without_moving_data():
    """reshape -> permute -> split of a wgmma accumulator (the TLX tutorials' EPILOGUE_SUBTILE) is a
    register renaming: no layout conversion through shared memory, stmatrix for both halves."""
    import tlx
    import tlx.language as tl
    from tlx.compiler.ir import print_module

    @tlx.jit
    def subtiled(a_ptr, c_desc, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        a_buf = tlx.local_alloc((BM, BK), tl.float16, 1)
        b_buf = tlx.local_alloc((BK, BN), tl.float16, 1)
        m = tl.arange(0, BM)
        k = tl.arange(0, BK)
        n = tl.arange(0, BN)
        tlx.local_store(a_buf[0], tl.load(a_ptr + m[:, None] * BK + k[None, :]))
        tlx.local_store(b_buf[0], tl.load(a_ptr + k[:, None] * BN + n[None, :]))
        acc = tlx.async_dot(a_buf[0], b_buf[0])
        acc = tlx.async_dot_wait(0, acc)
        acc = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
        acc0, acc1 = tl.split(acc)
        c_desc.store([0, 0], acc0.to(tl.float16))
        c_desc.store([0, BN // 2], acc1.to(tl.float16))

    k = tlx.compile(subtiled, {"a_ptr": "*fp16", "c_desc": "tensordesc<fp16[64, 128]>"},
                    {"BM": 64, "BN": 256, "BK": 64}, num_warps=4, divisibility={"a_ptr": 16})
    assert "tt.convert_layout" not in print_module(k.module, locs=False)
    assert k.asm["ptx"].count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 16
    assert k.resources["spill_stores"] == 0


def test_ptx_checker_catches_code_after_an_unconditional_branch():
    from ptx_checker import undefined_uses

    bad = """.visible .entry k()
{
	mov.u32 	%r0, %tid.x;
	setp.eq.u32 	%p0, %r0, 0;
	@%p0 bra 	$L_a;
	bra.uni 	$L_b;
	shr.u32 	%r1, %r0, 5;
$L_a:
	setp.lt.u32 	%p1, %r1, 4;
$L_b:
	ret;
}
"""
    assert any("%r1 may be undefined" in b for b in undefined_uses(bad))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_register_is_written_on_every_path_before_it_is_read(case):
    from ptx_checker import undefined_uses

    assert undefined_uses(compile_case(case, assemble=False).asm["ptx"]) == []


def test_wait_arrive_rounds_sync_the_cta_before_each_arrive_and_run_on_the_interpreter():
    """One mbarrier, leader arrives and everyone waits, round after round (no warp specialization):
    a bar.sync precedes each of the leader's arrives, so no warp can still poll the previous
    round's parity when the arrive completes the next phase. The interpreter agrees with numpy."""
    import numpy as np

    import tlx
    from kernels import codegen as K

    ptx = K.MBARRIER_ROUNDS.compile().asm["ptx"]  # assembled by ptxas for sm_90a
    arrive = re.compile(r"\t([^\n]*)\n(?:\t\.loc[^\n]*\n)?\t@%leader_0 mbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\];")
    before = arrive.findall(ptx)
    assert before == ["bar.sync 0;"] * 16, before
    assert ptx.count("bar.sync 0;") == 16
    x = np.random.default_rng(3).standard_normal(3 * 1024).astype(np.float32)
    y = np.full_like(x, np.nan)
    tlx.interpret(K.mbarrier_rounds_kernel, (3,), x, y, ROUNDS=6, BLOCK=1024)
    np.testing.assert_allclose(y.astype(np.float64), 7 * x.astype(np.float64), rtol=1e-5, atol=1e-5)

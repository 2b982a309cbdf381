"""Device-side descriptor slots (`tlx.allocate_tensor_descriptor`, `make_tensor_descriptor(desc_ptr=slot)`,
`reinterpret_tensor_descriptor`): the IR ops and their verifier, the PTX (each program's 128-byte
slots in global scratch, the tensormap copy into the slot with its release, the acquire before a
TMA op reads it) assembled by ptxas, the interpreter's numerics against numpy in float64 with
poisoned outputs, and the errors for slots used wrongly."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import tlx
import tlx.language as tl
from filecheck import filecheck
from kernels import desc_slots as K
from tests_ir_helpers import compile_ir_text
from tlx.compiler.errors import IRVerifyError, TLXCompileError
from tlx.compiler.ir import parse_module, verify_module
from tlx.interpreter import InterpreterError


def line_of(fn, marker: str) -> str:
    """`file:line` of the first line of `fn`'s source containing `marker` (what errors must name)."""
    src, first = inspect.getsourcelines(fn)
    k = next(i for i, s in enumerate(src) if marker in s)
    return f"test_desc_slots.py:{first + k}"


# ---- IR: types, ops, verifier ----------------------------------------------------------------------

IR = """#f0 = "k.py"
module attributes {{num_warps = 4, target = "sm_90a"}} {{
  tt.func @k(%x: !ptr<f32>, %n: i32) attributes {{arg_names = ["x", "n"]}} {{
    %c1 = arith.constant {{value = 1}} : i64
    %i = arith.constant {{value = {index}}} : i32
    %s = tlx.allocate_tensor_descriptor {{num = 2}} : !descslots<2>
    %one = tlx.desc_slot %s, %i : !descslot
    %d = tt.make_tensor_descriptor %x shape(%n) strides(%c1) slot(%one) {{padding = "zero"}} : !tensordesc<64xf32>
    %r = tlx.reinterpret_tensor_descriptor %one : !tensordesc<64xf32>
    tt.return
  }}
}}
"""


def test_slot_types_and_ops_print_and_parse_back():
    m = parse_module(IR.format(index=1))
    verify_module(m)
    text = str(m)
    filecheck(text, """
        CHECK: tlx.allocate_tensor_descriptor {num = 2} : !descslots<2>
        CHECK: tlx.desc_slot %{{.*}}, %{{.*}} : !descslot
        CHECK: tt.make_tensor_descriptor {{.*}} slot(%{{.*}}) {{.*}}: !tensordesc<64xf32>
        CHECK: tlx.reinterpret_tensor_descriptor %{{.*}} : !tensordesc<64xf32>
    """)
    assert str(parse_module(text)) == text


def test_verifier_rejects_a_constant_slot_index_out_of_range():
    with pytest.raises(IRVerifyError, match=r"slot index 2 is out of range for !descslots<2>"):
        verify_module(parse_module(IR.format(index=2)))


def test_verifier_rejects_a_slot_array_where_one_slot_is_needed():
    text = IR.format(index=0).replace("slot(%one)", "slot(%s)")
    with pytest.raises(IRVerifyError, match=r"written into one slot \(!descslot\), got !descslots<2>"):
        verify_module(parse_module(text))
    text = IR.format(index=0).replace("reinterpret_tensor_descriptor %one", "reinterpret_tensor_descriptor %s")
    with pytest.raises(IRVerifyError, match=r"reads one slot \(!descslot\), got !descslots<2>"):
        verify_module(parse_module(text))


def test_verifier_checks_the_allocation_count():
    text = IR.format(index=0).replace("{num = 2} : !descslots<2>", "{num = 3} : !descslots<2>")
    with pytest.raises(IRVerifyError, match=r"the result is !descslots<3>"):
        verify_module(parse_module(text))


# ---- PTX -----------------------------------------------------------------------------------------

def test_slots_are_128_byte_steps_of_the_programs_scratch_written_with_a_release_and_acquired_before_tma():
    r = K.SLOT_AFFINE.compile()
    assert isinstance(r.asm.get("cubin"), bytes)
    assert r.abi.scratch_bytes_per_program == 2 * 128  # two slots, no descriptor of its own
    filecheck(r.asm["ptx"], r"""
        CHECK: ld.param.u64 [[G:%rd[0-9]+]], [slot_affine_kernel_param_4];
        CHECK: mul.wide.u32 [[OFF:%rd[0-9]+]], {{%r[0-9]+}}, 256;
        CHECK: add.s64 [[SLOTS:%slots_[0-9]+]], [[G]], [[OFF]];
        CHECK: add.s64 [[S0:%rd[0-9]+]], [[SLOTS]], 0;
        CHECK: mov.b64 [[D0:%desc_[0-9]+]], [[S0]];
        CHECK: tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [{{%r[0-9]+}}], 3;
        CHECK: tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned {{\[}}[[D0]]{{\]}}, [{{%r[0-9]+}}], 128;
        CHECK: fence.proxy.tensormap::generic.acquire.gpu {{\[}}[[D0]]{{\]}}, 128;
        CHECK: add.s64 [[S1:%rd[0-9]+]], [[SLOTS]], 128;
        CHECK: mov.b64 [[D1:%desc_[0-9]+]], [[S1]];
        CHECK: tensormap.cp_fenceproxy.{{.*}} {{\[}}[[D1]]{{\]}}, {{.*}}, 128;
        CHECK: mov.b64 [[XD:%xd_[0-9]+]], {{%rd[0-9]+}};
        CHECK: fence.proxy.tensormap::generic.acquire.gpu {{\[}}[[XD]]{{\]}}, 128;
        CHECK: mov.b64 [[YD:%yd_[0-9]+]], {{%rd[0-9]+}};
        CHECK: fence.proxy.tensormap::generic.acquire.gpu {{\[}}[[YD]]{{\]}}, 128;
        CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{{.*}}], {{\[}}[[XD]], {{.*}}]
        CHECK: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group {{\[}}[[YD]], {{.*}}]
    """)


@tlx.jit
def unswizzled_slot_load_kernel(x_ptr, M, N):
    """x's descriptor goes through slot 0 and loads one 64 x 64 fp16 tile into an unswizzled NVMMA
    buffer (16-byte columns): the make never sees that buffer, only the reinterpretation does."""
    slots = tlx.allocate_tensor_descriptor(num=1)
    tlx.make_tensor_descriptor(slots[0], x_ptr, [M, N], [N, 1], [64, 64])
    xd = tlx.reinterpret_tensor_descriptor(slots[0], [64, 64], tl.float16)
    buf = tlx.local_alloc((64, 64), tl.float16, 1, layout=tlx.nv_mma_shared_layout_encoding(
        shape=[64, 64], order=[1, 0], elemType=tl.float16, numCTAsPerCGA=[1, 1], numCTASplit=[1, 1],
        numCTAOrder=[1, 1], fp4Padded=False, swizzled=False))
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], 64 * 64 * 2)
    tlx.async_descriptor_load(xd, buf[0], [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)


def test_the_encoding_written_into_a_slot_is_that_of_the_tma_ops_of_its_reinterpretations():
    """The default for a 64 x 64 fp16 tile is a 128-byte swizzle and a 64 x 64 box; the buffer the
    reinterpreted descriptor fills is unswizzled, so the make writes swizzle mode 0 and 8-column boxes."""
    ck = tlx.compile(unswizzled_slot_load_kernel, signature={"x_ptr": "*fp16", "M": "i32", "N": "i32"})
    assert isinstance(ck.asm.get("cubin"), bytes)
    filecheck(ck.asm["ptx"], r"""
        CHECK: tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [{{%r[0-9]+}}], 0, 8;
        CHECK: tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [{{%r[0-9]+}}], 1, 64;
        CHECK: tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [{{%r[0-9]+}}], 0;
        CHECK: tensormap.cp_fenceproxy
        CHECK-COUNT-8: cp.async.bulk.tensor.2d.shared::cluster.global
    """)


def test_a_runtime_slot_index_steps_128_bytes_and_scratch_holds_slots_and_own_descriptors():
    r = K.SLOT_SELECT.compile()
    assert r.abi.scratch_bytes_per_program == 3 * 128 + 128  # three slots and out's descriptor
    filecheck(r.asm["ptx"], r"""
        CHECK: mad.wide.s32 [[S:%rd[0-9]+]], %sel_{{[0-9]+}}, 128, %slots_{{[0-9]+}};
        CHECK: mov.b64 [[SRC:%src_[0-9]+]], [[S]];
        CHECK: fence.proxy.tensormap::generic.acquire.gpu {{\[}}[[SRC]]{{\]}}, 128;
        CHECK: cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [{{.*}}], {{\[}}[[SRC]], {{.*}}]
    """)


def test_a_worker_partition_acquires_the_slots_it_reads():
    ptx = K.SLOT_WS.compile().asm["ptx"]
    body = ptx[ptx.index("tensormap.cp_fenceproxy"):]
    xd = re.search(r"mov\.b64 (%xd_\d+), %rd\d+;\n\s*fence\.proxy\.tensormap::generic\.acquire\.gpu \[\1\], 128;", body)
    assert xd is not None, body
    assert body.index(xd.group(0)) < body.index(f"[{xd.group(1)}, ")  # acquired before the TMA load uses it


def test_slots_in_ir_text_compile_and_assemble():
    body = """
    %c1 = arith.constant {value = 1} : i64
    %c0 = arith.constant {value = 0} : i32
    %s = tlx.allocate_tensor_descriptor {num = 1} : !descslots<1>
    %one = tlx.desc_slot %s, %c0 : !descslot
    %d = tt.make_tensor_descriptor %x shape(%n) strides(%c1) slot(%one) {padding = "zero"} : !tensordesc<64xf32>
    %r = tlx.reinterpret_tensor_descriptor %one : !tensordesc<64xf32>
    %t = tt.descriptor_load %r offsets(%c0) : tensor<64xf32>
    tt.descriptor_store %r, %t offsets(%c0)"""
    ptx = compile_ir_text(body, "%x: !ptr<f32>, %n: i32")
    filecheck(ptx, r"""
        CHECK: tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned {{\[}}[[D:%[a-z_0-9]+]]{{\]}}
        CHECK: fence.proxy.tensormap::generic.acquire.gpu {{\[}}[[D]]{{\]}}, 128;
        CHECK: mov.b64 [[R:%rv_[0-9]+]], {{%rd[0-9]+}};
        CHECK-NEXT: fence.proxy.tensormap::generic.acquire.gpu {{\[}}[[R]]{{\]}}, 128;
        CHECK: cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [{{.*}}], {{\[}}[[R]], {{.*}}]
    """)


# ---- the interpreter against numpy -----------------------------------------------------------------

def test_interpreter_affine_through_slots_matches_numpy():
    rng = np.random.default_rng(0)
    M, N = 128, 192
    x = rng.standard_normal((M, N)).astype(np.float16)
    y = np.full((M, N), np.nan, np.float16)  # poisoned
    tlx.interpret(K.slot_affine_kernel, (M // 64, N // 64), x, y, M, N, BM=64, BN=64)
    ref = 2 * x.astype(np.float64) + 1
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("sel", [0, 1, 2])
def test_interpreter_runtime_slot_index_reads_that_slot(sel):
    rng = np.random.default_rng(sel)
    n = 1024
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    out = np.full(n, np.nan, np.float32)
    tlx.interpret(K.slot_select_kernel, (n // 256,), a, b, c, out, np.array([sel], np.int32), n, BLOCK=256)
    np.testing.assert_array_equal(out.astype(np.float64), (a, b, c)[sel].astype(np.float64))


def test_interpreter_worker_partition_reads_slots_written_outside():
    rng = np.random.default_rng(3)
    n = 2048
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    tlx.interpret(K.slot_ws_kernel, (n // 512,), x, y, n, BLOCK=512)
    np.testing.assert_allclose(y.astype(np.float64), x.astype(np.float64) - 3, rtol=1e-6, atol=1e-6)


# ---- errors ----------------------------------------------------------------------------------------

@tlx.jit
def read_slot_kernel(x_ptr, y_ptr, n, k, BLOCK: tl.constexpr):
    slots = tlx.allocate_tensor_descriptor(num=2)
    tlx.make_tensor_descriptor(slots[0], x_ptr, [n], [1], [BLOCK])
    d = tlx.reinterpret_tensor_descriptor(slots[k], [BLOCK], tl.float32)  # READ
    d.store([0], d.load([0]) + 1)


def test_reading_a_slot_never_written_is_reported_at_the_kernels_line():
    x = np.zeros(64, np.float32)
    with pytest.raises(InterpreterError, match="descriptor slot 1, which holds no descriptor") as e:
        tlx.interpret(read_slot_kernel, (1,), x, x, 64, 1, BLOCK=64)
    assert line_of(read_slot_kernel.fn, "# READ") in str(e.value)


def test_a_runtime_slot_index_out_of_range_is_reported():
    x = np.zeros(64, np.float32)
    with pytest.raises(InterpreterError, match=r"descriptor slot index 5 is out of range 0\.\.1"):
        tlx.interpret(read_slot_kernel, (1,), x, x, 64, 5, BLOCK=64)


def test_reinterpreting_with_another_block_shape_or_dtype_is_a_compile_error_at_its_line():
    @tlx.jit
    def k(x_ptr, n, BLOCK: tl.constexpr, RB: tl.constexpr, DT: tl.constexpr):
        slots = tlx.allocate_tensor_descriptor(num=1)
        tlx.make_tensor_descriptor(slots[0], x_ptr, [n], [1], [BLOCK])
        d = tlx.reinterpret_tensor_descriptor(slots[0], [RB], DT)  # MISMATCH
        d.store([0], d.load([0]))

    sig = {"x_ptr": "*fp32", "n": "i32"}
    for rb, dt, what in [(32, tl.float32, r"\[32\] x fp32"), (64, tl.int32, r"\[64\] x int32")]:
        with pytest.raises(TLXCompileError, match=f"reads slot 0 as {what}, but make_tensor_descriptor wrote it "
                                                  r"for \[64\] x fp32") as e:
            tlx.compile(k, signature=sig, constexprs={"BLOCK": 64, "RB": rb, "DT": dt})
        assert line_of(k.fn, "# MISMATCH") in str(e.value)
    tlx.compile(k, signature=sig, constexprs={"BLOCK": 64, "RB": 64, "DT": tl.float32})  # consistent: fine


def test_a_mismatch_the_trace_cannot_see_is_caught_by_the_compiler():
    """The reinterpret comes first in program order (a loop's next iteration would read the slot the
    make below writes): the compiler still pairs them through the slot and reports the reinterpret."""
    @tlx.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        slots = tlx.allocate_tensor_descriptor(num=2)
        d = tlx.reinterpret_tensor_descriptor(slots[1], [BLOCK // 2], tl.float32)  # EARLY
        tlx.make_tensor_descriptor(slots[1], x_ptr, [n], [1], [BLOCK])
        d.store([0], d.load([0]))

    with pytest.raises(TLXCompileError, match=r"reads slot 1 as !tensordesc<32xf32>, but make_tensor_descriptor "
                                              r"writes it as !tensordesc<64xf32>") as e:
        tlx.compile(k, signature={"x_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": 64})
    assert line_of(k.fn, "# EARLY") in str(e.value)


def test_a_constant_slot_index_out_of_range_is_a_compile_error():
    @tlx.jit
    def k(x_ptr, n):
        slots = tlx.allocate_tensor_descriptor(num=2)
        tlx.make_tensor_descriptor(slots[2], x_ptr, [n], [1], [64])  # OOR

    with pytest.raises(TLXCompileError, match=r"descriptor slot index 2 is out of range 0\.\.1") as e:
        tlx.compile(k, signature={"x_ptr": "*fp32", "n": "i32"})
    assert line_of(k.fn, "# OOR") in str(e.value)


@pytest.mark.parametrize("num", [0, "two"])
def test_allocate_needs_a_positive_constant_count(num):
    @tlx.jit
    def k(NUM: tl.constexpr):
        tlx.allocate_tensor_descriptor(num=NUM)

    with pytest.raises(tlx.TLXError, match="allocate_tensor_descriptor needs a positive constexpr num"):
        tlx.compile(k, constexprs={"NUM": num})


def test_desc_ptr_must_be_a_slot_and_a_slot_cannot_be_indexed_again():
    @tlx.jit
    def k(x_ptr, n, WHAT: tl.constexpr):
        slots = tlx.allocate_tensor_descriptor(num=2)
        if WHAT == 0:
            tlx.make_tensor_descriptor(x_ptr, x_ptr, [n], [1], [64])
        else:
            tlx.reinterpret_tensor_descriptor(slots[0][0], [64], tl.float32)

    sig = {"x_ptr": "*fp32", "n": "i32"}
    with pytest.raises(TLXCompileError, match="desc_ptr must be a descriptor slot from tlx.allocate_tensor_descriptor"):
        tlx.compile(k, signature=sig, constexprs={"WHAT": 0})
    with pytest.raises(TLXCompileError, match="this is already one slot"):
        tlx.compile(k, signature=sig, constexprs={"WHAT": 1})


def test_update_tensor_descriptor_is_amd_only_and_says_what_to_do_on_hopper():
    @tlx.jit
    def k(x_ptr, n):
        d = tl.make_tensor_descriptor(x_ptr, [n], [1], [64])
        tlx.update_tensor_descriptor(d, add_offsets=[64])

    with pytest.raises(TLXCompileError, match="(?s)AMD TDM .*make_tensor_descriptor\\(desc_ptr=slot"):
        tlx.compile(k, signature={"x_ptr": "*fp32", "n": "i32"})


@tlx.jit
def branch_slot_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """Program 0 reads its tile through x's slot, the others through y's (a slot chosen by an `if`):
    y[tile] = src[tile] + 1."""
    slots = tlx.allocate_tensor_descriptor(num=2)
    tlx.make_tensor_descriptor(slots[0], x_ptr, [n], [1], [BLOCK])
    tlx.make_tensor_descriptor(slots[1], y_ptr, [n], [1], [BLOCK])
    s = slots[0]
    if tl.program_id(0) > 0:
        s = slots[1]
    src = tlx.reinterpret_tensor_descriptor(s, [BLOCK], tl.float32)
    yd = tlx.reinterpret_tensor_descriptor(slots[1], [BLOCK], tl.float32)
    off = tl.program_id(0) * BLOCK
    yd.store([off], src.load([off]) + 1)


def test_a_slot_chosen_by_a_branch_compiles_and_interprets():
    ck = tlx.compile(branch_slot_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
                     constexprs={"BLOCK": 64})
    assert isinstance(ck.asm.get("cubin"), bytes)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(128).astype(np.float32)
    y = np.concatenate([np.full(64, np.nan, np.float32), rng.standard_normal(64).astype(np.float32)])
    ref = np.concatenate([x[:64].astype(np.float64) + 1, y[64:].astype(np.float64) + 1])
    tlx.interpret(branch_slot_kernel, (2,), x, y, 128, BLOCK=64)
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=1e-6, atol=1e-6)

"""Tracing: every catalogue kernel traces to verified IR that round-trips through the printer and
parser; the IR has the structure the source asks for (one loop per runtime loop, carried values,
branches with results, warp-specialize partitions with captures)."""

import difflib
import os

import numpy as np
import pytest

import catalog
import tlx
import tlx.language as tl
from tlx.compiler.errors import TLXCompileError, TLXValueError
from tlx.compiler.ir import parse_module, print_module, types as T, verify_module
from tlx.signature import signature_to_types


def ops_named(m, name):
    return [op for op in m.ops() if op.name == name]


def top_level(m, name):
    return [op for op in m.body.ops if op.name == name]


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_kernel_traces_verifies_and_round_trips(case):
    m = case.trace()
    verify_module(m)
    text = print_module(m)
    again = parse_module(text)
    verify_module(again)
    assert print_module(again) == text
    assert print_module(parse_module(print_module(m, locs=False)), locs=False) == print_module(m, locs=False)


def test_catalogue_has_a_dozen_kernels_including_the_tutorial_rewrites():
    names = {c.name for c in catalog.CASES}
    assert len(names) >= 12
    assert {"tlx_gemm_pipelined", "tlx_gemm_ws", "tlx_fa_fwd"} <= names


def test_pipelined_gemm_k_loop_is_one_loop_carrying_the_accumulator():
    m = catalog.CASES_BY_NAME["tlx_gemm_pipelined"].trace()
    loops = top_level(m, "scf.for")
    assert len(loops) == 2  # the prologue and the K loop, neither unrolled
    prologue, kloop = loops
    assert prologue.attrs["loop_unroll_factor"] == 2
    assert kloop.attrs["num_stages"] == 1
    acc_t = T.TensorType((128, 256), T.f32)
    assert [r.type for r in kloop.results].count(acc_t) == 1
    body = kloop.regions[0].block
    dots = [op for op in body.ops if op.name == "tlx.async_dot"]
    waits = [op for op in body.ops if op.name == "tlx.async_dot_wait"]
    assert len(dots) == 1 and len(waits) == 1 and waits[0].attrs["pendings"] == 1
    acc_arg = [a for a in body.args if a.type == acc_t][0]
    assert dots[0].arg("acc") is acc_arg  # the carried accumulator feeds the dot
    assert body.terminator.operands[[r.type for r in kloop.results].index(acc_t)] is waits[0].results[0]
    # the pointer tensors are carried too
    assert sum(isinstance(r.type, T.TensorType) and isinstance(r.type.element, T.PointerType) for r in kloop.results) == 2
    assert len(ops_named(m, "tlx.async_load")) == 4


def test_ws_gemm_has_partitions_with_captures():
    m = catalog.CASES_BY_NAME["tlx_gemm_ws"].trace()
    (ws,) = ops_named(m, "tlx.warp_specialize")
    assert len(ws.regions) == 3  # default producer + two consumer replicas
    assert ws.attrs["partition_num_warps"] == [4, 4]
    assert ws.attrs["partition_registers"] == [232, 232]
    caps = ws.group("captures")
    assert caps, "the consumers use buffers and barriers allocated outside the partitions"
    for r in ws.regions[1:]:
        assert [a.type for a in r.block.args] == [c.type for c in caps]
        for op in r.block.ops:  # isolated: nothing from outside but the captures
            for v in op.operands:
                assert not any(v is c for c in caps)
    producer_loops = [op for op in ws.regions[0].block.ops if op.name == "scf.for"]
    assert len(producer_loops) == 1
    # tl.static_range(GROUPS) unrolled: one B and two A loads per iteration
    assert sum(op.name == "tlx.tma_load" for op in producer_loops[0].regions[0].block.ops) == 3
    # each replica stores its own half: offsets differ by the constexpr replica id
    stores = [op for r in ws.regions[1:] for op in r.block.ops if op.name == "tt.descriptor_store"]
    assert len(stores) == 2


def test_fa_forward_uses_register_a_and_transposed_k():
    m = catalog.CASES_BY_NAME["tlx_fa_fwd"].trace()
    dots = ops_named(m, "tlx.async_dot")
    assert len(dots) == 4  # QK^T and PV in each of two consumer replicas
    assert sum(isinstance(d.arg("a").type, T.TensorType) for d in dots) == 2
    trans_b = [d for d in dots if d.arg("b").defining_op is not None and d.arg("b").defining_op.name == "tlx.memdesc_trans"]
    assert len(trans_b) == 2
    assert trans_b[0].arg("b").type.layout.transposed is True
    reduces = {op.attrs["kind"] for op in ops_named(m, "tt.reduce")}
    assert reduces == {"max", "sum"}


def test_early_return_puts_the_rest_in_the_else_branch():
    m = catalog.CASES_BY_NAME["early_exit"].trace()
    (ifop,) = top_level(m, "scf.if")
    then_b, else_b = (r.block for r in ifop.regions)
    assert [op.name for op in then_b.ops] == ["scf.yield"]
    assert any(op.name == "tt.store" for op in else_b.ops)
    assert not any(op.name == "tt.store" for op in m.body.ops)


def test_while_if_results_and_inlined_tuple_helper():
    m = catalog.CASES_BY_NAME["ring_counter"].trace()
    (w,) = top_level(m, "scf.while")
    assert [r.type for r in w.results] == [T.i32, T.i32]
    after = w.regions[1].block
    (ifop,) = [op for op in after.ops if op.name == "scf.if"]
    assert [r.type for r in ifop.results] == [T.i32]
    assert any(op.name == "arith.remsi" for op in after.ops)  # the helper's body, inlined


def _trace(fn, sig, consts=None, **kw):
    return fn.trace(signature_to_types(sig), consts or {}, **kw)


@tlx.jit
def _promotions(xh, xi, xl, xb, xu, out):
    h = tl.load(xh)            # fp16
    i = tl.load(xi)            # i32
    l = tl.load(xl)            # i64
    b = tl.load(xb)            # bf16
    u = tl.load(xu)            # u32
    tl.store(out, (h * 2.0).to(tl.float32))      # weak float keeps fp16
    tl.store(out, (h + b).to(tl.float32))         # fp16 + bf16 -> fp16 (Triton rule 3 before rule 4)
    tl.store(out, (i + l).to(tl.float32))         # i32 + i64 -> i64
    tl.store(out, i / 3)                          # int / int -> fp32
    tl.store(out, (i // 3).to(tl.float32))        # signed floor-div -> divsi
    tl.store(out, (u < 5).to(tl.float32))         # unsigned compare -> ult
    tl.store(out, (h / 2.0))                      # fp16 / -> fp32


def test_type_promotion_follows_triton():
    m = _trace(_promotions, {"xh": "*fp16", "xi": "*i32", "xl": "*i64", "xb": "*bf16", "xu": "*u32", "out": "*fp32"})
    names = [op.name for op in m.ops()]
    mulf = [op for op in m.ops() if op.name == "arith.mulf"]
    assert mulf[0].result.type == T.f16
    addf = [op for op in m.ops() if op.name == "arith.addf"]
    assert addf[0].result.type == T.f16
    addi = [op for op in m.ops() if op.name == "arith.addi"]
    assert addi[0].result.type == T.i64
    divf = [op for op in m.ops() if op.name == "arith.divf"]
    assert [d.result.type for d in divf] == [T.f32, T.f32]
    assert "arith.divsi" in names
    assert [op.attrs["predicate"] for op in m.ops() if op.name == "arith.cmpi"] == ["ult"]


@tlx.jit
def _where_of_numbers(out_i, out_f, n):
    pid = tl.program_id(0)
    tl.store(out_i + pid, pid + tl.where(pid < n, 1, 0))
    tl.store(out_f + pid, tl.where(pid < n, 1, 2.5))


def test_where_of_two_python_numbers_types_them_as_triton_constants():
    """`tl.where(c, 1, 0)` is an i32 select and `tl.where(c, 1, 2.5)` an f32 one (Triton types
    the constants int32 / fp32 first); it used to stop with an internal error."""
    m = _trace(_where_of_numbers, {"out_i": "*i32", "out_f": "*fp32", "n": "i32"})
    assert [op.result.type for op in ops_named(m, "arith.select")] == [T.i32, T.f32]
    out_i, out_f = np.zeros(5, np.int32), np.zeros(5, np.float32)
    tlx.interpret(_where_of_numbers, (5,), out_i, out_f, 2)
    assert out_i.tolist() == [1, 2, 2, 3, 4] and out_f.tolist() == [1, 1, 2.5, 2.5, 2.5]


@tlx.jit
def _static_and_constexpr(x_ptr, n, FLAG: tl.constexpr, REPS: tl.constexpr):
    acc = tl.zeros((64,), dtype=tl.float32)
    for i in tl.static_range(REPS):
        acc += i
    if FLAG:
        acc += 100.0
    else:
        acc -= 100.0
    for j in range(n, 0, -2):
        acc += j
    v = 1.0 if FLAG else 2.0
    w = acc if n > 3 else acc * 2.0
    tl.store(x_ptr + tl.arange(0, 64), w + v)


def test_static_range_unrolls_constexpr_if_is_decided_and_negative_steps_flip():
    m = _trace(_static_and_constexpr, {"x_ptr": "*fp32", "n": "i32"}, {"FLAG": True, "REPS": 3})
    assert len(top_level(m, "scf.for")) == 1  # only the runtime loop
    assert not any(op.name == "arith.subf" for op in m.body.ops)  # the else branch was not traced
    loop = top_level(m, "scf.for")[0]
    # range(n, 0, -2): bounds swapped (0 .. n step 2) and the iv mirrored as n - iv + 0
    assert loop.arg("lb").defining_op.attrs["value"] == 0
    assert loop.arg("ub") is m.body.args[1]
    assert loop.arg("step").defining_op.attrs["value"] == 2
    body = loop.regions[0].block
    assert body.ops[0].name == "arith.subi" and body.ops[0].operands[1] is body.args[0]
    assert len(top_level(m, "scf.if")) == 1  # the runtime conditional expression


def test_local_alloc_picks_the_largest_swizzle_the_row_allows():
    @tlx.jit
    def k(x_ptr):
        a = tlx.local_alloc((64, 64), tl.float16, 2)    # 128-byte rows
        b = tlx.local_alloc((64, 32), tl.float16, 1)    # 64-byte rows
        c = tlx.local_alloc((16, 16), tl.float16, 1)    # 32-byte rows
        d = tlx.local_alloc((256,), tl.float32, 1)      # 1-D: unswizzled
        tlx.local_store(a[0], tl.zeros((64, 64), dtype=tl.float16))
        tlx.local_store(b[0], tl.zeros((64, 32), dtype=tl.float16))
        tlx.local_store(c[0], tl.zeros((16, 16), dtype=tl.float16))
        tlx.local_store(d[0], tl.zeros((256,), dtype=tl.float32))

    m = _trace(k, {"x_ptr": "*fp32"})
    lays = [op.result.type.layout for op in ops_named(m, "tlx.local_alloc")]
    assert [getattr(l, "swizzle", None) for l in lays] == [128, 64, 32, None]
    assert ops_named(m, "tlx.local_alloc")[0].result.type.shape == (2, 64, 64)


def test_equal_to_one_specializes_to_a_constant():
    m = catalog.CASES_BY_NAME["vector_add"].fn.trace(
        signature_to_types({"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}), {"BLOCK": 64},
        equal_to_one=("n",))
    assert not m.body.args[3].uses  # n is the constant 1 in the body
    assert m.func.attrs["equal_to_one"] == ["n"]


def test_user_fence_is_a_fence_op_with_origin_user():
    m = catalog.CASES_BY_NAME["tma_store_fenced"].trace()
    (f,) = ops_named(m, "tlx.fence_async_shared")
    assert f.attrs == {"cluster": False, "origin": "user"}
    assert 'origin = "user"' in print_module(m)
    m2 = catalog.CASES_BY_NAME["fence_gpu_last_block_sum"].trace()
    assert [op.attrs["scope"] for op in ops_named(m2, "tlx.fence")] == ["gpu", "gpu"]


def test_deprecated_fence_alias_warns_once():
    @tlx.jit
    def k(x_ptr):
        tlx.fence_async_shared()
        tlx.fence_async_shared()

    import tlx.mem_ops as mo

    mo._warned_fence_alias[0] = False
    with pytest.warns(DeprecationWarning) as rec:
        m = _trace(k, {"x_ptr": "*fp32"})
    assert len([w for w in rec if issubclass(w.category, DeprecationWarning)]) == 1
    assert len(ops_named(m, "tlx.fence_async_shared")) == 2


SOURCES = ["gemm_pipelined_tlx.py", "gemm_ws_tlx.py", "fa_fwd_tlx.py", "tma_store_tlx.py"]


@pytest.mark.parametrize("name", SOURCES)
def test_real_tlx_kernel_needs_only_its_imports_changed(name):
    with open(os.path.join(catalog.HERE, "tlx_sources", name)) as f:
        original = f.read()
    swapped = catalog.swap_imports(original)
    changed = [l for l in difflib.ndiff(original.splitlines(), swapped.splitlines()) if l[:1] in "+-"]
    for line in changed:
        body = line[2:].strip()
        assert body.startswith(("import ", "@")), f"not an import or decorator line: {line}"
    mod = catalog.load_tlx_source(name)
    kernels = [v for v in vars(mod).values() if isinstance(v, tlx.JITFunction)]
    assert len(kernels) == 1


@tlx.jit
def _tile_walk_in_every_partition(out_ptr, n_tiles, STEP: tl.constexpr):
    # `tile` is bound before async_tasks and advanced by a loop in each partition: every partition
    # starts from the value bound outside (a worker partition receives it as a capture).
    tile = tl.program_id(0)
    seen = tl.program_id(0) * 0
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(0, n_tiles):
                tile += STEP
            tl.store(out_ptr + 0, tile)
        with tlx.async_task(num_warps=4):
            for i in range(0, n_tiles):
                tile += 2 * STEP
            if n_tiles > 100:
                seen = tile
            tl.store(out_ptr + 1, tile)
            tl.store(out_ptr + 2, seen)


def test_a_value_bound_before_async_tasks_and_carried_by_a_worker_loop_is_captured():
    sig = {"out_ptr": "*i32", "n_tiles": "i32"}
    m = _tile_walk_in_every_partition.trace(signature_to_types(sig), {"STEP": 3})
    (ws,) = ops_named(m, "tlx.warp_specialize")
    worker = ws.regions[1].block
    (loop,) = [op for op in worker.ops if op.name == "scf.for"]
    assert loop.operands[3] in worker.args  # the carried init is one of the partition's captures
    (branch,) = [op for op in worker.ops if op.name == "scf.if"]
    else_yield = branch.regions[1].block.terminator
    assert else_yield.operands[0] in worker.args  # `seen` unchanged on the else path: the capture
    ck = tlx.compile(_tile_walk_in_every_partition, signature=sig, constexprs={"STEP": 3})
    assert ".entry" in ck.asm["ptx"] and ck.asm["cubin"]  # assembled by ptxas for sm_90a


def test_loop_carried_capture_runs_on_the_interpreter():
    import numpy as np
    out = np.full(3, -1, dtype=np.int32)
    tlx.interpret(_tile_walk_in_every_partition, (2,), out, 5, STEP=3)
    # the last program (pid 1) writes last: 1 + 5*3, 1 + 5*6, and `seen` stays 0 (n_tiles <= 100)
    assert out.tolist() == [16, 31, 0]


@tlx.jit
def _branch_tensors_in_a_worker(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # the worker's `if` computes block tensors from a load inside each branch (they cannot be
    # recomputed outside the partition) and yields them
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            if n > 8:
                m = tl.max(x, 0)
                y = x - m
            else:
                s = tl.sum(x, 0)
                y = x + s
            tl.store(out_ptr + offs, y, mask=offs < n)


def test_block_tensors_made_inside_a_worker_branch_are_the_partitions_own():
    """A branch of a worker's runtime `if` is traced before its scf.if exists; what it computes
    is still inside the partition (no capture error), and the values it yields are right."""
    import numpy as np
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    m = _branch_tensors_in_a_worker.trace(signature_to_types(sig), {"BLOCK": 16})
    (ws,) = ops_named(m, "tlx.warp_specialize")
    (branch,) = [op for op in ws.regions[1].block.ops if op.name == "scf.if"]
    assert len(branch.results) == 1 and isinstance(branch.results[0].type, T.TensorType)  # y, yielded
    assert not any(isinstance(a.type, T.TensorType) for a in ws.regions[1].block.args)  # no tensor capture
    x = np.arange(16, dtype=np.float32) - 3.0
    for n, want in ((12, x[:12] - x[:12].max()), (5, x[:5] + x[:5].sum())):
        out = np.full(16, np.nan, np.float32)
        tlx.interpret(_branch_tensors_in_a_worker, (1,), x, out, n, BLOCK=16)
        np.testing.assert_array_equal(out[:n], want)
        assert np.isnan(out[n:]).all()
    ck = tlx.compile(_branch_tensors_in_a_worker, signature=sig, constexprs={"BLOCK": 16})
    assert ck.asm["cubin"]  # assembled by ptxas for sm_90a


@tlx.jit
def _replicated_default(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # each replica of each task writes its own row of `out`: x + 10 * (row id)
    offs = tl.arange(0, BLOCK)
    with tlx.async_tasks():
        with tlx.async_task("default", replicate=2, num_regs=160):
            r = tlx.async_task_replica_id()
            x = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(out_ptr + r * BLOCK + offs, x + 10 * r, mask=offs < n)
        with tlx.async_task(num_warps=1, replicate=2, registers=56):
            r = tlx.async_task_replica_id()
            offs_w = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs_w, mask=offs_w < n)
            tl.store(out_ptr + (2 + r) * BLOCK + offs_w, x + 10 * (2 + r), mask=offs_w < n)


def test_a_replicated_default_task_runs_its_later_replicas_as_partitions_of_the_kernels_warps():
    m = _replicated_default.trace(signature_to_types({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}),
                                  {"BLOCK": 128}, num_warps=4)
    (ws,) = ops_named(m, "tlx.warp_specialize")
    assert len(ws.regions) == 4  # the default, two worker replicas, the default's second replica
    assert ws.attrs["partition_num_warps"] == [1, 1, 4]
    assert ws.attrs["partition_registers"] == [56, 56, 160] and ws.attrs["default_registers"] == 160
    ck = tlx.compile(_replicated_default, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                     constexprs={"BLOCK": 128}, num_warps=4)
    assert ck.asm["cubin"]  # assembled by ptxas for sm_90a
    # `offs` (an arange made before async_tasks) is recomputed at the top of the partitions that use it
    for region in ws.regions[1:]:
        names = [op.name for op in region.block.ops]
        assert "tt.make_range" in names and names.index("tt.make_range") < names.index("tt.load")


def test_replicated_default_task_on_the_interpreter():
    import numpy as np
    x = np.random.default_rng(1).standard_normal(128).astype(np.float32)
    out = np.full((4, 128), np.nan, dtype=np.float32)
    tlx.interpret(_replicated_default, (1,), x, out, 100, BLOCK=128)
    ref = x.astype(np.float64)[None, :100] + 10.0 * np.arange(4)[:, None]
    np.testing.assert_allclose(out[:, :100], ref, rtol=1e-6)
    assert np.isnan(out[:, 100:]).all()  # masked lanes untouched


@pytest.mark.parametrize("kwargs", [{"num_regs": 25}, {"registers": 25}, {"num_regs": 16}])
@pytest.mark.parametrize("default", [True, False])
def test_register_budgets_must_be_multiples_of_8_in_range_and_are_value_errors(kwargs, default):
    args = ("default",) if default else ()
    extra = {} if default else {"num_warps": 1}
    with pytest.raises(ValueError, match="num_regs must be") as e:
        tlx.async_task(*args, **extra, **kwargs)
    assert isinstance(e.value, tlx.TLXError)
    assert tlx.async_task("default", num_regs=128).num_regs == 128
    assert tlx.async_task(num_warps=4, registers=232).num_regs == 232


def test_ops_of_a_helper_traced_for_the_first_time_carry_their_file_lines(tmp_path):
    """A @tlx.jit helper's ops are located at their lines in the file, also on the helper's first
    trace (its source, which sets the line offset, used to be read only after its tracer had
    copied the offset: the first kernel to call it got lines counted from the helper's decorator)."""
    import importlib.util

    src = tmp_path / "helper_lines.py"
    src.write_text("import tlx\nimport tlx.language as tl\n\n\n\n\n@tlx.jit\ndef helper(x_ptr):\n"
                   "    tl.store(x_ptr, 1.0)\n\n\n@tlx.jit\ndef kernel(x_ptr):\n    helper(x_ptr)\n"
                   "    tl.store(x_ptr + 1, 2.0)\n")
    spec = importlib.util.spec_from_file_location("helper_lines", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = mod.kernel.trace(signature_to_types({"x_ptr": "*fp32"}), {})
    assert sorted(op.loc.line for op in ops_named(m, "tt.store")) == [9, 15]


@tlx.jit
def _ws_spelled(out_ptr, WS: tl.constexpr):
    with tlx.async_tasks(warp_specialize=WS):
        with tlx.async_task("default"):
            tl.store(out_ptr + 0, 1)
        with tlx.async_task(num_warps=1):
            tl.store(out_ptr + 1, 2)


def test_async_tasks_takes_warp_specialize_true_as_the_real_tlx_spells_it_and_refuses_false():
    import numpy as np

    m = _ws_spelled.trace(signature_to_types({"out_ptr": "*i32"}), {"WS": True}, num_warps=4)
    assert len(ops_named(m, "tlx.warp_specialize")) == 1
    out = np.zeros(2, np.int32)
    tlx.interpret(_ws_spelled, (1,), out, WS=True)
    assert out.tolist() == [1, 2]
    with pytest.raises(TLXValueError, match="always warp-specialized"):
        _ws_spelled.trace(signature_to_types({"out_ptr": "*i32"}), {"WS": False}, num_warps=4)


def test_f_strings_apply_conversions_and_format_specs_to_compile_time_values():
    """`f"{NAME!r}"` quotes a constexpr string and `{X:>4}` pads it, as Python's f-strings do."""
    @tlx.jit
    def k(x_ptr, NAME: tl.constexpr, X: tl.constexpr):
        tl.static_assert(X < 0, f"{NAME!r}|{X:>4}|{NAME!s}|{'é'!a}")
        tl.store(x_ptr, X)

    with pytest.raises(TLXCompileError) as err:
        tlx.compile(k, signature={"x_ptr": "*i32"}, constexprs={"NAME": "tile", "X": 7})
    assert "static_assert failed: 'tile'|   7|tile|'\\xe9'" in str(err.value)


@tlx.jit
def _early_return_helper(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if n < 8:
        tl.store(out_ptr + offs, x + 1.0, mask=offs < n)
        return
    tl.store(out_ptr + offs, x * 2.0, mask=offs < n)


@tlx.jit
def _worker_calls_an_early_return_helper(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=1):
            _early_return_helper(x_ptr, out_ptr, n, BLOCK)


def test_a_worker_partition_may_call_a_helper_that_returns_early():
    """The helper's `if n < 8: ...; return` traces both paths inside the partition: the tensors
    each path computes are the partition's own (they used to be taken for captures)."""
    import numpy as np
    x = np.arange(16, dtype=np.float32)
    for n, want in ((5, x[:5] + 1.0), (12, x[:12] * 2.0)):
        out = np.full(16, np.nan, np.float32)
        tlx.interpret(_worker_calls_an_early_return_helper, (1,), x, out, n, BLOCK=16)
        np.testing.assert_array_equal(out[:n], want)
        assert np.isnan(out[n:]).all()
    ck = tlx.compile(_worker_calls_an_early_return_helper, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                     constexprs={"BLOCK": 16})
    assert ck.asm["cubin"]  # assembled by ptxas for sm_90a


def test_a_return_inside_an_async_task_is_a_clear_error():
    @tlx.jit
    def k(x_ptr, n):
        with tlx.async_tasks():
            with tlx.async_task("default"):
                pass
            with tlx.async_task(num_warps=1):
                if n < 8:
                    return
                tl.store(x_ptr, n)

    with pytest.raises(TLXCompileError) as err:
        tlx.compile(k, signature={"x_ptr": "*i32", "n": "i32"})
    assert "`return` inside an async_task is not supported" in str(err.value)
    assert f"{__file__}:{k.fn.__code__.co_firstlineno + 6}:" in str(err.value)  # the `if` holding the return

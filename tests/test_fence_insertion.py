"""FenceInsertion alone, IR text in, IR text out (as Triton's lit test runs its pass): a fence right
before every async reader (a wgmma operand, the source of a TMA or bulk store) of a generic write,
hoisted out of every loop that writes none of its operands; then the cases where it does better
than Triton's pass (if and for results traced into their yields, cp.async counted as a writer,
bulk stores as readers, writes through views, branches and warp-specialize partitions)."""

from fence_ir import ACC, PASS_A, S, S64, S64M, SM, T16, check, count_fences, module, run

FENCE = 'tlx.fence_async_shared {cluster = false, origin = "fence_insertion"'


def test_wgmma_reading_two_allocs_with_source_gets_one_fence_before_it():
    ir = module(f"""
    %a = tlx.local_alloc src(%t0) : {S} loc(#f0:3:4)
    %b = tlx.local_alloc src(%t1) : {S} loc(#f0:4:4)
    %d = tlx.async_dot %a, %b : {ACC} loc(#f0:5:4)""", f"%t0: {T16}, %t1: {T16}")
    res = check(ir, f"""
    CHECK: tlx.local_alloc src(%t0)
    CHECK-NEXT: tlx.local_alloc src(%t1)
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: tlx.async_dot %a, %b
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_A)
    (rec,) = res.fences
    assert rec.origin == "fence_insertion" and rec.scope == "cta"
    assert [str(l) for l in rec.writer_locs] == ["kernel.py:3", "kernel.py:4"]
    assert str(rec.reader_loc) == "kernel.py:5" and str(rec.loc) == "kernel.py:5"


def test_a_local_store_to_one_wgmma_operand_is_enough_for_a_fence():
    ir = module(f"""
    %a = tlx.local_alloc : {SM}
    %b = tlx.local_alloc : {SM}
    tlx.local_store %a, %t0
    %d = tlx.async_dot %a, %b : {ACC}""", f"%t0: {T16}")
    check(ir, f"""
    CHECK: tlx.local_store %a, %t0
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: tlx.async_dot
    """, PASS_A)


def test_wgmma_reading_through_a_transposed_view_gets_a_fence():
    # tcgen5 MMA is Blackwell-only; on sm_90 the same rule (an MMA reader of alloc-with-source
    # operands gets a fence) is exercised with wgmma reading B through a memdesc_trans view.
    ir = module(f"""
    %a = tlx.local_alloc src(%t0) : {S}
    %bt = tlx.local_alloc src(%t1) : {S}
    %b = tlx.memdesc_trans %bt {{order = [1, 0]}} : {S}
    %d = tlx.async_dot %a, %b : {ACC}""", f"%t0: {T16}, %t1: {T16}")
    check(ir, f"""
    CHECK: tlx.memdesc_trans
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: tlx.async_dot %a, %b
    """, PASS_A)


LOOPS = """
    %c0 = arith.constant {{value = 0}} : i32
    %c32 = arith.constant {{value = 32}} : i32
    %c64 = arith.constant {{value = 64}} : i32
    {allocs}
    scf.for %c0, %c64, %c32 {{
    ^body(%i: i32):
      scf.for %c0, %c64, %c32 {{
      ^body(%j: i32):
        {inner}
        %d = tlx.async_dot %a, %b : {acc} loc(#f0:44:8)
        scf.yield
      }} loc(#f0:42:6)
      scf.yield
    }} loc(#f0:41:4)"""


def test_fence_is_hoisted_out_of_loops_that_write_no_operand():
    ir = module(LOOPS.format(allocs=f"%a = tlx.local_alloc src(%t0) : {S}\n    %b = tlx.local_alloc src(%t1) : {S}",
                             inner="", acc=ACC), f"%t0: {T16}, %t1: {T16}")
    res = check(ir, f"""
    CHECK: tlx.local_alloc src(%t1)
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: scf.for
    CHECK-NOT: tlx.fence_async_shared
    CHECK: tlx.async_dot
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_A)
    (rec,) = res.fences
    assert rec.placement[1:] == ["hoisted out of the loop at kernel.py:42 because that loop writes no operand",
                                 "hoisted out of the loop at kernel.py:41 because that loop writes no operand"]


def test_fence_stays_in_the_loop_that_stores_an_operand():
    ir = module(LOOPS.format(allocs=f"%a = tlx.local_alloc src(%t0) : {SM}\n    %b = tlx.local_alloc src(%t1) : {S}",
                             inner="tlx.local_store %a, %t0 loc(#f0:43:8)", acc=ACC), f"%t0: {T16}, %t1: {T16}")
    res = check(ir, f"""
    CHECK-NOT: tlx.fence_async_shared
    CHECK: scf.for
    CHECK: scf.for
    CHECK: tlx.local_store %a, %t0
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: tlx.async_dot
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_A)
    (rec,) = res.fences
    assert rec.placement[-1] == ("kept in the loop at kernel.py:42 because tlx.local_store at kernel.py:43 "
                                 "writes the buffer every iteration")


def test_register_operand_and_unwritten_alloc_need_no_fence():
    ir = module(f"""
    %b = tlx.local_alloc : {SM}
    %d = tlx.async_dot %t0, %b : {ACC}""", f"%t0: {T16}")
    text, res = run(ir, PASS_A)
    assert count_fences(text) == 0 and res.fences == []


WS_MMA = f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %A = tlx.local_alloc src(%t0) : {S64}
    %B = tlx.local_alloc : {S64M}
    tlx.warp_specialize %A, %B, %n {{partition_num_warps = [4, 4]}} {{
    ^default:
      tlx.ws_yield
    }} {{
    ^partition0(%lhs: {S64}, %rhs: {S64M}, %m: i32):
      %c0p = arith.constant {{value = 0}} : i32
      %c1p = arith.constant {{value = 1}} : i32
      scf.for %c0p, %m, %c1p {{
      ^body(%i: i32):
        %d1 = tlx.async_dot %lhs, %rhs : tensor<64x64xf32>
        %d2 = tlx.async_dot %lhs, %rhs : tensor<64x64xf32>
        scf.yield
      }}
      tlx.ws_return
    }} {{
    ^partition1(%lhs1: {S64}, %rhs1: {S64M}, %m1: i32):
      %d3 = tlx.async_dot %rhs1, %rhs1 : tensor<64x64xf32>
      tlx.ws_return
    }}"""


def test_wgmma_in_a_warp_specialize_partition_is_fenced_in_that_partition():
    check(module(WS_MMA, "%t0: tensor<64x64xf16>, %n: i32"), f"""
    CHECK: ^partition0
    CHECK-NOT: tlx.fence_async_shared
    CHECK: {FENCE}
    CHECK-NEXT: scf.for
    CHECK-NEXT: ^body
    CHECK-NEXT: tlx.async_dot %lhs, %rhs
    CHECK-NEXT: tlx.async_dot %lhs, %rhs
    CHECK: ^partition1
    CHECK-NOT: tlx.fence_async_shared
    CHECK: tlx.async_dot %rhs1, %rhs1
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_A)


def test_a_user_fence_before_a_tma_store_is_not_doubled():
    ir = module("""
    tlx.local_store %smem, %data
    tlx.fence_async_shared {cluster = false, origin = "user"}
    %x = arith.addi %c, %c : i32
    tlx.tma_store %desc, %smem offsets(%x, %x)""",
                f"%desc: !tensordesc<128x128xf16>, %smem: {SM}, %data: {T16}, %c: i32")
    res = check(ir, """
    CHECK: tlx.local_store
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "user"
    CHECK-NEXT: arith.addi
    CHECK-NEXT: tlx.tma_store
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_A)
    (rec,) = res.fences
    assert rec.origin == "user" and "tlx.tma_store at ?" in rec.readers


# ------------------------------------------------------------------------------------------------
# cases derived from reading Triton's pass
# ------------------------------------------------------------------------------------------------

def test_memdesc_function_argument_without_stores_gets_a_fence():
    ir = module("tlx.tma_store %desc, %smem offsets(%c, %c)", f"%desc: !tensordesc<128x128xf16>, %smem: {S}, %c: i32")
    res = check(ir, f"""
    CHECK: {FENCE}
    CHECK-NEXT: tlx.tma_store
    """, PASS_A)
    assert "a memdesc function argument (its writers are not visible)" in res.fences[0].writers[0]


IF_YIELD = f"""
    %x = tlx.local_alloc src(%t0) : {S}
    %y = tlx.local_alloc src(%t1) : {S}
    %v = scf.if %p : {S} {{
    ^then:
      scf.yield %x
    }} {{
    ^else:
      scf.yield %y
    }}
    tlx.tma_store %desc, %v offsets(%c, %c)"""


def test_if_result_is_traced_into_its_yields():
    # Triton's FenceInsertion does not trace scf.if results, so it puts no fence here. We do.
    ir = module(IF_YIELD, f"%t0: {T16}, %t1: {T16}, %p: i1, %desc: !tensordesc<128x128xf16>, %c: i32")
    res = check(ir, f"""
    CHECK: scf.if
    CHECK: {FENCE}
    CHECK-NEXT: tlx.tma_store %desc, %v
    """, PASS_A)
    assert len(res.fences[0].writers) == 2


def test_for_result_is_traced_into_its_yields():
    # the buffer leaving the loop is whatever the body yields (a buffer written in the body)
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %x = tlx.local_alloc : {SM}
    %y = tlx.local_alloc : {SM}
    %r = scf.for %c0, %n, %c1 inits(%x) : {SM} {{
    ^body(%i: i32, %cur: {SM}):
      tlx.local_store %y, %t0 loc(#f0:20:6)
      scf.yield %y
    }}
    tlx.tma_store %desc, %r offsets(%c0, %c0)""", f"%t0: {T16}, %n: i32, %desc: !tensordesc<128x128xf16>")
    res = check(ir, f"""
    CHECK: scf.yield %y
    CHECK: {FENCE}
    CHECK-NEXT: tlx.tma_store %desc, %r
    """, PASS_A)
    assert [str(l) for l in res.fences[0].writer_locs] == ["kernel.py:20"]


def test_cp_async_is_a_generic_writer_and_the_fence_stays_after_its_wait():
    # cp.async before the loop, its wait inside the loop: the fence must follow the wait
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %a = tlx.local_alloc : {SM}
    %tok = tlx.async_load %ptrs, %a : !token
    %g = tlx.async_commit_group %tok : !token
    %r = scf.for %c0, %n, %c1 inits(%acc0) : {ACC} {{
    ^body(%i: i32, %acc: {ACC}):
      %w = tlx.async_wait_group %g {{pendings = 0}} : !token
      %d = tlx.async_dot %a, %a acc(%acc) : {ACC}
      scf.yield %d
    }}""", f"%ptrs: tensor<128x128x!ptr<f16>>, %n: i32, %acc0: {ACC}")
    res = check(ir, f"""
    CHECK: scf.for
    CHECK: tlx.async_wait_group
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: tlx.async_dot
    """, PASS_A)
    assert "lands cp.async data" in res.fences[0].placement[-1]


def test_bulk_async_store_is_an_async_reader():
    ir = module(f"""
    %b = tlx.local_alloc src(%t0) : {S}
    tlx.async_store %dst, %b, %size""", f"%t0: {T16}, %dst: !ptr<f16>, %size: i32")
    check(ir, f"""
    CHECK: tlx.local_alloc
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: tlx.async_store
    """, PASS_A)


def test_a_store_through_a_view_inside_the_loop_keeps_the_fence_in_the_loop():
    # `buf` is stored directly once before the loop and through a subslice view inside it;
    # Triton's pass looks only at the first direct store, so it hoists the fence out. We keep it in.
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %buf = tlx.local_alloc : {SM}
    tlx.local_store %buf, %t0
    scf.for %c0, %n, %c1 {{
    ^body(%i: i32):
      %half = tlx.memdesc_subslice %buf {{static_offsets = [0, 0]}} : !smem<64x128xf16, alloc=128x128, mutable>
      tlx.local_store %half, %t1 loc(#f0:31:6)
      %d = tlx.async_dot %buf, %buf : {ACC}
      scf.yield
    }} loc(#f0:30:4)""", f"%t0: {T16}, %t1: tensor<64x128xf16>, %n: i32")
    res = check(ir, f"""
    CHECK: tlx.local_store %buf, %t0
    CHECK-NEXT: scf.for
    CHECK: tlx.local_store %half, %t1
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: tlx.async_dot
    """, PASS_A)
    assert "kept in the loop at kernel.py:30 because tlx.local_store at kernel.py:31" in res.fences[0].placement[-1]


def test_fence_for_a_writer_before_the_loop_in_the_same_partition_leaves_the_loop():
    # Triton's pass compares only the enclosing partitions op, so it keeps the fence in the loop
    ir = module(f"""
    tlx.warp_specialize %n, %t0 {{partition_num_warps = [4]}} {{
    ^default:
      tlx.ws_yield
    }} {{
    ^partition0(%m: i32, %t: tensor<64x64xf16>):
      %c0 = arith.constant {{value = 0}} : i32
      %c1 = arith.constant {{value = 1}} : i32
      %a = tlx.local_alloc src(%t) : {S64}
      scf.for %c0, %m, %c1 {{
      ^body(%i: i32):
        %d = tlx.async_dot %a, %a : tensor<64x64xf32>
        scf.yield
      }}
      tlx.ws_return
    }}""", "%n: i32, %t0: tensor<64x64xf16>")
    res = check(ir, f"""
    CHECK: ^partition0
    CHECK: tlx.local_alloc src(%t)
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: scf.for
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_A)
    assert "kept inside its warp-specialize partition" in res.fences[0].placement[-1]


def test_fence_for_a_view_with_several_users_is_hoisted_out_of_the_k_loop():
    # a view used by local_store (outside), async_dot and async_dot_wait: TLX fences every
    # iteration; the stores are outside the K loop, so the fence leaves the loop.
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %bufs = tlx.local_alloc : !smem<2x64x64xf16, buffers=2, mutable>
    %a = tlx.memdesc_index %bufs, %c0 : !smem<64x64xf16, alloc=2x64x64, mutable>
    %b = tlx.memdesc_index %bufs, %c1 : !smem<64x64xf16, alloc=2x64x64, mutable>
    tlx.local_store %a, %t0
    tlx.local_store %b, %t0
    %r = scf.for %c0, %k, %c1 inits(%acc0) : tensor<64x64xf32> {{
    ^body(%i: i32, %acc: tensor<64x64xf32>):
      %d = tlx.async_dot %a, %b acc(%acc) : tensor<64x64xf32>
      %w = tlx.async_dot_wait %d {{pendings = 0}} : tensor<64x64xf32>
      scf.yield %w
    }}""", "%t0: tensor<64x64xf16>, %k: i32, %acc0: tensor<64x64xf32>")
    check(ir, f"""
    CHECK: tlx.local_store %b, %t0
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: scf.for
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_A)


def test_fence_goes_on_the_only_branch_that_writes():
    # only the then-branch writes: the fence goes at its end, not after the join
    ir = module(f"""
    %buf = tlx.local_alloc : {SM}
    scf.if %p {{
    ^then:
      tlx.local_store %buf, %t0
      scf.yield
    }} {{
    ^else:
      scf.yield
    }} loc(#f0:50:4)
    tlx.tma_store %desc, %buf offsets(%c, %c)""", f"%t0: {T16}, %p: i1, %desc: !tensordesc<128x128xf16>, %c: i32")
    res = check(ir, f"""
    CHECK: ^then:
    CHECK-NEXT: tlx.local_store
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: scf.yield
    CHECK: ^else:
    CHECK-NEXT: scf.yield
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_A)
    assert "end of the then branch of the if at kernel.py:50" in res.fences[0].placement[-1]


def test_branch_local_fence_not_used_when_a_writer_is_outside_the_branch():
    ir = module(f"""
    %buf = tlx.local_alloc : {SM}
    tlx.local_store %buf, %t0
    scf.if %p {{
    ^then:
      tlx.local_store %buf, %t0
      scf.yield
    }} {{
    ^else:
      scf.yield
    }}
    tlx.tma_store %desc, %buf offsets(%c, %c)""", f"%t0: {T16}, %p: i1, %desc: !tensordesc<128x128xf16>, %c: i32")
    check(ir, f"""
    CHECK: scf.if
    CHECK-NOT: tlx.fence_async_shared
    CHECK: {FENCE}
    CHECK-NEXT: tlx.tma_store
    """, PASS_A)


def test_a_writer_that_cannot_reach_the_reader_needs_no_fence():
    # the store is in the other branch of the if than the reader, and after it in program order
    ir = module(f"""
    %buf = tlx.local_alloc : {SM}
    scf.if %p {{
    ^then:
      tlx.tma_store %desc, %buf offsets(%c, %c)
      scf.yield
    }} {{
    ^else:
      tlx.local_store %buf, %t0
      scf.yield
    }}
    tlx.local_store %buf, %t0""", f"%t0: {T16}, %p: i1, %desc: !tensordesc<128x128xf16>, %c: i32")
    text, _ = run(ir, PASS_A)
    assert count_fences(text) == 0


PRODUCER_CONSUMER = f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %buf = tlx.local_alloc : {S64M}
    %bars = tlx.alloc_barriers {{num = 1, arrive_count = 1}} : !mbarriers<1>
    tlx.warp_specialize %buf, %bars, %t0, %n {{partition_num_warps = [4]}} {{
    ^default:
      %full = tlx.memdesc_index %bars, %c0 : !mbarrier
      tlx.local_store %buf, %t0 loc(#f0:58:6)
      tlx.barrier_arrive %full loc(#f0:60:6)
      tlx.ws_yield
    }} {{
    ^partition0(%b: {S64M}, %bs: !mbarriers<1>, %t: tensor<64x64xf16>, %m: i32):
      %z = arith.constant {{value = 0}} : i32
      %f = tlx.memdesc_index %bs, %z : !mbarrier
      tlx.barrier_wait %f, %z
      %d = tlx.async_dot %b, %b : tensor<64x64xf32> loc(#f0:70:6)
      tlx.ws_return
    }}"""


def test_producer_partition_fences_its_write_before_an_mbarrier_hand_off():
    ir = module(PRODUCER_CONSUMER, "%t0: tensor<64x64xf16>, %n: i32")
    res = check(ir, f"""
    CHECK: ^default:
    CHECK: tlx.local_store %buf, %t0
    CHECK-NEXT: {FENCE}
    CHECK-NEXT: tlx.barrier_arrive
    CHECK: ^partition0
    CHECK-NOT: tlx.fence_async_shared
    CHECK: tlx.async_dot
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_A)
    (rec,) = res.fences
    assert "producer partition, after its write at kernel.py:58" in rec.placement[0]
    assert str(rec.reader_loc) == "kernel.py:70" and str(rec.loc) == "kernel.py:60"

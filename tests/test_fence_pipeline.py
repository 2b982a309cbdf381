"""The three fence mechanisms together (and TMALowering alone): cases that need more than one
pass, "never a needless fence", fences that explain themselves, switches and targets."""

from fence_ir import ACC, ALL, FENCES, S, S64, S64M, SM, T16, check, count_fences, module, run

DESC = "!tensordesc<128x128xf16>"


def test_tma_lowering_descriptor_store_alone():
    ir = module("tt.descriptor_store %d, %t offsets(%c, %c) loc(#f0:12:4)", f"%d: {DESC}, %t: {T16}, %c: i32")
    res = check(ir, """
    CHECK: %0 = tlx.local_alloc src(%t) : !smem<128x128xf16, #nvmma<swizzle=128, bits=16, transposed=false>>
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "tma_lowering", fence_id = 1}
    CHECK-NEXT: tlx.tma_store %d, %0 offsets(%c, %c)
    CHECK-NEXT: tlx.tma_store_wait {pendings = 0}
    CHECK-NEXT: tt.return
    """, ("tma_lowering",))
    (rec,) = res.fences
    assert rec.origin == "tma_lowering" and str(rec.loc) == "kernel.py:12" and str(rec.reader_loc) == "kernel.py:12"


def test_tma_lowering_descriptor_load_has_no_fence():
    ir = module("""
    %t = tt.descriptor_load %d offsets(%c, %c) : tensor<128x128xf16>
    tt.store %p, %t""", f"%d: {DESC}, %c: i32, %p: tensor<128x128x!ptr<f16>>")
    text, _ = run(ir, ALL)
    assert count_fences(text) == 0
    check(ir, """
    CHECK: %[[BUF:[0-9]+]] = tlx.local_alloc {offset = 0} : !smem<128x128xf16, {{.*}}, mutable>
    CHECK-NEXT: %[[BARS:[0-9]+]] = tlx.alloc_barriers {num = 1, arrive_count = 1, offset = 32768}
    CHECK: %[[BAR:[0-9]+]] = tlx.memdesc_index %[[BARS]]
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_expect_bytes %[[BAR]] {bytes = 32768}
    CHECK-NEXT: tlx.tma_load %d, %[[BUF]], %[[BAR]]
    CHECK-NEXT: tlx.barrier_wait %[[BAR]]
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_inval %[[BAR]]
    CHECK-NEXT: tlx.local_load %[[BUF]]
    CHECK-NOT: tlx.cta_barrier
    """, ALL)


def test_tma_lowering_descriptor_load_in_a_loop_invalidates_after_every_thread_waited():
    """A descriptor load in a loop initializes its mbarrier every iteration: the leader must not
    reset it (inval, then the next init) while another thread still polls the completed phase,
    or that thread would wait on the next iteration's phase and read the next tile. So: wait,
    CTA barrier, inval; and the next iteration's init follows the inval in the leader's own
    program order (no second barrier for it)."""
    ir = module("""
    %r = scf.for %c, %n, %one inits(%z) : tensor<128x128xf16> {
    ^body(%i: i32, %acc: tensor<128x128xf16>):
      %t = tt.descriptor_load %d offsets(%i, %c) : tensor<128x128xf16>
      %s = arith.addf %acc, %t : tensor<128x128xf16>
      scf.yield %s
    }
    tt.store %p, %r""", f"%d: {DESC}, %c: i32, %n: i32, %one: i32, %z: tensor<128x128xf16>, "
                         "%p: tensor<128x128x!ptr<f16>>")
    check(ir, """
    CHECK: scf.for
    CHECK: %[[BARS:[0-9]+]] = tlx.alloc_barriers
    CHECK: %[[BAR:[0-9]+]] = tlx.memdesc_index %[[BARS]]
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_expect_bytes %[[BAR]]
    CHECK: tlx.tma_load %d
    CHECK-NEXT: tlx.barrier_wait %[[BAR]]
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_inval %[[BAR]]
    CHECK-NEXT: tlx.local_load
    CHECK-NOT: tlx.cta_barrier
    CHECK: scf.yield
    """, ALL)


def test_descriptor_store_full_pipeline_canonical_order():
    # st.shared -> fence.proxy.async -> bar.sync -> TMA store: every thread's write is fenced, then
    # the barrier, then one elected thread issues the TMA store
    ir = module("tt.descriptor_store %d, %t offsets(%c, %c)", f"%d: {DESC}, %t: {T16}, %c: i32")
    text, res = run(ir, ALL)
    check(ir, """
    CHECK: tlx.local_alloc src(%t)
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "tma_lowering"
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.tma_store
    CHECK-NOT: tlx.fence_async_shared
    """, ALL)
    assert count_fences(text) == 1


def test_tma_lowering_fence_made_needless_is_removed():
    # the stored tile is read in place from a buffer only TMA wrote: TMALowering's unconditional
    # fence separates nothing and ProxyFenceInsertion removes it (recording why)
    ir = module("""
    %t = tt.descriptor_load %d offsets(%c, %c) : tensor<128x128xf16>
    tt.descriptor_store %d, %t offsets(%c, %c)""", f"%d: {DESC}, %c: i32")
    text, res = run(ir, ALL)
    assert count_fences(text) == 0
    (rec,) = res.removed_fences
    assert rec.origin == "tma_lowering" and rec.removed_reason.startswith("needless")


def test_user_fence_plus_tma_lowering_gives_one_fence():
    ir = module(f"""
    %buf = tlx.local_alloc : {SM}
    tlx.local_store %buf, %t
    tlx.fence_async_shared {{cluster = false, origin = "user"}} loc(#f0:20:4)
    %v = tlx.local_load %buf : {T16}
    tt.descriptor_store %d, %v offsets(%c, %c) loc(#f0:21:4)""",
                f"%d: {DESC}, %c: i32, %t: {T16}")
    text, res = run(ir, ALL)
    assert count_fences(text) == 1
    (rec,) = res.fences
    assert rec.origin == "user" and not rec.redundant and "tlx.tma_store at kernel.py:21" in rec.readers


PIPELINED_EPILOGUE = f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %buf = tlx.local_alloc : {SM}
    scf.for %c0, %n, %c1 {{
    ^body(%i: i32):
      tlx.tma_store_wait {{pendings = 0}}
      tlx.local_store %buf, %t
      @FENCE@
      tlx.tma_store %d, %buf offsets(%i, %c0)
      scf.yield
    }}"""


def test_pipelined_tma_store_with_user_fence_keeps_exactly_that_fence():
    ir = module(PIPELINED_EPILOGUE.replace("@FENCE@", 'tlx.fence_async_shared {cluster = false, origin = "user"}'),
                f"%d: {DESC}, %t: {T16}, %n: i32")
    res = check(ir, """
    CHECK: tlx.tma_store_wait {pendings = 0}
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.local_store %buf, %t
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "user"
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.tma_store
    CHECK-NOT: tlx.fence_async_shared
    """, ALL)
    assert [r.origin for r in res.fences] == ["user"] and not res.fences[0].redundant


def test_pipelined_tma_store_without_fence_gets_one_in_the_loop():
    ir = module(PIPELINED_EPILOGUE.replace("@FENCE@", ""), f"%d: {DESC}, %t: {T16}, %n: i32")
    res = check(ir, """
    CHECK: scf.for
    CHECK: tlx.local_store %buf, %t
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "fence_insertion"
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.tma_store
    CHECK-NOT: tlx.fence_async_shared
    """, ALL)
    assert len(res.fences) == 1


def test_descriptor_store_inside_a_partition_is_fenced_inside_it():
    ir = module(f"""
    tlx.warp_specialize %d, %t {{partition_num_warps = [4]}} {{
    ^default:
      tlx.ws_yield
    }} {{
    ^partition0(%pd: {DESC}, %pt: {T16}):
      %z = arith.constant {{value = 0}} : i32
      tt.descriptor_store %pd, %pt offsets(%z, %z)
      tlx.ws_return
    }}""", f"%d: {DESC}, %t: {T16}")
    check(ir, """
    CHECK: ^partition0
    CHECK: tlx.local_alloc src(%pt)
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "tma_lowering"
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.tma_store
    CHECK: tlx.ws_return
    """, ALL)


AREF = f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %slot = tlx.local_alloc : {S64M}
    %fulls = tlx.alloc_barriers {{num = 1, arrive_count = 1}} : !mbarriers<1>
    %empties = tlx.alloc_barriers {{num = 1, arrive_count = 1}} : !mbarriers<1>
    tlx.warp_specialize %slot, %fulls, %empties, %desc, %n {{partition_num_warps = [4]}} {{
    ^default:
      %full = tlx.memdesc_index %fulls, %c0 : !mbarrier
      %empty = tlx.memdesc_index %empties, %c0 : !mbarrier
      scf.for %c0, %n, %c1 {{
      ^body(%i: i32):
        tlx.barrier_wait %full, %c0
        %v = tlx.local_load %slot : tensor<64x64xf16> loc(#f0:80:8)
        tlx.barrier_arrive %empty loc(#f0:81:8)
        scf.yield
      }}
      tlx.ws_yield
    }} {{
    ^partition0(%s: {S64M}, %fb: !mbarriers<1>, %eb: !mbarriers<1>, %pd: !tensordesc<64x64xf16>, %m: i32):
      %z = arith.constant {{value = 0}} : i32
      %o = arith.constant {{value = 1}} : i32
      %f = tlx.memdesc_index %fb, %z : !mbarrier
      %e = tlx.memdesc_index %eb, %z : !mbarrier
      scf.for %z, %m, %o {{
      ^body(%j: i32):
        tlx.barrier_wait %e, %o
        tlx.barrier_expect_bytes %f {{bytes = 8192}}
        tlx.tma_load %pd, %s, %f offsets(%j, %z) loc(#f0:90:8)
        scf.yield
      }}
      tlx.ws_return
    }}"""


def test_aref_consumer_release_war_is_fenced_on_the_path_through_the_hand_off():
    # the consumer (default) reads the slot and arrives on "empty"; the producer waits on it and
    # TMA-loads into the slot: WAR across partitions. LowerAref fences in the consumer before the
    # arrive; ProxyFenceInsertion fences on the same path, in the producer after its wait and
    # right before the TMA load (the placement DeepEP#642 uses). Exactly one fence. No bar.sync
    # between it and the load: the consumer's threads met before their arrive, and the thread
    # that issues the load has waited and fenced itself.
    ir = module(AREF, "%desc: !tensordesc<64x64xf16>, %n: i32")
    res = check(ir, """
    CHECK: ^default
    CHECK: tlx.local_load %slot
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_arrive
    CHECK: ^partition0
    CHECK: tlx.barrier_expect_bytes
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "proxy_fence_insertion"
    CHECK-NEXT: tlx.tma_load
    """, ALL)
    (rec,) = res.fences
    assert [str(g) for g in rec.guards][0].startswith("WAR: tlx.local_load at kernel.py:80 -> tlx.tma_load at kernel.py:90")


def test_aref_producer_side_raw_fence_before_the_full_arrive_no_second_fence():
    from test_fence_insertion import PRODUCER_CONSUMER

    ir = module(PRODUCER_CONSUMER, "%t0: tensor<64x64xf16>, %n: i32")
    res = check(ir, """
    CHECK: ^default:
    CHECK: tlx.local_store %buf, %t0
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "fence_insertion"
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_arrive
    CHECK: ^partition0
    CHECK-NOT: tlx.fence_async_shared
    """, ALL)
    (rec,) = res.fences
    assert [g.kind for g in rec.guards] == ["RAW"] and "kernel.py:70" in str(rec.guards[0])


def test_user_fence_then_effectful_op_then_tma_store_gives_one_fence():
    # Triton's dedupe is local, so its FenceInsertion adds a second fence after the intervening load;
    # ours removes it: the user's fence already separates the store from the TMA store
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc : {SM}
    %y = tlx.local_alloc : {SM}
    tlx.local_store %x, %t
    tlx.fence_async_shared {{cluster = false, origin = "user"}}
    %v = tlx.local_load %y : {T16}
    tlx.tma_store %d, %x offsets(%c0, %c0)""", f"%d: {DESC}, %t: {T16}")
    text, res = run(ir, ALL)
    assert count_fences(text) == 1 and res.fences[0].origin == "user" and not res.fences[0].redundant
    (rem,) = res.removed_fences
    assert rem.origin == "fence_insertion"


def test_redundant_user_fence_is_kept_and_reported():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc : {SM}
    tlx.local_store %x, %t
    tlx.fence_async_shared {{cluster = false, origin = "user"}} loc(#f0:30:4)
    tlx.fence_async_shared {{cluster = false, origin = "user"}} loc(#f0:31:4)
    tlx.tma_store %d, %x offsets(%c0, %c0)""", f"%d: {DESC}, %t: {T16}")
    text, res = run(ir, ALL)
    assert count_fences(text) == 2
    first, second = res.fences
    # the first fence after the store does the job; the second separates nothing
    assert not first.redundant and second.redundant
    assert res.redundant_fences == [second]
    report = res.explain_fences()
    assert "fence #2 [user, cta] at kernel.py:31 -- REDUNDANT" in report


def test_gpu_and_sys_fences_stay():
    ir = module("""
    tlx.fence {scope = "gpu"}
    tlx.fence {scope = "sys"}""")
    text, _ = run(ir, ALL)
    assert 'tlx.fence {scope = "gpu"}' in text and 'tlx.fence {scope = "sys"}' in text


def test_fence_passes_off_runs_no_mechanism_and_keeps_user_fences():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %a = tlx.local_alloc src(%t) : {S}
    %dd = tlx.async_dot %a, %a : {ACC}
    tlx.fence_async_shared {{cluster = false, origin = "user"}}
    tt.descriptor_store %d, %t offsets(%c0, %c0)""", f"%d: {DESC}, %t: {T16}")
    text, res = run(ir, ALL, fence_passes=False)
    assert [r.origin for r in res.fences] == ["user"]
    assert "tlx.tma_store" in text and "fence_insertion" not in res.pass_times
    assert res.removed_fences == []


def test_pre_sm90_target_gets_no_proxy_fences():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc : {SM}
    tlx.local_store %x, %t
    tlx.fence_async_shared {{cluster = false, origin = "user"}}
    tlx.tma_store %d, %x offsets(%c0, %c0)""", f"%d: {DESC}, %t: {T16}", attrs='num_warps = 4, target = "sm_80"')
    text, res = run(ir, ALL, target="sm_80")
    assert count_fences(text) == 0 and res.fences == []


def test_records_survive_later_passes_and_the_printer_shows_the_origin():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %a = tlx.local_alloc src(%t) : {S} loc(#f0:40:4)
    scf.for %c0, %n, %c1 {{
    ^body(%i: i32):
      %dd = tlx.async_dot %a, %a : {ACC} loc(#f0:42:8)
      scf.yield
    }} loc(#f0:41:4)""", f"%t: {T16}, %n: i32")
    text, res = run(ir, ALL)
    fence_lines = [l.strip() for l in text.splitlines() if "tlx.fence_async_shared" in l]
    assert fence_lines == ['tlx.fence_async_shared {cluster = false, origin = "fence_insertion", fence_id = 1}']
    (rec,) = res.fences
    assert rec.id == 1 and rec.scope == "cta" and str(rec.loc) == "kernel.py:41"
    assert [str(l) for l in rec.writer_locs] == ["kernel.py:40"] and str(rec.reader_loc) == "kernel.py:42"
    assert "hoisted out of the loop at kernel.py:41 because that loop writes no operand" in rec.placement_text
    assert rec.byte_range == (0, 32768) and rec.buffer.startswith("tlx.local_alloc at kernel.py:40")
    assert rec.reason
    report = res.explain_fences()
    assert "fence #1 [fence_insertion, cta] at kernel.py:41" in report
    assert "RAW: tlx.local_alloc at kernel.py:40 -> tlx.async_dot at kernel.py:42" in report


WS_LOOP_READER = f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %x = tlx.local_alloc : {SM}
    %bars = tlx.alloc_barriers {{num = 1, arrive_count = 1}} : !mbarriers<1>
    tlx.warp_specialize %x, %bars, %d, %n {{partition_num_warps = [4]}} {{
    ^default:
      tlx.local_store %x, %t loc(#f0:10:6)
      @RELEASE@
      tlx.ws_yield
    }} {{
    ^partition0(%px: {SM}, %pb: !mbarriers<1>, %pd: {DESC}, %m: i32):
      %z = arith.constant {{value = 0}} : i32
      %o = arith.constant {{value = 1}} : i32
      scf.for %z, %m, %o {{
      ^body(%i: i32):
        @ACQUIRE@
        tlx.tma_store %pd, %px offsets(%i, %z) loc(#f0:20:8)
        tlx.tma_store_wait {{pendings = 0}}
        scf.yield
      }}
      tlx.ws_return
    }}"""


def test_writer_in_one_partition_tma_store_in_a_loop_of_another():
    # Triton keeps FenceInsertion's fence inside the reading partition's loop. With the mbarrier
    # hand-off we fence once, in the writer's partition before its arrive; without any
    # synchronization there is no order for a fence to enforce, and none stays.
    synced = WS_LOOP_READER.replace(
        "@RELEASE@", "%b = tlx.memdesc_index %bars, %c0 : !mbarrier\n      tlx.barrier_arrive %b").replace(
        "@ACQUIRE@", "%pbar = tlx.memdesc_index %pb, %z : !mbarrier\n        tlx.barrier_wait %pbar, %z")
    res = check(module(synced, f"%d: {DESC}, %t: {T16}, %n: i32"), """
    CHECK: ^default:
    CHECK: tlx.local_store %x, %t
    CHECK-NEXT: tlx.memdesc_index
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "fence_insertion"
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_arrive
    CHECK: ^partition0
    CHECK-NOT: tlx.fence_async_shared
    CHECK: tt.return
    """, ALL)
    (rec,) = res.fences
    assert [str(g.async_loc) for g in rec.guards] == ["kernel.py:20"]
    unsynced = WS_LOOP_READER.replace("@RELEASE@", "").replace("@ACQUIRE@", "")
    text, res = run(module(unsynced, f"%d: {DESC}, %t: {T16}, %n: i32"), ALL)
    assert count_fences(text) == 0 and [r.origin for r in res.removed_fences] == ["fence_insertion"]


def test_a_per_thread_arrive_publishes_each_threads_writes_without_a_cta_barrier():
    # every thread of the writing partition fences its own stores and arrives itself (a warp
    # barrier): the phase completes only when all have, so no bar.sync is needed before it
    per_thread = WS_LOOP_READER.replace(
        "%bars = tlx.alloc_barriers {num = 1, arrive_count = 1}",
        "%bars = tlx.alloc_barriers {num = 1, arrive_count = 128, per_thread = true}").replace(
        "@RELEASE@", "%b = tlx.memdesc_index %bars, %c0 : !mbarrier\n      tlx.barrier_arrive %b {count = 1, per_thread = true}").replace(
        "@ACQUIRE@", "%pbar = tlx.memdesc_index %pb, %z : !mbarrier\n        tlx.barrier_wait %pbar, %z")
    check(module(per_thread, f"%d: {DESC}, %t: {T16}, %n: i32"), """
    CHECK: ^default:
    CHECK: tlx.local_store %x, %t
    CHECK-NEXT: tlx.memdesc_index
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "fence_insertion"
    CHECK-NEXT: tlx.barrier_arrive
    CHECK: ^partition0
    CHECK-NOT: tlx.cta_barrier
    CHECK: tt.return
    """, ALL)


CP_ARGS = "%p: tensor<128x128x!ptr<f16>>, %d: !tensordesc<128x128xf16>, %c0: i32"


def _cp_copy(between: str, after: str) -> str:
    """A cp.async copy into a fresh tile with `between` its commit and its wait, `after` the wait."""
    return module(f"""
    %a = tlx.local_alloc : {SM}
    %tk = tlx.async_load %p, %a : !token
    %g = tlx.async_commit_group %tk : !token
    {between}
    %w = tlx.async_wait_group %g {{pendings = 0}} : !token
{after}""", CP_ARGS)


def test_a_barrier_before_a_cp_async_wait_does_not_order_the_copy():
    """A cp.async write is ordered by nothing before its own thread's wait lands it: a barrier
    between the copy and the wait leaves another thread's later read unordered (Triton syncs
    after every async wait for this reason), so a barrier goes after the wait as well."""
    ir = _cp_copy("tlx.cta_barrier", f"""    %r = tlx.local_load %a : {T16}
    tt.store %p, %r""")
    check(ir, """
    CHECK: tlx.async_commit_group
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.async_wait_group
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.local_load
    CHECK-NOT: tlx.cta_barrier
    """, ALL)


def test_a_cp_async_copy_stays_in_flight_through_a_warp_specialize_op():
    """Entering a warp-specialize op synchronizes the CTA, but a barrier orders no cp.async write
    still in flight: the copy issued before the op lands at the wait after it, and another
    thread's read of it then needs a barrier (the walk used to drop everything before the op)."""
    ir = _cp_copy("""tlx.warp_specialize {partition_num_warps = [4]} {
    ^default:
      tlx.ws_yield
    } {
    ^partition0:
      tlx.ws_return
    }""", f"""    %r = tlx.local_load %a : {T16}
    tt.store %p, %r""")
    check(ir, """
    CHECK: tlx.ws_return
    CHECK: tlx.async_wait_group
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.local_load
    """, ALL)


def test_a_fence_before_a_cp_async_wait_does_not_count_for_the_barrier_after_it():
    """A fence before the wait orders no cp.async data: FenceInsertion fences again after the
    wait (and after the user's barrier, right before the TMA store), and since that barrier came
    before the fence a second barrier goes between the fence and the store: write, land, fence,
    barrier, issue."""
    ir = _cp_copy("tlx.fence_async_shared", """    tlx.cta_barrier
    tlx.tma_store %d, %a offsets(%c0, %c0)
    tlx.tma_store_wait {pendings = 0}""")
    check(ir, """
    CHECK: tlx.async_commit_group
    CHECK-NEXT: tlx.fence_async_shared {fence_id = 1}
    CHECK-NEXT: tlx.async_wait_group
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.fence_async_shared {cluster = false, origin = "fence_insertion", fence_id = 2}
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.tma_store
    """, ALL)


def _wait_then_arrive(arrive: str, bars: str = "{num = 1, arrive_count = 1}") -> str:
    return module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %bars = tlx.alloc_barriers {bars} : !mbarriers<1>
    %b = tlx.memdesc_index %bars, %c0 : !mbarrier
    %o = tlx.memdesc_index %bars, %c0 : !mbarrier
    tlx.barrier_arrive %b loc(#f0:10:4)
    tlx.barrier_wait %b, %c0 loc(#f0:11:4)
    {arrive}
    tlx.barrier_wait %b, %c1 loc(#f0:13:4)""")


def test_a_wait_then_the_leaders_arrive_on_that_mbarrier_get_a_barrier_between_them():
    """Every thread polls phase 0; the leader's next arrive completes phase 1, and a third would
    bring the parity back to 0 while a slow thread still polls it (the hang of wait/arrive pairs
    without warp specialization): so a CTA barrier after each wait, before the leader's arrive or
    expect on the same mbarrier, and none before the waits."""
    check(_wait_then_arrive("tlx.barrier_arrive %o loc(#f0:12:4)"), """
    CHECK: tlx.alloc_barriers
    CHECK: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_arrive %b
    CHECK-NEXT: tlx.barrier_wait %b, %c0
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_arrive %o
    CHECK-NEXT: tlx.barrier_wait %b, %c1
    CHECK-NEXT: tt.return
    """, ALL)
    expect = module("""
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    %s = tlx.local_alloc : !smem<64x64xf16, mutable>
    %bars = tlx.alloc_barriers {num = 1, arrive_count = 1} : !mbarriers<1>
    %b = tlx.memdesc_index %bars, %c0 : !mbarrier
    %o = tlx.memdesc_index %bars, %c0 : !mbarrier
    tlx.barrier_arrive %b loc(#f0:10:4)
    tlx.barrier_wait %b, %c0 loc(#f0:11:4)
    tlx.barrier_expect_bytes %o {bytes = 8192} loc(#f0:12:4)
    tlx.tma_load %d, %s, %o offsets(%c0, %c0) loc(#f0:13:4)
    tlx.barrier_wait %b, %c1 loc(#f0:14:4)""", "%d: !tensordesc<64x64xf16>")
    check(expect, """
    CHECK: tlx.barrier_wait %b, %c0
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_expect_bytes %o
    """, ALL)


def test_a_wait_then_the_leaders_arrive_on_another_mbarrier_get_a_barrier_between_them():
    """A ring consumer: every thread polls full[s], and the leader alone releases the stage on
    empty[s] — another mbarrier. The producer then refills the slot and completes full[s] again,
    and once more a lap later, while a slower warp of the consumer may still poll the first phase:
    its parity is back, and it waits a whole cycle more (the ping-pong GEMM's hang). So a CTA
    barrier between the wait and the leader's arrive on any mbarrier; and the producer's side
    likewise (a wait on empty[s], the leader's expect on full[s])."""
    ir = module("""
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    %s = tlx.local_alloc : !smem<64x64xf16, mutable>
    %full = tlx.alloc_barriers {num = 1, arrive_count = 1} : !mbarriers<1>
    %empty = tlx.alloc_barriers {num = 1, arrive_count = 1} : !mbarriers<1>
    %f = tlx.memdesc_index %full, %c0 : !mbarrier
    %e = tlx.memdesc_index %empty, %c0 : !mbarrier
    tlx.barrier_arrive %f loc(#f0:10:4)
    tlx.barrier_wait %f, %c0 loc(#f0:11:4)
    tlx.barrier_arrive %e loc(#f0:12:4)
    tlx.barrier_wait %e, %c0 loc(#f0:13:4)
    tlx.barrier_expect_bytes %f {bytes = 8192} loc(#f0:14:4)
    tlx.tma_load %d, %s, %f offsets(%c0, %c0) loc(#f0:15:4)
    tlx.barrier_wait %f, %c1 loc(#f0:16:4)""", "%d: !tensordesc<64x64xf16>")
    check(ir, """
    CHECK: tlx.barrier_wait %f, %c0
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_arrive %e
    CHECK-NEXT: tlx.barrier_wait %e, %c0
    CHECK-NEXT: tlx.cta_barrier
    CHECK-NEXT: tlx.barrier_expect_bytes %f
    CHECK-NEXT: tlx.tma_load %d, %s, %f
    CHECK-NEXT: tlx.barrier_wait %f, %c1
    CHECK-NEXT: tt.return
    """, ALL)


def test_per_thread_arrivals_after_a_wait_need_no_barrier():
    """On a per-thread barrier (alloc_warp_barrier) the phase completes only when every thread,
    each past its own wait, has arrived: no barrier between the wait and the arrive."""
    ir = _wait_then_arrive("tlx.barrier_arrive %o {per_thread = true} loc(#f0:12:4)",
                           "{num = 1, arrive_count = 128, per_thread = true}")
    check(ir, """
    CHECK: tlx.barrier_wait %b, %c0
    CHECK-NEXT: tlx.barrier_arrive %o
    CHECK-NEXT: tlx.barrier_wait %b, %c1
    """, ALL)


# ---- a barrier the pass would need inside a thread-dependent branch: refused, not a hang -----------

import pytest  # noqa: E402
import tlx  # noqa: E402
import tlx.language as tl  # noqa: E402
from tlx.compiler.errors import TLXCompileError  # noqa: E402


@tlx.jit
def _arrive_after_wait(out_ptr, PER_THREAD_BRANCH: tl.constexpr):
    full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_arrive(full[0])
    tlx.barrier_wait(full[0], 0)
    if PER_THREAD_BRANCH:
        if tlx.thread_id(0) == 0:
            tlx.barrier_arrive(empty[0])  # the pass needs a bar.sync before it: only thread 0 is here
    else:
        if tl.program_id(0) == 0:
            tlx.barrier_arrive(empty[0])  # a branch every thread of the CTA takes alike
    tl.store(out_ptr + tl.program_id(0), 1)


def test_a_barrier_needed_inside_a_thread_dependent_branch_is_a_clear_error():
    with pytest.raises(TLXCompileError) as e:
        tlx.compile(_arrive_after_wait, signature={"out_ptr": "*i32"}, constexprs={"PER_THREAD_BRANCH": True})
    err = e.value
    assert "depends on tlx.thread_id" in str(err) and "alloc_warp_barrier" in err.hint
    src = open(err.loc.file).read().splitlines()[err.loc.line - 1]
    assert "tlx.barrier_arrive(empty[0])" in src and "only thread 0" in src


@tlx.jit
def _arrive_in_a_while(out_ptr, PER_THREAD_LOOP: tl.constexpr):
    full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_arrive(full[0])
    i = 0
    bound = tlx.thread_id(0) if PER_THREAD_LOOP else tl.program_id(0) + 1
    while i < bound:  # PER_THREAD_LOOP: thread t runs t laps
        tlx.barrier_wait(full[0], 0)
        tlx.barrier_arrive(empty[0])  # the pass needs a bar.sync before it
        i += 1
    tl.store(out_ptr + tl.program_id(0), i)


def test_a_barrier_needed_inside_a_thread_dependent_while_loop_is_a_clear_error():
    """A while loop whose condition depends on tlx.thread_id: threads leave it after different
    laps, so a barrier inside would hang; the same loop with a uniform bound compiles."""
    with pytest.raises(TLXCompileError) as e:
        tlx.compile(_arrive_in_a_while, signature={"out_ptr": "*i32"}, constexprs={"PER_THREAD_LOOP": True})
    assert "loop that depends on tlx.thread_id" in str(e.value)
    assert "tlx.barrier_arrive(empty[0])" in open(e.value.loc.file).read().splitlines()[e.value.loc.line - 1]
    k = tlx.compile(_arrive_in_a_while, signature={"out_ptr": "*i32"}, constexprs={"PER_THREAD_LOOP": False})
    assert isinstance(k.asm.get("cubin"), bytes) and "bar.sync" in k.asm["ptx"]


def test_the_same_arrive_in_a_uniform_branch_gets_its_barrier_and_assembles():
    k = tlx.compile(_arrive_after_wait, signature={"out_ptr": "*i32"}, constexprs={"PER_THREAD_BRANCH": False})
    assert isinstance(k.asm.get("cubin"), bytes), "ptxas did not assemble the PTX"
    ptx = k.asm["ptx"]
    # the partition barrier sits between the wait loop and the leader's arrive on `empty`
    wait = ptx.index("mbarrier.try_wait")
    arrives = [i for i in range(len(ptx)) if ptx.startswith("mbarrier.arrive", i)]
    assert "bar.sync" in ptx[wait:arrives[-1]]

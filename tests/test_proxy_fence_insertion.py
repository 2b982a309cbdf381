"""ProxyFenceInsertion, IR text in, IR text out: after shared-memory allocation, every async access
that meets a pending conflicting generic access to overlapping bytes (RAW, WAR, WAW) on some
path gets a fence right before it; async after async needs none. The pass reads the real
allocation it is given (Triton's recomputes one inside the pass, which can disagree), sees
across warp-specialize partitions through mbarrier hand-offs, and never lets a loop that may run
zero times hide a hazard behind a fence in its body."""

from fence_ir import ACC, PASS_C, S, SM, T16, check, count_fences, module, run

FENCE_C = 'tlx.fence_async_shared {cluster = false, origin = "proxy_fence_insertion"'
D64 = "!tensordesc<64x64xf32>"
ARGS = f"%desc: {D64}, %bar: !mbarrier"


def test_tma_load_into_bytes_reused_after_a_generic_read_is_fenced():
    # X and Y have disjoint lifetimes, so the allocation gives Y the bytes of X: the TMA load's
    # async write after the generic read of X is a WAR hazard on the same bytes.
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc : !smem<32x64xf32, mutable> loc(#f0:3:4)
    %v = tlx.local_load %x : tensor<32x64xf32> loc(#f0:4:4)
    %y = tlx.local_alloc : !smem<64x64xf32, mutable> loc(#f0:5:4)
    tlx.tma_load %desc, %y, %bar offsets(%c0, %c0) loc(#f0:6:4)""", ARGS)
    res = check(ir, f"""
    CHECK: %x = tlx.local_alloc {{offset = 0}}
    CHECK: tlx.local_load %x
    CHECK: %y = tlx.local_alloc {{offset = 0}}
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.tma_load %desc, %y
    """, PASS_C)
    (rec,) = res.fences
    assert rec.hazard == "WAR" and rec.byte_range == (0, 8192)
    assert [str(g) for g in rec.guards] == [
        "WAR: tlx.local_load at kernel.py:4 -> tlx.tma_load at kernel.py:6 on tlx.local_alloc at kernel.py:5 "
        "(64x64xf32), bytes [0, 8192)"]


def test_a_fence_before_the_read_of_an_indexed_view_is_kept_and_a_new_one_goes_before_the_tma_load():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %b = tlx.local_alloc : !smem<1x64x64xf32, buffers=1, mutable>
    %v = tlx.memdesc_index %b, %c0 : !smem<64x64xf32, alloc=1x64x64, mutable>
    tlx.fence_async_shared {{cluster = false, origin = "user"}} loc(#f0:9:4)
    %r = tlx.local_load %v : tensor<64x64xf32>
    tlx.tma_load %desc, %v, %bar offsets(%c0, %c0)""", ARGS)
    res = check(ir, f"""
    CHECK: tlx.fence_async_shared {{cluster = false, origin = "user"
    CHECK-NEXT: tlx.local_load %v
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.tma_load %desc, %v
    """, PASS_C)
    user, new = res.fences
    assert user.origin == "user" and user.redundant and not user.guards
    assert new.hazard == "WAR" and not new.redundant


def test_async_proxy_after_async_proxy_needs_no_fence():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc : !smem<64x64xf32, mutable>
    tlx.tma_load %desc, %x, %bar offsets(%c0, %c0)
    tlx.tma_store_wait {{pendings = 0}}
    %y = tlx.local_alloc : !smem<64x64xf32, mutable>
    tlx.tma_load %desc, %y, %bar offsets(%c0, %c0)""", ARGS)
    text, _ = run(ir, PASS_C)
    assert count_fences(text) == 0


def test_local_store_before_tma_store_is_fenced_after_a_store_wait():
    ir = module("""
    %c0 = arith.constant {value = 0} : i32
    %x = tlx.local_alloc : !smem<128x256xf32, mutable>
    tlx.tma_store_wait {pendings = 1}
    tlx.local_store %x, %t
    tlx.tma_store %d, %x offsets(%c0, %c0)""", "%d: !tensordesc<128x256xf32>, %t: tensor<128x256xf32>")
    check(ir, f"""
    CHECK: tlx.tma_store_wait {{pendings = 1}}
    CHECK-NEXT: tlx.local_store %x, %t
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.tma_store %d, %x
    """, PASS_C)


def test_local_store_before_bulk_async_store_is_fenced():
    # the bulk copy tlx.async_store (cp.async.bulk) reads shared memory through the async proxy
    ir = module("""
    %x = tlx.local_alloc : !smem<128x4xi8, mutable>
    tlx.local_store %x, %t
    tlx.async_store %dst, %x, %size""", "%t: tensor<128x4xi8>, %dst: !ptr<i8>, %size: i32")
    check(ir, f"""
    CHECK: tlx.local_store %x, %t
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.async_store %dst, %x
    """, PASS_C)


def test_cp_async_before_wgmma_is_fenced_after_its_wait():
    ir = module(f"""
    %a = tlx.local_alloc : {SM}
    %b = tlx.local_alloc : {SM}
    %ta = tlx.async_load %pa, %a : !token
    %tb = tlx.async_load %pb, %b : !token
    %g = tlx.async_commit_group %ta, %tb : !token
    %w = tlx.async_wait_group %g {{pendings = 0}} : !token
    %d = tlx.async_dot %a, %b : {ACC}""", "%pa: tensor<128x128x!ptr<f16>>, %pb: tensor<128x128x!ptr<f16>>")
    check(ir, f"""
    CHECK: tlx.async_load %pa, %a
    CHECK-NEXT: tlx.async_load %pb, %b
    CHECK-NEXT: tlx.async_commit_group
    CHECK-NEXT: tlx.async_wait_group
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.async_dot %a, %b
    """, PASS_C)


def test_cp_async_in_flight_is_not_ordered_by_a_fence_before_its_wait():
    # a user fence between the copy and its wait orders nothing: the data has not landed
    ir = module(f"""
    %a = tlx.local_alloc : {SM}
    %ta = tlx.async_load %pa, %a : !token
    %g = tlx.async_commit_group %ta : !token
    tlx.fence_async_shared {{cluster = false, origin = "user"}}
    %w = tlx.async_wait_group %g {{pendings = 0}} : !token
    %d = tlx.async_dot %a, %a : {ACC}""", "%pa: tensor<128x128x!ptr<f16>>")
    text, res = run(ir, PASS_C)
    assert count_fences(text) == 2
    user, new = res.fences
    assert user.redundant and new.origin == "proxy_fence_insertion"


def test_cp_async_wait_with_pendings_lands_only_older_groups():
    ir = module(f"""
    %a = tlx.local_alloc : {SM}
    %b = tlx.local_alloc : {SM}
    %ta = tlx.async_load %pa, %a : !token
    %ga = tlx.async_commit_group %ta : !token
    %tb = tlx.async_load %pa, %b : !token
    %gb = tlx.async_commit_group %tb : !token
    %w = tlx.async_wait_group %gb {{pendings = 1}} : !token
    tlx.fence_async_shared {{cluster = false, origin = "user"}}
    %d = tlx.async_dot %a, %a : {ACC}
    %w2 = tlx.async_wait_group %gb {{pendings = 0}} : !token
    %e = tlx.async_dot %b, %b : {ACC}""", "%pa: tensor<128x128x!ptr<f16>>")
    res = check(ir, f"""
    CHECK: tlx.async_wait_group %gb {{pendings = 1}}
    CHECK-NEXT: tlx.fence_async_shared {{cluster = false, origin = "user"
    CHECK-NEXT: tlx.async_dot %a, %a
    CHECK-NEXT: tlx.async_wait_group %gb {{pendings = 0}}
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.async_dot %b, %b
    """, PASS_C)
    user = res.fences[0]
    assert not user.redundant and [g.kind for g in user.guards] == ["RAW"]


# ------------------------------------------------------------------------------------------------
# cases derived from reading Triton's pass
# ------------------------------------------------------------------------------------------------

RING = """
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    %ring = tlx.local_alloc : !smem<2x128x128xf16, buffers=2, mutable>
    %w = tlx.memdesc_index %ring, @WI@ : !smem<128x128xf16, alloc=2x128x128, mutable>
    %r = tlx.memdesc_index %ring, @RI@ : !smem<128x128xf16, alloc=2x128x128, mutable>
    tlx.local_store %w, %t
    tlx.tma_store %d, %r offsets(%c0, %c0)"""
RARGS = f"%d: !tensordesc<128x128xf16>, %t: {T16}, %i: i32"


def test_constant_indices_0_and_1_do_not_alias():
    text, _ = run(module(RING.replace("@WI@", "%c0").replace("@RI@", "%c1"), RARGS), PASS_C)
    assert count_fences(text) == 0


def test_dynamic_memdesc_index_aliases_the_whole_buffer():
    check(module(RING.replace("@WI@", "%i").replace("@RI@", "%c1"), RARGS), f"""
    CHECK: tlx.local_store %w, %t
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.tma_store %d, %r
    """, PASS_C)


def test_constant_index_slabs_of_the_same_slot_alias():
    check(module(RING.replace("@WI@", "%c1").replace("@RI@", "%c1"), RARGS), f"""
    CHECK: {FENCE_C}
    CHECK-NEXT: tlx.tma_store
    """, PASS_C)


def test_subslices_of_one_slab_with_disjoint_boxes_do_not_alias():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %buf = tlx.local_alloc : {SM}
    %top = tlx.memdesc_subslice %buf {{static_offsets = [0, 0]}} : !smem<64x128xf16, alloc=128x128, mutable>
    %bot = tlx.memdesc_subslice %buf {{static_offsets = [64, 0]}} : !smem<64x128xf16, alloc=128x128, mutable>
    tlx.local_store %top, %t
    tlx.tma_store %d, %bot offsets(%c0, %c0)""", "%d: !tensordesc<64x128xf16>, %t: tensor<64x128xf16>")
    text, _ = run(ir, PASS_C)
    assert count_fences(text) == 0
    text, _ = run(ir.replace("tlx.tma_store %d, %bot", "tlx.tma_store %d, %top"), PASS_C)
    assert count_fences(text) == 1


def test_two_readers_after_one_write_get_one_fence():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc : {SM}
    tlx.local_store %x, %t
    tlx.tma_store %d, %x offsets(%c0, %c0)
    tlx.tma_store %d, %x offsets(%c0, %c0)""", f"%d: !tensordesc<128x128xf16>, %t: {T16}")
    check(ir, f"""
    CHECK: tlx.local_store
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.tma_store
    CHECK-NEXT: tlx.tma_store
    CHECK-NOT: tlx.fence_async_shared
    """, PASS_C)


WS_NO_SYNC = """
    %c0 = arith.constant {value = 0} : i32
    %x = tlx.local_alloc : !smem<128x128xf16, mutable>
    tlx.warp_specialize %x, %t, %d {partition_num_warps = [4]} {
    ^default:
      tlx.local_store %x, %t
      @RELEASE@
      tlx.ws_yield
    } {
    ^partition0(%px: !smem<128x128xf16, mutable>, %pt: tensor<128x128xf16>, %pd: !tensordesc<128x128xf16>):
      %z = arith.constant {value = 0} : i32
      @ACQUIRE@
      tlx.tma_store %pd, %px offsets(%z, %z)
      tlx.ws_return
    }"""
WARGS = f"%d: !tensordesc<128x128xf16>, %t: {T16}, %bars: !mbarriers<1>"


def test_generic_write_in_one_partition_async_read_in_another_without_sync_gets_no_fence():
    ir = module("    %bar0 = arith.constant {value = 0} : i32\n" + WS_NO_SYNC.replace("@RELEASE@", "").replace("@ACQUIRE@", ""), WARGS)
    text, _ = run(ir, PASS_C)
    assert count_fences(text) == 0


def test_cross_partition_hazard_through_an_mbarrier_hand_off_is_fenced():
    # Triton's pass is blind across partitions. With the hand-off, the write reaches the read.
    body = WS_NO_SYNC.replace(
        "@RELEASE@", "%b0 = tlx.memdesc_index %bars, %c0 : !mbarrier\n      tlx.barrier_arrive %b0").replace(
        "@ACQUIRE@", "%b1 = tlx.memdesc_index %pbars, %z : !mbarrier\n      tlx.barrier_wait %b1, %z")
    body = body.replace("tlx.warp_specialize %x, %t, %d", "tlx.warp_specialize %x, %t, %d, %bars").replace(
        "%pd: !tensordesc<128x128xf16>)", "%pd: !tensordesc<128x128xf16>, %pbars: !mbarriers<1>)")
    check(module(body, WARGS), f"""
    CHECK: ^partition0
    CHECK: tlx.barrier_wait
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.tma_store
    """, PASS_C)


def test_the_pass_uses_the_real_offsets_it_is_given():
    # hand-written offsets: overlapping bytes get a fence, disjoint ones none (Triton would
    # recompute its own layout and ignore these)
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc {{offset = 0}} : !smem<64x64xf32, mutable>
    tlx.local_store %x, %t
    %y = tlx.local_alloc {{offset = OFF}} : !smem<64x64xf32, mutable>
    tlx.tma_load %desc, %y, %bar offsets(%c0, %c0)""", ARGS + ", %t: tensor<64x64xf32>")
    text, _ = run(ir.replace("OFF", "16384"), ("proxy_fence_insertion",))
    assert count_fences(text) == 0
    text, res = run(ir.replace("OFF", "4096"), ("proxy_fence_insertion",))
    assert count_fences(text) == 1 and res.fences[0].hazard == "WAW" and res.fences[0].byte_range == (4096, 16384)


def test_zero_trip_loop_does_not_hide_a_hazard():
    # the fence lives in the loop body; a loop that runs zero times skips it, so the store
    # written before the loop reaches the TMA store after it unfenced: a fence goes there
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %o = tlx.local_alloc : {SM}
    tlx.local_store %o, %zero
    scf.for %c0, %n, %c1 {{
    ^body(%i: i32):
      tlx.local_store %o, %t
      tlx.fence_async_shared {{cluster = false, origin = "user"}}
      scf.yield
    }}
    tlx.tma_store %d, %o offsets(%c0, %c0)""", f"%d: !tensordesc<128x128xf16>, %t: {T16}, %zero: {T16}, %n: i32")
    res = check(ir, f"""
    CHECK: scf.for
    CHECK: tlx.fence_async_shared {{cluster = false, origin = "user"
    CHECK: scf.yield
    CHECK: {FENCE_C}
    CHECK-NEXT: tlx.tma_store
    """, PASS_C)
    user, new = res.fences
    # the new fence separates the store before the loop (zero-trip path); the user's fence is
    # still the first fence after the store in the body
    assert not user.redundant and [g.generic for g in new.guards] == ["tlx.local_store at ?"]


def test_a_loop_with_a_constant_nonzero_trip_count_covers_the_path_after_it():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %c4 = arith.constant {{value = 4}} : i32
    %o = tlx.local_alloc : {SM}
    tlx.local_store %o, %zero
    scf.for %c0, %c4, %c1 {{
    ^body(%i: i32):
      tlx.local_store %o, %t
      tlx.fence_async_shared {{cluster = false, origin = "user"}}
      scf.yield
    }}
    tlx.tma_store %d, %o offsets(%c0, %c0)""", f"%d: !tensordesc<128x128xf16>, %t: {T16}, %zero: {T16}")
    text, _ = run(ir, PASS_C)
    assert count_fences(text) == 1


def test_loop_carried_hazard_found_on_the_second_trip():
    # the TMA store at the top of the body reads what the previous iteration stored
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %o = tlx.local_alloc : {SM}
    scf.for %c0, %n, %c1 {{
    ^body(%i: i32):
      tlx.tma_store %d, %o offsets(%c0, %c0)
      tlx.tma_store_wait {{pendings = 0}}
      tlx.local_store %o, %t
      scf.yield
    }}""", f"%d: !tensordesc<128x128xf16>, %t: {T16}, %n: i32")
    check(ir, f"""
    CHECK: ^body
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.tma_store
    """, PASS_C)


def test_branches_join_by_union():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %o = tlx.local_alloc : {SM}
    scf.if %p {{
    ^then:
      tlx.local_store %o, %t
      scf.yield
    }} {{
    ^else:
      scf.yield
    }}
    tlx.tma_store %d, %o offsets(%c0, %c0)""", f"%d: !tensordesc<128x128xf16>, %t: {T16}, %p: i1")
    check(ir, f"""
    CHECK: scf.if
    CHECK: {FENCE_C}
    CHECK-NEXT: tlx.tma_store
    """, PASS_C)


def test_scratch_of_an_op_is_a_generic_access_of_its_bytes():
    # a convert_layout's scratch reuses the bytes a TMA load writes next: WAR/WAW
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %cv = tt.convert_layout %v {{scratch_bytes = 4096, scratch_offset = 0}} : tensor<64x64xf32>
    %y = tlx.local_alloc {{offset = 0}} : !smem<64x64xf32, mutable>
    tlx.tma_load %desc, %y, %bar offsets(%c0, %c0)""", ARGS + ", %v: tensor<64x64xf32>")
    text, res = run(ir, ("proxy_fence_insertion",))
    assert count_fences(text) == 1 and res.fences[0].hazard in ("WAR/WAW", "WAW/WAR")


def test_multicast_tma_load_needs_a_cluster_fence_and_a_cta_fence_does_not_clear_it():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %m = arith.constant {{value = 3}} : i32
    %x = tlx.local_alloc : !smem<64x64xf32, mutable>
    %r = tlx.local_load %x : tensor<64x64xf32>
    tlx.fence_async_shared {{cluster = false, origin = "user"}}
    tlx.tma_load %desc, %x, %bar offsets(%c0, %c0) mask(%m) {{multicast = true}}""", ARGS)
    res = check(ir, """
    CHECK: tlx.fence_async_shared {cluster = false, origin = "user"
    CHECK-NEXT: tlx.fence_async_shared {cluster = true, origin = "proxy_fence_insertion"
    CHECK-NEXT: tlx.tma_load
    """, PASS_C)
    user, new = res.fences
    assert user.redundant and new.scope == "cluster"


def test_no_proxy_fences_below_sm90():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc : {SM}
    tlx.local_store %x, %t
    tlx.fence_async_shared {{cluster = false, origin = "user"}}
    tlx.tma_store %d, %x offsets(%c0, %c0)""", f"%d: !tensordesc<128x128xf16>, %t: {T16}")
    text, res = run(ir, PASS_C, target="sm_80")
    assert count_fences(text) == 0 and res.fences == []
    (rec,) = res.removed_fences
    assert rec.origin == "user" and "sm_80 has no async proxy" in rec.removed_reason


def test_fence_passes_off_inserts_nothing_but_reports():
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %x = tlx.local_alloc : {SM} loc(#f0:6:4)
    tlx.local_store %x, %t loc(#f0:7:4)
    tlx.tma_store %d, %x offsets(%c0, %c0) loc(#f0:8:4)""", f"%d: !tensordesc<128x128xf16>, %t: {T16}")
    text, res = run(ir, PASS_C, fence_passes=False)
    assert count_fences(text) == 0
    assert res.unfenced_hazards == ["RAW: tlx.local_store at kernel.py:7 -> tlx.tma_store at kernel.py:8 on "
                                    "tlx.local_alloc at kernel.py:6 (128x128xf16), bytes [0, 32768)"]
    _, fenced = run(ir, PASS_C)
    assert fenced.unfenced_hazards == [] and len(fenced.fences) == 1


def test_fence_passes_off_reports_each_hazard_once_in_program_order():
    # The loop body is walked to a fixpoint (twice here), meeting its hazard at every visit; the
    # report names it once, then the later hazard, worded as a fence's guards.
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %c4 = arith.constant {{value = 4}} : i32
    %x = tlx.local_alloc : {SM} loc(#f0:7:4)
    %y = tlx.local_alloc : {SM} loc(#f0:8:4)
    scf.for %c0, %c4, %c1 {{
    ^body(%i: i32):
      tlx.local_store %x, %t loc(#f0:10:6)
      tlx.tma_store %d, %x offsets(%c0, %c0) loc(#f0:11:6)
      scf.yield
    }}
    tlx.local_store %y, %t loc(#f0:13:4)
    tlx.tma_store %d, %y offsets(%c0, %c0) loc(#f0:14:4)""", f"%d: !tensordesc<128x128xf16>, %t: {T16}")
    _, res = run(ir, PASS_C, fence_passes=False)
    assert res.unfenced_hazards == [
        "RAW: tlx.local_store at kernel.py:10 -> tlx.tma_store at kernel.py:11 on tlx.local_alloc at kernel.py:7 "
        "(128x128xf16), bytes [0, 32768)",
        "RAW: tlx.local_store at kernel.py:13 -> tlx.tma_store at kernel.py:14 on tlx.local_alloc at kernel.py:8 "
        "(128x128xf16), bytes [32768, 65536)"]


def test_a_fence_lists_its_writers_and_guards_in_program_order():
    # Four generic writes to four slots, one TMA store of a dynamically indexed slot (which may
    # be any of them): one fence guards all four. The analysis keeps them in frozensets, whose
    # order follows object addresses; the record must list them as the program runs them.
    ir = module("""
    %c0 = arith.constant {value = 0} : i32
    %c1 = arith.constant {value = 1} : i32
    %c2 = arith.constant {value = 2} : i32
    %c3 = arith.constant {value = 3} : i32
    %ring = tlx.local_alloc : !smem<4x64x64xf16, buffers=4, mutable>
    %s2 = tlx.memdesc_index %ring, %c2 : !smem<64x64xf16, alloc=4x64x64, mutable>
    %s0 = tlx.memdesc_index %ring, %c0 : !smem<64x64xf16, alloc=4x64x64, mutable>
    %s3 = tlx.memdesc_index %ring, %c3 : !smem<64x64xf16, alloc=4x64x64, mutable>
    %s1 = tlx.memdesc_index %ring, %c1 : !smem<64x64xf16, alloc=4x64x64, mutable>
    tlx.local_store %s2, %t loc(#f0:10:4)
    tlx.local_store %s0, %t loc(#f0:11:4)
    tlx.local_store %s3, %t loc(#f0:12:4)
    tlx.local_store %s1, %t loc(#f0:13:4)
    %r = tlx.memdesc_index %ring, %i : !smem<64x64xf16, alloc=4x64x64, mutable>
    tlx.tma_store %d, %r offsets(%c0, %c0) loc(#f0:20:4)""",
                "%d: !tensordesc<64x64xf16>, %t: tensor<64x64xf16>, %i: i32")
    for _ in range(3):  # new objects (new addresses) each time
        text, res = run(ir, PASS_C)
        assert count_fences(text) == 1
        (rec,) = res.fences
        assert [loc.line for loc in rec.writer_locs] == [10, 11, 12, 13]
        assert [str(g).split(" -> ")[0] for g in rec.guards] == [
            f"RAW: tlx.local_store at kernel.py:{line}" for line in (10, 11, 12, 13)]


# -- pruning: fences that cover for each other are never removed together ------------------------

FENCE_TL = 'tlx.fence_async_shared {cluster = false, origin = "tma_lowering"}'
FENCE_A = 'tlx.fence_async_shared {cluster = false, origin = "fence_insertion"}'


def test_pruning_keeps_one_of_two_fences_that_cover_for_each_other():
    # each fence alone guards nothing (the other one separates the store from the TMA store), but
    # removing both would leave the hazard: the pruning removes TMALowering's (its priority) and
    # keeps FenceInsertion's, which then guards the store
    ir = module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %o = tlx.local_alloc : {SM}
    tlx.local_store %o, %t
    {FENCE_A}
    {FENCE_TL}
    tlx.tma_store %d, %o offsets(%c0, %c0)""", f"%d: !tensordesc<128x128xf16>, %t: {T16}")
    text, res = run(ir, PASS_C)
    assert count_fences(text) == 1
    assert [r.origin for r in res.fences] == ["fence_insertion"] and res.fences[0].guards
    assert [r.origin for r in res.removed_fences] == ["tma_lowering"]


def test_pruning_keeps_one_of_two_fences_that_cover_for_each_other_across_partitions():
    # the producer's fence (before its arrive) and the consumer's (after its wait) both separate
    # the producer's store from the consumer's TMA store, through the mbarrier hand-off: they see
    # each other, so one of them stays
    body = WS_NO_SYNC.replace(
        "@RELEASE@", f"{FENCE_A}\n      %b0 = tlx.memdesc_index %bars, %c0 : !mbarrier\n      tlx.barrier_arrive %b0").replace(
        "@ACQUIRE@", f"%b1 = tlx.memdesc_index %pbars, %z : !mbarrier\n      tlx.barrier_wait %b1, %z\n      {FENCE_TL}")
    body = body.replace("tlx.warp_specialize %x, %t, %d", "tlx.warp_specialize %x, %t, %d, %bars").replace(
        "%pd: !tensordesc<128x128xf16>)", "%pd: !tensordesc<128x128xf16>, %pbars: !mbarriers<1>)")
    text, res = run(module(body, WARGS), PASS_C)
    assert count_fences(text) == 1
    (kept,) = res.fences
    assert kept.guards and len(res.removed_fences) == 1

"""The fence passes see storage aliasing, IR text in, IR text out: buffers of a storage alias
spec (`tlx.local_alias` views of one byte allocation) that share bytes are one buffer to
FenceInsertion (before allocation, by their placement in the spec) and to ProxyFenceInsertion
(after it, by absolute bytes); aliases the spec keeps apart (a `distinct` group) need no fence."""

from fence_ir import PASS_A, PASS_C, check, count_fences, module, run

D = "!tensordesc<64x64xf16>"
ARGS = f"%desc: {D}"
SPEC = '%spec = tlx.local_alloc {storage_alias = true, alignment = 1024} : !smem<16384xi8, mutable> loc(#f0:3:4)'
TILE = "!smem<64x64xf16, #nvmma<swizzle=128, bits=16, transposed=false>"
ARR = "!smem<1x64x64xf16, #nvmma<swizzle=128, bits=16, transposed=false>, buffers=1, mutable>"
ONE = f"{TILE}, alloc=1x64x64, mutable>"
T16 = "tensor<64x64xf16>"
FENCE_C = 'tlx.fence_async_shared {cluster = false, origin = "proxy_fence_insertion"'
FENCE_A = 'tlx.fence_async_shared {cluster = false, origin = "fence_insertion"'


def _kernel(b_offset: int) -> str:
    """a and b alias the spec's bytes (b at `b_offset`); a generic write into a[0], then a TMA
    store (an async read) of b[0]."""
    return module(f"""
    %c0 = arith.constant {{value = 0}} : i32
    %t = arith.constant {{value = 1.0}} : {T16}
    {SPEC}
    %a = tlx.local_alias %spec {{offset = 0, strides = [8192], radices = []}} : {ARR} loc(#f0:4:4)
    %b = tlx.local_alias %spec {{offset = {b_offset}, strides = [8192], radices = []}} : {ARR} loc(#f0:5:4)
    %a0 = tlx.memdesc_index %a, %c0 : {ONE} loc(#f0:6:4)
    %b0 = tlx.memdesc_index %b, %c0 : {ONE} loc(#f0:7:4)
    tlx.local_store %a0, %t loc(#f0:8:4)
    tlx.tma_store %desc, %b0 offsets(%c0, %c0) loc(#f0:9:4)
    tlx.tma_store_wait {{pendings = 0}} loc(#f0:10:4)""", ARGS)


def test_generic_write_into_one_alias_then_tma_store_of_another_alias_of_the_same_bytes_is_fenced():
    res = check(_kernel(0), f"""
    CHECK: %spec = tlx.local_alloc {{storage_alias = true, alignment = 1024, offset = 0}}
    CHECK: tlx.local_store %a0, %t
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.tma_store %desc, %b0
    """, PASS_C)
    (rec,) = res.fences
    assert rec.hazard == "RAW" and rec.byte_range == (0, 8192)
    assert [str(g) for g in rec.guards] == [
        "RAW: tlx.local_store at kernel.py:8 -> tlx.tma_store at kernel.py:9 on storage_alias_spec at kernel.py:3 "
        "(16384 bytes), bytes [0, 8192)"]


def test_fence_insertion_sees_the_alias_before_allocation():
    check(_kernel(0), f"""
    CHECK: tlx.local_store %a0, %t
    CHECK-NEXT: {FENCE_A}
    CHECK-NEXT: tlx.tma_store %desc, %b0
    """, PASS_A)


def test_aliases_placed_apart_in_the_spec_need_no_fence():
    for passes in (PASS_A, PASS_C):
        text, res = run(_kernel(8192), passes)
        assert count_fences(text) == 0, text
        assert res.fences == []


def test_an_alias_buffer_that_overlaps_only_partly_is_fenced_on_the_shared_bytes():
    # b[0] starts 4096 bytes into a[0]: the shared bytes are [4096, 8192)
    res = check(_kernel(4096), f"""
    CHECK: tlx.local_store %a0, %t
    CHECK-NEXT: {FENCE_C}
    CHECK-NEXT: tlx.tma_store %desc, %b0
    """, PASS_C)
    (rec,) = res.fences
    assert rec.byte_range == (4096, 8192)

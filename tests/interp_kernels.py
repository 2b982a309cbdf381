"""IR-text kernels for the interpreter tests (hand-written until the frontend traces them), and
a minimal host TensorDescriptor with the runtime's attributes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

FILE = "/kernels/k.py"  # the kernel 'file' the locations name


@dataclass
class HostDesc:
    """What the interpreter needs of a host TensorDescriptor."""

    base: np.ndarray
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    block_shape: Tuple[int, ...]
    padding: str = "zero"

    @classmethod
    def of(cls, a: np.ndarray, block: Sequence[int], padding: str = "zero") -> "HostDesc":
        return cls(a, a.shape, tuple(s // a.itemsize for s in a.strides), tuple(block), padding)


def module_text(body: str, args: str, num_warps: int = 4, name: str = "k") -> str:
    return (f'#f = "{FILE}"\nmodule attributes {{num_warps = {num_warps}}} {{\n'
            f"  tt.func @{name}({args}) {{\n{body}\n    tt.return\n  }}\n}}\n")


def gemm_tma(BM: int, BN: int, BK: int, stages: int = 2, fence: bool = True, wait_loads: bool = True,
             expect_bytes: int = 0, store_wait: bool = True) -> str:
    """C = A @ B with TMA loads into a `stages`-deep ring, wgmma, and a local_store + fence + TMA
    store epilogue. Source lines: 10 local_alloc A, 20 expect, 21/22 TMA loads, 23 wait,
    24 async_dot, 25 async_dot_wait, 30 local_store C, 31 fence, 32 TMA store, 33 store wait."""
    ab = expect_bytes or (BM * BK + BK * BN) * 2
    fence_line = '    tlx.fence_async_shared {cluster = false, origin = "user"} loc(#f:31:4)' if fence else ""
    wait_line = "      tlx.barrier_wait %bar, %ph loc(#f:23:6)" if wait_loads else ""
    sw = "    tlx.tma_store_wait {pendings = 0} loc(#f:33:4)" if store_wait else ""
    body = f"""
    %pm = tt.get_program_id {{axis = 0}} : i32 loc(#f:5:4)
    %pn = tt.get_program_id {{axis = 1}} : i32 loc(#f:6:4)
    %cbm = arith.constant {{value = {BM}}} : i32
    %cbn = arith.constant {{value = {BN}}} : i32
    %cbk = arith.constant {{value = {BK}}} : i32
    %cst = arith.constant {{value = {stages}}} : i32
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %om = arith.muli %pm, %cbm : i32
    %on = arith.muli %pn, %cbn : i32
    %a_s = tlx.local_alloc : !smem<{stages}x{BM}x{BK}xf16, buffers={stages}, mutable> loc(#f:10:4)
    %b_s = tlx.local_alloc : !smem<{stages}x{BK}x{BN}xf16, buffers={stages}, mutable> loc(#f:11:4)
    %bars = tlx.alloc_barriers {{num = {stages}, arrive_count = 1}} : !mbarriers<{stages}> loc(#f:12:4)
    %kt = arith.divsi %K, %cbk : i32
    %z = arith.constant {{value = 0.0}} : tensor<{BM}x{BN}xf32>
    %acc = scf.for %c0, %kt, %c1 inits(%z) : tensor<{BM}x{BN}xf32> {{
    ^body(%k: i32, %a: tensor<{BM}x{BN}xf32>):
      %s = arith.remsi %k, %cst : i32
      %q = arith.divsi %k, %cst : i32
      %ph = arith.andi %q, %c1 : i32
      %bar = tlx.memdesc_index %bars, %s : !mbarrier
      %av = tlx.memdesc_index %a_s, %s : !smem<{BM}x{BK}xf16, alloc={stages}x{BM}x{BK}, mutable>
      %bv = tlx.memdesc_index %b_s, %s : !smem<{BK}x{BN}xf16, alloc={stages}x{BK}x{BN}, mutable>
      %ok = arith.muli %k, %cbk : i32
      tlx.barrier_expect_bytes %bar {{bytes = {ab}}} loc(#f:20:6)
      tlx.tma_load %ad, %av, %bar offsets(%om, %ok) loc(#f:21:6)
      tlx.tma_load %bd, %bv, %bar offsets(%ok, %on) loc(#f:22:6)
{wait_line}
      %d = tlx.async_dot %av, %bv acc(%a) : tensor<{BM}x{BN}xf32> loc(#f:24:6)
      %w = tlx.async_dot_wait %d {{pendings = 0}} : tensor<{BM}x{BN}xf32> loc(#f:25:6)
      scf.yield %w
    }} loc(#f:15:4)
    %h = arith.truncf %acc : tensor<{BM}x{BN}xf16> loc(#f:29:4)
    %c_s = tlx.local_alloc : !smem<{BM}x{BN}xf16, mutable> loc(#f:28:4)
    tlx.local_store %c_s, %h loc(#f:30:4)
{fence_line}
    tlx.tma_store %cd, %c_s offsets(%om, %on) loc(#f:32:4)
{sw}"""
    args = (f"%ad: !tensordesc<{BM}x{BK}xf16>, %bd: !tensordesc<{BK}x{BN}xf16>, "
            f"%cd: !tensordesc<{BM}x{BN}xf16>, %K: i32")
    return module_text(body, args)


def gemm_ws(BM: int, BN: int, BK: int, stages: int = 2, consumer_phase_flip: bool = False, producer_phase_flip: bool = False,
            release_before_wait: bool = False, fence: str = "consumer", expect_bytes: int = 0) -> str:
    """Warp-specialized C = A @ B: the default partition (producer) waits empty[s] with phase
    p^1, expects and TMA-loads A and B into full[s]; worker partition 1 (consumer) waits full[s]
    with phase p, runs wgmma, retires it and arrives on empty[s]; its epilogue stores C through
    shared memory and a TMA store. Lines: 40 producer wait, 41 expect, 42/43 TMA loads,
    60 consumer wait, 61 async_dot, 62 async_dot_wait, 63 arrive empty, 70 local_store C,
    71 fence (fence='consumer'), 72 TMA store, 73 store wait."""
    ab = expect_bytes or (BM * BK + BK * BN) * 2
    A = f"!smem<{stages}x{BM}x{BK}xf16, buffers={stages}, mutable>"
    B = f"!smem<{stages}x{BK}x{BN}xf16, buffers={stages}, mutable>"
    Av = f"!smem<{BM}x{BK}xf16, alloc={stages}x{BM}x{BK}, mutable>"
    Bv = f"!smem<{BK}x{BN}xf16, alloc={stages}x{BK}x{BN}, mutable>"
    C = f"!smem<{BM}x{BN}xf16, mutable>"
    acc = f"tensor<{BM}x{BN}xf32>"
    cons_ph = "%pe" if consumer_phase_flip else "%p"
    arrive = "      tlx.barrier_arrive %eb {count = 1} loc(#f:63:6)"
    dot_wait = f"      %w = tlx.async_dot_wait %d {{pendings = 0}} : {acc} loc(#f:62:6)"
    body_ops = (arrive + "\n" + dot_wait) if release_before_wait else (dot_wait + "\n" + arrive)
    fence_line = '      tlx.fence_async_shared {cluster = false, origin = "user"} loc(#f:71:6)' if fence == "consumer" else ""
    ring = """
      %s = arith.remsi %k, %cst : i32
      %q = arith.divsi %k, %cst : i32
      %p = arith.andi %q, %c1 : i32
      %pe = arith.xori %p, %c1 : i32
      %fb = tlx.memdesc_index %full, %s : !mbarrier
      %eb = tlx.memdesc_index %empty, %s : !mbarrier"""
    body = f"""
    %pm = tt.get_program_id {{axis = 0}} : i32 loc(#f:5:4)
    %pn = tt.get_program_id {{axis = 1}} : i32 loc(#f:6:4)
    %cbm = arith.constant {{value = {BM}}} : i32
    %cbn = arith.constant {{value = {BN}}} : i32
    %om = arith.muli %pm, %cbm : i32
    %on = arith.muli %pn, %cbn : i32
    %a_s = tlx.local_alloc : {A} loc(#f:10:4)
    %b_s = tlx.local_alloc : {B} loc(#f:11:4)
    %c_s = tlx.local_alloc : {C} loc(#f:12:4)
    %full = tlx.alloc_barriers {{num = {stages}, arrive_count = 1}} : !mbarriers<{stages}> loc(#f:13:4)
    %empty = tlx.alloc_barriers {{num = {stages}, arrive_count = 1}} : !mbarriers<{stages}> loc(#f:14:4)
    tlx.warp_specialize %ad, %bd, %cd, %K, %a_s, %b_s, %c_s, %full, %empty, %om, %on {{partition_num_warps = [4]}} {{
    ^default:
      %cbk = arith.constant {{value = {BK}}} : i32
      %cst = arith.constant {{value = {stages}}} : i32
      %c0 = arith.constant {{value = 0}} : i32
      %c1 = arith.constant {{value = 1}} : i32
      %kt = arith.divsi %K, %cbk : i32
      scf.for %c0, %kt, %c1 {{
      ^body(%k: i32):{ring}
        %av = tlx.memdesc_index %a_s, %s : {Av}
        %bv = tlx.memdesc_index %b_s, %s : {Bv}
        %ok = arith.muli %k, %cbk : i32
        tlx.barrier_wait %eb, {"%p" if producer_phase_flip else "%pe"} loc(#f:40:8)
        tlx.barrier_expect_bytes %fb {{bytes = {ab}}} loc(#f:41:8)
        tlx.tma_load %ad, %av, %fb offsets(%om, %ok) loc(#f:42:8)
        tlx.tma_load %bd, %bv, %fb offsets(%ok, %on) loc(#f:43:8)
        scf.yield
      }} loc(#f:38:6)
      tlx.ws_yield
    }} {{
    ^partition0(%ad2: !tensordesc<{BM}x{BK}xf16>, %bd2: !tensordesc<{BK}x{BN}xf16>, %cd2: !tensordesc<{BM}x{BN}xf16>, %K2: i32, %a_s2: {A}, %b_s2: {B}, %c_s2: {C}, %full2: !mbarriers<{stages}>, %empty2: !mbarriers<{stages}>, %om2: i32, %on2: i32):
      %cbk = arith.constant {{value = {BK}}} : i32
      %cst = arith.constant {{value = {stages}}} : i32
      %c0 = arith.constant {{value = 0}} : i32
      %c1 = arith.constant {{value = 1}} : i32
      %kt = arith.divsi %K2, %cbk : i32
      %z = arith.constant {{value = 0.0}} : {acc}
      %res = scf.for %c0, %kt, %c1 inits(%z) : {acc} {{
      ^body(%k: i32, %a: {acc}):{ring.replace('%full', '%full2').replace('%empty', '%empty2')}
        %av = tlx.memdesc_index %a_s2, %s : {Av}
        %bv = tlx.memdesc_index %b_s2, %s : {Bv}
        tlx.barrier_wait %fb, {cons_ph} loc(#f:60:8)
        %d = tlx.async_dot %av, %bv acc(%a) : {acc} loc(#f:61:8)
{body_ops}
        scf.yield %w
      }} loc(#f:58:6)
      %h = arith.truncf %res : tensor<{BM}x{BN}xf16>
      tlx.local_store %c_s2, %h loc(#f:70:6)
{fence_line}
      tlx.tma_store %cd2, %c_s2 offsets(%om2, %on2) loc(#f:72:6)
      tlx.tma_store_wait {{pendings = 0}} loc(#f:73:6)
      tlx.ws_return
    }} loc(#f:30:4)"""
    args = (f"%ad: !tensordesc<{BM}x{BK}xf16>, %bd: !tensordesc<{BK}x{BN}xf16>, "
            f"%cd: !tensordesc<{BM}x{BN}xf16>, %K: i32")
    return module_text(body, args)


def gemm_cp_async(BM: int, BN: int, BK: int, fence: bool = True) -> str:
    """C = A @ B (row-major fp16 pointers, M, N, K multiples of the tile) with cp.async into
    shared memory, commit, wait, (fence), wgmma, and a masked tl.store of fp32 C.
    Lines: 20/21 cp.async A/B, 22 commit, 23 wait, 24 fence, 25 async_dot, 26 async_dot_wait."""
    fl = '      tlx.fence_async_shared {cluster = false, origin = "user"} loc(#f:24:6)' if fence else ""
    acc = f"tensor<{BM}x{BN}xf32>"

    def ptrs(name, base, rows, cols, row0, col0, ld):
        return f"""
      %{name}_r = tt.make_range {{start = 0, end = {rows}}} : tensor<{rows}xi32>
      %{name}_c = tt.make_range {{start = 0, end = {cols}}} : tensor<{cols}xi32>
      %{name}_r0 = tt.splat {row0} : tensor<{rows}xi32>
      %{name}_rr = arith.addi %{name}_r, %{name}_r0 : tensor<{rows}xi32>
      %{name}_c0 = tt.splat {col0} : tensor<{cols}xi32>
      %{name}_cc = arith.addi %{name}_c, %{name}_c0 : tensor<{cols}xi32>
      %{name}_ld = tt.splat {ld} : tensor<{rows}xi32>
      %{name}_ro = arith.muli %{name}_rr, %{name}_ld : tensor<{rows}xi32>
      %{name}_r2 = tt.expand_dims %{name}_ro {{axis = 1}} : tensor<{rows}x1xi32>
      %{name}_c2 = tt.expand_dims %{name}_cc {{axis = 0}} : tensor<1x{cols}xi32>
      %{name}_rb = tt.broadcast %{name}_r2 : tensor<{rows}x{cols}xi32>
      %{name}_cb = tt.broadcast %{name}_c2 : tensor<{rows}x{cols}xi32>
      %{name}_off = arith.addi %{name}_rb, %{name}_cb : tensor<{rows}x{cols}xi32>
      %{name}_base = tt.splat {base} : tensor<{rows}x{cols}x!ptr<f16>>
      %{name}_p = tt.addptr %{name}_base, %{name}_off : tensor<{rows}x{cols}x!ptr<f16>>"""
    body = f"""
    %pm = tt.get_program_id {{axis = 0}} : i32
    %pn = tt.get_program_id {{axis = 1}} : i32
    %cbm = arith.constant {{value = {BM}}} : i32
    %cbn = arith.constant {{value = {BN}}} : i32
    %cbk = arith.constant {{value = {BK}}} : i32
    %c0 = arith.constant {{value = 0}} : i32
    %c1 = arith.constant {{value = 1}} : i32
    %om = arith.muli %pm, %cbm : i32
    %on = arith.muli %pn, %cbn : i32
    %a_s = tlx.local_alloc : !smem<{BM}x{BK}xf16, mutable> loc(#f:10:4)
    %b_s = tlx.local_alloc : !smem<{BK}x{BN}xf16, mutable> loc(#f:11:4)
    %z = arith.constant {{value = 0.0}} : {acc}
    %acc = scf.for %c0, %K, %cbk inits(%z) : {acc} {{
    ^body(%k: i32, %a: {acc}):{ptrs("pa", "%A", BM, BK, "%om", "%k", "%K")}{ptrs("pb", "%B", BK, BN, "%k", "%on", "%N")}
      %ta = tlx.async_load %pa_p, %a_s : !token loc(#f:20:6)
      %tb = tlx.async_load %pb_p, %b_s : !token loc(#f:21:6)
      %tc = tlx.async_commit_group %ta, %tb : !token loc(#f:22:6)
      %tw = tlx.async_wait_group %tc {{pendings = 0}} : !token loc(#f:23:6)
{fl}
      %d = tlx.async_dot %a_s, %b_s acc(%a) : {acc} loc(#f:25:6)
      %w = tlx.async_dot_wait %d {{pendings = 0}} : {acc} loc(#f:26:6)
      scf.yield %w
    }} loc(#f:15:4)
    %cr = tt.make_range {{start = 0, end = {BM}}} : tensor<{BM}xi32>
    %cc = tt.make_range {{start = 0, end = {BN}}} : tensor<{BN}xi32>
    %om_s = tt.splat %om : tensor<{BM}xi32>
    %on_s = tt.splat %on : tensor<{BN}xi32>
    %rows = arith.addi %cr, %om_s : tensor<{BM}xi32>
    %cols = arith.addi %cc, %on_s : tensor<{BN}xi32>
    %ns = tt.splat %N : tensor<{BM}xi32>
    %ro = arith.muli %rows, %ns : tensor<{BM}xi32>
    %r2 = tt.expand_dims %ro {{axis = 1}} : tensor<{BM}x1xi32>
    %c2 = tt.expand_dims %cols {{axis = 0}} : tensor<1x{BN}xi32>
    %rb = tt.broadcast %r2 : tensor<{BM}x{BN}xi32>
    %cb = tt.broadcast %c2 : tensor<{BM}x{BN}xi32>
    %off = arith.addi %rb, %cb : tensor<{BM}x{BN}xi32>
    %cp = tt.splat %C : tensor<{BM}x{BN}x!ptr<f32>>
    %ca = tt.addptr %cp, %off : tensor<{BM}x{BN}x!ptr<f32>>
    tt.store %ca, %acc loc(#f:40:4)"""
    return module_text(body, "%A: !ptr<f16>, %B: !ptr<f16>, %C: !ptr<f32>, %M: i32, %N: i32, %K: i32")

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

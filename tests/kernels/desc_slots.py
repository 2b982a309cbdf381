"""Kernels of device-side descriptor slots (`tlx.allocate_tensor_descriptor`,
`tlx.make_tensor_descriptor(desc_ptr=slot)`, `tlx.reinterpret_tensor_descriptor`):
tests/gpu/test_desc_slots_gpu.py launches them, tests/test_desc_slots.py interprets and compiles
them."""

from __future__ import annotations

import tlx
import tlx.language as tl

from . import spec


@tlx.jit
def slot_affine_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """y = 2 * x + 1 over an fp16 M x N matrix, one BM x BN tile a program: x's descriptor is
    written into slot 0 and y's into slot 1, both read back with reinterpret_tensor_descriptor;
    x's tile comes in by a TMA load into shared memory, y's goes out by a register-level store."""
    slots = tlx.allocate_tensor_descriptor(num=2)
    tlx.make_tensor_descriptor(desc_ptr=slots[0], base=x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tlx.make_tensor_descriptor(desc_ptr=slots[1], base=y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    xd = tlx.reinterpret_tensor_descriptor(desc_ptr=slots[0], block_shape=[BM, BN], dtype=tl.float16)
    yd = tlx.reinterpret_tensor_descriptor(desc_ptr=slots[1], block_shape=[BM, BN], dtype=tlx.dtype_of(y_ptr))
    buf = tlx.local_alloc((BM, BN), tl.float16, 1)
    bars = tlx.alloc_barriers(1)
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    tlx.barrier_expect_bytes(bars[0], BM * BN * 2)
    tlx.async_descriptor_load(xd, buf[0], [m, n], bars[0])
    tlx.barrier_wait(bars[0], 0)
    yd.store([m, n], tlx.local_load(buf[0]) * 2 + 1)


@tlx.jit
def slot_select_kernel(a_ptr, b_ptr, c_ptr, out_ptr, sel_ptr, n, BLOCK: tl.constexpr):
    """out = (a, b, c)[sel] over fp32 vectors of n: the three inputs' descriptors sit in slots
    0..2 and the one copied is read back through a runtime slot index (read from memory: one
    specialization for every index); out's descriptor lives in the program's own scratch
    (desc_ptr=None)."""
    slots = tlx.allocate_tensor_descriptor(num=3)
    tlx.make_tensor_descriptor(slots[0], a_ptr, [n], [1], [BLOCK])
    tlx.make_tensor_descriptor(slots[1], b_ptr, [n], [1], [BLOCK])
    tlx.make_tensor_descriptor(slots[2], c_ptr, [n], [1], [BLOCK])
    sel = tl.load(sel_ptr)
    src = tlx.reinterpret_tensor_descriptor(slots[sel], [BLOCK], tl.float32)
    od = tlx.make_tensor_descriptor(None, out_ptr, [n], [1], [BLOCK])
    off = tl.program_id(0) * BLOCK
    od.store([off], src.load([off]))


@tlx.jit
def slot_ws_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y = x - 3 over fp32 vectors of n: the whole CTA writes x's descriptor into the array passed
    as desc_ptr (its slot 0) and y's into slot 1; a worker partition reads both back and moves the
    tile (the slots are captured into the partition)."""
    slots = tlx.allocate_tensor_descriptor(num=2)
    tlx.make_tensor_descriptor(slots, x_ptr, [n], [1], [BLOCK])
    tlx.make_tensor_descriptor(slots[1], y_ptr, [n], [1], [BLOCK])
    off = tl.program_id(0) * BLOCK
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4):
            xd = tlx.reinterpret_tensor_descriptor(slots[0], [BLOCK], tl.float32)
            yd = tlx.reinterpret_tensor_descriptor(slots[1], [BLOCK], tl.float32)
            yd.store([off], xd.load([off]) - 3)


SLOT_AFFINE = spec("descriptor slots: TMA load and register store", slot_affine_kernel,
                   {"x_ptr": "*fp16", "y_ptr": "*fp16", "M": "i32", "N": "i32"}, {"BM": 64, "BN": 64},
                   divisible=["M", "N"])  # 256 x 192
SLOT_SELECT = spec("descriptor slots: runtime slot index", slot_select_kernel,
                   {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "out_ptr": "*fp32", "sel_ptr": "*i32",
                    "n": "i32"}, {"BLOCK": 256}, divisible=["n"])
SLOT_WS = spec("descriptor slots read in a worker partition", slot_ws_kernel,
               {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 512}, divisible=["n"])

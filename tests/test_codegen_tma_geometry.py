"""The geometry of TMA copies in PTX: the box a tensor map gets and the shared-memory address of
every `cp.async.bulk.tensor` of a tile. The PTX ISA asks for a box of at most 256 elements per
dimension and a 128-byte aligned shared-memory operand; a tile larger than one box is moved by
several copies, each landing where the buffer's layout puts that box. Every PTX here is assembled
by ptxas for sm_90a (Spec.compile / warmup), and the one-row tile also runs on the interpreter."""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import tlx  # noqa: E402
import tlx.language as tl  # noqa: E402
from filecheck import filecheck  # noqa: E402
from kernels import codegen as K  # noqa: E402
from tlx.compiler.errors import TLXCompileError  # noqa: E402

_SMEM_OPERAND = re.compile(r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global\S*\s+\[(%\w+)(?:\+(\d+))?\]")
_STORE_OPERAND = re.compile(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared::cta\S*\s+\[[^\]]*\],\s*\[(%\w+)(?:\+(\d+))?\]")


def smem_offsets(ptx: str, pattern: re.Pattern) -> list:
    """The immediate byte offsets of the shared-memory operands of the TMA copies `pattern` finds."""
    return [int(m.group(2) or 0) for m in pattern.finditer(ptx)]


@tlx.jit
def tile_copy(x_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr):
    """One R x C fp16 tile, loaded by TMA into a buffer whose layout the compiler picks and stored back."""
    xd = tl.make_tensor_descriptor(x_ptr, [R, C], [C, 1], [R, C])
    yd = tl.make_tensor_descriptor(y_ptr, [R, C], [C, 1], [R, C])
    buf = tlx.local_alloc((R, C), tl.float16, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], R * C * 2)
    tlx.async_descriptor_load(xd, buf[0], [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    tlx.async_descriptor_store(yd, buf[0], [0, 0])
    tlx.async_descriptor_store_wait(0)


def test_a_one_row_tile_wider_than_a_box_moves_in_256_element_boxes():
    """[1, 4096] fp16 into 32 row buffers of [1, 128]: 16 boxes of [1, 256] at 512-byte steps, both
    ways (16-byte boxes at 16-byte steps, as before, fault with a misaligned address)."""
    ptx = K.ROW_TILE_TMA.compile().asm["ptx"]
    filecheck(ptx, """
        CHECK: tensormap.replace.tile.box_dim.shared::cta.b1024.b32 {{\\[}}[[XM:%r\\d+]]], 0, 256;
        CHECK: tensormap.replace.tile.box_dim.shared::cta.b1024.b32 {{\\[}}[[XM]]], 1, 1;
        CHECK: tensormap.replace.tile.box_dim.shared::cta.b1024.b32 {{\\[}}[[YM:%r\\d+]]], 0, 256;
        CHECK: tensormap.replace.tile.box_dim.shared::cta.b1024.b32 {{\\[}}[[YM]]], 1, 1;
        CHECK: mbarrier.arrive.expect_tx.shared::cta.b64 _, [{{%r\\d+}}], 8192;
        CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes {{\\[}}[[IN:%r\\d+]]],
        CHECK-NEXT: add.s32
        CHECK-NEXT: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes {{\\[}}[[IN]]+512],
        CHECK: mbarrier.try_wait
    """)
    assert smem_offsets(ptx, _SMEM_OPERAND) == [512 * i for i in range(16)]
    stores = smem_offsets(ptx, _STORE_OPERAND)
    assert len(stores) == 16 and stores == sorted(stores) and {b - a for a, b in zip(stores, stores[1:])} == {512}


@pytest.mark.parametrize("rows,cols", [(1, 64), (1, 256), (1, 512), (8, 64), (64, 64), (64, 128), (128, 256), (16, 32)])
def test_every_tma_copy_lands_at_a_128_byte_aligned_offset_with_a_box_of_at_most_256(rows, cols):
    k = tile_copy.warmup(np.zeros((rows, cols), np.float16), np.zeros((rows, cols), np.float16), R=rows, C=cols,
                         grid=(1,))
    ptx = k.asm["ptx"]
    boxes = [int(b) for b in re.findall(r"box_dim\.shared::cta\.b1024\.b32 \[%r\d+\], \d, (\d+);", ptx)]
    assert boxes and max(boxes) <= 256
    loads, stores = smem_offsets(ptx, _SMEM_OPERAND), smem_offsets(ptx, _STORE_OPERAND)
    assert loads and len(loads) == len(stores)
    assert [o % 128 for o in loads + stores] == [0] * (2 * len(loads))
    # the boxes cover the tile once: copies x box elements == the tile
    box_elems = boxes[0] * boxes[1]
    assert len(loads) * box_elems == rows * cols


def test_the_one_row_tile_runs_on_the_interpreter():
    n = 2 * 32 * 128
    x = np.random.default_rng(7).standard_normal(n).astype(np.float16)
    y = np.full(n, np.nan, np.float16)
    tlx.interpret(K.row_tile_tma_kernel, (2,), x, y, n, ROWS=32, COLS=128)
    np.testing.assert_allclose(y.astype(np.float64), 3 * x.astype(np.float64), rtol=1e-3, atol=0)


@tlx.jit
def two_row_copy(x_ptr, R: tl.constexpr, C: tl.constexpr):
    xd = tl.make_tensor_descriptor(x_ptr, [R, C], [C, 1], [R, C])
    buf = tlx.local_alloc((R, C), tl.float16, 1, layout=tlx.nv_mma_shared_layout_encoding(
        shape=[R, C], order=[1, 0], elemType=tl.float16, numCTAsPerCGA=[1, 1], numCTASplit=[1, 1],
        numCTAOrder=[1, 1], fp4Padded=False, swizzled=False))
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], R * C * 2)
    tlx.async_descriptor_load(xd, buf[0], [0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)


def test_a_copy_the_layout_cannot_align_is_a_compile_error_naming_the_line():
    """Two rows of an unswizzled NVMMA buffer: its 16-byte columns are 32 bytes apart, so the second
    box would land at offset 32."""
    with pytest.raises(TLXCompileError, match=r"128-byte aligned shared memory") as e:
        two_row_copy.warmup(np.zeros((2, 64), np.float16), R=2, C=64, grid=(1,))
    assert "test_codegen_tma_geometry.py" in str(e.value)


@tlx.jit
def vector_copy_1d(x_ptr, y_ptr, n, BLOCK: tl.constexpr, WS: tl.constexpr):
    """y = x + 1 over a flat vector through rank-1 descriptors, tile by tile (in a worker partition
    when WS)."""
    xd = tl.make_tensor_descriptor(x_ptr, shape=[n], strides=[1], block_shape=[BLOCK])
    yd = tl.make_tensor_descriptor(y_ptr, shape=[n], strides=[1], block_shape=[BLOCK])
    off = tl.program_id(0) * BLOCK
    if WS:
        with tlx.async_tasks():
            with tlx.async_task("default"):
                pass
            with tlx.async_task(num_warps=4):
                yd.store([off], xd.load([off]) + 1)
    else:
        yd.store([off], xd.load([off]) + 1)


@pytest.mark.parametrize("ws", [False, True])
def test_a_rank_1_descriptor_tile_moves_in_boxes_of_256_and_runs_on_the_interpreter(ws):
    """A rank-1 tile is one contiguous row in the plain shared layout: 1024 fp32 move as 4 boxes of
    256 elements at 1024-byte steps each way (also inside a worker partition)."""
    n, block = 4096, 1024
    x = np.arange(n, dtype=np.float32)
    k = vector_copy_1d.warmup(x, x.copy(), n, BLOCK=block, WS=ws, grid=(n // block,))
    ptx = k.asm["ptx"]
    assert re.findall(r"box_dim\.shared::cta\.b1024\.b32 \[%r\d+\], 0, (\d+);", ptx) == ["256", "256"]
    assert smem_offsets(ptx, _SMEM_OPERAND) == [0, 1024, 2048, 3072]
    assert smem_offsets(ptx, re.compile(r"cp\.async\.bulk\.tensor\.1d\.global\.shared::cta\S*\s+\[[^\]]*\],\s*"
                                        r"\[(%\w+)(?:\+(\d+))?\]")) == [0, 1024, 2048, 3072]
    y = np.full(n, np.nan, np.float32)
    tlx.interpret(vector_copy_1d, (n // block,), x, y, n, BLOCK=block, WS=ws)
    np.testing.assert_array_equal(y, x + 1)

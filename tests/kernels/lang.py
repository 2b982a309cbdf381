"""Kernels of the memory and warp-level constructs (tests/gpu/test_lang_gpu.py launches them):
`local_gather` / `local_scatter` (also from a buffer with a user swizzle), the user shared layouts
(the bytes a tile lands in, read back raw), `vote_ballot_sync`, `warp_redux`,
`inline_asm_elementwise` and `prefetch`, with the specializations the GPU tests launch."""

from __future__ import annotations

import tlx
import tlx.language as tl

from . import spec


@tlx.jit
def gather_2d_kernel(src_ptr, idx_ptr, out_ptr, N: tl.constexpr, M: tl.constexpr, AXIS: tl.constexpr,
                     LAYOUT: tl.constexpr):
    offs = tl.arange(0, N)[:, None] * M + tl.arange(0, M)[None, :]
    buf = tlx.local_alloc((N, M), tlx.dtype_of(src_ptr), 1, layout=LAYOUT)
    tlx.local_store(buf[0], tl.load(src_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_gather(buf[0], tl.load(idx_ptr + offs), axis=AXIS))


@tlx.jit
def gather_1d_kernel(src_ptr, idx_ptr, out_ptr, N: tl.constexpr, K: tl.constexpr):
    buf = tlx.local_alloc((N,), tlx.dtype_of(src_ptr), 1)
    tlx.local_store(buf[0], tl.load(src_ptr + tl.arange(0, N)))
    k = tl.arange(0, K)
    tl.store(out_ptr + k, tlx.local_gather(buf[0], tl.load(idx_ptr + k), 0))


@tlx.jit
def scatter_3d_kernel(idx_ptr, val_ptr, out_ptr, N: tl.constexpr, M: tl.constexpr, P: tl.constexpr,
                      AXIS: tl.constexpr):
    offs = (tl.arange(0, N)[:, None, None] * (M * P) + tl.arange(0, M)[None, :, None] * P
            + tl.arange(0, P)[None, None, :])
    buf = tlx.local_alloc((N, M, P), tlx.dtype_of(val_ptr), 1)
    tlx.local_store(buf[0], tl.full([N, M, P], -1, tlx.dtype_of(val_ptr)))
    tlx.local_scatter(buf[0], tl.load(val_ptr + offs), tl.load(idx_ptr + offs), axis=AXIS)
    tl.store(out_ptr + offs, tlx.local_load(buf[0]))


@tlx.jit
def layout_image_kernel(x_ptr, img_ptr, LAYOUT: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                        IMG: tl.constexpr):
    """Store an M x N fp16 tile into a buffer with LAYOUT, then read the buffer's first IMG
    elements back as they lie in shared memory (a flat, unswizzled view of the same bytes)."""
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    buf = tlx.local_alloc((M, N), tl.float16, 1, layout=LAYOUT)
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    flat = tlx.local_reinterpret(buf[0], tl.float16, [IMG], layout=tlx.swizzled_shared_layout_encoding.make_default(1))
    tl.store(img_ptr + tl.arange(0, IMG), tlx.local_load(flat))


@tlx.jit
def ballot_scalar_kernel(out_ptr):
    tid = tlx.thread_id(0)
    b = tlx.vote_ballot_sync(0xFFFFFFFF, tid < 16)
    if tid == 0:
        tl.store(out_ptr, b)


@tlx.jit
def ballot_branch_kernel(out_ptr, MASK: tl.constexpr):
    tid = tlx.thread_id(0)
    if tid < 16:
        b = tlx.vote_ballot_sync(MASK, tid % 3 == 0)
        if tid == 0:
            tl.store(out_ptr, b)


@tlx.jit
def ballot_tensor_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tlx.vote_ballot_sync(0xFFFFFFFF, tl.load(x_ptr + offs)))


@tlx.jit
def redux_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, OP: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tlx.warp_redux(tl.load(x_ptr + offs), OP))


@tlx.jit
def pinned_redux_kernel(x_ptr, out_ptr, LAYOUT: tl.constexpr):
    """A warp reduction over a tile loaded in a register layout the user pinned."""
    offs = tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]
    buf = tlx.local_alloc((128, 64), tl.float32, 1)
    tlx.local_store(buf[0], tl.load(x_ptr + offs))
    tl.store(out_ptr + offs, tlx.warp_redux(tlx.local_load(buf[0], layout=LAYOUT), "max"))


@tlx.jit
def asm_shift_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.inline_asm_elementwise("shl.b32 $0, $1, 3;", "=r,r", [tl.load(x_ptr + offs)], dtype=tl.int32,
                                  is_pure=True, pack=1)
    tl.store(y_ptr + offs, y)


@tlx.jit
def asm_bytes_kernel(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a, b = tl.inline_asm_elementwise(
        "{ .reg .b8 t<4>; mov.b32 {t0, t1, t2, t3}, $8; cvt.s32.s8 $0, t0; cvt.s32.s8 $1, t1; cvt.s32.s8 $2, t2; "
        "cvt.s32.s8 $3, t3; add.s32 $4, $0, 1; add.s32 $5, $1, 1; add.s32 $6, $2, 1; add.s32 $7, $3, 1; }",
        "=r,=r,=r,=r,=r,=r,=r,=r,r", [tl.load(x_ptr + offs)], dtype=(tl.int32, tl.int32), is_pure=True, pack=4)
    tl.store(y_ptr + offs, a)
    tl.store(z_ptr + offs, b)


@tlx.jit
def asm_tied_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("add.f16x2 $0, $0, $1;", "=r,0,r", [x, x], dtype=tl.float16, is_pure=True, pack=2)
    tl.store(y_ptr + offs, y)


@tlx.jit
def prefetch_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, LEVEL: tl.constexpr, USE_MASK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n if USE_MASK else None
    tlx.prefetch(x_ptr + offs, level=LEVEL, mask=mask)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@tlx.jit
def prefetch_tensormap_kernel(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    tlx.prefetch(in_desc, tensormap=True)
    tlx.prefetch(out_desc, tensormap=True)
    off_m, off_n = tl.program_id(0) * BM, tl.program_id(1) * BN
    buf = tlx.local_alloc((BM, BN), tl.int16, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], BM * BN * 2)
    tlx.async_descriptor_load(in_desc, buf[0], [off_m, off_n], bars[0])
    tlx.barrier_wait(bars[0], 0)
    tlx.async_descriptor_store(out_desc, buf[0], [off_m, off_n])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def one_thread_tensor_store_kernel(out_ptr, TID: tl.constexpr, BLOCK: tl.constexpr):
    """A tensor store inside `if thread_id == TID`: only the elements that thread owns are written."""
    offs = tl.arange(0, BLOCK)
    if tlx.thread_id(0) == TID:
        tl.store(out_ptr + offs, offs + 1)


# ---- the specializations the GPU tests launch --------------------------------------------------------

SWIZZLE_1 = tlx.swizzled_layout(3, 0, 6, order=[1, 0])  # vec 1, perPhase 1, maxPhase 8 over 64 columns
PADDED = tlx.padded_shared_layout_encoding.with_identity_for([(64, 8)], [128, 64])
LINEAR = tlx.shared_linear_layout_encoding([[0, 1], [0, 2], [0, 4], [1, 0], [2, 0], [0, 8], [4, 0], [8, 0], [0, 16],
                                            [0, 32], [16, 0], [32, 0], [64, 0]])
DEFAULT = None

GATHER_LAYOUTS = {"default": DEFAULT, "swizzle": SWIZZLE_1}
GATHER = {(axis, name): spec(f"gather 64x64 fp32 axis={axis} {name}", gather_2d_kernel,
                             {"src_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32"},
                             {"N": 64, "M": 64, "AXIS": axis, "LAYOUT": lay}, 4)
          for axis in (0, 1) for name, lay in GATHER_LAYOUTS.items()}
GATHER_1D = spec("gather 1d fp16 by i64", gather_1d_kernel, {"src_ptr": "*fp16", "idx_ptr": "*i64", "out_ptr": "*fp16"},
                 {"N": 4096, "K": 256}, 4)
SCATTER = {axis: spec(f"scatter 16x8x4 fp32 axis={axis}", scatter_3d_kernel,
                      {"idx_ptr": "*i32", "val_ptr": "*fp32", "out_ptr": "*fp32"}, {"N": 16, "M": 8, "P": 4, "AXIS": axis},
                      1)
           for axis in (0, 1, 2)}
LAYOUT_IMAGE = {name: spec(f"layout image {name}", layout_image_kernel, {"x_ptr": "*fp16", "img_ptr": "*fp16"},
                           {"LAYOUT": lay, "M": 128, "N": 64, "IMG": 8192}, 4)
                for name, lay in (("swizzle", SWIZZLE_1), ("padded", PADDED), ("linear", LINEAR))}
BALLOT_SCALAR = spec("ballot scalar", ballot_scalar_kernel, {"out_ptr": "*i32"}, {}, 1)
BALLOT_BRANCH = spec("ballot in a branch", ballot_branch_kernel, {"out_ptr": "*i32"}, {"MASK": 0xFFFF}, 1)
BALLOT_TENSOR = spec("ballot tensor", ballot_tensor_kernel, {"x_ptr": "*i32", "out_ptr": "*i32"}, {"BLOCK": 1024}, 4)
REDUX = {op: spec(f"warp_redux {op}", redux_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                  {"BLOCK": 2048, "OP": op}, 8)
         for op in ("max", "min", "abs_max", "abs_min")}
ROW_PER_LANE = tlx.layout(shape=((32, 4), (64,)), stride=((64, 2048), (1,)))  # lane l of warp w: row 32 w + l
PINNED_REDUX = spec("warp_redux over a pinned layout", pinned_redux_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                    {"LAYOUT": ROW_PER_LANE}, 4)
ASM_SHIFT = spec("inline asm shift", asm_shift_kernel, {"x_ptr": "*i32", "y_ptr": "*i32"}, {"BLOCK": 1024}, 4)
ASM_BYTES = spec("inline asm bytes", asm_bytes_kernel, {"x_ptr": "*i8", "y_ptr": "*i32", "z_ptr": "*i32"},
                 {"BLOCK": 2048}, 4)
ASM_TIED = spec("inline asm tied", asm_tied_kernel, {"x_ptr": "*fp16", "y_ptr": "*fp16"}, {"BLOCK": 1024}, 4)
PREFETCH = {(level, mask): spec(f"prefetch {level} mask={mask}", prefetch_kernel,
                                {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
                                {"BLOCK": 1024, "LEVEL": level, "USE_MASK": mask}, 4)
            for level in ("L1", "L2") for mask in (False, True)}
PREFETCH_TENSORMAP = spec("prefetch tensormap", prefetch_tensormap_kernel,
                          {"in_desc": "tensordesc<i16[64, 64]>", "out_desc": "tensordesc<i16[64, 64]>"},
                          {"BM": 64, "BN": 64}, 4)
ONE_THREAD_STORE = [spec(f"tensor store by one thread, {nw} warps", one_thread_tensor_store_kernel, {"out_ptr": "*i32"},
                         {"TID": 3, "BLOCK": block}, nw) for nw, block in ((1, 32), (4, 128))]

"""Kernels of storage aliasing (`tlx.storage_alias_spec`, `reuse_group`, `set_buffer_overlap`;
tests/gpu/test_storage_alias_gpu.py launches them, tests/test_storage_alias.py interprets them).
Each check reads a buffer back through an alias of the same dtype, shape and layout, so what it
sees does not depend on how the layout swizzles the bytes."""

from __future__ import annotations

import tlx
import tlx.language as tl

from . import spec


@tlx.jit
def alias_shared_kernel(x_ptr, y_ptr, out_ptr, idx_ptr, B: tl.constexpr):
    """a and b (fp16) share each buffer group with c (fp32, twice as large, so the groups are
    16 KB apart). x goes into a[0], y into a[1]; out[0] = b[idx], out[1] = b[1 - idx] (idx read
    from memory: a runtime index): b sees what a holds."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.smem)
    a = tlx.local_alloc((B, B), tl.float16, 2, tlx.storage_kind.smem, reuse=spec)
    b = tlx.local_alloc((B, B), tl.float16, 2, tlx.storage_kind.smem, reuse=spec)
    c = tlx.local_alloc((B, B), tl.float32, 2, tlx.storage_kind.smem, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(a, b, c, group_type=tlx.reuse_group_type.shared))
    offs = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
    tlx.local_store(a[0], tl.load(x_ptr + offs))
    tlx.local_store(a[1], tl.load(y_ptr + offs))
    idx = tl.load(idx_ptr)
    tl.store(out_ptr + offs, tlx.local_load(b[idx]))
    tl.store(out_ptr + B * B + offs, tlx.local_load(b[1 - idx]))


@tlx.jit
def alias_distinct_groups_kernel(x_ptr, z_ptr, out_p_ptr, out_z_ptr, BM: tl.constexpr, BN: tl.constexpr):
    """shared(qk, distinct(group(shared(p, p2), group_size=2), alpha)): p holds 4 tiles, two
    consecutive ones per buffer group of qk, alpha one per group after them. Writes x[i] into
    p[i] and z[j] into alpha[j] (runtime indices), then reads p2[i] (= p[i]) and alpha[j]:
    distinct members keep their values, shared ones see each other's."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.smem)
    qk = tlx.local_alloc((BM, BN), tl.float32, 2, tlx.storage_kind.smem, reuse=spec)
    p = tlx.local_alloc((BM, BN // 2), tl.float16, 4, tlx.storage_kind.smem, reuse=spec)
    p2 = tlx.local_alloc((BM, BN // 2), tl.float16, 4, tlx.storage_kind.smem, reuse=spec)
    alpha = tlx.local_alloc((BM, BN // 4), tl.float32, 2, tlx.storage_kind.smem, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(
        qk,
        tlx.reuse_group(tlx.reuse_group(p, p2, group_size=2), alpha, group_type=tlx.reuse_group_type.distinct),
        group_type=tlx.reuse_group_type.shared))
    offs_p = tl.arange(0, BM)[:, None] * (BN // 2) + tl.arange(0, BN // 2)[None, :]
    offs_z = tl.arange(0, BM)[:, None] * (BN // 4) + tl.arange(0, BN // 4)[None, :]
    for i in tl.range(0, 4):
        tlx.local_store(p[i], tl.load(x_ptr + i * BM * (BN // 2) + offs_p))
    for j in tl.range(0, 2):
        tlx.local_store(alpha[j], tl.load(z_ptr + j * BM * (BN // 4) + offs_z))
    for i in tl.range(0, 4):
        tl.store(out_p_ptr + i * BM * (BN // 2) + offs_p, tlx.local_load(p2[i]))
    for j in tl.range(0, 2):
        tl.store(out_z_ptr + j * BM * (BN // 4) + offs_z, tlx.local_load(alpha[j]))


@tlx.jit
def alias_tma_store_kernel(x_ptr, out_desc, B: tl.constexpr):
    """A generic write into a[0], then a TMA store (an async read) of b[0], which shares its
    bytes: the fence passes must see the alias and fence the store."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.smem)
    a = tlx.local_alloc((B, B), tl.float16, 1, tlx.storage_kind.smem, reuse=spec)
    b = tlx.local_alloc((B, B), tl.float16, 1, tlx.storage_kind.smem, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(a, b, group_type=tlx.reuse_group_type.shared))
    offs = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
    tlx.local_store(a[0], tl.load(x_ptr + offs))
    tlx.async_descriptor_store(out_desc, b[0], [0, 0])
    tlx.async_descriptor_store_wait(0)


@tlx.jit
def reuse_array_kernel(x_ptr, y_ptr, z_ptr, out_ptr, B: tl.constexpr):
    """`local_alloc(..., reuse=a)` of a buffer array (how a GEMM stages C in its B ring): b's one
    tile is a[0]'s bytes. x into a[0], y into a[1]; out[0] = b[0] (x); then z into b[0]; out[1] =
    a[0] (z), out[2] = a[1] (y: past b's bytes, untouched)."""
    a = tlx.local_alloc((B, B), tl.float16, 2)
    b = tlx.local_alloc((B, B), tl.float16, 1, reuse=a)
    offs = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
    tlx.local_store(a[0], tl.load(x_ptr + offs))
    tlx.local_store(a[1], tl.load(y_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_load(b[0]))
    tlx.local_store(b[0], tl.load(z_ptr + offs))
    tl.store(out_ptr + B * B + offs, tlx.local_load(a[0]))
    tl.store(out_ptr + 2 * B * B + offs, tlx.local_load(a[1]))


SHARED = spec("storage alias shared 64x64 fp16", alias_shared_kernel,
              {"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16", "idx_ptr": "*i32"}, {"B": 64})
DISTINCT = spec("storage alias distinct group_size 64x64", alias_distinct_groups_kernel,
                {"x_ptr": "*fp16", "z_ptr": "*fp32", "out_p_ptr": "*fp16", "out_z_ptr": "*fp32"}, {"BM": 64, "BN": 64})
TMA_STORE = spec("storage alias tma store 64x64 fp16", alias_tma_store_kernel,
                 {"x_ptr": "*fp16", "out_desc": "tensordesc<fp16[64, 64]>"}, {"B": 64})
REUSE_ARRAY = spec("local_alloc reuse of a buffer array 64x64 fp16", reuse_array_kernel,
                   {"x_ptr": "*fp16", "y_ptr": "*fp16", "z_ptr": "*fp16", "out_ptr": "*fp16"}, {"B": 64})

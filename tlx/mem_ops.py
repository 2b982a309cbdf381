"""TLX shared-memory, TMA, cp.async and fence operations (`tlx.local_alloc`, `tlx.local_store`,
`tlx.async_descriptor_load`, `tlx.fence`, ...). Names and defaults follow TLX's `mem_ops.py`."""

from __future__ import annotations

import math
import warnings
from typing import Any, List, Optional

from tlx.compiler.errors import TLXAssertionError, TLXCompileError, TLXTypeError, TLXValueError
from tlx.compiler.ir import layouts as L
from tlx.compiler.ir import types as T
from tlx.compiler.ir.alias import placement_attrs

from .language import core, semantic
from .language.core import (async_token, buffered_tensor, builtin, mbarrier, tensor, tensor_descriptor,
                            tensor_descriptor_ptr, unwrap)
from .layouts import layout as layout_cls
from .layouts import resolve_shared_layout
from .storage_alias import storage_alias_spec_type_class, storage_kind


def _as_buffer(v: Any, what: str) -> buffered_tensor:
    v = unwrap(v)
    if not isinstance(v, buffered_tensor):
        raise TLXCompileError(f"{what} must be a shared-memory buffer (from tlx.local_alloc), got {type(v).__name__}")
    return v


# ---- allocation and views ------------------------------------------------------------------------

@builtin
def local_alloc(shape: Any, dtype: Any, num: Any, storage: Any = storage_kind.smem,
                reuse: Optional[buffered_tensor | storage_alias_spec] = None,
                layout: Any = None) -> buffered_tensor:
    """Allocate `num` shared-memory buffers of `shape` x `dtype`; returns the buffer array (index it
    with `buf[i]` / `tlx.local_view`). `num` must be a compile-time constant.

    `reuse=spec` (a `tlx.storage_alias_spec`) places the buffers in the spec's bytes, shared with
    its other allocations as `spec.set_buffer_overlap` lays them out (`tlx/storage_alias.py`);
    `reuse=buf` (an array from `local_alloc`) puts them at the start of `buf`'s bytes, which must
    hold them."""
    shape = tuple(semantic.constexpr_int(d, "each dimension of the local_alloc shape") for d in unwrap(shape))
    if isinstance(unwrap(num), core.Handle):  # the real TLX's ValueError
        raise TLXValueError("the number of buffers of local_alloc must be a compile-time constant, got a runtime value",
                            hint="pass it as a literal or a tl.constexpr parameter directly (`num=2`, "
                                 "`num=tl.constexpr(2)`); a variable assigned in the kernel is a runtime value")
    num = semantic.constexpr_int(num, "the number of buffers of local_alloc",
                         hint="pass the number of buffers as a literal or a tl.constexpr parameter directly; "
                              "a variable assigned in the kernel is a runtime value")
    dt = unwrap(dtype)
    if not isinstance(dt, core.dtype) or dt.is_ptr():
        raise TLXCompileError(f"local_alloc needs a scalar dtype, got {dt!r}")
    if unwrap(storage) is storage_kind.tmem:
        raise TLXAssertionError("tensor memory (storage_kind.tmem) exists only on Blackwell (sm_100); tlx targets sm_90a",
                                hint="allocate in shared memory (the default)")
    if num < 1:
        raise TLXCompileError(f"local_alloc needs at least one buffer, got num={num}")
    if not shape or any(d < 1 for d in shape):
        raise TLXCompileError(f"local_alloc shape must have positive dimensions, got {shape}")
    # the default layout, or the user's kept as given: the compiler never retags it to suit a consumer
    lay = resolve_shared_layout(layout, shape, dt)
    t = T.MemDescType((num,) + shape, dt.ir, lay, num, True)
    reuse = unwrap(reuse)
    if isinstance(reuse, storage_alias_spec_type_class):
        if reuse.storage is not unwrap(storage):
            raise TLXValueError(f"storage_alias_spec storage ({reuse.storage.value}) does not match the "
                                f"local_alloc storage ({unwrap(storage).value})")
        return reuse._alloc(t, dt)
    if isinstance(reuse, buffered_tensor):
        return _reuse_buffer(reuse, t, dt)
    if reuse is not None:
        raise TLXTypeError(f"reuse must be a buffered_tensor or storage_alias_spec, got {type(reuse).__name__}")
    op = semantic.emit("tlx.local_alloc", [None], [t])
    return buffered_tensor(op.result, dt)


def _reuse_buffer(reuse: buffered_tensor, t: T.MemDescType, dt: Any) -> buffered_tensor:
    """`local_alloc(..., reuse=buf)`: the new buffers start at byte 0 of `buf`'s allocation, back
    to back (TLX's original form of aliasing; `storage_alias_spec` is the one that lays out)."""
    owner = getattr(reuse.handle, "owner", None)
    if owner is None or owner.name != "tlx.local_alloc" or owner.attrs.get("storage_alias"):
        raise TLXCompileError("local_alloc(reuse=buf) needs the buffer array another local_alloc returned",
                              hint="pass the whole allocation, or share bytes through tlx.storage_alias_spec")
    if t.nbytes > reuse.mtype.nbytes:
        raise TLXCompileError(f"local_alloc(reuse=...) of {t.nbytes} bytes does not fit the {reuse.mtype.nbytes} "
                              f"bytes of the buffer it reuses",
                              hint="reuse a larger buffer, or use a tlx.storage_alias_spec sized by its largest member")
    op = semantic.emit("tlx.local_alias", [reuse.handle], [t], placement_attrs(0, [t.nbytes // t.buffers]))
    return buffered_tensor(op.result, dt)


@builtin
def local_view(buf: Any, idx: Any) -> Any:
    """Buffer `idx` of a buffer array (or of an mbarrier array); `idx` may be a runtime integer.
    `buf[idx]` is the same."""
    return semantic.memdesc_index(buf, idx)


@builtin
def local_trans(input: Any, dims: Any = (1, 0)) -> buffered_tensor:
    """A transposed view (no data moves): feeds K^T or a column-major operand to async_dot."""
    b = _as_buffer(input, "local_trans's input")
    dims = [unwrap(d) for d in unwrap(dims)]
    st = b.mtype
    if sorted(dims) != list(range(len(st.shape))):
        raise TLXValueError(f"local_trans dims {dims} do not permute the {len(st.shape)} dimensions")
    lay = st.layout
    if isinstance(lay, L.NVMMASharedLayout) and len(st.shape) == 2 and dims == [1, 0]:
        lay = L.NVMMASharedLayout(lay.swizzle, lay.bits, not lay.transposed)
    t = st.replace(shape=tuple(st.shape[i] for i in dims), layout=lay, buffers=0)
    op = semantic.emit("tlx.memdesc_trans", [b.handle], [t], {"order": dims})
    return buffered_tensor(op.result, b.dtype)


@builtin
def local_slice(buffer: Any, offset: Any, shape: Any) -> buffered_tensor:
    """A same-rank sub-rectangle of a view; offsets may be runtime integers."""
    b = _as_buffer(buffer, "local_slice's buffer")
    offs, shape = list(unwrap(offset)), [unwrap(s) for s in unwrap(shape)]
    st = b.mtype
    if len(offs) != len(st.shape) or len(shape) != len(st.shape):
        raise TLXCompileError(f"local_slice needs {len(st.shape)} offsets and sizes (the view's rank)")
    static, dyn = [], []
    for o, s, d in zip(offs, shape, st.shape):
        o = unwrap(o)
        if not isinstance(s, int) or s < 1 or s > d:
            raise TLXCompileError(f"local_slice size {s} does not fit dimension {d}")
        if isinstance(o, int) and not isinstance(o, bool):
            if o < 0 or o + s > d:
                raise TLXCompileError(f"local_slice [{o}, {o + s}) exceeds dimension {d}")
            static.append(o)
        else:
            static.append(-1)
            dyn.append(semantic.index_i32(o, "a local_slice offset"))
    t = st.replace(shape=tuple(shape), buffers=0)
    op = semantic.emit("tlx.memdesc_subslice", [b.handle, dyn], [t], {"static_offsets": static})
    return buffered_tensor(op.result, b.dtype)


@builtin
def local_reinterpret(src: Any, dtype: Any, shape: Any = None, layout: Any = None) -> buffered_tensor:
    """The same bytes as another dtype (and shape)."""
    b = _as_buffer(src, "local_reinterpret's source")
    dt = unwrap(dtype)
    st = b.mtype
    new_shape = tuple(unwrap(s) for s in unwrap(shape)) if shape is not None else st.shape
    nbytes = math.prod(new_shape) * max(1, dt.primitive_bitwidth // 8)
    if nbytes > st.nbytes:
        raise TLXCompileError(f"local_reinterpret to {new_shape} x {dt} needs {nbytes} bytes; the buffer has {st.nbytes}")
    # the result is still an array of the same buffers when its leading dimension is theirs; a
    # layout (explicit or the default) describes one buffer of it, else the whole view
    keeps_buffers = bool(st.buffers) and new_shape[:1] == st.shape[:1]
    one = new_shape[1:] if keeps_buffers else new_shape
    lay = resolve_shared_layout(layout, one, dt)
    t = T.MemDescType(new_shape, dt.ir, lay, st.buffers if keeps_buffers else 0, st.mutable, st.alloc_shape)
    op = semantic.emit("tlx.memdesc_reinterpret", [b.handle], [t])
    return buffered_tensor(op.result, dt)


@builtin
def local_reshape(src: Any, shape: Any) -> buffered_tensor:
    """The same buffer seen with another shape (no data moves)."""
    b = _as_buffer(src, "local_reshape's source")
    return local_reinterpret(b, b.dtype, shape)


# ---- register <-> shared ---------------------------------------------------------------------------

@builtin
def local_store(dst: Any, src: Any) -> None:
    """Store a register tensor into a shared-memory view (a generic-proxy write)."""
    b = _as_buffer(dst, "local_store's destination")
    v = semantic.to_tensor(unwrap(src))
    if tuple(v.shape) != tuple(b.mtype.shape):
        raise TLXCompileError(f"local_store of a {list(v.shape)} tensor into a {list(b.mtype.shape)} buffer",
                              hint="index the buffer array first (buf[i]) and match the shapes")
    if v.dtype != b.dtype:
        raise TLXCompileError(f"local_store of {v.dtype} into a {b.dtype} buffer", hint=f"convert first: x.to(...)")
    semantic.emit("tlx.local_store", [b.handle, v.handle], [])


@builtin
def local_load(src: Any, token: Any = None, layout: Any = None, relaxed: Any = False,
               rematerialize_coordinates: Any = False, rematerialize_coordinates_group: Any = None) -> tensor:
    """Load a shared-memory view into registers (a generic-proxy read). `layout=` a
    `tlx.layout(shape=, stride=)` pins the result's register layout (which lane and register hold
    each element; the compiler keeps it); `relaxed=` and the rematerialization hints are accepted
    and ignored on Hopper."""
    b = _as_buffer(src, "local_load's source")
    tok = unwrap(token)
    st = b.mtype
    lay = unwrap(layout)
    pinned = None
    if lay is not None:
        if not isinstance(lay, layout_cls):
            raise TLXTypeError(f"local_load's layout= is a register layout, tlx.layout(shape=, stride=); got "
                               f"{type(lay).__name__}", hint="a shared-memory layout belongs to tlx.local_alloc")
        pinned = {"layout": lay.to_linear_layout(tuple(st.shape))}  # the layout pass gives it to the result
    op = semantic.emit("tlx.local_load", [b.handle, tok.handle if isinstance(tok, async_token) else None],
                       [T.TensorType(st.shape, st.element)], pinned)
    return tensor(op.result, b.dtype, st.shape)


def _axis(axis: Any, rank: int, what: str) -> int:
    a = unwrap(axis)
    if isinstance(a, core.Handle):
        raise TLXCompileError(f"{what}'s axis must be a compile-time integer, got a runtime value")
    if not isinstance(a, int) or isinstance(a, bool) or not 0 <= a < rank:
        raise TLXValueError(f"{what}'s axis must be a dimension of the rank-{rank} buffer (0..{rank - 1}), got {a!r}")
    return a


def _gather_indices(b: buffered_tensor, indices: Any, axis: int, what: str) -> tensor:
    idx = semantic.to_tensor(unwrap(indices))
    st = b.mtype
    if st.buffers:
        raise TLXCompileError(f"{what} of a whole buffer array {list(st.shape)}",
                              hint="pick one buffer first: buf[i] / tlx.local_view(buf, i)")
    if not idx.dtype.is_int() or idx.dtype.is_bool():
        raise TLXTypeError(f"{what}'s indices must be an integer tensor, got {idx.type}")
    if len(idx.shape) != len(st.shape):
        raise TLXValueError(f"{what}'s indices {list(idx.shape)} must have the rank of the buffer {list(st.shape)}")
    for d, (i, n) in enumerate(zip(idx.shape, st.shape)):
        if d != axis and i > n:
            raise TLXValueError(f"{what}'s indices {list(idx.shape)} exceed the buffer {list(st.shape)} along "
                                f"dimension {d} (only the axis, {axis}, is indexed)")
    return idx


@builtin
def local_gather(src: Any, indices: Any, axis: Any, token: Any = None) -> tensor:
    """Gather from shared memory along `axis`: result[I] = src[I with I[axis] replaced by
    indices[I]]; the result has the shape of `indices` (an integer tensor of the buffer's rank). A
    generic-proxy read. Indices outside the axis are undefined behaviour, as on the GPU (the
    interpreter reports them; the GPU reads them modulo the axis length, inside the buffer)."""
    b = _as_buffer(src, "local_gather's source")
    ax = _axis(axis, len(b.mtype.shape), "local_gather")
    idx = _gather_indices(b, indices, ax, "local_gather")
    st = b.mtype
    op = semantic.emit("tlx.local_gather", [b.handle, idx.handle], [T.TensorType(idx.shape, st.element)], {"axis": ax})
    return tensor(op.result, b.dtype, idx.shape)


@builtin
def local_scatter(dst: Any, src: Any, indices: Any, axis: Any, token: Any = None) -> None:
    """Scatter into shared memory along `axis`: dst[I with I[axis] replaced by indices[I]] =
    src[I]; `src` (converted to nothing: it must hold the buffer's dtype) has the shape of
    `indices`. A generic-proxy write. Two elements sent to one place leave one of them, which one
    undefined (the interpreter keeps the last in row-major order)."""
    b = _as_buffer(dst, "local_scatter's destination")
    ax = _axis(axis, len(b.mtype.shape), "local_scatter")
    idx = _gather_indices(b, indices, ax, "local_scatter")
    v = semantic.to_tensor(unwrap(src))
    if v.dtype != b.dtype:
        raise TLXTypeError(f"local_scatter of {v.dtype} values into a {b.dtype} buffer", hint="convert first: x.to(...)")
    if tuple(v.shape) != tuple(idx.shape):
        if v.shape:
            raise TLXValueError(f"local_scatter's values {list(v.shape)} and indices {list(idx.shape)} differ in shape")
        v = semantic.splat(v, idx.shape)
    semantic.emit("tlx.local_scatter", [b.handle, v.handle, idx.handle], [], {"axis": ax})


@builtin
def subslice(local_allocated_buffer: Any, offset: Any, size: Any) -> buffered_tensor:
    """A column slice of a tensor-memory buffer (Blackwell). Hopper has no tensor memory: slice
    shared memory with `tlx.local_slice`."""
    raise TLXAssertionError("tlx.subslice slices tensor memory (Blackwell only); tlx buffers live in shared memory",
                            hint="use tlx.local_slice(buf, offsets, shape) for a sub-rectangle of a shared buffer")


# ---- fences ------------------------------------------------------------------------------------------

@builtin
def fence(scope: Any) -> None:
    """`"async_shared"`: order this thread's generic-proxy shared-memory accesses before later
    async-proxy ones (fence.proxy.async.shared::cta). `"gpu"` / `"sys"`: acq_rel memory fences."""
    s = unwrap(scope)
    if s == "async_shared":
        semantic.emit("tlx.fence_async_shared", [], [], {"cluster": False, "origin": "user"})
    elif s in ("gpu", "sys"):
        semantic.emit("tlx.fence", [], [], {"scope": s})
    else:
        raise TLXValueError(f"unknown fence scope {s!r}", hint='use tlx.fence("async_shared"), ("gpu") or ("sys")')


_warned_fence_alias = [False]


@builtin
def fence_async_shared() -> None:
    """Deprecated alias of `tlx.fence("async_shared")`."""
    if not _warned_fence_alias[0]:
        _warned_fence_alias[0] = True
        warnings.warn('tlx.fence_async_shared() is deprecated; use tlx.fence("async_shared")', DeprecationWarning,
                      stacklevel=2)
    fence("async_shared")


# ---- cp.async ------------------------------------------------------------------------------------------

@builtin
def async_load(src: Any, result: Any, mask: Any = None, other: Any = None, cache_modifier: Any = "",
               eviction_policy: Any = "", is_volatile: Any = False, bulk: Any = False, bulk_size: Any = None,
               barrier: Any = None) -> Optional[async_token]:
    """cp.async: copy global memory (a block of pointers) into a shared-memory view; masked-off
    elements become `other` (or 0). `bulk=True`: one 1-D cp.async.bulk of `bulk_size` bytes that
    completes on `barrier`."""
    b = _as_buffer(result, "async_load's result buffer")
    if unwrap(bulk):
        bar = unwrap(barrier)
        if not isinstance(bar, mbarrier) or bar.handle.type.array:  # type: ignore[union-attr]
            raise TLXCompileError("async_load(bulk=True) needs barrier= one mbarrier")
        if mask is not None or other is not None:
            raise TLXCompileError("async_load(bulk=True) takes no mask")
        p = semantic.to_tensor(unwrap(src))
        if not p.dtype.is_ptr() or p.shape:
            raise TLXCompileError("async_load(bulk=True) needs a scalar pointer source")
        size = b.mtype.nbytes if bulk_size is None else semantic.constexpr_int(bulk_size, "bulk_size")
        if size % 16 or size <= 0 or size > b.mtype.nbytes:
            raise TLXCompileError(f"bulk_size {size} must be a positive multiple of 16 no larger than the buffer ({b.mtype.nbytes} B)")
        semantic.emit("tlx.async_bulk_load", [p.handle, b.handle, bar.handle], [], {"size": size})
        return None
    p = semantic.to_tensor(unwrap(src))
    if not p.dtype.is_ptr():
        raise TLXCompileError(f"async_load needs a block of pointers, got {p.type}")
    shape = b.mtype.shape
    if tuple(p.shape) != tuple(shape):
        p = semantic.broadcast_to(p, shape)
    if p.dtype.element_ty != b.dtype:  # type: ignore[attr-defined]
        raise TLXCompileError(f"async_load from {p.dtype.element_ty} pointers into a {b.dtype} buffer")  # type: ignore[attr-defined]
    m = unwrap(mask)
    if m is not None:
        m = semantic.broadcast_to(semantic.cast(semantic.to_tensor(m), core.int1), shape)
    o = unwrap(other)
    if isinstance(o, (int, float)) and not isinstance(o, bool):
        if o != 0:
            raise TLXCompileError("cp.async fills masked-off elements with zeros only",
                                  hint="drop other=, or use tl.load + local_store")
        o = None  # zeros are what cp.async writes for masked-off elements
    if o is not None:
        o = semantic.broadcast_to(semantic.cast(semantic.to_tensor(o), b.dtype), shape)
    attrs = semantic._check_mod(cache_modifier, eviction_policy)
    op = semantic.emit("tlx.async_load", [p.handle, b.handle, m.handle if m is not None else None,
                                          o.handle if o is not None else None], [T.token], attrs)
    return async_token(op.result)


def _tokens(tokens: Any) -> List[Any]:
    tokens = unwrap(tokens)
    if tokens is None:
        return []
    if isinstance(tokens, async_token):
        tokens = [tokens]
    out = []
    for t in tokens:
        t = unwrap(t)
        if t is None:
            continue
        if not isinstance(t, async_token):
            raise TLXCompileError(f"expected async tokens, got {type(t).__name__}")
        out.append(t.handle)
    return out


@builtin
def async_load_commit_group(tokens: Any = ()) -> async_token:
    """Close the current group of cp.async copies."""
    op = semantic.emit("tlx.async_commit_group", [_tokens(tokens)], [T.token])
    return async_token(op.result)


@builtin
def async_load_wait_group(pendings: Any, tokens: Any = ()) -> async_token:
    """Wait until at most `pendings` cp.async groups are in flight."""
    n = semantic.constexpr_int(pendings, "async_load_wait_group's pendings")
    op = semantic.emit("tlx.async_wait_group", [_tokens(tokens)], [T.token], {"pendings": n})
    return async_token(op.result)


# ---- TMA -----------------------------------------------------------------------------------------------------

def _desc(v: Any) -> tensor_descriptor:
    v = unwrap(v)
    if not isinstance(v, tensor_descriptor):
        raise TLXCompileError(f"expected a tensor descriptor, got {type(v).__name__}",
                              hint="pass a tlx.TensorDescriptor argument or build one with tl.make_tensor_descriptor")
    return v


def _offsets(offsets: Any, rank: int, what: str) -> List[Any]:
    offsets = unwrap(offsets)
    if not isinstance(offsets, (list, tuple)) or len(offsets) != rank:
        raise TLXCompileError(f"{what} needs a list of {rank} offsets (outermost first)")
    return [semantic.index_i32(o, f"{what} offset") for o in offsets]


def _check_tile(desc: tensor_descriptor, buf: buffered_tensor, what: str) -> None:
    if tuple(buf.mtype.shape) != tuple(desc.block_shape) or buf.dtype != desc.dtype:
        raise TLXCompileError(f"{what}: buffer {list(buf.mtype.shape)} x {buf.dtype} does not match the descriptor's "
                              f"block {desc.block_shape} x {desc.dtype}",
                              hint="index the buffer array (buf[i]) and make the descriptor's block_shape match it")


@builtin
def async_descriptor_load(desc: Any, result: Any, offsets: Any, barrier: Any, pred: Any = None,
                          cache_modifier: Any = "", eviction_policy: Any = "", multicast_targets: Any = (),
                          two_ctas: Any = False) -> None:
    """TMA load of one tile into `result`; completes (complete_tx) on `barrier`, which needs a
    matching `barrier_expect_bytes`."""
    d = _desc(desc)
    b = _as_buffer(result, "async_descriptor_load's result")
    _check_tile(d, b, "async_descriptor_load")
    bar = unwrap(barrier)
    if not isinstance(bar, mbarrier) or bar.handle.type.array:  # type: ignore[union-attr]
        raise TLXCompileError("async_descriptor_load needs one mbarrier (index the array: bars[i])")
    if unwrap(two_ctas):
        raise TLXCompileError("two_ctas=True needs Blackwell")
    attrs = semantic._check_mod(cache_modifier, eviction_policy)
    mask = _multicast_mask(multicast_targets)
    if mask is not None:
        attrs["multicast"] = True
    semantic.emit("tlx.tma_load", [d.handle, b.handle, bar.handle, _offsets(offsets, len(d.block_shape), "async_descriptor_load"),
                                   semantic.predicate(pred), mask], [], attrs)


def _multicast_mask(targets: Any) -> Any:
    """The 16-bit CTA mask (an i32 value) of a multicast TMA load's target ranks, or None for
    an ordinary load. Ranks may be runtime values; a constant rank is checked against the 16 CTAs
    a Hopper cluster can have (a runtime rank past 15 names no CTA)."""
    ts = unwrap(targets)
    ts = list(ts) if isinstance(ts, (list, tuple)) else [ts] if ts is not None else []
    if not ts:
        return None
    mask = None
    for t in ts:
        r = unwrap(t)
        if isinstance(r, int) and not 0 <= r < 16:
            raise TLXValueError(f"multicast_targets names CTA rank {r}; a cluster has ranks 0..15",
                                hint="pass ranks in the cluster (tlx.cluster_cta_rank() gives this CTA's)")
        bit = semantic.shl(semantic.scalar_constant(1, core.int32), semantic.cast(semantic.to_tensor(r), core.int32))
        mask = bit if mask is None else semantic.or_(mask, bit)
    return mask.handle  # type: ignore[union-attr]


# ---- distributed shared memory (thread-block clusters) --------------------------------------------

def cta_rank_operand(remote_cta_rank: Any, what: str) -> Any:
    """`remote_cta_rank` of a cluster op as an i32 IR value (a constant rank checked against the
    16 CTAs a cluster can have)."""
    if unwrap(remote_cta_rank) is None:
        raise TLXValueError(f"{what} needs remote_cta_rank (the destination CTA's rank in the cluster)")
    r = unwrap(remote_cta_rank)
    if isinstance(r, int) and not 0 <= r < 16:
        raise TLXValueError(f"{what}: remote_cta_rank {r} is not a rank of a cluster (0..15)")
    return semantic.index_i32(r, f"{what}'s remote_cta_rank")


def _local(v: Any, what: str) -> buffered_tensor:
    b = _as_buffer(v, what)
    if b.mtype.remote:
        raise TLXCompileError(f"{what} takes the local buffer; the op maps it to the remote CTA itself",
                              hint="pass the buffer, not tlx.remote_view(buffer, rank)")
    if b.mtype.buffers:
        raise TLXCompileError(f"{what} needs one buffer, got an array of {b.mtype.buffers}", hint="index it: buf[i]")
    return b


def remote_buffer(v: Any, rank: Any) -> Any:
    """The remote view (a `tlx.remote_view` op) of a local buffer or single mbarrier in CTA `rank`
    (an i32 value) of the cluster, as a frontend object of the same kind."""
    v = unwrap(v)
    if isinstance(v, mbarrier):
        op = semantic.emit("tlx.remote_view", [v.handle, rank], [T.BarrierType(1, False, remote=True)])
        return mbarrier(op.result, v.arrive_count, v.is_warp_barrier)
    op = semantic.emit("tlx.remote_view", [v.handle, rank], [v.mtype.replace(remote=True)])
    return buffered_tensor(op.result, v.dtype)


@builtin
def remote_view(local_allocated_buffer: Any, remote_cta_rank: Any) -> Any:
    """The same buffer (or single mbarrier) in CTA `remote_cta_rank` of this CTA's cluster:
    mapa.shared::cluster of its address. Barriers of the view take remote arrives
    (`barrier_arrive`); a buffer view is the destination of the remote stores."""
    v = unwrap(local_allocated_buffer)
    if isinstance(v, mbarrier):
        if v.handle.type.array:  # type: ignore[union-attr]
            raise TLXCompileError("remote_view needs one mbarrier, got an array", hint="index it: bars[i]")
        if v.handle.type.remote:  # type: ignore[union-attr]
            raise TLXCompileError("remote_view of a remote view: pass the local mbarrier")
    elif isinstance(v, buffered_tensor):
        if v.mtype.remote:
            raise TLXCompileError("remote_view of a remote view: pass the local buffer")
    else:
        raise TLXCompileError(f"remote_view needs a shared-memory buffer or an mbarrier, got {type(v).__name__}")
    return remote_buffer(v, cta_rank_operand(remote_cta_rank, "remote_view"))


def _value_for(b: buffered_tensor, src: Any, what: str) -> tensor:
    t = semantic.to_tensor(unwrap(src))
    if tuple(t.shape) != tuple(b.shape):
        raise TLXCompileError(f"{what}: value shape {list(t.shape)} differs from the buffer's {list(b.shape)}")
    return semantic.cast(t, b.dtype)


def _remote_bar(barrier: Any, rank: Any, what: str) -> mbarrier:
    bar = unwrap(barrier)
    if not isinstance(bar, mbarrier) or bar.handle.type.array or bar.handle.type.remote:  # type: ignore[union-attr]
        raise TLXCompileError(f"{what} needs one local mbarrier (bars[i]); it signals that barrier in the remote CTA")
    return remote_buffer(bar, rank)


@builtin
def remote_shmem_store(dst: Any, src: Any, remote_cta_rank: Any) -> None:
    """Store register tensor `src` into buffer `dst` of CTA `remote_cta_rank` of the cluster
    (st.shared::cluster); order it for the reader with a cluster barrier."""
    b = _local(dst, "remote_shmem_store's dst")
    r = cta_rank_operand(remote_cta_rank, "remote_shmem_store")
    v = _value_for(b, src, "remote_shmem_store")
    semantic.emit("tlx.remote_store", [remote_buffer(b, r).handle, v.handle], [])


@builtin
def async_remote_shmem_store(dst: Any, src: Any, remote_cta_rank: Any, barrier: Any) -> None:
    """Store register tensor `src` into buffer `dst` of CTA `remote_cta_rank` asynchronously
    (st.async): the bytes complete on `barrier` of that CTA, which expects them
    (`barrier_expect_bytes` there) and which its reader waits on."""
    b = _local(dst, "async_remote_shmem_store's dst")
    r = cta_rank_operand(remote_cta_rank, "async_remote_shmem_store")
    v = _value_for(b, src, "async_remote_shmem_store")
    bar = _remote_bar(barrier, r, "async_remote_shmem_store")
    semantic.emit("tlx.async_remote_store", [remote_buffer(b, r).handle, v.handle, bar.handle], [])


@builtin
def async_remote_shmem_copy(dst: Any, src: Any, remote_cta_rank: Any, barrier: Any) -> None:
    """Bulk-copy local buffer `src` into buffer `dst` of CTA `remote_cta_rank`
    (cp.async.bulk.shared::cluster.shared::cta): the bytes complete on `barrier` of that CTA. The
    copy reads `src` through the async proxy (fence a generic write of it first)."""
    d = _local(dst, "async_remote_shmem_copy's dst")
    s = _local(src, "async_remote_shmem_copy's src")
    if s.mtype.nbytes != d.mtype.nbytes:
        raise TLXCompileError(f"async_remote_shmem_copy: src ({s.mtype.nbytes} bytes) and dst ({d.mtype.nbytes} "
                              "bytes) differ in size")
    if s.mtype.nbytes % 16:
        raise TLXCompileError(f"async_remote_shmem_copy moves a multiple of 16 bytes, got {s.mtype.nbytes}")
    r = cta_rank_operand(remote_cta_rank, "async_remote_shmem_copy")
    bar = _remote_bar(barrier, r, "async_remote_shmem_copy")
    semantic.emit("tlx.async_remote_copy", [remote_buffer(d, r).handle, s.handle, bar.handle], [])


@builtin
def async_descriptor_store(desc: Any, source: Any, offsets: Any, eviction_policy: Any = "", store_reduce: Any = "") -> None:
    """TMA store of the shared-memory tile `source` (then a bulk commit). `store_reduce` (a TMA
    reduce into global memory) is refused with a clear error: not lowered yet."""
    d = _desc(desc)
    b = _as_buffer(source, "async_descriptor_store's source")
    _check_tile(d, b, "async_descriptor_store")
    if unwrap(store_reduce):
        # sm_90 has the instruction (cp.reduce.async.bulk.tensor, PTX ISA 8.0); the real TLX runs it on
        # Blackwell only, and tlx does not lower it yet
        raise TLXCompileError(f"store_reduce={unwrap(store_reduce)!r} (a TMA reduce into global memory) is not "
                              "supported by tlx yet",
                              hint="store the tile with a plain async_descriptor_store, or combine it in global "
                                   "memory with tl.atomic_add / tl.atomic_min / tl.atomic_max")
    attrs = semantic._check_mod("", eviction_policy)
    semantic.emit("tlx.tma_store", [d.handle, b.handle, _offsets(offsets, len(d.block_shape), "async_descriptor_store")], [], attrs)


@builtin
def async_descriptor_store_wait(pendings: Any) -> None:
    """Wait until at most `pendings` bulk store groups still read shared memory."""
    semantic.emit("tlx.tma_store_wait", [], [], {"pendings": semantic.constexpr_int(pendings, "pendings")})


@builtin
def async_store(dst: Any, src: Any, size: Any) -> None:
    """1-D bulk copy of `size` bytes (a multiple of 16) from shared memory to global memory."""
    p = semantic.to_tensor(unwrap(dst))
    if not p.dtype.is_ptr() or p.shape:
        raise TLXCompileError("async_store needs a scalar pointer destination")
    b = _as_buffer(src, "async_store's source")
    s = unwrap(size)
    if isinstance(s, int) and (s % 16 or s <= 0 or s > b.mtype.nbytes):
        raise TLXCompileError(f"async_store size {s} must be a positive multiple of 16 within the buffer ({b.mtype.nbytes} B)")
    semantic.emit("tlx.async_store", [p.handle, b.handle, semantic.index_i32(s, "async_store size")], [])


@builtin
def async_descriptor_prefetch_tensor(desc: Any, offsets: Any, pred: Any = None, eviction_policy: Any = "") -> None:
    """Prefetch a tile into L2."""
    d = _desc(desc)
    semantic.emit("tlx.tma_prefetch", [d.handle, _offsets(offsets, len(d.block_shape), "prefetch")], [])


@builtin
def prefetch(pointer: Any, level: Any = "L2", mask: Any = None, tensormap: Any = False) -> None:
    """A prefetch hint: every pointer of `pointer` (where `mask` holds) into L2 (`level="L2"`) or
    L1 and L2 (`"L1"`); with `tensormap=True`, `pointer` is a tensor descriptor and its 128-byte
    tensormap is prefetched for the TMA copies that follow (level and mask do not apply)."""
    if unwrap(tensormap):
        d = _desc(pointer)
        semantic.emit("tlx.prefetch_tensormap", [d.handle], [])
        return
    lv = unwrap(level)
    if lv not in ("L1", "L2"):
        raise TLXValueError(f"prefetch level must be 'L1' or 'L2', got {lv!r}")
    p = semantic.to_tensor(unwrap(pointer))
    if not p.dtype.is_ptr():
        raise TLXTypeError(f"prefetch needs a pointer or a block of pointers, got {p.type}",
                           hint="pass tensormap=True to prefetch a tensor descriptor")
    m = unwrap(mask)
    if m is not None:
        m = semantic.cast(semantic.to_tensor(m), core.int1)
        if m.shape != p.shape:
            if not p.shape:
                raise TLXValueError(f"prefetch of one pointer with a {list(m.shape)} mask")
            m = semantic.broadcast_to(m, p.shape)
    semantic.emit("tlx.prefetch", [p.handle, m.handle if m is not None else None], [], {"level": lv})


@builtin
def make_tensor_descriptor(desc_ptr: Any, base: Any, shape: Any, strides: Any, block_shape: Any,
                           padding_option: Any = "zero") -> tensor_descriptor:
    """A TMA descriptor built on the device (TLX's form). `desc_ptr=None`: tlx keeps it in the
    program's scratch; a slot of `tlx.allocate_tensor_descriptor` (or the array: its slot 0): it is
    written there, for `tlx.reinterpret_tensor_descriptor` to read back. Either way the returned
    descriptor is usable at once (the write is published to the tensormap proxy)."""
    slot = None
    if unwrap(desc_ptr) is not None:
        slot = semantic.as_desc_slot(desc_ptr, "make_tensor_descriptor")
    return semantic.make_tensor_descriptor(base, shape, strides, block_shape, padding_option, slot)


@builtin
def allocate_tensor_descriptor(num: Any) -> tensor_descriptor_ptr:
    """`num` TMA descriptor slots (128 bytes, 128-byte aligned each) in the program's global
    scratch (`tlx.set_allocator` provides it); `ptrs[i]` is slot i."""
    return semantic.allocate_tensor_descriptor(num)


@builtin
def reinterpret_tensor_descriptor(desc_ptr: Any, block_shape: Any, dtype: Any) -> tensor_descriptor:
    """The descriptor a slot holds (written by `make_tensor_descriptor(desc_ptr=slot)`), as a
    descriptor of `block_shape` tiles of `dtype` for TMA loads and stores. Its TMA ops first acquire
    the slot for the tensormap proxy."""
    return semantic.reinterpret_tensor_descriptor(desc_ptr, block_shape, dtype)


@builtin
def update_tensor_descriptor(desc: Any, add_offsets: Any = None, set_bounds: Any = None, pred: Any = None,
                             clamp_bounds: Any = False) -> tensor_descriptor:
    """TLX's in-place update of an AMD TDM descriptor (gfx1250): no Hopper TMA counterpart, so it
    is rejected with the Hopper way to get the same effect."""
    raise TLXCompileError("tlx.update_tensor_descriptor edits AMD TDM descriptors (gfx1250 targets); "
                          "tlx compiles for sm_90a, whose TMA descriptors it cannot update",
                          hint="offset the TMA coordinates instead, or write a new descriptor into the slot with "
                               "tlx.make_tensor_descriptor(desc_ptr=slot, ...)")

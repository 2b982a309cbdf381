"""Storage aliasing: buffers that share shared-memory bytes by design (TLX's
`tlx.storage_alias_spec`, `local_alloc(..., reuse=spec)`, `spec.set_buffer_overlap(reuse_group)`).

A spec is one byte allocation (`tlx.local_alloc {storage_alias}` of i8), emitted where the spec
is made. Each `local_alloc(..., reuse=spec)` is a `tlx.local_alias` of it, a view whose
attributes place its buffers in those bytes (`compiler/ir/alias.py`). The spec's size and the
placements follow TLX's rules:

* without `set_buffer_overlap`, every member starts at byte 0 with its buffers back to back, and
  the spec is as large as its largest member;
* `set_buffer_overlap(tree)` lays the members out by buffer group: group g (one buffer of each
  member, or `group_size` consecutive ones inside a `reuse_group(..., group_size=k)`) occupies
  bytes [g * B, (g + 1) * B). Inside a group, the children of a `shared` node start at the same
  byte (the node is as large as its largest child), the children of a `distinct` node follow
  one another (as large as their sum); a node with `group_size = k` holds k consecutive copies
  of its layout. Every node starts at a multiple of its alignment (128 bytes — what TMA needs —,
  or more for a swizzled tile), and B is the root's size rounded up to it.
* a sized spec (`buffer_size_bytes`) must hold what its members need; its members must agree on
  the number of buffer groups. Anything else is a `TLXCompileError` at the kernel line that made it.

Tensor memory (`storage_kind.tmem`) exists only on Blackwell (sm_100): a spec of it is a
`TLXCompileError` on sm_90a.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from tlx.compiler.errors import TLXCompileError, TLXTypeError, TLXValueError
from tlx.compiler.fences import loc_text
from tlx.compiler.ir import layouts as L
from tlx.compiler.ir import types as T
from tlx.compiler.ir.alias import placement, placement_attrs
from tlx.compiler.ir.core import Operation
from tlx.compiler.passes.smem_allocation import alignment_of

from .language import semantic
from .language.core import buffered_tensor, builtin, unwrap

TMA_ALIGN = 128  # what TLX aligns every aliased buffer to (a TMA tile's base)


class storage_kind(enum.Enum):
    """Where a buffer lives: shared memory (Hopper), tensor memory (Blackwell only)."""

    smem = "smem"
    tmem = "tmem"
    smemCluster = "smemCluster"


class reuse_group_type(enum.Enum):
    """How the children of a `reuse_group` relate: `shared` ones occupy the same bytes of each
    buffer group (the kernel orders their uses with barriers), `distinct` ones lie side by side."""

    shared = "shared"
    distinct = "distinct"


def _check_storage(storage: Any) -> "storage_kind":
    storage = unwrap(storage)
    if not isinstance(storage, storage_kind):
        raise TLXValueError(f"storage must be a tlx.storage_kind, got {type(storage).__name__}")
    if storage is storage_kind.smemCluster:
        raise TLXValueError("smemCluster storage is not supported for storage_alias_spec",
                            hint="use storage_kind.smem")
    return storage


@dataclass(frozen=True)
class storage_alias_spec_type:
    """The type of a storage alias spec: its storage kind and its size, when the kernel fixed one."""

    storage: storage_kind
    buffer_size_bytes: Optional[int] = None

    def _size_text(self, sep: str) -> str:
        return f"{sep}{self.buffer_size_bytes}" if self.buffer_size_bytes else ""

    def __repr__(self) -> str:
        return f"storage_alias_spec_type(storage={self.storage.value}{self._size_text(', size=')})"

    def mangle(self) -> str:
        """The name fragment this type adds to a specialization's mangled name."""
        return f"storage_alias_spec_{self.storage.value}{self._size_text('_')}"


class reuse_group:
    """A node of a buffer-overlap tree: `buffered_tensor`s (from `local_alloc(..., reuse=spec)`)
    and nested groups, `shared` or `distinct`, with `group_size` consecutive buffers of each
    member forming one logical buffer (subtiling)."""

    __tlx_builtin__ = True  # built inside kernels from traced buffers

    def __init__(self, *args: Any, group_type: Any = reuse_group_type.shared, group_size: Any = 1):
        if not args:
            raise TLXValueError("reuse_group requires at least one element")
        group_size = unwrap(group_size)
        if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1:
            raise TLXValueError(f"group_size must be a positive integer, got {group_size!r}")
        group_type = unwrap(group_type)
        if not isinstance(group_type, reuse_group_type):
            raise TLXTypeError(f"group_type must be a tlx.reuse_group_type, got {group_type!r}")
        args = tuple(unwrap(a) for a in args)
        for a in args:
            if not isinstance(a, (reuse_group, buffered_tensor)):
                raise TLXTypeError(f"reuse_group elements must be buffered_tensor or reuse_group, got {type(a).__name__}")
        self._args = args
        self._group_type = group_type
        self._group_size = group_size

    @property
    def args(self) -> Tuple[Any, ...]:
        return self._args

    @property
    def group_type(self) -> reuse_group_type:
        return self._group_type

    @property
    def group_size(self) -> int:
        return self._group_size

    def __repr__(self) -> str:
        size = f", group_size={self._group_size}" if self._group_size != 1 else ""
        return f"reuse_group({self._args}, group_type={self._group_type.value}{size})"


class storage_alias_spec_type_class:
    """A storage alias spec: bytes that several `local_alloc(..., reuse=spec)` share, laid out by
    `set_buffer_overlap` (see the module docstring). Kernels make one with
    `tlx.storage_alias_spec(...)`; its storage and size never change."""

    __slots__ = ("_handle", "_type", "_members", "_overlap_set")

    def __init__(self, handle: Any, storage: Any, buffer_size_bytes: Optional[int] = None):
        object.__setattr__(self, "_handle", handle)
        # the storage and size live in the type (one copy): the properties below read them there
        object.__setattr__(self, "_type", storage_alias_spec_type(_check_storage(storage), buffer_size_bytes))
        object.__setattr__(self, "_members", [])  # the tlx.local_alias ops of its allocations
        object.__setattr__(self, "_overlap_set", False)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"storage_alias_spec is immutable: cannot set {name}")

    @property
    def handle(self) -> Any:
        """The IR value of the spec's bytes (None outside a kernel)."""
        return self._handle

    @property
    def storage(self) -> storage_kind:
        return self._type.storage

    @property
    def buffer_size_bytes(self) -> Optional[int]:
        return self._type.buffer_size_bytes

    @property
    def type(self) -> storage_alias_spec_type:
        return self._type

    def __repr__(self) -> str:
        return f"storage_alias_spec(storage={self.storage.value}{self._type._size_text(', size=')})"

    # -- inside a kernel -------------------------------------------------------------------------

    def _alloc(self, t: T.MemDescType, dt: Any) -> buffered_tensor:
        """`local_alloc(..., reuse=self)` of buffers of type `t`: a `tlx.local_alias` of the spec's bytes,
        at byte 0 with its buffers back to back until `set_buffer_overlap` places it."""
        if self._handle is None:
            raise TLXCompileError("this storage_alias_spec has no storage behind it (it was built outside a kernel)",
                                  hint="make the spec inside the kernel with tlx.storage_alias_spec(...)")
        if self._overlap_set:
            raise TLXCompileError("local_alloc(reuse=spec) after spec.set_buffer_overlap(...): the overlap "
                                  "scheme must name every allocation of the spec",
                                  hint="allocate every buffer of the spec before calling set_buffer_overlap")
        op = semantic.emit("tlx.local_alias", [self._handle], [t], placement_attrs(0, [t.nbytes // t.buffers]))
        self._members.append(op)
        self._resize()
        return buffered_tensor(op.result, dt)

    @builtin
    def set_buffer_overlap(self, overlap_def: Any) -> None:
        """Lay the spec's allocations out as the `reuse_group` tree `overlap_def` says (see the
        module docstring); call it once, after allocating every buffer of the spec. An
        allocation the tree leaves out stays at byte 0, its buffers back to back."""
        overlap_def = unwrap(overlap_def)
        if not isinstance(overlap_def, reuse_group):
            raise TLXTypeError(f"overlap_def must be a reuse_group, got {type(overlap_def).__name__}")
        if self._overlap_set:
            raise TLXCompileError("storage_alias_spec already has a set_buffer_overlap defined; each spec can only "
                                  "have one overlap definition")
        if self._handle is None:
            raise TLXCompileError("set_buffer_overlap needs a spec made inside the kernel")
        leaves: List[Operation] = []
        _collect_leaves(overlap_def, self, leaves)
        groups = _buffer_groups(overlap_def, 1)
        counts = {op.result.type.buffers // g for op, g in groups}  # buffer groups per leaf
        if len(counts) > 1:
            detail = ", ".join(f"{_name(op)}: {op.result.type.buffers} buffers / group size {g}" for op, g in groups)
            raise TLXCompileError(f"the allocations of a reuse_group tree must have the same number of buffer groups "
                                  f"(buffers divided by the group sizes around them); got {detail}",
                                  hint="give every member the same number of buffers, or wrap the one with more in "
                                       "tlx.reuse_group(buf, group_size=k)")
        n_groups = next(iter(counts))
        align = _align(overlap_def)
        size = _size(overlap_def)
        stride = _up(size, align)
        placements: Dict[int, dict] = {}
        _place(overlap_def, 0, (stride,), (), placements)
        object.__setattr__(self, "_overlap_set", True)
        for op in self._members:
            if id(op) in placements:
                op.attrs.update(placements[id(op)])
        self._resize(n_groups * stride)

    def _resize(self, min_size: int = 0) -> None:
        """Give the spec's bytes the size (and alignment) its members need, and at least `min_size`
        (the bytes set_buffer_overlap's buffer groups span), checking a fixed size."""
        need = min_size
        align = TMA_ALIGN
        for op in self._members:
            t = op.result.type
            p = placement(op.attrs)
            one = t.nbytes // t.buffers
            need = max(need, max(p.slab_offset(i) for i in range(t.buffers)) + one)
            align = max(align, alignment_of(op))
        size = need
        if self.buffer_size_bytes is not None:
            if need > self.buffer_size_bytes:
                raise TLXCompileError(f"storage_alias_spec buffer_size_bytes {self.buffer_size_bytes} is too small: "
                                      f"its allocations need {need} bytes",
                                      hint=f"raise buffer_size_bytes to at least {need}, or omit it")
            size = self.buffer_size_bytes
        self._handle.owner.attrs["alignment"] = align
        self._handle.type = _bytes_type(max(size, 1))


def _bytes_type(n: int) -> T.MemDescType:
    return T.MemDescType((n,), T.i8, L.SwizzledSharedLayout(1, 1, 1, (0,)), 0, True)


def _name(op: Operation) -> str:
    return f"local_alloc at {loc_text(op.loc)} ({op.result.type.buffers}x" + \
        "x".join(str(d) for d in op.result.type.buffer_shape) + f"x{op.result.type.element})"


def _collect_leaves(node: reuse_group, spec: storage_alias_spec_type_class, out: List[Operation]) -> None:
    for a in node.args:
        if isinstance(a, reuse_group):
            _collect_leaves(a, spec, out)
            continue
        op = getattr(a.handle, "owner", None)
        if not isinstance(op, Operation) or op.name != "tlx.local_alias" or not any(op is m for m in spec._members):
            raise TLXCompileError("every buffer of a set_buffer_overlap tree must be a whole allocation made with "
                                  "local_alloc(..., reuse=this spec)",
                                  hint="pass the buffer array local_alloc returned (not a view of one buffer)")
        if any(op is o for o in out):
            raise TLXCompileError(f"{_name(op)} appears twice in the set_buffer_overlap tree")
        out.append(op)


def _buffer_groups(node: reuse_group, g: int) -> List[Tuple[Operation, int]]:
    """Every leaf with the product of the group sizes around it (its own group included)."""
    g *= node.group_size
    out: List[Tuple[Operation, int]] = []
    for a in node.args:
        if isinstance(a, reuse_group):
            out.extend(_buffer_groups(a, g))
        else:
            op = a.handle.owner
            if op.result.type.buffers % g:
                raise TLXCompileError(f"{_name(op)} has {op.result.type.buffers} buffers, not a multiple of its "
                                      f"group size {g}")
            out.append((op, g))
    return out


def _leaf_align(op: Operation) -> int:
    return max(TMA_ALIGN, alignment_of(op), op.result.type.element.bytes)


def _align(node: Any) -> int:
    """The byte alignment a node starts at: the largest of its leaves'."""
    if isinstance(node, reuse_group):
        return max(_align(a) for a in node.args)
    return _leaf_align(node.handle.owner)


def _up(x: int, a: int) -> int:
    return -(-x // a) * a


def _copy_size(node: reuse_group) -> int:
    """Bytes one copy of a group's layout spans (before `group_size` copies)."""
    if node.group_type is reuse_group_type.shared:
        return max(_size(a) for a in node.args)
    end = 0
    for a in node.args:
        end = _up(end, _align(a)) + _size(a)
    return end


def _size(node: Any) -> int:
    """Bytes a node spans inside one buffer group."""
    if not isinstance(node, reuse_group):
        t = node.handle.owner.result.type
        return t.nbytes // t.buffers
    if node.group_size == 1:
        return _copy_size(node)
    return node.group_size * _up(_copy_size(node), _align(node))


def _place(node: Any, base: int, strides: Tuple[int, ...], radices: Tuple[int, ...], out: Dict[int, dict]) -> None:
    """Record the placement of every leaf under `node`, which starts at byte `base` of its
    buffer group; `strides` / `radices` are the digits of the enclosing group sizes."""
    if not isinstance(node, reuse_group):
        out[id(node.handle.owner)] = placement_attrs(base, strides, radices)
        return
    if node.group_size > 1:
        strides = strides + (_up(_copy_size(node), _align(node)),)
        radices = radices + (node.group_size,)
    if node.group_type is reuse_group_type.shared:
        for a in node.args:
            _place(a, base, strides, radices, out)
        return
    off = base
    for a in node.args:
        off = _up(off, _align(a))
        _place(a, off, strides, radices, out)
        off += _size(a)


@builtin
def storage_alias_spec(storage: Any = storage_kind.smem, buffer_size_bytes: Any = None) -> storage_alias_spec_type_class:
    """Bytes that several `tlx.local_alloc(..., reuse=spec)` share; `buffer_size_bytes` (a
    compile-time constant) fixes their size, else it is what the allocations need."""
    storage = _check_storage(storage)
    if storage is storage_kind.tmem:
        raise TLXCompileError("a storage_alias_spec of tensor memory (storage_kind.tmem) needs Blackwell (sm_100); "
                              "tlx targets Hopper (sm_90a), which has no tensor memory",
                              hint="alias shared memory: tlx.storage_alias_spec(storage=tlx.storage_kind.smem)")
    size = unwrap(buffer_size_bytes)
    if size is not None:
        size = semantic.constexpr_int(size, "storage_alias_spec's buffer_size_bytes",
                                      hint="pass the size as a literal or a tl.constexpr")
        if size <= 0:
            raise TLXValueError(f"buffer_size_bytes must be positive, got {size}")
    op = semantic.emit("tlx.local_alloc", [None], [_bytes_type(max(size or 1, 1))], {"storage_alias": True})
    op.attrs["alignment"] = TMA_ALIGN
    return storage_alias_spec_type_class(op.result, storage, size)

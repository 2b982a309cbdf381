"""The op catalogue: every op name the IR knows, with its operand groups, result count, regions,
traits, shared-memory effects and type rules (the per-op part of the verifier).

Operand groups have a kind: ``one`` (exactly one operand), ``opt`` (zero or one) or ``var`` (any
number). An op is built from one entry per group, in order (a value, a value or None, a list).

Traits used by the passes:

* ``pure``        no memory or side effects; free to skip over, move or delete when unused
* ``terminator``  ends a block
* ``view``        a shared-memory view of operand ``src`` (no data moves)
* ``loop``        a loop (``scf.for``, ``scf.while``)
* ``fence``       a proxy fence (``tlx.fence_async_shared``)
* ``isolated``    regions that cannot use values from outside (the function; ws partitions)

Shared-memory effects (`Effect`) say which operand an op reads or writes and through which proxy
(``generic``: ordinary shared loads/stores and cp.async; ``async``: TMA, bulk copies, wgmma;
``barrier``: mbarrier traffic, which never needs a proxy fence).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ..errors import IRVerifyError
from . import layouts as L
from . import types as T
from .alias import placement
from .core import Operation, OperandSpec, Value


@dataclass(frozen=True)
class Effect:
    """A shared-memory access by an op: `target` names an operand group or 'result'."""

    target: str
    access: str  # 'read' | 'write'
    proxy: str  # 'generic' | 'async' | 'barrier'


@dataclass
class OpDef:
    """What an op name means."""

    name: str
    groups: Tuple[Tuple[str, str], ...] = ()
    results: Optional[int] = 1  # exact result count; None = any number
    regions: Optional[int] = 0  # None: any number
    traits: FrozenSet[str] = frozenset()
    effects: Tuple[Effect, ...] = ()
    verify: Optional[Callable[[Operation], None]] = None
    summary: str = ""
    group_names: Tuple[str, ...] = field(init=False)
    group_index: Dict[str, int] = field(init=False)  # group name -> its position

    def __post_init__(self) -> None:
        self.group_names = tuple(g for g, _ in self.groups)
        self.group_index = {g: i for i, g in enumerate(self.group_names)}

    def _normalize(self, name: str, operands: Sequence[OperandSpec]) -> List[OperandSpec]:
        ops = list(operands)
        kinds = [k for _, k in self.groups]
        if len(ops) != len(kinds):
            # convenience: an op whose only group is variadic takes a flat list of values
            if len(kinds) == 1 and kinds[0] == "var" and all(isinstance(v, Value) for v in ops):
                return [ops]
            raise IRVerifyError(f"{name}: expected {len(kinds)} operand groups {list(self.group_names)}, got {len(ops)}")
        return ops

    def split(self, name: str, operands: Sequence[OperandSpec]) -> Tuple[Tuple[int, ...], List[OperandSpec]]:
        """The size of each operand group, checked against the group's kind (one / optional /
        variadic), and the operands flat, in one pass (every op built pays for this)."""
        if not operands and not self.groups:
            return (), []  # fences, barriers, waits: nothing to check
        sizes: List[int] = []
        flat: List[OperandSpec] = []
        for (g, kind), v in zip(self.groups, self._normalize(name, operands)):
            if kind == "one":
                if not isinstance(v, Value):
                    raise IRVerifyError(f"{name}: operand group '{g}' needs exactly one value")
                sizes.append(1)
                flat.append(v)
            elif kind == "opt":
                if v is None:
                    sizes.append(0)
                    continue
                if not isinstance(v, Value):
                    raise IRVerifyError(f"{name}: operand group '{g}' takes a value or None")
                sizes.append(1)
                flat.append(v)
            else:
                if isinstance(v, Value) or v is None:
                    raise IRVerifyError(f"{name}: operand group '{g}' takes a list of values")
                sizes.append(len(v))
                flat.extend(v)
        return tuple(sizes), flat


OPS: Dict[str, OpDef] = {}


def get_opdef(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise IRVerifyError(f"unknown op '{name}'") from None


def _def(name: str, groups: Sequence[Tuple[str, str]] = (), results: Optional[int] = 1, regions: Optional[int] = 0,
         traits: Sequence[str] = (), effects: Sequence[Effect] = (), verify=None, summary: str = "") -> OpDef:
    d = OpDef(name, tuple(groups), results, regions, frozenset(traits), tuple(effects), verify, summary)
    OPS[name] = d
    return d


# ---------------------------------------------------------------------------------------------
# verification helpers
# ---------------------------------------------------------------------------------------------

def fail(op: Operation, msg: str) -> None:
    raise IRVerifyError(f"{op.name} at {op.loc}: {msg}")


def need(op: Operation, cond: bool, msg: str) -> None:
    if not cond:
        fail(op, msg)


def _elem(t: T.Type) -> Optional[T.ElementType]:
    return T.element_of(t)


def _same_shape(a: T.Type, b: T.Type) -> bool:
    return T.shape_of(a) == T.shape_of(b) and isinstance(a, T.TensorType) == isinstance(b, T.TensorType)


def _v_elementwise(kind: str):
    """Operands and result share one type, of integer (`kind` 'int') or computable float ('float') elements."""
    def v(op: Operation) -> None:
        a = op.operands[0]
        for b in op.operands[1:]:
            need(op, a.type == b.type, f"operand types differ: {a.type} vs {b.type}")
        need(op, op.result.type == a.type, f"result type {op.result.type} != operand type {a.type}")
        e = _elem(a.type)
        ok = isinstance(e, T.ScalarType) and (e.is_int if kind == "int" else e.is_float and not e.storage_only)
        need(op, ok, f"needs {'integer' if kind == 'int' else 'float'} operands, got {a.type}")
    return v


def _v_ternary_float(op: Operation) -> None:
    a, b, c = op.operands
    need(op, a.type == b.type == c.type == op.result.type, "fma operands and result must share one float type")


CMPI_PREDS = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
CMPF_PREDS = ("oeq", "one", "olt", "ole", "ogt", "oge", "ueq", "une", "ult", "ule", "ugt", "uge", "ord", "uno")


def _v_cmp(preds, kind):
    def v(op: Operation) -> None:
        a, b = op.operands
        need(op, a.type == b.type, f"operand types differ: {a.type} vs {b.type}")
        need(op, op.attrs.get("predicate") in preds, f"predicate must be one of {preds}")
        rt = op.result.type
        need(op, _elem(rt) == T.i1 and _same_shape(rt, a.type), f"result must be i1 of the operand shape, got {rt}")
        e = _elem(a.type)
        if kind == "float":
            need(op, isinstance(e, T.ScalarType) and e.is_float, "cmpf needs float operands")
        else:
            need(op, isinstance(e, (T.ScalarType, T.PointerType)) and (isinstance(e, T.PointerType) or e.is_int),
                 "cmpi needs integer or pointer operands")
    return v


def _v_select(op: Operation) -> None:
    c, a, b = op.operands
    need(op, a.type == b.type == op.result.type, f"select arms and result must match: {a.type}, {b.type}, {op.result.type}")
    need(op, _elem(c.type) == T.i1, f"condition must be i1, got {c.type}")
    need(op, isinstance(c.type, T.ScalarType) or _same_shape(c.type, a.type), "condition shape must match the arms")


def _v_cast(src_ok: Callable[[T.ScalarType], bool], dst_ok: Callable[[T.ScalarType], bool], rel: str = ""):
    def v(op: Operation) -> None:
        (a,) = op.operands
        se, de = _elem(a.type), _elem(op.result.type)
        need(op, _same_shape(a.type, op.result.type), "cast keeps the shape")
        need(op, isinstance(se, T.ScalarType) and src_ok(se), f"bad source type {a.type}")
        need(op, isinstance(de, T.ScalarType) and dst_ok(de), f"bad result type {op.result.type}")
        if rel == "wider":
            need(op, de.bits > se.bits, "extension must widen")
        elif rel == "narrower":
            need(op, de.bits < se.bits, "truncation must narrow")
    return v


def _v_bitcast(op: Operation) -> None:
    (a,) = op.operands
    need(op, _same_shape(a.type, op.result.type), "bitcast keeps the shape")
    se, de = _elem(a.type), _elem(op.result.type)
    sb = 64 if isinstance(se, T.PointerType) else se.bits  # type: ignore[union-attr]
    db = 64 if isinstance(de, T.PointerType) else de.bits  # type: ignore[union-attr]
    need(op, sb == db, f"bitcast needs equal widths, got {a.type} -> {op.result.type}")


def _v_constant(op: Operation) -> None:
    need(op, "value" in op.attrs, "needs a 'value' attribute")
    v = op.attrs["value"]
    e = _elem(op.result.type)
    need(op, isinstance(e, T.ScalarType), f"constant of type {op.result.type}")
    need(op, isinstance(v, (int, float, bool)), "value must be a number")
    if isinstance(e, T.ScalarType) and e.is_int:
        need(op, isinstance(v, (int, bool)), "an integer constant needs an integer value")


def _v_program_id(op: Operation) -> None:
    need(op, op.attrs.get("axis") in (0, 1, 2), "axis must be 0, 1 or 2")
    need(op, op.result.type == T.i32, "result is i32")


def _v_make_range(op: Operation) -> None:
    s, e = op.attrs.get("start"), op.attrs.get("end")
    need(op, isinstance(s, int) and isinstance(e, int) and e > s, "needs start < end")
    rt = op.result.type
    need(op, isinstance(rt, T.TensorType) and rt.shape == (e - s,) and rt.element == T.i32,
         f"result must be tensor<{e - s}xi32>, got {rt}")


def _v_splat(op: Operation) -> None:
    (a,) = op.operands
    rt = op.result.type
    need(op, T.is_scalar_like(a.type), f"splat source must be a scalar, got {a.type}")
    need(op, isinstance(rt, T.TensorType) and rt.element == a.type, f"result must be a tensor of {a.type}")


def _v_broadcast(op: Operation) -> None:
    (a,) = op.operands
    rt = op.result.type
    need(op, isinstance(a.type, T.TensorType) and isinstance(rt, T.TensorType), "broadcast takes and gives tensors")
    need(op, a.type.element == rt.element and a.type.rank == rt.rank, "broadcast keeps element type and rank")
    for s, d in zip(a.type.shape, rt.shape):
        need(op, s == d or s == 1, f"cannot broadcast {a.type.shape} to {rt.shape}")


def _v_expand_dims(op: Operation) -> None:
    (a,) = op.operands
    rt, ax = op.result.type, op.attrs.get("axis")
    need(op, isinstance(a.type, T.TensorType) and isinstance(rt, T.TensorType), "expand_dims takes and gives tensors")
    exp = list(a.type.shape)
    need(op, isinstance(ax, int) and 0 <= ax <= len(exp), "axis out of range")
    exp.insert(ax, 1)
    need(op, rt.shape == tuple(exp) and rt.element == a.type.element, f"result shape must be {tuple(exp)}")


def _v_reshape(op: Operation) -> None:
    (a,) = op.operands
    rt = op.result.type
    need(op, isinstance(a.type, T.TensorType) and isinstance(rt, T.TensorType), "reshape takes and gives tensors")
    need(op, a.type.numel == rt.numel and a.type.element == rt.element, "reshape keeps the element count and type")


def _v_trans(op: Operation) -> None:
    (a,) = op.operands
    rt, order = op.result.type, op.attrs.get("order")
    need(op, isinstance(a.type, T.TensorType) and isinstance(rt, T.TensorType), "trans takes and gives tensors")
    need(op, isinstance(order, (list, tuple)) and sorted(order) == list(range(a.type.rank)), "order must permute the dims")
    need(op, rt.shape == tuple(a.type.shape[i] for i in order), "result shape must be the permuted shape")


def _v_join(op: Operation) -> None:
    a, b = op.operands
    rt = op.result.type
    need(op, a.type == b.type and isinstance(a.type, T.TensorType), "join takes two tensors of one type")
    need(op, isinstance(rt, T.TensorType) and rt.shape == a.type.shape + (2,), "join appends a dimension of 2")


def _v_split(op: Operation) -> None:
    (a,) = op.operands
    need(op, isinstance(a.type, T.TensorType) and a.type.shape[-1:] == (2,), "split needs a last dimension of 2")
    for r in op.results:
        need(op, isinstance(r.type, T.TensorType) and r.type.shape == a.type.shape[:-1], "split drops the last dimension")


REDUCE_KINDS = ("sum", "max", "min", "argmax", "argmin", "xor_sum", "and", "or", "prod")


def _v_reduce(op: Operation) -> None:
    (a,) = op.operands
    ax, kind = op.attrs.get("axis"), op.attrs.get("kind")
    need(op, kind in REDUCE_KINDS, f"kind must be one of {REDUCE_KINDS}")
    need(op, isinstance(a.type, T.TensorType), "reduce takes a tensor")
    need(op, isinstance(ax, int) and 0 <= ax < a.type.rank, "axis out of range")
    shape = a.type.shape[:ax] + a.type.shape[ax + 1:]
    rt = op.result.type
    if not shape:
        need(op, isinstance(rt, T.ScalarType), f"a rank-1 reduction gives a scalar, got {rt}")
    else:
        need(op, isinstance(rt, T.TensorType) and rt.shape == shape, f"result shape must be {shape}")
    if kind in ("argmax", "argmin"):
        need(op, _elem(rt) == T.i32, "arg reductions give i32")


def _v_same_as_src(op: Operation) -> None:
    need(op, op.result.type == op.operands[0].type, "result type must equal the source type")


def _v_addptr(op: Operation) -> None:
    p, off = op.operands
    need(op, op.result.type == p.type, "result type must equal the pointer type")
    need(op, isinstance(_elem(p.type), T.PointerType), f"first operand must be a pointer, got {p.type}")
    oe = _elem(off.type)
    need(op, isinstance(oe, T.ScalarType) and oe.is_int, f"offset must be an integer, got {off.type}")
    need(op, T.is_scalar_like(off.type) and T.is_scalar_like(p.type) or _same_shape(p.type, off.type),
         f"pointer and offset shapes differ: {p.type} vs {off.type}")


def _pointee(op: Operation, p: Value) -> T.ScalarType:
    e = _elem(p.type)
    need(op, isinstance(e, T.PointerType), f"expected pointer(s), got {p.type}")
    return e.pointee  # type: ignore[union-attr]


def _v_mask(op: Operation, ref: Value, mask: Optional[Value]) -> None:
    if mask is not None:
        need(op, _elem(mask.type) == T.i1, f"mask must be i1, got {mask.type}")
        need(op, _same_shape(mask.type, ref.type), f"mask shape {T.shape_of(mask.type)} != {T.shape_of(ref.type)}")


def _v_load(op: Operation) -> None:
    p, mask, other = op.arg("ptr"), op.arg("mask"), op.arg("other")
    pe = _pointee(op, p)
    rt = op.result.type
    need(op, _elem(rt) == pe and _same_shape(rt, p.type), f"result must be {pe} of the pointer shape, got {rt}")
    _v_mask(op, p, mask)
    if other is not None:
        need(op, other.type == rt, f"other must have the result type {rt}, got {other.type}")


def _v_store(op: Operation) -> None:
    p, val, mask = op.arg("ptr"), op.arg("value"), op.arg("mask")
    pe = _pointee(op, p)
    need(op, _elem(val.type) == pe and _same_shape(val.type, p.type), f"value must be {pe} of the pointer shape, got {val.type}")
    _v_mask(op, p, mask)


ATOMIC_OPS = ("add", "fadd", "max", "min", "umax", "umin", "and", "or", "xor", "xchg")


def _v_atomic_rmw(op: Operation) -> None:
    p, val, mask = op.arg("ptr"), op.arg("value"), op.arg("mask")
    pe = _pointee(op, p)
    need(op, op.attrs.get("op") in ATOMIC_OPS, f"op must be one of {ATOMIC_OPS}")
    need(op, _elem(val.type) == pe and _same_shape(val.type, p.type), "value must match the pointee type and shape")
    need(op, op.result.type == val.type, "result type must equal the value type")
    _v_mask(op, p, mask)


def _v_atomic_cas(op: Operation) -> None:
    p, cmp, val = op.operands
    pe = _pointee(op, p)
    need(op, cmp.type == val.type == op.result.type and _elem(val.type) == pe, "cas operands must match the pointee")


def _v_dot(op: Operation) -> None:
    a, b, c = op.operands
    need(op, all(isinstance(x.type, T.TensorType) and x.type.rank == 2 for x in (a, b, c)), "dot takes 2-D tensors")
    (m, k), (k2, n) = a.type.shape, b.type.shape
    need(op, k == k2, f"inner dimensions differ: {a.type.shape} @ {b.type.shape}")
    need(op, c.type.shape == (m, n) and op.result.type == c.type, f"accumulator must be {m}x{n}")


def _v_make_desc(op: Operation) -> None:
    base = op.arg("base")
    shape, strides = op.group("shape"), op.group("strides")
    rt = op.result.type
    need(op, isinstance(rt, T.TensorDescType), "result must be a tensor descriptor")
    need(op, isinstance(base.type, T.PointerType) and base.type.pointee == rt.element, "base must point to the descriptor's dtype")
    need(op, len(shape) == len(strides) == rt.rank, "one shape and one stride per dimension")
    slot = op.arg("slot")
    need(op, slot is None or slot.type == T.DescSlotsType(1, False),
         f"the descriptor is written into one slot (!descslot), got {slot.type if slot is not None else None}")


def _v_alloc_desc(op: Operation) -> None:
    n = op.attrs.get("num")
    rt = op.result.type
    need(op, isinstance(n, int) and n >= 1, f"num is a positive integer, got {n!r}")
    need(op, rt == T.DescSlotsType(n, True), f"the result is !descslots<{n}>, got {rt}")


def _v_desc_slot(op: Operation) -> None:
    st, idx = op.arg("slots").type, op.arg("index")
    need(op, isinstance(st, T.DescSlotsType) and st.array, f"indexes a slot array (!descslots<N>), got {st}")
    need(op, idx.type == T.i32, f"the index is an i32 scalar, got {idx.type}")
    need(op, op.result.type == T.DescSlotsType(1, False), "the result is one slot (!descslot)")
    d = idx.defining_op
    if d is not None and d.name == "arith.constant" and isinstance(d.attrs.get("value"), int):
        need(op, 0 <= d.attrs["value"] < st.count,  # type: ignore[union-attr]
             f"slot index {d.attrs['value']} is out of range for {st}")


def _v_reinterpret_desc(op: Operation) -> None:
    need(op, op.arg("slot").type == T.DescSlotsType(1, False), f"reads one slot (!descslot), got {op.arg('slot').type}")
    rt = op.result.type
    need(op, isinstance(rt, T.TensorDescType) and 1 <= rt.rank <= 5, "the result is a tensor descriptor of rank 1..5")


def _desc(op: Operation) -> T.TensorDescType:
    d = op.arg("desc")
    need(op, isinstance(d.type, T.TensorDescType), f"expected a tensor descriptor, got {d.type}")
    return d.type  # type: ignore[return-value]


def _v_offsets(op: Operation, rank: int) -> None:
    offs = op.group("offsets")
    need(op, len(offs) == rank, f"needs {rank} offsets, got {len(offs)}")
    for o in offs:
        need(op, o.type == T.i32, f"offsets are i32 scalars, got {o.type}")


def _v_desc_block(op: Operation, t: T.Type, what: str) -> None:
    """A register-level TMA op: one offset per dimension, and `t` (its `what`) is the descriptor's block."""
    dt = _desc(op)
    _v_offsets(op, dt.rank)
    need(op, isinstance(t, T.TensorType) and t.shape == dt.block_shape and t.element == dt.element,
         f"{what} must be the descriptor's block {dt.block_shape}x{dt.element}, got {t}")


def _v_desc_load(op: Operation) -> None:
    _v_desc_block(op, op.result.type, "result")


def _v_desc_store(op: Operation) -> None:
    _v_desc_block(op, op.arg("value").type, "value")


def _memdesc(op: Operation, v: Value, what: str, remote: Optional[bool] = False) -> T.MemDescType:
    """The buffer type of operand v; `remote`: False (a local buffer, the default), True (a
    tlx.remote_view of another CTA's buffer) or None (either)."""
    need(op, isinstance(v.type, T.MemDescType), f"{what} must be a shared-memory buffer, got {v.type}")
    _check_remote(op, v, what, remote)
    return v.type  # type: ignore[return-value]


def _check_remote(op: Operation, v: Value, what: str, remote: Optional[bool]) -> None:
    if remote is None:
        return
    is_remote = getattr(v.type, "remote", False)
    need(op, is_remote == remote, f"{what} must be a {'remote view (tlx.remote_view)' if remote else 'local buffer'}"
         f" of shared memory, got {v.type}")


def _v_local_alloc(op: Operation) -> None:
    rt = op.result.type
    need(op, isinstance(rt, T.MemDescType), "result must be a shared-memory buffer")
    src = op.arg("src")
    if src is not None:
        need(op, isinstance(src.type, T.TensorType), "source must be a tensor")
        need(op, src.type.shape == rt.shape and src.type.element == rt.element,  # type: ignore[union-attr]
             f"source {src.type} does not fit buffer {rt}")
    need(op, rt.alloc_shape == rt.shape, "an allocation's alloc shape is its shape")  # type: ignore[union-attr]


def _v_memdesc_index(op: Operation) -> None:
    idx = op.arg("index")
    need(op, isinstance(idx.type, T.ScalarType) and idx.type.is_int, f"index must be an integer scalar, got {idx.type}")
    if isinstance(op.arg("src").type, T.BarrierType):  # bars[i]: one mbarrier of an array
        need(op, op.arg("src").type.array, "index an mbarrier array, not a single mbarrier")
        need(op, op.result.type == T.BarrierType(1, False), f"indexing an mbarrier array gives !mbarrier, got {op.result.type}")
        return
    st = _memdesc(op, op.arg("src"), "source")
    rt = op.result.type
    need(op, isinstance(rt, T.MemDescType), "result must be a view")
    exp_shape = st.shape[1:] if len(st.shape) > 1 else (1,)
    need(op, rt.shape == exp_shape and rt.element == st.element, f"view shape must be {exp_shape}, got {rt.shape}")
    need(op, rt.alloc_shape == st.alloc_shape, "a view keeps its allocation's shape")


def _v_subslice(op: Operation) -> None:
    st = _memdesc(op, op.arg("src"), "source")
    rt = op.result.type
    offs = op.attrs.get("static_offsets")
    need(op, isinstance(offs, (list, tuple)) and len(offs) == len(st.shape), "one static offset per dimension")
    ndyn = sum(1 for o in offs if o == -1)
    need(op, ndyn == len(op.group("offsets")), "one operand per dynamic (-1) offset")
    need(op, isinstance(rt, T.MemDescType) and len(rt.shape) == len(st.shape), "a slice keeps the rank")
    for o, s, d in zip(offs, rt.shape, st.shape):
        need(op, s <= d and (o == -1 or o + s <= d), f"slice {rt.shape} at {offs} exceeds {st.shape}")


def _v_memdesc_trans(op: Operation) -> None:
    st = _memdesc(op, op.arg("src"), "source")
    order = op.attrs.get("order")
    rt = op.result.type
    need(op, isinstance(order, (list, tuple)) and sorted(order) == list(range(len(st.shape))), "order must permute dims")
    need(op, isinstance(rt, T.MemDescType) and rt.shape == tuple(st.shape[i] for i in order), "result is the permuted view")


def _v_local_alias(op: Operation) -> None:
    """A `tlx.local_alias` (a `local_alloc(reuse=spec)`): its buffers lie inside the aliased
    bytes, each where its placement says (`compiler/ir/alias.py`)."""
    st = _memdesc(op, op.arg("src"), "aliased storage")
    rt = op.result.type
    need(op, isinstance(rt, T.MemDescType) and rt.buffers > 0, "result must be an array of buffers")
    need(op, all(k in op.attrs for k in ("offset", "strides")), "needs offset and strides attributes")
    p = placement(op.attrs)
    need(op, len(p.strides) == len(p.radices) + 1 and all(r > 0 for r in p.radices) and p.offset >= 0,
         f"placement {p} needs one stride per digit and positive radices")
    one = rt.nbytes // rt.buffers
    last = max(p.slab_offset(i) for i in range(rt.buffers)) + one
    need(op, last <= st.nbytes, f"buffer {rt.buffers - 1} ends at byte {last}, past the {st.nbytes} aliased bytes")


def _v_memdesc_reinterpret(op: Operation) -> None:
    _memdesc(op, op.arg("src"), "source")
    need(op, isinstance(op.result.type, T.MemDescType), "result must be a shared-memory view")


def _v_local_store(op: Operation) -> None:
    dt = _memdesc(op, op.arg("dst"), "destination")
    s = op.arg("src")
    need(op, isinstance(s.type, T.TensorType) and s.type.shape == dt.shape and s.type.element == dt.element,
         f"value {s.type} does not fit buffer {dt}")
    need(op, dt.mutable, "cannot store into an immutable buffer")


def _v_local_load(op: Operation) -> None:
    st = _memdesc(op, op.arg("src"), "source")
    rt = op.result.type
    need(op, isinstance(rt, T.TensorType) and rt.shape == st.shape and rt.element == st.element,
         f"result must be tensor of {st.shape}x{st.element}")
    pinned = op.attrs.get("layout")
    if pinned is not None:  # a register layout the user pinned: the result gets it from the layout pass
        need(op, isinstance(pinned, L.DistributedLayout), f"layout {pinned} is not a register layout")
        need(op, rt.layout is None or rt.layout == pinned, f"the result's layout {rt.layout} is not the pinned {pinned}")


def _v_fence_async_shared(op: Operation) -> None:
    need(op, isinstance(op.attrs.get("cluster", False), bool), "cluster is a bool")
    need(op, op.attrs.get("origin", "user") in FENCE_ORIGINS, f"origin must be one of {FENCE_ORIGINS}")


FENCE_ORIGINS = ("user", "tma_lowering", "fence_insertion", "proxy_fence_insertion")


def _v_fence(op: Operation) -> None:
    need(op, op.attrs.get("scope") in ("gpu", "sys"), "scope must be 'gpu' or 'sys'")


def _v_async_load(op: Operation) -> None:
    src, dst, mask, other = op.arg("src"), op.arg("dst"), op.arg("mask"), op.arg("other")
    dt = _memdesc(op, dst, "destination")
    pe = _pointee(op, src)
    need(op, isinstance(src.type, T.TensorType) and src.type.shape == dt.shape, f"pointer shape must be {dt.shape}")
    need(op, pe == dt.element, f"pointee {pe} != buffer element {dt.element}")
    _v_mask(op, src, mask)
    if other is not None:
        need(op, _elem(other.type) == dt.element, "other must have the buffer's element type")
    need(op, op.result.type == T.token, "result is a token")


def _v_bulk_load(op: Operation) -> None:
    _memdesc(op, op.arg("dst"), "destination")
    need(op, isinstance(op.arg("src").type, T.PointerType), "source is a scalar pointer")
    _barrier(op, op.arg("bar"))
    need(op, isinstance(op.attrs.get("size"), int) and op.attrs["size"] % 16 == 0, "size is a multiple of 16 bytes")


def _v_tokens(op: Operation) -> None:
    for t in op.group("tokens"):
        need(op, t.type == T.token, f"expected tokens, got {t.type}")
    need(op, op.result.type == T.token, "result is a token")


def _v_wait_group(op: Operation) -> None:
    _v_tokens(op)
    _v_pendings(op)


def _barrier(op: Operation, v: Value, remote: Optional[bool] = False) -> T.BarrierType:
    """The mbarrier type of operand v; `remote` as for `_memdesc`."""
    need(op, isinstance(v.type, T.BarrierType), f"expected an mbarrier, got {v.type}")
    _check_remote(op, v, "the mbarrier", remote)
    return v.type  # type: ignore[return-value]


def _v_tma_buffer(op: Operation, group: str, what: str) -> None:
    """A TMA load / store: buffer operand `group` holds the descriptor's block; one offset per dimension."""
    dt = _desc(op)
    buf = _memdesc(op, op.arg(group), what)
    need(op, buf.shape == dt.block_shape and buf.element == dt.element,
         f"buffer {buf.shape}x{buf.element} does not match the descriptor block {dt.block_shape}x{dt.element}")
    _v_offsets(op, dt.rank)


def _v_tma_load(op: Operation) -> None:
    _v_tma_buffer(op, "dst", "destination")
    _one_barrier(op)
    mask = op.arg("mask")
    need(op, (mask is not None) == bool(op.attrs.get("multicast")),
         "a multicast load (multicast = true) has a CTA mask operand, and only it")
    need(op, mask is None or mask.type == T.i32, "the multicast CTA mask is an i32 scalar")


def _v_tma_store(op: Operation) -> None:
    _v_tma_buffer(op, "src", "source")


def _v_pendings(op: Operation) -> None:
    need(op, isinstance(op.attrs.get("pendings"), int) and op.attrs["pendings"] >= 0, "pendings is a constant >= 0")


def _v_bulk_store(op: Operation) -> None:
    _memdesc(op, op.arg("src"), "source")
    need(op, isinstance(op.arg("dst").type, T.PointerType), "destination is a scalar pointer")
    need(op, op.arg("size").type == T.i32, "size is an i32 scalar")


def _v_alloc_barriers(op: Operation) -> None:
    rt = op.result.type
    n, c = op.attrs.get("num"), op.attrs.get("arrive_count")
    need(op, isinstance(n, int) and n > 0 and isinstance(c, int) and c > 0, "num and arrive_count are positive constants")
    need(op, isinstance(rt, T.BarrierType) and rt.array and rt.count == n, f"result must be !mbarriers<{n}>")


def _v_bar_pred(op: Operation) -> None:
    p = op.arg("pred")
    if p is not None:
        need(op, p.type == T.i1, "pred is an i1 scalar")


def _one_barrier(op: Operation, remote: Optional[bool] = False) -> None:
    """Operand `bar` is one mbarrier, not an array (`remote` as for `_memdesc`)."""
    need(op, not _barrier(op, op.arg("bar"), remote).array, "barrier must be one mbarrier (index the array)")


def _v_expect_bytes(op: Operation) -> None:
    _one_barrier(op)
    need(op, isinstance(op.attrs.get("bytes"), int) and op.attrs["bytes"] > 0, "bytes is a positive constant")
    _v_bar_pred(op)


def _v_barrier_wait(op: Operation) -> None:
    _one_barrier(op)
    need(op, op.arg("phase").type in (T.i32, T.i1), "phase is an i32 scalar")
    _v_bar_pred(op)


def _v_barrier_arrive(op: Operation) -> None:
    _one_barrier(op, remote=None)  # a remote arrive signals another CTA's barrier
    need(op, isinstance(op.attrs.get("count", 1), int) and op.attrs.get("count", 1) > 0, "count is a positive constant")
    _v_bar_pred(op)


def _v_named_barrier(op: Operation) -> None:
    i, n = op.attrs.get("id"), op.attrs.get("count")
    need(op, isinstance(i, int) and 0 <= i < 16, "named barrier id is 0..15")
    need(op, isinstance(n, int) and n > 0 and n % 32 == 0, "thread count is a positive multiple of 32")


def _v_async_dot(op: Operation) -> None:
    a, b, acc = op.arg("a"), op.arg("b"), op.arg("acc")
    bt = _memdesc(op, b, "operand B")
    need(op, isinstance(a.type, (T.MemDescType, T.TensorType)), "operand A is a buffer or a register tensor")
    ash = a.type.shape  # type: ignore[union-attr]
    need(op, len(ash) == 2 and len(bt.shape) == 2, "operands are 2-D")
    (m, k), (k2, n) = ash, bt.shape
    need(op, k == k2, f"inner dimensions differ: {ash} @ {bt.shape}")
    rt = op.result.type
    need(op, isinstance(rt, T.TensorType) and rt.shape == (m, n), f"result must be {m}x{n}")
    if acc is not None:
        need(op, acc.type == rt, f"accumulator type {acc.type} != result type {rt}")


def _v_indices(op: Operation, buf: T.MemDescType, what: str) -> T.TensorType:
    """The `indices` of a gather / scatter over `buf` (its `what`): an integer tensor of the
    buffer's rank, within it along every dimension but `axis`."""
    idx, ax = op.arg("indices").type, op.attrs.get("axis")
    need(op, isinstance(idx, T.TensorType) and idx.element.is_int and not idx.element.is_bool,
         f"indices must be an integer tensor, got {idx}")
    need(op, len(idx.shape) == len(buf.shape), f"indices {idx} and {what} {buf} differ in rank")
    need(op, isinstance(ax, int) and 0 <= ax < len(buf.shape), f"axis {ax!r} is not a dimension of {buf}")
    need(op, all(i <= s for d, (i, s) in enumerate(zip(idx.shape, buf.shape)) if d != ax),
         f"indices {idx} exceed the {what} {buf} along a dimension other than the axis")
    return idx  # type: ignore[return-value]


def _v_local_gather(op: Operation) -> None:
    st = _memdesc(op, op.arg("src"), "source")
    idx, rt = _v_indices(op, st, "source"), op.result.type
    need(op, isinstance(rt, T.TensorType) and rt.shape == idx.shape and rt.element == st.element,
         f"result must be tensor of {idx.shape} x {st.element}, got {rt}")
    need(op, rt.layout == idx.layout, "indices and result share one layout")


def _v_local_scatter(op: Operation) -> None:
    dt = _memdesc(op, op.arg("dst"), "destination")
    vals, idx = op.arg("values").type, _v_indices(op, dt, "destination")
    need(op, isinstance(vals, T.TensorType) and vals.shape == idx.shape and vals.element == dt.element,
         f"values must be tensor of {idx.shape} x {dt.element}, got {vals}")
    need(op, vals.layout == idx.layout, "values and indices share one layout")
    need(op, dt.mutable, "cannot scatter into an immutable buffer")


def _v_vote_ballot(op: Operation) -> None:
    p, rt = op.arg("pred").type, op.result.type
    m = op.attrs.get("mask")
    need(op, isinstance(m, int) and 0 <= m <= 0xFFFFFFFF, "mask is a 32-bit constant")
    need(op, T.element_of(p) == T.i1, f"pred must be i1, got {p}")
    need(op, T.element_of(rt) == T.i32 and _same_shape(rt, p), f"result must be i32 of the predicate's shape, got {rt}")


WARP_REDUX_KINDS = ("max", "min", "abs_max", "abs_min")


def _v_warp_redux(op: Operation) -> None:
    (a,) = op.operands
    need(op, op.attrs.get("kind") in WARP_REDUX_KINDS, f"kind must be one of {WARP_REDUX_KINDS}")
    need(op, T.element_of(a.type) == T.f32, f"operand must be f32, got {a.type}")
    need(op, op.result.type == a.type, "the result has the operand's type")


def _v_inline_asm(op: Operation) -> None:
    need(op, isinstance(op.attrs.get("asm"), str), "asm is a string")
    need(op, isinstance(op.attrs.get("constraints"), str), "constraints is a string")
    pack = op.attrs.get("pack")
    need(op, isinstance(pack, int) and pack >= 1, "pack is a positive constant")
    need(op, isinstance(op.attrs.get("pure"), bool), "pure is a bool")
    need(op, len(op.results) >= 1, "inline asm has at least one result")
    shapes = {T.shape_of(v.type) for v in list(op.operands) + list(op.results)}
    need(op, len(shapes) == 1, "arguments and results share one shape")


def _v_prefetch(op: Operation) -> None:
    p, m = op.arg("ptr"), op.arg("mask")
    need(op, isinstance(T.element_of(p.type), T.PointerType), f"prefetch needs pointers, got {p.type}")
    need(op, op.attrs.get("level") in ("L1", "L2"), "level is L1 or L2")
    _v_mask(op, p, m)


def _v_prefetch_tensormap(op: Operation) -> None:
    need(op, isinstance(op.arg("desc").type, T.TensorDescType), "operand must be a tensor descriptor")


def _v_dot_wait(op: Operation) -> None:
    vals = op.group("values")
    need(op, len(vals) == len(op.results), "one result per value")
    for v, r in zip(vals, op.results):
        need(op, v.type == r.type, "results keep the value types")
    _v_pendings(op)


def _v_i32_result(op: Operation) -> None:
    need(op, op.result.type == T.i32, "result is i32")


def _v_for(op: Operation) -> None:
    lb, ub, st = op.arg("lb"), op.arg("ub"), op.arg("step")
    inits = op.group("inits")
    need(op, lb.type == ub.type == st.type and isinstance(lb.type, T.ScalarType) and lb.type.is_int,
         f"bounds and step must share one integer type: {lb.type}, {ub.type}, {st.type}")
    blk = op.regions[0].block
    need(op, len(blk.args) == 1 + len(inits), "body takes the induction variable and one argument per carried value")
    need(op, blk.args[0].type == lb.type, "induction variable has the bounds' type")
    need(op, len(op.results) == len(inits), "one result per carried value")
    for i, (a, v, r) in enumerate(zip(blk.args[1:], inits, op.results)):
        need(op, a.type == v.type == r.type, f"carried value #{i} changes type: {v.type} / {a.type} / {r.type}")
    y = blk.terminator
    need(op, y is not None and y.name == "scf.yield", "body ends with scf.yield")
    yv = y.operands  # type: ignore[union-attr]
    need(op, [v.type for v in yv] == [r.type for r in op.results], "yielded types must equal the carried types")


def _v_if(op: Operation) -> None:
    c = op.arg("cond")
    need(op, c.type == T.i1, f"condition must be an i1 scalar, got {c.type}")
    for r in op.regions:
        y = r.block.terminator
        need(op, y is not None and y.name == "scf.yield", "both branches end with scf.yield")
        need(op, [v.type for v in y.operands] == [x.type for x in op.results],  # type: ignore[union-attr]
             "each branch yields one value per result, of the result's type")
        need(op, not r.block.args, "branches take no arguments")


def _v_while(op: Operation) -> None:
    inits = op.group("inits")
    before, after = op.regions[0].block, op.regions[1].block
    need(op, [a.type for a in before.args] == [v.type for v in inits], "before-region arguments match the inits")
    cond = before.terminator
    need(op, cond is not None and cond.name == "scf.condition", "before region ends with scf.condition")
    cargs = cond.operands[1:]  # type: ignore[union-attr]
    need(op, [a.type for a in after.args] == [v.type for v in cargs], "after-region arguments match the condition's")
    need(op, [r.type for r in op.results] == [v.type for v in cargs], "results match the condition's values")
    y = after.terminator
    need(op, y is not None and y.name == "scf.yield", "after region ends with scf.yield")
    need(op, [v.type for v in y.operands] == [v.type for v in inits], "yielded values match the inits")  # type: ignore[union-attr]


def _v_condition(op: Operation) -> None:
    need(op, op.arg("cond").type == T.i1, "condition is an i1 scalar")


def _v_ws(op: Operation) -> None:
    caps = op.group("captures")
    nparts = len(op.regions) - 1
    nw = op.attrs.get("partition_num_warps", [])
    need(op, isinstance(nw, (list, tuple)) and len(nw) == nparts, "one partition_num_warps entry per partition")
    regs = op.attrs.get("partition_registers", [])
    need(op, len(regs) in (0, nparts), "partition_registers is empty or has one entry per partition")
    d = op.regions[0].block
    need(op, not d.args, "the default region takes no arguments")
    need(op, d.terminator is not None and d.terminator.name == "tlx.ws_yield", "default region ends with tlx.ws_yield")
    for r in op.regions[1:]:
        b = r.block
        need(op, [a.type for a in b.args] == [c.type for c in caps], "each partition takes one argument per capture")
        need(op, b.terminator is not None and b.terminator.name == "tlx.ws_return", "partitions end with tlx.ws_return")


def _v_func(op: Operation) -> None:
    need(op, isinstance(op.attrs.get("sym_name"), str), "needs a sym_name")
    t = op.regions[0].block.terminator
    need(op, t is not None and t.name == "tt.return", "the body ends with tt.return")


def _v_remote_view(op: Operation) -> None:
    src, rank, rt = op.arg("src"), op.arg("rank"), op.result.type
    need(op, rank.type == T.i32, f"the CTA rank is an i32 scalar, got {rank.type}")
    if isinstance(src.type, T.BarrierType):
        b = _barrier(op, src)
        need(op, not b.array, "remote_view of mbarriers needs one mbarrier (index the array)")
        need(op, rt == T.BarrierType(1, False, remote=True), f"result must be !mbarrier<remote>, got {rt}")
        return
    st = _memdesc(op, src, "source")
    need(op, rt == st.replace(remote=True), f"result must be the source's type, remote: {st.replace(remote=True)}")


def _v_remote_store(op: Operation) -> None:
    dt = _memdesc(op, op.arg("dst"), "destination", remote=True)
    need(op, not dt.buffers, "the destination is one buffer (index the array)")
    v = op.arg("src").type
    need(op, isinstance(v, T.TensorType) and v.shape == dt.shape and v.element == dt.element,
         f"value must be tensor<{'x'.join(map(str, dt.shape))}x{dt.element}>, got {v}")
    if op.name == "tlx.async_remote_store":
        _barrier(op, op.arg("bar"), remote=True)
        need(op, dt.element.bits in (32, 64) or dt.element.bits * v.shape[-1] % 32 == 0,  # type: ignore[union-attr]
             "st.async moves 32- or 64-bit words: a narrower element needs a multiple of 4 bytes per row")


def _v_remote_copy(op: Operation) -> None:
    dt = _memdesc(op, op.arg("dst"), "destination", remote=True)
    st = _memdesc(op, op.arg("src"), "source")
    _barrier(op, op.arg("bar"), remote=True)
    need(op, not dt.buffers and not st.buffers, "source and destination are single buffers (index the arrays)")
    need(op, st.nbytes == dt.nbytes, f"source ({st.nbytes} bytes) and destination ({dt.nbytes} bytes) differ in size")
    need(op, st.nbytes % 16 == 0, f"a bulk copy moves a multiple of 16 bytes, got {st.nbytes}")


# ---------------------------------------------------------------------------------------------
# the catalogue
# ---------------------------------------------------------------------------------------------

_def("tt.func", results=0, regions=1, traits=["isolated"], verify=_v_func, summary="the kernel")
_def("tt.return", results=0, traits=["terminator"], summary="end of the kernel")

_def("arith.constant", traits=["pure"], verify=_v_constant, summary="a scalar or splatted tensor constant")

for _n in ("addi", "subi", "muli", "divsi", "divui", "remsi", "remui", "andi", "ori", "xori", "shli", "shrsi",
           "shrui", "maxsi", "maxui", "minsi", "minui"):
    _def(f"arith.{_n}", [("lhs", "one"), ("rhs", "one")], traits=["pure"], verify=_v_elementwise("int"))
for _n in ("addf", "subf", "mulf", "divf", "remf", "maximumf", "minimumf", "maxnumf", "minnumf"):
    _def(f"arith.{_n}", [("lhs", "one"), ("rhs", "one")], traits=["pure"], verify=_v_elementwise("float"))
_def("arith.negf", [("src", "one")], traits=["pure"], verify=_v_elementwise("float"))
for _n in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "absf", "floor", "ceil", "erf", "tanh"):
    _def(f"math.{_n}", [("src", "one")], traits=["pure"], verify=_v_elementwise("float"))
_def("math.absi", [("src", "one")], traits=["pure"], verify=_v_elementwise("int"))
_def("math.fma", [("a", "one"), ("b", "one"), ("c", "one")], traits=["pure"], verify=_v_ternary_float)
_def("arith.cmpi", [("lhs", "one"), ("rhs", "one")], traits=["pure"], verify=_v_cmp(CMPI_PREDS, "int"))
_def("arith.cmpf", [("lhs", "one"), ("rhs", "one")], traits=["pure"], verify=_v_cmp(CMPF_PREDS, "float"))
_def("arith.select", [("cond", "one"), ("true", "one"), ("false", "one")], traits=["pure"], verify=_v_select)

_int = lambda e: e.is_int  # noqa: E731
_flt = lambda e: e.is_float  # noqa: E731
_def("arith.extsi", [("src", "one")], traits=["pure"], verify=_v_cast(_int, _int, "wider"))
_def("arith.extui", [("src", "one")], traits=["pure"], verify=_v_cast(_int, _int, "wider"))
_def("arith.trunci", [("src", "one")], traits=["pure"], verify=_v_cast(_int, _int, "narrower"))
_def("arith.sitofp", [("src", "one")], traits=["pure"], verify=_v_cast(_int, _flt))
_def("arith.uitofp", [("src", "one")], traits=["pure"], verify=_v_cast(_int, _flt))
_def("arith.fptosi", [("src", "one")], traits=["pure"], verify=_v_cast(_flt, _int))
_def("arith.fptoui", [("src", "one")], traits=["pure"], verify=_v_cast(_flt, _int))
_def("arith.extf", [("src", "one")], traits=["pure"], verify=_v_cast(_flt, _flt, "wider"))
_def("arith.truncf", [("src", "one")], traits=["pure"], verify=_v_cast(_flt, _flt, "narrower"))
_def("tt.fp_to_fp", [("src", "one")], traits=["pure"], verify=_v_cast(_flt, _flt), summary="float conversion, fp8 included")
_def("arith.bitcast", [("src", "one")], traits=["pure"], verify=_v_bitcast)
_def("tt.int_to_ptr", [("src", "one")], traits=["pure"], verify=_v_bitcast)
_def("tt.ptr_to_int", [("src", "one")], traits=["pure"], verify=_v_bitcast)

_def("tt.get_program_id", traits=["pure"], verify=_v_program_id)
_def("tt.get_num_programs", traits=["pure"], verify=_v_program_id)
_def("tt.make_range", traits=["pure"], verify=_v_make_range)
_def("tt.splat", [("src", "one")], traits=["pure"], verify=_v_splat)
_def("tt.broadcast", [("src", "one")], traits=["pure"], verify=_v_broadcast)
_def("tt.expand_dims", [("src", "one")], traits=["pure"], verify=_v_expand_dims)
_def("tt.reshape", [("src", "one")], traits=["pure"], verify=_v_reshape)
_def("tt.trans", [("src", "one")], traits=["pure"], verify=_v_trans)
_def("tt.join", [("lhs", "one"), ("rhs", "one")], traits=["pure"], verify=_v_join)
_def("tt.split", [("src", "one")], results=2, traits=["pure"], verify=_v_split)
_def("tt.reduce", [("src", "one")], traits=["pure"], verify=_v_reduce)
_def("tt.hint", [("src", "one")], traits=["pure"], verify=_v_same_as_src,
     summary="divisibility / contiguity hints (tl.multiple_of, tl.max_contiguous)")
_def("tt.convert_layout", [("src", "one")], traits=["pure"], summary="change a tensor's distributed layout")

_def("tt.addptr", [("ptr", "one"), ("offset", "one")], traits=["pure"], verify=_v_addptr)
_def("tt.load", [("ptr", "one"), ("mask", "opt"), ("other", "opt")], verify=_v_load)
_def("tt.store", [("ptr", "one"), ("value", "one"), ("mask", "opt")], results=0, verify=_v_store)
_def("tt.atomic_rmw", [("ptr", "one"), ("value", "one"), ("mask", "opt")], verify=_v_atomic_rmw)
_def("tt.atomic_cas", [("ptr", "one"), ("cmp", "one"), ("value", "one")], verify=_v_atomic_cas)
_def("tt.dot", [("a", "one"), ("b", "one"), ("acc", "one")], traits=["pure"], verify=_v_dot,
     summary="D = A @ B + acc on register operands; LowerDot stages the wgmma ones (tlx.async_dot), the rest "
             "are mma.sync or FMA on registers: no shared-memory access, no async proxy (no effects)")

_def("tt.make_tensor_descriptor", [("base", "one"), ("shape", "var"), ("strides", "var"), ("slot", "opt")],
     verify=_v_make_desc, summary="build a TMA descriptor on the device (in per-program scratch, or into `slot`)")
_def("tlx.allocate_tensor_descriptor", verify=_v_alloc_desc,
     summary="`num` 128-byte descriptor slots in the program's global scratch")
_def("tlx.desc_slot", [("slots", "one"), ("index", "one")], traits=["pure"], verify=_v_desc_slot,
     summary="slot `index` of a descriptor slot array")
_def("tlx.reinterpret_tensor_descriptor", [("slot", "one")], verify=_v_reinterpret_desc,
     summary="the descriptor a slot holds, as a tensor descriptor of the result's block shape and dtype")
_def("tt.descriptor_load", [("desc", "one"), ("offsets", "var")], verify=_v_desc_load,
     summary="register-level TMA load (lowered by TMALowering)")
_def("tt.descriptor_store", [("desc", "one"), ("value", "one"), ("offsets", "var")], results=0, verify=_v_desc_store,
     summary="register-level TMA store (lowered by TMALowering)")

_W_GEN = Effect("result", "write", "generic")
_def("tlx.local_alloc", [("src", "opt")], verify=_v_local_alloc, summary="allocate shared memory (with a source: a generic write)")
_def("tlx.memdesc_index", [("src", "one"), ("index", "one")], traits=["pure", "view"], verify=_v_memdesc_index)
_def("tlx.memdesc_subslice", [("src", "one"), ("offsets", "var")], traits=["pure", "view"], verify=_v_subslice)
_def("tlx.memdesc_trans", [("src", "one")], traits=["pure", "view"], verify=_v_memdesc_trans)
_def("tlx.memdesc_reinterpret", [("src", "one")], traits=["pure", "view"], verify=_v_memdesc_reinterpret)
_def("tlx.local_alias", [("src", "one")], traits=["pure", "view"], verify=_v_local_alias,
     summary="buffers placed inside the bytes of a storage alias spec (`offset`, `strides`, `radices`)")
_def("tlx.local_store", [("dst", "one"), ("src", "one")], results=0,
     effects=[Effect("dst", "write", "generic")], verify=_v_local_store)
_def("tlx.local_load", [("src", "one"), ("token", "opt")],
     effects=[Effect("src", "read", "generic")], verify=_v_local_load)

_def("tlx.local_gather", [("src", "one"), ("indices", "one")], effects=[Effect("src", "read", "generic")],
     verify=_v_local_gather, summary="result[I] = src[I with I[axis] replaced by indices[I]] (ld.shared per element)")
_def("tlx.local_scatter", [("dst", "one"), ("values", "one"), ("indices", "one")], results=0,
     effects=[Effect("dst", "write", "generic")], verify=_v_local_scatter,
     summary="dst[I with I[axis] replaced by indices[I]] = values[I] (st.shared per element)")

_def("tlx.fence_async_shared", results=0, traits=["fence"], verify=_v_fence_async_shared,
     summary="fence.proxy.async.shared::{cta,cluster}: order generic-proxy SMEM accesses before async-proxy ones")
_def("tlx.fence", results=0, verify=_v_fence, summary="fence.acq_rel.{gpu,sys}")

_def("tlx.async_load", [("src", "one"), ("dst", "one"), ("mask", "opt"), ("other", "opt")],
     effects=[Effect("dst", "write", "generic")], verify=_v_async_load, summary="cp.async (generic proxy)")
_def("tlx.async_bulk_load", [("src", "one"), ("dst", "one"), ("bar", "one")], results=0,
     effects=[Effect("dst", "write", "async"), Effect("bar", "write", "barrier")], verify=_v_bulk_load,
     summary="cp.async.bulk global -> shared (async proxy, completes on an mbarrier)")
_def("tlx.async_commit_group", [("tokens", "var")], verify=_v_tokens)
_def("tlx.async_wait_group", [("tokens", "var")], verify=_v_wait_group)

_def("tlx.tma_load", [("desc", "one"), ("dst", "one"), ("bar", "one"), ("offsets", "var"), ("pred", "opt"),
                    ("mask", "opt")],
     results=0, effects=[Effect("dst", "write", "async"), Effect("bar", "write", "barrier")], verify=_v_tma_load)
_def("tlx.tma_store", [("desc", "one"), ("src", "one"), ("offsets", "var")], results=0,
     effects=[Effect("src", "read", "async")], verify=_v_tma_store)
_def("tlx.tma_store_wait", results=0, verify=_v_pendings)
_def("tlx.async_store", [("dst", "one"), ("src", "one"), ("size", "one")], results=0,
     effects=[Effect("src", "read", "async")], verify=_v_bulk_store, summary="cp.async.bulk shared -> global")
_def("tlx.tma_prefetch", [("desc", "one"), ("offsets", "var")], results=0)

_def("tlx.alloc_barriers", verify=_v_alloc_barriers, effects=[Effect("result", "write", "barrier")])
_def("tlx.barrier_expect_bytes", [("bar", "one"), ("pred", "opt")], results=0,
     effects=[Effect("bar", "write", "barrier")], verify=_v_expect_bytes)
_def("tlx.barrier_wait", [("bar", "one"), ("phase", "one"), ("pred", "opt")], results=0,
     effects=[Effect("bar", "read", "barrier")], verify=_v_barrier_wait)
_def("tlx.barrier_arrive", [("bar", "one"), ("pred", "opt")], results=0,
     effects=[Effect("bar", "write", "barrier")], verify=_v_barrier_arrive)
_def("tlx.barrier_inval", [("bar", "one")], results=0, effects=[Effect("bar", "write", "barrier")],
     verify=_one_barrier, summary="mbarrier.inval (leader thread): the barrier's memory may be "
     "initialized again")
_def("tlx.named_barrier_wait", results=0, verify=_v_named_barrier)
_def("tlx.named_barrier_arrive", results=0, verify=_v_named_barrier)
_def("tlx.cta_barrier", results=0, summary="bar.sync of the CTA (or of the enclosing partition)")

_def("tlx.async_dot", [("a", "one"), ("b", "one"), ("acc", "opt")],
     effects=[Effect("a", "read", "async"), Effect("b", "read", "async")], verify=_v_async_dot,
     summary="wgmma.mma_async (one commit group)")
_def("tlx.async_dot_wait", [("values", "var")], results=None, verify=_v_dot_wait, summary="wgmma.wait_group")

_def("tlx.vote_ballot_sync", [("pred", "one")], verify=_v_vote_ballot,
     summary="vote.sync.ballot.b32 per register: bit l of the result is lane l's predicate (lanes in mask)")
_def("tlx.warp_redux", [("src", "one")], verify=_v_warp_redux,
     summary="each element becomes the max / min (of |x|) of its register across the warp's 32 lanes")
_def("tt.elementwise_inline_asm", [("args", "var")], results=None, verify=_v_inline_asm,
     summary="inline PTX applied to `pack` elements per call; opaque to the fence passes")
_def("tlx.prefetch", [("ptr", "one"), ("mask", "opt")], results=0, verify=_v_prefetch,
     summary="prefetch.global.{L1,L2} of every (unmasked) pointer")
_def("tlx.prefetch_tensormap", [("desc", "one")], results=0, verify=_v_prefetch_tensormap,
     summary="prefetch.tensormap: bring a TMA descriptor into the cache")

_def("tlx.thread_id", traits=["pure"], verify=_v_i32_result)
_def("tlx.dump_layout", [("value", "one")], results=0,
     summary="print the resolved layout of a tensor or buffer at compile time (the layout pass erases it)")
_def("tlx.clock64")
_def("tlx.cluster_cta_rank", traits=["pure"], verify=_v_i32_result, summary="%cluster_ctarank")
_def("tlx.cluster_size", traits=["pure"], verify=_v_i32_result, summary="%cluster_nctarank: CTAs in the cluster")
_def("tlx.cluster_barrier", results=0,
     summary="barrier.cluster.arrive + wait: every thread of every CTA of the cluster (release / acquire)")
_def("tlx.fence_mbarrier_init", results=0,
     summary="fence.mbarrier_init.release.cluster: this CTA's mbarrier inits visible to the cluster")
_def("tlx.remote_view", [("src", "one"), ("rank", "one")], traits=["pure", "view"], verify=_v_remote_view,
     summary="the same buffer / mbarrier in CTA `rank` of the cluster (mapa.shared::cluster)")
_def("tlx.remote_store", [("dst", "one"), ("src", "one")], results=0, effects=[Effect("dst", "write", "generic")],
     verify=_v_remote_store, summary="st.shared::cluster of a register tensor into another CTA's buffer")
_def("tlx.async_remote_store", [("dst", "one"), ("src", "one"), ("bar", "one")], results=0,
     effects=[Effect("dst", "write", "generic"), Effect("bar", "write", "barrier")], verify=_v_remote_store,
     summary="st.async.shared::cluster: a register tensor into another CTA's buffer, completing on its mbarrier")
_def("tlx.async_remote_copy", [("dst", "one"), ("src", "one"), ("bar", "one")], results=0,
     effects=[Effect("src", "read", "async"), Effect("dst", "write", "async"), Effect("bar", "write", "barrier")],
     verify=_v_remote_copy,
     summary="cp.async.bulk.shared::cluster.shared::cta: a buffer into another CTA's, completing on its mbarrier")

_def("scf.for", [("lb", "one"), ("ub", "one"), ("step", "one"), ("inits", "var")], results=None, regions=1,
     traits=["loop"], verify=_v_for)
_def("scf.if", [("cond", "one")], results=None, regions=2, verify=_v_if)
_def("scf.while", [("inits", "var")], results=None, regions=2, traits=["loop"], verify=_v_while)
_def("scf.yield", [("values", "var")], results=0, traits=["terminator"])
_def("scf.condition", [("cond", "one"), ("values", "var")], results=0, traits=["terminator"], verify=_v_condition)
_def("tlx.warp_specialize", [("captures", "var")], results=0, regions=None, verify=_v_ws,  # regions: 1 + partitions
     summary="region 0: the default partition; regions 1..: worker partitions (isolated, captures as arguments)")
_def("tlx.ws_yield", results=0, traits=["terminator"])
_def("tlx.ws_return", results=0, traits=["terminator"])


def effects_of(op: Operation) -> List[Tuple[Value, Effect]]:
    """The shared-memory accesses of `op` as (buffer value, effect) pairs. An operand that is not
    in shared memory (a register A of async_dot) has no effect; `local_alloc` writes its result
    only when it has a source."""
    out: List[Tuple[Value, Effect]] = []
    if op.name == "tlx.local_alloc":
        if op.arg("src") is not None:
            out.append((op.result, _W_GEN))
        return out
    for e in op.opdef.effects:
        vals = op.results if e.target == "result" else op.group(e.target)
        for v in vals:
            if isinstance(v.type, (T.MemDescType, T.BarrierType)):
                out.append((v, e))
    return out


def is_pure(op: Operation) -> bool:
    """True when `op` has no memory or side effects (and no regions)."""
    return op.has_trait("pure") or (op.name == "tlx.local_alloc" and op.arg("src") is None)

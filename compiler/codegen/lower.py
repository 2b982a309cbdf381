"""The lowering driver: walks a laid-out, allocated module and emits one PTX kernel.

Every op kind has one lowering function in a `lower_*` module; each module exports its table (op
name -> function) and `LOWERINGS` merges them (the `lower_*` modules import this one only for
type hints). The driver owns what they share: the emitter, the value → registers map, the
partition being lowered (thread ids, leader predicate, CTA-barrier id), per-thread coordinate
registers of each layout (computed once per partition in its prologue), constants, and a
liveness table (an async_dot accumulates in place into its accumulator's registers when nothing
reads that accumulator afterwards).

Structured control flow maps to labels and branches; loop-carried values and `if` results get
registers of their own that the yields copy into (copies between identical registers vanish,
so an accumulator chained through async_dot / async_dot_wait / yield stays in one set of
registers for the whole loop, as wgmma needs).
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..abi import ABI_DTYPE, TENSOR_MAP_BYTES, KernelABI, ParamABI, TMAEncoding
from ..errors import TLXCompileError
from ..ir import layouts as L
from ..ir import types as T
from ..ir.core import Module, Operation, Value
from ..analysis import layout_math as LM
from ..analysis.axis_info import AxisAnalysis
from . import (lower_arith, lower_async, lower_cluster, lower_control, lower_indexed, lower_memory, lower_mma,
               lower_tensor, lower_warp)
from .ptx import Emitter
from .values import Barriers, Desc, Lowered, Partition, Scalar, SmemView, Tensor, Token, even_register_split, reg_kind

#: op name -> the function that lowers it: each lower_* module's table
LOWERINGS: Dict[str, Callable[["KernelLowering", Operation], None]] = {
    **lower_arith.LOWERINGS, **lower_async.LOWERINGS, **lower_control.LOWERINGS, **lower_memory.LOWERINGS,
    **lower_mma.LOWERINGS, **lower_tensor.LOWERINGS, **lower_indexed.LOWERINGS, **lower_warp.LOWERINGS,
    **lower_cluster.LOWERINGS}

# non-root instructions that touch memory (a barrier cannot be skipped across them)
_MEMORY_PREFIXES = ("ld.", "ldmatrix", "cp.", "st.", "stmatrix", "atom.", "red.", "mbarrier.", "wgmma.", "tensormap")

PTX_VERSION = "8.7"
SMEM_SYMBOL = "tlx_smem"


def _smem_vec_estimate(t, m: LM.LinearMap, eb: int) -> int:
    """Registers per shared access of a tensor with layout m into a buffer of memdesc type t, from
    the type alone (a lower bound of what the access will use: consecutive registers along the
    buffer's contiguous dim, at most 16 bytes)."""
    lay = getattr(t, "layout", None)
    if isinstance(lay, L.NVMMASharedLayout):
        cd = 0 if lay.transposed else len(t.shape) - 1
        cap = 16 // eb
    elif isinstance(lay, L.SwizzledSharedLayout):
        cd = lay.order[0] if lay.order else len(t.shape) - 1
        cap = min(16 // eb, lay.vec if lay.max_phase > 1 else 16 // eb)
    else:
        return 1
    v = 1
    for i, b in enumerate(m.reg):
        if b != tuple((1 << i) if d == cd else 0 for d in range(len(b))) or v * 2 > cap:
            break
        v *= 2
    return max(1, v)


_HOPPER_ONLY = frozenset({"tlx.async_dot", "tlx.async_dot_wait", "tlx.tma_load", "tlx.tma_store", "tlx.tma_store_wait",
                          "tlx.tma_prefetch", "tlx.async_bulk_load", "tlx.async_store", "tlx.barrier_expect_bytes",
                          "tlx.fence_async_shared", "tt.make_tensor_descriptor", "tlx.reinterpret_tensor_descriptor",
                          "tt.dot", "tlx.cluster_cta_rank",
                          "tlx.cluster_size", "tlx.cluster_barrier", "tlx.fence_mbarrier_init", "tlx.remote_view",
                          "tlx.remote_store", "tlx.async_remote_store", "tlx.async_remote_copy"})


def hopper_only_op(module: Module) -> Optional[Operation]:
    """The first op of `module` that exists only on sm_90a (None if there is none)."""
    for op in module.ops():
        if op.name in _HOPPER_ONLY or (op.name == "tlx.warp_specialize" and op.attrs.get("partition_registers")):
            return op
    return None


class KernelLowering:
    """Lowers one module to (PTX text of the kernel, KernelABI)."""

    def __init__(self, module: Module, target: str = "sm_90a", maxnreg: Optional[int] = None):
        self.m = module
        self.target = target
        self.capability = int(target[3:].rstrip("a"))  # sm_90a -> 90
        self.e = Emitter()
        self.vals: Dict[int, Lowered] = {}
        self.num_warps = int(module.attrs.get("num_warps", 4))
        self.func = module.func
        if self.func is None:
            raise TLXCompileError("the module has no kernel function")
        self.name = self.func.attrs.get("sym_name", "kernel")
        self.axis = AxisAnalysis(module)
        self.user_maxnreg = maxnreg
        self.uses_smem = False
        self.setmaxnreg_used = False
        self.total_warps = self.num_warps
        self.descs: List[Desc] = []
        self.params: List[ParamABI] = []
        self.needs_global_scratch = False
        self.global_scratch_per_program = 0
        self.pinned: set = set()  # registers shared by many values (constants, ids): never overwritten
        self.groups: Dict[int, list] = {}
        self.value_by_id: Dict[int, Value] = {}
        self._positions()
        self.need: Dict[int, Optional[frozenset]] = {}
        self._needed_registers()
        # each program's global scratch: a tensormap per descriptor made without a slot, and the
        # slots of every tlx.allocate_tensor_descriptor (all multiples of the 128-byte alignment)
        n_desc = sum(1 for o in self.func.iter_nested()
                     if o.name == "tt.make_tensor_descriptor" and o.arg("slot") is None)
        n_desc += sum(o.attrs["num"] for o in self.func.iter_nested() if o.name == "tlx.allocate_tensor_descriptor")
        self.gscratch_stride = TENSOR_MAP_BYTES * n_desc

    # -- liveness ---------------------------------------------------------------------------------
    def _positions(self) -> None:
        """Pre-order positions of ops; the end position of every loop; the last position at
        which each value is (or may be, through a loop) read."""
        self.pos: Dict[int, int] = {}
        self.end: Dict[int, int] = {}
        tick = itertools.count()

        def walk(ops) -> None:
            for op in ops:
                self.pos[id(op)] = next(tick)
                for r in op.regions:
                    walk(r.block.ops)
                self.end[id(op)] = next(tick)

        walk(self.func.regions[0].block.ops)  # type: ignore[union-attr]
        self.last_use: Dict[int, int] = {}

        def note(op: Operation) -> None:
            for v in op.operands:
                self.last_use[id(v)] = max(self.last_use.get(id(v), -1), self._use_extent(v, op))
            for r in op.regions:
                for o in r.block.ops:
                    note(o)

        for op in self.func.regions[0].block.ops:  # type: ignore[union-attr]
            note(op)

    def _use_extent(self, v: Value, user: Operation) -> int:
        """Position until which `v` stays live because of `user`: the user's position, or the end of
        the outermost loop around the user that does not also contain v's definition."""
        blk = v.defining_op.parent if v.defining_op is not None else v.owner  # type: ignore[attr-defined]
        ext = self.pos[id(user)]
        op: Optional[Operation] = user
        while op is not None and op.parent is not blk:
            p = op.parent_op
            if p is None:
                break
            if p.has_trait("loop"):
                ext = max(ext, self.end[id(p)])
            op = p
        return ext

    # -- which registers of a tensor are read --------------------------------------------------
    # ops lowered register by register through lower_arith.elementwise (or as an alias): they
    # compute only the registers their result needs
    NEED_AWARE = frozenset({"arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui", "arith.remsi",
                            "arith.remui", "arith.andi", "arith.ori", "arith.xori", "arith.shli", "arith.shrsi",
                            "arith.shrui", "arith.maxsi", "arith.maxui", "arith.minsi", "arith.minui", "arith.cmpi",
                            "arith.cmpf", "arith.select", "arith.extsi", "arith.extui", "arith.trunci", "tt.addptr",
                            "arith.bitcast", "tt.hint", "tt.int_to_ptr", "tt.ptr_to_int"})

    def _needed_registers(self) -> None:
        """For tensors that only feed vectorized global accesses (pointers and masks: one register
        per vector is read), the register indices read, through elementwise ops and loop-carried
        values (fixpoint); None = all. Lowering computes only these, so the per-element address
        arithmetic of a vectorized pointer tensor is never emitted."""
        ops: List[Operation] = list(self.func.iter_nested())  # type: ignore[union-attr]
        tensors = {}
        for op in ops:
            for v in list(op.results) + [a for r in op.regions for a in r.block.args]:
                if isinstance(v.type, T.TensorType):
                    tensors[id(v)] = v
        heads: Dict[Tuple[int, int], frozenset] = {}

        def head_set(ptr: Value, mask: Optional[Value], user: Operation) -> Optional[frozenset]:
            t = ptr.type
            if not isinstance(t, T.TensorType) or t.layout is None:
                return None
            m = LM.to_map(t.layout, t.shape)
            eb = t.element.pointee.bytes  # type: ignore[union-attr]
            v = lower_memory.global_vec(self, ptr, m, eb, mask)
            if user.name == "tlx.async_load":
                v = min(v, _smem_vec_estimate(user.arg("dst").type, m, eb))
            return frozenset(range(0, m.num_regs, v))

        def use_need(v: Value, user: Operation, idx: int) -> Optional[frozenset]:
            n = user.name
            if n in ("tt.load", "tt.store", "tlx.async_load", "tlx.prefetch"):
                ptr = user.operands[user.group_range(user.opdef.group_names[0])[0]]
                mask = user.arg("mask")
                if user.operands[idx] is ptr or (mask is not None and user.operands[idx] is mask
                                                 and not (n == "tt.store" and user.arg("value") is mask)):
                    if (id(user), idx) not in heads:
                        heads[(id(user), idx)] = head_set(ptr, mask, user)  # type: ignore[assignment]
                    return heads[(id(user), idx)]
                return None
            if n in self.NEED_AWARE:
                r = user.results[0]
                if isinstance(r.type, T.TensorType) and r.type.layout == getattr(v.type, "layout", None):
                    return self.need.get(id(r), frozenset())
                return None
            if n == "scf.yield" and user.parent_op is not None and user.parent_op.name == "scf.for":
                return self._carried_need(user.parent_op, idx)
            if n == "scf.for" and idx >= 3:
                return self._carried_need(user, idx - 3)
            return None

        for k in tensors:
            self.need[k] = frozenset()
        for _ in range(20):
            changed = False
            for k, v in tensors.items():
                acc: Optional[frozenset] = frozenset()
                d = v.defining_op
                if d is None and not (v.owner.parent_op is not None and v.owner.parent_op.name == "scf.for"):  # type: ignore
                    acc = None  # other block arguments: computed by their owner as a whole
                for user, idx in v.uses:
                    if acc is None:
                        break
                    u = use_need(v, user, idx)
                    acc = None if u is None else acc | u
                if d is not None and d.name == "scf.for":
                    c = self._carried_need(d, d.results.index(v))
                    acc = None if acc is None or c is None else acc | c
                old = self.need.get(k)
                if acc != old and not (old is None):
                    self.need[k] = acc
                    changed = True
            if not changed:
                break
        else:  # no fixpoint: compute everything
            for k in tensors:
                self.need[k] = None

    def _carried_need(self, f: Operation, k: int) -> Optional[frozenset]:
        """Registers of carried value k of scf.for `f` that something reads (body or result)."""
        a, r = f.regions[0].block.args[1 + k], f.results[k]
        na, nr = self.need.get(id(a)), self.need.get(id(r))
        return None if not isinstance(a.type, T.TensorType) or na is None or nr is None else na | nr

    def needed(self, v: Value) -> Optional[frozenset]:
        """The register indices of tensor `v` that are read (None: all)."""
        return self.need.get(id(v))

    def dead_after(self, v: Value, op: Operation) -> bool:
        """True when no op after `op` (in this or a later loop iteration) reads `v`."""
        return self.last_use.get(id(v), -1) <= self.pos[id(op)]

    def _def_pos(self, v: Value) -> int:
        d = v.defining_op
        if d is not None:
            return self.end[id(d)] if d.regions else self.pos[id(d)]
        owner = v.owner.parent_op  # type: ignore[attr-defined]
        return self.pos[id(owner)] if owner is not None and id(owner) in self.pos else -1

    def alias(self, new: Value, old: Value) -> None:
        """Record that `new` is lowered onto (some of) the registers of `old`."""
        a, b = self._group(id(new)), self._group(id(old))
        if a is not b:
            a.extend(b)
            for x in b:
                self.groups[id(x)] = a

    def _group(self, k: int) -> list:
        g = self.groups.get(k)
        if g is None:
            g = [self.value_by_id[k]] if k in self.value_by_id else []
            self.groups[k] = g
        return g

    def can_overwrite(self, v: Value, op: Operation) -> bool:
        """True when `op` may write the registers of `v` in place: nothing reads `v` after `op`, and
        no other value living on those registers is live across `op`."""
        if not self.dead_after(v, op):
            return False
        x = self.vals.get(id(v))
        if isinstance(x, Tensor) and len(set(x.regs)) != len(x.regs):
            return False
        here = self.pos[id(op)]
        for u in self.groups.get(id(v), [v]):
            if u is v:
                continue
            if self._def_pos(u) <= here < self.last_use.get(id(u), -1):
                return False
        return True

    # -- values -----------------------------------------------------------------------------------
    def val(self, v: Value) -> Lowered:
        try:
            return self.vals[id(v)]
        except KeyError:
            raise TLXCompileError(f"internal: value {v!r} was not lowered before its use") from None

    def set(self, v: Value, x: Lowered) -> None:
        self.vals[id(v)] = x
        self.value_by_id[id(v)] = v

    def scalar(self, v: Value) -> str:
        x = self.val(v)
        if not isinstance(x, Scalar):
            raise TLXCompileError(f"internal: expected a scalar for {v!r}")
        return x.reg

    def regs(self, v: Value, n: int) -> List[str]:
        """The registers of `v` for a result of `n` registers: a tensor's own, a scalar's n times."""
        x = self.val(v)
        if isinstance(x, Tensor):
            return x.regs
        if isinstance(x, Scalar):
            return [x.reg] * n
        raise TLXCompileError(f"internal: {v!r} is not a register value")

    def tensor(self, v: Value) -> Tensor:
        x = self.val(v)
        if not isinstance(x, Tensor):
            raise TLXCompileError(f"internal: expected a register tensor for {v!r}")
        return x

    def lmap(self, t: T.TensorType) -> LM.LinearMap:
        if t.layout is None:
            raise TLXCompileError(f"tensor {t} has no layout: run the layout pass before code generation")
        m = LM.to_map(t.layout, t.shape)
        if m.num_warps > self.part.num_warps or m.num_lanes != 32:
            raise TLXCompileError(f"layout {t.layout} spans {m.num_warps} warps and {m.num_lanes} lanes, the code "
                                  f"runs on {self.part.num_warps} warps")
        return m

    def new_regs(self, t: T.TensorType, hint: str) -> Tuple[List[str], LM.LinearMap]:
        m = self.lmap(t)
        return self.e.named_array(reg_kind(t.element), m.num_regs, hint), m

    def hint(self, v: Value, default: str = "v") -> str:
        return v.name or default

    # -- partition-level helpers ----------------------------------------------------------------
    @contextmanager
    def in_prologue(self) -> Iterator[None]:
        """Emit into the current partition's prologue (runs before its body, dominates it)."""
        saved = self.e.code
        self.e.code = self.part.prologue
        saved_loc = self.e.loc
        try:
            yield
        finally:
            self.part.prologue = self.e.code
            self.e.code = saved
            self.e.loc = saved_loc

    def once(self, key: tuple, make: Callable[[], Any], pin: bool = True) -> Any:
        """The current partition's value for `key`: made once by `make`, which emits into the
        partition's prologue; its register is pinned (shared by many uses, never overwritten)."""
        hit = self.part.cache.get(key)
        if hit is None:
            with self.in_prologue():
                hit = self.part.cache[key] = make()
            if pin:
                self.pinned.add(hit if isinstance(hit, str) else hit[0])
        return hit

    def const(self, kind: str, value: str) -> str:
        """A register of `kind` holding immediate `value` (one per partition)."""
        def make() -> str:
            if kind == "pred":
                return self.e.new("pred", "setp.ne.b32", "1" if value in ("1", "-1", "true") else "0", "0")
            return self.e.new(kind, f"mov.{kind}", value)

        return self.once(("const", kind, value), make)

    def thread_linear(self, lane_vals: Sequence[int], warp_vals: Sequence[int]) -> Tuple[Optional[str], int]:
        """A register holding XOR over set lane bits of lane_vals[i] and over set warp bits of
        warp_vals[j] for the calling thread (None when all are zero), and the OR of all values
        (the bits the result may have). Computed once per partition, in its prologue."""
        lane_vals, warp_vals = tuple(lane_vals), tuple(warp_vals)
        mask = 0
        for v in lane_vals + warp_vals:
            mask |= v
        if not mask:
            return None, 0
        return self.once(("lin", lane_vals, warp_vals), lambda: self._xor_of_bits(lane_vals, warp_vals)), mask

    def _xor_of_bits(self, lane_vals: Tuple[int, ...], warp_vals: Tuple[int, ...]) -> str:
        """Emit thread_linear's XOR: runs of consecutive power-of-two values take one bit-field
        extract (and a shift), other values an extract and a multiply."""
        terms: List[str] = []
        for src, vals in ((self.part.lane, lane_vals), (self.part.warp, warp_vals)):
            i = 0
            while i < len(vals):
                v = vals[i]
                if not v:
                    i += 1
                elif LM.is_pow2(v):
                    k = 1
                    while i + k < len(vals) and vals[i + k] == v << k:
                        k += 1
                    t = self.e.new("b32", "bfe.u32", src, str(i), str(k))
                    terms.append(self.e.new("b32", "shl.b32", t, str(LM.log2(v))) if LM.log2(v) else t)
                    i += k
                else:
                    t = self.e.new("b32", "bfe.u32", src, str(i), "1")
                    terms.append(self.e.new("b32", "mul.lo.u32", t, str(v)))
                    i += 1
        acc = terms[0]
        for t in terms[1:]:
            acc = self.e.new("b32", "xor.b32", acc, t)
        return acc

    def thread_plus(self, t: Optional[str], mask: int, k: int) -> str:
        """A new register holding thread part `t` (from `thread_linear`, bits `mask`) and constant
        k: XORed where k's bits meet the thread's, else added (k alone without a thread part)."""
        if t is None:
            return self.e.new("b32", "mov.b32", str(k))
        return self.e.new("b32", "xor.b32" if k & mask else "add.s32", t, str(k))

    def thread_coord(self, m: LM.LinearMap, d: int) -> Tuple[Optional[str], int]:
        """The calling thread's part of the coordinate along dim d under layout m."""
        return self.thread_linear([b[d] for b in m.lane], [b[d] for b in m.warp])

    def owner_pred(self, m: LM.LinearMap) -> Optional[str]:
        """A predicate true for one thread of each group holding copies of the same elements
        (None when the layout has no copies)."""
        lm, wm = m.free_lane_mask(), m.free_warp_mask()
        if not lm and not wm:
            return None
        return self.once(("owner", lm, wm), lambda: self._owner(lm, wm), pin=False)

    def _owner(self, lm: int, wm: int) -> str:
        conds = [self.e.new("pred", "setp.eq.u32", self.e.new("b32", "and.b32", src, str(mask)), "0")
                 for src, mask in ((self.part.lane, lm), (self.part.warp, wm)) if mask]
        return conds[0] if len(conds) == 1 else self.e.new("pred", "and.pred", conds[0], conds[1])

    def and_pred(self, a: Optional[str], b: Optional[str]) -> Optional[str]:
        if a is None:
            return b
        if b is None:
            return a
        return self.e.new("pred", "and.pred", a, b)

    def part_barrier(self) -> None:
        """bar.sync of the current partition (the whole CTA outside warp specialization); not
        repeated when the previous instruction is that same barrier."""
        p = self.part
        args = ("0",) if p.whole_cta else (str(p.barrier_id), str(p.threads))
        code = self.e.code
        # the same barrier with only register arithmetic since: this one would order nothing more
        for ins in reversed(code[-64:]):
            if ins.op == "bar.sync" and tuple(ins.args) == args and ins.pred is None:
                return
            if ins.root or ins.op[0] == ":" or ins.op.startswith(_MEMORY_PREFIXES):
                break
        self.e("bar.sync", *args)

    def smem_base(self) -> str:
        """The shared-window address of the dynamic shared memory (a register)."""
        self.uses_smem = True
        return self.once(("smem",), lambda: self.e.new("b32", "mov.u32", SMEM_SYMBOL))

    def smem_addr(self, offset: int) -> str:
        """A register holding the shared address `offset` bytes into the dynamic shared memory."""
        base = self.smem_base()
        if offset == 0:
            return base
        return self.once(("smem_off", offset), lambda: self.e.new("b32", "add.s32", base, str(offset)))

    def scratch(self, op: Operation) -> str:
        """The shared address of an op's scratch (`scratch_offset` from the allocation pass)."""
        if "scratch_offset" not in op.attrs:
            raise TLXCompileError(f"internal: {op.name} needs scratch shared memory but has no scratch_offset "
                                  "(run shared-memory allocation after the layout pass)", op.loc)
        return self.smem_addr(int(op.attrs["scratch_offset"]))

    # -- partitions -------------------------------------------------------------------------------
    def make_partition(self, index: int, num_warps: int, first_warp: int, barrier_id: int,
                       whole_cta: bool) -> Partition:
        """A partition whose thread ids are relative to its first warp (ids computed at its start)."""
        e = self.e
        suffix = "" if index < 0 else f"_p{index}"
        tid, lane, warp = (e.named("b32", n + suffix) for n in ("tid", "lane", "warp"))
        leader = e.named("pred", "leader" + suffix)
        part = Partition(index, num_warps, tid, lane, warp, leader, barrier_id, whole_cta)
        self.pinned.update((tid, lane, warp, leader))
        prev = getattr(self, "part", None)
        self.part = part
        with self.in_prologue():
            e("mov.u32", tid, "%tid.x")
            if first_warp:
                e("sub.s32", tid, tid, str(first_warp * 32))
            e("and.b32", lane, tid, "31")
            raw = e.new("b32", "shr.u32", tid, "5")
            # the warp index is the same in every lane: say so, so ptxas keeps it uniform
            e("shfl.sync.idx.b32", warp, raw, "0", "31", "-1")
            e("setp.eq.u32", leader, tid, "0")
        self.part = prev  # type: ignore[assignment]
        return part

    # -- the walk ---------------------------------------------------------------------------------
    def lower_ops(self, ops: Sequence[Operation]) -> None:
        for op in ops:
            self.lower_op(op)

    def lower_body(self, ops: Sequence[Operation]) -> None:
        """Lower the current partition's ops, preceded by its prologue (what `once` emitted)."""
        start = len(self.e.code)
        self.lower_ops(ops)
        self.e.code[start:start] = self.part.prologue
        self.part.prologue = []

    def lower_op(self, op: Operation) -> None:
        fn = LOWERINGS.get(op.name)
        if fn is None:
            raise TLXCompileError(f"no PTX lowering for {op.name}", op.loc)
        self.e.set_loc(op.loc)
        fn(self, op)

    # -- copies (yields) --------------------------------------------------------------------------
    def copy_regs(self, dsts: List[str], srcs: List[str], kinds: List[str]) -> None:
        """Parallel copy srcs → dsts (registers that appear on both sides are read first)."""
        pairs = [(d, s, k) for d, s, k in zip(dsts, srcs, kinds) if d != s]
        dset = {d for d, _, _ in pairs}
        if any(s in dset for _, s, _ in pairs):  # a source that is also a destination: read it first
            pairs = [(d, self.e.new(k, f"mov.{k}", s) if s in dset else s, k) for d, s, k in pairs]
        for d, s, k in pairs:
            self.mov(k, d, s)

    def mov(self, kind: str, d: str, s: str) -> None:
        self.e(f"mov.{kind}", d, s)

    def flat_regs(self, x: Lowered) -> Tuple[List[str], List[str]]:
        """Registers and kinds of a lowered value (for copies)."""
        if isinstance(x, Scalar):
            return [x.reg], [reg_kind(x.elem)]
        if isinstance(x, Tensor):
            k = reg_kind(x.elem)
            return list(x.regs), [k] * len(x.regs)
        if isinstance(x, SmemView):
            regs = [x.base] + ([x.origin] if isinstance(x.origin, str) else [])
            return regs, ["b32"] * len(regs)
        if isinstance(x, Barriers):
            return [x.addr], ["b32"]
        if isinstance(x, Desc):
            return [x.addr], ["b64"]
        return [], []

    def fresh_like(self, v: Value, x: Lowered) -> Lowered:
        """New registers of the same shape as `x` (the home of a loop-carried or if-result value)."""
        hint = self.hint(v, "carry")
        if isinstance(x, Scalar):
            return Scalar(self.e.named(reg_kind(x.elem), hint), x.elem)
        if isinstance(x, Tensor):
            return Tensor(self.e.named_array(reg_kind(x.elem), len(x.regs), hint), x.lmap, x.elem)
        if isinstance(x, SmemView):
            o = self.e.named("b32", hint + "_origin") if isinstance(x.origin, str) else x.origin
            return replace(x, base=self.e.named("b32", hint), origin=o)
        if isinstance(x, Barriers):
            return Barriers(self.e.named("b32", hint), x.count, x.array)
        if isinstance(x, Desc):
            return replace(x, addr=self.e.named("b64", hint))
        return Token()

    def home_for(self, v: Value) -> Lowered:
        """Fresh registers for a value that has not been computed yet (loop or if results)."""
        t = v.type
        hint = self.hint(v, "carry")
        if isinstance(t, T.TensorType):
            regs, m = self.new_regs(t, hint)
            return Tensor(regs, m, t.element)
        if isinstance(t, (T.ScalarType, T.PointerType)):
            return Scalar(self.e.named(reg_kind(t), hint), t)
        if isinstance(t, T.TokenType):
            return Token()
        if isinstance(t, T.DescSlotsType):  # a slot address
            return Scalar(self.e.named("b64", hint), T.i64)
        raise TLXCompileError(f"internal: no home registers for {t}")

    # -- driver -----------------------------------------------------------------------------------
    def _check_target(self) -> None:
        """PTX is generated for sm_90a; an older target gets it only for ops that exist there."""
        bad = hopper_only_op(self.m) if self.capability < 90 else None
        if bad is not None:
            raise TLXCompileError(f"{bad.name} needs sm_90a (Hopper); the target is {self.target}", bad.loc,
                                  hint="compile for target='sm_90a'")

    def run(self) -> Tuple[str, KernelABI]:
        self._check_target()
        f = self.func
        e = self.e
        body = f.regions[0].block  # type: ignore[union-attr]
        self._plan_warps()
        self.part = self.make_partition(-1, self.num_warps, 0, 0, True)
        self._params(body)
        self.lower_body(body.ops)
        e.eliminate_dead_code()
        return self._module_text(), self._abi()

    def _plan_warps(self) -> None:
        """Total warps of the CTA (default + worker partitions, padded to warpgroups)."""
        total = self.num_warps
        for op in self.func.iter_nested():  # type: ignore[union-attr]
            if op.name == "tlx.warp_specialize":
                plan = lower_control.plan_partitions(self, op)
                total = max(total, plan.total_warps)
        self.total_warps = total

    def _params(self, body) -> None:
        """Load every kernel parameter into registers; record its ABI entry."""
        e = self.e
        names = self.func.attrs.get("arg_names") or []  # type: ignore[union-attr]
        for i, a in enumerate(body.args):
            pname = names[i] if i < len(names) else (a.name or f"arg{i}")
            pid, t = f"{self.name}_param_{i}", a.type
            if isinstance(t, T.TensorDescType):  # passed by value: its generic address
                r0 = e.new("b64", "mov.b64", pid)
                d = Desc(e.named("b64", pname), t, param_index=i)
                e("cvta.param.u64", d.addr, r0)
                self.descs.append(d)
                self.set(a, d)
                self.params.append(ParamABI(pname, "tensordesc", ABI_DTYPE[t.element.name], TENSOR_MAP_BYTES, 64))
                continue
            if isinstance(t, T.PointerType):
                r = e.named("b64", pname)
                e("ld.param.u64", r, f"[{pid}]")
                abi = ParamABI(pname, "pointer", ABI_DTYPE[t.pointee.name], 8, 8)
            elif isinstance(t, T.ScalarType):
                size = 2 if t.is_float and t.bits == 16 else max(4, t.bits // 8)
                if t.bits == 1:
                    r32 = e.new("b32", "ld.param.u32", f"[{pid}]")
                    r = e.named("pred", pname)
                    e("setp.ne.u32", r, r32, "0")
                elif size == 4 and t.bits < 32:  # 8- and 16-bit values arrive widened to 32 bits
                    r32 = e.named("b32", pname)
                    e("ld.param.b32", r32, f"[{pid}]")
                    r = e.named("b16", pname + "_16")
                    e("cvt.u16.u32", r, r32)
                else:
                    r = e.named(f"b{size * 8}", pname)
                    e(f"ld.param.b{size * 8}", r, f"[{pid}]")
                abi = ParamABI(pname, "scalar", ABI_DTYPE[t.name], size, size)
            else:
                raise TLXCompileError(f"kernel parameter '{pname}' has a type ({t}) that cannot be passed to a kernel",
                                      self.func.loc)
            self.set(a, Scalar(r, t))
            self.params.append(abi)

    def _param_decl(self, i: int, p: ParamABI) -> str:
        pid = f"{self.name}_param_{i}"
        if p.kind == "tensordesc":
            return f"\t.param .align 64 .b8 {pid}[{TENSOR_MAP_BYTES}]"
        if p.kind == "pointer":
            return f"\t.param .u64 .ptr .global .align 1 {pid}"
        ty = {"fp32": "f32", "fp64": "f64"}.get(p.dtype, f"b{p.size * 8}")
        return f"\t.param .{ty} {pid}"

    def _final_params(self) -> List[ParamABI]:
        params = list(self.params)
        if self.needs_global_scratch:
            params.append(ParamABI("global_scratch", "pointer", "u8", 8, 8, hidden=True))
        return params

    def _module_text(self) -> str:
        e = self.e
        code = e.render_code()  # assigns file indices
        lines = ["//", "// Generated by tlx (PTX for sm_90a)", "//", "", f".version {PTX_VERSION}",
                 f".target {self.target}", ".address_size 64", ""]
        lines += [f'.file {idx} "{path}"' for path, idx in sorted(e.files.items(), key=lambda kv: kv[1])]
        if self.uses_smem:
            lines.append(f".extern .shared .align 1024 .b8 {SMEM_SYMBOL}[];")
        params = ",\n".join(self._param_decl(i, p) for i, p in enumerate(self._final_params()))
        lines += ["", f".visible .entry {self.name}(", params, ")", f".reqntid {self.total_warps * 32}"]
        maxnreg = self._maxnreg()
        if maxnreg:
            lines.append(f".maxnreg {maxnreg}")
        cluster = tuple(self.m.attrs.get("cluster", (1, 1, 1)))
        if cluster != (1, 1, 1):
            # the launch must name this cluster shape (the runtime's cluster launch attribute)
            lines += [".explicitcluster", ".reqnctapercluster " + ", ".join(str(int(c)) for c in cluster)]
        lines += ["{", *e.render_decls(), "", *code]
        if not code or code[-1].strip() != "ret;":
            lines.append("\tret;")
        return "\n".join(lines + ["}"]) + "\n"

    def _maxnreg(self) -> Optional[int]:
        if self.user_maxnreg:
            return self.user_maxnreg
        if self.setmaxnreg_used:
            # setmaxnreg only works under a register cap at entry: the even split of the file
            return even_register_split(self.total_warps * 32)
        return None

    def _abi(self) -> KernelABI:
        params = [replace(p, tma=self._tma_encoding(next(d for d in self.descs if d.param_index == i)))
                  if p.kind == "tensordesc" else p for i, p in enumerate(self._final_params())]
        return KernelABI(entry=self.name, params=tuple(params), threads_per_cta=self.total_warps * 32,
                         num_warps=self.num_warps, shared_bytes=int(self.m.attrs.get("shared_bytes", 0)),
                         cluster=tuple(self.m.attrs.get("cluster", (1, 1, 1))),  # type: ignore[arg-type]
                         scratch_bytes_per_program=self.global_scratch_per_program,
                         extra={"maxnreg": self._maxnreg(), "total_warps": self.total_warps})

    def _tma_encoding(self, d: Desc) -> TMAEncoding:
        t = d.dtype
        sw, box = (d.swizzle, d.box) if d.swizzle is not None else lower_async.default_tma_encoding(t)
        return TMAEncoding(ABI_DTYPE[t.element.name], t.element.bytes, tuple(t.block_shape), tuple(box), int(sw))


def lower_module(module: Module, target: str = "sm_90a", maxnreg: Optional[int] = None) -> Tuple[str, KernelABI]:
    """PTX text and ABI of a laid-out, allocated module."""
    return KernelLowering(module, target, maxnreg).run()

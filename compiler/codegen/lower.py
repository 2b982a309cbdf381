"""The lowering driver: walks a laid-out, allocated module and emits one PTX kernel.

Every op kind has one lowering function, registered with `@lowers("op.name", ...)` in the
`lower_*` modules (the dispatch table is `LOWERINGS`). The driver owns what they share: the
emitter, the value → registers map, the partition being lowered (thread ids, leader predicate,
CTA-barrier id), per-thread coordinate registers of each layout (computed once per partition in
its prologue), constants, and a liveness table (an async_dot accumulates in place into its
accumulator's registers when nothing reads that accumulator afterwards).

Structured control flow maps to labels and branches; loop-carried values and `if` results get
registers of their own that the yields copy into (copies between identical registers vanish,
so an accumulator chained through async_dot / async_dot_wait / yield stays in one set of
registers for the whole loop, as wgmma needs).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..abi import KernelABI, ParamABI, TMAEncoding
from ..errors import TLXCompileError
from ..ir import types as T
from ..ir.core import Module, Operation, Value
from . import layout_math as LM
from .axis_info import AxisAnalysis
from .ptx import Emitter
from .values import Barriers, Desc, Lowered, Partition, Scalar, SmemView, Tensor, Token, reg_kind

LOWERINGS: Dict[str, Callable[["KernelLowering", Operation], None]] = {}

# non-root instructions that touch memory (a barrier cannot be skipped across them)
_MEMORY_PREFIXES = ("ld.", "ldmatrix", "cp.", "st.", "stmatrix", "atom.", "red.", "mbarrier.", "wgmma.", "tensormap")

PTX_VERSION = "8.7"
SMEM_SYMBOL = "tlx_smem"
MAX_THREADS_REGS = 65536


def _smem_vec_estimate(t, m: LM.LinearMap, eb: int) -> int:
    """Registers per shared access of a tensor with layout m into a buffer of memdesc type t, from
    the type alone (a lower bound of what the access will use: consecutive registers along the
    buffer's contiguous dim, at most 16 bytes)."""
    from ..ir import layouts as L

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


def lowers(*names: str):
    """Register the decorated function as the lowering of the named ops."""

    def deco(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn

    return deco


TRITON_DTYPE = {"i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u8": "u8", "u16": "u16",
                "u32": "u32", "u64": "u64", "f16": "fp16", "bf16": "bf16", "f32": "fp32", "f64": "fp64",
                "f8e4m3": "fp8e4nv", "f8e5m2": "fp8e5"}


class KernelLowering:
    """Lowers one module to (PTX text of the kernel, KernelABI)."""

    def __init__(self, module: Module, target: str = "sm_90a", maxnreg: Optional[int] = None):
        self.m = module
        self.target = target
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
        self.group_vals: Dict[int, list] = {}
        self.value_by_id: Dict[int, Value] = {}
        self.reserved_barriers: Dict[int, str] = {}
        self.user_barriers: List[Tuple[int, Operation]] = []
        self._positions()
        self.need: Dict[int, Optional[frozenset]] = {}
        self._needed_registers()
        n_desc = sum(1 for o in self.func.iter_nested() if o.name == "tt.make_tensor_descriptor")
        self.gscratch_stride = 128 * n_desc

    # -- liveness ---------------------------------------------------------------------------------
    def _positions(self) -> None:
        """Pre-order positions of ops; the end position of every loop; the last position at
        which each value is (or may be, through a loop) read."""
        self.pos: Dict[int, int] = {}
        self.end: Dict[int, int] = {}
        counter = [0]

        def walk(ops) -> None:
            for op in ops:
                self.pos[id(op)] = counter[0]
                counter[0] += 1
                for r in op.regions:
                    walk(r.block.ops)
                self.end[id(op)] = counter[0]
                counter[0] += 1

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

    def _def_block(self, v: Value):
        op = v.defining_op
        return op.parent if op is not None else v.owner  # type: ignore[attr-defined]

    def _use_extent(self, v: Value, user: Operation) -> int:
        """Position until which `v` stays live because of `user`: the user's position, or the end of
        the outermost loop around the user that does not also contain v's definition."""
        blk = self._def_block(v)
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
        from .lower_memory import global_vec

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
            e = t.element.pointee  # type: ignore[union-attr]
            eb = max(1, e.bits // 8)
            v = global_vec(self, ptr, m, eb, mask)
            if user.name == "tlx.async_load":
                v = min(v, _smem_vec_estimate(user.arg("dst").type, m, eb))
            return frozenset(range(0, m.num_regs, v))

        def use_need(v: Value, user: Operation, idx: int) -> Optional[frozenset]:
            n = user.name
            if n in ("tt.load", "tt.store", "tlx.async_load", "tlx.prefetch"):
                g = user.opdef.group_names
                a, b = user.group_range(g[0])
                ptr = user.operands[a]
                mask = user.arg("mask")
                if user.operands[idx] is ptr or (mask is not None and user.operands[idx] is mask
                                                 and not (n == "tt.store" and user.arg("value") is mask)):
                    key = (id(user), idx)
                    if key not in heads:
                        hs = head_set(ptr, mask, user)
                        heads[key] = hs  # type: ignore[assignment]
                    return heads[key]
                return None
            if n in self.NEED_AWARE:
                r = user.results[0]
                if isinstance(r.type, T.TensorType) and r.type.layout == getattr(v.type, "layout", None):
                    return self.need.get(id(r), frozenset())
                return None
            if n == "scf.yield" and user.parent_op is not None and user.parent_op.name == "scf.for":
                f = user.parent_op
                return self._carried_need(f, idx)
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
                    kres = d.results.index(v)
                    c = self._carried_need(d, kres)
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
        blk = f.regions[0].block
        a, r = blk.args[1 + k], f.results[k]
        na, nr = self.need.get(id(a), None), self.need.get(id(r), None)
        if not isinstance(a.type, T.TensorType):
            return None
        if na is None or nr is None:
            return None
        return na | nr

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
            self.group_vals.setdefault(id(a), [])

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

    def const(self, kind: str, value: str) -> str:
        """A register of `kind` holding immediate `value` (one per partition)."""
        key = ("const", kind, value)
        c = self.part.cache.get(key)
        if c is None:
            with self.in_prologue():
                c = self.e.tmp(kind)
                if kind == "pred":
                    self.e("setp.ne.b32", c, "1" if value in ("1", "-1", "true") else "0", "0")
                else:
                    self.e(f"mov.b{kind[1:]}", c, value)
            self.part.cache[key] = c
            self.pinned.add(c)
        return c

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
        key = ("lin", lane_vals, warp_vals)
        hit = self.part.cache.get(key)
        if hit is not None:
            return hit, mask
        with self.in_prologue():
            terms: List[str] = []
            for src, vals in ((self.part.lane, lane_vals), (self.part.warp, warp_vals)):
                i = 0
                while i < len(vals):
                    v = vals[i]
                    if not v:
                        i += 1
                        continue
                    if LM.is_pow2(v):
                        k = 1
                        while i + k < len(vals) and vals[i + k] == v << k:
                            k += 1
                        t = self.e.tmp("b32")
                        self.e("bfe.u32", t, src, str(i), str(k))
                        sh = LM.log2(v)
                        if sh:
                            t2 = self.e.tmp("b32")
                            self.e("shl.b32", t2, t, str(sh))
                            t = t2
                        terms.append(t)
                        i += k
                    else:
                        t = self.e.tmp("b32")
                        self.e("bfe.u32", t, src, str(i), "1")
                        t2 = self.e.tmp("b32")
                        self.e("mul.lo.u32", t2, t, str(v))
                        terms.append(t2)
                        i += 1
            acc = terms[0]
            for t in terms[1:]:
                n = self.e.tmp("b32")
                self.e("xor.b32", n, acc, t)
                acc = n
        self.part.cache[key] = acc
        self.pinned.add(acc)
        return acc, mask

    def thread_coord(self, m: LM.LinearMap, d: int) -> Tuple[Optional[str], int]:
        """The calling thread's part of the coordinate along dim d under layout m."""
        return self.thread_linear([b[d] for b in m.lane], [b[d] for b in m.warp])

    def owner_pred(self, m: LM.LinearMap) -> Optional[str]:
        """A predicate true for one thread of each group holding copies of the same elements
        (None when the layout has no copies)."""
        lm, wm = m.free_lane_mask(), m.free_warp_mask()
        if not lm and not wm:
            return None
        key = ("owner", lm, wm)
        hit = self.part.cache.get(key)
        if hit is not None:
            return hit
        with self.in_prologue():
            conds = []
            for src, mask in ((self.part.lane, lm), (self.part.warp, wm)):
                if mask:
                    t = self.e.tmp("b32")
                    self.e("and.b32", t, src, str(mask))
                    p = self.e.tmp("pred")
                    self.e("setp.eq.u32", p, t, "0")
                    conds.append(p)
            p = conds[0]
            if len(conds) == 2:
                q = self.e.tmp("pred")
                self.e("and.pred", q, conds[0], conds[1])
                p = q
        self.part.cache[key] = p
        return p

    def and_pred(self, a: Optional[str], b: Optional[str]) -> Optional[str]:
        if a is None:
            return b
        if b is None:
            return a
        p = self.e.tmp("pred")
        self.e("and.pred", p, a, b)
        return p

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
        key = ("smem",)
        hit = self.part.cache.get(key)
        if hit is None:
            with self.in_prologue():
                hit = self.e.tmp("b32")
                self.e("mov.u32", hit, SMEM_SYMBOL)
            self.part.cache[key] = hit
            self.pinned.add(hit)
        return hit

    def smem_addr(self, offset: int) -> str:
        """A register holding the shared address `offset` bytes into the dynamic shared memory."""
        base = self.smem_base()
        if offset == 0:
            return base
        key = ("smem_off", offset)
        hit = self.part.cache.get(key)
        if hit is None:
            with self.in_prologue():
                hit = self.e.tmp("b32")
                self.e("add.s32", hit, base, str(offset))
            self.part.cache[key] = hit
            self.pinned.add(hit)
        return hit

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
        tid = e.named("b32", "tid" if index < 0 else f"tid_p{index}")
        lane = e.named("b32", "lane" if index < 0 else f"lane_p{index}")
        warp = e.named("b32", "warp" if index < 0 else f"warp_p{index}")
        leader = e.named("pred", "leader" if index < 0 else f"leader_p{index}")
        part = Partition(index, num_warps, tid, lane, warp, leader, barrier_id, whole_cta)
        self.pinned.update((tid, lane, warp, leader))
        prev = getattr(self, "part", None)
        self.part = part
        with self.in_prologue():
            e("mov.u32", tid, "%tid.x")
            if first_warp:
                e("sub.s32", tid, tid, str(first_warp * 32))
            e("and.b32", lane, tid, "31")
            raw = e.tmp("b32")
            e("shr.u32", raw, tid, "5")
            # the warp index is the same in every lane: say so, so ptxas keeps it uniform
            e("shfl.sync.idx.b32", warp, raw, "0", "31", "-1")
            e("setp.eq.u32", leader, tid, "0")
        self.part = prev  # type: ignore[assignment]
        return part

    # -- the walk ---------------------------------------------------------------------------------
    def lower_ops(self, ops: Sequence[Operation]) -> None:
        for op in ops:
            self.lower_op(op)

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
        if not pairs:
            return
        dset = {d for d, _, _ in pairs}
        if any(s in dset for _, s, _ in pairs):
            tmp = []
            for d, s, k in pairs:
                if s in dset:
                    t = self.e.tmp(k)
                    self.mov(k, t, s)
                    tmp.append((d, t, k))
                else:
                    tmp.append((d, s, k))
            pairs = tmp
        for d, s, k in pairs:
            self.mov(k, d, s)

    def mov(self, kind: str, d: str, s: str) -> None:
        self.e(f"mov.{kind}" if kind == "pred" else f"mov.b{kind[1:]}", d, s)

    def flat_regs(self, x: Lowered) -> Tuple[List[str], List[str]]:
        """Registers and kinds of a lowered value (for copies)."""
        if isinstance(x, Scalar):
            return [x.reg], [reg_kind(x.elem)]
        if isinstance(x, Tensor):
            k = reg_kind(x.elem)
            return list(x.regs), [k] * len(x.regs)
        if isinstance(x, SmemView):
            regs, kinds = [x.base], ["b32"]
            if isinstance(x.origin, str):
                regs.append(x.origin)
                kinds.append("b32")
            return regs, kinds
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
            o = x.origin
            if isinstance(o, str):
                o = self.e.named("b32", hint + "_origin")
            return SmemView(self.e.named("b32", hint), x.elem, x.layout, x.storage_shape, x.perm, x.shape, x.buffers,
                            x.buffer_bytes, o, x.origin_coords)
        if isinstance(x, Barriers):
            return Barriers(self.e.named("b32", hint), x.count, x.array)
        if isinstance(x, Desc):
            return Desc(self.e.named("b64", hint), x.dtype, x.param_index, x.swizzle, x.box)
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
        raise TLXCompileError(f"internal: no home registers for {t}")

    # -- driver -----------------------------------------------------------------------------------
    _HOPPER_ONLY = ("tlx.async_dot", "tlx.async_dot_wait", "tlx.tma_load", "tlx.tma_store", "tlx.tma_store_wait",
                    "tlx.tma_prefetch", "tlx.async_bulk_load", "tlx.async_store", "tlx.barrier_expect_bytes",
                    "tlx.fence_async_shared", "tt.make_tensor_descriptor", "tt.dot", "tlx.cluster_cta_rank")

    def _check_target(self) -> None:
        """PTX is generated for sm_90a; an older target gets it only for ops that exist there."""
        cap = int(self.target[3:].rstrip("a"))
        if cap >= 90:
            return
        for op in self.func.iter_nested():  # type: ignore[union-attr]
            if op.name in self._HOPPER_ONLY or (op.name == "tlx.warp_specialize" and op.attrs.get("partition_registers")):
                raise TLXCompileError(f"{op.name} needs sm_90a (Hopper); the target is {self.target}", op.loc,
                                      hint="compile for target='sm_90a'")

    def run(self) -> Tuple[str, KernelABI]:
        self._check_target()
        f = self.func
        e = self.e
        body = f.regions[0].block  # type: ignore[union-attr]
        self._plan_warps()
        self.part = self.make_partition(-1, self.num_warps, 0, 0, True)
        self._params(body)
        start = len(e.code)
        self.lower_ops(body.ops)
        e.code[start:start] = self.part.prologue
        self.part.prologue = []
        e.eliminate_dead_code()
        return self._module_text(), self._abi()

    def _plan_warps(self) -> None:
        """Total warps of the CTA (default + worker partitions, padded to warpgroups)."""
        total = self.num_warps
        for op in self.func.iter_nested():  # type: ignore[union-attr]
            if op.name == "tlx.warp_specialize":
                from .lower_control import plan_partitions
                plan = plan_partitions(self, op)
                total = max(total, plan.total_warps)
        self.total_warps = total

    def _params(self, body) -> None:
        e = self.e
        names = self.func.attrs.get("arg_names") or []  # type: ignore[union-attr]
        for i, a in enumerate(body.args):
            pname = names[i] if i < len(names) else (a.name or f"arg{i}")
            pid = f"{self.name}_param_{i}"
            t = a.type
            hint = pname
            if isinstance(t, T.PointerType):
                r = e.named("b64", hint)
                e("ld.param.u64", r, f"[{pid}]")
                self.set(a, Scalar(r, t))
                self.params.append(ParamABI(pname, "pointer", TRITON_DTYPE[t.pointee.name], 8, 8))
            elif isinstance(t, T.ScalarType):
                if t.bits == 1:
                    r32 = e.tmp("b32")
                    e("ld.param.u32", r32, f"[{pid}]")
                    p = e.named("pred", hint)
                    e("setp.ne.u32", p, r32, "0")
                    self.set(a, Scalar(p, t))
                    self.params.append(ParamABI(pname, "scalar", "i1", 4, 4))
                elif t.is_float and t.bits == 16:
                    r = e.named("b16", hint)
                    e("ld.param.b16", r, f"[{pid}]")
                    self.set(a, Scalar(r, t))
                    self.params.append(ParamABI(pname, "scalar", TRITON_DTYPE[t.name], 2, 2))
                elif t.bits <= 32:
                    r32 = e.named("b32", hint)
                    e("ld.param.b32", r32, f"[{pid}]")
                    if t.bits < 32:
                        r = e.named("b16", hint + "_16")
                        e("cvt.u16.u32", r, r32)
                        self.set(a, Scalar(r, t))
                    else:
                        self.set(a, Scalar(r32, t))
                    self.params.append(ParamABI(pname, "scalar", TRITON_DTYPE[t.name], 4, 4))
                else:
                    r = e.named("b64", hint)
                    e("ld.param.b64", r, f"[{pid}]")
                    self.set(a, Scalar(r, t))
                    self.params.append(ParamABI(pname, "scalar", TRITON_DTYPE[t.name], 8, 8))
            elif isinstance(t, T.TensorDescType):
                r0 = e.tmp("b64")
                e("mov.b64", r0, pid)
                r = e.named("b64", hint)
                e("cvta.param.u64", r, r0)
                d = Desc(r, t, param_index=i)
                self.descs.append(d)
                self.set(a, d)
                self.params.append(ParamABI(pname, "tensordesc", TRITON_DTYPE[t.element.name], 128, 64))
            else:
                raise TLXCompileError(f"kernel parameter '{pname}' has a type ({t}) that cannot be passed to a kernel",
                                      self.func.loc)

    def _param_decl(self, i: int, p: ParamABI) -> str:
        pid = f"{self.name}_param_{i}"
        if p.kind == "tensordesc":
            return f"\t.param .align 64 .b8 {pid}[128]"
        if p.kind == "pointer":
            return f"\t.param .u64 .ptr .global .align 1 {pid}"
        if p.size == 2:
            return f"\t.param .b16 {pid}"
        if p.dtype in ("fp32",):
            return f"\t.param .f32 {pid}"
        if p.dtype in ("fp64",):
            return f"\t.param .f64 {pid}"
        return f"\t.param .b{p.size * 8} {pid}"

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
        for path, idx in sorted(e.files.items(), key=lambda kv: kv[1]):
            lines.append(f'.file {idx} "{path}"')
        if self.uses_smem:
            lines.append(f".extern .shared .align 1024 .b8 {SMEM_SYMBOL}[];")
        lines.append("")
        lines.append(f".visible .entry {self.name}(")
        params = self._final_params()
        lines.append(",\n".join(self._param_decl(i, p) for i, p in enumerate(params)))
        lines.append(")")
        lines.append(f".reqntid {self.total_warps * 32}")
        maxnreg = self._maxnreg()
        if maxnreg:
            lines.append(f".maxnreg {maxnreg}")
        lines.append("{")
        lines.extend(e.render_decls())
        lines.append("")
        lines.extend(code)
        if not code or code[-1].strip() != "ret;":
            lines.append("\tret;")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def _maxnreg(self) -> Optional[int]:
        if self.user_maxnreg:
            return self.user_maxnreg
        if self.setmaxnreg_used:
            # setmaxnreg only works under a register cap at entry: the even split of the file
            per = min(248, MAX_THREADS_REGS // (self.total_warps * 32))
            return per - per % 8
        return None

    def _abi(self) -> KernelABI:
        params = []
        for p in self._final_params():
            if p.kind == "tensordesc":
                d = next(x for x in self.descs if x.param_index is not None and self.params.index(p) == x.param_index)
                params.append(ParamABI(p.name, p.kind, p.dtype, p.size, p.align, p.hidden, self._tma_encoding(d)))
            else:
                params.append(p)
        return KernelABI(entry=self.name, params=tuple(params), threads_per_cta=self.total_warps * 32,
                         num_warps=self.num_warps, shared_bytes=int(self.m.attrs.get("shared_bytes", 0)),
                         cluster=tuple(self.m.attrs.get("cluster", (1, 1, 1))),  # type: ignore[arg-type]
                         scratch_bytes_per_program=self.global_scratch_per_program,
                         extra={"maxnreg": self._maxnreg(), "total_warps": self.total_warps})

    def _tma_encoding(self, d: Desc) -> TMAEncoding:
        t = d.dtype
        eb = max(1, t.element.bits // 8)
        if d.swizzle is None:
            # not used by a TMA op: encode it as the default layout of its block would be
            from ..passes.layouts import alloc_layout
            lay = alloc_layout(T.MemDescType(t.block_shape, t.element))
            sw = getattr(lay, "swizzle", 0)
            from .lower_async import tma_box
            box = tma_box(t.block_shape, eb, sw)
        else:
            sw, box = d.swizzle, d.box
        return TMAEncoding(TRITON_DTYPE[t.element.name], eb, tuple(t.block_shape), tuple(box), int(sw))


def lower_module(module: Module, target: str = "sm_90a", maxnreg: Optional[int] = None) -> Tuple[str, KernelABI]:
    """PTX text and ABI of a laid-out, allocated module."""
    from . import lower_arith, lower_async, lower_control, lower_memory, lower_tensor  # noqa: F401  (registrations)
    from . import lower_indexed, lower_warp  # noqa: F401  (registrations)
    return KernelLowering(module, target, maxnreg).run()

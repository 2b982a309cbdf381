"""Lowering of memory ops: global loads, stores and atomics; shared-memory allocations, views,
`local_store` / `local_load`; cp.async with commit and wait groups.

Global accesses are vectorized up to 16 bytes per thread where the layout gives a thread
consecutive elements and the axis analysis proves them contiguous, aligned and equally masked.
Shared accesses use the linear element → byte map of the buffer: one address per thread (XOR
of lane and warp offsets, computed once per partition) plus a constant per register group —
added when its bits do not meet the thread's, XORed when a swizzle makes them meet — and as
many registers per instruction as sit at consecutive addresses (up to 16 bytes).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, List, NamedTuple, Optional, Tuple

from ..errors import TLXCompileError
from ..ir import layouts as L
from ..ir import types as T
from ..ir.alias import Placement, placement
from ..ir.core import Operation, Value
from ..analysis import layout_math as LM
from .layout_rules import elem_bytes
from .ptx import address, braces
from .values import Barriers, Scalar, SmemView, Tensor, Token, reg_kind

if TYPE_CHECKING:
    from .lower import KernelLowering


# ---------------------------------------------------------------------------------------------
# packing registers into memory words
# ---------------------------------------------------------------------------------------------

def _width_ops(nbytes: int, eb: int) -> Tuple[str, int, str]:
    """(vector suffix, number of words, word type) for an access of `nbytes` bytes."""
    if eb == 8:
        return ("" if nbytes == 8 else ".v2"), nbytes // 8, "b64"
    if nbytes >= 4:
        n = nbytes // 4
        return ("" if n == 1 else f".v{n}"), n, "b32"
    if nbytes == 2:
        return "", 1, "b16"
    return "", 1, "b8"


def bool_byte(lw: KernelLowering, r: str) -> str:
    """A b16 register holding 1 or 0 for predicate r (a bool is stored as a byte)."""
    return lw.e.new("b16", "selp.u16", "1", "0", r)


def pack_words(lw: KernelLowering, regs: List[str], e, nbytes: int) -> Tuple[List[str], str]:
    """Registers of one vector access packed into memory words, and the word type."""
    em = lw.e
    eb = elem_bytes(e)
    _, n, wt = _width_ops(nbytes, eb)
    if reg_kind(e) == "pred":
        regs = [bool_byte(lw, r) for r in regs]
    if wt == "b64" or (wt == "b32" and eb == 4):
        return list(regs), wt
    if wt == "b16" and eb == 1:  # two bytes
        a = em.new("b16", "and.b16", regs[0], "255")
        return [em.new("b16", "or.b16", a, em.new("b16", "shl.b16", regs[1], "8"))], "b16"
    if wt in ("b16", "b8"):
        return [regs[0]], wt
    words = []
    per = 4 // eb
    for w in range(n):
        part = regs[w * per:(w + 1) * per]
        t = em.tmp("b32")
        if eb == 2:
            em("mov.b32", t, braces(part))
        else:  # four bytes
            acc = None
            for k, r in enumerate(part):
                x = em.new("b32", "cvt.u32.u16", r)
                acc = em.new("b32", "and.b32", x, "255") if acc is None else \
                    em.new("b32", "bfi.b32", x, acc, str(8 * k), "8")
            em("mov.b32", t, acc)
        words.append(t)
    return words, "b32"


def word_regs(lw: KernelLowering, e, nbytes: int) -> Tuple[List[str], str]:
    """Temporaries to load one vector access into (memory words)."""
    _, n, wt = _width_ops(nbytes, elem_bytes(e))
    if wt == "b8":
        return [lw.e.tmp("b16")], "b8"
    return [lw.e.tmp(wt) for _ in range(n)], wt


def unpack_words(lw: KernelLowering, words: List[str], wt: str, dsts: List[str], e) -> None:
    """Move loaded memory words into element registers."""
    em = lw.e
    eb = elem_bytes(e)
    kind = reg_kind(e)
    if kind == "pred":
        tmp = [em.tmp("b16") for _ in dsts]
        unpack_words(lw, words, wt, tmp, T.u8)
        for d, t in zip(dsts, tmp):
            em("setp.ne.b16", d, t, "0")
        return
    if wt == "b64" or (wt == "b32" and eb == 4):
        for d, w in zip(dsts, words):
            em(f"mov.{wt}", d, w)
        return
    if wt == "b8":
        em("mov.b16", dsts[0], words[0])
        return
    if wt == "b16":
        if eb == 2:
            em("mov.b16", dsts[0], words[0])
        else:
            em("and.b16", dsts[0], words[0], "255")
            em("shr.u16", dsts[1], words[0], "8")
        return
    per = 4 // eb
    for w, word in enumerate(words):
        part = dsts[w * per:(w + 1) * per]
        if eb == 2:
            em("mov.b32", braces(part), word)
        else:
            for k, d in enumerate(part):
                x = em.new("b32", "bfe.u32", word, str(8 * k), "8")
                em("cvt.u16.u32", d, x)


def _vec_text(regs: List[str]) -> str:
    return regs[0] if len(regs) == 1 else braces(regs)


def _ld_type(wt: str) -> str:
    """The type a load of words `wt` names (a single byte is loaded zero-extended)."""
    return "u8" if wt == "b8" else wt


# ---------------------------------------------------------------------------------------------
# shared memory: generic register <-> buffer access
# ---------------------------------------------------------------------------------------------

class MatrixPlan(NamedTuple):
    """How ldmatrix / stmatrix move a register tensor: `word_bits` register bits form one 32-bit
    word (1 for 16-bit elements, 2 for 8-bit), `sel` the register bits selecting matrices 1..3 of
    an x4 (x2, x1 when fewer), `lane_vals` the byte offset each lane bit adds to the row address a
    lane supplies (lane t gives row t % 8 of matrix t // 8), `trans` the .trans form."""

    sel: List[int]
    lane_vals: List[int]
    trans: bool
    word_bits: int

    @property
    def form(self) -> str:
        """The instructions' shape, matrix count and transpose (`m8n8.x4.trans`)."""
        return f"m8n8.x{1 << len(self.sel)}{'.trans' if self.trans else ''}"


def matrix_plan(eb: int, reg_off: List[int], lane_off: List[int], warp_off: List[int]) -> Optional[MatrixPlan]:
    """The 8x8-matrix instructions (16-bit cells; rows of 16 bytes, each row address supplied by
    one lane, every row 16-byte aligned) apply to a register tensor whose element -> byte map
    (`reg_off`, `lane_off`, `warp_off`: the byte offset of each register, lane and warp bit) is an
    mma fragment of the rows:

    * plain: the 4 bytes of a 32-bit word consecutive (register bit 0, +2, for 16-bit elements;
      bits 0-1, +1 +2, for 8-bit), lane bits 0-1 along one 16-byte row (+4, +8), lane bits 2-4
      down 8 rows — lane l holds the word at row l/4, bytes 4(l%4).. of each matrix;
    * `.trans` (16-bit only): the two halves of a word a row apart (register bit 0), lane bits 0-1
      down the rows (2 and 4 rows), lane bits 2-4 along one row (+2, +4, +8) — lane l holds the
      elements of column l/4 at rows 2(l%4) and 2(l%4)+1.

    The register bits after the word's select the matrices. Returns None when neither fits."""
    ro, lo = reg_off, lane_off
    if eb not in (1, 2) or len(lo) != 5 or any(x % 16 for x in warp_off):
        return None
    w = 2 // eb
    if len(ro) >= w and all(ro[i] == eb << i for i in range(w)) and lo[0] == 4 and lo[1] == 8:
        rows, trans = [lo[2], lo[3], lo[4]], False
    elif eb == 2 and ro and list(lo[2:5]) == [2, 4, 8]:
        rows, trans = [ro[0], lo[0], lo[1]], True
    else:
        return None
    if any(x % 16 or not x for x in rows) or any(x % 16 for x in ro[w:]) or len(set(rows)) != 3:
        return None
    sel = list(range(w, len(ro)))[:2]
    lane_vals = rows + [ro[k] for k in sel] + [0] * (2 - len(sel))
    return MatrixPlan(sel, lane_vals, trans, w)


class SmemAccess:
    """The addresses of every register group of a tensor with layout `m` in view `view`."""

    def __init__(self, lw: KernelLowering, view: SmemView, m: LM.LinearMap, elem, max_bytes: int = 16):
        self.lw = lw
        self.view = view
        self.eb = view.elem_bytes if reg_kind(elem) != "pred" else 1
        self.reg_off = [view.element_bases(b) for b in m.reg]
        self.lane_off = [view.element_bases(b) for b in m.lane]
        self.warp_off = [view.element_bases(b) for b in m.warp]
        self.padding = view.smap().padding
        for sh, pad in self.padding:
            # a vector must not straddle a padding gap, and the gaps keep only pad's alignment
            max_bytes = min(max_bytes, 1 << sh, pad & -pad)
        vec = LM.contiguous_regs(self.reg_off, self.eb, max_bytes)
        # a vector is one aligned run of bytes only if nothing else the address is XORed with (the
        # other registers, the lane, the warp, the view's origin) touches its low bits: a swizzle
        # finer than the vector permutes the elements inside it
        others = self.lane_off + self.warp_off + [self._origin_bits()]
        while vec > 1:
            low = vec * self.eb - 1
            if not any(o & low for o in self.reg_off[LM.log2(vec):] + others):
                break
            vec //= 2
        self.vec = vec
        self.K = 0
        self._thread(self.lane_off)

    def _origin_bits(self) -> int:
        """Bits the view's origin may have: the origin itself when static; for a dynamic sub-slice,
        the offsets of the coordinate bits at and above the view's extent (slices start at
        multiples of their shape), OR-ed."""
        view = self.view
        if isinstance(view.origin, int):
            return view.origin
        smap = view.smap()
        shape = view.shape[1:] if view.buffers else view.shape
        bits = 0
        for extent, sd in zip(shape, view.perm):
            for b in smap.bases[sd][LM.log2(extent):]:
                bits |= b
        return bits

    def _thread(self, lane_vals) -> None:
        """The per-thread address part from lane values `lane_vals` (and the warp offsets)."""
        lw, view = self.lw, self.view
        self.t, self.tmask = lw.thread_linear(lane_vals, self.warp_off)
        origin = view.origin
        if isinstance(origin, int):
            self.K = origin
        elif origin:
            self.t = lw.e.new("b32", "mov.b32", origin) if self.t is None else \
                lw.e.new("b32", "xor.b32", self.t, origin)
            self.tmask = 0xFFFFFFFF
        self.base_plus_t = None

    def matrix_plan(self) -> Optional[MatrixPlan]:
        """ldmatrix / stmatrix for this access (see `matrix_plan`), with the thread part switched
        to the row addresses; None when not applicable."""
        if (isinstance(self.view.origin, int) and self.view.origin % 16) or self.padding:
            return None
        plan = matrix_plan(self.eb, self.reg_off, self.lane_off, self.warp_off)
        if plan is None:
            return None
        self._thread(plan.lane_vals)
        return plan

    def address(self, r0: int) -> str:
        """The address operand ("[reg+imm]") of the register group starting at register r0."""
        ro = self.K
        for i, off in enumerate(self.reg_off):
            if r0 >> i & 1:
                ro ^= off
        rx, ra = ro & self.tmask, ro & ~self.tmask
        em = self.lw.e
        base = self.view.base
        if self.padding:
            # thread and register parts have disjoint bits, so their sum never carries and each
            # is padded on its own: the register part at compile time
            ra = self.view.smap().padded(ra)
        if self.t is None:
            return address(base, ra)
        if rx == 0:
            if self.base_plus_t is None:
                self.base_plus_t = em.new("b32", "add.s32", base, pad_reg(self.lw, self.t, self.padding))
            a = self.base_plus_t
        else:
            xr = em.new("b32", "xor.b32", self.t, str(rx))
            a = em.new("b32", "add.s32", base, pad_reg(self.lw, xr, self.padding))
        return address(a, ra)


def pad_reg(lw: KernelLowering, linear: str, padding) -> str:
    """A register holding the padded byte offset of the linear offset in register `linear`
    (`SharedMap.padded` at run time); `linear` itself when the layout has no padding."""
    out = linear
    for sh, pad in padding:
        q = lw.e.new("b32", "shr.u32", linear, str(sh))
        out = lw.e.new("b32", "mad.lo.u32", q, str(pad), out)
    return out


def _matrix_groups(n: int, sel: List[int], word_bits: int = 1):
    """Register groups of one ldmatrix / stmatrix: (first register, first register of each
    matrix's word); the word's own registers are the next 2 ** word_bits - 1."""
    fixed = ((1 << word_bits) - 1) | sum(1 << k for k in sel)
    for g in range(n):
        if g & fixed:
            continue
        yield g, [g | sum(1 << k for b, k in enumerate(sel) if j >> b & 1) for j in range(1 << len(sel))]


def smem_store(lw: KernelLowering, view: SmemView, x: Tensor) -> None:
    """Store every register of tensor x into the view (stmatrix for mma fragments of 16-bit
    elements, else st.shared, vectorized)."""
    acc = SmemAccess(lw, view, x.lmap, x.elem)
    plan = acc.matrix_plan() if reg_kind(x.elem) == "b16" else None
    if plan is not None:
        n = 1 << plan.word_bits
        for g, mats in _matrix_groups(len(x.regs), plan.sel, plan.word_bits):
            words = [pack_words(lw, x.regs[r:r + n], x.elem, 4)[0][0] for r in mats]
            # ldmatrix / stmatrix take a vector operand even for one matrix ({%r}, not %r)
            lw.e(f"stmatrix.sync.aligned.{plan.form}.shared.b16", acc.address(g), braces(words))
        return
    v = acc.vec
    nbytes = v * acc.eb
    for r0 in range(0, len(x.regs), v):
        words, wt = pack_words(lw, x.regs[r0:r0 + v], x.elem, nbytes)
        vec, _, _ = _width_ops(nbytes, acc.eb)
        lw.e(f"st.shared{vec}.{wt}", acc.address(r0), _vec_text(words))


def smem_load(lw: KernelLowering, view: SmemView, m: LM.LinearMap, elem, hint: str) -> List[str]:
    """Load a tensor with layout m from the view (ld.shared, vectorized); its registers."""
    regs = lw.e.named_array(reg_kind(elem), m.num_regs, hint)
    acc = SmemAccess(lw, view, m, elem)
    plan = acc.matrix_plan() if reg_kind(elem) == "b16" else None
    if plan is not None:
        n = 1 << plan.word_bits
        for g, mats in _matrix_groups(len(regs), plan.sel, plan.word_bits):
            words = [lw.e.tmp("b32") for _ in mats]
            lw.e(f"ldmatrix.sync.aligned.{plan.form}.shared.b16", braces(words), acc.address(g))
            for w, r in zip(words, mats):
                unpack_words(lw, [w], "b32", regs[r:r + n], elem)
        return regs
    v = acc.vec
    nbytes = v * acc.eb
    for r0 in range(0, len(regs), v):
        words, wt = word_regs(lw, elem, nbytes)
        vec, _, _ = _width_ops(nbytes, acc.eb)
        lw.e(f"ld.shared{vec}.{_ld_type(wt)}", _vec_text(words), acc.address(r0))
        unpack_words(lw, words, wt, regs[r0:r0 + v], elem)
    return regs


def scratch_view(lw: KernelLowering, op: Operation, shape: Tuple[int, ...], elem) -> SmemView:
    """A view of an op's scratch, laid out so that both sides of a conversion access it with wide,
    conflict-free vectors (NVMMA-style 16-byte chunk swizzle when rows are long enough)."""
    base = lw.scratch(op)
    e = elem if isinstance(elem, T.ScalarType) and elem.bits > 1 else (T.u64 if isinstance(elem, T.PointerType) else T.u8)
    row_bytes = shape[-1] * e.bytes
    lay: L.SharedLayout
    if len(shape) >= 2 and row_bytes >= 16:
        sw = next((s for s in (128, 64, 32) if row_bytes % s == 0 and math.prod(shape[:-1]) >= 8), 0)
        lay = L.NVMMASharedLayout(sw, e.bits, False)
    else:
        lay = L.SwizzledSharedLayout(1, 1, 1, tuple(range(len(shape) - 1, -1, -1)))
    return SmemView(base, e, lay, tuple(shape), tuple(range(len(shape))), tuple(shape))


# ---------------------------------------------------------------------------------------------
# allocations and views
# ---------------------------------------------------------------------------------------------

def view_of_alloc(lw: KernelLowering, base: str, t: T.MemDescType) -> SmemView:
    shape = t.buffer_shape
    if t.layout is None:
        raise TLXCompileError(f"buffer {t} has no shared layout: run the layout pass before code generation")
    return SmemView(base, t.element, t.layout, tuple(shape), tuple(range(len(shape))), tuple(t.shape),
                    t.buffers, t.nbytes // max(t.buffers, 1))  # one buffer's bytes, padding included


def _local_alloc(lw: KernelLowering, op: Operation) -> None:
    t = op.result.type
    if "offset" not in op.attrs:
        raise TLXCompileError("internal: local_alloc has no offset (run shared-memory allocation first)", op.loc)
    base = lw.smem_addr(int(op.attrs["offset"]))
    view = view_of_alloc(lw, base, t)
    lw.set(op.result, view)
    src = op.arg("src")
    if src is not None:
        smem_store(lw, view, lw.tensor(src))


def index_u32(lw: KernelLowering, reg: str, e: T.ScalarType) -> str:
    """An index register as 32 bits (only its low bits are used)."""
    k = reg_kind(e)
    if k == "b32":
        return reg
    return lw.e.new("b32", "cvt.u32.u64" if k == "b64" else "cvt.u32.u16", reg)


def _add_index(lw: KernelLowering, base: str, idx_v: Value, stride: int) -> str:
    """base + idx * stride (a constant index folds)."""
    info = lw.axis.info(idx_v)
    if info.constant is not None:
        off = info.constant * stride
        return lw.e.new("b32", "add.s32", base, str(off)) if off else base
    idx = index_u32(lw, lw.scalar(idx_v), idx_v.type)  # type: ignore[arg-type]
    return lw.e.new("b32", "mad.lo.s32", idx, str(stride), base)


def _memdesc_index(lw: KernelLowering, op: Operation) -> None:
    src = lw.val(op.arg("src"))
    idx = op.arg("index")
    if isinstance(src, Barriers):
        lw.set(op.result, Barriers(_add_index(lw, src.addr, idx, 8), 1, False))
        return
    if not isinstance(src, SmemView):
        raise TLXCompileError("internal: memdesc_index of a non-buffer", op.loc)
    if src.buffers and src.slab_digits:
        base = _alias_slab(lw, src, idx)
        lw.set(op.result, replace(src, base=base, shape=tuple(src.shape[1:]), buffers=0, buffer_bytes=0,
                                  slab_digits=()))
        return
    if src.buffers:
        base = _add_index(lw, src.base, idx, src.buffer_bytes)
        lw.set(op.result, replace(src, base=base, shape=tuple(src.shape[1:]), buffers=0, buffer_bytes=0))
        return
    if len(src.shape) == 1:
        # an element view of a 1-D buffer
        if not (isinstance(src.layout, L.SwizzledSharedLayout) and src.layout.vec == 1 and src.layout.max_phase == 1):
            raise TLXCompileError("indexing a 1-D buffer needs its unswizzled layout", op.loc)
        base = _add_index(lw, src.base, idx, src.elem_bytes)
        lw.set(op.result, SmemView(base, src.elem, src.layout, (1,), (0,), (1,), 0, 0, src.origin, None))
        return
    raise TLXCompileError("memdesc_index needs a buffer array (or a 1-D buffer)", op.loc)


def _alias_slab(lw: KernelLowering, src: SmemView, idx_v: Value) -> str:
    """The address of buffer `idx` of an unevenly placed alias: base + the mixed-radix digits of
    the index times their strides (`compiler/ir/alias.py`)."""
    p = Placement(0, (src.buffer_bytes,) + tuple(s for _, s in src.slab_digits), tuple(r for r, _ in src.slab_digits))
    info = lw.axis.info(idx_v)
    em = lw.e
    if info.constant is not None:
        off = p.slab_offset(info.constant)
        return em.new("b32", "add.s32", src.base, str(off)) if off else src.base
    addr = src.base
    rest = index_u32(lw, lw.scalar(idx_v), idx_v.type)  # type: ignore[arg-type]
    for radix, stride in reversed(src.slab_digits):  # innermost digit first
        digit = em.new("b32", "rem.u32", rest, str(radix))
        rest = em.new("b32", "div.u32", rest, str(radix))
        addr = em.new("b32", "mad.lo.s32", digit, str(stride), addr)
    return em.new("b32", "mad.lo.s32", rest, str(src.buffer_bytes), addr)


def _local_alias(lw: KernelLowering, op: Operation) -> None:
    """Buffers placed inside an aliased allocation: the view starts at the placement's offset;
    evenly spaced buffers index like any array, others through their digits."""
    src = lw.val(op.arg("src"))
    # the source is a whole allocation (the front end checks): a storage_alias_spec's bytes, or the
    # buffer array of a local_alloc (`local_alloc(..., reuse=buf)`), whose view starts at its base
    if not isinstance(src, SmemView) or src.origin != 0:
        raise TLXCompileError("internal: local_alias of something other than a whole allocation", op.loc)
    t = op.result.type
    p = placement(op.attrs)
    base = lw.e.new("b32", "add.s32", src.base, str(p.offset)) if p.offset else src.base
    view = view_of_alloc(lw, base, t)
    stride = p.uniform_stride()
    if stride:
        view = replace(view, buffer_bytes=stride)
    else:
        view = replace(view, buffer_bytes=p.strides[0], slab_digits=tuple(zip(p.radices, p.strides[1:])))
    lw.set(op.result, view)


def _memdesc_subslice(lw: KernelLowering, op: Operation) -> None:
    src: SmemView = lw.val(op.arg("src"))  # type: ignore[assignment]
    offs = list(op.attrs["static_offsets"])
    dyn = list(op.group("offsets"))
    rshape = tuple(op.result.type.shape)
    if src.buffers:
        raise TLXCompileError("sub-slice a single buffer (index the array first)", op.loc)
    smap = src.smap()
    static = [0] * len(offs)
    dyn_terms = []
    k = 0
    for d, o in enumerate(offs):
        if o == -1:
            dyn_terms.append((d, dyn[k]))
            k += 1
        else:
            if o % rshape[d]:
                raise TLXCompileError(f"sub-slice offset {o} along dim {d} is not a multiple of the slice size "
                                      f"{rshape[d]}", op.loc, hint="slice at multiples of the slice shape")
            static[d] = o
    so = src.storage_coord(tuple(static))
    origin = src.origin
    K = smap.offset(so)
    if isinstance(origin, int):
        origin = origin ^ K
    elif K:
        origin = lw.e.new("b32", "xor.b32", origin, str(K))
    em = lw.e
    for d, v in dyn_terms:
        # XOR of the byte offsets of the offset's bits (the offset is a multiple of the slice size)
        sd = src.perm[d]
        r = lw.scalar(v)
        for bit in range(LM.log2(rshape[d]), LM.log2(src.storage_shape[sd])):
            unit = [0] * len(src.storage_shape)
            unit[sd] = 1 << bit
            boff = smap.offset(tuple(unit))
            b = em.new("b32", "bfe.u32", r, str(bit), "1")
            origin = em.new("b32", "xor.b32", em.new("b32", "mul.lo.u32", b, str(boff)), str(origin))
    coords = None
    if not dyn_terms and src.origin_coords is not None:
        coords = tuple(a + b for a, b in zip(src.origin_coords if len(src.origin_coords) == len(so) else (0,) * len(so), so))
    lw.set(op.result, replace(src, shape=rshape, origin=origin, origin_coords=coords))


def _memdesc_trans(lw: KernelLowering, op: Operation) -> None:
    src: SmemView = lw.val(op.arg("src"))  # type: ignore[assignment]
    order = list(op.attrs["order"])
    if src.buffers:
        raise TLXCompileError("transpose a single buffer (index the array first)", op.loc)
    lw.set(op.result, replace(src, perm=tuple(src.perm[o] for o in order), shape=tuple(src.shape[o] for o in order)))


def _memdesc_reinterpret(lw: KernelLowering, op: Operation) -> None:
    src = lw.val(op.arg("src"))
    t = op.result.type
    if isinstance(src, Barriers):
        lw.set(op.result, src)
        return
    if not isinstance(src, SmemView) or (src.origin != 0):
        raise TLXCompileError("reinterpret a whole buffer (not a sub-slice)", op.loc)
    if isinstance(t, T.BarrierType):
        lw.set(op.result, Barriers(src.base, t.count, t.array))
        return
    lw.set(op.result, view_of_alloc(lw, src.base, t))


def _local_store(lw: KernelLowering, op: Operation) -> None:
    smem_store(lw, lw.val(op.arg("dst")), lw.tensor(op.arg("src")))  # type: ignore[arg-type]


def _local_load(lw: KernelLowering, op: Operation) -> None:
    view: SmemView = lw.val(op.arg("src"))  # type: ignore[assignment]
    t = op.result.type
    m = lw.lmap(t)
    regs = smem_load(lw, view, m, t.element, lw.hint(op.result, "ld"))
    lw.set(op.result, Tensor(regs, m, t.element))


# ---------------------------------------------------------------------------------------------
# global memory
# ---------------------------------------------------------------------------------------------

def global_vec(lw: KernelLowering, ptr_v: Value, m: LM.LinearMap, eb: int, mask_v: Optional[Value]) -> int:
    """Registers per global access: the layout's consecutive elements that the axis analysis
    proves contiguous, aligned and equally masked, up to 16 bytes."""
    if not m.reg:
        return 1
    b0 = m.reg[0]
    nz = [d for d, x in enumerate(b0) if x]
    if len(nz) != 1 or b0[nz[0]] != 1:
        return 1
    d = nz[0]
    k = 1
    while k < len(m.reg) and m.reg[k] == tuple((1 << k) if i == d else 0 for i in range(m.rank)):
        k += 1
    return max(1, min(1 << k, lw.axis.vector_elems(ptr_v, d, eb, mask_v), max(1, 16 // eb)))


def _regs_of(lw: KernelLowering, v: Optional[Value], n: int) -> Optional[List[str]]:
    return None if v is None else lw.regs(v, n)


def global_access(lw: KernelLowering, ptr_v: Value, mask_v: Optional[Value], eb: int):
    """(layout or None for a scalar pointer, registers, registers per vector, pointer registers,
    mask registers or None) of a global load or store."""
    ptr = lw.val(ptr_v)
    m = ptr.lmap if isinstance(ptr, Tensor) else None
    n = m.num_regs if m is not None else 1
    v = global_vec(lw, ptr_v, m, eb, mask_v) if m is not None else 1
    return m, n, v, lw.regs(ptr_v, n), _regs_of(lw, mask_v, n)


def _load(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    ptr_v, mask_v, other_v = op.arg("ptr"), op.arg("mask"), op.arg("other")
    t = op.result.type
    e = T.element_of(t)
    eb = elem_bytes(e)
    cache = op.attrs.get("cache", "")
    cmod = "." + cache if cache in ("ca", "cg", "cs", "cv", "lu") else ""
    vol = ".volatile" if op.attrs.get("volatile") else ""
    m, n, v, ptrs, masks = global_access(lw, ptr_v, mask_v, eb)
    regs = em.named_array(reg_kind(e), n, lw.hint(op.result, "ld"))
    others = _regs_of(lw, other_v, n)
    nbytes = v * eb
    for r0 in range(0, n, v):
        words, wt = word_regs(lw, e, nbytes)
        if others is not None:
            # masked-off elements read `other`: start from it, the load overwrites the rest
            ow, _ = pack_words(lw, others[r0:r0 + v], e, nbytes)
            for w, o in zip(words, ow):
                em(f"mov.{wt if wt != 'b8' else 'b16'}", w, o)
        vec, _, _ = _width_ops(nbytes, eb)
        em(f"ld{vol}.global{cmod}{vec}.{_ld_type(wt)}", _vec_text(words), f"[{ptrs[r0]}]",
           pred=masks[r0] if masks else None)
        unpack_words(lw, words, wt, regs[r0:r0 + v], e)
    lw.set(op.result, Tensor(regs, m, e) if m is not None else Scalar(regs[0], e))  # type: ignore[arg-type]


def _store(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    ptr_v, val_v, mask_v = op.arg("ptr"), op.arg("value"), op.arg("mask")
    e = T.element_of(val_v.type)
    eb = elem_bytes(e)
    m, n, v, ptrs, masks = global_access(lw, ptr_v, mask_v, eb)
    vals = lw.regs(val_v, n)
    # a scalar store is made by the leader, a tensor's by one thread of each group holding copies
    owner = lw.owner_pred(m) if m is not None else lw.part.leader
    nbytes = v * eb
    for r0 in range(0, n, v):
        words, wt = pack_words(lw, vals[r0:r0 + v], e, nbytes)
        p = lw.and_pred(owner, masks[r0] if masks else None)
        vec, _, _ = _width_ops(nbytes, eb)
        em(f"st.global{vec}.{wt}", f"[{ptrs[r0]}]", _vec_text(words), pred=p)


_ATOM = {"add": "add", "fadd": "add", "max": "max", "min": "min", "umax": "max", "umin": "min", "and": "and",
         "or": "or", "xor": "xor", "xchg": "exch"}


def _atom_type(kind: str, e: T.ScalarType, loc) -> str:
    if kind == "fadd":
        if e.name in ("f32", "f64"):
            return e.name
        if e.name in ("f16", "bf16"):
            return "noftz." + e.name
        raise TLXCompileError(f"atomic fadd on {e.name} is not supported", loc)
    if e.is_float:
        if kind == "xchg":
            return f"b{e.bits}"
        raise TLXCompileError(f"atomic {kind} on {e.name} is not supported", loc, hint="use an integer type")
    if e.bits not in (32, 64):
        raise TLXCompileError(f"atomics need 32- or 64-bit elements, got {e.name}", loc)
    if kind in ("and", "or", "xor", "xchg"):
        return f"b{e.bits}"
    if kind in ("umax", "umin"):
        return f"u{e.bits}"
    if kind in ("max", "min"):
        return f"{'s' if e.is_signed else 'u'}{e.bits}"
    return f"u{e.bits}"


def _sem_scope(op: Operation) -> str:
    sem, scope = op.attrs.get("sem"), op.attrs.get("scope")
    sem = sem if sem in ("acq_rel", "acquire", "release", "relaxed") else "acq_rel"
    return f".{sem}.{scope if scope in ('gpu', 'cta', 'sys') else 'gpu'}"


def _atomic(lw: KernelLowering, op: Operation) -> None:
    """tt.atomic_rmw and tt.atomic_cas; a used scalar result goes through scratch to every thread."""
    em = lw.e
    cas = op.name == "tt.atomic_cas"
    res = op.result
    e: T.ScalarType = T.element_of(res.type)  # type: ignore[assignment]
    if cas:
        if e.bits not in (32, 64):
            raise TLXCompileError("atomic_cas needs 32- or 64-bit elements", op.loc)
        ins = f"atom{_sem_scope(op)}.global.cas.b{e.bits}"
        operand_vals = [op.arg("cmp"), op.arg("value")]
    else:
        kind = op.attrs["op"]
        ins = f"atom{_sem_scope(op)}.global.{_ATOM[kind]}.{_atom_type(kind, e, op.loc)}"
        operand_vals = [op.arg("value")]
    m, n, _, ptrs, masks = global_access(lw, op.arg("ptr"), op.arg("mask") if not cas else None, e.bytes)
    regs = em.named_array(reg_kind(e), n, lw.hint(res, "old"))
    # a scalar atomic is made by the leader, a tensor's by one thread of each group holding copies
    owner = lw.owner_pred(m) if m is not None else lw.part.leader
    ops = [lw.regs(v, n) for v in operand_vals]
    for i in range(n):
        p = lw.and_pred(owner, masks[i] if masks else None)
        em(ins, regs[i], f"[{ptrs[i]}]", *[o[i] for o in ops], pred=p)
    used = bool(res.uses)
    if m is None:
        if used:
            s = lw.scratch(op)
            em(f"st.shared.b{e.bits}", f"[{s}]", regs[0], pred=lw.part.leader)
            lw.part_barrier()
            regs = [em.named(reg_kind(e), lw.hint(res, "old"))]
            em(f"ld.shared.b{e.bits}", regs[0], f"[{s}]")
        lw.set(res, Scalar(regs[0], e))
        return
    if used and (m.free_lane_mask() or m.free_warp_mask()):
        if m.free_warp_mask():
            raise TLXCompileError("the result of this atomic is needed by warps that hold copies of its elements",
                                  op.loc, hint="use a tensor with at least as many elements as the threads")
        src = em.new("b32", "and.b32", lw.part.lane, str(31 & ~m.free_lane_mask()))
        for i in range(n):
            if e.bits == 32:
                em("shfl.sync.idx.b32", regs[i], regs[i], src, "31", "-1")
            else:
                lo, hi = em.tmp("b32"), em.tmp("b32")
                em("mov.b64", braces([lo, hi]), regs[i])
                em("shfl.sync.idx.b32", lo, lo, src, "31", "-1")
                em("shfl.sync.idx.b32", hi, hi, src, "31", "-1")
                em("mov.b64", regs[i], braces([lo, hi]))
    lw.set(res, Tensor(regs, m, e))


# ---------------------------------------------------------------------------------------------
# cp.async
# ---------------------------------------------------------------------------------------------

def _async_load(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    src_v, mask_v, other_v = op.arg("src"), op.arg("mask"), op.arg("other")
    view: SmemView = lw.val(op.arg("dst"))  # type: ignore[assignment]
    if other_v is not None:
        cv = other_v.defining_op
        if not (cv is not None and cv.name == "arith.constant" and cv.attrs.get("value") in (0, 0.0)):
            raise TLXCompileError("cp.async fills masked-off elements with zeros only", op.loc,
                                  hint="drop other=, or use tl.load + local_store")
    ptr = lw.val(src_v)
    if not isinstance(ptr, Tensor):
        raise TLXCompileError("async_load needs a tensor of pointers", op.loc)
    m = ptr.lmap
    e = view.elem
    eb = e.bytes
    gv = global_vec(lw, src_v, m, eb, mask_v)
    acc = SmemAccess(lw, view, m, e)
    v = min(gv, acc.vec)
    nbytes = v * eb
    if nbytes < 4:
        raise TLXCompileError(f"cp.async moves 4, 8 or 16 bytes per thread, but only {nbytes} contiguous aligned "
                              "bytes could be proven", op.loc,
                              hint="make the contiguous dimension's pointers aligned (tl.multiple_of / divisibility "
                                   "of the base and strides)")
    masks = _regs_of(lw, mask_v, len(ptr.regs))
    owner = lw.owner_pred(m)
    cmod = ".cg" if nbytes == 16 else ".ca"
    for r0 in range(0, len(ptr.regs), v):
        addr = acc.address(r0)
        # a masked-off copy reads 0 bytes (and fills the rest with zeros)
        src_size = [em.new("b32", "selp.b32", str(nbytes), "0", masks[r0])] if masks is not None else []
        em(f"cp.async{cmod}.shared.global", addr, f"[{ptr.regs[r0]}]", str(nbytes), *src_size, pred=owner)
    lw.set(op.result, Token())


def _commit(lw: KernelLowering, op: Operation) -> None:
    lw.e("cp.async.commit_group")
    lw.set(op.result, Token())


def _wait(lw: KernelLowering, op: Operation) -> None:
    lw.e("cp.async.wait_group", str(int(op.attrs["pendings"])))
    lw.set(op.result, Token())


#: op name -> its lowering (lower.py merges the tables of the lower_* modules)
LOWERINGS = {
    "tlx.local_alloc": _local_alloc, "tlx.memdesc_index": _memdesc_index, "tlx.memdesc_subslice": _memdesc_subslice,
    "tlx.memdesc_trans": _memdesc_trans, "tlx.memdesc_reinterpret": _memdesc_reinterpret,
    "tlx.local_alias": _local_alias,
    "tlx.local_store": _local_store, "tlx.local_load": _local_load, "tt.load": _load, "tt.store": _store,
    "tt.atomic_rmw": _atomic, "tt.atomic_cas": _atomic, "tlx.async_load": _async_load,
    "tlx.async_commit_group": _commit, "tlx.async_wait_group": _wait,
}

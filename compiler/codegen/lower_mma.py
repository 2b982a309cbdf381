"""Lowering of the register-operand `tt.dot`s that LowerDot leaves (compiler/passes/lower_dot.py
picks wgmma or not): ``mma.sync`` on an `#mma<version=2>` accumulator, and the FMA loop on a
blocked one (fp32 operands with ``input_precision = "ieee"``, fp64 operands).

**mma.sync** (Triton's MMAv2): the accumulator is a grid of m16n8 tiles per warp (warps along M
and N as the layout's `wpc`), operand A in `#dotop<idx=0>` and B in `#dotop<idx=1>` registers —
exactly the PTX fragments of ``mma.sync.aligned.m16n8kK.row.col``: k16 for fp16 / bf16, k8 for
tf32 (fp32 operands), k32 for int8 and fp8 (e4m3 / e5m2, any pairing; sm_89+). Per instruction a
thread gives four 32-bit words of A (rows r, r+8 x K halves), two of B and four accumulator
registers (f32 / s32; two f16x2 words for an f16 accumulator of fp16 or fp8 operands). One
instruction per m16n8 tile and K step, the accumulator chained through the K steps; A words are
packed once per (M tile, K step) and reused across N, B words once per (K step, N tile). Tiles
smaller than an instruction (M < 16, N < 8) run padded: the layouts give the rows and columns
past the tensor to lanes that hold copies, a missing register half of a fragment reads zeros and
its results are dropped. The accumulator is updated in place when nothing reads it afterwards.

The operands arrive in registers: the layout pass reads a `tlx.local_load` of a buffer straight
into the operand layout (ldmatrix, `.trans` for a K x N B of 16-bit elements) and converts
anything else through scratch shared memory (`tt.convert_layout`, generic proxy). mma.sync itself
touches no shared memory and no async proxy: the op catalogue gives `tt.dot` no memory effects,
and the fence passes never fence it.

**FMA** (fp32 with ``input_precision = "ieee"``, fp64): each thread owns accumulator elements of a
blocked layout and holds the matching rows of A and columns of B for the whole K (`#dotop` with a
blocked parent); one ``fma.rn.f32`` (``.f64``) per element and K step, in K order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Tuple

from ..analysis import layout_math as LM
from ..errors import TLXCompileError
from ..ir import layouts as L
from ..ir import types as T
from ..ir.core import Operation
from .ptx import braces
from .values import Tensor

if TYPE_CHECKING:
    from .lower import KernelLowering

# operand element -> its mma.sync type name
_MMA_IN = {"f16": "f16", "bf16": "bf16", "f32": "tf32", "i8": "s8", "f8e4m3": "e4m3", "f8e5m2": "e5m2"}


def mma_sync_opcode(a: T.ScalarType, b: T.ScalarType, acc: T.ScalarType, loc=None) -> str:
    """The mma.sync opcode for operand types a, b and accumulator `acc`."""
    if a.name not in _MMA_IN or b.name not in _MMA_IN:
        raise TLXCompileError(f"mma.sync has no {a.name} x {b.name} form", loc,
                              hint="use fp16, bf16, fp32 (tf32), int8 or fp8 operands")
    ta, tb = _MMA_IN[a.name], _MMA_IN[b.name]
    fp8 = ta in ("e4m3", "e5m2")
    if ta != tb and not (fp8 and tb in ("e4m3", "e5m2")):
        raise TLXCompileError(f"mma.sync operands must share a type (fp8 kinds may mix), got {a.name} and {b.name}",
                              loc)
    if ta == "s8":
        dt = "s32"
    elif acc.name == "f16" and (ta == "f16" or fp8):
        dt = "f16"
    elif acc.name == "f32":
        dt = "f32"
    else:
        raise TLXCompileError(f"mma.sync cannot accumulate {a.name} operands in {acc.name}", loc,
                              hint="accumulate in float32 (float16 only for fp16 or fp8 operands)")
    if (ta == "s8") != (acc.name == "i32"):
        raise TLXCompileError(f"an int8 dot accumulates in int32, not {acc.name}", loc)
    return f"mma.sync.aligned.m16n8k{256 // a.bits}.row.col.{dt}.{ta}.{tb}.{dt}"


def _check_layout(t: Tensor, want: L.DistributedLayout, shape, what: str, loc) -> None:
    if t.lmap != LM.to_map(want, tuple(shape)):
        raise TLXCompileError(f"internal: tt.dot operand {what} is not in the layout {want} (the layout pass "
                              "should have converted it)", loc)


class _Words:
    """32-bit words of an operand fragment, packed once and reused."""

    def __init__(self, lw: KernelLowering, t: Tensor, kw: int):
        self.lw, self.t, self.kw = lw, t, kw
        self.index = t.lmap.reg_index()
        self.cache: Dict[Tuple[int, int], str] = {}

    def word(self, coord: Tuple[int, int], step: Tuple[int, int]) -> str:
        """The word of the `kw` elements at `coord`, `coord` + `step`, ... (thread 0's view); a
        zero word when the fragment's row lies outside the tile (padding)."""
        hit = self.cache.get(coord)
        if hit is not None:
            return hit
        first = self.index.get(coord)
        if first is None:
            w = self.lw.const("b32", "0")
        else:
            regs = [self.t.regs[self.index[(coord[0] + i * step[0], coord[1] + i * step[1])]] for i in range(self.kw)]
            w = pack_word(self.lw, regs, self.t.elem)
        self.cache[coord] = w
        return w


def pack_word(lw: KernelLowering, regs: List[str], e: T.ScalarType) -> str:
    """One 32-bit register of 32 / bits elements (element 0 in the low bits)."""
    em = lw.e
    if e.bits == 32:
        return regs[0]
    if e.bits == 16:
        return em.new("b32", "mov.b32", braces(regs[:2]))
    # four bytes, each in the low byte of a 16-bit register: pair them, then pick bytes 0 and 2
    lo = em.new("b32", "mov.b32", braces(regs[:2]))
    hi = em.new("b32", "mov.b32", braces(regs[2:]))
    return em.new("b32", "prmt.b32", lo, hi, "0x6420")


def _tile_origins(c: LM.LinearMap) -> List[Tuple[int, int]]:
    """Thread 0's m16n8 instruction tiles: the origins of its accumulator registers (repetitions
    along M and N are multiples of 16 and 8 rows / columns)."""
    seen: Dict[Tuple[int, int], None] = {}
    for co in c.reg_coords():
        seen.setdefault((co[0] & ~15, co[1] & ~7), None)
    return list(seen)


def _lower_mma_sync(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    a_v, b_v, acc_v = op.arg("a"), op.arg("b"), op.arg("acc")
    rt: T.TensorType = op.result.type  # type: ignore[assignment]
    mma: L.MmaLayout = rt.layout  # type: ignore[assignment]
    ae, be, re = a_v.type.element, b_v.type.element, rt.element  # type: ignore[union-attr]
    opcode = mma_sync_opcode(ae, be, re, op.loc)  # type: ignore[arg-type]
    if (ae.name.startswith("f8") or be.name.startswith("f8")) and lw.capability < 89:  # type: ignore[union-attr]
        raise TLXCompileError(f"mma.sync on fp8 operands needs sm_89 or newer; the target is {lw.target}", op.loc)
    kw = 32 // ae.bits  # type: ignore[union-attr]
    kinstr = 8 * kw
    a, b, acc = lw.tensor(a_v), lw.tensor(b_v), lw.tensor(acc_v)
    M, N = rt.shape
    K = a_v.type.shape[1]  # type: ignore[union-attr]
    if K % kinstr:
        raise TLXCompileError(f"mma.sync needs K to be a multiple of {kinstr} for {ae}, got K={K}", op.loc)
    _check_layout(a, L.DotOperandLayout(0, mma, kw), (M, K), "A", op.loc)
    _check_layout(b, L.DotOperandLayout(1, mma, kw), (K, N), "B", op.loc)
    c = lw.lmap(rt)
    if acc.lmap != c:
        raise TLXCompileError("internal: tt.dot accumulator and result layouts differ", op.loc)
    # result registers: the accumulator's when nothing reads it afterwards
    in_place = lw.can_overwrite(acc_v, op) and not any(r in lw.pinned for r in acc.regs)
    regs = list(acc.regs) if in_place else em.named_array(_kind(re), c.num_regs, lw.hint(op.result, "acc"))
    a_words, b_words = _Words(lw, a, kw), _Words(lw, b, kw)
    cidx = c.reg_index()
    f16_acc = re.name == "f16"  # type: ignore[union-attr]  (two f16x2 words per tile)
    zero = lw.const(_kind(re), "0")
    for m0, n0 in _tile_origins(c):
        # the tile's four accumulator elements (rows m0, m0+8; columns n0, n0+1); None: padding
        slots = [cidx.get((m0 + 8 * (j >> 1), n0 + (j & 1))) for j in range(4)]
        cin = [acc.regs[i] if i is not None else zero for i in slots]
        dout = [regs[i] if i is not None else em.tmp(_kind(re)) for i in slots]
        if f16_acc:
            cw = [pack_word(lw, cin[0:2], re), pack_word(lw, cin[2:4], re)]  # type: ignore[arg-type]
            dw = [em.tmp("b32"), em.tmp("b32")]
        else:
            cw, dw = cin, dout
        for k0 in range(0, K, kinstr):
            aw = [a_words.word((m0 + 8 * (j & 1), k0 + 4 * kw * (j >> 1)), (0, 1)) for j in range(4)]
            bw = [b_words.word((k0 + 4 * kw * j, n0), (1, 0)) for j in range(2)]
            em(opcode, braces(dw), braces(aw), braces(bw), braces(cw))
            cw = dw
        if f16_acc:
            em("mov.b32", braces(dout[:2]), dw[0])
            em("mov.b32", braces(dout[2:]), dw[1])
    lw.set(op.result, Tensor(regs, c, re))
    if in_place:
        lw.alias(op.result, acc_v)


def _kind(e) -> str:
    return "b16" if e.bits == 16 else "b32"


def _lower_fma(lw: KernelLowering, op: Operation) -> None:
    em = lw.e
    a_v, b_v, acc_v = op.arg("a"), op.arg("b"), op.arg("acc")
    rt: T.TensorType = op.result.type  # type: ignore[assignment]
    fty = rt.element.name  # type: ignore[union-attr]
    for v in (a_v, b_v, acc_v):
        if fty not in ("f32", "f64") or v.type.element.name != fty:  # type: ignore[union-attr]
            raise TLXCompileError(f"the FMA dot takes float32 (input_precision='ieee') or float64 operands and "
                                  f"accumulator of one type, got {v.type.element}", op.loc)  # type: ignore[union-attr]
    a, b, acc = lw.tensor(a_v), lw.tensor(b_v), lw.tensor(acc_v)
    c = lw.lmap(rt)
    M, N = rt.shape
    K = a_v.type.shape[1]  # type: ignore[union-attr]
    _check_layout(a, L.DotOperandLayout(0, rt.layout, 1), (M, K), "A", op.loc)  # type: ignore[arg-type]
    _check_layout(b, L.DotOperandLayout(1, rt.layout, 1), (K, N), "B", op.loc)  # type: ignore[arg-type]
    ai, bi = a.lmap.reg_index(), b.lmap.reg_index()
    regs = em.named_array("b32" if fty == "f32" else "b64", c.num_regs, lw.hint(op.result, "acc"))
    for r, (m, n) in enumerate(c.reg_coords()):
        cur = acc.regs[r]
        for k in range(K):
            em(f"fma.rn.{fty}", regs[r], a.regs[ai[(m, k)]], b.regs[bi[(k, n)]], cur)
            cur = regs[r]
    lw.set(op.result, Tensor(regs, c, rt.element))


def _dot(lw: KernelLowering, op: Operation) -> None:
    lay = op.result.type.layout  # type: ignore[union-attr]
    if isinstance(lay, L.MmaLayout) and lay.version == 2:
        _lower_mma_sync(lw, op)
    elif isinstance(lay, L.BlockedLayout):
        _lower_fma(lw, op)
    else:
        raise TLXCompileError(f"internal: tt.dot with result layout {lay} reached code generation (wgmma dots are "
                              "lowered to tlx.async_dot before the fence passes)", op.loc)


#: op name -> its lowering (merged by lower.py)
LOWERINGS: Dict[str, Callable[["KernelLowering", Operation], None]] = {"tt.dot": _dot}

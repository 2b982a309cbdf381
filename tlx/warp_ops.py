"""TLX warp-level operations: `tlx.vote_ballot_sync` and `tlx.warp_redux`.

Both act on what one warp holds at once: register r of each of its 32 lanes. For a block
tensor that grouping is the tensor's distributed layout (which elements share a register index
in a warp), which the compiler chooses; for a scalar computed per thread (from
`tlx.thread_id`) it is the warp's 32 threads. Names and arguments follow the real TLX
(`warp_ops.py`).
"""

from __future__ import annotations

from typing import Any

from tlx.compiler.errors import TLXCompileError, TLXTypeError, TLXValueError

from .language import core, semantic
from .language.core import builtin, tensor, unwrap

WARP_REDUX_OPS = ("max", "min", "abs_max", "abs_min")


@builtin
def vote_ballot_sync(mask: Any, pred: Any) -> tensor:
    """`vote.sync.ballot.b32`: bit l of the result is set when lane l of the warp is in `mask`
    (a compile-time 32-bit constant; 0xFFFFFFFF for the whole warp) and its `pred` is true
    (non-zero). Every lane in `mask` must execute the vote, and only those. A scalar `pred` gives
    an i32 scalar (the same in every lane of a warp); a tensor gives an i32 tensor of its shape,
    each element the ballot of the register it sits in."""
    m = unwrap(mask)
    if isinstance(m, (core.Handle, tensor)):
        raise TLXCompileError("vote_ballot_sync's mask must be a compile-time constant",
                              hint="pass a literal such as 0xFFFFFFFF or a tl.constexpr")
    if not isinstance(m, int) or isinstance(m, bool) or not -(1 << 31) <= m <= 0xFFFFFFFF:
        raise TLXValueError(f"vote_ballot_sync's mask must be a 32-bit integer, got {m!r}")
    p = semantic.to_tensor(unwrap(pred))
    if p.dtype.is_ptr():
        raise TLXTypeError(f"vote_ballot_sync needs a boolean (or numeric) predicate, got {p.type}")
    if p.dtype != core.int1:
        p = semantic.compare(p, 0, "ne")
    return semantic.emit1("tlx.vote_ballot_sync", [p.handle], core.int32, p.shape, {"mask": m & 0xFFFFFFFF})


@builtin
def warp_redux(x: Any, op: Any) -> tensor:
    """Warp-level reduction with the result in every lane: each element becomes the reduction of
    its register across the warp's 32 lanes. `op` is "max", "min", "abs_max" or "abs_min" (the
    max / min of |x|); `x` is float32. NaN inputs are ignored unless every lane holds NaN."""
    kind = unwrap(op)
    if kind not in WARP_REDUX_OPS:
        raise TLXValueError(f"warp_redux op must be one of {', '.join(WARP_REDUX_OPS)}, got {kind!r}")
    v = semantic.to_tensor(unwrap(x))
    if v.dtype != core.float32:
        raise TLXTypeError(f"warp_redux needs a float32 value, got {v.type}", hint="convert first: x.to(tl.float32)")
    return semantic.emit1("tlx.warp_redux", [v.handle], core.float32, v.shape, {"kind": kind})

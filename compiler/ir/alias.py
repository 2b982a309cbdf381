"""Where the buffers of a `tlx.local_alias` lie inside the byte buffer it aliases.

A `tlx.storage_alias_spec` is one shared-memory allocation of bytes; every `local_alloc(...,
reuse=spec)` becomes a `tlx.local_alias` of it whose attributes place its buffers:

    %spec = tlx.local_alloc {storage_alias} : !smem<49152xi8, ...>
    %a = tlx.local_alias %spec {offset = 0, strides = [16384], radices = []} : !smem<2x64x64xf32, ...>

Buffer `i` starts `slab_offset(i)` bytes into the spec: `offset` plus the mixed-radix digits of
`i` times `strides`. `radices` are the inner digits' bases, innermost last (the `group_size`s of
the reuse groups around the buffer, outermost first); the outermost digit is unbounded. Without
group sizes buffer `i` is at `offset + i * strides[0]`; with `group_size = 2` around it, buffers
2g and 2g+1 are the two consecutive sub-slots of buffer group g:
`offset + (i // 2) * strides[0] + (i % 2) * strides[1]`.

The one module that knows this rule: the frontend writes the attributes, the verifier, the
region analysis, the code generator and the interpreter read them.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence, Tuple


class Placement(NamedTuple):
    """A `tlx.local_alias`'s placement attributes."""

    offset: int
    strides: Tuple[int, ...]  # outermost digit first; len(radices) + 1 entries
    radices: Tuple[int, ...]  # bases of the inner digits, innermost last

    def digits(self, i: int) -> Tuple[int, ...]:
        """Buffer index `i` in the mixed radix (unbounded outer digit, then `radices`)."""
        out = []
        for r in reversed(self.radices):
            i, d = divmod(i, r)
            out.append(d)
        out.append(i)
        return tuple(reversed(out))

    def slab_offset(self, i: int) -> int:
        """Byte offset of buffer `i` from the start of the aliased bytes."""
        return self.offset + sum(d * s for d, s in zip(self.digits(i), self.strides))

    def uniform_stride(self) -> int:
        """The byte distance between consecutive buffers when it is the same for all of them
        (no group sizes, or sub-slots that tile their group exactly), else 0."""
        stride = self.strides[-1]
        for k in range(len(self.radices) - 1, -1, -1):
            if self.strides[k] != self.radices[k] * stride:
                return 0
        return stride


def placement(attrs: dict) -> Placement:
    """The placement of a `tlx.local_alias` op from its attributes."""
    return Placement(int(attrs["offset"]), tuple(int(s) for s in attrs["strides"]),
                     tuple(int(r) for r in attrs.get("radices", ())))


def placement_attrs(offset: int, strides: Sequence[int], radices: Sequence[int] = ()) -> dict:
    """The attributes that encode a placement (see `placement`)."""
    return {"offset": int(offset), "strides": [int(s) for s in strides], "radices": [int(r) for r in radices]}

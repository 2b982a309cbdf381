"""cp.async writes still in flight, kept by commit-group depth, for the walks that must know when
they land (ProxyFenceInsertion keeps its state this way; the CTA-barrier pass, whose items carry
their depth, shares FLIGHT_CAP and the rule that nothing orders a write before it lands).

A cp.async write (`tlx.async_load`) is not yet in shared memory when the op returns: an
`async_commit_group` closes the group of the writes issued since the last one, and
`async_wait_group {pendings = N}` lands every group with at least N newer ones. Until a write
has landed, neither a proxy fence nor a CTA barrier orders it (only its own thread's wait does),
so the walks keep in-flight writes apart from the accesses that fences and barriers act on.

`Flights` is a tuple of FLIGHT_CAP + 2 frozensets of the walk's items: index 0 the writes not
yet committed, index k + 1 those of the group with k newer groups, the last index FLIGHT_CAP or
more newer groups (the depth saturates: a wait with pendings >= FLIGHT_CAP is treated as
FLIGHT_CAP). A commit is a shift of the tuple, so items never change as they age: a kernel that
leaves groups in flight carries them through every later op, and the walks touch them only at
commits, waits and joins, where most buckets are the same object on both sides.
"""

from __future__ import annotations

from typing import Callable, FrozenSet, Tuple

FLIGHT_CAP = 8  # commit-group depths saturate here

Flights = Tuple[FrozenSet, ...]
_NONE: FrozenSet = frozenset()
NO_FLIGHTS: Flights = (_NONE,) * (FLIGHT_CAP + 2)
Join = Callable[[FrozenSet, FrozenSet], FrozenSet]


def is_empty(fl: Flights) -> bool:
    """Whether nothing is in flight."""
    return fl is NO_FLIGHTS or not any(fl)


def commit(fl: Flights, join: Join) -> Flights:
    """The flights after an `async_commit_group`: the uncommitted writes become the newest group,
    every group one deeper; the two deepest buckets `join` (a group already FLIGHT_CAP deep stays
    there)."""
    if not any(fl[:-1]):
        return fl
    return (_NONE,) + fl[:FLIGHT_CAP] + (join(fl[FLIGHT_CAP], fl[FLIGHT_CAP + 1]),)


def land(fl: Flights, pendings: int) -> Tuple[Tuple[FrozenSet, ...], Flights]:
    """(the buckets that land, the flights left) at an `async_wait_group {pendings = N}`: the
    groups with at least N newer ones land; the uncommitted writes never do (they are in no
    group yet)."""
    n = min(max(pendings, 0), FLIGHT_CAP)
    gone = fl[n + 1:]
    if not any(gone):
        return (), fl
    return gone, fl[:n + 1] + (_NONE,) * (FLIGHT_CAP + 1 - n)


def union(a: Flights, b: Flights, join: Join) -> Flights:
    """The bucket-wise join of two flights."""
    if a is b:
        return a
    return tuple(x if x is y else join(x, y) for x, y in zip(a, b))

"""Seed -> case: the family, whether the case is broken and by which mutation, and at which of
the family's candidate sites of that mutation, all drawn from the seed alone (so
`python -m tests.fuzz --seed N --show` replays any case)."""

from __future__ import annotations

import random
from typing import Optional, Tuple

from .case import Case, Gen
from .families import FAMILIES

BROKEN_FRACTION = 0.35


def plan_of(seed: int, family: Optional[str] = None) -> Tuple[str, str]:
    """The family (drawn, or `family`) and the mutation ("none" for a well-formed case) of `seed`."""
    plan = random.Random(f"plan-{seed}" + (f"-{family}" if family else ""))
    fam = family or plan.choice(sorted(FAMILIES))
    mutations = FAMILIES[fam][1]
    mutation = plan.choice(mutations) if mutations and plan.random() < BROKEN_FRACTION else "none"
    return fam, mutation


def _run(fn, seed: int, mutation: Optional[str], site: int) -> Gen:
    g = Gen(seed, mutation, site)
    fn(g)
    return g


def generate(seed: int, family: Optional[str] = None, mutation: Optional[str] = None) -> Case:
    """The case of `seed`; `family` forces the family, `mutation` the mutation ("none": a
    well-formed case). A mutation the drawn kernel has no site for gives a well-formed case."""
    fam, drawn = plan_of(seed, family)
    fn = FAMILIES[fam][0]
    mutation = mutation or drawn
    g: Optional[Gen] = None
    if mutation != "none":
        sites = _run(fn, seed, mutation, -1).sites
        if sites:
            g = _run(fn, seed, mutation, random.Random(f"site-{seed}").randrange(sites))
            assert g.fired, f"seed {seed}: the {mutation} site did not fire on the second pass"
            assert g.expect.kind != "ok", f"seed {seed}: the {mutation} site fired but wrote no mistake"
    if g is None:
        mutation = "none"
        g = _run(fn, seed, None, -1)
    return Case(seed=seed, family=fam, mutation=None if mutation == "none" else mutation, source=g.source(),
                params=g.params, grid=g.grid, num_warps=g.num_warps, expect=g.expect, checks=g.checks,
                fence_passes=g.fence_passes)

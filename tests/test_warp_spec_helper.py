"""`tlx.warp_spec.get_bufidx_phase`, the ring-buffer helper TLX kernels import from
`triton.language.extra.tlx.warp_spec`: at the same module path, callable from kernels, the slot
and mbarrier phase of each use of a ring."""

from __future__ import annotations

import numpy as np
import pytest

import tlx
import tlx.language as tl
from tlx.warp_spec import get_bufidx_phase


@tlx.jit
def ring_positions(start, idx_ptr, phase_ptr, N: tl.constexpr, NUM_BUFFERS: tl.constexpr):
    for i in range(0, N):
        idx, phase = get_bufidx_phase(start + i, NUM_BUFFERS)
        tl.store(idx_ptr + i, idx)
        tl.store(phase_ptr + i, phase)


@pytest.mark.parametrize("start,num_buffers", [(0, 2), (0, 3), (5, 4), (1000, 3)])
def test_slot_and_phase_of_every_use_of_the_ring(start, num_buffers):
    n = 17
    idx = np.full(n, -1, np.int32)
    phase = np.full(n, -1, np.int32)
    tlx.interpret(ring_positions, (1,), start, idx, phase, N=n, NUM_BUFFERS=num_buffers)
    uses = np.arange(start, start + n)
    np.testing.assert_array_equal(idx, uses % num_buffers)
    np.testing.assert_array_equal(phase, (uses // num_buffers) & 1)


def test_it_compiles_for_sm90a():
    k = tlx.compile(ring_positions, signature={"start": "i32", "idx_ptr": "*i32", "phase_ptr": "*i32"},
                    constexprs={"N": 8, "NUM_BUFFERS": 3})
    assert k.asm["cubin"]  # assembled by ptxas


def test_it_is_a_jit_helper_at_the_tlx_module_path():
    import tlx.warp_spec

    assert isinstance(tlx.warp_spec.get_bufidx_phase, tlx.JITFunction)
    assert [(p.name, p.is_constexpr) for p in get_bufidx_phase.params] == [("accum_cnt", False),
                                                                          ("NUM_BUFFERS", True)]

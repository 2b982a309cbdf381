"""TMA copies with an eviction hint: `evict_first` / `evict_last` make an L2 cache policy once
(createpolicy) that every copy of the load or store carries (.L2::cache_hint); no hint, no policy.
The PTX is assembled by ptxas for sm_90a."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tlx
import tlx.language as tl


@tlx.jit
def copy_with_hint(d_in, d_out, LOAD: tl.constexpr, STORE: tl.constexpr):
    buf = tlx.local_alloc((64, 128), tl.float16, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], 64 * 128 * 2)
    tlx.async_descriptor_load(d_in, buf[0], [0, 0], bars[0], eviction_policy=LOAD)
    tlx.barrier_wait(bars[0], 0)
    tlx.async_descriptor_store(d_out, buf[0], [0, 0], eviction_policy=STORE)
    tlx.async_descriptor_store_wait(0)


SIG = {"d_in": "tensordesc<fp16[64, 128]>", "d_out": "tensordesc<fp16[64, 128]>"}


@pytest.mark.parametrize("load,store", [("", ""), ("evict_first", ""), ("", "evict_last"),
                                        ("evict_last", "evict_first"), ("evict_normal", "evict_normal")])
def test_an_eviction_hint_is_an_l2_cache_policy_on_every_copy(load, store):
    ptx = tlx.compile(copy_with_hint, signature=SIG, constexprs={"LOAD": load, "STORE": store}).asm["ptx"]
    policies = dict(re.findall(r"createpolicy\.fractional\.L2::(evict_\w+)\.b64 (%\w+), 1\.0;", ptx))
    assert set(policies) == {h for h in (load, store) if h in ("evict_first", "evict_last")}
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                       r"(\.L2::cache_hint)? [^;]*?(, %\w+)?;", ptx)
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group(\.L2::cache_hint)? [^;]*?"
                        r"(, %\w+)?;", ptx)
    assert len(loads) == 2 and len(stores) == 2  # 128 halves = 256 bytes per row: two 128-byte boxes each
    for copies, hint in ((loads, load), (stores, store)):
        want = policies.get(hint)
        for suffix, operand in copies:
            assert (suffix, operand) == ((".L2::cache_hint", ", " + want) if want else ("", ""))


def test_hints_change_nothing_on_the_interpreter():
    x = np.random.default_rng(1).standard_normal((64, 128)).astype(np.float16)
    y = np.full_like(x, np.nan)
    tlx.interpret(copy_with_hint, (1,), tlx.TensorDescriptor(x, [64, 128], [128, 1], [64, 128]),
                  tlx.TensorDescriptor(y, [64, 128], [128, 1], [64, 128]), LOAD="evict_first", STORE="evict_last")
    np.testing.assert_array_equal(y, x)

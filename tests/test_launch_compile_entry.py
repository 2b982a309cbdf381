"""The launch path's compile step (trace -> compile -> cache entry -> cached kernel) for every
catalogue kernel, on the CPU: what `kernel[grid]` does before it touches the driver."""

import pytest

import catalog
from tlx.compile import CompiledKernel, compile_fresh
from tlx.compiler.options import CompileOptions
from tlx.specialize import Specialization
from tlx.runtime.cache import decode_entry, encode_entry


def specialization(case, opts):
    return Specialization((), dict(case.signature), dict(case.constexprs), dict(case.divisibility),
                          list(case.equal_to_one), opts)


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_compile_entry_round_trips_through_the_cache_format(case):
    opts = CompileOptions(num_warps=case.num_warps)
    entry, compiled = compile_fresh(case.fn, specialization(case, opts))
    back = decode_entry("ab" * 16, encode_entry("ab" * 16, entry))
    cached = CompiledKernel.from_entry(back)
    assert cached.explain_fences() == compiled.explain_fences()
    assert len(cached.fences) == len(compiled.fences)
    assert cached.abi == compiled.abi
    assert cached.asm.get("ptx") == compiled.asm.get("ptx")
    assert cached.metadata == compiled.metadata and cached.metadata.num_warps == case.num_warps


@pytest.mark.parametrize("name", ["tma_store_unfenced", "wgmma_store_inside_loop"])
def test_a_cached_kernel_keeps_the_hazards_left_unfenced(name):
    case = catalog.CASES_BY_NAME[name]
    opts = CompileOptions(num_warps=case.num_warps, fence_passes=False)
    entry, compiled = compile_fresh(case.fn, specialization(case, opts))
    cached = CompiledKernel.from_entry(decode_entry("ab" * 16, encode_entry("ab" * 16, entry)))
    assert compiled.unfenced_hazards and cached.unfenced_hazards == compiled.unfenced_hazards

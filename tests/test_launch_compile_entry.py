"""The launch path's compile step (trace -> compile -> cache entry -> cached kernel) for every
catalogue kernel, on the CPU: what `kernel[grid]` does before it touches the driver."""

import pytest

import catalog
from tlx.launch import CachedKernel, _compile_entry
from tlx.compiler.options import CompileOptions
from tlx.runtime.cache import decode_entry, encode_entry


@pytest.mark.parametrize("case", catalog.CASES, ids=lambda c: c.name)
def test_compile_entry_round_trips_through_the_cache_format(case):
    opts = CompileOptions(num_warps=case.num_warps)
    entry, compiled = _compile_entry(case.fn, case.signature, case.constexprs, case.divisibility,
                                     list(case.equal_to_one), opts)
    back = decode_entry("ab" * 16, encode_entry("ab" * 16, entry))
    cached = CachedKernel(back)
    assert cached.explain_fences() == compiled.explain_fences()
    assert len(cached.fences) == len(compiled.fences)
    assert cached.abi == compiled.abi
    assert cached.asm.get("ptx") == compiled.asm.get("ptx")


@pytest.mark.parametrize("name", ["tma_store_unfenced", "wgmma_store_inside_loop"])
def test_a_cached_kernel_keeps_the_hazards_left_unfenced(name):
    case = catalog.CASES_BY_NAME[name]
    opts = CompileOptions(num_warps=case.num_warps, fence_passes=False)
    entry, compiled = _compile_entry(case.fn, case.signature, case.constexprs, case.divisibility,
                                     list(case.equal_to_one), opts)
    cached = CachedKernel(decode_entry("ab" * 16, encode_entry("ab" * 16, entry)))
    assert compiled.unfenced_hazards and cached.unfenced_hazards == compiled.unfenced_hazards

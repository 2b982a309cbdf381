"""kernel[grid](...) without a GPU: specialization, clear errors, and TLX_INTERPRET=1."""

import numpy as np
import pytest

import catalog
import tlx
from tlx.runtime import TLXRuntimeError


class FakeDeviceArray:
    """A device array as the CUDA array interface describes one (never dereferenced here)."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": None, "version": 3}


def test_bad_launch_arguments_are_clear_errors():
    with pytest.raises(tlx.TLXCompileError, match="bad launch of kernel vector_add"):
        catalog.vector_add[(1,)](1, 2)
    with pytest.raises(TLXRuntimeError, match="host array"):
        catalog.vector_add[(1,)](np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32), 4, BLOCK=64)


def test_launch_without_a_gpu_says_so(monkeypatch, tmp_path):
    from numba import cuda

    if cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path))
    x = FakeDeviceArray(0x10000, (1024,), "<f4")
    with pytest.raises(TLXRuntimeError, match="(?i)no CUDA|GPU"):
        catalog.vector_add[(4,)](x, x, x, 1024, BLOCK=256)


def test_interpret_env_runs_kernel_grid_on_the_cpu(monkeypatch):
    monkeypatch.setenv("TLX_INTERPRET", "1")
    rng = np.random.default_rng()
    n = 1000
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    catalog.vector_add[lambda meta: (tlx.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=256)
    np.testing.assert_allclose(out.astype(np.float64), x.astype(np.float64) + y, rtol=1e-6)


def test_interpret_reports_the_missing_fence_with_both_lines():
    m, blk = 64, 64
    case = catalog.CASES_BY_NAME["tma_store_unfenced"]

    class Desc:
        def __init__(self, base):
            self.base, self.shape, self.strides = base, list(base.shape), [base.shape[1], 1]
            self.block_shape, self.padding = [blk, blk], "zero"

    x = np.random.default_rng().standard_normal((m, blk)).astype(np.float16)
    y = np.zeros((m, blk), np.float16)
    hazards = tlx.interpret(case.fn, (1,), Desc(x), Desc(y), fence_passes=False, raise_on_hazard=False, BLOCK=blk)
    assert len(hazards) == 1
    lines = [l for l in open(catalog.__file__).read().splitlines()]
    first, second = hazards[0].lines
    assert "tlx.local_store(bufs[1]" in lines[first.line - 1] if hasattr(first, "line") else True


def test_under_tlx_interpret_a_launch_returns_the_hazards_and_the_kernel_compiled_for_the_target(monkeypatch):
    """Code that checks a launch's PTX (`kernel[grid](...).asm["ptx"]`) runs unchanged on the CPU:
    the launch runs on the interpreter, and the kernel it returns compiles on first use."""
    monkeypatch.setenv("TLX_INTERPRET", "1")
    n = 300
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    out = np.full(n, np.nan, np.float32)
    k = catalog.vector_add[(2,)](x, y, out, n, BLOCK=256)
    np.testing.assert_array_equal(out, x + 1)
    assert list(k) == [] and len(k) == 0  # no hazard
    assert ".entry vector_add" in k.asm["ptx"] and k.metadata.num_warps == 4

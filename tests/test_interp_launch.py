"""`tlx.interpret`: a @tlx.jit kernel run on the CPU interpreter from host arguments."""

import numpy as np
import pytest

import catalog
from interp_kernels import HostDesc
from tlx.compiler.errors import TLXCompileError
from tlx import interpret
from tlx.interpreter import ProxyHazard


def test_interpret_infers_types_and_binds_constexprs():
    x = np.arange(3000, dtype=np.float32)
    y = np.ones(3000, np.float32)
    out = np.full(3000, np.nan, np.float32)
    assert interpret(catalog.vector_add, (3,), x, y, out, 3000, BLOCK=1024) == []
    np.testing.assert_array_equal(out, x + 1)


def test_interpret_without_fence_passes_reports_the_missing_fence():
    x = (np.arange(128 * 64) % 17).astype(np.float16).reshape(128, 64)
    y = np.zeros((128, 64), np.float16)
    hs = interpret(catalog.tma_store_unfenced, (2,), HostDesc.of(x, (64, 64)), HostDesc.of(y, (64, 64)), BLOCK=64,
                   fence_passes=False, raise_on_hazard=False)
    assert [(h.kind, h.first.op, h.second.op) for h in hs] == [("raw", "tlx.local_store", "tlx.tma_store")]
    with pytest.raises(ProxyHazard):
        interpret(catalog.tma_store_unfenced, (2,), HostDesc.of(x, (64, 64)), HostDesc.of(y, (64, 64)), BLOCK=64,
                  fence_passes=False)
    np.testing.assert_array_equal(y, x + np.float16(1))


def test_interpret_signature_override_for_bf16_bits():
    a = (np.ones((64, 128), np.float32).view(np.uint32) >> 16).astype(np.uint16)  # bf16 1.0
    b = (np.full((128, 128), 0.5, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    c = np.full((64, 128), np.nan, np.float32)
    interpret(catalog.wgmma_store_inside_loop, (1,), a, b, c, 128, BM=64, BN=128, BK=64, fence_passes=False,
              raise_on_hazard=False, signature={"a_ptr": "*bf16", "b_ptr": "*bf16"})
    np.testing.assert_array_equal(c, np.full((64, 128), 64.0))


def test_interpret_argument_errors():
    with pytest.raises(TLXCompileError, match="missing a required argument"):
        interpret(catalog.vector_add, (1,), np.zeros(4, np.float32), BLOCK=4)
    z = np.zeros(4, np.float32)
    with pytest.raises(TLXCompileError, match="BLOK"):
        interpret(catalog.vector_add, (1,), z, z, z, 4, BLOCK=4, BLOK=4)

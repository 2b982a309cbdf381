"""Device-side descriptor slots on the GPU (tests/kernels/desc_slots.py, compiled on the CPU by
tests/test_gpu_kernels_compile.py): descriptors written into `tlx.allocate_tensor_descriptor`
slots by `make_tensor_descriptor(desc_ptr=slot)` and read back with `reinterpret_tensor_descriptor`
drive TMA loads and stores (the tensormap proxy sees the generic write after the release/acquire
pair); a runtime slot index picks the descriptor; a worker partition reads slots the whole CTA
wrote. The scratch comes from the allocator Triton's API sets (128-byte aligned requests).
Compared with numpy in float64; outputs are poisoned first; inputs are random (the seed is
printed with every failure)."""

from __future__ import annotations


import numpy as np
import pytest

from kernels import desc_slots as K

pytestmark = pytest.mark.gpu


@pytest.fixture
def torch(torch):
    """conftest's seeded torch, with an allocator for the descriptor scratch that records the
    alignments asked for (every one must be 128 bytes)."""
    import tlx

    aligns = []

    def alloc(size: int, align: int, stream):
        aligns.append(align)
        return torch.empty(size, dtype=torch.int8, device="cuda")

    tlx.set_allocator(alloc)
    yield torch
    tlx.set_allocator(None)
    assert aligns and set(aligns) == {128}, aligns


def host(t) -> np.ndarray:
    return t.detach().double().cpu().numpy()


def test_tma_load_and_store_through_slots(torch):
    M, N = 256, 192
    x = torch.randn(M, N, device="cuda").half()
    y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    K.SLOT_AFFINE[(M // 64, N // 64)](x, y, M, N)
    torch.cuda.synchronize()
    np.testing.assert_allclose(host(y), 2 * host(x) + 1, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("sel", [0, 1, 2])
def test_a_runtime_slot_index_picks_the_descriptor(torch, sel):
    n = 4096
    a, b, c = (torch.randn(n, device="cuda") for _ in range(3))
    out = torch.full((n,), float("nan"), device="cuda")
    K.SLOT_SELECT[(n // 256,)](a, b, c, out, torch.tensor([sel], device="cuda", dtype=torch.int32), n)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(host(out), host((a, b, c)[sel]))


def test_a_worker_partition_uses_slots_the_cta_wrote(torch):
    n = 64 * 512
    x = torch.randn(n, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    K.SLOT_WS[(n // 512,)](x, y, n)
    torch.cuda.synchronize()
    np.testing.assert_allclose(host(y), host(x) - 3, rtol=1e-6, atol=1e-6)

"""Storage aliasing on the GPU (tests/kernels/storage_alias.py, compiled on the CPU by
tests/test_gpu_kernels_compile.py): a buffer read back through another member of its spec
(shared bytes, buffer groups 16 KB apart, a runtime index), members of a distinct group with
group_size sub-slots (unevenly spaced buffers, runtime indices) keeping their values, and a TMA
store of an alias just written through another (the fence the passes insert makes the store see
the write). Compared with numpy in float64; outputs are poisoned first; inputs are random (the
seed is printed with every failure)."""

from __future__ import annotations


import numpy as np
import pytest

from kernels import storage_alias as K

pytestmark = pytest.mark.gpu



def host(t) -> np.ndarray:
    return t.detach().double().cpu().numpy()


@pytest.mark.parametrize("idx", [0, 1])
def test_a_buffer_read_through_another_member_of_its_spec(torch, idx):
    x = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    y = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    out = torch.full((2, 64, 64), float("nan"), device="cuda", dtype=torch.float16)
    K.SHARED[(1,)](x, y, out, torch.tensor([idx], device="cuda", dtype=torch.int32))
    torch.cuda.synchronize()
    want = np.stack([host(x), host(y)] if idx == 0 else [host(y), host(x)])
    np.testing.assert_array_equal(host(out), want)


def test_distinct_members_with_group_size_keep_their_values(torch):
    x = torch.randn(4, 64, 32, device="cuda", dtype=torch.float16)
    z = torch.randn(2, 64, 16, device="cuda", dtype=torch.float32)
    out_p = torch.full((4, 64, 32), float("nan"), device="cuda", dtype=torch.float16)
    out_z = torch.full((2, 64, 16), float("nan"), device="cuda", dtype=torch.float32)
    K.DISTINCT[(1,)](x, z, out_p, out_z)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(host(out_p), host(x))
    np.testing.assert_array_equal(host(out_z), host(z))


def test_tma_store_of_an_alias_sees_the_generic_write_through_another(torch):
    import tlx

    x = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    out = torch.full((64, 64), float("nan"), device="cuda", dtype=torch.float16)
    desc = tlx.TensorDescriptor.from_tensor(out, [64, 64])
    K.TMA_STORE[(1,)](x, desc)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(host(out), host(x))


def test_reuse_of_a_buffer_array_shares_its_first_bytes(torch):
    x, y, z = (torch.randn(64, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.full((3, 64, 64), float("nan"), device="cuda", dtype=torch.float16)
    K.REUSE_ARRAY[(1,)](x, y, z, out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(host(out), np.stack([host(x), host(z), host(y)]))

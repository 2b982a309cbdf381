"""Thread-block clusters on the GPU (tests/kernels/cluster.py, each kernel launched through its Spec
in the cluster shape CI compiles it for): ranks and sizes, stores into another CTA's shared memory
(st.shared::cluster, st.async on the receiver's mbarrier, bulk copies), remote mbarrier arrives and
TMA multicast, compared with numpy in float64. Outputs are poisoned first; inputs are random (the
seed is printed with every failure)."""

from __future__ import annotations


import numpy as np
import pytest

import tlx
from kernels import cluster as K

pytestmark = pytest.mark.gpu



def host(t) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64) if t.dtype.is_floating_point else t.cpu().numpy()


def test_rank_and_size_follow_the_cluster_shape(torch):
    out = torch.full((3, 2, 4, 2), -1, device="cuda", dtype=torch.int32)
    k = K.RANK_SIZE[(4, 2, 3)](out)
    torch.cuda.synchronize()
    assert k.metadata.ctas_per_cga == (2, 1, 3)
    o = host(out)
    want = np.array([[[x % 2 + 2 * (z % 3) for x in range(4)] for _ in range(2)] for z in range(3)])
    np.testing.assert_array_equal(o[..., 0], want)
    assert (o[..., 1] == 6).all()


def test_remote_store_ring(torch):
    x = torch.rand(8 * 256, device="cuda", dtype=torch.float32)
    y = torch.full_like(x, float("nan"))
    K.RING_STORE[(8,)](x, y)
    torch.cuda.synchronize()
    xr = host(x).reshape(8, 256)
    np.testing.assert_array_equal(host(y).reshape(8, 256), xr[[3, 0, 1, 2, 7, 4, 5, 6]])


def test_st_async_gather_sum(torch):
    x = torch.rand(2 * 4 * 128, device="cuda", dtype=torch.float32)
    y = torch.full((2 * 128,), float("nan"), device="cuda", dtype=torch.float32)
    K.GATHER_SUM[(1, 8)](x, y)
    torch.cuda.synchronize()
    want = host(x).reshape(2, 4, 128).sum(axis=1)
    np.testing.assert_allclose(host(y).reshape(2, 128), want, rtol=1e-6, atol=1e-6)


def test_bulk_copy_ring(torch):
    x = torch.rand(64 * 1024, device="cuda", dtype=torch.float32)
    y = torch.full_like(x, float("nan"))
    K.RING_COPY[(64,)](x, y)
    torch.cuda.synchronize()
    xr = host(x).reshape(64, 1024)
    np.testing.assert_array_equal(host(y).reshape(64, 1024), xr[np.arange(64) ^ 1])


def test_remote_arrive_pingpong(torch):
    x = torch.rand(64 * 128, device="cuda", dtype=torch.float32)
    y = torch.full_like(x, float("nan"))
    K.PINGPONG[(64,)](x, y)
    torch.cuda.synchronize()
    xr = host(x).reshape(64, 128)
    np.testing.assert_array_equal(host(y).reshape(64, 128), xr[np.arange(64) ^ 1])


def test_tma_multicast_fills_both_ctas_of_a_pair(torch):
    n = 8
    x = torch.rand((n * 64, 64), device="cuda", dtype=torch.float16)
    out = torch.full((n, 2, 64, 64), float("nan"), device="cuda", dtype=torch.float16)
    d = tlx.TensorDescriptor(x, [n * 64, 64], [64, 1], [64, 64])
    K.MULTICAST[(n,)](d, out)
    torch.cuda.synchronize()
    tiles = host(x).reshape(n, 64, 64)
    want = np.stack([tiles[[p // 2 * 2, p // 2 * 2 + 1]] for p in range(n)])
    np.testing.assert_array_equal(host(out), want)

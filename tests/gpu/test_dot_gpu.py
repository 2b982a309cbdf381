"""`tl.dot` on the GPU for every tile shape: mma.sync below one wgmma (M < 64, warps short of a
warpgroup, an f16 accumulator), wgmma from M = 64, the FMA loop for exact fp32 and fp64; every
operand type (fp16, bf16, tf32, int8, fp8 e4m3 / e5m2 and their mix, fp64), operands straight from global
memory or read back from shared buffers (ldmatrix / ldmatrix.trans), K loops with a
loop-invariant operand, chained dots. Each result is compared with numpy in float64 on the
operands' exact values, within the bound of its numerics (tests/dot_kernels.py); outputs are
poisoned first.

    python3 -m pytest -q -m gpu tests/gpu/test_dot_gpu.py
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dot_kernels as DK  # noqa: E402

pytestmark = pytest.mark.gpu

_TORCH_VIEW = {"bf16": "bfloat16", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def _dev(raw: np.ndarray, dt: str):
    import torch

    raw = np.ascontiguousarray(raw)
    t = torch.from_numpy(raw.view(np.int16) if raw.dtype == np.uint16 else raw).cuda()  # bf16 bits as int16
    return t.view(getattr(torch, _TORCH_VIEW[dt])) if dt in _TORCH_VIEW else t


def _out(shape, kind: str):
    import torch

    if kind == "i32":
        return torch.full(shape, 0x5A5A5A5A, dtype=torch.int32, device="cuda")
    dtype = {"fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64}[kind]
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def _check(got, want: np.ndarray, bound: np.ndarray, what: str) -> None:
    g = got.detach().cpu().numpy().astype(np.float64)
    err = np.abs(g - want)
    bad = ~(err <= bound)
    assert not bad.any(), (f"{what}: {int(bad.sum())}/{bad.size} out of bound, first at "
                           f"{tuple(np.argwhere(bad)[0])}: got {g[tuple(np.argwhere(bad)[0])]}, "
                           f"want {want[tuple(np.argwhere(bad)[0])]}")


def _tile(dt_x, dt_y, m, n, k, from_smem=False, precision="tf32", f16=False, num_warps=4, seed=0):
    import torch

    rng = np.random.default_rng(seed)
    x, x64 = DK.operands(dt_x, (m, k), rng)
    y, y64 = DK.operands(dt_y, (k, n), rng)
    z = _out((m, n), "fp16" if f16 else DK.DTYPES[dt_x][2])
    DK.dot_tile[(1,)](_dev(x, dt_x), _dev(y, dt_y), z, BM=m, BN=n, BK=k, FROM_SMEM=from_smem, PRECISION=precision,
                      OUT_F16=f16, num_warps=num_warps)
    torch.cuda.synchronize()
    want = x64 @ y64
    bound = DK.dot_bound(dt_x, x64, y64, precision, f16)
    if f16:
        bound = bound + 2.0 ** -11 * np.abs(want)  # the result itself is fp16
    _check(z, want, bound, f"{dt_x} x {dt_y} {m}x{n}x{k} smem={from_smem} {precision} f16acc={f16} warps={num_warps}")


@pytest.mark.parametrize("dt,m,n,k,from_smem", DK.TILE_CASES)
def test_dot_tile(dt, m, n, k, from_smem):
    _tile(dt, dt, m, n, k, from_smem, seed=1000 * m + k + from_smem)


@pytest.mark.parametrize("m,n,tiles", DK.SMALL_TILES)
def test_dot_smaller_than_one_instruction(m, n, tiles):
    _tile("fp16", "fp16", m, n, 16, seed=m * 100 + n)


@pytest.mark.parametrize("num_warps,m,n", DK.WARP_CASES)
def test_dot_warps(num_warps, m, n):
    _tile("fp16", "fp16", m, n, 32, True, num_warps=num_warps, seed=num_warps * 7 + m)


@pytest.mark.parametrize("m,x,y,k,precision,f16", DK.SPECIAL_CASES)
def test_dot_f16_accumulator_ieee_and_mixed_fp8(m, x, y, k, precision, f16):
    _tile(x, y, m, 32, k, False, precision, f16, seed=m + k)


@pytest.mark.parametrize("bm", DK.K_LOOP_BMS)
def test_dot_k_loop_with_invariant_operand(bm):
    import torch

    rng = np.random.default_rng(bm)
    K = 256
    x, x64 = DK.operands("fp16", (bm, K), rng)
    y, y64 = DK.operands("fp16", (K, 64), rng)
    z = _out((bm, 64), "fp32")
    DK.dot_k_loop[(1,)](_dev(x, "fp16"), _dev(y, "fp16"), z, K, BM=bm, BN=64, BK=32)
    torch.cuda.synchronize()
    y0 = np.tile(y64[:32], (K // 32, 1))
    _check(z, x64 @ y64 + x64 @ y0, 2 * DK.dot_bound("fp16", x64, np.abs(y64) + np.abs(y0)), f"k loop {bm}")


@pytest.mark.parametrize("bm,bn,d", DK.CHAIN_CASES)
def test_chained_dots(bm, bn, d):
    import torch

    rng = np.random.default_rng(bm + bn + d)
    q, q64 = DK.operands("fp16", (bm, d), rng)
    kk, k64 = DK.operands("fp16", (bn, d), rng)
    v, v64 = DK.operands("fp16", (bn, d), rng)
    o = _out((bm, d), "fp32")
    DK.dot_chain[(1,)](_dev(q, "fp16"), _dev(kk, "fp16"), _dev(v, "fp16"), o, BM=bm, BN=bn, D=d)
    torch.cuda.synchronize()
    s = (q64 @ k64.T).astype(np.float16).astype(np.float64)  # the kernel's fp16 P (one rounding apart at most)
    bound = DK.dot_bound("fp16", s, v64) + 2.0 ** -10 * (np.abs(q64) @ np.abs(k64.T)) @ np.abs(v64)
    _check(o, s @ v64, bound, f"chain {bm}x{bn}x{d}")

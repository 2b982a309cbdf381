"""Error bounds for comparing kernel outputs with numpy in float64."""

from __future__ import annotations

import numpy as np


def check_bound(got: np.ndarray, want: np.ndarray, bound, what: str) -> None:
    """|got - want| <= bound elementwise (all float64), with NaN (poison) always failing."""
    got = np.asarray(got).astype(np.float64)
    err = np.abs(got - want)
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), err.shape)
    bad = ~(err <= bound)  # NaN compares False -> bad
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements out of bound; first "
                             f"at {idx}: got {got[idx]!r} want {want[idx]!r} bound {bound[idx]!r}")


def fp32_accum_bound(a64: np.ndarray, b64: np.ndarray, k: int) -> np.ndarray:
    """Error bound of an fp32-accumulated product of exactly representable inputs:
    k * 2^-22 * (|A| @ |B|) (4x the classic gamma_k bound), plus a denormal floor."""
    return k * 2.0 ** -22 * (np.abs(a64) @ np.abs(b64)) + 1e-30

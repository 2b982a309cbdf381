"""The memory and warp-level constructs on the GPU, each kernel launched in the specialization CI
compiles (tests/kernels/lang.py, tests/test_gpu_kernels_compile.py) and compared with numpy in
float64: gather / scatter (also from a user-swizzled buffer), the bytes a tile lands in under each
user shared layout (read back raw and compared with an independent formula of the layout), ballots
(scalar, in a branch, per register of a tensor), warp reductions, inline PTX and prefetches.
Outputs are poisoned first; inputs are random (the seed is printed with every failure)."""

from __future__ import annotations


import numpy as np
import pytest

from kernels import lang as K

pytestmark = pytest.mark.gpu



def poisoned(torch, shape, dtype):
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), device="cuda", dtype=dtype)
    return torch.full(shape, 0x7F, device="cuda", dtype=dtype)


def host(t) -> np.ndarray:
    return t.detach().float().cpu().numpy().astype(np.float64) if t.dtype.is_floating_point else t.cpu().numpy()


def exact(got, want, what: str) -> None:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    if bad.any():
        i = tuple(int(x) for x in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())}/{bad.size} differ, first at {i}: got {got[i]!r} want {want[i]!r}")


@pytest.mark.parametrize("key", sorted(K.GATHER), ids=lambda k: f"axis{k[0]}-{k[1]}")
def test_gather_2d_is_take_along_axis(key, torch):
    spec = K.GATHER[key]
    axis = key[0]
    x = torch.randn(64, 64, device="cuda")
    idx = torch.randint(0, 64, (64, 64), device="cuda", dtype=torch.int32)
    out = poisoned(torch, (64, 64), torch.float32)
    spec[(1,)](x, idx, out)
    torch.cuda.synchronize()
    exact(host(out), np.take_along_axis(host(x), host(idx).astype(np.int64), axis), spec.name)


def test_gather_1d_with_64_bit_indices(torch):
    x = torch.randn(4096, device="cuda").half()
    idx = torch.randint(0, 4096, (256,), device="cuda", dtype=torch.int64)
    out = poisoned(torch, (256,), torch.float16)
    K.GATHER_1D[(1,)](x, idx, out)
    torch.cuda.synchronize()
    exact(host(out), host(x)[host(idx)], "gather 1d")


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_3d_is_put_along_axis(axis, torch):
    shape = (16, 8, 4)
    keys = torch.rand(shape, device="cuda")
    idx = torch.argsort(keys, dim=axis).to(torch.int32).contiguous()  # a permutation of every line
    vals = torch.randn(shape, device="cuda")
    out = poisoned(torch, shape, torch.float32)
    K.SCATTER[axis][(1,)](idx, vals, out)
    torch.cuda.synchronize()
    want = np.full(shape, -1.0)
    np.put_along_axis(want, host(idx).astype(np.int64), host(vals), axis)
    exact(host(out), want, f"scatter axis {axis}")


def _image(name: str, x: np.ndarray, img: int) -> np.ndarray:
    """Where each element of the 128 x 64 tile lies under layout `name`, by the layouts' own
    definitions (not the compiler's index math): the first `img` elements of the buffer, NaN
    where padding lies."""
    rows, cols = x.shape
    out = np.full(img, np.nan)
    for r in range(rows):
        for c in range(cols):
            if name == "swizzle":  # vec 1, perPhase 1, maxPhase 8: column ^= row % 8
                o = r * cols + (c ^ (r % 8))
            elif name == "padded":  # row-major, 8 elements of padding after every 64
                o = r * cols + c
                o += (o // 64) * 8
            else:  # linear: offset bits 0-2 -> column 1,2,4; 3-4 -> row 1,2; 5 -> column 8; 6-7 -> row 4,8;
                # 8-9 -> column 16,32; 10-12 -> row 16,32,64
                o = ((c & 7) | ((r & 3) << 3) | ((c >> 3 & 1) << 5) | ((r >> 2 & 3) << 6) | ((c >> 4 & 3) << 8)
                     | ((r >> 4 & 7) << 10))
            if o < img:
                out[o] = x[r, c]
    return out


@pytest.mark.parametrize("name", sorted(K.LAYOUT_IMAGE))
def test_a_tile_lands_where_its_user_layout_says(name, torch):
    spec = K.LAYOUT_IMAGE[name]
    x = torch.randn(128, 64, device="cuda").half()
    img = poisoned(torch, (8192,), torch.float16)
    spec[(1,)](x, img)
    torch.cuda.synchronize()
    want = _image(name, host(x), 8192)
    got = host(img)
    data = ~np.isnan(want)
    exact(got[data], want[data], spec.name)  # (padding slots hold whatever was there)
    assert data.sum() >= 7000  # the image read back is (nearly) all data


def test_ballots(torch):
    out = poisoned(torch, (1,), torch.int32)
    K.BALLOT_SCALAR[(1,)](out)
    torch.cuda.synchronize()
    assert int(out.item()) == 0x0000FFFF
    out = poisoned(torch, (1,), torch.int32)
    K.BALLOT_BRANCH[(1,)](out)
    torch.cuda.synchronize()
    assert int(out.item()) == sum(1 << lane for lane in range(16) if lane % 3 == 0)


def _blocked_groups(n: int, spt: int, warps: int):
    """(warp, register, lane) of each element of a 1-D blocked layout (spt elements per lane)."""
    tile = spt * 32 * warps
    i = np.arange(n)
    t, rep = i % tile, i // tile
    return t // (spt * 32), rep * spt + t % spt, (t // spt) % 32


def _spt_of(spec, op_name: str) -> int:
    """Elements per lane of the 1-D blocked layout the compiler gives `op_name`'s result."""
    import tlx

    k = tlx.compile(spec.fn, signature=spec.signature, constexprs=spec.constexprs, num_warps=spec.num_warps,
                    divisibility=spec.divisibility)
    line = next(ln for ln in k.asm["ir.layouts"].splitlines() if op_name in ln)
    assert "#blocked<" in line, line
    return int(line.split("spt=[")[1].split("]")[0])


def test_a_tensor_ballot_is_per_register_of_each_warp(torch):
    spec = K.BALLOT_TENSOR
    n = spec.constexprs["BLOCK"]
    x = (torch.rand(n, device="cuda") < 0.4).to(torch.int32) * torch.randint(1, 9, (n,), device="cuda", dtype=torch.int32)
    out = poisoned(torch, (n,), torch.int32)
    spec[(1,)](x, out)
    torch.cuda.synchronize()
    warp, reg, lane = _blocked_groups(n, _spt_of(spec, "tlx.vote_ballot_sync"), 4)
    xs = host(x)
    want = np.zeros(n, np.int64)
    for i in range(n):
        same = (warp == warp[i]) & (reg == reg[i])
        want[i] = sum(1 << int(lane[j]) for j in np.flatnonzero(same) if xs[j] != 0)
    exact(host(out).astype(np.int64) & 0xFFFFFFFF, want, "tensor ballot")


@pytest.mark.parametrize("op", sorted(K.REDUX))
def test_warp_redux_reduces_each_register_over_its_warp(op, torch):
    spec = K.REDUX[op]
    n = spec.constexprs["BLOCK"]
    x = torch.randn(n, device="cuda") * 10
    x[torch.randint(0, n, (n // 16,), device="cuda")] = float("nan")
    out = poisoned(torch, (n,), torch.float32)
    spec[(1,)](x, out)
    torch.cuda.synchronize()
    warp, reg, _ = _blocked_groups(n, _spt_of(spec, "tlx.warp_redux"), 8)
    xs = host(x)
    f = {"max": np.nanmax, "min": np.nanmin, "abs_max": lambda v: np.nanmax(np.abs(v)),
         "abs_min": lambda v: np.nanmin(np.abs(v))}[op]
    want = np.array([f(xs[(warp == warp[i]) & (reg == reg[i])]) for i in range(n)])
    exact(host(out), want, spec.name)


def test_a_pinned_register_layout_decides_what_a_warp_reduces(torch):
    x = torch.randn(128, 64, device="cuda")
    out = poisoned(torch, (128, 64), torch.float32)
    K.PINNED_REDUX[(1,)](x, out)
    torch.cuda.synchronize()
    # lane l of warp w holds row 32 w + l: each column's max over the warp's 32 rows
    exact(host(out), np.repeat(host(x).reshape(4, 32, 64).max(axis=1), 32, axis=0), "pinned layout redux")


def test_inline_asm(torch):
    x = torch.randint(-2 ** 20, 2 ** 20, (1024,), device="cuda", dtype=torch.int32)
    y = poisoned(torch, (1024,), torch.int32)
    K.ASM_SHIFT[(1,)](x, y)
    b = torch.randint(-128, 128, (2048,), device="cuda", dtype=torch.int8)
    s, t = poisoned(torch, (2048,), torch.int32), poisoned(torch, (2048,), torch.int32)
    K.ASM_BYTES[(1,)](b, s, t)
    h = torch.randn(1024, device="cuda").half()
    h2 = poisoned(torch, (1024,), torch.float16)
    K.ASM_TIED[(1,)](h, h2)
    torch.cuda.synchronize()
    exact(host(y), host(x).astype(np.int64) * 8, "shl")
    exact(host(s), host(b).astype(np.int64), "bytes")
    exact(host(t), host(b).astype(np.int64) + 1, "bytes + 1")
    exact(host(h2), (host(h) * 2), "f16x2 tied")  # x + x is exact in fp16


@pytest.mark.parametrize("key", sorted(K.PREFETCH), ids=lambda k: f"{k[0]}-mask{k[1]}")
def test_prefetch_then_load(key, torch):
    spec = K.PREFETCH[key]
    x = torch.randn(3072, device="cuda")
    y = poisoned(torch, (3072,), torch.float32)
    spec[(3,)](x, y, 3000)
    torch.cuda.synchronize()
    n = 3000 if key[1] else 3072  # without the mask every element is copied
    exact(host(y)[:n], host(x)[:n], spec.name)
    assert np.isnan(host(y)[n:]).all()


def test_tensormap_prefetch_then_tma_copy(torch):
    import tlx

    x = torch.randint(-1000, 1000, (128, 128), device="cuda", dtype=torch.int16)
    y = poisoned(torch, (128, 128), torch.int16)
    xd = tlx.TensorDescriptor.from_tensor(x, [64, 64])
    yd = tlx.TensorDescriptor.from_tensor(y, [64, 64])
    K.PREFETCH_TENSORMAP[(2, 2)](xd, yd)
    torch.cuda.synchronize()
    exact(host(y), host(x), "tensormap prefetch + TMA copy")


@pytest.mark.parametrize("spec", K.ONE_THREAD_STORE, ids=lambda s: s.name)
def test_a_tensor_store_in_a_one_thread_branch_writes_what_that_thread_owns(spec, torch):
    """The interpreter's model (tests/test_interp_hazards.py) on the GPU: in a tile of one element
    per thread, thread 3 holds element 3."""
    block, nw = spec.constexprs["BLOCK"], spec.num_warps
    out = torch.zeros(block, device="cuda", dtype=torch.int32)
    spec[(1,)](out)
    torch.cuda.synchronize()
    want = np.zeros(block)
    held = np.arange(3, block, 32 * nw)
    want[held] = held + 1
    exact(host(out), want, spec.name)

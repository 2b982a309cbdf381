"""The flash-attention examples (tlx.examples.attention) on the GPU, against torch's math attention
in float64 (forward output, and dq / dk / dv through float64 autograd — a gradcheck-style
comparison of our backward), at every dtype / head dim / causal combination, at the benchmark
grid (tests/kernels/attention_examples.py) and at ragged sequence lengths; outputs poisoned with
NaN first, fresh random inputs (the seed is in every failure message). The reference covers the
first and the last (batch, head) pair, whose tiles are the first and last a kernel writes.
Plus: repeated runs agree bit for bit (a moving result is a race), `attention()` through torch
autograd, and the small configuration compute-sanitizer runs (tests/gpu/test_sanitizer.py).
Every launch is one CI compiled (its Spec)."""

from __future__ import annotations

import random

import pytest

from kernels.attention_examples import BENCH_SEQS, DTYPES, HEAD_DIMS, ODD_HEAD_DIMS, ODD_SHAPES, OVERLAP_HEAD_DIMS, \
    RAGGED_SHAPES, bench_shape, forward_config, spec_for

pytestmark = pytest.mark.gpu

#: (||.||_F relative, worst element against max |ref|): as on the CPU (tests/test_examples_attention.py)
BOUNDS = {"fp16": (2e-3, 6e-3), "bf16": (1.2e-2, 3e-2)}


def _seed() -> int:
    import torch

    seed = random.SystemRandom().randrange(2 ** 31)
    torch.manual_seed(seed)
    return seed


def _inputs(Z, H, N, D, dtype):
    import torch

    seed = _seed()
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    q, k, v, do = (torch.randn(Z, H, N, D, device="cuda").to(tdt) for _ in range(4))
    return seed, q, k, v, do


def _reference(q, k, v, do, causal, heads):
    """(o, dq, dk, dv) of each (batch, head) in `heads`: torch's math attention on float64 copies,
    gradients by float64 autograd."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = []
    for z, h in heads:
        qs, ks, vs = (x[z, h][None].double().requires_grad_() for x in (q, k, v))
        with sdpa_kernel([SDPBackend.MATH]):
            o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
        grads = torch.autograd.grad(o, (qs, ks, vs), do[z, h][None].double())
        out.append((o[0].detach(),) + tuple(g[0] for g in grads))
    return out


def _check(what, got, ref, dtype, where):
    import torch

    nan = int(torch.isnan(got).sum().item())
    assert nan == 0, f"{where}: {what} has {nan} elements never written"
    got = got.double()
    rel = (torch.linalg.norm(got - ref) / torch.linalg.norm(ref)).item()
    worst = ((got - ref).abs().max() / ref.abs().max()).item()
    bound, worst_bound = BOUNDS[dtype]
    assert rel <= bound and worst <= worst_bound, f"{where}: {what} relative error {rel:.2e}, worst {worst:.2e}"


def _run(plan):
    import torch

    for launch in plan.launches:
        spec_for(launch).check(*launch.args)
    outs = plan.run()
    torch.cuda.synchronize()
    return outs


def _forward(q, k, v, causal, kind):
    """The forward of `kind`: "forward", "persistent" or "overlap" (the persistent kernel with
    OVERLAP_TILES)."""
    import torch

    from tlx.examples import attention

    o = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:3], float("nan"), device="cuda")
    return _run(attention.plan_forward(q, k, v, causal, persistent=kind != "forward",
                                       config=forward_config(kind, q.shape[-1]), out=o, lse=lse))


def _forward_kinds(head_dim):
    return ["forward", "persistent"] + (["overlap"] if head_dim in OVERLAP_HEAD_DIMS else [])


def _backward(q, k, v, o, lse, do, causal):
    import torch

    from tlx.examples import attention

    dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
    return _run(attention.plan_backward(q, k, v, o, lse, do, causal, dq=dq, dk=dk, dv=dv))


def check_attention(Z, H, N, D, dtype, causal):
    """Every forward kernel and the backward at one shape, against float64."""
    import torch

    seed, q, k, v, do = _inputs(Z, H, N, D, dtype)
    heads = [(0, 0), (Z - 1, H - 1)]
    refs = _reference(q, k, v, do, causal, heads)
    where = f"{dtype} {Z}x{H}x{N}x{D} causal={causal} (seed {seed})"
    for kind in _forward_kinds(D):
        o, lse = _forward(q, k, v, causal, kind)
        assert not torch.isnan(lse).any(), f"{where}: LSE rows never written ({kind})"
        for (z, h), ref in zip(heads, refs):
            _check(f"o ({kind})[{z},{h}]", o[z, h], ref[0], dtype, where)
        nan_elsewhere = int(torch.isnan(o).sum().item())  # every head written, not only the checked ones
        assert nan_elsewhere == 0, f"{where}: {nan_elsewhere} output elements never written ({kind})"
    dq, dk, dv = _backward(q, k, v, o, lse, do, causal)
    for (z, h), ref in zip(heads, refs):
        for name, got, want in (("dq", dq, ref[1]), ("dk", dk, ref[2]), ("dv", dv, ref[3])):
            _check(f"{name}[{z},{h}]", got[z, h], want, dtype, where)
    for name, g in (("dq", dq), ("dk", dk), ("dv", dv)):
        assert not torch.isnan(g).any(), f"{where}: {name} has elements never written"


COMBOS = [(dt, d, c) for dt in DTYPES for d in HEAD_DIMS for c in (False, True)]


@pytest.mark.gpu_timeout(600)
@pytest.mark.parametrize("dtype,D,causal", COMBOS, ids=lambda v: str(v))
@pytest.mark.parametrize("N", BENCH_SEQS)
def test_attention_at_the_benchmark_grid(N, dtype, D, causal):
    Z, H, _, _ = bench_shape(N, D)
    check_attention(Z, H, N, D, dtype, causal)


RAGGED = [(Z, 2048 // d, N, d, dt, c) for dt, d, c in COMBOS for Z, N in RAGGED_SHAPES] + \
         [(Z, 2048 // d, N, d, dt, c) for dt, d, c in COMBOS if d in ODD_HEAD_DIMS for Z, N in ODD_SHAPES]


@pytest.mark.gpu_timeout(600)
@pytest.mark.parametrize("Z,H,N,D,dtype,causal", RAGGED, ids=lambda v: str(v))
def test_attention_at_ragged_lengths(Z, H, N, D, dtype, causal):
    check_attention(Z, H, N, D, dtype, causal)


@pytest.mark.parametrize("kind", _forward_kinds(128))
def test_attention_repeats_bit_for_bit(kind):
    import torch

    _, q, k, v, do = _inputs(2, 16, 2048, 128, "bf16")
    first = [x.clone() for x in _forward(q, k, v, True, kind)]
    for _ in range(3):
        again = _forward(q, k, v, True, kind)
        assert all(torch.equal(a, b) for a, b in zip(first, again)), "the forward's output moved between runs"
    o, lse = first
    grads = [g.clone() for g in _backward(q, k, v, o, lse, do, True)]
    again = _backward(q, k, v, o, lse, do, True)
    assert all(torch.equal(a, b) for a, b in zip(grads, again)), "the backward's output moved between runs"


def test_attention_through_torch_autograd(monkeypatch):
    """`attention()` and `.backward()` on CUDA tensors, against the float64 reference (every
    launch the wrapper makes is checked against its Spec first)."""
    from tlx.examples import attention as module
    from tlx.examples.attention import attention

    plain_run = module.KernelLaunch.run

    def checked_run(self, *args, **kwargs):
        spec_for(self).check(*self.args)
        return plain_run(self, *args, **kwargs)

    monkeypatch.setattr(module.KernelLaunch, "run", checked_run)
    seed, q, k, v, do = _inputs(2, 16, 1040, 128, "fp16")
    ref = _reference(q, k, v, do, True, [(1, 15)])[0]
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    o = attention(*leaves, causal=True)
    o.backward(do)
    where = f"autograd fp16 2x16x1040x128 causal (seed {seed})"
    _check("o", o.detach()[1, 15], ref[0], "fp16", where)
    for name, leaf, want in zip(("dq", "dk", "dv"), leaves, ref[1:]):
        _check(name, leaf.grad[1, 15], want, "fp16", where)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_sanitized_attention_config(causal):
    """The configurations tests/gpu/test_sanitizer.py runs under memcheck, racecheck and synccheck:
    head_dim 128, a sequence that ends mid-block (320 = 2.5 blocks), causal and not; forward
    (every kernel) and backward."""
    check_attention(1, 16, 320, 128, "fp16", causal)

"""Arithmetic on fp8 values (e4m3, e5m2), as Triton allows it: PTX has no fp8 arithmetic, so each
op widens its operands to fp32 (exactly), computes there and rounds back to fp8 once; comparisons
and reductions read the widened values. Interpreter numerics against float64 references rounded
to fp8 by torch (independently of tlx), and the PTX assembled by ptxas for sm_90a."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tlx  # noqa: E402
import tlx.language as tl  # noqa: E402

N = 128
FP8 = {"e4m3": (torch.float8_e4m3fn, "*fp8e4nv"), "e5m2": (torch.float8_e5m2, "*fp8e5")}


@tlx.jit
def fp8_binary(x_ptr, y_ptr, out_ptr, OP: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(x_ptr + i)
    b = tl.load(y_ptr + i)
    if OP == "add":
        r = a + b
    elif OP == "sub":
        r = a - b
    elif OP == "mul":
        r = a * b
    elif OP == "div":
        r = a / b
    elif OP == "max":
        r = tl.maximum(a, b)
    elif OP == "select":
        r = tl.where(a > b, a, b)
    elif OP == "neg":
        r = -a
    elif OP == "abs":
        r = tl.abs(a)
    elif OP == "floor":
        r = tl.floor(a)
    elif OP == "ceil":
        r = tl.ceil(a)
    else:  # "scale": a number operand takes the tensor's fp8 type, as in Triton
        r = a * 2 + 1
    tl.store(out_ptr + i, r)


@tlx.jit
def fp8_sum(x_ptr, out_ptr, N: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, N)), 0))


def _reference(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
            "max": lambda: np.maximum(a, b), "select": lambda: np.where(a > b, a, b), "neg": lambda: -a,
            "abs": lambda: np.abs(a), "floor": lambda: np.floor(a), "ceil": lambda: np.ceil(a),
            "scale": lambda: (a * 2).astype(np.float64)}[op]()


def _fp8(values: np.ndarray, dt) -> "torch.Tensor":
    return torch.from_numpy(values).to(dt)


@pytest.mark.parametrize("fmt", sorted(FP8))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "select", "neg", "abs", "floor", "ceil", "scale"])
def test_fp8_elementwise_ops_round_the_exact_result_once(fmt, op):
    dt, _ = FP8[fmt]
    rng = np.random.default_rng(8)
    x = _fp8(rng.uniform(-6, 6, N), dt)
    y = _fp8(rng.uniform(0.5, 4, N) * rng.choice([-1, 1], N), dt)
    out = _fp8(np.full(N, np.nan), dt)  # poison
    tlx.interpret(fp8_binary, (1,), x, y, out, OP=op, N=N)
    a, b = x.to(torch.float64).numpy(), y.to(torch.float64).numpy()
    want = torch.from_numpy(_reference(op, a, b)).to(dt)
    if op == "scale":  # a*2 rounds to fp8 before the +1, each step once
        want = (torch.from_numpy(a * 2).to(dt).to(torch.float64) + 1).to(dt)
    np.testing.assert_array_equal(out.to(torch.float64).numpy(), want.to(torch.float64).numpy())


@pytest.mark.parametrize("fmt", sorted(FP8))
def test_an_fp8_sum_adds_the_widened_values_and_rounds_once(fmt):
    dt, _ = FP8[fmt]
    x = _fp8(np.random.default_rng(9).uniform(-2, 2, N), dt)
    out = _fp8(np.full(1, np.nan), dt)
    tlx.interpret(fp8_sum, (1,), x, out, N=N)
    want = torch.tensor([x.to(torch.float64).sum().item()], dtype=torch.float64).to(dt)
    assert out.to(torch.float64).item() == want.to(torch.float64).item()


@pytest.mark.parametrize("fmt", sorted(FP8))
def test_fp8_arithmetic_widens_to_f32_and_assembles(fmt):
    _, sig = FP8[fmt]
    k = tlx.compile(fp8_binary, signature={"x_ptr": sig, "y_ptr": sig, "out_ptr": sig},
                    constexprs={"OP": "add", "N": N}, num_warps=4)
    ptx = k.asm["ptx"]
    assert k.asm["cubin"]  # ptxas assembled it for sm_90a
    assert "add.f32" in ptx or "add.rn.f32" in ptx
    assert ".e4m3x2.f32" in ptx if fmt == "e4m3" else ".e5m2x2.f32" in ptx  # rounded back to fp8 once
    s = tlx.compile(fp8_sum, signature={"x_ptr": sig, "out_ptr": sig}, constexprs={"N": N}, num_warps=4)
    assert s.asm["cubin"]

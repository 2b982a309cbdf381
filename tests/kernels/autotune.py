"""Kernels for tests/gpu/test_autotune_gpu.py, with a Spec for every config the autotuner there
launches, and `SpecLaunch`: the launch surface tlx.autotune builds on (`k[grid](...)`,
`k.warmup(...)`, `params`, `fn`, `__name__`) over a kernel, refusing any launch or compile that
matches none of its Specs, so the autotuner too launches only what CI compiled."""

from __future__ import annotations

from typing import Any, Dict, Sequence

import tlx
import tlx.language as tl

from . import Spec, spec

SLOW_CYCLES = 4_000_000  # about 2 ms at Hopper's clock: far above any launch's own time
SPIN_N = 100_000  # elements the spin test adds one to (a multiple of 16)
COPY_ROWS = 4096  # rows of 64 fp16 the TMA copy test moves


@tlx.jit
def add_one_after_spinning(x_ptr, out_ptr, n, BLOCK: tl.constexpr, SPIN: tl.constexpr):
    start = tlx.clock64()
    while tlx.clock64() - start < SPIN:
        pass
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


@tlx.jit
def copy_rows_tma(in_desc, out_desc, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    out_desc.store([pid * BLOCK, 0], in_desc.load([pid * BLOCK, 0]))


SPIN_SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
SPIN = [spec("autotune_spin_slow", add_one_after_spinning, SPIN_SIG, {"BLOCK": 256, "SPIN": SLOW_CYCLES},
             num_warps=4, divisible=["n"]),
        spec("autotune_spin_fast", add_one_after_spinning, SPIN_SIG, {"BLOCK": 256, "SPIN": 0}, num_warps=8,
             divisible=["n"])]
COPY = [spec(f"autotune_copy_rows_{b}", copy_rows_tma,
             {"in_desc": f"tensordesc<fp16[{b}, 64]>", "out_desc": f"tensordesc<fp16[{b}, 64]>"}, {"BLOCK": b})
        for b in (64, 128)]

_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "ctas_per_cga")


class SpecLaunch:
    """`fn`'s launch surface, each launch and compile checked against one of `specs` (the one
    whose constexprs and warps the call names)."""

    def __init__(self, fn: Any, specs: Sequence[Spec]):
        self.fn = fn
        self.params = fn.params
        self.__name__ = fn.__name__
        self.specs = list(specs)

    def _check(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
        consts = {k: v for k, v in kwargs.items() if k not in _OPTIONS}
        for s in self.specs:
            if s.constexprs == consts and s.num_warps == kwargs.get("num_warps", 4):
                s.check(*args)
                return
        raise AssertionError(f"{self.__name__}: no Spec for {consts}, num_warps={kwargs.get('num_warps', 4)}")

    def __getitem__(self, grid: Any):
        def launch(*args: Any, **kwargs: Any) -> Any:
            self._check(args, kwargs)
            return self.fn[grid](*args, **kwargs)

        return launch

    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> Any:
        self._check(args, kwargs)
        return self.fn.warmup(*args, grid=grid, **kwargs)

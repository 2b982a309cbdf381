"""The kernels the GPU tests (tests/gpu/) launch, each with the specializations they launch it in.

A GPU test launches a kernel through its `Spec` (``spec[grid](*args)``), which refuses arguments
that would specialize the kernel differently from the Spec (another dtype, another divisibility,
an int equal to 1 that the Spec does not name). tests/test_gpu_kernels_compile.py compiles every
Spec of this package and assembles its PTX with ptxas for sm_90a on the CPU, so CI covers every
kernel the GPU tests run, in the exact specialization they run it in (a Spec with `slow` set —
most of the attention examples', seconds of ptxas each — under ``-m slow``).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from catalog import KernelCase

SPECS: List["Spec"] = []


@dataclass
class Spec(KernelCase):
    """One specialization of a kernel that a GPU test launches: signature, constexprs, warps,
    the runtime parameters that are multiples of 16 (`divisibility`) and those equal to 1;
    `cluster`: the thread-block cluster it is launched in (`ctas_per_cga`)."""

    cluster: Tuple[int, int, int] = (1, 1, 1)

    def runtime_params(self) -> List[str]:
        return [p.name for p in self.fn.params if not p.is_constexpr]

    def compile(self) -> Any:
        """Trace and compile this specialization as a launch would (ptxas included where it is
        installed); the compiler's CompileResult."""
        from tlx.compiler.options import CompileOptions
        from tlx.compiler.pipeline import compile_module

        return compile_module(self.trace(), CompileOptions(num_warps=self.num_warps, cluster=self.cluster),
                              snapshots=False)

    def check(self, *args: Any) -> None:
        """Raise unless `args` (the runtime arguments, in order) specialize the kernel as this
        Spec says: a launch must never run a specialization the CPU test did not compile."""
        from tlx.specialize import arg_spec

        names = self.runtime_params()
        assert len(args) == len(names), f"{self.name}: {len(args)} arguments for {names}"
        for name, arg in zip(names, args):
            got = arg_spec(arg)
            want = (self.signature[name], self.divisibility.get(name, 1))
            assert (got.type, got.divisibility) == want, \
                f"{self.name}: argument '{name}' specializes as {got}, the Spec says {want}"
            one = type(arg) is int and arg == 1
            assert one == (name in self.equal_to_one), \
                f"{self.name}: argument '{name}' = {arg!r}, the Spec's equal_to_one is {self.equal_to_one}"

    def __getitem__(self, grid: Tuple[int, ...]) -> Callable[..., Any]:
        """``spec[grid](*args, stream=...)``: check the arguments, then launch the kernel with
        this Spec's constexprs and warps."""
        def launch(*args: Any, **options: Any) -> Any:
            self.check(*args)
            if self.cluster != (1, 1, 1):
                options["ctas_per_cga"] = self.cluster
            return self.fn[grid](*args, num_warps=self.num_warps, **options, **self.constexprs)
        return launch


def spec(name: str, fn: Any, signature: Mapping[str, str], constexprs: Optional[Mapping[str, Any]] = None,
         num_warps: int = 4, divisible: Iterable[str] = (), equal_to_one: Sequence[str] = (),
         cluster: Tuple[int, int, int] = (1, 1, 1)) -> Spec:
    """Register the Spec `name` of `fn`. Pointer parameters are taken as 16-byte aligned (every
    device allocation is); `divisible` names the integer parameters that are multiples of 16 at
    the launch, `equal_to_one` those that are 1."""
    assert all(s.name != name for s in SPECS), f"two Specs named {name!r}"
    div: Dict[str, int] = {n: 16 for n, t in signature.items() if t.startswith("*")}
    div.update({n: 16 for n in divisible})
    s = Spec(name, fn, dict(signature), dict(constexprs or {}), num_warps, div, tuple(equal_to_one), tuple(cluster))
    SPECS.append(s)
    return s


def all_specs() -> List[Spec]:
    """Every Spec of every module of this package."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return list(SPECS)

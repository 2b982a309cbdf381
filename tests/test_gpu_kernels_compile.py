"""Every kernel the GPU tests launch compiles on the CPU, in the specialization they launch it in,
and ptxas assembles its PTX for sm_90a with no spills: the GPU tests launch only through the
Specs of tests/kernels/, and this file compiles every one of them, so a GPU run never fails for a
reason CI could have caught."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import kernels
from ptx_checker import undefined_uses
from tlx.jit import JITFunction

SPECS = kernels.all_specs()


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_gpu_test_kernel_compiles_and_assembles_without_spills(spec):
    result = spec.compile()
    assert isinstance(result.asm.get("cubin"), bytes), result.resources
    assert result.resources["spill_stores"] == 0, result.resources
    assert undefined_uses(result.asm["ptx"]) == []


def test_every_kernel_of_the_gpu_tests_has_a_spec():
    """A kernel defined in tests/kernels/ but given no Spec would be launched untested by CI."""
    with_spec = {id(s.fn) for s in SPECS}
    defined = []
    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"kernels.{info.name}")
        defined += [(info.name, name) for name, obj in vars(module).items()
                    if isinstance(obj, JITFunction) and obj.fn.__module__ == module.__name__]
        missing = [name for name, obj in vars(module).items()
                   if isinstance(obj, JITFunction) and obj.fn.__module__ == module.__name__ and id(obj) not in with_spec]
        assert missing == [], f"kernels/{info.name}.py: no Spec for {missing}"
    assert len(defined) >= 28, defined  # the discovery found the kernels (the check above is not vacuous)


def test_a_launch_that_specializes_differently_from_its_spec_is_refused():
    """The Specs' check is what ties a GPU launch to this file's compile: an argument of another
    dtype, another divisibility or an int equal to 1 the Spec does not name must be refused."""
    from runtime_fakes import Tensor

    from kernels import codegen

    spec = codegen.UNARY[0]  # x_ptr, y_ptr: *fp32, n: i32 not a multiple of 16
    x = Tensor(0x10000, (5000,), "float32")
    spec.check(x, x, 5000)
    for bad in [(Tensor(0x10000, (5000,), "float16"), x, 5000),  # another dtype
                (Tensor(0x10004, (5000,), "float32"), x, 5000),  # a pointer not 16-byte aligned
                (x, x, 4096),                                     # n a multiple of 16
                (x, x, 1)]:                                       # n equal to 1
        with pytest.raises(AssertionError, match="specializes as|equal_to_one"):
            spec.check(*bad)

"""Bad inputs the real TLX rejects with a ValueError, TypeError or AssertionError are rejected here
with a TLXCompileError that is also that class (code written against the real TLX catches them the
same way), naming the kernel's line."""

from __future__ import annotations

import pytest

import tlx
import tlx.language as tl
from tlx.compiler.errors import TLXCompileError


@tlx.jit
def bad(x_ptr, d, WHAT: tl.constexpr):
    n = tl.load(x_ptr).to(tl.int32)
    if WHAT == "runtime_num":
        tlx.local_alloc((64, 64), tl.float16, n)
    elif WHAT == "tmem":
        tlx.local_alloc((128, 64), tl.float32, 1, tlx.storage_kind.tmem)
    elif WHAT == "trans_dims":
        tlx.local_trans(tlx.local_alloc((64, 64), tl.float16, 1)[0], (0, 0))
    elif WHAT == "fence_scope":
        tlx.fence("cta")
    elif WHAT == "thread_axis":
        tlx.thread_id(3)
    elif WHAT == "dtype_of":
        tlx.dtype_of(3)
    elif WHAT == "size_of":
        tlx.size_of(3)
    elif WHAT == "fp8_name":
        tlx.get_fp8_format_name(tl.float16)
    elif WHAT == "desc_stride":
        tl.make_tensor_descriptor(x_ptr, shape=[64, 64], strides=[1, 64], block_shape=[64, 64])
    elif WHAT == "desc_rank":
        tl.make_tensor_descriptor(x_ptr, shape=[64, 64], strides=[64, 1], block_shape=[64])
    elif WHAT == "desc_nan_int":
        tl.make_tensor_descriptor(d, shape=[64, 64], strides=[64, 1], block_shape=[64, 64], padding_option="nan")


@pytest.mark.parametrize("what,cls,match", [
    ("runtime_num", ValueError, "must be a compile-time constant"),
    ("tmem", AssertionError, "only on Blackwell"),
    ("trans_dims", ValueError, "do not permute"),
    ("fence_scope", ValueError, "unknown fence scope 'cta'"),
    ("thread_axis", ValueError, "axis must be 0, 1 or 2"),
    ("dtype_of", ValueError, "dtype_of needs"),
    ("size_of", AssertionError, "size_of needs a dtype"),
    ("fp8_name", AssertionError, "only supports tl.float8e5"),
    ("desc_stride", ValueError, "last stride"),
    ("desc_rank", ValueError, "1..5 dimensions"),
    ("desc_nan_int", ValueError, "needs floating-point elements"),
])
def test_the_real_tlx_error_class_at_the_kernels_line(what, cls, match):
    with pytest.raises(cls, match=match) as e:
        tlx.compile(bad, signature={"x_ptr": "*fp32", "d": "*i32"}, constexprs={"WHAT": what})
    assert isinstance(e.value, TLXCompileError)
    src = open(e.value.loc.file).read().splitlines()[e.value.loc.line - 1]
    assert src.strip().startswith(("tlx.", "tl.")), src


class _UpstreamCompilationError(Exception):
    """What upstream Triton's `triton.compiler.errors.CompilationError` looks like: an `__init__`
    and `__str__` of its own, which must not take over a tlx error."""

    def __init__(self, src, node, error_message=None):
        self.message = "upstream formatting"
        super().__init__(self.message)

    def __str__(self):
        return self.message


@pytest.fixture
def triton_loaded(monkeypatch):
    """A process in which the user has imported triton (stand-in module: CI has no triton)."""
    import types

    mod = types.ModuleType("triton.compiler.errors")
    mod.CompilationError = _UpstreamCompilationError
    monkeypatch.setitem(__import__("sys").modules, "triton.compiler.errors", mod)
    return _UpstreamCompilationError


def test_ported_code_catching_tritons_compilation_error_catches_ours(triton_loaded):
    with pytest.raises(triton_loaded) as e:
        tlx.compile(bad, signature={"x_ptr": "*fp32", "d": "*i32"}, constexprs={"WHAT": "fp8_name"})
    err = e.value
    # still ours, with the real TLX's class, our message and the builtin's error as the cause
    assert isinstance(err, TLXCompileError) and isinstance(err, AssertionError)
    assert "error: get_fp8_format_name only supports tl.float8e5" in str(err)
    assert "upstream formatting" not in str(err)
    assert err.error_message == err.message and "only supports tl.float8e5" in str(err.__cause__)
    assert type(err).__name__ == "TLXAssertionError"


def test_without_triton_loaded_the_error_is_plain_tlx_and_triton_stays_unimported(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "triton.compiler.errors", raising=False)
    with pytest.raises(TLXCompileError) as e:
        tlx.compile(bad, signature={"x_ptr": "*fp32", "d": "*i32"}, constexprs={"WHAT": "dtype_of"})
    assert type(e.value).__mro__[:3] == (tlx.compiler.errors.TLXValueError, TLXCompileError,
                                         tlx.compiler.errors.TLXError)
    assert "triton.compiler.errors" not in sys.modules


def test_a_compile_error_pickles_as_tlxs_class_with_its_location(triton_loaded):
    import pickle

    with pytest.raises(TLXCompileError) as e:
        tlx.compile(bad, signature={"x_ptr": "*fp32", "d": "*i32"}, constexprs={"WHAT": "fence_scope"})
    back = pickle.loads(pickle.dumps(e.value))
    assert str(back) == str(e.value) and back.loc == e.value.loc and back.hint == e.value.hint
    assert isinstance(back, ValueError) and isinstance(back, triton_loaded)

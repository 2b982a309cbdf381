"""Every mistake in bad_kernels.py gives a TLXCompileError at the marked file:line, with a message
that says what is wrong (and shows the source line)."""

import inspect
import os
import re

import pytest

import bad_kernels
from tlx.compiler.errors import TLXCompileError, TLXError
from tlx.signature import signature_to_types


def _marker(fn):
    lines, start = inspect.getsourcelines(fn.fn)
    for i, line in enumerate(lines):
        m = re.search(r"# ERR: (.*)$", line)
        if m:
            return start + i, m.group(1).strip()
    raise AssertionError(f"{fn.__name__} has no # ERR marker")


def _trace(fn):
    sig = {p.name: bad_kernels.SIG_P[p.name] for p in fn.params if not p.is_constexpr}
    consts = {p.name: (64 if p.name == "BLOCK" else False) for p in fn.params if p.is_constexpr}
    return fn.trace(signature_to_types(sig), consts)


def test_there_are_at_least_25_distinct_mistakes():
    assert len(bad_kernels.ERROR_KERNELS) >= 25
    messages = {_marker(fn)[1] for fn in bad_kernels.ERROR_KERNELS}
    assert len(messages) == len(bad_kernels.ERROR_KERNELS)


@pytest.mark.parametrize("fn", bad_kernels.ERROR_KERNELS, ids=lambda f: f.__name__)
def test_error_names_the_right_line(fn):
    line, text = _marker(fn)
    with pytest.raises(TLXCompileError) as info:
        _trace(fn)
    e = info.value
    assert isinstance(e, TLXError)
    assert os.path.samefile(e.filename, bad_kernels.__file__), e
    assert e.lineno == line, f"expected line {line}, got {e.lineno}:\n{e}"
    assert text in str(e), f"expected {text!r} in:\n{e}"
    # the message quotes the offending source line
    src_line = open(bad_kernels.__file__).read().splitlines()[line - 1].strip()
    assert src_line in str(e)


def test_compile_rejects_unknown_signature_type():
    import tlx

    with pytest.raises(TLXCompileError, match="unknown signature type 'float'"):
        tlx.compile(bad_kernels.bad_fence_scope, signature={"x_ptr": "*fp32", "n": "float"})


def test_missing_constexpr_names_the_kernel():
    with pytest.raises(TLXCompileError, match="no value for constexpr parameter 'BLOCK'"):
        bad_kernels.static_assert_fails.trace(signature_to_types({"x_ptr": "*fp32", "n": "i32"}), {})


def test_calling_a_kernel_from_python_is_an_error():
    with pytest.raises(TLXCompileError, match="cannot be called directly"):
        bad_kernels.bad_fence_scope(1, 2)


def test_builtins_outside_a_kernel_are_an_error():
    import tlx.language as tl

    with pytest.raises(TLXCompileError, match="inside a @tlx.jit kernel"):
        tl.program_id(0)


def test_an_undefined_function_is_told_where_names_come_from_not_about_loops():
    with pytest.raises(TLXCompileError) as info:
        _trace(bad_kernels.undefined_function)
    hint = info.value.hint
    assert "bad_kernels" in hint and "import" in hint and "loop" not in hint


def test_a_name_bound_only_inside_a_loop_is_told_about_the_loop():
    with pytest.raises(TLXCompileError) as info:
        _trace(bad_kernels.name_bound_only_in_a_loop)
    assert "loop or branch" in info.value.hint and "bind it before" in info.value.hint

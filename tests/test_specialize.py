"""The one specializer (tlx/specialize.py): every argument's spec follows Triton's spellings and
divisibility rules, the hot path's `key_of` gives exactly `arg_spec`'s answers, and a bound call
specializes into the signature, constexprs, divisibility, equal-to-one parameters and options
the compiler is given."""

import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import catalog
import tlx
import tlx.language as tl
from runtime_fakes import CAIArray, Tensor
from tlx.compiler.errors import TLXCompileError
from tlx.runtime import host_copy
from tlx.runtime.errors import TLXRuntimeError
from tlx.runtime.tma import TensorDescriptor
from tlx.specialize import Specializer, arg_spec, key_of, spec


def sig(v, **kw):
    s = arg_spec(v, **kw)
    return s.type, s.divisibility


def test_the_spec_table():
    assert sig(CAIArray(0x1000, (4,), "<f2")) == ("*fp16", 16)
    assert sig(CAIArray(0x1004, (4,), "<f4")) == ("*fp32", 1)
    assert sig(Tensor(0x2000, (8,), "bfloat16")) == ("*bf16", 16)
    assert sig(Tensor(0x2008, (8,), "int64")) == ("*i64", 1)
    assert sig(Tensor(0x5000, (4,), requires_grad=True)) == ("*fp32", 16)
    assert sig(Tensor(0x7F00_0000_0000, (16,), "int32", cuda=False, pinned=True)) == ("*i32", 16)
    assert sig(host_copy(np.zeros(3, np.float32))) == ("*fp32", 16)
    assert sig(True) == ("i1", 1) and sig(np.bool_(False)) == ("i1", 1)
    assert sig(7) == ("i32", 1) and sig(32) == ("i32", 16) and sig(0) == ("i32", 16)
    assert sig(2 ** 31 - 1) == ("i32", 1) and sig(2 ** 31) == ("i64", 16)
    assert sig(-(2 ** 31)) == ("i32", 16) and sig(-(2 ** 31) - 1) == ("i64", 1)
    assert sig(2 ** 63) == ("u64", 16) and sig(2 ** 64 - 1) == ("u64", 1)
    assert sig(1.5) == ("fp32", 1)
    assert sig(np.float16(1.5)) == ("fp16", 1) and sig(np.float64(1.5)) == ("fp64", 1)
    assert sig(np.int64(48)) == ("i64", 16) and sig(np.uint32(3)) == ("u32", 1)
    assert arg_spec(1).equal_to_one and not arg_spec(True).equal_to_one and not arg_spec(2 ** 40 + 1).equal_to_one
    assert arg_spec(5) is spec("i32", 1) and arg_spec(1) is spec("i32", 1, True)  # interned


def test_tensor_descriptors():
    d = TensorDescriptor(CAIArray(0x1000, (128, 64), "<f2"), [128, 64], [64, 1], [64, 64])
    assert sig(d) == ("tensordesc<fp16[64, 64]>", 1)
    d2 = TensorDescriptor(CAIArray(0x1000, (128, 64), "<f2"), [128, 64], [64, 1])
    with pytest.raises(TLXRuntimeError, match="block_shape is not set"):
        arg_spec(d2)
    d2.block_shape = [32, 64]  # set later, as TLX pre_hooks do
    assert sig(d2) == ("tensordesc<fp16[32, 64]>", 1)


def test_what_cannot_be_an_argument_says_so():
    with pytest.raises(TLXRuntimeError, match="64 bits"):
        arg_spec(2 ** 64)
    with pytest.raises(TLXRuntimeError, match="64 bits"):
        arg_spec(-(2 ** 63) - 1)
    with pytest.raises(TLXRuntimeError) as e:
        arg_spec(np.zeros(4, np.float32))
    assert "host array" in str(e.value) and "host_copy" in str(e.value)
    with pytest.raises(TLXRuntimeError, match="cannot pass str"):
        arg_spec("hello")
    with pytest.raises(TLXRuntimeError, match="on 'cpu'"):
        arg_spec(Tensor(0x5000, (4,), cuda=False))


def test_host_arrays_stand_for_device_arrays_where_asked():
    a = np.zeros(8, np.float16)
    assert arg_spec(a, host_arrays=True).type == "*fp16"
    assert sig(Tensor(0x5000, (4,), "int8", cuda=False), host_arrays=True) == ("*i8", 16)

    class Desc:  # any host descriptor object, as the interpreter takes
        def __init__(self, base):
            self.base, self.shape, self.strides, self.block_shape = base, list(base.shape), [base.shape[1], 1], [16, 32]

    assert sig(Desc(np.zeros((64, 64), np.float32)), host_arrays=True) == ("tensordesc<fp32[16, 32]>", 1)


def fake_torch(monkeypatch):
    mod = types.ModuleType("torch")
    mod.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", mod)


ARGS = st.one_of(
    st.integers(-2 ** 64, 2 ** 65), st.floats(allow_nan=False), st.booleans(),
    st.builds(lambda a, d, c: Tensor(a, (8,), d, cuda=c), st.integers(0, 2 ** 48), st.sampled_from(["float32", "float16", "bfloat16", "int8"]),
              st.booleans()),
    st.builds(lambda a: CAIArray(a, (8,), "<f4"), st.integers(0, 2 ** 48)),
    st.builds(np.int16, st.integers(-2 ** 15, 2 ** 15 - 1)))


def outcome(f, v):
    try:
        return f(v)
    except TLXRuntimeError as e:
        return type(e), str(e)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(ARGS, max_size=5), torch_imported=st.booleans())
def test_key_of_is_arg_spec_of_each_argument(values, torch_imported):
    """The hot path reads torch tensors, ints and floats inline: the same specs, the same errors."""
    with pytest.MonkeyPatch.context() as m:
        if torch_imported:
            fake_torch(m)
        for v in values:
            assert outcome(lambda x: key_of((x,))[0], v) == outcome(arg_spec, v)
        if all(not isinstance(outcome(arg_spec, v), tuple) for v in values):
            assert key_of(tuple(values)) == tuple(arg_spec(v) for v in values)


def test_a_call_specializes_on_types_divisibility_ones_constexprs_and_options():
    fn = catalog.vector_add
    sp = Specializer(fn)
    x, y = CAIArray(0x10000, (1024,), "<f4"), CAIArray(0x10004, (1024,), "<f4")  # y: not 16-byte aligned
    s1 = sp.specialize(*sp.bind((x, x, x, 1024), {"BLOCK": 256}))
    assert s1.signature == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    assert s1.divisibility == {"x_ptr": 16, "y_ptr": 16, "out_ptr": 16, "n": 16}
    assert s1.constexprs == {"BLOCK": 256} and s1.equal_to_one == [] and s1.options.num_warps == 4
    s2 = sp.specialize(*sp.bind((x, y, x, 1000), {"BLOCK": 256}))
    assert s2.divisibility["y_ptr"] == 1 and s2.divisibility["n"] == 1 and s2.key != s1.key
    s3 = sp.specialize(*sp.bind((x, x, x, 1), {"BLOCK": 256}))
    assert s3.equal_to_one == ["n"] and s3.key not in (s1.key, s2.key)
    s4 = sp.specialize(*sp.bind((x, x, x), {"n": 1040, "BLOCK": 128}))
    assert s4.constexprs == {"BLOCK": 128} and s4.key != s1.key
    s5 = sp.specialize(*sp.bind((x, x, x, 1024), {"BLOCK": 256, "num_warps": 8, "ctas_per_cga": (2, 1, 1)}))
    assert s5.options.num_warps == 8 and s5.options.cluster == (2, 1, 1) and s5.key != s1.key
    same = sp.specialize(*sp.bind((y, y, y), {"n": 2048, "BLOCK": 256}))
    assert same.key != s1.key  # y unaligned
    assert sp.specialize(*sp.bind((x, x, x), {"n": 2048, "BLOCK": 256, "num_stages": 3})).key == s1.key


def test_binding_a_call():
    @tlx.jit
    def k(a, b, n=7, BLOCK: tl.constexpr = 64, num_warps=None):  # a parameter named like an option
        pass

    sp = Specializer(k, {"num_warps": 8})
    values, options = sp.bind((1, 2), {"num_stages": 2})
    assert values == {"a": 1, "b": 2, "n": 7, "BLOCK": 64, "num_warps": None}
    assert options["num_stages"] == 2 and "num_warps" not in options  # the parameter wins
    assert (sp.n_lead, sp.n_fast) == (3, 4)
    for args, kwargs, words in [((1,), {}, "missing a required argument: 'b'"),
                                ((1, 2, 3, 4, 5, 6), {}, "too many positional arguments"),
                                ((1, 2), {"a": 1}, "multiple values for argument 'a'"),
                                ((1, 2), {"nope": 1}, "got an unexpected keyword argument 'nope'")]:
        with pytest.raises(TLXCompileError, match=f"bad launch of kernel k: {words}"):
            sp.bind(args, kwargs)
    with pytest.raises(TLXCompileError, match="argument 'n' is None"):
        sp.specialize(*sp.bind((1, 2, None), {}))


@tlx.jit
def _add3(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr = 256):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + tl.load(y_ptr + offs, mask=offs < n), mask=offs < n)


def _binding_error(call) -> "tlx.specialize.ArgumentBindingError":
    from tlx.specialize import ArgumentBindingError

    with pytest.raises(ArgumentBindingError) as info:
        call()
    assert isinstance(info.value, TLXCompileError) and isinstance(info.value, TypeError)
    return info.value


def test_a_forgotten_argument_shows_how_the_call_was_bound_at_the_callers_line():
    x, out = np.zeros(1000, np.float32), np.zeros(1000, np.float32)
    line = sys._getframe().f_lineno + 1
    err = _binding_error(lambda: tlx.interpret(_add3, (4,), x, out, 1000))  # y left out: 'n' is missing
    text = str(err)
    assert err.filename == __file__ and err.lineno == line
    assert "missing a required argument: 'n'" in text
    assert "_add3(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr) was bound as:" in text
    rows = {r.split("=")[0].strip(): r.split("=", 1)[1].strip() for r in err.binding[1:]}
    assert rows == {"x_ptr": "ndarray float32[1000]  (positional #0)",
                    "y_ptr": "ndarray float32[1000]  (positional #1)",
                    "out_ptr": "1000  (positional #2)",  # the slid argument is visible
                    "n": "<missing>",
                    "BLOCK: tl.constexpr": "256  (default)"}
    assert "moved up by one" in err.hint


def test_an_unknown_keyword_and_extra_positionals_are_shown_with_the_binding():
    x = np.zeros(64, np.float32)
    line = sys._getframe().f_lineno + 1
    err = _binding_error(lambda: _add3.warmup(x, x, x, 64, BLOK=64))
    assert err.lineno == line and "unexpected keyword argument 'BLOK'" in str(err)
    assert "    unknown keyword BLOK = 64" in err.binding
    assert any(r.split("=")[0].strip() == "n" and "64  (positional #3)" in r for r in err.binding)
    err = _binding_error(lambda: _add3.warmup(x, x, x, 64, 256, 7))
    assert "too many positional arguments" in str(err) and "    extra positional #5 = 7" in err.binding
    err = _binding_error(lambda: _add3.warmup(x, x, x, 64, x_ptr=x))
    assert "multiple values for argument 'x_ptr'" in str(err)
    assert any("(positional #0) and ndarray float32[64]  (keyword)" in r for r in err.binding)

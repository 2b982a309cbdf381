"""Storage aliasing (`tlx.storage_alias_spec`, `local_alloc(..., reuse=...)`, `reuse_group`,
`set_buffer_overlap`): the Python-level objects, where the tracer places each member in the
spec's bytes (read from the IR), the errors for specs that cannot be laid out, the PTX ptxas
assembles, the interpreter's numerics against numpy in float64 (aliases share bytes), and a
proxy hazard through an alias that the interpreter reports and the fence passes fix."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tlx
import tlx.language as tl
from kernels import storage_alias as K
from tlx.compiler.errors import TLXCompileError
from tlx.compiler.ir.alias import Placement
from tlx.interpreter import ProxyHazard

SMEM = tlx.storage_kind.smem
SHARED, DISTINCT = tlx.reuse_group_type.shared, tlx.reuse_group_type.distinct


# ---- the Python objects -------------------------------------------------------------------------

def test_spec_type_equality_repr_and_mangle_follow_storage_and_size():
    sized = tlx.storage_alias_spec_type(SMEM, 4096)
    assert sized == tlx.storage_alias_spec_type(SMEM, 4096)
    assert sized != tlx.storage_alias_spec_type(SMEM, 8192)
    assert sized != tlx.storage_alias_spec_type(SMEM)
    assert sized != tlx.storage_alias_spec_type(tlx.storage_kind.tmem, 4096)
    assert repr(sized) == "storage_alias_spec_type(storage=smem, size=4096)"
    assert sized.mangle() == "storage_alias_spec_smem_4096"
    assert tlx.storage_alias_spec_type(SMEM).mangle() == "storage_alias_spec_smem"


def test_spec_value_is_immutable_and_rejects_cluster_storage():
    s = tlx.storage_alias_spec_type_class(handle=None, storage=SMEM, buffer_size_bytes=2048)
    assert s.type == tlx.storage_alias_spec_type(SMEM, 2048)
    assert repr(s) == "storage_alias_spec(storage=smem, size=2048)"
    with pytest.raises(AttributeError):
        s.buffer_size_bytes = 1
    with pytest.raises(ValueError, match="smemCluster"):
        tlx.storage_alias_spec_type_class(handle=None, storage=tlx.storage_kind.smemCluster)


def test_reuse_group_checks_its_elements_and_group_size():
    layout = tlx.swizzled_shared_layout_encoding.make_default(rank=2)
    buf = tlx.buffered_tensor(handle=None, element_ty=tl.float16, shape=[16, 16], num=2, storage=SMEM,
                              layout=layout)
    assert buf.shape == (16, 16) and buf.num == 2
    inner = tlx.reuse_group(buf, group_size=2)
    outer = tlx.reuse_group(buf, inner, group_type=DISTINCT)
    assert outer.args == (buf, inner) and outer.group_type is DISTINCT and inner.group_size == 2
    with pytest.raises(ValueError, match="at least one element"):
        tlx.reuse_group()
    with pytest.raises(TypeError, match="must be buffered_tensor or reuse_group"):
        tlx.reuse_group(buf, 3)
    with pytest.raises(ValueError, match="group_size"):
        tlx.reuse_group(buf, group_size=0)


# ---- placements (read from the traced IR) -------------------------------------------------------

def _layout(fn, signature, constexprs):
    ck = tlx.compile(fn, signature=signature, constexprs=constexprs)
    text = ck.asm["ir.smem_allocation"]
    members = {}
    for m in re.finditer(r"%(\w+) = tlx\.local_alias %\w+ \{offset = (\d+), strides = \[([\d, ]*)\], "
                         r"radices = \[([\d, ]*)\]\}", text):
        ints = lambda s: tuple(int(x) for x in s.split(",") if x.strip())  # noqa: E731
        members[m.group(1)] = Placement(int(m.group(2)), ints(m.group(3)), ints(m.group(4)))
    size = int(re.search(r"tlx\.local_alloc \{storage_alias = true.*?!smem<(\d+)xi8", text).group(1))
    return members, size, ck


@tlx.jit
def _fa_like(out_ptr, B: tl.constexpr, SIZED: tl.constexpr):
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.smem, buffer_size_bytes=SIZED)
    qk = tlx.local_alloc((B, B), tl.float32, 2, tlx.storage_kind.smem, reuse=spec)
    p = tlx.local_alloc((B, B), tl.bfloat16, 2, tlx.storage_kind.smem, reuse=spec)
    alpha = tlx.local_alloc((B, B // 2), tl.float32, 2, tlx.storage_kind.smem, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(qk, tlx.reuse_group(p, alpha, group_type=tlx.reuse_group_type.distinct)))
    offs = tl.arange(0, B)[:, None] * B + tl.arange(0, B)[None, :]
    tlx.local_store(qk[0], tl.full((B, B), 1.0, tl.float32))
    tlx.local_store(p[1], tl.full((B, B), 2.0, tl.bfloat16))
    tlx.local_store(alpha[1], tl.full((B, B // 2), 3.0, tl.float32))
    tl.store(out_ptr + offs, tlx.local_load(qk[0]))


def test_shared_and_distinct_groups_place_members_by_buffer_group():
    members, size, ck = _layout(_fa_like, {"out_ptr": "*fp32"}, {"B": 64, "SIZED": None})
    # a buffer group is as large as qk's buffer (16 KB); p and alpha lie side by side inside it
    assert members["qk"] == Placement(0, (16384,), ())
    assert members["p"] == Placement(0, (16384,), ())
    assert members["alpha"] == Placement(8192, (16384,), ())
    assert size == 2 * 16384
    assert isinstance(ck.asm["cubin"], bytes)


def test_a_sized_spec_keeps_its_size_and_one_too_small_is_an_error():
    _, size, _ = _layout(_fa_like, {"out_ptr": "*fp32"}, {"B": 64, "SIZED": 65536})
    assert size == 65536
    with pytest.raises(TLXCompileError, match=r"buffer_size_bytes 16384 is too small: its allocations need 32768 "
                                              r"bytes") as e:
        tlx.compile(_fa_like, signature={"out_ptr": "*fp32"}, constexprs={"B": 64, "SIZED": 16384})
    assert "test_storage_alias.py" in str(e.value)


def test_group_size_gives_consecutive_sub_slots_and_a_distinct_neighbour_follows_them():
    members, size, _ = _layout(K.alias_distinct_groups_kernel, K.DISTINCT.signature, K.DISTINCT.constexprs)
    # p (64x32 fp16, 4 KB a buffer): buffers 2g, 2g+1 at 16 KB * g + {0, 4 KB}; alpha after them
    assert members["p"] == members["p2"] == Placement(0, (16384, 4096), (2,))
    assert [members["p"].slab_offset(i) for i in range(4)] == [0, 4096, 16384, 20480]
    assert members["alpha"] == Placement(8192, (16384,), ())
    assert size == 32768


def test_without_set_buffer_overlap_every_member_starts_at_byte_zero():
    @tlx.jit
    def k(out_ptr):
        spec = tlx.storage_alias_spec()
        a = tlx.local_alloc((64, 64), tl.float16, 2, reuse=spec)
        b = tlx.local_alloc((32, 64), tl.float32, 3, reuse=spec)
        tlx.local_store(a[1], tl.full((64, 64), 1.0, tl.float16))
        tl.store(out_ptr + tl.arange(0, 64), tl.sum(tlx.local_load(b[2]), axis=0))

    members, size, _ = _layout(k, {"out_ptr": "*fp32"}, {})
    assert members["a"] == Placement(0, (8192,), ()) and members["b"] == Placement(0, (8192,), ())
    assert size == 3 * 8192  # the largest member


# ---- errors -------------------------------------------------------------------------------------

def _compile_error(body_fn, match):
    with pytest.raises(TLXCompileError, match=match) as e:
        tlx.compile(body_fn, signature={"out_ptr": "*fp32"})
    assert "test_storage_alias.py:" in str(e.value), str(e.value)
    return e.value


def test_members_with_different_numbers_of_buffer_groups_are_an_error():
    @tlx.jit
    def k(out_ptr):
        spec = tlx.storage_alias_spec()
        a = tlx.local_alloc((64, 64), tl.float16, 2, reuse=spec)
        b = tlx.local_alloc((64, 64), tl.float16, 3, reuse=spec)
        spec.set_buffer_overlap(tlx.reuse_group(a, b))

    _compile_error(k, "same number of buffer groups")


def test_overlap_defined_twice_or_naming_a_foreign_buffer_is_an_error():
    @tlx.jit
    def twice(out_ptr):
        spec = tlx.storage_alias_spec()
        a = tlx.local_alloc((64, 64), tl.float16, 2, reuse=spec)
        spec.set_buffer_overlap(tlx.reuse_group(a))
        spec.set_buffer_overlap(tlx.reuse_group(a))

    _compile_error(twice, "only have one overlap definition")

    @tlx.jit
    def foreign(out_ptr):
        spec = tlx.storage_alias_spec()
        a = tlx.local_alloc((64, 64), tl.float16, 2, reuse=spec)
        c = tlx.local_alloc((64, 64), tl.float16, 2)
        spec.set_buffer_overlap(tlx.reuse_group(a, c))

    _compile_error(foreign, "reuse=this spec")


def test_tensor_memory_spec_names_blackwell():
    @tlx.jit
    def k(out_ptr):
        spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)

    err = _compile_error(k, r"Blackwell \(sm_100\)")
    assert "sm_90a" in str(err)


def test_a_spec_over_the_shared_memory_budget_is_an_error():
    @tlx.jit
    def k(out_ptr):
        spec = tlx.storage_alias_spec()
        a = tlx.local_alloc((128, 128), tl.float32, 2, reuse=spec)
        b = tlx.local_alloc((128, 128), tl.float32, 2, reuse=spec)
        spec.set_buffer_overlap(tlx.reuse_group(a, b, group_type=tlx.reuse_group_type.distinct))
        tlx.local_store(a[0], tl.full((128, 128), 1.0, tl.float32))
        tlx.local_store(b[1], tl.full((128, 128), 1.0, tl.float32))

    err = _compile_error(k, r"needs 262144 bytes of shared memory, more than the 232448")
    assert "storage_alias_spec at" in str(err) and "(262144 bytes)" in str(err), str(err)


def test_reuse_of_a_buffer_too_small_is_an_error():
    @tlx.jit
    def k(out_ptr):
        a = tlx.local_alloc((64, 64), tl.float16, 1)
        b = tlx.local_alloc((64, 64), tl.float32, 1, reuse=a)

    _compile_error(k, "does not fit the 8192 bytes")


# ---- the interpreter: aliases share bytes --------------------------------------------------------

def _rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("idx", [0, 1])
def test_interpreter_reads_one_alias_through_another(idx):
    rng = np.random.default_rng(7 + idx)
    x, y = _rand(rng, (64, 64), np.float16), _rand(rng, (64, 64), np.float16)
    out = np.full((2, 64, 64), np.nan, np.float16)
    tlx.interpret(K.alias_shared_kernel, (1,), x, y, out, np.array([idx], np.int32), B=64)
    want = np.stack([x, y] if idx == 0 else [y, x]).astype(np.float64)
    np.testing.assert_array_equal(out.astype(np.float64), want)


def test_interpreter_keeps_distinct_members_apart_and_shared_ones_together():
    rng = np.random.default_rng(11)
    x = _rand(rng, (4, 64, 32), np.float16)
    z = _rand(rng, (2, 64, 16), np.float32)
    out_p = np.full((4, 64, 32), np.nan, np.float16)
    out_z = np.full((2, 64, 16), np.nan, np.float32)
    tlx.interpret(K.alias_distinct_groups_kernel, (1,), x, z, out_p, out_z, BM=64, BN=64)
    np.testing.assert_array_equal(out_p.astype(np.float64), x.astype(np.float64))
    np.testing.assert_array_equal(out_z.astype(np.float64), z.astype(np.float64))


def test_interpreter_reuse_of_a_buffer_array_shares_its_first_bytes():
    rng = np.random.default_rng(13)
    x, y, z = (_rand(rng, (64, 64), np.float16) for _ in range(3))
    out = np.full((3, 64, 64), np.nan, np.float16)
    tlx.interpret(K.reuse_array_kernel, (1,), x, y, z, out, B=64)
    np.testing.assert_array_equal(out.astype(np.float64), np.stack([x, z, y]).astype(np.float64))


def test_reuse_of_a_buffer_array_compiles_into_its_bytes():
    """The alias of a multi-buffer array is lowered (it was refused as 'not a whole allocation')
    and takes no shared memory of its own: the kernel needs a's two 8 KiB tiles and no more."""
    result = K.REUSE_ARRAY.compile()
    assert isinstance(result.asm.get("cubin"), bytes)
    assert result.resources["shared_bytes"] == 2 * 64 * 64 * 2, result.resources


def test_a_generic_write_then_a_tma_store_through_an_alias_is_a_hazard_the_passes_fence():
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float16)

    def run(fence_passes):
        out = np.full((64, 64), np.nan, np.float16)
        desc = tlx.TensorDescriptor(out, shape=[64, 64], strides=[64, 1], block_shape=[64, 64])
        hs = tlx.interpret(K.alias_tma_store_kernel, (1,), x, desc, B=64, fence_passes=fence_passes,
                           raise_on_hazard=False)
        return hs, out

    hs, _ = run(False)
    assert len(hs) == 1 and type(hs[0]) is ProxyHazard and hs[0].kind == "raw", [str(h) for h in hs]
    src = K.alias_tma_store_kernel.fn.__code__.co_firstlineno
    assert hs[0].lines == (src + 9, src + 10)  # the local_store into a[0], the TMA store of b[0]
    hs, out = run(True)
    assert hs == []
    np.testing.assert_array_equal(out.astype(np.float64), x.astype(np.float64))


def test_a_whole_array_of_unevenly_placed_aliases_must_be_indexed_first():
    @tlx.jit
    def k(out_ptr):
        spec = tlx.storage_alias_spec()
        qk = tlx.local_alloc((64, 64), tl.float32, 2, reuse=spec)
        p = tlx.local_alloc((64, 32), tl.float16, 4, reuse=spec)
        alpha = tlx.local_alloc((64, 16), tl.float32, 2, reuse=spec)
        spec.set_buffer_overlap(tlx.reuse_group(qk, tlx.reuse_group(tlx.reuse_group(p, group_size=2), alpha,
                                                                    group_type=tlx.reuse_group_type.distinct)))
        x = tlx.local_load(p)
        tl.store(out_ptr + tl.arange(0, 32), tl.sum(tl.sum(x, axis=0), axis=0).to(tl.float32))

    with pytest.raises(TLXCompileError, match="whole array of unevenly placed aliased buffers"):
        tlx.compile(k, signature={"out_ptr": "*fp32"})
    with pytest.raises(tlx.TLXError, match="unevenly placed aliased buffers .* can only be indexed"):
        tlx.interpret(k, (1,), np.zeros(32, np.float32))

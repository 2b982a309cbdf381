"""The IR core: hand-written IR parses, verifies and round-trips; the verifier rejects broken IR."""

import pytest

from tlx.compiler.errors import IRParseError, IRVerifyError
from tlx.compiler.ir import parse_module, parse_type, print_module, verify_module
from tlx.compiler.ir import types as T

GEMM_LOOP = '''
#f0 = "k.py"
module attributes {num_warps = 4} {
  tt.func @k(%a_ptr: !ptr<f16>, %K: i32) {
    %c0 = arith.constant {value = 0} : i32 loc(#f0:3:4)
    %c1 = arith.constant {value = 1} : i32
    %buf = tlx.local_alloc : !smem<2x64x64xf16, #nvmma<swizzle=128, bits=16, transposed=false>, buffers=2, mutable>
    %z = arith.constant {value = 0.0} : tensor<64x64xf32>
    %r = scf.for %c0, %K, %c1 inits(%z) : tensor<64x64xf32> {
    ^body(%k: i32, %acc: tensor<64x64xf32>):
      %v = tlx.memdesc_index %buf, %k : !smem<64x64xf16, #nvmma<swizzle=128, bits=16, transposed=false>, alloc=2x64x64, mutable>
      %d = tlx.async_dot %v, %v acc(%acc) : tensor<64x64xf32>
      %w = tlx.async_dot_wait %d {pendings = 0} : tensor<64x64xf32>
      scf.yield %w
    } loc(#f0:5:4)
    tlx.fence_async_shared {cluster = false, origin = "user"}
    tt.return
  }
}
'''


def test_round_trip_is_identity():
    m = parse_module(GEMM_LOOP)
    verify_module(m)
    text = print_module(m)
    assert print_module(parse_module(text)) == text
    assert "loc(#f0:5:4)" in text


def test_types_round_trip():
    for t in [T.i1, T.bf16, T.PointerType(T.f16), T.TensorType((64, 32), T.PointerType(T.f32)),
              T.MemDescType((3, 64, 64), T.f16, None, 3, True), T.BarrierType(4), T.BarrierType(1, False),
              T.TensorDescType((64, 64), T.bf16), T.token]:
        assert parse_type(str(t)) == t


def test_verifier_rejects_type_change_in_loop():
    bad = GEMM_LOOP.replace("scf.yield %w", "%q = arith.constant {value = 1} : i32\n      scf.yield %q")
    with pytest.raises(IRVerifyError, match="yielded types"):
        verify_module(parse_module(bad))


def test_verifier_rejects_use_before_def_across_partition():
    text = '''
module {
  tt.func @k(%p: !ptr<f32>) {
    %c = arith.constant {value = 1} : i32
    tlx.warp_specialize {partition_num_warps = [4]} {
    ^default:
      tlx.ws_yield
    } {
    ^partition0:
      %d = arith.addi %c, %c : i32
      tlx.ws_return
    }
    tt.return
  }
}
'''
    with pytest.raises(IRVerifyError, match="does not dominate"):
        verify_module(parse_module(text))


def test_parse_error_names_line():
    with pytest.raises(IRParseError, match="IR line 4"):
        parse_module("module {\n  tt.func @k() {\n    %a = arith.constant {value = 1} : i32\n    %b = arith.addi %a, %zz : i32\n    tt.return\n  }\n}\n")


def test_memdesc_index_of_an_mbarrier_array():
    text = '''
module {
  tt.func @k(%i: i32) {
    %bars = tlx.alloc_barriers {num = 2, arrive_count = 1} : !mbarriers<2>
    %b = tlx.memdesc_index %bars, %i : !mbarrier
    tlx.barrier_arrive %b {count = 1}
    tt.return
  }
}
'''
    verify_module(parse_module(text))
    with pytest.raises(IRVerifyError, match="gives !mbarrier"):
        verify_module(parse_module(text.replace("%i : !mbarrier", "%i : !mbarriers<1>")))

"""The contract between the code generator and the runtime, on the acceptance kernels
(tests/kernels/acceptance.py) compiled by the real pipeline (no GPU): the KernelABI's parameters
are the PTX entry's parameters (order, kind, size), every TMA encoding the code generator emits
passes the runtime's TMA rules for a descriptor of that block shape, the shared-memory request
matches, and the launcher packs exactly the bytes the entry declares."""

import ctypes
import re
import struct

import pytest

import tlx
from kernels import acceptance
from runtime_fakes import Tensor
from tlx.runtime import tma
from tlx.runtime.launcher import Launcher
from tlx.runtime.loader import LoadedKernel
from tlx.runtime.tma import TensorDescriptor, check_tma_rules

K = {name: getattr(acceptance, f"{name}_kernel") for name in
     ("tma_store", "wgmma_inside", "gemm_tma", "last_cta_sum", "big_smem", "axpy")}
CASES = {
    "tma_store": ({"x_ptr": "*fp16", "y_desc": "tensordesc<fp16[64, 64]>", "M": "i32", "N": "i32"},
                  {"BLOCK_M": 64, "BLOCK_N": 64, "USER_FENCE": False}),
    "wgmma_inside": ({"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                      "K": "i32"}, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}),
    "gemm_tma": ({"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
                  "c_desc": "tensordesc<fp16[128, 128]>", "M": "i32", "N": "i32", "K": "i32"},
                 {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_STAGES": 3}),
    "last_cta_sum": ({"x_ptr": "*fp32", "partials_ptr": "*fp32", "counter_ptr": "*i32",
                      "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 256, "MAX_PROGRAMS": 128}),
    "big_smem": ({"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"ROWS": 64, "COLS": 128, "NUM_BUF": 3}),
    "axpy": ({"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "alpha": "fp32"},
             {"BLOCK": 1024}),
}
_COMPILED = {}


def compiled(name):
    if name not in _COMPILED:
        sig, consts = CASES[name]
        _COMPILED[name] = tlx.compile(K[name], signature=sig, constexprs=consts, num_warps=4)
    return _COMPILED[name]


def entry_params(ptx, entry):
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(([^)]*)\)", ptx)
    assert m, f"no .entry {entry} in the PTX"
    return [p.strip() for p in m.group(1).split(",") if p.strip()]


def declared_size(decl):
    m = re.search(r"\.b8\s+\S+\[(\d+)\]", decl)
    if m:
        return int(m.group(1))
    m = re.search(r"\.[buisf](8|16|32|64)\b", decl)
    return int(m.group(1)) // 8


@pytest.mark.parametrize("name", sorted(CASES))
def test_abi_matches_the_ptx_entry(name):
    k = compiled(name)
    abi = k.abi
    decls = entry_params(k.asm["ptx"], abi.entry)
    assert len(decls) == len(abi.params)
    for decl, p in zip(decls, abi.params):
        assert declared_size(decl) == p.size, (decl, p)
        if p.kind == "tensordesc":
            assert ".align 64" in decl and "[128]" in decl
        elif p.kind == "pointer":
            assert ".u64" in decl
    m = re.search(r"\.reqntid\s+(\d+)", k.asm["ptx"])
    if m:
        assert int(m.group(1)) == abi.threads_per_cta
    assert abi.shared_bytes == k.resources.get("shared_bytes", abi.shared_bytes)


@pytest.mark.parametrize("name", ["tma_store", "gemm_tma"])
def test_codegen_tma_encodings_pass_the_runtime_rules(name):
    for p in compiled(name).abi.params:
        if p.kind != "tensordesc":
            continue
        enc = p.tma
        rows, cols = enc.block_shape[0] * 3 + 5, enc.block_shape[1] * 2 + 8  # ragged shape
        check_tma_rules(ptr=0x10000, dtype=enc.dtype, shape=[rows, cols], strides=[cols, 1],
                        block_shape=list(enc.block_shape), encoding=enc, base_extent=rows * cols,
                        param=p.name)


def test_launcher_packs_what_the_gemm_entry_declares(monkeypatch):
    k = compiled("gemm_tma")
    maps = {}

    class FakeMap:
        def __init__(self, ptr):
            self.buf = (ctypes.c_uint8 * 128)(*([ptr >> 16 & 0xFF] * 128))

        def getPtr(self):
            return ctypes.addressof(self.buf)

    monkeypatch.setattr(tma, "encode_tiled", lambda enc, ptr, kernel=None: maps.setdefault(ptr, FakeMap(ptr)))
    calls = []

    def record(cfg, handle, params, extra):
        ptrs = (ctypes.c_void_p * len(k.abi.params)).from_address(params)
        calls.append([ctypes.string_at(ptrs[i], p.size) for i, p in enumerate(k.abi.params)])
        calls.append(cfg.sharedMemBytes)
        return (0,)

    launcher = Launcher(k.abi, ptx=k.asm["ptx"], cubin=k.asm.get("cubin"), name="gemm")
    launcher.install(LoadedKernel("gemm", None, None, "H", 0, 0, 0), None, record)
    M, N, Kd = 200, 136, 72
    a = Tensor(0x01_0000, (M, Kd), "float16")
    b = Tensor(0x02_0000, (Kd, N), "float16")
    c = Tensor(0x03_0000, (M, N), "float16")
    launcher.launch((2, 2), [TensorDescriptor(a, [M, Kd], [Kd, 1], [128, 64]),
                             TensorDescriptor(b, [Kd, N], [N, 1], [64, 128]),
                             TensorDescriptor(c, [M, N], [N, 1], [128, 128]), M, N, Kd])
    got, shared = calls
    assert got[:3] == [bytes([1] * 128), bytes([2] * 128), bytes([3] * 128)]
    assert got[3:] == [struct.pack("<i", M), struct.pack("<i", N), struct.pack("<i", Kd)]
    assert shared == k.abi.shared_bytes > 48 * 1024

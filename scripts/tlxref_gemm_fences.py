"""Compile the GEMM examples with Meta's TLX (the real compiler, on the CPU) and with tlx, and
compare the proxy fences in both PTXs: how many, and how many inside the K loop.

Run with a Python that has triton + TLX (triton.language.extra.tlx):
``$TLXREF_PYTHON scripts/tlxref_gemm_fences.py [--ptx-dir DIR] [--json FILE]``.
It reads `examples/gemm_kernels.py`, swaps its imports for triton's (the only change a TLX
kernel needs), compiles every kernel for sm_90a with `triton.compile`, and, when tlx is
importable in the same Python (or `--tlx-python` names one that has it), the same kernels with
tlx. tests/test_gemm_fences.py runs it and asserts that tlx emits no more fences than TLX.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERNELS = os.path.join(ROOT, "examples", "gemm_kernels.py")
sys.path.insert(0, HERE)

def _load_fence_report():
    """examples/ptx_fences.py, loaded by path (it imports nothing from tlx)."""
    spec = importlib.util.spec_from_file_location("ptx_fences", os.path.join(ROOT, "examples", "ptx_fences.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fence_report


fence_report = _load_fence_report()


def to_triton_source(src: str) -> str:
    """The inverse of the import swap tests/catalog.py applies to real TLX kernels."""
    src = re.sub(r"^import tlx\.language as tl$", "import triton.language as tl", src, flags=re.M)
    src = re.sub(r"^import tlx$", "import triton\nimport triton.language.extra.tlx as tlx", src, flags=re.M)
    return src.replace("@tlx.jit", "@triton.jit")


def load_triton_kernels():
    with open(KERNELS) as f:
        src = to_triton_source(f.read())
    d = tempfile.mkdtemp(prefix="tlxref_gemm_")
    path = os.path.join(d, "gemm_kernels_triton.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("gemm_kernels_triton", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cases(dtype: str = "bf16"):
    """(name, kernel name, signature, constexprs, num_warps) of every example, at the H200 configs."""
    sys.path.insert(0, ROOT)
    out = []
    # the configs are duplicated here on purpose: this script must run without tlx installed
    d = f"tensordesc<{dtype}"
    i32 = "i32"
    out.append(("pipelined", "matmul_pipelined_kernel",
                {"a_desc": f"{d}[128, 64]>", "b_desc": f"{d}[64, 256]>", "c_desc": f"{d}[128, 256]>",
                 "M": i32, "N": i32, "K": i32},
                dict(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=3), 8))
    ws_sig = {"a_desc": f"{d}[64, 64]>", "b_desc": f"{d}[64, 256]>", "c_desc": f"{d}[64, 256]>",
              "M": i32, "N": i32, "K": i32}
    ws = dict(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=3, NUM_MMA_GROUPS=2)
    out.append(("ws", "matmul_ws_kernel", ws_sig, ws, 4))
    out.append(("persistent", "matmul_persistent_kernel", ws_sig, dict(ws, NUM_SMS=132), 4))
    pp_sig = {"a_desc": f"{d}[128, 64]>", "b_desc": f"{d}[64, 128]>", "c_desc": f"{d}[128, 128]>",
              "M": i32, "N": i32, "K": i32}
    out.append(("pingpong", "matmul_pingpong_kernel", pp_sig,
                dict(BM=128, BN=128, BK=64, GROUP_SIZE_M=8, NUM_STAGES=5, NUM_SMS=132), 4))
    return out


def compile_triton(mod, name, sig, consts, nw, num_stages):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(mod, name)
    names = list(fn.arg_names)
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k, v in sig.items() if v == "i32"}
    src = ASTSource(fn, {**sig, **{k: "constexpr" for k in consts}},
                    constexprs={(names.index(k),): v for k, v in consts.items()}, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": nw, "num_stages": num_stages})
    return k.asm["ptx"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ptx-dir", help="write each PTX there")
    ap.add_argument("--json", help="write the report there")
    ap.add_argument("--dtype", default="bf16")
    args = ap.parse_args(argv)
    mod = load_triton_kernels()
    report = {}
    for case, name, sig, consts, nw in cases(args.dtype):
        # num_stages=1 is what the TLX tutorials launch with; with it Triton's pipeliner still
        # runs and drains every async wgmma it did not pipeline (a wait 0 after each dot);
        # num_stages=0 keeps the kernel's own async_dot_wait(1) schedule. Fences: the same.
        for ns in (1, 0):
            try:
                ptx = compile_triton(mod, name, sig, consts, nw, ns)
            except Exception as e:  # report, keep going
                report[case] = {"error": f"{type(e).__name__}: {str(e)[:2000]}"}
                print(f"{case}: real TLX failed: {report[case]['error']}")
                break
            if args.ptx_dir:
                os.makedirs(args.ptx_dir, exist_ok=True)
                with open(os.path.join(args.ptx_dir, f"{case}.tlxref.ns{ns}.ptx"), "w") as f:
                    f.write(ptx)
            if ns == 1:
                report[case] = fence_report(ptx)
            else:
                report[case]["num_stages_0"] = fence_report(ptx)
        if "error" not in report[case]:
            print(f"{case}: real TLX {report[case]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

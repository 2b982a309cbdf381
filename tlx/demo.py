"""`python -m tlx demo`: the main job, end to end.

A Hopper matmul tile kernel — TMA loads into shared memory on mbarriers, wgmma, the result
stored from registers into shared memory and written out by a TMA store — written WITHOUT a
proxy fence. The demo traces it, shows the IR, lets the compiler place the fence and explain it,
shows the PTX, and then runs the kernel: on the GPU when there is one (checked against numpy),
otherwise on the CPU interpreter (checked against numpy), where it also shows the interpreter
catching the race when the fence passes are switched off.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import tlx
import tlx.language as tl
from tlx.runtime.driver import has_sm90_gpu

M, N, K = 256, 256, 256
BM, BN, BK = 128, 128, 64


@tlx.jit
def matmul_tile(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_s = tlx.local_alloc((BM, BK), tl.float16, 1)
    b_s = tlx.local_alloc((BK, BN), tl.float16, 1)
    c_s = tlx.local_alloc((BM, BN), tl.float16, 1)
    ready = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BK)):
        tlx.barrier_expect_bytes(ready[0], (BM * BK + BK * BN) * 2)
        tlx.async_descriptor_load(a_desc, a_s[0], [pid_m * BM, kt * BK], ready[0])
        tlx.async_descriptor_load(b_desc, b_s[0], [kt * BK, pid_n * BN], ready[0])
        tlx.barrier_wait(ready[0], kt & 1)
        acc = tlx.async_dot(a_s[0], b_s[0], acc)
        acc = tlx.async_dot_wait(0, acc)
    tlx.local_store(c_s[0], acc.to(tl.float16))
    # No tlx.fence("async_shared") here: the compiler places it, and says why.
    tlx.async_descriptor_store(c_desc, c_s[0], [pid_m * BM, pid_n * BN])
    tlx.async_descriptor_store_wait(0)


SIGNATURE = {"a_desc": f"tensordesc<fp16[{BM}, {BK}]>", "b_desc": f"tensordesc<fp16[{BK}, {BN}]>",
             "c_desc": f"tensordesc<fp16[{BM}, {BN}]>", "K": "i32"}
CONSTEXPRS = {"BM": BM, "BN": BN, "BK": BK}


def banner(text: str) -> None:
    print("\n" + "=" * 100 + f"\n{text}\n" + "=" * 100)


def descriptors(a, b, c):
    """Host (numpy) or device arrays -> the three TMA descriptors of the kernel."""
    return [tlx.TensorDescriptor(x, list(x.shape), [x.shape[1], 1], blk)
            for x, blk in ((a, [BM, BK]), (b, [BK, BN]), (c, [BM, BN]))]


def main() -> int:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)

    banner("1. The kernel, traced into tlx IR (no fence in the source)")
    t0 = time.perf_counter()
    k = tlx.compile(matmul_tile, signature=SIGNATURE, constexprs=CONSTEXPRS, num_warps=8)
    print(k.asm["ir"])
    banner("2. The fences the compiler placed, each with what it separates and why it sits there")
    print(k.explain_fences())
    banner("3. The IR after the fence passes (fences annotated)")
    from tlx.display import fenced_ir_text

    print(fenced_ir_text(k))
    banner("4. PTX for sm_90a")
    ptx = k.asm.get("ptx")
    if ptx:
        lines = ptx.splitlines()
        keep = [i for i, l in enumerate(lines) if "fence.proxy.async" in l or "cp.async.bulk.tensor" in l
                or "wgmma.mma_async" in l]
        shown = sorted({j for i in keep for j in range(max(0, i - 2), min(len(lines), i + 3))})
        last = -2
        for j in shown:
            if j != last + 1:
                print("    ...")
            line = lines[j]
            print(line if len(line) <= 150 else line[:110] + " ... " + line[-30:])
            last = j
        print(f"({len(lines)} PTX lines; ptxas: {'ran' if k.asm.get('cubin') else 'not run'})")
        if k.resources:
            print("resources:", {kk: v for kk, v in k.resources.items() if kk in ("registers", "spills", "shared_bytes", "stack")})
    else:
        print("(no PTX: code generation is not available in this build)")
    print(f"\ncompile: {(time.perf_counter() - t0) * 1e3:.1f} ms; per pass (ms):",
          {n: round(t * 1e3, 2) for n, t in k.pass_times.items()})

    grid = (M // BM, N // BN)
    hazards: list = []
    if has_sm90_gpu():
        banner("5. Run on the GPU")
        from numba import cuda

        da, db = cuda.to_device(a), cuda.to_device(b)
        dc = cuda.to_device(np.full((M, N), np.nan, dtype=np.float16))  # poisoned output
        matmul_tile[grid](*descriptors(da, db, dc), K, num_warps=8, **CONSTEXPRS)
        cuda.synchronize()
        out = dc.copy_to_host().astype(np.float64)
    else:
        banner("5. No sm_90 GPU here: run on the CPU interpreter (with the proxy-hazard checker)")
        c = np.full((M, N), np.nan, dtype=np.float16)  # poisoned output
        descs = descriptors(a, b, c)
        hazards = tlx.interpret(matmul_tile, grid, *descs, K, num_warps=8, raise_on_hazard=False, **CONSTEXPRS)
        print(f"hazards with the compiler's fences: {len(hazards)}")
        for h in hazards:
            print(h)
        out = c.astype(np.float64)
    err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    ok = bool(np.isfinite(out).all()) and err < 1e-2 and (has_sm90_gpu() or not hazards)
    print(f"relative error vs numpy (float64): {err:.2e}  -> {'OK' if ok else 'WRONG'}")

    if not has_sm90_gpu():
        banner("6. The same kernel with the fence passes switched off: the interpreter finds the race")
        c2 = np.zeros((M, N), dtype=np.float16)
        descs = descriptors(a, b, c2)
        found = tlx.interpret(matmul_tile, grid, *descs, K, num_warps=8, fence_passes=False,
                              raise_on_hazard=False, **CONSTEXPRS)
        for h in found[:1]:
            print(h)
        if not found:
            print("(no hazard reported)")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

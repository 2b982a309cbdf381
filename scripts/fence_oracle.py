"""Differential fence oracle: compile the patterns of `tests/tlx_sources/fence_patterns_tlx.py` with the real TLX
(triton 3.8 + triton-utlx, on the CPU, for sm_90a) and with ours, and report where each puts its
proxy fences.

    $TLXREF_PYTHON scripts/fence_oracle.py tlx  > oracle_tlx.json   # a Python with the real TLX
    python scripts/fence_oracle.py ours  > oracle_ours.json
    python scripts/fence_oracle.py table oracle_tlx.json oracle_ours.json

For each kernel and each compiler: the proxy fences in the PTX (and for ours also in the final
IR), how many sit inside a loop of the PTX (a backward branch around real work, not an
mbarrier spin loop), the gpu / sys fences, and the lines around each proxy fence.
"""

from __future__ import annotations

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
PATTERNS = os.path.join(TESTS, "tlx_sources", "fence_patterns_tlx.py")  # written for the real TLX
_LABEL = re.compile(r"^\s*(\$?[A-Za-z_][\w$.]*):")
_BRA = re.compile(r"\bbra(?:\.uni)?\s+(\$?[A-Za-z_][\w$.]*)\s*;")


def ptx_loops(lines):
    """(start, end) line ranges of backward branches whose body is more than a spin-wait."""
    where = {}
    loops = []
    for i, l in enumerate(lines):
        m = _LABEL.match(l)
        if m:
            where[m.group(1)] = i
        b = _BRA.search(l)
        if b and b.group(1) in where and where[b.group(1)] < i:
            body = lines[where[b.group(1)]:i]
            if not any("try_wait" in x or "test_wait" in x for x in body) or len(body) > 12:
                loops.append((where[b.group(1)], i))
    return loops


def analyse_ptx(ptx: str):
    lines = ptx.splitlines()
    loops = ptx_loops(lines)
    fences = [i for i, l in enumerate(lines) if "fence.proxy.async" in l]
    return {
        "proxy_fences": len(fences),
        "in_loop": sum(1 for f in fences if any(a < f < b for a, b in loops)),
        "gpu_fences": sum(1 for l in lines if "fence.acq_rel.gpu" in l or "fence.sc.gpu" in l or "membar.gl" in l),
        "sys_fences": sum(1 for l in lines if "fence.acq_rel.sys" in l or "fence.sc.sys" in l or "membar.sys" in l),
        "context": ["\n".join(x.strip() for x in lines[max(0, f - 4):f + 3]) for f in fences],
    }


def run_tlx():
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    import importlib.util

    spec = importlib.util.spec_from_file_location("fence_patterns_tlx", PATTERNS)
    K = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(K)

    out = {}
    for name, fn, sig, const, nw in K.CASES:
        full = dict(sig)
        full.update({k: "constexpr" for k in const})
        try:
            c = triton.compile(ASTSource(fn, full, const), target=GPUTarget("cuda", 90, 32), options={"num_warps": nw})
            r = analyse_ptx(c.asm["ptx"])
            r["ttgir_fences"] = c.asm["ttgir"].count("fence_async_shared")
        except Exception as e:  # report, do not hide
            r = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
        out[name] = r
    return out


def run_ours():
    sys.path.insert(0, TESTS)
    import catalog  # the one import swap the tests use too

    K = catalog.load_tlx_source(os.path.basename(PATTERNS))
    import tlx

    out = {}
    for name, fn, sig, const, nw in K.CASES:
        try:
            k = tlx.compile(fn, sig, const, num_warps=nw, verify_each_pass=True)
            ptx = k.asm.get("ptx")
            r = analyse_ptx(ptx) if ptx else {}
            recs = k.fences
            r["ir_fences"] = len(recs)
            r["records"] = [f"[{x.origin}] at {x.loc.line}: {x.placement_text or x.reason}" for x in recs]
        except Exception as e:
            r = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
        out[name] = r
    return out


def table(tlx_json: str, ours_json: str) -> None:
    a, b = json.load(open(tlx_json)), json.load(open(ours_json))
    print(f"{'kernel':50s} {'TLX fences (in loop)':>22s} {'ours (in loop)':>16s} {'gpu/sys TLX':>12s} {'gpu/sys ours':>13s}")
    for name in a:
        x, y = a[name], b.get(name, {})

        def f(r):
            if "error" in r:
                return "error"
            if "proxy_fences" not in r:
                return f"{r.get('ir_fences', '?')} (IR)"
            return f"{r['proxy_fences']} ({r['in_loop']})"

        def g(r):
            return "error" if "error" in r or "gpu_fences" not in r else f"{r['gpu_fences']}/{r['sys_fences']}"

        print(f"{name:50s} {f(x):>22s} {f(y):>16s} {g(x):>12s} {g(y):>13s}")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "ours"
    if mode == "table":
        table(sys.argv[2], sys.argv[3])
    else:
        print(json.dumps(run_tlx() if mode == "tlx" else run_ours(), indent=1))

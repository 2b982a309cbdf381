"""Finding and running ptxas: PTX → cubin for sm_90a, with the resource report.

ptxas is looked up on PATH, then under CUDA_HOME / CUDA_PATH (``bin/ptxas``), then in an
installed ``nvidia-cuda-nvcc`` wheel (through `cuda.pathfinder` when it is installed, else the
wheel's usual ``nvidia/cuda_nvcc/bin`` folder). Without one, `assemble` raises a `PTXASError`
that says how to get it — only when PTX must actually be assembled.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, List, Optional

from .errors import TLXError


class PTXASError(TLXError):
    """ptxas is missing, or rejected the PTX (the message holds its log)."""


@lru_cache(maxsize=1)
def find_ptxas() -> Optional[str]:
    """The path of a ptxas executable, or None."""
    p = shutil.which("ptxas")
    if p:
        return p
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            cand = os.path.join(root, "bin", "ptxas")
            if os.access(cand, os.X_OK):
                return cand
    try:  # cuda.pathfinder knows where the pip wheels put the binaries
        from cuda import pathfinder  # type: ignore

        finder = getattr(pathfinder, "find_nvidia_binary_utility", None) or getattr(pathfinder, "find_nvidia_binary", None)
        if finder is not None:
            cand = finder("ptxas")
            if cand and os.access(cand, os.X_OK):
                return str(cand)
    except Exception:
        pass
    try:
        import nvidia.cuda_nvcc as nv  # type: ignore

        for base in list(getattr(nv, "__path__", [])):
            cand = os.path.join(base, "bin", "ptxas")
            if os.access(cand, os.X_OK):
                return cand
    except Exception:
        pass
    for cand in ("/usr/local/cuda/bin/ptxas",):
        if os.access(cand, os.X_OK):
            return cand
    return None


@dataclass
class Resources:
    """What ptxas reports for one kernel."""

    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    static_shared_bytes: int = 0
    barriers: int = 0
    warnings: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict[str, object]:
        return {"registers": self.registers, "spill_stores": self.spill_stores, "spill_loads": self.spill_loads,
                "stack_bytes": self.stack_bytes, "static_shared_bytes": self.static_shared_bytes,
                "barriers": self.barriers, "ptxas_warnings": list(self.warnings)}


def parse_report(log: str) -> Resources:
    """The numbers of a ``ptxas -v`` log."""
    r = Resources()
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    if m:
        r.stack_bytes, r.spill_stores, r.spill_loads = (int(x) for x in m.groups())
    m = re.search(r"Used (\d+) registers", log)
    if m:
        r.registers = int(m.group(1))
    m = re.search(r"used (\d+) barriers", log)
    if m:
        r.barriers = int(m.group(1))
    m = re.search(r"(\d+) bytes smem", log)
    if m:
        r.static_shared_bytes = int(m.group(1))
    r.warnings = [ln.strip() for ln in log.splitlines() if "warning" in ln.lower()]
    return r


def assemble(ptx: str, arch: str = "sm_90a", extra: Optional[List[str]] = None) -> tuple:
    """Assemble `ptx`: (cubin bytes, Resources, ptxas log). Raises PTXASError."""
    exe = find_ptxas()
    if exe is None:
        raise PTXASError(
            "ptxas was not found, so the PTX cannot be assembled: install the CUDA toolkit (and put its bin/ on PATH "
            "or set CUDA_HOME), or `pip install nvidia-cuda-nvcc`; or compile with assemble=False to keep only PTX")
    with tempfile.TemporaryDirectory(prefix="tlx_ptxas_") as d:
        src = os.path.join(d, "kernel.ptx")
        out = os.path.join(d, "kernel.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [exe, f"-arch={arch}", "-v", src, "-o", out] + list(extra or [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        log = (p.stdout or "") + (p.stderr or "")
        if p.returncode != 0:
            raise PTXASError(_rejection(ptx, log.strip()))
        with open(out, "rb") as f:
            cubin = f.read()
    return cubin, parse_report(log), log


def _rejection(ptx: str, log: str) -> str:
    """What to say when ptxas rejects the PTX: a line inside a kernel's inline asm
    (tl.inline_asm_elementwise) is the kernel author's PTX, shown with the line; anything else is
    the compiler's bug."""
    lines = ptx.splitlines()
    for m in re.finditer(r"kernel\.ptx, line (\d+);", log):
        n = int(m.group(1))
        before = [ln.strip() for ln in lines[max(0, n - 4):n - 1]]
        if 0 < n <= len(lines) and any(ln.startswith("// begin inline asm") for ln in before):
            return (f"ptxas rejected the PTX of an inline asm (tl.inline_asm_elementwise), registers substituted:\n"
                    f"    {lines[n - 1].strip()}\n{log}")
    return f"ptxas rejected the generated PTX (this is a compiler bug):\n{log}"

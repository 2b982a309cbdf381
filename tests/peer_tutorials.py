"""The real TLX's nine Hopper tutorial cases, as a user runs them on tlx: found in the peer harness
(measured from outside the project, never vendored here), converted by the harness's own `swap.py`
(the import rename of issue 31, nothing else), and loaded on a machine without a GPU.

The peer harness is `$TLX_PEER_DIR`, else `../shared/peer` next to the checkout, else `.peer` in it
(where the GPU runs carry it). Without it the callers skip, saying so.

On a CPU, a tutorial needs two things at import that tlx does not provide and should not:
* `GPUTarget.is_cuda_backend()`: a method of Meta's triton fork (the persistent GEMM tutorials call
  `triton.runtime.driver.active.get_current_target().is_cuda_backend()`); upstream triton 3.6,
  which serves the tutorials' host helpers, lacks it;
* the CUDA device probing: `triton.runtime.driver.active` (upstream triton finds no driver without
  a GPU), `torch.cuda.get_device_capability()` and `torch.cuda.get_device_properties(...)
  .multi_processor_count`. `stand_ins()` answers them as an H100 would (sm_90, 132 SMs); tensors
  live on the CPU.
Nothing else is replaced: every `tlx.*` name is the project's own.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent

# the nine cases: (case, tutorial file stem); the two gemm_ws cases share a file
CASES = [
    ("gemm_pipelined", "hopper_gemm_pipelined"),
    ("gemm_ws", "hopper_gemm_ws"),
    ("gemm_ws_warp_barrier", "hopper_gemm_ws"),
    ("persistent_gemm_ws_cooperative", "hopper-persistent-gemm-ws-cooperative"),
    ("persistent_gemm_ws_pingpong", "hopper-persistent-gemm-ws-pingpong"),
    ("fa_ws", "hopper_fa_ws"),
    ("fa_ws_pipelined", "hopper_fa_ws_pipelined"),
    ("fa_ws_pipelined_pingpong", "hopper_fa_ws_pipelined_pingpong"),
    ("fa_ws_pipelined_pingpong_persistent", "hopper_fa_ws_pipelined_pingpong_persistent"),
]
TUTORIALS = sorted({stem for _, stem in CASES})
FA_TUTORIALS = [stem for stem in TUTORIALS if "_fa_" in stem]
NUM_SMS = 132  # an H100 SXM


def peer_dir() -> Optional[Path]:
    """The peer harness: $TLX_PEER_DIR, ../shared/peer beside the checkout, or .peer inside it (None)."""
    # ../shared/peer beside the main checkout; a git worktree one level deeper finds it one more level up
    candidates = [os.environ.get("TLX_PEER_DIR", ""), str(ROOT.parent / "shared" / "peer"),
                  str(ROOT.parent.parent / "shared" / "peer"), str(ROOT / ".peer")]
    for c in candidates:
        if c and (Path(c) / "swap.py").is_file() and (Path(c) / "originals").is_dir():
            return Path(c)
    return None


SKIP_REASON = ("the peer harness (the real TLX's tutorials and swap.py) is absent: set TLX_PEER_DIR or put it at "
               "../shared/peer; it is measured from outside the project, never vendored")


def convert(peer: Path, work: Path) -> Path:
    """Run the peer's own swap.py on a copy of the harness under `work`; the converted tutorials' folder."""
    copy = work / "peer"
    if not copy.exists():
        shutil.copytree(peer / "originals", copy / "originals")
        shutil.copy2(peer / "swap.py", copy / "swap.py")
    r = subprocess.run([sys.executable, str(copy / "swap.py")], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"swap.py failed:\n{r.stdout}\n{r.stderr}")
    return copy / "converted" / "tutorials"


def missing_host_modules() -> List[str]:
    """What the tutorials import besides tlx and cannot run without (their host helpers)."""
    return [m for m in ("torch", "triton", "pytest") if importlib.util.find_spec(m) is None]


# ---- in the child process -----------------------------------------------------------------------------

def fork_target_method() -> bool:
    """Give upstream triton's `GPUTarget` the fork's `is_cuda_backend()` (`backend == "cuda"`), which
    the persistent GEMM tutorials call at import; True when it had to be added. Measurement only:
    it is triton's host API, not tlx's, so the project never does this outside tests/benchmarks."""
    from triton.backends.compiler import GPUTarget

    if hasattr(GPUTarget, "is_cuda_backend"):
        return False
    GPUTarget.is_cuda_backend = lambda self: self.backend == "cuda"  # type: ignore[attr-defined]
    return True


def stand_ins() -> None:
    """The fork-only `GPUTarget.is_cuda_backend` and an H100's answers to the CUDA device probes
    (see the module docstring); tensors stay on the CPU."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget

    fork_target_method()

    class CPUDriver:
        """`triton.runtime.driver.active` of a CPU: an sm_90 target, torch tensors on the CPU."""

        def get_current_target(self) -> GPUTarget:
            return GPUTarget("cuda", 90, 32)

        def get_active_torch_device(self) -> Any:
            return torch.device("cpu")

    triton.runtime.driver.set_active(CPUDriver())
    props = types.SimpleNamespace(multi_processor_count=NUM_SMS, major=9, minor=0, name="H100 (stand-in)")
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    torch.cuda.get_device_properties = lambda device=None: props


def load_tutorial(tutorials: Path, stem: str) -> types.ModuleType:
    """Import one converted tutorial file as a module (its file name may hold dashes)."""
    name = "peer_tutorial_" + stem.replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, tutorials / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def autotuners(mod: types.ModuleType) -> Dict[str, Any]:
    """The module's `@tlx.autotune` kernels, by name."""
    from tlx.autotune import Autotuner

    return {k: v for k, v in vars(mod).items() if isinstance(v, Autotuner)}

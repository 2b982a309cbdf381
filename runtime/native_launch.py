"""The native launch entry: `native_launch.c`, built on first use, calls cuLaunchKernelEx from C.

cuda.bindings' ``cuLaunchKernelEx`` converts its Python arguments on every call: on the H200's
host the call measured 3.9-4.0 us through it and 3.2-3.3 us from C, and a four-argument
`Launcher.launch` 5.8 us against 4.6 us (benchmarks/launch_overhead.py). The launcher keeps a prebuilt
``CUlaunchConfig`` and a pre-packed ``void**`` per specialization anyway, so the C side is a
three-int call (`launch(config_address, function_handle, params_address)`), like Triton's
compiled launcher but generic: one small module for every kernel, not one per signature.

The same module holds the native launch dispatcher (``native_dispatch.c``: `dispatch_module`),
which repeats a kernel's launch from C for the calls it has seen (docs/runtime.md).

Build (once per machine and Python): the system C compiler (``$CC``, else Python's own, else
``cc``/``gcc``/``clang``) and Python's headers compile ``native_launch.c`` and ``native_dispatch.c`` into
``$TLX_CACHE_DIR/native/`` under a name that hashes the source and the Python ABI. The file is
written atomically (temporary name, then rename), so processes building at once each end with
a whole module. About 0.3 s, once.

Fallback: where there is no compiler or no headers, the build fails, libcuda has no
cuLaunchKernelEx, or ``TLX_NATIVE_LAUNCH=0`` is set, `entry()` returns None and the launcher uses
cuda.bindings (correct, 0.6-1.2 us slower); `status()` says which path is in use and why.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Callable, List, Optional

from .cache import default_cache_dir

SOURCE = Path(__file__).with_name("native_launch.c")
# everything the module is built from (the build hashes them all)
SOURCES = (SOURCE, Path(__file__).with_name("native_dispatch.c"))
HEADER = Path(__file__).with_name("native_launch.h")
MODULE_NAME = "_tlx_native_launch"

_lock = threading.Lock()
_module: Optional[ModuleType] = None
_entry: Optional[Callable[[int, int, int], int]] = None
_status = "not built yet"
_tried = False


def disabled_by_env() -> bool:
    """``TLX_NATIVE_LAUNCH=0`` (or ``false``/``off``/``no``) turns the native entry off."""
    return os.environ.get("TLX_NATIVE_LAUNCH", "1").strip().lower() in ("0", "false", "off", "no")


def compiler_command() -> Optional[List[str]]:
    """The C compiler to build with, as an argv prefix: ``$CC``, Python's configured compiler
    when it is on PATH, else the first of cc, gcc, clang found; None when there is none."""
    for candidate in (os.environ.get("CC"), sysconfig.get_config_var("CC")):
        if candidate:
            argv = shlex.split(candidate)
            if argv and shutil.which(argv[0]):
                return argv
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


def missing_prerequisite() -> Optional[str]:
    """Why the module cannot be built on this machine (no C compiler, no Python headers), or
    None when it can be."""
    if compiler_command() is None:
        return "no C compiler found (set CC, or install gcc)"
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        return f"Python's headers are missing ({include}/Python.h; install python3-dev)"
    return None


def module_path(directory: Optional[Path] = None) -> Path:
    """Where the built module lives: the name hashes the C source, the Python version and ABI
    (EXT_SUFFIX), so a changed source or another interpreter builds its own."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    source = b"".join(p.read_bytes() for p in (*SOURCES, HEADER))
    digest = hashlib.sha256(source + suffix.encode() + sys.version.encode()).hexdigest()
    root = directory if directory is not None else default_cache_dir() / "native"
    return root / f"native_launch-{digest[:16]}{suffix}"


def build(directory: Optional[Path] = None) -> Path:
    """Compile `native_launch.c` (if not already built) and return the module's path. Raises
    RuntimeError with the reason (no compiler, no Python.h, the compiler's own message)."""
    target = module_path(directory)
    if target.exists():
        return target
    missing = missing_prerequisite()
    if missing is not None:
        raise RuntimeError(missing)
    cc = compiler_command()
    assert cc is not None
    include = sysconfig.get_paths()["include"]
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        argv = cc + ["-O2", "-shared", "-fPIC", "-I", include, *map(str, SOURCES), "-o", tmp]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{(done.stderr or done.stdout)[-2000:]}")
        os.replace(tmp, target)  # atomic: a concurrent builder's file is whole too
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def load_module(directory: Optional[Path] = None) -> ModuleType:
    """Build if needed and import the native module (once per process)."""
    global _module
    if _module is None:
        path = build(directory)
        loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
        spec = importlib.util.spec_from_file_location(MODULE_NAME, str(path), loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        _module = module
    return _module


def driver_entry_address() -> int:
    """The address of libcuda's ``cuLaunchKernelEx`` (the process already loaded libcuda through
    numba/cuda.bindings; this only looks the symbol up)."""
    lib = ctypes.CDLL("libcuda.so.1")
    return int(ctypes.cast(lib.cuLaunchKernelEx, ctypes.c_void_p).value or 0)


def entry() -> Optional[Callable[[int, int, int], int]]:
    """The native ``launch(config_address, function_handle, params_address) -> int`` bound to the
    driver's cuLaunchKernelEx, or None when it cannot be had (see `status`). Built and bound on
    the first call; later calls return the same function."""
    global _entry, _status, _tried
    if _tried:
        return _entry
    with _lock:
        if _tried:
            return _entry
        if disabled_by_env():
            _status = "cuda.bindings (TLX_NATIVE_LAUNCH=0)"
        else:
            try:
                module = load_module()
                address = driver_entry_address()
                if not address:
                    raise RuntimeError("libcuda has no cuLaunchKernelEx")
                module.set_entry(address)
                _entry = module.launch
                _status = f"native ({module.__file__})"
            except (OSError, RuntimeError, ImportError, AttributeError, subprocess.SubprocessError) as exc:
                _status = f"cuda.bindings (native entry unavailable: {exc})"
        _tried = True
    return _entry


def dispatch_module() -> Optional[ModuleType]:
    """The built module, for its launch dispatcher (``Dispatcher``/``BoundLaunch``, see
    native_dispatch.c), when the native entry is in use (`entry` is not None); else None."""
    return _module if entry() is not None else None


def bind_entry(address: int, directory: Optional[Path] = None) -> Callable[[int, int, int], int]:
    """Build and load the module and point it at `address` instead of the driver's
    cuLaunchKernelEx: the C stand-in of the tests and the CPU benchmark
    (``module.recording_entry(result)``). Later `entry()` calls return its launch function."""
    global _entry, _status, _tried
    module = load_module(directory)
    with _lock:
        module.set_entry(address)
        _entry = module.launch
        _status = f"native, bound to 0x{address:x} ({module.__file__})"
        _tried = True
    return _entry


def status() -> str:
    """Which launch entry the launcher uses, and why: ``native (path)`` or ``cuda.bindings
    (reason)``; ``not built yet`` before the first launch."""
    return _status

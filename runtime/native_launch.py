"""The native launch (`native_launch.c`): built once with the machine's C compiler, checked
before every load, rebuilt when damaged.

cuda.bindings' ``cuLaunchKernelEx`` converts its Python arguments on every call; the C module
packs a launch's arguments from a per-specialization spec and calls the driver directly
(`launch(spec, grid, stream, args, skip_if_env)`, see the C file).

Build, as Triton builds its launcher: the system C compiler (``$CC``, else Python's own, else
``cc``/``gcc``/``clang``) and Python's headers compile the source into
``$TLX_CACHE_DIR/native/`` under a name that hashes the source and the Python ABI; no cuda.h or
libcuda is needed. The module's size and SHA-256 are recorded beside it (``<module>.json``)
when it is built, and checked before it is loaded: a truncated, emptied or overwritten module
is rebuilt, never handed to the dynamic loader (mapping a truncated shared object can kill the
process with SIGBUS). Files are written under temporary names and renamed into place under a
lock, so processes building at once each end with a whole, recorded module.

Fallback: where there is no compiler or no headers, the build fails, libcuda has no
cuLaunchKernelEx, or ``TLX_NATIVE_LAUNCH=0`` is set, `entry()` returns None and launches go
through cuda.bindings (the same results, slower); `status()` says which path is in use and why.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import importlib.util
import json
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
from typing import Any, Callable, List, Optional

from . import streams
from .cache import FileLock, default_cache_dir, remove_files, write_atomic

SOURCE = Path(__file__).with_name("native_launch.c")
MODULE_NAME = "_tlx_native_launch"

_lock = threading.Lock()
_module: Optional[ModuleType] = None
_entry: Optional[Callable[..., int]] = None
_status = "not built yet"
_tried = False


def disabled_by_env() -> bool:
    """``TLX_NATIVE_LAUNCH=0`` (or ``false``/``off``/``no``) turns the native launch off."""
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


def build_directory() -> Path:
    """Where modules are built: ``$TLX_CACHE_DIR/native``."""
    return default_cache_dir() / "native"


def module_path(directory: Optional[Path] = None) -> Path:
    """The module's path: its name hashes the C source, the Python version and ABI
    (EXT_SUFFIX), so a changed source or another interpreter builds its own."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    digest = hashlib.sha256(SOURCE.read_bytes() + suffix.encode() + sys.version.encode()).hexdigest()
    return (directory or build_directory()) / f"native_launch-{digest[:16]}{suffix}"


def record_path(module: Path) -> Path:
    """The record of a built module: its size and SHA-256, written when it was built."""
    return module.with_name(module.name + ".json")


def _digest(data: bytes) -> dict:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def intact(module: Path) -> bool:
    """Whether `module` is exactly the file that was built: its size and SHA-256 match the
    record (a missing or unreadable record counts as damage)."""
    try:
        record = json.loads(record_path(module).read_text())
        return record == _digest(module.read_bytes())
    except (OSError, ValueError):
        return False


def build(directory: Optional[Path] = None) -> Path:
    """The path of an intact built module, compiling it first when it is missing or damaged.
    Raises RuntimeError with the reason (no compiler, no Python.h, the compiler's message)."""
    target = module_path(directory)
    if intact(target):
        return target
    missing = missing_prerequisite()
    if missing is not None:
        raise RuntimeError(missing)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(target.with_name(target.name + ".lock"), timeout=120.0):
        if intact(target):  # another process built it while this one waited
            return target
        with tempfile.TemporaryDirectory(prefix="native_launch-build-", dir=target.parent) as tmp:
            out = os.path.join(tmp, target.name)
            argv = compiler_command() + ["-O2", "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"],  # type: ignore[operator]
                                         str(SOURCE), "-o", out]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)} failed:\n{(done.stderr or done.stdout)[-2000:]}")
            data = Path(out).read_bytes()
        write_atomic(target, data, 0o777)  # (as the compiler wrote it)
        write_atomic(record_path(target), json.dumps(_digest(data)).encode())
    return target


def load_module(directory: Optional[Path] = None) -> ModuleType:
    """Build if needed (or damaged) and import the module, once per process."""
    global _module
    if _module is None:
        path = build(directory)
        loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
        spec = importlib.util.spec_from_file_location(MODULE_NAME, str(path), loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        module.set_default_stream(vars(streams), "_TORCH_STREAM", streams.default_stream)
        _module = module
    return _module


def remove_builds(directory: Optional[Path] = None) -> int:
    """Delete the built modules, their records, locks, temporaries and the build folders a
    killed build left (`tlx cache clear`); returns how many files were removed. A process that
    loaded a module keeps its copy (the file's data lives until it is unmapped)."""
    return remove_files(directory or build_directory(), lambda p: p.name.startswith(("native_launch-", ".native_launch-")),
                        lambda p: True)


def driver_entry_address() -> int:
    """The address of libcuda's ``cuLaunchKernelEx`` (the process already loaded libcuda through
    numba/cuda.bindings; this only looks the symbol up)."""
    lib = ctypes.CDLL("libcuda.so.1")
    return int(ctypes.cast(lib.cuLaunchKernelEx, ctypes.c_void_p).value or 0)


def entry() -> Optional[Callable[..., int]]:
    """The native ``launch`` bound to the driver's cuLaunchKernelEx, or None when it cannot be
    had (see `status`). Built and bound on the first call; later calls return the same."""
    global _status, _tried
    if _tried:
        return _entry
    with _lock:
        if not _tried:
            if disabled_by_env():
                _status = "cuda.bindings (TLX_NATIVE_LAUNCH=0)"
            else:
                try:
                    address = driver_entry_address()
                    if not address:
                        raise RuntimeError("libcuda has no cuLaunchKernelEx")
                    bind_entry(address)
                except (OSError, RuntimeError, ImportError, subprocess.SubprocessError) as exc:
                    _status = f"cuda.bindings (native launch unavailable: {exc})"
            _tried = True
    return _entry


def bind_entry(address: int, directory: Optional[Path] = None) -> Callable[..., Any]:
    """Build and load the module and point it at `address` instead of the driver's
    cuLaunchKernelEx: a stand-in for tests and the CPU benchmark (``noop_entry()``, or a
    ctypes callback). Later `entry()` calls return its launch function."""
    global _entry, _status, _tried
    module = load_module(directory)
    module.set_entry(address)
    _entry = module.launch
    _status = f"native ({module.__file__})"
    _tried = True
    return _entry


def status() -> str:
    """Which launch path the launcher uses, and why: ``native (path)`` or ``cuda.bindings
    (reason)``; ``not built yet`` before the first launch."""
    return _status

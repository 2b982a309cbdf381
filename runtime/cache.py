"""The specialization cache: compiled kernels in memory and on disk, keyed by a hex digest the
frontend computes (kernel source and helpers, signature, constexprs, options, compiler version).

Integration API::

    from tlx.runtime.cache import Cache, CacheEntry, default_cache
    cache = default_cache()                      # TLX_CACHE_DIR, default ~/.cache/tlx
    entry = cache.get_or_compile(key, build)     # build() -> CacheEntry, run only on a miss
    cache.get(key) / cache.put(key, entry)       # the pieces
    cache.list() -> [CacheInfo]                  # for `tlx cache list`: name, compile time, size
    cache.clear() -> number of entries removed
    entry_from_compile_result(name, result, compile_time_s)   # CompileResult -> CacheEntry
    write_atomic(path, data)                     # the atomic write the cache's files use

Guarantees: writes are atomic (a temporary file in the cache folder, fsync, ``os.replace``), so a
reader sees a whole old entry, a whole new one or none; every entry carries a SHA-256 of its
contents, so a corrupted or truncated file is detected, counted in ``stats["corrupt"]``, treated
as a miss and rebuilt; `get_or_compile` takes a per-key lock file (`FileLock`: ``fcntl.flock``, released by
the OS if the holder dies, the file removed after use, a stale one broken) so two processes
compiling the same kernel compile it once and both end with a correct kernel. Without the lock
(timeout, or no ``fcntl``) both compile and both write complete files, which is still correct.
Files are written with the umask's permissions (group-readable under the usual 022 or 002),
so several users can share one cache folder. An unwritable cache folder degrades to the
in-memory cache with one warning.

On-disk format, version 1 (one file per entry, ``<dir>/v1/<key>.tlxc``)::

    offset  size  field
    0       8     magic  b"TLXCACHE"
    8       4     format version, little-endian uint32 (1)
    12      4     header length H, little-endian uint32
    16      32    SHA-256 of bytes [48, end)
    48      H     header, UTF-8 JSON: {"key", "name", "created", "compile_time_s", "meta",
                  "payload_bytes", "sections": [{"name", "kind": "text"|"bytes", "offset", "size"}]}
    48+H    ...   payload: the sections back to back (offsets relative to the payload start)

Section names: ``ptx`` (text), ``cubin`` (bytes), ``abi`` (KernelABI JSON), ``fences`` (fence
records JSON), ``asm/<stage>`` (the compiler's asm dict: IR after each pass, ...).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import socket
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Union

from .errors import TLXRuntimeError

FORMAT_VERSION = 1
MAGIC = b"TLXCACHE"
_PREFIX = struct.Struct("<8sII32s")  # magic, version, header length, sha256
SUFFIX = ".tlxc"
_KEY_RE = re.compile(r"[0-9a-fA-F]{8,128}")


class CacheCorruptError(TLXRuntimeError):
    """A cache file that is truncated, has a bad checksum, or is not a tlx cache entry."""


@dataclass
class CacheEntry:
    """What the compiler produced for one specialization.

    ``abi_json`` is `KernelABI.to_json()`; ``fences_json`` the fence records as JSON;
    ``asm`` the compiler's asm dict (text or bytes per stage); ``compile_time_s`` how long
    compiling took (shown by ``tlx cache list``); ``meta`` any JSON-able extras (compiler
    version, options, pass times, resources).
    """

    name: str
    ptx: Optional[str] = None
    cubin: Optional[bytes] = None
    abi_json: Optional[str] = None
    fences_json: Optional[str] = None
    asm: Dict[str, Union[str, bytes]] = field(default_factory=dict)
    compile_time_s: float = 0.0
    created: float = field(default_factory=time.time)
    meta: Dict[str, Any] = field(default_factory=dict)

    def abi(self) -> Any:
        """The `KernelABI` (parsed from ``abi_json``)."""
        from tlx.compiler.abi import KernelABI

        if self.abi_json is None:
            raise TLXRuntimeError(f"cache entry for '{self.name}' has no ABI")
        return KernelABI.from_json(self.abi_json)

    def fences(self) -> Any:
        """The fence records (parsed from ``fences_json``), or an empty list."""
        return json.loads(self.fences_json) if self.fences_json else []


def _jsonable(obj: Any) -> Any:
    """JSON-able form of fence records and the like: dataclasses as dicts, tuples as lists,
    anything else unknown as its str()."""
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def entry_from_compile_result(name: str, result: Any, compile_time_s: float = 0.0,
                              meta: Optional[Dict[str, Any]] = None) -> CacheEntry:
    """A CacheEntry from a `compiler.pipeline.CompileResult`: PTX and cubin from its asm dict,
    the rest of asm (IR after each pass) as asm sections, the ABI and fence records as JSON,
    pass times, resources and the unfenced hazards (fence passes off) in ``meta``."""
    from tlx.compiler.fence_serial import records_to_json  # data only: records <-> JSON

    asm = dict(getattr(result, "asm", {}) or {})
    ptx = asm.pop("ptx", None)
    cubin = asm.pop("cubin", None)
    kept = {k: v for k, v in asm.items() if isinstance(v, (str, bytes))}
    info = dict(meta or {})
    info.setdefault("pass_times", _jsonable(getattr(result, "pass_times", {})))
    info.setdefault("resources", _jsonable(getattr(result, "resources", {})))
    info.setdefault("unfenced_hazards", list(getattr(result, "unfenced_hazards", [])))
    abi = getattr(result, "abi", None)
    return CacheEntry(name=name, ptx=ptx, cubin=bytes(cubin) if cubin is not None else None,
                      abi_json=abi.to_json() if abi is not None else None,
                      fences_json=records_to_json(list(getattr(result, "fences", []))), asm=kept,
                      compile_time_s=compile_time_s, meta=info)


class CacheInfo(NamedTuple):
    """One row of `Cache.list`."""

    key: str
    name: str
    path: Path
    size: int
    created: float
    compile_time_s: float
    valid: bool  # False: corrupt or of another format version (rebuilt on next use)


def default_cache_dir() -> Path:
    """``$TLX_CACHE_DIR``, or ``~/.cache/tlx``."""
    env = os.environ.get("TLX_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tlx"


def check_key(key: str) -> str:
    """A cache key is a hex digest (8 to 128 hex digits); anything else could escape the folder."""
    if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
        raise TLXRuntimeError(f"cache key {key!r} is not a hex digest")
    return key


# -- the file format ---------------------------------------------------------------------------

def encode_entry(key: str, entry: CacheEntry) -> bytes:
    """The bytes of one cache file (format version 1, see the module docstring)."""
    sections: List[Dict[str, Any]] = []
    chunks: List[bytes] = []
    offset = 0

    def add(name: str, value: Union[str, bytes, None]) -> None:
        nonlocal offset
        if value is None:
            return
        if isinstance(value, str):
            data, kind = value.encode("utf-8"), "text"
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data, kind = bytes(value), "bytes"
        else:
            raise TLXRuntimeError(f"cache section '{name}' must be str or bytes, not "
                                  f"{type(value).__name__}")
        sections.append({"name": name, "kind": kind, "offset": offset, "size": len(data)})
        chunks.append(data)
        offset += len(data)

    add("ptx", entry.ptx)
    add("cubin", entry.cubin)
    add("abi", entry.abi_json)
    add("fences", entry.fences_json)
    for stage in sorted(entry.asm):
        add("asm/" + stage, entry.asm[stage])
    header = json.dumps({"key": key, "name": entry.name, "created": entry.created,
                         "compile_time_s": entry.compile_time_s, "meta": entry.meta,
                         "payload_bytes": offset, "sections": sections},
                        sort_keys=True).encode("utf-8")
    body = header + b"".join(chunks)
    digest = hashlib.sha256(body).digest()
    return _PREFIX.pack(MAGIC, FORMAT_VERSION, len(header), digest) + body


def _read_header(data: bytes, source: str) -> Dict[str, Any]:
    if len(data) < _PREFIX.size:
        raise CacheCorruptError(f"{source}: truncated ({len(data)} bytes)")
    magic, version, header_len, digest = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise CacheCorruptError(f"{source}: not a tlx cache entry")
    if version != FORMAT_VERSION:
        raise CacheCorruptError(f"{source}: format version {version}, this tlx reads {FORMAT_VERSION}")
    body = memoryview(data)[_PREFIX.size:]
    if hashlib.sha256(body).digest() != digest:
        raise CacheCorruptError(f"{source}: checksum mismatch (corrupted or truncated)")
    try:
        header = json.loads(bytes(body[:header_len]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CacheCorruptError(f"{source}: unreadable header ({exc})") from exc
    if len(body) != header_len + header.get("payload_bytes", -1):
        raise CacheCorruptError(f"{source}: payload size mismatch")
    header["_payload"] = body[header_len:]
    return header


def decode_entry(key: str, data: bytes, source: str = "cache entry") -> CacheEntry:
    """Parse and verify one cache file; raises `CacheCorruptError` when anything is off."""
    header = _read_header(data, source)
    if header.get("key") != key:
        raise CacheCorruptError(f"{source}: holds key {header.get('key')!r}, not {key!r}")
    payload = header.pop("_payload")
    values: Dict[str, Union[str, bytes]] = {}
    try:
        for sec in header["sections"]:
            raw = bytes(payload[sec["offset"]:sec["offset"] + sec["size"]])
            if len(raw) != sec["size"]:
                raise CacheCorruptError(f"{source}: section {sec['name']} is cut short")
            values[sec["name"]] = raw.decode("utf-8") if sec["kind"] == "text" else raw
    except (KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CacheCorruptError(f"{source}: bad section table ({exc})") from exc
    asm = {name[4:]: v for name, v in values.items() if name.startswith("asm/")}
    return CacheEntry(name=header.get("name", "?"), ptx=values.get("ptx"),  # type: ignore[arg-type]
                      cubin=values.get("cubin"), abi_json=values.get("abi"),  # type: ignore[arg-type]
                      fences_json=values.get("fences"), asm=asm,  # type: ignore[arg-type]
                      compile_time_s=float(header.get("compile_time_s", 0.0)),
                      created=float(header.get("created", 0.0)), meta=header.get("meta", {}))


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """This process's umask: read from ``/proc/self/status`` where there is one (no side
    effect), else set and restored at once under a lock."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:  # pragma: no cover - not Linux
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes, mode: int = 0o666) -> None:
    """Write `data` to `path` so that a reader sees the whole old file, the whole new one or none:
    a temporary file in the same folder (created if missing), fsync, ``os.replace``. The file
    gets `mode` less the umask, as `open` would give it (mkstemp's 0600 would keep the other
    users of a shared cache folder out). Raises OSError when the folder cannot be written (the
    temporary file is removed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, mode & ~current_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def remove_files(folder: Path, doomed: Callable[[Path], bool], counted: Callable[[Path], bool]) -> int:
    """Delete what `doomed` picks in `folder` (a folder with all it holds), then `folder` itself
    when nothing else is left in it; returns how many removed files `counted` picks. What
    cannot be removed stays (`tlx cache clear` and the other clear-outs use this)."""
    removed = 0
    if folder.is_dir():
        for path in folder.iterdir():
            if doomed(path):
                try:
                    if path.is_dir():
                        shutil.rmtree(path)
                    else:
                        path.unlink()
                        removed += counted(path)
                except OSError:
                    pass
        try:
            folder.rmdir()
        except OSError:
            pass
    return removed


# -- the store ---------------------------------------------------------------------------------

class Cache:
    """In-memory and on-disk store of compiled specializations (see the module docstring).

    ``directory=None`` reads ``TLX_CACHE_DIR`` (default ``~/.cache/tlx``); ``disk=False`` keeps
    it in memory only. ``lock_timeout`` is how long `get_or_compile` waits for another process
    compiling the same key before compiling too.
    """

    def __init__(self, directory: Union[str, Path, None] = None, disk: bool = True,
                 lock_timeout: float = 600.0):
        self.root = Path(directory).expanduser() if directory is not None else default_cache_dir()
        self.disk = disk
        self.lock_timeout = lock_timeout
        self._memory: Dict[str, CacheEntry] = {}
        self._warned = False
        self.stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "corrupt": 0, "compiles": 0,
                      "write_errors": 0}

    @property
    def directory(self) -> Path:
        """The folder that holds this format version's entries."""
        return self.root / f"v{FORMAT_VERSION}"

    def path_of(self, key: str) -> Path:
        return self.directory / (check_key(key) + SUFFIX)

    def get(self, key: str) -> Optional[CacheEntry]:
        """The entry for `key` from memory or disk, or None (missing, corrupt, other version)."""
        entry = self._memory.get(key)
        if entry is not None:
            self.stats["memory_hits"] += 1
            return entry
        entry = self._read(key)
        if entry is None:
            self.stats["misses"] += 1
        return entry

    def _read(self, key: str) -> Optional[CacheEntry]:
        """The entry on disk (kept in memory from then on), or None: missing, unreadable, corrupt."""
        if not self.disk:
            return None
        path = self.path_of(key)
        try:
            entry = decode_entry(key, path.read_bytes(), str(path))
        except OSError:
            return None
        except CacheCorruptError:
            self.stats["corrupt"] += 1
            return None
        self.stats["disk_hits"] += 1
        self._memory[key] = entry
        return entry

    def put(self, key: str, entry: CacheEntry) -> Optional[Path]:
        """Store `entry` in memory and, atomically, on disk; returns the file (None if the disk
        could not be written, after one warning)."""
        check_key(key)
        self._memory[key] = entry
        if not self.disk:
            return None
        path = self.path_of(key)
        try:
            write_atomic(path, encode_entry(key, entry))
            return path
        except OSError as exc:
            self.stats["write_errors"] += 1
            if not self._warned:
                warnings.warn(f"tlx: could not write the kernel cache in {self.root} ({exc}); "
                              "kernels are cached in memory only", RuntimeWarning, stacklevel=2)
                self._warned = True
            return None

    def get_or_compile(self, key: str, compile: Callable[[], CacheEntry]) -> CacheEntry:
        """The entry for `key`; on a miss run ``compile()`` once (across processes, under a
        per-key lock), time it into ``compile_time_s`` when it left that at 0, and store it."""
        entry = self.get(key)
        if entry is not None:
            return entry
        with FileLock(self.directory / (check_key(key) + ".lock") if self.disk else None,
                      self.lock_timeout):
            entry = self._read(key)  # another process may have compiled it while we waited
            if entry is not None:
                return entry
            start = time.perf_counter()
            entry = compile()
            if not isinstance(entry, CacheEntry):
                raise TLXRuntimeError(f"the compile callback returned {type(entry).__name__}, "
                                      "not a CacheEntry")
            if not entry.compile_time_s:
                entry.compile_time_s = time.perf_counter() - start
            self.stats["compiles"] += 1
            self.put(key, entry)
            return entry

    def list(self) -> List[CacheInfo]:
        """Every entry on disk (newest first), valid or not; reads headers and checksums."""
        rows: List[CacheInfo] = []
        if not self.directory.is_dir():
            return rows
        for path in self.directory.glob("*" + SUFFIX):
            key = path.name[:-len(SUFFIX)]
            try:
                data = path.read_bytes()
                header = _read_header(data, str(path))
                rows.append(CacheInfo(key, header.get("name", "?"), path, len(data),
                                      float(header.get("created", 0.0)),
                                      float(header.get("compile_time_s", 0.0)), True))
            except (CacheCorruptError, OSError):
                size = path.stat().st_size if path.exists() else 0
                rows.append(CacheInfo(key, "?", path, size, 0.0, 0.0, False))
        rows.sort(key=lambda r: r.created, reverse=True)
        return rows

    def clear(self) -> int:
        """Remove every entry (memory and disk, all format versions) and stale temporaries and
        locks; returns the number of entries removed from disk."""
        self._memory.clear()
        return sum(remove_files(folder, lambda p: p.suffix in (SUFFIX, ".lock", ".tmp"), lambda p: p.suffix == SUFFIX)
                   for folder in self.root.glob("v*"))


class FileLock:
    """An exclusive lock on the file `path`, shared by the processes and users of one cache
    folder. Without ``fcntl`` or a folder it may create files in, it does nothing (both
    writers then produce whole files, which is still correct).

    Protocol: open (or create) the file, ``flock`` it, and check it is still the file at `path`
    — a holder removes it when done, so a lock taken on a removed file is retried; then write
    ``<pid> <host>`` into it. Releasing removes the file (only while it is still this lock's),
    then unlocks. A lock that is in the way is *stale* when its holder is a dead process of this
    host (an inherited descriptor can outlive it) or when the file is older than `timeout`
    seconds (a hung holder): it is removed and the lock taken anew. A stale lock this user
    cannot remove, or waiting past `timeout`, gives up the lock, as above."""

    def __init__(self, path: Optional[Path], timeout: float):
        self.path = path
        self.timeout = timeout
        self.fd: Optional[int] = None
        self.broken = 0  # stale locks this one removed

    def __enter__(self) -> "FileLock":
        if self.path is None:
            return self
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return self
        deadline = time.monotonic() + self.timeout
        while True:
            fd = self._open()
            if fd is None:
                return self
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                stale = self._stale(fd)
                if stale and self._remove_if_same(fd):
                    self.broken += 1
                    os.close(fd)
                    continue
                os.close(fd)
                if stale or time.monotonic() >= deadline:
                    return self  # cannot take it: go on unlocked
                time.sleep(0.01)
                continue
            except OSError:
                os.close(fd)
                return self
            if not self._same_file(fd):  # its holder removed it after we opened it: retry
                os.close(fd)
                continue
            self.fd = fd
            try:  # who holds it (read by `_stale`); this also renews the file's time
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
            except OSError:
                pass  # opened read-only (another user's file): the lock itself still holds
            return self

    def _open(self) -> Optional[int]:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)  # (less the umask)
        except PermissionError:
            try:  # another user's lock file: flock works on a read-only descriptor too
                return os.open(self.path, os.O_RDONLY)
            except OSError:
                return None
        except OSError:
            return None

    def _same_file(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino  # type: ignore[arg-type]
        except OSError:
            return False

    def _remove_if_same(self, fd: int) -> bool:
        """Remove the lock file if it is still the one `fd` is open on."""
        if not self._same_file(fd):
            return True  # already removed or replaced: just retry
        try:
            os.unlink(self.path)  # type: ignore[arg-type]
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False

    def _stale(self, fd: int) -> bool:
        """Whether the lock on `fd` is stale: older than the timeout, or held by a dead
        process of this host."""
        try:
            if time.time() - os.fstat(fd).st_mtime > self.timeout:
                return True
            pid_text, host = os.pread(fd, 300, 0).decode("utf-8", "replace").split()[:2]
            pid = int(pid_text)
        except (OSError, ValueError):
            return False  # being written, or not ours to read: wait
        if host != socket.gethostname() or pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            pass  # alive (another user's process)
        return False

    def __exit__(self, *exc: Any) -> None:
        if self.fd is not None:
            import fcntl

            if self._same_file(self.fd):  # (not one that replaced ours after it was broken)
                try:
                    os.unlink(self.path)  # type: ignore[arg-type]
                except OSError:
                    pass
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


_DEFAULT: Optional[Cache] = None


def default_cache() -> Cache:
    """The process-wide cache in `default_cache_dir()` (created on first use)."""
    global _DEFAULT
    if _DEFAULT is None or _DEFAULT.root != default_cache_dir():
        _DEFAULT = Cache()
    return _DEFAULT

"""The specialization cache: entries round-trip byte for byte, writes are atomic, corrupted or
truncated files are detected and rebuilt, and processes compiling the same key at the same time
all end with a correct kernel (real subprocesses)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tlx.compiler.abi import KernelABI, ParamABI
from tlx.runtime import cache as cache_mod
from tlx.runtime.cache import (FORMAT_VERSION, Cache, CacheCorruptError, CacheEntry, decode_entry,
                               encode_entry)
from tlx.runtime.errors import TLXRuntimeError

KEY = "3f" * 32
ABI = KernelABI(entry="add", params=(ParamABI("x", "pointer", "fp32", 8, 8),),
                threads_per_cta=128, num_warps=4, shared_bytes=0)


def entry(tag="a"):
    return CacheEntry(name="add", ptx=f".version 8.0 // {tag}\n", cubin=b"\x7fELF\x00\x01" + tag.encode(),
                      abi_json=ABI.to_json(), fences_json='[{"pass": "ProxyFenceInsertion"}]',
                      asm={"ir": "module {}", "ptx": f".version 8.0 // {tag}\n", "bin": b"\x00\xff"},
                      compile_time_s=0.25, created=1700000000.0, meta={"compiler": "tlx 0.1"})


def test_round_trip(tmp_path):
    e = entry()
    back = decode_entry(KEY, encode_entry(KEY, e))
    assert back == e
    assert back.abi() == ABI
    assert back.fences() == [{"pass": "ProxyFenceInsertion"}]


def test_format_header(tmp_path):
    data = encode_entry(KEY, entry())
    assert data[:8] == b"TLXCACHE"
    assert int.from_bytes(data[8:12], "little") == FORMAT_VERSION == 1


def test_put_get_and_memory(tmp_path):
    c = Cache(tmp_path)
    assert c.get(KEY) is None
    path = c.put(KEY, entry())
    assert path == tmp_path / "v1" / (KEY + ".tlxc") and path.is_file()
    assert c.get(KEY) == entry() and c.stats["memory_hits"] == 1
    fresh = Cache(tmp_path)
    assert fresh.get(KEY) == entry() and fresh.stats["disk_hits"] == 1
    assert not [p for p in (tmp_path / "v1").iterdir() if p.suffix == ".tmp"]


def test_get_or_compile_compiles_once(tmp_path):
    c = Cache(tmp_path)
    calls = []

    def build():
        calls.append(1)
        e = entry()
        e.compile_time_s = 0.0
        return e

    e1 = c.get_or_compile(KEY, build)
    e2 = Cache(tmp_path).get_or_compile(KEY, build)
    assert len(calls) == 1
    assert e1.compile_time_s > 0 and e2.compile_time_s == e1.compile_time_s
    with pytest.raises(TLXRuntimeError, match="not a CacheEntry"):
        c.get_or_compile("ab" * 8, lambda: "ptx")


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "magic", "version", "key"])
def test_corrupt_entries_are_detected_and_rebuilt(tmp_path, damage):
    c = Cache(tmp_path)
    path = c.put(KEY, entry("old"))
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    elif damage == "truncate":
        data = data[: len(data) - 7]
    elif damage == "empty":
        data = bytearray()
    elif damage == "magic":
        data[0:8] = b"NOTTLXCC"
    elif damage == "version":
        data[8:12] = (FORMAT_VERSION + 1).to_bytes(4, "little")
    elif damage == "key":
        other = "ab" * 32
        data = bytearray(encode_entry(other, entry("old")))
    path.write_bytes(bytes(data))
    with pytest.raises(CacheCorruptError):
        decode_entry(KEY, bytes(data))
    fresh = Cache(tmp_path)
    assert fresh.get(KEY) is None and fresh.stats["corrupt"] == 1
    rebuilt = fresh.get_or_compile(KEY, lambda: entry("new"))
    assert rebuilt.ptx.endswith("new\n")
    assert decode_entry(KEY, path.read_bytes()) == entry("new")
    rows = fresh.list()
    assert [(r.key, r.valid) for r in rows] == [(KEY, True)]


def test_failed_write_leaves_the_old_entry_whole(tmp_path, monkeypatch):
    c = Cache(tmp_path)
    path = c.put(KEY, entry("old"))

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(cache_mod.os, "replace", boom)
    with pytest.warns(RuntimeWarning, match="memory only"):
        assert c.put(KEY, entry("new")) is None
    monkeypatch.undo()
    assert decode_entry(KEY, path.read_bytes()) == entry("old")
    assert not [p for p in path.parent.iterdir() if p.suffix == ".tmp"]
    assert c.get(KEY) == entry("new")      # memory has the new one


def test_unwritable_folder_degrades_to_memory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    c = Cache(blocker / "cache")
    with pytest.warns(RuntimeWarning, match="memory only"):
        c.put(KEY, entry())
    assert c.get(KEY) == entry()


def test_list_and_clear(tmp_path):
    c = Cache(tmp_path)
    k2 = "12" * 20
    c.put(KEY, entry())
    e2 = entry("b")
    e2.created = 1800000000.0
    e2.compile_time_s = 1.5
    c.put(k2, e2)
    (tmp_path / "v1" / ("cd" * 10 + ".tlxc")).write_bytes(b"garbage")
    rows = c.list()
    assert [(r.key, r.name, r.valid) for r in rows] == [(k2, "add", True), (KEY, "add", True),
                                                       ("cd" * 10, "?", False)]
    assert rows[0].compile_time_s == 1.5 and rows[0].size == (tmp_path / "v1" / (k2 + ".tlxc")).stat().st_size
    assert c.clear() == 3
    assert c.list() == [] and c.get(KEY) is None


def test_keys_must_be_hex_digests(tmp_path):
    c = Cache(tmp_path)
    for bad in ["../../etc/passwd", "abc", "zz" * 10, ""]:
        with pytest.raises(TLXRuntimeError, match="hex digest"):
            c.put(bad, entry())


def test_default_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("TLX_CACHE_DIR", str(tmp_path / "tc"))
    assert cache_mod.default_cache().root == tmp_path / "tc"
    monkeypatch.delenv("TLX_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_mod.default_cache_dir() == tmp_path / ".cache" / "tlx"


WORKER = textwrap.dedent('''
    import os, sys, time
    from tlx.runtime.cache import Cache, CacheEntry
    root, key, tag, marker_dir, lock_timeout = sys.argv[1:6]
    start_at = float(sys.argv[6])
    while time.time() < start_at:      # all workers start compiling at the same moment
        time.sleep(0.001)
    def build():
        open(os.path.join(marker_dir, tag), "w").close()   # count real compiles
        time.sleep(0.3)                                     # a slow compile widens the race
        return CacheEntry(name="k", ptx="PTX-" * 5000, cubin=bytes(range(256)) * 400,
                          abi_json="{}", asm={"ptx": "PTX-" * 5000})
    e = Cache(root, lock_timeout=float(lock_timeout)).get_or_compile(key, build)
    ok = e.ptx == "PTX-" * 5000 and e.cubin == bytes(range(256)) * 400
    print("OK" if ok else "BAD")
''')


def _race(tmp_path, n, lock_timeout):
    import time

    root, markers = tmp_path / "cache", tmp_path / "markers"
    markers.mkdir()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    start_at = time.time() + 1.5
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, str(script), str(root), KEY, f"w{i}", str(markers),
                               str(lock_timeout), str(start_at)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i in range(n)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == "OK"
    data = (root / "v1" / (KEY + ".tlxc")).read_bytes()
    assert decode_entry(KEY, data).ptx == "PTX-" * 5000
    assert not [p for p in (root / "v1").iterdir() if p.suffix == ".tmp"]
    return len(list(markers.iterdir()))


def test_concurrent_processes_compile_once_under_the_lock(tmp_path):
    assert _race(tmp_path, 3, lock_timeout=60) == 1


def test_concurrent_processes_without_the_lock_all_end_correct(tmp_path):
    # lock_timeout 0: nobody waits, every process compiles and writes; the file stays whole
    assert _race(tmp_path, 3, lock_timeout=0) >= 2


def test_entry_from_compile_result_keeps_everything_json_able():
    from dataclasses import dataclass

    from tlx.compiler.fences import FenceRecord
    from tlx.compiler.ir.core import Location
    from tlx.runtime.cache import entry_from_compile_result

    @dataclass
    class Result:  # the fields of compiler.pipeline.CompileResult the cache reads
        asm: dict
        abi: KernelABI
        fences: list
        pass_times: dict
        resources: dict

    rec = FenceRecord(id=1, origin="proxy_fence_insertion", loc=Location("/k.py", 12, 4),
                      writers=["tlx.local_store at k.py:11"], reason="generic write read by TMA")
    res = Result(asm={"ir": "module {}", "ir.tma_lowering": "module {x}", "ptx": ".version 8.0",
                      "cubin": b"\x7fELF", "stats": {"not": "text"}},
                 abi=ABI, fences=[rec], pass_times={"tma_lowering": 0.001},
                 resources={"shared_bytes": 1024})
    e = entry_from_compile_result("k", res, compile_time_s=0.5)
    back = decode_entry(KEY, encode_entry(KEY, e))
    assert back.ptx == ".version 8.0" and back.cubin == b"\x7fELF"
    assert back.asm == {"ir": "module {}", "ir.tma_lowering": "module {x}"}
    assert back.abi() == ABI
    (f,) = back.fences()
    assert f["origin"] == "proxy_fence_insertion" and f["reason"] == "generic write read by TMA"
    assert f["loc"]["line"] == 12 and f["writers"] == ["tlx.local_store at k.py:11"]
    assert back.meta["resources"] == {"shared_bytes": 1024} and back.compile_time_s == 0.5


# -- a cache folder shared by several users -----------------------------------------------------

@pytest.fixture(params=[0o002, 0o022, 0o077])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _modes(root: Path):
    return {str(p.relative_to(root)): p.stat().st_mode & 0o777 for p in root.rglob("*")}


def test_cache_files_and_folders_follow_the_umask(tmp_path, umask):
    from tlx.autotune import TuningStore

    root = tmp_path / "cache"
    Cache(root).put(KEY, entry())
    Cache(root).get_or_compile("4e" * 32, lambda: entry("b"))
    store = TuningStore(root)
    (store.directory).mkdir(parents=True)
    cache_mod.write_atomic(store.path_of("ab" * 32), b"{}")
    modes = _modes(root)
    assert modes == {"v1": 0o777 & ~umask, f"v1/{KEY}.tlxc": 0o666 & ~umask,
                     f"v1/{'4e' * 32}.tlxc": 0o666 & ~umask,  # (its lock file is gone)
                     "autotune": 0o777 & ~umask, f"autotune/{'ab' * 32}.json": 0o666 & ~umask}, modes


def test_the_native_module_follows_the_umask(tmp_path, umask):
    from tlx.runtime import native_launch

    if native_launch.missing_prerequisite():
        pytest.skip(native_launch.missing_prerequisite())
    module = native_launch.build(tmp_path)
    modes = _modes(tmp_path)
    assert modes == {module.name: 0o777 & ~umask, module.name + ".json": 0o666 & ~umask}, modes


def test_a_lock_file_is_removed_after_use(tmp_path):
    path = tmp_path / "k.lock"
    with cache_mod.FileLock(path, timeout=5) as lock:
        assert lock.fd is not None and path.exists()
        assert path.read_text().split()[0] == str(os.getpid())
    assert not path.exists()
    Cache(tmp_path / "c").get_or_compile(KEY, entry)
    assert sorted(p.name for p in (tmp_path / "c" / "v1").iterdir()) == [KEY + ".tlxc"]


def _hold(path: Path, text: str):
    """Lock `path` from this process (another descriptor) and write `text` into it."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.pwrite(fd, text.encode(), 0)
    return fd


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_lock_held_for_a_dead_process_is_broken(tmp_path):
    import socket
    import time

    path = tmp_path / "k.lock"
    fd = _hold(path, f"{_dead_pid()} {socket.gethostname()}\n")  # (a descriptor it left to a child)
    try:
        start = time.monotonic()
        with cache_mod.FileLock(path, timeout=60) as lock:
            assert lock.fd is not None and lock.broken == 1
            assert os.fstat(lock.fd).st_ino != os.fstat(fd).st_ino
        assert time.monotonic() - start < 5 and not path.exists()
    finally:
        os.close(fd)


def test_a_lock_older_than_the_timeout_is_broken_and_a_fresh_one_is_waited_for(tmp_path):
    import socket
    import threading
    import time

    path = tmp_path / "k.lock"
    fd = _hold(path, f"{os.getpid() + 0} {socket.gethostname()}\n")  # a live holder...
    os.utime(path, (time.time() - 120, time.time() - 120))  # ...that has held it for 2 minutes
    with cache_mod.FileLock(path, timeout=60) as lock:
        assert lock.fd is not None and lock.broken == 1
    os.close(fd)

    fd = _hold(path, f"{os.getpid()} {socket.gethostname()}\n")  # fresh: wait for its release
    threading.Timer(0.4, lambda: (os.unlink(path), os.close(fd))).start()
    start = time.monotonic()
    with cache_mod.FileLock(path, timeout=60) as lock:
        assert lock.fd is not None and lock.broken == 0
    assert time.monotonic() - start >= 0.35


def test_the_lock_admits_one_holder_at_a_time_while_its_files_come_and_go(tmp_path):
    import threading

    path, inside, most, errors = tmp_path / "k.lock", [0], [0], []
    guard = threading.Lock()

    def worker():
        try:
            for _ in range(60):
                with cache_mod.FileLock(path, timeout=60) as lock:
                    assert lock.fd is not None
                    with guard:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    with guard:
                        inside[0] -= 1
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and most[0] == 1 and not path.exists()

"""The tlx command line, end to end on a kernel file."""

import os
import subprocess
import sys

import catalog

CATALOG = catalog.__file__


def run_cli(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "tlx", *args], capture_output=True, text=True, env=e, timeout=300)


def test_compile_emits_the_traced_ir():
    r = run_cli("compile", f"{CATALOG}::vector_add", "-s", "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32", "-s", "n=i32",
                "-c", "BLOCK=256", "--emit", "ir")
    assert r.returncode == 0, r.stderr
    assert "tt.func @vector_add(%x_ptr: !ptr<f32>, %y_ptr: !ptr<f32>, %out_ptr: !ptr<f32>, %n: i32)" in r.stdout
    assert "tt.make_range {start = 0, end = 256}" in r.stdout


def test_compile_accepts_descriptor_types_with_commas():
    r = run_cli("compile", f"{CATALOG}::tma_store_fenced", "-s",
                "x_desc=tensordesc<fp16[64, 64]>,y_desc=tensordesc<fp16[64, 64]>", "-c", "BLOCK=64", "--emit", "final")
    assert r.returncode == 0, r.stderr
    assert "tlx.tma_store" in r.stdout and 'origin = "user"' in r.stdout


def test_explain_prints_the_fence_report():
    r = run_cli("explain", f"{CATALOG}::tma_store_fenced", "-s",
                "x_desc=tensordesc<fp16[64, 64]>", "-s", "y_desc=tensordesc<fp16[64, 64]>", "-c", "BLOCK=64")
    assert r.returncode == 0, r.stderr
    assert "fence #" in r.stdout and "user" in r.stdout and "catalog.py:" in r.stdout


def test_print_after_all_prints_every_pass():
    r = run_cli("compile", f"{CATALOG}::vector_add", "-s", "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32",
                "-c", "BLOCK=256", "--print-after-all", "--emit", "passes")
    assert r.returncode == 0, r.stderr
    for name in ("lower_dot", "tma_lowering", "fence_insertion", "smem_allocation", "proxy_fence_insertion"):
        assert name in r.stdout


def test_errors_are_reported_with_the_kernel_line_and_exit_code_2():
    r = run_cli("compile", f"{CATALOG}::vector_add", "-s", "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32")
    assert r.returncode == 2
    assert "no value for constexpr parameter 'BLOCK'" in r.stderr
    r = run_cli("compile", f"{CATALOG}::no_such_kernel")
    assert r.returncode == 2 and "no @tlx.jit kernel named 'no_such_kernel'" in r.stderr


def test_cache_list_and_clear(tmp_path):
    from tlx.runtime.cache import Cache, CacheEntry

    c = Cache(tmp_path)
    c.put("ab" * 16, CacheEntry(name="k1", ptx=".version 8.0", compile_time_s=0.0123))
    env = {"TLX_CACHE_DIR": str(tmp_path)}
    r = run_cli("cache", "list", env=env)
    assert r.returncode == 0, r.stderr
    assert "k1" in r.stdout and "12.3ms" in r.stdout and "(1 entries)" in r.stdout
    r = run_cli("cache", "clear", env=env)
    assert r.returncode == 0 and "removed 1 entries" in r.stdout
    assert "(0 entries)" in run_cli("cache", "list", env=env).stdout


def test_demo_runs_on_this_machine_and_matches_numpy():
    r = run_cli("demo")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "1. The kernel, traced into tlx IR" in r.stdout
    assert "relative error vs numpy (float64)" in r.stdout and "-> OK" in r.stdout


def test_cache_clear_removes_everything_tlx_wrote(tmp_path):
    from tlx.autotune import TuningStore
    from tlx.runtime import cache as cache_mod, native_launch

    root = tmp_path / "shared"
    env = {"TLX_CACHE_DIR": str(root)}
    code = ("import numpy as np, tlx, tlx.language as tl\n"
            "@tlx.jit\n"
            "def k(x_ptr, BLOCK: tl.constexpr):\n"
            "    offs = tl.arange(0, BLOCK)\n"
            "    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)\n"
            "k.warmup(np.zeros(64, np.float32), BLOCK=64, grid=(1,))\n")
    (tmp_path / "kernel.py").write_text(code)
    r = subprocess.run([sys.executable, str(tmp_path / "kernel.py")], capture_output=True, text=True,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    if not native_launch.missing_prerequisite():
        native_launch.build(root / "native")
    (root / "native" / "native_launch-0123.so.lock").parent.mkdir(parents=True, exist_ok=True)
    (root / "native" / "native_launch-0123.so.lock").write_text("")  # what a killed build leaves
    (root / "native" / "native_launch-build-x1y2").mkdir()
    (root / "native" / "native_launch-build-x1y2" / "native_launch-0123.so").write_bytes(b"\x7fELF")
    cache_mod.write_atomic(TuningStore(root).path_of("cd" * 32), b"{}")
    (root / "v1" / ("ef" * 32 + ".lock")).write_text("")
    (root / "v1" / (".efefefef.x1.tmp")).write_text("")
    assert len([p for p in root.rglob("*") if p.is_file()]) >= 6
    r = run_cli("cache", "clear", env=env)
    assert r.returncode == 0, r.stderr
    assert "removed 1 entries" in r.stdout and "removed 1 autotuning choices" in r.stdout
    assert list(root.rglob("*")) == []

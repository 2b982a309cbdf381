"""`tlx port`: a file written for the real TLX, renamed for tlx line by line (line numbers
kept), with what has no tlx counterpart listed. The sources are our own small TLX-style texts."""

from __future__ import annotations

import subprocess
import sys
import textwrap


from tlx.port import port_source

TLX_FILE = textwrap.dedent('''\
    import numpy as np
    import triton
    import triton.language as tl
    import triton.language.extra.tlx as tlx
    from triton.language.extra.tlx.warp_spec import get_bufidx_phase
    from triton.tools.tensor_descriptor import TensorDescriptor


    def pick_block(args):
        return 64


    @triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"])
    @triton.jit
    def add_slot(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        slot, phase = get_bufidx_phase(tl.program_id(0), 2)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + slot, mask=m)


    @triton.heuristics({"BLOCK": pick_block})
    @triton.jit
    def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


    def run(x, out):
        grid = lambda META: (triton.cdiv(x.size, META["BLOCK"]),)
        add_slot[grid](x, out, x.size)
        return triton.testing.do_bench(lambda: add_slot[grid](x, out, x.size))
    ''')


def test_the_renames_keep_every_line_number():
    r = port_source(TLX_FILE)
    old, new = TLX_FILE.split("\n"), r.text.split("\n")
    assert len(new) == len(old)
    assert new[2:6] == ["import tlx.language as tl", "import tlx", "from tlx.warp_spec import get_bufidx_phase",
                        "from tlx import TensorDescriptor"]
    assert new[12] == '@tlx.autotune(configs=[tlx.Config({"BLOCK": 32}), tlx.Config({"BLOCK": 64})], key=["n"])'
    assert new[13] == new[22] == "@tlx.jit"
    assert new[21] == '@tlx.heuristics({"BLOCK": pick_block})'
    changed = [i + 1 for i, (a, b) in enumerate(zip(old, new)) if a != b]
    assert [n.line for n in r.changes] == changed == [3, 4, 5, 6, 13, 14, 22, 23]


def test_host_helpers_are_left_and_mentioned_and_nothing_is_missing():
    r = port_source(TLX_FILE)
    assert [(n.line, n.what) for n in r.left] == [(30, "triton.cdiv"), (32, "triton.testing.do_bench")]
    assert r.unmapped == [] and r.missing == [] and r.complete
    assert "import triton" in r.text  # still needed by the host helpers


def test_the_ported_file_runs_on_the_interpreter(tmp_path):
    path = tmp_path / "ported.py"
    path.write_text(port_source(TLX_FILE).text + textwrap.dedent('''
        import os
        os.environ["TLX_INTERPRET"] = "1"
        x = np.arange(300, dtype=np.float32)
        out = np.full_like(x, np.nan)
        add_slot[lambda META: (triton.cdiv(300, META["BLOCK"]),)](x, out, 300)
        print("ok", np.array_equal(out, x + (np.arange(300) // 32) % 2))
        '''))
    # the host helpers the file keeps come from upstream triton, which the tests do not install:
    # a stand-in with the one it calls
    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / "__init__.py").write_text("def cdiv(a, b):\n    return -(-a // b)\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TLX_CACHE_DIR": str(tmp_path / "c"),
           "PYTHONPATH": str(tmp_path)}
    p = subprocess.run([sys.executable, "-W", "ignore", str(path)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert "ok True" in p.stdout  # the first config (BLOCK 32) under the interpreter


def test_what_has_no_counterpart_is_listed():
    src = textwrap.dedent('''\
        import triton
        import triton.language as tl
        from triton.language.extra import tlx
        from triton.compiler import ASTSource


        @triton.jit
        def k(x_ptr):
            p = tl.make_block_ptr(x_ptr, (16,), (1,), (0,), (16,), (0,))
            tlx.no_such_op()


        def host():
            triton.compile(ASTSource(k, {}, {}))
            triton.runtime.driver.active.get_current_target()
        ''')
    r = port_source(src)
    assert r.text.split("\n")[2] == "import tlx"
    assert [(n.line, n.what) for n in r.unmapped] == [(4, "triton.compiler.ASTSource"), (14, "triton.compile")]
    assert [(n.line, n.what) for n in r.missing] == [(9, "tl.make_block_ptr"), (10, "tlx.no_such_op")]
    assert [(n.line, n.what) for n in r.left] == [(15, "triton.runtime.driver.active.get_current_target")]
    assert not r.complete


def test_import_tlx_is_added_where_the_file_uses_tlx_without_importing_it():
    src = "import triton\nimport triton.language as tl  # the language\n\n\n@triton.jit\ndef k(x):\n    pass\n"
    r = port_source(src)
    lines = r.text.split("\n")
    assert lines[1] == "import tlx.language as tl; import tlx  # the language" and lines[4] == "@tlx.jit"
    assert len(lines) == len(src.split("\n"))
    assert any("`import triton` is no longer used" in n.what for n in r.warnings)
    ns: dict = {}
    exec(compile(r.text.replace("import triton\n", "\n"), "ported", "exec"), ns)
    assert type(ns["k"]).__name__ == "JITFunction"


def test_from_triton_imports_of_host_api_become_tlx_imports():
    r = port_source("from triton import jit, Config, autotune as at\nfrom triton import jit, next_power_of_2\n")
    assert r.text.split("\n")[:2] == ["from tlx import jit, Config, autotune as at",
                                      "from triton import jit, next_power_of_2"]
    assert [(n.line, n.what) for n in r.unmapped] == [(2, "triton.jit"), (2, "triton.next_power_of_2")]


def test_a_file_that_does_not_parse_is_renamed_and_said_unchecked():
    r = port_source("import triton.language as tl\ndef broken(:\n")
    assert r.text.startswith("import tlx.language as tl\n")
    assert "does not parse" in r.warnings[0].what


def test_the_command_writes_the_file_and_reports(tmp_path):
    src = tmp_path / "kernel.py"
    src.write_text(TLX_FILE)
    out = tmp_path / "kernel_tlx.py"
    p = subprocess.run([sys.executable, "-m", "tlx", "port", str(src), "-o", str(out)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert out.read_text() == port_source(TLX_FILE).text
    assert "8 line(s) changed" in p.stdout and "line 30: triton.cdiv (tlx.cdiv is the same function)" in p.stdout
    bad = tmp_path / "bad.py"
    bad.write_text("import triton\nimport triton.language as tl\nx = tl.make_block_ptr\n")
    p = subprocess.run([sys.executable, "-m", "tlx", "port", str(bad)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert p.stdout == "import triton\nimport tlx.language as tl\nx = tl.make_block_ptr\n"
    assert "line 3: tl.make_block_ptr (tlx.language has no such name)" in p.stderr
    missing = subprocess.run([sys.executable, "-m", "tlx", "port", str(tmp_path / "nope.py")], capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode == 2 and "no such file" in missing.stderr

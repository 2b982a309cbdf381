"""The notebooks run headless — nbclient, the python3 kernel of ipykernel, no GPU, no network — and
every code cell's output shows what the text above it says. Source lines the outputs must name are
read from the notebook's own cells (a cell's code is its own file; lines count from its top), not
from the compiler. Committed notebooks carry no outputs.

Every code cell of every notebook has a check here (`test_every_code_cell_is_checked`), so a new
cell cannot slip in unchecked.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

nbformat = pytest.importorskip("nbformat")  # the `test` extra installs them; a bare GPU box may not have them
nbclient = pytest.importorskip("nbclient")
NotebookClient = nbclient.NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))
CELL_FILE = r"\S+\.py"  # how a location names the cell's file (IPython's name for it)


# ---------------------------------------------------------------------------------------------
# Running and reading notebooks
# ---------------------------------------------------------------------------------------------

def execute(name: str, tmp: Path, gpu: bool = False, extra_env: Optional[Dict[str, str]] = None):
    """Execute notebooks/<name> in a fresh python3 kernel (cwd = notebooks/); returns the notebook.
    Without `gpu` the kernel sees no CUDA device, as in CI."""
    nb = nbformat.read(NB_DIR / name, as_version=4)
    env = {k: v for k, v in os.environ.items() if k not in ("TLX_INTERPRET", "TLX_PRINT_IR_AFTER_ALL")}
    env["TLX_CACHE_DIR"] = str(tmp / "cache")
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra_env or {})
    NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(NB_DIR)}}).execute(env=env)
    return nb


def cell(nb, cid: str):
    found = [c for c in nb.cells if c.get("id") == cid]
    assert len(found) == 1, f"no cell {cid!r}"
    return found[0]


def text_of(nb, cid: str) -> str:
    """Everything the cell printed or displayed as text, in order."""
    parts = []
    for o in cell(nb, cid).outputs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type in ("execute_result", "display_data"):
            parts.append(o.data.get("text/plain", "") + "\n")
    return "".join(parts)


def displays(nb, cid: str, mime: str) -> List[str]:
    return [o.data[mime] for o in cell(nb, cid).outputs
            if o.output_type in ("execute_result", "display_data") and mime in o.data]


def line_of(nb, cid: str, needle: str) -> int:
    """The 1-based line of the cell's source that first contains `needle`."""
    hits = [i + 1 for i, line in enumerate(cell(nb, cid).source.splitlines()) if needle in line]
    assert hits, f"{needle!r} not in cell {cid}"
    return hits[0]


def has_line(text: str, pattern: str) -> bool:
    """`pattern` (a regex matched against whole stripped lines) is one of the lines of `text`."""
    return any(re.fullmatch(pattern, line.strip()) for line in text.splitlines())


CHECKED = {
    "01-quickstart.ipynb": {"setup", "kernel", "compile", "traced-ir", "pass-diffs", "rich-display", "explain",
                            "compiler-fence", "ptx", "run"},
    "02-debugging-fences.ipynb": {"setup", "kernel", "data", "find", "report", "explain", "compiler-fix", "hand-fix",
                                  "wrong-place", "cli"},
    "03-gemm.ipynb": {"setup", "kernels", "fences", "correctness", "live", "results", "plot"},
    "04-attention.ipynb": {"setup", "configs", "fences", "correctness", "live", "results", "plot"},
}
SILENT = {"kernel", "data"}  # cells that only define things


# ---------------------------------------------------------------------------------------------
# The committed notebooks
# ---------------------------------------------------------------------------------------------

def test_the_three_notebooks_exist():
    assert [p.name for p in NOTEBOOKS] == sorted(CHECKED)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebooks_have_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None, f"{path.name}: cell {c.id} has outputs (python3 scripts/run_notebooks.py --strip)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_code_cell_is_checked(path):
    nb = nbformat.read(path, as_version=4)
    ids = {c.id for c in nb.cells if c.cell_type == "code"}
    assert ids == CHECKED[path.name]


def check_cells_print_unless_silent(nb, name):
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        assert not any(o.output_type == "error" for o in c.outputs)
        if c.id in SILENT:
            assert c.outputs == [], f"{name}: {c.id} should only define things"
        else:
            assert c.outputs, f"{name}: cell {c.id} shows nothing"


# ---------------------------------------------------------------------------------------------
# 01-quickstart
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    return execute("01-quickstart.ipynb", tmp_path_factory.mktemp("nb01"))


def quickstart_lines(nb):
    return {"store": line_of(nb, "kernel", "tlx.local_store("), "tma": line_of(nb, "kernel", "tlx.async_descriptor_store("),
            "fence": line_of(nb, "kernel", 'tlx.fence("async_shared")'), "alloc": line_of(nb, "kernel", "tlx.local_alloc(")}


def test_quickstart_runs_and_every_cell_shows_something(quickstart):
    check_cells_print_unless_silent(quickstart, "01")
    assert "sm_90 GPU: no, kernels run on the CPU interpreter" in text_of(quickstart, "setup")


def test_quickstart_compile_cell(quickstart):
    out = text_of(quickstart, "compile")
    assert "<CompiledKernel scale_publish (sm_90a, 4 warps, 1 fences)>" in out
    stages = re.search(r"stages in k.asm: (.*)", out).group(1).split(", ")
    assert stages[0] == "ir" and "ir.fence_insertion" in stages and "ir.proxy_fence_insertion" in stages
    assert "'trace':" in out and "'fence_insertion':" in out


def test_quickstart_traced_ir_shows_the_three_fences(quickstart):
    L = quickstart_lines(quickstart)
    out = text_of(quickstart, "traced-ir")
    assert has_line(out, r"// fence #1 \[user, cta\]")
    assert has_line(out, rf"//   separates tlx.local_store at {CELL_FILE}:{L['store']} -> tlx.tma_store at {CELL_FILE}:{L['tma']}")
    assert has_line(out, r'tlx.fence_async_shared \{cluster = false, origin = "user"\}')
    lines = [l.strip() for l in out.splitlines()]
    assert lines.count('tlx.fence {scope = "gpu"}') == 2 and lines.count('tlx.fence {scope = "sys"}') == 1
    html = displays(quickstart, "traced-ir", "text/html")[0]
    highlighted = [l for l in html.splitlines() if "background:#ffe9a8" in l]
    assert len(highlighted) == 4  # the proxy fence and the three memory fences


def test_quickstart_pass_diffs_say_what_each_pass_did(quickstart):
    diffs = displays(quickstart, "pass-diffs", "text/plain")
    by_stage = {}
    for d in diffs:
        m = re.match(r"(ir\.\w+): \(no change\)$", d) or re.search(r"^\+\+\+ (ir\.\w+)$", d, re.M)
        by_stage[m.group(1)] = d
    for quiet in ("ir.lower_dot", "ir.tma_lowering", "ir.fence_insertion", "ir.proxy_fence_insertion"):
        assert by_stage[quiet] == f"{quiet}: (no change)"
    if "ir.layouts" in by_stage:  # the layout pass (code generation)
        added = [l for l in by_stage["ir.layouts"].splitlines() if l.startswith("+") and not l.startswith("+++")]
        assert any("#blocked<" in l for l in added) and any("tt.reduce" in l and "scratch_bytes = " in l for l in added)
    alloc = [l for l in by_stage["ir.smem_allocation"].splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert any("tlx.local_alloc {offset = 0}" in l for l in alloc)
    assert all("scratch_offset = " in l for l in alloc if "tt.reduce" in l)
    bars = by_stage["ir.cta_barriers"].splitlines()
    added = [i for i, l in enumerate(bars) if l.startswith("+") and not l.startswith("+++")]
    assert added and all(bars[i][1:].strip() == "tlx.cta_barrier" for i in added)
    assert any(bars[i + 1].strip().startswith("tlx.tma_store ") for i in added)
    # and in the final IR the barrier sits between the fence and the TMA store
    final = displays(quickstart, "rich-display", "text/html")[0].split("IR after the last pass")[1]
    ir = [l.strip() for l in final.splitlines() if "//" not in l]
    fence = next(i for i, l in enumerate(ir) if "tlx.fence_async_shared" in l)
    store = next(i for i, l in enumerate(ir) if l.startswith("tlx.tma_store "))
    assert fence < store and "tlx.cta_barrier" in ir[fence:store]


def test_quickstart_rich_display_is_the_fence_table(quickstart):
    L = quickstart_lines(quickstart)
    page = displays(quickstart, "rich-display", "text/html")[0]
    assert "<b>scale_publish</b> — sm_90a, 4 warps, 1 proxy fence(s)" in page
    row = [r for r in page.split("<tr>") if r.startswith("<td>#1</td>")][0]
    cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
    assert cells[:3] == ["#1", "user", "cta"]
    assert re.fullmatch(rf"{CELL_FILE}:{L['fence']}", cells[3])
    assert re.fullmatch(rf"tlx.local_store at {CELL_FILE}:{L['store']}", cells[4])
    assert re.fullmatch(rf"tlx.tma_store at {CELL_FILE}:{L['tma']}", cells[5])


def test_quickstart_explain_cell(quickstart):
    L = quickstart_lines(quickstart)
    out = text_of(quickstart, "explain")
    assert out.startswith("1 proxy fence(s)\n")
    assert has_line(out, rf"fence #1 \[user, cta\] at {CELL_FILE}:{L['fence']}")
    assert has_line(out, rf"RAW: tlx.local_store at {CELL_FILE}:{L['store']} -> tlx.tma_store at {CELL_FILE}:{L['tma']} "
                         rf"on tlx.local_alloc at {CELL_FILE}:{L['alloc']} \(1x64x64xf16\), bytes \[0, 8192\)")


def test_quickstart_compiler_places_the_left_out_fence(quickstart):
    L = quickstart_lines(quickstart)
    diff = displays(quickstart, "compiler-fence", "text/plain")[0].splitlines()
    i = diff.index('+    tlx.fence_async_shared {cluster = false, origin = "fence_insertion"}')
    assert diff[i + 1].strip().startswith("tlx.tma_store")
    added = [l[1:].strip() for l in diff if l.startswith("+") and not l.startswith("+++")]
    assert added[0] == "// fence #1 [fence_insertion, cta]"
    out = text_of(quickstart, "compiler-fence")
    assert has_line(out, rf"fence #1 \[fence_insertion, cta\] at {CELL_FILE}:{L['tma']}")
    assert has_line(out, rf"generic access: tlx.local_store at {CELL_FILE}:{L['store']}")
    assert has_line(out, rf"placement: right before tlx.tma_store at {CELL_FILE}:{L['tma']}")


def test_quickstart_ptx_cell_tells_the_truth(quickstart):
    out = text_of(quickstart, "ptx")
    for instr in ("fence.proxy.async.shared::cta", "fence.acq_rel.gpu", "fence.acq_rel.sys", "cp.async.bulk.tensor"):
        assert instr in out, instr
    assert re.search(r"\(\d+ lines of PTX for sm_90a; ptxas (assembled it|did not run)\)", out)


def test_quickstart_runs_the_kernel_on_the_interpreter(quickstart):
    out = text_of(quickstart, "run")
    assert "proxy hazards the interpreter found: 0" in out
    assert re.search(r"ran on the CPU interpreter: y == x \* 0.5 in fp16: True; total -?\d+\.\d+ \(numpy, float64: "
                     r"-?\d+\.\d+\); tickets 4; flag 1 -> OK", out)


# ---------------------------------------------------------------------------------------------
# 02-debugging-fences
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def debugging(tmp_path_factory):
    return execute("02-debugging-fences.ipynb", tmp_path_factory.mktemp("nb02"))


def debugging_lines(nb):
    return {"store": line_of(nb, "kernel", "tlx.local_store("), "dot": line_of(nb, "kernel", "tlx.async_dot("),
            "load": line_of(nb, "kernel", "tlx.local_load("), "tma_a": line_of(nb, "kernel", "async_descriptor_load(a_desc"),
            "loop": line_of(nb, "kernel", "for kt in range"),
            "fence_after_load": line_of(nb, "kernel", 'FENCE_AT == "after_load"') + 1,
            "fence_after_store": line_of(nb, "kernel", 'FENCE_AT == "after_store"') + 1}


def test_debugging_runs_and_every_cell_shows_something(debugging):
    check_cells_print_unless_silent(debugging, "02")
    assert "kernels run on the CPU interpreter in this notebook" in text_of(debugging, "setup")


def test_the_interpreter_raises_the_hazard_with_both_lines(debugging):
    L = debugging_lines(debugging)
    out = text_of(debugging, "find")
    assert out.startswith("ProxyHazard: generic write then wgmma read of operand A (async) of the same shared memory")
    assert has_line(out, rf"first:   generic write \(tlx.local_store\) at {CELL_FILE}:{L['store']}, partition default, "
                         rf"iteration 0 of the loop at {CELL_FILE}:{L['loop']}")
    assert has_line(out, rf"then:    wgmma read of operand A \(async\) \(tlx.async_dot\) at {CELL_FILE}:{L['dot']}.*")
    assert f"h.kind: raw | h.lines: ({L['store']}, {L['dot']})" in out


def test_report_mode_lists_the_three_hazards(debugging):
    L = debugging_lines(debugging)
    out = text_of(debugging, "report")
    assert out.startswith("3 distinct hazards")
    pairs = set(re.findall(r"(RAW|WAR|WAW): line (\d+) -> line (\d+)", out))
    assert pairs == {("RAW", str(L["store"]), str(L["dot"])), ("WAW", str(L["store"]), str(L["tma_a"])),
                     ("WAR", str(L["load"]), str(L["tma_a"]))}


def test_the_compiler_explains_its_one_fence(debugging):
    L = debugging_lines(debugging)
    out = text_of(debugging, "explain")
    assert out.startswith("1 proxy fence(s)\n")
    assert has_line(out, rf"fence #1 \[fence_insertion, cta\] at {CELL_FILE}:{L['dot']}")
    assert f"kept in the loop at " in out and re.search(
        rf"kept in the loop at {CELL_FILE}:{L['loop']} because tlx.local_store at {CELL_FILE}:{L['store']} writes the "
        r"buffer every iteration", out)
    for kind, a, b in (("RAW", f"tlx.local_store at {CELL_FILE}:{L['store']}", f"tlx.async_dot at {CELL_FILE}:{L['dot']}"),
                       ("WAW", f"tlx.local_store at {CELL_FILE}:{L['store']}", f"tlx.tma_load at {CELL_FILE}:{L['tma_a']}"),
                       ("WAR", f"tlx.local_load at {CELL_FILE}:{L['load']}", f"tlx.tma_load at {CELL_FILE}:{L['tma_a']}")):
        assert has_line(out, rf"{kind}: {a} -> {b} on .*"), kind
    assert "with the compiler's fence: 0 hazards" in text_of(debugging, "compiler-fix")


def test_the_fix_by_hand(debugging):
    L = debugging_lines(debugging)
    out = text_of(debugging, "hand-fix")
    assert out.startswith("your fence alone (fence passes off): 0 hazards")
    assert "\n1 proxy fence(s)\n" in out
    assert has_line(out, rf"fence #1 \[user, cta\] at {CELL_FILE}:{L['fence_after_store']}")
    assert "FenceInsertion found this fence already in place" in out
    assert "fence_insertion, cta" not in out


def test_a_fence_in_the_wrong_place(debugging):
    L = debugging_lines(debugging)
    out = text_of(debugging, "wrong-place")
    assert out.startswith("fence after the local_load (fence passes off): 2 hazards")
    assert set(re.findall(r"(RAW|WAR|WAW): line (\d+) -> line (\d+)", out)) == {
        ("RAW", str(L["store"]), str(L["dot"])), ("WAW", str(L["store"]), str(L["tma_a"]))}
    assert "\n2 proxy fence(s)\n" in out
    assert has_line(out, rf"fence #1 \[user, cta\] at {CELL_FILE}:{L['fence_after_load']}")
    assert has_line(out, rf"fence #2 \[fence_insertion, cta\] at {CELL_FILE}:{L['dot']}")


def test_the_cli_cell_prints_the_demo_kernels_fence_report(debugging):
    import tlx.demo

    src = Path(tlx.demo.__file__).read_text().splitlines()
    tma = 1 + next(i for i, l in enumerate(src) if "tlx.async_descriptor_store(c_desc" in l)
    store = 1 + next(i for i, l in enumerate(src) if "tlx.local_store(c_s[0]" in l)
    out = text_of(debugging, "cli")
    assert "1 proxy fence(s)" in out
    assert has_line(out, rf"fence #1 \[fence_insertion, cta\] at demo.py:{tma}")
    assert has_line(out, rf"generic access: tlx.local_store at demo.py:{store}")


# ---------------------------------------------------------------------------------------------
# 03-gemm
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gemm(tmp_path_factory):
    return execute("03-gemm.ipynb", tmp_path_factory.mktemp("nb03"))


def test_gemm_runs_and_every_cell_shows_something(gemm):
    check_cells_print_unless_silent(gemm, "03")
    assert "sm_90 GPU: no" in text_of(gemm, "setup")


def example_plans():
    """(name, plan, its H200 config, whether it is persistent) for every GEMM example."""
    from tlx.examples import gemm as ex

    return [(name, plan, getattr(ex, f"H200_{name.upper()}"), "sms" in inspect.signature(plan).parameters)
            for name, plan in ex.ALL_PLANS.items()]


def test_gemm_names_the_example_kernels(gemm):
    out = text_of(gemm, "kernels")
    plans = example_plans()
    assert len(plans) >= 3
    for name, plan, cfg, _ in plans:
        kernel = plan.__doc__.split("`")[1]
        assert re.search(rf"^{name}\s+{kernel}: \S", out, re.M), name
        assert f"BM={cfg.BM} BN={cfg.BN} BK={cfg.BK} stages={cfg.NUM_STAGES} consumer warpgroups={cfg.NUM_MMA_GROUPS} " \
               f"num_warps={cfg.num_warps}" in out


def test_gemm_fences_only_in_the_epilogue(gemm):
    from tlx.examples import gemm_kernels

    lines, start = inspect.getsourcelines(gemm_kernels.matmul_ws_kernel.fn)
    fence = start + next(i for i, l in enumerate(lines) if 'tlx.fence("async_shared")' in l)
    store = start + next(i for i, l in enumerate(lines) if "tlx.local_store(" in l)
    out = text_of(gemm, "fences")
    for name, _, cfg, _ in example_plans():
        # one epilogue fence per consumer warpgroup and C chunk; the stream-K kernel stores C at
        # two places (the stream-K tiles it owns, its whole tiles)
        n = cfg.NUM_MMA_GROUPS * cfg.EPI_SPLIT * (2 if name == "streamk" else 1)
        assert has_line(out, rf"{name}\s+{n} proxy fence\(s\) \(user\); PTX: {n} fence.proxy.async, 0 inside a K "
                             r"loop, \d+ wgmma; \d+ registers, \d+ bytes of shared memory"), name
    report = out[out.index("2 proxy fence(s)\n"):]
    assert [int(x) for x in re.findall(r"fence #\d \[user, cta\] at gemm_kernels.py:(\d+)", report)] == [fence, fence]
    assert report.count(f"generic access: tlx.local_store at gemm_kernels.py:{store}") == 2
    assert report.count("FenceInsertion found this fence already in place") == 2
    assert "fence_insertion, cta" not in report and "tma_lowering" not in report


def test_gemm_correctness_on_the_interpreter(gemm):
    out = text_of(gemm, "correctness")
    rows = re.findall(r"^(\w+)\s+(\d+)x(\d+)x(\d+) fp16, (\d+) CTA\(s\) on the CPU interpreter: "
                      r"relative error (\S+) vs numpy \(float64\), 0 hazards -> OK$", out, re.M)
    plans = example_plans()
    shapes = [(256, 256, 256), (192, 320, 200)]
    assert [(r[0], tuple(map(int, r[1:4]))) for r in rows] == [(p[0], s) for s in shapes for p in plans]
    assert all(float(r[5]) < 1e-2 for r in rows)
    ctas = {}
    for name, _, cfg, pers in plans:
        for M, N, K in shapes:
            ctas[(name, M, N)] = 1 if pers else -(-M // cfg.BM) * -(-N // cfg.BN)
    assert all(int(r[4]) == ctas[(r[0], int(r[1]), int(r[2]))] for r in rows)


def test_gemm_results_cell_reads_the_results_folder(gemm):
    out = text_of(gemm, "results")
    files = sorted((ROOT / "benchmarks" / "results").glob("gemm-*.json"))  # not launch_overhead-*.json
    if files:
        assert re.match(rf"\d+ measurements in benchmarks/results/{re.escape(files[-1].name)} \(the newest of "
                        rf"{len(files)} result file\(s\)\):", out)
    else:
        assert out.startswith("No benchmark results: benchmarks/results/ has no gemm-*.json file")
        assert text_of(gemm, "plot").startswith("Nothing to plot")
    assert text_of(gemm, "live").startswith("No sm_90 GPU here: no live measurement")


def test_gemm_plots_results_against_cublas(tmp_path):
    """A results file in benchmarks/gemm.py's layout: the newest one is read, ratios are taken
    against the cuBLAS of the same process, and the plot cell draws it."""
    results = tmp_path / "results"
    results.mkdir()

    def row(kernel, tflops, pid, **kw):
        return {"kind": "result", "kernel": kernel, "dtype": "bf16", "M": 8192, "N": 8192, "K": 8192,
                "tflops": tflops, "family_pid": pid, **kw}

    (results / "gemm-20260101-000000.json").write_text(json.dumps({"results": [row("ws", 1.0, 1)]}))
    # another benchmark's file, newer and later in name order: not a GEMM result
    (results / "launch_overhead-20260103-000000.json").write_text(json.dumps({"rows": []}))
    (results / "gemm-20260102-000000.json").write_text(json.dumps({"results": [
        {"kind": "device", "name": "H200"},
        row("cublas", 750.0, 11), row("persistent", 700.0, 11),
        row("cublas", 760.0, 12), row("ws", 608.0, 12),
        {"kind": "result", "kernel": "pipelined", "dtype": "bf16", "M": 8192, "N": 8192, "K": 8192,
         "error": "CUDA error", "family_pid": 13},
    ]}))
    nb = execute("03-gemm.ipynb", tmp_path, extra_env={"GEMM_RESULTS_DIR": str(results)})
    out = text_of(nb, "results")
    assert out.startswith(f"4 measurements in {results}/gemm-20260102-000000.json (the newest of 2 result file(s)):")
    assert has_line(out, r"bf16 8192x8192x8192\s+persistent\s+700.0 TFLOP/s\s+93.3% of cuBLAS")
    assert has_line(out, r"bf16 8192x8192x8192\s+ws\s+608.0 TFLOP/s\s+80.0% of cuBLAS")
    assert has_line(out, r"bf16 8192x8192x8192\s+cuBLAS\s+760.0 TFLOP/s")
    assert displays(nb, "plot", "image/png"), "the plot cell shows a picture"
    assert "plotted 3 bars: 1 shape(s), 3 kernel(s)" in text_of(nb, "plot")


# ---------------------------------------------------------------------------------------------
# 04-attention
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def attention_nb(tmp_path_factory):
    return execute("04-attention.ipynb", tmp_path_factory.mktemp("nb04"))


def test_attention_runs_and_every_cell_shows_something(attention_nb):
    check_cells_print_unless_silent(attention_nb, "04")
    assert "sm_90 GPU: no" in text_of(attention_nb, "setup")


def test_attention_shows_each_head_dims_configs(attention_nb):
    from tlx.examples import attention as ex

    out = text_of(attention_nb, "configs")
    for d in ex.HEAD_DIMS:
        f, b = ex.FORWARD_CONFIGS[d], ex.BACKWARD_CONFIGS[d]
        assert has_line(out, rf"d{d}\s+forward: BLOCK_M={f.BLOCK_M} \(2 x 64\) BLOCK_N={f.BLOCK_N} "
                             rf"stages={f.NUM_STAGES}, {f.smem_bytes(d, separate_o=False) // 1024} KiB shared"), d
        assert has_line(out, rf"backward: dK/dV {b.BLOCK_N1} K/V rows x {b.BLOCK_M1}-row Q blocks, "
                             rf"stages={b.STAGES1}, head dim split {b.D_SPLIT}, {b.smem_bytes(d)[0] // 1024} KiB; "
                             rf"dQ 128 Q rows x {b.BLOCK_N2}-row K/V blocks, stages={b.STAGES2}, "
                             rf"{b.smem_bytes(d)[1] // 1024} KiB"), d


def test_attention_fences_only_in_the_epilogue(attention_nb):
    """Two user fences (one per consumer), none in a K/V loop, and the report names the lines of
    the helper that holds them (the fence, the O store before it, the TMA store after it)."""
    from tlx.examples import attention_kernels

    lines, start = inspect.getsourcelines(attention_kernels._fwd_consume_tile.fn)

    def line(needle, after=0):
        return start + next(i for i, l in enumerate(lines) if needle in l and i > after)

    fence = line('tlx.fence("async_shared")')
    store = line("tlx.local_store(q_view")
    tma = line("tlx.async_descriptor_store(o_desc, q_smem")
    out = text_of(attention_nb, "fences")
    assert has_line(out, r"attn_fwd_kernel fp16 d128 causal: 2 proxy fence\(s\) \(user\); PTX: 2 fence.proxy.async, "
                         r"0 inside a K/V loop of [3-9]; 0 bytes spilled, \d+ bytes of shared memory"), out
    report = out[out.index("2 proxy fence(s)\n"):]
    assert [int(x) for x in re.findall(r"fence #\d \[user, cta\] at attention_kernels.py:(\d+)", report)] == [fence, fence]
    assert report.count(f"generic access: tlx.local_store at attention_kernels.py:{store}") == 2
    assert report.count(f"async access:   tlx.tma_store at attention_kernels.py:{tma}") == 2


def test_attention_correctness_on_the_interpreter(attention_nb):
    out = text_of(attention_nb, "correctness")
    rows = re.findall(r"^(float16|bfloat16)\s+1x2x100x64 causal on the CPU interpreter: relative error vs float64 "
                      r"o (\S+), dq (\S+), dk (\S+), dv (\S+) -> OK$", out, re.M)
    assert [r[0] for r in rows] == ["float16", "bfloat16"], out
    for r in rows:
        bound = 2e-3 if r[0] == "float16" else 1.2e-2
        assert all(0 < float(x) <= bound for x in r[1:]), r


def test_attention_results_cell_reads_the_results_folder(attention_nb):
    out = text_of(attention_nb, "results")
    files = sorted((ROOT / "benchmarks" / "results").glob("attention-*.json"))
    if files:
        assert re.match(rf"\d+ measurements in benchmarks/results/{re.escape(files[-1].name)} \(the newest of "
                        rf"{len(files)} result file\(s\)\):", out)
    else:
        assert out.startswith("No benchmark results: benchmarks/results/ has no attention-*.json file")
        assert text_of(attention_nb, "plot").startswith("Nothing to plot")
    assert text_of(attention_nb, "live").startswith("No sm_90 GPU here: no live measurement")


def test_attention_plots_results_against_cudnn(tmp_path):
    """A results file in benchmarks/attention.py's layout: the newest one is read, ratios are
    taken against cuDNN at the same point, failed rows are left out, and the plot cell draws one
    panel per (direction, dtype, head_dim, causal)."""
    results = tmp_path / "results"
    results.mkdir()

    def row(kernel, tflops, seq, direction="forward", **kw):
        return {"kind": "result", "kernel": kernel, "direction": direction, "dtype": "bf16", "head_dim": 128,
                "causal": True, "seq": seq, "tflops": tflops, **kw}

    (results / "attention-20260101-000000.json").write_text(json.dumps({"results": [row("tlx", 1.0, 512)]}))
    (results / "gemm-20260103-000000.json").write_text(json.dumps({"results": []}))  # another benchmark's file
    (results / "attention-20260102-000000.json").write_text(json.dumps({"results": [
        {"kind": "device", "name": "H100"},
        row("cudnn", 500.0, 2048), row("tlx", 550.0, 2048), row("cudnn", 520.0, 4096), row("tlx", 468.0, 4096),
        row("flash", 400.0, 2048), row("cudnn", 300.0, 2048, "backward"), row("tlx", 240.0, 2048, "backward"),
        {"kind": "result", "kernel": "tlx-persistent", "direction": "forward", "dtype": "bf16", "head_dim": 128,
         "causal": True, "seq": 2048, "error": "CUDA error"},
    ]}))
    nb = execute("04-attention.ipynb", tmp_path, extra_env={"ATTENTION_RESULTS_DIR": str(results)})
    out = text_of(nb, "results")
    assert out.startswith(f"7 measurements in {results}/attention-20260102-000000.json (the newest of 2 result file(s)):")
    assert has_line(out, r"forward\s+bf16 d128 causal seq 2048\s+tlx\s+550.0 TFLOP/s\s+110.0% of cuDNN")
    assert has_line(out, r"forward\s+bf16 d128 causal seq 4096\s+tlx\s+468.0 TFLOP/s\s+90.0% of cuDNN")
    assert has_line(out, r"backward\s+bf16 d128 causal seq 2048\s+tlx\s+240.0 TFLOP/s\s+80.0% of cuDNN")
    assert has_line(out, r"forward\s+bf16 d128 causal seq 2048\s+cudnn\s+500.0 TFLOP/s")
    assert displays(nb, "plot", "image/png"), "the plot cell shows a picture"
    assert "plotted 5 lines in 2 panel(s): 3 implementation(s)" in text_of(nb, "plot")


# ---------------------------------------------------------------------------------------------
# On the GPU (the lead's machine): the same notebooks take their GPU branches
# ---------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_notebooks_on_the_gpu(tmp_path):
    nb = execute("01-quickstart.ipynb", tmp_path, gpu=True)
    assert re.search(r"ran on the GPU: y == x \* 0.5 in fp16: True; .*tickets 4; flag 1 -> OK", text_of(nb, "run"))
    nb = execute("03-gemm.ipynb", tmp_path, gpu=True)
    live = text_of(nb, "live")
    assert live.startswith("measuring on this GPU: benchmarks/gemm.py --quick") and "exited with" not in live
    assert re.match(r"\d+ measurements in benchmarks/results/gemm-", text_of(nb, "results"))
    assert displays(nb, "plot", "image/png")
    nb = execute("04-attention.ipynb", tmp_path, gpu=True)
    live = text_of(nb, "live")
    assert live.startswith("measuring on this GPU: benchmarks/attention.py --quick") and "exited with" not in live
    assert re.match(r"\d+ measurements in benchmarks/results/attention-", text_of(nb, "results"))
    assert displays(nb, "plot", "image/png")

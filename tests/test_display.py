"""What a notebook shows for a compiled kernel: `tlx.show(k, stage)` (one pass's IR with every
fence explained), `tlx.show(k, stage, diff=True)` (what that pass changed), and the rich display
of a CompiledKernel. Expected source lines are read from the kernel's own source, not from the
compiler."""

import inspect

import pytest

import catalog
import tlx
from tlx.display import fenced_ir_text, ir_diff_text, stage_keys

DESC = "tensordesc<fp16[64, 64]>"
SIG = {"x_desc": DESC, "y_desc": DESC}


def line_of(jit_fn, needle: str) -> int:
    """The file line of the first source line of `jit_fn` that contains `needle`."""
    lines, start = inspect.getsourcelines(jit_fn.fn)
    hits = [start + i for i, text in enumerate(lines) if needle in text]
    assert hits, needle
    return hits[0]


@pytest.fixture(scope="module")
def unfenced():
    return tlx.compile(catalog.tma_store_unfenced, signature=SIG, constexprs={"BLOCK": 64})


@pytest.fixture(scope="module")
def fenced():
    return tlx.compile(catalog.tma_store_fenced, signature=SIG, constexprs={"BLOCK": 64})


def test_stage_keys_are_the_traced_ir_then_every_pass_in_order(unfenced):
    keys = stage_keys(unfenced)
    assert keys[0] == "ir"
    assert keys.index("ir.tma_lowering") < keys.index("ir.fence_insertion") < keys.index("ir.smem_allocation") \
        < keys.index("ir.proxy_fence_insertion")


def test_diff_of_fence_insertion_shows_the_inserted_fence_and_its_reason(unfenced):
    store = line_of(catalog.tma_store_unfenced, "tlx.local_store(bufs[1]")
    tma = line_of(catalog.tma_store_unfenced, "tlx.async_descriptor_store(")
    text = str(tlx.show(unfenced, "fence_insertion", diff=True))
    added = [l[1:] for l in text.splitlines() if l.startswith("+") and not l.startswith("+++")]
    removed = [l for l in text.splitlines() if l.startswith("-") and not l.startswith("---")]
    assert removed == []
    assert added[-1].strip() == 'tlx.fence_async_shared {cluster = false, origin = "fence_insertion"}'
    assert added[0].strip() == "// fence #1 [fence_insertion, cta]"
    assert f"//   separates tlx.local_store at catalog.py:{store} -> tlx.tma_store at catalog.py:{tma}" \
        in [a.strip() for a in added]
    # the context line after the change is the TMA store the fence protects
    after = text.splitlines()[text.splitlines().index("+" + added[-1]) + 1]
    assert after.strip().startswith("tlx.tma_store")


def test_a_pass_that_changes_nothing_says_so(unfenced):
    assert ir_diff_text(unfenced, "tma_lowering") == "ir.tma_lowering: (no change)"


def test_smem_allocation_diff_shows_offsets(unfenced):
    text = ir_diff_text(unfenced, "smem_allocation")
    assert any(l.startswith("+") and "tlx.local_alloc {offset = " in l for l in text.splitlines())
    assert any(l.startswith("-") and "tlx.local_alloc :" in l for l in text.splitlines())


def test_user_fence_is_explained_in_the_traced_ir_and_unchanged_by_the_passes(fenced):
    store = line_of(catalog.tma_store_fenced, "tlx.local_store(bufs[1]")
    tma = line_of(catalog.tma_store_fenced, "tlx.async_descriptor_store(")
    traced = str(tlx.show(fenced, "ir")).splitlines()
    i = traced.index("    // fence #1 [user, cta]")
    assert traced[i + 1].strip() == f"//   separates tlx.local_store at catalog.py:{store} -> tlx.tma_store at catalog.py:{tma}"
    assert any(l.strip().startswith("tlx.fence_async_shared") and 'origin = "user"' in l for l in traced[i:i + 6])
    # FenceInsertion finds the user's fence in place: it adds none
    assert ir_diff_text(fenced, "fence_insertion") == "ir.fence_insertion: (no change)"
    assert fenced_ir_text(fenced).count("tlx.fence_async_shared") == 1


def test_fence_ids_can_be_left_out(fenced):
    assert "fence_id = 1" in fenced_ir_text(fenced)
    assert "fence_id" not in fenced_ir_text(fenced, fence_ids=False)


def test_unknown_stages_are_clear_errors(unfenced):
    with pytest.raises(KeyError, match="no stage 'fence_insertoin'; stages: ir, "):
        tlx.show(unfenced, "fence_insertoin")
    with pytest.raises(KeyError, match="traced IR"):
        ir_diff_text(unfenced, "ir")


def test_html_views_highlight_fences(unfenced):
    diff_html = tlx.show(unfenced, "fence_insertion", diff=True)._repr_html_()
    fence_rows = [l for l in diff_html.split("\n") if "tlx.fence_async_shared" in l]
    assert len(fence_rows) == 1 and "background:#dcf5dc" in fence_rows[0] and "font-weight:bold" in fence_rows[0]
    ir_html = tlx.show(unfenced, "fence_insertion")._repr_html_()
    assert "<b>ir.fence_insertion</b>" in ir_html
    assert "origin = &quot;fence_insertion&quot;" in ir_html


def test_compiled_kernel_rich_display_has_the_fence_table(unfenced):
    store = line_of(catalog.tma_store_unfenced, "tlx.local_store(bufs[1]")
    tma = line_of(catalog.tma_store_unfenced, "tlx.async_descriptor_store(")
    page = unfenced._repr_html_()
    assert "<b>tma_store_unfenced</b> — sm_90a, 4 warps, 1 proxy fence(s)" in page
    row = [r for r in page.split("<tr>") if r.startswith("<td>#1</td>")]
    assert len(row) == 1
    cells = [c.split("</td>")[0] for c in row[0].split("<td>")[1:]]
    assert cells[:6] == ["#1", "fence_insertion", "cta", f"catalog.py:{tma}", f"tlx.local_store at catalog.py:{store}",
                         f"tlx.tma_store at catalog.py:{tma}"]
    assert "IR after the last pass" in page

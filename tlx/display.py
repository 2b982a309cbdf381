"""Showing compiled kernels: IR text with every fence annotated by its record, the HTML a Jupyter
notebook renders for a CompiledKernel, and `tlx.show(kernel, stage, diff=False)`."""

from __future__ import annotations

import difflib
import html
from typing import Any, Callable, List, Optional

from tlx.compiler.fences import loc_text
from tlx.compiler.ir import parse_module, print_module


def fence_note(rec: Any) -> str:
    """One fence record as a few comment lines: origin and scope, what it separates, why here."""
    lines = [f"fence #{rec.id} [{rec.origin}, {rec.scope}]" + (" (redundant: guards nothing)" if rec.redundant else "")]
    if rec.writers or rec.reader:
        lines.append(f"  separates {', '.join(rec.writers) or '?'} -> {rec.reader or '?'}")
    if rec.buffer:
        rng = f" bytes [{rec.byte_range[0]}, {rec.byte_range[1]})" if rec.byte_range else ""
        lines.append(f"  buffer {rec.buffer}{rng}")
    if rec.reason:
        lines.append(f"  why: {rec.reason}")
    for p in rec.placement:
        lines.append(f"  placement: {p}")
    return "\n".join(lines)


def stage_keys(k: Any) -> List[str]:
    """The IR stages a compiled kernel kept, in pipeline order: "ir" (as traced), then "ir.<pass>"."""
    return [key for key in k.asm if key == "ir" or key.startswith("ir.")]


def _stage_module(k: Any, stage: Optional[str]):
    keys = stage_keys(k)
    if stage is None:
        key = keys[-1]
    else:
        key = stage if stage in k.asm else f"ir.{stage}"
        if key not in k.asm:
            raise KeyError(f"no stage {stage!r}; stages: {', '.join(keys)}")
    return key, k.asm[key]


def fenced_ir_text(k: Any, stage: Optional[str] = None, fence_ids: bool = True) -> str:
    """The IR after `stage` (default: the last pass) with each fence preceded by its explanation.
    In the traced IR ("ir") a user fence has no ``fence_id`` yet; it is matched to its record by
    its source location. ``fence_ids=False`` leaves the ``fence_id`` attribute out (the note above
    each fence names it), so that stage-to-stage diffs show only real changes."""
    key, text = _stage_module(k, stage)
    recs = {r.id: r for r in k.fences}
    user_by_loc = {r.loc: r for r in k.fences if r.origin == "user"}
    module = parse_module(text)

    def annotate(op):
        if op.name != "tlx.fence_async_shared":
            return None
        rec = recs.get(op.attrs.get("fence_id")) if "fence_id" in op.attrs else user_by_loc.get(op.loc)
        if not fence_ids:
            op.attrs.pop("fence_id", None)
        return fence_note(rec) if rec is not None else None

    return print_module(module, locs=False, annotate=annotate)


def ir_diff_text(k: Any, stage: str, context: int = 2) -> str:
    """What pass `stage` changed: a unified diff (`context` lines around each change) of the fenced
    IR before it against the fenced IR after it; "(no change)" when the pass changed nothing."""
    key, _ = _stage_module(k, stage)
    keys = stage_keys(k)
    i = keys.index(key)
    if i == 0:
        raise KeyError(f"stage {key!r} is the traced IR; it has no stage before it")
    before = fenced_ir_text(k, keys[i - 1], fence_ids=False).splitlines()
    after = fenced_ir_text(k, key, fence_ids=False).splitlines()
    lines = list(difflib.unified_diff(before, after, keys[i - 1], key, n=context, lineterm=""))
    if not lines:
        return f"{key}: (no change)"
    return "\n".join(lines)


def show(k: Any, stage: Optional[str] = None, diff: bool = False) -> Any:
    """The IR of one pass (`stage` = a pass name such as "fence_insertion", "ir" for the traced
    IR, or None for the last) with fences highlighted and explained; with ``diff=True`` only what
    that pass changed, against the stage before it. Renders as HTML in Jupyter, as text elsewhere."""
    _stage_module(k, stage)  # an unknown stage fails here, not later at display time
    return _IRView(k, stage, diff)


class _IRView:
    def __init__(self, k: Any, stage: Optional[str], diff: bool = False):
        self.k, self.stage, self.diff = k, stage, diff

    def __str__(self) -> str:
        if self.diff:
            return ir_diff_text(self.k, _stage_module(self.k, self.stage)[0])
        return fenced_ir_text(self.k, self.stage)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        key = _stage_module(self.k, self.stage)[0]
        if self.diff:
            return diff_html(str(self), f"what {key} changed")
        return ir_html(fenced_ir_text(self.k, self.stage), key)


def _is_fence(line: str) -> bool:
    return "tlx.fence_async_shared" in line or "tlx.fence " in line


def _styled_pre(text: str, title: str, style_of: Callable[[str], str]) -> str:
    """`text` as an HTML block under `title`, each line in a span of the CSS `style_of` gives it."""
    out = []
    for line in text.splitlines():
        style = style_of(line)
        out.append(f'<span style="{style}">{html.escape(line)}</span>' if style else html.escape(line))
    return (f"<div><b>{html.escape(title)}</b><pre style='font-size:11px;line-height:1.25'>" + "\n".join(out)
            + "</pre></div>")


def ir_html(text: str, title: str) -> str:
    """IR text as HTML: fence ops and their explanations highlighted."""
    return _styled_pre(text, title, lambda line: "color:#8a5a00" if line.lstrip().startswith("//") else
                       "background:#ffe9a8;font-weight:bold" if _is_fence(line) else "")


def _diff_style(line: str) -> str:
    style = ""
    if line.startswith("+") and not line.startswith("+++"):
        style = "background:#dcf5dc"
    elif line.startswith("-") and not line.startswith("---"):
        style = "background:#fadcdc"
    elif line.startswith("@@"):
        style = "color:#777"
    return style + ";font-weight:bold" if _is_fence(line) else style


def diff_html(text: str, title: str) -> str:
    """A unified diff of IR as HTML: added lines green, removed lines red, fences in bold."""
    return _styled_pre(text, title, _diff_style)


def compiled_kernel_html(k: Any) -> str:
    """What a notebook shows for a CompiledKernel: a summary, the fence report and the fenced IR."""
    rows = []
    for r in k.fences:
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in (
            f"#{r.id}", r.origin, r.scope, loc_text(r.loc), ", ".join(r.writers) or "-", r.reader or "-",
            r.reason or ("redundant" if r.redundant else ""), "; ".join(r.placement))) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("fence", "origin", "scope", "at", "generic access", "async access",
                                             "why", "placement"))
    times = ", ".join(f"{n} {t * 1e3:.2f} ms" for n, t in k.pass_times.items())
    summary = (f"<p><b>{html.escape(k.name)}</b> — {html.escape(k.options.target)}, {k.options.num_warps} warps, "
               f"{len(k.fences)} proxy fence(s); {html.escape(times)}</p>")
    table = f"<table style='font-size:12px'><tr>{head}</tr>{''.join(rows)}</table>" if rows else "<p>no proxy fences</p>"
    return summary + table + ir_html(fenced_ir_text(k), "IR after the last pass")

"""Showing compiled kernels: IR text with every fence annotated by its record, the HTML a Jupyter
notebook renders for a CompiledKernel, and `tlx.show(kernel, stage)`."""

from __future__ import annotations

import html
from typing import Any, Dict, List, Optional

from tlx.compiler.ir import parse_module, print_module


def _records_by_id(fences: List[Any]) -> Dict[int, Any]:
    return {r.id: r for r in fences}


def fence_note(rec: Any) -> str:
    """One fence record as a few comment lines: origin and scope, what it separates, why here."""
    from tlx.compiler.fences import loc_text

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


def _stage_module(k: Any, stage: Optional[str]):
    keys = [key for key in k.asm if key.startswith("ir")]
    if stage is None:
        key = keys[-1]
    else:
        key = stage if stage in k.asm else f"ir.{stage}"
        if key not in k.asm:
            raise KeyError(f"no stage {stage!r}; stages: {', '.join(keys)}")
    return key, k.asm[key]


def fenced_ir_text(k: Any, stage: Optional[str] = None) -> str:
    """The IR after `stage` (default: the last pass) with each fence preceded by its explanation."""
    key, text = _stage_module(k, stage)
    recs = _records_by_id(k.fences)
    module = parse_module(text)

    def annotate(op):
        if op.name == "tlx.fence_async_shared" and op.attrs.get("fence_id") in recs:
            return fence_note(recs[op.attrs["fence_id"]])
        return None

    return print_module(module, locs=False, annotate=annotate)


def show(k: Any, stage: Optional[str] = None) -> Any:
    """The IR of one pass (`stage` = a pass name such as "fence_insertion", or None for the last)
    with fences highlighted; renders as HTML in Jupyter, as text elsewhere."""
    return _IRView(k, stage)


class _IRView:
    def __init__(self, k: Any, stage: Optional[str]):
        self.k, self.stage = k, stage

    def __str__(self) -> str:
        return fenced_ir_text(self.k, self.stage)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return ir_html(fenced_ir_text(self.k, self.stage), _stage_module(self.k, self.stage)[0])


def ir_html(text: str, title: str) -> str:
    """IR text as HTML: fence ops and their explanations highlighted."""
    out = []
    for line in text.splitlines():
        esc = html.escape(line)
        s = line.lstrip()
        if s.startswith("//"):
            out.append(f'<span style="color:#8a5a00">{esc}</span>')
        elif "tlx.fence_async_shared" in line or "tlx.fence " in line:
            out.append(f'<span style="background:#ffe9a8;font-weight:bold">{esc}</span>')
        else:
            out.append(esc)
    return (f"<div><b>{html.escape(title)}</b><pre style='font-size:11px;line-height:1.25'>" + "\n".join(out)
            + "</pre></div>")


def compiled_kernel_html(k: Any) -> str:
    """What a notebook shows for a CompiledKernel: a summary, the fence report and the fenced IR."""
    from tlx.compiler.fences import loc_text

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

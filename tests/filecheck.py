"""A small FileCheck for IR-text-in / IR-text-out tests (the subset of LLVM FileCheck we use).

Directives (one per line of the check text; anything before the directive, such as ``//``, is
ignored):

* ``CHECK: pat``       the next match of `pat` at or after the end of the previous match
* ``CHECK-NEXT: pat``  a match on the line right after the previous match's line
* ``CHECK-SAME: pat``  a match on the previous match's line, after it
* ``CHECK-NOT: pat``   no match between the previous match and the next positive match (or the
  end of the current label block)
* ``CHECK-LABEL: pat`` splits the input into blocks, each starting at a label's match; the
  other directives between two labels only look inside that block
* ``CHECK-COUNT-n: pat`` n matches in a row, each after the previous one (as in LLVM, more may follow)

Patterns: literal text, where any run of whitespace matches any run of whitespace;
``{{regex}}`` is a regular expression; ``[[NAME:regex]]`` captures a variable and
``[[NAME]]`` matches the captured text again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

_DIRECTIVE = re.compile(r"\b(CHECK(?:-NEXT|-NOT|-LABEL|-SAME|-COUNT-\d+)?):(.*)$")


class FileCheckError(AssertionError):
    """A directive did not hold; the message shows it and the input around the failure."""


@dataclass
class Directive:
    kind: str  # CHECK, NEXT, NOT, LABEL, SAME, COUNT
    pattern: str
    lineno: int  # line in the check text
    count: int = 1


def parse_checks(text: str) -> List[Directive]:
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        m = _DIRECTIVE.search(line)
        if not m:
            continue
        tag, pat = m.group(1), m.group(2).strip()
        count = 1
        if tag.startswith("CHECK-COUNT-"):
            kind, count = "COUNT", int(tag.rsplit("-", 1)[1])
        else:
            kind = {"CHECK": "CHECK", "CHECK-NEXT": "NEXT", "CHECK-NOT": "NOT", "CHECK-LABEL": "LABEL",
                    "CHECK-SAME": "SAME"}[tag]
        if not pat:
            raise FileCheckError(f"check line {i}: empty {tag} pattern")
        out.append(Directive(kind, pat, i, count))
    if not out:
        raise FileCheckError("no CHECK directives in the check text")
    return out


def compile_pattern(pat: str, variables: Dict[str, str]) -> "re.Pattern[str]":
    """Turn one pattern into a regular expression (see the module docstring)."""
    parts: List[str] = []
    i = 0
    while i < len(pat):
        if pat.startswith("{{", i):
            j = pat.find("}}", i + 2)
            if j < 0:
                raise FileCheckError(f"unterminated '{{{{' in pattern {pat!r}")
            parts.append("(?:" + pat[i + 2:j] + ")")
            i = j + 2
        elif pat.startswith("[[", i):
            j = pat.find("]]", i + 2)
            if j < 0:
                raise FileCheckError(f"unterminated '[[' in pattern {pat!r}")
            body = pat[i + 2:j]
            if ":" in body:
                name, rx = body.split(":", 1)
                parts.append(f"(?P<{name}>{rx})")
            else:
                if body not in variables:
                    raise FileCheckError(f"undefined variable [[{body}]] in pattern {pat!r}")
                parts.append(re.escape(variables[body]))
            i = j + 2
        else:
            m = re.compile(r"[^{\[]+|.").match(pat, i)
            lit = m.group(0)  # type: ignore[union-attr]
            for k, chunk in enumerate(re.split(r"(\s+)", lit)):
                if chunk.isspace():
                    parts.append(r"\s+")
                elif chunk:
                    parts.append(re.escape(chunk))
            i = m.end()  # type: ignore[union-attr]
    return re.compile("".join(parts))


class _Input:
    def __init__(self, text: str):
        self.lines = text.splitlines()

    def search(self, rx, start: Tuple[int, int], end_line: int) -> Optional[Tuple[int, int, int, "re.Match[str]"]]:
        """First match at or after (line, col), before `end_line`: (line, start col, end col, match)."""
        line, col = start
        while line < end_line:
            m = rx.search(self.lines[line], col)
            if m:
                return line, m.start(), m.end(), m
            line, col = line + 1, 0
        return None

    def context(self, line: int, radius: int = 3) -> str:
        lo, hi = max(0, line - radius), min(len(self.lines), line + radius + 1)
        return "\n".join(f"{'>>' if k == line else '  '} {k + 1:4d}| {self.lines[k]}" for k in range(lo, hi))


def filecheck(output: str, checks: str) -> None:
    """Check `output` against the directives in `checks`; raise FileCheckError on the first
    directive that does not hold."""
    directives = parse_checks(checks)
    inp = _Input(output)
    nlines = len(inp.lines)
    variables: Dict[str, str] = {}

    def fail(d: Directive, msg: str, near: int) -> None:
        raise FileCheckError(f"check line {d.lineno}: {d.kind} '{d.pattern}': {msg}\ninput near line {near + 1}:\n"
                             f"{inp.context(min(max(near, 0), max(nlines - 1, 0)))}\n\nfull input:\n{output}")

    # label blocks
    labels = [k for k, d in enumerate(directives) if d.kind == "LABEL"]
    label_pos: List[Tuple[int, int, int]] = []
    cur = (0, 0)
    for k in labels:
        d = directives[k]
        hit = inp.search(compile_pattern(d.pattern, variables), cur, nlines)
        if hit is None:
            fail(d, "label not found", cur[0])
        label_pos.append((hit[0], hit[1], hit[2]))  # type: ignore[index]
        cur = (hit[0] + 1, 0)  # type: ignore[index]
    segments: List[Tuple[List[Directive], Tuple[int, int], int, int]] = []
    # directives before the first label run over the whole input up to the first label
    first_end = label_pos[0][0] if label_pos else nlines
    segments.append((directives[:labels[0]] if labels else directives, (0, 0), first_end, -1))
    for n, k in enumerate(labels):
        nxt = labels[n + 1] if n + 1 < len(labels) else len(directives)
        end = label_pos[n + 1][0] if n + 1 < len(label_pos) else nlines
        ln, c0, c1 = label_pos[n]
        segments.append((directives[k + 1:nxt], (ln, c1), end, ln))

    for ds, start, end_line, prev_line in segments:
        pos = start  # end of the previous match
        nots: List[Directive] = []
        for d in ds:
            if d.kind == "NOT":
                nots.append(d)
                continue
            rx = compile_pattern(d.pattern, variables)
            reps = d.count if d.kind == "COUNT" else 1
            for rep in range(reps):
                if d.kind == "NEXT":
                    if prev_line < 0:
                        fail(d, "CHECK-NEXT with no previous match", pos[0])
                    target = prev_line + 1
                    hit = inp.search(rx, (target, 0), min(target + 1, end_line)) if target < end_line else None
                    if hit is None:
                        fail(d, f"not found on the next line ({target + 1})", target)
                elif d.kind == "SAME":
                    if prev_line < 0:
                        fail(d, "CHECK-SAME with no previous match", pos[0])
                    hit = inp.search(rx, pos, pos[0] + 1) if pos[0] == prev_line else None
                    if hit is None:
                        fail(d, f"not found on line {prev_line + 1} after the previous match", prev_line)
                else:
                    hit = inp.search(rx, pos, end_line)
                    if hit is None:
                        fail(d, "not found" + (f" (occurrence {rep + 1} of {reps})" if reps > 1 else ""), pos[0])
                line, c0, c1, m = hit  # type: ignore[misc]
                for nd in nots:
                    nrx = compile_pattern(nd.pattern, variables)
                    bad = _search_between(inp, nrx, pos, (line, c0))
                    if bad is not None:
                        fail(nd, f"found on line {bad + 1}, between the previous match and '{d.pattern}'", bad)
                nots = []
                variables.update({k: v for k, v in m.groupdict().items() if v is not None})
                pos, prev_line = (line, c1), line
        for nd in nots:
            nrx = compile_pattern(nd.pattern, variables)
            bad = _search_between(inp, nrx, pos, (end_line, 0))
            if bad is not None:
                fail(nd, f"found on line {bad + 1}, after the last match of its block", bad)


def _search_between(inp: _Input, rx, start: Tuple[int, int], stop: Tuple[int, int]) -> Optional[int]:
    """Line of the first match of `rx` in the text from `start` up to `stop` (exclusive), or None."""
    (sl, sc), (el, ec) = start, stop
    for line in range(sl, min(el, len(inp.lines) - 1) + 1):
        text = inp.lines[line]
        a = sc if line == sl else 0
        b = ec if line == el else len(text)
        if a <= b and rx.search(text, a, b):
            return line
    return None

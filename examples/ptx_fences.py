"""Where the proxy fences sit in a kernel's PTX: how many `fence.proxy.async` instructions, and
how many inside a K loop. Pure text analysis with no tlx import (the real-TLX comparison script
loads this file by path in a Python that has only triton).

The PTX is split into basic blocks (labels start one; a branch or ``ret`` ends one; labels are
resolved through ``{ }`` scopes, as inline-asm spin loops reuse names), loops are the natural
loops of the back edges (an edge to a block that dominates its source), so a warp-specialized
kernel laid out as a dispatch loop is read correctly. A *K loop* is a loop that holds a
main-loop instruction — a wgmma (``wgmma.mma_async``) or a TMA load (``cp.async.bulk.tensor``
into shared memory) — and holds no smaller loop that does: a persistent kernel's tile loop (and a
warp-specialize dispatch loop) holds K loops and is not one; an mbarrier spin loop inside a K
loop holds no main-loop instruction and belongs to it.
"""
from __future__ import annotations

import re
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

_LABEL = re.compile(r"^\s*([$A-Za-z_][\w$]*):")
_BRANCH = re.compile(r"^\s*(@!?%?\w+\s+)?bra(?:\.uni)?\s+([$A-Za-z_][\w$]*)\s*;")
_RET = re.compile(r"^\s*(@!?%?\w+\s+)?(ret|exit|trap)\s*;")
FENCE = "fence.proxy.async"


def is_main_loop_instruction(line: str) -> bool:
    """A wgmma, or a TMA tile load into shared memory (not a store, not a prefetch)."""
    if "wgmma.mma_async" in line:
        return True
    return "cp.async.bulk.tensor" in line and ".global.shared" not in line and "prefetch" not in line


class PtxCfg:
    """The control-flow graph of one PTX text: `blocks` (line ranges), `succ`, `dom`."""

    def __init__(self, ptx: str):
        self.lines = [ln.split("//")[0] for ln in ptx.splitlines()]
        scopes = self._scopes()
        labels: Dict[Tuple[int, str], int] = {}
        for i, ln in enumerate(self.lines):
            m = _LABEL.match(ln)
            if m:
                labels[(scopes[i][-1], m.group(1))] = i
        starts: Set[int] = {0}
        targets: Dict[int, Optional[int]] = {}
        for i, ln in enumerate(self.lines):
            if _LABEL.match(ln):
                starts.add(i)
            m = _BRANCH.match(ln)
            if m:
                tgt = next((labels[(s, m.group(2))] for s in reversed(scopes[i]) if (s, m.group(2)) in labels), None)
                targets[i] = tgt
                starts.add(i + 1)
            elif _RET.match(ln):
                starts.add(i + 1)
        order = sorted(s for s in starts if s < len(self.lines))
        self.blocks: List[Tuple[int, int]] = [(a, b) for a, b in zip(order, order[1:] + [len(self.lines)])]
        first = {a: k for k, (a, _) in enumerate(self.blocks)}
        self.succ: List[List[int]] = []
        for k, (a, b) in enumerate(self.blocks):
            last = next((j for j in range(b - 1, a - 1, -1) if self.lines[j].strip()), a)
            out: List[int] = []
            m = _BRANCH.match(self.lines[last])
            r = _RET.match(self.lines[last])
            falls = k + 1 < len(self.blocks)
            if m:
                tgt = targets.get(last)
                if tgt is not None and tgt in first:
                    out.append(first[tgt])
                falls = falls and bool(m.group(1))  # a predicated branch may fall through
            elif r:
                falls = falls and bool(r.group(1))
            if falls:
                out.append(k + 1)
            self.succ.append(out)
        self.dom = self._dominators()

    def _scopes(self) -> List[Tuple[int, ...]]:
        """For each line, the stack of `{ }` scope ids enclosing it (0 = the function level)."""
        stack, out, next_id = [0], [], 1
        for ln in self.lines:
            out.append(tuple(stack))
            for ch in ln:
                if ch == "{":
                    stack.append(next_id)
                    next_id += 1
                elif ch == "}" and len(stack) > 1:
                    stack.pop()
        return out

    def _dominators(self) -> List[FrozenSet[int]]:
        n = len(self.blocks)
        preds: List[List[int]] = [[] for _ in range(n)]
        for k, ss in enumerate(self.succ):
            for s in ss:
                preds[s].append(k)
        everything = frozenset(range(n))
        dom = [everything] * n
        dom[0] = frozenset([0])
        changed = True
        while changed:
            changed = False
            for k in range(1, n):
                ps = [dom[p] for p in preds[k]]
                new = frozenset.intersection(*ps) | {k} if ps else frozenset([k])
                if new != dom[k]:
                    dom[k], changed = new, True
        self.preds = preds
        return dom

    def loops(self) -> List[FrozenSet[int]]:
        """The natural loops (sets of block indices), one per loop header."""
        bodies: Dict[int, Set[int]] = {}
        for u, ss in enumerate(self.succ):
            for h in ss:
                if h in self.dom[u]:  # a back edge u -> h
                    body = bodies.setdefault(h, {h})
                    work = [u]
                    while work:
                        x = work.pop()
                        if x not in body:
                            body.add(x)
                            work.extend(self.preds[x])
        return [frozenset(b) for b in bodies.values()]

    def block_of(self, line: int) -> int:
        for k, (a, b) in enumerate(self.blocks):
            if a <= line < b:
                return k
        raise IndexError(line)


def k_loops(cfg: PtxCfg) -> List[FrozenSet[int]]:
    """The K loops of `cfg` (see the module docstring)."""
    main_blocks = {cfg.block_of(i) for i, ln in enumerate(cfg.lines) if is_main_loop_instruction(ln)}
    with_main = [lp for lp in cfg.loops() if lp & main_blocks]
    return [lp for lp in with_main if not any(o < lp and o & main_blocks for o in with_main)]


_BAR_SYNC = re.compile(r"^\s*(?:@!?%?\w+\s+)?(?:bar\.sync|barrier\.sync|bar\.arrive|barrier\.arrive)\b")
_WAIT0 = re.compile(r"wgmma\.wait_group\.sync\.aligned\s+0\s*;")


def fence_report(ptx: str) -> Dict[str, int]:
    """What one PTX text does where: 'fences' (fence.proxy.async instructions),
    'fences_in_k_loop' (those inside a K loop), 'k_loops', 'wgmma' (wgmma.mma_async
    instructions), and two costs of a K loop's body that are not fences: 'bar_syncs_in_k_loop'
    (named/CTA barriers: bar.sync / bar.arrive) and 'wgmma_wait0_in_k_loop' (waits that drain
    every wgmma, serializing the MMAs)."""
    cfg = PtxCfg(ptx)
    kls = k_loops(cfg)

    def inside(pred) -> int:
        return sum(1 for i, ln in enumerate(cfg.lines) if pred(ln) and any(cfg.block_of(i) in lp for lp in kls))

    return {"fences": sum(FENCE in ln for ln in cfg.lines), "fences_in_k_loop": inside(lambda ln: FENCE in ln),
            "k_loops": len(kls), "wgmma": sum("wgmma.mma_async" in ln for ln in cfg.lines),
            "bar_syncs_in_k_loop": inside(lambda ln: bool(_BAR_SYNC.match(ln))),
            "wgmma_wait0_in_k_loop": inside(lambda ln: bool(_WAIT0.search(ln)))}

"""A small static checker for the PTX the compiler emits: every register an instruction reads is
written on every path from the kernel's entry (a must-defined dataflow over the basic blocks of
labels, branches and returns). Catches code placed where some threads never execute it — e.g.
a value computed after an unconditional branch that other branches' targets then read.

Exempt by design: the accumulator operand of `wgmma.mma_async` (with scale-d false the first
wgmma of a fresh accumulator reads registers it then overwrites) and registers a predicated
instruction merges into (the old value is don't-care when the predicate is false).
"""

from __future__ import annotations

import re
from typing import Dict, List, Set, Tuple

_REG = re.compile(r"%[A-Za-z_$][\w$]*")
_LABEL = re.compile(r"^(\$[\w$]+):$")


def _parse(ptx: str) -> List[Tuple[str, str, str, str]]:
    """(kind, label/opcode, predicate, operands) per line of the kernel body."""
    body = ptx[ptx.index("{", ptx.index(".entry")) + 1: ptx.rindex("}")]
    out = []
    asm: List[str] = []  # the lines of an inline asm block being read (its first: the registers it writes)
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("// begin inline asm"):
            asm = [line.partition(": writes ")[2] or " "]
            continue
        if asm:
            if line.startswith("// end inline asm"):  # one instruction: writes its outputs, reads the rest
                out.append(("ins", "inline_asm", "", asm[0] + "|" + " ".join(asm[1:])))
                asm = []
            else:
                asm.append(line)
            continue
        if not line or line.startswith((".reg", ".loc", "//")):
            continue
        m = _LABEL.match(line)
        if m:
            out.append(("label", m.group(1), "", ""))
            continue
        line = line.rstrip(";")
        pred = ""
        if line.startswith("@"):
            pred, line = line.split(None, 1)
            pred = pred[1:]
        parts = line.split(None, 1)
        out.append(("ins", parts[0], pred, parts[1] if len(parts) > 1 else ""))
    return out


def _split_operands(s: str) -> List[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


_NO_DEST = ("st.", "red.", "bar.", "barrier.", "fence.", "wgmma.fence", "wgmma.commit", "wgmma.wait", "bra", "ret",
            "cp.async", "stmatrix", "setmaxnreg", "mbarrier.init", "mbarrier.arrive", "tensormap.", "prefetch",
            "exit", "trap")


def undefined_uses(ptx: str) -> List[str]:
    """Instructions that read a register some path from the entry leaves unwritten."""
    items = _parse(ptx)
    # basic blocks
    blocks: List[List[Tuple[str, str, str, str]]] = [[]]
    labels: Dict[str, int] = {}
    for it in items:
        if it[0] == "label":
            if blocks[-1]:
                blocks.append([])
            labels[it[1]] = len(blocks) - 1
            continue
        blocks[-1].append(it)
        if it[1].startswith(("bra", "ret", "exit")):
            blocks.append([])
    succ: List[List[int]] = []
    for i, b in enumerate(blocks):
        s: List[int] = []
        last = b[-1] if b else None
        if last and last[1].startswith("bra"):
            s.append(labels[last[3].strip()])
            if last[2]:
                s.append(i + 1)
        elif last and last[1].startswith(("ret", "exit")):
            pass
        else:
            s.append(i + 1)
        succ.append([x for x in s if x < len(blocks)])
    # defs / uses per instruction
    def du(it):
        _, op, pred, ops = it
        if op == "inline_asm":
            writes, text = ops.split("|", 1)
            dests = _REG.findall(writes)
            return dests, [r for r in _REG.findall(text) if r not in dests]
        operands = _split_operands(ops)
        if not operands:
            return [], _REG.findall(pred)
        first = operands[0]
        if op.startswith(_NO_DEST) and not op.startswith("mbarrier.arrive.expect") or op.startswith("wgmma.mma_async"):
            if op.startswith("wgmma.mma_async"):  # writes its accumulator (reading it is exempt)
                return _REG.findall(first), [r for o in operands[1:] for r in _REG.findall(o)] + _REG.findall(pred)
            return [], [r for o in operands for r in _REG.findall(o)] + _REG.findall(pred)
        if op.startswith("mbarrier.arrive"):
            return [], [r for o in operands[1:] for r in _REG.findall(o)] + _REG.findall(pred)
        dests = _REG.findall(first)
        uses = [r for o in operands[1:] for r in _REG.findall(o)] + _REG.findall(pred)
        return dests, uses

    infos = [[du(it) for it in b] for b in blocks]
    n = len(blocks)
    everything: Set[str] = set()
    for b in infos:
        for d, u in b:
            everything.update(d)
            everything.update(u)
    IN: List[Set[str]] = [set(everything) for _ in range(n)]
    IN[0] = set()
    preds: List[List[int]] = [[] for _ in range(n)]
    for i, s in enumerate(succ):
        for j in s:
            preds[j].append(i)
    OUT = [IN[i] | {d for ds, _ in infos[i] for d in ds} for i in range(n)]
    changed = True
    while changed:
        changed = False
        for i in range(n):
            new_in = set() if i == 0 else (set.intersection(*[OUT[p] for p in preds[i]]) if preds[i] else set())
            new_out = new_in | {d for ds, _ in infos[i] for d in ds}
            if new_in != IN[i] or new_out != OUT[i]:
                IN[i], OUT[i] = new_in, new_out
                changed = True
    bad = []
    for i, b in enumerate(blocks):
        if i > 0 and not preds[i]:
            continue  # unreachable
        cur = set(IN[i])
        for it, (ds, us) in zip(b, infos[i]):
            for u in us:
                if u not in cur and not u.startswith(("%tid", "%ctaid", "%nctaid", "%clock", "%cluster", "%laneid")):
                    bad.append(f"{it[1]} {it[3]}: {u} may be undefined")
            cur.update(ds)
    return bad

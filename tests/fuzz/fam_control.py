"""Control flow: nested runtime `for` / `while` / `if` with carried values."""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from .case import Gen, poison
from .common import WARPS, user_fence
from .exprs import rnd, wrap32


class _Flow:
    """A random structured program over carried values — `acc` (an fp32 block), `s` (an i32
    scalar) — with nested runtime `for` / `while` / `if`, written as kernel source and run by
    `run` on numpy to give the reference (every trip count is a known argument)."""

    ROWS = 4

    def __init__(self, g: Gen, block: int):
        self.g = g
        self.block = block
        self.depth = 0
        self.loop_vars: List[str] = []
        self.in_loop = 0
        self.uses_smem = False
        self.counter = 0
        self.headers: List[int] = []  # lines of the loops being emitted, outermost first

    # the program is a list of statements: tuples whose first item says what they are
    def stmts(self, n: int) -> List[tuple]:
        return [self.stmt() for _ in range(n)]

    def row(self) -> Tuple[str, str]:
        """An index expression in [0, ROWS): (source, kind)."""
        if self.loop_vars and self.g.chance(0.6):
            v = self.g.pick(self.loop_vars)
            return f"{v} % {self.ROWS}", v
        return f"(s % {self.ROWS} + {self.ROWS}) % {self.ROWS}", "s"

    def stmt(self) -> tuple:
        g = self.g
        kinds = ["acc_add", "acc_scale", "acc_max", "acc_where", "s_add", "s_mul", "s_xor", "acc_f16", "smem"]
        if self.depth < 2:
            kinds += ["for", "for", "if", "while"]
        k = g.pick(kinds)
        if k in ("acc_add", "acc_max"):
            return (k, self.row())
        if k in ("s_add", "s_xor"):
            return (k, g.pick(self.loop_vars) if self.loop_vars else str(g.randint(1, 5)))
        if k == "smem":
            self.uses_smem = True
            return (k,)
        if k in ("for", "while"):
            self.depth += 1
            var = f"i{len(self.loop_vars)}" if k == "for" else f"w{self.counter}"
            self.counter += 1
            lo = g.pick(["0", "1"])
            hi = g.pick(["n0", "n1", str(g.randint(0, 3))] + (self.loop_vars[-1:] if self.loop_vars else []))
            step = g.pick([1, 1, 2]) if k == "for" else 1
            self.loop_vars.append(var)
            body = self.stmts(g.randint(1, 3))
            self.loop_vars.pop()
            self.depth -= 1
            return (k, var, lo, hi, step, body)
        if k == "if":
            self.depth += 1
            cond = g.pick(["s % 2 == 0", "s > 3"] + [f"{v} < n1" for v in self.loop_vars])
            then = self.stmts(g.randint(1, 2))
            other = self.stmts(g.randint(0, 2)) if g.chance(0.6) else []
            self.depth -= 1
            return (k, cond, then, other)
        return (k,)

    # ---- source -------------------------------------------------------------------------------------
    def emit(self, prog: List[tuple]) -> None:
        for st in prog:
            self.emit_one(st)

    def emit_one(self, st: tuple) -> None:
        g, k = self.g, st[0]
        if k == "acc_add":
            g.line(f"acc = acc + tl.load(x_ptr + ({st[1][0]}) * BLOCK + offs)")
        elif k == "acc_max":
            g.line(f"acc = tl.maximum(acc, tl.load(x_ptr + ({st[1][0]}) * BLOCK + offs))")
        elif k == "acc_scale":
            g.line("acc = acc * 0.5")
        elif k == "acc_where":
            g.line("acc = tl.where(offs % 2 == 0, acc, -acc)")
        elif k == "s_add":
            g.line(f"s = s + {st[1]}")
        elif k == "s_mul":
            g.line("s = s * 3 + 1")
        elif k == "s_xor":
            g.line(f"s = s ^ {st[1]}")
        elif k == "acc_f16":
            g.line("h = acc.to(tl.float16)")
            g.line("acc = h.to(tl.float32)")
        elif k == "smem":
            g.line("tlx.local_store(buf[0], acc)")
            g.line("acc = tlx.local_load(buf[0]) + 1.0")
        elif k == "for":
            _, var, lo, hi, step, body = st
            if not hi.isdigit() and g.mutate("static_range_runtime_bound"):
                hdr = g.line(f"for {var} in tl.static_range({lo}, {hi}, {step}):")
                g.expect_error(hdr, "compile-time integers", "tl.static_range over a runtime bound")
                g.indent += 1
                self.emit(body)
                g.indent -= 1
                return
            bounds = f"{lo}, {hi}, {step}" if step != 1 else f"{lo}, {hi}"
            with g.block(f"for {var} in range({bounds})") as hdr:
                self.headers.append(hdr)
                if g.mutate("constexpr_reassigned"):
                    g.line("BLOCK = BLOCK * 2")
                    # the outermost loop whose body reassigns it is reported
                    g.expect_error(self.headers[0], "reassigns", "a tl.constexpr reassigned in a loop body")
                self.in_loop += 1
                self.emit(body)
                self.in_loop -= 1
                self._loop_mistakes()
                self.headers.pop()
        elif k == "while":
            _, var, lo, hi, step, body = st
            g.line(f"{var} = {lo}")
            with g.block(f"while {var} < {hi}") as hdr:
                self.headers.append(hdr)
                self.in_loop += 1
                self.emit(body)
                self.in_loop -= 1
                self._loop_mistakes()
                g.line(f"{var} += 1")
                self.headers.pop()
        elif k == "if":
            _, cond, then, other = st
            if g.mutate("if_on_block"):
                ln = g.line("if acc > 0.0:")
                g.expect_error(ln, "ambiguous", "an if on a block tensor")
            elif not other and g.mutate("branch_type_mismatch"):
                ln = g.line(f"if {cond}:")
                g.expect_error(ln, "different types in the then and else branches",
                               "one branch of an if turns the fp32 block into fp16")
                g.indent += 1
                self.emit(then)
                g.line("acc = acc.to(tl.float16)")
                g.indent -= 1
                return
            else:
                g.line(f"if {cond}:")
            g.indent += 1
            self.emit(then)
            if not then:
                g.line("pass")
            g.indent -= 1
            if other:
                with g.block("else"):
                    self.emit(other)

    def _loop_mistakes(self) -> None:
        """Sites at the end of a loop body."""
        g = self.g
        if g.mutate("carried_type_change"):
            ln = g.line("acc = acc.to(tl.float16)")
            g.expect_error(ln, "changes type in the loop", "a loop-carried fp32 block becomes fp16")
        elif g.mutate("return_in_loop"):
            ln = g.line("return")
            g.expect_error(ln, "`return` inside a loop", "an early return inside a loop")
        elif g.mutate("break_in_loop"):
            ln = g.line("break")
            g.expect_error(ln, "`break` is not supported", "break in a kernel loop")

    # ---- reference ----------------------------------------------------------------------------------------
    def run(self, prog: List[tuple], env: dict) -> None:
        for st in prog:
            self.run_one(st, env)

    def _row(self, spec: Tuple[str, str], env: dict) -> int:
        v = env[spec[1]]
        return int(v % self.ROWS)  # python % is the kernel's ((v % R) + R) % R; loop vars are >= 0

    def run_one(self, st: tuple, env: dict) -> None:
        k = st[0]
        x = env["x"]
        acc, err = env["acc"], env["err"]
        if k == "acc_add":
            acc = acc + x[self._row(st[1], env)]
            err = err + rnd(acc, "fp32")
        elif k == "acc_max":
            acc = np.maximum(acc, x[self._row(st[1], env)])
        elif k == "acc_scale":
            acc, err = acc * 0.5, err * 0.5
        elif k == "acc_where":
            acc = np.where(np.arange(self.block) % 2 == 0, acc, -acc)
        elif k == "s_add":
            env["s"] = int(wrap32(np.int64(env["s"] + (env[st[1]] if st[1] in env else int(st[1])))))
        elif k == "s_mul":
            env["s"] = int(wrap32(np.int64(env["s"] * 3 + 1)))
        elif k == "s_xor":
            env["s"] = int(wrap32(np.int64(env["s"] ^ (env[st[1]] if st[1] in env else int(st[1])))))
        elif k == "acc_f16":
            err = err + rnd(acc, "fp16")
        elif k == "smem":
            acc = acc + 1.0
            err = err + rnd(acc, "fp32")
        elif k in ("for", "while"):
            _, var, lo, hi, step, body = st
            lo_v = int(lo)
            hi_v = env[hi] if hi in env else int(hi)
            for i in range(lo_v, hi_v, step):
                env[var] = i
                self.run(body, env)
            env.pop(var, None)
            return
        elif k == "if":
            _, cond, then, other = st
            s = env["s"]
            if cond == "s % 2 == 0":
                c = int(np.fmod(s, 2)) == 0
            elif cond == "s > 3":
                c = s > 3
            else:
                c = env[cond.split()[0]] < env["n1"]
            self.run(then if c else other, env)
            return
        env["acc"], env["err"] = acc, err


def control(g: Gen) -> None:
    """Carried values through nested runtime for / while / if: an fp32 block `acc` (loads of
    rows picked by loop variables or by the carried scalar, scaling, max, where, an fp16 round
    trip, a shared-memory round trip) and an i32 scalar `s` (wrapping arithmetic); loop bounds are
    runtime arguments (possibly 0 trips), constants, or an outer loop's variable; programs past
    `live` return early."""
    BLOCK = g.pick([16, 32, 64, 128])
    grid = g.randint(1, 3)
    g.grid = (grid,)
    g.num_warps = g.pick(WARPS)
    f = _Flow(g, BLOCK)
    prog = f.stmts(g.randint(2, 5))
    x = g.floats((_Flow.ROWS, BLOCK), "fp32")
    n0, n1, live = g.randint(0, 4), g.randint(0, 3), g.randint(1, grid)
    g.param("x_ptr", "*fp32", x)
    out = poison((grid, BLOCK), "fp32")
    s_out = poison((grid,), "i32")
    g.param("out_ptr", "*fp32", out)
    g.param("s_ptr", "*i32", s_out)
    g.param("n0", "i32", n0)
    g.param("n1", "i32", n1)
    g.param("live", "i32", live)
    g.const("BLOCK", BLOCK)
    g.line("pid = tl.program_id(0)")
    if live < grid or g.chance(0.3):
        with g.block("if pid >= live"):
            g.line("return")
    g.line("offs = tl.arange(0, BLOCK)")
    g.line("acc = tl.zeros((BLOCK,), dtype=tl.float32)")
    g.line("s = pid + 1")
    if f.uses_smem:
        g.line("buf = tlx.local_alloc((BLOCK,), tl.float32, 1)")
    f.emit(prog)
    user_fence(g, 0.05)
    g.line("tl.store(out_ptr + pid * BLOCK + offs, acc)")
    g.line("tl.store(s_ptr + pid, s)")
    ref = np.full((grid, BLOCK), np.nan)
    tol = np.zeros((grid, BLOCK))
    sref = np.full(grid, np.nan)
    for p in range(min(live, grid)):
        env = {"x": x.astype(np.float64), "acc": np.zeros(BLOCK), "err": np.zeros(BLOCK), "s": p + 1, "n0": n0,
               "n1": n1}
        f.run(prog, env)
        ref[p], tol[p], sref[p] = env["acc"], env["err"], env["s"]
    g.check("out_ptr", ref, tol)
    g.check("s_ptr", sref, 0.0)

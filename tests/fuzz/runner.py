"""Run one fuzz case through every layer and judge the outcome.

trace -> passes (the IR verifier after each) -> PTX -> ptxas (`tlx.compile`), then the CPU
interpreter (`tlx.interpret`, hazards collected in report mode). The outcome is one of

* the expected one (``ok``; ``compile_error`` at the expected line with the expected words;
  ``hazard`` of an expected kind; ``deadlock``; ``interp_error``, an `InterpreterError` at the
  expected line), or a bug:
* ``internal_error`` — an exception that is not a `TLXError`, a `TLXError` that is not a
  `TLXCompileError` from the compiler (an IR verifier failure), or a `TLXCompileError` that
  only wraps another exception type (the tracer turns a builtin's crash into an error at the
  kernel's line; a `TypeError` — a bad call — is the only one a kernel author causes);
* ``no_line`` — a `TLXCompileError` that names no line of the kernel file;
* ``rejected_well_formed`` — a `TLXCompileError` (at a line) for a kernel the generator wrote
  well-formed: a compiler limitation or bug (or a generator that left its supported space);
* ``ptxas_rejected`` / ``unassembled`` — PTX that ptxas rejects, or none assembled;
* ``hang`` — a stage past its CPU-time limit (the campaign also counts a worker past a wall-time
  limit); ``crash`` — the worker process died (counted by the campaign);
* ``wrong_result`` — an output off its numpy reference (or poison overwritten / left);
* ``hazard_in_well_formed`` — the interpreter reported a hazard, a deadlock or an
  interpreter error for a well-formed kernel;
* ``fence_report_missed`` — (every other well-formed case using the async proxy) run again with
  the fence passes off, the interpreter observed a proxy hazard that the compiler's static
  report of unfenced hazards (`CompiledKernel.unfenced_hazards`) does not name with its kind
  and its async op (``fence_report_partial``, counted but not a failure: the report names
  that op with another of the generic accesses it must be fenced from — a known gap);
* ``unexpected_outcome`` — a broken case ended some other way than its mutation says (compiled
  when an error was due, an error at another line or with other words, another hazard kind).
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import re
import signal
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np

import tlx
from tlx.compiler.errors import TLXCompileError, TLXError
from tlx.compiler.ptxas import PTXASError
from tlx.interpreter import DeadlockError, Hazard, InterpreterError, ProxyHazard

from .case import POISON_INT, Case

PASSING = ("ok", "compile_error", "hazard", "deadlock", "interp_error", "fence_report_partial")
BUGS = ("internal_error", "no_line", "ptxas_rejected", "unassembled", "hang", "crash", "rejected_well_formed",
        "wrong_result", "hazard_in_well_formed", "fence_report_missed", "unexpected_outcome")


class Hang(BaseException):
    """A stage ran past its CPU-time limit. A BaseException, so that no `except Exception` in the
    code under test can swallow it."""


@dataclass
class Outcome:
    """How one case ended."""

    seed: int
    family: str
    mutation: Optional[str]
    status: str
    detail: str = ""
    times: Dict[str, float] = field(default_factory=dict)

    @property
    def is_bug(self) -> bool:
        return self.status not in PASSING


@contextmanager
def cpu_limit(seconds: float) -> Iterator[None]:
    """Raise `Hang` when this process has used `seconds` of CPU time inside the block (ptxas runs
    in a child process and does not count; a loaded machine does not make a case 'hang')."""
    if seconds <= 0:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang()

    old = signal.signal(signal.SIGPROF, on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def load_kernel(case: Case, workdir: str) -> Any:
    """Write the case's source to `workdir/case_<seed>.py` and import it (so `inspect` and error
    messages find the kernel's lines); returns the @tlx.jit kernel."""
    path = os.path.join(workdir, f"case_{case.seed}.py")
    with open(path, "w") as f:
        f.write(case.source)
    linecache.checkcache(path)
    spec = importlib.util.spec_from_file_location(f"tlx_fuzz_case_{case.seed}", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.kernel


def _wrapped_internal(e: BaseException) -> Optional[BaseException]:
    """The non-TLX exception a TLXCompileError wraps (other than a TypeError: a bad call)."""
    seen = set()
    c = e.__cause__ or e.__context__
    while c is not None and id(c) not in seen:
        seen.add(id(c))
        if not isinstance(c, (TLXError, TypeError)):
            return c
        c = c.__cause__
    return None


def _fmt(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))


def compare(case: Case) -> Optional[str]:
    """None when every checked output matches its reference, else what differs."""
    arrays = dict((n, v) for n, s, v in case.params if s is not None)
    for chk in case.checks:
        got = arrays[chk.name]
        got = getattr(got, "base", got) if not isinstance(got, np.ndarray) else got
        ref = np.asarray(chk.ref, np.float64)
        g64 = got.astype(np.float64).reshape(ref.shape)
        untouched = np.isnan(ref)
        if got.dtype.kind == "f":
            bad_poison = untouched & ~np.isnan(g64)
        else:
            bad_poison = untouched & (g64 != (POISON_INT if chk.poison is None else chk.poison))
        tol = np.broadcast_to(np.asarray(chk.tol, np.float64), ref.shape)
        diff = np.abs(g64 - np.where(untouched, 0.0, ref))
        bad = ~untouched & ~(diff <= tol)  # NaN in the output is wrong
        if got.dtype.kind == "f":  # a result past the output type's range is stored as +-inf
            over = ~untouched & (np.abs(ref) > np.finfo(got.dtype).max)
            bad &= ~(over & (g64 == np.copysign(np.inf, ref)))
        if bad_poison.any() or bad.any():
            where = np.argwhere(bad | bad_poison)[:5]
            rows = []
            for w in where:
                w = tuple(int(x) for x in w)
                rows.append(f"{w}: got {g64[w]!r}, want {ref[w]!r} (tol {tol[w]:.3g})")
            return (f"output {chk.name}: {int(bad.sum())} wrong, {int(bad_poison.sum())} poison overwritten; "
                    + "; ".join(rows))
    return None


def run_case(case: Case, workdir: str, hang_seconds: float = 1.0) -> Outcome:
    """Run `case` (see the module docstring) and return its outcome."""
    out = Outcome(case.seed, case.family, case.mutation, "ok")
    exp = case.expect
    t0 = time.perf_counter()
    try:
        fn = load_kernel(case, workdir)
        path = fn.file
        # ---- trace, passes (verifier after each), PTX, ptxas --------------------------------------
        try:
            with cpu_limit(hang_seconds):
                ck = tlx.compile(fn, signature=case.signature, constexprs=case.constexprs, num_warps=case.num_warps,
                                 fence_passes=case.fence_passes, divisibility=case.divisibility,
                                 verify_each_pass=True)
        except Hang:
            return _set(out, "hang", "compile ran past its CPU-time limit")
        except PTXASError as e:
            return _set(out, "ptxas_rejected", str(e))
        except TLXCompileError as e:
            inner = _wrapped_internal(e)
            if inner is not None:
                return _set(out, "internal_error", f"a TLXCompileError wrapping {type(inner).__name__}:\n{_fmt(e)}")
            if e.filename != path or not e.lineno:
                return _set(out, "no_line", f"the error names no line of the kernel:\n{e}")
            if exp.kind != "compile_error":
                return _set(out, "unexpected_outcome" if case.mutation else "rejected_well_formed",
                            f"a compile error for a kernel expected to compile:\n{e}")
            if e.lineno != exp.line or exp.text not in e.message:
                return _set(out, "unexpected_outcome",
                            f"expected an error at line {exp.line} saying {exp.text!r}, got:\n{e}")
            return _set(out, "compile_error", str(e).splitlines()[0])
        except TLXError as e:
            return _set(out, "internal_error", f"{type(e).__name__} from the compiler:\n{_fmt(e)}")
        out.times["compile"] = time.perf_counter() - t0
        if "cubin" not in ck.asm:
            return _set(out, "unassembled", f"no cubin: {ck.resources.get('ptxas') or ck.resources.get('codegen')}")
        if exp.kind == "compile_error":
            return _set(out, "unexpected_outcome", f"compiled, but expected an error at line {exp.line} ({exp.text!r})")
        # ---- the interpreter -------------------------------------------------------------------------
        t1 = time.perf_counter()
        try:
            with cpu_limit(hang_seconds):
                hazards = tlx.interpret(fn, case.grid, fence_passes=case.fence_passes, raise_on_hazard=False,
                                        signature=case.signature, num_warps=case.num_warps,
                                        **{n: v for n, _, v in case.params})
        except Hang:
            return _set(out, "hang", "the interpreter ran past its CPU-time limit")
        except DeadlockError as e:
            if exp.kind == "hazard" and "deadlock" in exp.kinds:
                return _set(out, "deadlock", str(e).splitlines()[0])
            return _set(out, "hazard_in_well_formed" if not case.mutation else "unexpected_outcome",
                        f"deadlock:\n{e}")
        except InterpreterError as e:
            if exp.kind == "interp_error":
                line = e.loc.line if e.loc is not None else None
                if line == exp.line and exp.text in e.message:
                    return _set(out, "interp_error", str(e).splitlines()[0])
                return _set(out, "unexpected_outcome",
                            f"expected an interpreter error at line {exp.line} saying {exp.text!r}, got:\n{e}")
            return _set(out, "hazard_in_well_formed" if not case.mutation else "unexpected_outcome",
                        f"interpreter error:\n{e}")
        except Hazard as e:  # raise_on_hazard is off: no hazard may be raised
            return _set(out, "internal_error", f"a hazard raised in report mode:\n{_fmt(e)}")
        except TLXError as e:
            return _set(out, "internal_error",
                        f"{type(e).__name__} from the interpreter after a clean compile:\n{_fmt(e)}")
        out.times["interpret"] = time.perf_counter() - t1
        if exp.kind == "hazard":
            match = [h for h in hazards if h.kind in exp.kinds and _lines_match(h.lines, exp.lines)]
            if match:
                return _set(out, "hazard", f"{match[0].kind} at lines {match[0].lines}")
            got = "; ".join(f"{h.kind} at lines {h.lines}" for h in hazards) or "no hazard"
            return _set(out, "unexpected_outcome", f"expected a hazard {list(exp.kinds)}"
                        f"{' at lines ' + str(exp.lines) if exp.lines else ''}, got {got}"
                        + ("".join("\n" + str(h) for h in hazards)))
        if hazards:
            return _set(out, "hazard_in_well_formed" if exp.kind == "ok" else "unexpected_outcome",
                        "\n".join(str(h) for h in hazards))
        if exp.kind == "interp_error":
            return _set(out, "unexpected_outcome",
                        f"expected an interpreter error at line {exp.line}, the kernel finished")
        bad = compare(case)
        if bad:
            return _set(out, "wrong_result", bad)
        if _fence_differential_applies(case):
            t2 = time.perf_counter()
            with cpu_limit(hang_seconds):
                missed = fence_report_misses(case, fn)
            out.times["fences_off"] = time.perf_counter() - t2
            if missed:
                return _set(out, *missed)
        return out
    except Hang:
        return _set(out, "hang", "past the CPU-time limit")
    except Exception as e:
        return _set(out, "internal_error", _fmt(e))
    finally:
        out.times["total"] = time.perf_counter() - t0
        linecache.clearcache()


_ASYNC_SMEM = ("tlx.async_descriptor_store", "tlx.async_descriptor_load", "tlx.async_dot", "tl.dot", "_desc.store(",
               "tlx.async_store")
_UNFENCED = re.compile(r"^(RAW|WAR|WAW): \S+ at .*?:(\d+) -> \S+ at .*?:(\d+) ")


def _fence_differential_applies(case: Case) -> bool:
    """Every other well-formed case that touches shared memory through the async proxy."""
    return (case.expect.kind == "ok" and case.fence_passes and case.seed % 2 == 0
            and any(k in case.source for k in _ASYNC_SMEM))


def fence_report_misses(case: Case, fn: Any) -> Optional[Tuple[str, str]]:
    """With the fence passes off, every proxy hazard the interpreter observes must be among the
    compiler's `unfenced_hazards` (its static report of the fences the passes would place), with
    the same kind and the same two lines. Returns None, or (status, what the report missed):
    ``fence_report_missed`` when no entry names the hazard's async op with its kind (a bug),
    ``fence_report_partial`` when one does but with another generic access (known: the report
    names one guarded access per fence, so the write on the other side of a branch that both
    sides write goes unnamed)."""
    ck = tlx.compile(fn, signature=case.signature, constexprs=case.constexprs, num_warps=case.num_warps,
                     fence_passes=False, divisibility=case.divisibility, disabled_passes=("codegen",))
    static = set()
    for entry in ck.unfenced_hazards:
        m = _UNFENCED.match(entry)
        if m:
            static.add((m.group(1).lower(), int(m.group(2)), int(m.group(3))))
    args = {n: _fresh(v) for n, _, v in case.params}
    hazards = tlx.interpret(fn, case.grid, fence_passes=False, raise_on_hazard=False, signature=case.signature,
                            num_warps=case.num_warps, **args)
    missed = [h for h in hazards if isinstance(h, ProxyHazard) and (h.kind, *h.lines) not in static]
    if not missed:
        return None
    readers = {(k, second) for k, _, second in static}
    unnamed = any((h.kind, h.lines[1]) not in readers for h in missed)
    status = "fence_report_missed" if unnamed else "fence_report_partial"
    return status, ("with the fence passes off the interpreter sees proxy hazards the compiler's unfenced_hazards "
                    "report does not name:\n" + "\n".join(str(h) for h in missed)
                    + "\nthe report:\n" + "\n".join(ck.unfenced_hazards or ["(empty)"]))


def _fresh(v: Any) -> Any:
    """A copy of an argument for a second run (arrays and descriptors over copies)."""
    if isinstance(v, np.ndarray):
        return v.copy()
    if hasattr(v, "base") and hasattr(v, "block_shape") and isinstance(getattr(v, "base"), np.ndarray):
        import copy

        d = copy.copy(v)
        d.base = v.base.copy()
        return d
    return v


def _lines_match(got, want) -> bool:
    """`want` None: any lines; a None in `want`: any line there; a tuple there: any of its lines
    (the two stores of an if/else, either of which the next iteration may run)."""
    return want is None or all(w is None or w == g or (isinstance(w, tuple) and g in w) for g, w in zip(got, want))


def _set(out: Outcome, status: str, detail: str) -> Outcome:
    out.status, out.detail = status, detail
    return out

"""The launch path: `kernel[grid](*args, **kwargs)` — look the call up, launch it.

`KernelLaunch` is one kernel's launch state. `kernel[grid]` returns a launch function bound to
the grid (`bind_grid`). The specializer (`tlx.specialize`) is the one source of truth for what a
call compiles to; the launch path asks it as rarely as it can:

* a guard (`recent`): the last few specializations found by key, each with the guard
  `guard_of` recorded of the call that found it. A call passes its arguments, the grid and the
  stream to the native launch together with a guard; the C side compares (a tensor's type,
  dtype object and alignment, an int's class, constexprs and options by type and value) and
  packs in one pass, and launches, or answers GUARD_MISS having launched nothing. So a
  repeated launch costs one native call (which asks torch for the default stream itself when no
  ``stream=`` is given), computing no key.
* the call key: `tlx.specialize.key_of` of the runtime arguments given positionally, with the
  positional constexprs and the keywords (constexprs and launch options, with their types)
  when there are any, looked up in one dict (`calls`). A hit holds what the first call of that
  key resolved: the native launch and the specialization's launch spec (`Launcher.fast`), the
  default values of the runtime parameters the call left out, and the compiled kernel; it
  becomes the newest guard.

Everything else takes `run`, the general path: bind the call (`Specializer.bind`: defaults,
options, clear errors), specialize it, compile through the caches (`tlx.compile`), load, launch
through the runtime's `Launcher`, and remember the call key. It also serves calls that pass
runtime arguments by keyword, arguments the native launch cannot pack as given (CuPy/numba
arrays, TensorDescriptors, host copies: it reads them and launches), kernels without a native
launch (``TLX_NATIVE_LAUNCH=0``, no C compiler), and ``TLX_INTERPRET=1``, which runs the CPU
interpreter instead (the native launch checks the variable itself and launches nothing).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tlx.compiler.errors import TLXError
from tlx.runtime.driver import current_context
from tlx.runtime.streams import default_stream, stream_handle

from .compile import CompiledKernel, compile_specialization
from .function import KernelFunction
from .interpreter import interpret
from .interpreter.entry import grid_tuple
from .specialize import ArgSpec, Guard, Specializer, guard_of, key_of

INTERPRET_ENV = "TLX_INTERPRET"
GUARD_MISS = -2  # the native launch's answer when a call does not match the guard it was given
RECENT = 4  # guards tried per call, newest first
_INTERPRET_NAME = INTERPRET_ENV.encode()


def interpret_requested() -> bool:
    """Whether ``TLX_INTERPRET`` asks for the CPU interpreter (set, and neither "" nor "0")."""
    return os.environ.get(INTERPRET_ENV, "") not in ("", "0")


class KernelLaunch:
    """One kernel's launch path (see the module docstring)."""

    def __init__(self, fn: KernelFunction, launch_defaults: Optional[Dict[str, Any]] = None):
        self.fn = fn
        self.specializer = Specializer(fn, launch_defaults)
        # call key -> (native launch, launch spec, defaults to append or None, compiled kernel, launcher)
        self.calls: Dict[Any, Tuple[Any, ...]] = {}
        self.compiled: Dict[Any, CompiledKernel] = {}  # specialization key -> compiled kernel
        self.misses = 0  # calls that took the general path (a first call of its key, or not keyable)
        # the specializations of the latest calls found by key, newest first, each with the guard
        # (`guard_of`) under which the native launch reuses it: (native, guard, spec, compiled, launcher)
        self.recent: Tuple[Tuple[Any, Guard, bytes, CompiledKernel, Any], ...] = ()
        # call key -> the argument types of its last call no guard could describe (numpy scalars,
        # CAI arrays...): later calls of the key with those types do not try `guard_of` again
        self.unguarded: Dict[Any, Tuple[type, ...]] = {}

    def bind_grid(self, grid: Any) -> Callable[..., CompiledKernel]:
        """The launch function of `kernel[grid]`: the hot path (module docstring)."""
        fixed_grid = type(grid) is tuple or type(grid) is int
        keyed = self.keyed_launch(grid, fixed_grid)
        env, pop_stream, grid_of = _INTERPRET_NAME, self.pop_stream, self.grid_of

        def launch(*args: Any, **kwargs: Any) -> CompiledKernel:
            stream = s = None  # s None: the native launch reads the default stream itself
            if kwargs:
                stream = pop_stream(kwargs)
                s = None if stream is None else stream_handle(stream)
            recent = self.recent
            if not recent:
                return keyed(None, args, kwargs, stream)
            g = grid if fixed_grid else grid_of(grid, args, kwargs)
            native, guard, spec, compiled, _ = recent[0]  # the newest guard, outside a loop: a
            try:  # loop's iterator and unpacking cost as much as a tensor's guard
                err = native(spec, g, s, args, env, guard, kwargs)
            except Exception:  # a value or grid it cannot take: the key path says what is wrong
                return keyed(g, args, kwargs, stream)
            return compiled if not err else older(err, recent, g, s, args, kwargs, stream)

        def older(err: int, recent: Tuple[Any, ...], g: Any, s: Optional[int], args: Tuple[Any, ...],
                  kwargs: Dict[str, Any], stream: Any) -> CompiledKernel:
            """The newest guard answered `err`: while guards miss, try the next older one; a
            driver error is recovered from (`after_error`); when none holds, the key path."""
            entries = iter(recent)
            _, _, _, compiled, launcher = next(entries)
            while err == GUARD_MISS:
                entry = next(entries, None)
                if entry is None:
                    return keyed(g, args, kwargs, stream)
                native, guard, spec, compiled, launcher = entry
                try:
                    err = native(spec, g, s, args, env, guard, kwargs)
                except Exception:  # a value or grid it cannot take: the key path says what is wrong
                    return keyed(g, args, kwargs, stream)
            if not err:
                return compiled
            values = args[:len(launcher.user_params)]
            return self.after_error(err, grid, g, s, args, kwargs, values, launcher, compiled)

        return launch

    def keyed_launch(self, grid: Any, fixed_grid: bool) -> Callable[..., CompiledKernel]:
        """The launch by call key, for calls no guard in `recent` matched: `launch(g, args,
        kwargs, stream)`, `g` the grid if already resolved (else None)."""
        calls, run, n_lead, n_fast = self.calls, self.run, self.specializer.n_lead, self.specializer.n_fast
        runtime, unguarded = self.specializer.runtime_set, self.unguarded
        env = _INTERPRET_NAME

        def launch(g: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], stream: Any) -> CompiledKernel:
            grid_now = grid if g is None else g
            key: Any = None
            found = None  # `run` is called outside the `except` blocks: its errors come unchained
            try:
                if kwargs or len(args) > n_lead:
                    if not runtime.isdisjoint(kwargs) or len(args) > n_fast:
                        return run(grid_now, args, kwargs, stream)
                    rest = args[n_lead:]  # constexprs given positionally
                    lead = key_of(args[:n_lead])
                    key = (lead, rest, tuple(map(type, rest)), tuple(kwargs.items()), tuple(map(type, kwargs.values())))
                else:
                    key = lead = key_of(args)
                found = calls[key]
            except KeyError:  # the first call with this key
                pass
            except (TLXError, TypeError):  # an argument that cannot be passed (the general path says
                key = None  # which), an unhashable constexpr: no call key
            if found is None:
                return run(grid_now, args, kwargs, stream, key)
            native, spec, tail, compiled, launcher = found
            values = args if tail is None else args[:n_lead] + tail
            if g is None:
                g = grid if fixed_grid else self.grid_of(grid, args, kwargs)
            s = None if stream is None else stream_handle(stream)  # None: the default stream
            if native is None:
                if interpret_requested():
                    return self.run_interpreter(grid, args, kwargs)
                launcher.launch(g, values, s)
                return compiled
            failed = unguarded.get(key)
            if failed is None or failed != tuple(map(type, args)):
                self.remember(key, native, spec, compiled, launcher, args, kwargs, lead, tail)
            try:
                err = native(spec, g, s, values, env)
            except Exception:  # an argument it cannot pack as given, or a bad value or grid: the
                err = None  # launcher reads every argument, or says what is wrong (below, unchained)
            if err is None:
                launcher.launch(g, values, s)
                return compiled
            return compiled if not err else self.after_error(err, grid, g, s, args, kwargs, values, launcher, compiled)

        return launch

    def remember(self, key: Any, native: Any, spec: bytes, compiled: CompiledKernel, launcher: Any, args: Tuple[Any, ...],
                 kwargs: Dict[str, Any], lead: Tuple[Any, ...], tail: Optional[Tuple[Any, ...]]) -> None:
        """Put a call found by `key` first in `recent`, with its guard (`guard_of`), when the
        native launch takes its arguments as given and a guard can describe them; otherwise
        note the call's argument types in `unguarded`."""
        guard = None if tail else guard_of(args, kwargs, lead)  # tail: runtime arguments left to
        if guard is None:  # their defaults, which the native launch would not see in the call
            self.unguarded[key] = tuple(map(type, args))
        else:
            self.recent = ((native, guard, spec, compiled, launcher),) + self.recent[:RECENT - 1]

    def after_error(self, err: int, grid: Any, g: Any, s: Optional[int], args: Sequence[Any], kwargs: Dict[str, Any],
                    values: Sequence[Any], launcher: Any, compiled: CompiledKernel) -> Any:
        """The native launch returned `err`: under TLX_INTERPRET (-1) run the interpreter on the
        call, else recover from the driver error and launch `values` again, or raise it. `s`: the
        stream's handle, None for the default stream."""
        if err < 0:  # TLX_INTERPRET is set: nothing was launched
            return self.run_interpreter(grid, args, kwargs)
        launcher.relaunch_after(err, g, values, default_stream() if s is None else s)
        return compiled

    def pop_stream(self, kwargs: Dict[str, Any]) -> Any:
        """Take the `stream=` launch option out of a call's keywords (None when not given, or
        when `stream` is a parameter of the kernel)."""
        return kwargs.pop("stream", None) if "stream" in self.specializer.options else None

    def grid_of(self, grid: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
        """A grid that is not a plain tuple or int: a callable of the call's parameters, or a
        sequence (read anew at every launch)."""
        if callable(grid):
            grid = grid(self.specializer.meta(args, kwargs))
        return grid if isinstance(grid, (tuple, int)) else tuple(grid)

    def run(self, grid: Any, args: Sequence[Any], kwargs: Dict[str, Any], stream: Any = None,
            call_key: Any = None, warmup: bool = False) -> CompiledKernel:
        """The general path (module docstring): bind, specialize, compile, launch — or, with
        `warmup`, compile only (no GPU needed). `call_key`: the hot path's key of this call,
        remembered for the next call with it."""
        self.misses += 1
        if not warmup and interpret_requested():
            return self.run_interpreter(grid, args, kwargs)
        values, options = self.specializer.bind(args, kwargs)
        spec = self.specializer.specialize(values, options, host_arrays=warmup)
        compiled = self.compiled.get(spec.key)
        if compiled is None:
            if not warmup:
                current_context(self.fn.__name__)  # no driver or no device: say so before compiling
            compiled = self.compiled[spec.key] = compile_specialization(self.fn, spec)
        if warmup:
            return compiled
        launcher = compiled.launcher
        launcher.load()
        runtime_args = tuple(values[n] for n in self.specializer.runtime_names)
        if call_key is not None:  # the runtime arguments it left out take their defaults
            n_given = min(len(args), self.specializer.n_lead)
            tail: Optional[Tuple[Any, ...]] = runtime_args[n_given:]
            if not tail and len(args) <= self.specializer.n_lead:
                tail = None  # the call gives exactly the runtime arguments
            native, launch_spec = launcher.fast or (None, None)
            self.calls[call_key] = (native, launch_spec, tail, compiled, launcher)
            if native is not None:
                specs = tuple(s for s in spec.key[0] if isinstance(s, ArgSpec))
                self.remember(call_key, native, launch_spec, compiled, launcher, tuple(args), kwargs, specs, tail)
        g = grid_tuple(grid, values) if callable(grid) else grid
        launcher.launch(g, runtime_args, stream)
        return compiled

    def run_interpreter(self, grid: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> "InterpretedRun":
        """Under ``TLX_INTERPRET``: run the call on the CPU interpreter; returns an `InterpretedRun`
        (the hazards it reported, and the kernel compiled for the target when asked for)."""
        kw = {k: v for k, v in kwargs.items() if k not in self.specializer.options}
        opts = {k: v for k, v in kwargs.items() if k in ("num_warps", "fence_passes", "ctas_per_cga")
                and k in self.specializer.options}
        hazards = interpret(self.fn, grid, *args, **kw, **opts)
        return InterpretedRun(hazards, lambda: self.run(grid, args, dict(kwargs), warmup=True))


class InterpretedRun:
    """What `kernel[grid](...)` returns under ``TLX_INTERPRET``: the hazards the interpreter
    reported (iterate it, or `.hazards`), and — compiled on first use, as a GPU launch would have
    returned it — the kernel's `asm`, `metadata` and every other attribute of a `CompiledKernel`,
    so code that checks a launch's PTX runs unchanged on the CPU."""

    def __init__(self, hazards: List[Any], compile_fn: Any):
        self.hazards = hazards
        self._compile = compile_fn
        self._compiled: Optional[CompiledKernel] = None

    @property
    def compiled(self) -> CompiledKernel:
        """The specialization this launch ran, compiled for the target (once)."""
        if self._compiled is None:
            self._compiled = self._compile()
        return self._compiled

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled, name)

    def __iter__(self) -> Any:
        return iter(self.hazards)

    def __len__(self) -> int:
        return len(self.hazards)

    def __getitem__(self, i: int) -> Any:
        return self.hazards[i]

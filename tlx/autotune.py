"""Autotuning, as Triton's `triton.autotune` / `triton.Config` / `triton.heuristics`.

    @tlx.autotune(configs=[tlx.Config({"BLOCK": 64}, num_warps=4),
                           tlx.Config({"BLOCK": 128}, num_warps=8)], key=["n"])
    @tlx.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr): ...

    kernel[lambda META: (tlx.cdiv(n, META["BLOCK"]),)](x, n)

The first launch for a *tuning key* — the values of the `key` arguments, then the dtype of every
argument that has one (as Triton) — prunes the configs (`prune_configs_by`: `early_config_prune`,
then `perf_model` + `top_k`), compiles the survivors (a thread pool: ptxas, most of a compile,
runs outside the GIL), times each on the real arguments with `tlx.testing.do_bench` (CUDA
events; `use_cuda_graph=True`: `do_bench_cudagraph`; `do_bench=` replaces the timer), keeps the
fastest (the median, then the 20th percentile), and remembers it for that key in memory and on
disk (`<TLX_CACHE_DIR>/autotune/`, keyed by the kernel's source hash, the compiler, the GPU, the
tuning key and the configs, so another process does not tune again). Later launches with the
same key launch the chosen config directly.

The hooks run exactly where Triton runs them: before every timed call, the config's
`pre_hook(nargs)` (the positional arguments by name, the keyword arguments and the config's
`all_kwargs()`: the tutorials set `TensorDescriptor.block_shape` there), then the autotuner's
`pre_hook(nargs, reset_only=False)` — by default it zeroes the `reset_to_zero` arguments and
saves the `restore_value` ones —, the launch, and `post_hook(nargs, exception)` — by default it
restores the saved arguments. After tuning, the autotuner's pre_hook runs once more with
``reset_only=True``; every launch of a chosen config runs the config's pre_hook first.

A config that does not compile (too much shared memory, a compile-time check of the kernel)
counts as infinitely slow, as in Triton; when no config compiles, the error lists each one's
reason. `TLX_PRINT_AUTOTUNING=1` prints every config's time and the choice. Under the CPU
interpreter (`TLX_INTERPRET=1`) nothing can be timed: the first config left after pruning is
used, and a warning says so once.

`kernel.fn` is the decorated kernel (`kernel.fn[grid](..., **config)` launches one
specialization directly); `kernel.configs`, `kernel.best_config`, `kernel.cache` (tuning key ->
Config), `kernel.configs_timings` and `kernel.bench_time` are as in Triton.
"""

from __future__ import annotations

import concurrent.futures
import copy
import difflib
import functools
import hashlib
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from tlx.compiler.errors import TLXCompileError, TLXError, TLXValueError
from tlx.compiler.ir import Location
from tlx.compiler.ptxas import PTXASError

from .compile import compiler_fingerprint
from .jit import JITFunction
from .launch import interpret_requested

INF_TIMING = (math.inf, math.inf, math.inf)
BENCH_QUANTILES = (0.5, 0.2, 0.8)  # what the timer is asked for; the median decides, as in Triton

# Options of the fork's triton.Config that drive Triton's own compiler (automatic warp
# specialization, IR overrides, subtiling): accepted at their default values, refused otherwise.
_TRITON_COMPILER_OPTIONS = {
    "ir_override": None, "minRegAutoWS": None, "maxRegAutoWS": None, "pingpongAutoWS": None,
    "num_buffers_warp_spec": 0, "num_consumer_groups": 0, "reg_dec_producer": 0, "reg_inc_consumer": 0,
    "early_tma_store_lowering": True, "generate_subtiled_region": None, "preferred_ctas_per_cga": None,
}
_REGISTER_OPTIONS = ("minRegAutoWS", "maxRegAutoWS", "reg_dec_producer", "reg_inc_consumer")
_CONFIG_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "pre_hook", "ctas_per_cga")
_PRUNE_FIELDS = ("perf_model", "top_k", "early_config_prune")


class AutotuneError(TLXCompileError):
    """A bad `tlx.Config`, `tlx.autotune` or `tlx.heuristics` argument, or a tuning that cannot
    choose (no config compiles, a pruning function keeps none). Names the kernel's (or the
    Config's) file:line and says what to change."""


def _caller_location(depth: int = 2) -> Optional[Location]:
    """The user's line that called into this module (`depth` frames up)."""
    frame = sys._getframe(depth)
    return Location(frame.f_code.co_filename, frame.f_lineno, 0)


def _unwrapped(kernel: Any) -> List[Any]:
    """`kernel`, the object its `fn` holds, that one's `fn`, ... (a wrapper, its @tlx.jit
    kernel, the Python function; at most 16, in case a `fn` leads back)."""
    chain = []
    while kernel is not None and len(chain) < 16:
        chain.append(kernel)
        kernel = getattr(kernel, "fn", None)
    return chain


def _kernel_location(kernel: Any) -> Optional[Location]:
    """The `def` line of the Python function under `kernel` (through any wrappers)."""
    code = next((o.__code__ for o in _unwrapped(kernel) if hasattr(o, "__code__")), None)
    return Location(code.co_filename, code.co_firstlineno, 0) if code is not None else None


# ---- Config ----------------------------------------------------------------------------------------

class Config:
    """One configuration for the autotuner to try: meta-parameters and launch options.

    `kwargs` holds the kernel's meta-parameters by name; the launch options are `num_warps`,
    `num_stages` (accepted; TLX kernels pipeline by hand), `num_ctas`, `maxnreg` and
    `ctas_per_cga` (a thread-block cluster, e.g. (2, 1, 1)); `pre_hook(nargs)` runs before every
    launch of this config. Options of Triton's own compiler are refused unless at their default."""

    def __init__(self, kwargs: Dict[str, Any], num_warps: int = 4, num_stages: int = 3, num_ctas: int = 1,
                 maxnreg: Optional[int] = None, pre_hook: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 ctas_per_cga: Optional[Sequence[int]] = None, **options: Any):
        where = _caller_location()
        if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            raise AutotuneError(f"tlx.Config takes a dict of meta-parameters first, got {type(kwargs).__name__} "
                                f"{kwargs!r}", where, hint='write tlx.Config({"BLOCK": 128}, num_warps=4)')
        _check_int("num_warps", num_warps, where, minimum=1, power_of_two=True, maximum=32)
        _check_int("num_stages", num_stages, where, minimum=0)
        _check_int("num_ctas", num_ctas, where, minimum=1)
        if maxnreg is not None:
            _check_int("maxnreg", maxnreg, where, minimum=1, maximum=255)
        if pre_hook is not None and not callable(pre_hook):
            raise AutotuneError(f"tlx.Config(pre_hook={pre_hook!r}) is not callable", where,
                                hint="pass a function taking the dict of the launch's arguments")
        if ctas_per_cga is not None:
            dims = tuple(ctas_per_cga) if isinstance(ctas_per_cga, (tuple, list)) else None
            if dims is None or len(dims) != 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1
                                                         for d in dims):
                raise AutotuneError(f"tlx.Config(ctas_per_cga={ctas_per_cga!r}) must be three positive ints",
                                    where, hint="e.g. ctas_per_cga=(2, 1, 1) for clusters of 2 CTAs along x")
            ctas_per_cga = dims
        for name, value in options.items():
            if name not in _TRITON_COMPILER_OPTIONS:
                close = difflib.get_close_matches(name, _CONFIG_OPTIONS + tuple(_TRITON_COMPILER_OPTIONS), n=1)
                raise AutotuneError(f"tlx.Config got an unknown option {name}={value!r}", where,
                                    hint=(f"did you mean {close[0]}? " if close else "")
                                    + f"Config options: {', '.join(_CONFIG_OPTIONS)}; "
                                    "the kernel's own parameters go in the dict")
            if name in _REGISTER_OPTIONS and isinstance(value, int) and value % 8:
                # a register count is a setmaxnreg operand: checked as the real TLX checks it
                raise TLXValueError(f"tlx.Config({name}={value}): {name} must be divisible by 8", where,
                                    hint="registers per thread come in multiples of 8 (24 to 256)")
            if value != _TRITON_COMPILER_OPTIONS[name]:
                raise AutotuneError(f"tlx.Config({name}={value!r}) sets an option of Triton's own compiler "
                                    "(automatic warp specialization, IR overrides), which tlx does not have", where,
                                    hint="TLX kernels specialize by hand (tlx.async_tasks, tlx.async_task("
                                         "registers=...)); drop the option")
        self.kwargs = kwargs
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook
        self.ctas_per_cga = ctas_per_cga

    def all_kwargs(self) -> Dict[str, Any]:
        """The keyword arguments a launch of this config gets: the meta-parameters, then
        num_warps, num_ctas, num_stages, and maxnreg / ctas_per_cga where set."""
        out = dict(self.kwargs)
        out.update(num_warps=self.num_warps, num_ctas=self.num_ctas, num_stages=self.num_stages)
        if self.maxnreg is not None:
            out["maxnreg"] = self.maxnreg
        if self.ctas_per_cga is not None:
            out["ctas_per_cga"] = self.ctas_per_cga
        return out

    def _identity(self) -> Tuple[Any, ...]:
        return (tuple(sorted((k, _frozen(v)) for k, v in self.all_kwargs().items())), self.pre_hook)

    def __hash__(self) -> int:
        return hash(self._identity())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Config) and self._identity() == other._identity()

    def __str__(self) -> str:
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_ctas: {self.num_ctas}", f"num_stages: {self.num_stages}",
                  f"maxnreg: {self.maxnreg}"]
        if self.ctas_per_cga is not None:
            parts.append(f"ctas_per_cga: {self.ctas_per_cga}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        extra = "".join(f", {k}={getattr(self, k)!r}" for k in ("maxnreg", "ctas_per_cga") if getattr(self, k) is not None)
        hook = f", pre_hook={getattr(self.pre_hook, '__qualname__', self.pre_hook)}" if self.pre_hook else ""
        return (f"Config({self.kwargs!r}, num_warps={self.num_warps}, num_stages={self.num_stages}, "
                f"num_ctas={self.num_ctas}{extra}{hook})")


def _check_int(name: str, value: Any, where: Optional[Location], minimum: int, maximum: Optional[int] = None,
               power_of_two: bool = False) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    ok = ok and (maximum is None or value <= maximum) and (not power_of_two or value & (value - 1) == 0)
    if not ok:
        want = "a power of two" if power_of_two else "an int"
        want += f" from {minimum}" + (f" to {maximum}" if maximum is not None else " up")
        raise AutotuneError(f"tlx.Config({name}={value!r}): {name} must be {want}", where)


_DTYPE_NAMES: Dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    """str(dtype), as Triton keys on it, remembered per dtype object (numpy's str() of a dtype
    costs about 10 µs, more than the rest of a launch's key)."""
    try:
        name = _DTYPE_NAMES.get(dtype)
    except TypeError:  # an unhashable dtype-like attribute
        return str(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def _frozen(v: Any) -> Any:
    """A hashable stand-in for a config or key value (lists as tuples, dicts as sorted items)."""
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    return v


# ---- what the wrappers need of the kernel they wrap (tlx/jit.py's public surface) ------------------

def _verbose() -> bool:
    return os.environ.get("TLX_PRINT_AUTOTUNING", "") not in ("", "0")


# ---- the wrappers ----------------------------------------------------------------------------------

class _KernelWrapper:
    """What autotune and heuristics share: they wrap a kernel (a @tlx.jit function or another
    wrapper), launch as it does (`kernel[grid](*args, **kwargs)`) and show its parameters."""

    def __init__(self, fn: Any, decorator: str):
        if not (hasattr(fn, "params") and hasattr(type(fn), "__getitem__")):
            raise AutotuneError(f"@tlx.{decorator} decorates a @tlx.jit kernel, got {type(fn).__name__} {fn!r}",
                                _kernel_location(fn) or _caller_location(4),
                                hint=f"put @tlx.{decorator}(...) above @tlx.jit")
        self.fn = fn
        # the @tlx.jit kernel under any autotune / heuristics wrappers (None if there is none)
        self.base_fn = next((o for o in _unwrapped(fn) if isinstance(o, JITFunction)), None)
        self.arg_names = [p.name for p in fn.params]
        self.params = fn.params
        self.__name__ = fn.__name__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.__module__ = getattr(fn, "__module__", None)
        self.__doc__ = getattr(fn, "__doc__", None)
        self._where = _kernel_location(fn)
        self._decorator = decorator

    def _check_names(self, names: Iterable[Any], what: str) -> List[str]:
        """`names` as a list of parameter names of the kernel; an AutotuneError otherwise."""
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise AutotuneError(f"@tlx.{self._decorator}: {what} must be a list of parameter names, got {names!r}",
                                self._where, hint=f'e.g. {what}=["{self.arg_names[-1] if self.arg_names else "n"}"]')
        out = list(names)
        for name in out:
            if name not in self.arg_names:
                close = difflib.get_close_matches(str(name), self.arg_names, n=1)
                raise AutotuneError(f"@tlx.{self._decorator}: {what} names {name!r}, which is not a parameter of "
                                    f"kernel {self.__name__}", self._where,
                                    hint=(f"did you mean {close[0]!r}? " if close else "")
                                    + f"parameters: {', '.join(self.arg_names)}")
        return out

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.run, grid)

    def run(self, grid: Any, /, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise AutotuneError(f"kernel {self.__name__} cannot be called directly", self._where,
                            hint=f"launch it as {self.__name__}[grid](...)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.fn!r})"


class Autotuner(_KernelWrapper):
    """A kernel launched with the fastest of several configs (see the module docstring)."""

    def __init__(self, fn: Any, configs: Optional[Sequence[Config]], key: Sequence[str],
                 prune_configs_by: Optional[Dict[str, Any]] = None, reset_to_zero: Optional[Sequence[str]] = None,
                 restore_value: Optional[Sequence[str]] = None, pre_hook: Optional[Callable[..., Any]] = None,
                 post_hook: Optional[Callable[..., Any]] = None, warmup: float = 25, rep: float = 100,
                 do_bench: Optional[Callable[..., Any]] = None, use_cuda_graph: bool = False,
                 cache_results: bool = True):
        super().__init__(fn, "autotune")
        configs = [] if configs is None else list(configs)
        for i, c in enumerate(configs):
            if not isinstance(c, Config):
                raise AutotuneError(f"@tlx.autotune: configs[{i}] is {type(c).__name__} {c!r}, not a tlx.Config",
                                    self._where, hint='write tlx.Config({"BLOCK": 128}, num_warps=4)')
            unknown = [k for k in c.kwargs if k not in self.arg_names]
            if unknown:
                raise AutotuneError(f"@tlx.autotune: configs[{i}] sets {', '.join(map(repr, unknown))}, which "
                                    f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'} of kernel "
                                    f"{self.__name__}", self._where,
                                    hint=f"parameters: {', '.join(self.arg_names)}; launch options go in "
                                         "tlx.Config(..., num_warps=...)")
        self.configs: List[Config] = configs or [Config({})]
        self.keys = self._check_names(key, "key")
        self.reset_to_zero = self._check_names(reset_to_zero or [], "reset_to_zero")
        self.restore_value = self._check_names(restore_value or [], "restore_value")
        for what, hook in (("pre_hook", pre_hook), ("post_hook", post_hook), ("do_bench", do_bench)):
            if hook is not None and not callable(hook):
                raise AutotuneError(f"@tlx.autotune({what}={hook!r}) is not callable", self._where)
        prune = {} if prune_configs_by is None else prune_configs_by
        if not isinstance(prune, dict) or set(prune) - set(_PRUNE_FIELDS):
            raise AutotuneError(f"@tlx.autotune(prune_configs_by={prune_configs_by!r}): give a dict with "
                                f"{', '.join(_PRUNE_FIELDS)}", self._where)
        self.perf_model: Optional[Callable[..., Any]] = prune.get("perf_model")
        self.configs_top_k: Any = prune.get("top_k", 1.0)
        self.early_config_prune: Optional[Callable[..., Any]] = prune.get("early_config_prune")
        top_k = self.configs_top_k
        if isinstance(top_k, bool) or not (isinstance(top_k, int) and top_k >= 1
                                           or isinstance(top_k, float) and 0.0 < top_k <= 1.0):
            raise AutotuneError(f"@tlx.autotune: prune_configs_by top_k={top_k!r} must be an int >= 1 (that "
                                "many configs) or a float in (0, 1] (that fraction)", self._where)
        self._user_pre_hook = pre_hook
        self._user_post_hook = post_hook
        self._restore_copies: Dict[str, Any] = {}
        self.num_warmups = warmup
        self.num_reps = rep
        self.use_cuda_graph = bool(use_cuda_graph)
        self._do_bench = do_bench
        self.cache_results = bool(cache_results)
        self.cache: Dict[Tuple[Any, ...], Config] = {}
        self.configs_timings: Optional[Dict[Config, Tuple[float, ...]]] = None
        self.failures: Dict[Config, BaseException] = {}
        self.best_config: Optional[Config] = None
        self.bench_time: Optional[float] = None
        self.nargs: Optional[Dict[str, Any]] = None
        self._warned_interpret = False

    # ---- hooks ----------------------------------------------------------------------------------
    def pre_hook(self, nargs: Dict[str, Any], reset_only: bool = False) -> None:
        """Before each timed launch: the user's pre_hook, or zero `reset_to_zero` and (unless
        `reset_only`) save `restore_value`."""
        if self._user_pre_hook is not None:
            self._user_pre_hook(nargs, reset_only=reset_only)
            return
        for name in self.reset_to_zero:
            if nargs.get(name) is not None:
                _zero(nargs[name], name, self)
        if not reset_only:
            self._restore_copies = {name: _clone(nargs[name], name, self) for name in self.restore_value
                                    if nargs.get(name) is not None}

    def post_hook(self, nargs: Dict[str, Any], exception: Optional[BaseException]) -> None:
        """After each timed launch: the user's post_hook, or restore what `pre_hook` saved."""
        if self._user_post_hook is not None:
            self._user_post_hook(nargs, exception=exception)
            return
        for name, saved in self._restore_copies.items():
            _copy_into(nargs[name], saved)
        self._restore_copies = {}

    @property
    def do_bench(self) -> Callable[..., Any]:
        """The timer: ``do_bench(kernel_call, quantiles)`` -> ms (a number or a list)."""
        if self._do_bench is not None:
            return self._do_bench
        from . import testing

        if self.use_cuda_graph:
            return lambda call, quantiles: testing.do_bench_cudagraph(call, rep=self.num_reps, quantiles=quantiles)
        return lambda call, quantiles: testing.do_bench(call, warmup=self.num_warmups, rep=self.num_reps,
                                                        quantiles=quantiles)

    # ---- launching ------------------------------------------------------------------------------
    def run(self, grid: Any, /, *args: Any, **kwargs: Any) -> Any:
        """`kernel[grid](*args, **kwargs)`: choose the config (tuning on a new key) and launch it."""
        nargs = dict(zip(self.arg_names, args))
        self.nargs = nargs
        try:
            if len(self.configs) > 1:
                key = self._tuning_key(nargs, kwargs)
                config = self.cache.get(key)
                if config is None:
                    config = self._choose(key, grid, args, kwargs, nargs)
            else:
                config = self.configs[0]
            self.best_config = config
            current = self._launch_kwargs(kwargs, nargs, config)
            if config.pre_hook is not None:
                config.pre_hook({**nargs, **current})
            return self.fn[grid](*args, **current)
        finally:
            self.nargs = None

    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> List[Any]:
        """Compile, without launching, every config left after pruning for these arguments;
        returns the compiled kernels."""
        nargs = dict(zip(self.arg_names, args))
        configs = self.prune_configs(kwargs, nargs)
        compiled, _ = self._precompile(grid, args, kwargs, configs, raise_errors=True)
        return [compiled[c] for c in configs]

    def _tuning_key(self, nargs: Dict[str, Any], kwargs: Dict[str, Any]) -> Tuple[Any, ...]:
        named = {**nargs, **{k: v for k, v in kwargs.items() if k in self.arg_names}} if kwargs else nargs
        key = [_frozen(named[k]) for k in self.keys if k in named]
        key += [_dtype_name(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        try:
            hash(tuple(key))
        except TypeError:
            raise AutotuneError(f"kernel {self.__name__}: the autotuning key {key!r} holds a value that cannot key "
                                "a cache", self._where, hint="key on integer, float, bool or string arguments") from None
        return tuple(key)

    def _launch_kwargs(self, kwargs: Dict[str, Any], nargs: Dict[str, Any], config: Config) -> Dict[str, Any]:
        """The launch's keywords: the caller's and the config's, which must not overlap."""
        tuned = config.all_kwargs()
        clash = [k for k in tuned if k in kwargs or k in nargs]
        if clash:
            raise AutotuneError(f"kernel {self.__name__}: {', '.join(map(repr, clash))} "
                                f"{'is' if len(clash) == 1 else 'are'} set by the autotuner's configs and also "
                                "passed to the launch", self._where,
                                hint="leave tuned meta-parameters and launch options out of the launch")
        return {**kwargs, **tuned}

    def prune_configs(self, kwargs: Dict[str, Any], nargs: Optional[Dict[str, Any]] = None) -> List[Config]:
        """The configs worth timing: `early_config_prune(configs, nargs, **kwargs)`, then the
        `top_k` best by `perf_model(**nargs, **kwargs, **config.all_kwargs())`."""
        nargs = self.nargs if nargs is None else nargs
        configs = list(self.configs)
        if self.early_config_prune is not None:
            configs = list(self.early_config_prune(self.configs, nargs, **kwargs) or [])
            if not configs:
                raise AutotuneError(f"kernel {self.__name__}: early_config_prune kept no config", self._where,
                                    hint="make it return at least one tlx.Config")
            bad = [c for c in configs if not isinstance(c, Config)]
            if bad:
                raise AutotuneError(f"kernel {self.__name__}: early_config_prune returned {bad[0]!r}, not a "
                                    "tlx.Config", self._where)
        if self.perf_model is not None:
            top_k = self.configs_top_k
            if isinstance(top_k, float):
                top_k = max(1, int(len(configs) * top_k))
            if len(configs) > top_k:
                estimate = {c: self.perf_model(**nargs, **kwargs, **c.all_kwargs()) for c in configs}
                configs = sorted(configs, key=lambda c: estimate[c])[:top_k]
        return configs

    # ---- tuning ---------------------------------------------------------------------------------
    def _choose(self, key: Tuple[Any, ...], grid: Any, args: Sequence[Any], kwargs: Dict[str, Any],
                nargs: Dict[str, Any]) -> Config:
        configs = self.prune_configs(kwargs, nargs)
        for c in configs:
            self._launch_kwargs(kwargs, nargs, c)  # a clash is the caller's error: say so before timing
        interpreting = interpret_requested()
        if interpreting and not self._warned_interpret:
            warnings.warn(f"tlx.autotune: kernel {self.__name__} runs on the CPU interpreter (TLX_INTERPRET=1), "
                          f"which cannot time it; it uses the first of its {len(configs)} configs: {configs[0]}",
                          RuntimeWarning, stacklevel=4)
            self._warned_interpret = True
        if interpreting or len(configs) == 1:
            self.cache[key] = configs[0]
            return configs[0]
        store = TuningStore() if self.cache_results else None
        if store is not None:
            digest = store.digest(self, key, configs)
            hit = store.load(digest, configs)
            if hit is not None:
                best, timings = hit
                self.configs_timings = timings
                self.failures = {}
                self.bench_time = None
                self.cache[key] = best
                if _verbose():
                    print(f"tlx autotune {self.__name__}: key {key}: from the cache "
                          f"({store.path_of(digest)}): {best}", flush=True)
                return best
        start = time.perf_counter()
        failures: Dict[Config, BaseException] = {}
        _, failures = self._precompile(grid, args, kwargs, configs, raise_errors=False)
        compiled_s = time.perf_counter() - start
        timings: Dict[Config, Tuple[float, ...]] = {}
        for c in configs:
            timings[c] = INF_TIMING if c in failures else self._bench(grid, args, kwargs, nargs, c, failures)
        self.bench_time = time.perf_counter() - start
        self.failures = failures
        self.configs_timings = timings
        if all(math.isinf(t[0]) for t in timings.values()):
            reasons = "\n".join(f"  {c}: {_first_line(failures.get(c))}" for c in configs)
            raise AutotuneError(f"kernel {self.__name__}: none of its {len(configs)} configs could run:\n{reasons}",
                                self._where, hint="fix the kernel or the configs (TLX_PRINT_AUTOTUNING=1 prints "
                                                  "each config's result)")
        best = min(configs, key=lambda c: timings[c])  # the first of equals, as Triton's min()
        self.cache[key] = best
        self.pre_hook({**nargs, **kwargs, **best.all_kwargs()}, reset_only=True)
        if _verbose():
            self._print(key, configs, timings, failures, best, compiled_s)
        if store is not None:
            store.save(digest, self, key, configs, timings, best)
        return best

    def _precompile(self, grid: Any, args: Sequence[Any], kwargs: Dict[str, Any], configs: Sequence[Config],
                    raise_errors: bool) -> Tuple[Dict[Config, Any], Dict[Config, BaseException]]:
        """Compile every config before timing, in a thread pool (ptxas, most of a compile, runs
        outside the GIL). Each config's arguments are prepared here, in order: its pre_hook runs
        on private copies of the host descriptors (objects with a `block_shape`, the only
        arguments whose specialization a hook changes in place), so concurrent compiles never
        see another config's block shapes."""
        jobs = []
        for c in configs:
            call_args = [_private(a) for a in args]
            call_kwargs = {k: _private(v) for k, v in {**kwargs, **c.all_kwargs()}.items()}
            if c.pre_hook is not None:
                c.pre_hook({**dict(zip(self.arg_names, call_args)), **call_kwargs})
            jobs.append((c, call_args, call_kwargs))

        def compile_one(job: Tuple[Config, List[Any], Dict[str, Any]]) -> Tuple[Any, Optional[BaseException]]:
            try:  # (`warmup`: compile, without launching, what ``fn[grid](*args, **kwargs)`` would launch)
                return self.fn.warmup(*job[1], grid=grid, **job[2]), None
            except AutotuneError:
                raise
            except (TLXCompileError, PTXASError) as e:
                if raise_errors:
                    raise
                return None, e

        workers = min(len(jobs), os.cpu_count() or 1)
        if workers > 1:
            # What every compile reads and caches lazily, computed once here: JITFunction's
            # source hash guards its recursion with a placeholder another thread could read.
            if self.base_fn is not None:
                self.base_fn.cache_hash()
            compiler_fingerprint()
            with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="tlx-autotune") as pool:
                results = list(pool.map(compile_one, jobs))
        else:
            results = [compile_one(j) for j in jobs]
        compiled = {c: r[0] for c, r in zip(configs, results) if r[1] is None}
        failures = {c: r[1] for c, r in zip(configs, results) if r[1] is not None}
        return compiled, failures  # type: ignore[return-value]

    def _bench(self, grid: Any, args: Sequence[Any], kwargs: Dict[str, Any], nargs: Dict[str, Any], config: Config,
               failures: Dict[Config, BaseException]) -> Tuple[float, ...]:
        """Time one config with the hooks around every call (see the module docstring)."""
        current = self._launch_kwargs(kwargs, nargs, config)
        full_nargs = {**nargs, **current}
        launch = self.fn[grid]

        def kernel_call() -> None:
            if config.pre_hook is not None:
                config.pre_hook(full_nargs)
            self.pre_hook(full_nargs)
            try:
                launch(*args, **current)
            except Exception as e:
                self.post_hook(full_nargs, exception=e)
                raise
            self.post_hook(full_nargs, exception=None)

        try:
            result = self.do_bench(kernel_call, quantiles=BENCH_QUANTILES)
        except AutotuneError:
            raise
        except (TLXCompileError, PTXASError) as e:  # compiled on the first timed call and failed
            failures[config] = e
            return INF_TIMING
        return _as_timing(result, self.__name__)

    def _print(self, key: Tuple[Any, ...], configs: Sequence[Config], timings: Dict[Config, Tuple[float, ...]],
               failures: Dict[Config, BaseException], best: Config, compiled_s: float) -> None:
        lines = [f"tlx autotune {self.__name__}: key {key}: {len(configs)} configs"]
        for c in configs:
            t = timings[c]
            if c in failures:
                lines.append(f"  failed     {c}: {_first_line(failures[c])}")
            else:
                spread = f" (p20 {t[1]:.4f}, p80 {t[2]:.4f})" if len(t) >= 3 else ""
                lines.append(f"  {t[0]:.4f} ms{spread}  {c}")
        lines.append(f"tlx autotune {self.__name__}: chose {best} (in {self.bench_time:.2f} s, of which compiling "
                     f"{compiled_s:.2f} s)")
        print("\n".join(lines), flush=True)


class Heuristics(_KernelWrapper):
    """A kernel whose named meta-parameters are computed from the launch's arguments."""

    def __init__(self, fn: Any, values: Dict[str, Callable[[Dict[str, Any]], Any]]):
        super().__init__(fn, "heuristics")
        if not isinstance(values, dict):
            raise AutotuneError(f"@tlx.heuristics takes a dict {{parameter: function(args)}}, got {values!r}",
                                self._where, hint='e.g. @tlx.heuristics({"BLOCK": lambda args: 128})')
        # a heuristic may also pick a launch option (num_warps, ctas_per_cga, ...), as in Triton
        self._check_names([k for k in values if k not in _CONFIG_OPTIONS], "values")
        for name, h in values.items():
            if not callable(h):
                raise AutotuneError(f"@tlx.heuristics: the value for {name!r} is {h!r}, not a function", self._where,
                                    hint=f'e.g. {{"{name}": lambda args: ...}}, called with the arguments by name')
        self.values = dict(values)

    def _with_values(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """The keywords with each heuristic's value added, in order (each sees those before it)."""
        out = dict(kwargs)
        nargs = dict(zip(self.arg_names, args))
        for name, h in self.values.items():
            out[name] = h({**nargs, **out})
        return out

    def run(self, grid: Any, /, *args: Any, **kwargs: Any) -> Any:
        """`kernel[grid](*args, **kwargs)` with the heuristics' values as keywords."""
        return self.fn[grid](*args, **self._with_values(args, kwargs))

    def warmup(self, *args: Any, grid: Any = None, **kwargs: Any) -> Any:
        """Compile, without launching, the specialization these arguments select."""
        return self.fn.warmup(*args, grid=grid, **self._with_values(args, kwargs))


def autotune(configs: Sequence[Config], key: Sequence[str], prune_configs_by: Optional[Dict[str, Any]] = None,
             reset_to_zero: Optional[Sequence[str]] = None, restore_value: Optional[Sequence[str]] = None,
             pre_hook: Optional[Callable[..., Any]] = None, post_hook: Optional[Callable[..., Any]] = None,
             warmup: float = 25, rep: float = 100, do_bench: Optional[Callable[..., Any]] = None,
             use_cuda_graph: bool = False, cache_results: bool = True) -> Callable[[Any], Autotuner]:
    """Decorate a @tlx.jit kernel to launch with the fastest of `configs`, tuned again whenever
    the values of the `key` arguments (or an argument's dtype) change."""
    where = _caller_location()
    if configs is not None and not isinstance(configs, (list, tuple)):
        raise AutotuneError(f"@tlx.autotune(configs=...) takes a list of tlx.Config, got {type(configs).__name__}",
                            where)

    def decorator(fn: Any) -> Autotuner:
        return Autotuner(fn, configs, key, prune_configs_by=prune_configs_by, reset_to_zero=reset_to_zero,
                         restore_value=restore_value, pre_hook=pre_hook, post_hook=post_hook, warmup=warmup, rep=rep,
                         do_bench=do_bench, use_cuda_graph=use_cuda_graph, cache_results=cache_results)

    return decorator


def heuristics(values: Dict[str, Callable[[Dict[str, Any]], Any]]) -> Callable[[Any], Heuristics]:
    """Decorate a @tlx.jit kernel so that each meta-parameter named in `values` is computed, at
    every launch, by its function from the dict of the launch's arguments."""

    def decorator(fn: Any) -> Heuristics:
        return Heuristics(fn, values)

    return decorator


# ---- helpers for arguments ----------------------------------------------------------------------

def _private(value: Any) -> Any:
    """A copy of a host tensor descriptor (what a pre_hook may change in place); else `value`."""
    return copy.copy(value) if hasattr(value, "block_shape") and hasattr(value, "base") else value


def _zero(value: Any, name: str, tuner: Autotuner) -> None:
    if hasattr(value, "zero_"):  # torch
        value.zero_()
    elif hasattr(value, "fill"):  # numpy, CuPy
        value.fill(0)
    else:
        raise AutotuneError(f"kernel {tuner.__name__}: reset_to_zero names {name!r}, a {type(value).__name__}, "
                            "which tlx cannot zero", tuner._where, hint="pass a torch tensor or a numpy / CuPy array")


def _clone(value: Any, name: str, tuner: Autotuner) -> Any:
    if hasattr(value, "clone"):  # torch
        return value.clone()
    if hasattr(value, "copy") and hasattr(value, "shape"):  # numpy, CuPy
        return value.copy()
    raise AutotuneError(f"kernel {tuner.__name__}: restore_value names {name!r}, a {type(value).__name__}, which "
                        "tlx cannot copy", tuner._where, hint="pass a torch tensor or a numpy / CuPy array")


def _copy_into(dest: Any, saved: Any) -> None:
    if hasattr(dest, "copy_"):  # torch
        dest.copy_(saved)
    else:
        dest[...] = saved


def _as_timing(result: Any, kernel: str) -> Tuple[float, ...]:
    """The timer's answer as a tuple of ms (a single number becomes a 1-tuple)."""
    try:
        if isinstance(result, (int, float)) and not isinstance(result, bool):
            return (float(result),)
        values = tuple(float(x) for x in result)
        if values:
            return values
    except (TypeError, ValueError):
        pass
    raise TLXError(f"tlx.autotune: the timer returned {result!r} for kernel {kernel}; a do_bench must return a time "
                   "in ms or a list of them (the quantiles it was asked for)")


def _first_line(e: Optional[BaseException]) -> str:
    if e is None:
        return "timed as infinitely slow"
    text = str(e).strip()
    for line in text.splitlines():
        if "error:" in line:
            return f"{type(e).__name__}: {line.split('error:', 1)[1].strip()}"
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


# ---- the tuning results on disk --------------------------------------------------------------------

class TuningStore:
    """Autotuning choices on disk: one JSON file per (kernel source and helpers, compiler, GPU,
    tuning key, configs) in ``<TLX_CACHE_DIR>/autotune/`` (default ``~/.cache/tlx``), written
    atomically; a file that is unreadable or names other configs is ignored (and retuned)."""

    FORMAT = 1

    def __init__(self, root: Optional[Path] = None):
        from tlx.runtime.cache import default_cache_dir

        self.root = Path(root) if root is not None else default_cache_dir()

    @property
    def directory(self) -> Path:
        return self.root / "autotune"

    def path_of(self, digest: str) -> Path:
        return self.directory / f"{digest}.json"

    def digest(self, tuner: Autotuner, key: Tuple[Any, ...], configs: Sequence[Config]) -> str:
        """What a choice depends on, hashed: the kernel's source (with its helpers), the compiler,
        the GPU, the tuning key and the configs tried (with their pre_hooks)."""
        blob = json.dumps({"format": self.FORMAT, "kernel": tuner.__qualname__, "source": tuner.base_fn.cache_hash() if tuner.base_fn else "",
                           "compiler": compiler_fingerprint(), "device": _device_identity(),
                           "key": [repr(k) for k in key], "configs": [config_identity(c) for c in configs]})
        return hashlib.sha256(blob.encode()).hexdigest()

    def load(self, digest: str, configs: Sequence[Config]) -> Optional[Tuple[Config, Dict[Config, Tuple[float, ...]]]]:
        """The stored choice (and every config's timing) among `configs`, or None."""
        try:
            data = json.loads(self.path_of(digest).read_text())
            if data.get("format") != self.FORMAT or data["configs"] != [config_identity(c) for c in configs] \
                    or len(data["timings"]) != len(configs):
                return None
            timings = {c: tuple(float(x) for x in t) for c, t in zip(configs, data["timings"])}
            best = configs[int(data["best"])]
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None
        return best, timings

    def save(self, digest: str, tuner: Autotuner, key: Tuple[Any, ...], configs: Sequence[Config],
             timings: Dict[Config, Tuple[float, ...]], best: Config) -> None:
        """Store the choice; a folder that cannot be written costs one warning, nothing else."""
        from tlx.runtime.cache import write_atomic

        data = {"format": self.FORMAT, "kernel": tuner.__qualname__, "key": [repr(k) for k in key],
                "configs": [config_identity(c) for c in configs], "timings": [list(timings[c]) for c in configs],
                "best": list(configs).index(best), "created": time.time()}
        try:
            write_atomic(self.path_of(digest), json.dumps(data, indent=1).encode())
        except OSError as e:
            warnings.warn(f"tlx.autotune: could not store the choice for kernel {tuner.__name__} in {self.directory} "
                          f"({e}); this process keeps it in memory", RuntimeWarning, stacklevel=5)

    def clear(self) -> int:
        """Remove every stored choice; returns how many."""
        from tlx.runtime.cache import remove_files

        return remove_files(self.directory, lambda p: p.suffix in (".json", ".tmp"), lambda p: p.suffix == ".json")


def config_identity(config: Config) -> str:
    """A config as text for the disk key: its options, and its pre_hook by name and code."""
    hook = config.pre_hook
    if hook is None:
        return str(config)
    name = f"{getattr(hook, '__module__', '?')}.{getattr(hook, '__qualname__', type(hook).__name__)}"
    code = getattr(hook, "__code__", None)
    body = hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()[:16] if code is not None else ""
    return f"{config}, pre_hook: {name}:{body}"


def _device_identity() -> str:
    """The current GPU's name and compute capability: a choice made on an H100 is not an H200's."""
    try:
        from tlx.runtime.driver import current_context

        ctx = current_context()
        dev = ctx.device
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        return f"{name} sm_{dev.compute_capability[0]}{dev.compute_capability[1]}"
    except TLXError:
        return "no CUDA device"
    except Exception:  # noqa: BLE001 - a context without the device fields: still a usable key
        return "unknown CUDA device"

"""`kernel[grid](*args, **constexprs)`: specialize, compile (through the cache) and launch.

A launch binds the arguments to the kernel's parameters, takes the launch options out of the
keywords (`num_warps`, `num_ctas`, `ctas_per_cga`, `stream`, `num_stages` — accepted and ignored,
TLX kernels pipeline by hand —, `maxnreg`), and builds the specialization key: the constexpr
values, and for every runtime argument its type spelling and divisibility by 16 (and whether an
integer equals 1, which Triton specializes too). The first launch of a key compiles — or reads the
compiled kernel from the disk cache, keyed by the source of the kernel and of every helper it
calls, the key, the options and the compiler version — and builds a `Launcher`; later launches go
straight to it. With `TLX_INTERPRET=1` the kernel runs on the CPU interpreter instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tlx.compiler.errors import TLXCompileError, TLXError
from tlx.compiler.options import CompileOptions

from .jit import JITFunction, interpret_requested
from .language import core
from .signature import type_from_signature

LAUNCH_OPTIONS = ("num_warps", "num_ctas", "ctas_per_cga", "stream", "num_stages", "maxnreg", "fence_passes")
_FINGERPRINT: List[str] = []


def compiler_fingerprint() -> str:
    """A digest of the compiler's own sources (and tlx's version): part of every cache key, so a
    changed compiler never serves stale kernels."""
    if not _FINGERPRINT:
        import tlx
        import tlx.compiler as comp

        h = hashlib.sha256(tlx.__version__.encode())
        for root in (os.path.dirname(comp.__file__), os.path.dirname(os.path.abspath(__file__))):
            for dirpath, _, files in sorted(os.walk(root)):
                for f in sorted(files):
                    if f.endswith(".py"):
                        with open(os.path.join(dirpath, f), "rb") as fh:
                            h.update(f.encode())
                            h.update(fh.read())
        _FINGERPRINT.append(h.hexdigest()[:32])
    return _FINGERPRINT[0]


def _split_kwargs(fn: JITFunction, kwargs: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    opts = dict(fn.launch_defaults)
    params = {p.name for p in fn.params}
    rest = {}
    for k, v in kwargs.items():
        if k in LAUNCH_OPTIONS and k not in params:
            opts[k] = v
        else:
            rest[k] = v
    return rest, opts


def bind_arguments(fn: JITFunction, args: Sequence[Any], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """Map the call's arguments to parameter names (defaults filled); a clear error otherwise."""
    try:
        bound = fn.signature.bind(*args, **kwargs)
    except TypeError as e:
        raise TLXCompileError(f"bad launch of kernel {fn.__name__}: {e}",
                              hint=f"parameters: {', '.join(p.name for p in fn.params)}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def _grid_tuple(grid: Any, meta: Dict[str, Any]) -> Tuple[int, ...]:
    g = grid(meta) if callable(grid) else grid
    if isinstance(g, int):
        g = (g,)
    try:
        g = tuple(int(x) for x in g)
    except TypeError:
        raise TLXError(f"the launch grid must be an int, a tuple of ints or a callable returning one, got {g!r}") from None
    if not 1 <= len(g) <= 3:
        raise TLXError(f"the launch grid has {len(g)} dimensions; give 1 to 3")
    return g


class Specialization:
    """What one launch key compiled to: the compiled kernel (or its cache entry) and the launcher."""

    def __init__(self, compiled: Any, launcher: Any, runtime_names: List[str]):
        self.compiled = compiled
        self.launcher = launcher
        self.runtime_names = runtime_names


def _options_for(fn: JITFunction, opts: Dict[str, Any]) -> CompileOptions:
    cluster = opts.get("ctas_per_cga")
    return CompileOptions(num_warps=int(opts.get("num_warps", 4)), num_ctas=int(opts.get("num_ctas", 1)),
                          cluster=tuple(cluster) if cluster else (1, 1, 1),
                          fence_passes=bool(opts.get("fence_passes", True)), maxnreg=opts.get("maxnreg"),
                          print_ir_after_all=os.environ.get("TLX_PRINT_IR_AFTER_ALL", "") not in ("", "0"))


def specialize(fn: JITFunction, bound: Dict[str, Any]) -> Tuple[Tuple, Dict[str, str], Dict[str, Any], Dict[str, int], List[str]]:
    """The specialization key of one call, with the signature, constexprs, divisibility and
    equal-to-one parameters it stands for."""
    from tlx.runtime.arrays import signature_of

    sig: Dict[str, str] = {}
    consts: Dict[str, Any] = {}
    div: Dict[str, int] = {}
    ones: List[str] = []
    key: List[Any] = []
    for p in fn.params:
        v = bound[p.name]
        if p.is_constexpr:
            v = core.unwrap(v)
            consts[p.name] = v
            key.append(("c", p.name, _hashable(v)))
            continue
        s = signature_of(v)
        if s.type == "constexpr":
            raise TLXCompileError(f"kernel {fn.__name__}: argument '{p.name}' is None",
                                  hint="pass a value, or mark the parameter `: tl.constexpr`")
        sig[p.name] = s.type
        div[p.name] = s.divisibility
        one = type(v) is int and v == 1
        if one:
            ones.append(p.name)
        key.append((s.type, s.divisibility, one))
    return tuple(key), sig, consts, div, ones


def _hashable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, core.dtype):
        return ("dtype", v.name)
    return v


def _cache_digest(fn: JITFunction, sig: Dict[str, str], consts: Dict[str, Any], div: Dict[str, int],
                  ones: List[str], options: CompileOptions) -> str:
    blob = json.dumps({"fn": fn.__qualname__, "src": fn.cache_hash(), "sig": sig, "div": div, "ones": ones,
                       "consts": {k: repr(_hashable(v)) for k, v in consts.items()}, "options": repr(options),
                       "compiler": compiler_fingerprint()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _compile_entry(fn: JITFunction, sig: Dict[str, str], consts: Dict[str, Any], div: Dict[str, int],
                   ones: List[str], options: CompileOptions):
    """Trace and compile one specialization; returns the runtime's CacheEntry and the kernel."""
    from .compile import compile_module

    t0 = time.perf_counter()
    types = {k: type_from_signature(v, k) for k, v in sig.items()}
    module = fn.trace(types, consts, num_warps=options.num_warps, target=options.target, num_ctas=options.num_ctas,
                      divisibility=div, equal_to_one=ones)
    compiled = compile_module(fn, module, options, time.perf_counter() - t0)
    from tlx.runtime.cache import entry_from_compile_result

    entry = entry_from_compile_result(fn.__name__, compiled.result, time.perf_counter() - t0,
                                      meta={"options": repr(options)})
    return entry, compiled


class CachedKernel:
    """A kernel read back from the disk cache: the same `asm`, `fences` and `explain_fences()` as
    the CompiledKernel that was stored."""

    def __init__(self, entry: Any):
        from tlx.compiler.fence_serial import records_from_json

        self.name = entry.name
        self.asm = dict(entry.asm)
        if entry.ptx is not None:
            self.asm["ptx"] = entry.ptx
        if entry.cubin is not None:
            self.asm["cubin"] = entry.cubin
        self.abi = entry.abi()
        self.fences = records_from_json(entry.fences_json) if entry.fences_json else []
        self.pass_times = entry.meta.get("pass_times", {})
        self.resources = entry.meta.get("resources", {})
        self.unfenced_hazards: List[str] = list(entry.meta.get("unfenced_hazards", []))
        self.compile_time_s = entry.compile_time_s

    def explain_fences(self) -> str:
        from tlx.compiler.fences import explain_fences

        return explain_fences(self.fences)

    def __repr__(self) -> str:
        return f"<CachedKernel {self.name} ({len(self.fences)} fences)>"


def launch(fn: JITFunction, grid: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
    """`fn[grid](*args, **kwargs)`: the generated per-kernel dispatcher (`dispatcher_source`)
    handles it; the first launch of each specialization falls back to `launch_slow`."""
    if interpret_requested():
        return launch_slow(fn, grid, args, kwargs)
    d = fn.__dict__.get("_dispatch")
    if d is None:
        d = fn._dispatch = make_dispatcher(fn)
    return d(grid, *args, **kwargs)


class _Missing:
    """The default the generated dispatcher gives a required parameter: an argument not passed."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()
_OPTION_DEFAULTS = {"num_warps": 4, "num_ctas": 1, "ctas_per_cga": None, "stream": None, "num_stages": None,
                    "maxnreg": None, "fence_passes": True}


def dispatcher_source(fn: JITFunction) -> Tuple[str, Dict[str, Any]]:
    """Python source of the kernel's launch function, and the globals it uses. Straight-line
    code: the kernel's parameters by name (defaults kept), the launch options as keywords, the
    stream, the runtime arguments bound inline (`tlx.runtime.arrays.bind_source`: no loop and
    no call for CUDA torch tensors, ints and floats), ONE flat key — each argument's (k, d)
    pair, the constexprs, the options that change the compiled code —, one dict lookup, and the
    specialization's `launch_bound`. The first launch of a key compiles (`first_launch`).

    A required parameter defaults to `MISSING` and the signature ends in ``*extra,
    **unknown``, so a missing argument, one too many or an unknown keyword reaches `bad_call`
    (the clear TLXCompileError) without a wrapper frame around every launch; only an argument
    passed twice (positionally and by name) is Python's own TypeError, "<kernel>() got multiple
    values for argument 'x'". Every name the code adds starts with ``__``, so no kernel
    parameter (``s``, ``key``, ``grid``...) can shadow one."""
    from tlx.runtime.arrays import bind_source
    from tlx.runtime.streams import torch_stream_functions

    params, required = [], []
    env: Dict[str, Any] = {"__M": MISSING}
    for p in fn.params:
        if p.has_default:
            env[f"__d_{p.name}"] = p.default
            params.append(f"{p.name}=__d_{p.name}")
        else:
            params.append(f"{p.name}=__M")
            required.append(p.name)
    opt_defaults = dict(_OPTION_DEFAULTS)
    opt_defaults.update({k: v for k, v in fn.launch_defaults.items() if k in opt_defaults})
    names = [p.name for p in fn.params]
    opts = [o for o in opt_defaults if o not in names]
    for o in opts:
        env[f"__o_{o}"] = opt_defaults[o]
    sig = ", ".join(["__grid"] + params + ["*__extra"] + [f"{o}=__o_{o}" for o in opts] + ["**__unknown"])
    runtime = [p.name for p in fn.params if not p.is_constexpr]
    consts = [p.name for p in fn.params if p.is_constexpr]
    bind_lines, bind_env = bind_source(runtime, "__s", "__")
    env.update(bind_env)
    # num_stages is accepted and ignored (TLX kernels pipeline by hand): not part of the key.
    key = [f"__k{i}, __d{i}" for i in range(len(runtime))] + consts + [o for o in opts if o not in ("stream", "num_stages")]
    meta = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    options = "{" + ", ".join(f"{o!r}: {o}" for o in opts) + "}"
    stream = "stream" if "stream" in opts else "None"
    torch_stream = torch_stream_functions()
    if torch_stream is not None:  # torch's current stream, read as default_stream() reads it
        env["__get_device"], env["__get_stream"] = torch_stream
        current = "__get_stream(__get_device())"
    else:
        current = "__default_stream()"
    bad = " or ".join(["__extra", "__unknown"] + [f"{n} is __M" for n in required])
    lines = [
        f"def __dispatch({sig}):",
        f"    if {bad}:",
        f"        __bad_call(__extra, __unknown, {meta})",
        f"    __s = {current} if {stream} is None else __stream_handle({stream})",
        *bind_lines,
        f"    __key = ({''.join(k + ', ' for k in key)})",
        "    try:",
        "        __launch, __compiled = __specs[__key]",
        "    except KeyError:",
        f"        __launch, __compiled = __first_launch(__key, {meta}, {options})",
        "    except TypeError:  # an unhashable constexpr (a list): no fast path for it",
        f"        __launch, __compiled = __first_launch(None, {meta}, {options})",
        "    if type(__grid) is not tuple and callable(__grid):",
        f"        __grid = __grid({meta})",
        f"    __launch(__grid, ({''.join(f'__v{i}, ' for i in range(len(runtime)))}), __s)",
        "    return __compiled",
    ]
    return "\n".join(lines) + "\n", env


def make_dispatcher(fn: JITFunction) -> Callable[..., Any]:
    """Compile `dispatcher_source` for `fn`: ``dispatch(grid, *args, **kwargs)`` launches."""
    from tlx.runtime.streams import default_stream, stream_handle

    src, env = dispatcher_source(fn)
    specs: Dict[Any, Tuple[Callable[..., None], Any]] = {}
    launchers: Dict[int, Any] = {}  # id(compiled) -> its Launcher, for the native dispatcher's plans

    def first_launch(key: Any, bound: Dict[str, Any], opts: Dict[str, Any]) -> Tuple[Callable[..., None], Any]:
        spec = _specialization_for(fn, bound, opts)
        spec.launcher.load()  # so that the launch_bound kept here is the loaded fast path
        entry = (spec.launcher.launch_bound, spec.compiled)
        launchers[id(spec.compiled)] = spec.launcher  # fn.cache keeps `compiled` alive: ids stay unique
        if key is not None:  # None: an unhashable constexpr; this specialization takes the slow lookup
            specs[key] = entry
        return entry

    def bad_call(extra: Tuple[Any, ...], unknown: Dict[str, Any], given: Dict[str, Any]) -> None:
        # Re-bind the call by inspect for its message. With `extra`, every parameter was filled
        # positionally; otherwise naming each argument given reports the first missing one.
        if extra:
            bind_arguments(fn, tuple(given.values()) + extra, unknown)
        else:
            bind_arguments(fn, (), {**{k: v for k, v in given.items() if v is not MISSING}, **unknown})
        raise TLXCompileError(f"bad launch of kernel {fn.__name__}")  # pragma: no cover - bind raised

    env.update({"__default_stream": default_stream, "__stream_handle": stream_handle, "__specs": specs,
                "__first_launch": first_launch, "__bad_call": bad_call})
    exec(compile(src, f"<tlx launch of {fn.__name__}>", "exec"), env)
    dispatch = env["__dispatch"]
    dispatch.__name__ = dispatch.__qualname__ = fn.__name__  # Python's own binding errors name the kernel
    dispatch.source = src
    dispatch.specs = specs
    dispatch.native = native_dispatcher(fn, dispatch, launchers)
    return dispatch


# Argument roles in a native plan (native_dispatch.c ROLE_*).
ROLE_RUNTIME, ROLE_VALUE, ROLE_IGNORE = 0, 1, 2


def native_dispatcher(fn: JITFunction, dispatch: Callable[..., Any], launchers: Dict[int, Any]) -> Any:
    """The C dispatcher in front of `dispatch` (runtime/native_dispatch.c), or None where the
    native launch entry is not in use (no C compiler, no driver, ``TLX_NATIVE_LAUNCH=0``).

    Its miss hook launches through `dispatch` and returns the *plan* of that launch, which C
    keeps and repeats for every later call with the same shape (positional count, keyword names)
    whose arguments have the same specialization key: per argument its role — a runtime argument
    (C compares what the key reads of it: a CUDA torch tensor's dtype and 16-byte alignment, an
    int's range class, == 1 and % 16 == 0, a float), a constexpr or key option (C compares the
    value), ``num_stages`` (ignored) — and the launcher's `native_plan` (how to pack, what to
    launch). No plan, so always the Python path: a ``stream=`` keyword, arguments of other
    types (numba/CuPy arrays, TensorDescriptors, HostCopy, numpy scalars), unhashable
    constexprs, and what `Launcher.native_plan` declines."""
    from tlx.runtime import native_launch
    from tlx.runtime.arrays import torch_tensor_class
    from tlx.runtime.streams import default_stream, torch_stream_functions

    module = native_launch.dispatch_module()
    if module is None:
        return None
    names = [p.name for p in fn.params]
    runtime_names = [p.name for p in fn.params if not p.is_constexpr]
    runtime_set = set(runtime_names)
    constexprs = {p.name for p in fn.params if p.is_constexpr}
    defaults = {p.name: p.default for p in fn.params if p.has_default}
    options = {o for o in _OPTION_DEFAULTS if o not in names}
    tensor_type = torch_tensor_class()  # as `bind_source` captured it for `dispatch`
    torch_stream = torch_stream_functions()  # as `dispatcher_source` chose it
    get_device, get_stream = torch_stream if torch_stream is not None else (None, None)
    if torch_stream is not None:
        try:  # torch's getCurrentCUDAStream(-1) is the current device's: one C call instead of two
            if get_stream(-1) == get_stream(get_device()):
                get_device = None
        except Exception:  # a torch that refuses -1: ask for the device first, as `dispatch` does
            pass

    def runtime_kind(value: Any) -> bool:
        tp = type(value)
        return tp is int or tp is float or (tp is tensor_type and value.is_cuda)

    def plan(args: Tuple[Any, ...], kwargs: Dict[str, Any], compiled: Any) -> Optional[Tuple[Any, ...]]:
        launcher = launchers.get(id(compiled))
        if launcher is None or len(args) > len(names):
            return None
        roles: List[int] = []
        values: List[Any] = []
        position: Dict[str, int] = {}
        for i, (name, value) in enumerate([*zip(names, args), *kwargs.items()]):
            if name in runtime_set:
                if not runtime_kind(value):
                    return None
                roles.append(ROLE_RUNTIME)
                values.append(None)
                position[name] = i
            elif name in constexprs or (name in options and name not in ("stream", "num_stages")):
                try:
                    hash(value)
                except TypeError:  # a list constexpr: the dispatcher's slow lookup each time
                    return None
                roles.append(ROLE_VALUE)
                values.append(value)
            elif name == "num_stages" and name in options:
                roles.append(ROLE_IGNORE)
                values.append(None)
            else:  # stream=: resolved per call, in Python
                return None
        sources = [("arg", position[n]) if n in position else ("const", defaults[n]) for n in runtime_names]
        how = launcher.native_plan(sources)
        if how is None:
            return None
        writers, offsets, config, handle, cluster, in_clusters, keepalive = how
        return (tuple(roles), tuple(values), writers, offsets, config, handle, cluster, in_clusters,
                compiled, keepalive)

    def hook(grid: Any, *args: Any, **kwargs: Any) -> Tuple[Any, Optional[Tuple[Any, ...]]]:
        compiled = dispatch(grid, *args, **kwargs)
        return compiled, plan(args, kwargs, compiled)

    def interpret(grid: Any, *args: Any, **kwargs: Any) -> Any:
        return launch(fn, grid, args, kwargs)

    if not isinstance(JITFunction.__dict__["__getitem__"], module.Subscript):
        # kernel[grid]'s cache hit in C too (same decision as JITFunction._getitem's first
        # lines; everything else is that method): saves the Python frame on every launch.
        JITFunction.__getitem__ = module.Subscript(JITFunction._getitem)  # type: ignore[method-assign]
    from .jit import _ENV, _INTERPRET_KEY, _INTERPRET_OFF

    if not isinstance(_ENV, dict):  # pragma: no cover - not CPython's os.environ
        return None
    torch_c = getattr(sys.modules.get("torch"), "_C", None)
    # torch's TorchFunctionMode switch: while one is active, C reads tensors through their getters
    # (the mode may override them) instead of DLPack's exchange API (native_dispatch.c)
    mode_enabled = getattr(torch_c, "_is_torch_function_mode_enabled", None)
    return module.Dispatcher(hook, dispatch, interpret, tensor_type, get_device, get_stream, default_stream,
                             _ENV, _INTERPRET_KEY, tuple(v for v in _INTERPRET_OFF if v is not None),
                             mode_enabled, _dtype_samples(sys.modules.get("torch")))


_DTYPE_SAMPLES: List[Any] = [None, ()]  # the torch module the samples were made with, the samples


def _dtype_samples(torch: Any) -> Tuple[Any, ...]:
    """One one-element CPU tensor of every dtype torch has (torch registers each of its scalar
    types as a `torch.dtype` attribute of the module), made once per torch module: the native
    dispatcher reads their DLPack types to know a tensor's dtype from the exchange API alone
    (native_dispatch.c, `build_dtype_table`). Dtypes torch cannot make a tensor of are left out
    (the dispatcher reads those with the getter)."""
    dtype_type = getattr(torch, "dtype", None)
    empty = getattr(torch, "empty", None)
    if not isinstance(dtype_type, type) or empty is None:
        return ()
    if _DTYPE_SAMPLES[0] is not torch:
        dtypes = list({id(v): v for v in vars(torch).values() if isinstance(v, dtype_type)}.values())
        made = []
        with warnings.catch_warnings():  # torch warns about some dtypes it makes (ComplexHalf)
            warnings.simplefilter("ignore")
            for dt in dtypes:
                try:
                    made.append(empty(1, dtype=dt))
                except Exception:  # noqa: BLE001 - a dtype torch has no tensors of (sub-byte, ...)
                    continue
        _DTYPE_SAMPLES[:] = [torch, tuple(made)]
    return _DTYPE_SAMPLES[1]


def _specialization_for(fn: JITFunction, bound: Dict[str, Any], opts: Dict[str, Any]) -> Specialization:
    key, sig, consts, div, ones = specialize(fn, bound)
    options = _options_for(fn, opts)
    full_key = (key, options)
    spec = fn.cache.get(full_key)
    if spec is None:
        from tlx.runtime.driver import current_context

        current_context(fn.__name__)  # no driver or no device: say so before compiling
        spec = _build(fn, sig, consts, div, ones, options)
        fn.cache[full_key] = spec
    return spec


def launch_slow(fn: JITFunction, grid: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
    """The general launch path (binding by inspect, full specialization) — also TLX_INTERPRET."""
    if interpret_requested():
        from .interpret import interpret

        kw, opts = _split_kwargs(fn, kwargs)
        opts.pop("stream", None)
        return interpret(fn, grid, *args, **kw, **{k: v for k, v in opts.items() if k in ("num_warps", "fence_passes")})
    kw, opts = _split_kwargs(fn, kwargs)
    bound = bind_arguments(fn, args, kw)
    spec = _specialization_for(fn, bound, opts)
    meta = dict(bound)
    g = _grid_tuple(grid, meta)
    runtime_args = [bound[n] for n in spec.runtime_names]
    spec.launcher.launch(g, runtime_args, opts.get("stream"))
    return spec.compiled


def _build(fn: JITFunction, sig: Dict[str, str], consts: Dict[str, Any], div: Dict[str, int], ones: List[str],
           options: CompileOptions) -> Specialization:
    from tlx.runtime.cache import default_cache
    from tlx.runtime.launcher import Launcher

    digest = _cache_digest(fn, sig, consts, div, ones, options)
    compiled_box: List[Any] = []

    def build():
        entry, compiled = _compile_entry(fn, sig, consts, div, ones, options)
        compiled_box.append(compiled)
        return entry

    entry = default_cache().get_or_compile(digest, build)
    compiled = compiled_box[0] if compiled_box else CachedKernel(entry)
    launcher = Launcher(compiled.abi, ptx=entry.ptx, cubin=entry.cubin, name=fn.__name__)
    runtime_names = [p.name for p in fn.params if not p.is_constexpr]
    return Specialization(compiled, launcher, runtime_names)


def launch_compiled(compiled: Any, grid: Any, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
    """`compiled[grid](*runtime_args)`: launch one already compiled specialization."""
    from tlx.runtime.launcher import Launcher

    stream = kwargs.pop("stream", None)
    if kwargs:
        raise TLXError(f"a compiled kernel takes only its runtime arguments (and stream=), not {sorted(kwargs)}")
    launcher = getattr(compiled, "_launcher", None)
    if launcher is None:
        launcher = Launcher(compiled.abi, ptx=compiled.asm.get("ptx"), cubin=compiled.asm.get("cubin"), name=compiled.name)
        compiled._launcher = launcher
    launcher.launch(_grid_tuple(grid, {}), list(args), stream)

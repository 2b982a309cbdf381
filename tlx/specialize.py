"""The one specializer: how a call's arguments become a kernel specialization.

Everything that decides what a launch compiles to lives here, and only here:

* `arg_spec(value)` — an argument's `ArgSpec`: its type as Triton spells it (``*fp16``, ``i32``,
  ``i64``, ``u64``, ``fp32``, ``i1``, ``tensordesc<fp16[64, 64]>``), its divisibility (16 when a
  device array's address or an integer's value is a multiple of 16, else 1) and whether it is
  an integer equal to 1 (which the compiler folds, as Triton does);
* `key_of(args)` — the same for a tuple of runtime arguments: CUDA torch tensors, ints and
  floats read inline, everything else through `arg_spec`. ArgSpecs are interned, so a key
  hashes and compares by identity;
* `guard_of(...)` — what of a call's arguments the native launch compares to tell, without a
  key, that a later call has the same one (the facts `key_of` reads, from its specs);
* `Specializer(fn)` — per kernel: `bind` maps a call's arguments to its parameters (defaults
  filled, launch options taken out, a clear error for a bad call) and `specialize` turns the
  bound call into a `Specialization`: the signature, constexprs, divisibility, equal-to-one
  parameters and compile options, and the key of all of it.

| argument | type | divisibility |
|---|---|---|
| device array (torch, CuPy, numba, CAI, DLPack) | ``*<dtype>`` | 16 if the address % 16 == 0 |
| `host_copy(array)` | ``*<dtype>`` | 16 |
| ``bool`` / ``numpy.bool_`` | ``i1`` | 1 |
| ``int`` | ``i32`` if it fits, ``i64``, ``u64`` (>= 2**63) | 16 if the value % 16 == 0 |
| ``float`` | ``fp32`` | 1 |
| numpy scalar | its own type | integers: 16 if % 16 == 0 |
| `TensorDescriptor` | ``tensordesc<fp16[64, 64]>`` | 1 |

With ``host_arrays=True`` (the interpreter, `JITFunction.warmup`) host numpy arrays and CPU torch
tensors stand for device arrays of their dtype, and a ``torch.dtype`` for an aligned tensor of it
(Triton's warmup convention).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from tlx.compiler.errors import TLXCompileError, TLXTypeError
from tlx.compiler.ir.core import Location
from tlx.compiler.options import CompileOptions
from tlx.runtime.arrays import kind_of, pointer_and_dtype
from tlx.runtime.dtypes import dtype_of_numpy, require_dtype
from tlx.runtime.errors import TLXRuntimeError
from tlx.runtime.tma import TensorDescriptor

from .function import KernelFunction
from .language import core

I32_MIN, I32_MAX = -(2 ** 31), 2 ** 31 - 1

# The launch options a call may pass besides the kernel's parameters, and their defaults.
# `stream` picks the stream; `num_stages` is accepted and ignored (TLX kernels pipeline by hand).
LAUNCH_OPTIONS: Dict[str, Any] = {"num_warps": 4, "num_ctas": 1, "ctas_per_cga": None, "maxnreg": None,
                                  "fence_passes": True, "num_stages": None, "stream": None}


class ArgSpec:
    """How one runtime argument specializes a kernel (see the module docstring). Interned: one
    object per (type, divisibility, equal_to_one), made by `spec`."""

    __slots__ = ("type", "divisibility", "equal_to_one")
    type: str
    divisibility: int
    equal_to_one: bool

    def __repr__(self) -> str:
        return f"ArgSpec({self.type!r}, {self.divisibility}{', == 1' if self.equal_to_one else ''})"

    def __reduce__(self) -> Any:
        return spec, (self.type, self.divisibility, self.equal_to_one)


_SPECS: Dict[Tuple[str, int, bool], ArgSpec] = {}


def spec(type_: str, divisibility: int = 1, equal_to_one: bool = False) -> ArgSpec:
    """The one `ArgSpec` of these values."""
    k = (type_, divisibility, equal_to_one)
    s = _SPECS.get(k)
    if s is None:
        s = object.__new__(ArgSpec)
        s.type, s.divisibility, s.equal_to_one = k
        _SPECS[k] = s
    return s


def int_spec(value: int) -> ArgSpec:
    """A Python integer: i32 when it fits (and == 1 marked), else i64, or u64 for 2**63..2**64-1
    (Triton's rule); divisibility 16 when it is a multiple of 16."""
    if I32_MIN <= value <= I32_MAX:
        return spec("i32", 16 if value % 16 == 0 else 1, value == 1)
    if -(2 ** 63) <= value < 2 ** 63:
        return spec("i64", 16 if value % 16 == 0 else 1)
    if 2 ** 63 <= value < 2 ** 64:
        return spec("u64", 16 if value % 16 == 0 else 1)
    raise TLXRuntimeError(f"integer argument {value} does not fit in 64 bits")


_I32 = (int_spec(3), int_spec(16))  # i32 (unaligned, aligned), for the hot path
_ONE = int_spec(1)
FP32 = spec("fp32")
I1 = spec("i1")
# torch's tensor class once a tensor of it was seen, and its CUDA tensors' specs by torch dtype
# (unaligned, aligned): the hot path reads these tensors inline
_torch_tensor: Optional[type] = None
_torch_specs: Dict[Any, Tuple[ArgSpec, ArgSpec]] = {}


def _pointer_spec(dtype: str, address: int) -> ArgSpec:
    return spec("*" + dtype, 16 if address % 16 == 0 else 1)


def arg_spec(value: Any, host_arrays: bool = False) -> ArgSpec:
    """The `ArgSpec` of one runtime argument (the module docstring's table); a clear
    `TLXRuntimeError` for what cannot be a kernel argument."""
    global _torch_tensor
    tp = type(value)
    if tp is bool or isinstance(value, np.bool_):
        return I1
    if isinstance(value, np.generic):  # (before float: numpy.float64 is a float)
        dtype = require_dtype(value.dtype, "numpy", "scalar of type")
        return spec(dtype, 16 if dtype[0] in "iu" and int(value) % 16 == 0 else 1)
    if isinstance(value, int):
        return int_spec(int(value))
    if isinstance(value, float):
        return FP32
    if isinstance(value, TensorDescriptor):
        return spec(value.signature())
    if host_arrays and all(hasattr(value, a) for a in ("base", "shape", "strides", "block_shape")):
        return spec(_host_descriptor_type(value))
    kind = kind_of(value)
    if kind == "hostcopy":
        return spec("*" + value.dtype, 16)
    if host_arrays:
        host = _host_array_spec(value, kind)
        if host is not None:
            return host
    if kind in ("torch", "cai", "dlpack"):
        address, dtype = pointer_and_dtype(value, -1)  # raises for a CPU tensor, an unknown dtype
        result = _pointer_spec(dtype, address)
        if kind == "torch" and value.is_cuda:  # from now on read inline by key_of
            if _torch_tensor is not tp:  # (another torch module: its dtypes are other objects)
                _torch_tensor = tp
                _torch_specs.clear()
            _torch_specs[value.dtype] = (_pointer_spec(dtype, 1), _pointer_spec(dtype, 0))
        return result
    if kind == "host":
        pointer_and_dtype(value, -1)  # raises: a host array, and how to pass one
    raise TLXRuntimeError(f"cannot pass {tp.__name__} as a kernel argument",
                          hint="kernel arguments are device arrays, ints, floats, bools, TensorDescriptors or constexprs")


def _host_array_spec(value: Any, kind: str) -> Optional[ArgSpec]:
    """With host arrays allowed: a numpy array, a CPU torch tensor or a torch dtype."""
    if isinstance(value, np.ndarray):
        return _pointer_spec(require_dtype(value.dtype, "numpy"), value.ctypes.data)
    if kind == "torch" and not value.is_cuda:
        return _pointer_spec(require_dtype(value.dtype, "torch"), value.data_ptr())
    if type(value).__name__ == "dtype" and type(value).__module__.startswith("torch"):
        return _pointer_spec(require_dtype(value, "torch"), 0)
    return None


def _host_descriptor_type(desc: Any) -> str:
    """``tensordesc<...>`` of a host descriptor (any object with base/shape/strides/block_shape)."""
    if desc.block_shape is None:
        raise TLXRuntimeError("the tensor descriptor has no block_shape", hint="set desc.block_shape first")
    base = desc.base
    elem = dtype_of_numpy(base.dtype) if isinstance(base, np.ndarray) else arg_spec(base, True).type[1:]
    return f"tensordesc<{elem}[{', '.join(str(int(b)) for b in desc.block_shape)}]>"


def key_of(args: Sequence[Any]) -> Tuple[ArgSpec, ...]:
    """`arg_spec` of each runtime argument, as one tuple: the launch's specialization key.
    CUDA torch tensors of a dtype seen before, int32 ints and floats are read inline (the same
    rules as `arg_spec`, which a test holds them to); everything else goes through it."""
    key: List[ArgSpec] = []
    add = key.append
    tensor_type, specs = _torch_tensor, _torch_specs
    for a in args:
        tp = type(a)
        if tp is tensor_type:
            if a.is_cuda:
                try:  # (a dtype not seen yet: arg_spec)
                    add(specs[a.dtype][not a.data_ptr() & 15])
                    continue
                except KeyError:
                    pass
        elif tp is int:
            if I32_MIN <= a <= I32_MAX:
                add(_ONE if a == 1 else _I32[not a & 15])
                continue
        elif tp is float:
            add(FP32)
            continue
        add(arg_spec(a))
    return tuple(key)


# Constexpr values a guard compares by exact type and ==: equal values of one of these types
# are one key (`hashable` keeps them, or names a dtype). Others (lists, tl.constexpr, ...) are
# looked up by key.
GUARDED_CONSTEXPRS = (int, float, bool, str, type(None), core.dtype)
Guard = Tuple[bytes, Tuple[Any, ...], Tuple[Any, ...]]


def guard_of(args: Sequence[Any], kwargs: Dict[str, Any], specs: Sequence[ArgSpec]) -> Optional[Guard]:
    """The guard of a call (runtime/native_launch.c, `guard_holds`): what the native launch
    compares, at C speed, to tell that a later call has this call's key without computing it.
    `args`: the call's positional arguments, the first ``len(specs)`` of them runtime
    arguments whose `ArgSpec`s are `specs`, the rest constexprs; `kwargs`: its constexprs and
    launch options. Per argument it records the facts `key_of` derives the spec from: a CUDA
    torch tensor's exact type, dtype object and alignment; an exact int's i32 class (== 1,
    multiple of 16 or not); an exact float; a constexpr's exact type and value. None when an
    argument is of another kind (the call key is then the only way to find the call)."""
    kinds: List[str] = []
    objects: List[Any] = []
    for i, a in enumerate(args):
        tp, value = type(a), a
        if i >= len(specs):
            if tp not in GUARDED_CONSTEXPRS:
                return None
            kind = "c"
        elif tp is int and specs[i].type == "i32":
            kind, value = ("1" if specs[i].equal_to_one else "I" if specs[i].divisibility == 16 else "i"), None
        elif tp is float:
            kind, value = "f", None
        elif specs[i].type[0] == "*" and kind_of(a) == "torch" and a.is_cuda:
            kind, value = ("P" if specs[i].divisibility == 16 else "p"), a.dtype
        else:
            return None
        kinds.append(kind)
        objects += (tp, value)
    keywords: List[Any] = []
    for name, v in kwargs.items():
        if type(v) not in GUARDED_CONSTEXPRS:
            return None
        keywords += (name, type(v), v)
    return "".join(kinds).encode(), tuple(objects), tuple(keywords)


def hashable(v: Any) -> Any:
    """A constexpr value as a key: lists become tuples, dtypes their names."""
    if isinstance(v, (list, tuple)):
        return tuple(hashable(x) for x in v)
    if isinstance(v, core.dtype):
        return ("dtype", v.name)
    return v


class Specialization(NamedTuple):
    """What one call compiles to."""

    key: Tuple[Any, ...]  # hashable: the ArgSpecs, the constexpr values (with their types), the options
    signature: Dict[str, str]  # runtime parameter -> type spelling
    constexprs: Dict[str, Any]
    divisibility: Dict[str, int]
    equal_to_one: List[str]
    options: CompileOptions


class Specializer:
    """Binds the calls of one kernel and specializes them (see the module docstring).

    ``n_lead`` is the number of leading runtime parameters, ``n_fast`` the number of leading
    parameters before the first runtime parameter that follows a constexpr: a call with at
    most ``n_fast`` positional arguments, whose keywords name no runtime parameter, has a
    call key that `tlx.launch` can look up without binding."""

    def __init__(self, fn: KernelFunction, launch_defaults: Optional[Dict[str, Any]] = None):
        self.fn = fn
        self.names = [p.name for p in fn.params]
        self.runtime_names = [p.name for p in fn.params if not p.is_constexpr]
        self.runtime_set: FrozenSet[str] = frozenset(self.runtime_names)
        self.defaults = {p.name: p.default for p in fn.params if p.has_default}
        self.options = {k: v for k, v in LAUNCH_OPTIONS.items() if k not in self.names}
        self.options.update({k: v for k, v in (launch_defaults or {}).items() if k in self.options})
        flags = [p.is_constexpr for p in fn.params] + [False]
        self.n_lead = flags.index(True) if True in flags else len(fn.params)
        after = flags[self.n_lead:].index(False)  # constexprs right after the leading run
        self.n_fast = self.n_lead + after

    def bind(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """The value of every parameter (defaults filled) and the launch options of a call;
        a TLXCompileError naming the kernel for a missing, extra or duplicate argument."""
        options = dict(self.options)
        values = dict(zip(self.names, args))
        problem = None
        if len(args) > len(self.names):
            problem = "too many positional arguments"
        for k, v in kwargs.items():
            if k in options and k not in self.names:
                options[k] = v
            elif k not in self.names:
                problem = problem or f"got an unexpected keyword argument '{k}'"
            elif k in values:
                problem = problem or f"multiple values for argument '{k}'"
            else:
                values[k] = v
        for name in self.names:
            if name not in values:
                if name not in self.defaults:
                    problem = problem or f"missing a required argument: '{name}'"
                    break
                values[name] = self.defaults[name]
        if problem:
            raise binding_error(self.fn, args, kwargs, problem)
        return {n: values[n] for n in self.names}, options

    def meta(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """The parameters of a call by name (what a grid callable receives)."""
        return self.bind(args, kwargs)[0]

    def specialize(self, values: Dict[str, Any], options: Dict[str, Any], host_arrays: bool = False) -> Specialization:
        """The specialization of a bound call (`bind`)."""
        sig: Dict[str, str] = {}
        consts: Dict[str, Any] = {}
        div: Dict[str, int] = {}
        ones: List[str] = []
        specs: List[Any] = []
        for p in self.fn.params:
            v = values[p.name]
            if p.is_constexpr:
                v = core.unwrap(v)
                consts[p.name] = v
                specs.append((p.name, type(v), hashable(v)))
                continue
            if v is None:
                raise TLXCompileError(f"kernel {self.fn.__name__}: argument '{p.name}' is None",
                                      hint="pass a value, or mark the parameter `: tl.constexpr`")
            s = arg_spec(v, host_arrays)
            sig[p.name], div[p.name] = s.type, s.divisibility
            if s.equal_to_one and type(v) is int:
                ones.append(p.name)
            specs.append(s)
        opts = compile_options(options)
        return Specialization((tuple(specs), opts), sig, consts, div, ones, opts)


class ArgumentBindingError(TLXTypeError):
    """A launch whose arguments do not bind to the kernel's parameters (one left out, an unknown
    keyword, too many positionals, a parameter given twice). Raised at the caller's line; the
    message shows the kernel's signature and what each parameter got, so a positional argument
    that slid into the wrong parameter is visible. Also a `TypeError`, as Python raises."""

    def __init__(self, message: str, loc: Optional[Location], hint: str, binding: Sequence[str]):
        self.binding = list(binding)  # the signature line, then one line per parameter
        super().__init__(message, loc, hint)

    def _format(self) -> str:
        text = super()._format()
        head, sep, hint = text.rpartition("\nhint: ")
        return "\n".join([head] + self.binding) + sep + hint


# the directories of tlx's own code: frames there are not the user's call
_PACKAGE_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                      for m in (sys.modules["tlx"], sys.modules["tlx.compiler"], sys.modules["tlx.runtime"]))


def caller_location() -> Optional[Location]:
    """The innermost frame outside tlx's packages: the user's line that launched the kernel
    (with the call's column where Python records it)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIRS):
        frame = frame.f_back
    if frame is None:
        return None
    col = 0
    try:  # (3.11+: the instruction's column range)
        position = list(frame.f_code.co_positions())[frame.f_lasti // 2]
        if position[0] == frame.f_lineno and position[2] is not None:
            col = position[2]
    except (AttributeError, IndexError):
        pass
    return Location(frame.f_code.co_filename, frame.f_lineno, col)


def describe_value(value: Any) -> str:
    """A short description of an argument for an error message: an array's kind, dtype and
    shape, a scalar's repr, otherwise its type."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and not isinstance(value, np.generic):
        device = getattr(value, "device", None)
        where = f" on {device}" if device is not None and str(device) != "cpu" else ""
        return f"{type(value).__name__} {str(dtype).replace('torch.', '')}{list(shape)}{where}"
    if value is None or isinstance(value, (bool, int, float, str, np.generic, core.dtype)):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."
    return type(value).__name__


def binding_error(fn: KernelFunction, args: Sequence[Any], kwargs: Dict[str, Any],
                  problem: str) -> ArgumentBindingError:
    """The error for a call whose arguments do not bind (`Specializer.bind` found `problem`):
    the kernel's signature, then each parameter with the argument it got — positional (#i),
    keyword, default — or ``<missing>``, then what the call gave that no parameter took."""
    names = [p.name for p in fn.params]
    rows = []
    for i, p in enumerate(fn.params):
        label = p.name + (": tl.constexpr" if p.is_constexpr else "")
        if i < len(args):
            got = f"{describe_value(args[i])}  (positional #{i})"
            if p.name in kwargs:
                got += f" and {describe_value(kwargs[p.name])}  (keyword)"
        elif p.name in kwargs:
            got = f"{describe_value(kwargs[p.name])}  (keyword)"
        elif p.has_default:
            got = f"{describe_value(p.default)}  (default)"
        else:
            got = "<missing>"
        rows.append((label, got))
    width = max((len(label) for label, _ in rows), default=0)
    lines = [f"  {fn.__name__}({', '.join(label for label, _ in rows)}) was bound as:"]
    lines += [f"    {label.ljust(width)} = {got}" for label, got in rows]
    for i in range(len(names), len(args)):
        lines.append(f"    extra positional #{i} = {describe_value(args[i])}")
    for k, v in kwargs.items():
        if k not in names and k not in LAUNCH_OPTIONS:
            lines.append(f"    unknown keyword {k} = {describe_value(v)}")
    hint = "pass one argument per parameter, in this order, or by name"
    if "missing" in problem and len(args) > 0:
        hint += ("; when an earlier argument was left out, the later positional ones moved up by one: "
                 "check that each parameter above got what you meant")
    return ArgumentBindingError(f"bad launch of kernel {fn.__name__}: {problem}", caller_location(), hint, lines)


def compile_options(options: Dict[str, Any]) -> CompileOptions:
    """The CompileOptions a call's launch options ask for (`TLX_PRINT_IR_AFTER_ALL` read here)."""
    cluster = options.get("ctas_per_cga")
    return CompileOptions(num_warps=int(options.get("num_warps") or 4), num_ctas=int(options.get("num_ctas") or 1),
                          cluster=tuple(cluster) if cluster else (1, 1, 1),
                          fence_passes=bool(options.get("fence_passes", True)), maxnreg=options.get("maxnreg"),
                          print_ir_after_all=os.environ.get("TLX_PRINT_IR_AFTER_ALL", "") not in ("", "0"))

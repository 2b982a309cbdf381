"""The tracer: walks a `@tlx.jit` kernel's Python AST and builds IR.

Rules (those of Triton's code generator, which TLX kernels rely on):

* Compile-time values (constexpr parameters, literals in expressions, `NAME: tl.constexpr = ...`,
  dtypes, tuples) are evaluated while tracing; a plain assignment of a number (`p = 0`) makes a
  runtime scalar.
* `for ... in range(...)` / `tl.range(...)` becomes one `scf.for` (never unrolled);
  `tl.static_range` unrolls. A name live before a loop and reassigned in its body is a carried
  value (its type must not change); names first bound inside a loop or branch do not outlive it.
* An `if` on a runtime scalar becomes `scf.if` whose results are the names either branch
  rebinds; an `if` on a compile-time value traces only the taken branch.
* `while cond:` becomes `scf.while`. `return` may end the kernel early outside loops.
* `with tlx.async_tasks():` holding `with tlx.async_task(...):` blocks becomes
  `tlx.warp_specialize`; worker partitions receive outer values as explicit captures.
* Nested `@tlx.jit` functions are inlined (they may return tuples).

Every error names the kernel's file:line (a `TLXCompileError`).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import operator as pyop
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from tlx.compiler.errors import IRVerifyError, TLXCompileError
from tlx.compiler.ir import Block, BlockArgument, Builder, Location, Module, Operation, Value, is_pure, verify_module
from tlx.compiler.ir import types as T

from . import language as tl
from .tasks import AsyncTask, AsyncTasks
from .function import KernelFunction
from .language import core, semantic
from .language.core import Handle, TraceContext, tensor, unwrap, wrap_value

_MAX_INLINE_DEPTH = 64


class _Return(Exception):
    """Unwinds the statement walk after a `return` (carries the returned value)."""


def _assigned_names(stmts: Sequence[ast.stmt]) -> Set[str]:
    """Names bound anywhere in `stmts` (assignment targets, loop targets, with-as names)."""
    out: Set[str] = set()

    class V(ast.NodeVisitor):
        def visit_Name(self, node: ast.Name) -> None:
            if isinstance(node.ctx, ast.Store):
                out.add(node.id)

        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # a nested def is an error elsewhere
            pass

        visit_Lambda = visit_FunctionDef  # type: ignore[assignment]

    for s in stmts:
        V().visit(s)
    return out


def _contains_return(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Return) for n in ast.walk(node))


def _flatten(v: Any) -> Optional[List[Value]]:
    """The IR values a (possibly tuple) runtime value consists of; None for compile-time values."""
    if isinstance(v, Handle):
        return [v.handle]
    if isinstance(v, (tuple, list)) and v and all(isinstance(x, Handle) or isinstance(x, (tuple, list)) for x in v):
        out: List[Value] = []
        for x in v:
            f = _flatten(x)
            if f is None:
                return None
            out.extend(f)
        return out
    return None


def _unflatten(template: Any, values: List[Value], pos: int = 0) -> Tuple[Any, int]:
    if isinstance(template, Handle):
        return wrap_value(values[pos], template), pos + 1
    items = []
    for x in template:
        y, pos = _unflatten(x, values, pos)
        items.append(y)
    return (tuple(items) if isinstance(template, tuple) else items), pos


def _flatten_named(values: Sequence[Any], names: Sequence[str]) -> Tuple[List[Value], List[str]]:
    """The IR values the runtime `values` consist of, in order, and for each the name of its value."""
    flat: List[Value] = []
    flat_names: List[str] = []
    for v, n in zip(values, names):
        parts = _flatten(v) or []
        flat.extend(parts)
        flat_names.extend([n] * len(parts))
    return flat, flat_names


def _types(v: Any) -> Optional[List[T.Type]]:
    """The IR types of a runtime value's parts (None for a compile-time value)."""
    f = _flatten(v)
    return None if f is None else [x.type for x in f]


def _is_runtime(v: Any) -> bool:
    return _flatten(v) is not None


def _describe(v: Any) -> str:
    if isinstance(v, tensor):
        return f"{v.dtype} tensor of shape {list(v.shape)}" if v.shape else f"{v.dtype} scalar"
    if isinstance(v, Handle):
        return str(v.handle.type)
    return f"compile-time {type(v).__name__} {v!r}"


@dataclass(eq=False)
class _Partition:
    """Tracing state of one worker partition: its block and the captures it remapped."""

    ws: "_WarpSpecialize"
    block: Block
    map: Dict[int, Value] = field(default_factory=dict)
    remat: int = 0  # ops recomputed at the top of the partition (after its constants)


@dataclass(eq=False)
class _WarpSpecialize:
    """Collects the explicit captures of one `tlx.warp_specialize` while its partitions trace."""

    captures: List[Value] = field(default_factory=list)
    blocks: List[Block] = field(default_factory=list)
    index: Dict[int, int] = field(default_factory=dict)  # id(captured value) -> its argument position

    def capture(self, v: Value, part: _Partition, tracer: "Tracer") -> Value:
        if isinstance(v.type, T.TensorType):
            local = self.rematerialize(v, part, tracer)
            if local is None:
                raise TLXCompileError(
                    f"a worker partition uses the block tensor '{v.name or '?'}' ({v.type}) computed outside it "
                    "from memory or from more than a few operations",
                    hint="compute block tensors inside the async_task (program ids, offsets and aranges are cheap to recompute)")
            return local
        k = id(v)
        if k not in self.index:
            self.index[k] = len(self.captures)
            self.captures.append(v)
            for b in self.blocks:
                b.add_arg(v.type, v.name)
        return part.block.args[self.index[k]]

    def rematerialize(self, v: Value, part: _Partition, tracer: "Tracer", budget: Optional[List[int]] = None) -> Optional[Value]:
        """A block tensor made outside the partition by pure ops from scalars and constants (an
        arange, a splat, index arithmetic) is recomputed at the top of the partition, as Triton
        does for warp-specialize captures: registers are per warp, so a partition cannot read
        another's tensors, and these few ops are cheaper than a trip through shared memory.
        None when `v` depends on memory or on more than 16 ops."""
        k = id(v)
        if k in part.map:
            return part.map[k]
        op = v.defining_op
        budget = budget if budget is not None else [16]
        if op is None or op.regions or not is_pure(op) or budget[0] <= 0:
            return None
        budget[0] -= 1
        operands: List[Value] = []
        for x in op.operands:
            if isinstance(x.type, T.TensorType):
                y = self.rematerialize(x, part, tracer, budget)
                if y is None:
                    return None
            else:
                y = tracer._remap_value(x)
            operands.append(y)
        spec: List[Any] = []
        pos = 0
        for (_, kind), n in zip(op.opdef.groups, op.segments):
            vals = operands[pos:pos + n]
            pos += n
            spec.append(vals if kind not in ("one", "opt") else (vals[0] if vals else None))
        clone = Operation(op.name, spec, [r.type for r in op.results], dict(op.attrs), 0, op.loc,
                          [r.name for r in op.results])
        # after the partition's constants and earlier recomputed ops: before any use in it
        ctx = tracer.ctx
        at = ctx.const_count.get(id(part.block), 0) + part.remat
        part.block.insert(at, clone)
        part.remat += 1
        if tracer.builder.block is part.block and tracer.builder.index is not None:
            tracer.builder.index += 1
        for r, c in zip(op.results, clone.results):
            part.map[id(r)] = c
        return part.map[k]


class Tracer:
    """Traces one function body (the kernel, or an inlined helper) into the current builder."""

    def __init__(self, jitfn: Any, ctx: core.TraceContext, scope: Dict[str, Any], depth: int = 0,
                 partition: Optional[_Partition] = None):
        self.jitfn = jitfn
        self.ctx = ctx
        self.builder = ctx.builder
        self.scope = scope
        self.depth = depth
        self.loop_depth = 0
        self.in_task = False  # tracing an async_task's body (of this function, not of a helper it calls)
        self.partition = partition
        self.ret_value: Any = None
        self.def_locs: Dict[str, Location] = {}
        self.assign_locs: Dict[str, Location] = {}
        # per loop body being traced: the first assignment that gave a name a value of another type
        self.retyped: Dict[str, Location] = {}

    # ---- locations and errors ------------------------------------------------------------------
    def loc_of(self, node: Optional[ast.AST]) -> Location:
        fn = self.jitfn
        loc = fn.loc_cache.get(id(node))
        if loc is None:
            if node is None or not hasattr(node, "lineno"):
                loc = Location(fn.file, fn.line_offset + 1, 0)
            else:
                loc = Location(fn.file, node.lineno + fn.line_offset, getattr(node, "col_offset", 0))
            fn.loc_cache[id(node)] = loc
        return loc

    def error(self, node: Optional[ast.AST], msg: str, hint: Optional[str] = None) -> TLXCompileError:
        return TLXCompileError(msg, self.loc_of(node), hint)

    def visit(self, node: ast.AST) -> Any:
        """Visit one node with its location set; errors without a location get this node's."""
        saved = self.builder.loc
        loc = self.loc_of(node)
        self.builder.loc = loc
        try:
            meth = getattr(self, "visit_" + type(node).__name__, None)
            if meth is None:
                raise self.error(node, f"Python construct '{type(node).__name__}' is not supported in a kernel",
                                 hint=_UNSUPPORTED_HINTS.get(type(node).__name__))
            return meth(node)
        except _Return:
            raise
        except TLXCompileError as e:
            if e.loc is None:  # raised by a builtin: it belongs to the innermost node being traced
                # (keeping its class: a TLXValueError is also the ValueError the real TLX raises)
                raise type(e)(e.message, loc, e.hint) from (e.__cause__ or e)
            raise
        except Exception as e:  # a builtin rejected its arguments: report it at this line
            msg = str(e) or type(e).__name__
            if isinstance(e, TypeError):
                msg = f"bad call: {msg}"
            raise TLXCompileError(msg, loc) from e
        finally:
            self.builder.loc = saved

    @contextlib.contextmanager
    def _inserting_into(self, block: Block):
        """Emit at the end of `block` for the duration (the insertion point is restored after)."""
        saved = self.builder.block, self.builder.index
        self.builder.set_insertion_point_to_end(block)
        try:
            yield
        finally:
            self.builder.block, self.builder.index = saved

    # ---- statements ------------------------------------------------------------------------------
    def run_body(self, stmts: Sequence[ast.stmt]) -> None:
        """Trace a function body; a `return` ends it."""
        try:
            self.visit_stmts(stmts)
        except _Return:
            pass

    def visit_stmts(self, stmts: Sequence[ast.stmt]) -> None:
        for i, s in enumerate(stmts):
            if isinstance(s, ast.If) and _contains_return(s):
                cond = self._cond_value(s)
                if isinstance(cond, tensor):
                    self._if_with_return(s, cond, list(stmts[i + 1:]))
                    return
            try:
                self.visit(s)
            except TLXCompileError as e:  # visit() gave it this line; show it without the chain it was raised in
                raise e from e.__cause__

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        ann = self.visit(node.annotation)
        if ann is core.constexpr or (isinstance(ann, str) and ann.endswith("constexpr")):
            if not isinstance(node.target, ast.Name):
                raise self.error(node, "a constexpr must be assigned to a plain name")
            value = self.visit(node.value)
            if _is_runtime(value):
                raise self.error(node, f"'{node.target.id}: tl.constexpr' needs a compile-time value, got {_describe(value)}",
                                 hint="drop the tl.constexpr annotation to keep a runtime value")
            name = node.target.id
            if name in self.scope and self.loop_depth:
                raise self.error(node, f"constexpr '{name}' cannot be reassigned")
            self.scope[name] = unwrap(value)
            return
        self.assign(node.target, self.visit(node.value), node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "augmented assignment is only supported on plain names")
        cur = self.lookup(node.target.id, node.target)
        rhs = self.visit(node.value)
        value = self.binop(node.op, cur, rhs, node)
        self.assign(node.target, value, node)

    def assign(self, target: ast.AST, value: Any, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            value = unwrap(value)
            if isinstance(value, (bool, int, float)) and not isinstance(value, Handle):
                value = semantic.to_tensor(value)  # as in Triton: a plain assignment materializes a runtime scalar
            if isinstance(value, Handle) and value.handle.name is None:
                value.handle.name = target.id  # constants are shared and keep their c<value> names
            name = target.id
            loc = self.loc_of(node)
            if name not in self.retyped and name in self.scope and _types(self.scope[name]) != _types(value):
                self.retyped[name] = loc
            self.scope[name] = value
            self.assign_locs[name] = loc
            self.def_locs.setdefault(name, loc)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            value = unwrap(value)
            if isinstance(value, Handle) or not isinstance(value, (tuple, list)):
                raise self.error(node, f"cannot unpack {_describe(value)} into {len(target.elts)} names")
            if len(value) != len(target.elts):
                raise self.error(node, f"cannot unpack {len(value)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v, node)
            return
        if isinstance(target, ast.Subscript):
            raise self.error(node, "assignment to an element (x[...] = ...) is not supported",
                             hint="use tl.where to build a new tensor, or tlx.local_store for a shared buffer")
        if isinstance(target, ast.Attribute):
            raise self.error(node, "assignment to an attribute is not supported in a kernel")
        if isinstance(target, ast.Starred):
            raise self.error(node, "starred assignment is not supported in a kernel")
        raise self.error(node, f"cannot assign to {type(target).__name__}")

    def _check_return_allowed(self, node: ast.AST) -> None:
        """A `return` here must leave the traced function: not from a loop body nor from an
        async_task's region (both are regions of their own)."""
        if self.loop_depth:
            raise self.error(node, "`return` inside a loop is not supported",
                             hint="compute a flag and guard the rest of the loop body with `if`")
        if self.in_task:  # a task's body is a region of its own: a return cannot leave the kernel from it
            raise self.error(node, "`return` inside an async_task is not supported",
                             hint="guard the rest of the task with `if`/`else`, or return from a helper "
                                  "function the task calls")

    def visit_Return(self, node: ast.Return) -> None:
        self._check_return_allowed(node)
        value = self.visit(node.value) if node.value is not None else None
        if self.depth == 0 and value is not None:  # the kernel itself
            raise self.error(node, "a kernel cannot return a value", hint="store results through a pointer argument")
        self.ret_value = value
        raise _Return()

    def visit_Assert(self, node: ast.Assert) -> None:
        cond = self.visit(node.test)
        if not _is_runtime(cond) and not unwrap(cond):
            msg = self.visit(node.msg) if node.msg is not None else ""
            raise self.error(node, f"assertion failed{': ' + str(unwrap(msg)) if msg else ''}")

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            if isinstance(t, ast.Name):
                self.scope.pop(t.id, None)
            else:
                raise self.error(node, "only `del name` is supported")

    def visit_Break(self, node: ast.Break) -> None:
        raise self.error(node, "`break` is not supported in kernels",
                         hint="fold the exit condition into a `while` condition, or mask the remaining iterations")

    def visit_Continue(self, node: ast.Continue) -> None:
        raise self.error(node, "`continue` is not supported in kernels", hint="guard the rest of the body with `if`")

    # ---- if --------------------------------------------------------------------------------------
    def _cond_value(self, node: ast.If) -> Any:
        cond = self.visit(node.test)
        return self._as_condition(cond, node)

    def _as_condition(self, cond: Any, node: ast.AST) -> Any:
        cond = unwrap(cond)
        if isinstance(cond, tensor):
            if cond.shape:
                if cond.numel != 1:
                    raise self.error(node, f"the condition is a block of shape {list(cond.shape)}; its truth is ambiguous",
                                     hint="reduce it to a scalar (e.g. tl.max(x, 0) > 0) or use tl.where")
                while cond.shape:  # a one-element block: its only element
                    cond = semantic.reduce(cond, len(cond.shape) - 1, "max")
            if cond.dtype.is_ptr():
                raise self.error(node, "a pointer cannot be a condition")
            return semantic.cast(cond, core.int1)
        if isinstance(cond, Handle):
            raise self.error(node, f"a {_describe(cond)} cannot be a condition")
        return cond

    def visit_If(self, node: ast.If) -> None:
        cond = self._cond_value(node)
        if not isinstance(cond, tensor):
            self.visit_stmts(node.body if cond else node.orelse)
            return
        liveins = dict(self.scope)
        then_blk, then_scope = self._trace_branch(node.body, liveins)
        else_blk, else_scope = self._trace_branch(node.orelse, liveins)
        names: List[str] = []
        for name, live in liveins.items():
            a, b = then_scope.get(name, live), else_scope.get(name, live)
            if a is live and b is live:
                continue
            if not (_is_runtime(live) or _is_runtime(a) or _is_runtime(b)):
                if a is not b:
                    raise self.error(node, f"'{name}' is a compile-time value that a runtime `if` changes",
                                     hint="make it a runtime value (assign a number without tl.constexpr)")
                continue
            names.append(name)
        for name in then_scope:
            if name not in liveins and name in else_scope and _is_runtime(then_scope[name]) and _is_runtime(else_scope[name]):
                names.append(name)
        before = dict(liveins)
        self._localize(liveins, [n for n in names if n in liveins])

        def branch_value(scope: Dict[str, Any], n: str) -> Any:
            v = scope.get(n, before.get(n))
            return liveins[n] if n in before and v is before[n] else v  # unchanged: the localized value

        then_vals = [branch_value(then_scope, n) for n in names]
        else_vals = [branch_value(else_scope, n) for n in names]
        self._check_same_types(node, names, then_vals, else_vals, "then", "else")
        result = self._build_if(cond, then_blk, else_blk, then_vals, else_vals, names)
        self.scope = dict(liveins)
        self.scope.update(zip(names, result))

    @contextlib.contextmanager
    def _branch_block(self) -> Iterator[Block]:
        """Trace into a new branch block of an scf.if that does not exist yet; the block is
        registered under the current block, so `_defined_inside` sees where it will be (a worker
        partition's branch computes its own values, not captures)."""
        blk = Block()
        self.ctx.branch_hosts[id(blk)] = self.builder.block
        try:
            with self._inserting_into(blk):
                yield blk
        finally:
            del self.ctx.branch_hosts[id(blk)]

    def _trace_branch(self, stmts: Sequence[ast.stmt], liveins: Dict[str, Any]) -> Tuple[Block, Dict[str, Any]]:
        self.scope = dict(liveins)
        with self._branch_block() as blk:
            self.visit_stmts(stmts)
        return blk, self.scope

    def _check_same_types(self, node: ast.AST, names: Sequence[str], a_vals: Sequence[Any], b_vals: Sequence[Any],
                          a_what: str, b_what: str) -> None:
        for n, a, b in zip(names, a_vals, b_vals):
            ta = _types(a)
            if ta is None or ta != _types(b):
                raise self.error(node, f"'{n}' has different types in the {a_what} and {b_what} branches: "
                                       f"{_describe(a)} vs {_describe(b)}",
                                 hint="give it the same dtype and shape on both paths (use .to(...) or tl.broadcast_to)")

    def _build_if(self, cond: tensor, then_blk: Block, else_blk: Block, then_vals: List[Any], else_vals: List[Any],
                  names: Sequence[str]) -> List[Any]:
        tflat, rnames = _flatten_named(then_vals, names)
        eflat, _ = _flatten_named(else_vals, names)
        for blk, vals in ((then_blk, tflat), (else_blk, eflat)):
            blk.append(Operation("scf.yield", [vals], [], None, 0, self.builder.loc))
        ifop = self.builder.create("scf.if", [cond.handle], [v.type for v in tflat], None, 2, result_names=rnames)
        for r, blk in zip(ifop.regions, (then_blk, else_blk)):
            r.block = blk
            blk.parent = r
        return _unflatten(list(then_vals), list(ifop.results))[0]

    def _if_with_return(self, node: ast.If, cond: tensor, rest: List[ast.stmt]) -> None:
        """`if c: ...return...` outside loops: the statements after the `if` continue on the paths
        that did not return (each branch traces `branch + rest`)."""
        self._check_return_allowed(node)
        liveins = dict(self.scope)
        results = []
        blocks = []
        for stmts in (list(node.body) + rest, list(node.orelse) + rest):
            self.ret_value = None
            self.scope = dict(liveins)
            with self._branch_block() as blk:
                self.run_body(stmts)
            blocks.append(blk)
            results.append(self.ret_value)
        a, b = results
        if (a is None) != (b is None):
            raise self.error(node, "this function returns a value on one path and nothing on another")
        if a is None:
            self._build_if(cond, blocks[0], blocks[1], [], [], [])
            value = None
        else:
            if not _is_runtime(a) or not _is_runtime(b):
                a, b = self._runtime_pair(a, b, node)
            self._check_same_types(node, ["the return value"], [a], [b], "then", "else")
            (value,) = self._build_if(cond, blocks[0], blocks[1], [a], [b], ["ret"])
        self.ret_value = value
        raise _Return()

    def _runtime_pair(self, a: Any, b: Any, node: ast.AST) -> Tuple[Any, Any]:
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
            pairs = [self._runtime_pair(x, y, node) for x, y in zip(a, b)]
            return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
        raise self.error(node, "both paths must return runtime values of the same type")

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self._as_condition(self.visit(node.test), node)
        if not isinstance(cond, tensor):
            return self.visit(node.body if cond else node.orelse)
        vals, blocks = [], []
        for expr in (node.body, node.orelse):
            blk = Block()
            with self._inserting_into(blk):
                vals.append(unwrap(self.visit(expr)))
            blocks.append(blk)
        a, b = vals
        for i, (x, y) in enumerate(((a, b), (b, a))):
            if isinstance(x, (bool, int, float)) and isinstance(y, tensor):  # a number takes the tensor's type
                with self._inserting_into(blocks[i]):
                    vals[i] = semantic.full(y.shape, x, y.dtype)
        a, b = vals
        self._check_same_types(node, ["the conditional expression"], [a], [b], "true", "false")
        (r,) = self._build_if(cond, blocks[0], blocks[1], [a], [b], [""])
        return r

    # ---- loops -----------------------------------------------------------------------------------
    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(node, "`for ... else` is not supported in kernels")
        if not isinstance(node.iter, ast.Call):
            raise self.error(node, "kernels loop only over range(...), tl.range(...) or tl.static_range(...)")
        it_fn = self.visit(node.iter.func)
        args = [self.visit(a) for a in node.iter.args]
        kwargs = {k.arg: self.visit(k.value) for k in node.iter.keywords}
        if it_fn is tl.static_range:
            try:
                sr = tl.static_range(*args, **kwargs)
            except TypeError as e:
                raise self.error(node, f"bad static_range call: {e}")
            if not isinstance(node.target, ast.Name):
                raise self.error(node, "the loop variable must be a plain name")
            for i in builtins.range(sr.start, sr.end, sr.step):
                self.scope[node.target.id] = i
                self.visit_stmts(node.body)
            return
        attrs: Dict[str, Any] = {}
        if it_fn is tl.range:
            r = tl.range(*args, **kwargs)
            lb, ub, step = r.start, r.end, r.step
            hints = {"num_stages": r.num_stages, "loop_unroll_factor": r.loop_unroll_factor}
            attrs = {k: int(v) for k, v in hints.items() if v is not None}
        elif it_fn is builtins.range:
            if kwargs or not 1 <= len(args) <= 3:
                raise self.error(node, "range() takes 1 to 3 positional arguments")
            lb, ub, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        else:
            raise self.error(node, f"kernels loop only over range(...), tl.range(...) or tl.static_range(...), not {it_fn!r}")
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "the loop variable must be a plain name")
        lb, ub, step = unwrap(lb), unwrap(ub), unwrap(step)
        negative = isinstance(step, int) and not isinstance(step, bool) and step < 0
        if isinstance(step, int) and step == 0:
            raise self.error(node, "range() step must not be zero")
        if negative:
            lb, ub, step = ub, lb, -step
        vals = [semantic.to_tensor(v) for v in (lb, ub, step)]
        for v, what in zip(vals, ("lower bound", "upper bound", "step")):
            if v.shape or not (v.dtype.is_int() or v.dtype.is_bool()):
                raise self.error(node, f"the loop {what} must be an integer scalar, got {_describe(v)}")
        ivt = semantic.integer_promote(semantic.integer_promote(vals[0].dtype, vals[1].dtype), vals[2].dtype)
        if ivt.is_bool():
            ivt = core.int32
        lbv, ubv, stv = (semantic.cast(v, ivt) for v in vals)
        target = node.target.id
        liveins = dict(self.scope)
        carried = self._carried_names(node, liveins, ignore={target})
        self._localize(liveins, carried)
        inits, rnames = _flatten_named([liveins[n] for n in carried], carried)
        forop = self.builder.create("scf.for", [lbv.handle, ubv.handle, stv.handle, inits], [v.type for v in inits],
                                    attrs, 1, result_names=rnames)
        body = forop.regions[0].block
        iv = body.add_arg(ivt.to_ir(), target)
        args_ = [body.add_arg(v.type, n) for v, n in zip(inits, rnames)]
        with self._inserting_into(body):
            ivv = tensor(iv, ivt, ())
            if negative:  # iterate lb..ub upward, expose ub - iv + lb (as Triton does)
                ivv = semantic.add(semantic.sub(ubv, ivv), lbv)
            self._bind_carried(liveins, carried, args_)
            self.scope[target] = ivv
            self._trace_loop_body(node, carried, liveins, args_)
        self._bind_carried(liveins, carried, list(forop.results))

    def _carried_names(self, node: Any, liveins: Dict[str, Any], ignore: Set[str]) -> List[str]:
        """The names loop `node` carries: runtime values bound before it that its body rebinds."""
        names = []
        assigned = self.jitfn.assigned_cache.get(id(node))
        if assigned is None:
            assigned = self.jitfn.assigned_cache[id(node)] = _assigned_names(node.body)
        for n in sorted(assigned - ignore):
            if n not in liveins:
                continue
            live = liveins[n]
            if _is_runtime(live):
                names.append(n)
            elif isinstance(unwrap(live), (bool, int, float)) or isinstance(live, core.dtype):
                raise self.error(node, f"'{n}' is a compile-time value (constexpr) that the loop body reassigns",
                                 hint=f"assign a runtime value to '{n}' before the loop (without tl.constexpr), "
                                      "or use another name inside the loop")
        return names

    def _bind_carried(self, liveins: Dict[str, Any], carried: Sequence[str], vals: List[Value]) -> None:
        """The scope is `liveins` with the carried names bound to their parts of `vals` (a loop
        body's block arguments, or the loop's results)."""
        self.scope = dict(liveins)
        self.scope.update(zip(carried, _unflatten([liveins[n] for n in carried], vals)[0]))

    def _trace_loop_body(self, node: Any, carried: Sequence[str], liveins: Dict[str, Any], args_: List[Value]) -> None:
        """Trace a loop's body and yield its carried values (`args_`: the body's carried arguments)."""
        self.loop_depth += 1
        saved_retyped, self.retyped = self.retyped, {}
        try:
            self.visit_stmts(node.body)
            self._yield_carried(node, carried, liveins, args_)
        finally:
            self.loop_depth -= 1
            self.retyped = saved_retyped

    def _yield_carried(self, node: ast.AST, carried: Sequence[str], liveins: Dict[str, Any], args_: List[Value]) -> None:
        vals: List[Value] = []
        for n in carried:
            new = unwrap(self.scope.get(n))
            old = liveins[n]
            if isinstance(new, (bool, int, float)) and isinstance(old, tensor) and not old.shape:
                new = semantic.scalar_constant(new, old.dtype)
            f = _flatten(new)
            if f is None or [v.type for v in f] != _types(old):  # `old` is a runtime value: carried
                first = self.def_locs.get(n)
                # the assignment that changed the type (later ones may only keep the new type)
                at = self.retyped.get(n) or self.assign_locs.get(n)
                where = f" (first bound at line {first.line})" if first else ""
                raise TLXCompileError(
                    f"loop-carried '{n}' changes type in the loop: {_describe(old)}{where} becomes "
                    f"{_describe(new)} at line {at.line if at else '?'}",
                    at or self.loc_of(node),
                    hint="a value carried around a loop must keep its type (the same dtype, shape and buffer type). "
                         "Please make sure that the type stays consistent (Triton's words for the same rule): "
                         "convert it back (e.g. .to(...)) or use a new name")
            vals.extend(f)
        self.builder.create("scf.yield", [vals], [])

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(node, "`while ... else` is not supported in kernels")
        liveins = dict(self.scope)
        carried = self._carried_names(node, liveins, ignore=set())
        self._localize(liveins, carried)
        inits, rnames = _flatten_named([liveins[n] for n in carried], carried)
        wop = self.builder.create("scf.while", [inits], [v.type for v in inits], None, 2, result_names=rnames)
        before, after = wop.regions[0].block, wop.regions[1].block
        bargs = [before.add_arg(v.type, n) for v, n in zip(inits, rnames)]
        aargs = [after.add_arg(v.type, n) for v, n in zip(inits, rnames)]
        with self._inserting_into(before):
            self._bind_carried(liveins, carried, bargs)
            cond = self._as_condition(self.visit(node.test), node)
            if not isinstance(cond, tensor):
                raise self.error(node, "a `while` condition must be a runtime scalar",
                                 hint="for a compile-time number of iterations use tl.static_range")
            self.builder.create("scf.condition", [cond.handle, bargs], [])
        with self._inserting_into(after):
            self._bind_carried(liveins, carried, aargs)
            self._trace_loop_body(node, carried, liveins, aargs)
        self._bind_carried(liveins, carried, list(wop.results))

    # ---- with: warp specialization ------------------------------------------------------------------
    def visit_With(self, node: ast.With) -> None:
        if len(node.items) != 1:
            raise self.error(node, "a `with` statement in a kernel takes one context manager")
        ctxobj = self.visit(node.items[0].context_expr)
        if isinstance(ctxobj, AsyncTask):
            raise self.error(node, "tlx.async_task(...) must be directly inside `with tlx.async_tasks():`")
        if not isinstance(ctxobj, AsyncTasks):
            raise self.error(node, f"unsupported context manager in a kernel: {ctxobj!r}",
                             hint="only `with tlx.async_tasks():` / `with tlx.async_task(...):` are supported")
        if node.items[0].optional_vars is not None:
            raise self.error(node, "`with tlx.async_tasks() as x` binds nothing; drop `as x`")
        if self.partition is not None:  # inlined helpers inherit the partition
            raise self.error(node, "async_tasks cannot be nested")
        tasks = self._collect_tasks(node.body)
        defaults = [t for t in tasks if t[0].is_default]
        if len(defaults) != 1:
            raise self.error(node, f"async_tasks needs exactly one async_task('default'), found {len(defaults)}")
        default_task, default_node = defaults[0]
        # The worker partitions, in order: each worker task's replicas, then the default task's
        # replicas after its first (a replicated default runs its later replicas as partitions of
        # the kernel's num_warps warps, with the default's register budget).
        parts: List[Tuple[ast.With, int, Optional[int], int]] = [
            (wnode, task.num_warps, task.registers, r)
            for task, wnode in tasks if not task.is_default for r in builtins.range(task.replicate)]
        parts += [(default_node, self.ctx.num_warps, default_task.registers, r)
                  for r in builtins.range(1, default_task.replicate)]
        regs = [p[2] for p in parts]
        if any(r is not None for r in regs) and any(r is None for r in regs):
            raise self.error(node, "either every worker async_task gives registers= or none does")
        if not parts:  # only the default survived: no warp specialization
            with self._replica(0):
                self.visit_stmts(default_node.body)
            return
        ws = _WarpSpecialize()
        part_warps = [p[1] for p in parts]
        part_regs = [p[2] for p in parts if p[2] is not None]
        attrs: Dict[str, Any] = {"partition_num_warps": part_warps, "partition_registers": part_regs}
        if default_task.registers is not None:
            attrs["default_registers"] = default_task.registers
        wsop = self.builder.create("tlx.warp_specialize", [[]], [], attrs, 1 + len(parts))
        liveins = dict(self.scope)
        # the default partition sees the enclosing values directly
        with self._replica(0), self._inserting_into(wsop.regions[0].block):
            self.visit_stmts(default_node.body)
            self.builder.create("tlx.ws_yield", [], [])
        for k, (wnode, _, _, r) in enumerate(parts):
            self.scope = dict(liveins)
            blk = wsop.regions[1 + k].block
            for c in ws.captures:
                blk.add_arg(c.type, c.name)
            ws.blocks.append(blk)
            self.partition = _Partition(ws, blk)  # outside async_tasks (no nesting): no partition to restore
            self.ctx.const_anchor.append(blk)
            try:
                with self._replica(r), self._inserting_into(blk):
                    self.visit_stmts(wnode.body)
                    self.builder.create("tlx.ws_return", [], [])
            finally:
                self.ctx.const_anchor.pop()
                self.partition = None
        self.scope = dict(liveins)
        self._drop_unused_captures(wsop, ws)
        wsop.set_operands([ws.captures])

    @contextlib.contextmanager
    def _replica(self, replica_id: int):
        """Trace as replica `replica_id` of an async_task (what tlx.async_task_replica_id() gives)."""
        self.ctx.replica_id = replica_id
        self.in_task = True
        try:
            yield
        finally:
            self.ctx.replica_id = None
            self.in_task = False

    @staticmethod
    def _drop_unused_captures(wsop: Operation, ws: _WarpSpecialize) -> None:
        """A capture no partition reads (e.g. a descriptor named only in a compile-time query such
        as tlx.dtype_of) is removed from the op and from every partition's arguments."""
        blocks = [r.block for r in wsop.regions[1:]]
        keep = [i for i in range(len(ws.captures)) if any(b.args[i].uses for b in blocks)]
        if len(keep) == len(ws.captures):
            return
        ws.captures = [ws.captures[i] for i in keep]
        for b in blocks:
            b.args = [b.args[i] for i in keep]
            for j, a in enumerate(b.args):
                a.index = j

    def _collect_tasks(self, stmts: Sequence[ast.stmt]) -> List[Tuple[Any, ast.With]]:
        out: List[Tuple[Any, ast.With]] = []
        for s in stmts:
            if isinstance(s, ast.With) and len(s.items) == 1:
                obj = self.visit(s.items[0].context_expr)
                if not isinstance(obj, AsyncTask):
                    raise self.error(s, "only `with tlx.async_task(...):` blocks may appear inside async_tasks")
                out.append((obj, s))
            elif isinstance(s, ast.If):
                cond = self._as_condition(self.visit(s.test), s)
                if isinstance(cond, tensor):
                    raise self.error(s, "inside async_tasks an `if` must test a compile-time value")
                out.extend(self._collect_tasks(s.body if cond else s.orelse))
            elif isinstance(s, ast.Pass) or isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue
            else:
                raise self.error(s, "async_tasks may contain only `with tlx.async_task(...):` blocks "
                                    "(or compile-time `if`s around them)")
        return out

    # ---- expressions --------------------------------------------------------------------------------
    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.scope:
            v = self.scope[name]
        elif name in self.jitfn.globals:
            v = self.jitfn.globals[name]
        elif name in self.jitfn.closure:
            v = self.jitfn.closure[name]
        elif hasattr(builtins, name):
            return getattr(builtins, name)
        else:
            raise self.error(node, f"name '{name}' is not defined", hint=self._undefined_hint(name))
        if self.partition is not None:
            v = self._remap(v)
        return v

    def _localize(self, liveins: Dict[str, Any], names: Sequence[str]) -> None:
        """In a worker partition, the values of `names` that a loop carries in or a branch yields
        unchanged come from outside the partition when they were bound before `async_tasks`: they
        enter as captures (a partition's region is isolated from the enclosing function)."""
        if self.partition is not None:
            for n in names:
                liveins[n] = self._remap(liveins[n])

    def _undefined_hint(self, name: str) -> str:
        """What to change for an undefined name: a name the kernel binds somewhere was bound in a
        loop or branch that does not reach this use; any other name must come from the module."""
        if name in _assigned_names(self.jitfn.parse().body):
            return (f"'{name}' is bound inside a loop or branch that does not reach this line; names first "
                    "bound there do not outlive it: bind it before the loop or branch")
        module = getattr(self.jitfn, "__module__", None) or "the kernel's module"
        return (f"define or import '{name}' in {module} (the module that defines {self.jitfn.__name__}); "
                "a kernel sees that module's globals, its closure and Python's builtins")

    def _remap_value(self, h: Value) -> Value:
        """In a worker partition, an IR value from outside becomes the partition's capture
        argument (or its recomputed copy, for a cheap block tensor)."""
        part = self.partition
        if self._defined_inside(h, part.block):  # type: ignore[union-attr]
            return h
        k = id(h)
        if k not in part.map:  # type: ignore[union-attr]
            part.map[k] = part.ws.capture(h, part, self)  # type: ignore[union-attr]
        return part.map[k]  # type: ignore[union-attr]

    def _remap(self, v: Any) -> Any:
        """In a worker partition, values from outside become the partition's capture arguments."""
        if isinstance(v, Handle):
            h = v.handle
            local = self._remap_value(h)
            return v if local is h else wrap_value(local, v)
        if isinstance(v, (tuple, list)) and any(isinstance(x, (Handle, tuple, list)) for x in v):
            r = [self._remap(x) for x in v]
            return tuple(r) if isinstance(v, tuple) else r
        return v

    def _defined_inside(self, v: Value, block: Block) -> bool:
        """Whether `v` is defined in `block` or in a region nested in it (a branch being traced
        counts as nested where its scf.if will go)."""
        b = v.owner if isinstance(v, BlockArgument) else (v.owner.parent if v.defining_op is not None else None)  # type: ignore[attr-defined]
        while b is not None:
            if b is block:
                return True
            op = b.parent_op
            b = op.parent if op is not None else self.ctx.branch_hosts.get(id(b))
        return False

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self._elts(node.elts))

    def visit_List(self, node: ast.List) -> Any:
        return list(self._elts(node.elts))

    def _elts(self, elts: Sequence[ast.expr]) -> List[Any]:
        out: List[Any] = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.visit(e.value)
                if _is_runtime(v) and not isinstance(v, (tuple, list)):
                    raise self.error(e, "cannot unpack a runtime value with *")
                out.extend(v)
            else:
                out.append(self.visit(e))
        return out

    def visit_Dict(self, node: ast.Dict) -> Any:
        return {unwrap(self.visit(k)): self.visit(v) for k, v in zip(node.keys, node.values)}

    def visit_Slice(self, node: ast.Slice) -> Any:
        f = lambda x: unwrap(self.visit(x)) if x is not None else None  # noqa: E731
        return slice(f(node.lower), f(node.upper), f(node.step))

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.visit(node.value)
        try:
            return getattr(base, node.attr)
        except AttributeError:
            what = getattr(base, "__name__", None) if inspect.ismodule(base) else None
            if what:
                raise self.error(node, f"{what} has no attribute '{node.attr}'",
                                 hint="see the supported API in the README") from None
            raise self.error(node, f"{_describe(base)} has no attribute '{node.attr}'") from None

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.visit(node.value)
        idx = self.visit(node.slice)
        if isinstance(base, Handle):
            return base[idx]  # type: ignore[index]
        idx = unwrap(idx)
        if _is_runtime(idx):
            raise self.error(node, "a tuple or list can only be indexed with a compile-time integer")
        seq = unwrap(base)
        try:
            return seq[idx]
        except IndexError:  # name the sequence and the index (a shape's rank is the usual slip)
            raise self.error(node, f"index {idx} is out of range for the compile-time {type(seq).__name__} "
                                   f"{seq!r} (length {len(seq)})",
                             hint=f"use an index from {-len(seq)} to {len(seq) - 1}; the .shape of a "
                                  "local_alloc buffer is one buffer's shape, without the buffer count") from None

    def visit_JoinedStr(self, node: ast.JoinedStr) -> Any:
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                x = self.visit(v.value)  # type: ignore[attr-defined]
                if _is_runtime(x):
                    raise self.error(node, "an f-string can only format compile-time values")
                x = unwrap(x)
                convert = self._CONVERSIONS.get(v.conversion)  # type: ignore[attr-defined]
                if convert is not None:  # !r / !s / !a apply before the format spec, as in Python
                    x = convert(x)
                parts.append(format(x, self.visit(v.format_spec) if v.format_spec else ""))  # type: ignore[attr-defined]
        return "".join(parts)

    _CONVERSIONS = {ord("r"): repr, ord("s"): str, ord("a"): ascii}  # FormattedValue.conversion -> function

    _BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
               ast.Mod: "mod", ast.BitAnd: "and_", ast.BitOr: "or_", ast.BitXor: "xor", ast.LShift: "lshift",
               ast.RShift: "rshift", ast.Pow: "pow", ast.MatMult: "matmul"}

    def binop(self, op: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        a, b = unwrap(a), unwrap(b)
        name = self._BINOPS.get(type(op))
        if name is None:
            raise self.error(node, f"operator {type(op).__name__} is not supported")
        fn = getattr(pyop, name)
        if isinstance(a, Handle) or isinstance(b, Handle):
            if not isinstance(a, tensor) and isinstance(a, Handle) or not isinstance(b, tensor) and isinstance(b, Handle):
                raise self.error(node, f"unsupported operand types for {type(op).__name__}: {_describe(a)} and {_describe(b)}")
            if name in ("pow", "matmul"):
                raise self.error(node, f"operator {'**' if name == 'pow' else '@'} is not supported on tensors",
                                 hint="use tl.dot for matrix products" if name == "matmul" else None)
        return fn(a, b)

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(node.op, self.visit(node.left), self.visit(node.right), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = unwrap(self.visit(node.operand))
        if isinstance(v, Handle) and not isinstance(v, tensor):
            raise self.error(node, f"unary operator on {_describe(v)}")
        if isinstance(node.op, ast.Not):
            return semantic.not_(v) if isinstance(v, tensor) else (not v)
        return self._UNARYOPS[type(node.op)](v)

    _UNARYOPS = {ast.USub: pyop.neg, ast.UAdd: pyop.pos, ast.Invert: pyop.invert}

    _CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}

    def visit_Compare(self, node: ast.Compare) -> Any:
        left = unwrap(self.visit(node.left))
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators):
            right = unwrap(self.visit(right_node))
            if isinstance(op, (ast.Is, ast.IsNot)):
                r = (left is right) if isinstance(op, ast.Is) else (left is not right)
            elif isinstance(op, (ast.In, ast.NotIn)):
                if _is_runtime(left) or _is_runtime(right):
                    raise self.error(node, "`in` works only on compile-time values")
                r = (left in right) if isinstance(op, ast.In) else (left not in right)
            else:
                name = self._CMPOPS[type(op)]
                if isinstance(left, Handle) or isinstance(right, Handle):
                    if not all(isinstance(x, tensor) or not isinstance(x, Handle) for x in (left, right)):
                        raise self.error(node, f"cannot compare {_describe(left)} and {_describe(right)}")
                    if len(node.ops) > 1:
                        raise self.error(node, "chained comparisons of runtime values are not supported",
                                         hint="write (a < b) & (b < c)")
                    return semantic.compare(left, right, name)
                r = getattr(pyop, name)(left, right)
            if not r:
                return r
            result = r
            left = right
        return result

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        acc: Any = None
        runtime: List[Any] = []
        for v_node in node.values:
            v = unwrap(self.visit(v_node))
            if isinstance(v, tensor):
                runtime.append(v)
                continue
            if isinstance(v, Handle):
                raise self.error(node, f"{_describe(v)} cannot be used in `and` / `or`")
            if bool(v) != is_and:  # a compile-time operand decides: False for `and`, True for `or`
                return semantic.full(runtime[0].shape, not is_and, core.int1) if runtime else v
            acc = v
        if not runtime:
            return acc
        out = runtime[0]
        for r in runtime[1:]:
            out = semantic.logical_and(out, r) if is_and else semantic.logical_or(out, r)
        return semantic.cast(out, core.int1)

    def visit_Call(self, node: ast.Call) -> Any:
        fn = self.visit(node.func)
        args = self._elts(node.args)
        kwargs: Dict[str, Any] = {}
        for k in node.keywords:
            if k.arg is None:
                d = self.visit(k.value)
                if not isinstance(d, dict):
                    raise self.error(node, "** needs a compile-time dict")
                kwargs.update(d)
            else:
                kwargs[k.arg] = self.visit(k.value)
        if isinstance(fn, KernelFunction):
            return self.inline(fn, args, kwargs, node)
        if getattr(fn, "__tlx_builtin__", False) or inspect.ismethod(fn) and isinstance(fn.__self__, Handle):
            return fn(*args, **kwargs)  # a builtin or a method of a traced value: it takes traced values
        if fn in (builtins.min, builtins.max) and any(_is_runtime(a) for a in args):
            if len(args) != 2 or kwargs:
                raise self.error(node, f"{fn.__name__}() of runtime values takes exactly two arguments")
            return semantic.minimum(*args) if fn is builtins.min else semantic.maximum(*args)
        if fn is builtins.abs and args and isinstance(unwrap(args[0]), tensor):
            return semantic.abs_(args[0])
        if fn is builtins.range:
            raise self.error(node, "range() can only be used as the iterator of a `for` loop")
        if fn is core.constexpr:
            return unwrap(args[0]) if args else None
        if fn is builtins.print:
            raise self.error(node, "print() is not supported in kernels", hint="use tl.static_print for compile-time values")
        if fn in (builtins.int, builtins.float, builtins.bool) and args and _is_runtime(args[0]):
            raise self.error(node, f"{fn.__name__}() of a runtime value is not supported",
                             hint="use .to(tl.int32) / .to(tl.float32) / != 0")
        if fn in (builtins.len,) and args and isinstance(unwrap(args[0]), Handle):
            raise self.error(node, "len() of a runtime value is not supported", hint="use x.shape[0]")
        if any(_is_runtime(a) for a in list(args) + list(kwargs.values())):
            name = getattr(fn, "__name__", repr(fn))
            raise self.error(node, f"cannot pass runtime values to the Python function '{name}'",
                             hint=f"decorate '{name}' with @tlx.jit to call it from a kernel")
        if not callable(fn):
            raise self.error(node, f"{_describe(fn)} is not callable")
        return fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()})

    def inline(self, fn: Any, args: List[Any], kwargs: Dict[str, Any], node: ast.AST) -> Any:
        """Trace a nested @tlx.jit function in place."""
        if self.depth >= _MAX_INLINE_DEPTH:
            raise self.error(node, "too many nested @tlx.jit calls (recursion is not supported)")
        try:
            bound = fn.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise self.error(node, f"bad call to {fn.__name__}(): {e}") from None
        bound.apply_defaults()
        scope: Dict[str, Any] = {}
        for p in fn.params:
            v = bound.arguments[p.name]
            if p.is_constexpr and _is_runtime(v):
                raise self.error(node, f"{fn.__name__}(): parameter '{p.name}' is a tl.constexpr but got {_describe(v)}",
                                 hint="pass a compile-time value")
            scope[p.name] = unwrap(v) if p.is_constexpr else v
        sub = Tracer(fn, self.ctx, scope, self.depth + 1, self.partition)
        sub.run_body(fn.body())
        return sub.ret_value

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        raise self.error(node, "lambdas are not supported in kernels", hint="define a @tlx.jit helper function")

    def visit_NamedExpr(self, node: ast.NamedExpr) -> Any:
        v = self.visit(node.value)
        self.assign(node.target, v, node)
        return self.scope[node.target.id]


_UNSUPPORTED_HINTS = {
    "FunctionDef": "define helpers at module level with @tlx.jit",
    "ClassDef": "define classes outside the kernel",
    "Try": "kernels cannot catch exceptions",
    "Raise": "use tl.static_assert for compile-time checks",
    "Global": "pass the value as a kernel argument or a tl.constexpr",
    "Nonlocal": "pass the value as a kernel argument or a tl.constexpr",
    "ListComp": "build the tuple with tl.static_range or write the elements out",
    "GeneratorExp": "build the tuple with tl.static_range or write the elements out",
    "DictComp": "comprehensions are not supported in kernels",
    "SetComp": "comprehensions are not supported in kernels",
    "Import": "import modules at the top of the file",
    "ImportFrom": "import modules at the top of the file",
    "Yield": "kernels are not generators",
    "Await": "kernels are not coroutines",
    "AsyncFor": "kernels are not coroutines",
    "AsyncWith": "kernels are not coroutines",
    "Set": "use a tuple",
    "Starred": "unpacking with * is only supported in calls and tuples of compile-time values",
    "Match": "use if / elif",
}


def trace(fn: KernelFunction, arg_types: Dict[str, T.Type], constexprs: Dict[str, Any], num_warps: int = 4,
          target: str = "sm_90a", num_ctas: int = 1, divisibility: Optional[Dict[str, int]] = None,
          equal_to_one: Sequence[str] = ()) -> Module:
    """Trace `fn` into a verified Module for one specialization: `arg_types` gives the IR type
    of every runtime parameter, `constexprs` the value of every constexpr one (defaults fill
    the rest); parameters named in `equal_to_one` are integers specialized to 1, and
    `divisibility` (16 or 1 per runtime parameter) is recorded on the function."""
    divisibility = divisibility or {}
    consts = dict(constexprs)
    for p in fn.params:
        if p.is_constexpr:
            if p.name not in consts:
                if not p.has_default:
                    raise TLXCompileError(f"kernel {fn.__name__}: no value for constexpr parameter '{p.name}'",
                                          fn.location(), hint=f"pass {p.name}=... when compiling or launching")
                consts[p.name] = p.default
            consts[p.name] = core.unwrap(consts[p.name])
        elif p.name not in arg_types:
            raise TLXCompileError(f"kernel {fn.__name__}: no type for parameter '{p.name}'", fn.location(),
                                  hint="give it in the signature, or mark it `: tl.constexpr`")
    unknown = set(consts) - set(fn.constexpr_names)
    if unknown:
        raise TLXCompileError(f"kernel {fn.__name__}: {sorted(unknown)} are not constexpr parameters of this kernel",
                              hint="only parameters annotated `: tl.constexpr` take compile-time values")
    fdef = fn.parse()
    func_loc = fn.location()
    runtime = [p for p in fn.params if not p.is_constexpr]
    func = Operation("tt.func", [], [], {"sym_name": fn.__name__}, 1, func_loc)
    func.attrs["arg_names"] = [p.name for p in runtime]
    func.attrs["divisibility"] = [int(divisibility.get(p.name, 1)) for p in runtime]
    if equal_to_one:
        func.attrs["equal_to_one"] = [p.name for p in runtime if p.name in equal_to_one]
    block = func.regions[0].block
    module = Module(func, {"num_warps": num_warps, "target": target, "num_ctas": num_ctas})
    builder = Builder(block)
    builder.loc = func_loc
    ctx = TraceContext(builder, num_warps, target, semantic)
    scope: Dict[str, Any] = {}
    for p in fn.params:
        scope[p.name] = consts[p.name] if p.is_constexpr else core.wrap_value(block.add_arg(arg_types[p.name], p.name))
    old = core.set_current(ctx)
    try:
        for p in runtime:
            if p.name in equal_to_one:
                scope[p.name] = semantic.scalar_constant(1, core.dtype_from_ir(arg_types[p.name]))
        Tracer(fn, ctx, scope).run_body(fn.body())
        builder.set_insertion_point_to_end(block)
        builder.loc = Location(fn.file, (fdef.end_lineno or fdef.lineno) + fn.line_offset, 0)
        builder.create("tt.return", [], [])
    finally:
        core.set_current(old)
    _remove_dead_pure_ops(block)
    try:
        verify_module(module)
    except IRVerifyError as e:  # a tracer bug, not the user's: say so plainly
        raise TLXCompileError(f"internal error: the traced IR does not verify: {e}", func_loc,
                              hint="please report this kernel to the tlx developers") from e
    return module


def _remove_dead_pure_ops(block: Block) -> None:
    """Drop pure ops whose results nothing uses (constants the tracer made for a splat, views taken
    only to be passed to compile-time queries), innermost regions included."""
    for op in reversed(list(block.ops)):
        for r in op.regions:
            _remove_dead_pure_ops(r.block)
        if not op.regions and op.results and is_pure(op) and not any(res.uses for res in op.results):
            op.erase()

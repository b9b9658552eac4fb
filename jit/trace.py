"""Driving one trace: make symbolic inputs, run the user function on Tracers
(with numpy's creation functions intercepted), and collect the Graph, the
shape environment and what each input dim became."""
from __future__ import annotations

import dis
import functools
import io
import os
import sys
import types
from dataclasses import dataclass, field

import numpy as np
import sympy

from clustering.passes import data_dependent_sizes, dce
from jit import lift, optable, pytree, scan
from jit.declare import dim_names, parse_constraint
from jit.errors import raises
from jit.held import MISSING, HeldMapping, HeldObject, HeldSequence, Lifter, Path, assigned_only, global_names, \
    held_container, holder, jitted, key_token, refuse_random, user_file, user_module
from jit.tracer import PYTHON_KINDS, PYTHON_TYPES, DataArg, DataList, Fallback, Stacked, SymFloat, SymInt, \
    TRACED_BUILTINS, TraceContext, Tracer, eval_attr, holds_traced, user_location
from shapes.env import SYMBOLIC_FROM, Guard, ShapeEnv
from shapes.guards import InputDim
from shapes.ir import Graph, Node, Value, make_attrs
from shapes.ops import OPS
from runtime.executable import DataDependentDim, OutputSpec


@dataclass
class TraceResult:
    graph: Graph
    env: ShapeEnv
    input_dims: list[InputDim]
    out_treedef: object
    outputs: list[OutputSpec]
    dd_dims: list[DataDependentDim]
    concrete: object  # the first call's result, computed while tracing
    eager_nodes: list[str] = field(default_factory=list)
    writes: list = field(default_factory=list)  # (caller's array, contents, contents before) the traced call writes
    held: list = field(default_factory=list)  # paths of the held arrays, graph inputs after the arguments
    breaks: list = field(default_factory=list)  # graph breaks (jit/tracer.py Break), checked at run time
    dd_checks: list = field(default_factory=list)  # (condition, reason) on data-dependent sizes, checked at run time
    lift_refusals: list = field(default_factory=list)  # loops left to the trace (jit/lift.py), and why
    guarded: dict = field(default_factory=dict)  # path -> token of the other values it read (jit/held.py)
    unguarded: list = field(default_factory=list)  # paths of values it read that no token describes
    changed: list = field(default_factory=list)  # paths of values the traced run itself changed (not keyed)
    selects: list = field(default_factory=list)  # ifs on traced values made selects (jit/lift.py)
    scans: list = field(default_factory=list)  # loops compiled once for every trip count (jit/scan.py)
    printed: list = field(default_factory=list)  # the text the traced call printed (_Print), not yet shown
    # values the traced run changed that it reads, no list or dict (`COUNT += 1`, `Model.calls += 1`): a compiled
    # call would neither change them nor see them change; this call's result is the traced run's, and the
    # signature runs in numpy from now on (jit/miss.py)
    counters: list = field(default_factory=list)
    # (attribute path, kind, the output that gives its value) it assigns, set after every call (set_state; the
    # outputs after the result's), and their values for the traced call
    state: list = field(default_factory=list)
    state_values: list = field(default_factory=list)

    def apply_writes(self) -> None:
        """Give the traced call numpy's effects: on the arguments it wrote
        into (the elements its writes changed: another thread's writes into
        the others, meanwhile, stay), and on stdout (what it printed)."""
        for leaf, contents, before in self.writes:
            if before is None or before.shape != contents.shape:
                np.copyto(leaf, contents)
                continue
            n = contents.dtype.itemsize
            bits = [np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (n,)) for a in (contents, before)]
            changed = (bits[0] != bits[1]).any(-1)
            leaf[changed] = contents[changed]
        self.writes = []
        for text in self.printed:
            sys.stdout.write(text)
        self.printed = []


def _arg_of(arg_treedef, leaf: int) -> int:
    """The argument (its place in the bound tuple) that holds leaf `leaf`."""
    for k, child in enumerate(arg_treedef[1]):
        n = pytree.count_leaves(child)
        if leaf < n:
            return k
        leaf -= n
    raise IndexError(leaf)


class DeclarationError(ValueError):
    """The arguments break what dims= or constraints= declare (the user's
    error, raised as is: numpy knows nothing of the declaration)."""


@dataclass(frozen=True)
class InputSpec:
    """How to trace one leaf: "array" | "scalar" | "int" (a dynamic int) | "static"."""
    kind: str
    path: str


def trace(fn, arg_treedef, leaves, specs: list[InputSpec], *, dynamic, dynamic_dims=frozenset(),
          user_dims=None, constraints=(), rebind=None, held=((), ()), held_ints=(), held_floats=(), scan_jit=None,
          loops=None, trace_consts=False) -> TraceResult:
    """Trace fn on `leaves` (the flattened bound arguments).  `rebind` maps
    the bound tuple back to (args, kwargs).  `held`: (paths, arrays) of the
    held arrays earlier traces found (jit/held.py), graph inputs after the
    arguments' in that order; arrays this trace reaches are added after them.
    `scan_jit(fn, name)` jits a loop's body, `loops` is what the jit knows of
    its loops' trip counts (jit/scan.py; without them no loop is a scan).
    `held_ints`: paths of held ints that are symbols, bound from their
    values, which the caller puts after the arguments' arrays (jit/keys.py
    extended_key); `held_floats`: paths of held floats that are runtime
    scalars, among the held paths (their values among `held`'s)."""
    env = ShapeEnv(reserved=dim_names(user_dims or {}))
    ctx = TraceContext(env)
    ctx.scan_jit, ctx.loops = scan_jit, loops if loops is not None else {}
    ctx.trace_consts = trace_consts
    named: dict[str, sympy.Symbol] = {}
    fixed: dict[str, sympy.Integer] = {}  # dims named in dims= that are not symbols here (0, 1, static)
    input_dims: list[InputDim] = []
    traced_leaves, inputs = [], []
    concrete_of: dict[int, np.ndarray] = {}  # input value id -> the caller's array

    def held_input(array, path: str) -> Tracer:
        if type(array) is float or isinstance(array, np.generic):  # (a held float that is a runtime scalar:
            # weak, as a float argument; a numpy float strong, as an np.float64 argument)
            v = ctx.new_value(np.float64 if type(array) is float else array.dtype, (), weak=type(array) is float)
            inputs.append(v)
            return Tracer(ctx, v, array)
        v = ctx.new_value(array.dtype, array.shape)  # static dims: the key holds the exact shape
        inputs.append(v)
        concrete_of[v.id] = array
        return Tracer(ctx, v, array)
    def int_symbol(value: int, src: str, index: int) -> SymInt:
        """A dynamic int's symbol, bound from `shape[0]` of the index-th
        array of the call (an IntDim, jit/signature.py): no range (nor sympy
        sign assumption, which would make the sign guard vanish)."""
        sym = env.new_symbol(value, src, lo=None)
        env.guards.append(Guard(sympy.Ge(sym, 0) if value >= 0 else sympy.Lt(sym, 0), f"sign of int {src}"))
        input_dims.append(InputDim(index, 0, sym, src))
        return SymInt.wrap(ctx, sym)
    n_arrays = 0  # (the held ints' IntDims come after the arguments')
    lifter = Lifter(ctx, held_input, held_ints,
                    lambda path, value: int_symbol(value, str(path), n_arrays + held_ints.index(path)), held_floats)
    if getattr(fn, "__code__", None) in scan.MADE:
        lifter.attr_writes = None  # (a scan's body: its entries run per trip, with no attribute set after them)
    traceables = _Traceables(_NumpyProxy(ctx), lifter)
    objects: dict = {}  # (one view of an object passed twice: `a is b`, its key says so)
    for k, (leaf, spec) in enumerate(zip(leaves, specs)):
        if spec.kind == "static":
            # (an object, a function, a class or a module passed in: what the trace reads through it is
            # keyed at its paths, as through a global; by its identity alone, a change to it was not seen)
            if holder(leaf):
                traced_leaves.append(objects.setdefault(id(leaf), HeldObject(lifter, Path(("arg", k)), leaf)))
            else:
                traced_leaves.append(traceables.value(leaf, Path(("arg", k))) if _reads_through(leaf) else leaf)
            continue
        if spec.kind == "int":  # a dynamic int: a symbol bound from its value, not a graph input
            traced_leaves.append(int_symbol(leaf, f"argument {spec.path}", n_arrays))
            n_arrays += 1
            continue
        if spec.kind == "scalar":
            # only a Python float or complex is weak: np.float64 (a float subclass) is a strong scalar
            weak = type(leaf) in (float, complex)
            v = ctx.new_value({float: np.float64, complex: np.complex128}.get(type(leaf)) or np.asarray(leaf).dtype,
                              (), weak=weak)
        else:
            if spec.kind == "list":  # (a list of numbers as data: its array, DataList below)
                leaf = leaf.array
            shape = []
            names = (user_dims or {}).get(spec.path)
            if names is not None and len(names) != leaf.ndim:
                raise DeclarationError(f"argument {spec.path}: dims={names!r} names {len(names)} dims "
                                 f"but the array has {leaf.ndim}")
            for axis, d in enumerate(leaf.shape):
                src = f"{spec.path}.shape[{axis}]"
                name = names[axis] if names is not None else None
                if isinstance(name, int):
                    if d != name:
                        raise DeclarationError(f"argument {spec.path}: dim {axis} is {d}, declared {name}")
                    shape.append(d)
                    if d >= SYMBOLIC_FROM and dynamic is not False:
                        input_dims.append(InputDim(n_arrays, axis, sympy.Integer(d), src))
                    continue
                if d < SYMBOLIC_FROM or dynamic is False:
                    shape.append(d)
                    if name is not None:  # (a constraint on it is decided now)
                        fixed.setdefault(name, sympy.Integer(d))
                    continue
                if dynamic == "auto" and (n_arrays, axis) not in dynamic_dims and name is None:
                    shape.append(d)
                    input_dims.append(InputDim(n_arrays, axis, sympy.Integer(d), src))
                    continue
                if name is not None and name in named:
                    sym = named[name]
                    if env.symbols[sym].hint != d:
                        raise DeclarationError(f"argument {spec.path}: dim {name} is {d} here but "
                                         f"{env.symbols[sym].hint} at {env.symbols[sym].source}")
                else:
                    sym = env.new_symbol(d, src, name=name)
                    if name is not None:
                        named[name] = sym
                shape.append(sym)
                input_dims.append(InputDim(n_arrays, axis, sym, src))
            v = ctx.new_value(leaf.dtype, shape)
            concrete_of[v.id] = leaf
            n_arrays += 1
        inputs.append(v)
        traced_leaves.append(DataList(Tracer(ctx, v, leaf), DataArg(_arg_of(arg_treedef, k))) if spec.kind == "list"
                             else Tracer(ctx, v, leaf))
    _apply_constraints(env, {**fixed, **named}, constraints)
    for path, array in zip(*held):
        lifter.lift(path, array)

    bound = pytree.unflatten(arg_treedef, iter(traced_leaves))
    args, kwargs = rebind(bound) if rebind is not None else (bound, {})
    result = traceables.root(fn)(*args, **kwargs)
    if ctx.raised is not None:  # (`try: ... except LinAlgError:` took this call's values' error: another call's
        # values, which raise nothing, would be served the except clause's result)
        raise Fallback(f"the function caught an error numpy raised on this call's values ({ctx.raised})")
    after: list = []  # (the lists and dicts the call took, as it left them)
    if pytree.flatten(bound, after) != arg_treedef or any(a is not b for a, b in zip(after, traced_leaves)):
        raise Fallback("the function changes a list or dict it was passed (numpy's call changes the caller's)")
    assigned = traceables.write_globals()
    lifter.check_containers(traceables.traced)
    guarded, changed, counters = _still_read(lifter, fn, leaves)
    changed += [k for k in assigned if k not in changed]  # (one it only assigns, once per trace: listed too)

    if _traced_keys(result):
        raise Fallback("returns a dict keyed by a traced value (a compiled call would hand out the trace's key)")
    out_leaves: list = []
    out_def = pytree.flatten(_stacked_as_rows(result), out_leaves)
    state = list(lifter.attr_writes or {})  # (the attributes it assigns: outputs after the result's, set_state)
    n_result = len(out_leaves)
    out_leaves += [lifter.attr_writes[p] for p in state]
    writebacks = _writebacks(ctx, concrete_of)
    outputs, concrete = [], []
    written = {final.id: caller for final, (caller, *_) in writebacks.values()}
    input_ids = {v.id for v in inputs}
    for r in out_leaves:
        if isinstance(r, SymFloat):  # (a Python float of sizes, `n / 2`: the weak scalar of the trace it is)
            r = r.t
        view = _view_of_argument(r, writebacks, input_ids, env)
        if view is not None:  # (`x += 1; return x[1:]`, `return z.real`: a view of the caller's array, as numpy's)
            outputs.append(OutputSpec("view", view[0]))
            concrete.append(view[1])
        elif isinstance(r, Tracer):
            if r.ctx is not ctx:
                raise Fallback("returned a Tracer from another trace")
            # (an argument's final value: the caller's array, which the call writes, as numpy's `x += 1; return
            # x`; another array the passes may find equal to it, `y = ...; C[:] = y; return y`, stays a value)
            if r.value.id not in written and type(r.concrete) is np.ndarray and not r.ndim \
                    and getattr(ctx.producers.get(r.value.id), "op", "zero_d") not in ("zero_d", "getitem"):
                r = ctx.emit("zero_d", [r], {})  # (numpy's 0-d array, where the steps give a scalar: `a = np.array(
                # x.max()); a += 1`, the add functionalized)
            outputs.append(OutputSpec("argument" if r.value.id in written else "value", r.value.id))
            concrete.append(written.get(r.value.id, r.concrete))
        elif isinstance(r, SymInt):
            outputs.append(OutputSpec("dim", r.expr))
            concrete.append(env.hint(r.expr))
        else:
            if isinstance(r, Stacked):  # (a list of a symbolic number of arrays: its appends made as written)
                r._refuse("returning it")
            if _made_by_the_trace(r, traceables):  # (what it computes, or closes over, is the trace's)
                raise Fallback(f"returns a {type(r).__name__} the trace made (a function or generator of its "
                               "values)")
            if holds_traced(r) or traceables.traced(r):  # (an object of the user's holding arrays of the trace,
                # or the trace's view of one: a held object, list or dict of the caller's)
                raise Fallback(f"returns a {type(r).__name__} holding traced values (returned as they are: tuples, "
                               "lists, dicts and namedtuples of arrays and numbers)")
            outputs.append(OutputSpec("const", r))
            concrete.append(r)
    for target, (final, _) in writebacks.items():
        outputs.append(OutputSpec("writeback", (target, final.id)))
    for b in ctx.breaks:
        outputs.append(OutputSpec("check", (b.value_id, b.kind, b.outcome)))
    graph = Graph(tuple(inputs), tuple(ctx.nodes), tuple(
        _find(ctx, o.value_id, inputs) for o in outputs if o.value_id is not None))
    graph, outputs = _finalize(graph, env, outputs)
    dd_dims = _data_dependent_dims(graph, env, ctx.nodes)
    dd_checks = {}  # (a decision taken twice, the getitem and the setitem of `x[i] += 1`, is checked once)
    for g in env.dd_guards:
        cond = g.cond.func(env.simplify(g.cond.lhs), env.simplify(g.cond.rhs)) \
            if isinstance(g.cond, sympy.core.relational.Relational) else g.cond
        dd_checks.setdefault(cond, g.reason)
    dd_checks = list(dd_checks.items())
    # (eager nodes nothing reads, a rewritten mask read, are dropped, as the passes drop them)
    eager = [f"{n.attr('call')!r} at {n.loc}" for n in dce(graph, sizes_outside(outputs, dd_checks)).nodes
             if n.op == "eager"]
    return TraceResult(graph, env, input_dims, out_def, outputs, dd_dims,
                       pytree.unflatten(out_def, iter(concrete)), eager,
                       [lc for _, lc in writebacks.values()], lifter.paths, list(ctx.breaks), dd_checks,
                       list(ctx.lift_refusals), guarded, list(lifter.unguarded), changed, list(ctx.selects),
                       list(ctx.scans), list(ctx.printed), counters,
                       [(p, _state_kind(lifter.attr_writes[p]), n_result + k) for k, p in enumerate(state)],
                       concrete[n_result:n_result + len(state)])


def sizes_outside(outputs, dd_checks) -> frozenset:
    """The data-dependent sizes a call uses outside its graph: the sizes it
    returns (`np.unique(x).size`) and the decisions checked at run time."""
    return data_dependent_sizes([o.payload for o in outputs if o.kind == "dim"] + [c for c, _ in dd_checks])


@functools.lru_cache(maxsize=512)
def _stores_nonlocals(code: types.CodeType) -> tuple:
    """The free variables `code` assigns (`nonlocal n; n += 1`)."""
    return tuple(sorted({i.argval for i in dis.get_instructions(code) if i.opname in ("STORE_DEREF", "DELETE_DEREF")}
                        & set(code.co_freevars)))


def _still_read(lifter: Lifter, fn, leaves) -> tuple[dict, list]:
    """({path: token} of the values the trace read, [paths of those the
    traced run itself changed]).  A list the function appends to (a log, a
    counter) is state it writes, not a constant it reads: keyed, every call
    would trace again; its Python side effects run only while tracing."""
    keep, changed, counters = {}, [], []
    for p, t in lifter.guarded.items():
        try:
            now = key_token(p.fetch(fn, leaves), lifter.kind(p))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            now = MISSING  # (a missing attribute it read, `hasattr(o, "extra")`, is so still: keyed as missing)
        if now == t:
            keep[p] = t
        else:
            changed.append(str(p))
            if now is not MISSING and not (type(now) is tuple and now[:1] in ((list,), (dict,))):  # (a log it
                counters.append(str(p))  # appends to: once per trace; a path not fetched again: not a counter)
    return keep, changed, counters


def _state_kind(v) -> str:
    """How an attribute the trace assigns is set from its output: "float"
    (a Python float of the trace), "int" (a size), else "value"."""
    if isinstance(v, SymFloat) or isinstance(v, Tracer) and v.value.weak and v.dtype.kind == "f":
        return "float"
    if isinstance(v, SymInt) or isinstance(v, Tracer) and v.value.weak and v.dtype.kind in "iu":
        return "int"
    return "value"


def _state_value(v, kind: str):
    return float(v) if kind == "float" else int(v) if kind == "int" else v


def set_state(fn, state: list, out, leaves, values=None) -> None:
    """Assign each attribute of `state` (TraceResult.state) its value of the
    call, its output of `out` (or of `values`, the traced call's), on the
    object its path reaches."""
    for k, (p, kind, at) in enumerate(state):
        owner = Path(p.root, p.steps[:-1]).fetch(fn, leaves)
        setattr(owner, p.steps[-1][1], _state_value(out[at] if values is None else values[k], kind))


def _stacked_as_rows(r, depth: int = 4):
    """The result with each list a compiled loop appended arrays to
    (Stacked, in tuples, lists and dicts of it) as the list of its stacked
    array's rows (pytree.Rows): what numpy's list holds, arrays of those
    values, numpy's scalars, or the Python numbers the trips appended.  One
    that may view an array written since the loop is refused (Stacked: the
    call traced again, its appends as written)."""
    t = type(r)
    if t is Stacked:
        a = r.stack(copy=False)  # (the scan's rows themselves: the list's items, arrays np.stack does not view)
        if a.ndim < 2 and not r.numbers:
            r._refuse("returning a list of 0-d arrays")
        if r.views:
            r._refuse("returning a list of views of an array the loop read")
        return pytree.Rows(a, r.numbers in PYTHON_KINDS)
    if not depth:
        return r
    if t is list or t is tuple:
        return t([_stacked_as_rows(x, depth - 1) for x in r])
    if t is dict:
        return {k: _stacked_as_rows(v, depth - 1) for k, v in r.items()}
    if isinstance(r, tuple) and hasattr(t, "_fields"):
        return t(*[_stacked_as_rows(x, depth - 1) for x in r])
    return r


def _traced_keys(r, depth: int = 4) -> bool:
    """Whether r is (or holds, in lists, tuples and dicts) a dict with a key of the trace."""
    if isinstance(r, dict):
        return any(holds_traced(k) for k in r) or bool(depth) and any(_traced_keys(v, depth - 1) for v in r.values())
    if isinstance(r, (list, tuple)) and depth:
        return any(_traced_keys(v, depth - 1) for v in r)
    return False


def _made_by_the_trace(r, traceables) -> bool:
    """A generator, a function defined in the trace (its globals the
    trace's copy, or its closure holding traced values), or a method bound
    to a traced value: returned, every call would get the trace's."""
    if isinstance(r, types.GeneratorType):
        return True
    if isinstance(r, types.FunctionType):
        return traceables.traced(r) or any(holds_traced(c.cell_contents) for c in r.__closure__ or ()
                                           if c.cell_contents is not None)
    if isinstance(r, (types.MethodType, types.BuiltinMethodType)):
        return holds_traced(getattr(r, "__self__", None)) or traceables.traced(getattr(r, "__self__", None))
    return False


def _writebacks(ctx: TraceContext, by_id: dict) -> dict:
    """{input value id: (its final value, (the caller's array, its final
    concrete contents))} for every argument (or held array) the function
    wrote into; `by_id`: the array of each input value."""
    out = {}
    for s in ctx.mutated.values():
        if s.origin.id in by_id and s.root.value.id != s.origin.id:
            out[s.origin.id] = (s.root.value, (by_id[s.origin.id], s.root.concrete, ctx.before.get(id(s))))
    return out


def _view_of_argument(r, writebacks: dict, inputs: set, env):
    """((the argument's input value id, the chain of view ops from it), that
    view of the caller's array) when r is a view of an argument the function
    writes into (returned as a view of the caller's array, which the call
    writes: numpy's aliasing), or the real or imaginary part of one it does
    not (numpy's view of the caller's array, which the steps compute as a
    copy: a write into it after the call would not reach the argument),
    else None."""
    if not isinstance(r, Tracer) or not r._chain or r._storage is None:
        return None
    origin = r._storage.origin.id
    if origin in writebacks:
        x = writebacks[origin][1][0]
    elif origin in inputs and any(op in ("real", "imag") for op, _ in r._chain):
        x = r._storage.first
    else:
        return None
    chain = tuple((op, make_attrs(**attrs)) for op, attrs in r._chain)
    for op, attrs in chain:
        x = OPS[op].ref(x, **{k: eval_attr(a, env.hint) for k, a in attrs})
    return (r._storage.origin.id, chain), x


def _find(ctx, vid, inputs) -> Value:
    for v in inputs:
        if v.id == vid:
            return v
    for n in ctx.nodes:
        for o in n.outputs:
            if o.id == vid:
                return o
    raise KeyError(vid)


def _apply_constraints(env: ShapeEnv, named: dict, constraints) -> None:
    """`named`: {dim name: its symbol, or its value where it is not one}."""
    for text in constraints:
        for cond in parse_constraint(text, named):
            if cond in (sympy.true, sympy.false):
                if cond is sympy.false:
                    raise DeclarationError(f"constraint {text!r} is violated: "
                                           + ", ".join(f"{n}={v}" for n, v in named.items() if v.is_Integer))
                continue
            hint = {s: sympy.Integer(env.symbols[s].hint) for s in cond.free_symbols}
            if not bool(cond.xreplace(hint)):
                vals = ", ".join(f"{s}={env.symbols[s].hint} ({env.symbols[s].source})" for s in cond.free_symbols)
                raise DeclarationError(f"constraint {text!r} is violated: {vals}")
            if (isinstance(cond, sympy.core.relational.Relational) and isinstance(cond.lhs, sympy.Symbol)
                    and cond.rhs.is_Integer and cond.rel_op in ("<=", "<", ">=", ">")):
                b = int(cond.rhs)
                lo = {">=": b, ">": b + 1}.get(cond.rel_op)
                hi = {"<=": b, "<": b - 1}.get(cond.rel_op)
                env.constrain(cond.lhs, lo=lo, hi=hi)
            else:
                env.guards.append(Guard(cond, f"constraint {text!r}"))


def _finalize(graph: Graph, env: ShapeEnv, outputs):
    """Apply the replacements found while tracing to every shape and attr."""
    remap: dict[int, Value] = {}

    def val(v: Value) -> Value:
        if v.id not in remap:
            remap[v.id] = Value(v.id, v.dtype, env.simplify_shape(v.shape), v.weak)
        return remap[v.id]

    def attr(a):
        if isinstance(a, sympy.Basic):
            return env.simplify(a)
        if type(a) is tuple:
            return tuple(attr(x) for x in a)
        return a

    nodes = tuple(Node(n.op, tuple(val(v) for v in n.inputs), tuple((k, attr(a)) for k, a in n.attrs),
                       tuple(val(o) for o in n.outputs), n.loc) for n in graph.nodes)
    g = Graph(tuple(val(v) for v in graph.inputs), nodes, tuple(val(v) for v in graph.outputs))
    outs = [OutputSpec("dim", env.simplify(o.payload)) if o.kind == "dim" else o for o in outputs]
    return g, outs


def _data_dependent_dims(graph: Graph, env: ShapeEnv, raw_nodes) -> list[DataDependentDim]:
    out = []
    for n in raw_nodes:
        if n.op == "index_dim":  # (its value is the size: axis None)
            u = n.attr("symbol")
            out.append(DataDependentDim(n.out.id, None, u, env.simplify(u)))
        if n.op == "scan":  # (the dims of a list's items its trips appended, where not known before)
            for o in n.outputs[n.attr("call").n_carried:]:
                out += [DataDependentDim(o.id, axis, d, env.simplify(d)) for axis, d in enumerate(o.shape)
                        if d in env.symbols and env.symbols[d].data_dependent]
        if n.op != "eager":
            continue
        for o in n.outputs:
            for axis, d in enumerate(o.shape):
                out.append(DataDependentDim(o.id, axis, d, env.simplify(d)))
    return out


# ------------------------------------------------------------ numpy proxy

# numpy's functions of one array-like: a list of traced arrays given them (`np.mean(outs, axis=0)`)
# is the array np.array makes of it, which numpy could not make of traced arrays itself
_OF_AN_ARRAY = frozenset("sum mean max min amax amin prod std var any all argmax argmin cumsum cumprod median "
                         "average ptp nansum nanmean nanmax nanmin transpose ravel reshape diff sort argsort flip "
                         "clip round around squeeze expand_dims nonzero count_nonzero unique lexsort".split())


def _of_an_array(ctx, fn, a, *args, **kw):
    if isinstance(a, (list, tuple)) and not isinstance(a, Stacked) and holds_traced(a):
        a = optable.array_of(ctx, a)
    return fn(a, *args, **kw)


class _NumpyProxy(types.ModuleType):
    """`np` as seen by the traced function: creation functions accept
    symbolic sizes, np.asarray passes Tracers through, np.random falls back."""

    def __init__(self, ctx):
        super().__init__("numpy")
        self._ctx = ctx

    def __getattr__(self, name):
        v = getattr(np, name)
        if name in _OF_AN_ARRAY:
            return functools.partial(_of_an_array, self._ctx, v)
        return _SCALAR_TYPES.get(v, v) if isinstance(v, type) else v

    def _has_sym(self, *xs):
        flat: list = []
        pytree.flatten(list(xs), flat)
        return any(isinstance(x, (SymInt, SymFloat, Tracer)) for x in flat)

    # Arrays the function creates are traced values, whatever their sizes: the
    # function may write traced values into them (`cov = np.zeros((M, M));
    # cov[i, i:] = c`), which a numpy array could not take.
    def zeros(self, shape, dtype=float, order="C", **kw):
        return self._create(np.zeros, shape, 0, dtype, order, kw)

    def ones(self, shape, dtype=float, order="C", **kw):
        return self._create(np.ones, shape, 1, dtype, order, kw)

    def empty(self, shape, dtype=float, order="C", **kw):
        return self._create(np.zeros, shape, 0, dtype, order, kw)

    def full(self, shape, fill_value, dtype=None, order="C", **kw):
        traced = isinstance(fill_value, (Tracer, SymInt, SymFloat))
        dt = np.asarray(fill_value).dtype if dtype is None and not traced else dtype
        if (dt is not None and not _traceable_dtype(dt)) or kw or order != "C":
            return np.full(shape, fill_value, dtype=dtype, order=order, **kw)
        r = optable.full(self._ctx, shape, fill_value, dtype)
        return np.full(shape, fill_value, dtype=dtype, order=order) if r is None else r

    def _create(self, npfn, shape, fill, dtype, order, kw):
        if not _traceable_dtype(dtype) or kw or order != "C":
            return npfn(shape, dtype=dtype, order=order, **kw)
        return optable.full(self._ctx, shape, fill, np.dtype(dtype))

    def arange(self, *args, dtype=None, **kw):
        if self._has_sym(*args) and not kw:
            r = optable.arange(self._ctx, *args, dtype=dtype)
            if r is not None:
                return r
        # (a number of the trace, `np.arange(0, 1, step)` of a Python float of the call: the length is of its
        # value, a graph break on it -- one path per value, as torch.compile specializes a float)
        args, kw = ([self._number(a) for a in args], {k: self._number(a) for k, a in kw.items()})
        return self._const(np.arange(*args, dtype=dtype, **kw))

    def _number(self, a):
        return self._ctx.decide_on(a, "item") if type(a) is Tracer and not a.ndim else a

    def _const(self, x):
        """x, made of constants: a numpy array, or once numpy met a traced
        array where it wanted data (TraceContext.trace_consts), a traced
        constant (`np.arange(n)[mask]` then indexes a traced array)."""
        if not self._ctx.trace_consts:
            return x
        if isinstance(x, tuple):
            return tuple(map(self._const, x))
        if isinstance(x, list):
            return list(map(self._const, x))
        return self._ctx.operand(x) if type(x) is np.ndarray and _traceable_dtype(x.dtype) else x

    def _traced(name, always=True):
        def create(self, *args, **kw):
            dt = kw.get("dtype", float)
            if (always and _traceable_dtype(dt)) or self._has_sym(*args, *kw.values()):
                r = getattr(optable, name)(self._ctx, *args, **kw)
                if r is not None:
                    return r
            return self._const(getattr(np, name)(*args, **kw))
        create.__name__ = name
        return create

    # (linspace and arange with static arguments stay numpy arrays: often used as data, not filled)
    tri, eye, linspace = _traced("tri"), _traced("eye"), _traced("linspace", always=False)
    logspace = _traced("logspace", always=False)
    hanning, hamming = _traced("hanning", always=False), _traced("hamming", always=False)
    blackman, bartlett = _traced("blackman", always=False), _traced("bartlett", always=False)
    indices, kaiser = _traced("indices", always=False), _traced("kaiser", always=False)
    del _traced

    def triu_indices(self, n, k=0, m=None):
        r = optable.triu_indices(self._ctx, n, k, m) if self._has_sym(n) else None
        return np.triu_indices(n, k, m) if r is None else r

    def tril_indices(self, n, k=0, m=None):
        r = optable.tril_indices(self._ctx, n, k, m) if self._has_sym(n) else None
        return np.tril_indices(n, k, m) if r is None else r

    @property
    def mgrid(self):
        return _Grid(np.mgrid, self)

    @property
    def ogrid(self):
        return _Grid(np.ogrid, self)

    def errstate(self, **kw):
        """np.errstate in the function: one that raises (or calls, or logs)
        on a floating-point error runs the signature in numpy, which does
        (compiled code computes numpy's values and raises nothing)."""
        if raises(v for k, v in kw.items() if k != "call"):
            raise Fallback(f"np.errstate({', '.join(f'{k}={v!r}' for k, v in kw.items() if k != 'call')}) in the "
                           "function: numpy raises where compiled code would not", user_location())
        return np.errstate(**kw)

    def seterr(self, **kw):
        if raises(kw.values()):
            raise Fallback("np.seterr(...) that raises, in the function: numpy raises where compiled code would not",
                           user_location())
        return np.seterr(**kw)

    def identity(self, n, dtype=None, *, like=None):
        return self.eye(n, dtype=float if dtype is None else dtype, like=like)

    # (a list a scan appended to, jit/tracer.py Stacked: its items stacked, whatever their number)
    def stack(self, arrays, axis=0, out=None, **kw):
        if isinstance(arrays, Stacked) and out is None and set(kw) <= {"dtype"}:
            return arrays.stack(axis, kw.get("dtype"))
        return np.stack(arrays, axis=axis, out=out, **kw)

    def concatenate(self, arrays, axis=0, out=None, **kw):
        if isinstance(arrays, Stacked) and out is None and set(kw) <= {"dtype"}:
            return arrays.concatenate(axis, kw.get("dtype"))
        return np.concatenate(arrays, axis=axis, out=out, **kw)

    def vstack(self, tup, **kw):
        return tup.vstack() if isinstance(tup, Stacked) and not kw else np.vstack(tup, **kw)

    def hstack(self, tup, **kw):
        return tup.hstack() if isinstance(tup, Stacked) and not kw else np.hstack(tup, **kw)

    def asarray(self, a, dtype=None, order=None, **kw):
        if isinstance(a, Stacked) and not kw and order is None:
            return a.stack(0, dtype)
        if isinstance(a, Tracer):  # (numpy's copy, or the array itself, as numpy decides from its layout)
            return self._of_traced(a, dtype, order, kw.get("copy"))
        if not kw and order is None and self._has_sym(a):
            return optable.array_of(self._ctx, a, dtype)
        r = np.asarray(a, dtype=dtype, order=order, **kw)
        return r if r is a else self._const(r)  # (an array the function holds stays itself)

    asanyarray = asarray

    def ascontiguousarray(self, a, dtype=None, **kw):
        return self.asarray(a, dtype, order="C", **kw)

    def array(self, a, dtype=None, copy=True, **kw):
        if isinstance(a, Stacked) and not kw:
            return a.stack(0, dtype)
        if isinstance(a, Tracer):
            if kw:  # (ndmin=, order=, subok=: numpy's own call, a new array)
                return optable.eager_call(self._ctx, np.array, [a], {"dtype": dtype, "copy": copy, **kw})
            return self._of_traced(a, dtype, None, copy)  # (np.array(a, copy=c) is np.asarray(a, copy=c))
        if not kw and self._has_sym(a):
            return optable.array_of(self._ctx, a, dtype)
        return self._const(np.array(a, dtype=dtype, copy=copy, **kw))

    def _of_traced(self, a: Tracer, dtype, order, copy):
        """np.asarray(a, dtype, order, copy=copy) of a traced value: a itself
        where numpy's is (its dtype and layout, copy not True), a copy where
        numpy copies (writes into it never reach a), numpy's ValueError where
        copy=False forbids one; of numpy's scalar, a 0-d array of it."""
        laid_so = a.in_order(order)
        same = dtype is None or np.dtype(dtype) == a.dtype
        scalar = not a.ndim and not isinstance(a.concrete, np.ndarray)
        if copy is False and not (same and laid_so and not scalar):
            raise ValueError("Unable to avoid copy while creating an array as requested.")
        if scalar:
            return self._ctx.emit("zero_d", [a if same else a.astype(dtype)], {})
        if copy or not laid_so:
            return a.astype(dtype or a.dtype)
        return a if same else a.astype(dtype)

    @property
    def random(self):
        return _RandomProxy()

    @property
    def fft(self):
        return _FftProxy(self._ctx)


class _Grid:
    """np.mgrid or np.ogrid as the traced function sees it: over integer
    slices with a symbolic bound, one traced np.arange per axis, broadcast
    (mgrid: stacked); otherwise numpy's arrays through _NumpyProxy._const,
    any other symbolic bound a Python number (specialized: a guard)."""

    def __init__(self, grid, proxy: _NumpyProxy):
        self._grid, self._proxy = grid, proxy

    def __getitem__(self, key):
        axes = key if isinstance(key, tuple) else (key,)
        if not all(isinstance(k, slice) for k in axes):
            return self._proxy._const(self._grid[key])
        bounds = [(k.start, k.stop, k.step) for k in axes]
        if self._proxy._has_sym(bounds) and all(
                x is None or type(x) is int or isinstance(x, SymInt) for b in bounds for x in b):
            return self._traced(bounds, isinstance(key, tuple))
        plain = tuple(slice(*(int(x) if isinstance(x, SymInt) else x for x in b)) for b in bounds)
        return self._proxy._const(self._grid[plain if isinstance(key, tuple) else plain[0]])

    def _traced(self, bounds, several: bool):
        p, n = self._proxy, len(bounds)
        ranges = [p.arange(0 if a is None else a, b, 1 if c is None else c) for a, b, c in bounds]
        if self._grid is np.ogrid:
            out = [r.reshape(tuple(-1 if i == k else 1 for i in range(n))) for k, r in enumerate(ranges)]
            return tuple(out) if several else out[0]
        shape = tuple(r.shape[0] for r in ranges)
        out = [np.broadcast_to(r.reshape(tuple(-1 if i == k else 1 for i in range(n))), shape)
               for k, r in enumerate(ranges)]
        return np.stack(out) if several else out[0]


class _ScalarTypeMeta(type):
    """The type of `np.float32` (and every numpy scalar type of a traceable
    dtype) as the traced function sees it: a subclass of the real type that
    compares, hashes and instance-checks as it, so `dtype=np.float32`,
    `np.finfo(np.float32)`, `isinstance(v, np.float64)` and dict keys are
    numpy's; called on a traced value, a cast (`np.float32(x.sum())`,
    `np.float64(s)`, `np.int64(n)`: numpy converts through float() or
    __array__, which would decide the value or run the function eagerly),
    else the real type's call.  (Only `is` tells them apart.)"""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls.real)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls.real)

    def __eq__(cls, other):
        return other is cls.real or other is cls

    def __hash__(cls):
        return hash(cls.real)

    def __call__(cls, *args, **kw):
        flat: list = []
        pytree.flatten(list(args), flat)
        traced = [x for x in flat if isinstance(x, (Tracer, SymInt, SymFloat))]
        if len(args) != 1 or kw or not traced:
            return cls.real(*args, **kw)
        (a,) = args
        if isinstance(a, Tracer):  # (a copy, as numpy's: np.float64(x) of an array is x.astype)
            if a.value.weak and a.dtype.kind in "fi" and np.dtype(cls.real).kind in "iu":  # (of a Python float or
                r = a.ctx.int_of(a, np.dtype(cls.real))  # int: Python's int() and numpy's range, every call)
            else:
                r = a.astype(cls.real)
        else:
            x = traced[0]
            if type(a) is SymInt and np.dtype(cls.real).kind in "iu":  # (numpy's OverflowError for a Python int
                # beyond the type, np.uint8(-1): the trace's own, and a guard that a call beyond traces again)
                info, h = np.iinfo(cls.real), a.ctx.hint(a.expr)
                if not info.min <= h <= info.max:
                    raise OverflowError(f"Python integer {h} out of bounds for {np.dtype(cls.real).name}")
                why = f"{user_location()}: a Python int within {np.dtype(cls.real).name}"
                a.ctx.env.compare(">=", a.expr, int(info.min), why)
                a.ctx.env.compare("<=", a.expr, int(info.max), why)
            r = optable.array_of(x.t.ctx if isinstance(x, SymFloat) else x.ctx, a, cls.real)
        return r[()] if r.ndim == 0 else r  # (a numpy scalar)


def _traceable_dtype(dtype) -> bool:
    try:
        return np.dtype(dtype).kind in "biufc"
    except TypeError:
        return False


_SCALAR_TYPES = {t: _ScalarTypeMeta(t.__name__, (t,), {"real": t, "__module__": "numpy"})
                 for t in set(np.sctypeDict.values())
                 if _traceable_dtype(t) and t not in (np.longdouble, np.clongdouble)}


class _FftProxy:
    """np.fft as the traced function sees it: fftfreq and rfftfreq of a
    traced size are traced (numpy's would refuse it: "n should be an
    integer"); the rest is numpy's."""

    def __init__(self, ctx):
        self._ctx = ctx

    def __getattr__(self, name):
        return getattr(np.fft, name)

    def fftfreq(self, n, d=1.0, device=None):
        r = optable.fftfreq(self._ctx, n, d) if device is None else None
        return np.fft.fftfreq(n, d, device=device) if r is None else r

    def rfftfreq(self, n, d=1.0, device=None):
        r = optable.fftfreq(self._ctx, n, d, real=True) if device is None else None
        return np.fft.rfftfreq(n, d, device=device) if r is None else r


# modules whose functions give another value, or have an effect, at every call (a clock, Python's
# random numbers, a warning, a log record): read by a trace, the function runs in numpy
_IMPURE_MODULES = frozenset({"time", "random", "uuid", "secrets", "logging", "warnings", "_warnings"})
_IMPURE_ATTRS = {"os": frozenset({"environ", "getenv", "urandom", "getpid", "times"}),
                 "datetime": frozenset({"datetime", "date"})}


def _impure(v) -> str | None:
    """What v is, when it is such a module, one of its functions (`from
    time import perf_counter`, random's `random`), a logger or os.environ."""
    if isinstance(v, types.ModuleType):
        return v.__name__ if v.__name__ in _IMPURE_MODULES or v.__name__ in _IMPURE_ATTRS else None
    if isinstance(v, (types.BuiltinFunctionType, types.FunctionType, types.MethodType)):
        owner = getattr(v, "__self__", None)
        mod = type(owner).__module__ if owner is not None and not isinstance(owner, types.ModuleType) else \
            getattr(v, "__module__", None)
        return f"{mod}.{v.__name__}" if mod in _IMPURE_MODULES else None
    logging = sys.modules.get("logging")
    if logging is not None and isinstance(v, (logging.Logger, logging.LoggerAdapter)):
        return "a logging.Logger"
    if v is os.environ:
        return "os.environ"
    if hasattr(type(v), "__next__"):  # (an iterator, a generator, a file: next() moves it on)
        return f"an iterator ({type(v).__name__})"
    return None


class _Refused:
    """What a traced function sees in place of _impure's values: using it
    (an attribute, a call) runs the function in numpy, with the reason."""

    def __init__(self, what: str):
        self._what = what

    def _refuse(self, what: str):
        raise Fallback(f"{what} inside a jitted function (its value or effect would be the trace's, once)",
                       user_location())

    def __getattr__(self, name):
        mod = sys.modules.get(self._what)
        allowed = _IMPURE_ATTRS.get(self._what)
        if allowed is not None and name not in allowed:
            return getattr(mod, name)  # (os.path.join, datetime.timedelta: no value of the moment)
        self._refuse(f"{self._what}.{name}")

    def __call__(self, *args, **kwargs):
        self._refuse(f"{self._what}()")

    def __iter__(self):
        return self

    def __next__(self):
        self._refuse(f"next() of {self._what}")


class _RandomProxy:
    def __getattr__(self, name):
        def refuse(*a, **kw):
            raise Fallback(f"np.random.{name} inside a jitted function (its result would be frozen)",
                           user_location())
        return refuse


_UNSET = object()


def _traced(v, copies: set, depth: int = 3) -> bool:
    """Whether v is (or a list, tuple, dict or set holds) a value of the
    trace: a traced array or size, a traced view, the proxies, a function
    made over one of the `copies` of globals."""
    if isinstance(v, (Tracer, SymInt, Stacked, HeldObject, HeldSequence, HeldMapping, _NumpyProxy, _RandomProxy,
                      _UserModule)):
        return True
    if isinstance(v, types.FunctionType):
        return id(v.__globals__) in copies
    if depth and isinstance(v, (list, tuple, set, frozenset)):
        return any(_traced(x, copies, depth - 1) for x in v)
    if depth and isinstance(v, dict):
        return any(_traced(x, copies, depth - 1) for x in v.values())
    return False


def _reads_through(x) -> bool:
    """A static argument the trace may read values through: a function,
    a bound method, a partial, a user's class or module."""
    return isinstance(x, (types.FunctionType, types.MethodType, functools.partial)) or jitted(x) is not None \
        or isinstance(x, type) and user_module(sys.modules.get(x.__module__)) \
        or isinstance(x, types.ModuleType) and user_module(x)


class _Traceables:
    """Copies of the user's functions whose globals and closures see the
    numpy proxy (creation functions keep symbolic sizes) and traced views of
    the arrays (and objects holding arrays) they name.  The user functions
    they call, directly or through a user module, are copied the same way,
    so `np.tri(T)` in a helper is as symbolic as in the jitted function.
    What they read is found at paths from the jitted function's globals and
    closure, through the helpers (`helper.__globals__['SCALE']`) and user
    modules (`mod.W`) on the way: arrays there are held, other values keyed.

    A copy runs over a copy of its module's globals (the proxy and the views
    in place of what it reads); what the traced run assigns there (`global
    n; n += 1`, a name it defines) is written into the module's own globals
    when the trace is done (`write_globals`), as the run would have: its
    Python side effects run while tracing, as a list it appends to does."""

    def __init__(self, proxy, lifter: Lifter):
        self.proxy, self.lifter = proxy, lifter
        self.done: dict = {}
        self.copies: list = []  # (the module's globals, the copy's, the copy's as made)
        lifter.traceable = self.function

    def root(self, fn):
        """fn as the trace runs it; a bound method's `self` is a traced view
        of the object."""
        if isinstance(fn, types.MethodType) and holder(fn.__self__):
            return types.MethodType(self.function(fn.__func__, root=True),
                                    HeldObject(self.lifter, Path(("self",)), fn.__self__))
        if type(fn) is functools.partial:  # (`jit(partial(f, a=2.0))`: its arguments and f's globals keyed; its
            return self._partial(fn, Path(("root",)), keywords=False)  # keywords are parameters: jit/binding.py)
        return self.function(fn, root=True)

    def _ours(self) -> set:
        return {id(copy) for _, copy, _ in self.copies}

    def traced(self, v) -> bool:
        """Whether v is (or holds) a value of the trace (_traced)."""
        return _traced(v, self._ours())

    def write_globals(self) -> list:
        """Assign in the modules' globals what the traced run assigned in
        the copies' (-> their names); a traced value kept there (an array a
        compiled call would not make) runs the function eagerly instead."""
        ours = self._ours()
        writes = [(g, k, copy.get(k, _UNSET)) for g, copy, made in self.copies
                  for k in copy.keys() | made.keys() if copy.get(k, _UNSET) is not made.get(k, _UNSET)]
        for _, k, now in writes:
            if _traced(now, ours):
                raise Fallback(f"assigns a traced value to the global {k!r} (a compiled call would not)")
        for g, k, now in writes:
            if now is _UNSET:
                g.pop(k, None)
            else:
                g[k] = now
        return sorted({k for _, k, _ in writes})

    def function(self, fn, path: Path | None = None, root: bool = False):
        """The copy of user function `fn`; `path` is where the jitted
        function reaches it (None: nowhere a call can read again), so what it
        reads is keyed (and its arrays held) at paths through it."""
        if not isinstance(fn, types.FunctionType) or not user_file(fn.__code__.co_filename):
            return fn
        if fn in self.done:
            return self.done[fn]
        self.done[fn] = fn  # (recursion: a function calling itself sees itself until its copy exists)

        def at(kind, k):
            return Path((kind, k)) if root else path.child(kind, k) if path is not None else None

        stored = _stores_nonlocals(fn.__code__)
        if stored:  # (a compiled call would not assign it: its closure's later calls would see the trace's value)
            raise Fallback(f"{fn.__qualname__} assigns the nonlocal {', '.join(stored)} (its closure's state: numpy "
                           "runs it)", user_location())
        g = fn.__globals__
        hits = {}
        for k in global_names(fn.__code__) - assigned_only(fn.__code__):  # (a global it only assigns is not read)
            if k in g:
                v = self.value(g[k], at("global", k))
                if v is not g[k]:
                    hits[k] = v
            elif k == "print":  # (the builtin: see _Print)
                hits[k] = _Print(self.proxy._ctx)
            elif k in ("open", "input"):  # (the builtins: a file written, a line read, once per trace)
                hits[k] = _Refused(k)
            elif k in TRACED_BUILTINS:  # (len: a traced array's first dim stays a symbol; max, min: a select)
                hits[k] = TRACED_BUILTINS[k]
        cells = fn.__closure__ or ()
        new_cells = []
        for i, c in enumerate(cells):
            try:
                v = c.cell_contents
            except ValueError:  # an empty cell
                new_cells.append(c)
                continue
            w = self.value(v, at("cell", i))
            new_cells.append(c if w is v else types.CellType(w))
        new = lift.traced_copy(fn, {**g, **hits}, tuple(new_cells), self.proxy._ctx)
        if new is None:
            if not hits and all(a is b for a, b in zip(new_cells, cells)) and not _assigns_globals(fn.__code__):
                return fn
            new = types.FunctionType(fn.__code__, {**g, **hits}, fn.__name__, fn.__defaults__,
                                     tuple(new_cells) or None)
            new.__kwdefaults__ = fn.__kwdefaults__
        new.__dict__.update(fn.__dict__)  # (its own attributes, `f.scale`: keyed where value() finds it)
        self.copies.append((g, new.__globals__, dict(new.__globals__)))
        self.done[fn] = new
        return new

    def value(self, v, path):
        """What a copied function sees in place of the global (or closure
        variable) v found at `path` (None: not a path a call can read)."""
        if v is np or isinstance(v, _NumpyProxy):  # (another trace's: a function it made, rebound by a scan's body)
            return self.proxy
        if isinstance(v, functools.partial) and type(v) is not functools.partial and jitted(v.func) is not None \
                and len(v.args) == 1 and not v.keywords:  # (a jitted method bound to its object, jit/api.py _Bound:
            v = types.MethodType(jitted(v.func), v.args[0])  # its function, traced inline, on the object)
        if path is not None and isinstance(v, types.MethodType) and holder(v.__self__) \
                and isinstance(v.__func__, types.FunctionType):  # (a bound method passed in: self.alpha keyed)
            return types.MethodType(self.function(v.__func__, path.child("attr", "__func__")),
                                    HeldObject(self.lifter, path.child("attr", "__self__"), v.__self__))
        if path is not None and type(v) is functools.partial:
            return self._partial(v, path)
        what = _impure(v)
        if what is not None:
            return _Refused(what)
        fn = jitted(v) or v  # (another jit's function: traced inline)
        if isinstance(fn, types.FunctionType):
            if path is not None:
                self.lifter.guard(path, v)  # (rebinding a helper is a new key)
                for k, x in fn.__dict__.items():  # (and so is a change to an attribute of its own, `f.scale`)
                    self.lifter.guard(path.child("attr", k), x)
            return self.function(fn, path)
        if isinstance(v, types.ModuleType) and user_module(v):
            return _UserModule(self, v, path)
        refuse_random(v, path or "a value the function reads")
        if path is not None:
            if type(v) is np.ndarray or holder(v) or type(v) in (list, tuple, dict) and held_container(v) \
                    or self.lifter.kind(path):  # (a held number keyed by its type: Lifter.lift_int, lift)
                return self.lifter.wrap(path, v)
            self.lifter.guard(path, v)
        return v

    def _partial(self, v: functools.partial, path: Path, keywords: bool = True) -> functools.partial:
        """A partial at `path` as the trace calls it: its function, arguments
        and (unless the call passes them) keywords keyed there."""
        self.lifter.guard(path.child("attr", "args").child("len", 0), len(v.args))
        if keywords:
            self.lifter.guard(path.child("attr", "keywords").child("keys", 0), tuple(v.keywords))
        return functools.partial(self.value(v.func, path.child("attr", "func")),
                                 *[self.value(a, path.child("attr", "args").child("item", i))
                                   for i, a in enumerate(v.args)],
                                 **{k: self.value(a, path.child("attr", "keywords").child("item", k))
                                    for k, a in v.keywords.items() if keywords})


class _Print:
    """print() as a traced function sees it: a side effect of every call.
    The traced call's text is shown when its result is the trace's
    (TraceResult.printed); an effect node prints each later call's values
    (PrintCall).  Text already formatted from a traced value (an f-string
    of a size or an array: its symbol, not its value), or a print to a
    file, runs the signature in numpy, printing as written."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __call__(self, *args, sep=" ", end="\n", file=None, flush=False):
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        if file is not None or not isinstance(sep, str) or not isinstance(end, str):
            raise Fallback("print() to a file or with a separator of its own: it runs in numpy", user_location())
        leaves: list = []
        treedef = pytree.flatten(args, leaves)
        slots, inputs, kinds = [], [], []
        for k, v in enumerate(leaves):
            if isinstance(v, str) and ("SymInt(" in v or "Tracer(" in v or "SymFloat(" in v):
                raise Fallback("print() of text formatted from a traced size or value (an f-string): a compiled "
                               "call would print its symbol, so it runs in numpy", user_location())
            if isinstance(v, (SymInt, SymFloat, Tracer)):
                c = v.concrete if isinstance(v, Tracer) else None
                kinds.append("int" if isinstance(v, SymInt) else "float" if isinstance(v, SymFloat)
                             else "scalar" if isinstance(c, np.generic)
                             else type(c).__name__ if type(c).__name__ in PYTHON_TYPES else "array")
                slots.append(k)
                inputs.append(v)
        call = PrintCall(treedef, tuple(None if k in slots else v for k, v in enumerate(leaves)), tuple(slots),
                         tuple(kinds), sep, end, bool(flush))
        self.ctx.emit_effect(call, inputs)
        self.ctx.printed.append(call.text([v.concrete if isinstance(v, Tracer) else self.ctx.hint(v.expr)
                                           if isinstance(v, SymInt) else v.hint for v in inputs]))


@dataclass(frozen=True, eq=False)
class PrintCall:
    """A print() of a traced function, run at every call with the values
    of its traced arguments (`slots` of the flattened arguments, each
    converted back to what the traced call printed: an int for a size, a
    numpy scalar for a reduction's result...)."""
    treedef: object
    leaves: tuple
    slots: tuple
    kinds: tuple
    sep: str
    end: str
    flush: bool

    def _args(self, xs) -> tuple:
        leaves = list(self.leaves)
        for slot, kind, x in zip(self.slots, self.kinds, xs):  # (a size an int, a Python float of dims a float)
            leaves[slot] = PYTHON_TYPES[kind](x) if kind in PYTHON_TYPES else np.asarray(x)[()] \
                if kind == "scalar" else x
        return pytree.unflatten(self.treedef, iter(leaves))

    def text(self, xs) -> str:
        out = io.StringIO()
        print(*self._args(xs), sep=self.sep, end=self.end, file=out)
        return out.getvalue()

    def __call__(self, xs):
        print(*self._args(xs), sep=self.sep, end=self.end, flush=self.flush)
        return [np.True_]  # (the effect node's token)

    def __repr__(self) -> str:
        return "print"


class _UserModule(types.ModuleType):
    """A user module as copied functions see it: its functions copied too."""

    def __init__(self, t: _Traceables, mod, path):
        super().__init__(mod.__name__)
        self._t, self._mod, self._path = t, mod, path

    def __getattr__(self, name):
        return self._t.value(getattr(self._mod, name), self._path.child("attr", name) if self._path else None)


@functools.lru_cache(maxsize=1024)
def _assigns_globals(code) -> bool:
    """Whether a function's code (or the code nested in it) may assign a
    global: `global` statements, or a call of globals()."""
    return ("globals" in code.co_names
            or any(i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") for i in dis.get_instructions(code))
            or any(_assigns_globals(c) for c in code.co_consts if isinstance(c, types.CodeType)))



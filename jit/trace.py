"""Driving one trace: make symbolic inputs, run the user function on Tracers
(with numpy's creation functions intercepted), and collect the Graph, the
shape environment and what each input dim became."""
from __future__ import annotations

import types
from dataclasses import dataclass, field

import numpy as np
import sympy

from jit import pytree
from jit.tracer import Fallback, SymInt, TraceContext, TraceError, Tracer, user_location
from shapes.env import DataDependentError, ShapeEnv
from shapes.guards import InputDim
from shapes.ir import Graph, Node, Value
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
    writes: list = field(default_factory=list)  # (caller's array, contents) the traced call writes

    def apply_writes(self) -> None:
        """Give the traced call numpy's effects on the arguments it wrote into."""
        for leaf, contents in self.writes:
            np.copyto(leaf, contents)
        self.writes = []


@dataclass(frozen=True)
class InputSpec:
    """How to trace one leaf: ("array", path) | ("scalar", path) | ("static", value)."""
    kind: str
    path: str


def trace(fn, arg_treedef, leaves, specs: list[InputSpec], *, dynamic, dynamic_dims=frozenset(),
          user_dims=None, constraints=(), rebind=None) -> TraceResult:
    """Trace fn on `leaves` (the flattened bound arguments).  `rebind` maps
    the bound tuple back to (args, kwargs)."""
    env = ShapeEnv()
    ctx = TraceContext(env)
    named: dict[str, sympy.Symbol] = {}
    input_dims: list[InputDim] = []
    traced_leaves, inputs = [], []
    n_arrays = 0
    for leaf, spec in zip(leaves, specs):
        if spec.kind == "static":
            traced_leaves.append(leaf)
            continue
        if spec.kind == "scalar":
            # only a Python float is weak: np.float64 (a float subclass) is a strong scalar
            py_float = type(leaf) is float
            v = ctx.new_value(np.float64 if py_float else np.asarray(leaf).dtype, (), weak=py_float)
        else:
            shape = []
            names = (user_dims or {}).get(spec.path)
            if names is not None and len(names) != leaf.ndim:
                raise ValueError(f"argument {spec.path}: dims={names!r} names {len(names)} dims "
                                 f"but the array has {leaf.ndim}")
            for axis, d in enumerate(leaf.shape):
                src = f"{spec.path}.shape[{axis}]"
                name = names[axis] if names is not None else None
                if isinstance(name, int):
                    if d != name:
                        raise ValueError(f"argument {spec.path}: dim {axis} is {d}, declared {name}")
                    shape.append(d)
                    if d >= 2 and dynamic is not False:
                        input_dims.append(InputDim(n_arrays, axis, sympy.Integer(d), src))
                    continue
                if d < 2 or dynamic is False:
                    shape.append(d)
                    continue
                if dynamic == "auto" and (n_arrays, axis) not in dynamic_dims and name is None:
                    shape.append(d)
                    input_dims.append(InputDim(n_arrays, axis, sympy.Integer(d), src))
                    continue
                if name is not None and name in named:
                    sym = named[name]
                    if env.symbols[sym].hint != d:
                        raise ValueError(f"argument {spec.path}: dim {name} is {d} here but "
                                         f"{env.symbols[sym].hint} at {env.symbols[sym].source}")
                else:
                    sym = env.new_symbol(d, src, name=name)
                    if name is not None:
                        named[name] = sym
                shape.append(sym)
                input_dims.append(InputDim(n_arrays, axis, sym, src))
            v = ctx.new_value(leaf.dtype, shape)
            n_arrays += 1
        inputs.append(v)
        traced_leaves.append(Tracer(ctx, v, leaf))
    _apply_constraints(env, named, constraints)

    bound = pytree.unflatten(arg_treedef, iter(traced_leaves))
    args, kwargs = rebind(bound) if rebind is not None else (bound, {})
    try:
        result = _with_numpy_proxy(fn, ctx)(*args, **kwargs)
    except DataDependentError as e:
        raise Fallback(str(e), user_location()) from None
    except TraceError as e:
        raise Fallback(f"internal trace error: {e}", user_location()) from None

    out_leaves: list = []
    out_def = pytree.flatten(result, out_leaves)
    writebacks = _writebacks(ctx, inputs, leaves, specs)
    outputs, concrete = [], []
    for r in out_leaves:
        if isinstance(r, Tracer):
            if r.ctx is not ctx:
                raise Fallback("returned a Tracer from another trace")
            outputs.append(OutputSpec("value", r.value.id))
            concrete.append(r.concrete)
        elif isinstance(r, SymInt):
            outputs.append(OutputSpec("dim", r.expr))
            concrete.append(env.hint(r.expr))
        else:
            outputs.append(OutputSpec("const", r))
            concrete.append(r)
    for target, (final, _) in writebacks.items():
        outputs.append(OutputSpec("writeback", (target, final.id)))
    graph = Graph(tuple(inputs), tuple(ctx.nodes), tuple(
        _find(ctx, o.value_id, inputs) for o in outputs if o.value_id is not None))
    graph, outputs = _finalize(graph, env, outputs)
    dd_dims = _data_dependent_dims(graph, env, ctx.nodes)
    eager = [f"{n.attr('call')!r} at {n.loc}" for n in graph.nodes if n.op == "eager"]
    return TraceResult(graph, env, input_dims, out_def, outputs, dd_dims,
                       pytree.unflatten(out_def, iter(concrete)), eager,
                       [lc for _, lc in writebacks.values()])


def _writebacks(ctx: TraceContext, inputs, leaves, specs) -> dict:
    """{input value id: (its final value, (the caller's array, its final
    concrete contents))} for every argument the function wrote into."""
    arrays = [leaf for leaf, spec in zip(leaves, specs) if spec.kind != "static"]
    by_id = {v.id: a for v, a in zip(inputs, arrays)}
    out = {}
    for s in ctx.mutated.values():
        if s.origin.id in by_id and s.root.value.id != s.origin.id:
            out[s.origin.id] = (s.root.value, (by_id[s.origin.id], s.root.concrete))
    return out


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
    for text in constraints:
        try:
            cond = sympy.sympify(text, locals=dict(named))
        except (sympy.SympifyError, SyntaxError) as e:
            raise ValueError(f"constraint {text!r}: {e}") from None
        unknown = cond.free_symbols - set(named.values())
        if unknown:
            raise ValueError(f"constraint {text!r} names {sorted(map(str, unknown))}, "
                             f"which are not dims named in dims=")
        hint = {s: sympy.Integer(env.symbols[s].hint) for s in cond.free_symbols}
        if not bool(cond.xreplace(hint)):
            vals = ", ".join(f"{s}={env.symbols[s].hint} ({env.symbols[s].source})" for s in cond.free_symbols)
            raise ValueError(f"constraint {text!r} is violated: {vals}")
        if (isinstance(cond, sympy.core.relational.Relational) and isinstance(cond.lhs, sympy.Symbol)
                and cond.rhs.is_Integer and cond.rel_op in ("<=", "<", ">=", ">")):
            b = int(cond.rhs)
            lo = {">=": b, ">": b + 1}.get(cond.rel_op)
            hi = {"<=": b, "<": b - 1}.get(cond.rel_op)
            env.constrain(cond.lhs, lo=lo, hi=hi)
        else:
            from shapes.env import Guard
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
        if n.op != "eager":
            continue
        for o in n.outputs:
            for axis, d in enumerate(o.shape):
                out.append(DataDependentDim(o.id, axis, d, env.simplify(d)))
    return out


# ------------------------------------------------------------ numpy proxy

class _NumpyProxy(types.ModuleType):
    """`np` as seen by the traced function: creation functions accept
    symbolic sizes, np.asarray passes Tracers through, np.random falls back."""

    def __init__(self, ctx):
        super().__init__("numpy")
        self._ctx = ctx

    def __getattr__(self, name):
        return getattr(np, name)

    def _has_sym(self, *xs):
        flat: list = []
        pytree.flatten(list(xs), flat)
        return any(isinstance(x, (SymInt, Tracer)) for x in flat)

    def zeros(self, shape, dtype=float, order="C", **kw):
        return self._create(np.zeros, shape, 0, dtype, order, kw)

    def ones(self, shape, dtype=float, order="C", **kw):
        return self._create(np.ones, shape, 1, dtype, order, kw)

    def empty(self, shape, dtype=float, order="C", **kw):
        return self._create(np.zeros, shape, 0, dtype, order, kw)

    def full(self, shape, fill_value, dtype=None, order="C", **kw):
        if not self._has_sym(shape) or isinstance(fill_value, (Tracer, SymInt)) or kw or order != "C":
            return np.full(shape, fill_value, dtype=dtype, order=order, **kw)
        from jit.optable import full
        return full(self._ctx, shape, fill_value, dtype)

    def _create(self, npfn, shape, fill, dtype, order, kw):
        if not self._has_sym(shape) or kw or order != "C":
            return npfn(shape, dtype=dtype, order=order, **kw)
        from jit.optable import full
        return full(self._ctx, shape, fill, np.dtype(dtype))

    def arange(self, *args, dtype=None, **kw):
        if self._has_sym(*args) and not kw:
            from jit.optable import arange
            r = arange(self._ctx, *args, dtype=dtype)
            if r is not None:
                return r
        return np.arange(*args, dtype=dtype, **kw)

    def asarray(self, a, dtype=None, **kw):
        if isinstance(a, Tracer):
            return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
        return np.asarray(a, dtype=dtype, **kw)

    asanyarray = ascontiguousarray = asarray

    def array(self, a, dtype=None, copy=True, **kw):
        if isinstance(a, Tracer):
            return a.astype(dtype or a.dtype)
        return np.array(a, dtype=dtype, copy=copy, **kw)

    @property
    def random(self):
        return _RandomProxy()


class _RandomProxy:
    def __getattr__(self, name):
        def refuse(*a, **kw):
            raise Fallback(f"np.random.{name} inside a jitted function (its result would be frozen)",
                           user_location())
        return refuse


def _with_numpy_proxy(fn, ctx):
    """A copy of fn whose globals and closure see the numpy proxy."""
    if not isinstance(fn, types.FunctionType):
        return fn
    proxy = _NumpyProxy(ctx)
    g = fn.__globals__
    hits = [k for k, v in g.items() if v is np]
    cells = fn.__closure__
    cell_hits = cells and any(_cell_is_np(c) for c in cells)
    if not hits and not cell_hits:
        return fn
    if hits:
        g = dict(g)
        for k in hits:
            g[k] = proxy
    if cell_hits:
        cells = tuple(types.CellType(proxy) if _cell_is_np(c) else c for c in cells)
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, cells)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def _cell_is_np(c) -> bool:
    try:
        return c.cell_contents is np
    except ValueError:
        return False

"""An executable's Python source, generated from its steps: one function
`run(inputs, dims)` that unpacks the inputs and bound dims, runs each step
(a kernel call, runtime/kernelcall.py; a numpy op inline; an eager call),
frees each intermediate after its last read (runtime/bufferplan.py), checks
what the trace relied on, and returns the flat outputs.  Also the names
that source calls, and how to rebuild its constants in another process."""
from __future__ import annotations

import ctypes
import operator
import time

import numpy as np
import sympy

from shapes.ir import ArrayConst
from shapes.ops import ELEMENTWISE, OPS, index_of
from shapes.pyexpr import ident, to_python
from runtime import gemmchoice, gemv, kernelcall
from runtime.bufferplan import last_stop, plan_buffers, step_io
from runtime.kernelcall import KernelCall
from runtime.runeagerly import Aliased, BreakMismatch, DtypeMismatch, ShapeMismatch
from runtime.threadpool import dgemv_address, native_pool, parallel_for


# view ops run as the array's method, with the attribute that is its one argument
_METHODS = {"reshape": "shape", "transpose": "perm"}


def namespace(pool) -> dict:
    """The names the generated source calls (its constants come on top)."""
    return {"ShapeMismatch": ShapeMismatch, "Aliased": Aliased, "BreakMismatch": BreakMismatch,
            "DtypeMismatch": DtypeMismatch,
            "_shape": np.shape, "_empty": np.empty, "_matmul": np.matmul, "_copyto": np.copyto,
            "_par": parallel_for, "_pool": pool, "_check_bounds": kernelcall.check_bounds,
            "_errcell": kernelcall.errcell_address, "_rows4": kernelcall.rows4,
            "_run_lifted": kernelcall.run_lifted, "_epilogue_args": kernelcall.epilogue_args,
            "_addressof": ctypes.addressof, "_item": _item, "_WARMUP": _WARMUP, "_maximum": _maximum,
            "_minimum": _minimum, "_aliased": _aliased, "_own": _own, "_slice": _slice, "_copy": _copy,
            "_decided": _decided, "_pypow": _pypow, "_gemm_best": gemmchoice.BEST,
            "_gemm_class": gemmchoice.shape_class, "_gemm_decide": gemmchoice.decide,
            "_ROUNDS": range(gemmchoice.ROUNDS), "_clock": time.perf_counter, "_last": {},
            "_gemv_parts": gemv.parts, "_gemv_split": gemv.split,
            "_product_chunk": kernelcall.product_chunk, "_snap": _snap, "_QUIET": _QUIET,
            "_quiet_set": _quiet_set, "_quiet_reset": _quiet_reset}


try:  # numpy's error state, a context variable (numpy 2's own): set and reset around the steps that would
    # warn, and read at every call (jit/eager.py: an errstate that raises runs the call in numpy)
    from numpy._core._ufunc_config import _extobj_contextvar as ERRSTATE
except ImportError:  # (another numpy: errstate's own context manager)
    ERRSTATE = None
if ERRSTATE is not None:
    with np.errstate(all="ignore"):
        _QUIET = ERRSTATE.get()
    _quiet_set, _quiet_reset = ERRSTATE.set, ERRSTATE.reset
else:
    _QUIET = {"all": "ignore"}

    def _quiet_set(state):
        cm = np.errstate(**state)
        cm.__enter__()
        return cm

    def _quiet_reset(cm):
        cm.__exit__(None, None, None)


def _snap(x):
    """An effect's argument as it is now (a later step may reuse its buffer)."""
    return np.array(x) if isinstance(x, np.ndarray) else x


# how Python reads a traced value at a graph break (jit/tracer.py takes the same)
OUTCOME = {"bool": bool, "float": float, "int": int, "index": operator.index,
           "item": lambda x: x.item() if isinstance(x, (np.ndarray, np.generic)) else x}


# elementwise ops numpy computes without a floating-point warning (comparisons, logic, selection): an
# executable whose numpy steps are only these takes no quiet error state (its set and reset: 0.2 us a call)
_NEVER_WARN = frozenset({"less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "logical_and",
                         "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
                         "invert", "isnan", "isinf", "isfinite", "signbit", "where", "absolute", "negative",
                         "positive"})


def _pypow(a, b):
    """Python's a ** b of Python numbers; a call whose result is complex (a
    negative base, a fractional exponent), where the trace's was a float,
    decides otherwise (its trace runs the function in numpy)."""
    r = a ** b
    if type(r) is complex:
        raise BreakMismatch()
    return r


def _decided(kind: str, x, outcome) -> bool:
    """Whether value x decides `kind` (bool(), int()...) as the trace's did;
    not when numpy's decision raises (int() of a NaN): numpy's call, traced
    again, takes its own path to the error, or not."""
    try:
        a = OUTCOME[kind](x)
    except (ValueError, OverflowError, TypeError):
        return False
    return a == outcome or (a != a and outcome != outcome)  # NaN decides as NaN did


# CPython 3.11 specializes a function's bytecode (LOAD_GLOBAL from a dict,
# BINARY_SUBSCR of an array...) only after 8 calls or backward jumps: an
# executable runs every line once a call, so an unrolled loop's thousands of
# steps ran unspecialized (~40% slower) for its first 8 calls.  A loop of 8
# empty turns at the top makes the first call specialize.  (3.12 and later
# specialize from the start.)  The loop costs ~0.2 us a call: only
# executables of WARMUP_STEPS steps or more (an unrolled loop, milliseconds a
# call) have it; a short one reaches its 8 calls soon enough.
_WARMUP = range(8)
WARMUP_STEPS = 64


def _maximum(a, b):
    """np.maximum of two 0-d values of one dtype: two numpy scalars (a
    loop's `np.maximum(t[i, j - 1], t[i + 1, j])`) are picked without a
    ufunc call by numpy's own rule (b on a tie, so -0.0 and 0.0 come out as
    numpy's; a NaN propagates); anything else goes to numpy."""
    if type(a) is type(b) and isinstance(a, np.generic):
        return a if a > b or a != a else b
    return np.maximum(a, b)


def _minimum(a, b):
    """np.minimum as _maximum."""
    if type(a) is type(b) and isinstance(a, np.generic):
        return a if a < b or a != a else b
    return np.minimum(a, b)


# (not power: ndarray's ** takes np.square for an exponent of 2, another dtype for bools)
_OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "floor_divide": "//",
              "remainder": "%", "less": "<", "less_equal": "<=", "greater": ">",
              "greater_equal": ">=", "equal": "==", "not_equal": "!="}


# Python's operators on Python ints (weak int operands): exact where numpy's int64 would wrap
_PY_OPERATORS = {"add": "{} + {}", "subtract": "{} - {}", "multiply": "{} * {}", "floor_divide": "{} // {}",
                 "remainder": "{} % {}", "bitwise_and": "{} & {}", "bitwise_or": "{} | {}",
                 "bitwise_xor": "{} ^ {}", "left_shift": "{} << {}", "right_shift": "{} >> {}",
                 "invert": "~{}", "negative": "-{}"}


# ... and on Python floats (weak float results of weak int and float operands:
# 1.0 / n, d ** -0.5 of dims), as the function's own code computes them
_PY_FLOAT_OPERATORS = {**{op: _PY_OPERATORS[op] for op in ("add", "subtract", "multiply", "negative")},
                       "divide": "{} / {}", "floor_divide": "{} // {}", "remainder": "{} % {}",
                       "absolute": "abs({})"}


def _index_source(items, arrays: list[str], const) -> str:
    """Python source of the numpy index of normalized items (shapes/indexing.py
    and ("array", k): the k-th of `arrays`): a constant when nothing in it
    changes from call to call."""
    if not arrays and not _has_sym(items):
        idx = index_of(items, ())
        return const(idx[0] if len(idx) == 1 else idx)  # (x[5], not x[(5,)]: numpy's faster path)
    parts = []
    for it in items:
        if it[0] == "array":
            parts.append(arrays[it[1]])
        elif it[0] == "int":
            parts.append(to_python(it[1]) if isinstance(it[1], sympy.Basic) else str(it[1]))
        elif it[0] == "new":
            parts.append("None")
        elif not _has_sym(it):
            parts.append(const(index_of((it,), ())[0]))
        else:
            _, start, step, length = it
            parts.append(f"_slice({to_python(sympy.sympify(start))}, {step}, {to_python(sympy.sympify(length))})")
    return parts[0] if len(parts) == 1 else "(" + "".join(p + ", " for p in parts) + ")"


def _trim_full(items, shape) -> tuple:
    """items without the slices ending them that take a whole axis of shape
    (numpy's implicit trailing slices give the same view)."""
    items = tuple(items)
    while items and items[-1][0] == "slice":
        axis = sum(1 for it in items if it[0] != "new") - 1
        _, start, step, length = items[-1]
        if not (start == 0 and step == 1 and axis < len(shape) and sympy.sympify(length - shape[axis]) == 0):
            break
        items = items[:-1]
    return items


def _symbols_of(items) -> set:
    return set().union(*(x.free_symbols for it in items for x in it if isinstance(x, sympy.Basic)))


def _slice(start: int, step: int, length: int) -> slice:
    stop = start + step * length  # (as shapes/ops.py index_from_items)
    return slice(start, None if stop < 0 else stop, step)


def _copy(x):
    return np.array(x, copy=True)


def _own(x, argument):
    """x, or a copy of it where it lies in the argument's buffer."""
    return _copy(x) if np.may_share_memory(x, argument) else x


def _aliased(x, others) -> bool:
    for o in others:
        if _may_share_memory(x, o):
            return True
    return False


_may_share_memory = np.may_share_memory


def _has_sym(a) -> bool:
    if isinstance(a, sympy.Basic):
        return True
    return type(a) is tuple and any(_has_sym(x) for x in a)


def _item(x):
    """A weak value's Python number (numpy gives a scalar, or a 0-d array: float() of a 0-d argument)."""
    return x.item() if isinstance(x, np.generic) or type(x) is np.ndarray and not x.ndim else x


def rebuild_const(recipe: tuple, functions: dict):
    kind = recipe[0]
    if kind == "value":
        return recipe[1]
    if kind == "op":
        return OPS[recipe[1]].ref
    if kind == "kernel":
        return functions[recipe[1]]
    if kind == "address":
        return kernelcall.address(functions[recipe[1]])
    if kind == "gemv":
        return dgemv_address()
    if kind == "pool":
        address = native_pool()
        if address is None:
            raise RuntimeError("shapejit: this executable runs kernels on the native thread pool, which is not running")
        return address
    raise ValueError(f"unknown constant recipe {recipe!r}")


class Source:
    """What the generated lines name: each value's variable (by value id),
    the constants (each with how to rebuild it), and the index expressions
    of the input dims only, computed once at the top."""

    def __init__(self, pool, symbols):
        self.ns = namespace(pool)
        self.names: dict[int, str] = {}
        self.recipes: dict[str, tuple] = {}
        self.hoisted: dict[str, str] = {}  # index source -> the name it is computed into once
        self._consts: dict[int, str] = {}
        self._input_dims = frozenset(symbols)

    def const(self, obj, recipe: tuple | None = None) -> str:
        key = id(obj)
        if key not in self._consts:
            self._consts[key] = name = f"_k{len(self._consts)}"
            self.ns[name] = obj
            self.recipes[name] = recipe or ("value", obj)
        return self._consts[key]

    def attr_src(self, a) -> str:
        if isinstance(a, sympy.Basic):
            return to_python(a)
        if type(a) is tuple and _has_sym(a):
            return "(" + "".join(self.attr_src(x) + ", " for x in a) + ")"
        return self.const(a)

    def index_src(self, items, arrays, shape=None) -> str:
        """The index's source; with the indexed array's shape, the full
        slices that end it left out (x[t], not x[t, 0:n:1]: numpy's fast
        path, and no slice built per call)."""
        if shape is not None:
            items = _trim_full(items, shape)  # (all of them: x[()], a view, or a 0-d array's scalar)
        src = _index_source(items, arrays, self.const)
        if arrays or src.isidentifier() or not _symbols_of(items) <= self._input_dims:  # (a name: a constant, a dim)
            return src
        return self.hoisted.setdefault(src, f"_ix{len(self.hoisted)}")


def generate(graph, steps, symbols, outputs, dd_dims, functions, pool, pooled, dd_checks=()):
    """-> (source, namespace, consts): consts says how to rebuild each
    constant the source names (PortableExecutable)."""
    src = Source(pool, symbols)
    names, const = src.names, src.const
    plan = plan_buffers(graph, steps, outputs, pooled, last_stop(steps, outputs, dd_dims, dd_checks))
    lines = ["def run(inputs, dims):"] + (["    for _ in _WARMUP: pass"] if len(steps) >= WARMUP_STEPS else [])
    for v in graph.inputs:
        names[v.id] = f"v{v.id}"
    if graph.inputs:
        lines.append("    " + "".join(f"{names[v.id]}, " for v in graph.inputs) + "= inputs")
    if symbols:
        lines.append("    " + "".join(f"{ident(s)}, " for s in symbols) + "= dims")
    head = len(lines)
    writebacks = [o.payload for o in outputs if o.kind == "writeback" and o.payload[0] != o.payload[1]]
    lines += _alias_checks(graph, writebacks, names)
    checks: dict[int, list[tuple]] = {}  # value id -> the graph breaks it decides, checked once it exists
    for o in outputs:
        if o.kind == "check":
            checks.setdefault(o.payload[0], []).append(o.payload[1:])

    def check_lines(vids) -> list[str]:
        return [f"    if not _decided({kind!r}, {names[vid]}, {const(outcome)}): raise BreakMismatch()"
                for vid in vids for kind, outcome in checks.get(vid, ())]
    lines += check_lines([v.id for v in graph.inputs])
    n_head = len(lines)
    dd_by_value: dict[int, list] = {}
    for d in dd_dims:
        dd_by_value.setdefault(d.value_id, []).append(d)
    bound, pending = set(symbols), list(dd_checks)
    for k, n in enumerate(steps):
        if k - 1 in plan.dead_after:
            lines.append("    del " + ", ".join(names[i] for i in sorted(set(plan.dead_after[k - 1]))))
        if k and checks:
            lines += check_lines(step_io(steps[k - 1])[1])
        if isinstance(n, KernelCall):
            lines += _kernel_call_lines(n, src, plan, functions, pooled)
        elif n.op == "eager":
            lines += _eager_lines(n, src) + _bind_lines(n, src, dd_by_value, bound, pending)
        elif n.op == "effect":  # (run once the call is through: a call that stops half way, a graph break
            # deciding otherwise or a check raising, runs again elsewhere, which makes the effect)
            names[n.out.id] = f"v{n.out.id}"
            args = ", ".join(f"_snap({names[v.id]})" for v in n.inputs)
            lines.append(f"    v{n.out.id} = _fx.append(({const(n.attr('call'))}, [{args}]))")
        else:
            lines += _node_lines(n, k, src, plan, pooled) + _bind_lines(n, src, dd_by_value, bound, pending)
    rets = []
    written = {final: target for target, final in writebacks}
    for o in outputs:
        if o.kind == "argument":  # (`x += 1; return x` returns x, as numpy's)
            rets.append(names[written.get(o.payload, o.payload)])
        elif o.kind == "value" and o.payload in written:  # (`y = ...; C[:] = y; return y`: an array of its own,
            # which C's buffer may hold: _writes_into_arguments, an in-place setitem)
            rets.append(f"_own({names[o.payload]}, {names[written[o.payload]]})")
        elif o.kind == "value":
            rets.append(names[o.payload])
        elif o.kind == "view":  # (of an argument the call writes: taken once the writes are in)
            target, chain = o.payload
            view = names[target]
            for op, attrs in chain:
                view = f"{const(OPS[op].ref, ('op', op))}({view}" + "".join(
                    f", {key}={src.attr_src(a)}" for key, a in attrs) + ")"
            rets.append(view)
        elif o.kind == "dim":
            rets.append(to_python(o.payload))
        else:
            rets.append(const(o.payload))
    if steps and checks:
        lines += check_lines(step_io(steps[-1])[1])
    for target, final in writebacks:
        lines.append(f"    if {names[final]} is not {names[target]}: _copyto({names[target]}, {names[final]})")
    effects = any(getattr(n, "op", None) == "effect" for n in steps)
    if effects:
        lines.append("    for _c, _a in _fx: _c(_a)")
    lines.append("    return [" + ", ".join(rets) + "]")
    if effects:
        lines.insert(head, "    _fx = []")
        n_head += 1
    lines[head:head] = [f"    {name} = {s}" for s, name in src.hoisted.items()]
    n_head += len(src.hoisted)
    if any(not isinstance(n, KernelCall) and n.op in OPS and OPS[n.op].category == ELEMENTWISE
           and n.op not in _NEVER_WARN and not all(v.weak for v in n.inputs) for n in steps):
        # (numpy's scalar steps -- a select's branch not taken among them: sqrt of a negative, // 0 -- under
        # numpy's quiet error state: compiled code gives numpy's values, not its RuntimeWarnings, README)
        lines[n_head:] = (["    _q = _quiet_set(_QUIET)", "    try:"] + ["    " + x for x in lines[n_head:]]
                          + ["    finally:", "        _quiet_reset(_q)"])
    if pooled:  # the call's buffer set, taken for the steps and given back however they end
        lines[n_head:] = (["    _b = _pool.acquire()", "    try:"] + ["    " + x for x in lines[n_head:]]
                          + ["    finally:", "        _pool.release(_b)"])
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<shapejit executable>", "exec"), src.ns)
    return source, src.ns, src.recipes


def _alias_checks(graph, writebacks, names) -> list[str]:
    """The graph does not see a write through an aliasing argument: numpy must run that call."""
    lines = []
    if writebacks:
        arrays = [v for v in graph.inputs if not v.weak]
        checked: set[int] = set()
        for target, _ in writebacks:
            checked.add(target)  # (a pair of targets is checked once)
            others = "".join(names[v.id] + ", " for v in arrays if v.id not in checked)
            if others:
                lines.append(f"    if _aliased({names[target]}, ({others})): raise Aliased({names[target]!r})")
    return lines


def _kernel_call_lines(n: KernelCall, src: Source, plan, functions, pooled) -> list[str]:
    names, const = src.names, src.const
    into = {vid: f"{names[st.inputs[0].id]}[{src.index_src(st.attr('items'), [], st.inputs[0].shape)}]"
            for vid, _, _ in n.outputs if (st := plan.direct.get(vid)) is not None}
    into.update((vid, names[plan.into_argument[vid]]) for vid, _, _ in n.outputs if vid in plan.into_argument)
    if n.target:
        return kernelcall.loop_lines(n, names, const, functions, n.outputs[0][0] in plan.in_place)
    if n.lifted:
        return kernelcall.lifted_lines(n, names, const, functions)
    return kernelcall.kernel_lines(n, names, const, functions, pooled, into)


def _eager_lines(n, src: Source) -> list[str]:
    """An eager node's call."""
    names = src.names
    for o in n.outputs:
        names[o.id] = f"v{o.id}"
    outs = ", ".join(names[o.id] for o in n.outputs)
    args = ", ".join(names[v.id] for v in n.inputs)
    # (np.roots, np.linalg.eigvals, np.emath.sqrt: a dtype that follows from the values, complex for some calls;
    # a call whose outputs are of another dtype or rank than the trace's takes another entry, or a trace)
    kinds = src.const(tuple((o.dtype, o.ndim) for o in n.outputs))
    return [f"    _r = {src.const(n.attr('call'))}([{args}])",
            f"    if len(_r) != {len(n.outputs)}: raise ShapeMismatch('eager output count')",
            f"    if tuple([(_o.dtype, _o.ndim) for _o in _r]) != {kinds}: raise DtypeMismatch()",
            f"    {outs}{',' if len(n.outputs) == 1 else ''} = _r"]


def _bind_lines(n, src: Source, dd_by_value, bound: set, pending: list) -> list[str]:
    """The data-dependent sizes step `n` made (an eager node's output
    shapes, an index_dim's value), bound, and the checks of the decisions
    the trace took on them (`bound`: the dims known so far; `pending`: the
    decisions not checked yet).  A failed check of a decision on an index
    is a graph break deciding otherwise (another entry, or a trace, serves
    the call: an index of the other sign, numpy's IndexError); one on an
    eager size runs the call in numpy."""
    names, lines, made = src.names, [], []
    for o in n.outputs:
        for d in dd_by_value.get(o.id, []):
            at = "" if d.axis is None else f"[{d.axis}]"
            lines.append(f"    {ident(d.symbol)} = {'int' if d.axis is None else '_shape'}({names[o.id]}){at}")
            bound.add(d.symbol)
            made.append(d)
            if d.expr != d.symbol:  # (checked once what it equals is bound too: below, or at a later step)
                pending.append((sympy.Eq(d.symbol, d.expr), "a size the trace found equal"))
    if not made:
        return lines
    index = {d.symbol for ds in dd_by_value.values() for d in ds if d.axis is None}
    for c in [c for c in pending if c[0].free_symbols <= bound]:  # decisions the trace took on them
        pending.remove(c)
        # (a traced index's, a size specialized to its value, `for c in np.unique(y)`, or whether a size is 0,
        # `r.mean() if r.size else 0.0`: another entry or a trace serves a call deciding otherwise, as a
        # guard's; else that one call runs in numpy)
        fail = "BreakMismatch()" if c[0].free_symbols & index or isinstance(c[0], sympy.Eq) and any(
            isinstance(side, sympy.Integer) for side in c[0].args) or _emptiness(c[0]) else \
            f"ShapeMismatch({str(c[0]) + ' (' + c[1] + ')'!r})"
        lines.append(f"    if not ({to_python(c[0])}): raise {fail}")
    return lines


def _emptiness(c) -> bool:
    """Whether decision `c` asks only if a size is 0 (`Ne(u0, 0)`, `u0 <= 0`,
    `u0 >= 1`): two outcomes, each an entry of its own."""
    return isinstance(c, sympy.core.relational.Relational) and len(c.free_symbols) == 1 and any(
        isinstance(a, sympy.Symbol) and isinstance(b, sympy.Integer) and b in (0, 1)
        for a, b in ((c.lhs, c.rhs), (c.rhs, c.lhs)))


def _node_lines(n, k: int, src: Source, plan, pooled) -> list[str]:
    """A graph node's step `k`, run in numpy: inline where Python says it
    faster (indexing, operators, methods), else the op's reference."""
    names, const = src.names, src.const
    if n.out.id in pooled:  # matmul into a pooled buffer
        names[n.out.id] = f"v{n.out.id}"
        shp = "(" + "".join(to_python(d) + ", " for d in n.out.shape) + ")"
        return [f"    v{n.out.id} = _pool.get(_b, {n.out.id}, {shp}, {const(n.out.dtype)})",
                f"    _matmul({names[n.inputs[0].id]}, {names[n.inputs[1].id]}, out=v{n.out.id})"]
    for o in n.outputs:
        names[o.id] = f"v{o.id}"
    outs = ", ".join(names[o.id] for o in n.outputs)
    args = ", ".join(names[v.id] for v in n.inputs)
    if n.op == "const":
        value = n.attr("value")
        return [f"    {outs} = {const(value.array if isinstance(value, ArrayConst) else value)}"]
    if n.op == "dim":
        return [f"    {outs} = {to_python(n.attr('expr'))}"]
    if n.op == "index_dim":  # (its symbol is bound from it next: _bind_lines)
        return [f"    {outs} = {args}"]
    if n.op in ("getitem", "index", "setitem"):  # numpy indexing inline: no index rebuilt per call
        arrays = [names[v.id] for v in n.inputs[2 if n.op == "setitem" else 1:]]
        idx = src.index_src(n.attr("items"), arrays, n.inputs[0].shape)
        x = names[n.inputs[0].id]
        if n.op != "setitem":
            return [f"    {outs} = {x}[{idx}]"]
        if n.inputs[1].id in plan.direct:  # (the kernel wrote it there unless the slot was strided)
            v = names[n.inputs[1].id]
            return [f"    if {v} is not _t{n.inputs[1].id}: {x}[{idx}] = {v}",
                    f"    {outs} = {x}; del _t{n.inputs[1].id}"]
        if n.out.id in plan.stored:
            return [f"    {outs} = {x}"]
        if n.out.id in plan.in_place:
            return [f"    {x}[{idx}] = {names[n.inputs[1].id]}; {outs} = {x}"]
        return [f"    {outs} = _copy({x}); {outs}[{idx}] = {names[n.inputs[1].id]}"]
    if n.op == "np_update" and n.out.id in plan.in_place:  # (np.put, np.fill_diagonal, ...: into x, no copy)
        fn = const(getattr(np, n.attr("fn")))
        kw = "".join(f", {key}={src.attr_src(a)}" for key, a in n.attr("kw"))
        return [f"    {fn}({args}{kw}); {outs} = {names[n.inputs[0].id]}"]
    if k in plan.into_operand:  # (x[idx] op= y: into the view of the slot, as numpy's own)
        return [f"    {outs} = {const(OPS[n.op].ref, ('op', n.op))}({args}, out={names[plan.into_operand[k]]})"]
    if n.op in _OPERATORS and len(n.inputs) == 2 and not all(v.weak for v in n.inputs):
        # (numpy's own operator: the same ufunc, but numpy scalars take their fast path)
        a, b = (names[v.id] for v in n.inputs)
        return [f"    {outs} = {a} {_OPERATORS[n.op]} {b}"]
    if n.op in _PY_OPERATORS and all(v.weak and v.dtype.kind in "iu" for v in n.inputs):
        # (Python ints: Python's own operators, as the function's own code computes them)
        return [f"    {outs} = " + _PY_OPERATORS[n.op].format(*(names[v.id] for v in n.inputs))]
    if n.op == "power" and n.out.weak and n.out.dtype.kind == "f" and all(v.weak and v.dtype.kind in "iuf"
                                                                         for v in n.inputs):
        # (Python's power of Python numbers; complex of a negative base: another path)
        a, b = (names[v.id] for v in n.inputs)
        return [f"    {outs} = _pypow({a}, {b})"]
    if (n.op in _PY_FLOAT_OPERATORS and n.out.weak and n.out.dtype.kind == "f"
            and all(v.weak and v.dtype.kind in "iuf" for v in n.inputs)):
        return [f"    {outs} = " + _PY_FLOAT_OPERATORS[n.op].format(*(names[v.id] for v in n.inputs))]
    if (n.op in ("maximum", "minimum") and n.out.ndim == 0
            and all(v.ndim == 0 and not v.weak and v.dtype == n.out.dtype for v in n.inputs)):
        return [f"    {outs} = _{n.op}({args})"]  # (scalars picked without a ufunc call)
    if n.op in _METHODS and not n.inputs[0].weak:  # (an array's own method: no numpy function dispatch)
        return [f"    {outs} = {args}.{n.op}({src.attr_src(n.attr(_METHODS[n.op]))})"]
    fn = const(OPS[n.op].ref, ("op", n.op))
    kw = "".join(f", {key}={src.attr_src(a)}" for key, a in n.attrs)
    call = f"{fn}({args}{kw})" if args else f"{fn}({kw[2:]})"
    if len(n.outputs) == 1 and n.outputs[0].weak:
        call = f"_item({call})"
    return [f"    {outs} = {call}"]

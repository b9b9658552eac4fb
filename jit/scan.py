"""A Python loop over a symbolic trip count, compiled once for every count:
a scan (jax.lax.fori_loop's work, from the loop as written).

`for t in range(x.shape[0]): h = np.tanh(x[t] @ W + h @ U)` rebinds an
array every trip, so lifting (jit/lift.py) cannot type it, and tracing
unrolls it: `range` makes the trip count a number, with a guard, and each
new length traces and compiles again (as torch.compile does).  The first
traces of a loop still unroll it, for UNROLLED trip counts: a loop of known
length is fused whole and runs fastest.  When a later trace meets the same
loop with yet another trip count, the loop becomes one `scan` node
(shapes/ops.py) instead: its body, made from the loop's own source into a
function of (the loop variable, the names it carries, what else it reads),
is jitted on its own (dynamic, the loop variable a symbol from the start)
and the node calls it once per trip.  That trace's entry serves every trip
count: three compiles in all, whatever the lengths (`explain()` lists the
scans and the loops unrolled).  A loop that stops on a traced value (a
while loop's test, an exit `if converged: break`) is a scan at once:
unrolled, each trip's decision would be a graph break.

A loop becomes a scan when
- it is `for <name> in range(...)`, its one to three arguments made of
  names, constants, arithmetic, attributes, subscripts and len(), its step
  a constant, its trip count symbolic (a dim of the call); or it stops on a
  traced value (a `while` loop, or exits);
- its body holds assignments, expressions, ifs and inner loops, and no
  break or continue (but its exits, `if <test>: break` at its top level),
  return, yield, del, global, nonlocal, def, class, with, try or import,
  nor a call with out=;
- every name bound before it that it rebinds or writes into (carried)
  holds a traced array, of the same dtype and shape after every trip; a
  name it binds first is read nowhere outside it, nor is the loop variable;
- it writes (a subscript store, an augmented assignment) only into carried
  names, each holding before the loop an array the function made, an
  argument or a held array (not a view, a captured array, nor an array
  another name holds: numpy would write into that one too; the scan writes
  into a copy of it, and a name it writes into without rebinding it,
  `back[t] = ...`, takes the copy's values after the loop:
  TraceContext.write; an argument's go back into the caller's array), or
  into arrays each trip makes anew (`cur = np.empty(m)`).
Everything else it reads is passed to the body as it is (numbers, objects)
or read-only (arrays, dims as ints): a body that writes into one raises in
the trace's own run of the scan, and the loop is unrolled as before.  So
does a body whose values change shape or dtype; on a later call that one
runs in numpy (ScanMismatch).  No user string is evaluated: the body is
compiled from the function's own source, which lift.py checked compiles to
the function's code."""
from __future__ import annotations

import ast
import builtins
import copy
import inspect
import itertools
import operator
import sys
import textwrap
import time
import types
from dataclasses import dataclass

import numpy as np
import sympy

from jit import pytree
from jit.held import user_file
from jit.tracer import PYTHON_TYPES, Stacked, SymInt, Tracer, holds_traced, traced_len
from runtime.runeagerly import RowsOfOtherLengths, ScanMismatch

_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.If, ast.For, ast.While, ast.Pass)


class NoScan(Exception):
    """The loop does not become a scan (it is unrolled, as traced)."""


class _Peel(NoScan):
    """The loop binds names the function reads after it, which no trip
    before the first bound: a scan only past its first trip."""


class Peeled:
    """attempt()'s answer for a loop to run its first trip as written (its
    range's bounds evaluated before it), then the rest as a scan
    (jit/lift.py)."""

    def __init__(self, bounds: tuple):
        self.bounds = bounds


NOT_SYMBOLIC = object()
# the trip counts a loop is unrolled for before a call with another makes it a scan: unrolled, a loop
# fuses across its trips (NPBench's mandelbrot1, 20 masked updates: one kernel, 2.1x numpy, where the
# scan's trips ran at 0.84x) and the re-roll pass serves triangular nests (nussinov: 140x against 0.94x)
UNROLLED = 2


def attempt(ctx, site, scope: dict, globals_: dict, fn, rest: tuple | None = None):
    """The values of the loop's assigned names (site.assigned's order) after
    the loop, run as a scan node of ctx's trace; None when the loop over a
    symbolic trip count is unrolled (why is noted for explain()),
    NOT_SYMBOLIC when it is no loop over range() of a symbolic count, or
    Peeled when its first trip is to run as written first (its bounds then
    `rest`: the range after that trip)."""
    loop = site.node
    where = f"{site.filename.rpartition('/')[2]}:{loop.lineno}"
    bounds = rest or _range_bounds(loop, scope, globals_)
    if bounds is None or ctx.scan_jit is None:
        return NOT_SYMBOLIC
    start, stop, step = bounds
    trips = len(range(_hint(ctx, start), _hint(ctx, stop), step))
    counts = ctx.loops.setdefault(site, set())  # (None once the loop is a scan)
    # (a loop that may stop early on a traced value is a scan at once: unrolled, each trip's
    # `if converged: break` would be a graph break, and every call deciding otherwise a new path)
    exits = _stops(loop) and not _decided_in_python(loop, scope, globals_)
    if not exits and (isinstance(loop, ast.While) or not any(isinstance(b, SymInt) for b in bounds[:2])):
        if rest is None and _flagged(loop, scope, globals_) and peelable(site):
            return Peeled(bounds)  # (its first trip as written: the flag it leaves may be a traced bool)
        if counts is not None:  # (a count another loop's specialization fixed counts too)
            counts.add(trips)
        return NOT_SYMBOLIC
    try:
        try:
            plan = _plan(ctx, site, scope, globals_)
        except _Peel:
            if rest is not None or trips == 0:
                raise
            plan = None
        if not exits and counts is not None and (len(counts) < UNROLLED or trips in counts):
            counts.add(trips)
            ctx.lift_refusals.append(f"{where}: loop unrolled for {trips} trips (its trip count specialized; "
                                     f"past {UNROLLED} counts, a call with another compiles it once as a scan)")
            return None
        ctx.loops[site] = None  # (another trip count: from now on, every trace of it makes a scan)
        if plan is not None:
            try:
                return _scan(ctx, site, scope, globals_, fn, start, stop, step, where, *plan)
            except _Peel:
                if rest is not None or not peelable(site):
                    raise
        if not ((stop > start) if step > 0 else (stop < start)):  # (a guard: a call of no trip traces again)
            raise NoScan("it makes no trip")
        return Peeled(bounds)
    except NoScan as e:
        unrolled = f"loop unrolled for {trips} trips" if isinstance(loop, ast.For) else "while loop traced as written"
        ctx.lift_refusals.append(f"{where}: {unrolled}, not a scan: {e}")
        return None


def peelable(site) -> bool:
    """Whether the loop's first trip can run as written before the rest
    runs as a scan (jit/lift.py rewrites such a loop so): a for or while
    loop (no else) that binds names (those the function reads after it,
    which no trip before the first bound; or carried ones the first trip
    makes arrays, `total = 0`, `s = 0; for v in x: s += v`)."""
    loop = site.node
    return isinstance(loop, (ast.For, ast.While)) and not loop.orelse and \
        bool(set(site.assigned) - {_target(loop)} - set(_row_binding(loop)[0] if over_rows(loop) else ()))


def trip(loop) -> tuple:
    """(the name a trip's index is bound to, the statements that bind the
    rest of what the loop's target binds from it): a loop over range(),
    (its variable, nothing); a while loop, (WHILE_TRIP, nothing); over
    rows, (ROW_TRIP, the rows' bindings: _prelude).  So `for <name> in
    <indices>: <prelude> <body>` makes the trips of those indices as the
    loop makes them."""
    return _target(loop), _prelude(loop)


def scan_unrolled(loops: dict) -> bool:
    """Every loop a trace unrolled for its trip count (`loops`, a jit's)
    a scan from the next trace on: a trace that took too many decisions
    unrolling one takes them per trip of the body instead.  Whether there
    was such a loop."""
    unrolled = [site for site, counts in loops.items() if not isinstance(site, tuple) and counts]
    for site in unrolled:
        loops[site] = None
    return bool(unrolled)


def unstack(loops: dict, site) -> bool:
    """The loop at `site` (a jit's `loops`) appends as written from now on:
    a list it appended to was used as only a list can be (jit/tracer.py
    StackedUse).  Whether it did not already."""
    if loops.get(("unstacked", site)):
        return False
    loops[("unstacked", site)] = True
    return True


def _hint(ctx, b) -> int:
    return int(ctx.hint(b.expr)) if isinstance(b, SymInt) else b


_ROWS = (np.ndarray, np.generic)  # (what a trip appends: an array, or a numpy scalar, its 0-d row)
RACE_CALLS = 2  # calls of a scan timed each way, its body jitted and plain, before the faster runs its later calls
# "plain" or "jit": every scan's calls run their trips so, no race (tests that must see one way run; as
# runtime/gemmchoice.py PREFER decides products)
PREFER: str | None = None
MAX_PINS = 16  # (the entries a scan's call looks up for its trips, at most: each a jit lookup's cost)
WHILE_TRIP = "__sj_trip__"  # (a while loop's body takes its trip number by this name)


ROW_TRIP = "__sj_row__"  # (`for x in xs`: the body takes the row's index by this name, and binds x = xs[it])


def _target(loop) -> str:
    return WHILE_TRIP if isinstance(loop, ast.While) else ROW_TRIP if over_rows(loop) else loop.target.id


def over_rows(loop) -> bool:
    """`for <name> in <array>`, `for a, b in zip(<array>, <array>)` or `for
    i, a in enumerate(<array>)`, each <array> a name or a name's slices
    (`for v in x[1:]`): over the rows of arrays, when they are (_rows)."""
    return isinstance(loop, ast.For) and _row_binding(loop) is not None


def _row_binding(loop):
    """(the names each trip binds, the expression of each one's array, or
    None for enumerate's index) of a loop over rows, or None."""
    t, it = loop.target, loop.iter
    if isinstance(t, ast.Name):
        return ([t.id], [it]) if _an_array(it) else None
    if isinstance(t, ast.Tuple) and len(t.elts) == 2 and isinstance(t.elts[0], ast.Name) \
            and isinstance(t.elts[1], ast.Tuple) and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
            and it.func.id == "enumerate" and len(it.args) == 1 and not it.keywords:  # (`for i, (a, b) in
        inner = _row_binding(ast.For(target=t.elts[1], iter=it.args[0], body=[], orelse=[]))  # enumerate(zip(..)))`
        if inner is None or not isinstance(it.args[0], ast.Call):
            return None
        return [t.elts[0].id] + inner[0], [None] + inner[1]
    if not (isinstance(t, ast.Tuple) and all(isinstance(x, ast.Name) for x in t.elts)
            and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not it.keywords):
        return None
    names = [x.id for x in t.elts]
    if it.func.id == "zip" and len(it.args) == len(names) >= 1 and all(_an_array(a) for a in it.args):
        return names, list(it.args)
    if it.func.id == "enumerate" and len(it.args) == 1 and len(names) == 2 and _an_array(it.args[0]):
        return names, [None, it.args[0]]
    return None


def _an_array(e) -> bool:
    """A name, or a name's basic slices with plain bounds."""
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name):
        parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        return all(isinstance(p, ast.Slice) and all(_plain_bound(b) for b in (p.lower, p.upper, p.step))
                   for p in parts)
    return isinstance(e, ast.Name)


def _plain_bound(e) -> bool:
    """A slice bound that reads nothing but names and constants."""
    return e is None or all(isinstance(n, (ast.Name, ast.Constant, ast.UnaryOp, ast.BinOp, ast.Load, ast.USub,
                                           ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)) for n in ast.walk(e))


def _rows(loop, scope: dict, globals_: dict):
    """The trip count of a loop over rows: the first dim of the traced
    arrays it iterates (their slices made here from the loop's own
    expressions; zip's of equal first dims, a guard), or None: not traced
    arrays, or zip's of other lengths (it stops at the shortest)."""
    calls = [loop.iter] + [a for a in getattr(loop.iter, "args", ()) if isinstance(a, ast.Call)]
    if any(isinstance(c, ast.Call) and _lookup(c.func.id, scope, globals_) not in (zip, enumerate) for c in calls):
        return None  # (a zip or enumerate of the user's own)
    dims = []
    for e in _row_binding(loop)[1]:
        if e is None:
            continue
        v = _lookup(_root(e), scope, globals_)
        if type(v) is not Tracer or not v.ndim or v.value.weak:
            return None
        if isinstance(e, ast.Subscript):  # (its slices, their bounds evaluated as _evaluate takes them)
            parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
            bounds = [[None if b is None else _evaluate(b, scope, globals_) for b in (p.lower, p.upper, p.step)]
                      for p in parts]
            if any(b is _NOT for bs in bounds for b in bs):
                return None
            slices = [slice(*bs) for bs in bounds]
            v = v[tuple(slices)] if isinstance(e.slice, ast.Tuple) else v[slices[0]]
        if type(v) is not Tracer or not v.ndim:
            return None
        dims.append(v.shape[0])
    return dims[0] if all(d == dims[0] for d in dims[1:]) else None


def _prelude(loop) -> list:
    """What each trip binds before the body: a loop over rows, its rows
    (and enumerate's index)."""
    if not over_rows(loop):
        return []
    out = []
    for name, e in zip(*_row_binding(loop)):
        value = ast.Name(ROW_TRIP, ast.Load()) if e is None else \
            ast.Subscript(copy.deepcopy(e), ast.Name(ROW_TRIP, ast.Load()), ast.Load())
        st = ast.Assign([ast.Name(name, ast.Store())], value)
        for n in ast.walk(st):
            ast.copy_location(n, loop)
        out.append(st)
    return out


def _decided_in_python(loop, scope: dict, globals_: dict) -> bool:
    """Whether the loop's stop tests (a while loop's, its exits') read only
    Python ints and bools, dims and the loop variable (`while i < 5`,
    `if t == k: break`): Python decides them, and the loop is traced as
    written, as before; a float, an array or a function may be traced."""
    tests = _tested(loop) + [ast.Expr(x.test) for x in _exits(loop.body)]
    for n in _read(tests):
        v = _lookup(n, scope, globals_) if n != _target(loop) else 0
        if not (type(v) in (bool, int) or isinstance(v, SymInt)):
            return False
    return True


def _flagged(loop, scope: dict, globals_: dict) -> bool:
    """Whether a while loop's test reads a name that is a Python bool now
    and that its body binds again (`changed = True` then `while changed:
    ...; changed = bool((new != labels).any())`): after its first trip
    the flag may be a traced bool, and the rest of the loop a scan."""
    if not isinstance(loop, ast.While):
        return False
    bound = _rebound(loop.body)
    return any(n in bound and type(_lookup(n, scope, globals_)) is bool for n in _read(_tested(loop)))


def _tested(loop) -> list:
    """A while loop's test as a statement (what each trip reads first), or none."""
    return [ast.Expr(loop.test)] if isinstance(loop, ast.While) else []


def _stops(loop) -> bool:
    """Whether a trip may end the loop: a while loop's test, or an exit."""
    return isinstance(loop, ast.While) or bool(_exits(loop.body))


def _range_bounds(loop: ast.For, scope: dict, globals_: dict):
    """(start, stop, step) of `for name in range(...)` evaluated in the frame
    (ints or SymInts, step a nonzero int), of a loop over a traced array's
    rows (`for x in xs`: 0, its first dim, 1), or None."""
    if isinstance(loop, ast.While):  # (trips until its test fails, or an exit)
        return (0, 2 ** 62, 1) if not loop.orelse else None
    if over_rows(loop):  # (the rows of traced arrays: as many trips as their first dim)
        n = _rows(loop, scope, globals_) if not loop.orelse else None
        return None if n is None else (0, n, 1)
    it, backwards = range_call(loop.iter)
    if not (isinstance(loop.target, ast.Name) and it is not None and not it.keywords and 1 <= len(it.args) <= 3):
        return None
    if _lookup("range", scope, globals_) is not builtins.range or \
            backwards and _lookup("reversed", scope, globals_) is not builtins.reversed:
        return None
    values = []
    for a in it.args:
        v = _evaluate(a, scope, globals_)
        if v is _NOT or not (type(v) is int or isinstance(v, SymInt)):
            return None
        values.append(v)
    start, stop, step = (0, values[0], 1) if len(values) == 1 else (values + [1])[:3]
    if type(step) is not int or step == 0:
        return None
    if backwards:  # (reversed(range(start, stop, step)): from its last value down, by -step)
        last = start + (stop - start - (1 if step > 0 else -1)) // step * step
        return last, start - step, -step
    return start, stop, step


def range_call(it) -> tuple:
    """(the range(...) call, whether reversed) of a loop's iterable
    `range(...)` or `reversed(range(...))`, else (None, False)."""
    def is_call(e, name):
        return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == name
    if is_call(it, "reversed") and len(it.args) == 1 and not it.keywords and is_call(it.args[0], "range"):
        return it.args[0], True
    return (it, False) if is_call(it, "range") else (None, False)


_NOT = object()  # (an expression _evaluate does not take)
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.Mod: operator.mod}


def _evaluate(e, scope: dict, globals_: dict):
    """The value of a bound expression: names, constants, + - * // % and
    unary minus, attributes, subscripts and len() of a traced array (its
    first dim, not a number); _NOT for anything else.  Nothing it does
    calls the user's code or makes a guard."""
    if isinstance(e, ast.Call):
        if (isinstance(e.func, ast.Name) and e.func.id == "len" and len(e.args) == 1 and not e.keywords
                and _lookup("len", scope, globals_) in (builtins.len, traced_len)):
            x = _evaluate(e.args[0], scope, globals_)
            return x.shape[0] if isinstance(x, Tracer) and x.ndim else _NOT
        return _NOT
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, ast.Name):
        return _lookup(e.id, scope, globals_)
    if isinstance(e, ast.Attribute):
        x = _evaluate(e.value, scope, globals_)
        return x.shape if isinstance(x, Tracer) and e.attr == "shape" else _NOT
    if isinstance(e, ast.Subscript):
        x, i = _evaluate(e.value, scope, globals_), _evaluate(e.slice, scope, globals_)
        return x[i] if type(x) is tuple and type(i) is int and -len(x) <= i < len(x) else _NOT
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        x = _evaluate(e.operand, scope, globals_)
        return -x if _integral(x) else _NOT
    if isinstance(e, ast.BinOp) and type(e.op) in _ARITHMETIC:
        a, b = _evaluate(e.left, scope, globals_), _evaluate(e.right, scope, globals_)
        if not (_integral(a) and _integral(b)) or isinstance(e.op, (ast.FloorDiv, ast.Mod)) \
                and not (type(b) is int and b != 0):  # (a symbolic divisor would be decided: a guard)
            return _NOT
        return _ARITHMETIC[type(e.op)](a, b)
    return _NOT


def _integral(x) -> bool:
    return type(x) is int or isinstance(x, SymInt)


def _lookup(name: str, scope: dict, globals_: dict):
    if name in scope:
        return scope[name]
    if name in globals_:
        return globals_[name]
    return getattr(builtins, name, _NOT)


def _plan(ctx, site, scope: dict, globals_: dict) -> tuple:
    """(loop variable, carried names, names written into) of a loop that may
    be a scan in this frame, or NoScan (module docstring)."""
    loop = site.node
    target = _target(loop)
    calls = _user_calls(loop.body, scope, globals_)
    for c in calls + _method_calls(loop.body, scope, globals_):  # (a helper's effects on Python state would
        # run when the body is traced, not per trip)
        f = _callee(c, scope, globals_) or _method(c, scope, globals_)
        effects = _python_effects(f)
        if effects == "state" or effects == "handed" and any(  # (handed only traced arrays and numbers: _passed)
                not (isinstance(a, ast.Constant) or isinstance(a, ast.Name) and (
                    type(scope.get(a.id)) in (Tracer, SymInt) or type(scope.get(a.id)) in _PLAIN))
                for a in list(c.args) + [k.value for k in c.keywords]):
            raise NoScan(f"it calls {getattr(f, '__qualname__', f.__name__)}, which may change Python state "
                         "(a counter, a list it appends to, an attribute, a dict it is handed)")
    _check_body(loop.body, appended=site.appended, helpers={id(c) for c in calls})
    assigned = set(site.assigned) - {target}
    written = _written(loop.body)
    for n in _passed(calls, scope, globals_) - written:  # (a helper may write into what it is handed:
        try:                                                # carried, if it may be, else read-only as before)
            _check_private(ctx, n, scope)
            written.add(n)
        except NoScan:
            pass
    stacked = _check_stacked(ctx, site, scope, globals_, written)
    # (an array it writes into without rebinding it, `back[t] = ...`, is carried too: the scan's
    # result is written into it, TraceContext.write, as numpy's writes would have been)
    # (a name each trip binds before it reads it, and nothing reads after the loop, is the trip's own,
    # whatever it held before: an outer loop's earlier trip left it bound)
    own = {n for n in assigned - written if n in scope and n not in site.outside_reads}
    own -= read_before_bound(_tested(loop) + _prelude(loop) + loop.body, own)
    carried = sorted(n for n in assigned | written if n in scope and n not in own)
    # (its variable read after it, `return x, it` of a solver's `for it in range(...)`: the scan gives
    # the last trip's, as the loop leaves it)
    last = isinstance(loop, ast.For) and target in site.outside_reads
    if not carried and not stacked and not (last and _stops(loop)):
        raise NoScan("it rebinds no name bound before it, nor writes into one, nor appends to a list")
    written -= {n for n in carried if not isinstance(scope[n], Tracer) or scope[n].value.weak  # (`steps += 1`)
                or isinstance(scope[n].concrete, np.generic)}  # (a numpy scalar: `y += 1` rebinds it, numpy's)
    temps = assigned - set(carried)
    live = temps & site.outside_reads
    if live:  # (bound before no trip: its first trip, as written, binds them; jit/lift.py _peelable)
        raise (_Peel if peelable(site) else NoScan)(
            f"{', '.join(sorted(live))} is read outside it, and not carried")
    early = read_before_bound(_tested(loop) + _prelude(loop) + loop.body, temps)
    if early:
        raise NoScan(f"{', '.join(sorted(early))} may be read before the trip binds it (a value from a trip "
                     "before)")
    for n in carried:
        v = scope[n]
        if _carried_kind(v) is None:
            raise NoScan(f"{n} holds a {type(v).__name__}, not a traced array or a Python number")
    made = written - set(carried) - _made_by_the_trip(loop.body, scope, globals_)
    if made:
        raise NoScan(f"it writes into {', '.join(sorted(made))}, which a trip binds first, not to a new array")
    written &= set(carried)
    for n in written:
        _check_private(ctx, n, scope)
    rebound = _rebound(loop.body)
    for n in sorted(written & rebound):
        if not _rebinds_first(loop, n):
            raise NoScan(f"it writes into {n}'s array and rebinds {n}: a trip may write into the array it held "
                         "before the loop")
    return target, carried, written, stacked, last


def _rebound(stmts: list) -> set:
    """Names the statements bind anew (`x = ...`, a loop's variable), not
    in place (`x += ...`, `x[i] = ...`)."""
    inplace = {id(n.target) for s in stmts for n in ast.walk(s) if isinstance(n, ast.AugAssign)}
    return {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            and id(n) not in inplace}


def _rebinds_first(loop, name: str) -> bool:
    """Whether every trip binds `name` anew before anything writes into its
    array: the first of the body's statements to write into it or bind it
    is `name = ...` at its top level (reading the array is no write), and
    no call before it is handed the name (a helper may write into it)."""
    for st in loop.body:
        passed = any(isinstance(c, ast.Call) and any(isinstance(a, ast.Name) and a.id == name
                                                     for a in [*c.args, *(k.value for k in c.keywords)])
                     for c in ast.walk(st))
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets):
            return name not in _written([st])
        if name in _written([st]) or name in _rebound([st]) or passed:
            return False
    return False


def _check_stacked(ctx, site, scope: dict, globals_: dict, written: set) -> list:
    """The lists the loop appends to, one array per trip each (`outs.append(h)`
    at its top level), which the scan stacks; NoScan where they could not be
    (module docstring)."""
    loop = site.node
    if not site.appended:
        return []
    if ctx.loops.get(("unstacked", site)):
        raise NoScan("a list it appends to was used after it as only a list of known length can be")
    if _stops(loop):
        raise NoScan("it appends to a list and may stop early (the list's length would be data-dependent)")
    appends = appended_values(loop)
    mentions = [n.id for st in loop.body for n in ast.walk(st) if isinstance(n, ast.Name)]
    for name in site.appended:
        v = scope.get(name)
        if type(v) is not list:
            raise NoScan(f"it appends to {name}, a {type(v).__name__}, not a list bound before it")
        if mentions.count(name) != 1:
            raise NoScan(f"it reads or appends to {name} more than once a trip")
        if not all(type(x) is Tracer and not x.value.weak for x in v):
            raise NoScan(f"{name} holds other than traced arrays before it")
        for other, x in scope.items():  # (numpy's appends reach every holder of the list: ours only the name)
            held = x.values() if type(x) is dict else x if type(x) in (list, tuple) else ()
            if other != name and (x is v or any(y is v for y in held)):
                raise NoScan(f"{other} holds the list {name} too")
        value = appends[name]
        if not _new_array(value, scope, globals_) and \
                {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} & written:
            raise NoScan(f"what it appends to {name} may view an array it writes into")
    return list(site.appended)


def _carried_kind(v) -> str | None:
    """How a carried value enters the body: "array", or the Python number it
    is ("int": a symbol in the body, never a key per value; "float",
    "bool"), the trips making it theirs (`lam = 0.0` then numpy's float64,
    `steps += 1` a Python int still); None for anything else (a dim)."""
    if type(v) in (bool, int, float):
        return type(v).__name__
    if type(v) is SymInt:  # (a size, or an int that changed: `j = n - 1` then `j = i`, `self.n += 1`)
        return "int"
    if type(v) is Tracer:
        return "array" if not v.value.weak else {"b": "bool", "i": "int", "f": "float"}.get(v.dtype.kind)
    return None


def _scan(ctx, site, scope: dict, globals_: dict, fn, start, stop, step: int, where: str, target: str,
          carried: list, written: set, stacked: list, last: bool):
    loop = site.node
    assigned = set(site.assigned) - {target}
    arrays, numbers, ints, consts, rebound, trees = [], [], [], {}, {}, {}
    names = sorted(_read(_tested(loop) + _prelude(loop) + loop.body) - assigned - set(carried) - set(stacked)
                   - {target})
    for n in names:
        local = n in scope
        v = scope[n] if local else globals_.get(n, _NOT)
        cells = _traced_cells(v, n, assigned | set(carried)) if local else {}
        if cells:  # (a function of the frame closing over values of the trace: the body makes it again, its
            # cells those values as the body's own, free values of the loop -- `def f(s): ... g * np.sin(s)`)
            rebound[n] = tuple(sorted(cells))
            consts[_template(n)] = rebind_cells(v, *((_cell_index(c), _HOLLOW) for c in cells))
            scope = {**scope, **cells}
            names += sorted(cells)
        elif local and type(v) in (dict, list, tuple) and holds_traced(v):
            # (a container of values of the trace the loop only reads, an RNN's weights `p['W']`: its leaves
            # are free values of the loop, and the body builds the container again from them)
            tree, leaves = _tree_of(v, n, loop)
            trees[n] = tree
            scope = {**scope, **leaves}
            names += sorted(leaves)
    for n in names:
        local = n in scope
        v = scope[n] if local else globals_.get(n, _NOT)
        if isinstance(v, SymInt) or isinstance(v, Tracer) and v.value.weak and v.dtype.kind in "iu":
            ints.append(n)  # (a dim, or a Python int of the call: an int, a symbol, in the body)
        elif isinstance(v, Tracer):
            (numbers if v.value.weak else arrays).append(n)  # (a Python float of the call: a float in the body)
        elif local and n not in rebound and n not in trees:
            consts[n] = _unheld(v, n)
    free = arrays + numbers + ints
    carried_kinds = tuple(_carried_kind(scope[n]) for n in carried)
    body = _body_jit(ctx.loops, ctx.scan_jit, site, fn, target, carried, free, consts, len(ints), carried_kinds,
                     stacked, rebound, trees)
    kinds = tuple("array" for _ in arrays) + tuple(_PYTHON[scope.get(n, globals_.get(n)).dtype.kind] for n in numbers)
    plain = all(type(v) in _PLAIN for v in consts.values())  # (else another process could not make the body)
    call = ScanCall(step, len(carried), tuple(n in written for n in carried), kinds + ("int",) * len(ints), where,
                    site.index if plain else -1, target, tuple(carried), tuple(free), len(ints), _stops(loop),
                    carried_kinds, stacked=tuple(stacked), consts=tuple(sorted(consts.items())) if plain else (),
                    last=last, joined=(False,) * len(stacked))
    call.body, call.fn = body, fn
    values = {n: scope[n] if n in scope else globals_[n] for n in free}
    inputs = [start, stop] + [scope[n] for n in carried] + [values[n] for n in free]
    n_out = len(carried) + len(stacked) + last
    raised = ctx.raised
    try:
        if stacked:  # (the stacked arrays' shapes are known once the trips ran: run them now, the node takes
            # the result; a row's dims that are no carried array's are data-dependent sizes, bound at run time)
            call.tracing = True  # (a list whose trips append rows of other lengths is joined: _Joined)
            try:
                got = call([x.concrete if isinstance(x, Tracer) else ctx.hint(x.expr) if isinstance(x, SymInt)
                            else x for x in inputs])
            finally:
                call.tracing = False
            appends = appended_values(loop)
            call.stacked_shapes = tuple(_joined_shape(ctx, y, where, name) if joined else
                                        _stacked_shape(ctx, y, start, stop, step, appends[name], scope, where, name)
                                        for y, name, joined in zip(got[len(carried):], stacked, call.joined))
            call.stacked_dtypes = tuple(y.dtype.str for y in got[len(carried):])
            call.served = got
        outs = ctx.emit("scan", inputs, {"call": call}, n_out=n_out)
    except ScanMismatch as e:
        ctx.raised = raised
        # (`total = 0` then an array: its first trip, as written, makes it one, the rest a scan carries it;
        # so too numpy's scalar, `s = 0; s += v`, in a loop the lifter cannot take -- one it can, `m = inf`
        # then `m = x[i]`, is the lifter's, at the next call if this one's data made it refuse)
        if getattr(e, "trip", None) == 0 and carried_kinds[e.carried] != "array" and (
                e.array or e.scalar and not site.liftable):
            raise _Peel(str(e)) from None
        raise NoScan(str(e)) from None
    except Exception as e:  # noqa: BLE001 - the trace's own run of the body raised: the loop runs as written
        ctx.raised = raised
        raise NoScan(f"its body raised {type(e).__name__}: {e}") from None
    outs = outs if n_out > 1 else [outs]
    if last:  # (the last trip's index: a size bound when the scan has run, a Python int as the loop leaves it)
        last, outs = ctx.index_dim(outs[-1]), outs[:-1]
    ys, outs = outs[len(carried):], outs[:len(carried)]
    # (what the trips made of each carried number: every call's must make the same, or it runs in numpy)
    call.results = tuple("" if kind == "array" else type(x.concrete).__name__ for x, kind in zip(outs, carried_kinds))
    loop_kind = "while loop" if isinstance(loop, ast.While) else \
        f"for loop over the rows of {ast.unparse(loop.iter)}" if over_rows(loop) else "for loop over range(...)"
    ctx.scans.append(f"{where}: {loop_kind} compiled once for every trip count (a scan): "
                     f"its body {body.__qualname__} runs once per trip"
                     + (f", carrying {', '.join(carried)}" if carried else "")
                     + (f", stacking what it appends to {', '.join(stacked)}" if stacked else ""))
    new = dict(zip(carried, outs))
    if last is not False:
        new[target] = last
    # (written into, never bound anew -- `back[t] = ...`, `w -= lr * g`: the same array, its values new, as
    # numpy's in-place writes leave it, for the caller's argument and every holder of it)
    for n in sorted(set(carried) - set(site.assigned) | set(written) - _rebound(loop.body)):
        ctx.write(scope[n], new[n])
        new[n] = scope[n]
    lists = [Stacked(list(scope[n]), y, site, joined, numbers, views) for n, y, joined, numbers, views
             in zip(stacked, ys, call.joined, call.numbers or ("",) * len(stacked),
                    call.views or (False,) * len(stacked))]
    return tuple(new[n] if n in new else scope.get(n) for n in site.assigned) + tuple(lists)


def appended_values(loop) -> dict:
    """{list name: the value appended} of the loop's top-level
    `<name>.append(<value>)` statements (jit/lift.py Site.appended)."""
    return {st.value.func.value.id: append_value(st) for st in loop.body if append_value(st) is not None}


def _stacked_shape(ctx, y, start, stop, step: int, value, scope: dict, where: str, name: str) -> tuple:
    """The symbolic shape of the array stacking what the trips appended to
    list `name` (`y`, the trace's): its rows the trip count, each row a
    carried array's shape where the loop appends that array by name, else
    data-dependent sizes (its dims, bound when the scan has run)."""
    a, b = (x.expr if isinstance(x, SymInt) else x for x in (start, stop))
    trips = b - a if step == 1 else sympy.floor((b - a + step - (1 if step > 0 else -1)) / step)
    named = scope.get(value.id) if isinstance(value, ast.Name) else None  # (a carried array: its shape every trip)
    if type(named) is Tracer and named.value.shape and np.shape(named.concrete) == y.shape[1:]:
        row = named.value.shape
    else:
        row = tuple(ctx.env.new_symbol(d, f"{where}: dim {j} of what the loop appends to {name}", lo=0,
                                       data_dependent=True) for j, d in enumerate(y.shape[1:]))
    return (ctx.env.simplify(trips),) + tuple(row)


def _joined_shape(ctx, y, where: str, name: str) -> tuple:
    """The symbolic shape of a joined list's rows (_Joined): all its dims
    data-dependent sizes, bound when the scan has run."""
    return tuple(ctx.env.new_symbol(d, f"{where}: dim {j} of the rows the loop appends to {name}, joined", lo=0,
                                    data_dependent=True) for j, d in enumerate(y.shape))


def _exits(stmts: list) -> list:
    """The body's exits: its top-level `if <test>: break` statements."""
    return [s for s in stmts if isinstance(s, ast.If) and not s.orelse and len(s.body) == 1
            and isinstance(s.body[0], ast.Break)]


def _continues_to_returns(stmts: list, returned) -> None:
    """Each `continue` of the body's own loop (none inside an inner loop)
    as `returned(it)`: the trip ends, the loop goes on."""
    for k, st in enumerate(stmts):
        if isinstance(st, ast.Continue):
            stmts[k] = returned(st)
        elif not isinstance(st, (ast.For, ast.While, ast.FunctionDef, ast.ClassDef)):
            for field in ("body", "orelse"):
                inner = getattr(st, field, None)
                if isinstance(inner, list):
                    _continues_to_returns(inner, returned)


def _last_exit(stmts: list):
    """The body's one exit when every statement after it renames names
    (`x = x_new`, `a, b = b, a`): it may be taken as a value (_compile_body)."""
    exits = _exits(stmts)
    if len(exits) != 1:
        return None
    k = next(k for k, st in enumerate(stmts) if st is exits[0])

    def names(e) -> bool:
        return isinstance(e, ast.Name) or isinstance(e, ast.Tuple) and all(isinstance(x, ast.Name) for x in e.elts)
    rest = stmts[k + 1:]
    if not all(isinstance(st, ast.Assign) and len(st.targets) == 1 and names(st.targets[0]) and names(st.value)
               for st in rest) or STOP in {n.id for n in ast.walk(exits[0].test) if isinstance(n, ast.Name)}:
        return None
    return exits[0]


STOP = "__sj_stop__"  # (the body's name for its last exit's test: _compile_body)
NOT = "__sj_not__"  # (numpy's logical_not, in the body of a while loop tested last: _compile_body)
REBIND = "__sj_rebind__"  # (rebind_cells, in the body of a loop calling a function of the frame: _compile_body)


def append_value(st):
    """The value of `<name>.append(<value>)`, an expression statement, or None."""
    if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)):
        return None
    c = st.value
    return c.args[0] if (isinstance(c.func, ast.Attribute) and c.func.attr == "append" and isinstance(
        c.func.value, ast.Name) and len(c.args) == 1 and not c.keywords and not isinstance(c.args[0], ast.Starred)) \
        else None


def _check_body(stmts: list, depth: int = 0, appended=(), helpers=frozenset()) -> None:
    """Only _STATEMENTS; break and continue only in an inner loop, or as
    the body's exits (`if <test>: break` at its top level); no out=; an
    expression statement only as an append to a list of `appended` at its
    top level (the scan stacks what the trips append), or a call among
    `helpers` (ids of calls of the user's functions: what it writes into,
    the arrays handed to it, is carried, _passed)."""
    exits = _exits(stmts) if not depth else []
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)) and depth or any(s is x for x in exits):
            continue
        if isinstance(s, ast.Continue) and not appended:  # (the trip ends: the body returns, _compile_body)
            continue
        if not isinstance(s, _STATEMENTS):
            raise NoScan(f"its body holds a {type(s).__name__.lower()} statement")
        if isinstance(s, ast.Expr) and not (not depth and append_value(s) is not None
                                            and s.value.func.value.id in appended) and id(s.value) not in helpers \
                and not _outs(s.value):  # (np.minimum(D, ..., out=D): a write into D, _written)
            raise NoScan("its body holds an expression statement (a call for its effect)")
        for n in ast.walk(s):
            if isinstance(n, ast.keyword) and n.arg == "out" and not any(k is n for k in _outs(getattr(s, "value",
                                                                                                     None))):
                raise NoScan("its body writes with out= into what is no name or subscript of one")
            if isinstance(n, (ast.Attribute, ast.Starred)) and isinstance(getattr(n, "ctx", None), ast.Store):
                raise NoScan("its body stores into an attribute")
        inner = depth + isinstance(s, (ast.For, ast.While))
        for field in ("body", "orelse"):
            if isinstance(getattr(s, field, None), list):
                _check_body(getattr(s, field), inner if field == "body" else depth, appended, helpers)


def _root(t) -> str | None:
    while isinstance(t, ast.Subscript):
        t = t.value
    return t.id if isinstance(t, ast.Name) else None


def _written(stmts: list) -> set:
    """Names the statements write into: subscript stores and augmented
    assignments (numpy's += writes into the array)."""
    out = set()
    for s in stmts:
        for n in ast.walk(s):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                n, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Subscript) and isinstance(x.ctx, ast.Store) or \
                            isinstance(n, ast.AugAssign) and x is t:
                        out.add(_root(x))
            out.update(_root(k.value) for k in _outs(n))
    out.discard(None)
    return out


def _outs(n) -> list:
    """The `out=` keywords of call n (a name, or a subscript of one: what
    numpy's call writes into), or [] (none, or not n a call)."""
    if not isinstance(n, ast.Call):
        return []
    return [k for k in n.keywords if k.arg == "out" and _root(k.value) is not None]


def _user_calls(stmts: list, scope: dict, globals_: dict) -> list:
    """The statements' calls of Python functions of the user's (`_poisson(nit,
    p, b)`, `solvers.relax(p)`): they may write into the arrays they are
    handed, as a subscript store would (numpy's functions write only into
    out=, builtins and methods of lists into no array)."""
    return [c for st in stmts for c in ast.walk(st)
            if isinstance(c, ast.Call) and _users_function(_callee(c, scope, globals_))]


def _method_calls(stmts: list, scope: dict, globals_: dict) -> list:
    """The statements' calls of methods of the user's classes on a name's
    object (`c.step(x)`, `self.cell(x[t], h)`)."""
    return [c for st in stmts for c in ast.walk(st)
            if isinstance(c, ast.Call) and _method(c, scope, globals_) is not None]


def _method(c: ast.Call, scope: dict, globals_: dict):
    """The function a call of a name's method runs, where the name holds an
    object of the user's class and the method is a plain function of it
    (looked up on the class: no property or __getattr__ runs), else None."""
    f = c.func
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
        return None
    obj = _lookup(f.value.id, scope, globals_)
    if obj is _NOT or isinstance(obj, (types.ModuleType, Tracer, SymInt, type)) or type(obj).__module__ in (
            "builtins", "numpy") or is_numpy(sys.modules.get(type(obj).__module__)):
        return None
    fn = inspect.getattr_static(type(obj), f.attr, None)
    return fn if _users_function(fn) else None


def _passed(calls: list, scope: dict, globals_: dict) -> set:
    """Names of traced arrays of the frame the calls hand over to a helper
    that may write into them (not one whose source writes into no array:
    _writes_nothing)."""
    return {a.id for c in calls for a in list(c.args) + [k.value for k in c.keywords]
            if isinstance(a, ast.Name) and type(scope.get(a.id)) is Tracer and not scope[a.id].value.weak
            and not _writes_nothing(_callee(c, scope, globals_))}


# methods that change the list, dict or set they are called on
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault",
                       "add", "discard", "sort", "reverse", "__setitem__", "__delitem__"})
_EFFECTS: dict = {}  # code -> whether the function may change Python state (_python_effects)


def _python_effects(f, depth: int = 0) -> str | None:
    """What Python state user function f may change that its caller sees,
    read from its source: "state" for a global or nonlocal statement, an
    attribute stored or deleted, a subscript stored or deleted in a name it
    does not bind, a method of _MUTATORS called on a name it does not bind
    or is handed, or a user function it calls (a few levels down) that
    may; "handed" where it only stores into subscripts of what it is
    handed (an array the caller's scan carries: _passed; a dict, a list:
    state); else None.  A scan's jitted body runs such a helper when it is
    traced, not per trip (probe 21: a closure's call counter came back 1)."""
    if type(f) is not types.FunctionType or depth > 3:
        return "state"
    code = f.__code__
    if code not in _EFFECTS:
        _EFFECTS[code] = "state"  # (a recursive call: not shown free of effects)
        _EFFECTS[code] = _source_effects(f, depth)
    return _EFFECTS[code]


def _definition(f):
    """The ast of user function f's definition from its source: its def, or
    for a lambda a module of every lambda of the statement it stands in;
    None where there is no source or it is no def."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(f)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    if f.__name__ == "<lambda>":
        return ast.Module([ast.Expr(n) for n in ast.walk(tree) if isinstance(n, ast.Lambda)], [])
    fdef = tree.body[0] if tree.body else None
    return fdef if isinstance(fdef, ast.FunctionDef) else None


def _source_effects(f, depth: int) -> str | None:
    fdef = _definition(f)
    if fdef is None:
        return "state"
    code = f.__code__
    handed = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    bound = set(code.co_varnames) | set(code.co_cellvars)  # (its own names: parameters and locals)
    out = None
    for n in ast.walk(fdef):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            return "state"
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
            return "state"
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)):
            root = _root(n)
            if root is None or root not in bound:
                return "state"
            if root in handed:
                out = "handed"
        if isinstance(n, ast.Call):
            fn = n.func
            if isinstance(fn, ast.Attribute) and fn.attr in _MUTATORS:
                root = _root(fn.value)
                if root is None or root not in bound or root in handed:
                    return "state"
            if isinstance(fn, ast.Name) and fn.id not in bound:
                callee = f.__globals__.get(fn.id)
                if fn.id in code.co_freevars and f.__closure__:
                    try:
                        callee = f.__closure__[code.co_freevars.index(fn.id)].cell_contents
                    except ValueError:
                        return "state"
                if _users_function(callee) and _python_effects(callee, depth + 1):
                    return "state"
    return out


# methods and numpy functions that write into an array they are handed without out= (np.add.at: "at")
_WRITERS = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis", "shuffle", "at",
                      "setfield", "itemset", "resize", "sort", "partition", "fill", "setflags", "byteswap"})
_PURE: dict = {}  # code -> whether the function writes into no array (_writes_nothing)


def _writes_nothing(f, depth: int = 0) -> bool:
    """Whether user function f provably writes into no array it is handed,
    read from its source: no subscript, attribute or augmented assignment,
    no out=, no method or numpy function that writes (_WRITERS), no method
    call on a name of its own (a parameter, or a local that may be one), no
    nested function, global or nonlocal, and every user function it calls
    (a few levels down) the same.  `cell = lambda..`, `def cell(x, h, W):
    return np.tanh(x @ W + h)`: its arguments are only read."""
    if type(f) is not types.FunctionType or depth > 3:
        return False
    code = f.__code__
    if code not in _PURE:
        _PURE[code] = False  # (a recursive call: not shown pure)
        _PURE[code] = _source_writes_nothing(f, depth)
    return _PURE[code]


def _source_writes_nothing(f, depth: int) -> bool:
    fdef = _definition(f)
    if not isinstance(fdef, ast.FunctionDef) or fdef.decorator_list:
        return False
    own = set(f.__code__.co_varnames) | set(f.__code__.co_cellvars)
    for n in ast.walk(fdef):
        if n is not fdef and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                                             ast.Global, ast.Nonlocal, ast.AugAssign)):
            return False
        if isinstance(n, (ast.Subscript, ast.Attribute, ast.Starred)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            return False
        if isinstance(n, ast.Call) and not _reads_only(n, f, own, depth):
            return False
    return True


# methods of an array that write into no array (called on a name of the helper's own: a parameter)
_READERS = frozenset({"sum", "mean", "max", "min", "std", "var", "prod", "any", "all", "argmax", "argmin",
                      "reshape", "transpose", "swapaxes", "squeeze", "ravel", "flatten", "astype", "copy", "dot",
                      "cumsum", "cumprod", "round", "conj", "item", "tolist", "nonzero", "take", "repeat"})


def _reads_only(n: ast.Call, f, own: set, depth: int) -> bool:
    """Whether call n in helper f writes into no array: a method of _READERS
    on an array of its own; a builtin or numpy function (not one of
    _WRITERS), or a user function shown so (_writes_nothing), by name or
    through a module (`np.tanh`, `layers.cell`); no out=, nor **kwargs."""
    if any(k.arg in (None, "out") for k in n.keywords):
        return False
    fn, path = n.func, []
    while isinstance(fn, ast.Attribute):
        path.insert(0, fn.attr)
        fn = fn.value
    if not isinstance(fn, ast.Name) or fn.id in own:  # (`x.sum(-1)`, `abs(x).max()`: a method of an array)
        return len(path) == 1 and path[0] in _READERS
    callee, owner = f.__globals__.get(fn.id, getattr(builtins, fn.id, None)), None
    for attr in path:
        if not isinstance(callee, (types.ModuleType, np.ufunc)) and not (
                isinstance(callee, type) and is_numpy(sys.modules.get(callee.__module__))):
            return False  # (a method of an object the helper reads: unknown)
        owner, callee = callee, getattr(callee, attr, None)
    name = getattr(callee, "__name__", None)
    if name in _WRITERS or path and path[-1] in _WRITERS \
            or callee in (setattr, delattr, exec, eval, getattr(builtins, "__import__")):
        return False
    if is_numpy(owner) and callable(callee) and not isinstance(callee, type):
        return True  # (numpy's function, or the trace's view of it, `np.array` of jit/trace.py's numpy: no out=)
    if _users_function(callee):
        return _writes_nothing(callee, depth + 1)
    if isinstance(callee, np.ufunc) or isinstance(callee, types.BuiltinFunctionType) and callee.__module__ in (
            "builtins", "math", "cmath"):
        return True
    return callable(callee) and not isinstance(callee, type) and is_numpy(
        sys.modules.get(getattr(callee, "__module__", None) or ""))


def _callee(c: ast.Call, scope: dict, globals_: dict):
    """What a call calls, when it is a name's or a user module's function
    (`relax(p)`, `solvers.relax(p)`), else None; nothing is called."""
    f = c.func
    if isinstance(f, ast.Name):
        return _lookup(f.id, scope, globals_)
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        base = _lookup(f.value.id, scope, globals_)
        if isinstance(base, types.ModuleType) and not is_numpy(base):
            return getattr(base, f.attr, None)
    return None


def is_numpy(module) -> bool:
    """numpy or one of its submodules."""
    return isinstance(module, types.ModuleType) and (module.__name__ == "numpy"
                                                     or module.__name__.startswith("numpy."))


def _users_function(f) -> bool:
    """A Python function of the user's: neither numpy's nor shapejit's (the
    trace's own len, jit/tracer.py)."""
    return type(f) is types.FunctionType and user_file(f.__code__.co_filename) \
        and not is_numpy(sys.modules.get(f.__module__))


def _read(stmts: list) -> set:
    return {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


_CREATORS = {"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like", "array",
             "copy", "arange"}


_FRESH = {"cumsum", "cumprod", "sort", "concatenate", "stack", "vstack", "hstack", "where", "dot", "matmul",
          "outer", "clip", "round", "diff", "tile", "repeat", "kron", "einsum"}  # (and every ufunc)


def _made_by_the_trip(stmts: list, scope: dict, globals_: dict) -> set:
    """Names every assignment of which in the statements binds a new array
    (`cur = np.empty(m + 1)`, `row = x[t].copy()`): a trip's own, which its
    writes reach no one else through (`v -= x` keeps v's array: numpy's in-place)."""
    fresh, other = set(), set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.For)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                new = isinstance(n, ast.Assign) and len(targets) == 1 and _new_array(n.value, scope, globals_)
                for t in targets:
                    if isinstance(t, ast.Name):
                        (fresh if new else other).add(t.id)
                    elif not isinstance(t, ast.Subscript):
                        other |= {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
    return fresh - other


def _new_array(e, scope: dict, globals_: dict) -> bool:
    """An expression that makes a new array: arithmetic or a comparison (`w / w.sum()`),
    `<expr>.copy()`, or with numpy's own np a creation function, a ufunc
    (`np.exp(x)`) or a ufunc's method (`np.maximum.accumulate(c)`), or
    another function whose result is never a view (`np.cumsum(w)`), without out=."""
    if isinstance(e, (ast.BinOp, ast.UnaryOp, ast.Compare)):
        return True
    if not isinstance(e, ast.Call) or not isinstance(e.func, ast.Attribute):
        return False
    f = e.func
    if f.attr == "copy" and not e.args and not e.keywords:
        return True
    if any(k.arg == "out" for k in e.keywords):
        return False
    if f.attr in ("accumulate", "reduce", "reduceat", "outer") and isinstance(f.value, ast.Attribute) \
            and isinstance(f.value.value, ast.Name):  # (a ufunc's method: np.maximum.accumulate(c))
        module = _lookup(f.value.value.id, scope, globals_)
        return isinstance(module, types.ModuleType) and module.__name__ == "numpy" \
            and isinstance(getattr(np, f.value.attr, None), np.ufunc)
    if not isinstance(f.value, ast.Name):
        return False
    module = _lookup(f.value.id, scope, globals_)  # (numpy, or the trace's proxy of it: jit/trace.py)
    if not (isinstance(module, types.ModuleType) and module.__name__ == "numpy"):
        return False
    return f.attr in _CREATORS or f.attr in _FRESH or isinstance(getattr(np, f.attr, None), np.ufunc)


def read_before_bound(stmts: list, temps: set, bound: set | None = None) -> set:
    """The temps a trip may read before it binds them: bound by a plain
    assignment in an earlier statement (in both branches of an if), or as
    an inner loop's variable within that loop's body (after an inner loop,
    what only its body binds is not: it may run no trip).  `bound` grows
    with what the statements bind."""
    bound = set() if bound is None else bound
    early = set()
    for st in stmts:
        if isinstance(st, ast.For):  # (its target's names, `for W, (b, c) in layers`, bound in its body)
            early |= (_read([ast.Expr(st.iter)]) & temps) - bound
            early |= read_before_bound(st.body, temps, bound | {n.id for n in ast.walk(st.target)
                                                                if isinstance(n, ast.Name)})
            early |= (_read(st.orelse) & temps) - bound
        elif isinstance(st, ast.If):
            early |= (_read([ast.Expr(st.test)]) & temps) - bound
            a, b = set(bound), set(bound)
            early |= read_before_bound(st.body, temps, a) | read_before_bound(st.orelse, temps, b)
            bound |= a & b
        else:
            early |= (_read([st]) & temps) - bound
            if isinstance(st, ast.Assign):
                bound |= {n.id for t in st.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return early


def _check_private(ctx, name: str, scope: dict) -> None:
    """A carried array the body writes into must be one the function made or
    an argument (or held array), whole, and no other name holds: numpy's
    writes reach no one else, so the scan may write into a copy, whose
    values the array takes after the loop (an argument's written back into
    the caller's array at the end of the call, as any write into one; a
    call passing it twice runs in numpy, runtime/generate.py)."""
    v = scope[name]
    s = v._storage
    origin = s.origin if s is not None else v.value
    made = ctx.producers.get(origin.id)
    if v._chain or made is not None and made.op == "const":
        raise NoScan(f"it writes into {name}, a view or a captured array")
    for other, x in scope.items():
        if other != name and isinstance(x, Tracer) and (x is v or s is not None and x._storage is s):
            raise NoScan(f"it writes into {name}, whose array {other} holds too")


def _unheld(v, name: str):
    """A value the body reads as it is: a held object's own (the body's jit
    reads its arrays at every call itself); never a trace's value."""
    from jit.held import HeldMapping, HeldObject, HeldSequence
    for cls, field in ((HeldObject, "_obj"), (HeldSequence, "_seq"), (HeldMapping, "_map")):
        if isinstance(v, cls):
            return getattr(v, field)
    if holds_traced(v) or isinstance(v, types.FunctionType) and any(holds_traced(_contents(c))
                                                                      for c in v.__closure__ or ()):
        raise NoScan(f"{name} holds values of the trace")  # (a function: in its closure, `def f(W): ... X @ W`)
    return v


def _traced_cells(v, name: str, assigned: set) -> dict:
    """{a name the loop's body gives it: the value} of each cell of function
    `v`, one the frame made, that holds a value of the trace as it is (a
    Tracer or a dim: the body's own makes the function again, rebind_cells);
    NoScan where a cell holds one otherwise (in a list), or holds a name the
    loop binds anew (numpy's call would read each trip's)."""
    if not isinstance(v, types.FunctionType) or not v.__closure__:
        return {}
    cells = {}
    for k, (var, cell) in enumerate(zip(v.__code__.co_freevars, v.__closure__)):
        x = _contents(cell)
        if isinstance(x, (Tracer, SymInt)):
            if var in assigned:
                raise NoScan(f"{name} reads {var}, which the loop binds anew")
            cells[f"__sj_cell_{name}_{k}__"] = x
        elif holds_traced(x):
            raise NoScan(f"{name} holds values of the trace")
    return cells


def _tree_of(v, name: str, loop) -> tuple:
    """(the structure of container `v` -- nested dicts, lists and tuples --
    with a name for each value of the trace it holds and its other leaves
    as they are, {leaf name: value}), the loop reading it only: NoScan where
    the loop may change it (a store into it or into what it holds, a method
    call on it other than a read) or it holds what the body could not take."""
    for node in ast.walk(loop):
        root = node
        while isinstance(root, (ast.Subscript, ast.Attribute)):
            root = root.value
        if not (isinstance(root, ast.Name) and root.id == name and root is not node):
            continue
        if isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            raise NoScan(f"it stores into {name}")
    for node in ast.walk(loop):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value,
                                                                                            ast.Name) \
                and node.func.value.id == name and node.func.attr not in _READS:
            raise NoScan(f"it calls {name}.{node.func.attr}()")
    leaves: list = []
    treedef = pytree.flatten(v, leaves)
    named, values = [], {}
    for k, x in enumerate(leaves):
        if isinstance(x, (Tracer, SymInt)):
            values[f"__sj_leaf_{name}_{k}__"] = x
            named.append(f"__sj_leaf_{name}_{k}__")
        elif type(x) in _PLAIN:
            named.append(("const", x))
        else:
            raise NoScan(f"{name} holds values of the trace with a {type(x).__name__}")
    tree = _named_tree(treedef, iter(named), name)
    return tree, values


_READS = frozenset({"get", "keys", "values", "items", "index", "count"})  # (a container's methods that change nothing)


def _named_tree(treedef, named, name: str):
    """`treedef` (jit/pytree.py) with its leaves `named` (a leaf's name, or
    ("const", a plain value)): hashable, a key of the body."""
    if treedef is pytree.LEAF:
        return next(named)
    t = treedef[0]
    if t is dict:
        if not all(type(k) in (str, int) for k in treedef[1]):
            raise NoScan(f"{name} is keyed by what the body could not write")
        return (dict, treedef[1], tuple(_named_tree(d, named, name) for d in treedef[2]))
    if t not in (list, tuple):
        raise NoScan(f"{name} holds values of the trace in a {t.__name__}")
    return (t, tuple(_named_tree(d, named, name) for d in treedef[1]))


def _tree_expr(tree) -> ast.expr:
    """The expression that builds a container of _named_tree's again."""
    if type(tree) is str:
        return ast.Name(tree, ast.Load())
    if tree[0] == "const":
        return ast.Constant(tree[1])
    if tree[0] is dict:
        return ast.Dict([ast.Constant(k) for k in tree[1]], [_tree_expr(d) for d in tree[2]])
    items = [_tree_expr(d) for d in tree[1]]
    return ast.List(items, ast.Load()) if tree[0] is list else ast.Tuple(items, ast.Load())


def _template(name: str) -> str:
    """The body's name for function `name` of the frame that it makes again
    (_traced_cells)."""
    return f"__sj_fn_{name}__"


def _cell_index(name: str) -> int:
    """The index of the cell the body names `name` (_traced_cells)."""
    return int(name.rsplit("_", 3)[-3])


_HOLLOW = object()  # (a cell left empty: the scan's function that its body makes again, _traced_cells)


def rebind_cells(fn, *cells):
    """Function `fn` again, the cells of `cells` (their index, a value)
    holding those values (the loop body's, _traced_cells), or empty."""
    closure = list(fn.__closure__)
    for k, value in cells:
        closure[k] = types.CellType() if value is _HOLLOW else types.CellType(value)
    made = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, tuple(closure))
    made.__kwdefaults__, made.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    return made


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # (a cell not yet bound)
        return None


def _body_jit(loops: dict, scan_jit, site, fn, target: str, carried, free, consts: dict, n_ints: int,
              carried_kinds: tuple, stacked=(), rebound=None, trees=None):
    """The jitted body of the loop: a function (target, *carried, *free) ->
    (carried..., what it appends to each list of `stacked`...), its closure
    `consts`; one per layout and closure values (a retrace of the function
    reuses it, and its compiled entries).  `loops` and `scan_jit` are the
    jit's (jit/api.py)."""
    last = _tested_last(site.node, carried, carried_kinds, free[len(free) - n_ints:], stacked)
    rebound, trees = rebound or {}, trees or {}
    key = (target, tuple(carried), tuple(free), tuple(sorted(consts)), carried_kinds, tuple(stacked), last,
           tuple(sorted(rebound.items())), tuple(sorted(trees.items())))
    values = tuple(consts[n] for n in sorted(consts))
    bodies = loops.setdefault(("bodies", site), [])  # (the jit's own: they go with it)
    for k, vals, body in bodies:
        if k == key and len(vals) == len(values) and all(a is b or type(a) is type(b) and type(a) in _PLAIN
                                                         and a == b for a, b in zip(vals, values)):
            return body
    if key not in site.scan_codes:
        site.scan_codes[key] = _compile_body(site, fn, target, carried, free, sorted(consts), stacked, last,
                                             rebound, trees)
    factory = types.FunctionType(site.scan_codes[key], fn.__globals__, "__sj_scan__")
    where = f"{site.filename.rpartition('/')[2]}:{site.node.lineno}"
    body = scan_jit(factory(*values), f"{getattr(fn, '__qualname__', fn.__name__)}.<loop at {where}>")
    # (the loop variable and the dims it reads are symbols from the first trip: one compile)
    first_int = 1 + len(carried) + len(free) - n_ints
    body._dyn_ints = frozenset({0} | set(range(first_int, first_int + n_ints))
                               | {1 + k for k, kind in enumerate(carried_kinds) if kind == "int"})
    bodies.append((key, values, body))
    return body


def _tested_last(loop, carried, carried_kinds: tuple, ints, stacked) -> bool:
    """Whether a while loop's body tests at the end of each trip, as a value
    (_compile_body): a loop of no exit and no list it appends to, whose test
    reads a value of the data (`while err > tol`: a graph break at the start
    of each trip, the last deciding otherwise, through the body's own jit
    call); not one whose test reads only ints and shapes (`while k <
    x.shape[0]`: guards decide it, with no break, and trip 0 would take an
    entry of its own)."""
    if not isinstance(loop, ast.While) or stacked or _exits(loop.body):
        return False
    ints = set(ints) | {n for n, k in zip(carried, carried_kinds) if k == "int"}
    parents = {id(c): p for p in ast.walk(loop.test) for c in ast.iter_child_nodes(p)}
    for n in ast.walk(loop.test):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in ints:
            up = parents.get(id(n))
            if not (isinstance(up, ast.Attribute) and up.attr == "shape" or isinstance(up, ast.Call)
                    and isinstance(up.func, ast.Name) and up.func.id == "len" or n.id == "len"):
                return True
    return False


def _compile_body(site, fn, target: str, carried: list, free: list, closure: list, stacked=(),
                  tested_last: bool = False, rebound=None, trees=None) -> types.CodeType:
    """The code of `def __sj_scan__(*closure): def body(target, *carried, *free):
    <the loop's body>; return (*carried,); return body`, compiled from the
    loop's own statements (their lines kept: tracebacks and explain() point
    into the user's file).  A body with exits returns one more value, whether
    the loop stops after this trip: each `if <test>: break` becomes
    `if <test>: return (*carried, True)`, and the end `return (*carried, False)`.
    A while loop's body starts `if not <test>: return (*carried, True)`; one
    `tested_last` (_tested_last) starts `if <trip> == 0 and not <test>: ...`
    and ends `return (*carried, logical_not(<test>))`.  Each
    `<list>.append(<value>)` of a list of `stacked` becomes
    `__sj_y<k> = <value>`, returned after the carried values."""
    loop = site.node

    def args(names):
        return ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in names], vararg=None, kwonlyargs=[],
                             kw_defaults=[], kwarg=None, defaults=[])

    def function(name, params, body):
        extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
        return ast.FunctionDef(name=name, args=args(params), body=body, decorator_list=[], returns=None, **extra)
    statements = copy.deepcopy(loop.body)
    exits, stops = {id(x) for x in _exits(statements)}, _stops(loop)

    ys = [f"__sj_y{k}" for k in range(len(stacked))]
    # (`tested_last`: a while loop tests at the end of each trip, as a value, whether the next one runs, and
    # first at trip 0 only: its last trip takes the compiled entry the others took, not a graph break)

    def returned(stop: bool, where) -> ast.Return:
        flag = ast.Constant(stop)
        if tested_last and not stop:
            flag = ast.Call(ast.Name(NOT, ast.Load()), [copy.deepcopy(loop.test)], [])
        values = [ast.Name(n, ast.Load()) for n in [*carried, *ys]] + ([flag] if stops else [])
        return ast.copy_location(ast.Return(ast.Tuple(values, ast.Load())), where)
    last_exit = _last_exit(statements) if stops and not stacked and isinstance(loop, ast.For) else None
    for k, st in enumerate(statements):
        value = append_value(st)
        if value is not None and st.value.func.value.id in stacked:
            y = ys[list(stacked).index(st.value.func.value.id)]
            statements[k] = ast.copy_location(ast.Assign([ast.Name(y, ast.Store())], value), st)
        if id(st) in exits and st is not last_exit:
            statements[k] = ast.copy_location(ast.If(st.test, [returned(True, st.body[0])], []), st)
    if last_exit is not None:
        # (`if <test>: break` followed only by renames of carried names, `x = x_new`: the test a value, the
        # renames made, and undone where it holds -- a select, jit/lift.py -- so the trip that stops takes
        # the compiled entry the others took, not a graph break of its own)
        k = next(k for k, st in enumerate(statements) if st is last_exit)
        renamed = sorted({t.id for st in statements[k + 1:] for t in ast.walk(st.targets[0])
                          if isinstance(t, ast.Name)} & set(carried))

        def assign(name, value, where):
            return ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), where)
        undo = [assign(n, ast.Name(f"__sj_k_{n}", ast.Load()), last_exit) for n in renamed]
        statements[k:k + 1] = [assign(STOP, last_exit.test, last_exit)] + [
            assign(f"__sj_k_{n}", ast.Name(n, ast.Load()), last_exit) for n in renamed]
        if undo:
            statements.append(ast.copy_location(ast.If(ast.Name(STOP, ast.Load()), undo, []), last_exit))
    _continues_to_returns(statements, lambda st: returned(False, st))
    statements[:0] = _prelude(loop)
    for n, cells in sorted((rebound or {}).items()):  # (`f = rebind_cells(<f of the trace>, (k, <cell k>)...)`)
        made = ast.Call(ast.Name(REBIND, ast.Load()), [ast.Name(_template(n), ast.Load())] + [
            ast.Tuple([ast.Constant(_cell_index(c)), ast.Name(c, ast.Load())], ast.Load())
            for c in cells], [])
        statements.insert(0, ast.copy_location(ast.Assign([ast.Name(n, ast.Store())], made), loop))
    for n, tree in sorted((trees or {}).items()):  # (`p = {'W': <leaf 0>, 'U': <leaf 1>}`: _tree_of)
        statements.insert(0, ast.copy_location(ast.Assign([ast.Name(n, ast.Store())], _tree_expr(tree)), loop))
    if isinstance(loop, ast.While):  # (each trip tests first: `if not <test>: return (*carried, True)`;
        # tested last, only the first: `if <trip> == 0 and not <test>`)
        test = ast.copy_location(ast.UnaryOp(ast.Not(), copy.deepcopy(loop.test)), loop.test)
        if tested_last:
            first = ast.Compare(ast.Name(WHILE_TRIP, ast.Load()), [ast.Eq()], [ast.Constant(0)])
            test = ast.copy_location(ast.BoolOp(ast.And(), [first, test]), loop.test)
        statements.insert(0, ast.copy_location(ast.If(test, [returned(True, loop.test)], []), loop.test))
    ret = returned(False, loop)
    if last_exit is not None:
        ret.value.elts[-1] = ast.Name(STOP, ast.Load())
    name = f"{fn.__name__}_loop_body"
    inner = function(name, [target, *carried, *free], statements + [ret])
    # (numpy's logical_not, by a name of the body's own: a traced bool's, or a Python one's)
    negation = ast.ImportFrom(module="numpy", names=[ast.alias(name="logical_not", asname=NOT)], level=0)
    rebinding = ast.ImportFrom(module="jit.scan", names=[ast.alias(name="rebind_cells", asname=REBIND)], level=0)
    outer = function("__sj_scan__", closure, [negation, rebinding, inner, ast.Return(ast.Name(name, ast.Load()))])
    for n in (ret.value, inner, outer, negation, rebinding, outer.body[3], outer.body[3].value):
        ast.copy_location(n, loop)
    module = ast.Module([outer], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, site.filename, "exec", dont_inherit=True)
    factory = next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == "__sj_scan__")
    body = next(c for c in factory.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
    MADE[body] = module  # (the body's own loops may lift: jit/lift.py reads its source here, not in the file)
    return factory


MADE: dict = {}  # code of a loop body made here -> the module it was compiled from


@dataclass(eq=False)
class ScanCall:
    """What a scan node runs (shapes/ops.py `scan`): `body` from trip start
    to stop by step over the carried arrays (a copy of those it writes
    into), the rest read-only.  Every trip must give each carried value its
    dtype and shape (else ScanMismatch: the call runs in numpy).

    Its fields are plain data (a saved trace holds the call, jit/persist.py):
    `site`, the loop's place among the sites of `fn` (the function whose
    loop it is), and the body's names make the body again in another process
    (`bind`); site -1: the body reads values of the frame (its closure) that
    are no plain numbers or strings (those it holds: `consts`)."""
    step: int
    n_carried: int
    copied: tuple
    free_kinds: tuple
    where: str
    site: int
    target: str
    carried: tuple
    free: tuple
    n_ints: int
    exits: bool = False  # (the body returns one more value: whether the loop stops after that trip)
    carried_kinds: tuple = ()  # (_carried_kind of each carried value before the loop)
    results: tuple = ()  # (the type each carried number had after the trace's trips: "" for an array)
    stacked: tuple = ()  # (the lists each trip appends one array to: the node's outputs after the carried)
    stacked_dtypes: tuple = ()  # (their dtypes, as the trace's trips made them)
    consts: tuple = ()  # ((name, value) the body reads of its frame as they are: plain numbers and strings)
    last: bool = False  # (the node's last output: the index of the last trip run, the loop variable after it)
    joined: tuple = ()  # (per stacked list, whether its rows are joined along their first axis, _Joined)
    numbers: tuple = ()  # (per stacked list, what the trace's trips appended where not arrays: Stacked.numbers)
    views: tuple = ()  # (per stacked list, whether the trace's first trip appended a view of the loop's input)

    def __post_init__(self):
        self.body = self.fn = None  # (the jitted body and the function of the loop: not plain data)
        # (the trace's own run: rows of other lengths join their list; a later call's, where the trace's stacked
        # them: `ragged`, this entry serves no call again, and a trace that joins them serves them all)
        self.tracing = self.ragged = False
        self.inputs = []  # (the trace's run: the arrays the loop reads, which an appended row may view)
        self.served = None  # (the trace's run of the trips, made before its node: what the node's first run gives)
        self.stacked_shapes = ()  # (the stacked outputs' symbolic shapes, for the trace's node: not kept)

    def __repr__(self) -> str:
        return f"<scan of the loop at {self.where}>"

    def bind(self, jf, sites: list) -> bool:
        """Make this saved call's body again, as jit `jf` (whose function
        holds the loop, its `sites` jit/lift.py's) makes it: False where
        the function's source does not give the loop back (its trace is not
        used)."""
        if not 0 <= self.site < len(sites) or _target(sites[self.site].node) != self.target \
                or list(self.stacked) != sites[self.site].appended:
            return False
        site = sites[self.site]
        try:
            self.body = _body_jit(jf._loops, jf._scan_jit, site, jf.fn, self.target, self.carried, self.free,
                                  dict(self.consts), self.n_ints, self.carried_kinds, self.stacked)
        except (SyntaxError, ValueError):
            return False
        self.fn = jf.fn
        jf._loops[site] = None  # (the loop is a scan: a trace of another trip count makes one at once)
        return True

    def __call__(self, xs: list) -> list:
        if self.served is not None:  # (the trace ran the trips before making the node: jit/scan.py _scan)
            out, self.served = self.served, None
            return out
        if self.ragged:
            raise RowsOfOtherLengths(f"the loop at {self.where} appended rows of other lengths: traced again, "
                                     "its lists joined")
        nc = self.n_carried
        if self.tracing:
            self.inputs = [x for x in xs if isinstance(x, np.ndarray)]
        start, stop = int(xs[0]), int(xs[1])
        carried = [np.array(x) if c and isinstance(x, np.ndarray) else x for x, c in zip(xs[2:2 + nc], self.copied)]
        want = [(np.asarray(x).dtype, np.shape(x)) for x in carried]
        free = [_read_only(x) if k == "array" else PYTHON_TYPES[k](x) for x, k in zip(xs[2 + nc:], self.free_kinds)]
        trips = range(start, stop, self.step)
        if self.stacked and not trips:  # (numpy's np.stack of no array raises; its np.array gives float64: numpy
            # decides)
            raise ScanMismatch(f"the loop at {self.where} ran no trip: the lists it appends to hold no row")
        plain, race = False, None
        if PREFER is not None:
            plain = PREFER == "plain" and not self.tracing
        elif not self.tracing:  # (the trace's own run makes the body's entries: through jit's call)
            key = tuple(x.size.bit_length() for x in itertools.chain(carried, free) if type(x) is np.ndarray)
            race = self.ways.get(key)
            if race is None:
                race = self.ways.setdefault(key, [[], [], None])
            plain = race[2] if race[2] is not None else len(race[1]) < len(race[0])
        t0 = time.perf_counter()
        i, carried, rows = (self._plain_trips if plain else self._compiled_trips)(trips, carried, free, want)
        if race is not None and race[2] is None and i:
            race[plain].append((time.perf_counter() - t0) / i)
            if len(race[0]) >= RACE_CALLS and len(race[1]) >= RACE_CALLS:
                race[2] = min(race[1]) < min(race[0])
        if self.last and not i:
            raise ScanMismatch(f"the loop at {self.where} ran no trip: its variable is the one before it")
        for x, name in zip(carried, self.results):
            if name and type(x).__name__ != name:
                raise ScanMismatch(f"the loop at {self.where}: its trips made a carried number a "
                                   f"{type(x).__name__}, where the trace's made a {name}")
        arrays = [x for x in xs if isinstance(x, np.ndarray)]
        # (a value that is, or views, an input -- no trip, or a body returning what it read -- is copied:
        # the executable may reuse an input's buffer once the node has run)
        return [np.array(x) if isinstance(x, np.ndarray) and any(np.may_share_memory(x, a) for a in arrays) else x
                for x in carried] + [r.joined() if type(r) is _Joined else r for r in rows] \
            + ([trips[i - 1]] if self.last else [])

    @property
    def ways(self) -> dict:
        """Size class of the arrays the trips take -> [per-trip seconds of the
        calls that ran the jitted body, of those that ran the plain one,
        whether the plain body runs its calls (None: racing, RACE_CALLS calls
        each way)]: the body's, shared by every scan of its loop (a loop
        inside another that the trace unrolls is a scan per outer trip)."""
        ways = getattr(self.body, "scan_ways", None)
        if ways is None:
            ways = self.body.scan_ways = {}
        return ways

    def describe(self) -> list[str]:
        """How its calls run the trips, per size class of the arrays they take (explain())."""
        out = []
        for key, (jitted, plain, way) in sorted(self.ways.items()):
            sizes = ", ".join(f"~2^{max(b - 1, 0)}" for b in key) or "none"
            times = f"{_us(jitted)} a trip jitted, {_us(plain)} plain"
            out.append(f"{self.where} (arrays of {sizes} elements): " + (
                f"racing ({times})" if way is None else
                f"its body as plain Python and numpy ({times}: faster)" if way else
                f"its body jitted ({times}: faster)"))
        return out

    def _plain_trips(self, trips, carried: list, free: list, want: list) -> tuple:
        """(trips run, the carried values after them, the stacked outputs)
        with the loop's body as the plain function it is: numpy's own steps,
        no entry to look up or check per trip.  Only the values after the
        last trip must have the trace's dtypes and shapes (the steps after
        the loop were traced with them); numpy's trips may make any values
        between."""
        nc, ny, exits, fn = self.n_carried, len(self.stacked), self.exits, self.body.fn
        rows = [None] * ny
        i, t = 0, None
        if not ny and not exits:  # (the body returns the carried values, and nothing else)
            for t in trips:
                carried = fn(t, *carried, *free)
            i = len(trips)
        else:
            appended = []  # (each trip's appended values: stacked when the trips are done, _stack_plain)
            for t in trips:
                out = fn(t, *carried, *free)
                i += 1
                if ny:
                    appended.append(out[nc:nc + ny])
                carried = out[:nc]
                if exits and out[nc + ny]:
                    break
            if ny:
                rows = self._stack_plain(appended, len(trips))
        carried = list(carried)
        _check_trip(carried, want, t, self.where)
        return i, carried, rows

    def _stack_plain(self, appended: list, trips: int) -> list:
        """The stacked outputs of the trips' appended values (a tuple a
        trip): what _put_rows makes of them trip by trip, made at once where
        every trip appended a value of one type, dtype and shape (numbers of
        the kind the trace's trips appended, arrays of its dtype), and trip
        by trip otherwise (its errors)."""
        rows = []
        for k, ys in enumerate(zip(*appended)):
            t, want = type(ys[0]), self.stacked_dtypes[k] if self.stacked_dtypes else None
            kind = _NUMBER_KINDS.get(t, "s" if issubclass(t, np.generic) else "")
            row = None
            if len(ys) == trips and kind == (self.numbers[k] if self.numbers else "") and not self.joined[k] \
                    and all(type(y) is t for y in ys):
                if kind:
                    row = np.array(ys)
                elif t is np.ndarray and all(y.shape == ys[0].shape and y.dtype is ys[0].dtype for y in ys):
                    row = np.stack(ys)
            if row is None or want is not None and row.dtype.str != want:
                rows = [None] * len(appended[0])
                for i, y in enumerate(appended):
                    _put_rows(rows, y, i, trips, self)
                return rows
            rows.append(row)
        return rows

    def _compiled_trips(self, trips, carried: list, free: list, want: list) -> tuple:
        """_plain_trips' answer with the jitted body: the entry the last trip
        took pinned, its guards checked per trip."""
        nc, exits, ny = self.n_carried, self.exits, len(self.stacked)
        body, run, tries = self.body, None, 0
        arrays_in = [x for x, k in zip(free, self.free_kinds) if k == "array"]
        # (the shapes jit's guards take after the carried arrays': what the body reads; a carried
        # number -- a Python float, numpy's float64 -- has none)
        fixed = tuple(x.shape for x in arrays_in) + tuple((x,) for x, k in zip(free, self.free_kinds) if k == "int")
        rest = arrays_in + [x for x, k in zip(free, self.free_kinds) if k in ("float", "complex")]
        layout = _layout(carried)
        flat = pytree.flat_tuple(nc + ny + exits)
        steady = False  # (the pinned entry gave back the layout it takes: it will again, the layout is not redone)
        if trips:  # (the entry of the first trip, when the body has one: no jit call of its own, whose lookup
            # costs more than a small body's kernels)
            tries += 1
            found = body._entry_for((trips[0], *carried, *free), flat=True)  # (free: arrays and numbers)
            if found is not None:
                e, held = found
                run = (e.guards.check, e.run, layout, e.out_treedef == flat, rest + held, e.out_treedef)
        rows = [None] * ny  # (the stacked outputs, made at the first trip: a row of each per trip)
        keys: dict = {}  # (carried layout -> the body's entries of it, _entries_for)
        i = 0
        while i < len(trips):
            if steady and run[3]:  # (the pinned entry took and gave this layout: trips run here until one
                # fails its guards or raises, with nothing redone per trip)
                i, carried, stopped = _steady_trips(trips, i, carried, self.carried_kinds, run, fixed, want,
                                                    self, exits, rows)
                if i == len(trips) or stopped:
                    break
                steady = False  # (trip i failed the guards or raised: it runs below, as any other)
            t = trips[i]
            i += 1
            out = None
            for attempt in range(2):
                if attempt:  # (the pinned entry's guards failed -- trip 0's own, `if <trip> == 0 and not test`,
                    # or a slice of the trip's index that is empty or of one element at the first trips and the
                    # last -- or the carried values' layout changed, `err = 1.0` then numpy's float64: the
                    # entry of this trip, when the body has one, not jit's own call)
                    if tries >= MAX_PINS:
                        break
                    tries += 1
                    if layout not in keys:  # (the entries of this layout's key: looked up once a call, their
                        # guards checked per trip; the list grows as the body traces; a key not traced yet,
                        # looked up again after jit's own call has traced it)
                        found = body._entries_for((t, *carried, *free), flat=True)
                        if found is None:
                            break
                        keys[layout] = found
                    entries, held, _ = keys[layout]
                    shapes = ((t,),) + _shapes(carried, self.carried_kinds) + fixed
                    e = next((e for e in entries if e.guards.check(shapes) is not None), None)
                    if e is None:
                        break
                    run = (e.guards.check, e.run, layout, e.out_treedef == flat, rest + held, e.out_treedef)
                if run is None or not (steady or layout == run[2]):
                    continue
                # (the entry the last trips took, its guards checked for this t: jit's own lookup of
                # it per trip would cost more than a small body's kernels)
                dims = run[0](((t,),) + _shapes(carried, self.carried_kinds) + fixed)
                if dims is None:
                    continue
                try:
                    res = run[1](_inputs(carried, self.carried_kinds) + run[4], dims)
                    # (the carried values first, then what the entry writes back or checks)
                    out = res[:nc + ny + exits] if run[3] else list(pytree.unflatten(run[5], iter(res)))
                except Exception:  # noqa: BLE001 - jit's own call decides (a break, numpy's error...)
                    pass
                break
            pinned = out is not None
            if not pinned:
                steady = False
                out = list(body(t, *carried, *free))
            stopped = exits and bool(out[nc + ny])
            if ny:
                _put_rows(rows, out[nc:nc + ny], i - 1, len(trips), self)
            out = out[:nc]
            _check_trip(out, want, t, self.where)
            carried = out
            if stopped:
                break
            if not steady:
                new = _layout(out)
                steady = pinned and new == layout == run[2]
                layout = new
        return i, carried, rows


def _steady_trips(trips, i: int, carried: list, kinds: tuple, run: tuple, fixed: tuple, want: list, call,
                  exits: bool, rows: list):
    """(the next trip, the carried values, whether the last trip ran was the
    loop's last) after running trips[i:] through the pinned entry `run`
    while its guards pass and it returns: the scan's own loop, with nothing
    but the guards, the entry and the trip's check.  `fixed`: the shapes
    the guards take after the carried values' (whose own do not change
    from trip to trip, but a carried int's: a symbol's value); `rows`, the
    stacked outputs, take each trip's appended values."""
    check, entry, held = run[0], run[1], run[4]
    nc, ny, where = len(carried), len(rows), call.where
    # (what the guards and the entry take of the carried values, laid out once: an array's shape, a
    # Python int's value where the body takes it as a symbol; the arrays' shapes stay the trace's, checked)
    ints = [k for k in range(nc) if kinds[k] == "int" and type(carried[k]) is int]
    arrays = [k for k in range(nc) if type(carried[k]) is np.ndarray]
    numbers = [(k, type(carried[k])) for k in range(nc) if type(carried[k]) is not np.ndarray]
    shapes = _shapes(carried, kinds) + fixed
    layout = [k for k in range(nc) if isinstance(carried[k], np.ndarray) or k in ints]  # (_shapes' order)
    at = [(j, k) for j, k in enumerate(layout) if k in ints]
    taken = [k for k in range(nc) if k not in ints]  # (_inputs')
    checked = [(k,) + tuple(want[k]) for k in arrays]
    appends_numbers = any(call.numbers)  # (what trips append that is not an array: _put_rows's to check)
    for i in range(i, len(trips)):
        t = trips[i]
        if ints:
            shapes = list(shapes)
            for j, k in at:
                shapes[j] = (carried[k],)
            shapes = tuple(shapes)
        dims = check(((t,),) + shapes)
        if dims is None:
            return i, carried, False
        try:
            res = entry(([carried[k] for k in taken] if ints else carried) + held, dims)
        except Exception:  # noqa: BLE001 - the scan's own loop runs the trip again through jit's call
            return i, carried, False
        out = res[:nc]
        if ny:
            for row, y in zip(rows, res[nc:nc + ny]):
                if not isinstance(y, _ROWS) or type(row) is _Joined or y.dtype is not row.dtype \
                        or y.shape != row.shape[1:] or type(y) is not np.ndarray and not appends_numbers:
                    _put_rows(rows, res[nc:nc + ny], i, len(trips), call)
                    break
                row[i] = y
        for k, dtype, shape in checked:
            x = out[k]
            if type(x) is not np.ndarray or x.shape != shape or x.dtype is not dtype:  # (the same dtype is one
                _check_trip(out, want, t, where)  # object: else compared, and all of them)
                break
        stop = exits and res[nc + ny]
        for k, kind in numbers:
            if type(out[k]) is not kind:  # (a carried number of another type: the trips go on outside)
                _check_trip(out, want, t, where)
                return i + 1, out, bool(stop)
        carried = out
        if stop:
            return i + 1, carried, True
    return len(trips), carried, False


class _Joined:
    """A stacked output whose trips appended rows of other lengths (the last
    batch of `for s in range(0, n, bs): out.append(f(X[s:s + bs]))`): the
    rows, each with the dtype and trailing dims of the first, joined along
    their first axis when the trips are done (np.concatenate's result; the
    list after the loop is only that: tracer.py Stacked)."""

    __slots__ = ("parts", "dtype", "trailing")

    def __init__(self, parts: list, dtype, trailing: tuple):
        self.parts, self.dtype, self.trailing = parts, dtype, trailing

    def add(self, y) -> bool:
        """Append row y (a copy: a trip's buffer may be the next trip's); False
        for one of another dtype, rank or trailing dims."""
        if type(y) is not np.ndarray or y.dtype != self.dtype or y.shape[1:] != self.trailing \
                or y.ndim != len(self.trailing) + 1:
            return False
        self.parts.append(np.array(y))
        return True

    def joined(self) -> np.ndarray:
        return np.concatenate(self.parts)


def _put_rows(rows: list, ys, i: int, trips: int, call) -> None:
    """Trip i's appended values into the stacked outputs `rows` (made at
    the first trip, of `trips` rows and the dtype the trace's trips gave,
    `call`'s, or joined: _Joined); ScanMismatch for a value of another
    dtype or shape than the first trip's (numpy's np.stack would raise, or
    promote).  A row of another length than the first, in the trace's own
    run, makes its list joined; in a later call of a scan that stacks it,
    the call's entry serves no call again (ScanCall.ragged: RowsOfOtherLengths,
    and the trace made then joins it)."""
    for k, y in enumerate(ys):
        kind = _NUMBER_KINDS.get(type(y), "s" if isinstance(y, np.generic) else "")
        if call.tracing and i == 0:  # (what the trace's first trip appended: every later call's must be so)
            call.numbers = _with(call.numbers or ("",) * len(ys), k, kind)
            call.views = _with(call.views or (False,) * len(ys), k, type(y) is np.ndarray and any(
                np.may_share_memory(y, a) for a in call.inputs))
        elif (call.numbers[k] if call.numbers else "") != kind:  # (a Python float where the trace's trips
            # appended numpy's, or an array: numpy's list would hold it as it is)
            raise ScanMismatch(f"the loop at {call.where}: trip {i} appended a {type(y).__name__}, not what the "
                               "trace's trips appended")
        y = np.asarray(y) if kind else y  # (a number: a 0-d row; Python's of its default dtype, as np.array)
        want = call.stacked_dtypes[k] if call.stacked_dtypes else None
        if rows[k] is None and i == 0 and type(y) is np.ndarray and want in (None, y.dtype.str):
            rows[k] = _Joined([], y.dtype, y.shape[1:]) if call.joined[k] and y.ndim else \
                np.empty((trips,) + y.shape, y.dtype)
        row = rows[k]
        if type(row) is _Joined and row.add(y):
            continue
        if type(row) is np.ndarray and type(y) is np.ndarray and y.dtype == row.dtype and y.ndim == row.ndim - 1 \
                and y.ndim and y.shape[1:] == row.shape[2:] and y.shape != row.shape[1:]:  # (a row of another length)
            if call.tracing:
                rows[k] = _Joined([np.array(r) for r in row[:i]], row.dtype, row.shape[2:])
                rows[k].add(y)
                call.joined = tuple(j == k or joined for j, joined in enumerate(call.joined))
                continue
            call.ragged = True
            raise RowsOfOtherLengths(f"the loop at {call.where}: trip {i} appended a {y.dtype}{list(y.shape)}, "
                                     f"where the trace's trips appended rows of {row.shape[1]}: traced again, its "
                                     "lists joined")
        if row is None or type(y) is not np.ndarray or y.dtype != row.dtype or y.shape != row.shape[1:]:
            got = f"{y.dtype}{list(y.shape)}" if isinstance(y, np.ndarray) else f"{type(y).__name__}, not an array"
            first = f"{row.dtype}{list(row.shape[1:])}" if type(row) is np.ndarray else \
                f"{row.dtype}[*, {', '.join(map(str, row.trailing))}]" if row is not None else \
                f"the trace's {want}" if want is not None else ""
            raise ScanMismatch(f"the loop at {call.where}: trip {i} appended a {got}"
                               + (f", not {first}" if first and isinstance(y, np.ndarray) else ""))
        row[i] = y


_NUMBER_KINDS = {bool: "b", int: "i", float: "f"}  # (a Python number a trip appended: Stacked.numbers)


def _with(t: tuple, k: int, value) -> tuple:
    """Tuple t with item k `value`."""
    return t[:k] + (value,) + t[k + 1:]


def _inputs(values, kinds: tuple) -> list:
    """The carried values an entry takes as its inputs (classify_call's
    runtime inputs): all but the ints the body takes as symbols."""
    return [x for x, kind in zip(values, kinds) if not (kind == "int" and type(x) is int)]


def _shapes(values, kinds: tuple) -> tuple:
    """The shapes jit's guards take of the carried values (classify_call):
    an array's, a Python int's where the body takes it as a symbol."""
    return tuple(x.shape if isinstance(x, np.ndarray) else (x,) for x, kind in zip(values, kinds)
                 if isinstance(x, np.ndarray) or kind == "int" and type(x) is int)


def _check_trip(out: list, want: list, t: int, where: str) -> None:
    """Raises ScanMismatch unless trip t gave each carried value its dtype and shape."""
    for k, (x, (dtype, shape)) in enumerate(zip(out, want)):
        if type(x) is not np.ndarray or x.dtype != dtype or x.shape != shape:
            if isinstance(x, (np.ndarray, np.generic)) and x.dtype == dtype and x.shape == shape:
                continue  # (a subclass, a numpy scalar)
            if type(x) in (bool, int, float) and not shape and np.asarray(x).dtype == dtype:
                continue  # (a carried Python number)
            got = f"{x.dtype}{list(x.shape)}" if isinstance(x, (np.ndarray, np.generic)) else type(x).__name__
            e = ScanMismatch(f"the loop at {where}: trip {t} made carried value {k} a {got}, not {dtype}{list(shape)}")
            e.trip, e.carried, e.array = t, k, isinstance(x, np.ndarray) and x.ndim > 0
            e.scalar = isinstance(x, (np.ndarray, np.generic)) and not e.array
            raise e


def _layout(values) -> tuple:
    """What jit keys of the carried values besides dtype and shape (checked per trip)."""
    return tuple((type(x), x.flags.c_contiguous) if type(x) is np.ndarray else type(x) for x in values)


_PLAIN = (bool, int, float, complex, str, type(None))  # (a frame's value a saved scan may hold: ScanCall.consts)
_PYTHON = {"b": "bool", "f": "float", "c": "complex"}  # a weak value's kind -> the Python type it came from


def _us(seconds: list) -> str:
    return f"{min(seconds) * 1e6:.2f} us" if seconds else "not timed"


def _read_only(x):
    if not isinstance(x, np.ndarray) or not x.flags.writeable:
        return x
    v = x.view()
    v.flags.writeable = False
    return v

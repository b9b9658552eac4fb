"""Lifting Python loops over scalars out of the trace (numba's loop
lifting, for a tracing JIT).

A loop such as CRC's `for byte in data: ... if crc & 1: crc = (crc >> 1) ^
poly` decides on traced values at every trip: traced, it is a graph break
per trip, past MAX_BREAKS the whole function runs eagerly.  Here the loop
is typed from its source instead and becomes one `pyloop` node
(shapes/pyloop.py), compiled whole.

How: the function the trace runs is a copy compiled from its own source
(checked to compile to the same bytecode as the function itself), in which
each `for` loop that may lift reads

    __sj_o__ = __sj_lift__(k)            # the loop, lifted: its names' values after it
    if __sj_o__ is None:                 # not liftable in this trace
        for ...: ...                     # the loop as written, traced as before
    else:
        (name, ...) = __sj_o__           # the names the loop assigns

A loop over range() that binds names the function reads after it, which
no trip before the first bound (`r_new` of a solver's `for _ in range(n):
r_new = ...; if done: break; r = r_new` then `return r_new`), reads instead

    __sj_o__ = __sj_lift__(k)
    if __sj_o__ is None:
        for ...: ...                     # the loop as written
    elif __sj_o__ is __sj_lift__:        # a scan once its first trip bound them:
        for i in __sj_lift__.first(k):   # that trip, as written
            ...
        else:                            # (no break) the rest: a scan carrying them
            __sj_o__ = __sj_lift__(k, True)
            if __sj_o__ is None:
                for i in __sj_lift__.rest(k): ...
            else:
                (name, ...) = __sj_o__
    else:
        (name, ...) = __sj_o__

`__sj_lift__` looks at the values the loop would start from (the frame's
locals: traced arrays, traced or Python scalars), types the loop's
statements under numpy 2's rules (Python scalars weak), and when every
statement and value has a type emits the node, its outputs the arrays it
stores into and the scalars it leaves.  Anything it cannot type (a 2-D
slice, a call it does not know, a variable whose type depends on the data)
leaves the loop to the trace.  No user string is evaluated: the source compiled is
the function's own, and only when it compiles to the function's bytecode.

The same rewrite turns an `if` on a traced condition whose branches only
bind names to pure expressions (`if abs(z) < 1.0: X = -X`) into a select
(if-conversion): both branches are traced and each name they bind becomes
np.where(cond, then, else), so the decision makes no graph break.  The
statement reads

    __sj_c__ = test
    __sj_m__ = __sj_if__(k, __sj_c__, lambda: (then values,), lambda: (else values,))
    if __sj_m__ is None:                 # not a traced condition, or not mergeable
        if __sj_c__: ...                 # the statement as written
        else: ...
    else:
        (name, ...) = __sj_m__

An `if` whose branches both return (`if c: return a` then `return b`, or
with an else) returns the select of their values, value by value for
tuples of as many.  A branch's expressions are names, constants,
arithmetic, comparisons, subscripts, attributes and calls of numpy's
functions or of arrays' methods that write nothing (checked on the values
the names hold when the hook runs): evaluating the branch not taken
changes nothing (a write, np.copyto or out=, runs the call in numpy).  Its
values merge when each pair is the same object or two traced arrays of one
dtype and shape; otherwise (or when a branch raises, or holds what could
raise at run time or a product) the statement runs as written: a graph
break, as before.  A select that
stands for an array one branch only named (numpy's name aliases it that
way) is returned by no select, and a write into it has the function traced
again with its ifs as written (jit/miss.py)."""
from __future__ import annotations

import ast
import builtins
import copy
import dis
import inspect
import linecache
import math
import operator
import sys
import types
import warnings

import numpy as np

from jit import scan
from jit.held import HeldObject, assigns, held_object, plain_attribute, traced_type
from jit.errors import warn
from jit.tracer import (TRACED_BUILTINS, Fallback, SymFloat, SymInt, Tracer, traced_bool, traced_float, traced_int,
                        user_location)
from shapes import host
from shapes.ir import Node, make_attrs
from shapes.ops import CONCAT, CREATION, ELEMENTWISE, OPS, REDUCE, VIEW
from shapes.pyloop import COMPARISONS, MATH, PyLoop, dtype_of, is_weak, strong, type_of_value

HOOK, RESULT = "__sj_lift__", "__sj_o__"
_FLAG = "#w"  # (a retyped name's hidden bool: whether it is still a Python number, _retype)
_BOUND = "#b"  # (a name first bound in the loop: its hidden bool, whether a trip bound it, _Unbound)
UNBOUND = type("Unbound", (), {"__repr__": lambda self: "<unbound>"})()  # (the function's copy deletes such a name)
UNBOUND_NAME = "__sj_unbound__"
_KNOWN = "="  # (a typing env's "=name": the Python int, infinity or NaN a name holds there, as its repr)
IF_HOOK, COND, MERGED = "__sj_if__", "__sj_c__", "__sj_m__"
INT_HOOK = "__sj_int__"  # (`int(x)` of one argument: jit/tracer.py traced_int)
FLOAT_HOOK = "__sj_float__"  # (`float(x)`: traced_float)
BOOL_HOOK = "__sj_bool__"  # (`bool(x)`: traced_bool)
TYPE_HOOK = "__sj_type__"  # (`type(x)`: jit/held.py traced_type)
_CONVERSIONS = {"int": INT_HOOK, "float": FLOAT_HOOK, "bool": BOOL_HOOK, "type": TYPE_HOOK}
ATTRS_HOOK = "__sj_attrs__"  # (a loop that stores into attributes, run on names: _attributes_as_names)
MAX_PEEL = 3  # trips a loop's types may take to settle
STRICT = False  # an internal error while lifting raises (tests) instead of leaving the loop to the trace
ENABLED = True  # (tests of the re-roll pass turn lifting off: their loops would lift)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_ELEMENT_DTYPES = frozenset("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64".split()) | (
    {"float16"} if host.has_f16c() else set())  # (float16 computed in float32, rounded per op: codegen/pyloop.py)


class Unsupported(Exception):
    """The loop does not lift (it runs traced, as written)."""


# ------------------------------------------------------------ the rewrite

class Site:
    """One loop that may lift: its statement and the names it assigns."""

    def __init__(self, node: ast.For, outside_reads: set, filename: str, liftable: bool = True):
        self.node = node
        self.liftable = liftable  # (made only of what the typer knows; else it may only be a scan)
        self.assigned = sorted(_assigned(node))
        # (lists it appends to, `outs.append(h)` at its top level: a scan stacks them, jit/scan.py)
        self.appended = sorted(scan.appended_values(node))
        self.outside_reads = outside_reads
        self.filename = filename
        self.refs: dict = {}  # (params, outputs) -> the loop as a Python function
        self.programs: dict = {}  # what it starts from -> its PyLoop
        self.scan_codes: dict = {}  # its bodies' code as a scan (jit/scan.py), by layout
        self.index = -1  # its place among its function's sites (Rewritten.sites)


class IfSite:
    """One `if` that may become a select: the names its branches bind (none
    when `returns`: the values both branches return, `returns` of them in a
    tuple, 0 for one value), the calls they make ((the module name, or None,
    the attribute called): numpy's functions, or methods of arrays that
    write nothing) and the names they read (arrays, numbers or numpy:
    checked at run time)."""

    def __init__(self, node: ast.If, names: list[str], calls: set[tuple], returns: int | None = None,
                 values: tuple = ()):
        self.node, self.names, self.calls, self.returns, self.values = node, names, calls, returns, values
        self.line = node.lineno
        exprs = values[0] + values[1] if returns is not None else [
            st.value for st in node.body + node.orelse if isinstance(st, ast.Assign)]
        self.reads = {n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)}


class AttrSite:
    """A loop that stores into attributes of names it does not bind, run on
    names instead (_attributes_as_names): the attributes it stores
    ((owner, attribute) pairs), the other attributes of those owners it
    reads, the names it reads and the builtins it calls."""

    def __init__(self, stored: list, owner_reads: set, reads: set, called: set, bound: set = frozenset()):
        self.stored, self.owner_reads, self.reads, self.called = stored, owner_reads, reads, called
        self.bound = bound  # (names the loop binds: unbound before it, `k = ...` in its body, no value to check)


class Rewritten:
    def __init__(self, code, sites: list[Site], ifs: list[IfSite] = (), attr_sites: list[AttrSite] = ()):
        self.code, self.sites, self.ifs = code, sites, list(ifs)
        self.attr_sites = list(attr_sites)
        self.selects = True  # (off once a write met a select that aliases one way: selects_off)


_rewritten: dict = {}


def rewritten(fn) -> Rewritten | None:
    """fn's code with its liftable loops rewritten (module docstring), or
    None (no such loop, or no source that compiles to fn's code)."""
    code = fn.__code__
    key = (code, code.co_filename)  # (code objects compare equal across files)
    if key not in _rewritten:
        try:
            _rewritten[key] = _rewrite(fn)
        except (OSError, TypeError, SyntaxError, ValueError, IndexError):
            _rewritten[key] = None
    return _rewritten[key]


def _rewrite(fn) -> Rewritten | None:
    """The whole file is parsed and compiled (the compiler reads the module
    around a function: `math.sqrt` compiles one way where the module
    imports math); fn's definition is found by its name and first line."""
    code = fn.__code__
    converted = [n for n in _CONVERSIONS if n in code.co_names and n not in code.co_varnames
                 and n not in fn.__globals__]
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR) \
            or code.co_name == "<lambda>" or not converted and not any(
                i.opname == "FOR_ITER" or i.opname.startswith("POP_JUMP") or i.opname == "LOAD_GLOBAL"
                and i.argval == "sum" for i in dis.get_instructions(code)) \
            and not any(isinstance(k, types.CodeType) and k.co_name in ("<listcomp>", "<genexpr>")
                        for k in code.co_consts):  # (no loop, branch, comprehension or sum(): nothing to rewrite)
        return None
    if code in scan.MADE:  # (a scan's body: its module, made from the loop's statements)
        tree = copy.deepcopy(scan.MADE[code])
    else:
        source = "".join(linecache.getlines(code.co_filename, fn.__globals__))
        if not source:
            return None
        tree = ast.parse(source, code.co_filename)
    fdef = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == code.co_name
                 and (n.decorator_list[0].lineno if n.decorator_list else n.lineno) == code.co_firstlineno), None)
    if fdef is None or not _same_code(_compile(tree, code), code):
        return None
    _returns_to_breaks(fdef.body, [0])
    _split_exits(fdef.body, [0])
    reversed_ranges = _reversed_ranges(fdef, code, fn.__globals__)
    builtin_sum = sys.version_info < (3, 12) and "sum" not in set(code.co_varnames) | set(code.co_cellvars) \
        | set(code.co_freevars) | set(fn.__globals__)
    made = _comprehensions_as_loops(fdef.body, [0], builtin_sum)
    attr_sites: list[AttrSite] = []
    _attributes_as_names(fdef.body, attr_sites)
    sites: list[Site] = []
    _find_sites(fdef, fdef.body, sites, code.co_filename)
    local = set(code.co_varnames) | set(code.co_cellvars) | set(made)
    for k, s in enumerate(sites):
        s.index = k
        s.appended = [n for n in s.appended if n in local]  # (a global list's name stays the global's)
    ifs: list[IfSite] = []
    _find_ifs(fdef.body, ifs)
    conversions = _conversions(fdef, converted)
    if not sites and not ifs and not conversions and not reversed_ranges and not made and not attr_sites:
        return None
    in_tree = [s.node for s in sites]
    for s in sites:  # (the loop lifted is the one as written; the tree's copy, traced as written, gets the selects)
        s.node = copy.deepcopy(s.node)
    for call in conversions:  # (a traced integer scalar's int() is a size bound at run time, its float()
        # a Python float of the trace: not a graph break on the value)
        call.func = ast.copy_location(ast.Name(_CONVERSIONS[call.func.id], ast.Load()), call.func)
    for k, site in enumerate(ifs):
        _replace(fdef, site.node, _selected(k, site))
    for k, (s, loop) in enumerate(zip(sites, in_tree)):
        _replace(fdef, loop, _lifted(k, s, loop))
    ast.fix_missing_locations(tree)
    return Rewritten(_compile(tree, code), sites, ifs, attr_sites)


_NOT_IN_COMPREHENSION = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr,
                         ast.Yield, ast.YieldFrom, ast.Await)


def _comprehensions_as_loops(stmts: list, counter: list, builtin_sum: bool) -> list:
    """Each list comprehension of one generator and no condition, and each
    `sum()` of such a generator expression or of a name (`builtin_sum`: the
    builtin's, in Python before 3.12, whose sum of floats is the plain one),
    that a statement evaluates before anything that calls (`y = [f(x) for x
    in xs]`, `return np.concatenate([g(X[i:i + bs]) for i in range(0, n,
    bs)])`, `loss = sum(w[i] * x[i] for i in range(n)) / n`, `sum(xs)`) as
    the loop that appends to a list or adds to a total (`start + a0 + a1 +
    ...`, as sum() adds), run just before the statement: a loop the lifter or
    a scan compiles once for every length (a comprehension traced once per
    length).  Its variables renamed apart (`__sj_lc0_x__`: a comprehension's do
    not leak); nothing the statement evaluates before it calls anything.
    -> the names made."""
    made: list = []
    for i in range(len(stmts) - 1, -1, -1):
        st = stmts[i]
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(st, field, None)
            if isinstance(inner, list) and not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                made += _comprehensions_as_loops(inner, counter, builtin_sum)
        if not isinstance(st, (ast.Assign, ast.Return, ast.Expr)) or st.value is None:
            continue
        found: list = []
        _hoistable(st.value, True, found, builtin_sum)
        before = []
        for holder, field, index, node in found:
            k = counter[0]
            counter[0] += 1
            out = f"__sj_lc{k}__"  # (names ending in __: a method's are not mangled as private, `__x`)
            items = node if isinstance(node, ast.ListComp) else node.args[0]
            if isinstance(items, ast.Name):  # (sum(xs): each of xs's rows or items)
                target, iterable, elt = ast.Name(f"__sj_lc{k}_item__", ast.Store()), items, \
                    ast.Name(f"__sj_lc{k}_item__", ast.Load())
                names = [f"__sj_lc{k}_item__"]
            else:
                gen = items.generators[0]
                rename = {n.id: f"__sj_lc{k}_{n.id}__" for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
                target, iterable, elt = copy.deepcopy(gen.target), gen.iter, copy.deepcopy(items.elt)
                for n in list(ast.walk(target)) + list(ast.walk(elt)):
                    if isinstance(n, ast.Name) and n.id in rename:
                        n.id = rename[n.id]
                names = list(rename.values())
            if isinstance(node, ast.ListComp):
                first = ast.List([], ast.Load())
                step = ast.Expr(ast.Call(ast.Attribute(ast.Name(out, ast.Load()), "append", ast.Load()), [elt], []))
            else:  # (sum(items, start): start + the first + the second ..., as the builtin adds)
                first = node.args[1] if len(node.args) > 1 else node.keywords[0].value if node.keywords else \
                    ast.Constant(0)
                step = ast.Assign([ast.Name(out, ast.Store())], ast.BinOp(ast.Name(out, ast.Load()), ast.Add(), elt))
            new = [ast.Assign([ast.Name(out, ast.Store())], first),
                   ast.For(target=target, iter=iterable, body=[step], orelse=[])]
            for n in new:
                for m in ast.walk(n):
                    ast.copy_location(m, node)
            name = ast.copy_location(ast.Name(out, ast.Load()), node)
            if holder is None:
                st.value = name
            elif index is None:
                setattr(holder, field, name)
            else:
                getattr(holder, field)[index] = name
            before += new
            made += [out, *names]
        stmts[i:i] = before
    return made


def _attributes_as_names(stmts: list, sites: list) -> None:
    """Each loop not inside another loop that stores into attributes of
    names it does not bind (a filter's `self.x = self.x + k * (z[i] -
    self.x)`), made of what the typer knows, reads

        if __sj_attrs__(k):               # (AttrsHook: nothing else can see the attributes)
            __sj_at0_0__ = self.x         # each attribute stored, read before the loop
            for ...: ...                  # the loop on those names
            self.x = __sj_at0_0__         # and assigned after it
        else:
            for ...: ...                  # the loop as written

    so that the loop on names may lift (or be a scan) where a loop that
    stores into attributes is traced trip by trip.  The loop's owners are
    read only as `owner.attribute` (never passed on or bound to another
    name), it calls only a few builtins by name, and no statement returns;
    at run time the hook checks the rest (AttrsHook).  The owners' other
    attributes it reads (`self.q`) are read once before it, as names too
    (the lifter types names, not attributes)."""
    for i in range(len(stmts) - 1, -1, -1):
        st = stmts[i]
        if isinstance(st, (ast.For, ast.While)):
            new = _attribute_loop(st, sites)
            if new is not None:
                stmts[i:i + 1] = new
            continue
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for inner in _blocks(st):
            _attributes_as_names(inner, sites)


def _blocks(st):
    """The statement lists a statement holds (an if's or a loop's body and
    else, a try's body, handlers, else and finally)."""
    for field in ("body", "orelse", "finalbody"):
        inner = getattr(st, field, None)
        if isinstance(inner, list):
            yield inner
    for h in getattr(st, "handlers", ()):
        yield h.body


_CALLED_BUILTINS = frozenset("range len abs min max int float bool round enumerate zip reversed".split())


def _attribute_loop(loop, sites: list) -> list | None:
    """_attributes_as_names of one loop, or None (it stores into no
    attribute of a name, or holds what the rewrite does not take)."""
    nodes = list(ast.walk(loop))
    stores = [n for n in nodes if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)]
    if not stores or not all(isinstance(n.value, ast.Name) for n in stores) \
            or not all(isinstance(n, _STMTS + _EXPRS) for n in nodes):
        return None
    stored = sorted({(n.value.id, n.attr) for n in stores})
    owners = {o for o, _ in stored}
    if owners & _assigned(loop):
        return None
    parent = {id(c): n for n in nodes for c in ast.iter_child_nodes(n)}
    called = set()
    for n in nodes:
        if isinstance(n, ast.Name) and n.id in owners and not (
                isinstance(parent.get(id(n)), ast.Attribute) and parent[id(n)].value is n):
            return None  # (`f(self)`, `s = self`: another way to the attributes)
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name) and n.func.id in _CALLED_BUILTINS:
                called.add(n.func.id)
            elif not isinstance(n.func, ast.Attribute) or _module_root(n.func) in owners:
                return None  # (a function of a name, or a method of an owner, could read the attributes)
    k = len(sites)
    # (the owners' other attributes it reads, `self.q`, read once before it too: nothing in it can change them)
    owner_reads = sorted({(n.value.id, n.attr) for n in nodes if isinstance(n, ast.Attribute)
                          and isinstance(n.value, ast.Name) and n.value.id in owners} - set(stored))
    fresh = {pair: f"__sj_at{k}_{j}__" for j, pair in enumerate(stored + owner_reads)}  # (not mangled: `__x`)

    class Names(ast.NodeTransformer):
        def visit_Attribute(self, n):
            if isinstance(n.value, ast.Name) and (n.value.id, n.attr) in fresh:
                return ast.copy_location(ast.Name(fresh[n.value.id, n.attr], n.ctx), n)
            return self.generic_visit(n)

    on_names = Names().visit(copy.deepcopy(loop))
    reads = {n.id for n in ast.walk(on_names) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} \
        - set(fresh.values()) - called
    sites.append(AttrSite(stored, owner_reads, reads, called, _assigned(on_names)))
    before = [ast.Assign([ast.Name(f, ast.Store())], ast.Attribute(ast.Name(o, ast.Load()), a, ast.Load()))
              for (o, a), f in fresh.items()]
    after = [ast.Assign([ast.Attribute(ast.Name(o, ast.Load()), a, ast.Store())], ast.Name(fresh[o, a], ast.Load()))
             for o, a in stored]
    out = ast.If(test=ast.Call(ast.Name(ATTRS_HOOK, ast.Load()), [ast.Constant(k)], []),
                 body=before + [on_names] + after, orelse=[loop])
    for m in ast.walk(out):
        if not hasattr(m, "lineno"):
            ast.copy_location(m, loop)
    return [out]


def _comprehension(e, builtin_sum: bool) -> bool:
    """A list comprehension of one generator, no condition and nothing in
    its value that binds or suspends; or, where `builtin_sum`, sum() of
    such a generator expression or list comprehension, or of a name, its
    start (if given) plain."""
    lc = e
    if builtin_sum and isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "sum":
        if not (1 <= len(e.args) <= 2 and len(e.args) + len(e.keywords) <= 2
                and all(k.arg == "start" for k in e.keywords)
                and all(map(_plain_expr, e.args[1:] + [k.value for k in e.keywords]))):
            return False
        lc = e.args[0]
        if isinstance(lc, ast.Name):
            return True
    elif not isinstance(e, ast.ListComp):
        return False
    if not isinstance(lc, (ast.ListComp, ast.GeneratorExp)) or len(lc.generators) != 1:
        return False
    gen = lc.generators[0]
    return not gen.ifs and not gen.is_async and not any(isinstance(n, _NOT_IN_COMPREHENSION)
                                                         for n in ast.walk(lc.elt)) \
        and all(isinstance(n, (ast.Name, ast.Tuple, ast.Store)) for n in ast.walk(gen.target))


def _hoistable(e, ok: bool, found: list, builtin_sum: bool, holder=None, field=None, index=None) -> bool:
    """Into found, (holder, field, index, node) of each comprehension of e
    (_comprehension) that may run before the statement: reached through
    operators, calls' arguments and displays only (not a condition's, a
    lambda's or a short-circuit's: they may not run), with nothing the
    statement evaluates before it calling anything (`ok`).  -> whether e is
    plain: evaluating it runs no code of the user's."""
    if _comprehension(e, builtin_sum):
        if ok:
            found.append((holder, field, index, e))
        return False
    if isinstance(e, ast.BinOp):
        parts = [("left", None, e.left), ("right", None, e.right)]
    elif isinstance(e, ast.UnaryOp):
        parts = [("operand", None, e.operand)]
    elif isinstance(e, (ast.Tuple, ast.List)):
        parts = [("elts", k, x) for k, x in enumerate(e.elts)]
    elif isinstance(e, ast.Call) and not any(isinstance(a, ast.Starred) for a in e.args):
        # (its callee, then its arguments; its keywords, after them, keep what they hold)
        parts = [("func", None, e.func)] + [("args", k, x) for k, x in enumerate(e.args)]
    else:
        return _plain_expr(e)
    plain = True
    for f, j, x in parts:
        plain = _hoistable(x, ok and plain, found, builtin_sum, e, f, j) and plain
    return plain and not isinstance(e, ast.Call)


def _plain_expr(e) -> bool:
    """Evaluating e runs no code of the user's (names, constants,
    attributes, subscripts, arithmetic of them)."""
    return all(isinstance(n, _PLAIN_BOUND) for n in ast.walk(e))


_PLAIN_BOUND = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.operator,
                ast.unaryop, ast.Load, ast.Slice, ast.Tuple)


def _reversed_ranges(fdef, code, globals_: dict) -> int:
    """Each `for t in reversed(range(...))` of fdef, its step a constant, as
    the range of the same values (`reversed(range(n))` is `range(n - 1, -1,
    -1)`): the lifter compiles it as it does any loop over range() (a
    backward recurrence, discounted returns, ran as a scan at 7-14x numpy's
    time).  Its bounds are evaluated twice, so they are names, constants,
    attributes, subscripts, arithmetic and len() only.  -> how many."""
    if {"reversed", "range"} & (set(code.co_varnames) | set(globals_)):
        return 0  # (shadowed: not the builtins)
    count = 0
    for loop in ast.walk(fdef):
        if not isinstance(loop, ast.For):
            continue
        rng, backwards = scan.range_call(loop.iter)
        if not backwards or rng.keywords or not 1 <= len(rng.args) <= 3 or not all(
                isinstance(n, _PLAIN_BOUND) or isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                and n.func.id == "len" for a in rng.args for n in ast.walk(a)):
            continue
        args = rng.args
        step = 1 if len(args) < 3 else _number(args[2]) if _literal_int(args[2]) else None
        if not step:
            continue
        start, stop = (ast.Constant(0), args[0]) if len(args) == 1 else (args[0], args[1])

        def e(text, **names):
            tree = ast.parse(text, mode="eval").body
            for n in ast.walk(tree):
                for field, v in ast.iter_fields(n):
                    if isinstance(v, ast.Name) and v.id in names:
                        setattr(n, field, copy.deepcopy(names[v.id]))
            return tree
        # (its last value first: start + (stop - start -+ 1) // step * step, down to start - step)
        last = e(f"a + (b - a - ({1 if step > 0 else -1})) // ({step}) * ({step})", a=start, b=stop)
        loop.iter = ast.copy_location(ast.Call(ast.Name("range", ast.Load()), [
            last, e(f"a - ({step})", a=start), ast.Constant(-step)], []), loop.iter)
        count += 1
    return count


def _literal_int(node) -> bool:
    return type(_number(node)) is int


def _conversions(fdef, names: list) -> list:
    """The calls `int(x)` (`float(x)`, `type(x)`: the names) of one argument
    in fdef's own body (not a nested function's or class's, whose `int` may
    be another)."""
    out = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id in names \
                    and len(child.args) == 1 and not child.keywords and not isinstance(child.args[0], ast.Starred):
                out.append(child)
            visit(child)
    visit(fdef)
    return out


def _compile(tree: ast.Module, code):
    """The code object of code's function (by name and first line) in the
    compiled module `tree`."""
    stack = [compile(tree, code.co_filename, "exec", dont_inherit=True)]
    while stack:
        c = stack.pop()
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                if k.co_name == code.co_name and k.co_firstlineno == code.co_firstlineno:
                    return k
                stack.append(k)
    raise ValueError("function not found in its compiled source")


def _same_code(a, b) -> bool:
    if a.co_code != b.co_code or a.co_names != b.co_names or a.co_varnames != b.co_varnames \
            or a.co_freevars != b.co_freevars or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) != isinstance(y, types.CodeType):
            return False
        if isinstance(x, types.CodeType) and not _same_code(x, y):
            return False
        if not isinstance(x, types.CodeType) and (type(x) is not type(y) or repr(x) != repr(y)):
            return False
    return True


_STMTS = (ast.Assign, ast.AugAssign, ast.If, ast.For, ast.While, ast.Break, ast.Continue, ast.Pass)
_EXPRS = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Subscript,
          ast.Call, ast.Attribute, ast.Tuple, ast.Slice, ast.Load, ast.Store, ast.operator, ast.unaryop, ast.boolop,
          ast.cmpop, ast.expr_context, ast.keyword)


def _candidate(loop: ast.For) -> bool:
    """Whether the loop is made only of what the typer knows (it may still
    refuse: types are known only in the trace)."""
    for n in ast.walk(loop):
        if isinstance(n, ast.stmt):
            if not isinstance(n, _STMTS) or isinstance(n, (ast.For, ast.While)) and n.orelse \
                    or isinstance(n, ast.For) and not isinstance(n.target, ast.Name) and _enumerated(n) is None:
                return False
        elif not isinstance(n, _EXPRS):
            return False
    return True


def _enumerated(loop: ast.For):
    """(the index's name, the element's name, the iterable) of `for i, v in
    enumerate(x)`, or None."""
    t, it = loop.target, loop.iter
    if isinstance(t, ast.Tuple) and len(t.elts) == 2 and all(isinstance(e, ast.Name) for e in t.elts) \
            and t.elts[0].id != t.elts[1].id and isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
            and it.func.id == "enumerate" and len(it.args) == 1 and not it.keywords:
        return t.elts[0].id, t.elts[1].id, it.args[0]
    return None


def _over_range(loop: ast.For) -> bool:
    """`for <name> in range(...)` (or reversed(range(...))) or over the
    rows of arrays (`for x in xs`, `for v in x[1:]`, zip and enumerate of
    them: jit/scan.py over_rows) with no else: a loop that may be a scan
    (jit/scan.py) whatever its body holds (a list display, a call the typer
    does not know: `A[[i, p]] = A[[p, i]]`)."""
    it = loop.iter
    return not loop.orelse and (scan.over_rows(loop) or isinstance(loop.target, ast.Name)
                                and scan.range_call(it)[0] is not None)


def _find_sites(fdef, stmts: list, sites: list, filename: str, in_loop: bool = False,
                enclosing: frozenset = frozenset()) -> None:
    """The candidate loops of stmts not inside another loop, and the loops
    over range() inside one whose bounds read no name that differs from
    trip to trip of the loops around them (_trip_names: `for ep in
    range(epochs): for s in range(0, n, bs)`: a scan per outer trip the
    trace unrolls, its count symbolic).  One whose bounds do, `for j in
    range(i + 1, n)`, is unrolled with the loop around it (the re-roll pass,
    clustering/reroll.py, serves those triangular nests)."""
    for s in stmts:
        if isinstance(s, ast.For) and (not in_loop and (_candidate(s) or _over_range(s)) or in_loop and _over_range(
                s) and not scan.over_rows(s) and not {n.id for n in ast.walk(s.iter) if isinstance(n, ast.Name)}
                & enclosing):
            sites.append(Site(s, _reads_outside(fdef, s), filename, _candidate(s)))
            if in_loop:
                continue
        elif isinstance(s, ast.While) and not in_loop and not s.orelse:  # (lifted, or a scan: jit/scan.py)
            sites.append(Site(s, _reads_outside(fdef, s), filename, _candidate(s)))
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        inner_loop, bound = in_loop, enclosing
        if isinstance(s, (ast.For, ast.While, ast.AsyncFor)):  # (and the names its trips bind from them)
            inner_loop = True
            bound = enclosing | _trip_names(s)
        for inner in _blocks(s):
            _find_sites(fdef, inner, sites, filename, inner_loop, bound)


def _trip_names(loop) -> set:
    """The loop's variable (a for loop's) and the names its body binds from
    it, or from a name so bound (`m = i + 1`): what differs from trip to
    trip (a loop inside whose bounds read one is a triangular nest)."""
    names = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)} if isinstance(loop, ast.For) else set()
    assigns = [n for n in ast.walk(loop) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For))
               and n is not loop]
    while True:
        more = set()
        for a in assigns:
            source = a.iter if isinstance(a, ast.For) else a.value
            if source is not None and {n.id for n in ast.walk(source) if isinstance(n, ast.Name)} & names:
                targets = [a.target] if not isinstance(a, ast.Assign) else a.targets
                more |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if more <= names:
            return names
        names |= more


def _returns_to_breaks(stmts: list, counter: list) -> None:
    """A loop (not inside another) that returns from the function at its
    own level, `for i in ...: ... if c: return i`, as a loop that breaks:
    `rv = 0; rf = False`, each `return E` as `rv = E; rf = True; break`, and
    after the loop `if rf: return rv` -- the form jit/lift.py compiles (a
    search compiles once, where each trip's decision was a graph break and
    each position of the first hit another path).  Only for a loop over
    range() (its variable an int), or a while loop (_return_kind), where
    every E is the loop variable (a while loop's: any name) or a constant
    of one type (int, bool or float: rv's first value gives the
    typer that type), with no else and no return in an inner loop.  Traced
    as written (the lifter refuses it), the loop does what the original
    did: rv's first value is never returned."""
    i = 0
    while i < len(stmts):
        st = stmts[i]
        if isinstance(st, (ast.For, ast.While)):
            kind = _return_kind(st)
            if kind is not None:
                rv, rf = f"__sj_rv{counter[0]}__", f"__sj_rf{counter[0]}__"  # (not mangled private in a method)
                counter[0] += 1
                _breaks_for_returns(st.body, rv, rf)
                init = [ast.Assign([ast.Name(rv, ast.Store())], ast.Constant({int: 0, bool: False, float: 0.0}[kind])),
                        ast.Assign([ast.Name(rf, ast.Store())], ast.Constant(False))]
                after = ast.If(ast.Name(rf, ast.Load()), [ast.Return(ast.Name(rv, ast.Load()))], [])
                for n in init + [after]:
                    ast.copy_location(n, st)
                stmts[i:i + 1] = init + [st, after]
                i += 4
                continue
        if not isinstance(st, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(st, field, None)
                if isinstance(inner, list):
                    _returns_to_breaks(inner, counter)
        i += 1


def _split_exits(stmts: list, counter: list) -> None:
    """In each loop's body, an exit that binds names first, `if c: r =
    r_new; break` (a power iteration's; a return made a break,
    _returns_to_breaks), as

        __sj_x0__ = c
        if __sj_x0__: r = r_new          # (a select: IfHook)
        if __sj_x0__: break              # (an exit a scan takes: jit/scan.py _exits)

    where each binding is a name bound to a pure value (_selectable): c is
    evaluated once, the bindings run where it holds, then the loop ends,
    as before.  Such an exit made each trip's decision a graph break, each
    count of trips another trace (probe 17)."""
    for st in stmts:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(st, (ast.For, ast.While)):
            body, i = st.body, 0
            while i < len(body):
                s = body[i]
                if isinstance(s, ast.If) and not s.orelse and len(s.body) >= 2 and isinstance(s.body[-1], ast.Break) \
                        and _selectable(ast.copy_location(ast.If(s.test, s.body[:-1], []), s)) is not None:
                    flag = f"__sj_x{counter[0]}__"
                    counter[0] += 1
                    new = [ast.Assign([ast.Name(flag, ast.Store())], s.test),
                           ast.If(ast.Name(flag, ast.Load()), s.body[:-1], []),
                           ast.If(ast.Name(flag, ast.Load()), [s.body[-1]], [])]
                    for n in new:
                        for m in ast.walk(n):
                            if not hasattr(m, "lineno"):
                                ast.copy_location(m, s)
                    body[i:i + 1] = new
                    i += 3
                    continue
                i += 1
        for inner in _blocks(st):
            _split_exits(inner, counter)


def _return_kind(loop):
    """The one type (int, bool, float) of the values the loop's own returns
    give, or None (module docstring of _returns_to_breaks).  A while loop's
    return of a name is taken for an int's (a binary search's `return
    mid`): where it is not, the lifter refuses the loop, traced as written."""
    if loop.orelse:
        return None
    if isinstance(loop, ast.For):
        it = loop.iter
        if not isinstance(loop.target, ast.Name) or not (
                isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"):
            return None  # (the loop variable of range() is an int; shadowed range: the lifter refuses the loop)
    kinds = set()

    def visit(stmts, inner: bool) -> bool:
        for st in stmts:
            if isinstance(st, ast.Return):
                e = st.value
                if inner or e is None:
                    return False
                if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
                    e = e.operand
                if isinstance(e, ast.Name) and isinstance(st.value, ast.Name) and (
                        isinstance(loop, ast.While) or e.id == loop.target.id):
                    kinds.add(int)
                elif isinstance(e, ast.Constant) and type(e.value) in (int, bool, float):
                    kinds.add(type(e.value) if not (type(e.value) is bool and e is not st.value) else None)
                else:
                    return False
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            else:
                deeper = inner or isinstance(st, (ast.For, ast.While, ast.AsyncFor))
                for field in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(st, field, None), list) and not visit(getattr(st, field), deeper):
                        return False
        return True
    ok = visit(loop.body, False)
    return kinds.pop() if ok and len(kinds) == 1 and None not in kinds else None


def _breaks_for_returns(stmts: list, rv: str, rf: str) -> None:
    """Each `return E` at the loop's own level as `rv = E; rf = True; break`."""
    for k in range(len(stmts) - 1, -1, -1):
        st = stmts[k]
        if isinstance(st, ast.Return):
            new = [ast.Assign([ast.Name(rv, ast.Store())], st.value),
                   ast.Assign([ast.Name(rf, ast.Store())], ast.Constant(True)), ast.Break()]
            for n in new:
                ast.copy_location(n, st)
            stmts[k:k + 1] = new
        elif not isinstance(st, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(st, field, None), list):
                    _breaks_for_returns(getattr(st, field), rv, rf)


_PURE = (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Subscript, ast.Attribute, ast.Tuple,
         ast.Slice, ast.Call, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.expr_context, ast.keyword)


def _module_root(func) -> str | None:
    """The name a chain of attributes hangs from (`np` of np.linalg.solve),
    or None when the chain holds anything else (`(y - 1).astype`)."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else None


def _pure(expr, calls: set, bound=frozenset()) -> bool:
    """Whether `expr` is pure (_PURE, every call's function an attribute:
    (the name of its chain of attributes or None, the attribute called)
    joins `calls`) and reads none of the names `bound`."""
    for n in ast.walk(expr):
        if not isinstance(n, _PURE) or isinstance(n, ast.Compare) and len(n.ops) > 1 \
                or isinstance(n, ast.Name) and n.id in bound:
            return False
        if isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Attribute):
                return False
            calls.add((_module_root(n.func), n.func.attr))
    return True


def _selectable(node: ast.If) -> IfSite | None:
    """An IfSite when every statement of both branches binds one name to a
    pure expression that reads no name its own branch bound before it."""
    names: list[str] = []
    calls: set[tuple] = set()
    for branch in (node.body, node.orelse):
        bound: set[str] = set()
        for st in branch:
            if isinstance(st, ast.Pass):
                continue
            if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
                return None
            if not _pure(st.value, calls, bound) or st.targets[0].id in bound:
                return None
            bound.add(st.targets[0].id)
            if st.targets[0].id not in names:
                names.append(st.targets[0].id)
    return IfSite(node, names, calls) if names else None


def _returning(node: ast.If, after) -> IfSite | None:
    """An IfSite when both ways return a pure value: `if c: return a` with
    `else: return b` or followed by `return b` (tuples of as many values
    selected value by value)."""
    other = node.orelse or ([after] if after is not None else [])
    if not (len(node.body) == 1 == len(other) and all(isinstance(st, ast.Return) and st.value is not None
                                                      for st in (node.body[0], other[0]))):
        return None
    a, b = node.body[0].value, other[0].value
    calls: set[tuple] = set()
    if not (_pure(a, calls) and _pure(b, calls)):
        return None
    if isinstance(a, ast.Tuple) and isinstance(b, ast.Tuple) and len(a.elts) == len(b.elts):
        return IfSite(node, [], calls, len(a.elts), (a.elts, b.elts))
    return IfSite(node, [], calls, 0, ([a], [b]))


def _find_ifs(stmts: list, ifs: list) -> None:
    """The `if` statements that may become selects, at any depth but in
    nested functions and classes."""
    for i, s in enumerate(stmts):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        site = (_selectable(s) or _returning(s, stmts[i + 1] if i + 1 < len(stmts) else None)
                if isinstance(s, ast.If) else None)
        if site is not None:
            ifs.append(site)
            continue
        for inner in _blocks(s):
            _find_ifs(inner, ifs)


def _branch_values(branch: list, names: list) -> list:
    """The value each name has after the branch: its expression, or the name itself."""
    bound = {st.targets[0].id: st.value for st in branch if isinstance(st, ast.Assign)}
    return [bound.get(n, ast.Name(n, ast.Load())) for n in names]


def _thunk(values: list) -> ast.Lambda:
    """lambda: (values,)"""
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                      body=ast.Tuple(list(values), ast.Load()))


def _selected(k: int, site: IfSite) -> list:
    node = site.node
    then, other = site.values if site.returns is not None else (
        _branch_values(node.body, site.names), _branch_values(node.orelse, site.names))
    cond = ast.Assign(targets=[ast.Name(COND, ast.Store())], value=node.test)
    merged = ast.Assign(targets=[ast.Name(MERGED, ast.Store())], value=ast.Call(
        func=ast.Name(IF_HOOK, ast.Load()), args=[ast.Constant(k), ast.Name(COND, ast.Load()), _thunk(then),
                                                  _thunk(other)], keywords=[]))
    as_written = ast.If(test=ast.Name(COND, ast.Load()), body=node.body, orelse=node.orelse)
    if site.returns is not None:  # (the values, or the one value, returned at once; else as written)
        value = ast.Name(MERGED, ast.Load()) if site.returns else ast.Subscript(
            ast.Name(MERGED, ast.Load()), ast.Constant(0), ast.Load())
        selected = ast.If(test=ast.Compare(ast.Name(MERGED, ast.Load()), [ast.IsNot()], [ast.Constant(None)]),
                          body=[ast.Return(value)], orelse=[])
        for n in (cond, merged, as_written, selected):
            ast.copy_location(n, node)
        return [cond, merged, selected, as_written]
    unpack = ast.Assign(targets=[ast.Tuple([ast.Name(n, ast.Store()) for n in site.names], ast.Store())],
                        value=ast.Name(MERGED, ast.Load()))
    branch = ast.If(test=ast.Compare(ast.Name(MERGED, ast.Load()), [ast.Is()], [ast.Constant(None)]),
                    body=[as_written], orelse=[unpack])
    for n in (cond, merged, as_written, unpack, branch):
        ast.copy_location(n, node)
    return [cond, merged, branch]


def _assigned(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _reads_outside(fdef, loop) -> set:
    """The names fdef reads outside `loop`, but where a for loop or a
    comprehension of their own binds them first (`for t in ...` twice): the
    names whose value after the loop may be read."""
    out: set = set()

    def visit(node, bound: frozenset) -> None:
        if node is loop:
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            out.add(node.id)
        if isinstance(node, ast.For):
            visit(node.iter, bound)
            inner = bound | {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            for st in node.body + node.orelse:
                visit(st, inner)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            visit(node.generators[0].iter, bound)  # (evaluated outside the comprehension's scope)
            bound = bound | {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        for child in ast.iter_child_nodes(node):
            visit(child, bound)
    visit(fdef, frozenset())
    return out


def _lifted(k: int, s: Site, loc: ast.For) -> list:
    def hook(*args):
        return ast.Assign(targets=[ast.Name(RESULT, ast.Store())], value=ast.Call(
            func=ast.Name(HOOK, ast.Load()), args=[ast.Constant(k), *args], keywords=[]))

    def unpack():
        if not (s.assigned or s.appended):
            return [ast.Pass()]
        names = s.assigned + s.appended
        out = ast.Assign(targets=[ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store())],
                         value=ast.Name(RESULT, ast.Load()))
        # (a name read after the loop that no trip bound: unbound again, as without the loop: _Unbound)
        return [out] + [ast.If(test=ast.Compare(ast.Name(n, ast.Load()), [ast.Is()], [ast.Name(UNBOUND_NAME,
                        ast.Load())]), body=[ast.Delete([ast.Name(n, ast.Del())])], orelse=[])
                        for n in s.assigned if n in s.outside_reads]

    def test(op, value):
        return ast.Compare(ast.Name(RESULT, ast.Load()), [op], [value])

    def trips(method: str) -> ast.For:  # (over rows: the index, and the rows bound from it, as a scan's trips)
        it = ast.Call(func=ast.Attribute(ast.Name(HOOK, ast.Load()), method, ast.Load()), args=[ast.Constant(k)],
                      keywords=[])
        index, rows = scan.trip(loc)
        return ast.For(target=ast.Name(index, ast.Store()), iter=it, body=rows + copy.deepcopy(loc.body), orelse=[])

    done = unpack()
    if _peelable(s):  # (module docstring: its first trip as written, then the rest)
        if isinstance(loc, ast.While):  # (its first trip: `if not test: break`, the body; the rest as written)
            first = trips("first")
            first.body[:0] = [ast.If(test=ast.UnaryOp(ast.Not(), copy.deepcopy(loc.test)), body=[ast.Break()],
                                     orelse=[])]
            rest = ast.While(test=copy.deepcopy(loc.test), body=copy.deepcopy(loc.body), orelse=[])
        else:
            first, rest = trips("first"), trips("rest")
        first.orelse = [hook(ast.Constant(True)),
                        ast.If(test=test(ast.Is(), ast.Constant(None)), body=[rest], orelse=unpack())]
        done = [ast.If(test=test(ast.Is(), ast.Name(HOOK, ast.Load())), body=[first], orelse=done)]
    branch = ast.If(test=test(ast.Is(), ast.Constant(None)), body=[loc], orelse=done)
    out = [hook(), branch]
    for n in out:
        for m in ast.walk(n):
            if not hasattr(m, "lineno"):
                ast.copy_location(m, loc)
    return out


def _peelable(s: Site) -> bool:
    """Whether the loop may be a scan only past its first trip: a while
    loop, or a loop over range() or rows, binding names the function reads
    after it (`r_new` of `for _ in range(n): r_new = ...; if done: break; r
    = r_new` then `return r_new`), which no trip before the first bound, or
    a Python number the first trip makes an array (`s = 0; for v in x: s +=
    v`)."""
    return (isinstance(s.node, ast.While) or _over_range(s.node)) and scan.peelable(s)


def _replace(root, old, new: list) -> None:
    for node in ast.walk(root):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and any(s is old for s in stmts):
                i = next(i for i, s in enumerate(stmts) if s is old)
                stmts[i:i + 1] = new
                return
    raise ValueError("loop not found")


def selects_off(fn) -> bool:
    """fn's ifs run as written from now on (graph breaks): a write met a
    select that stands for an array one way (jit/tracer.py write).  False
    when they did already."""
    r = rewritten(fn) if ENABLED else None
    if r is None or not r.selects:
        return False
    r.selects = False
    return True


def traced_copy(fn, globals_: dict, closure, ctx) -> types.FunctionType | None:
    """fn's rewritten copy (globals_ and closure as the trace gives them,
    plus the hook lifting into ctx's trace), or None when fn has no loop to
    lift."""
    r = rewritten(fn) if ENABLED else None
    if r is None:
        return None
    cells = dict(zip(fn.__code__.co_freevars, closure or ()))
    new = types.FunctionType(r.code, {**globals_, HOOK: Hook(ctx, r, fn), IF_HOOK: IfHook(ctx, r),
                                      INT_HOOK: traced_int, FLOAT_HOOK: traced_float, BOOL_HOOK: traced_bool,
                                      TYPE_HOOK: traced_type,
                                      UNBOUND_NAME: UNBOUND, ATTRS_HOOK: AttrsHook(r)},
                             fn.__name__, fn.__defaults__, tuple(cells[v] for v in r.code.co_freevars) or None)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


# ------------------------------------------------------------ the hooks

class IfHook:
    """`__sj_if__` of one traced function copy: the merged values of if k's
    names when its condition is a traced bool and both branches evaluate
    to values that merge (module docstring), else None."""

    def __init__(self, ctx, r: Rewritten):
        self.ctx, self.r = ctx, r

    def __call__(self, k: int, cond, then, orelse):
        if not (self.r.selects and isinstance(cond, Tracer) and cond.dtype == np.bool_ and cond.ndim == 0):
            return None
        site = self.r.ifs[k]
        frame = sys._getframe(1)
        scope = {**frame.f_globals, **frame.f_locals}
        del frame
        if not all(_plain(scope.get(name, _MISSING)) for name in site.reads) or not all(
                _is_numpy(scope.get(root)) or attr in _PURE_METHODS for root, attr in site.calls):
            return None
        nodes, breaks, writes, first = len(self.ctx.nodes), len(self.ctx.breaks), self.ctx.writes(), self.ctx._next
        raised = self.ctx.raised
        try:
            pairs = list(zip(then(), orelse()))
        except Exception:  # noqa: BLE001 - a branch that raises runs as written (its error, if it is taken)
            pairs, self.ctx.raised = None, raised
        if self.ctx.writes() != writes:  # (np.copyto, out=: the branch not taken wrote too, in the trace)
            raise Fallback("a branch of an if on a traced value writes into an array", user_location())
        if pairs is None:
            return None
        # (the branch not taken runs too: nothing in it may raise at run time, where numpy would not
        # run it -- a gather's bounds check, a max of an empty array, a numpy step such as solve)
        if len(self.ctx.breaks) != breaks or not all(_never_raises(n) for n in self.ctx.nodes[nodes:]):
            return None
        out, aliasing = [], []
        for a, b in pairs:
            if a is b:
                out.append(a)
                continue
            if not self._mergeable(a, b):
                return None
            v = np.where(cond, a, b)
            # (numpy scalars stay numpy scalars: x.sum() in both branches; Python numbers Python's: `hi = mid`)
            out.append(v.as_python(a.dtype.kind) if a.value.weak and a.dtype.kind in "bifc" else
                       v[()] if isinstance(a.concrete, np.generic) and isinstance(b.concrete, np.generic) else v)
            if v.ndim and not (_fresh(a, first) and _fresh(b, first)):
                aliasing.append(v)
        if aliasing and site.returns is not None:
            return None  # (numpy returns the array itself, or a view of it, one way: not a new array)
        # (numpy's name stands for an existing array, or a view of one, one way: a later write into the
        # select would reach that array in numpy only; jit/tracer.py write runs such a call in numpy)
        self.ctx.aliasing_selects.update((id(s), s) for s in (v.storage() for v in aliasing))
        what = ", ".join(site.names) if site.returns is None else "the returned value" + "s" * bool(site.returns)
        self.ctx.selects.append(f"{self.r.code.co_filename.rpartition('/')[2]}:{site.line}: "
                                f"if on a traced value: both branches traced, {what} selected")
        return tuple(out)

    def _mergeable(self, a, b) -> bool:
        if not (isinstance(a, Tracer) and isinstance(b, Tracer)) or a.dtype != b.dtype \
                or a.value.weak != b.value.weak or a.ndim != b.ndim:
            return False
        env = self.ctx.env
        return all(env.simplify(x) == env.simplify(y) for x, y in zip(a.value.shape, b.value.shape))


# (not products: a branch not taken would cost a whole product each call, where a break costs its dispatch)
_SAFE_CATEGORIES = frozenset({ELEMENTWISE, VIEW, CREATION, CONCAT})
_SAFE_REDUCTIONS = frozenset({"sum", "prod", "mean", "var", "std", "any", "all"})


def _fresh(t, first: int) -> bool:
    """Whether traced array t is new, made by a branch (not a name's array
    from before it, nor a view of one)."""
    return not t._chain and t.value.id >= first


def _never_raises(n: Node) -> bool:
    """Whether node n computes without raising whatever its operands' values,
    at the cost of a pass or so over them (an op of both branches of a
    select runs whether or not its branch is taken)."""
    op = OPS[n.op]
    return not op.raises and (op.category in _SAFE_CATEGORIES or op.category == REDUCE and n.op in _SAFE_REDUCTIONS)


# methods of a traced array that write nothing (not sort, fill, put, partition, resize...)
_PURE_METHODS = frozenset("sum mean max min prod std var any all argmax argmin reshape transpose swapaxes astype "
                          "copy ravel flatten squeeze clip round cumsum cumprod dot conj conjugate take "
                          "repeat diagonal trace".split())


_MISSING = object()


def _is_numpy(module) -> bool:
    """numpy or one of its submodules (its functions are pure but for their
    writes, out= or np.copyto, which jit/tracer.py's writes() count catches
    after a branch ran)."""
    return scan.is_numpy(module)


def _plain(value) -> bool:
    """A value a select's branch may read: a traced or numpy array, a number,
    numpy (its methods are numpy's: a branch's calls are then numpy's
    functions or the arrays' methods; an unbound name reads as _MISSING,
    and the branch raises, as written)."""
    return value is _MISSING or isinstance(value, (Tracer, np.ndarray, np.generic, int, float, complex)) \
        or _is_numpy(value)


class AttrsHook:
    """`__sj_attrs__` of one traced function copy: whether loop k may run on
    names in place of the attributes it stores (_attributes_as_names): each
    owner a user object as the trace holds it (HeldObject) whose attribute
    exists and only stores what is assigned (no property, no __setattr__ of
    its class), the owners' other attributes it reads no property or
    method, every other name it reads an array, a number, a size, numpy or
    math, and the builtins it calls not rebound: then nothing the loop runs
    can see the attributes but through its names."""

    def __init__(self, r: Rewritten):
        self.r = r

    def __call__(self, k: int) -> bool:
        frame = sys._getframe(1)
        scope = {**frame.f_globals, **frame.f_locals}
        del frame
        site = self.r.attr_sites[k]
        for o, a in site.stored:
            h = scope.get(o)
            if type(h) is not HeldObject or not assigns(h):
                return False
            raw = held_object(h)
            if not plain_attribute(raw, a) or not hasattr(raw, a):
                return False
        for o, b in site.owner_reads:  # (read once before the loop: a plain attribute it has)
            raw = held_object(scope[o])
            if hasattr(type(getattr(type(raw), b, None)), "__get__") or not hasattr(raw, b):
                return False
        # (the builtins as the trace's copy of the function calls them: len, max and min its own)
        return all(scope.get(n, _MISSING) in (_MISSING, TRACED_BUILTINS.get(n)) for n in site.called) and all(
            _plain(v) or isinstance(v, (SymInt, SymFloat)) or v is math for v in (
                scope.get(n, _MISSING) for n in site.reads if n in scope or n not in site.bound))


class Hook:
    """`__sj_lift__` of one traced function copy: lifts its loop k from the
    caller's frame, or returns None."""

    def __init__(self, ctx, r: Rewritten, fn):
        self.ctx, self.r, self.fn = ctx, r, fn
        self.peeled: dict = {}  # loop k -> its range's (start, stop, step), its first trip run as written

    def first(self, k: int) -> list:
        return [self.peeled[k][0]]

    def rest(self, k: int) -> range:
        start, stop, step = self.peeled[k]
        return range(start + step, stop, step)

    def __call__(self, k: int, peeled: bool = False):
        frame = sys._getframe(1)
        scope, globals_ = dict(frame.f_locals), frame.f_globals
        del frame
        site = self.r.sites[k]
        raised = self.ctx.raised
        try:
            if peeled:  # (the trips after the first, which bound the names read after the loop)
                start, stop, step = self.peeled[k]
                values = scan.attempt(self.ctx, site, scope, globals_, self.fn, (start + step, stop, step))
                return None if values is scan.NOT_SYMBOLIC else values
            try:
                if not site.liftable:
                    raise Unsupported("a while loop" if isinstance(site.node, ast.While) else
                                      "its body holds what the typer does not know")
                return _lift(self.ctx, site, scope, self.fn, globals_)
            except Unsupported as e:
                refusal = f"{user_location()}: loop not compiled whole: {e}"
            # (a loop over a symbolic trip count that does not lift may still be a scan)
            values = scan.attempt(self.ctx, site, scope, globals_, self.fn)
            if site.liftable:  # (why it runs traced, or as a scan whose trips go through Python; a loop only a
                # scan could take is no lifted loop refused: nothing to say)
                self.ctx.lift_refusals.append(refusal)
            if values is scan.NOT_SYMBOLIC:
                return None
            if isinstance(values, scan.Peeled):
                self.peeled[k] = values.bounds
                return self
            return values
        except Exception as e:  # noqa: BLE001 - lifting is optional: the loop runs traced, as written
            self.ctx.raised = raised
            if STRICT:
                raise
            why = f"{user_location()}: loop not compiled whole: internal error {type(e).__name__}: {e}"
            self.ctx.lift_refusals.append(why)
            warn(f"shapejit: {why}; it runs traced, as written")
            return None


def _lift(ctx, site: Site, scope: dict, fn, globals_: dict):
    loop = site.node
    names = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name)}
    callees = {n.func.id if isinstance(n.func, ast.Name) else n.func.value.id
               for n in ast.walk(loop) if isinstance(n, ast.Call)
               and isinstance(n.func, (ast.Name, ast.Attribute))
               and (isinstance(n.func, ast.Name) or isinstance(n.func.value, ast.Name))}
    written_arrays = {t.value.id for n in ast.walk(loop) for t in _store_targets(n)
                      if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)}
    params, inputs, arrays, env, prologue, resolved = [], [], {}, {}, [], {}
    # (its variable's value before the loop is read neither in it, each trip binds it first, nor after it)
    target = loop.target.id if isinstance(getattr(loop, "target", None), ast.Name) \
        and loop.target.id not in site.outside_reads \
        else None
    for name in sorted(names):
        if name in scope and name != target:
            v = scope[name]
        elif name in site.assigned:
            continue
        else:
            v = _global(fn, name, globals_)
        if name in callees and (callable(v) or isinstance(v, types.ModuleType)) and not isinstance(v, Tracer):
            resolved[name] = v
            continue
        if isinstance(v, types.ModuleType) or callable(v) and not isinstance(v, Tracer):
            resolved[name] = v  # (np in np.float64: an attribute's base)
            continue
        if isinstance(v, Tracer) and v.ndim:
            if v.dtype.name not in _ELEMENT_DTYPES:
                raise Unsupported(f"array {name} of dtype {v.dtype}")
            if name in site.assigned:
                raise Unsupported(f"array {name} is rebound in the loop")
            kind = "written" if name in written_arrays else "array"
            if kind == "written" and (v._chain or not v.storage().writeable):
                raise Unsupported(f"{name} is a view or read-only")
            arrays[name] = (v.dtype, v.ndim)
            params.append((name, kind, "np." + v.dtype.name, None))
            inputs.append(v)
            continue
        if name in written_arrays:
            raise Unsupported(f"{name} is stored into but is not a traced array")
        t = _scalar_type(v)
        if t is None:
            raise Unsupported(f"{name} is a {type(v).__name__}")
        if isinstance(v, (Tracer, SymInt)):
            params.append((name, "scalar", t, None))
            inputs.append(v)
            env[name] = t
        else:
            if t == "int" and not _INT64[0] <= v <= _INT64[1]:
                raise Unsupported(f"{name} = {v} does not fit 64 bits")
            params.append((name, "const", t, v))
            env[name] = t
            if t == "int" or t == "float" and not math.isfinite(v):  # (what a comparison with an integer decides:
                env[_KNOWN + name] = repr(v)  # _Typer.decided)
            prologue.append(("set", name, ("const", t, v)))
    _no_aliasing(inputs, [p[1] for p in params if p[1] != "const"])
    retyped: dict = {}  # (name -> (its Python type, the numpy type it is typed: _retype))
    rounded: dict = {}  # (name -> the Python float it starts from, which its float type rounds: _retype)
    seeded: dict = {}  # (name first bound in the loop -> its type: _Unbound)
    for _ in range(6):
        key = (tuple((p[0], p[1], p[2], repr(p[3])) for p in params), tuple(n in scope for n in site.assigned),
               tuple(sorted((k, id(v)) for k, v in resolved.items())), tuple(sorted(retyped.items())),
               tuple(sorted(seeded.items())))
        try:
            if key not in site.programs:  # (a loop lifted again, in a helper called twice: one program)
                site.programs[key] = _program(site, fn, scope, params, arrays, env, prologue, resolved, retyped,
                                              rounded, seeded)
            break
        except _Untyped as e:
            if not _retype(site, e.conflicts, params, env, prologue, arrays, retyped, rounded):
                raise Unsupported(str(e)) from None
        except _Unbound as e:
            seeded[e.name] = e.type
            env[e.name], env[_BOUND + e.name] = e.type, "bool"
            prologue += [("set", e.name, ("const", e.type, _zero(e.type))), ("set", _BOUND + e.name,
                                                                                ("const", "bool", False))]
    else:
        raise Unsupported("its names keep no single type")
    program = site.programs[key]
    outputs = program.outputs
    concrete = []
    for p in params:
        if p[1] == "const":
            continue
        v = inputs[len(concrete)]
        concrete.append(v.concrete if isinstance(v, Tracer) else ctx.hint(v.expr))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (a warning numpy would give: the loop is left to the trace)
            with np.errstate(all="raise"):
                results = program.run(*concrete)
    except Exception as e:  # noqa: BLE001 - the user's loop raises: as written, it raises again
        raise Unsupported(f"the loop raises {type(e).__name__}: {e}") from None
    n_written = len(program.written)
    if not n_written and not outputs:  # (it may still raise: traced, its decisions are checked)
        raise Unsupported("the loop leaves nothing the function reads")
    for (name, t), r in zip(outputs, results[n_written:]):
        if type_of_value(r) != t and type_of_value(r) == env.get(name):  # (no trip, or fewer than its types took
            # to settle: the value as it was, which the compiled loop, aborting, leaves to numpy)
            raise Unsupported(f"{name} keeps its type of before the loop in this call (it ran too few trips)")
        if type_of_value(r) != t:  # (the typer and Python disagree: a bug, never a wrong result)
            raise RuntimeError(f"lifted loop: {name} is a {type(r).__name__} after the loop, typed {t}")
    outs = _emit(ctx, program, inputs, results)
    for k, new in zip(program.written, outs):
        ctx.write(inputs[k], new)
    by_name = dict(zip([o[0] for o in outputs], outs[n_written:]))
    for name, (python, _) in retyped.items():
        if _FLAG + name in by_name and bool(by_name.pop(_FLAG + name)):  # (a graph break: still a Python number)
            by_name[name] = rounded[name] if name in rounded else by_name[name].as_python(python[0])
    for name in seeded:
        if _BOUND + name in by_name and not bool(by_name.pop(_BOUND + name)):  # (a graph break: no trip bound it)
            by_name[name] = UNBOUND
    return tuple(by_name[n] if n in by_name else scope.get(n) for n in site.assigned)


class _Unbound(Unsupported):
    """A name first bound in the loop and read after it, of one type
    wherever the loop binds it: lifted again with the name set to a zero of
    that type before the loop and a hidden bool, whether a trip bound it
    (`last = x[i]` then `return last`; the function's copy deletes it where
    none did: Python's UnboundLocalError when read)."""

    def __init__(self, name: str, t: str):
        super().__init__(f"{name} is first bound in the loop and read after it")
        self.name, self.type = name, t


class _Untyped(Unsupported):
    """A name of no single type (its `conflicts`: the types paths gave them)."""

    def __init__(self, why: str, conflicts: dict):
        super().__init__(why)
        self.conflicts = conflicts


def _retype(site: Site, conflicts: dict, params: list, env: dict, prologue: list, arrays: dict,
           retyped: dict, rounded: dict) -> bool:
    """Type as numpy's T each name the loop binds to a constant Python
    number on some paths and to a numpy scalar of type T on others (`m =
    -np.inf` then `if x[i] > m: m = x[i]`; `acc = 0.0` then `acc += x[i]`,
    with `if flags[i]: acc = 0.0` in the loop) where it makes no difference
    to any value: each constant is a value of T (-inf is every float's, a
    Python int one of an int type's range or a float's exactly), and the
    loop only compares the name, stores it into arrays, takes it into
    Python's max or min, or into arithmetic with an element of an array of
    T (`x[i] - peak`: T's either way, the constant converted exactly), or
    adds a T to it in place (_Typer.rebind checks the bindings), or is bound
    to another name retyped alike (`tot = acc`).  Each carries a hidden
    bool, whether it is still a Python number: a name bound to it takes it,
    and where the function reads it after the loop, the caller decides on
    it (a graph break).  A Python float T does not hold exactly (`m = 1e18`
    over float32s) is retyped too, as T rounds it, where it is the only
    Python number the name is bound to and no other name is bound to it or
    it to another: numpy rounds it so wherever it meets a T, and the name
    still that number after the loop is that float (`rounded`).  Adds them
    to `retyped` (name -> (Python type, T)); whether any was."""
    consts = {p[0]: k for k, p in enumerate(params) if p[1] == "const"}
    bound = {p[0] for p in params}
    found, copies = {}, {}

    def candidate(name: str, python: str, t: str) -> None:
        dt = dtype_of(t)
        if name in retyped or name in found or python not in ("int", "float") or name in bound and name not in consts \
                or name in site.outside_reads and name not in consts or dt.name not in _ELEMENT_DTYPES \
                or dt.kind not in ("f" if python == "float" else "iuf"):
            return
        if name in consts and (type_of_value(params[consts[name]][3]) != python
                               or _exactly(params[consts[name]][3], dt) is None and (
                                   python != "float" or _rounding(params[consts[name]][3], dt) is None)):
            return
        uses = _uses(site.node, {a for a, (adt, nd) in arrays.items() if np.dtype(adt) == dt},
                     python == "float" and dt == np.float64).get(name, ())
        if all(uses):
            found[name] = (python, t)
            copies[name] = {u for u in uses if type(u) is str}
    for name in sorted(conflicts):
        python = [u for u in conflicts[name] if is_weak(u)]
        numpy_ = [u for u in conflicts[name] if not is_weak(u)]
        if len(python) == 1 and len(numpy_) == 1:
            candidate(name, python[0], numpy_[0])
    for _ in range(len(found) + 1):  # (a name bound to another, `tot = acc`: that one retyped alike too, though
        for n, to in list(copies.items()):  # its own conflict was not met yet; the flag carried: _Typer.flag_of)
            for m in to:
                candidate(m, *found[n])
    while True:
        gone = [n for n, to in copies.items() if n in found and any({**retyped, **found}.get(m) != found[n]
                                                                    for m in to)]
        if not gone:
            break
        for n in gone:
            del found[n]
    bound_to = {m for to in copies.values() for m in to}
    added = False
    for name, (python, t) in found.items():
        if name in consts:
            k = consts[name]
            v = params[k][3]
            x = _exactly(v, dtype_of(t))
            if x is None:  # (a float T rounds: no name bound to it, nor it to another: _Typer.rebind)
                if copies.get(name) or name in bound_to:
                    continue
                x, rounded[name] = _rounding(v, dtype_of(t)), v
            params[k] = (name, "const", t, v)  # (the loop's Python function starts from the Python number)
            env[name] = t
            prologue[:] = [("set", name, ("const", t, x)) if op[1] == name else op for op in prologue]
            env[_FLAG + name] = "bool"
            prologue.append(("set", _FLAG + name, ("const", "bool", True)))
        retyped[name], added = (python, t), True
    return added


def _rounding(v: float, dt: np.dtype):
    """A finite Python float v as float type dt rounds it (numpy's
    conversion wherever v meets a dt), or None where dt has no finite value
    for it (numpy warns of the overflow)."""
    if dt.kind != "f" or not math.isfinite(v):
        return None
    with np.errstate(over="ignore"):
        x = dt.type(v)
    return x if math.isfinite(x) else None


def _bound_value(get, t: str, flag: bool):
    """Of a name first bound in the loop (`get` reads it), whether a trip
    bound it (`flag`), else its value, or the zero of its type t where none
    did (_Unbound)."""
    try:
        v = get()
    except NameError:
        return False if flag else _zero(t)
    return True if flag else v


def _zero(t: str):
    """The zero of type t: a Python number for a weak type, numpy's scalar else."""
    z = dtype_of(t).type(0)
    return z.item() if is_weak(t) else z


def _bound_before_read(loop, name: str) -> bool:
    """Whether no trip of `loop` reads `name` before binding it (jit/scan.py
    read_before_bound: its test, its statements, an if's branches), its
    else clause and for-loop header do not name it, and every binding of
    it is an assignment (`name = ...`, a tuple's: no loop variable, `+=` or
    walrus: _Typer.rebind sets its hidden bool)."""
    def names(node) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))
    if any(names(st) for st in loop.orelse) or isinstance(loop, ast.For) and (names(loop.target) or names(loop.iter)):
        return False
    tests = [ast.Expr(loop.test)] if isinstance(loop, ast.While) else []
    if scan.read_before_bound(tests + loop.body, {name}):
        return False
    targets = {id(e) for st in ast.walk(loop) if isinstance(st, ast.Assign) for t in st.targets
               for e in ([t] if isinstance(t, ast.Name) else t.elts if isinstance(t, ast.Tuple) else [])}
    return all(id(n) in targets for n in ast.walk(loop)
               if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load))


def _exactly(v, dt: np.dtype):
    """v as a scalar of dt when it is one of dt's values (NaN is every float's), else None."""
    if type(v) is int and dt.kind in "iu":
        info = np.iinfo(dt)
        return dt.type(v) if info.min <= v <= info.max else None
    try:
        with np.errstate(over="ignore"):  # (1e300 is no float32's: inf)
            x = dt.type(v)
    except OverflowError:  # (an int past every float: 10 ** 400)
        return None
    return x if math.isnan(v) or float(x) == v else None  # (0.1 is no float16's: numpy's == rounds it first)


def _uses(loop, same: set, doubles: bool = False) -> dict:
    """name -> [whether each read of it is an operand of a comparison (or
    of Python's max or min: _Typer.binop checks what it is compared with),
    the value stored into an element of an array of `same`, an operand of
    arithmetic whose other is an element of one, or a branch of a
    conditional expression that is the value bound to the name itself (`m =
    x[i] if x[i] > m else m`) or stored; or, for a name bound to it, that
    name (`tot = acc`: _retype checks it)].  `doubles` (a Python float
    retyped as float64: their +, - and * give the same values, only the
    type differs): also inside sums and products that meet an element
    of one, or are stored into one (GAE's `r[t] + 0.99 * nv - v[t]`)."""
    def element(e) -> bool:
        return isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name) and e.value.id in same \
            and not isinstance(e.slice, (ast.Slice, ast.Tuple))

    def stored(node, value, name=None) -> bool:  # (value is what node binds to name, or stores into `same`)
        return isinstance(node, ast.Assign) and value is node.value and all(
            isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in same
            or isinstance(t, ast.Name) and t.id == name for t in node.targets)

    def copied(node, value):  # (`tot = acc`: the name bound to another: ok where that one is retyped alike)
        if isinstance(node, ast.Assign) and value is node.value and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id != value.id:
            return node.targets[0].id
        return False
    parents = {id(c): n for n in ast.walk(loop) for c in ast.iter_child_nodes(n)}

    def arithmetic(node, e) -> bool:  # (e, through +, - and *, meets an element of `same`, or is stored)
        while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) or \
                isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            if isinstance(node, ast.BinOp) and element(node.right if e is node.left else node.left):
                return True
            node, e = parents.get(id(node)), node
        return stored(node, e)
    out: dict = {}
    for node in ast.walk(loop):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                ok = isinstance(node, ast.Compare) or stored(node, child) or isinstance(node, ast.Call) and \
                    isinstance(node.func, ast.Name) and node.func.id in ("max", "min") and not node.keywords or \
                    isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)) and \
                    element(node.right if child is node.left else node.left) or \
                    isinstance(node, ast.IfExp) and child is not node.test and \
                    stored(parents.get(id(node)), node, child.id) or copied(node, child) or \
                    doubles and arithmetic(node, child)
                out.setdefault(child.id, []).append(ok)
    return out


def _program(site: Site, fn, scope, params, arrays, env, prologue, resolved, retyped: dict,
             rounded: dict, seeded: dict) -> PyLoop:
    typer = _Typer(arrays, resolved, retyped, rounded, seeded)
    try:
        body, after = typer.stmt(site.node, dict(env))
    except Unsupported as e:
        if typer.conflicts:
            raise _Untyped(str(e), typer.conflicts) from None
        raise
    outputs = []
    for name in site.assigned:
        if name not in site.outside_reads:
            continue  # (nothing reads it after the loop)
        if name in seeded:
            outputs += [(name, seeded[name]), (_BOUND + name, "bool")]
            continue
        if name not in scope or name in arrays:
            if name not in arrays:
                types_ = typer.bound_types.get(name, set())
                if len(types_) == 1 and not _is_vec(next(iter(types_))) and _bound_before_read(site.node, name):
                    raise _Unbound(name, next(iter(types_)))
                raise Unsupported(f"{name} is first bound in the loop and read after it")
            continue
        if after is None or name not in after or after[name].startswith("view."):
            why = f"the type of {name} after the loop depends on the data, or it is a view"
            raise _Untyped(why, typer.conflicts) if name in typer.conflicts else Unsupported(why)
        outputs.append((name, after[name]))
        if _FLAG + name in env:
            outputs.append((_FLAG + name, "bool"))
    ref = _reference(site, fn, [p[0] for p in params], [o[0] for o in outputs], resolved, retyped, seeded)
    return PyLoop(tuple(params), tuple(outputs), tuple(prologue) + tuple(body), ref, user_location())


def _folded(e):
    """The value of a typed expression of Python numbers' constants and
    arithmetic (`-np.inf`, `2 ** 31 - 1`), as Python computes it; None for
    anything else."""
    if e[0] == "const" and is_weak(e[1]):
        return e[2]
    if e[0] == "un" and is_weak(e[1]):
        a = _folded(e[3])
        f = {"neg": operator.neg, "invert": operator.invert, "abs": abs}.get(e[2])
        return None if a is None or f is None else f(a)
    if e[0] == "bin" and is_weak(e[1]) and e[2] in _FUNCS and e[2] not in COMPARISONS:
        a, b = _folded(e[3]), _folded(e[4])
        try:
            return None if a is None or b is None else _FUNCS[e[2]](a, b)
        except (ArithmeticError, ValueError):
            return None
    if e[0] == "cvt" and is_weak(e[1]):  # (float(1), int(True); int() of inf or NaN raises: none)
        a = _folded(e[2])
        try:
            return None if a is None else {"int": int, "float": float, "bool": bool}[e[1]](a)
        except (ArithmeticError, ValueError):
            return None
    return None


def _store_targets(n):
    if isinstance(n, ast.Assign):
        for t in n.targets:
            yield from (t.elts if isinstance(t, ast.Tuple) else [t])
    elif isinstance(n, ast.AugAssign):
        yield n.target


def _global(fn, name, globals_: dict):
    """What `name` is where fn's loop reads it: its closure's cell, or the
    trace's copy of fn's globals where it holds a traced value there (a
    global the trace reads as a runtime scalar: not the module's number of
    the call that traced), else fn's own."""
    if name in fn.__code__.co_freevars:
        cell = fn.__closure__[fn.__code__.co_freevars.index(name)]
        try:
            return cell.cell_contents
        except ValueError:
            raise Unsupported(f"{name} is not bound yet") from None
    v = globals_.get(name, _MISSING)
    if isinstance(v, (Tracer, SymInt)):
        return v
    if name in fn.__globals__:  # (numpy itself, where the trace's copy holds its proxy)
        return fn.__globals__[name]
    if hasattr(builtins, name):
        return getattr(builtins, name)
    raise Unsupported(f"{name} is not defined")


def _scalar_type(v) -> str | None:
    if isinstance(v, SymInt):
        return "int"
    if isinstance(v, Tracer):
        if v.ndim or v.dtype.name not in _ELEMENT_DTYPES:
            return None
        if v.value.weak:
            return {"b": "bool", "i": "int", "f": "float"}.get(v.dtype.kind)
        return "np." + v.dtype.name
    return type_of_value(v)


def _no_aliasing(inputs, kinds) -> None:
    """A written array shares its storage with no other array the loop
    reads (under another name, or a view of it)."""
    for i, (w, kw) in enumerate(zip(inputs, kinds)):
        if kw != "written":
            continue
        for j, v in enumerate(inputs):
            if j != i and isinstance(v, Tracer) and v.ndim and (
                    v is w or v._storage is not None and v._storage is w._storage):
                raise Unsupported("an array it stores into is also read through another name")


def _reference(site: Site, fn, params: list, outputs: list, resolved: dict, retyped: dict, seeded: dict):
    """The loop as a Python function of its parameters returning its
    outputs: the user's own statements, compiled from their source (a
    retyped name's value as its numpy type, and its flag, _retype; a name
    first bound in the loop, or its zero, and whether a trip bound it,
    _Unbound)."""
    key = (tuple(params), tuple(outputs), id(fn.__globals__), tuple(sorted((k, id(v)) for k, v in resolved.items())),
           tuple(sorted(retyped.items())), tuple(sorted(seeded.items())))
    if key not in site.refs:
        args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], kwonlyargs=[],
                             kw_defaults=[], defaults=[])

        def value(o: str):
            if o.startswith(_BOUND) or o in seeded:  # (read through a closure: NameError while unbound)
                n = o[len(_BOUND):] if o.startswith(_BOUND) else o
                get = ast.Lambda(ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                                 ast.Name(n, ast.Load()))
                return ast.Call(ast.Name("__sj_bound__", ast.Load()), [get, ast.Constant(seeded[n]),
                                                                         ast.Constant(o.startswith(_BOUND))], [])
            if o.startswith(_FLAG):  # (whether it is still a Python number)
                return ast.Call(ast.Name("__sj_python__", ast.Load()), [ast.Name(o[len(_FLAG):], ast.Load())], [])
            if o in retyped:
                return ast.Call(ast.Name("__sj_as__", ast.Load()), [ast.Name(o, ast.Load()),
                                                                      ast.Constant(retyped[o][1])], [])
            return ast.Name(o, ast.Load())
        ret = ast.Return(ast.Tuple([value(o) for o in outputs], ast.Load()))
        fdef = ast.FunctionDef(name="lifted_loop", args=args, body=[site.node, ret], decorator_list=[],
                               returns=None, type_comment=None)
        for n in (fdef, ret):
            ast.copy_location(n, site.node)
        mod = ast.Module(body=[fdef], type_ignores=[])
        ast.fix_missing_locations(mod)
        ns = {**fn.__globals__, **resolved, "__sj_python__": lambda v: not isinstance(v, np.generic),
              "__sj_as__": lambda v, t: dtype_of(t).type(v), "__sj_bound__": _bound_value}
        exec(compile(mod, site.filename, "exec", dont_inherit=True), ns)  # (the function's own source)
        site.refs[key] = ns["lifted_loop"]
    return site.refs[key]


def _emit(ctx, program: PyLoop, inputs: list, results) -> list:
    """Record the pyloop node; its outputs as Tracers holding `results`."""
    ins = [ctx.operand(v) for v in inputs]
    outs = []
    for k, r in zip(program.written, results):
        outs.append(Tracer(ctx, ctx.new_value(inputs[k].dtype, inputs[k].value.shape), r))
    for (name, t), r in zip(program.outputs, results[len(program.written):]):
        val = ctx.new_value(dtype_of(t), (), weak=is_weak(t))
        outs.append(Tracer(ctx, val, r))
        ctx.scalars[val.id] = r
    ctx._record(Node("pyloop", tuple(t.value for t in ins), make_attrs(program=program),
                     tuple(t.value for t in outs), loc=program.loc))
    return outs


# ------------------------------------------------------------ typing

def _sample(t: str):
    return {"int": 1, "float": 1.0, "bool": True}[t] if is_weak(t) else dtype_of(t).type(1)


def _type_of_result(r) -> str:
    t = type_of_value(r)
    if t is None or not is_weak(t) and dtype_of(t).name not in _ELEMENT_DTYPES:
        raise Unsupported(f"a result of type {type(r).__name__}")
    return t


def _ask(f, *ts) -> str:
    """The type of f's result on values of types ts, as Python and numpy give it."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _type_of_result(f(*[_sample(t) for t in ts]))
    except (TypeError, ValueError, OverflowError, ZeroDivisionError) as e:
        raise Unsupported(f"{getattr(f, '__name__', f)} of {', '.join(ts)}: {e}") from None


def _ask_arrays(f, *dts) -> str:
    """The scalar type f gives on 1-D arrays of dtypes dts."""
    try:
        return _type_of_result(f(*[np.ones(2, np.dtype(d)) for d in dts]))
    except (TypeError, ValueError) as e:
        raise Unsupported(f"{f.__name__} of arrays of {', '.join(dts)}: {e}") from None


def _is_vec(t: str) -> bool:
    return t.startswith("vec.")


_PYOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
          ast.Mod: "mod", ast.LShift: "lshift", ast.RShift: "rshift", ast.BitAnd: "and", ast.BitOr: "or",
          ast.BitXor: "xor", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq",
          ast.NotEq: "ne"}
_FUNCS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
          "floordiv": operator.floordiv, "mod": operator.mod, "lshift": operator.lshift,
          "rshift": operator.rshift, "and": operator.and_, "or": operator.or_, "xor": operator.xor,
          "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
          "ne": operator.ne, "pow": operator.pow}
_INTS = ("int", "bool")
_CONSTANTS = frozenset([(np, n) for n in ("inf", "nan", "pi", "e", "euler_gamma")] +
                       [(math, n) for n in ("inf", "nan", "pi", "e", "tau")])
_INFO = {"iinfo": ("min", "max"), "finfo": ("min", "max", "eps", "tiny", "smallest_normal", "resolution")}


def _is_int(t: str) -> bool:
    return t in _INTS or not is_weak(t) and dtype_of(t).kind in "iu"


def _boolish(t: str) -> bool:
    return t in ("bool", "np.bool")


class _Loop:
    def __init__(self):
        self.breaks, self.continues = [], []


def _join(envs, conflicts: dict | None = None) -> dict | None:
    """The names of one type in every env of `envs` (None: unreachable);
    `conflicts` gathers the types of those of two (name -> set)."""
    envs = [e for e in envs if e is not None]
    if not envs:
        return None
    out = dict(envs[0])
    for e in envs[1:]:
        for k in list(out):
            if e.get(k) != out[k]:
                if conflicts is not None and k in e and not k.startswith(_KNOWN):
                    conflicts.setdefault(k, set()).update((e[k], out[k]))
                del out[k]
    return out


class _Typer:
    """Types a loop's statements (the module docstring of shapes/pyloop.py
    says what they become); raises Unsupported for anything else."""

    def __init__(self, arrays: dict, resolved: dict, retyped: dict, rounded: dict, seeded: dict):
        self.arrays, self.resolved = arrays, resolved
        self.retyped, self.rounded = retyped, rounded  # (_retype)
        self.seeded = seeded  # (_Unbound)
        self.bound_types: dict = {}  # name -> the types it is bound to
        self.loops: list[_Loop] = []
        self.conflicts: dict = {}  # name -> the types two paths gave it (_join)
        self.n_hidden = 0
        self.pending: list = []

    # ---------------------------------------------------------- statements
    def block(self, stmts, env) -> tuple[list, dict | None]:
        out = []
        for s in stmts:
            if env is None:
                break  # (unreachable: after a break or a continue)
            saved, self.pending = self.pending, []  # (the views a statement's expressions slice, set first)
            ops, env = self.stmt(s, env)
            out += self.pending + ops
            self.pending = saved
        return out, env

    def stmt(self, s, env) -> tuple[list, dict | None]:
        if type(s) is tuple:  # (typed already: a loop over an array's element, ("set", name, load))
            return [s], {**env, s[1]: s[2][1]}
        if isinstance(s, ast.Pass):
            return [], env
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise Unsupported("chained assignment")
            return self.assign(s.targets[0], s.value, env)
        if isinstance(s, ast.AugAssign):
            op = _PYOPS.get(type(s.op))
            if op is None or op in COMPARISONS:
                raise Unsupported(f"{type(s.op).__name__}=")
            if isinstance(s.target, ast.Name):
                value = self.expr(s.value, env)
                if s.target.id in self.retyped and value[1] != self.retyped[s.target.id][1]:
                    raise Unsupported(f"{s.target.id} {type(s.op).__name__}= a {value[1]}")  # (not one of its type)
                e = self.binop(op, self.expr(ast.Name(s.target.id, ast.Load()), env), value)
                return self.rebind(s.target.id, e, env)
            if isinstance(s.target, ast.Subscript):
                arr, idx = self.element(s.target, env)
                cur = ("load", strong(self.arrays[arr][0]), arr, idx)
                e = self.binop(op, cur, self.expr(s.value, env))
                return [("store", arr, idx, self.cvt(e, strong(self.arrays[arr][0]), "store"))], env
            raise Unsupported("augmented assignment to this target")
        if isinstance(s, ast.If):
            known = self.decided(s.test, env)
            if known is not None:  # (the branch it takes, alone: the names of the other keep no type of theirs;
                outcome, other = known  # the other operand still read, its index checked)
                self.n_hidden += 1
                ops, out = self.block(s.body if outcome else s.orelse, dict(env))
                return [("set", f"#d{self.n_hidden}", other)] + ops, out
            c = self.test(s.test, env)
            then, e1 = self.block(s.body, dict(env))
            orelse, e2 = self.block(s.orelse, dict(env))
            return [("if", c, tuple(then), tuple(orelse))], _join([e1, e2], self.conflicts)
        if isinstance(s, ast.For):
            return self.for_(s, env)
        if isinstance(s, ast.While):
            return self.while_(s, env)
        if isinstance(s, (ast.Break, ast.Continue)):
            if not self.loops:
                raise Unsupported("break outside a loop")
            (self.loops[-1].breaks if isinstance(s, ast.Break) else self.loops[-1].continues).append(env)
            return [("break",) if isinstance(s, ast.Break) else ("continue",)], None
        raise Unsupported(type(s).__name__)

    def assign(self, target, value, env):
        if isinstance(target, ast.Name):
            if target.id in self.arrays or target.id in self.resolved:
                raise Unsupported(f"{target.id} is rebound in the loop")
            mixed = self.mixed(target.id, value, env)
            if mixed is not None:
                return self.rebind(target.id, mixed[0], env, mixed[1])
            e = self.expr(value, env)
            if e[0] == "view":  # (a name for a view: reads see the array's contents when they read)
                return [], {**env, target.id: f"view.{e[1][4:]}.{e[2]}.{e[3]}"}
            if _is_vec(e[1]):
                raise Unsupported("a gathered array bound to a name")
            return self.rebind(target.id, e, env)
        if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Slice):
            return self.slice_store(target, value, env), env
        if isinstance(target, ast.Subscript):
            arr, idx = self.element(target, env)
            e = self.cvt(self.expr(value, env), strong(self.arrays[arr][0]), "store")
            return [("store", arr, idx, e)], env
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) \
                and all(isinstance(t, (ast.Name, ast.Subscript)) for t in target.elts):
            # (`a, b = b, a`, `x[j], x[j + 1] = x[j + 1], x[j]`: every value read before any target is
            # bound or stored, then the targets left to right, as Python does)
            es = [self.expr(v, env) for v in value.elts]
            out, env = [], dict(env)
            tmps = []
            for e in es:
                if _is_vec(e[1]) or e[0] == "view":
                    raise Unsupported("an array in a tuple assignment")
                self.n_hidden += 1
                out.append(("set", f"#t{self.n_hidden}", e))
                tmps.append(ast.Name(f"#t{self.n_hidden}", ast.Load()))
                env[f"#t{self.n_hidden}"] = e[1]
            for t, tv in zip(target.elts, tmps):
                stmts, env = self.assign(t, tv, env)
                out += stmts
            return out, env
        raise Unsupported("assignment to this target")

    def slice_store(self, target: ast.Subscript, value, env) -> list:
        """`x[lo:hi:step] = v` of a 1-D array and one number (a sieve's
        `is_p[i * i::i] = False`): v, as numpy's setitem converts it, stored
        at each index of the slice (Python's slice.indices: bounds clamped
        the step's way; a step of 0 aborts, as numpy raises) in a loop."""
        arr = target.value.id if isinstance(target.value, ast.Name) else None
        if arr not in self.arrays or self.arrays[arr][1] != 1:
            raise Unsupported("a slice assignment to other than a 1-D array")
        e = self.expr(value, env)
        if _is_vec(e[1]) or e[0] == "view":
            raise Unsupported("an array assigned to a slice")
        dt = strong(self.arrays[arr][0])
        self.n_hidden += 1
        v, j = f"#s{self.n_hidden}", f"#j{self.n_hidden}"
        body = (("store", arr, (("var", "int", j),), ("var", dt, v), "in range"),)  # (the bounds are clamped)
        bounds = self.slice_indices(target.slice, ("dim", "int", arr, 0), env)
        return [("set", v, self.cvt(e, dt, "store")), ("for", j, bounds, (body,), 0)]

    def slice_indices(self, sl: ast.Slice, n, env) -> tuple:
        """(start, stop, step) of slice `sl` of a dim of `n` elements, as
        Python's slice.indices gives them: a bound below 0 counted from the
        end once, then clamped the step's way (a step of 0: the loop aborts,
        as numpy raises)."""
        zero, one = ("const", "int", 0), ("const", "int", 1)
        step = self.index_of(sl.step, env) if sl.step is not None else one
        up = self.binop("gt", step, zero)
        last, before = self.binop("sub", n, one), ("const", "int", -1)
        ends = []
        for b, ahead, back in ((sl.lower, zero, last), (sl.upper, n, before)):
            if b is None:
                ends.append(("select", "int", up, ahead, back))
                continue
            x = self.index_of(b, env)
            x = ("select", "int", self.binop("lt", x, zero), self.binop("add", x, n), x)
            ends.append(("select", "int", up, self._clamp(x, zero, n), self._clamp(x, before, last)))
        return ends[0], ends[1], step

    def index_of(self, b, env):
        """A slice bound (or step) typed: a Python int."""
        x = self.expr(b, env)
        if not _is_int(x[1]) or _boolish(x[1]):
            raise Unsupported("a slice bound that is not an integer")
        return self.cvt(x, "int")

    def decided(self, test, env):
        """(the outcome, the other operand typed) of a comparison of an
        integer with an infinity or NaN a name holds (`best = -np.inf` then
        `if x[i] > best:` over integers, at the first trip: numpy compares
        them as float64s, and no integer is infinite), or with a Python int
        past the range of its dtype (`best = np.iinfo(np.int64).max` over
        int32s: numpy 2 compares them exactly); or None."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1) or _PYOPS.get(type(test.ops[0])) is None:
            return None
        sides = [test.left, test.comparators[0]]
        known = [env.get(_KNOWN + x.id) if isinstance(x, ast.Name) else None for x in sides]
        known = [None if k is None else float(k) if k in ("inf", "-inf", "nan") else int(k) for k in known]
        if (known[0] is None) == (known[1] is None):
            return None
        other = self.expr(sides[known[0] is not None], env)
        t = other[1]
        if not (is_weak(t) or t.startswith("np.")) or dtype_of(t).kind not in "biu":
            return None
        k = known[0] if known[0] is not None else known[1]
        if type(k) is int:  # (past the dtype's range: as 0 compares with 1, or with -1)
            dt = dtype_of(t)
            lo, hi = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
            if is_weak(t) or lo <= k <= hi:
                return None
            k = 1 if k > 0 else -1
        a, b = [0 if x is None else k for x in known]  # (any integer compares with them as 0 does)
        return bool(_FUNCS[_PYOPS[type(test.ops[0])]](a, b)), other

    def mixed(self, name: str, value, env):
        """(the value, its flag) of `name = max(c, x)` (or min, or `x if t
        else c`) of a Python number c and a numpy scalar x of type T, where
        name is retyped as T (_retype): c converted exactly, the flag set
        where c is taken; a conflict for _retype where name is not retyped
        yet; None for any other value (`max() of two types` stays refused
        where it is not bound to a name)."""
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("max", "min") \
                and self.resolved.get(value.func.id, getattr(builtins, value.func.id)) in (max, min) \
                and len(value.args) == 2 and not value.keywords:
            first, second = [self.expr(a, env) for a in value.args]
        elif isinstance(value, ast.IfExp):
            c = self.test(value.test, env)
            first, second = self.expr(value.body, env), self.expr(value.orelse, env)
        else:
            return None
        if first[1] == second[1] or is_weak(first[1]) == is_weak(second[1]):
            return None
        weak, strong_ = (first, second) if is_weak(first[1]) else (second, first)
        v, t = _folded(weak), strong_[1]
        if v is None or not t.startswith("np.") or _exactly(v, dtype_of(t)) is None:
            return None
        if self.retyped.get(name, (weak[1], t)) != (weak[1], t):
            return None
        if name not in self.retyped:
            self.conflicts.setdefault(name, set()).update((weak[1], t))
            raise Unsupported(f"{name} is bound to a {weak[1]} or a {t}")
        const = ("const", t, _exactly(v, dtype_of(t)))
        a, b = [const if x is weak else x for x in (first, second)]
        fa, fb = [("const", "bool", True) if x is weak else self.flag_of(name, x) for x in (first, second)]
        if isinstance(value, ast.IfExp):
            return ("select", t, c, a, b), ("select", "bool", c, fa, fb)
        op = value.func.id  # (Python's max(a, b) is a unless b > a; min's, unless b < a)
        c = self.truth(self.binop("gt" if op == "max" else "lt", b, a))
        return ("bin", t, op, a, b), ("select", "bool", c, fb, fa)

    def rebind(self, name: str, e, env, flag=None):
        """name = e; for a retyped name (_retype), a constant Python number
        converted to its numpy type, and its flag set (`flag`, where the
        caller knows it: mixed)."""
        self.bound_types.setdefault(name, set()).add(e[1])
        if name not in self.retyped:
            v = _folded(e) if e[1] in ("float", "int") else None
            env = {k: t for k, t in env.items() if k != _KNOWN + name}
            if type(v) is int or v is not None and not math.isfinite(v):
                env[_KNOWN + name] = repr(v)
            if name in self.seeded:  # (a trip bound it: _Unbound)
                if e[1] != self.seeded[name]:
                    raise Unsupported(f"{name} is bound to a {e[1]} and a {self.seeded[name]}")
                return [("set", name, e), ("set", _BOUND + name, ("const", "bool", True))], {**env, name: e[1]}
            return [("set", name, e)], {**env, name: e[1]}
        python, t = self.retyped[name]
        weak = e[1] == python
        if weak:
            v = _folded(e)
            x = None if v is None else _exactly(v, dtype_of(t))
            if x is None and v is not None and v == self.rounded.get(name):  # (the float it starts from, rounded)
                x = _rounding(v, dtype_of(t))
            if x is None:
                raise Unsupported(f"{name} is bound to a {python} that is not a constant of {t[3:]}")
            e = ("const", t, x)
        elif e[1] != t:
            raise Unsupported(f"{name} is bound to a {e[1]}")
        flag = ("set", _FLAG + name, ("const", "bool", True) if weak else flag or self.flag_of(name, e))
        return [flag, ("set", name, e)], {**env, name: t}  # (the flag first: it reads the value before this one)

    def flag_of(self, name: str, e):
        """Whether `name = e` leaves the name its Python number (its flag,
        _retype): where e is the name itself (a select's branch, Python's
        max or min keeping its first argument: `max(m, x[i])` is m unless
        x[i] > m), the flag it had; elsewhere False."""
        if e[0] == "var" and e[2] in self.retyped:  # (itself, or another it is bound to: `tot = acc`)
            return ("var", "bool", _FLAG + e[2])
        if e[0] == "select":
            return ("select", "bool", e[2], self.flag_of(name, e[3]), self.flag_of(name, e[4]))
        if e[0] == "bin" and e[2] in ("max", "min"):
            first, second = e[3], e[4]
            c = self.truth(self.binop("gt" if e[2] == "max" else "lt", second, first))
            return ("select", "bool", c, self.flag_of(name, second), self.flag_of(name, first))
        return ("const", "bool", False)

    def while_(self, s: ast.While, env):
        """A while loop: its test and body typed at each trip's head until
        the types settle (as a for loop's), its names after it those of
        every trip the test may end it at and of its breaks."""
        tests = []

        def trip(h):
            saved, self.pending = self.pending, []
            c = self.test(s.test, h)
            tests.append((tuple(self.pending), c))  # (the views its test slices, set before it)
            self.pending = saved
            return self.block(list(s.body), h)
        heads, bodies, breaks = self.trips(env, trip)
        return [("while", tuple(tests), bodies)], _join(breaks + heads, self.conflicts)  # (its test false at a head)

    def trips(self, env, trip):
        """(the env at the head of each trip typed apart, their statements,
        the envs of their breaks): trip(h) types one trip from head h, until
        a trip leaves the types it started from (names first bound in the
        loop are its own: their types do not carry over)."""
        heads, bodies, breaks = [dict(env)], [], []
        for _ in range(MAX_PEEL + 1):
            self.loops.append(_Loop())
            ops, out = trip(dict(heads[-1]))
            lp = self.loops.pop()
            back = _join([out] + lp.continues, self.conflicts)
            bodies.append(tuple(ops))
            breaks += lp.breaks
            nxt = heads[-1] if back is None else {k: t for k, t in back.items() if k in env}  # (None: every trip
            if nxt == heads[-1]:  # breaks, the loop runs at most one)
                return heads, tuple(bodies), breaks
            heads.append(nxt)
        raise Unsupported(f"the types of {sorted(set(heads[-1]) ^ set(heads[-2]))} keep changing")

    def for_(self, s: ast.For, env):
        it, index = s.iter, None
        enumerated = _enumerated(s)
        if enumerated is not None:  # (`for i, v in enumerate(x)`: `for v in x` with i its counter)
            if self.resolved.get(it.func.id) is not enumerate:
                raise Unsupported(f"{it.func.id} is not the builtin enumerate")
            index, var, it = enumerated
            if index in self.arrays or index in self.resolved or index in self.retyped:
                raise Unsupported(f"{index} is rebound in the loop")
            if not (isinstance(it, ast.Name) and it.id in self.arrays):
                raise Unsupported("enumerate() of something other than an array")
        else:
            var = s.target.id
        if var in self.arrays or var in self.resolved or var in self.retyped:
            raise Unsupported(f"{var} is rebound in the loop")
        if isinstance(it, ast.Name) and it.id in self.arrays:
            dt, nd = self.arrays[it.id]
            if nd != 1:
                raise Unsupported("a loop over the rows of an array")
            self.n_hidden += 1
            k = f"#k{self.n_hidden}" if index is None else index
            bounds = (("const", "int", 0), ("dim", "int", it.id, 0), ("const", "int", 1))
            head = [("set", var, ("load", strong(dt), it.id, (("var", "int", k),)))]
            var_t, counter = None, k
        elif isinstance(it, ast.Subscript) and isinstance(it.value, ast.Name) and it.value.id in self.arrays \
                and self.arrays[it.value.id][1] == 1 and isinstance(it.slice, ast.Slice) and it.slice.step is None:
            # (`for v in x[1:]`: the elements of x from the slice's start to its stop, as Python clamps them)
            dt = self.arrays[it.value.id][0]
            bounds = self.slice_indices(it.slice, ("dim", "int", it.value.id, 0), env)
            self.n_hidden += 1
            k = f"#k{self.n_hidden}"
            head = [("set", var, ("load", strong(dt), it.value.id, (("var", "int", k),)))]
            var_t, counter = None, k
        elif isinstance(it, ast.Call) and isinstance(it.func, ast.Name) \
                and self.resolved.get(it.func.id) is range and not it.keywords and 1 <= len(it.args) <= 3:
            raw = [self.expr(a, env) for a in it.args]
            if any(not _is_int(a[1]) for a in raw):
                raise Unsupported("range() of a non-integer")
            args = [self.cvt(a, "int") for a in raw]
            bounds = ((("const", "int", 0), args[0], ("const", "int", 1)) if len(args) == 1 else
                      (args[0], args[1], ("const", "int", 1)) if len(args) == 2 else tuple(args))
            head, var_t, counter = [], "int", var
        else:
            raise Unsupported("a loop over something other than range() or a 1-D array")

        def trip(h):
            h.pop(_KNOWN + var, None)
            h.pop(_KNOWN + counter, None)
            h[var if var_t is not None else counter] = var_t or "int"
            return self.block(head + list(s.body), h)
        heads, bodies, exits = self.trips(env, trip)
        after = _join([heads[-1]] + exits, self.conflicts)
        # (the trips its types take to settle, fewer than the trips typed apart where only a known value
        # changed, `n = 0` then `n += 1`: a call of fewer trips than these aborts, its names of other types)
        types = [{k: t for k, t in h.items() if not k.startswith(_KNOWN)} for h in heads]
        settle = next(t for t in range(len(heads)) if types[t] == types[-1])
        return [("for", counter, bounds, bodies, settle)], after

    def element(self, target: ast.Subscript, env):
        if not isinstance(target.value, ast.Name) or target.value.id not in self.arrays:
            raise Unsupported("indexing something other than an argument's array")
        arr = target.value.id
        sl = target.slice
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if len(items) != self.arrays[arr][1]:
            raise Unsupported(f"{arr}[...] does not pick one element")
        idx = []
        for i in items:
            e = self.expr(i, env)
            if not _is_int(e[1]) or _boolish(e[1]):
                raise Unsupported(f"an index of type {e[1]}")
            idx.append(self.cvt(e, "int"))
        return arr, tuple(idx)

    # --------------------------------------------------------- expressions
    def expr(self, e, env):
        if isinstance(e, ast.Constant):
            t = type_of_value(e.value)
            if t is None or t == "int" and not _INT64[0] <= e.value <= _INT64[1]:
                raise Unsupported(f"constant {e.value!r}")
            return ("const", t, e.value)
        if isinstance(e, ast.Name):
            if e.id in env and env[e.id].startswith("view."):
                _, dt, hidden, arr = env[e.id].split(".")
                return ("view", "vec." + dt, hidden, arr)
            if e.id in env:
                return ("var", env[e.id], e.id)
            raise Unsupported(f"{e.id} has no single type here" if e.id not in self.resolved else
                              f"{e.id} is not a scalar")
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.MatMult):
            return self.dot(self.vector(e.left, env), self.vector(e.right, env))
        if isinstance(e, ast.Attribute) and e.attr == "size" and isinstance(e.value, ast.Name) \
                and e.value.id in self.arrays:
            return ("size", "int", e.value.id)
        if isinstance(e, ast.Attribute):
            return self.constant(e)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Pow) and _number(e.right) is not None:
            return self.power(self.expr(e.left, env), _number(e.right))
        if isinstance(e, ast.BinOp):
            op = _PYOPS.get(type(e.op))
            if op is None:
                raise Unsupported(type(e.op).__name__)
            return self.binop(op, self.expr(e.left, env), self.expr(e.right, env))
        if isinstance(e, ast.UnaryOp):
            a = self.expr(e.operand, env)
            if isinstance(e.op, ast.Not):
                return ("not", "bool", self.truth(a))
            if isinstance(e.op, ast.UAdd):
                t = _ask(lambda x: +x, a[1])
                return self.cvt(a, t)
            name = "neg" if isinstance(e.op, ast.USub) else "invert"
            t = _ask((lambda x: -x) if name == "neg" else (lambda x: ~x), a[1])
            if name == "neg" and (t != a[1] and not (a[1] == "bool" and t == "int")):
                raise Unsupported(f"-{a[1]}")
            if name == "invert" and _boolish(a[1]) != _boolish(t):
                raise Unsupported(f"~{a[1]}")
            return ("un", t, name, self.cvt(a, t))
        if isinstance(e, ast.Compare):
            left = self.expr(e.left, env)
            parts = []
            for op, right in zip(e.ops, e.comparators):
                r = self.expr(right, env)
                name = _PYOPS.get(type(op))
                if name not in COMPARISONS:
                    raise Unsupported(type(op).__name__)
                parts.append(self.binop(name, left, r))
                left = r
            out = parts[0]
            for p in parts[1:]:
                if p[1] != out[1]:
                    raise Unsupported("a chained comparison of mixed types")
                out = ("and", out[1], out, p)
            return out
        if isinstance(e, ast.BoolOp):
            vals = [self.expr(v, env) for v in e.values]
            if any(v[1] != vals[0][1] or not _boolish(v[1]) for v in vals):
                raise Unsupported("and/or of values that are not all bools of one type")
            out = vals[0]
            for v in vals[1:]:
                out = ("and" if isinstance(e.op, ast.And) else "or", out[1], out, v)
            return out
        if isinstance(e, ast.IfExp):
            c = self.test(e.test, env)
            a, b = self.expr(e.body, env), self.expr(e.orelse, env)
            if a[1] != b[1]:
                for v in (a, b):  # (a name's type against another's: a conflict _retype may settle)
                    if v[0] == "var":
                        self.conflicts.setdefault(v[2], set()).update((a[1], b[1]))
                raise Unsupported("a conditional expression of two types")
            return ("select", a[1], c, a, b)
        if isinstance(e, ast.Subscript):
            v = e.value
            if isinstance(v, ast.Attribute) and v.attr == "shape" and isinstance(v.value, ast.Name) \
                    and v.value.id in self.arrays and isinstance(e.slice, ast.Constant) \
                    and type(e.slice.value) is int:
                nd = self.arrays[v.value.id][1]
                axis = e.slice.value
                if not -nd <= axis < nd:
                    raise Unsupported("shape index out of range")
                return ("dim", "int", v.value.id, axis % nd)
            if isinstance(v, ast.Name) and v.id in self.arrays and self.arrays[v.id][1] == 1:
                if isinstance(e.slice, ast.Slice):
                    return self.view(v.id, e.slice, env, e)
                if not isinstance(e.slice, ast.Tuple):
                    ix = self.expr(e.slice, env)
                    if _is_vec(ix[1]):
                        if not _is_int("np." + ix[1][4:]) or ix[1] == "vec.bool":
                            raise Unsupported("an index array that is not of integers")
                        return ("gather", "vec." + self.arrays[v.id][0].name, v.id, ix)
            if isinstance(v, ast.Name) and v.id in self.arrays and self.arrays[v.id][1] == 2 \
                    and not isinstance(e.slice, (ast.Tuple, ast.Slice)):  # (a row, A[i]: A[i, :])
                ix = self.expr(e.slice, env)
                if not _is_int(ix[1]) or _boolish(ix[1]):
                    raise Unsupported(f"an index of type {ix[1]}")
                return self.view(v.id, ast.Slice(None, None, None), env, e, (0, self.cvt(ix, "int")))
            if isinstance(v, ast.Name) and v.id in self.arrays and self.arrays[v.id][1] == 2 \
                    and isinstance(e.slice, ast.Tuple) and len(e.slice.elts) == 2 \
                    and sum(isinstance(i, ast.Slice) for i in e.slice.elts) == 1:
                # (a row's or a column's segment, A[i, :i] or A[lo:hi, j]: a vector at a fixed index)
                axis = 1 - [isinstance(i, ast.Slice) for i in e.slice.elts].index(True)
                ix = self.expr(e.slice.elts[axis], env)
                if not _is_int(ix[1]) or _boolish(ix[1]):
                    raise Unsupported(f"an index of type {ix[1]}")
                return self.view(v.id, e.slice.elts[1 - axis], env, e, (axis, self.cvt(ix, "int")))
            arr, idx = self.element(e, env)
            return ("load", strong(self.arrays[arr][0]), arr, idx)
        if isinstance(e, ast.Call):
            return self.call(e, env)
        raise Unsupported(type(e).__name__)

    def constant(self, e: ast.Attribute):
        """np.inf, math.pi and the like; np.iinfo(T).max, np.finfo(x.dtype).eps
        and the like (T a numpy type, x an array): constants."""
        base = e.value
        if isinstance(base, ast.Name) and (self.resolved.get(base.id), e.attr) in _CONSTANTS:
            return ("const", "float", float(getattr(self.resolved[base.id], e.attr)))
        f = base.func if isinstance(base, ast.Call) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and self.resolved.get(f.value.id) is np \
                and f.attr in _INFO and len(base.args) == 1 and not base.keywords and e.attr in _INFO[f.attr]:
            a = base.args[0]
            named = isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)
            if named and a.attr == "dtype" and a.value.id in self.arrays:
                dt = self.arrays[a.value.id][0]
            else:
                t = getattr(np, a.attr, None) if named and self.resolved.get(a.value.id) is np else \
                    self.resolved.get(a.id) if isinstance(a, ast.Name) else None
                if not (isinstance(t, type) and issubclass(t, np.generic)):
                    raise Unsupported(f"np.{base.func.attr}() of something other than a numpy type or x.dtype")
                dt = np.dtype(t)
            try:
                v = getattr(getattr(np, base.func.attr)(dt), e.attr)
            except ValueError as err:  # (np.iinfo of a float type)
                raise Unsupported(str(err)) from None
            t = type_of_value(v)
            if t is None or not is_weak(t) and dtype_of(t).name not in _ELEMENT_DTYPES:
                raise Unsupported(f"a constant of type {type(v).__name__}")
            return ("const", t, v)
        raise Unsupported("Attribute")

    def call(self, e: ast.Call, env):
        side = _side(e)  # (searchsorted's side=, the one keyword a call may have)
        f = e.func
        if isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id in self.resolved):
            if f.attr == "searchsorted" and len(e.args) == 1:
                return self.search(self.vector(f.value, env), self.expr(e.args[0], env), side)
            v = self.expr(f.value, env)  # (a method of a vector)
            if not _is_vec(v[1]) or f.attr not in ("sum", "max", "min") or e.args or e.keywords:
                raise Unsupported(f"a call of .{f.attr}()")
            return self.reduce(f.attr, v)
        if isinstance(f, ast.Name) and f.id in self.resolved:
            fn = self.resolved[f.id]
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                and isinstance(self.resolved.get(f.value.id), types.ModuleType):
            fn = getattr(self.resolved[f.value.id], f.attr, None)
        else:
            raise Unsupported("a call of something other than a known function")
        # (the trace's own len, max and min, jit/trace.py: the builtins' meaning here)
        fn = next((getattr(builtins, n) for n, t in TRACED_BUILTINS.items() if fn is t), fn)
        if e.keywords and fn is not np.searchsorted:
            raise Unsupported("a call with keywords")
        if fn is len and len(e.args) == 1 and isinstance(e.args[0], ast.Name) and e.args[0].id in self.arrays:
            return ("dim", "int", e.args[0].id, 0)
        if fn is len and len(e.args) == 1:
            v = self.expr(e.args[0], env)
            if _is_vec(v[1]):
                return ("veclen", "int", v)
        if fn is np.searchsorted and len(e.args) == 2:
            return self.search(self.vector(e.args[0], env), self.expr(e.args[1], env), side)
        whole = fn in (np.dot, np.sum, np.max, np.min, np.amax, np.amin)  # (of a 1-D array's name: all of it)
        args = [self.vector(a, env) if whole else self.expr(a, env) for a in e.args]
        if fn is np.dot and len(args) == 2:
            return self.dot(*args)
        if fn in (np.sum, np.max, np.min, np.amax, np.amin) and len(args) == 1 and _is_vec(args[0][1]):
            return self.reduce({"amax": "max", "amin": "min"}.get(fn.__name__, fn.__name__), args[0])
        if any(_is_vec(a[1]) for a in args):
            raise Unsupported(f"{getattr(fn, '__name__', fn)}() of an array")
        if fn in (min, max) and len(args) >= 2:  # (min(a, b, c) is min(min(a, b), c): the first extreme one)
            if len({a[1] for a in args}) != 1:
                for a in args:  # (a name's type against another's: a conflict _retype may settle)
                    if a[0] == "var":
                        self.conflicts.setdefault(a[2], set()).update(b[1] for b in args)
                raise Unsupported(f"{fn.__name__}() of two types")
            out = args[0]
            for a in args[1:]:
                out = ("bin", a[1], fn.__name__, out, a)
            return out
        if len(args) != 1:
            raise Unsupported(f"{getattr(fn, '__name__', fn)}() of {len(args)} arguments")
        a = args[0]
        if fn is abs or fn is np.abs or fn is np.absolute:
            t = _ask(abs, a[1]) if fn is abs else _ask(np.abs, a[1])
            return ("un", t, "abs", self.cvt(a, t))
        if fn in (int, float, bool):
            return ("truth", "bool", a) if fn is bool else self.cvt(a, fn.__name__)
        if fn is round:  # (Python's int, half to even: numpy's rint, then int() -- a NaN or an infinity aborts)
            return self.cvt(a if dtype_of(a[1]).kind in "biu" else ("call", a[1], "rint", (a,), "numpy"), "int")
        if isinstance(fn, type) and issubclass(fn, np.generic) and np.dtype(fn).name in _ELEMENT_DTYPES:
            return self.cvt(a, strong(fn))
        for name in MATH:
            if fn is getattr(math, name, None):
                t = _ask(fn, a[1])
                x = ("call", "float", name, (self.cvt(a, "float"),), "math")
                return self.cvt(x, "int") if t == "int" else x
            if fn is getattr(np, name, None):
                t = _ask(fn, a[1])
                return ("call", t, name, (self.cvt(a, t),), "numpy")
        raise Unsupported(f"a call of {getattr(fn, '__name__', fn)}")

    def view(self, arr: str, sl: ast.Slice, env, node, fixed=None):
        """arr[lo:hi:step] (1-D), or a 2-D arr's slice along one axis at the
        index `fixed` gives of the other ((axis, index)): its bounds set (as
        Python slices them) in hidden variables named by the slice's place
        in the source."""
        hidden = f"#v{node.lineno}_{node.col_offset}"
        bounds = []
        for b in (sl.lower, sl.upper, sl.step):
            bounds.append(None if b is None else self.index_of(b, env))
        self.pending.append(("setview", hidden, arr, *bounds) + ((fixed,) if fixed else ()))
        return ("view", "vec." + self.arrays[arr][0].name, hidden, arr)

    def dot(self, a, b):
        if not (_is_vec(a[1]) and _is_vec(b[1])) or "vec.bool" in (a[1], b[1]):
            raise Unsupported("@ of something other than two vectors of numbers")
        if "vec.float16" in (a[1], b[1]):
            raise Unsupported("@ of float16 vectors")  # (numpy's summation order and rounding are its own)
        t = _ask_arrays(np.matmul, a[1][4:], b[1][4:])
        if t == "np.float32":  # (numpy's BLAS sdot adds in an order of its own; float32 shows it: 0.3% in 500k)
            raise Unsupported("@ of float32 vectors")
        return ("dot", t, a, b)

    def reduce(self, op: str, v):
        if v[1] in ("vec.bool", "vec.float16"):
            raise Unsupported(f"{op} of {v[1][4:]}s")  # (float16: numpy's summation order and rounding are its own)
        t = _ask_arrays(getattr(np, op), v[1][4:])  # (small ints sum in int64)
        if op == "sum" and t == "np.float32" and v[0] != "view":  # (a view's is numpy's pairwise sum)
            raise Unsupported("a sum of gathered float32s")
        return ("reduce", t, op, v)

    def vector(self, e, env):
        """e as a vector, where a 1-D array's name is the whole of it."""
        if isinstance(e, ast.Name) and e.id in self.arrays and e.id not in env and self.arrays[e.id][1] == 1:
            return self.view(e.id, ast.Slice(None, None, None), env, e)
        return self.expr(e, env)

    def search(self, v, key, side: str):
        """np.searchsorted of a vector and one number: both compared in the
        dtype numpy takes for them (a Python number is an int64 or a
        float64 there: a float32 vector and 0.1 compare as float64)."""
        if not _is_vec(v[1]) or _is_vec(key[1]) or "float16" in (v[1][4:], dtype_of(key[1]).name):
            raise Unsupported("searchsorted() of something other than a vector and a number")
        common = strong(np.result_type(np.dtype(v[1][4:]), dtype_of(key[1])))
        if common[3:] not in _ELEMENT_DTYPES:
            raise Unsupported(f"searchsorted() comparing as {common[3:]}")
        return ("search", "np.int64", v, self.cvt(key, common), side)

    def test(self, e, env):
        """The truth of e where nothing but its truth is read (an if's test):
        `and`, `or` and `not` of operands of any types, each's truth (`i > 0
        and x[i] > x[i - 1]`, a Python bool and numpy's: as a value, of the
        type the data picks, but only its truth is read)."""
        if isinstance(e, ast.BoolOp):
            out = None
            for v in e.values:
                c = self.test(v, env)
                out = c if out is None else ("and" if isinstance(e.op, ast.And) else "or", "bool", out, c)
            return out
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return ("not", "bool", self.test(e.operand, env))
        return self.truth(self.expr(e, env))

    def power(self, a, k):
        """a ** k of a constant k: a ** 2 is a * a for every type (Python's
        and numpy's value and type: one rounding, as pow's correctly rounded
        square; an overflow aborts and numpy runs the loop, with its
        warning); of an integer and 0 <= k <= 8, k - 1 products (exact, as
        Python's and numpy's integer powers); of a float, or to a float,
        libm's pow as Python's float and numpy's scalar powers compute it,
        aborting where either raises or warns (a negative base to a
        fractional power: Python's complex, numpy's nan; 0 to a negative
        one; an overflow)."""
        if type(k) is int and k == 2:
            return self.binop("mul", a, a)
        if _is_vec(a[1]) or _boolish(a[1]):
            raise Unsupported(f"a power of a {a[1]}")
        t = _ask(lambda x: x ** k, a[1])
        if dtype_of(a[1]).kind in "iu" and type(k) is int:
            if not 0 <= k <= 8:
                raise Unsupported(f"an integer to the power {k}")
            r = self.cvt(("const", "int", 1), t) if k == 0 else a
            for _ in range(k - 1):
                r = self.binop("mul", r, a)
            return r
        if dtype_of(t).kind != "f" or dtype_of(t).itemsize < 4:
            raise Unsupported(f"{a[1]} to a power")
        return ("bin", t, "pow", self.cvt(a, t), ("const", t, dtype_of(t).type(k) if t != "float" else float(k)))

    def _clamp(self, v, lo, hi):
        """v within [lo, hi] (ints)."""
        v = ("select", "int", self.binop("lt", v, lo), lo, v)
        return ("select", "int", self.binop("gt", v, hi), hi, v)

    def truth(self, e):
        if _is_vec(e[1]):
            raise Unsupported("the truth of an array")
        return e if _boolish(e[1]) else ("truth", "bool", e)

    def binop(self, op: str, a, b):
        ta, tb = a[1], b[1]
        r = _ask(_FUNCS[op], ta, tb)
        if op in COMPARISONS:
            for x, y in ((a, b), (b, a)):  # (a retyped name: compared as its Python number would be, _retype:
                if x[0] == "var" and x[2] in self.retyped:  # with one of its type, a constant exactly of it, or
                    t = self.retyped[x[2]][1]  # a Python number of that very type: a Python float, a float64)
                    if not (y[1] == t or y[0] == "const" and is_weak(y[1]) and _exactly(y[2], dtype_of(t)) is not None
                            or is_weak(y[1]) and y[1] != "bool" and dtype_of(y[1]) == dtype_of(t)):
                        raise Unsupported(f"{x[2]} compared with a {y[1]}")
            if is_weak(ta) and is_weak(tb):
                c = "float" if "float" in (ta, tb) else "int"
                return ("bin", r, op, self.cvt(a, c, "exact"), self.cvt(b, c, "exact"))
            # (a Python int outside the numpy int's range: the conversion aborts)
            c = _ask(_FUNCS["add"], ta, tb) if not (_boolish(ta) and _boolish(tb)) else "np.bool"
            kinds = {dtype_of(ta).kind, dtype_of(tb).kind}
            if kinds == {"i", "u"} and dtype_of(c).kind == "f" and not (is_weak(ta) or is_weak(tb)):
                # (a signed integer and a uint64: numpy compares them exactly, not as float64s)
                signed, first = (a, True) if dtype_of(ta).kind == "i" else (b, False)
                neg = ("bin", r, "lt", self.cvt(signed, "np.int64"), ("const", "np.int64", 0))
                below = _FUNCS[op](-1, 0) if first else _FUNCS[op](0, -1)  # (the signed one is below the other)
                return ("select", r, self.truth(neg), ("const", r, bool(below)),
                        ("bin", r, op, self.cvt(a, "np.uint64"), self.cvt(b, "np.uint64")))
            return ("bin", r, op, self.cvt(a, c), self.cvt(b, c))
        if _boolish(r) and op not in ("and", "or", "xor"):
            raise Unsupported(f"{op} of bools")
        if op == "truediv" and is_weak(ta) and is_weak(tb):
            return ("bin", r, op, self.cvt(a, r, "exact"), self.cvt(b, r, "exact"))
        return ("bin", r, op, self.cvt(a, r), self.cvt(b, r))

    def cvt(self, e, t: str, mode: str = "value"):
        if e[1] == t:
            return e
        if e[0] == "const" and mode in ("value", "store"):
            v = _convert_const(e[2], t)
            if v is not None:
                return ("const", t, v)
        return ("cvt", t, e, mode)


def _side(e: ast.Call) -> str:
    """The side= of a call (searchsorted's: a constant \"left\" or
    \"right\"); \"left\" where there is none."""
    side = "left"
    for k in e.keywords:
        if k.arg != "side" or not isinstance(k.value, ast.Constant) or k.value.value not in ("left", "right"):
            raise Unsupported("a call with keywords")
        side = k.value.value
    return side


def _number(e):
    """The int or float constant e is (`3`, `-1`, `0.5`), or None."""
    try:
        v = ast.literal_eval(e)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return v if type(v) in (int, float) else None


def _convert_const(v, t: str):
    """A constant converted at typing time when the conversion is exact."""
    try:
        with np.errstate(all="raise"), warnings.catch_warnings():
            warnings.simplefilter("error")
            w = {"int": int, "float": float, "bool": bool}[t](v) if is_weak(t) else dtype_of(t).type(v)
    except (OverflowError, ValueError, FloatingPointError, RuntimeWarning, TypeError, DeprecationWarning):
        return None
    if type(v) is float and _is_int(t) and w != v:
        return None  # (a float to an int truncates: the emitter does it with its checks)
    if t == "int" and not _INT64[0] <= w <= _INT64[1]:
        return None  # (a Python int past 64 bits: the emitter's conversion aborts)
    return w

"""Tracing: Tracer arrays that record numpy calls into a Graph.

Tracing is concrete: every Tracer also carries the real value computed by
the op's numpy reference on the first call's inputs.  That gives numpy's own
errors for bad input, the real output shapes of eager ops, and a check that
each symbolic shape rule agrees with numpy on the hints.
"""
from __future__ import annotations

import math
import operator
import os
import sys
import types
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from jit.errors import internal
from shapes.env import ShapeEnv
from shapes.ir import ArrayConst, Node, Value, make_attrs
from runtime.generate import OUTCOME
from runtime.runeagerly import NoIntOfFloat
from shapes.ops import ELEMENTWISE, OPS, VIEW


class _Protocol:
    """How traced values answer numpy's protocols (ufuncs, array functions,
    indexing, methods, in-place operators): jit/optable.py installs its
    handlers here when it is imported, so the op table imports the tracer
    and never the other way round."""
    ufunc = function = getitem = setitem = method = ufunc_into = array_of = None


PROTOCOL = _Protocol()



# Python scalars are weakly typed (NEP 50).  Tested with `type(x) in`, not
# isinstance: np.float64 and np.complex128 subclass float and complex but are
# strongly typed numpy scalars.
_PY_SCALARS = (bool, int, float, complex)


class Fallback(Exception):
    """The function cannot be traced into one graph: run it eagerly."""

    def __init__(self, reason: str, loc: str = ""):
        super().__init__(f"{reason} at {loc}" if loc else reason)
        self.reason, self.loc = reason, loc


class SelectAliasWritten(Fallback):
    """A write into a select that aliases an array one way (jit/lift.py):
    the call is traced again without selects (jit/miss.py)."""


class TooManyDecisions(Fallback):
    """Past MAX_BREAKS data-dependent decisions (TraceContext.count_decisions)."""


class ArrayOfTraced(Fallback):
    """numpy took a traced array as data (`np.arange(n)[mask]`: a numpy
    array indexed by a traced one): the call is traced again with the arrays
    the function makes of constants traced too (jit/miss.py), which such
    indexing then reaches as a traced array's."""


class TraceError(Exception):
    """An internal inconsistency found while tracing (never a wrong result)."""


def user_location() -> str:
    """file:line of the innermost frame outside shapejit and numpy."""
    f = sys._getframe(1)
    while f is not None:
        if not internal(f.f_code.co_filename):
            return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"
        f = f.f_back
    return "?"


def eval_attr(a, hint):
    """Replace sympy expressions inside an attr by their values."""
    if isinstance(a, sympy.Basic):
        return hint(a)
    if type(a) is tuple:
        return tuple(eval_attr(x, hint) for x in a)
    return a


MAX_BREAKS = 64
# the terms (sympy's nodes) a symbolic Python int may hold: `r = (r + n // r) // 2` on int(x[i]) doubles its
# expression every trip, and sympy's work on it with it (probe 21: a trace that never ended)
MAX_INT_NODES = 512


def _past(e, limit: int) -> bool:
    """Whether expression e has more than `limit` nodes (counted until then: under a microsecond for a dim's)."""
    stack, n = [e], 0
    while stack:
        n += 1
        if n > limit:
            return True
        stack.extend(stack.pop().args)
    return False


# a traced value's Python type, by name (a scan's free numbers, a print's arguments) -> its constructor
PYTHON_TYPES = {"bool": bool, "int": int, "float": float, "complex": complex}


@dataclass(frozen=True)
class Break:
    """A data-dependent Python decision: `kind`(value) was `outcome` at `loc`."""
    value_id: int
    kind: str
    outcome: object
    loc: str

    def describe(self) -> str:
        return f"{self.loc}: {self.kind}() of a traced value was {self.outcome!r}"


class TraceContext:
    def __init__(self, env: ShapeEnv):
        self.env = env
        self.nodes: list[Node] = []
        self.producers: dict[int, Node] = {}  # the node that made each value, by value id
        self._next = 0
        self._consts: dict[Any, Value] = {}
        self.mutated: dict[int, Storage] = {}  # storages written during the trace, by id
        self.before: dict[int, np.ndarray] = {}  # their contents before the first write, by the storage's id
        self.raised: str | None = None  # an error an op raised on this call's values (emit), where
        self.eager_views: dict = {}  # id of a storage an eager call's result views, or is viewed by -> the call
        # storages of selects that stand for an array one branch only named (jit/lift.py): numpy's
        # name would alias it, so a write into one is numpy's only in numpy (by id, each compared by
        # identity: a later array may take the id of one that died)
        self.aliasing_selects: dict[int, Storage] = {}
        self.breaks: list[Break] = []  # data-dependent Python decisions, in order
        self.mask_reads: dict[int, tuple] = {}  # x[m]'s value id -> (x, m) as Tracers when read
        self.scalars: dict[int, object] = {}  # 0-d values' concrete values, by value id
        self.index_dims: dict[int, "SymInt"] = {}  # traced integer scalars used as indices, by value id
        self._constant: dict[int, bool] = {}
        self.lift_refusals: list[str] = []  # loops jit/lift.py left to the trace, and why
        self.selects: list[str] = []  # ifs on traced values jit/lift.py made selects (no graph break)
        self.scans: list[str] = []  # loops jit/scan.py compiled once for every trip count
        self.printed: list[str] = []  # what the traced call printed (jit/trace.py _Print), shown with its result
        # (the jit's, jit/scan.py: what makes a scan's body a jit -- None: no scans -- and what it
        # knows of its loops' trip counts)
        self.scan_jit = None
        self.loops: dict = {}
        # arrays the function makes from constants (np.arange(5), np.mgrid) are traced constants,
        # not numpy arrays (jit/trace.py _NumpyProxy): after ArrayOfTraced
        self.trace_consts = False

    def writes(self) -> int:
        """Writes into traced arrays so far (each one moved a storage's version)."""
        return sum(s.version for s in self.mutated.values())

    def new_value(self, dtype, shape, weak=False) -> Value:
        v = Value(self._next, np.dtype(dtype), tuple(shape), weak)
        self._next += 1
        return v

    def hint(self, e):
        return self.env.hint(e)

    # ------------------------------------------------------------ operands
    def operand(self, x) -> "Tracer":
        if isinstance(x, Tracer):
            if x.ctx is not self:
                raise TraceError("a Tracer from another trace leaked into this one")
            return x
        if isinstance(x, SymInt):
            return self.emit("dim", [], {"expr": x.expr})
        if isinstance(x, SymFloat):
            return x.t
        if type(x) is int and not -2 ** 63 <= x < 2 ** 63:
            raise Fallback(f"the Python int {x} is beyond int64 (numpy decides what it becomes)", user_location())
        if type(x) in _PY_SCALARS:  # not np.float64, a float subclass but strongly typed
            # keyed by repr: 0.0 == -0.0 (and nan != nan), yet they are different constants
            key = (type(x), repr(x))
            if key not in self._consts:
                self._consts[key] = self.emit("const", [], {"value": x})
            return self._consts[key]
        if isinstance(x, np.generic):
            return self.emit("const", [], {"value": x})
        if isinstance(x, np.ndarray):
            if x.dtype.kind in "OSUV":
                raise Fallback(f"unsupported dtype {x.dtype} in a captured array", user_location())
            return self.emit("const", [], {"value": ArrayConst(x)})
        if isinstance(x, Stacked):  # (a list of a symbolic length: the array np.array makes of it)
            return x._array()
        if isinstance(x, (list, tuple)):
            if holds_traced(x):  # (`np.concatenate((starts, [b.size]))`: the array np.array makes of it)
                return PROTOCOL.array_of(self, x)
            try:
                arr = np.asarray(x)
            except Exception as e:  # noqa: BLE001 - numpy decides what is an array
                raise Fallback(f"operand {type(x).__name__} is not an array: {e}", user_location())
            if arr.dtype.kind in "OSUV":
                raise Fallback(f"operand of dtype {arr.dtype}", user_location())
            return self.emit("const", [], {"value": ArrayConst(arr)})
        raise Fallback(f"operand of type {type(x).__name__}", user_location())

    # ---------------------------------------------------------------- emit
    def emit(self, op: str, inputs: list, attrs: dict, *, n_out: int = 1, weak: bool = False,
             track: bool = True):
        """Record one node and compute its concrete value; returns Tracer(s)."""
        opdef = OPS[op]
        ins = [self.operand(x) for x in inputs]
        attrs_t = make_attrs(**attrs)
        concrete_attrs = {k: eval_attr(v, self.hint) for k, v in attrs.items()}
        try:
            if weak and op in _PYTHON_DIVISIONS and all(t.value.weak and t.dtype.kind in "biuf" for t in ins):
                _PYTHON_DIVISIONS[op](*[t.concrete for t in ins])  # (Python's ZeroDivisionError, as the user's code)
            with np.errstate(all="ignore"):
                result = opdef.ref(*[t.concrete for t in ins], **concrete_attrs)
                if opdef.category == ELEMENTWISE:
                    self._bound_python_ints(op, opdef, ins, concrete_attrs)
            if weak and op in _PYTHON_INT_OPS and all(t.value.weak and t.dtype.kind in "biu" for t in ins):
                # (Python ints' arithmetic, exact, as the compiled code's: runtime/generate.py _PY_OPERATORS;
                # numpy's int64 wrapped here, and the call that traced returned what no later call did)
                result = _PYTHON_INT_OPS[op](*[int(t.concrete) for t in ins])
                if not -2 ** 63 <= result < 2 ** 63:
                    raise Fallback(f"the Python int {result} is beyond int64 (numpy decides what it becomes)",
                                   user_location())
            if weak and op == "power" and all(t.value.weak and t.dtype.kind in "iuf" for t in ins) \
                    and any(t.dtype.kind == "f" for t in ins):
                result = operator.pow(*[t.concrete for t in ins])  # (Python's: ZeroDivisionError of 0.0 ** -1)
                if type(result) is complex:  # (a negative base to a fractional power: a complex of no float's
                    # rule; the compiled code's _pypow decides otherwise where it meets one, runtime/generate.py)
                    raise Fallback("a power of Python floats that is complex (a negative base, a fractional "
                                   "exponent)", user_location())
        except Exception as e:
            # (an error of this call's values: a trace that goes on caught it, jit/trace.py)
            self.raised = f"{type(e).__name__} at {user_location()}"
            raise
        values = [t.value for t in ins]
        shapes = opdef.shape_rule(self.env, values, attrs_t)
        dtypes = opdef.dtype_rule(values, attrs_t)
        results = result if n_out > 1 else (result,)
        if op == "const":
            weak = type(result) in _PY_SCALARS
        elif op == "dim":
            weak = True
        # (a scan's carried Python number stays one, or becomes numpy's, as the loop's trips made it:
        # ScanCall checks every call's trips make it the same)
        weaks = [type(r) in _PY_SCALARS for r in results] if op == "scan" else [weak] * len(results)
        outs = []
        for r, shape, dt, weak in zip(results, shapes, dtypes, weaks):
            if weak and (isinstance(r, np.generic) or type(r) is np.ndarray and not r.ndim):
                r = r.item()
            shape = self.env.simplify_shape(shape)
            got_shape, got_dtype = np.shape(r), np.asarray(r).dtype
            want_shape = tuple(self.hint(d) for d in shape)
            if got_shape != want_shape or (got_dtype != dt and not weak):
                raise TraceError(f"{op}: numpy gives {got_dtype}{list(got_shape)}, "
                                 f"the rules give {dt}{list(want_shape)}")
            v = self.new_value(got_dtype if weak else dt, shape, weak)
            outs.append(Tracer(self, v, r))
            if not shape:
                self.scalars[v.id] = r
        self._record(Node(op, tuple(values), attrs_t, tuple(t.value for t in outs), loc=user_location()))
        if track and opdef.category == VIEW and isinstance(result, np.ndarray) \
                and isinstance(ins[0].concrete, np.ndarray) and np.may_share_memory(result, ins[0].concrete):
            outs[0].view_of(ins[0], (op, attrs))  # numpy made a view: writes through it reach ins[0]
        return outs if n_out > 1 else outs[0]

    def _bound_python_ints(self, op, opdef, ins, attrs) -> None:
        """numpy raises OverflowError for a Python int beyond the dtype of
        the integer array it meets (NEP 50: int8 array + 300); a traced one
        (a dim, an int argument that changes) is guarded to the range where
        numpy's op does not raise, found by running the op on an int just
        past each end of the range, so a call beyond it traces again and
        raises numpy's error instead of wrapping."""
        ints = {t.value.dtype for t in ins if t.value.dtype.kind in "iu" and not t.value.weak}
        for k, t in enumerate(ins):
            p = self.producers.get(t.value.id)
            if p is None or p.op != "dim" or not ints:
                continue
            for dt in ints:
                info = np.iinfo(dt)
                for rel, end in ((">=", int(info.min)), ("<=", int(info.max))):
                    past = end - 1 if rel == ">=" else end + 1
                    if not -(1 << 63) <= past < (1 << 63):
                        continue
                    probe = [past if j == k else np.zeros(1, u.value.dtype) if not u.value.weak
                             else u.concrete for j, u in enumerate(ins)]
                    try:
                        opdef.ref(*probe, **attrs)
                    except OverflowError:
                        self.env.compare(rel, p.attr("expr"), end,
                                         f"{op}: a Python int within {dt} (numpy raises OverflowError beyond)")

    # ------------------------------------------------------------- writes
    def write(self, t: "Tracer", new: "Tracer") -> None:
        """Functionalize `t`'s contents becoming `new`'s: the storage t views
        gets a new value (the view's update carried back through each view op
        to the root), and every other view of it is rebuilt when next read."""
        s = t.storage()
        if not s.writeable:
            raise ValueError("assignment destination is read-only")
        if id(s) in self.eager_views:
            raise Fallback(f"a write into an array that {self.eager_views[id(s)]} viewed (or into its view), "
                           "which the trace would not carry to the other", user_location())
        if self.aliasing_selects.get(id(s)) is s:
            raise SelectAliasWritten("a write into a value an if on a traced value selected, which one branch "
                                     "named as an array it aliases", user_location())
        for op, attrs in t._chain:
            if op == "broadcast_to":
                raise ValueError("assignment destination is read-only")
        if id(s) not in self.mutated:  # (what the traced call's writes change is told from these: TraceResult;
            # the trace reads the storage from this copy on, so another thread's writes into the caller's array
            # meanwhile, into elements this call does not write, are no change of its -- apply_writes leaves them:
            # copied after the update was computed from the array, they were copied back over, lost)
            self.before[id(s)] = np.array(s.root.concrete, copy=True)
            s.root._concrete = self.before[id(s)]
        # the values along the chain, root first: parents[k] is what chain[k] was applied to
        parents = [s.root]
        for op, attrs in t._chain[:-1]:
            parents.append(self.emit(op, [parents[-1]], attrs, track=False))
        for (op, attrs), parent in zip(reversed(t._chain), reversed(parents)):
            if op == "getitem":
                new = self.emit("setitem", [parent, new], {"items": attrs["items"]})
            elif op == "transpose":
                inv = tuple(int(i) for i in np.argsort(attrs["perm"]))
                new = self.emit("transpose", [new], {"perm": inv}, track=False)
            elif op == "reshape":
                new = self.emit("reshape", [new], {"shape": parent.value.shape}, track=False)
            elif op in ("real", "imag"):  # (a complex array's part: the array of it and the other part)
                other = self.emit("imag" if op == "real" else "real", [parent], {}, track=False)
                new = self.emit("complex_of", [new, other] if op == "real" else [other, new], {})
            else:
                raise TraceError(f"a write through a {op} view")
        s.root._set(new)
        s.version += 1
        if t is not s.root:
            t._sync()
        self.mutated.setdefault(id(s), s)

    def decide_on(self, t: "Tracer", kind: str):
        """A graph break: Python needs a traced value (bool(), float(), int(),
        an index, .item()).  The trace continues with this call's outcome and
        records it; the executable computes the value where the trace needed
        it and checks the outcome, so a call that would decide otherwise is
        traced again, down its own path (runtime/generate.py)."""
        with np.errstate(all="ignore"):
            outcome = OUTCOME[kind](t.concrete)  # numpy's own errors (an ambiguous truth value)
        if self.constant(t.value):
            return outcome  # the same for every call: no break
        self.breaks.append(Break(t.value.id, kind, outcome, user_location()))
        self.count_decisions()
        return outcome

    def count_decisions(self) -> None:
        """Past MAX_BREAKS data-dependent decisions the function runs
        eagerly: graph breaks, and decisions on data-dependent sizes
        (`len(z[mask])` as a Python number, compared), checked where the size
        is made (a call that decides otherwise runs in numpy).  A loop that
        shrinks its arrays by a mask every trip, deciding on their lengths,
        ran at 0.6x numpy compiled (NPBench's mandelbrot2 M: its 716 masked
        reads numpy steps between kernels)."""
        if len(self.env.dd_guards) + len(self.breaks) > MAX_BREAKS:
            raise TooManyDecisions(f"more than {MAX_BREAKS} data-dependent Python decisions", user_location())

    def constant(self, v: Value) -> bool:
        """A value no input, held array, dim or eager op reaches: the same in
        every call this trace serves (np.zeros(3) filled with constants)."""
        if v.id in self._constant:
            return self._constant[v.id]
        stack, seen, ok = [v.id], set(), True
        while stack and ok:
            vid = stack.pop()
            if vid in seen:
                continue
            seen.add(vid)
            n = self.producers.get(vid)
            if (n is None or n.op in ("dim", "eager") or (n.op == "const" and isinstance(n.attr("value"), ArrayConst))
                    or any(_symbolic(a) for _, a in n.attrs)):  # (np.arange(T): its size is a dim)
                ok = False
            else:
                stack += [x.id for x in n.inputs]
        self._constant[v.id] = ok
        return ok

    def index_dim(self, t: "Tracer") -> "SymInt":
        """A traced integer scalar used as an index or a slice bound
        (`x[:, obs[t]]`, `x[np.argmax(v):]`) as a size: a data-dependent
        symbol the executable binds to its value when it is computed, not a
        graph break per value.  The decisions indexing takes on it (its sign,
        its bound) are checked right there; a call deciding otherwise is
        traced again (runtime/generate.py)."""
        p = self.producers.get(t.value.id)
        if p is not None and p.op == "dim":  # (a dim as a value: the dim itself)
            return SymInt.wrap(self, p.attr("expr"))
        s = self.index_dims.get(t.value.id)
        if s is None:
            u = self.env.new_symbol(int(t.concrete), f"the index at {user_location()}", lo=None,
                                    data_dependent=True)
            self.emit("index_dim", [t], {"symbol": u})
            s = self.index_dims[t.value.id] = SymInt.wrap(self, u)
        return s

    def emit_eager(self, call, inputs: list, concrete_outputs: list, what: str, views=()):
        """An opaque node: `call(xs)` returns the list of output arrays;
        `views`: (output k, input j) where numpy's call made a view."""
        ins = [self.operand(x) for x in inputs]
        outs = []
        for k, r in enumerate(concrete_outputs):
            shape = tuple(self.env.new_symbol(d, f"{what} output {k} dim {j}", lo=0, data_dependent=True)
                          for j, d in enumerate(np.shape(r)))
            v = self.new_value(np.asarray(r).dtype, shape)
            outs.append(Tracer(self, v, r))
        self._record(Node("eager", tuple(t.value for t in ins), make_attrs(call=call),
                          tuple(t.value for t in outs), loc=user_location()))
        # (a view numpy's call made of an operand -- np.rot90, np.hsplit, ravel(order="K"), x.view() -- is a
        # new value of the trace: a write into it, or into the operand, would not reach the other)
        for k, j in views:
            self.eager_views.update({id(outs[k].storage()): what, id(ins[j].storage()): what})
        return outs

    def int_of(self, t: "Tracer", dtype: np.dtype) -> "Tracer":
        """A traced float or Python int scalar converted to the integer type
        `dtype` as Python's int() and numpy's range do: truncated toward
        zero, an effect checking every call's value converts (IntOfFloat: one
        that does not -- a NaN, an infinity, past the type -- runs that call
        in numpy, which raises or gives Python's int)."""
        check = IntOfFloat(dtype.str)
        check([t.concrete], tracing=True)
        self.emit_effect(check, [t])
        return self.emit("astype", [t], {"dtype": dtype, "checked": True})

    def emit_effect(self, call, inputs: list) -> None:
        """A side effect every call makes: `call(xs)` of the inputs' values
        at run time (print), kept however nothing reads it."""
        ins = [self.operand(x) for x in inputs]
        token = self.new_value(np.dtype(np.bool_), ())  # (an output nothing reads: every pass knows one)
        self._record(Node("effect", tuple(t.value for t in ins), make_attrs(call=call), (token,),
                          loc=user_location()))

    def warn_every_call(self, message: str) -> None:
        """numpy's RuntimeWarning `message`, which the shapes this trace
        serves decide (`Mean of empty slice`): numpy gave it while tracing,
        and an effect gives it at every later call."""
        self.emit_effect(WarnCall(message), [])

    def _record(self, n: Node) -> None:
        self.nodes.append(n)
        for o in n.outputs:
            self.producers[o.id] = n


@dataclass(frozen=True)
class WarnCall:
    """An effect node's call: numpy's RuntimeWarning `message` (TraceContext.warn_every_call)."""
    message: str

    def __call__(self, xs):
        warnings.warn(self.message, RuntimeWarning, stacklevel=2)
        return [np.True_]  # (the effect node's token)

    def __repr__(self) -> str:
        return f"warn({self.message!r})"


@dataclass(frozen=True)
class IntOfFloat:
    """An effect node's call: `np.int64(f)` of a Python float of the trace
    (a weak float64), or `np.int8(n)` of a Python int of the trace, converts
    as numpy does, through Python's int(): an OverflowError past the type, a
    ValueError or OverflowError for a NaN or an infinity (the cast of the
    graph gives INT_MIN, or wraps); raised, the call runs in numpy, which
    raises it."""
    dtype: str

    def __call__(self, xs, tracing: bool = False):
        """Checks xs[0] (a Python float's, or a Python int's, value); raises
        Python's or numpy's error while tracing (`tracing`), and NoIntOfFloat
        at run time: numpy runs that call, and raises it."""
        try:
            np.dtype(self.dtype).type(int(xs[0]))  # (int()'s error of a NaN or an infinity, numpy's past the type)
        except (ValueError, OverflowError) as e:
            if tracing:
                raise
            raise NoIntOfFloat(str(e)) from None
        return [np.True_]

    def __repr__(self) -> str:
        return f"int_of_float({self.dtype})"


def _symbolic(a) -> bool:
    if isinstance(a, sympy.Basic):
        return bool(a.free_symbols)
    return type(a) is tuple and any(_symbolic(x) for x in a)


def _divmod(a, b):  # (Python's and numpy's alike: the floor quotient and the remainder)
    return a // b, a % b


def _rdivmod(a, b):
    return b // a, b % a


class SymInt:
    """A symbolic dim as seen by user code: arithmetic stays symbolic,
    comparisons are decided on the hint and guarded."""

    __slots__ = ("ctx", "expr")

    def __init__(self, ctx: TraceContext, expr):
        self.ctx, self.expr = ctx, expr

    # isinstance() sees what numpy gives: a dim is an int (`isinstance(n, int)` takes numpy's
    # branch); type() still says SymInt, and shapejit's own checks exclude it where they must
    __class__ = property(lambda self: int)

    @staticmethod
    def wrap(ctx, e):
        if isinstance(e, sympy.Basic) and _past(e, MAX_INT_NODES):  # (before sympy's own work on it)
            raise TooManyDecisions(f"a Python int of sizes or data grew past {MAX_INT_NODES} terms (an "
                                   "iteration on it, Newton's: each trip doubles it)", user_location())
        e = ctx.env.simplify(e)
        return e if isinstance(e, int) else SymInt(ctx, e)

    def _e(self, o):
        if isinstance(o, SymInt):
            return o.expr
        if isinstance(o, (int, np.integer)) and not isinstance(o, bool) and type(o) is not Tracer:
            return sympy.Integer(int(o))  # (a traced integer passes isinstance as numpy's scalar: an array op)
        return None

    def _of_numpy_int(self, ufunc, o, reflected=False):
        """ufunc of the size and a numpy integer: numpy's scalar type and
        wraparound (`N + np.int8(1)` is np.int8(6)), a traced scalar."""
        t = self.ctx.operand(self)
        return ufunc(o, t) if reflected else ufunc(t, o)

    def _arith(self, o, f, ufunc=None, reflected=False):
        if ufunc is not None and isinstance(o, np.integer):
            return self._of_numpy_int(ufunc, o, reflected)
        if ufunc is not None and type(o) is np.ndarray:  # (`pos + np.arange(3)`: numpy's op of the size, traced;
            return ufunc(o, self) if reflected else ufunc(self, o)  # it took the size as a Python number)
        e = self._e(o)
        if e is None:
            if isinstance(o, (Tracer, SymFloat)):
                return NotImplemented
            if ufunc is not None and type(o) in (float, complex):  # n * 0.5: a float of the dim (SymFloat)
                return SymFloat.of(self.ctx, ufunc, (o, self) if reflected else (self, o))
            return f(self._specialize(), o)
        return SymInt.wrap(self.ctx, f(self.expr, e))

    def __add__(self, o): return self._arith(o, lambda a, b: a + b, np.add)
    def __radd__(self, o): return self._arith(o, lambda a, b: b + a, np.add, True)
    def __sub__(self, o): return self._arith(o, lambda a, b: a - b, np.subtract)
    def __rsub__(self, o): return self._arith(o, lambda a, b: b - a, np.subtract, True)
    def __mul__(self, o): return self._arith(o, lambda a, b: a * b, np.multiply)
    def __rmul__(self, o): return self._arith(o, lambda a, b: b * a, np.multiply, True)
    def __neg__(self): return SymInt.wrap(self.ctx, -self.expr)
    def __pos__(self): return self

    def __abs__(self):  # (a sign the env knows, or decides with a guard: an int argument's)
        if self.ctx.env.compare(">=", self.expr, 0, f"{user_location()}: abs({self.expr})"):
            return self
        return -self

    def _bitwise(name):
        def f(self, o):  # (no symbolic form: the dim as a Python number, guarded; a traced array's own op)
            if isinstance(o, (Tracer, SymFloat)):
                return NotImplemented
            return getattr(self._specialize(), name)(o._specialize() if isinstance(o, SymInt) else o)
        return f

    __and__, __or__, __xor__ = _bitwise("__and__"), _bitwise("__or__"), _bitwise("__xor__")
    __rand__, __ror__, __rxor__ = _bitwise("__rand__"), _bitwise("__ror__"), _bitwise("__rxor__")
    __lshift__, __rshift__ = _bitwise("__lshift__"), _bitwise("__rshift__")
    __rlshift__, __rrshift__ = _bitwise("__rlshift__"), _bitwise("__rrshift__")
    del _bitwise

    def __invert__(self):
        return SymInt.wrap(self.ctx, -self.expr - 1)

    def _divisor(self, d) -> None:
        """Python's ZeroDivisionError for a divisor of 0, else a guard that
        it is not (`x // x` of a carried int: floor(x/x) is 1 to sympy)."""
        e = self._e(d)
        if e is not None and not self.ctx.env.compare("!=", e, 0, f"{user_location()}: a divisor {e} != 0"):
            raise ZeroDivisionError("integer division or modulo by zero")

    def __floordiv__(self, o):
        if isinstance(o, np.integer):
            return self._of_numpy_int(np.floor_divide, o)
        self._divisor(o)
        return self._arith(o, lambda a, b: sympy.floor(a / b) if isinstance(a, sympy.Basic) else a // b)

    def __rfloordiv__(self, o):
        if isinstance(o, np.integer):
            return self._of_numpy_int(np.floor_divide, o, True)
        self._divisor(self)
        return self._arith(o, lambda a, b: sympy.floor(b / a) if isinstance(a, sympy.Basic) else b // a)

    def __mod__(self, o):
        if isinstance(o, np.integer):
            return self._of_numpy_int(np.remainder, o)
        self._divisor(o)
        return self._arith(o, lambda a, b: sympy.Mod(a, b) if isinstance(a, sympy.Basic) else a % b)

    def __rmod__(self, o):
        if isinstance(o, np.integer):
            return self._of_numpy_int(np.remainder, o, True)
        self._divisor(self)
        return self._arith(o, lambda a, b: sympy.Mod(b, a) if isinstance(a, sympy.Basic) else b % a)

    def __truediv__(self, o):
        if isinstance(o, (Tracer, SymFloat)):
            return NotImplemented
        if isinstance(o, SymInt) or type(o) in (int, float, complex):  # (a Python float, traced: no guard)
            return SymFloat.of(self.ctx, np.true_divide, (self, o))
        return self._specialize() / o

    def __rtruediv__(self, o):
        if isinstance(o, (Tracer, SymFloat)):
            return NotImplemented
        if type(o) in (int, float, complex):
            return SymFloat.of(self.ctx, np.true_divide, (o, self))
        return o / self._specialize()

    def __pow__(self, o):
        if type(o) is int and o >= 0:
            return SymInt.wrap(self.ctx, self.expr ** o)
        if type(o) in (int, float):  # d ** -0.5, n ** -1: Python floats
            return SymFloat.of(self.ctx, np.power, (self, float(o)))
        return self._specialize() ** o

    __divmod__, __rdivmod__ = _divmod, _rdivmod

    def __rpow__(self, o):
        if type(o) is float:  # (2.0 ** n: a Python float of the dim)
            return SymFloat.of(self.ctx, np.power, (o, self))
        if isinstance(o, (Tracer, SymFloat)):
            return NotImplemented
        return o ** self._specialize()  # (2 ** n: an int, or a float for a negative n, as Python's)

    def _cmp(self, o, rel, name):
        e = self._e(o)
        if e is None and type(o) is float:  # (a size and a Python float: `max(-2.0, i)`, `n > 2.5`)
            if not math.isfinite(o):  # (no size is NaN or infinite: decided by the float alone)
                return _COMPARE[name](0, o)
            if o != math.floor(o):  # (against a fraction: as against the int below it, `n > 2.5` is `n > 2`)
                if name in ("__eq__", "__ne__"):
                    return name == "__ne__"
                rel, name = (sympy.Le, "__le__") if name in ("__lt__", "__le__") else (sympy.Gt, "__gt__")
            e = sympy.Integer(math.floor(o))  # (decided with a guard, as against an int)
        if e is None:
            if isinstance(o, Tracer):
                return NotImplemented
            return _COMPARE[name](self._specialize(), o)
        sym = {"__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">=", "__eq__": "==", "__ne__": "!="}
        out = self.ctx.env.decide(rel(self.expr, e), f"{user_location()}: {self.expr} {sym[name]} {o}")
        self.ctx.count_decisions()
        return out

    def __lt__(self, o): return self._cmp(o, sympy.Lt, "__lt__")
    def __le__(self, o): return self._cmp(o, sympy.Le, "__le__")
    def __gt__(self, o): return self._cmp(o, sympy.Gt, "__gt__")
    def __ge__(self, o): return self._cmp(o, sympy.Ge, "__ge__")
    def __eq__(self, o): return self._cmp(o, sympy.Eq, "__eq__")
    def __ne__(self, o): return self._cmp(o, sympy.Ne, "__ne__")

    def _specialize(self) -> int:
        h = self.ctx.hint(self.expr)
        self.ctx.env.specialize(self.expr, h, f"{user_location()}: {self.expr} used as a Python number")
        self.ctx.count_decisions()
        return h

    # numpy code that shapejit does not intercept (a helper module's own `np`)
    # sees a dim as a 0-d int64 array: specialized, with a guard
    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._specialize(), dtype=dtype)

    def __index__(self): return self._specialize()
    def __int__(self): return self._specialize()
    def __float__(self): return float(self._specialize())
    def __hash__(self): return hash(self._specialize())
    def __bool__(self):
        out = self.ctx.env.compare("!=", self.expr, 0, f"{user_location()}: bool({self.expr})")
        self.ctx.count_decisions()  # (`if not len(z[mask]): break` each trip: as a comparison counts)
        return out

    def __repr__(self):
        if _from_user():  # (repr(n), str(n), an f-string of n in the user's code: the int, specialized)
            return repr(self._specialize())
        return f"SymInt({self.expr}, hint={self.ctx.hint(self.expr)})"

    __str__ = __repr__

    def __format__(self, spec):
        return format(self._specialize(), spec) if _from_user() else repr(self)

    # np.sqrt(x.shape[-1]) is traced as a 0-d computation on the dim (no guard)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(isinstance(x, Tracer) for x in inputs):
            return NotImplemented  # the Tracer's own __array_ufunc__ takes it
        return PROTOCOL.ufunc(self.ctx, ufunc, method, inputs, kwargs)


_COMPARE = {"__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt, "__ge__": operator.ge,
            "__eq__": operator.eq, "__ne__": operator.ne}
_PYTHON_OP = {np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
              np.true_divide: operator.truediv, np.power: operator.pow, np.negative: operator.neg,
              np.absolute: abs}


class SymFloat:
    """A Python float computed from dims (1.0 / x.shape[0], d ** -0.5, n *
    0.5): traced as a 0-d weak float64 `t` (numpy's float64 arithmetic on
    Python scalars is Python's), so an array op with it serves every shape;
    used as a Python number (float(), a comparison, math.sqrt, a format) it
    is decided on its hint with the dims it came from specialized (guards),
    as a dim used as a Python number is."""

    __slots__ = ("t", "dims", "hint")
    __class__ = property(lambda self: float)  # (what isinstance() sees: numpy's value is a float)

    def __init__(self, t: "Tracer", dims: tuple, hint: float):
        self.t, self.dims, self.hint = t, dims, hint

    @staticmethod
    def of(ctx: "TraceContext", ufunc, operands):
        """ufunc of Python scalars, SymInts and SymFloats, as a SymFloat."""
        dims, hints = [], []
        for x in operands:
            if isinstance(x, SymInt):
                dims.append(x)
                hints.append(ctx.hint(x.expr))
            elif isinstance(x, SymFloat):
                dims += x.dims
                hints.append(x.hint)
            else:
                hints.append(x)
        hint = _PYTHON_OP[ufunc](*hints)  # (Python's arithmetic: its errors, as the function's own code)
        if type(hint) is complex and any(type(x) is complex for x in operands):
            # (-2j * np.pi / N: a weak complex scalar of the trace; used as a Python number, a decision)
            return ctx.emit(ufunc.__name__, list(operands), {}, weak=True)
        if type(hint) is not float:  # ((-8) ** 0.5 is complex in Python)
            for d in dims:
                d._specialize()
            return hint
        t = ctx.emit(ufunc.__name__, list(operands), {}, weak=True)  # (the runtime takes Python's operators too)
        return SymFloat(t, tuple(dims), hint)

    def _python(self) -> float:
        """The value as a Python float: the dims it came from specialized."""
        for d in self.dims:
            d._specialize()
        return self.hint

    def _op(self, ufunc, o, reflected=False):
        if isinstance(o, Tracer) or not (isinstance(o, (SymInt, SymFloat)) or type(o) in (int, float, complex)):
            return NotImplemented
        return SymFloat.of(self.t.ctx, ufunc, (o, self) if reflected else (self, o))

    def __add__(self, o): return self._op(np.add, o)
    def __radd__(self, o): return self._op(np.add, o, True)
    def __sub__(self, o): return self._op(np.subtract, o)
    def __rsub__(self, o): return self._op(np.subtract, o, True)
    def __mul__(self, o): return self._op(np.multiply, o)
    def __rmul__(self, o): return self._op(np.multiply, o, True)
    def __truediv__(self, o): return self._op(np.true_divide, o)
    def __rtruediv__(self, o): return self._op(np.true_divide, o, True)
    def __pow__(self, o): return self._op(np.power, o)
    def __rpow__(self, o): return self._op(np.power, o, True)
    def __neg__(self): return SymFloat.of(self.t.ctx, np.negative, (self,))
    def __pos__(self): return self
    def __abs__(self): return SymFloat.of(self.t.ctx, np.absolute, (self,))

    def __float__(self): return self._python()
    def __int__(self): return int(self._python())
    def __bool__(self): return bool(self._python())
    def __hash__(self): return hash(self._python())
    def __round__(self, n=None): return traced_int(np.rint(self.t)) if n is None else round(self._python(), n)
    def __trunc__(self): return int(self._python())
    def __floor__(self): return float(self._python()).__floor__()
    def __ceil__(self): return float(self._python()).__ceil__()
    def __format__(self, spec): return format(self._python(), spec) if _from_user() else repr(self)
    def __lt__(self, o): return self._python() < o
    def __le__(self, o): return self._python() <= o
    def __gt__(self, o): return self._python() > o
    def __ge__(self, o): return self._python() >= o
    def __eq__(self, o): return self._python() == o
    def __ne__(self, o): return self._python() != o

    def __repr__(self):
        if _from_user():  # (the float, its dims specialized)
            return repr(self._python())
        return f"SymFloat({self.hint!r}, of {[d.expr for d in self.dims]})"

    __str__ = __repr__

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._python(), dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(isinstance(x, Tracer) for x in inputs):
            return NotImplemented  # the Tracer's own __array_ufunc__ takes it
        return PROTOCOL.ufunc(self.t.ctx, ufunc, method, inputs, kwargs)


def _writeable(a: np.ndarray) -> bool:
    """a.flags.writeable, without numpy's FutureWarning for an output of
    np.broadcast_arrays (asking is warned of; only its read-only buffer
    interface says it is not writeable without a warning)."""
    if not a.__array_interface__["data"][1]:
        return True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return a.flags.writeable


class Storage:
    """The memory a traced array and its views share.  `root` holds the
    current value; `version` counts writes, so a view built before a write
    knows to rebuild itself from the root when it is next read."""

    __slots__ = ("root", "version", "writeable", "origin", "first")

    def __init__(self, root: "Tracer", writeable: bool):
        self.root, self.version, self.writeable = root, 0, writeable
        self.origin = root._value  # the value the storage held when tracing began
        self.first = root._concrete  # (its array then: the caller's, laid out as the caller's is)


class Tracer:
    """A traced array.  Behaves like an ndarray for the supported numpy API;
    what it does not support becomes an eager node or an eager fallback.
    Views (basic slices, reshapes, transposes numpy makes without a copy)
    share a Storage with their base, so writes are seen as numpy's are."""

    __slots__ = ("ctx", "_value", "_concrete", "_storage", "_chain", "_seen")
    __array_priority__ = 1000

    def __init__(self, ctx: TraceContext, value: Value, concrete):
        self.ctx, self._value, self._concrete = ctx, value, concrete
        self._storage, self._chain, self._seen = None, (), 0

    # --------------------------------------------------- storage and views
    @property
    def value(self) -> Value:
        if self._chain and self._seen != self._storage.version:
            self._sync()
        return self._value

    @property
    def concrete(self):
        if self._chain and self._seen != self._storage.version:
            self._sync()
        return self._concrete

    def storage(self) -> Storage:
        if self._storage is None:
            c = self._concrete
            self._storage = Storage(self, not isinstance(c, np.ndarray) or _writeable(c))
        return self._storage

    def in_order(self, order) -> bool:
        """Whether numpy's array is laid out in `order` ("C", "F"; any other
        order: any layout): an array written into keeps the caller's layout,
        where the trace's new value of it is a fresh array."""
        s = self._storage
        laid = s.first if s is not None and not self._chain and isinstance(s.first, np.ndarray) else self._concrete
        return order not in ("C", "F") or not isinstance(laid, np.ndarray) or (
            laid.flags.c_contiguous if order == "C" else laid.flags.f_contiguous)

    def view_of(self, base: "Tracer", step: tuple) -> None:
        self._storage = base.storage()
        self._chain = base._chain + (step,)
        self._seen = self._storage.version

    def _set(self, new: "Tracer") -> None:
        self._value, self._concrete = new._value, new._concrete

    def _sync(self) -> None:
        """Rebuild this view from its storage's current root value."""
        s = self._storage
        cur = s.root
        for op, attrs in self._chain:
            cur = self.ctx.emit(op, [cur], attrs, track=False)
        self._set(cur)
        self._seen = s.version

    # ------------------------------------------------------------ metadata
    @property
    def shape(self) -> tuple:
        return tuple(SymInt.wrap(self.ctx, d) for d in self.value.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def ndim(self) -> int:
        return self.value.ndim

    @property
    def size(self):
        n = sympy.Integer(1)
        for d in self.value.shape:
            n *= d
        return SymInt.wrap(self.ctx, n)

    @property
    def itemsize(self) -> int:
        return self.value.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize

    def __len__(self) -> int:
        if not self.value.shape:
            raise TypeError("len() of unsized object")
        d = self.shape[0]
        return d if type(d) is int else d._specialize()

    def __repr__(self):
        return self._text(repr) if _from_user() else f"Tracer({self.value.type_str()})"

    def __str__(self):
        return self._text(str) if _from_user() else f"Tracer({self.value.type_str()})"

    def __format__(self, spec):
        return self._text(lambda x: format(x, spec)) if _from_user() else f"Tracer({self.value.type_str()})"

    def _text(self, how) -> str:
        """The text of a scalar's value, as numpy's scalar or the Python
        number gives it: a graph break on the value (a call with another
        value is traced again); of an array, the call runs in numpy."""
        if self.ndim:
            self._data_dependent("the text of an array (str(), repr(), an f-string)")
        v = self.ctx.decide_on(self, "item")
        return how(v if self.value.weak else self.dtype.type(v))

    @property
    def __class__(self):
        """What isinstance() sees: the type numpy's value has (an ndarray, a
        numpy scalar such as np.float64 -- a float --, or a Python number),
        so `isinstance(x, np.ndarray)` or `isinstance(x.sum(), float)` takes
        numpy's branch.  That type follows from the signature (dtypes, the
        ops that made the value), never from the data: no guard.  type()
        still says Tracer."""
        c = self._concrete
        return type(c) if isinstance(c, np.generic) or type(c) in _PY_SCALARS else np.ndarray

    # ------------------------------------------------- data-dependent exits
    def _data_dependent(self, what: str):
        raise Fallback(f"data-dependent Python control flow: {what} of a traced array", user_location())

    # A Python decision on a traced value: the trace takes this call's outcome,
    # and the executable checks it at run time (TraceContext.decide_on).
    def __bool__(self): return self.ctx.decide_on(self, "bool")
    def __float__(self): return self.ctx.decide_on(self, "float")

    def __round__(self, ndigits=None):
        if self.ndim or isinstance(self.concrete, np.ndarray):  # (a 0-d array's too)
            raise TypeError("type numpy.ndarray doesn't define __round__ method")
        if self.dtype.kind in "bc" and not (self.value.weak and self.dtype.kind == "b"):  # (numpy's bool and
            # complex scalars, and a Python complex, have no __round__; a Python bool is an int)
            name = "complex" if self.value.weak else f"numpy.{np.dtype(self.dtype).type.__name__}"
            raise TypeError(f"type {name} doesn't define __round__ method")
        if ndigits is None:  # (an int: Python's round half to even, a size bound at run time as int()'s)
            return traced_int(np.rint(self))
        if self.value.weak:  # (a Python float: Python's correctly rounded decimal, not numpy's scaling)
            return round(float(self), ndigits)
        return np.round(self, ndigits)
    def __int__(self): return self.ctx.decide_on(self, "int")
    def __index__(self): return self.ctx.decide_on(self, "index")
    def __complex__(self): self._data_dependent("complex()")
    def __iter__(self):
        # rows, as numpy iterates: the length is specialized (a guard)
        return (self[i] for i in range(len(self)))
    def item(self, *a):
        if a:
            self._data_dependent(".item(index)")
        if self.ndim == 0 and self.dtype.kind in "iu" and self.dtype != np.uint64 and not self.ctx.constant(self.value):
            return self.ctx.index_dim(self)  # (a Python int of the value: a size bound at run time, as int())
        if self.ndim == 0 and self.dtype.kind == "f":  # (a Python float: weak, as traced_float's)
            return self.as_python("f")
        return self.ctx.decide_on(self, "item")

    def as_python(self, kind: str) -> "Tracer":
        """A 0-d value as the Python number of `kind` ("b", "i", "f" or "c"):
        the weak scalar of the trace that number is."""
        if self.value.weak and self.dtype.kind == kind:
            return self
        dtype = np.dtype({"b": np.bool_, "i": np.int64, "f": np.float64, "c": np.complex128}[kind])
        return self.ctx.emit("astype", [self], {"dtype": dtype}, weak=True)
    def tolist(self):
        if self.ctx.constant(self.value):
            return self.concrete.tolist()
        self._data_dependent(".tolist()")

    def __array__(self, dtype=None, copy=None):
        if self.ctx.constant(self.value):  # numpy code outside the trace may take a constant
            return np.asarray(self.concrete, dtype=dtype)
        raise ArrayOfTraced("data-dependent Python control flow: conversion to a numpy array of a traced array",
                            user_location())

    def __hash__(self):
        if self.value.weak and not self.ndim:  # (a Python number of the trace as a dict key: its value's hash,
            return hash(self.ctx.decide_on(self, "item"))  # a graph break on the value)
        return object.__hash__(self)

    # ---------------------------------------------------- numpy protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return PROTOCOL.ufunc(self.ctx, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return PROTOCOL.function(self.ctx, func, args, kwargs)

    def __getitem__(self, index):
        return PROTOCOL.getitem(self.ctx, self, index)

    def __setitem__(self, index, value):
        PROTOCOL.setitem(self.ctx, self, index, value)

    def __getattr__(self, name):
        return PROTOCOL.method(self, name)

    # z.real and z.imag: views of z (jit/optable.py), and `z.imag = x` writes through them as numpy's does
    def _part(name):
        def get(self):
            return PROTOCOL.method(self, name)

        def put(self, value):
            if name == "imag" and self.dtype.kind != "c":
                raise TypeError("array does not have imaginary part to set")
            get(self)[...] = value
        return property(get, put)

    real, imag = _part("real"), _part("imag")
    del _part

    # ------------------------------------------------------------ operators
    def _bin(name, reflected=False):
        def f(self, other):
            if not isinstance(other, (Tracer, SymInt, SymFloat, int, float, bool, complex, np.ndarray,
                                      np.generic, list, tuple)):
                return NotImplemented
            if _pythons(other, self) if reflected else _pythons(self, other):
                args = [other, self] if reflected else [self, other]
                if name in _ARITHMETIC:  # (a Python bool in arithmetic is its int: True + True is 2)
                    args = [a.as_python("i") if type(a) is Tracer and a.dtype.kind == "b" else
                            int(a) if type(a) is bool else a for a in args]
                return self.ctx.emit(name, args, {}, weak=True)
            ufunc = getattr(np, name)
            return ufunc(other, self) if reflected else ufunc(self, other)
        return f

    __add__, __radd__ = _bin("add"), _bin("add", True)
    __sub__, __rsub__ = _bin("subtract"), _bin("subtract", True)
    __mul__, __rmul__ = _bin("multiply"), _bin("multiply", True)
    __truediv__, __rtruediv__ = _bin("divide"), _bin("divide", True)
    __floordiv__, __rfloordiv__ = _bin("floor_divide"), _bin("floor_divide", True)
    __mod__, __rmod__ = _bin("remainder"), _bin("remainder", True)
    __rpow__ = _bin("power", True)
    _pow = _bin("power")

    def __pow__(self, other):
        # ndarray.__pow__'s own steps for a Python number (numpy's fast_scalar_power): `x ** 2` is np.square
        # (an integer array's by an int 2 only: int ** 2.0 is a float64 power), and an inexact array's `** 0.5`
        # np.sqrt and `** -1` np.reciprocal (sqrt(-0.0) is -0.0, and sqrt of a float16 or a complex with an
        # infinite part is not power's); numpy's scalar's take none (np.True_ ** 2 is an int64)
        if type(other) in (int, float) and not self.value.weak and isinstance(self.concrete, np.ndarray):
            inexact = self.dtype.kind in "fc"
            if other == 2 and (inexact or type(other) is int):
                return np.square(self)
            if inexact and other == 0.5:
                return np.sqrt(self)
            if inexact and type(other) is int and other == -1:
                return np.reciprocal(self)
        if type(other) is Tracer and other.value.weak and other.dtype.kind == "f" and not other.ndim and (
                self.dtype == np.float16 or self.dtype.kind == "c") and not self.value.weak \
                and isinstance(self.concrete, np.ndarray):
            # (a Python float of the call that changed, a runtime scalar: `** 0.5` is np.sqrt where its value is
            # 0.5, and a float16's or a complex's sqrt is not power's, sqrt(-inf) nan, sqrt(-0.0) -0.0; the way
            # not taken reads ones, so it warns of nothing numpy's would not)
            half = other == 0.5
            return np.where(half, np.sqrt(np.where(half, self, 1)), np.where(half, 1, self)._pow(other))
        if type(other) is SymInt and self.dtype == np.bool_ and not self.value.weak \
                and isinstance(self.concrete, np.ndarray) and self.ctx.env.compare(
                    "==", other.expr, 2, f"{user_location()}: a bool array's power (** 2 is np.square's int8)"):
            return np.square(self)  # (an int of the call that changed, 2 at this call: numpy's dtype is of its value)
        return self._pow(other)

    __matmul__, __rmatmul__ = _bin("matmul"), _bin("matmul", True)
    __and__, __rand__ = _bin("bitwise_and"), _bin("bitwise_and", True)
    __or__, __ror__ = _bin("bitwise_or"), _bin("bitwise_or", True)
    __xor__, __rxor__ = _bin("bitwise_xor"), _bin("bitwise_xor", True)
    __lshift__, __rlshift__ = _bin("left_shift"), _bin("left_shift", True)
    __rshift__, __rrshift__ = _bin("right_shift"), _bin("right_shift", True)
    __lt__, __le__ = _bin("less"), _bin("less_equal")
    __gt__, __ge__ = _bin("greater"), _bin("greater_equal")
    __eq__, __ne__ = _bin("equal"), _bin("not_equal")
    del _bin

    def _unary(name):
        def f(self):
            if self.value.weak:  # (a Python bool's -, + and abs() are its int's: -True is -1)
                x = self.as_python("i") if self.dtype.kind == "b" else self
                return self.ctx.emit(name, [x], {}, weak=True)
            return getattr(np, name)(self)
        return f

    __neg__, __pos__, __abs__ = _unary("negative"), _unary("positive"), _unary("absolute")
    del _unary

    __divmod__, __rdivmod__ = _divmod, _rdivmod

    def __invert__(self):
        if self.value.weak and self.dtype.kind in "ib":  # (~ of a Python int stays a Python int; of a bool, its
            return self.ctx.emit("invert", [self.as_python("i")], {}, weak=True)  # int's: ~True is -2)
        return np.invert(self)

    def _inplace(name):
        def f(self, other):
            if not isinstance(self._concrete, np.ndarray):
                # a Python or numpy scalar is immutable: `s += 1` rebinds s, as in numpy
                return getattr(self, f"__{name}__")(other)
            return PROTOCOL.ufunc_into(self.ctx, getattr(np, _INPLACE_UFUNC[name]), (self, other), self)
        return f

    __iadd__, __isub__, __imul__ = _inplace("add"), _inplace("sub"), _inplace("mul")
    __itruediv__, __ifloordiv__, __imod__ = _inplace("truediv"), _inplace("floordiv"), _inplace("mod")
    __ipow__, __imatmul__ = _inplace("pow"), _inplace("matmul")
    __iand__, __ior__, __ixor__ = _inplace("and"), _inplace("or"), _inplace("xor")
    __ilshift__, __irshift__ = _inplace("lshift"), _inplace("rshift")
    del _inplace


_INPLACE_UFUNC = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
                  "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "matmul": "matmul",
                  "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift",
                  "rshift": "right_shift"}


def _is_weak(x) -> bool:
    if isinstance(x, Tracer):
        return x.value.weak
    return isinstance(x, (SymInt, SymFloat)) or type(x) in _PY_SCALARS


_OPAQUE = (str, bytes, int, float, complex, bool, type(None), np.ndarray, np.generic, type, types.ModuleType,
           types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def holds_traced(v, depth: int = 3) -> bool:
    """Whether v is, or holds a few levels down, a value of a trace (a
    Tracer, a dim, a Python float of dims): in the items of a list, tuple,
    set or dict, or the attributes of an object of the user's."""
    if isinstance(v, (Tracer, SymInt, SymFloat, Stacked)):
        return True
    if not depth or isinstance(v, _OPAQUE):
        return False
    items = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple, set, frozenset)) else \
        (v.start, v.stop, v.step) if isinstance(v, slice) else getattr(v, "__dict__", {}).values()
    return any(holds_traced(x, depth - 1) for x in items)


_ARITHMETIC = frozenset({"add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power"})


# Python's divisions of Python numbers (weak operands), whose divisor of 0 raises ZeroDivisionError
# where numpy's gives inf or nan (runtime/generate.py computes them with Python's operators too)
_PYTHON_DIVISIONS = {"divide": operator.truediv, "floor_divide": operator.floordiv, "remainder": operator.mod}
_PYTHON_INT_OPS = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
                   "floor_divide": operator.floordiv, "remainder": operator.mod, "bitwise_and": operator.and_,
                   "bitwise_or": operator.or_, "bitwise_xor": operator.xor, "left_shift": operator.lshift,
                   "right_shift": operator.rshift, "invert": operator.invert, "negative": operator.neg}


def _pythons(a, b) -> bool:
    """Whether Python's own operator takes `a op b` (`a` on the left): both
    Python scalars, or a Python complex and an np.float64 (a float, which
    complex's operators take: `1j + x.sum()` is a Python complex) -- a weak
    Python scalar of the trace."""
    if _is_weak(a) and _is_weak(b):
        return True
    python_complex = type(a) is complex or type(a) is Tracer and a.value.weak and a.dtype.kind == "c"
    return python_complex and type(b) is Tracer and type(b._concrete) is np.float64


def _from_user() -> bool:
    """Whether the caller of the caller (a __repr__'s) is the user's code:
    str(), repr() and f-strings there give the value's text."""
    return not internal(sys._getframe(2).f_code.co_filename)


def traced_int(x):
    """int(x) as a traced function sees it (jit/lift.py rewrites the call):
    of a traced integer scalar, a size bound to its value at run time (an
    index_dim: `return c, int(c.sum())` compiles once, where a graph break
    traced once per value; `.item()` of one too); a decision on it is
    checked where it is bound.  So too of a traced float scalar or a float
    of sizes (`int(len(X) * frac)`), truncated as int() does.  Anything
    else's int()."""
    if type(x) is Tracer and x.ndim == 0 and x.dtype.kind in "iu" and x.dtype != np.uint64 \
            and not x.ctx.constant(x.value):  # (a uint64 past int64 is no size: a graph break)
        return x.ctx.index_dim(x)
    t = x.t if type(x) is SymFloat else x
    if type(t) is Tracer and t.ndim == 0 and t.dtype.kind == "f" and not t.ctx.constant(t.value) \
            and math.isfinite(v := float(t.concrete)) and -2 ** 63 <= int(v) < 2 ** 63:
        # (a float's, `n = int(len(X) * frac)`: truncated toward zero as int() does, a size bound at run time;
        # an effect checks every call's value is an int64's -- a NaN, an infinity or past int64, that call
        # runs in numpy, whose int() gives Python's error or big int)
        return t.ctx.index_dim(t.ctx.int_of(t, np.dtype(np.int64)))
    if type(x) is SymInt:  # (an int's int() is itself: `int(round(n * frac))`, not a Python number)
        return x
    return int(x)


def traced_float(x):
    """float(x) as a traced function sees it (jit/lift.py rewrites the
    call): of a traced real scalar, the weak float64 a Python float is in
    the trace (`loss = float(np.mean(err ** 2))` compiles once, where a
    graph break on the value traced again for every value); of a size, a
    Python float of it, no guard; anything else's float()."""
    if type(x) is Tracer and x.ndim == 0 and x.dtype.kind in "biuf":
        return x.as_python("f")
    if type(x) is SymInt:
        return SymFloat.of(x.ctx, np.multiply, (x, 1.0))  # (exactly float(n) for every n below 2 ** 53)
    if type(x) is SymFloat:
        return x
    return float(x)


def traced_bool(x):
    """bool(x) as a traced function sees it (jit/lift.py rewrites the
    call): of a traced real scalar, the weak bool a Python bool is in the
    trace, decided where it is used, not where it is made (`changed =
    bool((new != labels).any())` then `while changed:`: a scan's test,
    where deciding it in bool() was a graph break per trip); anything
    else's bool()."""
    if type(x) is Tracer and x.ndim == 0 and x.dtype.kind in "biuf":
        return x.as_python("b")
    return bool(x)


def traced_len(x):
    """len() as a traced function sees it (jit/trace.py): a traced array's
    first dim, a symbol as x.shape[0] is (`N = len(X)`: no guard, no trace
    per length, until it is used as a Python number); anything else's len."""
    if type(x) is Tracer and x.ndim:
        return x.shape[0]
    if isinstance(x, Stacked):  # (a list a scan appended to, or of numbers traced as data: a symbol too)
        return x.count("len()")
    return len(x)


def _traced_extreme(builtin, greater: bool):
    def pick(*args, **kw):
        """Python's max or min as a traced function sees it: of two or more
        traced numpy scalars of one real dtype, the first extreme one, as
        Python picks it (`b if b > a else a`, so a NaN first stays), a
        select of the trace (it was a decision per call: a graph break);
        Of ints and sizes, a size (`min(k, x.shape[0])`, `max(n // 4, 1)`:
        sympy's Max or Min, where each size was specialized); anything
        else, Python's."""
        a = args[0] if args else None
        if len(args) >= 2 and not kw and all(type(x) in (int, SymInt) for x in args) \
                and any(type(x) is SymInt for x in args):
            ctx = next(x.ctx for x in args if type(x) is SymInt)
            exprs = [x.expr if type(x) is SymInt else sympy.Integer(x) for x in args]
            return SymInt.wrap(ctx, (sympy.Max if greater else sympy.Min)(*exprs))
        if len(args) < 2 or kw or not all(type(x) is Tracer and x.ndim == 0 and not x.value.weak
                                          and x.dtype == a.dtype and x.dtype.kind in "biuf" for x in args):
            return builtin(*args, **kw)
        r = a
        for b in args[1:]:
            r = np.where(b > r if greater else b < r, b, r)[()]
        return r
    pick.__name__ = builtin.__name__
    return pick


traced_max, traced_min = _traced_extreme(max, True), _traced_extreme(min, False)
# a traced function's own builtins, by name (jit/trace.py gives them to its copy; jit/lift.py reads them there)
TRACED_BUILTINS = {"len": traced_len, "max": traced_max, "min": traced_min}


class StackedUse(Fallback):
    """A list a scan's trips appended to (Stacked) was used as no stacked
    array can stand for (its length, its items one by one): the call is
    traced again with that loop's appends made as written (jit/miss.py)."""

    def __init__(self, reason: str, site):
        super().__init__(reason, user_location())
        self.site = site


PYTHON_KINDS = ("b", "i", "f")  # (a Python bool, int or float: as_python's kinds)


class Stacked:
    """The list a loop compiled as a scan appended one array to per trip
    (`outs.append(h)`), after the loop: the items it held before (`prefix`,
    traced arrays) then the rows of `rows`, the scan's stacked output
    (jax.lax.scan's ys), so `np.stack(outs)`, `np.array(outs)`,
    `np.concatenate(outs)`, `outs[-1]` and numpy's functions of it are
    array ops on a symbolic number of rows.  What only a list of known
    length can do (len(), iterating, appending, comparing) raises
    StackedUse: the call is traced again with the loop's appends as
    written.  So does any use after the trace wrote into an array: the
    list's items might have been views of it.

    `joined`: the trips appended rows of other lengths (the last batch of a
    loop over batches), `rows` is them joined along their first axis: the
    list is only np.concatenate's (np.vstack's, np.hstack's) argument."""

    __slots__ = ("prefix", "rows", "site", "writes", "joined", "numbers", "views")

    def __init__(self, prefix: list, rows: Tracer, site, joined: bool = False, numbers: str = "",
                 views: bool = False):
        self.prefix, self.rows, self.site, self.joined = prefix, rows, site, joined
        # (the trips appended views of an array the loop reads, `rows.append(x[t])`: numpy's items view x,
        # the stacked rows copy it -- an item, or the list returned, is refused)
        self.views = views
        # (what the trips appended, where not arrays: Python numbers of kind "b", "i" or "f", or numpy's
        # scalars, "s": the rows of a 1-D array)
        self.numbers = numbers
        self.writes = rows.ctx.writes()

    def _refuse(self, what: str):
        raise StackedUse(f"the list a scan appended to, used by {what}", self.site)

    def _unwritten(self) -> None:
        """StackedUse after a write into any traced array since the loop: the
        list's items might view that array, numpy's list sees the write."""
        if self.rows.ctx.writes() != self.writes:
            self._refuse("code after a write into an array (its items might view that array)")

    def _array(self, dtype=None, copy: bool = True) -> Tracer:
        """np.array(list): the items stacked (numpy's dtype promotion across
        items of other dtypes, or other shapes, is the list's own); without
        `copy`, the rows the list's items are (the list returned)."""
        self._unwritten()
        if self.joined:
            self._refuse("code that needs its items as rows of one length (its trips appended rows of other "
                         "lengths: only np.concatenate joins them)")
        rows = self.rows
        if self.prefix:
            if any(not isinstance(x, Tracer) or x.dtype != rows.dtype or x.ndim != rows.ndim - 1
                   for x in self.prefix):
                self._refuse("items before the loop of another dtype or rank")
            rows = np.concatenate([np.stack(self.prefix), rows])
        # (a new array, as numpy's np.stack makes: the scan's rows stay the list's own, which a returned list,
        # or an item, views -- `return np.stack(outs), outs` shared their memory, probe 19)
        if dtype is not None and np.dtype(dtype) != rows.dtype:
            return rows.astype(dtype)
        return rows.copy() if copy and rows is self.rows else rows

    def stack(self, axis: int = 0, dtype=None, copy: bool = True) -> Tracer:
        a = self._array(dtype, copy)
        return a if axis in (0, -a.ndim) else np.moveaxis(a, 0, axis)

    def concatenate(self, axis: int = 0, dtype=None) -> Tracer:
        if self.joined:
            return self._join(axis, dtype)
        a = self._array(dtype)
        if a.ndim < 2:
            self._refuse("np.concatenate of 0-d items")
        if axis is None:
            return a.reshape(-1)
        axis = axis + a.ndim - 1 if axis < 0 else axis
        if not 0 <= axis < a.ndim - 1:
            self._refuse(f"np.concatenate along axis {axis}")
        z = np.moveaxis(a, 0, axis) if axis else a
        shape = z.shape
        return z.reshape(shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])

    def _join(self, axis, dtype) -> Tracer:
        """np.concatenate of a joined list: its rows (after the items before
        the loop), along their first axis, or flattened (axis=None)."""
        self._unwritten()
        rows = self.rows if dtype is None or np.dtype(dtype) == self.rows.dtype else self.rows.astype(dtype)
        if axis is None:
            return np.concatenate([np.ravel(x) for x in self.prefix] + [rows.reshape(-1)])
        if axis not in (0, -rows.ndim):
            self._refuse(f"np.concatenate along axis {axis} (its trips appended rows of other lengths)")
        return np.concatenate(self.prefix + [rows]) if self.prefix else rows

    def vstack(self) -> Tracer:
        item = self.rows.ndim - (not self.joined)
        return self._array().reshape(-1, 1) if item == 0 else self._array() if item == 1 else self.concatenate(0)

    def hstack(self) -> Tracer:
        item = self.rows.ndim - (not self.joined)
        return self._array() if item == 0 else self.concatenate(0 if item == 1 else 1)

    def __getitem__(self, i):
        if self.joined:
            self._refuse("an index (its trips appended rows of other lengths)")
        if isinstance(i, slice) and not self.prefix:
            return Stacked([], self.rows[i], self.site, numbers=self.numbers, views=self.views)
        if type(i) is int and 0 <= i < len(self.prefix):
            return self.prefix[i]
        if type(i) is int and i < 0 and self.prefix:
            self._refuse("a negative index")
        if type(i) is int or isinstance(i, SymInt) and not self.prefix:
            self._unwritten()
            if self.views:
                self._refuse("an item (a view of an array the loop read, in numpy's list)")
            item = self.rows[i - len(self.prefix) if type(i) is int and i >= 0 else i]
            return item.as_python(self.numbers) if self.numbers in PYTHON_KINDS else item  # (numpy's list's)
        self._refuse(f"an index {type(i).__name__}")

    def __array_function__(self, func, types_, args, kwargs):
        """numpy's function of the list: of the stacked array (np.mean(outs,
        axis=0)); np.stack and the like take the list itself (jit/trace.py's np)."""
        def arrays(x):
            return x._array() if isinstance(x, Stacked) else x
        return func(*map(arrays, args), **{k: arrays(v) for k, v in kwargs.items()})

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [x._array() if isinstance(x, Stacked) else x for x in inputs]
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array__(self, *a, **k):
        self._refuse("numpy outside the trace (a module whose np is not the trace's)")

    def __len__(self):
        self._refuse("len()")

    def __iter__(self):
        self._refuse("iterating it")

    def count(self, what: str):
        """The list's length (for `what`, as len() or its truth sees it):
        its items before the loop and one a trip, the trip count a symbol."""
        if self.joined:
            self._refuse(f"{what} (its trips appended rows of other lengths)")
        return len(self.prefix) + self.rows.shape[0]

    def __bool__(self):  # (`np.stack(hs) if hs else ...`: a guard on the trip count, as a shape decision)
        return bool(self.count("its truth"))

    def _list_op(self, *a, **k):
        self._refuse("a list operation")

    __contains__ = __reversed__ = __add__ = __radd__ = __iadd__ = __mul__ = __rmul__ = __imul__ = _list_op
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __setitem__ = __delitem__ = _list_op
    __hash__ = None

    def __getattr__(self, name):  # (append, extend, pop, index, count, sort, copy...)
        if name.startswith("_"):  # (a probe: numpy's __array_interface__, a namedtuple's _fields)
            raise AttributeError(name)
        self._refuse(f"its method {name}")

    def __repr__(self):
        self._refuse("repr()")


class DataArg:
    """The place of a list argument traced as data (DataList): argument k."""
    __slots__ = ("k",)

    def __init__(self, k: int):
        self.k = k


class DataList(Stacked):
    """A list of numbers passed as argument `site.k` (the prices of a
    series, a token list) whose length changed from one call to the next,
    traced as data: the 1-D array of its numbers (`rows`), with a symbolic
    length.  numpy's functions of it (np.asarray, np.diff, np.log) are of
    that array, each a fresh one as numpy makes it, and len() is its first
    dim; what only a list of Python numbers can do (an item, iterating,
    appending, returning it) raises StackedUse: the call is traced again
    with the list as it is (a trace per length), and that argument stays
    so (jit/miss.py)."""

    __slots__ = ()
    # (isinstance() sees the list the caller passed: `isinstance(xs, list)` takes the list's branch)
    __class__ = property(lambda self: list)

    def __init__(self, rows: Tracer, site: DataArg):
        Stacked.__init__(self, [], rows, site)

    def _refuse(self, what: str):
        raise StackedUse(f"the list of numbers traced as data, used by {what}", self.site)

    def _unwritten(self) -> None:
        pass  # (its items are numbers: no write elsewhere reaches them)

    def _array(self, dtype=None, copy: bool = True) -> Tracer:
        return self.rows.copy() if dtype is None or np.dtype(dtype) == self.rows.dtype else self.rows.astype(dtype)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return DataList(self.rows[i], self.site)
        self._refuse("an index (its items are Python numbers)")

    def __array_function__(self, func, types_, args, kwargs):
        if "out" in kwargs:
            self._refuse("out=")
        return Stacked.__array_function__(self, func, types_, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if "out" in kwargs:
            self._refuse("out=")
        return Stacked.__array_ufunc__(self, ufunc, method, *inputs, **kwargs)

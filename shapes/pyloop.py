"""A lifted Python loop: a `for` loop over scalars and array elements that
the front end (jit/lift.py) typed from its source, as one graph node
(`pyloop`), compiled whole by codegen/pyloop.py, with the loop itself (the
user's own statements, compiled from their source) as its numpy reference.

Types are strings: a weak Python scalar is "int", "float" or "bool"; a
numpy scalar is "np." and its dtype's name ("np.uint8", "np.bool").  Every
expression carries its type (`expr[1]`) and every conversion is explicit,
so the emitter chooses no semantics of its own.

Expressions (tuples):
    ("const", T, value)
    ("var", T, name)                   a variable holding a T (one slot per name and type)
    ("cvt", T, e, mode)                e converted to T as numpy and Python convert ("value"), as
                                       numpy's setitem stores ("store": into a signed integer array
                                       only a value it holds), or only where exact ("exact");
                                       where Python or numpy would raise
                                       (or warn), or an exact conversion is not, the loop aborts
    ("dim", "int", array, axis)        an array's extent
    ("size", "int", array)             its number of elements
    ("dot", T, v, w) | ("reduce", T, "sum" | "max" | "min", v) | ("veclen", "int", v)
                                       of 1-D vectors (type "vec." and a dtype's name), read element
                                       by element, never materialized: ("view", vec, name, array)
                                       a slice of a 1-D array or of a 2-D one's row or column (its
                                       bounds set by a setview), or
                                       ("gather", vec, array, v) the array's elements at the
                                       integers of v (wrapped and bounds-checked)
    ("search", np.int64, v, key, side) np.searchsorted of vector v and one number (key, of the type
                                       both are compared in), side "left" or "right"
    ("bin", T, op, a, b)               a and b of one type; T the result's (bool for comparisons)
    ("un", T, op, a)                   neg | invert | abs
    ("truth", bool, e)                 Python's truth of e
    ("not", bool, c) / ("and" | "or", bool, c1, c2)     on truths, short-circuit
    ("load", T, array, (i, ...))       an element (indices Python ints, wrapped and bounds-checked)
    ("call", T, fn, (a, ...))          fn of MATH (math.* raise on a domain error: the loop aborts)
    ("select", T, c, a, b)

Statements:
    ("set", name, e)                   the slot (name, e's type)
    ("store", array, (i, ...), e[, "in range"])   e already of the array's dtype; "in range": the
                                       indices are by construction (a slice's: no wrap, no check)
    ("if", c, then, orelse)
    ("for", name, (start, stop, step), bodies[, settle])   range semantics; trip t runs
                                       bodies[min(t, k)], k = len(bodies) - 1; types settle after
                                       `settle` trips (k if not given), and the loop aborts when it
                                       would run fewer
    ("while", ((pre, test), ...), bodies)   trip t runs tests[min(t, k)] (the setviews `pre`, then
                                       the test: a bool) and, while it holds, bodies[min(t, k)]
    ("break",) | ("continue",)
    ("setview", name, array, lo, hi, step[, (axis, i)])   a slice's start, length and step (Python's
                                       slice.indices; a bound may be None) in name's hidden slots; of
                                       a 2-D array, along the axis other than `axis`, at index i of it
                                       (a row's or a column's segment: A[i, :i], A[lo:hi, j])

An abort (an index out of range, an overflow Python or numpy would report,
a division by zero, a math domain error, too few trips) ends the compiled
call with no effect: the call runs eagerly and numpy (or Python) raises or
warns as it would have."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
MATH = ("sqrt", "exp", "log", "sin", "cos", "tan", "tanh", "floor", "ceil", "fabs")

# abort codes (the status a compiled loop returns)
ABORTS = {1: "an index out of range", 2: "an integer overflow or an inexact conversion",
          3: "a division by zero", 4: "a math domain error", 5: "fewer trips than its types settle in",
          6: "range() or a slice with a step of 0",
          7: "an array operation numpy refuses (lengths that differ, the maximum of nothing)",
          8: "a float overflow (math.exp, a float's **: Python raises, numpy warns)"}


@dataclass(frozen=True, eq=False)
class PyLoop:
    """`params`: (name, kind, T, value) of each name the loop starts from,
    kind "array" (read), "written" (an array the loop stores into: the node
    outputs its new contents first, in this order), "scalar" (the node's
    inputs, `inputs`, are these three kinds' values, in order) or "const"
    (`value`, a Python or numpy scalar, set in the loop's prologue); `outputs`:
    (name, T) of the scalars the loop leaves (after the written arrays).
    `ref(*params)` runs the loop in Python and returns the written arrays'
    and the scalars' final values; written arrays are copied first."""

    params: tuple
    outputs: tuple
    body: tuple
    fn: object
    loc: str

    def __repr__(self) -> str:
        return f"<loop at {self.loc}>"

    def __reduce__(self):  # (a saved trace's copy, for explain(): without the Python function)
        return PyLoop, (self.params, self.outputs, self.body, None, self.loc)

    @property
    def inputs(self) -> tuple:
        """The params the node takes as inputs (not the constants), in order."""
        return tuple(p for p in self.params if p[1] != "const")

    @property
    def written(self) -> tuple:
        """The positions among the node's inputs of the arrays it stores into."""
        return tuple(k for k, p in enumerate(self.inputs) if p[1] == "written")

    def run(self, *xs):
        """The loop on the node's inputs `xs` (the constants are the program's)."""
        if self.fn is None:
            raise RuntimeError(f"the Python function of the loop at {self.loc} is not saved with a trace")
        it = iter(xs)
        args = [p[3] if p[1] == "const" else np.array(next(it), copy=True) if p[1] == "written" else next(it)
                for p in self.params]
        scalars = self.fn(*args)
        return (*(a for a, p in zip(args, self.params) if p[1] == "written"), *scalars)


def run_pyloop(*xs, program: PyLoop):
    """The `pyloop` op's numpy reference: the user's loop, run by Python."""
    out = program.run(*xs)
    return out if len(out) > 1 else out[0]


WEAK = {"int": np.dtype(np.int64), "float": np.dtype(np.float64), "bool": np.dtype(np.bool_)}


def is_weak(t: str) -> bool:
    return t in WEAK


def dtype_of(t: str) -> np.dtype:
    """The dtype a value of type t is held in (a weak int: int64)."""
    return WEAK[t] if t in WEAK else np.dtype(t[3:])


def type_of_value(x) -> str | None:
    """The type of a Python or numpy scalar (None: neither)."""
    if type(x) in (int, float, bool):
        return type(x).__name__
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        return "np." + x.dtype.name
    return None


def strong(dtype) -> str:
    return "np." + np.dtype(dtype).name

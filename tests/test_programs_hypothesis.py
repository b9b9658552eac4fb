"""Random small programs, differential against numpy.

A program is 1-6 steps over a float array x: unary elementwise ops, binary
elementwise ops against a broadcastable second input, a Python constant or
a runtime Python float, reductions over random axes with keepdims (argmax
and argmin over one axis or all, their indices cast back), ifs on the
value's max binding a name in both branches (selects), in-place
updates (augmented operators, slice and mask assignments — into x itself
when they come first) and gathers with integer index arrays.  Each shape is
called twice, so the compiled entry runs (the first call of a key returns
the traced result), and the arguments' contents after the call are compared.
Shapes are tracked as references to x's axes, so every second operand is
built to broadcast for any shape of x; each program is jitted and called
on two shapes of the same rank and compared with numpy on the same inputs.

The oracle.  The reference back end runs numpy's own functions: it must
agree to 4 ulp.  A compiled back end has its own math library (a few ulp
from numpy's) and its own summation order, so it is held to what such
per-op differences can explain: numpy's program is rerun with the result of
every inexact step perturbed by a few ulp (the inputs of sums by their
length in ulp) and the largest change bounds the error.  Ops that are
discontinuous or have a domain edge (floor_divide, mod, sign, comparisons,
sqrt, log1p, reciprocal, divide, power) are only drawn while the value is
still bit-exact (computed by IEEE-exact ops from the inputs): after an
inexact op no finite tolerance would do.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jit import jit
from tests.conftest import assert_like_numpy
from tests.test_ops import spec_key

UNARY = {
    "negative": lambda v: -v, "abs": np.abs, "square": np.square, "sqrt": np.sqrt, "exp": np.exp,
    "log1p": np.log1p, "tanh": np.tanh, "sin": np.sin, "arctan": np.arctan, "sign": np.sign,
    "reciprocal": np.reciprocal, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
}
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
    "floor_divide": np.floor_divide, "mod": np.mod,
    "add_op": lambda a, b: a + b, "mul_op": lambda a, b: a * b, "sub_op": lambda a, b: a - b,
    "where_gt": lambda a, b: np.where(a > b, a, b),
}
REDUCE = ["sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin"]
ARG = ("argmax", "argmin")  # over one axis or all, their indices cast back to the value's dtype
INPLACE = {  # IEEE-exact updates of v (an ndarray of rank >= 1)
    "iadd": lambda v: v.__iadd__(1.5), "imul": lambda v: v.__imul__(-2.0),
    "shift_last": lambda v: v.__setitem__((Ellipsis, slice(1, None)), v[..., :-1] * 0.5),
    "mask_zero": lambda v: v.__setitem__(v > 0, 0.0), "out_ufunc": lambda v: np.negative(v, out=v),
}

# IEEE-exact in numpy and in any correct back end: keep a value bit-exact
# (not divide: compiled kernels multiply by the reciprocal of a divisor that is
# the same along a row, within about an ulp of the quotient)
EXACT = {"negative", "abs", "square", "sqrt", "sign", "reciprocal", "add", "subtract", "multiply",
         "maximum", "minimum", "floor_divide", "mod", "add_op", "mul_op", "sub_op", "where_gt", "max", "min",
         "argmax", "argmin"}
# a few ulp of difference in the operand can change the result by far more
NEEDS_EXACT = {"sqrt", "log1p", "sign", "reciprocal", "divide", "power", "floor_divide", "mod", "where_gt",
               "argmax", "argmin"}
STEP_ULPS = 4  # how far a compiled op may be from numpy's (codegen/mathlib.py: at most 4)


@dataclass(frozen=True)
class Step:
    kind: str              # "unary" | "binary" | "reduce" | "inplace" | "gather"
    op: str
    operand: str = ""      # binary: "array" | "const" | "runtime"
    left: bool = False     # binary: the operand is the left argument
    const: float = 0.0     # binary "const": the Python scalar
    refs: tuple = ()       # binary "array": per dim, an axis of x or None (a 1)
    extra_dtype: str = ""  # binary "array": dtype of the second input
    axis: object = None    # reduce
    keepdims: bool = False

    @property
    def exact(self) -> bool:
        return self.op in EXACT or self.kind in ("inplace", "gather", "select")


@st.composite
def programs(draw):
    rank = draw(st.integers(1, 3))
    cur: list = list(range(rank))  # each dim of the current value: an axis of x, or None (a 1)
    exact = True                   # the current value is still bit-exact
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "inplace", "gather", "select"]))
        if kind in ("inplace", "gather") and not cur or kind == "select" and not exact:
            kind = "unary"
        if kind == "select":  # an if on the value's max (exact): both branches IEEE-exact
            steps.append(Step("select", "select"))
        elif kind == "inplace":
            steps.append(Step("inplace", draw(st.sampled_from(sorted(INPLACE)))))
        elif kind == "gather":  # v[idx] along axis 0, idx as long as that axis: the shape stays
            steps.append(Step("gather", "take", refs=(cur[0],)))
        elif kind == "unary":
            ops = sorted(UNARY if exact else set(UNARY) - NEEDS_EXACT)
            steps.append(Step("unary", draw(st.sampled_from(ops))))
        elif kind == "binary":
            op = draw(st.sampled_from(sorted(BINARY if exact else set(BINARY) - NEEDS_EXACT)))
            operand = draw(st.sampled_from(["array", "array", "const", "runtime"]))
            left = draw(st.booleans())
            if operand == "array":
                n = draw(st.integers(0, len(cur)))  # broadcasting against fewer dims
                refs = tuple(None if (r is None or draw(st.booleans())) else r for r in cur[len(cur) - n:])
                dt = draw(st.sampled_from(["same", "same", "float32", "float64"]))
                steps.append(Step("binary", op, "array", left, refs=refs, extra_dtype=dt))
            elif operand == "const":
                c = draw(st.sampled_from([0.5, 2.0, -1.5, 3.0, 1e-3, 2, -1]))
                steps.append(Step("binary", op, "const", left, const=c))
            else:
                steps.append(Step("binary", op, "runtime", left))
        else:
            op = draw(st.sampled_from(REDUCE if exact else [r for r in REDUCE if r not in ARG]))
            keepdims = draw(st.booleans())
            if not cur or draw(st.integers(0, 3)) == 0:
                axis, picked = None, list(range(len(cur)))
            elif op in ARG:
                picked = [draw(st.integers(0, len(cur) - 1))]
                axis = picked[0] - len(cur) if draw(st.booleans()) else picked[0]
            else:
                picked = sorted(draw(st.sets(st.integers(0, len(cur) - 1), min_size=1)))
                signed = [p - len(cur) if draw(st.booleans()) else p for p in picked]
                axis = signed[0] if len(signed) == 1 and draw(st.booleans()) else tuple(signed)
            steps.append(Step("reduce", op, axis=axis, keepdims=keepdims))
            cur = ([None if k in picked else r for k, r in enumerate(cur)] if keepdims
                   else [r for k, r in enumerate(cur) if k not in picked])
        exact = exact and steps[-1].exact
    shapes = tuple(tuple(draw(st.lists(st.integers(0, 7), min_size=rank, max_size=rank))) for _ in range(2))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    specials = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    return steps, shapes, dtype, specials, seed


def build(steps, perturb=None):
    """The program as a plain Python function of (x, extras, eps).  With
    `perturb(value, ulps)` (numpy only): the sensitivity run."""
    def program(x, extras, eps):
        v, k = x, 0
        for s in steps:
            if s.kind == "unary":
                v = UNARY[s.op](v)
            elif s.kind == "select":  # (an if on a traced value: jit/lift.py makes it a select)
                if np.max(v) > 0.5:
                    w = v * 2.0
                else:
                    w = np.abs(v) - 1.0
                v = w
            elif s.kind == "inplace":
                INPLACE[s.op](v)   # writes into x itself when it comes first
            elif s.kind == "gather":
                v = v[extras[k]]
                k += 1
            elif s.kind == "reduce":
                if perturb is not None and not s.exact:  # another summation order
                    v = perturb(v, STEP_ULPS + max(1, np.size(v)))
                r = getattr(np, s.op)(v, axis=s.axis, keepdims=s.keepdims)
                v = r.astype(v.dtype) if s.op in ARG else r
            else:
                f = BINARY[s.op]
                if s.operand == "array":
                    other = extras[k]
                    k += 1
                else:
                    other = s.const if s.operand == "const" else eps
                v = f(other, v) if s.left else f(v, other)
            if perturb is not None and not s.exact:
                v = perturb(v, STEP_ULPS)
        return v
    return program


def make_args(steps, shape, dtype, specials, rng, eps):
    def values(shp, dt):
        a = rng.standard_normal(shp) * 2
        if specials and a.size:
            mask = rng.random(shp) < 0.2
            a = np.where(mask, rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], size=shp), a)
        return a.astype(dt)
    extras = []
    for s in steps:
        if s.kind == "binary" and s.operand == "array":
            extras.append(values(tuple(1 if r is None else shape[r] for r in s.refs),
                                 dtype if s.extra_dtype == "same" else s.extra_dtype))
        elif s.kind == "gather":  # in bounds, negative ones too
            n = 1 if s.refs[0] is None else shape[s.refs[0]]
            extras.append(rng.integers(-n, n, size=n) if n else np.zeros(0, np.int64))
    return values(shape, dtype), tuple(extras), eps


def fresh(args):
    """A copy of the arguments (programs may write into x)."""
    x, extras, eps = args
    return x.copy(), tuple(e.copy() for e in extras), eps


def sensitivity(steps, args, want, seed, trials=6) -> np.ndarray:
    """How far numpy's result moves when every inexact step is a few ulp off."""
    rng = np.random.default_rng(seed)

    def perturb(v, ulps):
        a = np.asarray(v)
        if a.dtype.kind != "f":
            return v
        eps = np.finfo(a.dtype).eps
        return v * (1 + rng.uniform(-1, 1, a.shape) * ulps * eps).astype(a.dtype)

    w = np.asarray(want, dtype=np.float64)
    dev = np.zeros(w.shape)
    for _ in range(trials):
        p = np.asarray(build(steps, perturb)(*fresh(args)), dtype=np.float64)
        same = (p == w) | (np.isnan(p) & np.isnan(w))
        d = np.where(same, 0.0, np.abs(p - w))
        dev = np.maximum(dev, np.where(np.isnan(d), np.inf, d))
    return dev


def assert_explained(got, want, dev):
    """dtype and shape exact; values within numpy's own 4 ulp plus twice the
    deviation that per-op differences of a few ulp can cause."""
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype, f"dtype {g.dtype} != numpy's {w.dtype}"
    assert g.shape == w.shape, f"shape {g.shape} != numpy's {w.shape}"
    fi = np.finfo(w.dtype)
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    tol = 2 * dev + 4 * fi.eps * np.abs(np.where(np.isfinite(w64), w64, 0)) + 64 * fi.tiny
    same = (g64 == w64) | (np.isnan(g64) & np.isnan(w64))
    bad = ~same & ~(np.abs(g64 - w64) <= tol)
    assert not bad.any(), (f"{int(bad.sum())} of {w.size} values differ beyond what a few ulp per op "
                           f"explain: got {g[bad][:5]}, numpy {w[bad][:5]}, allowed {tol[bad][:5]}")


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prog=programs())
def test_random_programs(prog, backend):
    steps, shapes, dtype, specials, seed = prog
    rng = np.random.default_rng(seed)
    fn = build(steps)
    jf = jit(fn, backend=backend)
    keys = set()
    for shape, eps in zip(shapes, (0.75, -2.5)):
        args = make_args(steps, shape, dtype, specials, rng, eps)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's (mean of an empty slice)
            want_args = fresh(args)
            try:
                want = fn(*want_args)
            except ValueError as e:  # max/min of an empty axis: shapejit must raise it too
                try:
                    jf(*fresh(args))
                except ValueError:
                    continue
                raise AssertionError(f"numpy raised {e!r}, shapejit did not") from None
            for _ in range(2):  # the traced call of a key, then its compiled entry
                got_args = fresh(args)
                got = jf(*got_args)
                if backend == "reference":
                    assert_like_numpy(got, want)
                    assert_like_numpy(got_args[0], want_args[0])
                else:
                    assert_explained(got, want, sensitivity(steps, args, want, seed))
                    assert_explained(got_args[0], want_args[0], np.zeros(np.shape(want_args[0])))
        keys.add(spec_key(args))
    stats = jf.stats()
    assert stats["traces"] == len(keys), jf.explain()  # no retrace for a new shape of the same key
    assert stats["fallbacks"] == 0 and stats["eager_calls"] == 0, jf.log
    assert stats["entry_hits"] >= len(keys)  # every key's compiled entry ran

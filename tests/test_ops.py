"""Differential tests of the op coverage: every jitted function is called on
several shapes of the same rank and each result is compared with plain numpy
on the same inputs.

Conventions (all enforced by `check`):
  * the first call of a signature traces; every later call with a shape that
    differs only in dims >= 2 must reuse that entry (no retrace), so each
    test asserts traces == number of distinct specialization keys (dtype and
    which dims are 0 or 1, the policy of shapes/env.py);
  * no eager fallback: the second call runs the compiled entry;
  * results match numpy exactly in dtype and shape, values to a few ulp.

Reductions and contractions get integer-valued float inputs: their sums are
then exact in any summation order, so a back end that reorders them must
still agree with numpy to the ulp.
"""
from __future__ import annotations

import operator
import re
import warnings

import numpy as np
import pytest

from jit import JitWarning, jit, pytree
from tests.conftest import assert_like_numpy

FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int64]
NUMERIC = FLOATS + INTS
ALL_DTYPES = NUMERIC + [np.bool_]

# Shapes of one rank: several of each specialization class (dims >= 2, a 0
# dim, a 1 dim) and one large shape.
SHAPES_1D = [(5,), (17,), (2,), (0,), (1,), (100_000,)]
SHAPES_2D = [(3, 4), (5, 7), (0, 3), (0, 6), (1, 6), (1, 9), (2, 2), (1000, 300)]
SHAPES_2D_NONEMPTY = [(3, 4), (5, 7), (1, 6), (1, 9), (7, 1), (2, 2), (1000, 300)]
SHAPES_3D = [(2, 3, 4), (5, 3, 7), (0, 2, 3), (0, 4, 5), (3, 1, 5), (4, 1, 6), (100, 30, 100)]
SHAPES_3D_NONEMPTY = [(2, 3, 4), (5, 3, 7), (3, 1, 5), (4, 1, 6), (1, 2, 3), (1, 5, 2), (100, 30, 100)]

SPECIAL = [np.nan, np.inf, -np.inf, -1.0, -0.0, 0.0, 1.0, -2.5, 3.0, 0.5, 1e-30, -1e-30, 1e30, -1e30,
           1e-310, 88.0, -88.0, 710.0]


# ------------------------------------------------------------------ helpers

@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


def rand(rng, shape, dtype, domain="any"):
    """Random input.  domain: any | positive | nonzero | unit (-1, 1) |
    exact (integer-valued, for order-independent sums) | small (0..3) |
    prod (-1, 1, 2: products exact, or inf, in any order)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if domain == "prod":
        return rng.choice(np.array([-1, 1, 1, 2], dtype=dtype), size=shape)
    if dtype.kind in "iu" or domain in ("exact", "small"):
        lo, hi = {"any": (-20, 21), "positive": (1, 21), "nonzero": (1, 21), "unit": (0, 1),
                  "exact": (-20, 21), "small": (0, 4)}[domain]
        x = rng.integers(lo, hi, size=shape)
        if domain == "nonzero":
            x = x * rng.choice([-1, 1], size=shape)
        return x.astype(dtype)
    if domain == "positive":
        x = rng.uniform(0.1, 10.0, shape)
    elif domain == "unit":
        x = rng.uniform(-0.99, 0.99, shape)
    elif domain == "nonzero":
        x = rng.uniform(0.1, 10.0, shape) * rng.choice([-1, 1], size=shape)
    else:
        x = rng.standard_normal(shape) * 3
    return x.astype(dtype)


def special(dtype) -> np.ndarray:
    """NaN, infs, signed zeros, tiny/huge and negative values (1-D)."""
    with np.errstate(over="ignore"):
        return np.array(SPECIAL, dtype=np.float64).astype(dtype)


def spec_key(args) -> tuple:
    """The specialization key of a call, as the API documents it: structure,
    and per array the dtype and which dims are 0 or 1; Python floats are
    runtime scalars, numpy scalars are keyed by dtype, anything else by value."""
    leaves: list = []
    treedef = pytree.flatten(tuple(args), leaves)
    key = [treedef]
    for x in leaves:
        if isinstance(x, np.ndarray):
            key.append((x.dtype.str, tuple(d if d < 2 else -1 for d in x.shape), x.flags.c_contiguous))
        elif type(x) is float:
            key.append("float")
        elif isinstance(x, np.generic):
            key.append(x.dtype.str)
        else:
            key.append((type(x), x))
    return tuple(key)


def _shapes(args) -> tuple:
    leaves: list = []
    pytree.flatten(tuple(args), leaves)
    return tuple(np.shape(x) for x in leaves if isinstance(x, np.ndarray))


def assert_close(got, want, ulps=4, term_scale=None):
    """assert_like_numpy; with term_scale, a computation that cancels may
    also be off by a few ulp of its terms (of magnitude term_scale)."""
    if term_scale is None:
        assert_like_numpy(got, want, ulps)
        return
    gl, wl = [], []
    assert pytree.flatten(got, gl) == pytree.flatten(want, wl)
    for g, w in zip(gl, wl):
        kind = np.asarray(w).dtype.kind
        atol = ulps * np.finfo(np.asarray(w).dtype).eps * term_scale if kind == "f" else 0.0
        assert_like_numpy(g, w, ulps, atol=atol)


def check(fn, cases, backend, *, ulps=4, term_scale=None, **jit_kw):
    """jit fn, call it on every case (a tuple of arguments) and compare each
    result with numpy's on the same inputs.  Asserts one trace per distinct
    specialization key, no eager fallback and that some key was called with
    two different shapes (the cached entry really ran on a shape it was not
    traced with)."""
    jf = jit(fn, backend=backend, **jit_kw)
    keys: dict = {}
    for args in cases:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            # numpy's own warnings (mean of an empty slice) are not under test
            warnings.simplefilter("ignore", RuntimeWarning)
            want = fn(*args)
            got = jf(*args)
        assert_close(got, want, ulps, term_scale)
        keys.setdefault(spec_key(args), set()).add(_shapes(args))
    assert any(len(s) >= 2 for s in keys.values()), "test must reuse an entry for a new shape"
    stats = jf.stats()
    assert stats["fallbacks"] == 0 and stats["eager_calls"] == 0, jf.log
    # the covered ops are traced natively, not run as opaque eager nodes
    assert "eager nodes" not in jf.explain(), jf.explain()
    assert stats["traces"] == len(keys), jf.explain()
    assert stats["calls"] == len(cases)
    assert stats["entry_hits"] >= len(cases) - len(keys)  # every other call reused an entry
    return jf


def check_raises(fn, cases, backend):
    """numpy raises on every case: the jitted function raises the same type."""
    jf = jit(fn, backend=backend)
    for args in cases:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with pytest.raises(Exception) as want:
                fn(*args)
            with pytest.raises(want.type):
                jf(*args)


def numpy_accepts(fn, *dtypes) -> bool:
    try:
        with np.errstate(all="ignore"):
            fn(*[np.ones((2, 2), dtype=dt) for dt in dtypes])
        return True
    except TypeError:
        return False


def dtype_id(dt) -> str:
    return np.dtype(dt).name


def py(f):
    """A Python function calling f: what users decorate (jit of a bare ufunc
    object is test_jit_of_a_ufunc_object)."""
    def fn(*args):
        return f(*args)
    fn.__name__ = getattr(f, "__name__", "fn")
    return fn


def combos(table: dict, dtypes, arity=1):
    """(name, dtype) params for which numpy accepts the op."""
    return [pytest.param(name, dt, id=f"{name}-{dtype_id(dt)}")
            for name, fn in table.items() for dt in dtypes
            if numpy_accepts(fn, *[dt] * arity)]


# --------------------------------------------------------------- arithmetic

UNARY = {
    "negative": np.negative, "neg_operator": operator.neg, "abs": np.abs, "abs_builtin": abs,
    "square": np.square, "sqrt": np.sqrt, "reciprocal": np.reciprocal, "sign": np.sign,
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh,
    "sin": np.sin, "cos": np.cos, "arctan": np.arctan,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "sigmoid_tanh": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),
    "softplus": lambda x: np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0),
}
UNARY = {k: py(f) for k, f in UNARY.items()}
UNARY_DOMAIN = {"sqrt": "positive", "log": "positive", "log1p": "positive", "reciprocal": "nonzero"}
# 1 + tanh(..) cancels: a few ulp of tanh (terms of size 1) is the honest tolerance
UNARY_TERM_SCALE = {"sigmoid_tanh": 1.0}
# bool reciprocal is an int8 division by zero for False: not a numpy-defined value
UNARY_PARAMS = [p for p in combos(UNARY, ALL_DTYPES) if p.values != ("reciprocal", np.bool_)]


@pytest.mark.slow
@pytest.mark.parametrize("name,dtype", UNARY_PARAMS)
def test_unary(name, dtype, backend, rng):
    fn = UNARY[name]
    domain = UNARY_DOMAIN.get(name, "any")
    check(fn, [(rand(rng, s, dtype, domain),) for s in SHAPES_2D], backend,
          term_scale=UNARY_TERM_SCALE.get(name))


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_unary_special_values(name, dtype, backend):
    x = special(dtype)
    check(UNARY[name], [(x,), (np.concatenate([x, -x[::-1], x]),), (x[:2],)], backend,
          term_scale=UNARY_TERM_SCALE.get(name))


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_unary_1d_large(dtype, backend, rng):
    def fn(x):
        return np.sqrt(np.abs(x)) + np.exp(-x * x) * np.sign(x) - np.log1p(x * x) / (1 + np.tanh(x) ** 2)
    # the terms (|x| < 15) are below 8 and the sum cancels
    check(fn, [(rand(rng, s, dtype),) for s in SHAPES_1D], backend, term_scale=8.0)


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "floor_divide": np.floor_divide, "mod": np.mod, "remainder": np.remainder, "power": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "arctan2": np.arctan2, "hypot": np.hypot,
    "op_add": operator.add, "op_sub": operator.sub, "op_mul": operator.mul,
    "op_truediv": operator.truediv, "op_floordiv": operator.floordiv, "op_mod": operator.mod,
    "op_pow": operator.pow,
}
BINARY = {k: py(f) for k, f in BINARY.items()}
DIVISORS = {"divide", "floor_divide", "mod", "remainder", "op_truediv", "op_floordiv", "op_mod"}
POWERS = {"power", "op_pow"}


def binary_inputs(rng, name, shape_a, shape_b, dtype):
    if name in POWERS:
        # positive float bases (no NaN here); small exponents keep ints exact
        base = rand(rng, shape_a, dtype, "positive" if np.dtype(dtype).kind == "f" else "any")
        return base, rand(rng, shape_b, dtype, "small" if np.dtype(dtype).kind in "iub" else "unit")
    b_domain = "nonzero" if name in DIVISORS and np.dtype(dtype).kind in "iu" else "any"
    return rand(rng, shape_a, dtype), rand(rng, shape_b, dtype, b_domain)


@pytest.mark.slow
@pytest.mark.parametrize("name,dtype", combos(BINARY, ALL_DTYPES, arity=2))
def test_binary(name, dtype, backend, rng):
    cases = [binary_inputs(rng, name, s, s, dtype) for s in SHAPES_2D]
    check(BINARY[name], cases, backend)


BROADCAST_PAIRS = [
    ((3, 4), (4,)), ((5, 7), (7,)), ((1000, 300), (300,)),
    ((3, 1), (1, 4)), ((6, 1), (1, 9)),
    ((0, 4), (4,)), ((0, 6), (6,)),
    ((2, 3, 4), (3, 1)), ((5, 6, 7), (6, 1)),
    ((4,), (3, 1, 4)), ((9,), (2, 5, 9)),
]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "floor_divide", "mod",
                                  "power", "maximum", "minimum", "op_mul", "op_truediv"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64], ids=dtype_id)
def test_binary_broadcast(name, dtype, backend, rng):
    cases = [binary_inputs(rng, name, sa, sb, dtype) for sa, sb in BROADCAST_PAIRS]
    check(BINARY[name], cases, backend)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_division_by_a_row_invariant_value(dtype, backend, rng):
    """Compiled kernels multiply by a row's reciprocal when it is a normal
    number and divide otherwise: rows whose divisor is 0, inf, NaN,
    subnormal or so large that its reciprocal is subnormal give numpy's
    quotients too."""
    info = np.finfo(dtype)
    d = np.array([[3.0], [0.0], [-0.0], [np.inf], [np.nan], [info.smallest_subnormal * 5], [info.max / 2],
                  [-7.5], [info.tiny * 2]], dtype)

    def fn(x, d):
        s = np.abs(x).sum(axis=-1, keepdims=True)
        return x / d, x / s, (x + 1) / (d * 2)
    x = rand(rng, (9, 40), dtype)
    x[0, :3] = [np.inf, -np.inf, 0.0]
    check(fn, [(x, d), (np.ascontiguousarray(x[:, :17]), d)], backend)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_binary_special_values(dtype, backend):
    """Every op (ufunc and operator) on every pair of special values: NaN,
    infs, signed zeros, negative bases of fractional powers, x // 0, x % inf."""
    x = special(dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))

    def fn(a, b):
        return {name: f(a, b) for name, f in BINARY.items()}
    check(fn, [(a, b), (a[:101], b[:101]), (a[-7:], b[-7:])], backend)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "floor_divide", "mod", "op_floordiv",
                                  "op_mod", "maximum", "minimum", "divide"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8], ids=dtype_id)
def test_binary_int_special_values(name, dtype, backend):
    """Integer wraparound, division by zero (numpy gives 0) and INT_MIN // -1."""
    info = np.iinfo(dtype)
    vals = sorted(v for v in {info.min, info.min + 1, -7, -1, 0, 1, 2, 7, info.max - 1, info.max}
                  if info.min <= v <= info.max)
    x = np.array(vals, dtype=dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))
    check(BINARY[name], [(a, b), (a[: len(a) // 2], b[: len(b) // 2])], backend)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8], ids=dtype_id)
def test_unary_int_special_values(dtype, backend):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, -1, 0, 1, info.max], dtype=np.int64)
    x = x[(x >= info.min) & (x <= info.max)].astype(dtype)

    def fn(a):
        return -a, np.abs(a), np.square(a), np.sign(a), ~a, a * 3, a // 4, a % 4, np.sqrt(a)
    check(fn, [(x,), (x[1:],), (np.concatenate([x, x]),)], backend)


MIXED = [(np.float32, np.float64), (np.int32, np.float32), (np.int64, np.float32), (np.int32, np.int64),
         (np.bool_, np.int32), (np.bool_, np.float32), (np.int8, np.uint8), (np.int32, np.int32)]


@pytest.mark.slow
@pytest.mark.parametrize("da,db", MIXED, ids=lambda d: dtype_id(d))
def test_mixed_dtype_promotion(da, db, backend, rng):
    def fn(a, b):
        return a + b, a * b, a / (np.abs(b) + 1), np.maximum(a, b), a < b, np.where(a > 0, a, b)
    check(fn, [(rand(rng, s, da, "positive"), rand(rng, s, db)) for s in SHAPES_2D], backend)


# ------------------------------------------------------ Python scalars

@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8, np.bool_], ids=dtype_id)
def test_python_scalars_are_weak(dtype, backend, rng):
    """NEP 50: Python scalars take the array's dtype (0.5 * x32 stays float32)."""
    def fn(x):
        out = [0.5 * x, x * 0.5, 2 * x, x + 1, 1 - x, x / 3, 3 / (x + 100), x * True, x > 0.5,
               np.maximum(x, 0), np.minimum(x, 0.25), np.where(x > 0, x, 0.0), np.clip(x, 0, 1),
               x + 0.5 * 2, (x * 2) ** 2, np.power(x, 2), x ** 0.5]
        if x.dtype != np.bool_:
            out += [-1 * x, x - 1.5, x // 2, x % 3, np.abs(x) ** 0.5]
        return out
    jf = check(fn, [(rand(rng, s, dtype, "positive"),) for s in SHAPES_2D], backend)
    if dtype == np.float32:
        x = rand(rng, (4, 6), dtype, "positive")
        assert all(r.dtype == np.float32 for r in jf(x)[:8] if r.dtype != np.bool_)


def test_python_float_argument_is_a_runtime_input(backend, rng):
    """A Python float argument is not baked into the trace: a new eps and a
    new shape reuse the one entry and give numpy's result."""
    def fn(x, eps):
        y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
        return y, eps * 2, y * eps + 1

    def x(*shape):  # integer-valued: the mean is exact in any summation order
        return rand(rng, shape, np.float32, "exact")
    cases = [(x(3, 4), 1e-5), (x(5, 7), 0.5), (x(5, 7), 1e-5), (x(1000, 300), 2.0), (x(6, 3), -0.0),
             (x(6, 3), float("inf"))]
    # y * eps + 1 cancels where y * eps ~ -1: a few ulp of those terms (the
    # compiled division by the row's norm multiplies by its reciprocal)
    jf = check(fn, cases, backend, term_scale=4.0)
    assert jf.stats()["traces"] == 1
    assert jf(*cases[0])[0].dtype == np.float32


@pytest.mark.parametrize("scalar", [np.float64(0.5), np.float32(0.5), np.int64(3), np.float16(2)],
                         ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=dtype_id)
def test_numpy_scalar_argument_is_strong(scalar, dtype, backend, rng):
    """np.float64 subclasses float but is a strongly typed numpy scalar."""
    def fn(x, s):
        return x * s, s + x, s * 2, np.maximum(x, s)
    cases = [(rand(rng, sh, dtype), type(scalar)(v)) for sh, v in [((3, 4), scalar), ((5, 7), 1.5),
                                                                    ((0, 3), 2), ((0, 5), -1)]]
    check(fn, cases, backend)


def test_numpy_scalar_types_called_on_traced_values_are_casts(backend, rng):
    """np.float32(x.sum()), np.float64(s), np.int64(x.shape[0]), np.float32
    of an array or a list: casts, as numpy's (np.float64(s) decided s's
    value, a compile per value; the others ran the function eagerly), and a
    numpy scalar where numpy gives one (so is z[()] of a 0-d array); the
    types still serve as dtypes, in isinstance and as dict keys."""
    def fn(x, z, s):
        return (np.float32(x.sum()) * x, np.float64(s) + x, np.int64(x.shape[0]), np.float32(x.sum()),
                np.float64(s), z[()], z[...] + 0, np.float32([x.sum(), 1.0]), np.bool_(x.sum() > 1),
                np.float64(x), x.astype(np.float32) * {np.float32: 2}[np.float32],
                np.zeros(3, np.int16) + isinstance(np.float64(1), np.float64) + np.finfo(np.float32).eps)
    jf = jit(fn, backend=backend)
    for n, s in ((5, 1.5), (9, -2.25), (2, 0.5), (30, 3.0), (1, 1.0), (0, -1.0)):
        x, z = rng.random(n), np.array(s * 2)
        for _ in range(2):
            got, want = jf(x, z, s), fn(x, z, s)
            assert_like_numpy(got, want, ulps=4)
            assert [type(g) for g in got] == [type(w) for w in want]
        if n == 30:  # (sizes 0 and 1 are signatures of their own)
            stats = jf.stats()
            assert stats["compiles"] == 1 and stats["graph_breaks"] == 0 and stats["eager_calls"] == 0, \
                jf.explain()


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=dtype_id)
def test_numpy_scalar_constants_are_strong(dtype, backend, rng):
    c64, c32, i64 = np.float64(0.5), np.float32(2.0), np.int64(7)

    def fn(x):
        return c64 * x, x + c32, x * i64, x + np.float64(1.0), np.where(x > 0, x, c64)
    check(fn, [(rand(rng, s, dtype),) for s in SHAPES_2D], backend)


def test_signed_zero_constants(backend, rng):
    """0.0 == -0.0, but they are different constants; x + 0.0 is not x for x = -0.0."""

    def fn(x):
        return (np.signbit(x * 0.0), np.signbit(x * -0.0), 1 / (x * 0.0), 1 / (x * -0.0),
                np.signbit(x + 0.0), np.signbit(0.0 + x), np.signbit(x - 0.0), np.signbit(x - -0.0),
                np.copysign(1.0, -0.0 + 0 * x))
    cases = [(np.where(rng.random(s) < 0.5, -0.0, rand(rng, s, np.float64, "positive")),) for s in SHAPES_2D]
    check(fn, cases, backend)


def test_nan_constants(backend, rng):
    def fn(x):
        return x + float("nan"), np.maximum(x, float("nan")), np.minimum(float("nan"), x), x * np.nan
    check(fn, [(rand(rng, s, np.float32),) for s in SHAPES_2D], backend)


# ---------------------------------------------------------- comparisons

COMPARE = {
    "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal,
    "op_lt": operator.lt, "op_le": operator.le, "op_gt": operator.gt, "op_ge": operator.ge,
    "op_eq": operator.eq, "op_ne": operator.ne,
}
COMPARE = {k: py(f) for k, f in COMPARE.items()}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_comparison(dtype, backend, rng):
    """Every comparison (ufunc and operator): array-array, array-int,
    float-array (reflected) and broadcast, in one function returning a dict."""

    def fn(a, b):
        return {name: (f(a, b), f(a, 1), f(0.5, a), f(a, b[:1])) for name, f in COMPARE.items()}
    # small integer values so that ties are common
    cases = [(rand(rng, s, np.int8, "small").astype(dtype), rand(rng, s, np.int8, "small").astype(dtype))
             for s in SHAPES_2D_NONEMPTY]
    check(fn, cases, backend)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_comparison_special_values(dtype, backend):
    x = special(dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))  # every pair of special values

    def fn(a, b):
        return {name: f(a, b) for name, f in COMPARE.items()}
    check(fn, [(a, b), (a[:50], b[:50])], backend)


# ----------------------------------------------------------------- logical

LOGICAL = {
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
    "logical_not": lambda a, b: np.logical_not(a), "and_op": operator.and_, "or_op": operator.or_,
    "xor_op": operator.xor, "invert_op": lambda a, b: ~a,
    "combined": lambda a, b: (a & ~b) | (np.logical_not(a) ^ b),
}
LOGICAL = {k: py(f) for k, f in LOGICAL.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name,dtype", combos(LOGICAL, ALL_DTYPES, arity=2))
def test_logical(name, dtype, backend, rng):
    cases = [(rand(rng, s, dtype), rand(rng, s, dtype)) for s in SHAPES_2D]
    check(LOGICAL[name], cases, backend)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_logical_special_values(dtype, backend):
    """NaN is truthy, -0.0 is falsy."""
    x = special(dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))

    def fn(a, b):
        return np.logical_and(a, b), np.logical_or(a, b), np.logical_xor(a, b), np.logical_not(a)
    check(fn, [(a, b), (a[:30], b[:30])], backend)


def test_logical_broadcast_and_comparison_chain(backend, rng):
    def fn(x, y):
        m = (x > 0) & (y < 1) | ~(x == y)
        return m, np.logical_and(m, x[:, :1] > 0), (~m).sum(axis=0), np.logical_not(m).any()
    check(fn, [(rand(rng, s, np.float32), rand(rng, s, np.float32)) for s in SHAPES_2D], backend)


# -------------------------------------------- where, maximum, clip, astype

@pytest.mark.slow
@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
def test_where(dtype, backend, rng):
    def fn(c, x, y):
        return (np.where(c, x, y), np.where(x > 0, x, 0), np.where(c, 1.0, 0.0), np.where(c, x, 2),
                np.where(c[:, :1], x, y[:1]), np.where(x > y, x - y, y - x), np.where(c, x, 0.5))
    cases = [(rand(rng, s, np.bool_), rand(rng, s, dtype), rand(rng, s, dtype)) for s in SHAPES_2D]
    check(fn, cases, backend)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", NUMERIC, ids=dtype_id)
def test_maximum_minimum_clip(dtype, backend, rng):
    def fn(x, y):
        lo = np.minimum(x, y)
        return (np.maximum(x, y), lo, np.maximum(x, 0), np.minimum(3, x), np.clip(x, -1, 1),
                np.clip(x, None, 2), np.clip(x, -2, None), x.clip(0, 5), x.clip(max=1),
                np.clip(x, lo, y), np.clip(x, y[:1], 10), np.clip(x, 0.5, 2.5), np.maximum(x, y[:, :1]))
    cases = [(rand(rng, s, dtype), rand(rng, s, dtype)) for s in SHAPES_2D]
    check(fn, cases, backend)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_maximum_minimum_clip_special_values(dtype, backend):
    """NaN propagates through maximum, minimum and clip; signed zeros."""
    x = special(dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))

    def fn(a, b):
        return np.maximum(a, b), np.minimum(a, b), np.clip(a, -1, 1), np.clip(a, b, 2.0), np.where(a > b, a, b)
    check(fn, [(a, b), (a[:40], b[:40])], backend)



@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_maximum_minimum_clip_signed_zero_ties(dtype, backend):
    """A tie of +0.0 and -0.0 gives numpy's zero: maximum and minimum its
    second operand in float32 and float64 (maximum(+0.0, -0.0) is -0.0) and
    its first in float16; clip keeps x by bounds that are one value each and
    takes the bound by arrays of bounds (float16: keeps x); and a sum over an
    axis of length 1 starts from +0.0 (assert_like_numpy compares the sign
    of every zero)."""
    def fn(a, b):
        return (np.maximum(a, b), np.maximum(b, a), np.minimum(a, b), np.minimum(b, a), np.clip(a, 0.0, 1.0),
                np.clip(b, -1.0, -0.0), np.clip(b, a, a + 1), np.clip(a, b - 1, b), np.maximum(0.0, b),
                np.minimum(a, -0.0), b[:, None].sum(-1), b[:, None].mean(-1))
    zeros = lambda n, z: np.full(n, z, dtype)  # noqa: E731
    check(fn, [(zeros(n, 0.0), zeros(n, -0.0)) for n in (1, 3, 64, 1000)], backend)


CASTS = [np.float32, np.float64, np.int8, np.int32, np.int64, np.bool_]


@pytest.mark.slow
@pytest.mark.parametrize("src", ALL_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("dst", CASTS, ids=dtype_id)
def test_astype(src, dst, backend, rng):
    def fn(x):
        return x.astype(dst), np.astype(x, dst), x.astype(dst) * 2
    # values in int8 range: float -> int casts of out-of-range values are undefined
    cases = [(rand(rng, s, src, "exact"),) for s in SHAPES_2D]
    check(fn, cases, backend)


def test_astype_spellings(backend, rng):
    def fn(x):
        return (x.astype(int), x.astype(float), x.astype(bool), x.astype("float32"), x.astype("int16"),
                x.astype(np.float64, copy=False), x.copy(), np.asarray(x, dtype=np.float32), (x > 0).astype(x.dtype))
    check(fn, [(rand(rng, s, np.float32, "exact"),) for s in SHAPES_2D], backend)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_astype_special_values(dtype, backend):
    x = special(dtype)

    def fn(x):
        return x.astype(np.float32), x.astype(np.float64), x.astype(bool), np.isnan(x).astype(np.int32)
    check(fn, [(x,), (x[::-1][:9].copy(),)], backend)


# ----------------------------------------------------------------- reductions

REDUCTIONS = ["sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin", "any", "all"]
NO_IDENTITY = {"max", "min", "argmax", "argmin"}  # numpy raises on an empty reduction
AXES = [None, 1, -1, -3, (0, 2), (-1, 1), ()]


def _axes_for(name, shape):
    """Axis specs valid for this reduction and shape (numpy raises on an empty
    reduction of max/min/arg*; arg* takes no tuples)."""
    out = []
    for ax in AXES:
        if name.startswith("arg") and isinstance(ax, tuple):
            continue
        if name in NO_IDENTITY:
            axes = range(len(shape)) if ax is None else (ax if isinstance(ax, tuple) else (ax,))
            if any(shape[a] == 0 for a in axes):
                continue
        out.append(ax)
    return out


def _reduction_fn(name, axes):
    def fn(x):
        out = {}
        for ax in axes:
            for keepdims in (False, True):
                out[f"np.{name}/{ax}/{keepdims}"] = getattr(np, name)(x, axis=ax, keepdims=keepdims)
                out[f"x.{name}/{ax}/{keepdims}"] = getattr(x, name)(axis=ax, keepdims=keepdims)
        return out
    return fn


REDUCTION_DTYPES = [np.float32, np.float64, np.int32, np.bool_]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", REDUCTION_DTYPES, ids=dtype_id)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction(name, dtype, backend, rng):
    """Every axis form (None, int, negative, tuple, empty tuple) with and
    without keepdims, as function and as method, in one jitted function
    returning a dict."""
    domain = "prod" if name == "prod" else "exact"  # sums and products exact in any order
    groups = [[(2, 3, 4), (5, 3, 7), (100, 30, 100)], [(3, 1, 5), (4, 1, 6)], [(0, 2, 3), (0, 4, 5)],
              [(3, 4, 0), (5, 2, 0)]]
    for group in groups:
        fn = _reduction_fn(name, _axes_for(name, group[0]))
        check(fn, [(rand(rng, s, dtype, domain),) for s in group], backend)


@pytest.mark.slow
@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_reduction_special_values(name, dtype, backend):
    x = special(dtype)
    x2 = np.stack([x, x[::-1], np.where(np.isnan(x), 0, x)])

    def fn(a):
        f = getattr(np, name)
        return f(a), f(a, axis=0), f(a, axis=-1), f(a[:, 3:], axis=1)
    check(fn, [(x2,), (x2[:, :11],), (np.concatenate([x2, -x2]),)], backend)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "var", "std", "argmax", "argmin"])
@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_reduction_1d_large(name, dtype, backend, rng):
    def fn(x):
        return getattr(np, name)(x), getattr(x, name)(axis=0, keepdims=True)
    check(fn, [(rand(rng, s, dtype, "exact"),) for s in SHAPES_1D if s[0] > 0], backend)


def test_reduction_without_keepdims_broadcasts_along_the_last_axis(backend, rng):
    """x.max(-1) has shape (R,): numpy broadcasts it along the columns of a
    square x, not along its rows (a row kernel must not fuse it as a row value)."""
    def fn(x):
        return x - x.max(axis=-1), x / x.sum(axis=-1), x.sum(axis=-1) * 2 + 1
    check(fn, [(rand(rng, (16, 16), np.float32, "positive"),), (rand(rng, (9, 9), np.float32, "positive"),)],
          backend)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_long_row_sums_overflow_and_nan_like_numpy(dtype, backend, rng):
    """Rows of several summation blocks: an overflow across blocks gives inf
    (not NaN from a compensation term), inf - inf and NaN give NaN."""
    big = np.finfo(dtype).max * 0.75
    rows = np.ones((5, 5000), dtype)
    rows[0, [10, 3000]] = big                 # overflows only when two blocks meet
    rows[1, [10, 3000]] = [np.inf, -np.inf]
    rows[2, 4000] = np.nan
    rows[3, ::2] = -1.0                        # cancels to zero
    rows[4] = rng.standard_normal(5000)

    def fn(x):
        return x.sum(axis=-1), x.mean(axis=-1, keepdims=True), x[4].var(), x.max(axis=-1)
    check(fn, [(rows,), (np.ascontiguousarray(rows[:, :4500]),)], backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=dtype_id)
def test_column_sums_of_an_input_contiguous_down_its_columns_are_numpys_to_the_bit(dtype, backend, rng):
    """x.sum(axis=0) and x.mean(axis=0) of a Fortran-ordered x: numpy's
    reduction walks each contiguous column, its pairwise sum; so does the
    column kernel, to the bit.  It added the rows one after another: `x -
    x.mean(axis=0)` of equal rows was not 0, and a float32 column of 10**6
    rows 1e-5 off where numpy's is 1e-8 (probe 18).  (One column, (n, 1),
    is a row's sum: shapejit's blocked order, a few ulp from numpy's.)"""
    def fn(x):
        return x.sum(axis=0), x - x.mean(axis=0), x.mean(axis=0, keepdims=True)
    f = jit(fn, backend=backend)
    for n in (0, 1, 7, 8, 9, 127, 128, 129, 1000, 5001):
        for k in (2, 3, 70):
            x = np.asfortranarray(rng.standard_normal((n, k)).astype(dtype) + 10)
            with np.errstate(invalid="ignore", divide="ignore"):
                want = fn(x)
            for got, w in zip(f(x), want):
                np.testing.assert_array_equal(got, w)
    x = np.asfortranarray(np.broadcast_to(rng.standard_normal(2), (9, 2)))
    assert (f(x)[1] == 0).all()
    t = np.transpose(rng.standard_normal((3, 4, 300)).astype(dtype), (0, 2, 1))  # (its axis 1 contiguous)
    g = jit(lambda y: y.sum(axis=1), backend=backend)
    np.testing.assert_array_equal(g(t), t.sum(axis=1))


def test_reduction_positional_and_keyword_forms(backend, rng):
    def fn(x):
        return (np.sum(x, 0), x.sum(1), x.max(-1), np.mean(x, (0, 1)), x.argmax(1), x.min(axis=0),
                np.var(x, ddof=1), x.std(axis=0, ddof=1), np.var(x, 1, keepdims=True), x.any(0), np.all(x > -30, 1),
                np.sum(x, dtype=np.float64), x.mean(axis=1, dtype=np.float64), np.prod(x[:, :2], axis=1),
                np.amax(x, axis=0), np.amin(x), x.sum(axis=-1, keepdims=True))
    check(fn, [(rand(rng, s, np.float32, "exact"),) for s in SHAPES_3D_NONEMPTY[:4]], backend)


def test_reduction_of_integers_and_bools_promotes_like_numpy(backend, rng):
    def fn(i8, b):
        return (i8.sum(), i8.sum(axis=0), i8.prod(axis=1), i8.mean(axis=0), i8.var(), b.sum(axis=1),
                b.mean(), np.sum(b), b.any(axis=0), i8.argmin(axis=1), i8.max(axis=0))
    cases = [(rand(rng, s, np.int8), rand(rng, s, np.bool_)) for s in SHAPES_2D_NONEMPTY]
    check(fn, cases, backend)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_], ids=dtype_id)
def test_prod_any_all_and_dots_run_in_kernels(dtype, backend, rng):
    """prod is a kernel reduction; any and all are counts (sum(x != 0) > 0,
    sum(x == 0) == 0) that fuse with their producers; a float dot of more
    than a few elements is sum(a * b): none of them is a numpy step."""
    def fn(x, v, w):
        y = x * 2 if x.dtype != np.bool_ else ~x
        return (np.prod(y, axis=-1), y.prod(axis=0), np.prod(y), y.any(axis=0), np.all(y, axis=1),
                np.any(y), y.all(), (y > 1).any(axis=-1, keepdims=True), v @ w, (v * 2) @ w + 1.0)
    cases = [(rand(rng, s, dtype, "prod"), rand(rng, (n,), np.float64), rand(rng, (n,), np.float64))
             for s, n in [((9, 11), 70), ((13, 5), 100), ((0, 7), 90), ((6, 0), 0), ((8, 1), 200)]]
    check(fn, cases, backend)
    if backend == "llvm":  # (the plan of the entry for dynamic dims: 0 and 1 make static tiny spaces)
        jf = jit(fn)
        jf(*cases[0])
        plan = jf.explain()
        steps = [ln.strip() for ln in plan.splitlines() if ln.strip().startswith("numpy: ")]
        assert not [s for s in steps if any(f" {op} " in s for op in ("prod", "any", "all", "matmul"))], plan


@pytest.mark.parametrize("name", sorted(NO_IDENTITY))
def test_reduction_of_empty_axis_raises_like_numpy(name, backend, rng):
    def fn(x):
        return getattr(np, name)(x, axis=0)
    check_raises(fn, [(rand(rng, s, np.float64),) for s in [(0, 3), (0, 5)]], backend)


# --------------------------------------------------------------- shape ops

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_reshape(dtype, backend, rng):
    def fn(x):
        n0, n1, n2 = x.shape
        return (x.reshape(-1), x.reshape(n0, -1), x.reshape((-1, n2)), np.reshape(x, (n0 * n1, n2)),
                x.reshape(n0, n1, n2), x.reshape((n0, n1 * n2)), x.reshape(-1, 1), x.reshape(1, -1),
                np.reshape(x, -1), x.ravel(), x.flatten(), x.reshape(n0, 1, n1, n2, 1), x.reshape(n0, n1, -1),
                x.reshape([x.shape[0], -1]))
    check(fn, [(rand(rng, s, dtype),) for s in SHAPES_3D_NONEMPTY], backend)


def test_reshape_zero_size(backend, rng):
    """-1 is only inferable next to a nonzero known size (numpy raises otherwise)."""
    def fn(x):
        n0, n1, n2 = x.shape
        return (x.reshape(-1), x.reshape((-1, n2)), x.reshape(n0 * n1, n2), x.reshape(n0, n1 * n2),
                x.reshape(-1, 1), x.reshape(1, -1), x.ravel(), x.reshape(n0, 1, n1, n2, 1))
    shapes = [(0, 2, 3), (0, 4, 5), (3, 0, 4), (5, 0, 2)]
    check(fn, [(rand(rng, s, np.float32),) for s in shapes], backend)


def test_reshape_moving_symbolic_sizes(backend, rng):
    def fn(x):
        n0, n1, n2 = x.shape
        return x.reshape(n1, n0, -1), x.reshape(n2, -1), x.reshape(-1, n0 * n2), x.T.reshape(n2, -1)
    check(fn, [(rand(rng, s, np.float64),) for s in SHAPES_3D_NONEMPTY], backend)


def test_reshape_constant_sizes(backend, rng):
    """-1 next to constants: divisibility is guarded, not the size."""
    def fn(x):
        return x.reshape(-1, 4), x.reshape(2, -1, 2), x.reshape(x.shape[0] // 4, 4)
    check(fn, [(rand(rng, (n,), np.float32),) for n in (8, 12, 36, 100_000)], backend)


def test_reshape_split_dim(backend, rng):
    """x.reshape(B, heads, -1): the typical attention split."""
    def fn(x):
        b, d = x.shape
        return x.reshape(b, 2, d // 2), x.reshape(b, 2, -1).transpose(1, 0, 2)
    check(fn, [(rand(rng, s, np.float32),) for s in [(3, 4), (5, 8), (7, 10), (1000, 300)]], backend)


def test_reshape_errors_like_numpy(backend, rng):
    check_raises(lambda x: x.reshape(2, -1), [(rand(rng, (3, 5), np.float64),), (rand(rng, (5, 7), np.float64),)],
                 backend)
    check_raises(lambda x: x.reshape(x.shape[0], 5), [(rand(rng, (3, 4), np.float64),),
                                                      (rand(rng, (5, 7), np.float64),)], backend)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_], ids=dtype_id)
def test_transpose_swapaxes_moveaxis(dtype, backend, rng):
    def fn(x):
        return (x.T, x.transpose(), x.transpose(1, 0, 2), np.transpose(x, (2, 0, 1)), x.transpose((0, 2, 1)),
                np.transpose(x), np.swapaxes(x, 0, 2), x.swapaxes(-1, -2), np.moveaxis(x, 0, -1),
                np.moveaxis(x, [0, 1], [-1, -2]), np.moveaxis(x, -1, 0), x.mT, x.transpose(0, 1, 2),
                x.T.T, x.transpose(2, 1, 0) + 0)
    check(fn, [(rand(rng, s, dtype),) for s in SHAPES_3D], backend)


def test_transpose_2d_and_1d(backend, rng):
    def fn(x, v):
        return x.T, np.transpose(x), x.T @ x, v.T, np.swapaxes(x, 0, 1), x.T[::-1]
    cases = [(rand(rng, s, np.float64, "exact"), rand(rng, (s[1] + 1,), np.float64)) for s in SHAPES_2D]
    check(fn, cases, backend)


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=dtype_id)
def test_expand_dims_squeeze(dtype, backend, rng):
    def fn(x):
        return (np.expand_dims(x, 0), np.expand_dims(x, -1), np.expand_dims(x, (0, 2)), np.expand_dims(x, 1),
                x[None], x[:, None], x[..., None], np.squeeze(np.expand_dims(x, 1), 1),
                np.squeeze(x[None, :, None]), np.squeeze(x), x[None].squeeze(axis=0))
    check(fn, [(rand(rng, s, dtype),) for s in SHAPES_2D], backend)


def test_squeeze_static_ones(backend, rng):
    def fn(x):
        return np.squeeze(x), x.squeeze(1), np.squeeze(x, axis=(1, 3)), x.squeeze(-1)
    check(fn, [(rand(rng, s, np.float64),) for s in [(3, 1, 4, 1), (5, 1, 7, 1), (0, 1, 2, 1), (0, 1, 5, 1),
                                                      (1, 1, 1, 1)]], backend)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_], ids=dtype_id)
def test_broadcast_to(dtype, backend, rng):
    def fn(x, row):
        return (np.broadcast_to(x, (3,) + x.shape), np.broadcast_to(x[:, :1], (x.shape[0], 4)),
                np.broadcast_to(row, x.shape), np.broadcast_to(x[:1], x.shape), np.broadcast_to(x, x.shape),
                np.broadcast_to(row[None], (2,) + x.shape))
    cases = [(rand(rng, s, dtype), rand(rng, (s[1],), dtype)) for s in SHAPES_2D if s[1] > 0]
    check(fn, cases, backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_], ids=dtype_id)
def test_concatenate(dtype, backend, rng):
    def fn(a, b):
        return (np.concatenate([a, b]), np.concatenate((a, b, a), axis=0), np.concatenate([a, a], axis=1),
                np.concatenate([b, b], axis=-1), np.concatenate([a, b], axis=None), np.concatenate([a]),
                np.concatenate([a[:, :1], a], axis=1))
    shapes = [((3, 4), (2, 4)), ((5, 7), (6, 7)), ((1000, 300), (3, 300)), ((0, 4), (3, 4)), ((0, 5), (2, 5)),
              ((1, 3), (1, 3)), ((1, 6), (1, 6)), ((4, 2), (0, 2)), ((6, 3), (0, 3))]
    check(fn, [(rand(rng, sa, dtype), rand(rng, sb, dtype)) for sa, sb in shapes], backend)


def test_concatenate_promotes_dtypes(backend, rng):
    def fn(a, b, c):
        return np.concatenate([a, b]), np.concatenate([b, c], axis=0), np.concatenate([c, a])
    cases = [(rand(rng, (n, 3), np.float32), rand(rng, (n + 1, 3), np.int32), rand(rng, (2, 3), np.bool_))
             for n in (2, 3, 9)]
    check(fn, cases, backend)


@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=dtype_id)
def test_stack(dtype, backend, rng):
    def fn(a, b):
        return (np.stack([a, b]), np.stack([a, b], axis=1), np.stack((a, b, a), axis=-1),
                np.stack([a, b], axis=-2), np.stack([a]))
    cases = [(rand(rng, s, dtype), rand(rng, s, dtype)) for s in SHAPES_2D]
    check(fn, cases, backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32], ids=dtype_id)
def test_split_equal_parts(dtype, backend, rng):
    def fn(x):
        return np.split(x, 2, axis=0), np.split(x, 2, axis=1), np.split(x, 2, axis=-1), np.split(x, 1, axis=0)
    shapes = [(4, 6), (6, 8), (10, 2), (1000, 300), (0, 4), (0, 8), (2, 2)]
    check(fn, [(rand(rng, s, dtype),) for s in shapes], backend)


def test_split_three_parts_and_indices(backend, rng):
    def fn(x):
        q, k, v = np.split(x, 3, axis=-1)
        return q, k, v, q @ k.T, np.split(x, [1, 3], axis=1), np.split(x, 3)
    shapes = [(3, 6), (6, 9), (9, 12), (300, 300)]
    check(fn, [(rand(rng, s, np.float64, "exact"),) for s in shapes], backend)


def test_split_unequal_raises_like_numpy(backend, rng):
    check_raises(lambda x: np.split(x, 2, axis=1), [(rand(rng, s, np.float64),) for s in [(3, 5), (4, 7)]],
                 backend)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_data_movement_keeps_special_values_bit_exact(dtype, backend):
    """Views, copies and concatenation move NaN, infs and -0.0 unchanged
    (compared bit for bit: allclose does not see the sign of zero)."""
    def fn(x):
        n = x.shape[0]
        a, b = np.split(x, 2, axis=1)
        return (x.T, x.reshape(-1), x[::-1, 1:], x[n // 2 :], np.concatenate([x, x[:1]]), np.stack([a, b], -1),
                np.broadcast_to(x[:1], x.shape), np.expand_dims(x, 0), np.swapaxes(x[None], 0, 2), x.copy(),
                np.where(np.isnan(x), x, -x), np.moveaxis(x, 0, 1)[..., ::2])
    sp = special(dtype)
    cases = [(sp.reshape(3, 6),), (sp.reshape(9, 2),), (np.concatenate([sp, sp[::-1]]).reshape(6, 6),)]
    jf = check(fn, cases, backend)
    for (x,) in cases:
        for g, w in zip(jf(x), fn(x)):
            assert np.array_equal(np.asarray(g).view(f"u{w.itemsize}"), np.asarray(w).view(f"u{w.itemsize}"))


# ---------------------------------------------------------------- indexing

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_], ids=dtype_id)
def test_basic_indexing_2d(dtype, backend, rng):
    def fn(x):
        n = x.shape[0] // 2
        return (x[0], x[-1], x[1, 2], x[-2, -1], x[1:], x[:-1], x[::2], x[::-1], x[1::3], x[-1::-2],
                x[:, ::-1], x[::-2, 1:-1], x[None, :, None], x[..., 0], x[0, ...], x[..., None], x[:n],
                x[n:], x[:, : x.shape[1] // 2], x[3:1], x[::-3], x[n], x[-n], x[:], x[...], x[1:3, ::2],
                x[np.int64(1)], x[2:-1:2, -2::-1], x[:n][::-1], x[x.shape[0] - 1])
    shapes = [(4, 6), (7, 5), (9, 4), (1000, 300)]
    check(fn, [(rand(rng, s, dtype),) for s in shapes], backend)


def test_basic_indexing_0_and_1_dims(backend, rng):
    def fn(x):
        n = x.shape[0] // 2
        return x[1:], x[::-1], x[:, 1:], x[:n], x[n:], x[:, ::-2], x[None, ..., None], x[..., -1], x[:, 0]
    shapes = [(0, 5), (0, 8), (1, 5), (1, 8), (3, 5), (8, 9)]
    check(fn, [(rand(rng, s, np.float64),) for s in shapes], backend)


def test_basic_indexing_3d(backend, rng):
    def fn(x):
        return (x[1:, ..., ::2], x[:, 0, :], x[-1, :, -1], x[..., ::-1][0], x[:, None, 1:, None],
                x[0, 1, 2], x[..., 1], x[::-1, ::-1, ::-1], x[1, ...], x[..., 1:2, :])
    shapes = [(3, 4, 5), (5, 3, 7), (6, 5, 3), (100, 30, 100)]
    check(fn, [(rand(rng, s, np.float32),) for s in shapes], backend)


def test_basic_indexing_1d_large(backend, rng):
    def fn(x):
        n = x.shape[0]
        return (x[1:], x[::-1], x[: n // 2], x[n // 2 :: -1], x[2], x[-3], x[::7], x[1::-1], x[n // 3 : 2 * n // 3],
                x[-n // 2 :], x[: n - 1], x[::-3])
    shapes = [(9,), (17,), (100_000,), (4,)]
    check(fn, [(rand(rng, s, np.float64),) for s in shapes], backend)


def test_indexing_clamps_like_numpy(backend, rng):
    """Slices past the ends clamp; the clamping branch may guard, but results
    must be numpy's for every shape."""
    def fn(x):
        return x[5:], x[:100], x[-100:], x[2:50:3], x[-50:-1], x[100::-1], x[:-100:-1]
    shapes = [(3, 2), (4, 3), (7, 2), (9, 5), (200, 2)]
    jf = jit(fn, backend=backend)
    for s in shapes:
        x = rand(rng, s, np.float64)
        assert_like_numpy(jf(x), fn(x))
    assert jf.stats()["fallbacks"] == 0


def test_indexing_errors_like_numpy(backend, rng):
    cases = [(rand(rng, s, np.float64),) for s in [(3, 4), (5, 6)]]
    check_raises(lambda x: x[10], cases, backend)
    check_raises(lambda x: x[0, 0, 0], cases, backend)
    check_raises(lambda x: x[..., ...], cases, backend)


# ------------------------------------------------------------ matmul, einsum

MATMUL_DTYPES = [np.float32, np.float64, np.int64]


@pytest.mark.parametrize("dtype", MATMUL_DTYPES, ids=dtype_id)
def test_matmul_2d(dtype, backend, rng):
    def fn(a, b):
        return a @ b, np.matmul(a, b), np.dot(a, b), a.dot(b), (a @ b).T @ a.T.T
    pairs = [((3, 4), (4, 5)), ((6, 7), (7, 2)), ((1000, 300), (300, 3)), ((0, 3), (3, 4)), ((0, 5), (5, 7)),
             ((3, 0), (0, 4)), ((5, 0), (0, 2)), ((1, 4), (4, 5)), ((1, 6), (6, 2)), ((4, 3), (3, 1)),
             ((7, 6), (6, 1))]
    check(fn, [(rand(rng, sa, dtype, "exact"), rand(rng, sb, dtype, "exact")) for sa, sb in pairs], backend)


@pytest.mark.parametrize("dtype", MATMUL_DTYPES, ids=dtype_id)
def test_matmul_1d(dtype, backend, rng):
    def fn(m, v, w):
        return v @ w, np.dot(v, w), m @ v, v @ m.T, np.dot(m, v), np.matmul(v, m.T), m.T.dot(m @ v)
    cases = [(rand(rng, (k, n), dtype, "exact"), rand(rng, (n,), dtype, "exact"), rand(rng, (n,), dtype, "exact"))
             for k, n in [(3, 4), (6, 7), (2, 5), (300, 1000), (0, 4), (0, 7)]]
    check(fn, cases, backend)


@pytest.mark.parametrize("dtype", MATMUL_DTYPES, ids=dtype_id)
def test_matmul_batched_broadcasting(dtype, backend, rng):
    def fn(a, b):
        return a @ b, np.matmul(a, b), a @ b[:1], np.matmul(a[:1], b), a @ b.swapaxes(-1, -2).swapaxes(-1, -2)
    pairs = [((2, 3, 4), (2, 4, 5)), ((5, 6, 7), (5, 7, 2)), ((1, 3, 4), (3, 4, 5)), ((1, 6, 7), (4, 7, 2)),
             ((3, 2, 4), (1, 4, 5)), ((4, 3, 5), (1, 5, 2)), ((40, 30, 20), (40, 20, 30)), ((0, 3, 4), (0, 4, 2)),
             ((0, 2, 5), (0, 5, 3))]
    check(fn, [(rand(rng, sa, dtype, "exact"), rand(rng, sb, dtype, "exact")) for sa, sb in pairs], backend)


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_matmul_special_values(dtype, backend, rng):
    """NaN and inf propagate through contractions (inf * 0 is NaN, inf - inf
    is NaN); the finite parts are integer-valued, so exact in any order."""
    def fn(a, b):
        return a @ b, np.einsum("ij,jk->ik", a, b), a @ b[:, 0], np.dot(a[0], b)
    cases = []
    for n, k, m in [(3, 4, 5), (6, 7, 2), (5, 9, 8)]:
        a, b = rand(rng, (n, k), dtype, "exact"), rand(rng, (k, m), dtype, "exact")
        for arr in (a, b):
            idx = rng.random(arr.shape) < 0.2
            arr[idx] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], size=int(idx.sum()))
        cases.append((a, b))
    check(fn, cases, backend)


def test_matmul_4d_broadcast(backend, rng):
    def fn(a, b):
        return a @ b, a @ b[0]
    pairs = [((2, 1, 3, 4), (3, 4, 5)), ((3, 1, 6, 7), (4, 7, 2)), ((2, 5, 3, 4), (5, 4, 2)), ((3, 6, 2, 5), (6, 5, 4))]
    check(fn, [(rand(rng, sa, np.float32, "exact"), rand(rng, sb, np.float32, "exact")) for sa, sb in pairs],
          backend)


def test_matmul_mismatch_raises_like_numpy(backend, rng):
    cases = [(rand(rng, (3, 4), np.float64), rand(rng, (5, 2), np.float64)),
             (rand(rng, (6, 7), np.float64), rand(rng, (3, 2), np.float64))]
    check_raises(lambda a, b: a @ b, cases, backend)


EINSUM = {
    "ij,jk->ik": [((3, 4), (4, 5)), ((6, 7), (7, 2)), ((300, 100), (100, 30)), ((0, 3), (3, 4)), ((0, 6), (6, 2))],
    "ij,jk": [((3, 4), (4, 5)), ((6, 7), (7, 2))],
    "bij,bjk->bik": [((2, 3, 4), (2, 4, 5)), ((5, 6, 7), (5, 7, 2)), ((1, 3, 4), (1, 4, 2)), ((1, 5, 6), (1, 6, 3))],
    "bhqd,bhkd->bhqk": [((2, 3, 4, 5), (2, 3, 6, 5)), ((3, 2, 5, 4), (3, 2, 7, 4)), ((4, 8, 16, 8), (4, 8, 16, 8))],
    "ij->ji": [((3, 4),), ((6, 7),), ((0, 5),), ((0, 3),)],
    "ii->i": [((3, 3),), ((6, 6),), ((100, 100),)],
    "ii": [((3, 3),), ((6, 6),)],
    "ij->": [((3, 4),), ((6, 7),)],
    "ij->j": [((3, 4),), ((6, 7),)],
    "i,i->": [((3,), (3,)), ((7,), (7,))],
    "i,j->ij": [((3,), (4,)), ((7,), (2,))],
}


@pytest.mark.parametrize("subscripts", list(EINSUM))
@pytest.mark.parametrize("dtype", MATMUL_DTYPES, ids=dtype_id)
def test_einsum(subscripts, dtype, backend, rng):
    cases = [tuple(rand(rng, s, dtype, "exact") for s in shapes) for shapes in EINSUM[subscripts]]
    check(lambda *ops: np.einsum(subscripts, *ops), cases, backend)


# ---------------------------------------------------------------- creation

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_like_creation(dtype, backend, rng):
    def fn(x):
        return (np.zeros_like(x), np.ones_like(x), np.full_like(x, 7), np.full_like(x, 1.5),
                np.zeros_like(x, dtype=np.float64), np.ones_like(x, np.int8), np.full_like(x, 3, np.float32),
                np.empty_like(x).shape, np.empty_like(x).dtype.str, np.ones_like(x, shape=(x.shape[0], 2)),
                x + np.ones_like(x))
    check(fn, [(rand(rng, s, dtype),) for s in SHAPES_2D], backend)


def test_creation_with_symbolic_shapes(backend, rng):
    def fn(x):
        n, m = x.shape
        return (np.zeros((n, 3)), np.ones((m,), dtype=np.float32), np.zeros(x.shape), np.ones(n),
                np.full((n, 2), 1.5), np.full(x.shape, 2, dtype=np.int32), np.zeros((n, 3), np.int64),
                np.empty((n, m)).shape, np.zeros((3, 2)), np.ones((n * 2, m - 1)), x + np.ones((1, m)),
                np.zeros((n, 3)) + x[:, :1])
    check(fn, [(rand(rng, s, np.float32),) for s in SHAPES_2D_NONEMPTY if s[1] >= 2], backend)


def test_arange_symbolic_length(backend, rng):
    def fn(x):
        n, m = x.shape
        return (np.arange(n), np.arange(m, dtype=np.float32), np.arange(1, n), np.arange(0, n, 2),
                np.arange(n * 2), np.arange(n - 1, -1, -1), np.arange(5), x + np.arange(m),
                x.astype(np.float32) * np.arange(m), np.arange(n)[:, None] * np.arange(m))
    check(fn, [(rand(rng, s, np.float64),) for s in [(3, 4), (5, 7), (2, 2), (1000, 300), (1, 5), (1, 9)]],
          backend)


def test_arange_new_length_does_not_retrace(backend, rng):
    def fn(x):
        return np.arange(x.shape[0])
    cases = [(rand(rng, (n,), np.float32),) for n in (2, 3, 17, 100_000)]
    jf = check(fn, cases, backend)
    assert jf.stats()["traces"] == 1


# --------------------------------------------------- structures and results

def test_nested_arguments_and_results(backend, rng):
    def fn(pair, cfg):
        a, b = pair
        s = a + b
        return (s, {"scaled": cfg["w"] * cfg["scale"], "both": [s.sum(axis=0), cfg["w"]]}), (b, a.shape[0])
    cases = []
    for s, t in [((3, 4), (2, 5)), ((6, 7), (9, 3)), ((1000, 300), (2, 2))]:
        cases.append(((rand(rng, s, np.float32), rand(rng, s, np.float32)),
                      {"w": rand(rng, t, np.float64), "scale": 0.5}))
    check(fn, cases, backend)


def test_list_and_dict_arguments(backend, rng):
    def fn(xs, d):
        return [x * d["k"] for x in xs], {k: v.T for k, v in d.items() if k != "k"}
    cases = [([rand(rng, s, np.float64) for _ in range(3)], {"k": 2.0, "m": rand(rng, s, np.int32)})
             for s in [(3, 4), (5, 6), (0, 3), (0, 7)]]
    check(fn, cases, backend)


def test_return_input_unchanged(backend, rng):
    def fn(x, y):
        return x, (y, x), {"x": x}
    check(fn, [(rand(rng, s, np.float32), rand(rng, s[:1], np.int64)) for s in SHAPES_2D], backend)


def test_return_single_input(backend, rng):
    check(lambda x: x, [(rand(rng, s, np.float64),) for s in SHAPES_2D], backend)


def test_return_python_int_from_shapes(backend, rng):
    def fn(x):
        return x.shape[0] * 2

    def fn2(x):
        n, m = x.shape
        return x.shape, n * m + 1, x.ndim, x.size, (n - 1) // 2, np.shape(x), m % 3, x * n

    check(fn, [(rand(rng, s, np.float64),) for s in SHAPES_2D], backend)
    jf = check(fn2, [(rand(rng, s, np.float64),) for s in SHAPES_2D], backend)
    x = rand(rng, (11, 5), np.float64)
    out = jf(x)
    assert type(out[1]) is int and out[1] == 56


def test_jit_of_a_ufunc_object(backend, rng):
    check(np.negative, [(rand(rng, s, np.float64),) for s in [(3, 4), (5, 6)]], backend)


def test_python_float_result_and_constants(backend, rng):
    def fn(x, eps):
        return eps, eps * 3 + 1, x * 0 + eps, "label", None, 3
    check(fn, [(rand(rng, s, np.float32), e) for s, e in [((3, 4), 0.5), ((5, 6), 1.25), ((2, 9), -3.0)]], backend)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
def test_scans_and_sorts_are_numpy_steps_of_symbolic_shape(dtype, backend, rng):
    """np.cumsum, np.cumprod, np.sort, np.argsort (functions and methods,
    flattened for axis=None) keep symbolic shapes: no eager node with
    unknown sizes, one trace for every shape; ndarray.sort writes the
    caller's array."""
    def fn(x):
        s = np.cumsum(x, axis=0) + x
        return s, x.cumsum(), np.cumprod(x, axis=-1), np.sort(x, axis=0), x.argsort(axis=-1), np.sort(x, axis=None)

    def in_place(x):
        x.sort(axis=0)
        return x[0] * 2

    cases = [(rand(rng, s, dtype, "small"),) for s in SHAPES_2D_NONEMPTY]
    check(fn, cases, backend)
    jf = jit(fn, backend=backend)
    for (x,) in cases:
        jf(x)
    assert jf.stats()["eager_nodes"] == 0 and "= eager" not in jf.explain()
    j2 = jit(in_place, backend=backend)
    for shape in ((4, 5), (9, 3)):
        x = rand(rng, shape, dtype, "small")
        mine, theirs = x.copy(), x.copy()
        j2(mine.copy())
        assert_like_numpy(j2(mine), in_place(theirs))
        np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_round_is_numpys_steps(dtype, backend, rng):
    """np.round/np.around/ndarray.round with any decimals: numpy's own
    steps (rint of a scaled value), so bit-equal, and a kernel; accumulate
    of a ufunc is a numpy step of symbolic shape."""
    def fn(x):
        tens = x.round(-1) if x.dtype.kind == "f" else x  # (numpy's integer rounding to tens: a numpy step)
        return (np.round(x), np.around(x * 1.5, 2), tens, np.round(x, decimals=3) + 1,
                np.maximum.accumulate(x, axis=-1))
    cases = [((rand(rng, s, dtype) * 37.3).astype(dtype),) for s in SHAPES_2D_NONEMPTY]
    check(fn, cases, backend, ulps=0)
    jf = jit(fn, backend=backend)
    jf(*cases[0])
    assert jf.stats()["eager_nodes"] == 0 and "= eager" not in jf.explain()


SMALL_INTS = [np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64]
INT_PROGRAMS = {
    "arithmetic": lambda a, b: a + b * 3 - (a * a),
    "division": lambda a, b: (a // b, a % b),
    "extremes": lambda a, b: (np.maximum(a, b), np.minimum(a, 7), np.clip(a, 2, 100)),
    "comparisons": lambda a, b: (a < b, a >= 5, a == b, a != 0, a > -1, a < 2 ** 40),
    "signs": lambda a, b: (np.abs(a), np.sign(a), -a),
    "bits": lambda a, b: (a & b, a | 3, a ^ b, ~a),
    "shifts": lambda a, b: (a << 3, a >> 2, a << (b & 15), a >> (b % 70)),
    "casts": lambda a, b: (a.astype(np.float64), a.astype(np.int64) + 1, a.astype(np.uint8), a / 3, a * 0.5),
    "reductions": lambda a, b: (a.sum(), a.max(), a.min(), (a + b).reshape(4, -1).sum(axis=1),
                                a.reshape(4, -1).max(axis=0), (a.reshape(4, -1) | 1).argmax(axis=1)),
    "image": lambda a, b: (127 - a, np.where(a > 100, a, 0)),
}


@pytest.mark.parametrize("dtype", SMALL_INTS, ids=dtype_id)
@pytest.mark.parametrize("name", sorted(INT_PROGRAMS))
def test_small_and_unsigned_integer_kernels(name, dtype, rng):
    """int8/int16 and uint8..uint64 in kernels with numpy's exact semantics
    (wraparound, unsigned division, comparisons and shifts, x // 0 == 0,
    shifts past the width, a Python int out of the dtype's range compared
    exactly): equal to numpy, each element, including the dtype's extremes;
    compiled, but for what numpy compares exactly and a kernel would not
    (uint64 with a Python int)."""
    fn = INT_PROGRAMS[name]
    info = np.iinfo(dtype)
    jf = jit(fn)
    for n in (16, 1000):
        a, b = (rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True) for _ in range(2))
        a[:5] = [info.min, info.max, 0, 1, info.max - 1]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = fn(a, b)
            jf(a, b)
            got = jf(a, b)
        assert_like_numpy(got, want, ulps=0)
    refused = [line for line in jf.explain().splitlines() if line.strip().startswith("%") and "#" in line]
    assert all("numpy compares them exactly" in line or "uint64 values" in line for line in refused), refused
    if dtype != np.uint64:
        assert not refused


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64], ids=dtype_id)
def test_comparison_with_a_python_int_beyond_the_dtype_is_exact(dtype, backend):
    """numpy 2 compares an int array with a Python int exactly, whatever its
    range: x_int32 > 2**40 is False everywhere (before: the constant wrapped
    into int32 and the kernel answered otherwise)."""
    def fn(x):
        return x > 2 ** 40, x == -2 ** 40, (x + 1) < 2 ** 35, x >= -(2 ** 62), x != 2 ** 62
    x = np.arange(-3, 3).astype(dtype)
    jf = jit(fn, backend=backend)
    for n in (6, 6, 40):
        x = (np.arange(n) - 3).astype(dtype)
        assert_like_numpy(jf(x), fn(x))


def _life(g):
    n = sum(np.roll(np.roll(g, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))
    return ((n == 3) | (g & (n == 2))).astype(np.uint8)


SHAPED = {
    "diff": lambda x: (np.diff(x), np.diff(x, n=2, axis=0), np.diff(x > 0.5, axis=1)),
    "roll": lambda x: (np.roll(x, 2, axis=1), np.roll(x, -1, 0), np.roll(x, 3), np.roll(x, 7 * x.shape[1], 1)),
    "roll by tuples": lambda x: (np.roll(x, (1, -2), axis=(0, 1)), np.roll(x, 2, axis=(0, 1)),
                                 np.roll(x, (1, 2), axis=1), np.roll(x, (-1, 1), axis=(1, 1))),
    "lexsort": lambda x: (np.lexsort((x[:, 0], x[:, 1] > 0.5)), np.lexsort([x > 0.5, x]),
                          np.lexsort((x.T,), axis=0), x[np.lexsort((x[:, 1], (x[:, 0] * 3).astype(int)))]),
    "diag": lambda x: (np.diag(x[0]), np.diag(x[:, 0], 1), np.diag(x[0] > 0.5, -2), np.diag(x @ x.T),
                       np.diag(x.T @ x, -1),
                       np.diag(np.where(x[0] > 0.5, np.inf, np.nan))),
    "percentile of traced q": lambda x: (np.percentile(x, [100 / x.shape[0], 50.0]),
                                         np.quantile(x, x[0, :2] * 0.5, axis=1),
                                         np.nanpercentile(x, (x.shape[1] * 1.0, 99.0), axis=0, keepdims=True)),
    "ufunc reduce": lambda x: (np.logaddexp.reduce(x, axis=0), np.hypot.reduce(x, axis=1, keepdims=True),
                               np.logaddexp.reduce(x[0]), np.subtract.reduce(x, 1), np.logaddexp2.reduce(x, None)),
    "lists holding sizes": lambda x: (np.concatenate((x[0], [x.shape[1]])), np.append(x[:, 0], x.shape[0]),
                                      np.hstack([x[0], [len(x), x.size * 0.5]]),
                                      np.diff(np.concatenate(([0], (x[:, 0] > 0.5).astype(int), [x.size])))),
    "of tuples of arrays": lambda x: (np.transpose((x[0], x[1])), np.diff((x[:, 0], x[:, 1]), axis=0),
                                      np.sort((x[:, 1], x[:, 0]), axis=0), np.clip((x[0], x[1]), 0.2, 0.8)),
    "select": lambda x: (np.select([x < 0.2, x > 0.8], [x * 2, -x], default=7), np.select([x < 0.5], [1]),
                         np.select([x < 0.5], [x.astype(np.float32)], default=0.5)),  # (a weak default: float32)
    "count_nonzero": lambda x: (np.count_nonzero(x > 0.5), np.count_nonzero(x > 0.3, axis=1)),
    "game of life": lambda x: _life((x > 0.5).astype(np.uint8)),
    "nan_to_num": lambda x: (np.nan_to_num(_specials(x)),
                             np.nan_to_num(_specials(x), nan=np.inf, posinf=9.0, neginf=-2.0),
                             np.nan_to_num(_specials(x).astype(np.float32)),
                             np.nan_to_num((x > 0.5).astype(np.int32))),
    "pad": lambda x: (np.pad(x, 1), np.pad(x, ((0, 2), (3, 1)), constant_values=7.5),
                      np.pad(x.astype(np.int64), (2, 1), mode="constant", constant_values=1.5), np.pad(x[0], (2,))),
}


def _specials(x):
    return np.where(x < 0.2, np.inf, np.where(x > 0.8, -np.inf, np.where(x > 0.6, np.nan, x)))


@pytest.mark.parametrize("name", sorted(SHAPED))
def test_diff_roll_select_count_nonzero_trace_numpys_steps(name, backend):
    """np.diff (slices), np.roll (two slices concatenated, the shift modulo
    a symbolic dim; a roll per pair of shifts and axes in tuples), np.lexsort
    (a numpy step of its keys' shape), numpy's functions of a tuple of traced
    arrays and lists holding sizes (the array np.array makes of it), np.diag
    of a vector (a where), np.percentile of a traced q and the reduce of a
    ufunc such as np.logaddexp (numpy steps), np.select and np.nan_to_num (wheres), np.count_nonzero
    (a sum) and np.pad's constant mode (a full array, the input written into
    it) trace into graph ops: no eager node, one compile for every shape, numpy's
    values, dtypes and scalar types (before: eager nodes of unknown sizes;
    a game of life made 48)."""
    fn = SHAPED[name]
    jf = jit(fn, backend=backend)
    for shape in ((5, 7), (9, 4), (6, 6), (12, 3)):
        x = np.random.default_rng(shape[0]).random(shape)
        jf(x)
        got, want = jf(x), fn(x)
        assert_like_numpy(got, want, ulps=0)
        pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
        assert all(type(g) is type(w) for g, w in pairs)
    assert jf.stats()["eager_nodes"] == 0 and jf.stats()["compiles"] == 1


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_float_floor_division_remainder_and_fmod_are_numpys(dtype, backend):
    """x // y, x % y (numpy's npy_divmod: fmod, Python's sign rule, the
    quotient snapped to an integer) and np.fmod of floats compile and equal
    numpy bit for bit, signed zeros, infinities, NaNs and zero divisors
    included; np.fmod of ints is C's remainder, 0 for a zero divisor."""
    rng = np.random.default_rng(0)
    sp = special(dtype)
    a = np.concatenate([rng.standard_normal(3000) * 10, np.repeat(sp, len(sp)),
                        rng.integers(-20, 20, 500) * 1.0]).astype(dtype)
    b = np.concatenate([rng.standard_normal(3000) * 3, np.tile(sp, len(sp)),
                        rng.integers(-5, 5, 500) * 1.0]).astype(dtype)

    def fn(a, b):
        return a // b, a % b, np.fmod(a, b), a // 2.5, a % -0.75

    jf = jit(fn, backend=backend)
    with np.errstate(all="ignore"):
        for n in (a.size, 17):
            jf(a[:n], b[:n])
            got, want = jf(a[:n], b[:n]), fn(a[:n], b[:n])
            for g, w in zip(got, want):
                assert g.dtype == w.dtype
                assert np.array_equal(g, w, equal_nan=True) and np.array_equal(np.signbit(g), np.signbit(w))
    assert not [line for line in jf.explain().splitlines() if "numpy:" in line and "const" not in line]
    ints = jit(lambda a, b: np.fmod(a, b), backend=backend)
    x, y = rng.integers(-100, 100, 999).astype(np.int32), rng.integers(-5, 5, 999).astype(np.int32)
    with np.errstate(all="ignore"):
        ints(x, y)
        assert_like_numpy(ints(x, y), np.fmod(x, y))


NUMPY_REDUCTION_PROGRAMS = {
    "median": lambda x: (np.median(x), np.median(x, axis=0), np.median(x, axis=1, keepdims=True) - x),
    "nan": lambda x: (np.nanmean(np.where(x > 0.8, np.nan, x), axis=1), np.nanmax(x, axis=0), np.nanstd(x),
                      np.nanargmax(x, axis=1)),
    "percentile": lambda x: (np.percentile(x, 90, axis=1), np.quantile(x, 0.25),
                             np.percentile(x, 50.0, axis=0, method="nearest")),
    "ptp and nansum": lambda x: (np.ptp(x), np.ptp(x * 2, axis=1), np.nansum(np.where(x > 0.5, np.nan, x), axis=0)),
}


@pytest.mark.parametrize("name", sorted(NUMPY_REDUCTION_PROGRAMS))
def test_numpy_reductions_are_steps_of_symbolic_shape(name, backend):
    """np.median, the nan-reductions, np.percentile/quantile of a constant q
    are numpy steps with the reduction's shape (before: eager nodes of
    unknown sizes); np.ptp and np.nansum are numpy's formulas in kernels
    (max - min; a sum with NaNs as 0).  One compile for every shape."""
    fn = NUMPY_REDUCTION_PROGRAMS[name]
    jf = jit(fn, backend=backend)
    for shape in ((5, 7), (9, 4), (6, 6)):
        x = np.random.default_rng(shape[0]).random(shape)
        jf(x)
        got, want = jf(x), fn(x)
        assert_like_numpy(got, want, ulps=4)
        assert all(type(g) is type(w) for g, w in zip(got, want))
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0


def test_fft_steps_have_shapes_and_fftfreq_of_a_size_is_traced(backend):
    """np.fft.rfft/irfft/fft/ifft are numpy steps whose shapes follow from
    the input's and n (an eager call's were data-dependent: a size decision
    on them ran calls eagerly), and np.fft.fftfreq/rfftfreq of a traced size
    are computed as numpy does (they raised "n should be an integer" while
    tracing: the whole function ran eagerly)."""
    def f(x, keep):
        X = np.fft.rfft(x, axis=-1)
        X[..., keep:] = 0
        y = np.fft.irfft(X, n=x.shape[-1], axis=-1)
        z = np.fft.ifft(np.fft.fft(x.astype(np.float32), axis=0), n=x.shape[0] + 2, axis=0, norm="ortho")
        return (y, np.abs(X) ** 2, z, np.fft.fftfreq(x.shape[-1]), np.fft.rfftfreq(x.shape[-1], 0.1),
                np.fft.fftfreq(x.shape[-1], d=3))
    jf = jit(f, backend=backend)
    for n in (8, 9, 16, 33):
        x = np.random.default_rng(n).standard_normal((3, n))
        for _ in range(2):
            got, want = jf(x, 4), f(x, 4)
            assert_like_numpy(got, want, ulps=0)
    s = jf.stats()
    assert s["compiles"] == 1 and s["eager_nodes"] == 0 and s["fallbacks"] == 0, jf.explain()


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64], ids=dtype_id)
def test_divmod_is_floor_divide_and_remainder(dtype, backend):
    """np.divmod (and with out=(q, r)) is numpy's floor_divide and remainder
    (numpy's own loops share them): compiled, bit-equal, zero divisors
    included (was an eager node; out=(q, r) ran the whole function eagerly)."""
    def f(a, b, q, r):
        x, y = np.divmod(a, b)
        np.divmod(a * 2, b, out=(q, r))
        return x, y, q + 0, r + 0
    rng = np.random.default_rng(0)

    def make(n):
        b = rng.integers(-6, 7, n).astype(dtype)
        return [rng.integers(-20, 20, n).astype(dtype), b, np.zeros(n, dtype), np.zeros(n, dtype)]
    jf = jit(f, backend=backend)
    for n in (5, 9, 13, 40):
        args = make(n)
        want_args, got_args = [a.copy() for a in args], [a.copy() for a in args]
        with np.errstate(all="ignore"):
            want, got = f(*want_args), jf(*got_args)
        assert_like_numpy(got, want, ulps=0)
        assert_like_numpy(got_args, want_args, ulps=0)
    s = jf.stats()
    assert s["compiles"] == 1 and s["eager_nodes"] == 0 and s["fallbacks"] == 0, jf.explain()


@pytest.mark.parametrize("dtype", FLOATS, ids=dtype_id)
def test_constant_powers_compile_within_a_few_ulp(dtype, backend, rng):
    """x ** -1.5 (gravity), x ** 1.5, x ** -0.5, x ** -2 compile (were
    numpy steps: "only constant exponents 2, 3, 4..."), within a few ulp of
    numpy's pow, with C's pow at the special values: NaN below zero, except
    -inf (inf or 0), signed zeros."""
    exps = (-3.5, -3, -2.5, -2, -1.5, -0.5, 1.5, 2.5, 3.5)

    def fn(x):
        return tuple(x ** e for e in exps)
    x = np.concatenate([special(dtype), rand(rng, 300, dtype, "positive") * 40, rand(rng, 50, dtype)])
    # (bases whose power of the opposite exponent overflows: C's pow gives a subnormal there, 1e155 ** -2 is
    # 1e-310; 1 / x**2 gave 0, probe 20)
    big = np.array([10 * float(np.finfo(dtype).max) ** (1 / k) for k in (2, 2.5, 3, 3.5)], dtype)
    x = np.concatenate([x, big, -big])
    jf = check(fn, [(x,), (x[:101],), (x[-57:],)], backend, ulps=4)
    assert not re.search(r"numpy: %\d+: \S+ = power", jf.explain()), jf.explain()
    with np.errstate(all="ignore"):
        for got, want in zip(jf(np.concatenate([big, big])), fn(np.concatenate([big, big]))):
            np.testing.assert_array_max_ulp(got, want, maxulp=4)  # (subnormals: no tolerance of magnitude)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.bool_])
def test_means_variances_and_deviations_of_ints_and_bools_are_kernels(dtype, backend):
    """mean, var and std of an int or bool array (numpy sums the elements as
    float64) are numpy's formulas on x cast to float64, fused as the float
    ones are (they were numpy steps: "mean: no kernel emitter")."""
    def f(x):
        return (x.mean(axis=1), x.mean(), x.var(axis=0), x.std(axis=1, ddof=1), np.mean(x, axis=0, keepdims=True),
                x.mean(0) - x.std(0))
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(5)
    for shape in ((5, 7), (1, 9), (300, 17)):
        x = rng.random(shape) < 0.3 if dtype == np.bool_ else rng.integers(-100, 100, shape).astype(dtype)
        for _ in range(2):  # (traced, then the kernels)
            assert_like_numpy(jf(x), f(x), ulps=8)
    text = jf.explain()
    assert "no kernel emitter" not in text and not re.search(r"numpy: %\d+: \S+ = (mean|var|std) ", text)
    assert jf.stats()["eager_nodes"] == 0


def test_histogram_and_linalg_solve_are_numpy_steps_of_known_shape(backend):
    """np.histogram into a number of equal bins (a Python int or a size) and
    np.linalg.solve are numpy steps whose shapes follow from the operands'
    (eager calls' shapes were data-dependent): one compile for every size,
    no eager node, numpy's dtypes (counts int64; weighted sums and edges in
    numpy's types)."""
    def f(x, w, A, b, B):
        c, e = np.histogram(x, 7)
        s, e2 = np.histogram(x, x.shape[0] // 3, weights=w)
        d, _ = np.histogram(x, 5, range=(0.0, 0.5), density=True)
        return c, e, s, e2, d, np.linalg.solve(A, b), np.linalg.solve(A, B), c * 2, np.linalg.solve(A * 1j + A, b)
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(0)
    for n in (30, 31, 64):
        x, w = rng.random(n), rng.random(n).astype(np.float32)
        A = rng.random((5, 5)) + 5 * np.eye(5)
        for _ in range(2):
            args = (x, w, A, rng.random(5), rng.random((5, 3)))
            assert_like_numpy(jf(*args), f(*args))
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0
    with pytest.raises(np.linalg.LinAlgError):
        jf(x, w, np.zeros((5, 5)), rng.random(5), rng.random((5, 3)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128, np.int64, np.bool_])
def test_linalg_norm_2_norms_and_polyval_are_traced_ops(dtype, backend):
    """np.linalg.norm's 2-norms (all elements, along an axis or two, keepdims,
    an int or bool array as float64) and np.polyval of constant
    coefficients are traced as numpy computes them (they were numpy steps
    of data-dependent shape: a graph's size decisions went to eager): one
    compile for every shape, no eager node, numpy's dtypes and shapes (polyval's
    numpy-scalar coefficients promote as numpy's do); a norm of another
    order stays numpy's step."""
    def f(x):
        out = [np.linalg.norm(x), np.linalg.norm(x, axis=-1), np.linalg.norm(x, 2, axis=0, keepdims=True),
               np.linalg.norm(x, "fro", axis=(0, 1)), np.linalg.norm(x, keepdims=True)]
        if dtype not in (np.complex64, np.complex128, np.bool_):
            out += [np.polyval([1.5, -2.0, 0.25], x), np.polyval(np.array([3, -1, 2]), x), np.polyval([2], x)]
        return out
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(3)
    def check(shape):
        x = rng.standard_normal(shape) * 3
        x = (x > 0) if dtype == np.bool_ else (x + 1j * rng.standard_normal(shape) if np.dtype(dtype).kind == "c"
                                              else x.round() if np.dtype(dtype).kind == "i" else x).astype(dtype)
        for _ in range(2):  # (traced, then compiled)
            assert_like_numpy(jf(x), f(x), ulps=8)
    for shape in ((5, 7), (2, 9), (40, 17)):
        check(shape)
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0, jf.explain()
    for shape in ((1, 9), (0, 3)):  # (signatures of their own: dims of 0 and 1 are specialized)
        check(shape)
    g = jit(lambda x: np.linalg.norm(x, 1, axis=1), backend=backend)
    x = np.linspace(-1, 1, 12).reshape(3, 4).astype(np.float64)
    assert_like_numpy(g(x), np.linalg.norm(x, 1, axis=1))
    assert g.stats()["eager_nodes"] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex128])
def test_isclose_allclose_and_array_equal_are_traced(dtype, backend):
    """np.isclose by numpy's formula (NaN, inf, equal_nan, an int y taken as
    float); np.allclose and np.array_equal as numpy's Python bools: a graph
    break, each outcome compiled once (np.allclose sent the whole signature
    to numpy: "returned a bool, not an array"), another shape False."""
    def f(a, b):
        out = [np.isclose(a, b), np.isclose(a, b, rtol=1e-3, atol=0.0, equal_nan=True), np.isclose(a, 2)]
        if np.allclose(a, b, atol=1e-6):
            out.append(a * 2)
        else:
            out.append(b - a)
        return out + [np.array_equal(a, b), np.array_equal(a, b, equal_nan=True), np.array_equal(a, b[:1])]
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(2)
    special = np.array([np.nan, np.inf, -np.inf, 0.0])
    for n in (6, 9, 13):
        a = rng.integers(-3, 4, n).astype(dtype)
        if np.dtype(dtype).kind in "fc":
            a[:4] = special
        for b in (a.copy(), a + (1e-4 if dtype != np.int64 else 1), a * (1 + 1e-7)):
            b = b.astype(dtype)
            got, want = jf(a, b), f(a, b)
            assert [type(x) for x in got] == [type(x) for x in want]
            assert_like_numpy(got, want)
    s = jf.stats()
    assert s["fallbacks"] == 0 and s["eager_nodes"] == 0, jf.explain()
    assert s["graph_breaks"] >= 1 and s["compiles"] <= 3  # (the outcomes of b's three kinds, not one per shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_searchsorted_argpartition_interp_and_convolve_are_numpy_steps_of_known_shape(dtype, backend):
    """np.searchsorted, np.argpartition, np.interp, np.convolve and
    np.correlate run as numpy's own calls whose shapes follow from their
    operands' (they were eager calls of data-dependent sizes): numpy's
    values and dtypes, one compile for every length, no eager node; modes
    full, same and valid with either operand the longer."""
    def f(x, w, edges):
        return (np.searchsorted(edges, x), np.searchsorted(edges, x[::-1], side="right"),
                np.argpartition(x, 2), np.interp(x, edges, edges * 2.0, left=-1.0),
                np.convolve(x, w), np.convolve(w, x, mode="same"), np.convolve(x, w, "valid"),
                np.correlate(x, w), np.correlate(w, x, "full"), np.convolve(x, w, "valid")[1:] + 1)
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(4)
    edges = np.array([-2, -1, 0, 1, 3], dtype=dtype)
    for n in (7, 9, 16):
        x = (rng.standard_normal(n) * 3).round().astype(dtype)
        w = np.array([1, 2, 1], dtype=dtype)
        for _ in range(2):  # (traced, then compiled)
            assert_like_numpy(jf(x, w, edges), f(x, w, edges))
    s = jf.stats()
    assert s["compiles"] == 1 and s["eager_nodes"] == 0 and s["fallbacks"] == 0, jf.explain()


def test_cross_of_3_vectors_and_kron_are_traced(backend):
    """np.cross of 3-vectors along the last axes (broadcast, mixed dtypes)
    by numpy's formula, and np.kron of vectors and of matrices as their
    block outer product: numpy's values and dtypes, one compile for every
    length, no eager node (they were eager calls); 2-vectors stay numpy's."""
    def f(a, b, m):
        return (np.cross(a, b), np.cross(a[0], b), np.kron(a[0], b[1]), np.kron(m, m[:2]),
                np.kron(m.astype(np.int64), m.astype(np.int64)[:2]))
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(6)
    for n in (3, 5, 8):
        a, b = rng.standard_normal((n, 3)), rng.standard_normal((n, 3)).astype(np.float32)
        m = rng.standard_normal((n, 2)) * 3
        assert_like_numpy(jf(a, b, m), f(a, b, m), ulps=8)
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0, jf.explain()
    g = jit(lambda a, b: np.cross(a, b), backend=backend)
    a2, b2 = np.ones((4, 2)), np.arange(8.0).reshape(4, 2)
    assert_like_numpy(g(a2, b2), np.cross(a2, b2))


def test_gradient_is_numpys_differences(backend):
    """np.gradient (unit spacing, first-order edges) by numpy's formula
    along every axis: a float32 stays float32, an int becomes float64, a
    matrix gives a tuple; one compile for every length, no eager node (it
    was an eager call); fewer than 2 elements raise numpy's ValueError."""
    def f(y, m, i):
        return np.gradient(y), np.gradient(m), np.gradient(i), np.gradient(y.astype(np.float32))
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(7)
    for n in (3, 5, 8):
        args = rng.standard_normal(n), rng.standard_normal((n, 4)), rng.integers(0, 9, n)
        assert_like_numpy(jf(*args), f(*args), ulps=4)
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0, jf.explain()
    with pytest.raises(ValueError):
        jit(np.gradient, backend=backend)(np.ones(1))


def test_sum_and_mean_with_where_and_average_with_weights(backend):
    """np.sum / np.mean with where= (and the methods), and np.average with
    weights (the same shape, 1-D along an axis, keepdims; an int array as
    float64) by numpy's formulas: one compile for every length, no eager
    node (they were eager calls); weights summing to zero raise numpy's
    ZeroDivisionError, and the function stays usable."""
    def f(x, w, i):
        return (np.mean(x, axis=1, where=x > 0), np.sum(x, axis=0, where=x < 1), np.mean(i, where=i > 2),
                x.mean(axis=0, keepdims=True, where=x > -1), np.mean(x.astype(np.float32), axis=1, where=x > 0),
                np.average(x, axis=0, weights=w), np.average(x, axis=1, weights=np.ones(4)), np.average(x),
                np.average(i, axis=0, weights=w), np.average(x.astype(np.float32), weights=x.astype(np.float32) ** 2),
                np.average(x, axis=0, weights=w, keepdims=True))
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(8)
    for n in (3, 5, 8):
        args = rng.standard_normal((n, 4)), rng.random(n) + 0.1, rng.integers(0, 6, (n, 4))
        assert_like_numpy(jf(*args), f(*args), ulps=8)
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0, jf.explain()
    with pytest.raises(ZeroDivisionError):
        jf(np.ones((3, 4)), np.zeros(3), np.ones((3, 4), np.int64))
    args = rng.standard_normal((6, 4)), rng.random(6) + 0.1, rng.integers(0, 6, (6, 4))
    assert_like_numpy(jf(*args), f(*args), ulps=8)


def test_unravel_index_of_traced_indices(backend):
    """np.unravel_index of a traced flat index (an argmax, or an array of
    them) into a shape of ints and dims: numpy's tuple of intp scalars or
    arrays, one compile for every length (it was an eager call); an index
    past the size raises numpy's ValueError."""
    def f(x, idx):
        return (np.unravel_index(np.argmax(x), x.shape), np.unravel_index(idx, (3, x.shape[0])),
                np.unravel_index(idx[0], x.shape))
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(9)
    for n in (3, 5, 8):
        x, idx = rng.standard_normal((n, 4)), rng.integers(0, 3 * n, 6)
        got, want = jf(x, idx), f(x, idx)
        assert [type(v) for g in got for v in g] == [type(v) for w in want for v in w]
        assert_like_numpy(got, want)
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0, jf.explain()
    with pytest.raises(ValueError, match="out of bounds"):
        jf(np.ones((3, 4)), np.array([1, 99]))


def test_tile_is_a_broadcast_reshaped(backend):
    """np.tile by constant counts (an int, a tuple shorter or longer than the
    array's ndim, a zero) is traced (it was an eager call of data-dependent
    size): numpy's values, dtype and shape, one compile for every length,
    and its own array (a write into it leaves the argument alone)."""
    def f(x):
        t = np.tile(x, (2, 1))
        t[0, 0] = -1.0
        return np.tile(x, 2), t, np.tile(x, (1, 3, 2)), np.tile(x[0], (3, 1)), np.tile(x, 0)
    jf = jit(f, backend=backend)
    for n in (2, 5, 8):
        x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        assert_like_numpy(jf(x), f(x.copy()))
        assert np.array_equal(x, np.arange(n * 3, dtype=np.float32).reshape(n, 3))
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0, jf.explain()


def _im2col_rows(x):
    H, W = x.shape
    idx = np.repeat(np.arange(H), W) * W + np.tile(np.arange(W), H)
    return x.ravel()[idx], np.tile(x, (H, 1)).shape, np.repeat(x, W, axis=1)


def test_tile_and_repeat_by_a_size_keep_it_symbolic(backend):
    """im2col's index arithmetic, `np.repeat(np.arange(H), W)` and
    `np.tile(np.arange(W), H)` with H, W an image's dims: the counts were
    Python numbers, a guard and a trace per image size (probe 23)."""
    jf = jit(_im2col_rows, backend=backend)
    for n in (5, 6, 7, 8, 9):
        x = np.arange(n * (n + 1), dtype=np.float64).reshape(n, n + 1)
        assert_like_numpy(jf(x), _im2col_rows(x))
    assert jf.stats()["traces"] == 1 and jf.stats()["eager_nodes"] == 0, jf.explain()


@pytest.mark.parametrize("mode", ["edge", "wrap", "reflect", "symmetric"])
def test_pad_modes_are_slices_of_the_array(mode, backend):
    """np.pad in 'edge', 'wrap', 'reflect' and 'symmetric' modes: each axis
    in turn, the array between slices of the array padded so far (an edge
    element broadcast): bit-equal to numpy, one compile for every shape
    whose axes one slice covers (a guard); a shorter axis runs numpy's pad
    (an eager node, numpy's repeated reflections)."""
    def f(x, y):
        return (np.pad(x, 2, mode=mode), np.pad(x, ((1, 2), (3, 0)), mode=mode) * 2,
                np.pad(y, ((0, 0), (1, 1), (2, 1)), mode=mode), np.pad(x.astype(np.int32), 1, mode))
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(1)
    for shape in ((5, 6), (4, 4), (9, 12)):
        x, y = rng.random(shape), rng.random((2,) + shape).astype(np.float32)
        for _ in range(2):
            assert_like_numpy(jf(x, y), f(x, y), ulps=0)
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0
    x, y = rng.random((2, 2)), rng.random((2, 2, 2)).astype(np.float32)
    assert_like_numpy(jf(x, y), f(x, y), ulps=0)


def test_ufunc_reduce_with_initial_or_where_keeps_its_axis(backend):
    """np.add.reduce(m, axis=1, initial=5.0) (and where=) reduces along its
    axis as numpy does (the axis was dropped on the way to numpy's call:
    it reduced along axis 0)."""
    def fn(m):
        return (np.add.reduce(m, axis=1, initial=5.0), np.maximum.reduce(m, axis=1, initial=-1.0),
                np.add.reduce(m, axis=None, initial=1.0), np.add.reduce(m, axis=1, where=m > 1),
                np.multiply.reduce(m, axis=-1, keepdims=True, initial=2.0), np.add.reduce(m, 1, dtype=np.float32))
    jf = jit(fn, backend=backend)
    for n in (3, 5, 8):
        m = np.arange(n * 4, dtype=float).reshape(n, 4)
        assert_like_numpy(jf(m), fn(m), ulps=0)


def _argmax_passing_novalue(a, keepdims=np._NoValue):
    return np.argmax(a, keepdims=keepdims)


def _round_first(a):
    return round(a[0])


def _round_0d(a):
    return round(a.sum(keepdims=True).reshape(()))


def test_numpys_scalar_and_sentinel_semantics():
    """np._NoValue (numpy's "not given") passed on by a wrapper, or by
    jit(np.ptp)'s own defaults, is no keepdims (it kept the dims: [8], not
    8); np.round of a bool array is numpy's rint (float16; with decimals,
    numpy's error); numpy's bool scalar ** 2 is an int64 (an array's
    square is int8); round() of numpy's bool or complex scalar, or of a
    0-d array, is numpy's TypeError (probe 14)."""
    x = np.array([3, -1, 7])
    for fn, args in ((_argmax_passing_novalue, (x,)), (np.ptp, (x,)), (np.average, (x,)),
                     (np.around, (np.array([True, False]),)), (lambda a: a[0] ** 2, (np.array([True, False]),)),
                     (lambda a: a ** 2, (np.array([True, False]),))):
        f = jit(fn)
        for _ in range(2):
            got, want = f(*args), fn(*args)
            assert type(got) is type(want) and np.asarray(got).dtype == np.asarray(want).dtype, (fn, got, want)
            np.testing.assert_array_equal(got, want)
    g = jit(lambda a: np.round(a, 1))
    for _ in range(2):
        with pytest.raises(TypeError):
            g(np.array([True, False]))
    for fn, a in ((_round_first, np.array([True, False])), (_round_first, np.array([3 + 0j, 1j])),
                  (_round_0d, np.array([2.5, 1.0]))):
        f = jit(fn)
        for _ in range(2):
            with pytest.raises(TypeError, match="doesn't define __round__"):
                f(a)
    np.testing.assert_array_equal(jit(_round_first)(np.array([2.5, 1.0])), 2)


def test_numpys_warnings_the_shapes_decide_come_at_every_call():
    """"Mean of empty slice" and "Degrees of freedom <= 0 for slice" depend
    on the shapes alone: numpy gives them at every call, and so does every
    compiled call of the entry the shapes decide (they came from the trace
    only: the first call)."""
    cases = ((lambda a: a.mean(-1), np.zeros((3, 0)), "Mean of empty slice"),
             (lambda a: np.var(a, ddof=5), np.ones(3), "Degrees of freedom <= 0 for slice"),
             (lambda a: a.std(), np.zeros(0), "Degrees of freedom <= 0 for slice"))
    for fn, x, message in cases:
        f = jit(fn)
        for call in range(3):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                assert_like_numpy(f(x), fn(x))
            said = [str(m.message) for m in w if m.category is RuntimeWarning and "encountered" not in str(m.message)]
            assert said.count(message) == 2, (call, said)  # (numpy's own call's, and the jitted call's)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = jit(lambda a: (a.mean(-1), a.var(ddof=1)))
        for n in (3, 5, 2):
            g(np.ones((2, n)))


def _chunk_sums(x, k):
    return [c.sum() for c in np.split(x, k)]


def _submatrix(K, idx):
    return K[np.ix_(idx, idx)]


def _broadcast_pair(x):
    a, b = np.broadcast_arrays(x, x[0])
    return b + 0


def test_split_by_a_changing_count_ix_and_broadcast_arrays_trace_without_internal_errors():
    """np.split by an int argument that changed (a symbol: its parts
    counted with a guard, not `'SymInt' object is not iterable`), np.ix_'s
    index arrays (numpy's call: their 1-dims stretch, not "operands could
    not be broadcast together with shapes (2, 1) (1, 2)") and an output of
    np.broadcast_arrays (no FutureWarning numpy does not give): compiled,
    no JitWarning (probe 13)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = jit(_chunk_sums)
        for k in (2, 3, 4, 3):
            assert_like_numpy(f(np.arange(12.0), k), _chunk_sums(np.arange(12.0), k))
        g = jit(_submatrix)
        for n in (3, 4, 5, 6):
            K, idx = np.arange(n * n, dtype=float).reshape(n, n), np.array([0, n - 1])
            assert_like_numpy(g(K, idx), _submatrix(K, idx))
        h = jit(_broadcast_pair)
        for n in (3, 4, 5):
            x = np.arange(n * 2.0).reshape(n, 2)
            assert_like_numpy(h(x), _broadcast_pair(x))
    assert g.stats()["eager_calls"] == 0 and h.stats()["eager_calls"] == 0


@pytest.mark.parametrize("e", [-1, 0.5, 2, 2.0])
def test_an_arrays_power_by_a_python_number_takes_numpys_own_steps(e):
    """ndarray ** e takes numpy's fast_scalar_power: ** 2 is np.square (an
    integer array's by an int 2 only: int ** 2.0 is a float64 power, not an
    int square), an inexact array's ** 0.5 np.sqrt (sqrt(-0.0) is -0.0; a
    float16's and a complex's with an infinite part are not power's) and
    ** -1 np.reciprocal (probe 14: inf+nanj for inf+0j, +0.0 for -0.0)."""
    f = jit((lambda k: (lambda a: a ** k))(e))
    cases = [np.array([-0.0, -np.inf, np.inf, np.nan, 4.0]), np.array([-0.0, -np.inf, 4], np.float16),
             np.array([-0.0], np.float16), np.array([np.inf + 0j, np.inf - 1j, -np.inf + 1j, 1 + 1j * np.inf]),
             np.array([2, 3, 0]), np.array([True, False])]
    with np.errstate(all="ignore"):
        for a in cases:
            if e == -1 and a.dtype.kind in "ib":
                continue  # (numpy's ValueError: integers to negative integer powers)
            for _ in range(2):
                got, want = f(a), a ** e
                assert got.dtype == want.dtype, (a, got, want)
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(np.signbit(got.real), np.signbit(want.real))


def _by_dtypes(a, b, s):
    dt = np.result_type(a, b, s)
    c = a.astype(dt) + b
    if np.iscomplexobj(b):
        c = c.real
    return c * np.can_cast(a, np.float64), np.isrealobj(a), np.result_type(a.dtype, 2)


def test_dtype_questions_about_traced_arrays_are_answered_from_their_dtypes():
    """np.result_type, np.iscomplexobj, np.isrealobj and np.can_cast of
    traced arrays (and a Python number of the call, weak): numpy's answers
    from the dtypes; each ran the whole signature in numpy ("returned a
    Float64DType, not an array": probe 22)."""
    f = jit(_by_dtypes)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for a, b, s in ((np.ones(3, np.float32), np.ones(3, np.int64), 1.5),
                        (np.ones(4, np.int8), np.ones(4, np.complex64), 2),
                        (np.ones(5, np.float32), np.ones(5, np.float32), 2.5)):
            assert_like_numpy(f(a, b, s), _by_dtypes(a, b, s))
    assert f.stats()["eager_calls"] == 0


def _angles(x):
    return np.rad2deg(x) + 1, np.degrees(x), np.deg2rad(x), np.radians(x), np.fix(x * 3), np.sinc(x)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
def test_degrees_radians_fix_and_sinc_compile_as_numpy_computes_them(dtype, backend):
    """np.degrees and np.radians (rad2deg's and deg2rad's loops), np.fix and
    np.sinc were numpy steps, and rad2deg and deg2rad had no kernel (probe
    22): compiled, their factor as numpy's loop rounds it (in float for
    float32 and float16), to the bit; sinc by numpy's definition."""
    f = jit(_angles, backend=backend)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (7, 1000):
            x = (rng.standard_normal(n) * 10).astype(dtype)
            x[:2] = 0
            got, want = f(x), _angles(x)
            assert_like_numpy(got[:5], want[:5], ulps=0)
            assert_like_numpy(got[5], want[5])
    if backend == "llvm" and dtype != np.float16:
        assert "numpy: " not in "".join(l for l in f.explain().splitlines() if "rad2deg" in l or "deg2rad" in l)

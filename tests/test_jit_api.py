"""The @jit contract: one trace per signature, guards and recompiles,
fallback, errors — each checked against eager numpy."""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

D, H = 64, 128
_rng = np.random.default_rng(0)
PARAMS = {
    "g": _rng.standard_normal(D).astype(np.float32),
    "b": _rng.standard_normal(D).astype(np.float32),
    "w1": (_rng.standard_normal((D, H)) / 8).astype(np.float32),
    "b1": _rng.standard_normal(H).astype(np.float32),
    "w2": (_rng.standard_normal((H, D)) / 8).astype(np.float32),
    "b2": _rng.standard_normal(D).astype(np.float32),
}


def ln_gelu_mlp(x, p, eps):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    h = (x - m) / np.sqrt(v + eps) * p["g"] + p["b"]
    u = h @ p["w1"] + p["b1"]
    u = 0.5 * u * (1.0 + np.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
    return x + u @ p["w2"] + p["b2"]


def random_shapes(n, rng, lo=2, hi=24):
    """(batch, seq) pairs, every dim >= 2; the second differs from the first in both."""
    shapes = [(int(rng.integers(lo, hi)), int(rng.integers(lo, hi))) for _ in range(n)]
    b0, s0 = shapes[0]
    shapes[1] = (b0 + 1, s0 + 1)
    return shapes


@pytest.mark.slow
@pytest.mark.parametrize("dynamic,expected", [(True, "one"), ("auto", "two"), (False, "per-shape")])
def test_mlp_1000_shapes_trace_counts(dynamic, expected, backend):
    rng = np.random.default_rng(1)
    # dynamic=False compiles once per distinct shape: a smaller range keeps it quick
    shapes = random_shapes(1000, rng, hi=6 if dynamic is False else 24)
    f = jit(ln_gelu_mlp, dynamic=dynamic, backend=backend, max_entries=None if dynamic is False else 32)
    for k, (b, s) in enumerate(shapes):
        x = rng.standard_normal((b, s, D)).astype(np.float32)
        eps = float(rng.choice([1e-5, 1e-6]))
        got = f(x, PARAMS, eps)
        if k < 50 or k % 37 == 0:  # numpy for a sample keeps the test quick
            assert_like_numpy(got, ln_gelu_mlp(x, PARAMS, eps), ulps=64, atol=1e-5)
    traces = f.stats()["traces"]
    if expected == "one":
        assert traces == 1
        assert f.stats()["recompiles"] == 0
    elif expected == "two":
        assert traces == 2
    else:
        assert traces == len(set(shapes))
    # sizes 1 and 0 each add one specialized trace (documented 0/1 policy)
    before = f.stats()["traces"]
    for shape in [(1, 7, D), (1, 9, D), (0, 7, D), (0, 3, D)]:
        x = rng.standard_normal(shape).astype(np.float32)
        assert_like_numpy(f(x, PARAMS, 1e-5), ln_gelu_mlp(x, PARAMS, 1e-5), ulps=64, atol=1e-5)
    if dynamic is True:
        assert f.stats()["traces"] == before + 2


def test_shape_guard_retraces_once_with_reason(backend):
    def f(x):
        if x.shape[0] > 128:
            return x * 2.0
        return x + 1.0

    jf = jit(f, backend=backend)
    rng = np.random.default_rng(2)
    for n in [5, 17, 128, 100, 129, 500, 300, 3, 128, 1000]:
        x = rng.standard_normal((n, 3))
        assert_like_numpy(jf(x), f(x))
    assert jf.stats()["traces"] == 2
    assert jf.stats()["recompiles"] == 1
    text = jf.explain()
    assert "recompile #1: guard failed: s0 <= 128" in text
    assert "x.shape[0]" in text


def test_broadcast_mismatch_raises_numpy_error_and_recovers(backend):
    def f(x, y):
        return x + y

    jf = jit(f, backend=backend)
    good = np.ones((4, 3)), np.ones((4, 3))
    assert_like_numpy(jf(*good), f(*good))
    with pytest.raises(ValueError, match=r"could not be broadcast.*\(5, ?3\).*\(4, ?3\)"):
        jf(np.ones((5, 3)), np.ones((4, 3)))
    with pytest.raises(ValueError, match="broadcast"):
        jf(np.ones((5, 3)), np.ones((5, 4)))
    x, y = np.arange(12.0).reshape(6, 2), np.ones((6, 2))
    assert_like_numpy(jf(x, y), f(x, y))
    x, y = np.arange(12.0).reshape(6, 2), np.ones((2,))
    assert_like_numpy(jf(x, y), f(x, y))


def test_wrong_argument_count_is_a_clear_type_error():
    jf = jit(lambda x, y: x + y)
    with pytest.raises(TypeError, match="missing a required argument: 'y'"):
        jf(np.ones(3))
    with pytest.raises(TypeError, match="too many positional arguments"):
        jf(np.ones(3), np.ones(3), np.ones(3))
    assert_like_numpy(jf(np.ones(3), np.ones(3)), np.ones(3) * 2)


@pytest.mark.parametrize("arr", [np.array(["a", "b"]), np.array([1, "x"], dtype=object)])
def test_unsupported_dtypes_run_eagerly(arr):
    def f(x):
        return x[::-1]

    jf = jit(f)
    with pytest.warns(JitWarning, match="unsupported dtype"):
        got = jf(arr)
    np.testing.assert_array_equal(got, f(arr))
    assert jf.stats()["fallbacks"] == 1
    np.testing.assert_array_equal(jf(arr), f(arr))  # one warning, still eager


def test_unique_in_the_middle_is_an_eager_node(backend):
    def f(x):
        y = np.abs(x) * 2.0
        u = np.unique(np.floor(y))
        return np.sqrt(u) + 1.0, u.shape[0]

    jf = jit(f, backend=backend)
    rng = np.random.default_rng(3)
    for n in [10, 31, 200]:
        x = rng.standard_normal((n, 4)) * 5
        assert_like_numpy(jf(x), f(x))
    assert jf.stats()["traces"] == 1
    text = jf.explain()
    assert "eager nodes" in text and "np.unique" in text
    lines = [ln.strip() for ln in text.splitlines() if "= " in ln and "%" in ln]
    ops = [ln.split("= ", 1)[1].split()[0] for ln in lines]
    k = ops.index("eager")
    assert "multiply" in ops[:k] and "sqrt" in ops[k:]  # traced segments on both sides


def test_data_dependent_branch_is_a_select_or_a_graph_break(backend):
    def f(x):  # (both ways return a pure value: a select, one trace for both)
        if x.sum() > 0:
            return x * 2
        return x - 1

    def g(x):  # (a branch of two statements: a graph break, a trace per outcome)
        if x.sum() > 0:
            y = x * 2
            return y
        return x - 1

    pos, neg = np.ones((3, 4)), -np.ones((5, 4))
    for fn, traces, breaks, text in ((f, 1, 0, "the returned value"), (g, 2, 2, "bool() of a traced value")):
        jf = jit(fn, backend=backend)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning: both branches compile
            for x in (pos, neg, pos * 2, neg * 3):
                assert_like_numpy(jf(x), fn(x))
        s = jf.stats()
        assert (s["fallbacks"], s["traces"], s["graph_breaks"]) == (0, traces, breaks)
        assert text in jf.explain()


@pytest.mark.parametrize("what", ["item", "float", "iter"])
def test_other_data_dependent_exits_are_checked(what):
    def f(x):
        if what == "item":
            return x * x.max().item()
        if what == "float":
            return x * float(x[0, 0])
        return sum(row for row in x)  # rows: the length is specialized

    jf = jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x in (np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3) + 1):
            assert_like_numpy(jf(x), f(x))
    assert jf.stats()["fallbacks"] == 0


def test_tolist_runs_eagerly():
    def f(x):
        return np.array(x.tolist()) + 1

    jf = jit(f)
    x = np.arange(6.0).reshape(2, 3)
    with pytest.warns(JitWarning, match="tolist"):
        assert_like_numpy(jf(x), f(x))


def test_isinstance_sees_numpys_types(backend):
    """A traced value passes isinstance() as numpy's value would (an ndarray,
    np.float64 -- a float --, a Python float argument, a dim -- an int --
    and a float computed from dims), so the function takes numpy's branch;
    one trace serves every shape."""
    def f(x, alpha):
        s, n = x.sum(), x.shape[0]
        flags = [isinstance(x, np.ndarray), isinstance(s, float), isinstance(s, np.floating),
                 isinstance(s, np.ndarray), isinstance(x[0], np.ndarray), isinstance(n, int),
                 isinstance(n, np.integer), isinstance(1.0 / n, float),
                 isinstance(alpha, float), isinstance(x.astype(np.float32).sum(), float)]
        return x * sum(2 ** k for k, flag in enumerate(flags) if flag) + alpha

    jf = jit(f, backend=backend)
    for shape in [(3, 4), (5, 2)]:
        x = np.ones(shape)
        assert_like_numpy(jf(x, 0.5), f(x, 0.5))
    assert jf.stats()["traces"] == 1


def test_float_argument_is_a_runtime_scalar_and_ints_are_static():
    def f(x, eps, n):
        return x * eps + n

    jf = jit(f)
    x = np.ones((3, 2), np.float32)
    for eps in [0.1, 0.2, 0.3]:
        assert_like_numpy(jf(x, eps, 2), f(x, eps, 2))
    assert jf.stats()["traces"] == 1
    assert_like_numpy(jf(x, 0.5, 3), f(x, 0.5, 3))
    assert jf.stats()["traces"] == 2  # n changed: now a symbol (one trace more), not a key per value


def test_user_dims_and_constraints():
    f = jit(lambda x, m: x * m[..., None], dims={"x": ("B", "S", 8), "m": ("B", "S")},
            constraints=["S <= 64"])
    x, m = np.ones((2, 5, 8)), np.ones((2, 5))
    assert_like_numpy(f(x, m), x * m[..., None])
    x, m = np.ones((3, 9, 8)), np.ones((3, 9))
    assert_like_numpy(f(x, m), x * m[..., None])
    assert f.stats()["traces"] == 1
    assert "B" in f.explain() and "S <= 64" in f.explain()
    with pytest.raises(ValueError, match="S <= 64"):
        f(np.ones((2, 65, 8)), np.ones((2, 65)))
    with pytest.raises(ValueError, match="argument x: dim 2 is 9, declared 8"):
        f(np.ones((2, 5, 9)), np.ones((2, 5)))


def test_max_entries_falls_back_to_eager_with_one_warning():
    f = jit(lambda x: x + 1, dynamic=False, max_entries=3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(2, 10):
            assert_like_numpy(f(np.ones(n)), np.ones(n) + 1)
    assert f.stats()["traces"] == 3
    assert sum("max_entries" in str(x.message) for x in w) == 1


def test_static_argnames_and_keywords():
    def f(x, *, mode="add", scale=2.0):
        return x + scale if mode == "add" else x * scale

    jf = jit(f, static_argnames=("mode",))
    x = np.arange(4.0)
    assert_like_numpy(jf(x), f(x))
    assert_like_numpy(jf(x, mode="mul", scale=3.0), f(x, mode="mul", scale=3.0))
    assert_like_numpy(jf(np.arange(7.0), mode="mul", scale=0.5), f(np.arange(7.0), mode="mul", scale=0.5))
    assert jf.stats()["traces"] == 2


def test_inputs_are_never_written_and_results_are_fresh(backend):
    def f(x):
        return x.reshape(-1) * 1.0, x.T

    jf = jit(f, backend=backend)
    x = np.arange(6.0).reshape(2, 3)
    x.setflags(write=False)
    a, b = jf(x)
    assert_like_numpy((a, b), f(x))
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(2, 3))


def test_non_contiguous_and_aliased_inputs(backend):
    def f(x, y):
        return x * y + x

    jf = jit(f, backend=backend)
    base = np.arange(60.0).reshape(6, 10)
    for x in [base[:, ::2], base.T[:5, :6], base[::-1]]:
        assert_like_numpy(jf(x, x), f(x, x))


shape = None  # a global of this module named like the attribute _rows_times_sum reads


def _rows_times_sum(x):
    return x.sum(axis=0) * x.shape[0]


def test_a_global_named_like_an_attribute_the_function_reads_is_not_keyed():
    """`x.shape` names `shape` in the code's co_names, as a global would; a
    script's `for shape in shapes: f(np.ones(shape))` at module level once
    made each new `shape` a retrace ("shape changed (read by the trace)").
    Only the globals the code loads are keyed (jit/fingerprint.py
    global_names)."""
    global shape
    jf = jit(_rows_times_sum)
    for shape in ((3, 4), (5, 2), (6, 7)):
        x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        assert_like_numpy(jf(x), _rows_times_sum(x))
    s = jf.stats()
    assert s["traces"] == 1 and s["recompiles"] == 0, jf.log
    shape = None


def _debug_print(x, lr):
    print("shape", x.shape, "max", x.max(), "lr", lr, [x.shape[0], 2], sep="|")
    y = x * 2
    print(y[:2], end="!\n")
    return y


def _formatted_print(x):
    print(f"shape {x.shape}")
    return x * 2


def test_a_print_in_the_function_prints_at_every_call(capsys):
    """print() is a side effect of every call: the compiled entry prints the
    values of that call (a size as an int, a reduction's numpy scalar, an
    array as numpy prints it), sep and end as given, one compile for every
    length, nothing run in numpy (before: it printed once, at the trace, a
    size as 'SymInt(s0, hint=5)')."""
    f = jit(_debug_print)
    for n in (3, 5, 5, 7):
        x = np.arange(float(n))
        _debug_print(x, 0.5)
        want = capsys.readouterr().out
        assert np.array_equal(f(x, 0.5), x * 2)
        assert capsys.readouterr().out == want
    s = f.stats()
    assert s["compiles"] == 1 and s["fallbacks"] == 0 and s["eager_calls"] == 0


def _print_around_a_break(x):
    print("start", x.shape[0], x[0])
    if x.sum() > 0:  # (a graph break)
        print("positive")
        y = x * 2
    else:
        print("negative")
        y = -x
    x[0] = 100.0  # (after the print: it shows the value before)
    return y


def test_prints_around_a_graph_break_show_once_per_call(capsys):
    """Effects run once the call is through: a graph break that decides
    otherwise (the call traced again) or a write after the print changes
    nothing of what each call prints, which is numpy's, exactly once."""
    f = jit(_print_around_a_break)
    for n, sign in ((3, 1), (3, -1), (4, 1), (4, -1), (5, 1)):
        a, b = sign * np.arange(1.0, n + 1), sign * np.arange(1.0, n + 1)
        want = _print_around_a_break(a)
        printed = capsys.readouterr().out
        assert_like_numpy(f(b), want)
        assert capsys.readouterr().out == printed and np.array_equal(a, b)
    assert f.stats()["fallbacks"] == 0


def test_a_print_of_text_formatted_from_a_size_prints_the_size(capsys):
    """An f-string of a size formats the size (a guard: a trace per shape),
    not its symbol; each call prints what numpy's run prints."""
    f = jit(_formatted_print)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (3, 3, 5):
            assert np.array_equal(f(np.arange(float(n))), np.arange(float(n)) * 2)
    assert capsys.readouterr().out.splitlines() == ["shape (3,)", "shape (3,)", "shape (5,)"]
    assert f.stats()["fallbacks"] == 0 and f.stats()["traces"] == 2


def _texts(x, eps, xs):
    return (f"x={eps}", str(x.shape[0]), repr(x.shape), f"{int(x.argmax()):03d}", str(x.sum() > 1), repr(x[0]),
            f"{x.max():.3f}", "%d" % len(x), str([eps, x[0]]), f"{x.shape[0] / 2}")


def test_str_repr_and_format_of_traced_values_are_their_values():
    """str(), repr(), f-strings and % of a float argument, a size, a numpy
    scalar and int() of one give numpy's text of the value (each a guard or
    a graph break on it), never shapejit's own names (a compiled call
    returned the trace's frozen "Tracer(...)"); of an array, the call runs
    in numpy."""
    f = jit(_texts)
    for n, eps in ((3, 1.5), (5, 2.5), (3, 1.5), (4, 0.25)):
        x = np.random.default_rng(n).random(n)
        assert f(x, eps, [1.0]) == _texts(x, eps, [1.0])
    g = jit(lambda x: f"{x}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        assert g(np.arange(3.0)) == f"{np.arange(3.0)}"


class _Box:
    def __init__(self, v):
        self.v = v


def test_an_object_of_the_users_holding_traced_values_runs_in_numpy():
    """A returned object holding arrays of the trace (not a tuple, list, dict
    or namedtuple) would carry traced values out of the call: the signature
    runs in numpy, with a JitWarning naming the type, and returns numpy's
    arrays (before: the trace's values leaked into the object)."""
    f = jit(lambda x: _Box(x * 2))
    with pytest.warns(JitWarning, match="_Box"):
        r = f(np.ones(3))
    assert type(r.v) is np.ndarray and np.array_equal(r.v, np.full(3, 2.0))
    assert type(f(np.ones(4)).v) is np.ndarray


def test_an_error_state_that_raises_runs_the_call_in_numpy(backend):
    """Under np.errstate(...='raise') (or np.seterr) numpy raises
    FloatingPointError where compiled code would compute inf or nan without
    a word: such a call runs in numpy; outside it, the compiled entry."""
    def f(x, a, b):
        return np.log(x), 1.0 / x, a // b

    jf = jit(f, backend=backend)
    x, a, b = np.array([-1.0, 0.0, 2.0]), np.array([7, 8, 9]), np.array([2, 0, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_like_numpy(jf(x, a, b), f(x, a, b))
    def refuse(kind, flag):
        raise FloatingPointError(kind)
    for state in ({"divide": "raise"}, {"invalid": "raise"}, {"all": "call", "call": refuse}):
        with np.errstate(**state), pytest.raises(FloatingPointError):
            jf(x, a, b)
    with np.errstate(divide="ignore", invalid="ignore"):  # (ignoring or warning: compiled)
        assert_like_numpy(jf(x, a, b), f(x, a, b))
    assert jf.stats()["eager_calls"] == 3 and jf.stats()["traces"] == 1
    assert jf.metrics.fallbacks["errstate"] == 1


def test_an_error_state_that_raises_inside_the_function_runs_it_in_numpy():
    """`with np.errstate(divide="raise"):` in the function: the signature
    runs in numpy, which raises (compiled, it returned inf); one that only
    ignores or warns compiles."""
    def raising(a, b):
        with np.errstate(divide="raise"):
            return a / b

    def quiet(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return a / b
    f, g = jit(raising), jit(quiet)
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 1.0])
    with pytest.warns(JitWarning, match="errstate"), pytest.raises(FloatingPointError):
        f(a, b)
    assert_like_numpy(f(a, b + 1), a / (b + 1))
    assert_like_numpy(g(a, b), quiet(a, b))
    assert g.stats()["eager_calls"] == 0


@jit
def _inner(x):
    return np.tanh(x) * 2


@jit
def _outer(x):
    return _inner(x) + _inner(x[::-1])


class _Scaled:
    def __init__(self, backend):
        self.s = 3.0
        self.apply = jit(self._apply, backend=backend)

    def _apply(self, x):
        return x * self.s

    def __call__(self, x):
        return self.apply(x) + 1


def test_a_jitted_function_calling_another_traces_it_inline(backend):
    """A jitted function called by another's trace (a global, a method
    jitted on self, jit(jit(f))) is traced inline, as its Python: one trace
    of the caller, no numpy fallback (it ran in numpy: "conversion to a
    numpy array of a traced array")."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (3, 4, 7):
            x = np.linspace(0, 1, n)
            assert_like_numpy(_outer(x), np.tanh(x) * 2 + np.tanh(x[::-1]) * 2)
        m = _Scaled(backend)
        g = jit(lambda x: m(x) * 2, backend=backend)
        for n in (3, 5):
            x = np.ones(n)
            assert_like_numpy(g(x), (x * 3.0 + 1) * 2)
        twice = jit(jit(np.sin), backend=backend)
        assert_like_numpy(twice(np.ones(3)), np.sin(np.ones(3)))
    assert _outer.stats()["traces"] == 1 and _outer.stats()["fallbacks"] == 0
    assert g.stats()["traces"] == 1 and g.stats()["fallbacks"] == 0


def _bounds(x):
    return slice(0, x.shape[0])


def _doubled(x):
    return (v * 2 for v in x)


def _scaler(x):
    return lambda t: x.sum() * t


def _summer(x):
    return (x * 2).sum


def test_a_returned_slice_function_or_generator_of_the_trace_runs_numpy(backend):
    """A slice of sizes, a generator, a lambda over a traced value, a method
    of one: each returned the trace's (slice(0, 3) for n = 4, an exhausted
    generator, the first call's sum); such a function runs in numpy."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for fn, use in ((_bounds, lambda r: r), (_doubled, list), (_scaler, lambda r: r(2.0)), (_summer, lambda r: r())):
            f = jit(fn, backend=backend)
            for n in (3, 4, 3):
                x = np.arange(1.0, n + 1)
                assert use(f(x)) == use(fn(x)), fn.__name__


_W = np.eye(3)


@jit
def _inner_reads_global(x):
    return x @ _W


@jit
def _outer_of_global(x):
    return _inner_reads_global(x) * 2


class _TwoMethods:
    def __init__(self):
        self.w = np.eye(4)
        self.s = 1.0

    @jit
    def a(self, x):
        return x @ self.w * self.s

    @jit
    def b(self, x):
        return self.a(x) * 2


def test_an_inlined_jit_reads_what_it_holds_at_every_call(backend):
    """A jitted function inlined into another's trace reads its globals
    (compiled calls failed: the held array was not handed in) and, a jitted
    method calling one of its object, the object's attributes as they are
    at each call (they were the trace's: stale after `m.w = ...`)."""
    global _W
    for n in (2, 3, 5):
        assert_like_numpy(_outer_of_global(np.ones((n, 3))), np.ones((n, 3)) @ _W * 2)
    _W = np.eye(3) * 4
    assert_like_numpy(_outer_of_global(np.ones((2, 3))), np.ones((2, 3)) * 8)
    assert _outer_of_global.stats()["fallbacks"] == 0
    m = _TwoMethods()
    x = np.ones((2, 4))
    assert_like_numpy(m.b(x), x * 2)
    m.w = np.eye(4) * 3
    assert_like_numpy(m.b(x), x * 6)
    m.s = 5.0
    assert_like_numpy(m.b(x), x * 30)


@jit
def _scaled_kw(x, *, k=2.0):
    return x * k


@jit
def _calls_kw(x, scale):
    return scale(x, k=3.0) + scale(x)


def test_an_inlined_jit_takes_its_keyword_only_arguments():
    """A jitted function with keyword-only parameters, passed to another
    and called by its trace, is called with them as keywords (the bound
    tuple went in positionally: a TypeError, the caller in numpy)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (2, 5):
            assert_like_numpy(_calls_kw(np.ones(n), _scaled_kw), np.full(n, 5.0))
    assert _calls_kw.stats()["fallbacks"] == 0


class _Methods:
    scale = 3.0

    def __init__(self):
        self.k = 2.0

    @jit
    @staticmethod
    def shifted(x):
        return x + 1

    @jit
    @classmethod
    def scaled(cls, x):
        return x * cls.scale

    @jit
    def times_k(self, x):
        return x * self.k


def test_jit_over_staticmethod_and_classmethod_binds_as_they_do_and_bound_methods_have_the_api():
    """@jit over @staticmethod called through an instance took the instance
    as its argument (TypeError: too many positional arguments); a bound
    jitted method is its jit too (`m.times_k.stats()` raised AttributeError)."""
    x = np.arange(3.0)
    m = _Methods()
    np.testing.assert_array_equal(m.shifted(x), x + 1)
    np.testing.assert_array_equal(_Methods.shifted(x), x + 1)
    np.testing.assert_array_equal(m.scaled(x), x * 3)
    np.testing.assert_array_equal(_Methods.scaled(x), x * 3)
    np.testing.assert_array_equal(m.times_k(x), x * 2)
    assert m.times_k.stats()["calls"] >= 1 and "times_k" in m.times_k.explain()


def test_an_unknown_static_argname_is_an_error():
    def f(x, n):
        return x * n
    with pytest.raises(ValueError, match="'nn'"):
        jit(f, static_argnames=("nn",))
    jit(f, static_argnames=("n",))


def _total(x, it):
    t = x * 0
    for v in it:
        t = t + v
    return t


def _tagged(x, tag):
    return np.tanh(x).sum(-1), tag


def test_an_iterator_argument_runs_in_numpy_unconsumed():
    """A generator or zip passed in: a trace would use it up, and numpy's run
    of the same call found it empty (0.0 where numpy gives 6.0)."""
    f = jit(_total)
    x = np.ones(3)
    for _ in range(3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.testing.assert_array_equal(f(x, (float(v) for v in range(4))), _total(x, (float(v) for v in range(4))))
            np.testing.assert_array_equal(f(x, iter([1.0, 2.0])), _total(x, iter([1.0, 2.0])))
    assert len(f._keys) == 2  # (one per iterator type, not one per iterator)


def test_static_values_past_the_entry_limit_are_not_kept():
    """A new static value per call (a request id) past max_entries runs in
    numpy and leaves no key behind (every one was kept, and each miss scanned
    them all: 0.5 ms a call growing to 10 ms after 20 000 calls)."""
    f = jit(_tagged, max_entries=4)
    x = np.ones((2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(40):
            out, tag = f(x, f"req-{i}")
            assert tag == f"req-{i}"
    assert len(f._keys) <= 4 and f.stats()["eager_calls"] == 36


def test_a_first_call_imports_no_module_of_sympy(tmp_path):
    """sympy imports sympy.tensor.tensor (and sympy.combinatorics) the first
    time Add.flatten runs: 70-100 ms of a process's first jitted call
    (python -m bench's cold first call of the BERT layer); shapejit imports
    them with sympy, so a request's first call does not."""
    code = textwrap.dedent('''
        import sys
        import numpy as np
        import jit

        def f(x, y):
            return (x.reshape(x.shape[0], -1, 4) - 1.0).reshape(-1) @ y[: x.size]

        before = {m for m in sys.modules if m.startswith("sympy")}
        jit.jit(f)(np.ones((6, 8)), np.ones(64))
        print(sorted({m for m in sys.modules if m.startswith("sympy")} - before))
    ''')
    env = dict(os.environ, SHAPEJIT_CACHE_DIR=str(tmp_path), SHAPEJIT_CALIBRATE="0", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout

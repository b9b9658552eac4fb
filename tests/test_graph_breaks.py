"""Graph breaks: a data-dependent Python decision (`if x.sum() > 0:`,
`float(x)`, `.item()`, a loop until convergence) no longer sends the
function to eager.  The trace takes the call's outcome and the executable
checks it where the value is computed; a call that decides otherwise is
traced once down its own path, so each path compiles once and every later
call runs compiled code.  explain() names each break with its file:line."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy, assert_same_as_python


def branchy(x, b):
    if x.sum() > 0:  # (an augmented assignment in a branch: no select, a graph break)
        y = np.tanh(x + b)
        y *= 2
        return y
    return np.exp(-x) - b


def test_both_branches_right_each_compiled_once(backend):
    jf = jit(branchy, backend=backend)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (4, 7, 9, 12):
            for sign in (1, -1):
                x, b = sign * rng.random((n, 3)), rng.random(3)
                assert_like_numpy(jf(x, b), branchy(x, b))
    s = jf.stats()
    assert s["traces"] == 2 and s["fallbacks"] == 0 and s["eager_calls"] == 0, jf.log
    assert s["eager_nodes"] == 0 and s["graph_breaks"] == 2
    text = jf.explain()
    assert "test_graph_breaks.py:" in text and "bool() of a traced value was True" in text
    assert "bool() of a traced value was False" in text
    assert jf.metrics.recompiles["graph_break"] == 1


def test_resumed_path_runs_compiled_code(backend):
    calls = []

    def f(x):
        calls.append(1)  # Python runs only while tracing
        if x.max() > 0.5:  # (two statements in a branch that returns: no select, a graph break)
            y = x * 2
            return y
        return x - 1
    jf = jit(f, backend=backend)
    for k in range(6):
        x = np.full(5, 0.9 if k % 2 else 0.1)
        assert_like_numpy(jf(x), f(x))
    assert len(calls) == 2 + 6  # two traces, plus numpy's own six calls in the assertions


def test_convergence_loop_with_a_fixed_iteration_count(backend):
    def newton(a):
        x = a.copy()
        while np.abs(x * x - a).max() > 1e-6:
            x = 0.5 * (x + a / x)
        return x
    jf = jit(newton, backend=backend)
    for n in (5, 8, 11):
        a = np.linspace(1.0, 2.0, n)
        assert_like_numpy(jf(a), newton(a))
    assert jf.stats()["traces"] == 1  # same number of iterations for these inputs


def test_item_and_float_outcomes_are_checked(backend):
    def f(x):
        k = int(x.argmax())
        return x[k:] * int(x[0])  # (int() of a float: a size bound at run time, as int(x.argmax()))
    jf = jit(f, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for x in ([1.0, 3.0, 2.0], [1.0, 3.0, 2.5], [2.0, 0.0, 5.0], [1.0, 3.0, 2.0]):
            x = np.array(x)
            assert_like_numpy(jf(x), f(x))
    assert jf.stats()["traces"] == 1 and jf.stats()["graph_breaks"] == 0, jf.explain()


def test_float_and_item_of_a_traced_scalar_are_python_floats_of_the_trace(backend):
    """float() and .item() of a traced real scalar are the weak float64 a
    Python float is in the trace (a loss, a norm, a mean: each value was a
    graph break and a trace of its own); float() of a size is a Python
    float of it, no guard.  Returned, each is a Python float.  (.item() of a
    bool or a complex stays a graph break on the value: Python's bool adds
    as an int, its complex has methods of its own.)"""
    def f(x):
        loss = float(np.mean(x ** 2))
        scale = float(x.shape[0])
        return x / loss, loss, x.sum().item(), scale

    def g(x):
        return (x > 0.5).any().item(), x[0].astype(np.complex64).item()
    jf, jg = jit(f, backend=backend), jit(g, backend=backend)
    for n in (5, 6, 9, 3, 12):
        x = np.random.default_rng(n).random(n).astype(np.float32)
        got, want = jf(x), f(x)
        assert [type(v) for v in got] == [type(v) for v in want]
        assert_like_numpy(got[0], want[0])
        assert got[1:] == pytest.approx(want[1:], rel=1e-6)
        assert got[3] == n
        got, want = jg(x), g(x)
        assert got == want and [type(v) for v in got] == [bool, complex]
    assert jf.stats()["traces"] == 1 and jf.stats()["graph_breaks"] == 0


def test_python_divisions_of_python_numbers_raise_pythons_zero_division_error(backend):
    """`/`, `//` and `%` of Python floats (arguments, float() of traced
    values) raise ZeroDivisionError for a divisor of 0, in the trace and in
    the compiled code, as the function's own code does (numpy gave inf)."""
    def f(x, a, b):
        y = float(x.sum())
        return a / b, a // b, a % b, y // (y - a)

    jf = jit(f, backend=backend)
    for x, a, b in ((np.ones(3), 1.5, 2.0), (np.ones(4), 7.5, -2.0), (np.ones(2), 1.5, 0.0), (np.ones(3), 3.0, 1.0),
                    (np.ones(5), -1.0, 0.5)):
        assert_same_as_python(jf, f, x, a, b)


def test_outcomes_that_keep_changing_run_eagerly_after_a_bound(backend):
    def f(x):
        return x, str(x.sum())  # (the text of a value: a decision on it)
    jf = jit(f, backend=backend)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(14):
            x = np.full(3, float(k))
            assert_like_numpy(jf(x), f(x))
    assert jf.metrics.fallbacks["graph_break_outcomes"] == 1
    assert any("different outcomes" in str(m.message) for m in w)


def test_ambiguous_truth_value_raises_numpys_error(backend):
    def f(x):
        if x > 0:
            return x
        return -x
    jf = jit(f, backend=backend)
    with pytest.raises(ValueError, match="ambiguous"):
        jf(np.ones(3))
    assert_like_numpy(jf(np.ones(1)), np.ones(1))


def test_constants_of_the_trace_need_no_break(backend):
    # a table the function builds from constants is the same in every call
    def table():
        t = np.zeros(5)
        t[2] = 1.5
        return t

    def f(x):
        t = table()
        if t.sum() > 1:                       # decided once, for every call
            x = x * 2
        k = int(np.arange(x.shape[0]).mean())  # depends on a dim: a size bound at run time
        return x[: int(t.argmax())] + t.tolist()[2] + k
    jf = jit(f, backend=backend)
    for n in (5, 7, 7, 9):
        x = np.arange(float(n))
        assert_like_numpy(jf(x), f(x))
    s = jf.stats()
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["traces"] == 1, jf.explain()


def test_int_of_a_traced_integer_is_a_size_bound_at_run_time(backend):
    """int() of a traced integer scalar is a size the executable binds to its
    value (as an index is), and so is its .item(): returned, it is a Python
    int; sliced with, the slice's length; decided on, a check where it is
    bound (each outcome one trace). So is int() of a float, truncated as
    Python's (a NaN, an infinity: that call runs in numpy, which raises)."""
    def drawdown(prices):
        dd = prices / np.maximum.accumulate(prices) - 1.0
        trough = int(np.argmin(dd))
        return {"peak": int(np.argmax(prices[:trough + 1])), "trough": trough, "n": int((dd < 0).sum())}

    def decided(x):
        k = int(x.argmax())
        return x[:k].sum() if k > 3 else x.sum() * 2

    def of_a_float(x):
        return int(x.sum() * 10)

    def counted(x):
        return x * 2, (x > 1.5).sum().item()
    rng = np.random.default_rng(1)
    for fn in (drawdown, decided, of_a_float, counted):
        jf = jit(fn, backend=backend)
        outcomes = set()
        for n in (5, 9, 13, 30, 31, 77, 5, 9):
            x = rng.random(n) + 1
            got, want = jf(x), fn(x)
            assert_like_numpy(got, want)
            assert type(got) is type(want) and (not isinstance(want, dict) or all(
                type(got[k]) is type(want[k]) for k in want))
            outcomes.add(want if fn is of_a_float else x.argmax() > 3)
        traces = {drawdown: 1, decided: len(outcomes), of_a_float: 1, counted: 1}[fn]
        assert jf.stats()["traces"] == traces and jf.stats()["eager_calls"] == 0, fn.__name__
    jf = jit(of_a_float, backend=backend)
    for x in (np.full(3, -0.27), np.full(4, 1e30), np.full(3, np.nan), np.full(2, np.inf), np.full(2, -2.0 ** 62)):
        assert_same_as_python(jf, of_a_float, x)


def test_a_saved_trace_that_decides_otherwise_is_traced_again(tmp_path, monkeypatch):
    # a second jit object loads the first one's saved trace, whose break decided
    # the other way: its call traces its own path (the mismatch never reaches the user)
    from runtime.cache import reset_default_cache
    monkeypatch.setenv("SHAPEJIT_CACHE_DIR", str(tmp_path / "cache"))
    reset_default_cache()

    def grow(x, t):
        while x.sum() < t:
            x = x * 2.0
        return x
    assert_like_numpy(jit(grow)(np.ones(3), 10.0), grow(np.ones(3), 10.0))
    second = jit(grow)
    assert_like_numpy(second(np.ones(3), 100.0), grow(np.ones(3), 100.0))
    assert second.stats()["fallbacks"] == 0


# ------------------------------------------------ ifs that become selects

def selecty(x, y, k):
    s = x.sum()
    if s > 0:
        y = y * 2
        z = np.exp(x)
    else:
        z = np.abs(x) + k
    if x[0] < 0.5:
        x = -x
    return x, y, z


def test_an_if_binding_names_to_pure_values_is_a_select(backend):
    """An if on a traced value whose branches only bind names to pure
    expressions is traced down both branches and each name selected
    (np.where): both outcomes from one compile, no graph break, and
    explain() names the select."""
    jf = jit(selecty, backend=backend)
    rng = np.random.default_rng(0)
    taken = set()
    for n in (5, 8, 3):
        for first, rest in ((0.9, 1.0), (0.1, 1.0), (0.9, -2.0), (0.1, -2.0)):
            x, y = np.full(n, rest) * rng.random(n), rng.random(n)
            x[0] = first
            taken.add((bool(x.sum() > 0), bool(x[0] < 0.5)))
            assert_like_numpy(jf(x, y, 1.5), selecty(x, y, 1.5))
    assert len(taken) == 4
    s = jf.stats()
    assert (s["traces"], s["compiles"], s["graph_breaks"], s["eager_nodes"]) == (1, 1, 0, 0)
    text = jf.explain()
    assert "test_graph_breaks.py:" in text and "y, z selected" in text and "x selected" in text


def test_an_if_whose_branches_both_return_returns_a_select(backend):
    """`if c: return a` then `return b` (or an else), tuples of as many
    values too, with a traced array's pure methods: one compile, no break."""
    def f(x, thr):
        if x.max() > thr:
            return x / 2, x.sum()
        return -x, x.sum() * 0

    def g(x):
        y = x * 2
        if y.mean() > 1:
            return np.tanh(y).astype(np.float32)
        else:
            return (y - 1).astype(np.float32)
    jf, jg = jit(f, backend=backend), jit(g, backend=backend)
    rng = np.random.default_rng(3)
    for scale in (0.5, 2.0, 0.5, 3.0):
        x = rng.random(6) * scale
        for _ in range(2):
            assert_like_numpy(jf(x, 1.0), f(x, 1.0))
            assert type(jf(x, 1.0)[1]) is type(f(x, 1.0)[1]) is np.float64  # (a numpy scalar either way)
            assert_like_numpy(jg(x), g(x))
    for j in (jf, jg):
        assert (j.stats()["compiles"], j.stats()["graph_breaks"]) == (1, 0)
        assert "the returned value" in j.explain()


def test_ifs_that_cannot_be_selects_break_the_graph_as_before(backend):
    """Values that do not merge (another dtype, a Python number), a branch
    that may raise at run time where numpy would not run it (a gather's
    bounds check, a max of an empty array, np.linalg.solve), a product (a
    whole product each call the branch is not taken), a call of something
    other than numpy or a method that writes (`x.fill`), a statement other
    than a binding: the if runs as written, a graph break, numpy's results
    either way."""
    class Helper:
        def twice(self, v):
            return v * 2
    helper = Helper()

    def dtypes(x):
        v = x
        if x.sum() > 0:
            v = x.astype(np.float32)
        return v

    def number(x):
        v = 0.0
        if x.sum() > 0:
            v = x * 2
        return v

    def gather(x, ids):
        if ids[0] < x.shape[0]:
            v = x[ids[0]] * 2.0
        else:
            v = x[0] * 1.0
        return v

    def empty_max(x, flags):
        m = x.sum()
        if flags[0]:
            m = x.max()
        return m

    def solve(a, b, flags):
        v = b
        if flags[0]:
            v = np.linalg.solve(a, b)
        return v

    def product(x, w):
        v = x
        if x.sum() > 0:
            v = x @ w
        return v

    def writing_method(x):
        v = x
        if x.sum() > 0:
            v = x.cumsum().clip(0, 1).dot(x.take([0])) * x.fill(1.0)
        return v

    def not_numpy(x):
        v = x
        if x.sum() > 0:
            v = helper.twice(x)
        return v

    rng = np.random.default_rng(1)
    for fn, argsets in (
            (dtypes, [(rng.random(4),), (-rng.random(4),)]),
            (number, [(rng.random(4),), (-rng.random(4),)]),
            (gather, [(rng.random(4), np.array([2])), (rng.random(4), np.array([7]))]),
            (empty_max, [(rng.random(4), np.array([True])), (np.zeros(0), np.array([False]))]),
            (solve, [(np.eye(3) * 2, rng.random(3), np.array([True])),
                     (np.zeros((3, 3)), rng.random(3), np.array([False]))]),
            (product, [(rng.random((4, 4)), rng.random((4, 4))), (-rng.random((4, 4)), rng.random((4, 4)))]),
            (writing_method, [(-rng.random(4),)]),
            (not_numpy, [(rng.random(4),), (-rng.random(4),)])):
        jf = jit(fn, backend=backend)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JitWarning)
            for args in argsets + argsets:
                assert_like_numpy(jf(*args), fn(*args))
        assert jf.stats()["graph_breaks"] >= 1 and "both branches traced" not in jf.explain(), fn.__name__


def test_a_branch_that_writes_an_array_runs_the_call_in_numpy(backend):
    """A branch that writes into an array (np.copyto, out=) cannot be traced
    down both ways: the branch not taken would have written too, so the
    call runs in numpy (numpy's results and writes, a fallback)."""
    def f(x, y):
        v = x
        if x.sum() > 0:
            v = np.copyto(y, x)
        return v, y

    jf = jit(f, backend=backend)
    rng = np.random.default_rng(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for sign in (1, -1, 1):
            x = sign * rng.random(4)
            y1, y2 = np.zeros(4), np.zeros(4)
            got, want = jf(x, y1), f(x, y2)
            assert (got[0] is None) == (want[0] is None) and np.array_equal(y1, y2)
            if want[0] is not None:
                assert_like_numpy(got[0], want[0])
    assert jf.stats()["fallbacks"] >= 1 and "both branches traced" not in jf.explain()


def test_a_select_standing_for_an_array_one_branch_names_keeps_numpys_aliasing(backend):
    """Where one branch leaves a name on an existing array (`v = x`, then
    `if c: v = x * 2`), numpy's name aliases that array one way: a later
    write into the select has the function traced again with its ifs as
    written (graph breaks; numpy writes x that way, and so does the call);
    a return of the array itself one way is no select (numpy returns x);
    a select of two new arrays is written like any array."""
    def written(x, y):
        v = x
        if y.sum() > 0:
            v = x * 2
        v[0] = 7.0
        return v

    def returned(x):
        if x.sum() > 0:
            return x * 2
        return x

    def fresh(x, y):
        if y.sum() > 0:
            v = x * 2
        else:
            v = x - 1
        v[0] = 7.0
        return v

    for fn, breaks, selected in ((written, True, False), (returned, True, False), (fresh, False, True)):
        jf = jit(fn, backend=backend)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JitWarning)
            for sign in (1.0, -1.0, 1.0, -1.0):
                x1, x2, y = np.arange(4.0) * sign, np.arange(4.0) * sign, np.full(3, sign)
                args1, args2 = ((x1,), (x2,)) if fn is returned else ((x1, y), (x2, y))
                assert_like_numpy(jf(*args1), fn(*args2))
                assert np.array_equal(x1, x2), fn.__name__  # (x written as numpy writes it)
        s = jf.stats()
        assert s["fallbacks"] == 0 and (s["graph_breaks"] > 0) == breaks, fn.__name__
        assert ("both branches traced" in jf.explain()) == selected, fn.__name__


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_an_aliasing_select_is_known_by_its_array_not_by_a_reused_id(backend, monkeypatch):
    """A select that stands for an array one way (`v = x`, then `if c: v =
    x * 2`) is known by its storage, compared by identity: a later array
    that took the id() of one that died (NPBench's contour_integral S, in
    some processes: each trip's `X = -X` select, then the next trip's fresh
    `Tz += ...`) is another array, and writing it undoes no select.  Here
    every storage gets the same id()."""
    import builtins

    from jit import lift, tracer

    def same_id(o):
        return 7 if isinstance(o, tracer.Storage) else builtins.id(o)
    monkeypatch.setattr(tracer, "id", same_id, raising=False)
    monkeypatch.setattr(lift, "id", same_id, raising=False)

    def f(x, y):
        v = x
        if y.sum() > 0:
            v = x * 2
        z = np.zeros(3)
        z += 1.0  # (a write into another array)
        return v + z.sum()

    jf = jit(f, backend=backend)
    for sign in (1.0, -1.0):
        x, y = np.arange(4.0), np.full(3, sign)
        assert_like_numpy(jf(x, y), f(x, y))
    s = jf.stats()
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["traces"] == 1, jf.explain()
    assert "both branches traced, v selected" in jf.explain()


def test_a_reshape_by_a_size_bound_at_run_time_of_zero(backend):
    """`a[:2 * k].reshape(k, 2)` with k = int(m.sum()) of 0 at the trace:
    the element count 0 == 2k is a check (unify failed: "cannot unify 0 and
    1", the signature ran in numpy)."""
    def fn(a, m):
        k = int(m.sum())
        return a[: k * 2].reshape(k, 2)
    jf = jit(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for m in ([False, False], [True, False], [False, False], [True, True], [True, True, False]):
            a, m = np.arange(20.0), np.array(m)
            assert_like_numpy(jf(a, m), fn(a, m))
    assert jf.stats()["eager_calls"] == 0


def _safe_pick(x, idx):
    try:
        return x[idx].sum()
    except IndexError:
        return -1.0


def _safe_solve(a, b):
    try:
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return np.zeros_like(b)


def test_an_error_the_function_catches_is_not_compiled_in(backend):
    """`try: ... except IndexError:` that caught an error of the first
    call's values compiled the except clause's result for every later call
    (silently: every good call returned -1.0); such a function runs in numpy."""
    x = np.arange(5.0)
    f = jit(_safe_pick, backend=backend)
    g = jit(_safe_solve, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for idx in ([7], [1], [2, 4], [9, 0]):
            assert f(x, np.array(idx)) == _safe_pick(x, np.array(idx))
        b = np.ones(2)
        for a in (np.ones((2, 2)), np.diag([2.0, 4.0]), np.eye(2)):
            assert_like_numpy(g(a, b), _safe_solve(a, b))


def _rounded(x, t):
    return round(t, 2), round(x.sum(), 1), round(x.sum()), x * round(t, 1)


def test_round_of_traced_scalars_is_pythons(backend):
    """round() of a Python float argument and of a numpy scalar: a Python
    float and numpy's scalar with ndigits, an int without (a size bound at
    run time); it raised "Tracer doesn't define __round__" inside shapejit
    and the signature ran in numpy."""
    f = jit(_rounded, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n, t in ((3, 1.2345), (4, 2.5), (5, -0.35)):
            x = np.linspace(0, 1, n)
            got, want = f(x, t), _rounded(x, t)
            assert [type(v) for v in got] == [type(v) for v in want] and got[:3] == want[:3]
            assert_like_numpy(got[3], want[3])


def _holdout(perm, test_frac):
    k = int(round(perm.shape[0] * test_frac))
    return perm[:k], perm[k:], round(perm.shape[0] / 3), k


def test_round_to_an_int_is_a_size_bound_at_run_time(backend):
    """`k = int(round(n * frac))`: round() of a traced float (or of a float
    of sizes) without ndigits is the int int() would make of np.rint's value,
    a size bound at run time, and int() of it is itself: every length traced
    again, each k a graph break or a guard (probe 22)."""
    f = jit(_holdout, backend=backend)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in range(20, 36):
            p = rng.permutation(n)
            got, want = f(p, 0.2), _holdout(p, 0.2)
            assert [type(v) for v in got] == [type(v) for v in want] and got[2:] == want[2:]
            assert_like_numpy(got[:2], want[:2])
    s = f.stats()
    assert s["traces"] == 1 and s["graph_breaks"] == 0, f.explain()


def _signed_sqrt(x):
    v = x.mean()
    if v >= 0:
        r = np.sqrt(v)
    else:
        r = -np.sqrt(-v)
    return r


def _safe_ratio(a, b):
    s = b.sum()
    if s != 0:
        r = a.sum() // s
    else:
        r = a.sum()
    return r


def test_a_selects_branch_not_taken_gives_no_runtime_warning(backend):
    """Both branches of a select run: the one numpy does not take (sqrt of
    a negative, // 0 of numpy's scalars) gave numpy's RuntimeWarning, and
    under warnings as errors the call ran in numpy with a JitWarning."""
    f, g = jit(_signed_sqrt, backend=backend), jit(_safe_ratio, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x in ([1.0, 2.0], [4.0, 5.0], [-4.0, 1.0], [-1.0, -3.0]):
            assert f(np.array(x)) == _signed_sqrt(np.array(x))
        for n, d in ((4, 1), (4, 2), (5, 2), (6, 1)):
            a, b = np.arange(n), np.arange(n) - d
            assert g(a, b) == _safe_ratio(a, b)
    assert f.stats()["fallbacks"] == 0 and g.stats()["fallbacks"] == 0


def _bisect3(a, lo, hi):
    for _ in range(5):
        mid = (lo + hi) / 2
        if np.sum(a * mid) > 1.0:
            hi = mid
        else:
            lo = mid
    return mid, lo, hi


def _keyed(x):
    s = float(x.sum())
    return {s: 1, "n": x.shape[0] * 0.5}


def _flags(b):
    return b.any().item() + b.all().item()


def test_python_numbers_of_the_trace_stay_pythons(backend):
    """float() of a 0-d argument is a Python float (it was the 0-d array);
    a select of two Python floats is a Python float (np.where made a 0-d
    array of `hi = mid`); .item() of a bool is Python's bool (True + True
    is 2); a dict keyed by a traced Python float runs in numpy (the trace's
    key was handed out)."""
    f = jit(lambda x: float(x), backend=backend)
    for v in (2.5, 3.5, -1.0):
        got = f(np.array(v))
        assert type(got) is float and got == v
    g = jit(_bisect3, backend=backend)
    for n in (3, 4, 2, 5):
        assert_same_as_python(g, _bisect3, np.linspace(0.1, 1, n), 0.0, 10.0)
    h = jit(_flags, backend=backend)
    for b in ([True, True], [True, True, True], [True, False], [False, False, False]):
        assert h(np.array(b)) == _flags(np.array(b)) and type(h(np.array(b))) is int
    k = jit(_keyed, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for n in (5, 3, 8, 6):
            x = np.arange(float(n))
            got = k(x)
            assert got == _keyed(x) and all(type(key) in (float, str) for key in got)


def _nan_guarded(x):
    s = x.sum()
    return int(s) if s == s else 0


def test_a_decision_numpy_cannot_take_is_decided_otherwise_not_a_failure(backend):
    """int() of a NaN raises in numpy: a compiled call whose graph break
    computes it (the branch a NaN does not take) decides otherwise and runs
    down its own path (it failed as shapejit's error: numpy for good)."""
    f = jit(_nan_guarded, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for x in ([1.0, 0.5], [2.0, 0.0], [np.nan, 1.0], [1.0, 2.0], [np.nan, 0.0]):
            assert f(np.array(x)) == _nan_guarded(np.array(x))
    assert f.stats()["fallbacks"] == 0


def _python_power(x):
    a, b = float(x[0]), float(x[1])
    return a ** b


def test_a_power_of_python_floats_is_pythons(backend):
    """`a ** b` of Python floats: 0.0 ** -1 raises ZeroDivisionError and a
    negative base to a fractional power is complex, in the trace as in the
    compiled code (the trace gave numpy's inf and nan)."""
    shared = jit(_python_power, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for v, f in itertools.product(([2.0, 3.0], [-2.0, 0.5], [4.0, 0.5], [0.0, -1.0], [1.5, -2.0], [-8.0, 1 / 3]),
                                      (shared, None)):
            f = f or jit(_python_power, backend=backend)  # (a trace of its own: the trace's value)
            assert_same_as_python(f, _python_power, np.array(v))


def _bool_arith(x):
    c = float(x.sum()) > 0
    d = float(x.max()) > 1
    return ~c, abs(c), -c, c + d, c - True, divmod(float(x.sum()), 3.0)


def test_python_bools_of_the_trace_compute_as_pythons(backend):
    """A comparison of traced Python floats is a Python bool: ~, -, abs()
    and arithmetic take it as its int (numpy's bool gave logical not, or
    raised: the signature ran in numpy); divmod() of traced floats is
    Python's."""
    f = jit(_bool_arith, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for v in (np.ones(3), -np.ones(4), np.arange(4.0), np.zeros(5)):
            assert_same_as_python(f, _bool_arith, v)


def label_propagation(A, labels, iters):
    for _ in range(iters):
        onehot = np.eye(labels.max() + 1)[labels]
        score = A @ onehot
        labels = np.where(score.max(1) > 0, score.argmax(1), labels)
    return labels


def one_hot_rows(x, idx):
    return np.eye(idx.max() + 1)[idx] * x[idx][:, None]


def test_a_step_that_raises_before_a_graph_break_s_check_runs_is_no_failure(backend):
    """`np.eye(labels.max() + 1)[labels]`: the passes fuse labels.max() into
    a kernel after the gather the decision sized, so a call that decides
    otherwise reached the gather's bounds check first (IndexError) and the
    signature ran in numpy for good, with an internal-error warning (probe
    17).  Such a failure of an entry with graph breaks traces the call
    again; an index numpy refuses still raises numpy's IndexError, and the
    function serves the next call."""
    f = jit(label_propagation, backend=backend)
    rng = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (2, 3, 4, 3, 2, 5):
            A = (rng.random((n, n)) > 0.5).astype(float)
            assert_like_numpy(f(A, np.arange(n), 2), label_propagation(A, np.arange(n), 2))
    assert f.stats()["eager_calls"] == 0 and f.stats()["fallbacks"] == 0, f.explain()
    g = jit(one_hot_rows, backend=backend)
    x = np.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        assert_like_numpy(g(x, np.array([0, 1, 1])), one_hot_rows(x, np.array([0, 1, 1])))
        for idx in (np.array([0, 5, 2]), np.array([-9, 1])):
            with pytest.raises(IndexError):
                one_hot_rows(x, idx)
            with pytest.raises(IndexError):
                g(x, idx)
        assert_like_numpy(g(x, np.array([3, 0, 2])), one_hot_rows(x, np.array([3, 0, 2])))
    assert g.stats()["fallbacks"] == 0, g.explain()

"""Graph breaks: a data-dependent Python decision (`if x.sum() > 0:`,
`float(x)`, `.item()`, a loop until convergence) no longer sends the
function to eager.  The trace takes the call's outcome and the executable
checks it where the value is computed; a call that decides otherwise is
traced once down its own path, so each path compiles once and every later
call runs compiled code.  explain() names each break with its file:line."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy


def branchy(x, b):
    if x.sum() > 0:
        y = np.tanh(x + b) * 2
    else:
        y = np.exp(-x) - b
    return y


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
        if x.max() > 0.5:
            return x * 2
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
        return x[k:] * float(x[0])
    jf = jit(f, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for x in ([1.0, 3.0, 2.0], [1.0, 3.0, 2.5], [2.0, 0.0, 5.0], [1.0, 3.0, 2.0]):
            x = np.array(x)
            assert_like_numpy(jf(x), f(x))
    assert jf.stats()["traces"] == 2  # one per distinct (argmax, x[0]) outcome: calls 2 and 4 reuse entry 0


def test_outcomes_that_keep_changing_run_eagerly_after_a_bound(backend):
    def f(x):
        return x * float(x.sum())
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
        k = int(np.arange(x.shape[0]).sum())  # depends on a dim: a break, checked
        return x[: int(t.argmax())] + t.tolist()[2] + k
    jf = jit(f, backend=backend)
    for n in (5, 7, 7, 9):
        x = np.arange(float(n))
        assert_like_numpy(jf(x), f(x))
    s = jf.stats()
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 3 and s["traces"] == 3  # one per distinct k


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

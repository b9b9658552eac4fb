"""A list of Python numbers passed as an argument is data once its length
changes (torch's automatic dynamic, for a list's length): the array
np.asarray makes of it, of a symbolic length, so a price series or a token
list of any length is served by one trace.  What only a list can do (an
item, iterating, appending, returning it) traces it again as the list it
is, a trace per length, as before; results are numpy's either way."""
from __future__ import annotations

import statistics
import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy

LENGTHS = (5, 9, 13, 30, 31, 77)


def _same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    if isinstance(want, list):
        assert type(got) is list and got == want
        return
    assert type(got) is type(want), f"{type(got).__name__} != {type(want).__name__}"
    if np.asarray(want).dtype.kind == "f":  # (a compiled reduction sums in another order: a ratio of two)
        assert np.asarray(got).dtype == np.asarray(want).dtype and np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    else:
        assert_like_numpy(got, want)


def _run(fn, make, lengths=LENGTHS, **options):
    f = jit(fn, **options)
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in lengths:
            args = make(n, rng)
            _same(f(*args), fn(*args))
    assert f.stats()["eager_calls"] == 0 and f.stats()["fallbacks"] == 0
    return f


def price_stats(prices, window=3):
    p = np.asarray(prices)
    rets = np.diff(np.log(p))
    sharpe = rets.mean() / rets.std(ddof=1) * np.sqrt(252)
    drawdown = (p / np.maximum.accumulate(p) - 1).min()
    sma = np.convolve(p, np.ones(window) / window, mode="valid")
    return sharpe, drawdown, sma, len(prices)


def _prices(n, rng):
    return ([float(v) for v in 100 * np.exp(np.cumsum(rng.standard_normal(n) * 0.01))],)


def test_a_price_series_passed_as_a_list_is_traced_twice_for_every_length():
    f = _run(price_stats, _prices)
    assert f.stats()["traces"] == 2
    assert "prices: list of float[*]" in f.explain()
    assert "list argument prices changed length: now data" in f.explain()


def embed(W, ids):
    return np.tanh(W[np.array(ids)]).sum(0), np.mean(ids), np.bincount(ids, minlength=4)


def test_a_token_list_is_an_int64_array():
    f = _run(embed, lambda n, rng: (rng.standard_normal((50, 8)), [int(v) for v in rng.integers(0, 50, n)]))
    assert f.stats()["traces"] == 2
    assert "ids: list of int[*]" in f.explain()


def first_and_sum(xs):
    return xs[0] + np.asarray(xs).sum()


def iterate(xs):
    return np.array([x * 2 for x in xs]).sum()


def builtin_sum(xs):
    return sum(xs) * np.ones(2)


def library_mean(xs):
    return statistics.fmean(xs) * np.ones(2)


def repeated(xs):
    return np.asarray(xs * 2)


@pytest.mark.parametrize("fn", [first_and_sum, iterate, builtin_sum, repeated, library_mean])
def test_a_list_used_as_a_list_is_traced_per_length_as_before(fn):
    """An item is a Python float, `xs * 2` repeats the list, an append is
    the caller's: the list as it is, each length a trace of its own."""
    f = jit(fn)
    rng = np.random.default_rng(0)
    for n in LENGTHS:
        xs = [float(v) for v in rng.random(n)]
        mine, theirs = list(xs), list(xs)
        with warnings.catch_warnings():  # (statistics.fmean of 77 traced floats: more decisions than a trace takes)
            warnings.simplefilter("ignore", JitWarning)
            _same(f(mine), fn(theirs))
        assert mine == theirs
    assert f.stats()["traces"] + f.stats()["eager_calls"] == len(LENGTHS)  # (a trace per length, or numpy)
    assert "used as a list" in f.explain()


def append_and_return(xs):
    xs.append(1.5)
    return np.asarray(xs) * 2, xs


def set_a_key(d, x):
    d["seen"] = len(d)
    return x * 2


def replace_an_item(xs, x):
    xs[0] += 1.0
    return x + xs[1]


@pytest.mark.parametrize("fn, make", [
    (append_and_return, lambda n, rng: ([float(v) for v in rng.random(n)],)),
    (set_a_key, lambda n, rng: ({"a": 1.0}, rng.random(n))),
    (replace_an_item, lambda n, rng: ([float(v) for v in rng.random(n)], rng.random(n)))])
def test_a_list_or_dict_the_function_changes_is_the_callers(fn, make):
    """numpy's call changes the caller's list or dict: the call runs in
    numpy, with a warning (the trace changed a copy: the caller's list
    stayed as it was, silently)."""
    f = jit(fn)
    for n in LENGTHS[:3]:
        mine, theirs = make(n, np.random.default_rng(n)), make(n, np.random.default_rng(n))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JitWarning)
            _same(f(*mine), fn(*theirs))
        assert mine[0] == theirs[0]
    assert "changes a list or dict it was passed" in f.explain()


def written_copy(xs):
    a = np.asarray(xs)
    a[0] = -1.0
    b = np.array(xs)
    b *= 2
    return a.sum(), np.asarray(xs).sum(), b, np.asarray(xs, dtype=np.float32)


def test_each_array_made_of_the_list_is_a_fresh_one():
    f = _run(written_copy, lambda n, rng: ([float(v) for v in rng.random(n)],))
    assert f.stats()["traces"] == 2


def test_lists_that_are_not_numbers_of_one_type_stay_lists():
    f = jit(lambda xs: np.asarray(xs) * 2)
    for xs in ([1, 2.5], [1.5, 2], [True, False], [2 ** 70, 1], [1, 2 ** 70, 3], [np.float64(1.0), 2.0]):
        with warnings.catch_warnings():  # (an int beyond int64: numpy decides, that signature in numpy)
            warnings.simplefilter("ignore", JitWarning)
            assert_like_numpy(f(xs), np.asarray(xs) * 2)
    assert "list of" not in f.explain()


def test_dynamic_false_keeps_every_length_a_key():
    f = _run(price_stats, _prices, lengths=(5, 9, 13), dynamic=False)
    assert f.stats()["traces"] == 3


def test_a_helper_module_whose_numpy_is_not_the_traces(tmp_path, monkeypatch):
    """A user module's numpy is the trace's too (its np.asarray of the list
    is of the array); the results are numpy's."""
    (tmp_path / "sj_list_helper.py").write_text(
        "import numpy\n\ndef total(xs):\n    return numpy.asarray(xs).sum()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import sj_list_helper

    def fn(xs):
        return sj_list_helper.total(xs) * np.ones(3)
    f = _run(fn, lambda n, rng: ([float(v) for v in rng.random(n)],))
    assert f.stats()["traces"] == 2


def checks_its_type(W, xs):
    if isinstance(xs, list):
        return W @ np.asarray(xs), W @ xs, np.mean(xs), type(xs) is list
    return None


def projected(W, xs):
    return W @ xs, np.asarray(xs) @ W.T, isinstance(xs, (list, tuple))


def test_a_list_taken_as_data_is_a_list_to_isinstance_and_an_array_to_matmul():
    """isinstance(xs, list) of a list taken as data is True (it was False);
    `W @ xs` takes its array; a function that asks type() keeps its lists
    lists (a trace per length)."""
    f, g = jit(projected), jit(checks_its_type)
    for n in LENGTHS:
        W = np.random.default_rng(n).random((3, n))
        xs = [float(v) for v in np.random.default_rng(n + 1).random(n)]
        _same(f(W, xs), projected(W, xs))
        _same(g(W, xs), checks_its_type(W, xs))
    assert f.stats()["traces"] == 2 and "xs: list of float[*]" in f.explain()
    assert g.stats()["traces"] == len(LENGTHS)

"""A loop compiled as a scan that appends one array per trip to a list
(`outs.append(h)`): the scan stacks what the trips appended (jax.lax.scan's
ys), so an RNN that returns `np.stack(outs)` compiles once for every length.
What only a list of known length can do (len(), iterating, returning the
list) traces the call again with the appends as written; what numpy's list
would alias (an array the loop writes into, a list another name holds)
stays unrolled.  Results, dtypes and shapes are numpy's."""
from __future__ import annotations

import numpy as np
import pytest

from jit import jit
from jit.scan import UNROLLED
from tests.conftest import assert_like_numpy

LENGTHS = (5, 7, 3, 12, 9, 2)


def rnn_stack(x, W, U, h):
    outs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        outs.append(h)
    return np.stack(outs), h


def rnn_readout(x, W, U, h, V, b):
    ys = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        ys.append(h @ V)  # (a row no carried array's shape: its dims data-dependent sizes)
    return np.array(ys) + b


def rnn_concatenate(x, W, U, h):
    outs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        outs.append(h[None, :])
    return np.concatenate(outs, axis=0).sum(axis=1)


def rnn_with_first(x, W, U, h):
    hs = [h]  # (an item before the loop: the list is it, then a row per trip)
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        hs.append(h)
    return np.stack(hs, axis=1)


def rnn_last_and_mean(x, W, U, h):
    outs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        outs.append(h * 2)
    return outs[-1] + outs[0], np.mean(outs, axis=0), np.vstack(outs), np.hstack(outs)


def rnn_two_lists(x, W, U, h):
    pre, post = [], []
    for t in range(x.shape[0]):
        a = x[t] @ W + h @ U
        pre.append(a)
        h = np.tanh(a)
        post.append(h)
    return np.stack(pre) - np.stack(post)


def only_appends(x):
    outs = []
    for t in range(1, x.shape[0]):
        outs.append(x[t] - x[t - 1])
    return np.stack(outs)


ARGS = {
    "rnn": lambda rng, T: (rng.standard_normal((T, 6)).astype(np.float32),
                           (rng.standard_normal((6, 8)) * 0.4).astype(np.float32),
                           (rng.standard_normal((8, 8)) * 0.4).astype(np.float32),
                           rng.standard_normal(8).astype(np.float32)),
}


def uses_len(x, W, U, h):
    outs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        outs.append(h)
    return np.stack(outs) / len(outs)


def _args(fn, rng, T):
    if fn is only_appends:
        return (rng.standard_normal((T, 3, 4)),)
    args = ARGS["rnn"](rng, T)
    if fn is rnn_readout:
        args += (rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32))
    return args


@pytest.mark.parametrize("fn", [rnn_stack, rnn_readout, rnn_concatenate, rnn_with_first, rnn_last_and_mean,
                                rnn_two_lists, only_appends, uses_len])
def test_a_loop_appending_to_a_list_compiles_once_for_every_length(backend, fn):
    rng = np.random.default_rng(0)
    f = jit(fn, backend=backend)
    for T in LENGTHS + (40,):
        args = _args(fn, rng, T)
        assert_like_numpy(f(*args), fn(*args), ulps=16, atol=1e-6)  # (a recurrence: a few ulp of its terms)
    # the first lengths unrolled, then one scan, stacking the list, for every other length
    assert f.stats()["traces"] == UNROLLED + 1 and f.stats()["fallbacks"] == 0
    text = f.explain()
    assert "stacking what it appends to" in text


def returns_the_list(x, W, U, h):
    outs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        outs.append(h)
    return outs


def iterates(x, W, U, h):
    outs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        outs.append(h)
    return sum(o.sum() for o in outs)


def test_a_returned_list_is_the_rows_of_the_stacked_array(backend):
    """`return outs` of a list a scan appended arrays to: the list of the
    stacked array's rows (jit/pytree.py Rows), a list of arrays with
    numpy's values, one scan for every length (a trace per length before:
    the appends were made as written)."""
    rng = np.random.default_rng(1)
    f = jit(returns_the_list, backend=backend)
    for T in LENGTHS:
        args = _args(rnn_stack, rng, T)
        got, want = f(*args), returns_the_list(*args)
        assert type(got) is list and len(got) == len(want)
        for g, w in zip(got, want):
            assert_like_numpy(g, w, ulps=16, atol=1e-6)  # (a recurrence: a few ulp of its terms)
    assert f.stats()["traces"] == UNROLLED + 1 and f.stats()["fallbacks"] == 0, f.explain()
    assert "stacking" in f.explain()


def stacks_if_any(x, W, U, h):
    outs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U)
        outs.append(h)
    return np.stack(outs) if outs else np.zeros((0,) + h.shape, h.dtype)


def test_the_lists_length_and_truth_are_of_the_trip_count(backend):
    """`len(outs)` and `if outs` of the list a scan appended to: its trip
    count, a symbol, and a guard on it (each was a trace per length, probe
    17); a call whose loop runs no trip takes the other branch."""
    rng = np.random.default_rng(2)
    f = jit(stacks_if_any, backend=backend)
    for T in LENGTHS + (0, 40):
        args = _args(rnn_stack, rng, T)
        assert_like_numpy(f(*args), stacks_if_any(*args), ulps=16, atol=1e-6)  # (a recurrence: its terms' ulp)
    assert f.stats()["traces"] <= UNROLLED + 2 and f.stats()["fallbacks"] == 0, f.explain()
    assert "stacking what it appends to" in f.explain()


@pytest.mark.parametrize("fn", [iterates])
def test_a_list_used_as_only_a_list_can_be_is_appended_as_written(backend, fn):
    rng = np.random.default_rng(1)
    f = jit(fn, backend=backend)
    for T in LENGTHS:
        args = _args(rnn_stack, rng, T)
        assert_like_numpy(f(*args), fn(*args), ulps=16, atol=1e-6)  # (a recurrence: a few ulp of its terms)
    assert f.stats()["fallbacks"] == 0 and f.stats()["eager_calls"] == 0
    assert "stacking" not in f.explain()


def appends_what_it_writes_into(x):
    acc = np.zeros(x.shape[1:])
    outs = []
    for t in range(x.shape[0]):
        acc += x[t]
        outs.append(acc)  # (numpy's list holds acc itself each time: every row its last value)
    return np.stack(outs)


def another_name_holds_the_list(x):
    outs = []
    keep = {"outs": outs}
    for t in range(x.shape[0]):
        outs.append(x[t] * 2)
    return np.stack(keep["outs"])


def writes_after_the_loop(x):
    outs = []
    for t in range(x.shape[0]):
        outs.append(x[t])  # (views of x: numpy's list sees the write below)
    x[0] = -1.0
    return np.stack(outs)


@pytest.mark.parametrize("fn", [appends_what_it_writes_into, another_name_holds_the_list, writes_after_the_loop])
def test_what_numpys_list_would_alias_is_numpys(backend, fn):
    rng = np.random.default_rng(2)
    f = jit(fn, backend=backend)
    for T in LENGTHS:
        x = rng.standard_normal((T, 4))
        mine = x.copy()
        assert_like_numpy(f(mine), fn(x))
        np.testing.assert_array_equal(mine, x)  # (numpy's writes into the argument, and only those)
    assert f.stats()["fallbacks"] == 0


def from_k(x, k):
    outs = []
    for t in range(k, x.shape[0]):
        outs.append(x[t] + t)
    return np.stack(outs)


def test_a_call_whose_loop_runs_no_trip_raises_numpys_error(backend):
    rng = np.random.default_rng(3)
    f = jit(from_k, backend=backend)
    x = rng.standard_normal((8, 3))
    for k in (0, 1, 2, 3, 4):  # (k changes: a symbol; the trip count x.shape[0] - k)
        assert_like_numpy(f(x, k), from_k(x, k))
    assert "stacking" in f.explain()
    with pytest.raises(ValueError, match="need at least one array"):
        from_k(x, 8)
    with pytest.raises(ValueError, match="need at least one array"):
        f(x, 8)
    assert_like_numpy(f(x, 5), from_k(x, 5))  # (and the function stays usable)


def changes_dtype_midway(x):
    outs = []
    for t in range(x.shape[0]):
        outs.append(x[t] if t < 3 else x[t].astype(np.float32))
    return np.stack(outs)


def test_an_append_of_another_dtype_gives_numpys_promotion(backend):
    rng = np.random.default_rng(4)
    f = jit(changes_dtype_midway, backend=backend)
    for T in LENGTHS:
        x = rng.standard_normal((T, 3)).astype(np.float16)
        assert_like_numpy(f(x), changes_dtype_midway(x))


def gru_over_rows(xs, h, W):
    outs = []
    for x in xs:  # (the rows of xs: a scan over its first dim)
        h = np.tanh(x @ W + h)
        outs.append(h)
    return np.array(outs) / len(xs)  # (len: the first dim, a symbol)


def test_a_loop_over_the_rows_of_an_array_is_a_scan(backend):
    rng = np.random.default_rng(8)
    f = jit(gru_over_rows, backend=backend)
    for T in LENGTHS:
        args = (rng.standard_normal((T, 3)), rng.standard_normal(4), rng.standard_normal((3, 4)) * 0.5)
        assert_like_numpy(f(*args), gru_over_rows(*args), ulps=16, atol=1e-12)
    assert f.stats()["traces"] == UNROLLED + 1 and f.stats()["fallbacks"] == 0
    assert "for loop over the rows of xs compiled once for every trip count" in f.explain()


def particle_filter(obs, noise, u, n_particles, q=0.3, rr=0.5):
    T = len(obs)
    x = np.zeros(n_particles)
    est = np.empty(T)
    ess_hist = []
    for t in range(T):
        x = x + q * noise[t]
        logw = -0.5 * ((obs[t] - x) / rr) ** 2
        w = np.exp(logw - logw.max())  # (a new array each trip: `w /= ...` writes into the trip's own)
        w /= w.sum()
        est[t] = (w * x).sum()
        ess_hist.append(1.0 / (w ** 2).sum())  # (a numpy scalar per trip: a row of no dims)
        positions = (u[t] + np.arange(n_particles)) / n_particles
        cs = np.cumsum(w)
        cs[-1] = 1.0
        x = x[np.searchsorted(cs, positions)]
    return est, np.array(ess_hist)


def test_a_particle_filter_compiles_once_for_every_length(backend):
    """A bootstrap particle filter as written: arrays each trip makes and
    writes into (np.exp's, np.cumsum's), an estimate written per trip, the
    effective sample sizes appended (numpy scalars) and stacked."""
    rng = np.random.default_rng(16)
    f = jit(particle_filter, backend=backend)
    for T in LENGTHS:
        args = (rng.standard_normal(T), rng.standard_normal((T, 40)), rng.random(T), 40)
        assert_like_numpy(f(*args), particle_filter(*args), ulps=64, atol=1e-12)
    assert f.stats()["traces"] == UNROLLED + 1 and f.stats()["fallbacks"] == 0
    assert "stacking what it appends to ess_hist" in f.explain()


def sgd_over_pairs(X, y, w, lr):
    losses = []
    for xi, yi in zip(X, y):  # (the rows of X and y together)
        err = xi @ w - yi
        w = w - lr * err * xi
        losses.append(err * err)
    return w, np.array(losses)


def decayed_over_rows(x):
    s = x[0] * 0
    for i, row in enumerate(x):  # (the row's index is the trip's)
        s = s * 0.9 + row * (i % 3)
    return s


def weighted_over_pairs(xs, ys):
    out = np.zeros(xs.shape[1])
    for i, (a, b) in enumerate(zip(xs, ys[1:])):  # (an index and the rows of two arrays: probe 15)
        out = out + i * a * b
    return out


def zipped_of_other_lengths(a, b):
    s = 0.0
    for p, q in zip(a, b):  # (zip stops at the shorter: traced as written)
        s = s + p * q
    return s


def test_loops_over_zip_and_enumerate_of_arrays_are_scans(backend):
    rng = np.random.default_rng(18)
    f = jit(sgd_over_pairs, backend=backend)
    g = jit(decayed_over_rows, backend=backend)
    h = jit(zipped_of_other_lengths, backend=backend)
    k = jit(weighted_over_pairs, backend=backend)
    for T in LENGTHS:
        args = (rng.standard_normal((T, 4)), rng.standard_normal(T), np.zeros(4), 0.05)
        assert_like_numpy(f(*args), sgd_over_pairs(*args), ulps=16, atol=1e-12)
        x = rng.standard_normal((T, 3))
        assert_like_numpy(g(x), decayed_over_rows(x), ulps=16)
        a, b = rng.standard_normal(T + 2), rng.standard_normal(T)
        assert_like_numpy(h(a, b), zipped_of_other_lengths(a, b), ulps=16)
        xs, ys = rng.standard_normal((T, 3)), rng.standard_normal((T + 1, 3))
        assert_like_numpy(k(xs, ys), weighted_over_pairs(xs, ys), ulps=16)
    for jf in (f, g, k):
        assert jf.stats()["traces"] == UNROLLED + 1 and jf.stats()["fallbacks"] == 0
    assert "rows of zip(X, y) compiled once" in f.explain() and "rows of enumerate(x) compiled once" in g.explain()
    assert "rows of enumerate(zip(xs, ys[1:])) compiled once" in k.explain()
    assert h.stats()["fallbacks"] == 0


def batched(X, W, bs):
    out = []
    for start in range(0, X.shape[0], bs):
        b = X[start:start + bs]
        out.append(np.tanh(b @ W) - b.mean(0))
    return np.concatenate(out, axis=0)


def batches_stacked(X, bs):
    out = []
    for start in range(0, X.shape[0], bs):
        out.append(X[start:start + bs] * 2)
    return np.stack(out)


def batched_vstack_with_head(X, bs):
    out = [X[:1] * 0]
    for start in range(0, X.shape[0], bs):
        out.append(X[start:start + bs] * 2)
    return np.vstack(out), np.concatenate(out, axis=None)


@pytest.mark.parametrize("first", [(64, 72, 80, 88), (64, 72, 81, 90)])
def test_batches_whose_last_is_shorter_are_joined(backend, first):
    """`for start in range(0, n, bs): out.append(f(X[start:start + bs]))`
    then np.concatenate(out): where n is no multiple of bs the last trip
    appends fewer rows.  A trace that meets that joins the rows (the list
    is then only np.concatenate's); one that stacked them, met by a later
    call with a short last batch, serves no call again and the call traces
    once more, joined (it ran in numpy on every such call, after running
    every trip)."""
    rng = np.random.default_rng(8)
    W = rng.standard_normal((6, 6))
    f = jit(batched, backend=backend)
    for n in first + (4097, 4096, 33, 8, 5, 100):
        X = rng.standard_normal((n, 6))
        assert_like_numpy(f(X, W, 8), batched(X, W, 8), atol=1e-12)
    s = f.stats()
    assert s["fallbacks"] == 0 and s["eager_calls"] == 0 and s["traces"] <= UNROLLED + 3, f.explain()
    # (the entry that stacked whole batches, once it met a short one, is dropped: no call runs it again)
    assert s["entries"] == s["traces"] - (first == (64, 72, 80, 88)), f.explain()
    assert "(a scan)" in f.explain()
    g = jit(batched_vstack_with_head, backend=backend)
    for n in (16, 24, 33, 41, 50):
        X = rng.standard_normal((n, 3))
        assert_like_numpy(g(X, 8), batched_vstack_with_head(X, 8))


def test_a_stack_of_batches_of_other_lengths_raises_numpys_error(backend):
    """np.stack needs rows of one length: a call with a short last batch
    raises numpy's ValueError, and the calls whose batches are whole are
    served as before."""
    rng = np.random.default_rng(9)
    f = jit(batches_stacked, backend=backend)
    for n in (16, 24, 32, 40, 20, 48, 27, 56):
        X = rng.standard_normal((n, 3))
        if n % 8:
            with pytest.raises(ValueError):
                batches_stacked(X, 8)
            with pytest.raises(ValueError):
                f(X, 8)
        else:
            assert_like_numpy(f(X, 8), batches_stacked(X, 8))


def predict_by_comprehension(X, W):
    bs = 4
    return np.concatenate([np.tanh(X[i:i + bs] @ W) for i in range(0, len(X), bs)])


def row_sums_by_comprehension(x, flag):
    i = -1  # (the comprehension's own i does not leak: this one is returned)
    if flag:
        s = np.array([row.sum() * 2 for row in x])
    else:
        s = np.array([a @ b for a, b in zip(x, x[::-1])])
    pairs = [(a * i, b) for i, (a, b) in enumerate(zip(x, x))]
    return s, i, len(pairs)


def test_a_list_comprehension_is_a_loop_that_appends(backend):
    """`np.concatenate([f(X[i:i + bs]) for i in range(0, n, bs)])` and
    `np.array([row.sum() for row in x])` compile as the loop that appends
    (a scan: a few traces for every length; each length traced again,
    probe 15); the comprehension's variables do not leak, and one whose
    list is used as only a list can be (len()) is appended as written."""
    rng = np.random.default_rng(10)
    W = rng.standard_normal((3, 2))
    f = jit(predict_by_comprehension, backend=backend)
    g = jit(row_sums_by_comprehension, backend=backend)
    for n in (8, 12, 16, 20, 24, 28, 3, 30):
        X = rng.standard_normal((n, 3))
        assert_like_numpy(f(X, W), predict_by_comprehension(X, W), atol=1e-12)
        for flag in (True, False):
            assert_like_numpy(g(X, flag), row_sums_by_comprehension(X, flag), atol=1e-12)
    assert f.stats()["traces"] <= UNROLLED + 3 and "(a scan)" in f.explain(), f.explain()
    assert f.stats()["fallbacks"] == 0 and g.stats()["fallbacks"] == 0


class RowScaler:
    def __init__(self):
        self.w = np.arange(1.0, 4.0)

    def rows(self, x):
        return np.stack([r * self.w for r in x])


def test_a_comprehension_in_a_method_is_a_loop_that_appends(backend):
    """In a method, the comprehension's loop names end in `__` (a name
    that starts with two underscores in a class body is made private,
    `_RowScaler__sj_lc0`, and the loop's names were not found: a trace per
    length)."""
    f = jit(RowScaler.rows, backend=backend)
    o = RowScaler()
    rng = np.random.default_rng(11)
    for n in (1, 2, 3, 4, 5, 6, 7):
        x = rng.standard_normal((n, 3))
        assert_like_numpy(f(o, x), RowScaler.rows(o, x))
    assert f.stats()["traces"] <= UNROLLED + 2 and f.stats()["fallbacks"] == 0, f.explain()


def dot_by_a_generator(x, w):
    return sum(x[i] * w[i] for i in range(x.shape[0])) / x.shape[0]


def mean_row_by_sum(x):
    return sum(x) / x.shape[0]


def weighted_rows_from_a_start(xs, ws):
    return sum((w * v for w, v in zip(ws, xs)), 0.5)


def stacked_and_summed(x):
    k = -1  # (the comprehension's own k does not leak)
    y = 2 * np.stack([r * 2 for r in x]) + sum([r for r in x])
    return y + sum(x[k] for k in range(x.shape[0])), k


def sum_shadowed(x):
    sum = np.sum  # noqa: F841 - a sum of the user's: not the builtin, not rewritten
    return sum(x, axis=0)


@pytest.mark.parametrize("fn, make, traces", [
    (dot_by_a_generator, lambda r, n: (r.standard_normal(n), r.standard_normal(n)), UNROLLED + 3),
    (dot_by_a_generator, lambda r, n: (r.integers(-5, 5, n), r.integers(-5, 5, n)), UNROLLED + 3),
    (mean_row_by_sum, lambda r, n: (r.standard_normal((n, 3)).astype(np.float32),), UNROLLED + 3),
    (weighted_rows_from_a_start, lambda r, n: (r.standard_normal((n, 3)), r.standard_normal(n)), UNROLLED + 3),
    (stacked_and_summed, lambda r, n: (r.standard_normal((n, 3)),), None),
    (sum_shadowed, lambda r, n: (r.standard_normal((n, 3)),), 1),
])
def test_sum_of_a_generator_is_a_loop_that_adds(backend, fn, make, traces):
    """`sum(x[i] * w[i] for i in range(n))`, `sum(x)` over rows and `sum(gen,
    start)` compile as the loop that adds, start + the first + ... as the
    builtin adds (a few traces for every length; each length traced again,
    probe 15); a sum after a call in its statement stays (the call runs
    first), and a sum the user bound is theirs."""
    rng = np.random.default_rng(11)
    f = jit(fn, backend=backend)
    for n in (3, 5, 8, 4, 12, 7, 9, 6, 2, 1, 0):
        args = make(rng, n)
        try:
            want = fn(*args)
        except Exception as e:  # noqa: BLE001 - numpy's error, raised by the jitted call too
            with pytest.raises(type(e)):
                f(*args)
            continue
        assert_like_numpy(f(*args), want, atol=1e-12)
    assert f.stats()["fallbacks"] == 0, f.explain()
    if traces is not None:  # (+2: one row and none are signatures of their own)
        assert f.stats()["traces"] <= traces + 2, f.explain()


def fit(X, y, w, lr, steps):
    losses, sizes, means = [], [], []
    for s in range(steps):
        r = X @ w - y
        loss = (r * r).mean()
        losses.append(float(loss))  # (Python floats)
        sizes.append(int(r.shape[0]) + s)  # (Python ints)
        means.append(loss)  # (numpy's float64 scalars)
        w = w - lr * (X.T @ r) / X.shape[0]
    return w, losses, sizes, means, losses[-1] * np.float32(2), np.mean(losses), np.array(sizes)


def test_a_loop_appending_python_numbers_is_a_scan_and_returns_numpys_list(backend):
    """`losses.append(float(loss))` in a training loop: the scan stacks the
    trips' numbers (it was unrolled per trip count, `trip 0 appended a float,
    not an array`), and the list returned holds Python floats (ints, numpy's
    scalars) as numpy's does; an item is a Python number (its promotion
    with a float32 numpy's)."""
    rng = np.random.default_rng(5)
    f = jit(fit, backend=backend)
    for n, steps in ((20, 5), (30, 6), (40, 7), (50, 9), (60, 12), (25, 1)):
        X, y = rng.standard_normal((n, 3)), rng.standard_normal(n)
        got, want = f(X, y, np.zeros(3), 0.1, steps), fit(X, y, np.zeros(3), 0.1, steps)
        assert_like_numpy(got[0], want[0], ulps=16)
        for g, w in zip(got[1:4], want[1:4]):
            assert type(g) is list and [type(x) for x in g] == [type(x) for x in w]
            np.testing.assert_allclose(g, w, rtol=1e-12)
        for g, w in zip(got[4:], want[4:]):
            assert_like_numpy(g, w, ulps=16)
    assert f.stats()["traces"] <= UNROLLED + 2 and f.stats()["fallbacks"] == 0, f.explain()
    assert "stacking what it appends to losses" in f.explain()


def rows_of(x):
    rows = []
    for t in range(x.shape[0]):
        rows.append(x[t])  # (numpy's list: views of x)
    return rows


def rows_by_comprehension(x):
    return [x[i] for i in range(x.shape[0])]


@pytest.mark.parametrize("fn", [rows_of, rows_by_comprehension])
def test_a_returned_list_of_views_of_an_argument_views_it(backend, fn):
    """`rows.append(x[t])` and `[x[i] for i in ...]` returned: numpy's items
    are views of x (a write into x after the call shows in them); the scan
    stacked copies of them (probe 19).  Such a list, returned, is appended
    as written."""
    f = jit(fn, backend=backend)
    for n in (2, 3, 4, 5, 6):
        x = np.arange(2.0 * n).reshape(n, 2)
        got = f(x)
        assert_like_numpy(got, fn(x))
        assert all(np.shares_memory(r, x) for r in got)
        x[0, 0] = 9.0
        assert got[0][0] == 9.0

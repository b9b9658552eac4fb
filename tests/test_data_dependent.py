"""Sizes only known at run time (the output of np.unique, a boolean-mask
read): a shape decision the trace takes on one is checked right after the
op that makes it runs, instead of sending the whole function to eager; a
call whose size decides otherwise runs in numpy (one call, counted)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy


def f(x):
    u = np.unique(x)
    head = u[:3] * 2          # decides len(u) >= 3
    pos = x[x > 1]            # a mask read: data-dependent too
    return head.sum() + x.sum(), pos[1:].sum()


def test_decisions_on_data_dependent_sizes_are_checked_at_run_time(backend):
    jf = jit(f, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (6, 7, 9):
            x = np.arange(n * 6, dtype=np.float64).reshape(n, 6) % 5
            assert_like_numpy(jf(x), f(x))
        x = np.zeros((5, 6))  # one unique value: the trace's len(u) >= 3 does not hold
        assert_like_numpy(jf(x), f(x))
    s = jf.stats()
    assert s["traces"] == 1 and s["eager_calls"] == 1
    assert jf.metrics.fallbacks["eager_size_changed"] == 1
    assert "3 <= u0" in "\n".join(jf.log)


def test_a_size_read_from_an_eager_result_keeps_its_node(backend):
    """`w[:np.unique(x).size]` reads only the size of np.unique's result: the
    node that makes it stays in the compiled program (before: dropped as
    dead, and every compiled call failed on an undefined size); a size past
    w's end takes that call through numpy, as the checked decision says."""
    def f(labels, w):
        return w[:np.unique(labels).size] * 2.0

    def g(m):
        return np.argwhere(m).shape[0] + m.sum()

    def h(labels):  # (only the size is returned)
        return labels * 2, np.unique(labels).size
    jf, jg, jh = jit(f, backend=backend), jit(g, backend=backend), jit(h, backend=backend)
    w = np.arange(6.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for labels in (np.array([3, 1, 3, 2, 1]), np.arange(9) % 4, np.arange(9) % 4, np.arange(5)):
            assert_like_numpy(jf(labels, w), f(labels, w))
        for m in (np.array([True, False, True]), np.arange(7) % 3 == 0, np.arange(7) % 2 == 0):
            assert_like_numpy(jg(m), g(m))
        for labels in (np.array([3, 1, 3]), np.arange(9) % 4, np.arange(9) % 5):
            assert_like_numpy(jh(labels), h(labels))
    assert_like_numpy(jf(np.arange(12), w), f(np.arange(12), w))  # (u0 > s1: that call in numpy)
    assert jf.stats()["eager_calls"] <= 1 and jg.stats()["eager_calls"] == jh.stats()["eager_calls"] == 0


def _arange_masked(x):
    idx = np.arange(6)                    # static: numpy's array while it is only data
    return idx[x > 0] * 2, x[x > 0]


def _grid_scatter(x):
    n = 3
    xi, yi = np.mgrid[0:n, 0:n]
    xi, yi = xi.reshape(-1), yi.reshape(-1)
    out = np.zeros((n, n), dtype=np.int64)
    m = x.reshape(-1) > 0
    out[xi[m], yi[m]] = 7
    return out, np.array([10.0, 20.0, 30.0])[(x[0] > 0).astype(np.int64)]


def test_numpy_arrays_of_constants_indexed_by_traced_ones_are_traced_constants(backend):
    """`np.arange(6)[mask]`, np.mgrid's arrays indexed by traced masks,
    a table of constants indexed by traced ids: numpy indexes its array with
    the traced one, which it cannot take as data; the call is traced again
    with the arrays the function makes of constants as traced constants
    (jit/trace.py _NumpyProxy._const), and compiles -- it used to run in
    numpy ("conversion to a numpy array of a traced array")."""
    rng = np.random.default_rng(3)
    for fn, shape in ((_arange_masked, (6,)), (_grid_scatter, (3, 3))):
        jf = jit(fn, backend=backend)
        with warnings.catch_warnings():
            warnings.simplefilter("error", JitWarning)
            for _ in range(3):
                x = rng.standard_normal(shape)
                assert_like_numpy(jf(x), fn(x))
        s = jf.stats()
        assert s["fallbacks"] == 0 and s["eager_calls"] == 0 and s["traces"] == 1, (fn.__name__, s)


def test_a_loop_deciding_on_data_dependent_sizes_past_the_bound_runs_in_numpy(backend):
    """A loop that shrinks its array by a mask each trip and decides on its
    length (NPBench's mandelbrot2: `if not len(Z): break`): each decision is
    checked at run time, and past MAX_BREAKS of them the function runs in
    numpy, where 716 masked reads as numpy steps between kernels ran at 0.6x."""
    def shrink(z, trips):
        total = np.zeros(())
        for _ in range(trips):
            if not len(z):
                break
            z = z[np.abs(z) < 0.999] * 1.001
            total = total + z.sum()
        return total

    z = np.linspace(-1, 1, 4001)
    for trips, eager in ((20, False), (80, True)):
        jf = jit(shrink, backend=backend)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", JitWarning)
            assert_like_numpy(jf(z, trips), shrink(z, trips), ulps=64)
        assert any("more than 64 data-dependent Python decisions" in str(w.message) for w in caught) == eager
        assert (jf.stats()["eager_calls"] > 0) == eager


def _counts(x, w):
    return np.bincount(x), np.bincount(x, weights=w, minlength=7), np.bincount(x, minlength=3).argmax()


def test_bincount_compiles_its_length_a_size_bound_at_run_time(backend):
    """np.bincount's length, max(x) + 1 or minlength, is a size the
    executable binds from the traced max: the counts are one np.add.at, no
    numpy step of data-dependent size, one trace for every length and
    maximum (it was an eager node).  A negative value raises numpy's
    ValueError (its call traced again, left to numpy), and the function
    stays usable; an empty x gives numpy's result."""
    jf = jit(_counts, backend=backend)
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (5, 9, 17, 33, 6, 40):
            x, w = rng.integers(0, n, n), rng.random(n)
            assert_like_numpy(jf(x, w), _counts(x, w))
    s = jf.stats()
    assert s["traces"] == 1 and s["eager_nodes"] == 0 and s["graph_breaks"] == 0, jf.explain()
    with pytest.raises(ValueError, match="negative"):
        jf(np.array([1, -1, 2]), np.ones(3))
    x, w = np.array([0, 3, 3]), np.ones(3)
    assert_like_numpy(jf(x, w), _counts(x, w))
    e = np.array([], dtype=np.int64)
    assert_like_numpy(jf(e, np.ones(0)), _counts(e, np.ones(0)))


def _histogram_of_bytes(img):
    return np.bincount(img.ravel(), minlength=256), np.bincount(img.ravel())


def test_bincount_of_bytes_counts_255_and_takes_minlength_256(backend):
    """A uint8 image's histogram: the length is max + 1 in intp (a uint8's
    255 + 1 wrapped to 0) and minlength 256 meets it as numpy's int (it
    raised numpy's OverflowError for a uint8 256 in the trace: every call in
    numpy)."""
    jf = jit(_histogram_of_bytes, backend=backend)
    rng = np.random.default_rng(6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for shape in ((5, 7), (9, 4), (16, 16)):
            img = rng.integers(0, 256, shape).astype(np.uint8)
            img[0, 0] = 255
            assert_like_numpy(jf(img), _histogram_of_bytes(img))
    assert jf.stats()["fallbacks"] == 0 and jf.stats()["eager_nodes"] == 0


def _group_means(k, v):
    starts = np.flatnonzero(k)
    sums = np.add.reduceat(v, starts)  # (its length u1, found equal to u2 - 1 only by the division below)
    return sums / np.diff(np.append(starts, len(k))), sums / np.append(starts, len(k))[1:]


def test_a_size_found_equal_to_one_bound_later_is_checked_once_both_are(backend):
    """Two numpy steps of data-dependent size whose sizes the trace found
    equal (u1 == u2 - 1), the first made before the second: the check of u1
    waits for u2 (it read u2 before it was bound: UnboundLocalError inside
    the executable, and every call after in numpy)."""
    jf = jit(_group_means, backend=backend)
    for picks in ([3], [3, 5], [3, 5, 8], [2, 3, 5, 8, 9]):
        k = np.zeros(12, np.int64)
        k[[0] + picks] = 1
        v = np.arange(12.0)
        assert_like_numpy(jf(k, v), _group_means(k, v))
    assert jf.stats()["fallbacks"] == 0 and jf.stats()["traces"] == 1


def _scaled_by_unique(X, y):
    return X * np.unique(y)[:-1]


def test_a_size_found_equal_to_an_input_dim_is_solved_for_the_size(backend, tmp_path, monkeypatch):
    """`X * np.unique(y)[:-1]`: broadcasting found u0 - 1 == s1, and replaced
    the input dim s1 by u0 - 1, a guard of the entry on a size no call has
    made yet (NameError at every call after the trace, and in a new process
    loading the saved trace); u0 is solved for instead (u0 = s1 + 1,
    checked where np.unique ran), and a call where it is not raises
    numpy's broadcast error."""
    monkeypatch.setenv("SHAPEJIT_CACHE_DIR", str(tmp_path))
    jf = jit(_scaled_by_unique, backend=backend)
    rng = np.random.default_rng(13)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (4, 4, 6, 9):
            X, y = rng.standard_normal((3, n)), np.arange(n + 1.0)
            assert_like_numpy(jf(X, y), _scaled_by_unique(X, y))
    assert jf.stats()["traces"] == 1
    X, y = rng.standard_normal((3, 4)), np.array([1.0, 1.0, 2.0, 3.0])  # (2 values after [:-1], not 4)
    with pytest.raises(ValueError):
        _scaled_by_unique(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(ValueError):
            jf(X, y)
    X, y = rng.standard_normal((3, 5)), np.arange(6.0)
    assert_like_numpy(jf(X, y), _scaled_by_unique(X, y))


def _root_sizes(c):
    return np.abs(np.roots(c)) * 2


def _emath_twice(x):
    return np.emath.sqrt(x) * 2


def _top_eigenvalues(A):
    w, V = np.linalg.eig(A)
    return np.abs(w[np.argsort(-np.abs(w))])


def test_an_eager_step_whose_dtype_follows_from_the_values_takes_a_path_per_dtype(backend):
    """np.roots, np.emath.sqrt and np.linalg.eig give complex results for
    some values, real for others: a compiled call whose eager step gave
    another dtype than the trace's ran on (two real roots read as one
    complex number: [2.236, 2.236] for numpy's [2, 1]), then ran in numpy
    at every such call (probe 18); as a graph break deciding otherwise,
    each dtype takes an entry of its own, traced once."""
    f, g, h = (jit(fn, backend=backend) for fn in (_root_sizes, _emath_twice, _top_eigenvalues))
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for c in ([1.0, 2.0, 5.0], [1.0, -3.0, 2.0], [1.0, 0.0, 4.0], [1.0, -5.0, 6.0]):
            assert_like_numpy(f(np.array(c)), _root_sizes(np.array(c)))
        for x in ([4.0, 9.0], [-4.0, 9.0], [1.0, 16.0], [-1.0, 2.0]):
            assert_like_numpy(g(np.array(x)), _emath_twice(np.array(x)))
        rng = np.random.default_rng(3)
        for A in (np.diag([3.0, 1.0]), np.array([[0.0, -1.0], [1.0, 0.0]]), rng.standard_normal((4, 4)),
                  np.diag([1.0, 2.0, 5.0]), np.array([[0.0, -2.0], [2.0, 0.0]])):
            assert_like_numpy(h(A), _top_eigenvalues(A))
    for jf in (f, g, h):
        s = jf.stats()
        assert s["traces"] <= 3 and s["eager_calls"] == 0, jf.explain()


def class_means(X, y):
    classes = np.unique(y)
    return classes, np.stack([X[y == c].mean(axis=0) for c in classes])


def test_a_loop_over_a_data_dependent_size_traces_once_per_count(backend):
    """`for c in np.unique(y)` specializes the count of classes: a call with
    another count is served by another entry (it ran in numpy on every such
    call, probe 15), and past two counts a scan serves every count; a decision that is no value of
    the size (len(u) >= 3 above) still runs that one call in numpy."""
    rng = np.random.default_rng(4)
    jf = jit(class_means, backend=backend)
    counts = (3, 2, 4, 4, 5, 3, 2, 5)
    for n, k in zip((10, 13, 20, 30, 17, 12, 9, 40), counts):
        X, y = rng.standard_normal((n, 3)), np.arange(n) % k
        assert_like_numpy(jf(X, y), class_means(X, y))
    s = jf.stats()
    # (the comprehension is the loop that appends: unrolled for two counts, then a scan serves every count)
    assert s["eager_calls"] == 0 and s["traces"] == 3 and "(a scan)" in jf.explain(), jf.explain()


def _positive_mean(x):
    r = x[x > 0]
    return r.mean() if r.size else 0.0


def test_whether_a_data_dependent_size_is_zero_takes_an_entry_per_outcome(backend):
    """`r.mean() if r.size else 0.0` of a mask's selection: a call whose
    mask selects nothing ran in numpy, at every such call (probe 18); it
    takes an entry of its own, traced once."""
    jf = jit(_positive_mean, backend=backend)
    rng = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for i in range(8):
            x = rng.standard_normal(6) if i % 2 == 0 else -np.abs(rng.standard_normal(6))
            assert_like_numpy(jf(x), _positive_mean(x))
    s = jf.stats()
    assert s["traces"] == 2 and s["eager_calls"] == 0 and s["fallbacks"] == 0, jf.explain()


def centroid_update(sums, cnt):
    m = cnt > 0
    return sums[m] / cnt[m, None], sums[m] * cnt[:, None][m]


def plus_unique(x, v):
    return x + np.unique(v)


def test_a_data_dependent_size_of_one_broadcasts_in_the_kernels_that_read_it(backend):
    """k-means' `sums[m] / cnt[m, None]`: the mask's read of an (n, 1)
    column has a size of 1 the data decides, which broadcasts.  Left a
    symbol, the compiled kernel read the column as if it were as wide as
    the rows: wrong centroids from the second call on, and the last row
    read past the column's end (probe 23).  It becomes 1, checked where it
    is made: a call where it is not runs elsewhere, as numpy decides."""
    f = jit(centroid_update, backend=backend)
    rng = np.random.default_rng(0)
    for n, k in ((3, 2), (7, 5), (4, 3), (9, 4), (7, 5)):
        sums, cnt = rng.integers(1, 99, (n, k)).astype(float), rng.integers(0, 4, n)
        assert_like_numpy(f(sums, cnt), centroid_update(sums, cnt))
    assert f.stats()["eager_calls"] == 0
    g = jit(plus_unique, backend=backend)
    for x, v in ((np.arange(5.0), [2, 2, 2]), (np.arange(6.0), [7, 7]), (np.arange(3.0), [1, 2, 3]),
                 (np.arange(5.0), [4])):
        assert_like_numpy(g(x, np.array(v)), plus_unique(x, np.array(v)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(ValueError):
            g(np.arange(5.0), np.array([1, 2, 3]))

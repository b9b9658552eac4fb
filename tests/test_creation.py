"""Creation functions with symbolic sizes: np.tri, np.triu/np.tril,
np.eye, np.identity, np.linspace, np.arange and np.full build graph values
over the dim symbols (one compile for every size), and a symbolic size that
reaches numpy through a path shapejit does not intercept (a helper module's
own `np`) behaves as a Python int with a guard, never as an object array."""
from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy

LENGTHS = [3, 5, 8, 13]


def check(fn, backend, traces=1):
    jf = jit(fn, backend=backend)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for T in LENGTHS:
            x = rng.random((T, 4)).astype(np.float32)
            assert_like_numpy(jf(x), fn(x), ulps=0)
    s = jf.stats()
    assert s["traces"] == traces and s["fallbacks"] == 0 and s["eager_nodes"] == 0, jf.explain()
    return jf


def test_causal_mask_from_tri(backend):
    def f(x):
        T = x.shape[0]
        return (1 - np.tri(T, dtype=x.dtype)) * -1e10, np.tri(T, T + 2, k=-1), np.tri(T, k=2, dtype=bool)
    check(f, backend)


def windowed(x):
    n = len(x)
    return x * np.hanning(n), np.hamming(x.shape[0]) * 2, np.blackman(n), np.bartlett(n) + x


def test_window_functions_of_a_size(backend):
    """np.hanning, np.hamming, np.blackman and np.bartlett of a length, by
    numpy's definitions: one trace for every length (a windowed FFT traced
    once per length, probe 16), numpy's values to a few ulp (its cos and
    ours); one point and none stay numpy's own windows."""
    jf = jit(windowed, backend=backend)
    rng = np.random.default_rng(1)
    for T in LENGTHS + [2, 100, 1, 0]:
        x = rng.random((T, 4))
        got, want = jf(x[:, 0]), windowed(x[:, 0])  # (1-D: x[:, 0] is strided, as the rows of a frame are)
        assert_like_numpy(got, want, ulps=8)
    assert jf.stats()["traces"] == 3 and jf.stats()["eager_nodes"] == 0, jf.explain()  # (lengths 0 and 1: theirs)


def test_triu_tril(backend):
    def f(x):
        s = x @ x.T
        return np.triu(s), np.triu(s, 1), np.tril(s, -1), np.tril(x)
    check(f, backend)


def test_triu_and_tril_indices_of_a_size(backend):
    """np.triu_indices(n, k >= 0) and np.tril_indices(n, k <= 0) of a dim:
    numpy steps of length L(L + 1)/2 (L = n - |k|), read and written through
    as numpy does, one trace for every length (before: one per length, the
    size specialized); a k past the size gives empty indices, as numpy's."""
    def f(x):
        T = x.shape[0]
        s = x @ x.T
        iu, il = np.triu_indices(T, 1), np.tril_indices(T)
        t = s.copy()
        t[np.tril_indices(T, -1)] = 0.0
        return s[iu], s[il].sum(), iu[0] * 10 + iu[1], t, np.triu_indices(T, 2)[1], np.tril_indices(T, 0)[0]
    check(f, backend)

    def g(x):
        return np.triu_indices(x.shape[0], 20)  # (L <= 0: a guard, empty indices)
    check(g, backend)


def test_eye_identity(backend):
    def f(x):
        T = x.shape[0]
        return np.eye(T), np.eye(T, 4, k=1, dtype=np.int32), np.identity(T, dtype=x.dtype) + x @ x.T
    check(f, backend)


@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace(backend, endpoint):
    def f(x):
        T = x.shape[0]
        return (np.linspace(0.0, 1.0, T, endpoint=endpoint), np.linspace(-3, 7.5, T + 1, endpoint=endpoint),
                np.linspace(2, 2, T, endpoint=endpoint), np.linspace(0, 10, T, endpoint=endpoint, dtype=np.int64),
                np.linspace(1e-310, 3e-310, T, endpoint=endpoint))  # (a step that underflows for some T)
    check(f, backend)


@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace_between_traced_ends(backend, endpoint):
    def f(a, b, x, n):  # (a grid from arguments: one compile for all ends and sizes)
        return (np.linspace(a, b, x.shape[0], endpoint=endpoint) + x, np.linspace(a, b, n, endpoint=endpoint),
                np.linspace(0.5, b, x.shape[0], endpoint=endpoint, retstep=True)[1] * x)
    jf = jit(f, backend=backend, static_argnames=("n",))
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        # (ends equal: a zero step, numpy's other branch; ends of subnormal distance)
        for a, b, T in ((-1.75, 0.25, 5), (2.0, 2.0, 8), (1e-310, 3e-310, 13), (-1e300, 1e300, 3), (0.1, 0.7, 8)):
            x = np.arange(T, dtype=np.float64)
            for _ in range(2):
                assert_like_numpy(jf(a, b, x, 6), f(a, b, x, 6), ulps=0)
    s = jf.stats()
    assert s["compiles"] == 1 and s["fallbacks"] == 0 and s["eager_nodes"] == 0, jf.explain()


def resize_rows(img, n):
    y = np.linspace(0, img.shape[0] - 1, n)  # (a resize's sample points: an end that is a size)
    return img[np.floor(y).astype(int)] * (y - np.floor(y))[:, None], np.linspace(img.shape[1], 0, 5)


def test_linspace_to_an_end_that_is_a_size(backend):
    """np.linspace(0, h - 1, n), h a dim, n an int that changes: tracing
    failed on the symbolic end (np.result_type of it) and the signature ran
    in numpy (probe 22); the end is the traced int it is."""
    f = jit(resize_rows, backend=backend)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for h, n in ((5, 8), (7, 3), (9, 11), (6, 4)):
            img = rng.standard_normal((h, h + 1))
            assert_like_numpy(f(img, n), resize_rows(img, n), ulps=0)
    s = f.stats()
    assert s["traces"] == 2 and s["fallbacks"] == 0 and s["eager_calls"] == 0, f.explain()


def moments(img):
    r, c = np.indices(img.shape)
    w = img.sum()
    rows, cols = np.indices(img.shape[:2], sparse=True, dtype=np.int32)
    return (r * img).sum() / w, (c * img).sum() / w, rows + cols, np.indices((img.shape[1], 2, 3), np.float32)


def test_indices_of_sizes_keep_them_symbolic(backend):
    """np.indices(img.shape) made each size a Python number (a guard): a
    trace and a compile per image size (probe 22); now one for all."""
    f = jit(moments, backend=backend)
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (5, 7, 9, 2, 13):
            img = np.abs(rng.standard_normal((n, n + 3))) + 0.1
            assert_like_numpy(f(img), moments(img))
    s = f.stats()
    assert s["traces"] == 1 and s["eager_nodes"] == 0, f.explain()


def test_logspace_of_a_count_that_changes_and_of_traced_ends(backend):
    """np.logspace(0, 2, n) of an int n that changes, and between traced
    ends: base ** linspace, one compile for every count (a trace per n,
    probe 18)."""
    def f(x, n, a):
        return x.sum() + np.logspace(0, 2, n), np.logspace(a, 1.5, x.shape[0], base=2.0, dtype=np.float32)
    jf = jit(f, backend=backend)
    for n in (3, 5, 7, 9, 12, 2):
        x = np.ones(n + 1)
        assert_like_numpy(jf(x, n, -0.5), f(x, n, -0.5))
    s = jf.stats()
    assert s["traces"] == 2 and s["fallbacks"] == 0 and s["eager_nodes"] == 0, jf.explain()


def test_arange_of_a_python_float_of_the_call_takes_a_path_per_value(backend):
    """np.arange(0, 1, step) of a Python float argument: its length is of
    the value, a graph break on it; a call with a step seen before takes
    that path's entry (every call ran in numpy, probe 18)."""
    def f(x, step):
        return np.arange(0, 1, step) + x.sum(), np.arange(start=step, stop=2.0)
    jf = jit(f, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for step in (0.1, 0.3, 0.25, 0.1, 0.3, 0.1):
            x = np.ones(3)
            assert_like_numpy(jf(x, step), f(x, step))
    s = jf.stats()
    assert s["traces"] == 3 and s["eager_calls"] == 0 and s["graph_breaks"] >= 3, jf.explain()


def test_arange_full(backend):
    def f(x):
        T = x.shape[0]
        return np.arange(T) * 2, np.arange(1, T, 2), np.full((T, T), 0.5, np.float32), np.zeros(T + 1)
    check(f, backend)


def test_a_size_leaked_into_a_helper_module_is_a_guarded_int(backend):
    helper = types.ModuleType("helper")
    exec("import numpy as np\ndef positions(x):\n    return np.arange(x.shape[0])\n", helper.__dict__)

    def f(x):
        p = helper.positions(x)
        assert p.dtype == np.int64
        return x[p] * 2
    jf = jit(f, backend=backend)
    for T in LENGTHS + LENGTHS:
        x = np.arange(T * 3.0).reshape(T, 3)
        assert_like_numpy(jf(x), x * 2)
    assert jf.stats()["traces"] == len(LENGTHS)  # specialized: one entry per length, each guarded
    assert "used as a Python number" in jf.explain()


def test_full_of_a_traced_value(backend):
    """np.full and np.full_like of a runtime float, a computed 0-d value and
    a float of a dim: a traced array of numpy's dtype (a Python float's is
    float64, dtype= casts), one compile for every shape (before: numpy's
    np.full called np.copyto on the traced fill, and the whole function ran
    in numpy)."""
    def f(r, gamma):
        t = r.shape[1]
        cum = np.cumprod(np.full(t, gamma, dtype=r.dtype)) / gamma
        return (r * cum).sum(1), np.full(r.shape, gamma), np.full_like(r, r.max()), np.full((2, t), 1.0 / t)
    jf = jit(f, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for shape in ((3, 5), (8, 64), (16, 200)):
            r = np.random.default_rng(shape[0]).random(shape).astype(np.float32)
            jf(r, 0.99)
            assert_like_numpy(jf(r, 0.99), f(r, 0.99), ulps=8)
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0


def test_mgrid_and_ogrid_over_symbolic_sizes_are_traced(backend):
    """np.mgrid / np.ogrid over slices bounded by dims (NPBench's
    mandelbrot2: `np.mgrid[0:xn, 0:yn]` once its sizes become symbols):
    one traced np.arange per axis, broadcast, not a specialized size per
    call; static slices stay numpy's constants."""
    def f(x):
        n, m = x.shape
        a = np.mgrid[0:n, 0:m]
        b = np.mgrid[1:n:2, 0:m]
        oi, oj = np.ogrid[0:n, 0:m]
        return a[0] * x + a[1], b.sum(axis=0), oi + oj * x, np.mgrid[0:n] * 2, np.mgrid[0:3, 0:2]

    jf = jit(f, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for shape in ((3, 4), (5, 2), (6, 7), (9, 3)):
            x = np.random.default_rng(shape[0]).random(shape)
            for got, want in zip(jf(x), f(x)):
                assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    s = jf.stats()
    assert s["traces"] == 1 and s["eager_nodes"] == 0 and s["fallbacks"] == 0, jf.log


def test_len_of_an_array_is_its_first_dim_a_symbol(backend):
    """`n = len(y)` is y.shape[0], a symbol (it was a Python number: a guard
    and a trace per length); len() of a list stays Python's."""
    def ridge(X, y, lam):
        n = len(y)
        A = X.T @ X / n + lam * np.eye(X.shape[1])
        return np.linalg.solve(A, X.T @ y / np.sqrt(len(y))) * len([1, 2, 3])
    jf = jit(ridge, backend=backend)
    rng = np.random.default_rng(9)
    for n in (10, 20, 33, 47):
        X, y = rng.standard_normal((n, 4)), rng.standard_normal(n)
        assert_like_numpy(jf(X, y, 0.1), ridge(X, y, 0.1), ulps=64)
    assert jf.stats()["traces"] == 1 and "used as a Python number" not in jf.explain()


def test_a_negative_size_raises_numpys_value_error():
    """np.eye, np.identity and np.empty of a negative size raise numpy's
    ValueError, for a Python int, a size and int() of a traced value (they
    made an empty array, or one of shape (-2,)); the function stays usable."""
    def eye(n, a):
        return np.eye(n) + a.sum()

    def identity(a):
        return np.identity(int(a[0]))

    def empty(a):
        return np.empty(int(a[0])).shape, np.eye(3, a.shape[0] - 4)
    for fn, good, bad in ((eye, (2, np.ones(2)), (-1, np.ones(2))),
                          (identity, (np.array([3, 1]),), (np.array([-2, 1]),)),
                          (empty, (np.array([3, 1, 0, 0, 0]),), (np.array([-2, 1, 0, 0]),))):
        jf = jit(fn)
        assert_like_numpy(jf(*good), fn(*good))
        with pytest.raises(ValueError, match="negative dimensions"):
            fn(*bad)
        with pytest.raises(ValueError, match="negative dimensions"):
            jf(*bad)
        assert_like_numpy(jf(*good), fn(*good))


def test_a_size_as_the_diagonal_offset(backend):
    """np.tri(T, S, S - T) (a KV cache's causal mask), np.tril(m, S - T) and
    np.eye(T, S, k) with k a size: one trace for every shape (each shape
    traced again: the offset was taken as a Python number)."""
    def f(x):
        T, S = x.shape
        return np.tri(T, S, S - T, dtype=bool), np.tril(np.ones((T, S)), S - T), np.eye(T, S, S - T - 1, dtype=int)
    check(f, backend)


def test_a_size_in_arithmetic_with_a_constant_array(backend):
    """`pos + np.arange(T)` with T = 1 (a decode step: a constant array), in
    either order: the size stays a symbol (it was taken as a Python number,
    a trace per step)."""
    def f(x, pos):
        return x[:1] + (pos + np.arange(1)), x[:3] * (np.array([1.0, 2.0, 3.0]) * pos), np.arange(3) - pos
    jf = jit(f, backend=backend)
    x = np.ones(4)
    for pos in range(8):
        for g, w in zip(jf(x, pos), f(x, pos)):
            assert_like_numpy(g, w, ulps=0)
    assert jf.stats()["traces"] <= 2, jf.explain()  # (the first value, then the int a symbol)


def _clip_u8(a):
    return np.clip(a, -1, 5), np.clip(a, 2, 300), np.clip(a, -300, None)


def _clip_by_size(a):
    return np.clip(a, 0, a.shape[0] * 100)


def _full_by_size(a):
    return np.full(2, a.shape[0] * 100, dtype=np.int8)


def _array_by_size(a):
    return np.array([a.shape[0] * 100, 1], dtype=np.int8)


def _full_like_size(a):
    return np.full_like(a, a.shape[0] * 50)


def _set_list(a):
    a[:2] = [300, 1]
    return a


def _set_floats(a):
    a[:2] = [1.9, -1.9]
    return a


def _set_size(a):
    a[0] = a.shape[0] * 50
    return a


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - numpy's error is the expected outcome
        return type(e), str(e)


@pytest.mark.parametrize("fn, dtype", [(_clip_u8, np.uint8), (_clip_by_size, np.int8), (_full_by_size, np.int8),
                                       (_array_by_size, np.int8), (_full_like_size, np.int8),
                                       (_set_list, np.int8), (_set_floats, np.int8), (_set_floats, np.uint8),
                                       (_set_size, np.int8)])
def test_a_python_int_an_integer_dtype_cannot_hold_is_numpys_error_or_bound(fn, dtype):
    """numpy converts a Python int (a dim's too) into an integer dtype
    exactly: np.clip's bound past the range bounds nothing (-1 for a uint8
    became 255 and clipped every value to it), and np.full, np.array,
    np.full_like and an assignment of one (or of a list of Python numbers)
    it cannot hold raise numpy's OverflowError (they wrapped: 300 became 44
    and was written into the argument)."""
    f = jit(fn)
    for n in (2, 3, 7, 3, 9):
        a1, a2 = np.arange(n).astype(dtype), np.arange(n).astype(dtype)
        want, got = _outcome(fn, a1), _outcome(f, a2)
        if isinstance(want, tuple) and isinstance(want[0], type):
            assert got == want
        else:
            assert_like_numpy(got, want)
        np.testing.assert_array_equal(a2, a1)


def tapers(x, beta):
    return np.i0(x), x * np.kaiser(x.shape[0], 5.0), np.kaiser(x.shape[0], beta), np.i0(x.astype(np.float32) * 3)


def test_kaiser_of_a_size_and_i0_are_traced(backend):
    """np.kaiser(x.shape[0], beta) specialized the size, a trace per length
    (probe 22); now numpy's definition over a symbolic size, with np.i0 by
    numpy's own series (its coefficient tables), of float32 too."""
    f = jit(tapers, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n, beta in ((5, 3.5), (7, 0.5), (9, 14.0), (12, 3.5), (40, 8.6)):
            x = np.linspace(-12, 12, n)
            assert_like_numpy(f(x, beta), tapers(x, beta))
    s = f.stats()
    assert s["traces"] == 1 and s["eager_nodes"] == 0, f.explain()

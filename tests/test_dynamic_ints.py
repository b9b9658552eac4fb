"""Automatic dynamic ints: an int argument is static (part of the key) until
it changes, then it is a symbol bound from its value at each call (torch's
automatic dynamic), so a decode loop's position does not recompile every
step.  static_argnames keeps an int static; dynamic=False never makes one
symbolic; an int used as a Python number (range()) is specialized with a
guard."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy, assert_same_as_python


def decode_step(x, cache, start_pos):
    n = x.shape[0]
    cache[start_pos:start_pos + n] = x
    keys = cache[:start_pos + n]
    return (keys @ x.T).sum(0) * start_pos


def test_decode_loop_compiles_twice(backend):
    jf = jit(decode_step, backend=backend)
    rng = np.random.default_rng(0)
    want_cache, got_cache = np.zeros((64, 8)), np.zeros((64, 8))
    x = rng.random((5, 8))
    assert_like_numpy(jf(x, got_cache, 0), decode_step(x, want_cache, 0))  # prefill
    for pos in range(5, 30):
        x = rng.random((1, 8))
        assert_like_numpy(jf(x, got_cache, pos), decode_step(x, want_cache, pos))
        assert_like_numpy(got_cache, want_cache)
    s = jf.stats()
    assert s["compiles"] == 2 and s["traces"] == 2 and s["fallbacks"] == 0, jf.log
    assert "int argument start_pos changed" in jf.explain()


def test_int_bounds_a_slice(backend):
    def f(a, n):
        return a[:n] * 2 + n, a[n:].sum()
    jf = jit(f, backend=backend)
    a = np.arange(12.0)
    values = (3, 4, 7, 9, 0, 12, 15, -2, -5, 1, 5, 11, 2)
    for n in values:
        assert_like_numpy(jf(a, n), f(a, n))
    # the sign, and where n falls against numpy's clamps, are guards: one
    # entry per case (0 < n < 12, n == 0, n == 12, n > 12, n < 0), never one per value
    traces = jf.stats()["traces"]
    assert traces <= 6
    for n in values:
        assert_like_numpy(jf(a, n), f(a, n))
    assert jf.stats()["traces"] == traces


def test_int_used_as_a_python_number_is_guarded(backend):
    def f(x, steps):
        for _ in range(steps):
            tail = x[1:]
            tail *= 0.5  # (a write through a view each trip takes: no scan, the loop unrolls)
        return x
    jf = jit(f, backend=backend)
    for steps in (1, 2, 3, 2, 1):
        x, y = np.ones(4), np.ones(4)
        assert_like_numpy(jf(x, steps), f(y, steps))
        np.testing.assert_array_equal(x, y)
    assert jf.stats()["traces"] == 4  # 1 (static), then 2, 3 specialized under guards; 2 and 1 reuse
    assert "used as a Python number" in jf.explain()


def test_int_trip_count_that_changes_makes_the_loop_a_scan(backend):
    def f(x, steps):
        for _ in range(steps):
            x = x * 0.5
        return x
    jf = jit(f, backend=backend)
    x = np.ones(4)
    for steps in (1, 2, 3, 2, 1, 5):
        assert_like_numpy(jf(x, steps), f(x, steps))
    # 1 (static, one trip), then 2: a symbol, the loop unrolled for a second count; 3: a third count,
    # so the loop becomes a scan (jit/scan.py) that serves every count; 2, 1 and 5 reuse the entries
    assert jf.stats()["traces"] == 3 and "(a scan)" in jf.explain()


def test_static_argnames_and_dynamic_false_keep_ints_static(backend):
    def f(x, k):
        return x[:k] + k
    for jf in (jit(f, backend=backend, static_argnames="k"), jit(f, backend=backend, dynamic=False)):
        x = np.arange(10.0)
        for k in (2, 3, 4):
            assert_like_numpy(jf(x, k), f(x, k))
        assert jf.stats()["traces"] == 3


def test_bools_stay_static(backend):
    def f(x, flag):
        return x * 2 if flag else x - 1
    jf = jit(f, backend=backend)
    for flag in (True, False, True, False):
        assert_like_numpy(jf(np.ones(3), flag), f(np.ones(3), flag))
    assert jf.stats()["traces"] == 2


def test_floats_of_dims_serve_every_shape(backend):
    """1.0 / n, 2.0 / x.size, n * 0.5, d ** -0.5 and (1 / (n - 1)) ** 2 of
    dims are traced Python floats (SymFloat): one compile for every shape,
    results equal to numpy's bit for bit (Python's own arithmetic, at run
    time too), and float32 arrays stay float32 (a Python float is weak).
    Used as a Python number (math.sqrt, a comparison, a returned float) the
    value is decided on the shape: one compile per shape, and right."""
    import math

    def fn(x):
        n, d = x.shape
        h2 = (1.0 / (n - 1)) ** 2
        return x * (1.0 / n) + 2.0 / x.size, (x - n * 0.5) * d ** -0.5, x / h2, x.astype(np.float32) * (1 / d)

    def decided(x):
        return x / math.sqrt(x.shape[1]) if 1.0 / x.shape[0] < 0.2 else x, 1.0 / x.shape[0]
    jf, jd = jit(fn, backend=backend), jit(decided, backend=backend)
    for n, d in ((3, 4), (5, 7), (8, 3), (13, 11)):
        x = np.random.default_rng(n).standard_normal((n, d))
        for _ in range(2):
            assert_like_numpy(jf(x), fn(x), ulps=0)
            got, want = jd(x), decided(x)
            assert_like_numpy(got[0], want[0], ulps=0)
            assert type(got[1]) is float and got[1] == want[1]
    assert jf.stats()["compiles"] == 1 and jf.stats()["traces"] == 1
    assert jd.stats()["traces"] == 4


def test_complex_numbers_of_dims_serve_every_shape(backend):
    """-2j * np.pi / N (a DFT's phase step) and 1j * n of dims are weak
    complex scalars of the trace: one compile for every length (a trace
    per length before), numpy's values, dtypes and scalar types; complex64
    stays complex64."""
    def dft_phase(x):
        N = x.shape[0]
        w = -2j * np.pi / N
        return (np.exp(w * np.arange(N)) * x, np.exp(np.pi * 1j / N), 1j * N * x,
                x.astype(np.complex64) * (0.5j / N))
    jf = jit(dft_phase, backend=backend)
    for n in (5, 9, 17, 33):
        x = np.random.default_rng(n).random(n)
        got, want = jf(x), dft_phase(x)
        assert all(type(g) is type(w) for g, w in zip(got, want))
        assert_like_numpy(got, want)
    assert jf.stats()["traces"] == 1


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint64])
def test_a_traced_python_int_beyond_the_arrays_dtype_raises_numpys_overflow(dtype, backend):
    """x_int8 + n with n = 300 (an int argument that changes, or a size)
    raises numpy's OverflowError (NEP 50), where the compiled call wrapped n
    into int8; within the range one compile serves every n."""
    def f(x, n):
        return x + n, x * x.shape[0], x < n  # (a comparison is exact in numpy 2: no error)

    info = np.iinfo(dtype)
    jf = jit(f, backend=backend)
    x = np.arange(4, dtype=dtype)
    for n in (1, 2, 5, 100):
        assert_like_numpy(jf(x, n), f(x, n), ulps=0)
    compiles = jf.stats()["compiles"]
    for n in (int(info.max) + 1, int(info.min) - 1):
        if -(1 << 63) <= n < (1 << 63):
            with pytest.raises(OverflowError):
                f(x, n)
            with pytest.raises(OverflowError, match="out of bounds"):
                jf(x, n)
    assert_like_numpy(jf(x, 7), f(x, 7), ulps=0)  # (still usable, and no compile for it)
    if dtype == np.int8:
        big = np.arange(300, dtype=dtype)
        with pytest.raises(OverflowError):
            jf(big, 1)
    assert jf.stats()["fallbacks"] == 0 and jf.stats()["compiles"] <= compiles + 1


def test_ddof_that_changes_is_a_symbol_of_the_divisor(backend):
    """X.std(ddof=ddof) with ddof an int argument that changed: a symbol of
    numpy's divisor max(count - ddof, 0) (its first change ran every call in
    numpy: the reference took the symbol for a number)."""
    f = jit(lambda X, ddof: (X.std(axis=0, ddof=ddof), X.var(ddof=ddof)), backend=backend)
    X = np.random.default_rng(15).standard_normal((6, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for d in (1, 0, 1, 2, 0):
            assert_like_numpy(f(X, d), (X.std(axis=0, ddof=d), X.var(ddof=d)), ulps=8)
    assert f.stats()["fallbacks"] == 0 and f.stats()["traces"] <= 2


def test_min_and_max_of_sizes_are_sizes(backend):
    """min(k, x.shape[0]) and max(n // 4, 1) of ints and sizes are sizes
    (sympy's Min and Max): one trace for every length, where each length
    was specialized."""
    def topk(x, k=5):
        k = min(k, x.shape[0])
        return x[np.argsort(x)[::-1][:k]], k, np.zeros(max(x.shape[0] - 1, 1)).size

    def pooled(x):
        n = x.shape[0]
        m = np.zeros(max(n - 1, 1))
        m[:min(n - 1, 3)] = 1
        return x[:max(n // 4, 1)].sum() + m.sum()
    for fn in (topk, pooled):
        jf = jit(fn, backend=backend)
        for n in (2, 3, 4, 7, 9, 12, 20, 33, 3):
            x = np.random.default_rng(n).random(n)
            got, want = jf(x), fn(x)
            assert type(got) is type(want)
            assert_like_numpy(got, want)
        assert jf.stats()["traces"] == 1, fn.__name__


def test_sizes_and_numpy_scalars_give_numpys_scalar_types(backend):
    """A size with a numpy integer is numpy's scalar (`N + np.int8(1)` is
    np.int8, wrapping at 127: it was a Python int, 132), and a Python
    complex with a traced np.float64 is Python's complex (complex takes the
    float: it was np.complex128 on the traced call)."""
    def fn(x):
        n = x.shape[0]
        return (n + np.int8(1), n * np.int16(2), np.int32(3) - n, n + np.int8(125), n // np.int8(2),
                n % np.uint8(3), 1j + x.sum(), (-2j * np.pi / n) * x.sum())
    jf = jit(fn, backend=backend)
    for n in (5, 3, 5, 8):
        x = np.linspace(0.1, 1.0, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (numpy's int8 overflow)
            got, want = jf(x), fn(x)
        assert [type(g) for g in got] == [type(w) for w in want]
        assert got[:6] == want[:6]
        np.testing.assert_allclose(got[6:], want[6:], rtol=1e-14)


def test_a_number_to_the_power_of_a_size(backend):
    """2 ** int(a.min()) and 2.0 ** x.shape[0] are Python's (an int, or a
    float for a negative exponent): they raised TypeError in the trace."""
    def fn(a):
        return 2 ** int(a.min()), 2.0 ** a.shape[0], 3 ** len(a)
    jf = jit(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for a in (np.array([3, 1]), np.array([-2, 4, 1]), np.array([5, 2])):
            got, want = jf(a), fn(a)
            assert [type(g) for g in got] == [type(w) for w in want] and got == want


def test_divmod_of_sizes(backend):
    """divmod(x.shape[0], 3) and divmod(7, n) are Python's (a TypeError in the trace before)."""
    def fn(x):
        q, r = divmod(x.shape[0], 3)
        return x[:q * 3].reshape(q, 3).sum(1), r, divmod(7, x.shape[0])
    jf = jit(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (6, 7, 9, 11):
            x = np.arange(float(n))
            got, want = jf(x), fn(x)
            assert_like_numpy(got[0], want[0])
            assert got[1:] == want[1:] and type(got[1]) is int


def _to_uint8(b):
    return np.uint8(-int(b[0])), np.int8(int(b[1]))


def test_numpy_integer_type_of_a_traced_int_beyond_it_raises_numpys_overflow(backend):
    """np.uint8(-int(b[0])) of a traced integer (a size bound at run time):
    numpy's OverflowError beyond the type (it wrapped to 255), at the trace
    and, by a guard, in a later call."""
    f = jit(_to_uint8, backend=backend)
    for b in ([-5, 3], [-7, 100], [1, 3], [-2, 200], [-3, -4]):
        assert_same_as_python(f, _to_uint8, np.array(b))


def _size_and_floats(x):
    n = x.shape[0]
    return max(-2.0, n), min(n, 7.5), n > 2.5, n < float("inf"), n == float("nan"), n != float("nan"), x * (n >= 3.0)


def test_a_size_compares_with_a_python_float():
    """A size against a Python float (`max(-2.0, i)` of a scan's loop
    variable, `n > 2.5`): decided on its value with a guard, as against an
    int (it raised TypeError inside shapejit: '>' not supported between
    'SymInt' and 'float', and the signature ran in numpy)."""
    f = jit(_size_and_floats)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (4, 5, 9, 2, 3):
            x = np.arange(float(n))
            got, want = f(x), _size_and_floats(x)
            for g, w in zip(got, want):
                assert type(g) is type(w) and np.array_equal(g, w), (n, got, want)
    assert f.stats()["traces"] <= 4, f.explain()


# ------------------------------------------- held ints that change: symbols

class Adam:
    """An optimizer as written in plain numpy: its step count an attribute
    the caller increments before each update."""

    def __init__(self, shape, lr=1e-2):
        self.m, self.v, self.t, self.lr = np.zeros(shape), np.zeros(shape), 0, lr

    def update(self, w, g):
        self.m *= 0.9
        self.m += 0.1 * g
        self.v *= 0.999
        self.v += 0.001 * g * g
        m_hat = self.m / (1 - 0.9 ** self.t)
        v_hat = self.v / (1 - 0.999 ** self.t)
        w -= self.lr * m_hat / (np.sqrt(v_hat) + 1e-8)


def test_a_held_int_that_changes_becomes_a_symbol(backend):
    """self.t, read by the trace, changes every step: it traces once for its
    first value and once more as a symbol (before: a trace per step, then
    eager past max_entries); every step matches numpy's, m, v and w too."""
    rng = np.random.default_rng(0)
    got, want = Adam((6, 5)), Adam((6, 5))
    update = jit(Adam.update, backend=backend)
    w_got, w_want = np.zeros((6, 5)), np.zeros((6, 5))
    for _ in range(12):
        g = rng.standard_normal((6, 5))
        got.t += 1
        want.t += 1
        update(got, w_got, g)
        want.update(w_want, g)
        for a, b in ((w_got, w_want), (got.m, want.m), (got.v, want.v)):
            assert_like_numpy(a, b)
    s = update.stats()
    assert s["traces"] == 2 and s["eager_calls"] == 0 and s["fallbacks"] == 0, update.explain()
    assert "int <argument 0>.t changed: now a symbol" in update.explain()
    other = Adam((3, 3))  # (another object of the class, its own count: the symbol's value)
    other.t = 7
    w = np.ones((3, 3))
    want_w, ref = w.copy(), Adam((3, 3))
    ref.t = 7
    update(other, w, np.ones((3, 3)))
    ref.update(want_w, np.ones((3, 3)))
    assert_like_numpy(w, want_w)
    assert update.stats()["traces"] == 3  # (a new shape of m and v: held arrays' shapes are keyed)


class KVCache:
    def __init__(self, n, d):
        self.k = np.zeros((n, d))
        self.pos = 0

    def attend(self, q, k_new):
        n = k_new.shape[0]
        self.k[self.pos:self.pos + n] = k_new
        keys = self.k[:self.pos + n]
        return (keys @ q.T).max(0) + self.pos


def test_a_held_int_bounding_slices_serves_every_value(backend):
    """A decode loop's position kept on self (the cache written at it and
    read up to it): every position after the second is served by one entry,
    the cache as numpy leaves it."""
    rng = np.random.default_rng(1)
    got, want = KVCache(40, 4), KVCache(40, 4)
    attend = jit(KVCache.attend, backend=backend)
    for step in range(20):
        q, k = rng.standard_normal((1, 4)), rng.standard_normal((1 if step else 5, 4))
        assert_like_numpy(attend(got, q, k), want.attend(q, k))
        assert_like_numpy(got.k, want.k)
        got.pos = want.pos = want.pos + k.shape[0]
    assert attend.stats()["traces"] <= 4 and attend.stats()["eager_calls"] == 0, attend.explain()


STEP = 0


def scaled_by_step(x):
    return x * (STEP + 1) + x[:STEP % 4].sum()


def test_a_global_int_that_changes_becomes_a_symbol_and_a_float_in_its_place_traces_again(backend):
    global STEP
    f = jit(scaled_by_step, backend=backend)
    x = np.arange(5.0)
    try:
        for STEP in range(10):
            assert_like_numpy(f(x), scaled_by_step(x))
        traces = f.stats()["traces"]
        assert traces <= 4, f.explain()  # (the first value, then one per outcome of STEP % 4's clamp)
        STEP = 2.5  # (a float where the int was: keyed by type, so traced again, its value a constant)
        with pytest.raises(TypeError):
            scaled_by_step(x)
        with pytest.raises(TypeError):
            f(x)
        STEP = 3
        assert_like_numpy(f(x), scaled_by_step(x))
        assert f.stats()["traces"] <= traces + 1
    finally:
        STEP = 0


def test_held_ints_stay_static_with_dynamic_false(backend):
    opt = Adam((2, 2))
    update = jit(Adam.update, backend=backend, dynamic=False)
    w = np.zeros((2, 2))
    for _ in range(3):
        opt.t += 1
        update(opt, w, np.ones((2, 2)))
    assert update.stats()["traces"] == 3


class Schedule:
    """SGD whose caller sets the step's learning rate and count on it."""

    def __init__(self, n, dtype=np.float64):
        self.lr, self.t, self.w = 0.1, 0, np.zeros(n, dtype)

    def step(self, g):
        self.w -= self.lr * g / np.sqrt(self.t + 1)
        return self.w * self.lr


def test_a_held_float_that_changes_becomes_a_runtime_scalar(backend):
    """self.lr set by the caller every step (an lr schedule): after its
    first change a runtime scalar, weak as a Python float argument is (a
    float32 model stays float32), where each value traced again and past
    max_entries ran in numpy.  A value of another type in its place traces
    again, with that value a constant."""
    rng = np.random.default_rng(2)
    for dtype in (np.float64, np.float32):
        got, want = Schedule(3, dtype), Schedule(3, dtype)
        step = jit(Schedule.step, backend=backend)
        for t in range(12):
            g = rng.standard_normal(3).astype(dtype)
            for o in (got, want):
                o.t, o.lr = t, 0.1 * 0.9 ** t
            assert_like_numpy(step(got, g), want.step(g))
            assert_like_numpy(got.w, want.w)
        s = step.stats()
        assert s["traces"] == 2 and s["eager_calls"] == 0, step.explain()
        assert "a float that changed: a runtime scalar" in step.explain()
        for lr in (1, np.float32(0.5), 0.25):  # (an int, a numpy scalar: keyed by value; a float again: served)
            for o in (got, want):
                o.lr = lr
            g = rng.standard_normal(3).astype(dtype)
            assert_like_numpy(step(got, g), want.step(g))
            assert_like_numpy(got.w, want.w)
        assert step.stats()["traces"] <= 5, step.explain()  # (the int's trace dropped the held float from the
        # held paths: the float again traces once more)


def int_of_python_float(a, s):
    return a * np.int64(float(a[0]) * s)


def test_a_numpy_integer_type_of_a_python_float_converts_as_numpy_does(backend):
    """np.int64(f) of a Python float of the trace (`float(a[i])`) goes
    through Python's int(), as numpy's does: OverflowError past int64, a
    ValueError for a NaN, at every call (the graph's cast gave INT_MIN;
    found by test_lift_programs' hypothesis programs)."""
    f = jit(int_of_python_float, backend=backend)
    for a, s in ((np.array([1, 2]), 2.0), (np.array([3, 4, 5]), 1.5), (np.array([2, 9, 4, 1]), 0.5)):
        assert_like_numpy(f(a, s), int_of_python_float(a, s))
    for a, s, err in ((np.array([2 ** 63 - 1, 0]), 1.0, OverflowError), (np.array([1, 2, 3]), float("nan"), ValueError),
                      (np.array([2 ** 62, 1, 1]), 4.0, OverflowError)):
        with pytest.raises(err):
            int_of_python_float(a, s)
        with pytest.raises(err):
            f(a, s)
    assert_like_numpy(f(np.array([7, 1]), 1.0), int_of_python_float(np.array([7, 1]), 1.0))


def int8_of_python_ints(a):
    x = a[0]
    y = 0
    for i in range(len(a)):
        for j in range(3):
            y += int((x + x) >> 0)
        x = np.int8(x)
        x = np.int8((i + i) + (i + y))  # (a Python int past int8: numpy's OverflowError)
        x = np.int8((x + x) + (x + x))
    return x, y


def test_a_numpy_integer_type_of_a_python_int_raises_numpys_overflow_error(backend):
    """np.int8(n) of a Python int of the trace beyond int8 raises numpy's
    OverflowError, at the traced call and at every compiled one (the cast
    wrapped: (np.int8(100), 150) where numpy raised; found by
    test_lift_programs' hypothesis programs)."""
    f = jit(int8_of_python_ints, backend=backend)
    for a in (np.ones(2, np.int8), np.zeros(5, np.int8), np.zeros(2, np.int8), np.ones(2, np.int8),
              np.zeros(3, np.int8), np.full(4, 3, np.int8)):
        try:
            want = int8_of_python_ints(a)
        except OverflowError as e:
            with pytest.raises(OverflowError, match=str(e)):
                f(a)
            continue
        got = f(a)
        assert got == want and [type(v) for v in got] == [type(v) for v in want]


def bool_power(a, k):
    return a ** k + 1


def test_a_bool_arrays_power_by_an_int_that_changes_has_numpys_dtype(backend):
    """`a ** k` of a bool array: numpy's `** 2` is np.square (int8), any
    other int's an int64 power; once k changed it is a symbol, and the
    call with k = 2 gave int64 (probe 20).  A guard on k == 2 decides."""
    f = jit(bool_power, backend=backend)
    for i, k in enumerate((1, 2, 3, 5, 2, 4)):
        a = np.arange(5 + i) % 2 == 0
        assert_like_numpy(f(a, k), bool_power(a, k))


def float_power(a, p):
    return a ** p


@pytest.mark.parametrize("dtype", [np.float16, np.complex128], ids=["float16", "complex128"])
def test_a_power_by_a_float_that_changes_is_sqrt_at_one_half(dtype, backend):
    """`a ** p` by a Python float that changed (a runtime scalar): numpy's
    `** 0.5` is np.sqrt, which for float16 and complex differs from power
    (sqrt(-inf) nan and sqrt(-0.0) -0.0 in float16, where power gave inf
    and +0.0: probe 21); the one trace serves every p."""
    f = jit(float_power, backend=backend)
    a = np.array([-np.inf, -0.0, -4.0, 4.0, np.inf, np.nan, 2.5], dtype)
    if dtype == np.complex128:
        a = np.array([complex(r, i) for r, i in zip(a.real, [0, 0, 1, -1, 0, 0, np.inf])])
    with np.errstate(all="ignore"):
        for p in (3.0, 0.5, 1.5, 0.5, 2.0, -0.5):
            got, want = f(a, p), float_power(a, p)
            assert_like_numpy(got, want)
            np.testing.assert_array_equal(np.signbit(got.real), np.signbit(want.real))
    assert f.stats()["traces"] == 1 and f.stats()["eager_calls"] == 0

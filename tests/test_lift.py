"""Lifted loops (jit/lift.py, codegen/pyloop.py): a Python loop over
scalars and array elements is typed from its source and compiled whole; it
gives what Python and numpy give — the same values, the same Python or
numpy scalar types, the same writes into the caller's arrays — and where
Python or numpy raise or warn (an index out of range, an overflow, a
division by zero) the call runs eagerly and they do."""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from bench.corpus.discrete import crc16
from bench.programs import sieve, sor
from jit import JitWarning, jit
from runtime.kernelcall import KernelCall
from shapes.ir import Node, make_attrs
from tests.conftest import assert_same_as_python, assert_like_numpy


def _lifted(f) -> int:
    return sum(1 for state in f._keys.values() for e in state.entries for s in e.executable.steps
               if isinstance(s, KernelCall) and s.lifted)


def _same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert type(got) is type(want), f"{type(got).__name__} != {type(want).__name__}"
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
    if np.asarray(want).dtype.kind == "f":  # (numpy sums in blocks, a compiled loop in order: a few ulp)
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(np.asarray(want).dtype).eps)
    else:
        np.testing.assert_array_equal(got, want)


def _check(fn, make, sizes=(5, 9, 9), backend="llvm", lifted=True, strict=True):
    """Each size: the jitted call (traced, then compiled) against the plain
    call on the same inputs: results, types and the arguments' writes."""
    f = jit(fn, backend=backend)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        if strict:
            warnings.simplefilter("error", JitWarning)
        for n in sizes:
            seed = int(rng.integers(1 << 30))
            args, ref = make(n, np.random.default_rng(seed)), make(n, np.random.default_rng(seed))
            _same(f(*args), fn(*ref))
            for a, r in zip(args, ref):
                if isinstance(r, np.ndarray):
                    _same(a, r)
    if backend == "llvm":
        assert (_lifted(f) > 0) == lifted, f.explain()
    return f


def test_the_module_text_is_the_same_for_the_same_loop():
    """The compile cache is keyed by the module text: a lifted loop's must
    not depend on where its program lies in memory (another process)."""
    import pickle
    from llvmlite import ir
    from codegen.pyloop import emit_pyloop
    f = jit(crc16)
    f(np.arange(5, dtype=np.uint8))
    node = next(n for state in f._keys.values() for e in state.entries for n in e.executable.graph.nodes
                if n.op == "pyloop")
    texts = []
    for prog in (node.attr("program"), pickle.loads(pickle.dumps(node.attr("program")))):  # (new tuples)
        module = ir.Module(name="m")
        emit_pyloop(module, Node(node.op, node.inputs, make_attrs(program=prog), node.outputs), "sj_pyloop0")
        texts.append(str(module))
    assert texts[0] == texts[1]


def test_crc16_compiles_whole(backend):
    f = _check(crc16, lambda n, rng: (rng.integers(0, 256, n * 40, dtype=np.uint8),), backend=backend)
    s = f.stats()
    assert s["graph_breaks"] == 0 and s["eager_calls"] == 0 and s["compiles"] == 1


def _histogram(a, counts):
    for v in a:
        counts[v] += 1
    return counts.sum()


def test_a_scatter_with_data_dependent_indices(backend):
    _check(_histogram, lambda n, rng: (rng.integers(0, 8, n * 3, dtype=np.int32), np.zeros(8, np.int64)),
           backend=backend)


def test_an_index_out_of_range_raises_as_numpy():
    f = jit(_histogram)
    f(np.array([1, 2, 3], np.int32), np.zeros(8, np.int64))  # (traced)
    counts = np.zeros(8, np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(IndexError):
            f(np.array([1, 9, 3], np.int32), counts)
        assert counts[1] == 1  # (numpy wrote the first element before it raised; nothing else did)
    assert f(np.array([1, -1, 3], np.int32), np.zeros(8, np.int64)) == 3  # (-1 wraps, as numpy's)


def _prefix(a):
    for i in range(1, len(a)):
        a[i] += a[i - 1]


@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.uint8])
def test_in_place_prefix_sums(dtype):
    _check(_prefix, lambda n, rng: ((rng.random(n * 3) * 3).astype(dtype),))  # (uint8: no overflow)


def _total(a):
    s = 0
    for v in a:
        s += v
    return s


def test_types_that_settle_after_a_trip():
    """s is a Python int before the first trip and a numpy float64 after:
    the first trip is compiled apart; a loop of no trips returns the int."""
    _check(_total, lambda n, rng: (rng.random(n),))
    f = jit(_total)
    f(np.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        out = f(np.ones(0))
    assert type(out) is int and out == 0


def _hash(a):
    h = 7
    for v in a:
        h = h * 31 + int(v)
    return h


def test_a_python_int_past_64_bits_runs_eagerly():
    f = jit(_hash)
    small = np.arange(4, dtype=np.int64)
    assert f(small) == _hash(small) and f(small + 1) == _hash(small + 1)
    big = np.arange(40, dtype=np.int64)  # (31**40: a Python int of 200 bits)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)  # (a call run eagerly for an abort: counted, not warned)
        got = f(big)
    assert got == _hash(big) and type(got) is int
    assert f.metrics.fallbacks["lifted_loop"] == 1 and _lifted(f)


def _wrap_sum(a):
    x = a[0]
    for i in range(1, len(a)):
        x = x + a[i]
    return x


def test_numpy_scalar_overflow_warns_as_numpy():
    f = jit(_wrap_sum)
    ok = np.array([1, 2, 3], np.uint8)
    assert f(ok) == 6 and type(f(ok)) is np.uint8
    over = np.array([200, 100, 3], np.uint8)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = f(over)
    assert got == _wrap_sum(over) and type(got) is np.uint8
    assert any(issubclass(x.category, RuntimeWarning) and "overflow" in str(x.message) for x in w)


def _mean_gap(a, n):
    total = 0
    for i in range(len(a)):
        total += int(a[i]) // n
    return total


def test_division_by_zero_raises_as_python():
    f = jit(_mean_gap)
    a = np.arange(6, dtype=np.int64)
    assert f(a, 2) == _mean_gap(a, 2) and f(a, 3) == _mean_gap(a, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(ZeroDivisionError):
            f(a, 0)
    assert f(a, 4) == _mean_gap(a, 4)  # (still usable)


def _control(a, limit):
    found, skipped, i = -1, 0, -1
    for i in range(len(a)):
        if a[i] < 0:
            skipped += 1
            continue
        for j in range(3):
            if a[i] * j > limit:
                found = i
                break
        if found >= 0:
            break
    return found, skipped, i


def test_break_continue_and_nested_loops(backend):
    _check(_control, lambda n, rng: (rng.standard_normal(n * 4), 1.5), backend=backend)


def _fib_mod(n, m):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % m
    return a


def test_tuple_assignment_and_int_arguments():
    f = jit(_fib_mod)
    for n in (0, 1, 10, 90, 1000):
        assert f(n, 1_000_007) == _fib_mod(n, 1_000_007)
    assert _lifted(f)


def _norms(x, out):
    for i in range(x.shape[0]):
        s = 0.0
        for j in range(x.shape[1]):
            s += x[i, j] * x[i, j]
        out[i] = math.sqrt(s) if s > 0 else -1.0
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_two_dimensional_reads_and_math(dtype, backend):
    _check(_norms, lambda n, rng: (rng.standard_normal((n, 3)).astype(dtype), np.empty(n, dtype)),
           backend=backend)


def _sqrt_all(a):
    t = 0.0
    for v in a:
        t += math.sqrt(v)
    return t


def test_math_domain_error_raises_as_python():
    f = jit(_sqrt_all)
    assert f(np.array([1.0, 4.0])) == 3.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(ValueError):
            f(np.array([1.0, -4.0]))


def _shift_read(a):
    b = a
    for i in range(1, len(a)):
        a[i] = b[i - 1] + 1
    return a


def test_an_array_written_and_read_through_two_names_is_not_lifted():
    _check(_shift_read, lambda n, rng: (rng.integers(0, 9, n),), lifted=False)


def test_a_closure_over_a_scale():
    scale = 3

    def scaled(a):
        t = 0
        for v in a:
            if v > 2:
                t += scale * int(v)
        return t
    _check(scaled, lambda n, rng: (rng.integers(0, 6, n * 2),))


def _last(a):
    for i in range(len(a)):
        last = a[i]
    return last


def test_a_name_first_bound_in_the_loop_and_read_after_lifts_and_is_unbound_after_no_trip():
    f = _check(_last, lambda n, rng: (rng.random(n),))
    with pytest.raises(UnboundLocalError):
        f(np.zeros(0))


def _csr(indptr, indices, data, x):
    y = np.empty(len(indptr) - 1, data.dtype)
    for i in range(indptr.size - 1):
        lo, hi = indptr[i], indptr[i + 1]
        y[i] = data[lo:hi] @ x[indices[lo:hi]]
    return y


def _random_csr(n, rng):
    nnz = n * 3
    indptr = np.concatenate(([0], np.sort(rng.integers(0, nnz + 1, n - 1)), [nnz])).astype(np.uint32)
    return indptr, rng.integers(-n, n, nnz).astype(np.int32), rng.random(nnz), rng.random(n)


def test_slices_gathers_and_dot_products(backend):
    """spmv's row: a slice of the values times x gathered at a slice of
    the column indices (negative ones wrap, as numpy's), never materialized."""
    _check(_csr, _random_csr, backend=backend)


def test_a_gather_out_of_range_raises_as_numpy():
    f = jit(_csr)
    indptr, cols, vals, x = _random_csr(6, np.random.default_rng(1))
    f(indptr, cols, vals, x)
    cols[4] = 6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(IndexError):
            f(indptr, cols, vals, x)


def _windows(a, lo, hi, step):
    out = a[0] * 0.0  # (a numpy float64 from the start: a Python float would become one only where len(w))
    for i in range(3):
        w = a[lo + i:hi:step]
        if len(w):
            out += w.max() - np.sum(w) + w.min()
    return out


@pytest.mark.parametrize("lo, hi, step", [(0, 7, 1), (-5, -1, 2), (9, 1, -3), (2, 100, 1), (-100, 3, -1)])
def test_slice_bounds_as_python(lo, hi, step):
    f = _check(lambda a: _windows(a, lo, hi, step), lambda n, rng: (rng.standard_normal(n + 4),))
    assert f.stats()["graph_breaks"] == 0


def kadane_over_a_slice(x):
    best = cur = x[0]
    for v in x[1:]:
        cur = max(v, cur + v)
        best = max(best, cur)
    return best


def _over_slice(a, lo, hi):
    t = a[0] * 0
    k = 0
    for v in a[lo:hi]:
        t = t + v * k
        k += 1
    return t, k


def _over_ends(a):
    t = 0
    for v in a[:-1]:
        t = t * 2 + v
    for v in a[-3:]:
        t = t * 3 - v
    return t


@pytest.mark.parametrize("lo, hi", [(1, -1), (2, 5), (-3, 50), (-100, 3), (5, 2), (0, 100), (-2, -7)])
def test_a_loop_over_a_slice_of_a_vector_lifts(lo, hi):
    """`for v in x[1:]` (Kadane's): its elements from the slice's start to
    its stop, clamped as Python's slices are, in a lifted loop (a scan at
    ~3.5 us a trip, 0.05x numpy's speed, probe 16)."""
    f = _check(lambda a: _over_slice(a, lo, hi), lambda n, rng: (rng.integers(-9, 9, n + 4),), sizes=(5, 9, 3, 12))
    assert f.stats()["traces"] == 1 and f.stats()["graph_breaks"] == 0, f.explain()
    f = _check(kadane_over_a_slice, lambda n, rng: (rng.standard_normal(n + 1),), sizes=(5, 9, 17, 0))
    assert f.stats()["traces"] <= 2, f.explain()  # (one element: a signature of its own)
    f = _check(_over_ends, lambda n, rng: (rng.integers(-9, 9, n),), sizes=(5, 9, 17, 2, 0))
    assert f.stats()["traces"] <= 3, f.explain()  # (one element and none: signatures of their own)


def ema_by_enumerate(x, a):
    out = np.empty(len(x))
    s = x[0]
    for i, v in enumerate(x):
        s = a * v + (1 - a) * s
        out[i] = s
    return out, s


def argmax_by_enumerate(x):
    best, at = -np.inf, -1
    for k, v in enumerate(x):
        if v > best:
            best, at = v, k
    return at, best


def enumerate_of_my_own(x):
    t = 0.0
    for i, v in enumerate(x):
        t += i * v
    return t


def test_a_loop_over_enumerate_of_a_vector_lifts():
    """`for i, v in enumerate(x)` is `for v in x` counted by i: lifted (a
    scan before, 0.04x numpy's speed, probe 17); enumerate rebound to
    another function leaves it as written."""
    f = _check(ema_by_enumerate, lambda n, rng: (rng.standard_normal(n), 0.3), sizes=(5, 9, 17, 1))
    assert f.stats()["traces"] <= 2, f.explain()  # (one element: a signature of its own)
    f = _check(argmax_by_enumerate, lambda n, rng: (rng.integers(-9, 9, n),), sizes=(5, 9, 17, 0))
    assert f.stats()["traces"] <= 3, f.explain()
    global enumerate
    enumerate = lambda x: zip(range(len(x) - 1, -1, -1), x)  # noqa: E731 - a user's enumerate
    try:
        _check(enumerate_of_my_own, lambda n, rng: (rng.standard_normal(n),), sizes=(5, 9), lifted=False,
               strict=False)
    finally:
        del enumerate


def slice_stores(x, lo, hi, st, v):
    for k in range(3):
        x[lo:hi:st] = v + k
    return x


def open_slice_stores(x, v):
    for k in range(2):
        x[::2] = v
        x[1::3] = v + 1
        x[::-2] = v + k
        x[:-4:-1] = v - k
    return x


def test_a_slice_assignment_of_a_number_lifts():
    """`is_p[i * i::i] = False` (the sieve of Eratosthenes) and every slice
    of a vector, its bounds clamped the step's way as Python's slices are,
    a step of 0 numpy's ValueError: a loop of stores, lifted (the sieve
    traced once per n, probe 16)."""
    f = jit(sieve)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (10, 30, 100, 1000, 2, 0, 1, 5000, 77):
            _same(f(n), sieve(n))
    assert f.stats()["traces"] <= 4 and _lifted(f) > 0, f.explain()
    for lo, hi, st in ((0, 12, 2), (1, 40, 3), (-3, -13, -1), (11, -20, -2), (10, 2, -3), (-100, 100, 4),
                       (5, 5, 1), (20, 30, 1), (-1, -13, -5), (3, 1, 1)):
        _check(lambda x: slice_stores(x, lo, hi, st, 7), lambda n, rng: (rng.integers(-9, 9, 12),), sizes=(12,))
        _check(lambda x: slice_stores(x, lo, hi, st, 0.5), lambda n, rng: (rng.standard_normal(12),), sizes=(12,))
    _check(lambda x: open_slice_stores(x, 3), lambda n, rng: (rng.integers(-9, 9, n),), sizes=(12, 5, 1, 0))
    g = jit(slice_stores)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(ValueError, match="step cannot be zero"):
            g(np.arange(5.0), 0, 5, 0, 1.0)


def bisect_cube_root(c, lo=0.0, hi=10.0):
    target = c.mean()
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if mid ** 3 > target:
            hi = mid
        else:
            lo = mid
    return mid


def powers(x):
    out = np.empty(x.shape[0])
    s = 0.0
    k = 0
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = v ** 3 + abs(v) ** 0.5 + float(v) ** 3 - v ** 0.25 + v ** -2.0
        s += float(v) ** 0.5 if v > 0 else 0.0
        k += (i + 1) ** 3 + int(i ** 0.5)
    return out, s, k


def half_power(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += float(x[i]) ** 0.5  # (a negative one: Python's complex)
    return s


def cube(x):
    s = x[0] * 0
    for i in range(x.shape[0]):
        s += x[i] ** 3  # (1e200: numpy's inf and its warning; Python's float: OverflowError)
    return s


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.int64, np.int32])
def test_powers_by_constants_lift_as_python_and_numpy_compute_them(dt):
    """x ** 3, x ** 0.5, n ** 0.5 in a loop: libm's pow, as Python's float
    and numpy's scalar powers (integers: exact products); where either
    raises or warns -- a negative base to a fractional power (Python's
    complex), 0 to a negative power, an overflow -- the loop runs in numpy
    (a bisection by `mid ** 3` ran 416 numpy scalar steps, 0.03x numpy's
    speed, probe 16)."""
    f = _check(powers, lambda n, r: (r.integers(0, 9, n).astype(dt) + 1,), sizes=(5, 9, 12))
    assert f.stats()["traces"] == 1, f.explain()
    for fn in (half_power, cube):
        g = jit(fn)
        big = {np.float64: 1e150, np.float32: 1e20}.get(dt, 2 ** 30)  # (its cube overflows)
        for x in ([4, 2, 9], [-4, 2], [big, 2], [0, 2], [4, 9]):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                assert_same_as_python(g, fn, np.array(x, dt))
    f = _check(bisect_cube_root, lambda n, r: (r.uniform(1, 50, n).astype(dt),), sizes=(10, 20, 30))
    assert f.stats()["traces"] == 1, f.explain()


def _int_sums(a):
    t = 0
    for i in range(len(a) - 2):
        t += a[i:i + 3].sum() * (i % 3)
    return t


def test_sums_of_small_ints_in_numpys_int():
    _check(_int_sums, lambda n, rng: (rng.integers(-100, 100, n * 2).astype(np.int8),))


def _max_of_rows(a, starts):
    best = -1.0
    for s in starts:
        best = max(best, a[s:s + 2].max())
    return best


def test_the_maximum_of_an_empty_slice_raises_as_numpy():
    f = jit(_max_of_rows)
    a = np.arange(6.0)
    assert f(a, np.array([0, 2])) == 3.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(ValueError):
            f(a, np.array([0, 6]))


def _bump_then_count(a, b, counts):
    a += 1  # (the caller's array, read no more: numpy's update must not happen twice when the loop aborts)
    for v in b:
        counts[v] += 1
    return counts


def test_an_abort_after_an_update_of_an_argument_leaves_numpys_effects():
    f = jit(_bump_then_count)
    f(np.zeros(3), np.array([0, 1, 2], np.int64), np.zeros(8, np.int64))
    a, counts = np.zeros(3), np.zeros(8, np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(IndexError):
            f(a, np.array([1, 3, 9], np.int64), counts)
    np.testing.assert_array_equal(a, [1, 1, 1])  # (once, as numpy did before it raised)
    np.testing.assert_array_equal(counts, [0, 1, 0, 1, 0, 0, 0, 0])


def _index_of_first_below(x, limit):
    for i in range(x.shape[0]):
        if x[i] < limit:
            return i
    return -1


def _contains(a, v):
    for i in range(a.shape[0]):
        if a[i] == v:
            return True
    return False


def _first_jump(x, t):
    for i in range(1, x.shape[0]):
        if x[i] - x[i - 1] > t:
            return 1.5
        elif x[i] < -t:
            return -2.0
    return 0.0


def _repeat_at(a):
    for i in range(a.shape[0]):
        for j in range(i):
            if a[i] == a[j]:
                return i  # (in an inner loop: the loops run as written)
    return -1


def _binary_search(a, t):
    lo, hi = 0, len(a) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if a[mid] == t:
            return mid
        elif a[mid] < t:
            lo = mid + 1
        else:
            hi = mid - 1
    return -1


def _halve_until(x, t):
    v = x.max()
    while v > t:
        v = v / 2
        if v < 1.0:
            return v  # (a float: the lifter refuses rv's int start, the loop runs as written)
    return -1.0


@pytest.mark.parametrize("fn, make", [
    (_binary_search, lambda n, k: (np.arange(0, 2 * n, 2), 2 * k if k < n else 7)),
    (_index_of_first_below, lambda n, k: (np.where(np.arange(n) == k, -1.0, 1.0), 0.0)),
    (_contains, lambda n, k: (np.where(np.arange(n) == k, 3, 0), 3)),
    (_first_jump, lambda n, k: (np.where(np.arange(n) >= k, 5.0, 0.0), 1.0)),
])
def test_a_loop_that_returns_from_the_function_compiles_once(fn, make, backend):
    """`for i in range(n): if ...: return i` (a search), and a binary
    search's `while lo <= hi: ... return mid` (10 traces for 10 searches,
    probe 16), are lifted as loops that break (jit/lift.py
    _returns_to_breaks): each position of the first
    hit, and no hit at all, gives numpy's value and Python type, with at
    most two compiles (found or not: one decision after the loop), where
    each trip's decision was a graph break and each position another path."""
    f = jit(fn, backend=backend)
    for n, k in ((6, 2), (9, 5), (12, 0), (7, 99), (30, 17), (5, 99)):
        args = make(n, k)
        _same(f(*args), fn(*args))
    assert f.stats()["compiles"] <= 2 + (fn is _binary_search) and f.stats()["fallbacks"] == 0, f.explain()
    if backend == "llvm":  # (t an int that changed: a symbol, one compile more)
        assert _lifted(f)


def test_a_while_loop_that_returns_a_value_of_another_type_runs_as_written():
    f = jit(_halve_until)
    for x, t in ((np.array([8.0, 3.0]), 0.5), (np.array([8.0, 3.0, 1.0]), 20.0), (np.array([1.5, 0.2]), 0.1)):
        _same(f(x, t), _halve_until(x, t))


def test_a_return_in_an_inner_loop_runs_as_written():
    f = jit(_repeat_at)
    for a in (np.array([3, 1, 4, 1, 5]), np.array([1, 2, 3]), np.array([7, 7])):
        _same(f(a), _repeat_at(a))


def _squares(x, ints, small):
    out = np.empty_like(x)
    s, t = 0, 0
    for i in range(x.shape[0]):
        out[i] = x[i] ** 2 if x[i] < 1 else 2 * x[i] - 1
        s += ints[i] ** 2
        t += int(small[i] ** 2) + (i % 2 == 0) ** 2
    return out, s, t


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_square_is_lifted_as_a_product(dtype, backend):
    """`e ** 2` in a lifted loop is e * e (a correctly rounded square, as
    pow's): Python's and numpy's values and types for floats, numpy ints,
    small unsigned ints and bools (the loop was traced as written: `**` was
    not lifted)."""
    _check(_squares, lambda n, rng: ((rng.standard_normal(n) * 2).astype(dtype), rng.integers(-9, 9, n),
                                     rng.integers(0, 15, n).astype(np.uint8)), backend=backend)


def edit_distance(a, b):
    m, n = len(a), len(b)
    D = np.zeros((m + 1, n + 1), dtype=np.int64)
    D[:, 0] = np.arange(m + 1)
    D[0, :] = np.arange(n + 1)
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            D[i, j] = min(D[i - 1, j] + 1, D[i, j - 1] + 1, D[i - 1, j - 1] + cost)
    return D[m, n], D


def test_min_of_three_lifts_and_edit_distance_compiles_once(backend):
    """min()/max() of more than two values in a lifted loop: the first
    extreme one, folded left as Python picks it (a min of three refused the
    loop: a graph break per cell, 0.06x numpy)."""
    f = jit(edit_distance, backend=backend)
    rng = np.random.default_rng(17)
    for n in (5, 8, 13, 21):
        a, b = rng.integers(0, 4, n), rng.integers(0, 4, n + 3)
        assert_like_numpy(f(a, b), edit_distance(a, b))
    assert f.stats()["traces"] == 1 and f.stats()["graph_breaks"] == 0
    g = jit(lambda x: [min(x[i], x[i + 1], x[i + 2]) + max(x[i], x[i + 1], x[i + 2]) for i in range(1)][0],
            backend=backend)
    for x in ([1.0, np.nan, 0.5], [np.nan, 1.0, 0.5], [2.0, 1.0, 1.0]):
        x = np.array(x)
        np.testing.assert_array_equal(g(x), min(x[0], x[1], x[2]) + max(x[0], x[1], x[2]))


def thomas(a, b, c, d):
    """The Thomas algorithm for a tridiagonal system: a forward sweep, then
    a backward one over range(n - 2, -1, -1) that binds the same `i`."""
    n = len(d)
    cp, dp = np.zeros(n), np.zeros(n)
    cp[0], dp[0] = c[0] / b[0], d[0] / b[0]
    for i in range(1, n):
        m = b[i] - a[i] * cp[i - 1]
        cp[i] = c[i] / m
        dp[i] = (d[i] - a[i] * dp[i - 1]) / m
    x = np.zeros(n)
    x[-1] = dp[-1]
    for i in range(n - 2, -1, -1):
        x[i] = dp[i] - cp[i] * x[i + 1]
    return x


def test_a_second_loop_over_the_same_variable_lifts_too(backend):
    """A loop variable's value before its loop is never read (a loop before
    it had bound `i`, and lifted, left it unset): the backward sweep lifted
    too (it was a scan of 1.7 us per trip, 0.36x numpy at n = 1000)."""
    f = _check(thomas, lambda n, rng: (rng.random(n), rng.random(n) + 4, rng.random(n), rng.random(n)),
               sizes=(2, 5, 9, 40), backend=backend)
    assert f.stats()["traces"] == 1
    if backend == "llvm":
        assert _lifted(f) == 2, f.explain()


def lis_length(x):
    """The longest increasing subsequence by patience sorting."""
    tails = np.empty(len(x))
    size = 0
    for v in x:
        i = np.searchsorted(tails[:size], v)
        tails[i] = v
        if i == size:
            size += 1
    return size, tails[:size].copy()


def test_searchsorted_in_a_loop_lifts(backend):
    """np.searchsorted of a slice and a number in a loop is a binary search
    in the compiled loop (it refused the loop: a graph break per trip,
    0.09x numpy)."""
    f = _check(lis_length, lambda n, rng: (rng.standard_normal(n),), sizes=(2, 9, 40, 1), backend=backend)
    assert f.stats()["traces"] <= 2 and f.stats()["graph_breaks"] == 0  # (a size of 1 is a shape of its own)


def _searches(a, keys, out_left, out_right):
    for k in range(keys.shape[0]):
        out_left[k] = np.searchsorted(a, keys[k])
        out_right[k] = a.searchsorted(keys[k], side="right")
    return np.searchsorted(a[1:], 1000), np.searchsorted(a, -1), np.searchsorted(a, 0.1, side="right")


@pytest.mark.parametrize("adt, kdt", [("float64", "float64"), ("float32", "float64"), ("float32", "float32"),
                                      ("int8", "int64"), ("uint8", "float32"), ("int64", "float64"),
                                      ("uint16", "int32"), ("bool", "bool")])
def test_searchsorted_as_numpy(adt, kdt, backend):
    """numpy's order and dtypes: NaN above every number, a Python int or
    float compared as an int64 or a float64 (0.1 against a float32 array),
    an unsorted array searched as numpy halves it."""
    def make(n, rng):
        a = (rng.standard_normal(n) * 20).astype(adt)
        if rng.random() < 0.7:
            a = np.sort(a)
        keys = np.concatenate([a[:3], (rng.standard_normal(n) * 20)]).astype(kdt)
        if adt.startswith("float") and kdt.startswith("float") and n > 2:
            a[-1] = keys[1] = np.nan
        return a, keys, np.zeros(keys.size, np.int64), np.zeros(keys.size, np.int64)
    _check(_searches, make, sizes=(1, 4, 9, 30, 31), backend=backend)


def _searches_summed(a, v):
    tot = 0
    for i in range(v.shape[0]):
        tot += np.searchsorted(a[:i], v[i])
    return tot


def test_a_loop_of_no_trip_leaves_its_variables_as_python_does():
    """A loop whose variable takes numpy's type at its first trip (`tot +=
    np.searchsorted(...)`) run for no trip leaves the Python int: the trace
    runs it as written (an internal error warned before); other counts lift."""
    f = jit(_searches_summed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for a, v in ((np.arange(8.0), np.array([1.5, 2.5, 7.0])), (np.arange(4.0), np.zeros(0)),
                     (np.arange(6.0), np.array([0.5, 3.5]))):
            _same(f(a, v), _searches_summed(a, v))


def running_max(x):
    out = np.empty_like(x)
    m = -np.inf
    for i in range(x.shape[0]):
        if x[i] > m:
            m = x[i]
        out[i] = m
    return out


def running_max_kept(x):
    """m read after the loop: a Python float or numpy's by the data."""
    out = np.empty_like(x)
    m = -np.inf
    for i in range(x.shape[0]):
        if x[i] > m:
            m = x[i]
        out[i] = m
    return out, m


def running_max_scaled(x):
    """m in arithmetic: a Python float's product is a float64, numpy's float32's a float32."""
    out = np.empty_like(x)
    m = -1e30
    for i in range(x.shape[0]):
        if x[i] > m:
            m = x[i]
        out[i] = m * 0.5
    return out


def drawdown(x):
    """max() of the Python float and an element; arithmetic with an element."""
    out = np.empty_like(x)
    peak = -np.inf
    for i in range(x.shape[0]):
        peak = max(peak, x[i])
        out[i] = x[i] - peak
    return out


def running_max_tenth(x):
    """0.1 is no float16's: stored before a trip takes the branch, it is the Python float's 0.1."""
    out = np.empty(x.shape[0])
    m = 0.1
    for i in range(x.shape[0]):
        if x[i] > m:
            m = x[i]
        out[i] = m
    return out


def test_a_python_float_a_branch_rebinds_to_numpys_float_lifts_where_its_type_shows_nowhere(backend):
    """`m = -np.inf` then `if x[i] > m: m = x[i]` (m a Python float until a
    trip takes the branch, numpy's scalar after, by the data): typed as
    numpy's float where only comparisons and stores read it (its type shows
    nowhere), so the loop lifts (it was "m has no single type here": a scan,
    or a trace per length; 20-40x slower than numpy at n = 3000); read
    after the loop, it lifts too, and whether it is still the Python float
    there is a graph break (an all-NaN call takes the other path); in
    arithmetic with a Python float, it stays as it was (but for float64,
    whose products are a Python float's)."""
    for dt, fn in itertools.product((np.float32, np.float64), (running_max, drawdown)):
        f = jit(fn, backend=backend)
        for n in (5, 9, 17, 1, 33):
            x = np.random.default_rng(n).standard_normal(n).astype(dt)
            if n == 9:
                x[:3] = np.nan  # (no trip takes the branch while x[i] is nan: m stays the Python float)
            _same(f(x), fn(x))
        assert f.stats()["traces"] == 2, f.explain()  # (a length of 1: an entry of its own)
        assert backend != "llvm" or _lifted(f) == 2
        for fn in (running_max_kept, running_max_scaled, running_max_tenth):
            g = jit(fn, backend=backend)
            for n in (4, 6, 3):
                x = np.random.default_rng(n).standard_normal(n).astype(dt)
                x[0] = np.nan
                _same(g(x), fn(x))
                _same(g(np.full(n, 0.05, dt)), fn(np.full(n, 0.05, dt)))
                _same(g(np.full(n, 0.05, np.float16)), fn(np.full(n, 0.05, np.float16)))
                _same(g(np.full(n, np.nan, dt)), fn(np.full(n, np.nan, dt)))
            assert _lifted(g) == 0 or fn is running_max_kept or fn in (running_max_tenth, running_max_scaled) \
                and dt == np.float64  # (m * 0.5 stored into float64s: the same value either way)


def segmented_sum(x, flags):
    """acc: a Python float, reset to one in the loop, numpy's after `+= x[i]`."""
    out = np.empty_like(x)
    acc = 0.0
    for i in range(x.shape[0]):
        if flags[i]:
            acc = 0.0
        acc += x[i]
        out[i] = acc
    return out


def segmented_sum_kept(x, flags):
    """Read after the loop: the Python float when the last trip reset it."""
    out = np.empty_like(x)
    acc = 0.0
    for i in range(x.shape[0]):
        if flags[i]:
            acc = 0.0
        else:
            acc += x[i]
        out[i] = acc
    return out, acc, acc * np.ones(2, np.float32)


def running_min_kept(x):
    """m read after the loop, in arithmetic: a Python float's keeps float32, numpy's float64 makes float64."""
    out = np.empty(x.shape[0])
    m = np.inf
    for i in range(len(x)):
        if x[i] < m:
            m = x[i]
        out[i] = x[i] - m
    return out, m * np.ones(3, np.float32)


def running_max_select(x):
    out = np.empty_like(x)
    m = -math.inf
    for i in range(x.shape[0]):
        m = x[i] if x[i] > m else m
        out[i] = m
    return out


def select_leaks(x):
    """y takes m's type from a select bound to another name: m stays untyped (y * 2.5 tells them apart)."""
    out = np.empty(x.shape[0])
    m = 1.0
    for i in range(x.shape[0]):
        y = m if x[i] > 0 else x[i]
        out[i] = y * 2.5
        if x[i] > m:
            m = x[i]
    return out


def reset_by_python_arithmetic(x):
    """acc += 1.1 is Python float arithmetic until a trip makes acc numpy's: no retype."""
    out = np.empty_like(x)
    acc = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            acc = 0.0
        acc += 1.1
        acc += x[i]
        out[i] = acc
    return out


def matrix_chain(dims):
    """best: np.iinfo(np.int64).max (a Python int) bound in the loop, then numpy's int64."""
    n = dims.shape[0] - 1
    m = np.zeros((n, n), dtype=np.int64)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            best = np.iinfo(np.int64).max
            for k in range(i, j):
                c = m[i, k] + m[k + 1, j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < best:
                    best = c
            m[i, j] = best
    return m


def prefix_kept(x):
    s = 0
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        if x[i] > 3:
            s = 0
        else:
            s += x[i]
        out[i] = s
    return out, s


def not_a_value_of_its_type(x):
    """0.1 is no float32's: the loop does not lift, and the result is numpy's."""
    out = np.empty_like(x)
    m = -np.inf
    for i in range(x.shape[0]):
        if x[i] > m:
            m = x[i]
        if x[i] > 1:
            m = 0.1
        out[i] = m
    return out


def finfo_start(x):
    m = np.finfo(x.dtype).max
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        m = min(m, x[i])
        out[i] = m
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_python_numbers_a_loop_rebinds_to_numpys_are_typed_numpys_where_no_value_changes(dt):
    """Python numbers bound in the loop too (a segmented sum's reset `acc =
    0.0`), constants of np and math, a select bound to the name itself, and
    a name read after the loop (a graph break on whether it is still the
    Python number): each lifts, once for every length (the segmented sum
    ran as a scan, 60x numpy's time), and every result is numpy's in value
    and type."""
    rng = np.random.default_rng(0)
    flags = lambda n, r: r.random(n) < 0.3
    _check(segmented_sum, lambda n, r: (r.standard_normal(n).astype(dt), flags(n, r)), sizes=(5, 9, 17, 3))
    f = _check(segmented_sum_kept, lambda n, r: (r.standard_normal(n).astype(dt), flags(n, r)),
               sizes=(5, 9, 17, 3, 8, 12))
    x = rng.standard_normal(6).astype(dt)
    for last in (True, False):  # (the last trip resets acc: a Python float; or adds: numpy's)
        fl = np.zeros(6, bool)
        fl[-1] = last
        _same(f(x, fl), segmented_sum_kept(x, fl))
    _check(running_min_kept, lambda n, r: (r.standard_normal(n).astype(dt),), sizes=(5, 9, 17, 3))
    g = _check(running_min_kept, lambda n, r: (np.full(n, np.nan, dt),), sizes=(4, 7))  # (m stays inf)
    _same(g(x), running_min_kept(x))
    f = _check(running_max_select, lambda n, r: (r.standard_normal(n).astype(dt),), sizes=(5, 9, 17, 3))
    assert f.stats()["traces"] == 1, f.explain()
    _check(select_leaks, lambda n, r: (r.standard_normal(n).astype(dt),), sizes=(5, 9, 17), lifted=False)
    _check(reset_by_python_arithmetic, lambda n, r: (r.standard_normal(n).astype(dt),), sizes=(5, 9, 17),
           lifted=False)
    _check(not_a_value_of_its_type, lambda n, r: (r.standard_normal(n).astype(dt) * 2,), sizes=(5, 9),
           lifted=dt == np.float64)
    _check(finfo_start, lambda n, r: (r.standard_normal(n).astype(dt),), sizes=(5, 9, 0))


def test_python_ints_a_loop_rebinds_to_numpys_are_typed_numpys():
    """DP's `best = np.iinfo(np.int64).max` in the loop (13x numpy's time as
    a scan), and a sum from 0 read after the loop, of each integer type."""
    f = _check(matrix_chain, lambda n, r: (r.integers(1, 30, n),), sizes=(5, 9, 12, 2, 7))
    assert f.stats()["traces"] <= 2, f.explain()  # (n = 1: no trip of the outer loop)
    for dt in (np.uint8, np.int32, np.int64, np.float32):
        _check(prefix_kept, lambda n, r: (r.integers(0, 6, n).astype(dt),), sizes=(5, 9, 1, 6, 2))
    x = np.array([1, 2, 9], np.uint8)
    _same(jit(prefix_kept)(x), prefix_kept(x))  # (a Python int after the loop)


def int_running_max(x):
    out = np.empty_like(x)
    m = -np.inf
    for i in range(x.shape[0]):
        if x[i] > m:
            m = x[i]
        out[i] = m
    return out


def int_running_min_mirrored(x):
    out = np.empty(x.shape[0], np.int64)
    m = float("inf")
    for i in range(x.shape[0]):
        if m >= x[i]:
            m = x[i]
        out[i] = m * 2
    return out, m


def int_never_above_nan(x):
    """No integer is above NaN: m stays the Python float, and storing it raises numpy's ValueError."""
    out = np.empty_like(x)
    m = np.nan
    for i in range(x.shape[0]):
        if x[i] > m:
            m = x[i]
        out[i] = m
    return out


def test_an_infinite_start_over_integers_is_decided_at_the_first_trip():
    """`m = -np.inf` then `if x[i] > m: m = x[i]` over integers: at the
    first trip the comparison is True whatever the data (numpy compares an
    integer and a Python float as float64s), so m is numpy's integer from
    then on and the loop lifts, once for every length (it traced once per
    length, 18x slower than numpy at n = 3000)."""
    for dt in (np.int64, np.int32, np.uint8, np.bool_):
        f = _check(int_running_max, lambda n, r: (r.integers(0, 100, n).astype(dt),), sizes=(5, 9, 17, 3, 12))
        assert f.stats()["traces"] == 1, f.explain()
        _check(int_running_min_mirrored, lambda n, r: (r.integers(-50, 50, n).astype(dt),), sizes=(5, 9, 17, 3))
    f = jit(int_never_above_nan)
    for n in (4, 7):
        with pytest.raises(ValueError, match="NaN"):
            f(np.arange(n))
        with pytest.raises(ValueError, match="NaN"):
            int_never_above_nan(np.arange(n))
    _same(f(np.zeros(0, np.int64)), int_never_above_nan(np.zeros(0, np.int64)))


def gauss_seidel(A, b, sweeps):
    x = np.zeros_like(b)
    n = b.shape[0]
    for _ in range(sweeps):
        for i in range(n):
            s = b[i] - A[i, :i] @ x[:i] - A[i, i + 1:] @ x[i + 1:]
            x[i] = s / A[i, i]
    return x


def column_segments(A):
    out = np.zeros(A.shape[1], A.dtype)
    for j in range(A.shape[1]):
        out[j] = A[1:, j].sum() + A[::-2, j - 1].max() - np.dot(A[:j, j], A[-1, :j])
    return out


def row_past_the_end(A):
    """A[i + 1, :i] at the last row: numpy's IndexError."""
    t = 0.0
    for i in range(A.shape[0]):
        t += A[i + 1, :i].sum()
    return t


def test_a_row_or_column_segment_of_a_matrix_is_a_vector_of_a_lifted_loop():
    """A[i, :i] @ x[:i] (Gauss-Seidel, forward substitution) and A[lo:hi:step,
    j] lift: the loop compiles once for every size (Gauss-Seidel traced once
    per size: "Slice"), its fixed index wrapped and checked as an element's."""
    f = _check(gauss_seidel, lambda n, r: (r.standard_normal((n, n)) + n * np.eye(n), r.standard_normal(n), 3),
               sizes=(3, 5, 8, 13, 1))
    assert f.stats()["traces"] == 2, f.explain()  # (a size of 1: a signature of its own)
    # (float32 products stay numpy's: its BLAS adds in an order of its own)
    _check(gauss_seidel, lambda n, r: (r.standard_normal((n, n)).astype(np.float32) + n * np.eye(n, dtype=np.float32),
                                       r.standard_normal(n).astype(np.float32), 3), sizes=(3, 5), lifted=False)
    for dt in (np.float64, np.int64, np.int32):
        f = _check(column_segments, lambda n, r: ((r.standard_normal((n + 2, n)) * 9).astype(dt),), sizes=(3, 5, 8))
        assert f.stats()["traces"] == 1, f.explain()
    f = jit(row_past_the_end)
    for n in (3, 6):
        with pytest.raises(IndexError):
            f(np.ones((n, n)))
        with pytest.raises(IndexError):
            row_past_the_end(np.ones((n, n)))


def whole_rows(A, v):
    out = np.zeros(A.shape[0], A.dtype)
    for i in range(A.shape[0]):
        out[i] = np.dot(A[i], v) + np.sum(A[-i - 1]) - np.max(v) + np.min(A[i]) + v @ A[i]
    return out


def row_after_the_last(A, m):
    t = 0.0
    for i in range(A.shape[0] - m):
        t += np.sum(A[i + 1])
    return t


def test_a_whole_row_and_a_whole_vector_lift():
    """A[i] of a matrix is its row, A[i, :], and a 1-D array's name in @,
    np.dot and np.sum/max/min all of it (SOR's `A[i] @ x`: probe 21 ran it
    as scans at 0.30x numpy); a row past the end raises numpy's IndexError."""
    f = _check(sor, lambda n, r: (r.standard_normal((n, n)) + n * np.eye(n), r.standard_normal(n), 1.2, 4),
               sizes=(3, 6, 9, 1))
    assert f.stats()["traces"] == 2 and f.stats()["graph_breaks"] == 0, f.explain()  # (a size of 1: its own)
    for dt in (np.float64, np.int64):
        f = _check(whole_rows, lambda n, r: ((r.standard_normal((n, n + 2)) * 9).astype(dt),
                                             (r.standard_normal(n + 2) * 9).astype(dt)), sizes=(3, 5, 8))
        assert f.stats()["traces"] == 1, f.explain()
    f = jit(row_after_the_last)
    for n in (3, 6):
        for m in (1, 2):  # (m a symbol once it changed: the entry compiled serves m = 0)
            assert f(np.ones((n, n)), m) == row_after_the_last(np.ones((n, n)), m)
        with pytest.raises(IndexError):
            f(np.ones((n, n)), 0)
        with pytest.raises(IndexError):
            row_after_the_last(np.ones((n, n)), 0)
    assert _lifted(f) > 0 and f.stats()["traces"] == 2, f.explain()


def max_kept(x):
    m = -np.inf
    for i in range(x.shape[0]):
        m = max(m, x[i])
    return m, m * np.ones(2, np.float16)


def kadane(x):
    best = 0
    cur = 0
    for i in range(len(x)):
        cur = cur + x[i]
        if cur < 0:
            cur = 0
        best = max(best, cur)
    return best, best * np.ones(2, np.float16)


def latch(x):
    """state < 1e-50: exact while state is the Python float 0.0; float32's 0 < float32(1e-50) is False."""
    y = np.empty_like(x)
    state = 0.0
    for i in range(x.shape[0]):
        if state < 1e-50:
            state = x[i]
        y[i] = state
    return y


def threshold_of_another_dtype(x, w):
    """thr becomes x's float64, and is compared with w's float32 elements: as a Python float, in float32."""
    thr = 0.1
    n = 0
    for i in range(x.shape[0]):
        if w[i] > thr:
            n += 1
        if x[i] > thr:
            thr = x[i]
    return n


def forward_fill(labels):
    out = np.empty(labels.shape[0], np.uint16)
    last = -1
    for i in range(labels.shape[0]):
        if labels[i] >= 0:
            last = labels[i]
        out[i] = last
    return out


def first_above(x):
    found = -1.0
    for i in range(len(x)):
        if x[i] > 0.5:
            found = x[i]
            break
    return found


def count_equal(a, b):
    n = 0
    for i in range(a.shape[0]):
        if a[i] == b[i]:
            n += 1
        if a[i] < b[i]:
            n += 10
    return n


def test_retyped_python_numbers_keep_python_semantics_in_every_use():
    """The rule's edges (probe 9): max() and a select keep the Python
    number when they return it (its flag follows them), a comparison with
    what is not of its type or not exactly one of its values keeps the
    Python number, a store into an array of another dtype keeps Python's
    OverflowError, and the exit through a break takes the rule too."""
    for dt in (np.float32, np.float64, np.float16):
        f = _check(max_kept, lambda n, r: (r.standard_normal(n).astype(dt),), sizes=(5, 9, 3))
        for x in (np.full(4, np.nan, dt), np.array([np.nan, 1, 2], dt), np.zeros(0, dt)):
            _same(f(x), max_kept(x))
    f = _check(kadane, lambda n, r: (r.integers(-5, 9, n),), sizes=(5, 9, 3, 12))
    for x in (-np.arange(1, 6), np.zeros(4, np.int64), np.array([3, -9, 2])):
        _same(f(x), kadane(x))
    assert f.stats()["traces"] <= 2, f.explain()  # (best still Python's 0 or not: a graph break)
    for dt in (np.float32, np.float16):
        _check(latch, lambda n, r: (np.full(n, 5.0, dt),), sizes=(3, 4, 5), lifted=False)
    _check(threshold_of_another_dtype, lambda n, r: (r.random(n), np.full(n, 0.1, np.float32)), sizes=(4, 5, 3),
           lifted=False)
    f = jit(forward_fill)
    for labels in (np.array([-1, 5, -1, 7]), np.array([2, -1, 3])):
        try:
            want = forward_fill(labels)
        except OverflowError:
            with pytest.raises(OverflowError):
                f(labels)
        else:
            _same(f(labels), want)
    f = _check(first_above, lambda n, r: (r.random(n).astype(np.float32) * 0.4,), sizes=(10, 11, 12, 13))
    assert f.stats()["traces"] == 1, f.explain()
    _same(f(np.array([0.1, 0.9], np.float32)), first_above(np.array([0.1, 0.9], np.float32)))
    big = 2 ** 62
    a = np.array([big + 1, -1, 5, big], np.int64)
    b = np.array([big, 2 ** 64 - 1, 5, big], np.uint64)
    f = jit(count_equal)
    for k in (4, 3, 2):
        _same(f(a[:k], b[:k]), count_equal(a[:k], b[:k]))


def segment_sums(x, bounds):
    out = np.empty(bounds.shape[0] - 1, x.dtype)
    for k in range(bounds.shape[0] - 1):
        out[k] = x[bounds[k]:bounds[k + 1]].sum()
    return out


def strided_segment_sums(A):
    out = np.empty(A.shape[1], A.dtype)
    for j in range(A.shape[1]):
        out[j] = A[::-1, j].sum() + np.sum(A[j % A.shape[0], ::2])
    return out


def test_float_sums_of_slices_in_a_lifted_loop_are_numpys_to_the_bit():
    """A float slice's sum in a lifted loop adds in numpy's order (its
    pairwise summation from its identity): bit for bit numpy's, where the
    running sum in order was 0.35% off numpy's for 250 000 float32s."""
    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float64):
        f, g = jit(segment_sums), jit(strided_segment_sums)
        for n in (10, 100, 1000, 100003, 250000):
            x = (rng.standard_normal(n) * 1000).astype(dt)
            b = np.sort(rng.integers(0, n, 6))
            b[0], b[-1] = 0, n
            assert f(x, b).tobytes() == segment_sums(x, b).tobytes(), (dt, n)
            a = (rng.standard_normal((n // 10 + 3, 7)) * 100).astype(dt)
            assert g(a).tobytes() == strided_segment_sums(a).tobytes(), (dt, n)
        assert _lifted(f) and _lifted(g)
        x = np.full(250000, 0.1, dt)
        b = np.array([0, 250000])
        assert f(x, b).tobytes() == segment_sums(x, b).tobytes()


def trips_of(p):
    n = 0
    last = 0
    for i in range(p[0], p[1], p[2]):
        n += 1
        last = i
    return n, last


def test_a_range_of_any_bounds_and_step_runs_pythons_trips():
    """The trip count of range(start, stop, step) for bounds and a step the
    data gives, to the ends of int64 (it divided in 128 bits, which needs
    __divti3: the whole function fell to the reference back end)."""
    f = jit(trips_of)
    big = 2 ** 63 - 1
    cases = [(0, 10, 3), (10, 0, -3), (0, 10, -1), (5, 5, 1), (-7, 8, 5), (8, -7, -5), (0, 1, big),
             (-big - 1, big, big), (big, -big - 1, -big - 1), (3, 4, 1), (-3, -10, -2), (0, 7, 7), (0, 8, 7)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for c in cases:
            p = np.array(c, np.int64)
            _same(f(p), trips_of(p))
    assert _lifted(f) and f.stats()["fallbacks"] == 0


def past_int64(x):
    m = 2 ** 63 - 1
    for i in range(len(x)):
        if x[i] > 5:
            m = 0
    return m + 1, m // 2 - 3, -m


def test_python_int_arithmetic_after_a_loop_is_exact_in_the_call_that_traces():
    """A Python int a lifted loop or a scan leaves, in arithmetic: the trace
    computes it as Python does (numpy's int64 wrapped 2**63 - 1 + 1 to
    -2**63 in the call that traced, where later calls were right); past
    int64, numpy decides."""
    f = jit(past_int64)
    for n in (3, 8, 4, 9):
        x = np.arange(n, dtype=np.int32)
        _same(f(x), past_int64(x))


def count_rises(x):
    n = 0
    for i in range(x.shape[0]):
        if i > 0 and x[i] > x[i - 1]:
            n += 1
        if not (x[i] < 0 or i == 0) and (x[i] == x[i - 1] or i % 2):
            n += 100
        m = 1 if i > 1 and x[i] else 2
        n += m
    return n


def test_and_or_not_of_python_and_numpy_bools_in_a_test():
    """`i > 0 and x[i] > x[i - 1]` (a Python bool and numpy's) where only
    its truth is read (an if's or a conditional expression's test) lifts:
    it was "and/or of values that are not all bools of one type", a trace
    per length, 64x numpy's time."""
    for dt in (np.float64, np.int32, np.bool_):
        f = _check(count_rises, lambda n, r: (r.integers(-2, 3, n).astype(dt),), sizes=(5, 9, 17, 3))
        assert f.stats()["traces"] == 1, f.explain()


def merge_sorted(a, b):
    out = np.empty(a.shape[0] + b.shape[0], a.dtype)
    i = j = k = 0
    while i < a.shape[0] and j < b.shape[0]:
        if a[i] <= b[j]:
            out[k] = a[i]
            i += 1
        else:
            out[k] = b[j]
            j += 1
        k += 1
    while i < a.shape[0]:
        out[k] = a[i]
        i += 1
        k += 1
    while j < b.shape[0]:
        out[k] = b[j]
        j += 1
        k += 1
    return out


def gcds(a, b):
    out = np.empty_like(a)
    for k in range(a.shape[0]):
        x, y = a[k], b[k]
        while y != 0:
            x, y = y, x % y
        out[k] = x
    return out


def insertion_sort(x):
    x = x.copy()
    for i in range(1, x.shape[0]):
        key = x[i]
        j = i - 1
        while j >= 0 and x[j] > key:
            x[j + 1] = x[j]
            j -= 1
        x[j + 1] = key
    return x


def first_crossing(x):
    """while True with a break, a continue, and a sum that settles its type after a trip."""
    i = 0
    s = 0
    while True:
        if i >= x.shape[0]:
            break
        i += 1
        if x[i - 1] < 0:
            continue
        s += x[i - 1]
        if s > 20:
            break
    return i, s


def collatz_steps(x):
    out = np.empty(x.shape[0], np.int64)
    for k in range(x.shape[0]):
        n = int(x[k])
        steps = 0
        while n != 1 and n > 0:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            steps += 1
        out[k] = steps
    return out


def test_while_loops_lift():
    """A while loop, alone or inside a for loop, lifts as a for loop does (its
    test and body typed at each trip's head until the types settle): merges,
    Euclid's gcd, insertion sort, Collatz and a while True with breaks
    compile once (a while loop was a scan, a compiled call per trip: the
    merge of two sorted arrays at 68x numpy's time, gcd at 92x)."""
    for dt in (np.float64, np.int32):
        f = _check(merge_sorted, lambda n, r: (np.sort(r.integers(0, 50, n)).astype(dt),
                                               np.sort(r.integers(0, 50, n + 3)).astype(dt)), sizes=(5, 9, 0, 17))
        assert f.stats()["traces"] <= 2, f.explain()
    _check(gcds, lambda n, r: (r.integers(0, 1000, n), r.integers(0, 1000, n)), sizes=(5, 9, 17))
    for dt in (np.float64, np.int64, np.uint8):
        f = _check(insertion_sort, lambda n, r: (r.integers(0, 200, n).astype(dt),), sizes=(5, 9, 17, 2))
        assert f.stats()["traces"] <= 2, f.explain()
    for dt in (np.float32, np.int64):
        _check(first_crossing, lambda n, r: (r.integers(-3, 9, n).astype(dt),), sizes=(5, 9, 17, 30, 0))
    _check(collatz_steps, lambda n, r: (r.integers(1, 500, n),), sizes=(5, 9, 17))


def best_segment(x, flags):
    acc = 0.0
    tot = 0.0
    for i in range(len(x)):
        if flags[i]:
            acc = 0.0
        acc += x[i]
        if acc > tot:
            tot = acc
    return tot


def max_of_row_maxes(a):
    tot = 0.0
    for i in range(a.shape[0]):
        best = -np.inf
        for j in range(a.shape[1]):
            if a[i, j] > best:
                best = a[i, j]
        if best > tot:
            tot = best
    return tot


def copy_kept(x, flags):
    """tot bound to acc while acc is the Python float 0.0 (a reset): tot is the Python float too."""
    acc = 0.0
    tot = 1.0
    for i in range(x.shape[0]):
        if flags[i]:
            acc = 0.0
        else:
            acc += x[i]
        if x[i] > 0:
            tot = acc
    return tot, tot * np.ones(2, np.float32)


def test_a_retyped_name_bound_to_another_carries_whether_it_is_a_python_number():
    """`tot = acc` and `tot = best` (a best segment, the max of row maxima):
    both names retyped alike, the flag carried from one to the other (they
    traced once per length: 19x numpy's time)."""
    for dt in (np.float32, np.float64):
        # (at most two traces: tot still the Python 0.0 after the loop, or not: a graph break)
        f = _check(best_segment, lambda n, r: (r.standard_normal(n).astype(dt), r.random(n) < 0.3), sizes=(10, 11, 3))
        assert f.stats()["traces"] <= 2, f.explain()
        f = _check(max_of_row_maxes, lambda n, r: (r.standard_normal((3, n)).astype(dt),), sizes=(10, 11, 4, 12))
        assert f.stats()["traces"] <= 2, f.explain()
        g = jit(copy_kept)
        for x, fl in ((np.array([1.0, 2.0, 3.0], dt), np.array([False, False, True])),
                      (np.array([1.0, 2.0, 3.0], dt), np.array([False, False, False])),
                      (np.array([-1.0, -2.0], dt), np.array([True, False]))):
            _same(g(x, fl), copy_kept(x, fl))


def running_min_past_range(cost):
    best = np.iinfo(np.int64).max
    for i in range(len(cost)):
        if cost[i] < best:
            best = cost[i]
    return best


def test_a_python_int_past_the_dtype_compares_as_decided():
    """`best = np.iinfo(np.int64).max` over int32 data: numpy 2 compares an
    int32 and a Python int past its range exactly, so the first trip's
    branch is decided when typed (the comparison's conversion aborted: a
    trace per length)."""
    for dt in (np.int32, np.uint8, np.int16):
        f = _check(running_min_past_range, lambda n, r: (r.integers(0, 100, n).astype(dt),), sizes=(10, 11, 12, 13))
        assert f.stats()["traces"] == 1, f.explain()
        _same(f(np.zeros(0, dt)), running_min_past_range(np.zeros(0, dt)))


def sum_until(x, t):
    s = 0
    i = 0
    while i < x.shape[0] and s < t:
        s += x[i]
        i += 1
    return s, i


def test_a_retyped_name_compares_with_a_python_number_of_its_very_type():
    """s (a Python int, then numpy's float64) against t, a Python float: a
    Python float is a float64, so the comparison is the same either way and
    the loop lifts (probe 11: a trace per length)."""
    f = _check(sum_until, lambda n, r: (r.random(n), 2.5), sizes=(3, 5, 9, 17, 0))
    assert f.stats()["traces"] <= 2, f.explain()  # (s still the Python 0, for no trip, or not: a graph break)
    _check(sum_until, lambda n, r: (r.random(n).astype(np.float32), 2.5), sizes=(3, 5), lifted=False)


def floor_of_last(vals):
    hi = 0.0
    for k in range(vals.shape[0]):
        hi = max(1.0, vals[k])
    return hi


def ceiling_of_last(vals):
    lo = 0
    for k in range(vals.shape[0]):
        lo = min(vals[k], 2)
    return lo


def clipped_running_max(vals):
    m = -1.0
    for k in range(vals.shape[0]):
        m = vals[k] if vals[k] > m else -1.0
    return m


def test_a_python_number_or_a_numpy_scalar_bound_by_max_or_a_select_is_retyped():
    """`hi = max(1.0, vals[k])` (Python's max keeps its first argument
    unless the second is greater: a Python float or numpy's float64, as the
    data says) and `m = vals[k] if ... else -1.0`: the name retyped, its
    flag set where the Python number is taken (each refused as "max() of
    two types": a trace per length).  NaN, ints and lengths 0 and 1 too."""
    for fn, make in ((floor_of_last, lambda n, r: (np.where(r.random(n) < 0.2, np.nan, r.standard_normal(n) * 2),)),
                     (floor_of_last, lambda n, r: (r.standard_normal(n).astype(np.float32),)),
                     (ceiling_of_last, lambda n, r: (r.integers(-5, 5, n),)),
                     (ceiling_of_last, lambda n, r: (r.integers(-5, 5, n).astype(np.int16),)),
                     (clipped_running_max, lambda n, r: (r.standard_normal(n),))):
        f = _check(fn, make, sizes=(9, 10, 11, 12))
        assert f.stats()["traces"] <= 2, f.explain()  # (the flag's two outcomes after the loop: a graph break)
        dt = make(1, np.random.default_rng(0))[0].dtype
        for x in (np.array([0.5]), np.array([3.0]), np.array([np.nan] if dt.kind == "f" else []), np.zeros(0)):
            _same(f(x.astype(dt)), fn(x.astype(dt)))


def gae(r, v, gamma=0.99, lam=0.95):
    T = len(r)
    adv = np.zeros(T)
    last = 0.0
    for t in reversed(range(T)):
        nv = v[t + 1] if t + 1 < T else 0.0  # (a Python float or numpy's float64, as the trip says)
        last = r[t] + gamma * nv - v[t] + gamma * lam * last
        adv[t] = last
    return adv


def next_value_stored(v):
    out = np.empty(v.shape[0])
    for t in range(v.shape[0]):
        nv = v[t + 1] if t + 1 < v.shape[0] else 0.0
        out[t] = -(2.0 * nv)  # (stored into a float64 array: the same value either way)
    return out


def next_value_divides(r, v):
    """1.0 / nv: Python's 0.0 raises ZeroDivisionError where numpy's float64 gives inf: not retyped."""
    out = np.empty(r.shape[0])
    for t in range(r.shape[0]):
        nv = v[t + 1] if t + 1 < r.shape[0] else 0.0
        out[t] = r[t] + 1.0 / nv
    return out


def next_value_kept(v):
    """y = 2.0 * nv is bound: a Python float or numpy's float64, as numpy's: not retyped."""
    y = 0.0
    for t in range(v.shape[0]):
        nv = v[t + 1] if t + 1 < v.shape[0] else 0.0
        y = 2.0 * nv
    return y


def test_a_python_float_or_a_float64_in_sums_that_meet_a_float64_is_retyped():
    """GAE (`nv = v[t + 1] if t + 1 < T else 0.0`, then `r[t] + gamma * nv -
    v[t]`): Python's float and numpy's float64 add and multiply alike, and
    the sum meets a float64, so nv is retyped and the loop lifts once for
    every length (probe 15: a scan at 7x numpy's time).  A divisor, a
    float32 and a value bound to a name keep the loop as it was."""
    f = _check(gae, lambda n, r: (r.standard_normal(n), r.standard_normal(n + 1)), sizes=(9, 10, 11, 12, 1))
    assert f.stats()["traces"] <= 2, f.explain()  # (one row: a signature of its own)
    _check(next_value_stored, lambda n, r: (r.standard_normal(n + 1),), sizes=(9, 10, 11, 12))
    f = _check(gae, lambda n, r: (r.standard_normal(n).astype(np.float32), r.standard_normal(n + 1).astype(
        np.float32)), sizes=(9, 10, 11), lifted=False)  # (float32: 0.99 * nv rounds otherwise)
    f = jit(next_value_divides)
    for n in (5, 6):
        with pytest.raises(ZeroDivisionError):
            next_value_divides(np.ones(n), np.ones(n + 1))
        with pytest.raises(ZeroDivisionError):
            f(np.ones(n), np.ones(n + 1))
    f = jit(next_value_kept)
    for n in (5, 6, 7, 8, 0):
        v = np.arange(n + 1.0)
        _same(f(v), next_value_kept(v))


def running_min_from(x):
    m = 1e18
    for i in range(x.shape[0]):
        if x[i] < m:
            m = x[i]
    return m


def running_min_reset(x, flags):
    m = 1e18
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        if flags[i]:
            m = 1e18
        if x[i] < m:
            m = x[i]
        out[i] = m
    return m, out


def running_min_other_reset(x, flags):
    m = 1e18
    for i in range(x.shape[0]):
        if flags[i]:
            m = 3e18
        if x[i] < m:
            m = x[i]
    return m


def test_a_python_float_the_loop_s_float_type_rounds_is_retyped_as_rounded():
    """`m = 1e18` over float32s: numpy rounds it to a float32 wherever it
    meets one, so m is typed float32 from that rounding, and a loop that
    took none of the data's values leaves the Python float itself (it
    traced once per length).  Another float it is bound to (3e18), or a
    float16 past 1e18's range (numpy warns of the overflow), leave the loop
    traced."""
    for dt in (np.float32, np.float64):
        f = _check(running_min_from, lambda n, r: (r.standard_normal(n).astype(dt),), sizes=(9, 10, 11, 12))
        assert f.stats()["traces"] <= 2, f.explain()
        for x in (np.zeros(0, dt), np.array([np.float32(1e18)], dt), np.array([np.inf, np.nan], dt)):
            _same(f(x), running_min_from(x))
    f = _check(running_min_reset, lambda n, r: (r.standard_normal(n).astype(np.float32), r.random(n) < 0.3),
               sizes=(9, 10, 11, 12))
    assert f.stats()["traces"] <= 2, f.explain()
    _check(running_min_other_reset, lambda n, r: (r.standard_normal(n).astype(np.float32), r.random(n) < 0.3),
           sizes=(9, 10), lifted=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (numpy's: 1e18 overflows a float16)
        _check(running_min_from, lambda n, r: (r.standard_normal(n).astype(np.float16),), sizes=(9, 10),
               lifted=False)


def last_doubled_while(x):
    i = 0
    while i < x.shape[0]:
        last = x[i] * 2
        i += 1
    return last


def newton_sqrt(a, tol):
    x = a
    err = tol + 1.0
    while err > tol:
        x_new = 0.5 * (x + a / x)
        err = abs(x_new - x)
        x = x_new
    return x_new


def last_positive_pair(x):
    for i in range(x.shape[0]):
        j, v = i, x[i]
        if v > 0:
            break
    return j, v


def last_if_positive(x):
    for i in range(x.shape[0]):
        if x[i] > 0:
            last = x[i]
    return last


def test_a_name_first_bound_in_the_loop_and_read_after_it_lifts():
    """`last = x[i] * 2` in a while loop, then `return last` (and Newton's
    `x_new`, a tuple's names in a for loop): the name starts as a zero of
    its type, with a hidden bool of whether a trip bound it; where none did,
    it is unbound after the loop, as in Python (a trace per length: a while
    loop has no first trip to peel).  One a trip may leave unbound (bound
    under an if) lifts too: the last trip that bound it gives its value."""
    f = _check(last_doubled_while, lambda n, r: (r.standard_normal(n),), sizes=(9, 10, 11, 12))
    assert f.stats()["traces"] == 1, f.explain()
    with pytest.raises(UnboundLocalError):
        last_doubled_while(np.zeros(0))
    with pytest.raises(UnboundLocalError):
        f(np.zeros(0))
    _same(f(np.ones(13)), last_doubled_while(np.ones(13)))
    g = jit(newton_sqrt)
    for a in (2.0, 9.0, 1e6, np.float32(3.0)):
        _same(g(a, 1e-6), newton_sqrt(a, 1e-6))
    _same(g(4.0, 10.0), newton_sqrt(4.0, 10.0))
    with pytest.raises(UnboundLocalError):  # (no trip: x_new unbound)
        g(4.0, np.inf)
    h = _check(last_positive_pair, lambda n, r: (r.standard_normal(n),), sizes=(9, 10, 11, 12))
    assert h.stats()["traces"] <= 2, h.explain()
    k = _check(last_if_positive, lambda n, r: (r.standard_normal(n),), sizes=(9, 10, 11, 12))
    assert k.stats()["traces"] <= 2, k.explain()
    with pytest.raises(UnboundLocalError):
        k(-np.ones(13))
    _same(k(np.array([-1.0, 2.0, -3.0, 4.0, -5.0])), last_if_positive(np.array([-1.0, 2.0, -3.0, 4.0, -5.0])))


def test_constants_no_type_holds_are_refused_not_raised():
    """An int past every float (10 ** 400) as a value of a float type, and
    int() of an infinity folded: no value, so the rule refuses them (they
    raised OverflowError inside the lifter: an internal error's warning)."""
    from jit.lift import _exactly, _folded
    assert _exactly(10 ** 400, np.dtype(np.float32)) is None
    assert _exactly(2 ** 24, np.dtype(np.float32)) == 2 ** 24
    assert _folded(("cvt", "int", ("const", "float", math.inf), "value")) is None
    assert _folded(("cvt", "int", ("const", "float", math.nan), "value")) is None


def discounted_returns(r, gamma):
    out = np.zeros_like(r)
    acc = 0.0
    for t in reversed(range(len(r))):
        acc = r[t] + gamma * acc
        out[t] = acc
    return out


def every_third_backwards(x):
    out = np.zeros(x.shape[0] + 1)
    s = 0.0
    for i in reversed(range(1, x.shape[0], 3)):
        s = s * 0.5 + x[i]
        out[i] = s
    for i in reversed(range(x.shape[0] - 1, -1, -2)):
        out[i + 1] += x[i] * i
    return out


def test_a_loop_over_reversed_range_lifts():
    """`for t in reversed(range(n))` (discounted returns, a backward pass) is
    the range of the same values, from the last down: the lifter compiles it
    as any loop over range(), once for every length (it ran as a scan, 7-14x
    numpy's time, probe 15); steps of either sign, empty ranges."""
    f = _check(discounted_returns, lambda n, r: (r.standard_normal(n), 0.9), sizes=(5, 9, 17, 3, 0, 1))
    assert f.stats()["traces"] <= 3, f.explain()
    _check(every_third_backwards, lambda n, r: (r.standard_normal(n),), sizes=(5, 9, 17, 3, 0, 1, 2, 4))


def _rounded_sum(x):
    s = 0
    for v in x:
        s += round(float(v)) + round(v)
    return s


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int32])
def test_round_of_one_argument_lifts_as_python_s(dtype):
    """round(v) in a loop (probe 21: the loop ran as a scan, each trip a
    graph break on the int it made, 70x slower than Python): Python's int,
    halves to even, compiled whole; a NaN or an infinity raises as in
    Python (ValueError, OverflowError: the call runs eagerly)."""
    f = jit(_rounded_sum)
    for n in (6, 7, 40):
        x = (np.arange(n) - n / 2 + 0.5).astype(dtype)
        _same(f(x), _rounded_sum(x))
    assert _lifted(f) == 1, f.explain()
    if np.dtype(dtype).kind == "f":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JitWarning)
            with pytest.raises(ValueError):
                f(np.array([1.5, np.nan], dtype))
            with pytest.raises(OverflowError):
                f(np.array([np.inf], dtype))


LOOP_SCALE = 1.0


def _scaled_in_place(x):
    y = x.copy()
    for i in range(x.shape[0]):
        y[i] = y[i] * LOOP_SCALE + i
    return y


@pytest.mark.parametrize("values", [(1.0, 1.0, 2.0, 3.0, 5.0), (1, 1, 2, 3, 5)])
def test_a_global_that_changes_is_read_by_a_lifted_loop_at_every_call(values):
    """A global number read inside a loop compiled whole: once it changed it
    is a runtime scalar (keyed by its type), and the loop took the value of
    the call that traced instead, stale from its second change on (probe
    21); it reads the trace's scalar, each call's value."""
    global LOOP_SCALE
    f = jit(_scaled_in_place)
    try:
        for n, v in zip((3, 4, 6, 7, 3), values):
            LOOP_SCALE = v
            x = np.ones(n)
            _same(f(x), _scaled_in_place(x))
        assert _lifted(f) >= 1 and f.stats()["traces"] == 2, f.explain()
    finally:
        LOOP_SCALE = 1.0


def _exp_sum(x):
    s = 0.0
    for v in x:
        s += math.exp(float(v))
    return s


def test_a_float_overflow_in_a_lifted_loop_raises_as_python_and_says_so():
    """math.exp(800.0) raises OverflowError in Python: the compiled loop
    aborts and the call runs in Python, and explain() names a float
    overflow (it said "an integer overflow or an inexact conversion",
    probe 21)."""
    f = jit(_exp_sum)
    assert f(np.array([1.0, 2.0])) == _exp_sum(np.array([1.0, 2.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with pytest.raises(OverflowError):
            f(np.array([1.0, 800.0]))
    assert "a float overflow (math.exp" in f.explain() and _lifted(f) == 1

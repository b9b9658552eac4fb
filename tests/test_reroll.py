"""Re-rolled loops (clustering/reroll.py, codegen/loops.py): a Python loop
that tracing unrolled into updates of one array (elements, or runs of a
row) becomes one native loop, and gives numpy's results: the array updated in place or into a copy
as the graph's semantics need, other arguments and views of the array read
as they were, read-only arrays raising numpy's error.  Each case runs the
traced call and a compiled one on the llvm back end."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from bench.corpus.discrete import nussinov
from bench.corpus.linalg import cholesky, syr2k, syrk, trisolv as forward, trmm
from bench.corpus.stencils import deriche, seidel_2d
from codegen import loops
from jit import JitWarning, jit
from runtime.kernelcall import KernelCall
from shapes.ir import Graph, Value
from tests.conftest import assert_like_numpy


@pytest.fixture(autouse=True)
def no_lifting(monkeypatch):
    """These loops would lift whole (jit/lift.py, tests/test_lift.py): here
    the trace unrolls them, as it does the loops lifting leaves, and the
    re-roll pass rolls them up again."""
    from jit import lift
    monkeypatch.setattr(lift, "ENABLED", False)


def _loops(f) -> int:
    return sum(1 for state in f._keys.values() for e in state.entries for s in e.executable.steps
               if isinstance(s, KernelCall) and s.target)


def _like(got, want, rtol):
    """numpy's dtype and shape; values to a few ulp, or to rtol where a
    solve's cancellation amplifies the order a dot product sums in."""
    if rtol is None or want is None:
        return assert_like_numpy(got, want)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol)


def _check(fn, make, sizes=(6, 11), loops=True, rtol=None):
    f = jit(fn)
    warnings.simplefilter("error", JitWarning)  # (no fallback: pytest restores the filters after the test)
    for n in sizes:
        for _ in range(2):  # (the traced call, then the compiled entry)
            args, ref = make(n), make(n)
            got, want = f(*args), fn(*ref)
            _like(got, want, rtol)
            for a, r in zip(args, ref):
                if isinstance(r, np.ndarray):
                    _like(a, r, rtol)
    assert (_loops(f) > 0) == loops, f._keys
    return f


def _spd(n, dtype=np.float64):
    rng = np.random.default_rng(n)
    m = rng.standard_normal((n, n))
    return (m @ m.T + n * np.eye(n)).astype(dtype)


def test_cholesky_runs_its_loops_natively_the_inner_inside_the_outer():
    # (float64: float32 cancels in A[i, j] - dot, where numpy's and our summation orders differ by ulps)
    f = _check(cholesky, lambda n: (_spd(n),), rtol=1e-12)
    assert _loops(f) == 2  # (one native loop nest for each size)


def test_a_solve_with_growing_dot_products_is_one_loop():
    f = _check(forward, lambda n: (_spd(n), np.zeros(n), np.arange(n, dtype=np.float64)), rtol=1e-12)
    assert _loops(f) == 2  # (one for each of the two sizes: range(x.shape[0]) specializes n)


def backward(A, y):
    x = np.zeros_like(y)
    for i in range(y.shape[0] - 1, -1, -1):
        x[i] = (y[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]
    return x


def test_a_loop_counting_down():
    _check(backward, lambda n: (_spd(n), np.linspace(1.0, 2.0, n)), rtol=1e-12)


def recurrence(A, N):
    for i in range(1, N - 1):
        for j in range(1, N - 1):
            A[i, j] = (A[i, j] + A[i, j - 1] + A[i - 1, j]) / 9.0
    return A


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_scalar_recurrence_over_rows(dtype):
    _check(recurrence, lambda n: (np.arange(n * n, dtype=dtype).reshape(n, n) % 7, n))


def running_max(t, seq):
    n = seq.shape[0]
    for j in range(1, n):
        t[j] = np.maximum(t[j - 1], seq[j] + (seq[j] % 3 == 0)) - np.max(seq[:j] - t[:j])
    return t


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_loops_wrap_like_numpy(dtype):
    _check(running_max, lambda n: (np.zeros(n, dtype), (np.arange(n, dtype=dtype) * 7919) % 23))


def view_before(A):
    row = A[0]                       # (a view of A: the loop must read it as it was)
    for j in range(1, A.shape[1]):
        A[1, j] = A[1, j - 1] + row[j]
    return A


def test_an_operand_sharing_the_updated_arrays_memory_makes_the_loop_work_on_a_copy():
    _check(view_before, lambda n: (np.arange(2 * n, dtype=np.float64).reshape(2, n),))


def keeps_input(x):
    y = x.copy()
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] * 0.5 + x[i]
    return y, x


def test_the_arrays_old_value_read_later_is_kept():
    _check(keeps_input, lambda n: (np.linspace(0.0, 1.0, n),))


def test_a_read_only_array_raises_numpys_error_and_stays_unwritten():
    f = jit(forward)
    for _ in range(2):
        L, x, b = _spd(8), np.zeros(8), np.ones(8)
        x.setflags(write=False)
        with pytest.raises(ValueError, match="read-only"):
            forward(L, x, b)
        with pytest.raises(ValueError, match="read-only"):
            f(L, x, b)
        assert not x.any()


def scaled_sums(y, x):
    for i in range(1, y.shape[0]):
        y[i] = np.sum(x * y[i - 1]) * 0.1   # (x whole: the loop reads arrays through indexing only)
    return y


def test_math_on_a_whole_argument_inside_a_loop_stays_unrolled_and_right():
    _check(scaled_sums, lambda n: (np.ones(6), np.linspace(0.0, 1.0, n)), loops=False)


def suffix_max(y, x):
    for i in range(1, y.shape[0]):
        y[i] = np.max(x[i:])
    return y


def test_a_maximum_of_a_slice_that_becomes_empty_raises_as_numpy():
    f = _check(suffix_max, lambda n: (np.zeros(6), np.arange(float(n))), sizes=(7, 9))
    with pytest.raises(ValueError, match="zero-size"):
        suffix_max(np.zeros(6), np.arange(5.0))
    with pytest.raises(ValueError, match="zero-size"):
        f(np.zeros(6), np.arange(5.0))


def not_a_loop(A):
    for j in range(1, A.shape[0]):
        A[j] = np.sort(A[j - 1:j + 1])[0] + 1.0   # (np.sort: not in a native loop's body)
    return A


def test_a_body_a_native_loop_does_not_compute_stays_unrolled_and_right():
    _check(not_a_loop, lambda n: (np.linspace(3.0, 0.0, n),), loops=False)


# ------------------------------------------------------- runs of a row

def _pair(n, dtype=np.float64):
    rng = np.random.default_rng(n)
    return rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_updates_from_products_of_a_matrix_view_and_a_row(dtype):
    # (C[i, :i + 1] += alpha * (A[:i + 1, :] @ A[i, :]): a matrix view times a vector, stored as a run)
    _check(syrk, lambda n: (1.5, 1.2, _pair(n, dtype)[0], _pair(n, dtype)[1]), rtol=1e-5)
    _check(syr2k, lambda n: (1.5, 1.2, _pair(n, dtype)[0], *_pair(n, dtype)), rtol=1e-5)


def test_a_row_update_reading_the_rows_below_it():
    # (B[i, :] += A[i + 1:, i] @ B[i + 1:, :]: a vector times a matrix view of the array the loop updates)
    _check(trmm, lambda n: (1.5, *_pair(n)), rtol=1e-12)


def read_ahead(A):
    for i in range(1, A.shape[0]):
        A[i, 1:-1] = A[i, 2:] * 0.5 + A[i - 1, 1:-1]   # (each element read before the store reaches it)
    return A


def read_behind(A):
    for i in range(1, A.shape[0]):
        A[i, 1:-1] = A[i, :-2] * 0.5 + A[i - 1, 1:-1]   # (numpy reads the old row: a loop storing as it goes would not)
    return A


def read_reversed(A):
    for i in range(1, A.shape[0]):
        A[i, :] = A[i, ::-1] + A[i - 1, :]
    return A


def test_a_row_store_reading_its_own_row_ahead_is_a_loop():
    _check(read_ahead, lambda n: (np.arange(n * 5.0).reshape(n, 5) % 7,))


def rows_times(A, x):
    for i in range(A.shape[0]):
        A[i, :] = A[:, :] @ x * 0.5   # (element j needs row j whole: row i as it was)
    return A


@pytest.mark.parametrize("fn", [read_behind, read_reversed])
def test_a_row_store_reading_what_it_already_stored_stays_unrolled_and_right(fn):
    _check(fn, lambda n: (np.arange(n * 5.0).reshape(n, 5) % 7,), loops=False)


def row_through_a_product(A, B):
    for i in range(A.shape[0]):
        A[i, :] = B[i:i + A.shape[1], :] @ A[i, :] * 0.5   # (element j needs the row whole: as it was)
    return A


def test_a_row_store_from_a_product_reading_the_row_stays_unrolled_and_right():
    _check(rows_times, lambda n: (np.arange(n * n * 1.0).reshape(n, n) % 7, np.linspace(0.0, 1.0, n)), loops=False)
    _check(row_through_a_product, lambda n: (np.arange(n * n * 1.0).reshape(n, n) % 7,
                                             np.vstack([np.eye(n)[::-1]] * 2)), loops=False)


def broadcasts(A):
    for i in range(1, A.shape[0]):
        A[i, :i] = A[i - 1, :i] + A[i - 1, i:i + 1]   # (a run of i elements plus one element, repeated)
        A[i, i:] = 0.25
    return A


def test_one_element_repeated_and_a_scalar_filling_a_run():
    _check(broadcasts, lambda n: (np.arange(n * n, dtype=np.float32).reshape(n, n) % 5,))


# ------------------------------------------------------- loops in loops

def test_three_loops_deep_with_row_stores_between_the_inner_loops():
    # (seidel_2d: time steps, rows (a row store, then a loop along it), columns; the first
    # row's inner loop is one trip shorter, the first time step's rows stay as traced)
    f = _check(seidel_2d, lambda n: (4, n, np.arange(n * n, dtype=np.float64).reshape(n, n) % 11),
               sizes=(7, 10))
    steps = [len(e.executable.steps) for st in f._keys.values() for e in st.entries]
    assert len(steps) == 2 and max(steps) < 25, steps   # (unrolled rows and columns: 60 to 90 steps)


def test_a_nested_loop_whose_trips_grow_with_the_outer_one():
    def lower(A):
        for i in range(1, A.shape[0]):
            for j in range(i):
                A[i, j] = A[i, j] * 0.5 + A[i - 1, j] + A[i, j - 1]
        return A
    f = _check(lower, lambda n: (np.arange(n * n, dtype=np.float64).reshape(n, n) % 5,), sizes=(8, 12))
    assert _loops(f) == 2


# ------------------------------------------- what tracing computed once

def test_reads_tracing_computed_once_and_reused_across_trips_and_after_the_loop():
    # (imgIn[:, j - 1] in trip j is trip j - 1's imgIn[:, j]: the loop reads it again; the
    # reads the loop along the other direction reuses are computed before the first loop)
    _check(deriche, lambda n: (0.25, np.random.default_rng(n).standard_normal((n, n + 3))), rtol=1e-12)


def test_integer_scalars_from_before_the_loop_and_reads_hoisted_out_of_it():
    # (nussinov: seq[i] is read before the j loop, seq[j] once for all i and reused)
    _check(nussinov, lambda n: (n, ((np.arange(n) * 7 + 1) % 4).astype(np.int32)))


def add_first(t, x):
    first = x[0]
    for j in range(1, t.shape[0]):
        t[j] = t[j - 1] + first
    return t


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32])
def test_scalars_from_before_the_loop_reach_it_exactly(dtype):
    # (int64 past 2**53: an integer scalar is passed as an int64, as to a kernel, never through a double)
    big = np.iinfo(dtype).max // 64 if dtype != np.float32 else 1e30   # (n trips: no overflow)
    _check(add_first, lambda n: (np.zeros(n, dtype), np.full(3, big - 1, dtype)))


def test_the_pass_replaces_the_trips_by_one_loop_node():
    from clustering.reroll import reroll
    from shapes.ir import Node, make_attrs
    x = Value(0, np.dtype(np.float64), (8,))
    nodes, cur, vid = [], x, 1
    for j in range(1, 8):
        a = Value(vid, x.dtype, ())
        b = Value(vid + 1, x.dtype, ())
        s = Value(vid + 2, x.dtype, ())
        out = Value(vid + 3, x.dtype, (8,))
        nodes += [Node("getitem", (cur,), make_attrs(items=(("int", j - 1),), shape=()), (a,)),
                  Node("getitem", (cur,), make_attrs(items=(("int", j),), shape=()), (b,)),
                  Node("add", (a, b), (), (s,)),
                  Node("setitem", (cur, s), make_attrs(items=(("int", j),)), (out,))]
        cur, vid = out, vid + 4
    g = reroll(Graph((x,), tuple(nodes), (cur,)))
    (loop,) = g.nodes
    assert loop.op == "loop" and loop.attr("body").trips == 7 and loop.out is cur
    assert repr(loop.attr("body")) == "<7 trips of: getitem getitem add setitem>"
    want = np.cumsum(np.arange(8.0))
    from shapes.ops import OPS
    assert_like_numpy(OPS["loop"].ref(np.arange(8.0), body=loop.attr("body")), want)


def column_products(A, out):
    for i in range(A.shape[1]):
        out[i, i:] = A[:, i] @ A[:, i:]  # (covariance's row: down the columns of A)
    return out


@pytest.mark.parametrize("blas", ["every trip", "none to be had", "never"])
def test_a_float64_vector_times_a_matrix_runs_on_numpys_blas(blas, monkeypatch):
    """A float64 x @ M of GEMV_MIN_ELEMENTS or more runs on numpy's
    cblas_dgemv (both cores, as numpy's own product); a view whose rows are
    not unit-strided, a smaller product, or no such BLAS in the process:
    the loop's own code.  Either gives numpy's result."""
    from runtime import threadpool
    if blas == "every trip":
        assert threadpool.dgemv_address() != 0  # (numpy's wheels bring an OpenBLAS with 64-bit ints)
        monkeypatch.setattr(loops, "GEMV_MIN_ELEMENTS", 1)
    elif blas == "none to be had":
        monkeypatch.setattr(loops, "GEMV_MIN_ELEMENTS", 1)
        monkeypatch.setattr(threadpool, "dgemv_address", lambda: 0)
        from runtime import generate, kernelcall
        monkeypatch.setattr(kernelcall, "dgemv_address", lambda: 0)
        monkeypatch.setattr(generate, "dgemv_address", lambda: 0)
    else:
        monkeypatch.setattr(loops, "GEMV_MIN_ELEMENTS", 1 << 62)
    data = lambda n: np.random.default_rng(n).standard_normal((n + 3, n))
    _check(column_products, lambda n: (data(n), np.zeros((n, n))), sizes=(3, 11), rtol=1e-12)
    wide = lambda n: np.repeat(data(n), 2, axis=1)[:, ::2]  # (a view: its columns 2 elements apart)
    _check(column_products, lambda n: (wide(n), np.zeros((n, n))), sizes=(3, 11), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_vector_times_a_matrix_read_down_its_columns(dtype):
    """x @ M sums down M's columns: computed row by row of M into a buffer
    (a unit column stride, and any other), loops.ROWS_AT_ONCE rows a pass:
    fewer rows than that, a multiple of it, and more with some left over."""
    # (float32: small integers, every sum exact in any order, so ours (summed
    # in float64) and numpy's float32 sums agree however much they cancel)
    if dtype == np.float32:
        data, rtol = lambda n: np.random.default_rng(n).integers(-4, 5, (n + 3, n)).astype(dtype), None
    else:
        data, rtol = lambda n: np.random.default_rng(n).standard_normal((n + 3, n)), 1e-12
    sizes = (3, loops.ROWS_AT_ONCE * 2 - 3, loops.ROWS_AT_ONCE * 2 + 2)  # (rows: n + 3)
    _check(column_products, lambda n: (data(n), np.zeros((n, n), dtype)), sizes=sizes, rtol=rtol)
    wide = lambda n: np.repeat(data(n), 2, axis=1)[:, ::2]  # (a view: its columns 2 elements apart)
    _check(column_products, lambda n: (wide(n), np.zeros((n, n), dtype)), sizes=sizes, rtol=rtol)

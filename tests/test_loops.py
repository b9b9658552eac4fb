"""Python loops unrolled into a trace: each distinct kernel is compiled once,
kernels store straight into the slot a slice assignment writes, arguments are
updated in place when nothing can stop the call half way; and reductions
over every axis are row kernels (ints and bools too)."""
import dis
import re
import sys
from collections import Counter

import numpy as np
import pytest

from codegen.schedule import COLUMN_BLOCK
from jit import jit
from runtime.generate import WARMUP_STEPS
from tests.conftest import assert_like_numpy


def _entry(f):
    (state,) = f._keys.values()
    return state.entries[0]


def _run_twice(f, fn, make, scaled: bool = False):
    """Traced call, then a compiled one; both against numpy, arguments too.
    `scaled`: each array to a few ulp of its largest element (a recurrence
    carries the rounding of a sum, whose order numpy's BLAS picks by CPU,
    into elements far smaller than the largest)."""
    for _ in range(2):
        args, ref = make(), make()
        got, want = f(*args), fn(*ref)
        for g, w in zip(got, want) if isinstance(want, tuple) else ((got, want),):
            atol = 4 * np.finfo(w.dtype).eps * float(np.abs(w).max()) if scaled and w.size else 0.0
            assert_like_numpy(g, w, atol=atol)
        for a, r in zip(args, ref):
            if isinstance(r, np.ndarray):
                assert_like_numpy(a, r, atol=4 * np.finfo(r.dtype).eps * float(np.abs(r).max()) if scaled else 0.0)


def jacobi(A, B, steps):
    for _ in range(steps):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


def test_an_unrolled_loop_compiles_each_distinct_kernel_once(backend):
    f = jit(jacobi, backend=backend, static_argnames=("steps",))
    rng = np.random.default_rng(0)
    a0, b0 = rng.random(40), rng.random(40)
    _run_twice(f, jacobi, lambda: (a0.copy(), b0.copy(), 25))
    if backend == "llvm":
        e = _entry(f)
        assert len(e.build.abis) == 50
        assert len({a.symbol for a in e.build.abis}) == 1  # one function serves the 50 kernels


def test_kernels_that_differ_are_not_shared():
    def f(x):
        for c in (2.0, 3.0, 2.0):
            x = x * c + 1.0
            x = np.sqrt(np.abs(x))
        return x
    jf = jit(f)
    x = np.linspace(-3, 3, 50)
    assert_like_numpy(jf(x), f(x))
    assert_like_numpy(jf(x), f(x))


def growing(r, w, A):
    """Slices that grow with the loop index: one kernel per size in the trace."""
    y = np.empty_like(r)
    y[0] = -r[0]
    alpha = -r[0]
    for k in range(1, r.shape[0]):
        alpha = -(r[k] + np.flip(r[:k]) @ y[:k]) / (1.0 + alpha * alpha)
        y[:k] += alpha * y[k - 1::-1]              # flat kernel, a reversed operand
        y[k] = alpha
        w[k] = (r[:k] * y[:k]).sum() + w[:k].max()   # row reductions of length k
        A[:k, :k] *= 0.5                           # a 2-D strided slot of k x k
        A[k, :k] -= A[:k, k] * y[:k]
    return y, w, A


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernels_that_differ_only_in_sizes_share_one_function(backend, dtype):
    f = jit(growing, backend=backend)
    rng = np.random.default_rng(1)
    r, w, A = (rng.random(90).astype(dtype) * 0.1, rng.random(90).astype(dtype),
               rng.random((90, 90)).astype(dtype))
    # (the Levinson recursion over 90 steps: on a Zen 3 a few of y's smallest
    # elements came out 70 ulp of their own from numpy's, the whole within
    # 7 ulp of the largest, as numpy's own from the recursion in long double)
    _run_twice(f, growing, lambda: (r.copy(), w.copy(), A.copy()), scaled=True)
    if backend == "llvm":
        abis = _entry(f).build.abis
        assert len(abis) > 100
        # one function per kind of kernel (the loop's first sizes, 1 and 2, have their own)
        assert len({a.symbol for a in abis}) < 20
        shared, n = Counter(a.symbol for a in abis).most_common(1)[0]
        sizes = {tuple(x for x in a.args if x[0] == "int") for a in abis if a.symbol == shared}
        assert n > 50 and len(sizes) > 50  # each call of the shared function passes its own sizes


def test_arguments_are_updated_in_place_and_written_back_right(backend):
    f = jit(jacobi, backend=backend, static_argnames=("steps",))
    a, b = np.arange(12.0), np.ones(12)
    a_id = a.__array_interface__["data"][0]
    f(a.copy(), b.copy(), 3)
    ra, rb = a.copy(), b.copy()
    jacobi(ra, rb, 3)
    f(a, b, 3)
    assert_like_numpy(a, ra)
    assert_like_numpy(b, rb)
    assert a.__array_interface__["data"][0] == a_id


def write_then_branch(x, y):
    x[0] = y.sum()
    if x[1] > 0:  # a graph break after the write: a call that decides otherwise reruns from the start
        x[2:] = 1.0
    else:
        x[2:] = -1.0
    return x.sum()


def test_a_write_before_a_graph_break_is_not_seen_by_the_rerun(backend):
    f = jit(write_then_branch, backend=backend)
    for sign in (1.0, -1.0, 1.0, -1.0):
        x, rx = np.full(6, sign), np.full(6, sign)
        y = np.arange(3.0)
        got, want = f(x, y), write_then_branch(rx, y)
        assert_like_numpy(got, want)
        assert_like_numpy(x, rx)


def overlapping(A):
    for _ in range(3):
        A[1:-1] = A[:-2] + A[2:]  # numpy reads the whole right-hand side first
    return A


def interior(A, B):
    for _ in range(2):
        B[1:-1, 1:-1] = 0.25 * (A[1:-1, :-2] + A[1:-1, 2:] + A[:-2, 1:-1] + A[2:, 1:-1])
        A[1:-1, 1:-1] = 0.25 * (B[1:-1, :-2] + B[1:-1, 2:] + B[:-2, 1:-1] + B[2:, 1:-1])


def rows(C, A):
    for i in range(C.shape[0]):
        C[i, :i + 1] += A[:i + 1, :] @ A[i, :]


@pytest.mark.parametrize("fn, make", [
    (overlapping, lambda: (np.arange(20.0) ** 1.5,)),
    (interior, lambda: (np.arange(42.0).reshape(6, 7) ** 0.5, np.ones((6, 7)))),  # strided slots
    (rows, lambda: (np.arange(30.0).reshape(5, 6)[:, :5].copy(), np.arange(20.0).reshape(5, 4) / 7)),
])
def test_kernels_storing_into_a_slice_give_numpys_result(fn, make, backend):
    _run_twice(jit(fn, backend=backend), fn, make)


def test_a_kernel_stores_straight_into_a_contiguous_slot():
    f = jit(jacobi, static_argnames=("steps",))
    f(np.ones(9), np.ones(9), 2)
    src = _entry(f).executable.source
    assert "_t" in src and ".flags.c_contiguous" in src


# ------------------------------------------------------- reductions over all axes

def sum_error(x, ulps: int) -> float:
    """How far a sum of x's elements in another order may stray: `ulps` of
    x's dtype times the sum of magnitudes (0 for integers, exact)."""
    return float(np.abs(x).astype(np.float64).sum()) * ulps * (float(np.finfo(x.dtype).eps) if x.dtype.kind == "f" else 0)


def full_reductions(x, m):
    b = (m > 0) & (m < 3)
    i = (m * 3).astype(np.int32) if m.dtype.kind == "f" else m * 3
    return (np.where(b, x, 0.0).sum() / b.sum(), x.max(), x.min(keepdims=True), (x * 2).sum(),
            i.sum(), i.max(), i.min(), b.sum(), (x * 2).sum(keepdims=True))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:invalid value")
@pytest.mark.parametrize("shape", [(1,), (7,), (300,), (3, 5), (2, 3, 4), (1, 1), (5, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions_over_every_axis(shape, dtype, backend):
    rng = np.random.default_rng(1)
    f = jit(full_reductions, backend=backend)
    for _ in range(2):
        x = rng.standard_normal(shape).astype(dtype)
        m = np.round(rng.uniform(-4, 4, shape))
        # (float32 sums in another order differ by float32 ulps, also once divided into float64)
        terms = sum_error(x, 8)
        assert_like_numpy(f(x, m), full_reductions(x, m), ulps=8, atol=terms)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_and_bool_sums_wrap_and_widen_as_numpy(dtype, backend):
    def f(x):
        return (x + x).sum(), x.sum(axis=-1), (x * 1).max() if dtype != np.bool_ else x.sum()
    jf = jit(f, backend=backend)
    big = np.iinfo(np.int32).max if dtype != np.bool_ else True
    for x in (np.full((3, 4), big, dtype), np.arange(12).reshape(3, 4).astype(dtype)):
        assert_like_numpy(jf(x), f(x))
        assert_like_numpy(jf(x), f(x))


def test_reductions_over_every_axis_fuse_with_their_producers():
    def f(x, m):
        return np.where(m > 0, x * 2.0, 0.0).sum(), (m > 0).sum()
    jf = jit(f)
    x = np.arange(10.0)
    jf(x, x - 5)
    text = jf.explain()
    assert "row kernel" in text
    not_fused = text.split("not fused:")[-1] if "not fused:" in text else ""
    assert "sum" not in not_fused


def test_an_empty_max_raises_as_numpy():
    jf = jit(lambda x: (x * 2.0).max())
    with pytest.raises(ValueError, match="zero-size"):
        jf(np.zeros(0))
    assert jf(np.ones(3)) == 2.0


# ------------------------------------------- reductions over middle axes (batched columns)

@pytest.mark.slow
@pytest.mark.parametrize("axis", [(1,), (1, 2), (0, 1, 2), (2,), (0,)])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 1, 2, 70), (1, 4, 4, 130), (2, 0, 3, 4), (2, 3, 4, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_reductions_over_axes_up_to_the_last(axis, shape, dtype, backend):
    def f(x):
        y = x * 2 + 1
        out = [y.sum(axis=axis), y.sum(axis=axis, keepdims=True)]
        if x.size:
            out += [y.max(axis=axis), y.min(axis=axis)]
        return out
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(2)
    for _ in range(2):
        x = (rng.standard_normal(shape) * 10).astype(dtype)
        terms = sum_error(x, 16)
        assert_like_numpy(jf(x), f(x), ulps=16, atol=terms)


@pytest.mark.filterwarnings("ignore:overflow")
@pytest.mark.parametrize("shape", [(5000, 1), (1, 5000), (7, 1, 300), (1, 1, 9), (3, 1), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_reductions_over_dims_of_size_one(shape, dtype, backend):
    """x's dims of size 1 drop before a reduction (clustering/passes.py
    unit_dims): over the rest, or none (a copy in the result's dtype) --
    numpy's dtypes and shapes, and fresh arrays, never views of x."""
    def f(x):
        out = []
        for axis in [0, -1, (0, -1), None] + ([1] if x.ndim > 2 else []):
            out += [x.sum(axis=axis), x.sum(axis=axis, keepdims=True)]
            if dtype != np.bool_:
                out += [x.max(axis=axis), (x * 2).min(axis=axis, keepdims=True), x.prod(axis=axis)]
        return out
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(4)
    for _ in range(2):
        x = (rng.standard_normal(shape) * 3).astype(dtype) if dtype != np.bool_ else rng.random(shape) < 0.5
        got = jf(x)
        terms = sum_error(x, 16)
        assert_like_numpy(got, f(x), ulps=16, atol=terms)
        assert not any(np.shares_memory(g, x) for g in got if isinstance(g, np.ndarray))


@pytest.mark.parametrize("shape", [(3000, 1), (40, 50, 1), (1, 700, 1), (300, 1, 1), (1, 1), (5, 1, 7, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_elementwise_kernels_over_trailing_dims_of_size_one(shape, dtype, backend):
    """A kernel over a domain that ends in dims of size 1 (codegen/schedule.py
    drops them from its loops): broadcast operands, a divisor of the
    domain's shape, several outputs, strided operands (which keep the
    dims), numpy's values and dtypes."""
    def f(x, y, s):
        d = np.where(y == 0, 1, y)
        q = x / d
        return x * s + y, q, q > 0, np.maximum(x, y) - s
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(6)
    for _ in range(2):
        x = (rng.standard_normal(shape) * 9).astype(dtype)
        y = (rng.standard_normal(shape) * 9).astype(dtype)
        s = np.ones((1,) * len(shape), dtype) * 3
        assert_like_numpy(jf(x, y, s), f(x, y, s), ulps=2)
        wide = np.repeat(y, 3, axis=-1)[..., ::3]  # (the same values, strided)
        assert_like_numpy(jf(x, wide, s), f(x, wide, s), ulps=2)


def test_a_column_sum_of_one_column_is_a_row_kernel():
    jf = jit(lambda x: x.sum(axis=0))
    x = np.arange(4000.0).reshape(4000, 1)
    for _ in range(2):  # (traced, then the kernel)
        assert_like_numpy(jf(x), x.sum(axis=0))
    text = jf.explain()
    assert "row kernel" in text and "column" not in text.split("clusters")[-1]


@pytest.mark.parametrize("shape, axis", [((3, 2 * COLUMN_BLOCK + 5), 0), ((2, 3, COLUMN_BLOCK + 1), 1),
                                         ((5, COLUMN_BLOCK - 1), 0), ((2, 7, 2, COLUMN_BLOCK * 3), (1, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_column_reductions_over_several_blocks(shape, axis, dtype):
    """Columns past one work unit's block (codegen/schedule.py COLUMN_BLOCK),
    the last block partial: every output element right, none written twice."""
    def f(x):
        y = x * 3 - 1
        return y.sum(axis=axis), y.max(axis=axis, keepdims=True), y.min(axis=axis)
    jf = jit(f)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    terms = sum_error(x, 16)
    for _ in range(2):  # (traced, then the kernel)
        assert_like_numpy(jf(x), f(x), ulps=16, atol=terms)
    assert "column" in jf.explain()


def conv(x, w):
    # NHWC valid convolution as numpy's users write it: one window product per output pixel
    K = w.shape[0]
    out = np.empty((x.shape[0], x.shape[1] - K + 1, x.shape[2] - K + 1, w.shape[3]), dtype=np.float32)
    for i in range(out.shape[1]):
        for j in range(out.shape[2]):
            out[:, i, j, :] = np.sum(x[:, i:i + K, j:j + K, :, np.newaxis] * w[np.newaxis], axis=(1, 2, 3))
    return out


def test_a_convolution_window_sum_is_one_kernel_per_pixel(backend):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 7, 3)).astype(np.float32)
    w = rng.standard_normal((2, 2, 3, 4)).astype(np.float32)
    jf = jit(conv, backend=backend)
    for _ in range(2):
        assert_like_numpy(jf(x, w), conv(x, w), ulps=16, atol=1e-5)
    if backend == "llvm":
        assert "column reduction" in jf.explain()


def test_a_read_only_slot_raises_numpys_error_and_is_not_written(backend):
    def f(A, B):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        return B
    jf = jit(f, backend=backend)
    A = np.arange(8.0)
    jf(A, np.zeros(8))
    jf(A, np.zeros(8))  # compiled
    B = np.zeros(8)
    B.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        jf(A, B)
    assert not B.any()
    assert_like_numpy(jf(A, np.zeros(8)), f(A, np.zeros(8)))  # still usable


def scalar_extremes(t, x, m0):
    """A dynamic-programming step as loops write it: maximum/minimum of
    elements, a 0-d argument, results returned and stored."""
    n = t.shape[0]
    best = np.maximum(m0, t[0, 0])
    for i in range(1, n):
        for j in range(1, n):
            t[i, j] = np.maximum(t[i, j - 1], t[i - 1, j]) + np.minimum(x[i], x[j])
        best = np.maximum(best, t[i, i])
    return best, np.minimum(m0, t[0, 1]), np.maximum(m0, m0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int64])
def test_scalar_maximum_and_minimum_follow_numpy(dtype, backend):
    """The executable picks between two numpy scalars itself (no ufunc
    call): ties of -0.0 and 0.0 give numpy's operand, NaN propagates; a 0-d
    array argument goes to numpy (never returned as itself)."""
    rng = np.random.default_rng(3)
    for x in (rng.standard_normal(9), np.array([0.0, -0.0, np.nan, 1.0, -0.0, 0.0, 2.0, np.nan, -1.0])):
        def make():
            t = np.zeros((9, 9)) * np.array([-1.0, 1.0] * 4 + [-1.0])  # -0.0 and 0.0
            if np.dtype(dtype).kind != "f":
                return (np.round(t * 5).astype(dtype), np.nan_to_num(np.round(x * 5)).astype(dtype),
                        np.array(-3, dtype))
            return t.astype(dtype), x.astype(dtype), np.array(-0.0, dtype)
        f = jit(scalar_extremes, backend=backend)
        _run_twice(f, scalar_extremes, make)
        args = make()
        out = f(*args)
        assert all(o is not args[2] for o in out)
        assert [np.signbit(o) for o in out] == [np.signbit(o) for o in scalar_extremes(*make())]


def test_an_executable_runs_specialized_bytecode_from_its_first_run():
    """An unrolled loop's executable runs each line once a call; CPython
    (3.11) specializes bytecode only after 8 calls or backward jumps, so the
    executable opens with 8 empty turns: after one run its global loads are
    already specialized (they were not for 8 calls: ~40% slower)."""
    def steps(a):
        for i in range(1, a.shape[0]):
            a[i] = a[i] + np.cbrt(a[i - 1])  # (cbrt: no native loop computes it, so it stays unrolled)
        return a
    f = jit(steps)
    f(np.ones(40))  # traced (the trace's own result)
    e = _entry(f)
    assert len(e.executable.steps) >= WARMUP_STEPS
    e.run([np.ones(40)], e.guards.check(((40,),)))  # the executable's first run
    ops = {i.opname for i in dis.get_instructions(e.run, adaptive=True)}
    assert sys.version_info < (3, 11) or ops & {"LOAD_GLOBAL_MODULE", "LOAD_GLOBAL_BUILTIN"}, sorted(ops)


# ------------------------------------------- argmax and argmin in row kernels

def _arg_rows(rng, shape, dtype):
    """Rows with ties, infinities, signed zeros and NaNs where numpy's rules bite."""
    if dtype == np.bool_:
        return rng.random(shape) < 0.2
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    n = shape[-1]
    flat = x.reshape(-1, n)
    for r in range(flat.shape[0]):
        kind = r % 7
        if kind == 1:  # the extreme twice, far apart: the first wins
            with np.errstate(over="ignore"):  # (uint8 wraps: still two equal values)
                flat[r, [n // 3, n - 1]] = flat[r].max() + 1
                flat[r, [n // 4, n - 2]] = flat[r].min() - 1
        elif kind == 2 and dtype in (np.float32, np.float64):  # NaNs: the first NaN wins both
            flat[r, [n // 2, n - 1]] = np.nan
        elif kind == 3 and dtype in (np.float32, np.float64):
            flat[r, :] = -np.inf
            flat[r, n - 1] = np.inf
        elif kind == 4 and dtype in (np.float32, np.float64):  # signed zeros only
            flat[r, :] = 0.0
            flat[r, ::2] = -0.0
        elif kind == 5:  # every element the same
            flat[r, :] = flat[r, 0]
        elif kind == 6 and dtype in (np.int32, np.int64):
            flat[r, :] = np.iinfo(dtype).min
    return x


@pytest.mark.parametrize("n", [1, 7, 256, 257, 1000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_argmax_and_argmin_fuse_with_their_producers(n, dtype, backend):
    """argmax and argmin of an expression over the last axis are row
    reductions (codegen/schedule.py _arg_pass: blocks of ARG_BLOCK): the
    first extreme's index, a NaN's first, as numpy; with keepdims, over 3-D
    operands, and next to another reduction of the same row."""
    def f(x, y):
        z = x * 2 if dtype != np.bool_ else x ^ y
        out = [z.argmax(axis=-1), z.argmin(axis=1, keepdims=True), np.argmax(z, axis=-1)]
        if dtype != np.bool_:
            out += [(z - y).argmin(axis=-1), np.maximum(z, y).argmax(axis=-1) + z.max(axis=-1)]
        return out
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(n)
    for _ in range(2):
        x, y = _arg_rows(rng, (14, n), dtype), _arg_rows(rng, (14, n), dtype)
        assert_like_numpy(jf(x, y), f(x, y))
    x3, y3 = _arg_rows(rng, (2, 7, n), dtype), _arg_rows(rng, (2, 7, n), dtype)
    g = jit(lambda x, y: ((x if dtype == np.bool_ else x - y)).argmax(axis=2), backend=backend)
    for _ in range(2):  # (traced, then the kernel)
        assert_like_numpy(g(x3, y3), (x3 if dtype == np.bool_ else x3 - y3).argmax(axis=2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
def test_argmax_and_argmin_over_leading_axes_are_column_kernels(dtype, backend):
    """Over an axis before the last, argmax and argmin are column reductions
    (codegen/schedule.py _columns: each column's best so far in a buffer of
    the block, its row in the output), fused with their producers: the
    first extreme's index, a NaN's first, as numpy; with keepdims, over 3-D
    operands, past one block of columns, and next to a sum of the same
    columns."""
    def f(x, y):
        z = x * 2 if dtype != np.bool_ else x ^ y
        out = [z.argmax(axis=0), z.argmin(axis=0, keepdims=True), np.argmax(z, axis=0)]
        if dtype != np.bool_:
            out += [(z - y).argmin(axis=0), np.maximum(z, y).argmax(axis=0) + z.max(axis=0)]
        return out

    def g(x):
        return (x + x).argmax(axis=1), x.argmin(axis=0)

    def cols(rng, n, m):  # (the special rows of _arg_rows as columns)
        return _arg_rows(rng, (m, n), dtype).T.copy()

    jf, jg = jit(f, backend=backend), jit(g, backend=backend)
    rng = np.random.default_rng(3)
    for n, m in ((1, 5), (9, 7), (300, 14), (5, COLUMN_BLOCK + 9)):
        for _ in range(2):  # (traced, then the kernels)
            x, y = cols(rng, n, m), cols(rng, n, m)
            assert_like_numpy(jf(x, y), f(x, y))
            x3 = _arg_rows(rng, (2, 4, n), dtype).transpose(0, 2, 1).copy()  # (2, n, 4): axis 1
            assert_like_numpy(jg(x3), g(x3))
    if backend == "llvm":
        kernels = jf.explain().split("clusters (after passes):")[-1].split("not fused:")[0]
        assert "column reduction over" in kernels and re.search(r"= argmin %\d+ \{axis=0, keepdims=True\}", kernels)
        assert not re.search(r"numpy: %\d+: \S+ = arg", jf.explain() + jg.explain())
    x, y = cols(rng, 4, 3), cols(rng, 4, 3)
    with pytest.raises(ValueError, match="empty sequence"):
        jf(x[:0], y[:0])
    assert_like_numpy(jf(x, y), f(x, y))


def test_argmax_kernels_and_the_ones_numpy_keeps():
    """Fused: over the last axis, over the first (a column kernel), and of a
    vector, and an argmax of an array another row kernel reads (one pass
    over x).  numpy's: of a flattened matrix, and an argmax over the last
    axis of an array alone."""
    def f(x, v, y):
        return ((x * x).argmax(axis=1), (v + 1).argmin(), (x * x).argmax(axis=0), (x * x).argmax(),
                x.argmax(axis=1), y.argmax(axis=1))
    jf = jit(f)
    rng = np.random.default_rng(9)
    x, v, y = rng.standard_normal((30, 300)), rng.standard_normal(500), rng.standard_normal((4, 300))
    for _ in range(2):  # (traced, then the kernels)
        assert_like_numpy(jf(x, v, y), f(x, v, y))
    text = jf.explain()
    kernels = text.split("clusters (after passes):")[-1].split("not fused:")[0]
    assert re.search(r"= argmax %\d+ \{axis=1", kernels) and re.search(r"= argmin %\d+ \{axis=0, keepdims=True\}",
                                                                         kernels)
    assert re.search(r"= argmax %\d+ \{axis=0", kernels) and "argmax: scalar result" in text
    assert "an argmax of an array alone: numpy" in text


def test_an_empty_argmax_raises_as_numpy():
    jf = jit(lambda x: (x * 2).argmax(axis=1))
    with pytest.raises(ValueError, match="empty sequence"):
        jf(np.zeros((3, 0)))
    for _ in range(2):  # (traced, then the kernel)
        assert_like_numpy(jf(np.arange(6.0).reshape(2, 3)), np.array([2, 2]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int32, np.bool_])
def test_reductions_over_axes_of_several_runs_are_chained_kernels(dtype, backend):
    """A reduction over axes that are not one run (a 2x2 max pool through a
    reshape, x.sum(axis=(0, 2))) is one reduction per run, the last first
    (clustering/passes.py split_axes): kernels, where numpy's reduction was
    a step; numpy's dtypes, max/min exact, sums to a few ulp."""
    def f(x):
        n, c, h, w = x.shape
        r = x.reshape(n, c, h // 2, 2, w // 2, 2)
        out = [r.max(axis=(3, 5)), x.sum(axis=(0, 2)), x.min(axis=(1, 3), keepdims=True), np.any(x, axis=(0, 3))]
        if dtype != np.bool_:
            out += [r.mean(axis=(3, 5)), np.prod(x[:, :, :2] if dtype == np.int8 else x, axis=(1, 3))]
        return out
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(4)
    for shape in ((2, 3, 8, 10), (3, 5, 4, 6)):
        x = rng.random(shape) < 0.5 if dtype == np.bool_ else (rng.random(shape) * 4 + 0.5).astype(dtype)
        for _ in range(2):
            assert_like_numpy(jf(x), f(x), ulps=8)
    if backend == "llvm":
        text = jf.explain()
        assert "only reductions over the last axis" not in text and not re.search(
            r"numpy: %\d+: \S+ = (sum|max|min|prod) ", text.split("clusters (after passes):")[-1])

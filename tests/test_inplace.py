"""In-place numpy, functionalized: slice, mask and index assignments,
augmented operators and out= make new SSA values; writes into arguments
reach the caller's arrays exactly as numpy's would; aliasing arguments run
that call eagerly.  Gathers (integer-array indexing, take_along_axis) follow
numpy's shapes, bounds and negative indices.  Each case runs on several
shapes of one signature, so the compiled entry (not only the traced first
call) is checked, on both back ends."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy

SIZES = [5, 9, 13]


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def check(fn, make, backend, sizes=SIZES, compiled=True, atol=0.0):
    """fn(*make(n)) under jit equals numpy for each n: results, and every
    argument's contents afterwards (to `atol` where a sum cancels).
    `compiled`: one trace, no fallback, no eager node."""
    jf = jit(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in sizes:
            args = make(n)
            want_args, got_args = _copy(args), _copy(args)
            want = fn(*want_args)
            got = jf(*got_args)
            assert_like_numpy(got, want, atol=atol)
            for g, w in zip(got_args, want_args):
                assert_like_numpy(g, w, atol=atol)
    s = jf.stats()
    if compiled:
        assert s["traces"] == 1 and s["fallbacks"] == 0 and s["eager_calls"] == 0, s
        assert s["eager_nodes"] == 0, jf.explain()
    return jf


def vec(dtype=np.float64, lo=-4.0, hi=5.0):
    return lambda n: [np.linspace(lo, hi, n).astype(dtype)]


# ------------------------------------------------------------ assignments

def test_slice_assignment_writes_the_argument(backend):
    def f(a, b):
        a[1:-1] = 0.5 * (b[:-2] + b[2:])
        return a.sum()
    check(f, lambda n: [np.arange(n, dtype=np.float64), np.linspace(0, 1, n)], backend)


def test_a_written_argument_returned_is_the_callers_array(backend):
    """`x += 1; return x` returns x itself, as numpy's (was a new array
    equal to it: a caller writing into the result missed x), on the first
    call too; a written held array likewise."""
    held = np.zeros(4)

    def f(x, y):
        x += 1
        y[1:] *= 2
        held[:] = x.sum()
        return x, y, x * 2, held

    jf = jit(f, backend=backend)
    for n in (5, 6, 9):
        x, y = np.arange(float(n)), np.ones(n)
        got = jf(x, y)
        assert got[0] is x and got[1] is y and got[3] is held
        assert_like_numpy(got, f(np.arange(float(n)), np.ones(n)))
    assert jf.stats()["compiles"] == 1


def test_a_view_of_a_written_argument_returned_views_the_callers_array(backend):
    """`x += 1; return x[1:]` returns a view of x, as numpy's (was a new
    array: a caller writing into the result missed x), on the first call
    and on compiled ones, through slices, transposes and reshapes."""
    def f(x):
        x += 1
        return x[1:], x.T[0], x.reshape(-1)[::2], x * 2

    jf = jit(f, backend=backend)
    for shape in [(3, 4), (5, 2), (4, 4)]:
        x, want = np.ones(shape), np.ones(shape)
        got, ref = jf(x), f(want)
        assert_like_numpy(got, ref)
        for view in got[:3]:
            assert np.shares_memory(view, x)
        assert not np.shares_memory(got[3], x)
        got[0][0, 0] = 7
        ref[0][0, 0] = 7
        np.testing.assert_array_equal(x, want)
    assert jf.stats()["traces"] == 1


def test_out_colon_assignment_and_return_none(backend):
    def f(x, out):
        out[:] = np.tanh(x) * 2
    check(f, lambda n: [np.linspace(-1, 1, n).astype(np.float32), np.zeros(n, np.float32)], backend)


def test_2d_stencil_in_a_loop(backend):
    def jacobi(A, B, steps):
        for _ in range(steps):
            B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
            A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])
    rng = np.random.default_rng(0)
    check(jacobi, lambda n: [rng.random((n, n)), rng.random((n, n)), 3], backend, sizes=[5, 8, 11])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_augmented_operators(backend, dtype):
    def f(x, y):
        x += y
        x *= 3
        x -= y
        y //= 2
        x %= 7
        return x + y
    check(f, lambda n: [np.arange(n, dtype=dtype) - 2, np.arange(n, dtype=dtype)[::-1] + 1], backend)


def test_augmented_slice_updates_in_a_loop_compute_into_the_slot(backend):
    """`C[i, :i + 1] *= beta` and `+= expr` on small static slices stay numpy
    steps; each runs as numpy's own augmented assignment, into the view, also
    where the other operand overlaps the slot; the results are numpy's."""
    def syrk_like(C, A, beta, alpha):
        for i in range(A.shape[0]):
            C[i, :i + 1] *= beta
            C[i, :i + 1] += alpha * (A[:i + 1] @ A[i])
            C[i, 1:] = C[i, 1:] - C[i, :-1]   # (overlapping operand)
            C[i, :2] = 0.5 * C[i, :2]         # (the slot is the second operand)
        return C.sum()

    rng = np.random.default_rng(0)
    jf = check(syrk_like, lambda n: [rng.random((n, n + 2)), rng.random((n, 3)), 0.5, 2.0], backend,
               sizes=[5, 5, 5])
    source = next(iter(jf._keys.values())).entries[0].executable.source
    assert source.count(", out=v") >= 2 * 5  # (at least the last two updates of each turn)


def test_a_kernel_updating_a_row_writes_into_it(backend):
    """`B[i] += y` as a kernel (the row's width is symbolic) reads each
    element where it writes it, so it stores straight into the row; a kernel
    reading another view of the row (`A[i, 1:-1] += A[i, 2:] + ...`) must
    not, or it would read what it wrote."""
    def trmm_like(A, B, A2):
        for i in range(3):
            B[i, :] += A[i + 1:, i] @ B[i + 1:, :]
            A2[i, 1:-1] += A2[i, 2:] + A2[i, :-2]
        B *= 0.5

    rng = np.random.default_rng(1)
    jf = check(trmm_like, lambda n: [rng.random((5, 5)), rng.random((5, n)), rng.random((4, n))], backend,
               sizes=[6, 9, 13])
    if backend == "llvm":
        source = next(iter(jf._keys.values())).entries[0].executable.source
        assert source.count(" is not _t") == 3  # (B's rows: not A2's)


def test_a_kernel_making_an_arguments_new_value_writes_straight_into_it(backend):
    """NPBench's gemm, `C *= beta; C += alpha * A @ B`: the epilogue kernel
    makes C's new value and reads C only where it writes it, so it stores
    into C itself, no new array copied in at the end.  Not so for a kernel
    that reads C elsewhere (`C[:] = C[::-1] * 2`), whose value the function
    also returns as an array of its own, or for a C-ordered kernel into a
    Fortran-ordered C."""
    import re

    def gemm(alpha, beta, C, A, B):
        C *= beta
        C += alpha * A @ B

    def flipped(C, x):
        C[:] = C[::-1] * 2.0 + x

    def returned(C, x):
        y = C * 2.0 + x
        C[:] = y
        return y

    rng = np.random.default_rng(4)
    into = re.compile(r"^ +_t\d+ = v\d+$", re.M)  # (a slot would be v<id>[...])

    def writes_into(jf):
        return bool(into.search(next(iter(jf._keys.values())).entries[0].executable.source))
    jf = check(gemm, lambda n: [1.5, 1.2, rng.random((n, n + 1)), rng.random((n, 7)), rng.random((7, n + 1))],
               backend)
    assert writes_into(jf) == (backend == "llvm")
    for fn in (flipped, returned):
        jf = check(fn, lambda n: [rng.random((n, 3)), rng.random(3)], backend)
        assert not writes_into(jf), fn.__name__
    C = rng.random((6, 3))
    assert jf(C, np.ones(3)) is not C
    check(gemm, lambda n: [1.5, 1.2, np.asfortranarray(rng.random((n, n + 1))), rng.random((n, 7)),
                           rng.random((7, n + 1))], backend, compiled=False)


def test_a_product_into_its_own_operand_reads_it_before_writing():
    """`Y[:40] = Y[:40] @ W` on the GEMM kernel: C's row i needs all of A's
    row i, so the product must not store into the slot it reads."""
    def f(x, w):
        y = x * 2.0
        y[:40] = y[:40] @ w
        return y

    rng = np.random.default_rng(3)
    jf = jit(f)
    for n in (48, 64, 80):
        x, w = rng.standard_normal((60, n)), rng.standard_normal((n, n))
        for _ in range(2):  # (the first call's result comes from the trace)
            np.testing.assert_allclose(jf(x, w), f(x, w), rtol=1e-12, atol=1e-12)


def test_augmented_operator_casting_error_is_numpys(backend):
    def f(x):
        x += 1.5
        return x
    jf = jit(f, backend=backend)
    for _ in range(2):
        x = np.arange(4)
        with pytest.raises(TypeError) as e:
            jf(x)
        assert "same_kind" in str(e.value)
        assert np.array_equal(x, np.arange(4))  # nothing written
    assert jf(np.arange(4.0)).tolist() == [1.5, 2.5, 3.5, 4.5]  # still usable


def test_ufunc_out_argument(backend):
    def f(x, y):
        np.add(x, y, out=y)
        np.exp(y, out=y)
        np.multiply(x, 2.0, out=x)
        return y
    check(f, lambda n: [np.linspace(0, 1, n), np.ones(n)], backend)


OUT_FUNCTIONS = {
    "cumsum": lambda x, o: np.cumsum(x, axis=1, out=o),
    "clip": lambda x, o: np.clip(x, -0.5, 0.5, out=o),
    "dot": lambda x, o: np.dot(x, x, out=o),
    "sum": lambda x, o: np.sum(np.stack([x, x]), axis=0, out=o),
    "mean method": lambda x, o: np.stack([x, x * 2]).mean(axis=0, out=o),
    "round": lambda x, o: np.round(x, 1, out=o),
    "take": lambda x, o: np.take(x, x.shape[0] - 1 - np.arange(x.size).reshape(x.shape), out=o),
    "concatenate": lambda x, o: np.concatenate([x[:1], x[1:]], axis=0, out=o),
    "einsum": lambda x, o: np.einsum("ij,jk->ik", x, x, out=o),
    "add.reduce": lambda x, o: np.add.reduce(np.stack([x, x]), axis=0, out=o),
    "maximum.accumulate": lambda x, o: np.maximum.accumulate(x, axis=1, out=o),
    "multiply where": lambda x, o: np.multiply(x, 2, out=o, where=x > 0),
    "copyto": lambda x, o: np.copyto(o, x * 3),
    "copyto where": lambda x, o: np.copyto(o, x * 3, where=x < 0),
}


@pytest.mark.parametrize("name", sorted(OUT_FUNCTIONS))
def test_out_of_numpy_functions_writes_the_array(name, backend):
    """out= of numpy functions that are not ufuncs (and of ufunc methods, and
    with where=), into an argument and into a local buffer: the array takes
    the result on every call, compiled ones included (before: a compiled call
    left it as it was)."""
    op = OUT_FUNCTIONS[name]

    def into_argument(x, o):
        op(x, o)
        return o * 1.0

    def into_local(x):
        buf = np.full(x.shape, 9.0)
        op(x, buf)
        return buf + 0.0
    make = lambda n: [np.linspace(-1, 1, n * n).reshape(n, n), np.full((n, n), 9.0)]  # noqa: E731
    # a product's entries cancel (terms up to 1, sums near 0): a GEMM kernel
    # that adds in another order than the host's BLAS is off by a few ulp of
    # the terms, not of the sum
    atol = 8 * max(SIZES) * np.finfo(np.float64).eps if name in ("dot", "einsum") else 0.0
    check(into_argument, make, backend, atol=atol)
    check(into_local, lambda n: make(n)[:1], backend, atol=atol)


def test_functions_that_write_their_operand_compile(backend):
    """np.add.at (unbuffered: repeated indices add each time), np.copyto and
    ndarray.fill write the traced array; np.put, still run by numpy, writes
    the caller's array once on the first call too (the trace runs numpy's
    functions on copies)."""
    def scatter(sums, labels, x):
        np.add.at(sums, labels, x)
        np.maximum.at(sums, (labels, 0), 0.25)
        return sums.sum()

    def filled(a, b):
        a.fill(2.5)
        b.fill(-7.9)  # (cast to b's int dtype, as numpy casts it)
        return a + b
    check(scatter, lambda n: [np.zeros((3, 2)), np.arange(n) % 3, np.linspace(0, 1, 2 * n).reshape(n, 2)],
          backend)
    check(filled, lambda n: [np.zeros(n), np.ones(n, np.int32)], backend)

    def put(x):
        np.put(x, [0, 1], x[:2] + 1)
        return x
    jf = jit(put, backend=backend)
    for n in (4, 4, 6):
        got, want = np.arange(n, dtype=float), np.arange(n, dtype=float)
        jf(got)
        put(want)
        np.testing.assert_array_equal(got, want)


def test_numpy_functions_that_write_their_operand_are_numpy_steps(backend):
    """np.fill_diagonal, np.put, np.putmask, np.place, np.put_along_axis,
    ndarray.put, ndarray.partition (and np.partition) ran the whole function
    eagerly ("returned a NoneType, not an array"); each is now a numpy step
    the operand then is, arguments written back, one compile."""
    def f(a, b, idx):
        inv3 = (a[:, None] - a[None, :]) ** 2 + 1.0
        np.fill_diagonal(inv3, 0.0)
        c = b.copy()
        np.put(c, [0, 2], [-1.0, -2.0])
        np.putmask(c, c > 0.5, 0.5)
        d = b.copy()
        np.place(d, d < 0.3, [7.0, 8.0])
        e = b.copy()
        e.partition(2)
        p = np.partition(b, (1, 3))
        g = np.zeros((3, a.shape[0]))
        np.put_along_axis(g, idx, 1.0, axis=1)
        b.put([1], [9.0])
        return inv3.sum(1), c, d, e[:3].sum(), p[1], p[3], g
    rng = np.random.default_rng(0)
    check(f, lambda n: [rng.random(n), rng.random(n), rng.integers(0, n, (3, 2))], backend)

    def bad_put(x, i):
        np.put(x, i, 1.0)
        return x * 2
    jf = jit(bad_put, backend=backend)
    for n in (5, 7):
        jf(np.zeros(n), np.array([0, 1]))
    with pytest.raises(IndexError):
        bad_put(np.zeros(7), np.array([0, 9]))
    with pytest.raises(IndexError):
        jf(np.zeros(7), np.array([0, 9]))
    assert_like_numpy(jf(np.zeros(8), np.array([7])), bad_put(np.zeros(8), np.array([7])))


def test_numpy_functions_returning_named_tuples_are_eager_nodes(backend):
    """np.linalg.qr, eigh, svd, slogdet return named tuples (QRResult...):
    eager nodes whose results the rest of the function reads (the whole
    function ran eagerly), unpacked or by field."""
    def f(a, b):
        q, r = np.linalg.qr(a)
        res = np.linalg.qr(a)
        w, _ = np.linalg.eigh(a.T @ a)
        s = np.linalg.svd(a, full_matrices=False).S
        sign, logdet = np.linalg.slogdet(a.T @ a + np.eye(a.shape[1]))
        return np.abs(r).sum(), res.Q @ res.R - a, w, s, sign * logdet, (q @ b).sum()
    jf = jit(f, backend=backend)
    for n in (6, 9, 12):
        a, b = np.random.default_rng(n).random((n, 4)), np.ones(4)
        jf(a, b)
        assert_like_numpy(jf(a, b), f(a, b), ulps=64, atol=1e-12)
    s = jf.stats()
    assert s["compiles"] == 1 and s["fallbacks"] == 0 and s["eager_calls"] == 0, jf.explain()


def test_writes_through_views(backend):
    def f(a):
        v = a[::2]
        t = a.T
        r = a.reshape(-1)
        v[...] = 3
        t[0] += 1
        r[-1] = -5
        return a * 2, v.sum(), t
    check(f, lambda n: [np.arange(n * 3, dtype=np.float32).reshape(n, 3)], backend)


def test_a_view_taken_before_a_write_sees_it(backend):
    def f(x):
        row = x[0]
        x[0, 1:] = 0
        x *= 2
        return row + 1
    check(f, lambda n: [np.arange(n * 4, dtype=np.float64).reshape(n, 4)], backend)


def test_a_copy_taken_before_a_write_does_not(backend):
    def f(x):
        old = x.copy()
        y = x * 1
        x[1:] = -1
        return old, y, x
    check(f, vec(), backend)


def test_inputs_numpy_would_not_write_are_not_written(backend):
    def f(x, y):
        z = x * 2
        z[0] = 100
        w = y.copy()
        w += 1
        return z + w
    x, y = np.arange(5.0), np.arange(5.0)
    jf = jit(f, backend=backend)
    for _ in range(2):
        jf(x, y)
    assert np.array_equal(x, np.arange(5.0)) and np.array_equal(y, np.arange(5.0))


def test_read_only_argument_raises_numpys_error(backend):
    def f(x):
        x[0] = 1
        return x
    jf = jit(f, backend=backend)
    for n in (4, 6):
        a = np.zeros(n)
        a.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            jf(a)
    assert jf(np.zeros(3)).tolist() == [1, 0, 0]


def test_writing_a_broadcast_view_raises(backend):
    def f(x):
        b = np.broadcast_to(x, (3, x.shape[0]))
        b[0, 0] = 1
        return b
    with pytest.raises(ValueError, match="read-only"):
        jit(f, backend=backend)(np.zeros(4))


# ------------------------------------------------------------------ masks

def test_mask_assignment_of_a_scalar(backend):
    def f(x):
        x[x > 3] = 3
        x[x < -1] = np.float32(-1)
        return x
    check(f, vec(np.float32), backend)


def test_mask_update_of_a_function_of_the_masked_values(backend):
    # x[m] op= s and x[m] = f(x[m]) are where(m, f(x), x): no data-dependent count
    def f(x, y):
        x[x < 0] *= 0.5
        p = y > 0
        y[p] = y[p] ** 0.5 + x.max()
        return x, y
    check(f, lambda n: [np.linspace(-4, 5, n), np.linspace(-3, 2, n)], backend)


def test_masked_sum_and_mean_compile(backend):
    # x[m].sum() / x[m].mean(): sum(where(m, x, 0)) over m's count (a few ulp from numpy's order)
    def f(data, radius):
        rmax = radius.max()
        res = np.zeros(4)
        for i in range(4):
            ring = (rmax * i / 4 <= radius) & (radius < rmax * (i + 1) / 4)
            res[i] = data[ring].mean()
        return res, data[data > 0.5].sum(), data[data > 9].mean()   # (an empty mean is nan)
    rng = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(f, lambda n: [rng.random(n), rng.random(n)], backend, sizes=[40, 50, 70])


def test_a_mask_followed_by_ints_and_slices_compiles(backend):
    """`pos[hit, 1] = -pos[hit, 1]` (particles bouncing off the floor) and
    the reads and scalar stores of `x[m, 1:3]`, `x[m, :, 0]`: numpy's
    `x[:, 1][m]`, the mask's dims first either way, a read and an update
    through the mask of that view (every call ran in numpy: "an assignment
    through a boolean mask mixed with other indices", probe 17)."""
    def bounce(pos, vel):
        for _ in range(3):
            pos = pos + vel * 0.1
            hit = pos[:, 1] < 0
            pos[hit, 1] = -pos[hit, 1]
            vel[hit, 1] = -0.9 * vel[hit, 1]
        return pos, vel

    def mixed(x, y):
        m = x[:, 0, 0] > 0
        x[m, 1:3] = 2.5
        x[m, :, 0] *= 2
        y[m, -1] = y[m, 0] + 1
        return x[m, 1, 1:].sum(), x, y
    rng = np.random.default_rng(9)
    check(bounce, lambda n: [rng.standard_normal((n, 2)), rng.standard_normal((n, 2))], backend)
    # (the masked reads of a sum and of another view run as numpy steps: a data-dependent count)
    jf = check(mixed, lambda n: [rng.standard_normal((n, 3, 2)), rng.standard_normal((n, 4))], backend, atol=1e-12,
               compiled=False)
    assert jf.stats()["traces"] == 1 and jf.stats()["eager_calls"] == 0, jf.explain()


def test_a_mask_of_rows_assigned_a_number(backend):
    """`x[x[:, 0] > 0] = 2.5` of a 2-D x: the mask picks whole rows, the
    number broadcast along the dims after the mask's (tracing failed,
    "operands could not be broadcast", and the signature ran in numpy)."""
    def f(x, t):
        x[x[:, 0] > 0] = 2.5
        t[t.sum(axis=(1, 2)) > 0] = -1
        return x, t
    rng = np.random.default_rng(10)
    check(f, lambda n: [rng.standard_normal((n, 3)), rng.standard_normal((n, 2, 3)).astype(np.float32)], backend)


def test_mask_update_with_other_values_is_a_numpy_step(backend):
    def f(x, v):
        x[x > 0] = v[: int((x > 0).sum())]
        return x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        jf = jit(f, backend=backend)
        for n in (5, 9):
            x, v = np.linspace(-4, 5, n), np.arange(n, dtype=np.float64)
            want = f(x.copy(), v)
            assert_like_numpy(jf(x, v), want)


# --------------------------------------------------------------- scatters

def test_index_assignment_last_write_wins(backend):
    def f(x, idx, v):
        x[idx] = v
        return x.sum()
    check(f, lambda n: [np.zeros(n), np.array([0, 1, 1, -1]), np.array([1.0, 2.0, 3.0, 4.0])], backend)


# ------------------------------------------------------------------ aliasing

def test_the_same_array_passed_twice(backend):
    def f(a, b):
        a += 1
        return b * 2
    jf = jit(f, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for n in (5, 7, 9):
            x = np.arange(n, dtype=np.float64)
            w = x.copy()
            want = f(w, w)
            got = jf(x, x)
            assert_like_numpy(got, want)
            assert_like_numpy(x, w)
            # not aliased: the compiled entry
            p, q = np.arange(n, dtype=np.float64), np.ones(n)
            assert_like_numpy(jf(p, q), q * 2)
            assert_like_numpy(p, np.arange(n) + 1.0)
    assert jf.metrics.fallbacks["aliased_arguments"] == 3
    assert jf.stats()["traces"] == 1


def test_a_view_of_one_argument_passed_as_another(backend):
    def f(a, b):
        a[:] = 0
        return b.sum()
    jf = jit(f, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for n in (6, 8):
            x = np.arange(n, dtype=np.float64)
            w = x.copy()
            want = f(w, w[2:])
            got = jf(x, x[2:])
            assert_like_numpy(got, want)
            assert_like_numpy(x, w)
    assert jf.metrics.fallbacks["aliased_arguments"] == 2


# ------------------------------------------------------------------ gathers

@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_embedding_gather(backend, dtype):
    def f(table, ids):
        return table[ids] * 1, table[ids[::-1], 1:3], table[2]
    rng = np.random.default_rng(1)
    check(f, lambda n: [(rng.random((n + 3, 4)) * 10).astype(dtype), rng.integers(-n - 3, n + 3, size=n)],
          backend)


def test_gather_with_two_index_arrays(backend):
    def f(x, labels):
        return x[np.arange(x.shape[0]), labels], x[:, labels], x[labels[:, None] % x.shape[0], labels[None, :2]]
    rng = np.random.default_rng(2)
    check(f, lambda n: [rng.random((n, 6)), rng.integers(0, 6, n)], backend)


def test_gather_out_of_range_raises_index_error(backend):
    def f(table, ids):
        return table[ids]
    jf = jit(f, backend=backend)
    t = np.arange(12.0).reshape(4, 3)
    assert_like_numpy(jf(t, np.array([0, -4, 3])), t[[0, -4, 3]])
    for bad in ([0, 4], [-5, 1]):
        with pytest.raises(IndexError):
            jf(t, np.array(bad))
    assert_like_numpy(jf(t, np.array([1, 2])), t[[1, 2]])  # still usable
    assert jf.stats()["traces"] == 1


def test_take_along_axis_and_argmax(backend):
    def f(x):
        i = np.argmax(x, axis=1)
        return np.take_along_axis(x, i[:, None], axis=1), np.take(x, i, axis=1)
    rng = np.random.default_rng(3)
    check(f, lambda n: [rng.random((n, 5))], backend)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_mask_store_into_an_integer_array_compiles(backend, dtype):
    def f(x):
        n = np.zeros(x.shape, dtype=dtype)
        n[x > 0.5] = 1
        return n
    check(f, lambda k: [np.linspace(0, 1, k)], backend)


def test_a_row_swap_through_a_list_holding_a_traced_index(backend):
    """`A[[i, p]] = A[[p, i]]` with p traced (a pivot's argmax): the list
    is a traced index array (it sent the whole signature to numpy:
    "conversion to a numpy array of a traced array")."""
    def pivot(A, b):
        A, b = A.copy(), b.copy()
        p = 1 + int(0) + np.argmax(np.abs(A[1:, 0]))
        A[[0, p]] = A[[p, 0]]
        b[[0, p]] = b[[p, 0]]
        return A, b, A[[p, 0, p]]
    check(pivot, lambda n: [np.arange(n * n, dtype=np.float64).reshape(n, n) % 7, np.arange(n, dtype=np.float64)],
          backend)


def test_a_write_into_an_argument_after_the_last_check_is_in_place(backend):
    """A write into an argument goes straight into the caller's array when
    no check after it can stop the call (a graph break's outcome, a traced
    index's bound): Viterbi's `back[t] = ...` in a scan's body copied all of
    back every trip.  A write before such a check still goes into a copy:
    a call the check stops runs again (another entry, numpy) on the
    arguments as they were, so `x += 1` is never applied twice."""
    def decide_then_add(x, v):
        i = np.argmax(v)  # (a traced index: its bound checked when it is known)
        x[i] += 1.0
        return x.sum()

    def add_then_decide(x, v):
        x[0] += 1.0
        return x * 2.0 if x[0].sum() > v.sum() else x * 3.0  # (a graph break on what the write made)

    rng = np.random.default_rng(7)
    for fn in (decide_then_add, add_then_decide):
        jf = jit(fn, backend=backend)
        for k in range(8):
            x, v = rng.standard_normal((5, 3)), rng.standard_normal(5) * 2
            mine = x.copy()
            assert_like_numpy(jf(mine, v), fn(x, v), ulps=16)  # (a sum: another order)
            np.testing.assert_array_equal(mine, x)
        assert jf.stats()["traces"] == (1 if fn is decide_then_add else 2), fn.__name__
        if backend == "llvm":  # (the reference back end copies the view's own update: x[i] += 1 as ops)
            sources = [e.executable.source for st in jf._keys.values() for e in st.entries]
            assert all(("_copy(" in s) == (fn is add_then_decide) for s in sources), (fn.__name__, sources)


def _scores_grad(X):
    d = np.exp(X)
    d /= X.shape[0]  # (cs231n's `dscores /= N`)
    d *= X.shape[1]
    d -= 2 * X.shape[0]
    X /= X.shape[0]
    return d


def test_an_in_place_operator_by_a_dim_compiles(backend):
    """`d /= X.shape[0]`: numpy's dry run of the write took the dim itself,
    an array op of the trace whose out= was numpy's array (every call ran in
    numpy); it takes the dim's value."""
    jf = jit(_scores_grad, backend=backend)
    rng = np.random.default_rng(7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for shape in ((6, 3), (9, 5), (4, 12)):
            for dtype in (np.float64, np.float32):
                X = rng.standard_normal(shape).astype(dtype)
                mine = X.copy()
                # (d - 2N cancels: a few ulp of 2N)
                assert_like_numpy(jf(mine), _scores_grad(X), atol=8 * np.finfo(dtype).eps * shape[0])
                np.testing.assert_array_equal(mine, X)  # (both divided in place)
    assert jf.stats()["fallbacks"] == 0 and jf.stats()["traces"] == 2  # (one per dtype)


def _scale_then_gather(a, idx):
    a *= 2
    return a[idx]


def _shift_then_solve(b, A):
    b += 1
    return np.linalg.solve(A, b)


def test_a_write_into_an_argument_before_a_step_that_raises_is_made_once(backend):
    """A compiled call whose gather (an index out of bounds) or solve (a
    singular matrix) raises after it wrote into an argument runs in numpy on
    the arguments as they were: the write was made twice (a was 4x, not 2x)."""
    f, g = jit(_scale_then_gather, backend=backend), jit(_shift_then_solve, backend=backend)
    assert_like_numpy(f(np.arange(4.0), np.array([0, 1])), np.array([0.0, 2.0]))
    assert_like_numpy(g(np.zeros(3), np.eye(3)), np.ones(3))
    for fn, jfn, make, bad, error in ((_scale_then_gather, f, lambda: np.arange(4.0), np.array([1, 9]), IndexError),
                                      (_shift_then_solve, g, lambda: np.zeros(3), np.ones((3, 3)),
                                       np.linalg.LinAlgError)):
        a, b = make(), make()
        with pytest.raises(error):
            fn(a, bad)
        with pytest.raises(error):
            jfn(b, bad)
        assert_like_numpy(b, a)
    a = np.arange(4.0)
    assert_like_numpy(f(a, np.array([3, 0])), np.array([6.0, 0.0]))
    assert_like_numpy(a, np.arange(4.0) * 2)


class _Rows:
    def __init__(self, n):
        self.acc = np.zeros((n, 512))

    def bump(self, slot):
        self.acc[slot] += 1.0
        return self.acc[slot].sum()


def test_threads_writing_their_own_rows_lose_no_write_while_the_function_traces(monkeypatch):
    """Threads updating disjoint rows of one array through a fresh jit: the
    call that traces writes back only the elements its writes changed (it
    copied the whole array back, over rows other threads had written
    meanwhile: about 40 of 2000 updates were lost)."""
    import threading
    monkeypatch.setenv("SHAPEJIT_TRACE_CACHE", "0")
    lost = 0
    for _ in range(25):
        h, f = _Rows(4), jit(_Rows.bump)
        bar = threading.Barrier(4)

        def worker(slot):
            bar.wait()
            for _ in range(5):
                f(h, slot)
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        lost += int(20 - h.acc[:, 0].sum())
    assert lost == 0


def stores_and_returns(x, out):
    h = np.tanh(x) * 2
    out[0] = h
    return h


def test_a_value_stored_into_an_argument_and_returned_is_an_array_of_its_own(backend):
    """`out[0] = h; return h`: numpy's h is an array of its own; the kernel
    wrote h straight into out's row and returned that view, so the caller's
    next write into out changed h (and a scan whose body does so, a GRU's
    `hs[t] = h`, ran every trip in numpy: its carried h viewed hs)."""
    jf = jit(stores_and_returns, backend=backend)
    for n in (3, 4, 5, 7):
        x, out = np.linspace(-1, 1, n), np.zeros((2, n))
        want_out = out.copy()
        want = stores_and_returns(x, want_out)
        h = jf(x, out)
        assert_like_numpy(h, want)
        assert_like_numpy(out, want_out)
        assert not np.shares_memory(h, out)
        out[0] = 7.0
        assert_like_numpy(h, want)


def _updated_copies(A, v, idx, rows):
    B = A.copy()
    np.fill_diagonal(B, v)
    C = A * 2.0
    np.put(C, idx, -1.0)
    D = A + 1.0
    before = D.sum()
    np.put_along_axis(D, rows, 0.0, axis=1)
    return B, C, D, before


def test_numpys_updates_of_an_array_the_call_made_write_into_it(backend):
    """np.fill_diagonal, np.put and np.put_along_axis of an array the call
    made (and nothing reads after) update it where it is: a copy of it
    first made fill_diagonal on a copy 0.34x numpy at 1000 x 1000 (probe
    22); an array read again after the update (D's sum before it) keeps
    its value, and the argument is left as it was."""
    f = jit(_updated_copies, backend=backend)
    rng = np.random.default_rng(0)
    for n in (5, 9, 6):
        A, idx, rows = rng.standard_normal((n, n)), rng.integers(0, n, 3), rng.integers(0, n, (n, 2))
        mine = A.copy()
        assert_like_numpy(f(mine, 0.5, idx, rows), _updated_copies(A, 0.5, idx, rows))
        np.testing.assert_array_equal(mine, A)
    assert f.stats()["eager_calls"] == 0
    (e,) = [e for state in f._keys.values() for e in state.entries]
    source = e.executable.source
    assert "_numpy_update" not in source and source.count("); v") == 3, source  # (each into its array)

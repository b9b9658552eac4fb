"""Strided and reversed slices, and reshapes that split or merge symbolic
dims, compile: rotary embeddings (x[..., ::2], x[..., 1::2]), gate slices of
a fused projection (gx[:, H:2 * H]), negative steps, reshape(..., -1, 2)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy


def check(fn, make, backend, sizes=(4, 6, 10), traces=1):
    jf = jit(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in sizes:
            args = make(n)
            assert_like_numpy(jf(*args), fn(*args))
    s = jf.stats()
    assert s["traces"] == traces and s["fallbacks"] == 0 and s["eager_nodes"] == 0, jf.explain()


rng = np.random.default_rng(5)


def rope_in_place(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., ::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out


def rope_stacked(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return np.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).reshape(x.shape)


def _rope_args(n):
    return [rng.random((n, 3, 8)), rng.random((n, 1, 4)), rng.random((n, 1, 4))]


def test_rotary_embedding_in_place(backend):
    check(rope_in_place, _rope_args, backend)


def test_rotary_embedding_stacked(backend):
    check(rope_stacked, _rope_args, backend)


def test_rotary_over_a_symbolic_head_dim(backend):
    # the last dim is symbolic: x[..., ::2] and x[..., 1::2] have lengths
    # floor((d + 1) / 2) and floor(d / 2), equal under a guard (d even)
    check(rope_stacked, lambda n: [rng.random((3, 2, 2 * n)), rng.random((3, 1, n)), rng.random((3, 1, n))],
          backend)


def test_gate_slices_of_a_fused_projection(backend):
    def gates(gx, h):
        H = h.shape[-1]
        i, f, g = gx[:, :H], gx[:, H:2 * H], gx[:, 2 * H:]
        return 1 / (1 + np.exp(-i)) * np.tanh(g) + f * h
    check(gates, lambda n: [rng.random((5, 3 * n)), rng.random((5, n))], backend)


def test_negative_steps(backend):
    def f(x):
        return x[::-1] * 2 + x[::-2].sum(), x[:, ::-1][1:]
    check(f, lambda n: [rng.random((n, 3))], backend, sizes=(4, 6, 10))


def test_reshape_splits_and_merges_symbolic_dims(backend):
    def f(x):
        y = x.reshape(*x.shape[:-1], -1, 2)
        z = x.reshape(-1)
        return y[..., 0] * y[..., 1], z[1:] - z[:-1]
    check(f, lambda n: [rng.random((3, 2 * n))], backend)


from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402  (read as a global: keyed, no warning)


def conv2d_im2col(x, w, b):
    N, C, H, W = x.shape
    O, _, KH, KW = w.shape
    win = sliding_window_view(x, (KH, KW), axis=(2, 3))   # N, C, H', W', KH, KW
    col = win.transpose(0, 2, 3, 1, 4, 5).reshape(N, H - KH + 1, W - KW + 1, C * KH * KW)
    return np.maximum(col @ w.reshape(O, -1).T + b, 0).transpose(0, 3, 1, 2)


def test_sliding_window_view_is_a_view_of_traced_shape(backend):
    """sliding_window_view (imported from numpy.lib.stride_tricks, or as
    np.lib.stride_tricks.sliding_window_view) is a read-only view with its
    windows' shape, traced sizes included (was an eager node of
    data-dependent sizes, and a warning that a global could not be keyed):
    an im2col convolution compiles once; a write to the base shows through
    the view; writing the view raises numpy's error; a window past the axis
    raises numpy's ValueError."""
    rng = np.random.default_rng(0)
    check(conv2d_im2col, lambda n: [rng.standard_normal((2, 3, n + 3, n + 5)).astype(np.float32),
                                    rng.standard_normal((4, 3, 3, 2)).astype(np.float32),
                                    rng.standard_normal(4).astype(np.float32)], backend)

    def moving(x):
        y = x * 1.0
        v = sliding_window_view(y, 3)
        m = v.mean(-1)
        y[0] = 100.0
        return m, v.sum(-1), np.lib.stride_tricks.sliding_window_view(y, (2, 2), axis=(0, 0)) * 1.0
    check(moving, lambda n: [np.arange(float(n))], backend)

    def write_view(x):
        v = sliding_window_view(x, 2)
        v[0, 0] = 1.0
        return x
    jf = jit(write_view, backend=backend)
    for n in (4, 6):
        with pytest.raises(ValueError, match="read-only"):
            write_view(np.zeros(n))
        with pytest.raises(ValueError, match="read-only"):
            jf(np.zeros(n))
    jm = jit(moving, backend=backend)
    jm(np.zeros(5))
    with pytest.raises(ValueError, match="window shape cannot be larger"):
        jm(np.zeros(2))


def test_diagonal_trace_and_diag_of_a_matrix_are_views_kernels_read(backend):
    """np.diagonal / ndarray.diagonal / np.diag of a matrix are numpy's
    read-only views (a numpy step; kernels read them through their strides)
    and np.trace / ndarray.trace their sums: no eager node (np.diag and
    ndarray.diagonal were eager, of a data-dependent length), one compile
    for every square matrix (of 2 rows or more: below, the -2 diagonal is
    empty), the length decided (a guard) between sides."""
    def f(x, y):
        d = np.diagonal(x)
        return (d * 2, x.diagonal(1), x.diagonal(-2), np.trace(x), x.trace(offset=1),
                np.trace(y, axis1=1, axis2=2), y.diagonal(0, 0, 2).sum(), np.diag(x, -1),
                (x * x).diagonal().sum(), np.trace(x.astype(np.int32), dtype=np.float32))
    jf = jit(f, backend=backend)
    rng = np.random.default_rng(0)
    for n in (5, 6, 2, 9):
        x, y = rng.random((n, n)), rng.random((2, n, n))
        for _ in range(2):  # (traced, then compiled)
            assert_like_numpy(jf(x, y), f(x, y), ulps=4)
    assert jf.stats()["compiles"] == 1 and jf.stats()["eager_nodes"] == 0
    for n, m in ((3, 7), (7, 3), (1, 1)):  # (another side shorter, an empty diagonal: other entries)
        x, y = rng.random((n, m)), rng.random((2, n, m))
        assert_like_numpy(jf(x, y), f(x, y), ulps=4)

    def g(x):
        d = x.diagonal()
        d[0] = 1.0
        return d
    with pytest.raises(ValueError, match="read-only"):
        jit(g, backend=backend)(np.ones((3, 3)))


def _copies(a):
    """Each of numpy's calls that copies a non-C-contiguous array (and views
    a C-contiguous one) or never copies (copy=False), written into."""
    b = np.ascontiguousarray(a)
    b[0, 0] = 99
    c = np.asarray(a, order="C")
    c[0, 1] = 98
    d = a.astype(a.dtype, copy=False)
    d[1, 0] = 97
    e = np.array(a, copy=False)
    e[1, 1] = 96
    f = a.ravel()
    f[-1] = 95
    return a


def test_copy_or_view_follows_the_arrays_layout_as_numpys(backend):
    """np.ascontiguousarray, np.asarray(order="C") and ravel copy an array
    that is not C-contiguous (they were views of it: writes reached the
    caller's array); astype(copy=False) and np.array(copy=False) are the
    array itself (they were copies)."""
    f = jit(_copies, backend=backend)
    for make in (lambda: np.arange(12.0).reshape(2, 6)[:, ::2], lambda: np.asfortranarray(np.arange(6.0).reshape(2, 3)),
                 lambda: np.arange(6.0).reshape(2, 3), lambda: np.arange(20.0).reshape(4, 5)[::-1, 1:]):
        a, b = make(), make()
        _copies(a)
        f(b)
        assert_like_numpy(b, a)


def _flattened(x):
    y = x.flatten()
    y[0] = 99.0
    return y


def _ravel_k(x):
    y = np.ravel(x, order="K")
    y[1:] = 0.0
    return y


def _rotated(x):
    r = np.rot90(x)
    r[0, 0] = -1.0
    return x


def _split_then_write(x):
    y = x + 0
    np.hsplit(y, 2)[0][:] = 0
    return y


def test_writes_through_numpys_own_views_reach_their_arrays(backend):
    """flatten copies (it was a reshape: a view, writes reached x); a view
    numpy's call made (ravel(order="K"), np.rot90, np.hsplit: eager steps,
    whose results the trace took for new arrays) written into, or its base
    written, runs the function in numpy (writes through it were lost)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for fn in (_flattened, _ravel_k, _rotated, _split_then_write):
            f = jit(fn, backend=backend)
            for make in (lambda: np.arange(12.0).reshape(3, 4), lambda: np.asfortranarray(np.arange(12.0).reshape(3, 4)),
                         lambda: np.arange(16.0).reshape(4, 4)):
                a, b = make(), make()
                assert_like_numpy(f(b), fn(a))
                assert_like_numpy(b, a)


def _zero_ds(x, t):
    a = np.asarray(x.sum())
    b = np.array(x.max())
    c = np.asarray(x.mean(), dtype=np.float32)
    d = np.asarray(t)
    return a, b, c, d, a.ndim


def test_np_asarray_of_a_scalar_is_a_0d_array(backend):
    """np.asarray and np.array of numpy's scalar (a reduction) or of a
    Python float are 0-d arrays, as numpy's (they were the scalar)."""
    f = jit(_zero_ds, backend=backend)
    for n in (3, 4, 5):
        x = np.arange(float(n))
        got, want = f(x, n * 0.5), _zero_ds(x, n * 0.5)
        assert [type(v) for v in got] == [type(v) for v in want]
        for g, w in zip(got[:4], want[:4]):
            assert_like_numpy(g, w)


def _zero_d_updated(x):
    a = np.array(x.max())
    a += 1
    b = np.array(x.sum())
    np.add(b, 1, out=b)
    return a, b


def test_a_0d_array_updated_in_place_stays_a_0d_array(backend):
    """`a = np.array(x.max()); a += 1`: numpy's 0-d array, where the
    functionalized add of the compiled code gave numpy's scalar."""
    f = jit(_zero_d_updated, backend=backend)
    for n in (3, 4, 5, 2):
        x = np.arange(float(n))
        got, want = f(x), _zero_d_updated(x)
        assert [type(v) for v in got] == [np.ndarray] * 2
        for g, w in zip(got, want):
            assert_like_numpy(g, w)


def _reshapes_f(x):
    return x.reshape(-1, order="F"), np.array(x, ndmin=3), np.array(x.sum(), ndmin=1)


def test_a_reshape_in_fortran_order_and_np_array_ndmin_are_numpys(backend):
    """x.reshape(..., order="F") returned None (a form the op table does not
    model, handed back as the result); np.array(x, ndmin=...) ignored ndmin:
    both are numpy's calls now."""
    f = jit(_reshapes_f, backend=backend)
    for shape in ((2, 3), (3, 4), (4, 2)):
        x = np.arange(float(np.prod(shape))).reshape(shape)
        for g, w in zip(f(x), _reshapes_f(x)):
            assert_like_numpy(g, w)


def _zero_d_views(x):
    v = x[0, ...]
    v += 100
    w = x[-1, ...]
    w[...] = -1
    return x, x[1, ...]


def test_an_element_indexed_with_an_ellipsis_is_numpys_0d_view(backend):
    """x[0, ...] is numpy's 0-d view of the element (it was the scalar: a
    write through it was lost, and a read gave numpy's scalar)."""
    f = jit(_zero_d_views, backend=backend)
    for shape in ((3,), (4,), (5, 2)):
        a = np.arange(float(np.prod(shape))).reshape(shape)
        b = a.copy()
        got, want = f(b), _zero_d_views(a)
        assert_like_numpy(b, a)
        assert type(got[1]) is type(want[1]) is np.ndarray
        assert_like_numpy(got[1], want[1])


def two_copies(x):
    return x.copy(), x.copy(), x + 1, x + 1, x.reshape(-1), x.reshape(-1)


def stack_and_list(xs, w, h):
    out = []
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] + h @ w)
        out.append(h)
    return np.stack(out), out, out[0]


def test_arrays_made_apart_are_returned_apart(backend):
    """`return x.copy(), x.copy()` and `x + 1` twice: numpy's arrays of
    their own, which common subexpressions merged into one (a write into one
    seen in the other); two reshapes of x stay views of x.  And np.stack of
    the list a scan appended to is a new array: it was the list's own rows,
    so `return np.stack(out), out` shared memory (probe 19)."""
    f = jit(two_copies, backend=backend)
    for n in (2, 3, 4, 6):
        x = np.arange(2.0 * n).reshape(2, n)
        got = f(x)
        assert_like_numpy(list(got), list(two_copies(x)))
        for i in range(4):
            assert not any(np.shares_memory(got[i], got[j]) for j in range(len(got)) if j != i)
            assert not np.shares_memory(got[i], x)
        assert np.shares_memory(got[4], x) and np.shares_memory(got[5], x)
    g = jit(stack_and_list, backend=backend)
    rng = np.random.default_rng(8)
    w, h = rng.standard_normal((3, 3)), rng.standard_normal(3)
    for T in (2, 3, 4, 5, 6, 7):
        xs = rng.standard_normal((T, 3))
        S, rows, first = g(xs, w, h)
        want = stack_and_list(xs, w, h)
        assert_like_numpy(S, want[0], ulps=16)
        assert not any(np.shares_memory(S, r) for r in rows) and not np.shares_memory(S, first)
        S[...] = 7.0
        assert_like_numpy(rows[0], want[1][0], ulps=16)
        assert_like_numpy(first, want[2], ulps=16)


def full_slices(x):
    return x[:], x[...], x[:, :]


def test_a_full_slice_is_a_new_view_not_the_argument_itself(backend):
    """x[:], x[...] and x[:, :] are new views of x in numpy: they were x
    itself, so the caller setting the result's shape (or flags) set x's
    (probe 19)."""
    f = jit(full_slices, backend=backend)
    for n in (0, 1, 2, 3, 5):
        x = np.zeros((n, 2))
        got = f(x)
        assert_like_numpy(list(got), list(full_slices(x)))
        for r in got:
            assert r is not x and np.shares_memory(r, x) == np.shares_memory(x[:], x)
        got[0].shape = (2 * n,)
        assert x.shape == (n, 2)


def views_of(x):
    return x.view(), x.view().reshape(-1), x.view(np.int64)


def test_x_view_is_a_view_on_every_call(backend):
    """x.view() ran as a numpy step: the call that traced returned a copy
    (a write into x after it not seen), later calls a view (probe 19); it is
    a view of all of x, as x[...], on every call.  Of another dtype it is
    still a numpy step, a view of x on every call too: the call that traced
    ran it on a copy of x."""
    f = jit(views_of, backend=backend)
    for n in (2, 3, 4, 6):
        x = np.arange(2.0 * n).reshape(2, n)
        got = f(x)
        assert_like_numpy(list(got), list(views_of(x)))
        x[0, 0] = 5.0
        assert got[0][0, 0] == 5.0 and got[1][0] == 5.0 and got[2][0, 0] == np.float64(5.0).view(np.int64)


def split_parts(x):
    return np.array_split(x, 3)


def test_numpy_steps_that_view_an_argument_give_views_on_the_call_that_traces(backend):
    """np.array_split's parts are views of x in numpy; the call that traced
    ran the numpy step on a copy of x, so its parts did not see a write into
    x after the call (probe 19); every call now gives numpy's views."""
    f = jit(split_parts, backend=backend)
    for n in (1, 2, 5, 7):
        x = np.arange(float(n))
        got, want = f(x), split_parts(x)
        assert [np.shares_memory(p, x) for p in got] == [np.shares_memory(p, x) for p in want]
        x[...] = -1.0
        assert all((p == -1.0).all() for p in got)


def dehomogenize(Q):
    return Q[:, :3] / Q[:, 3:]


def row_difference(Q):
    return Q[:3] - Q[3:]


def premultiply_alpha(img):
    return img[..., :3] * img[..., 3:]


@pytest.mark.parametrize("fn, shape", [(dehomogenize, (6, 4)), (row_difference, (4, 6)),
                                       (premultiply_alpha, (5, 6, 4))], ids=lambda x: getattr(x, "__name__", ""))
def test_a_slice_one_wide_by_its_bounds_broadcasts_in_the_kernel(fn, shape, backend):
    """`Q[:, 3:]` of an (n, 4) array is one column wide because the array is
    four: its width, s1 - 3, broadcast against Q[:, :3].  It is 1 for the
    entry (a guard), so the kernel repeats it; read as a column of width s1 - 3
    the kernel divided by the wrong elements from the second call on, past
    the end of the array in the rows' case (probe 22)."""
    f = jit(fn, backend=backend)
    rng = np.random.default_rng(0)
    for n in (6, 9, 6, 13):
        s = (n,) + shape[1:] if fn is not row_difference else (shape[0], n)
        Q = rng.standard_normal(s) + 3.0
        assert_like_numpy(f(Q), fn(Q))
    assert f.stats()["traces"] == 1 and f.stats()["eager_calls"] == 0

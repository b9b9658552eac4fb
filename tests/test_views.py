"""Strided and reversed slices, and reshapes that split or merge symbolic
dims, compile: rotary embeddings (x[..., ::2], x[..., 1::2]), gate slices of
a fused projection (gx[:, H:2 * H]), negative steps, reshape(..., -1, 2)."""
from __future__ import annotations

import warnings

import numpy as np

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

"""A traced integer scalar as an index or a slice bound (`logB[:, obs[t]]`,
`x[np.argmax(v)]`, `x[i:i + 2]`): a data-dependent size the executable binds
to its value (jit/tracer.py TraceContext.index_dim), so the index is numpy's
view and one trace serves every value.  It used to be a graph break per
value (operator.index of the traced value): one entry, and one compile, for
each index the calls met.  Writes through the view reach the array, as
numpy's do; an index of the other sign is another entry; one out of bounds
raises numpy's IndexError and leaves the function usable."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy


def column_of_observation(logB, obs):
    return logB[:, obs[0]] + logB[:, obs[-1]].sum()


def row_of_the_peak(x, v):
    i = np.argmax(v)
    return x[i] * 2.0, x[i:i + 2].sum(0)  # (i + 2 past the end: numpy clamps, another entry)


def writes_through_the_view(x, v):
    i = np.argmax(v) - 2  # (negative for a peak before index 2)
    r = x[i]
    r += 1.0  # (into x, through the view)
    x[:, i] = -1.0
    return x[i:].sum()


def _calls(fn, make, n):
    jf = jit(fn)
    rng = np.random.default_rng(0)
    for _ in range(n):
        args = make(rng)
        mine = [a.copy() for a in args]
        with warnings.catch_warnings():
            warnings.simplefilter("error", JitWarning)
            assert_like_numpy(jf(*mine), fn(*args))
        for a, b in zip(mine, args):
            np.testing.assert_array_equal(a, b)
    return jf


@pytest.mark.parametrize("fn, make, traces", [
    (column_of_observation, lambda r: (r.standard_normal((3, 5)), r.integers(0, 5, r.integers(2, 9))), 1),
    # (peaks at 0..5 of 6 rows: i + 2 within the rows, or past them, clamped)
    (row_of_the_peak, lambda r: (r.standard_normal((6, 4)), np.eye(6)[r.integers(0, 6)]), 2),
])
def test_one_trace_serves_every_index(fn, make, traces):
    jf = _calls(fn, make, 16)
    s = jf.stats()
    assert s["traces"] == traces and s["graph_breaks"] == 0 and s["eager_calls"] == 0, jf.explain()
    assert "index_dim" in jf.explain() and "checked where the size is made" in jf.explain()


def test_writes_through_a_view_at_a_traced_index_reach_the_array():
    # peaks at 0..5: i = -2..3, two signs, so two entries
    jf = _calls(writes_through_the_view, lambda r: (r.standard_normal((4, 6)), np.eye(6)[r.integers(0, 6)]), 16)
    s = jf.stats()
    assert s["traces"] == 2 and s["fallbacks"] == 0 and s["eager_calls"] == 0, jf.explain()


def test_an_index_out_of_bounds_raises_numpys_error_and_leaves_the_function_usable():
    jf = jit(row_of_the_peak)
    x = np.arange(12.0).reshape(3, 4)
    assert_like_numpy(jf(x, np.array([0.0, 1.0, 0.0])), row_of_the_peak(x, np.array([0.0, 1.0, 0.0])))
    with pytest.raises(IndexError, match="out of bounds"):
        jf(x, np.array([0.0, 0.0, 0.0, 1.0]))  # (the peak at 3: no row 3)
    assert_like_numpy(jf(x, np.array([0.0, 0.0, 1.0])), row_of_the_peak(x, np.array([0.0, 0.0, 1.0])))
    assert jf.stats()["fallbacks"] == 0

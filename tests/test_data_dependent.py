"""Sizes only known at run time (the output of np.unique, a boolean-mask
read): a shape decision the trace takes on one is checked right after the
op that makes it runs, instead of sending the whole function to eager; a
call whose size decides otherwise runs in numpy (one call, counted)."""
from __future__ import annotations

import warnings

import numpy as np

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

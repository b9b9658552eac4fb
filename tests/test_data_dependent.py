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

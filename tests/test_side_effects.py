"""Values of the moment and effects of every call: a clock, Python's random
numbers, os.environ, an iterator, a warning, a log record, a file.  A trace
would take each once (its value frozen into every later call, its effect
made once per trace); read by the function, they run it in numpy."""
from __future__ import annotations

import itertools
import logging
import os
import random
import time
import warnings
from time import perf_counter

import numpy as np

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy

_LOG = logging.getLogger("shapejit.tests.side_effects")
_COUNTER = itertools.count()


def _clock(x):
    return x + time.time()


def _elapsed(x):
    return x * 0 + perf_counter()


def _pyrandom(x):
    return x + random.random()


def _env(x):
    return x * (2.0 if os.environ.get("SHAPEJIT_TEST_MODE") == "double" else 1.0)


def _counted(x):
    return x + next(_COUNTER)


def _warns(x):
    if x.shape[0] > 2:
        warnings.warn("long input", UserWarning)
    return x * 2


def _logs(x):
    _LOG.info("called with %d rows", x.shape[0])
    return x * 2


def _records(x, path):
    with open(path, "a") as f:
        f.write("call\n")
    return x * 2


def test_values_of_the_moment_are_read_at_every_call(backend, monkeypatch):
    """time.time(), perf_counter(), random.random(), os.environ and next()
    of an iterator each give every call its own value (the trace's was
    returned by every later call)."""
    x = np.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for fn in (_clock, _elapsed, _pyrandom, _counted):
            f = jit(fn, backend=backend)
            a, b = f(x), f(x)
            assert not np.array_equal(a, b), fn.__name__
        f = jit(_env, backend=backend)
        for mode in ("double", "single", "double"):
            monkeypatch.setenv("SHAPEJIT_TEST_MODE", mode)
            assert_like_numpy(f(np.ones(2)), _env(np.ones(2)))


def test_effects_of_every_call_happen_at_every_call(backend, tmp_path, caplog):
    """A warning, a log record and a file write happen once a call, as the
    function's own code makes them (they were made once per trace)."""
    shapes = (2, 3, 2, 3, 3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        f = jit(_warns, backend=backend)
        for n in shapes:
            f(np.zeros(n))
    assert sum(isinstance(m.message, UserWarning) and "long input" in str(m.message) for m in w) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        with caplog.at_level(logging.INFO, logger=_LOG.name):
            g = jit(_logs, backend=backend)
            for n in shapes:
                g(np.zeros(n))
        assert sum(r.name == _LOG.name for r in caplog.records) == len(shapes)
        path = tmp_path / "calls.txt"
        h = jit(_records, backend=backend)
        for n in shapes:
            assert_like_numpy(h(np.ones(n), str(path)), np.ones(n) * 2)
    assert path.read_text().count("call") == len(shapes)

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


# ------------------------------------------------- state the function changes

def _running_mean():
    count, acc = 0, np.zeros(3)

    def running_mean(x):
        nonlocal count, acc
        count += 1
        acc = acc + x
        return acc / count
    return running_mean, lambda: (count, acc)


def _best():
    best = None

    def keep_best(x):
        nonlocal best
        s = x.sum()
        if best is None or s > best:
            best = s
        return best
    return keep_best, lambda: best


class Model:
    calls = 0


def scale_by_class_counter(x):
    Model.calls += 1
    return x * Model.calls


def scale_by_own_counter(x):
    scale_by_own_counter.calls = getattr(scale_by_own_counter, "calls", 0) + 1
    return x * scale_by_own_counter.calls


STEP = 0


def decayed_step(x):
    global STEP
    STEP += 1
    return x * (0.1 / STEP)


def test_state_the_function_changes_and_reads_is_numpys_every_call(backend):
    """A nonlocal it assigns (the trace wrote its Tracer into the closure,
    and every later call was served the first's state), a class's or its
    own attribute, a global counter it increments and reads: each call's
    result and the state after it are numpy's (these run in numpy, with a
    warning that names the state; before, every result after the first was
    silently the first call's)."""
    global STEP
    try:
        for make in (_running_mean, _best):
            want_f, want_state = make()
            got_f, got_state = make()
            f = jit(got_f, backend=backend)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", JitWarning)
                for k in range(4):
                    x = np.arange(3.0) * (k % 3)
                    assert_like_numpy(f(x), want_f(x))
                    assert type(got_state()) is type(want_state())
                    assert_like_numpy(got_state(), want_state())
            assert "assigns the nonlocal" in f.explain()
        for fn in (scale_by_class_counter, scale_by_own_counter, decayed_step):
            f = jit(fn, backend=backend)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", JitWarning)
                got = [f(np.ones(2)) for _ in range(3)]
            Model.calls, STEP = 0, 0
            scale_by_own_counter.calls = 0
            want = [fn(np.ones(2)) for _ in range(3)]
            for a, b in zip(got, want):
                assert_like_numpy(a, b)
            assert any("which it reads" in str(w.message) for w in caught), fn.__name__
            Model.calls, STEP = 0, 0
            scale_by_own_counter.calls = 0
    finally:
        Model.calls, STEP = 0, 0

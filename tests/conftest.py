"""Shared test fixtures: every differential test runs on each back end."""
import os
import threading

import numpy as np
import pytest

os.environ.setdefault("SHAPEJIT_CHECKS", "1")
# (no background calibration of the GEMM dispatch in every test's fresh cache:
# tests/test_dispatch.py turns it on where it is the subject)
os.environ.setdefault("SHAPEJIT_CALIBRATE", "0")
# (and where it is, the suite's other worker keeps the machine busy: what a
# calibration keeps is not the subject; test_dispatch.py's busy test unsets it)
os.environ.setdefault("SHAPEJIT_CALIBRATE_BUSY", "1")

BACKENDS = ["llvm", "reference"]


@pytest.fixture(autouse=True)
def fresh_compile_cache(tmp_path, monkeypatch):
    """Each test gets its own compile cache: compile counts stay per test."""
    from runtime.cache import reset_default_cache
    monkeypatch.setenv("SHAPEJIT_CACHE_DIR", str(tmp_path / "shapejit-cache"))
    reset_default_cache()
    yield
    reset_default_cache()


@pytest.fixture(autouse=True, scope="session")
def products_on_the_kernel():
    """Products whose shape class is decided run on the GEMM kernel (not
    numpy's BLAS, whichever is faster here): the tests check its results.
    tests/test_gemmchoice.py covers the choice itself."""
    from runtime import gemmchoice
    gemmchoice.PREFER = "kernel"
    yield
    gemmchoice.PREFER = None


@pytest.fixture(autouse=True, scope="session")
def lifting_is_strict():
    """A bug in loop lifting fails the test (users get the loop traced as written)."""
    from jit import lift
    lift.STRICT = True
    yield
    lift.STRICT = False


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def assert_like_numpy(got, want, ulps: int = 4, atol: float = 0.0):
    """Same type structure, dtypes and shapes exactly; values to a few ulp
    (plus `atol` where a computation cancels: a few ulp of its terms), and
    the sign of each zero numpy's result has."""
    from jit import pytree
    gl, wl = [], []
    gd, wd = pytree.flatten(got, gl), pytree.flatten(want, wl)
    assert gd == wd, f"structure {gd} != {wd}"
    for g, w in zip(gl, wl):
        if not isinstance(w, (np.ndarray, np.generic)):
            assert g == w
            continue
        g = np.asarray(g)
        w = np.asarray(w)
        assert g.dtype == w.dtype, f"dtype {g.dtype} != numpy's {w.dtype}"
        assert g.shape == w.shape, f"shape {g.shape} != numpy's {w.shape}"
        if w.dtype.kind in "fc":
            eps = np.finfo(w.dtype).eps
            tiny = np.finfo(w.dtype).tiny
            np.testing.assert_allclose(g, w, rtol=ulps * eps, atol=max(atol, ulps * tiny * 16), equal_nan=True)
            # the sign of every zero numpy gives, where both are exactly zero (not where a tolerance for
            # cancellation is given: a sum that cancels to a zero has the sign its order of terms gives)
            for gp, wp in ((g.real, w.real), (g.imag, w.imag)) if w.dtype.kind == "c" else ((g, w),):
                flipped = (wp == 0) & (gp == 0) & (np.signbit(gp) != np.signbit(wp))
                if not atol and flipped.any():
                    raise AssertionError(f"signed zeros differ from numpy's at {np.argwhere(flipped)[:5].tolist()}")
        else:
            np.testing.assert_array_equal(g, w)


def run_in_threads(target, n: int, timeout: float = 120.0) -> None:
    """`target(i)` for i in range(n), on n threads at once: re-raises the
    first error a thread raised, and fails if a thread is still running
    after `timeout` seconds (a deadlock)."""
    errors = []

    def run(i):
        try:
            target(i)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]


def metric(text, name, **labels):
    """The value of the Prometheus sample `name` whose labels include `labels`
    in exposition `text` (None: no such sample)."""
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            if line.split("{")[0].split(" ")[0] == name:
                return float(line.rsplit(" ", 1)[1])
    return None


def assert_same_as_python(jitted, fn, *args):
    """jitted(*args) gives fn(*args) -- the same values, and the same type
    of each (a Python float, numpy's scalar) -- or raises the same
    exception type with the same message."""
    try:
        want = fn(*args)
    except Exception as e:  # noqa: BLE001 - the function's own error: the jitted call must raise it
        with pytest.raises(type(e)) as got:
            jitted(*args)
        assert str(got.value) == str(e)
        return
    got = jitted(*args)
    assert got == want
    assert [type(v) for v in got] == [type(v) for v in want] if type(want) is tuple else type(got) is type(want)

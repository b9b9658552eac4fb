"""An internal error never reaches the user: a failure injected into each
stage (tracing, verification, passes, partition, code generation, LLVM,
loading, building the executable, running it) makes the call run in numpy — numpy's
result, one JitWarning naming the cause, a fallbacks{reason} count and an
explain() line — and leaves the function usable.  Errors the user causes
still raise numpy's own exception."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import importlib

import runtime.executable
from jit import JitWarning, jit
from tests.conftest import assert_like_numpy


def f(x, b):
    y = np.tanh(x + b)
    y[0] = 0
    return y * 2


def _boom(*a, **kw):
    raise RuntimeError("injected failure")


def _emit_failing_on_tanh(real):
    def emit(self, op, *a, **kw):
        if op == "tanh":
            raise RuntimeError("injected failure")
        return real(self, op, *a, **kw)
    return emit


miss, compile_, tracer = (importlib.import_module(f"jit.{m}") for m in ("miss", "compile", "tracer"))

STAGES = {
    "trace": (tracer.TraceContext, "emit", _emit_failing_on_tanh(tracer.TraceContext.emit),
              "internal_error"),
    "verify": (miss, "verify", _boom, "internal_error"),
    "passes": (compile_, "run_pipeline", _boom, "compile_failed"),
    "partition": (compile_, "partition", _boom, "compile_failed"),
    "codegen": (compile_, "emit_plan", _boom, "compile_failed"),
    "llvm": (compile_, "compile_module", _boom, "compile_failed"),
    "load": (compile_, "load", _boom, "compile_failed"),
    "executable": (runtime.executable, "generate", _boom, "internal_error"),
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_injected_failure_runs_numpy(stage, monkeypatch):
    owner, name, replacement, reason = STAGES[stage]
    monkeypatch.setattr(owner, name, replacement)
    jf = jit(f)
    rng = np.random.default_rng(0)
    for n in (4, 7, 9):
        x, b = rng.random((n, 5)), rng.random(5)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = jf(x, b)
        assert_like_numpy(got, f(x, b))
        if n == 4:
            assert any(issubclass(x.category, JitWarning) and "injected failure" in str(x.message) for x in w)
    assert jf.metrics.fallbacks[reason] == 1
    assert "injected failure" in jf.explain()
    monkeypatch.undo()
    x, b = rng.random((3, 5)), rng.random(5)
    assert_like_numpy(jf(x.astype(np.float32), b.astype(np.float32)), f(x.astype(np.float32), b.astype(np.float32)))


def test_user_errors_raise_numpys_exception_and_leave_the_function_usable(backend):
    jf = jit(f, backend=backend)
    with pytest.raises(ValueError, match="broadcast"):
        jf(np.ones((3, 4)), np.ones(5))
    with pytest.raises(IndexError):
        jf(np.ones((0, 4)), np.ones(4))  # y[0] = 0 on an empty array
    assert_like_numpy(jf(np.ones((3, 4)), np.ones(4)), f(np.ones((3, 4)), np.ones(4)))
    s = jf.stats()
    assert s["fallbacks"] == 0 and s["traces"] == 1


def test_a_value_numpy_cannot_store_runs_numpy(backend):
    # numpy sees a traced array as a sequence here: tracing fails, numpy does not
    def g(x):
        res = np.zeros(3)
        res[0] = x.mean()
        res[1] = x.max()
        return res * x.shape[0]
    jf = jit(g, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for n in (3, 6):
            x = np.arange(n, dtype=np.float64)
            assert_like_numpy(jf(x), g(x))


def test_a_compiled_call_that_fails_runs_numpy(backend):
    """The executable itself raises (a bug of ours in generated code): that
    call returns numpy's result with a warning and a count, and the
    signature runs eagerly from then on; the function stays usable."""
    jf = jit(f, backend=backend)
    x, b = np.ones((3, 4)), np.arange(4.0)
    jf(x, b), jf(x, b)
    (state,) = jf._keys.values()

    def broken(*a):
        raise RuntimeError("injected failure in generated code")
    for e in state.entries:
        e.run = broken
    with pytest.warns(JitWarning, match="running the compiled code failed: RuntimeError"):
        assert_like_numpy(jf(x, b), f(x, b))
    assert jf.stats()["fallbacks"] == 1 and jf.metrics.fallbacks["internal_error"] == 1
    assert "running the compiled code failed" in jf.explain()
    assert_like_numpy(jf(2 * x, b), f(2 * x, b))  # (eagerly now, no second warning or count)
    assert jf.stats()["fallbacks"] == 1


def test_a_compiled_call_failing_where_numpy_fails_raises_numpys_error(backend):
    """When numpy fails on the same arguments, the error is the user's:
    numpy's own exception, no count, the signature still compiled."""
    def g(x, idx):
        return np.tanh(x)[idx] * 2

    jf = jit(g, backend=backend)
    x, good, bad = np.ones((5, 4)), np.array([0, 4, 2]), np.array([0, 9, 2])
    jf(x, good), jf(x, good)
    (state,) = jf._keys.values()
    entries = list(state.entries)
    real = [e.run for e in entries]

    def broken(*a):
        raise RuntimeError("injected failure in generated code")
    for e in entries:
        e.run = broken
    with pytest.raises(IndexError):  # (numpy's: index 9 is out of bounds)
        jf(x, bad)
    assert jf.stats()["fallbacks"] == 0 and state.eager_reason is None
    for e, r in zip(entries, real):
        e.run = r
    assert_like_numpy(jf(x, good), g(x, good))


def safe_inverse(A):
    try:
        return np.linalg.inv(A), True
    except np.linalg.LinAlgError:
        return np.linalg.pinv(A), False


def test_numpys_error_in_a_compiled_step_that_the_function_catches_runs_that_call_in_numpy(backend):
    """`try: np.linalg.inv(A) except LinAlgError: ...`: a singular A makes
    the compiled step raise numpy's error, which the function catches: that
    call runs in numpy (a count, no warning) and the next compiled; the
    signature ran in numpy for good (probe 18).  Past NUMPY_RAISED such
    calls, the signature runs in numpy."""
    from jit.eager import NUMPY_RAISED
    jf = jit(safe_inverse, backend=backend)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for A in (rng.standard_normal((3, 3)), np.ones((3, 3)), rng.standard_normal((4, 4)), np.ones((5, 5))):
            assert_like_numpy(jf(A), safe_inverse(A))
    s = jf.stats()
    assert s["traces"] == 1 and s["eager_calls"] == 2 and jf.metrics.fallbacks["numpy_raised"] == 2, jf.explain()
    (state,) = jf._keys.values()
    assert state.eager_reason is None
    with pytest.warns(JitWarning, match="running the compiled code failed: LinAlgError"):
        for _ in range(NUMPY_RAISED):
            jf(np.ones((3, 3)))
    assert state.eager_reason is not None and jf.metrics.fallbacks["numpy_raised"] == NUMPY_RAISED


class _AttrDict(dict):
    """A config pattern: attribute reads backed by items (a missing one raises KeyError, not AttributeError)."""
    def __getattr__(self, name):
        return self[name]


_CFG = _AttrDict(scale=2.0)


def _scaled(x):
    return x * _CFG.scale


def test_a_global_whose_attribute_reads_raise_is_no_internal_error(backend):
    """Fingerprinting the function's globals asks each for __wrapped__: an
    object whose __getattr__ raises KeyError made every call raise it (no
    saved trace for such a function now; the call compiles)."""
    f = jit(_scaled, backend=backend)
    assert_like_numpy(f(np.ones(3)), np.full(3, 2.0))
    assert f.stats()["fallbacks"] == 0

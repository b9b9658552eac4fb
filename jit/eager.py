"""Running a call in numpy instead of compiled code, and saying so: the
fallbacks of a JitFunction.  In: the function, the bound call and why; out:
numpy's result (or numpy's own exception, when the error is the user's),
with the fallback counted in the metrics and the log, and a key that runs
eagerly from now on marked in its KeyState."""
from __future__ import annotations

import numpy as np

from jit.entries import KeyState
from jit.errors import raises, warn
from runtime.generate import ERRSTATE
from runtime.runeagerly import RunEagerly
from runtime.metrics import logger_for

# why a compiled call asked to run once in numpy (runtime/runeagerly.py)
_ONCE = {"eager_size_changed": "an eager op's output size changed",
         "aliased_arguments": "an argument the function writes into shares memory with another",
         "lifted_loop": "a compiled loop met what Python or numpy raise or warn about",
         "int_of_float": "a conversion to an integer type met a NaN, an infinity or a value past the type",
         "scan_changed": "a compiled loop (a scan) ran otherwise than its trace"}


def count_fallback(jf, category: str, text: str) -> None:
    jf.metrics.fallbacks[category] += 1
    jf.log.append(f"fallback: {text}")
    lg = logger_for("fallbacks")
    if lg:
        lg.info("%s: fallback: %s", jf.__qualname__, text)


# (numpy's error state object, compared by identity per call; another numpy: np.geterr() at every call)
errstate_object = ERRSTATE.get if ERRSTATE is not None else np.geterr
DEFAULT_ERRSTATE = errstate_object()


_last_state = (DEFAULT_ERRSTATE, False)  # (the last state object met, and whether it raises: held, never reused)


def errors_raise(state) -> bool:
    """Whether numpy's error state `state` (errstate_object()) raises, calls
    or logs on a floating-point error: compiled code computes numpy's values
    (inf, nan) but raises nothing.  One state object asked again (a call in
    the same np.errstate block) is answered without asking numpy."""
    global _last_state
    last = _last_state  # (one read: the pair another thread stores is stored whole)
    if state is not last[0]:
        last = _last_state = (state, raises(np.geterr().values()))
    return last[1]


def run_under_errstate(jf, bound):
    """A call under an error state that raises (or calls, or logs) runs in
    numpy, which raises FloatingPointError where its computation meets one."""
    if not jf._errstate_noted:
        jf._errstate_noted = True
        count_fallback(jf, "errstate", "calls under np.errstate(...='raise') (or 'call', 'log') run in numpy")
    return run_eagerly(jf, bound)


def call_python(jf, bound):
    """jf's Python function on the bound call (numpy's run of it, or, called
    by a function another jit traces, its trace inline)."""
    args, kwargs = jf._params.unbind(bound)
    return jf.fn(*args, **kwargs)


def run_eagerly(jf, bound):
    """The call run in numpy (counted as an eager call)."""
    jf.metrics.eager_calls += 1
    jf.metrics.slow_calls += 1
    return call_python(jf, bound)


def mark_eager(jf, state: KeyState, category: str, reason: str) -> None:
    """The key runs eagerly from now on: counted, logged and warned."""
    state.eager_reason = reason
    count_fallback(jf, category, reason)
    warn(f"shapejit: {jf.__qualname__} runs eagerly for this signature: {reason}")


def run_eagerly_from_now(jf, state: KeyState, category: str, reason: str, bound):
    mark_eager(jf, state, category, reason)
    return run_eagerly(jf, bound)


def run_eagerly_once(jf, err: RunEagerly, bound):
    count_fallback(jf, err.reason, f"(one call) {_ONCE.get(err.reason, err.reason)}: {err}")
    return run_eagerly(jf, bound)


def after_failure(jf, state: KeyState, failure: Exception, bound, stage: str = "tracing"):
    """Tracing (or a compiled call) raised: run the call in numpy.  If
    numpy raises too, the error is the user's (numpy's own exception is
    raised, and the function stays as it was); if numpy runs it, the
    failure was shapejit's and this signature runs eagerly from now on."""
    error = None
    try:
        result = call_python(jf, bound)
    except Exception as e:  # noqa: BLE001 - re-raised below, outside this handler
        error = e
    if error is not None:
        raise error
    jf.metrics.eager_calls += 1
    jf.metrics.slow_calls += 1
    what = f"{type(failure).__name__}: {failure} (at {_where(failure)})"
    if stage == "running the compiled code" and _raised_by_numpy(failure) and state.numpy_raised < NUMPY_RAISED:
        # (numpy's own error for this call's data, in a step of the compiled code, that the function catches:
        # `try: np.linalg.inv(A) except LinAlgError: ...` -- this call runs in numpy, the next compiled)
        state.numpy_raised += 1
        count_fallback(jf, "numpy_raised", f"(one call) numpy raised {what}, which the function catches")
        return result
    mark_eager(jf, state, "internal_error", f"{stage} failed: {what}")
    return result


# calls a key runs in numpy, one at a time, for numpy's error in a compiled step that the function catches:
# past them, the key runs in numpy (a compiled step that raises where numpy's own call does not is a failure)
NUMPY_RAISED = 16
_NUMPY_DIR = np.__file__.rpartition("/")[0] + "/"


def _raised_by_numpy(e: BaseException) -> bool:
    """Whether numpy's own code raised e (its innermost frame numpy's)."""
    tb = _innermost(e)
    return tb is not None and tb.tb_frame.f_code.co_filename.startswith(_NUMPY_DIR)


def _where(e: BaseException) -> str:
    """file:line where an exception was raised (the innermost frame)."""
    tb = _innermost(e)
    return f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}" if tb else "?"


def _innermost(e: BaseException):
    """The traceback entry of the frame that raised e (None: no traceback)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb

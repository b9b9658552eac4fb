"""The NPBench-style corpus (bench/corpus) at its tiny preset: every kernel on
each back end gives numpy's results (return value and mutated arguments, same
dtypes and shapes) on its first call (traced) and its second (the compiled
code), and the kernels listed in FULLY_COMPILED stay fully compiled."""
import warnings

import numpy as np
import pytest

from bench.corpus import BY_NAME, FULLY_COMPILED, KERNELS, compare, fresh
from jit import jit

BACKENDS = ["llvm", "reference"]

# stats() of the llvm runs above, reused by test_kernel_stays_fully_compiled (which compiles
# the kernel itself when run alone): each kernel is compiled once per back end
_LLVM_STATS: dict = {}

# shapejit bugs the corpus found: (kernel, back end) -> reason; strict, so a fix is noticed
XFAIL: dict = {}


def _cases():
    for k in KERNELS:
        for backend in BACKENDS:
            marks = []
            reason = XFAIL.get((k.name, backend))
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            yield pytest.param(k.name, backend, marks=marks, id=f"{k.name}-{backend}")


def _numpy_outputs(k, base):
    args = fresh(base)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return k.outputs(args, k.fn(*args))


@pytest.mark.slow
@pytest.mark.parametrize("name,backend", list(_cases()))
def test_kernel_equals_numpy(name, backend):
    k = BY_NAME[name]
    base = k.make_inputs("T", np.random.default_rng(0))
    want = _numpy_outputs(k, base)
    jf = jit(k.fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # JitWarnings of eager fallbacks, numpy's RuntimeWarnings
        for call in ("first call", "second call"):
            args = fresh(base)
            why = compare(k.outputs(args, jf(*args)), want, rtol=k.rtol_for("T"))
            assert why is None, f"{name} ({backend}), {call}: {why}"
            for i, (a, b) in enumerate(zip(args, base)):
                if i not in k.mutates and isinstance(b, np.ndarray):
                    assert compare(a, b) is None, f"{name} ({backend}), {call}: wrote into argument {i}"
    if backend == "llvm":
        _LLVM_STATS[name] = (jf.stats(), jf)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FULLY_COMPILED))
def test_kernel_stays_fully_compiled(name):
    if name in _LLVM_STATS:
        s, jf = _LLVM_STATS[name]
    else:
        k = BY_NAME[name]
        jf = jit(k.fn, backend="llvm")
        base = k.make_inputs("T", np.random.default_rng(0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jf(*fresh(base))
            jf(*fresh(base))
        s = jf.stats()
    assert (s["eager_nodes"], s["fallbacks"], s["eager_calls"], s["graph_breaks"]) == (0, 0, 0, 0), jf.explain()

"""Never silently stale: values a trace reads from globals, closures and
`self` are part of every call's key (jit/held.py token); a change traces
again, the reason in explain(); values shapejit cannot key on are named in
one warning.  Generators, ndarray subclasses and ints beyond int64 get
numpy's result."""
import decimal
import warnings

import numpy as np
import pytest

from jit import JitWarning, jit
from tests.conftest import assert_like_numpy

SCALE = 2.0
TABLE = [1.0, 2.0, 3.0]
OPTIONS = {"eps": 1e-5, "mode": "add"}


def scaled(x):
    return x * SCALE


def helper(x):
    return x + 1.0


def uses_helper(x):
    return helper(x) * 2.0


def test_a_changed_global_traces_again(backend):
    """A float global read by the trace: a changed value traces again, and
    from then on it is a runtime scalar (every value served by that entry,
    the sign of zero too)."""
    global SCALE
    f = jit(scaled, backend=backend)
    x = np.arange(4.0)
    try:
        assert_like_numpy(f(x), x * 2.0)
        SCALE = 3.0
        assert_like_numpy(f(x), x * 3.0)
        SCALE = -0.0  # (not 0.0: the sign of zero reaches the result)
        assert_like_numpy(f(x), scaled(x))
        SCALE = 2.0
        assert_like_numpy(f(x), x * 2.0)
    finally:
        SCALE = 2.0
    assert f.stats()["traces"] == 2
    assert "float SCALE changed: now a runtime scalar" in f.explain()


def test_a_changed_global_function_traces_again():
    global helper
    f = jit(uses_helper)
    x = np.arange(3.0)
    old = helper
    try:
        assert_like_numpy(f(x), (x + 1.0) * 2.0)
        helper = lambda x: x - 1.0  # noqa: E731
        assert_like_numpy(f(x), (x - 1.0) * 2.0)
    finally:
        helper = old


COUNT = 0
LAST = None


def _note(x):
    global LAST
    LAST = "noted"  # a helper's assignment lands in its module too
    return np.exp(x)


def counted(x):
    global COUNT
    COUNT += 1
    return np.sqrt(_note(x)) * 2.0


def noted(x):
    return np.sqrt(_note(x)) * 2.0


def test_a_global_the_traced_run_assigns_lands_in_the_module(backend):
    """The trace runs the function over a copy of its globals; what it
    assigns there is written into the module when the trace is done (its
    Python side effects run while tracing, once per trace), and a global it
    changed is not keyed.  A global it changes and reads, a counter (`COUNT
    += 1`), is numpy's every call: that call's result is the traced run's
    and the signature runs in numpy from then on (it was frozen at 1)."""
    global COUNT, LAST
    f, g = jit(counted, backend=backend), jit(noted, backend=backend)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JitWarning)
            for n in (3, 4, 5, 5):
                x = np.arange(float(n))
                assert_like_numpy(g(x), np.sqrt(np.exp(x)) * 2.0)
                assert_like_numpy(f(x), np.sqrt(np.exp(x)) * 2.0)
        assert (COUNT, LAST) == (4, "noted")
        assert f.stats()["traces"] == 1 and f.stats()["eager_calls"] == 3
        assert "changes COUNT, which it reads" in f.explain()
        assert g.stats()["traces"] == 1 and g.stats()["eager_calls"] == 0
        changed = [line for line in g.explain().splitlines() if line.startswith("changed by the function")]
        assert changed and "LAST" in changed[0]
    finally:
        COUNT, LAST = 0, None


def keeps_last(x):
    global LAST
    y = x * 2.0
    LAST = y
    return y + 1.0


def keeps_shape(x):
    global LAST
    LAST = x.shape
    return x - 1.0


@pytest.mark.parametrize("fn, last", [(keeps_last, lambda x: x * 2.0), (keeps_shape, lambda x: x.shape)])
def test_a_traced_value_assigned_to_a_global_runs_eagerly(fn, last):
    """An array or a size the compiled code would not hand out: the call runs
    in numpy, the global holds numpy's value, and explain() says why."""
    global LAST
    f = jit(fn)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JitWarning)
            for n in (3, 6):
                x = np.arange(float(n))
                assert_like_numpy(f(x), fn(x))
                LAST = None
                f(x)
                assert type(LAST) is type(last(x)) and np.array_equal(LAST, last(x))
        assert f.stats()["eager_calls"] >= 3
        assert "assigns a traced value to the global 'LAST'" in f.explain()
    finally:
        LAST = None


def test_closures_lists_and_dicts():
    coef = [1.0, 2.0]
    opts = dict(OPTIONS)
    k = 3

    def f(x):
        y = x * coef[1] + k
        return y + opts["eps"] if opts["mode"] == "add" else y - opts["eps"]

    jf = jit(f)
    x = np.ones(3)
    assert_like_numpy(jf(x), f(x))
    coef[1] = 10.0
    assert_like_numpy(jf(x), f(x))
    opts["mode"] = "sub"
    assert_like_numpy(jf(x), f(x))
    k = 7  # noqa: F841 - read through the closure
    assert_like_numpy(jf(x), f(x))
    assert jf.stats()["traces"] == 4


class Layer:
    def __init__(self):
        self.scale = 2.0
        self.bias = np.ones(3)
        self.cfg = {"act": "relu"}

    @jit
    def __call__(self, x):
        y = x * self.scale + self.bias
        return np.maximum(y, 0.0) if self.cfg["act"] == "relu" else y


def test_self_attributes():
    layer = Layer()
    x = np.linspace(-2, 2, 3)
    assert_like_numpy(layer(x), np.maximum(x * 2.0 + 1.0, 0.0))
    layer.scale = 5.0
    assert_like_numpy(layer(x), np.maximum(x * 5.0 + 1.0, 0.0))
    layer.cfg["act"] = "none"
    assert_like_numpy(layer(x), x * 5.0 + 1.0)
    layer.bias = np.zeros(3)  # a held array: fetched again at every call
    assert_like_numpy(layer(x), x * 5.0)


def test_a_long_list_or_dict_is_keyed_by_the_items_read_and_a_value_it_cannot_key_on_is_named_once():
    """A list of 200 numbers or a dict of 80 options is keyed item by item,
    at the items the trace reads (read whole, it was too long for a token:
    a warning, then every change unseen, probe 15); a value no token
    describes (a library's object) is named once."""
    big = list(range(200))
    cfg = {f"opt{i}": i for i in range(80)} | {"scale": 1.0}
    f = jit(lambda x: x * big[3] + cfg["scale"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for k in range(3):
            big[3], cfg["scale"] = k + 5, k * 0.5
            assert_like_numpy(f(np.ones(2)), np.ones(2) * (k + 5) + k * 0.5)
    assert f.stats()["traces"] <= 2, f.explain()
    third = decimal.Decimal(3)
    g = jit(lambda x: x * float(third))
    with pytest.warns(JitWarning, match="reads <closure 0>, which it cannot key on"):
        g(np.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g(np.ones(5))
    assert "read but not keyed (a change to them is not seen): <closure 0>" in g.explain()


def test_a_generator_runs_in_numpy():
    def gen(x):
        for i in range(3):
            yield x * i

    f = jit(gen)
    with pytest.warns(JitWarning, match="generator"):
        out = list(f(np.ones(2)))
    for got, want in zip(out, gen(np.ones(2))):
        assert_like_numpy(got, want)


@pytest.mark.parametrize("k", [2 ** 63, 2 ** 70, -2 ** 70])
def test_python_ints_beyond_int64_get_numpy_results(k):
    f = jit(lambda x, k: x + k)
    g = jit(lambda x: x * k)
    x = np.ones(3, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        assert_like_numpy(f(x, k), x + k)
        assert_like_numpy(g(x), x * k)
        with pytest.raises(OverflowError):
            f(np.ones(3, np.int64), k)
    assert_like_numpy(f(x, 5), x + 5)  # still usable


def test_ndarray_subclasses_keep_their_type():
    f = jit(lambda x: x * 2)
    a = np.ones((2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (JitWarning, PendingDeprecationWarning))
        m = np.matrix([[1.0, 2.0], [3.0, 4.0]])
        assert_like_numpy(f(a), a * 2)
        out = f(m)
        assert type(out) is np.matrix and (out == m * 2).all()
        masked = np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0])
        out = f(masked)
        assert type(out) is np.ma.MaskedArray and out.mask.tolist() == [False, True, False]
    assert_like_numpy(f(a), a * 2)


HELPERS = '''
import numpy as np
SCALE = 2.0
CFG = {"k": 3.0}
W = np.arange(4.0)

def helper(x):
    return x * SCALE + CFG["k"] + W

def make(k):
    def inner(x):
        return x - k[0]
    return inner

shift = make([1.0])

class Layer:
    def __call__(self, x):
        return helper(x) * SCALE
'''


@pytest.fixture
def helpers(tmp_path, monkeypatch):
    """A user module of helpers, as another file of the user's program."""
    (tmp_path / "stale_helpers.py").write_text(HELPERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys
    sys.modules.pop("stale_helpers", None)
    return importlib.import_module("stale_helpers")


def test_what_a_helper_in_another_module_reads_is_keyed(helpers, backend):
    """Globals a helper reads in its own module, a helper's closure, a
    method's module globals and an array a helper reads (changed in place):
    each change is seen (before, all four were silently stale)."""
    layer = helpers.Layer()

    def program(x):
        return helpers.helper(x) + helpers.shift(x) + layer(x)

    f = jit(program, backend=backend)
    x = np.ones(4)
    assert_like_numpy(f(x), program(x))
    for change in (lambda: setattr(helpers, "SCALE", 5.0), lambda: helpers.CFG.update(k=-1.0),
                   lambda: helpers.W.__setitem__(2, 100.0), lambda: helpers.make.__globals__.update(SCALE=0.5)):
        change()
        assert_like_numpy(f(x), program(x))
    inner_k = helpers.shift.__closure__[0].cell_contents
    inner_k[0] = 7.0
    assert_like_numpy(f(x), program(x))
    assert "changed (read by the trace)" in f.explain()
    assert f.stats()["traces"] <= 6  # (the array changed in place is an input, not a retrace)

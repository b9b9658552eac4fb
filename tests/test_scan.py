"""Loops over a symbolic trip count as scans (jit/scan.py): the first trace
unrolls the loop for its trip count; a call with another count traces a
scan whose entry serves every count, its body jitted once.  Results, dtypes
and the caller's arrays are numpy's; what a scan cannot keep (numpy's
aliasing, a write into an array the loop reads, a carried value that
changes dtype or shape) stays unrolled or runs in numpy."""
from __future__ import annotations

import signal
import types
import warnings

import numpy as np
import pytest

from bench.loops import ema, rnn
from bench.programs import gru
from jit import jit, lift
from jit import scan as scan_mod
from jit.scan import UNROLLED
from tests import unseen_programs
from tests.conftest import assert_like_numpy

LENGTHS = (5, 7, 3, 12, 9, 2)


def running_sum(x):
    acc = np.zeros_like(x[0])
    for t in range(len(x)):
        acc += x[t]  # (numpy writes into acc, made here: the scan writes into its copy)
    return acc


def sum_into_argument_row(x):
    acc = x[0]
    for t in range(1, x.shape[0]):
        acc += x[t]  # (numpy writes into x's row 0)
    return acc


def writes_what_it_reads(x, y):
    h = x[0] * 0
    for t in range(x.shape[0]):
        y[t] = h
        h = h + x[t]
    return h


def changes_dtype(x):
    h = np.zeros(x.shape[1:], np.int64)
    for t in range(x.shape[0]):
        h = h + x[t]
    return h


def shrinks(x, y):
    h = x[0] * 1.0
    for t in range(x.shape[0]):
        h = h[: y.shape[0]] + 1
    return h


def loop_variable_read_after(x):
    h = x[0] * 1
    for t in range(x.shape[0]):
        h = h + x[t]
    return h * t


def two_loops_one_name(x):
    h = x[0] * 0
    for t in range(x.shape[0]):
        h = h + x[t]
    g = h * 1
    for t in range(x.shape[0] - 1):
        g = g * 0.5 + x[t + 1]
    return h, g


def _body(jf):
    """The scan's body jit of the function's only loop."""
    (_, _, body), = jf._loops["bodies", lift.rewritten(jf.fn).sites[0]]
    return body


def _rnn_args(rng, T, dtype=np.float64):
    B, I, H = 3, 5, 8
    return (rng.standard_normal((T, B, I)).astype(dtype), np.zeros((B, H), dtype),
            (rng.standard_normal((I, H)) * 0.3).astype(dtype), (rng.standard_normal((H, H)) * 0.3).astype(dtype),
            rng.standard_normal(H).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rnn_every_length_from_a_few_traces(backend, dtype):
    rng = np.random.default_rng(0)
    f = jit(rnn, backend=backend)
    for T in LENGTHS:
        args = _rnn_args(rng, T, dtype)
        assert_like_numpy(f(*args), rnn(*args), ulps=16)
    # the first lengths unrolled, then one scan for every other: no trace per length
    assert f.stats()["traces"] == UNROLLED + 1 and f.stats()["fallbacks"] == 0
    assert _body(f).stats()["traces"] == 1
    text = f.explain()
    assert "loop unrolled for 5 trips" in text and "compiled once for every trip count (a scan)" in text
    for T in (40, 1, 0):  # (1 and 0 trips: signatures of their own, as any dim of size 0 or 1)
        args = _rnn_args(rng, T, dtype)
        assert_like_numpy(f(*args), rnn(*args), ulps=16)
    assert f.stats()["traces"] == UNROLLED + 3 and _body(f).stats()["traces"] == 1


def _cell(x, h, p):
    return np.tanh(x @ p["W"] + h @ p["U"] + p["b"][0]) * p["scale"]


def rnn_of_a_dict(x, p):
    h = np.zeros((x.shape[0], p["U"].shape[0]))
    for t in range(x.shape[1]):
        h = _cell(x[:, t], h, p)
    return h


def rnn_of_nested(x, layers):
    h = x[:, 0] * 0.0
    for t in range(x.shape[1]):
        for W, (b, c) in layers:
            h = np.tanh(h @ W + b * c) + x[:, t]
    return h


def rnn_writing_its_dict(x, p):
    q = {"W": p["W"]}
    h = x[:, 0] * 0.0
    for t in range(x.shape[1]):
        q["last"] = h
        h = np.tanh(h @ q["W"]) + x[:, t]
    return h, q["last"]


def test_a_loop_reading_a_container_of_arrays_is_a_scan(backend):
    """An RNN whose weights are a dict argument (`p['W']`), or a list of
    tuples: the loop's body reads the container, so its leaves are free
    values of the scan, the body building the container again (it was no
    scan, "p holds values of the trace": a trace per sequence length, probe
    23); an inner loop's tuple target, `for W, (b, c) in layers`, is bound
    in its body.  A loop that stores into the container stays unrolled."""
    rng = np.random.default_rng(4)
    p = {"W": rng.standard_normal((3, 4)), "U": rng.standard_normal((4, 4)) * 0.3, "b": [rng.standard_normal(4)],
         "scale": 0.5}
    layers = [(rng.standard_normal((3, 3)) * 0.5, (rng.standard_normal(3), 2.0)) for _ in range(2)]
    for fn, args in ((rnn_of_a_dict, lambda x: (x, p)), (rnn_of_nested, lambda x: (x, layers))):
        f = jit(fn, backend=backend)
        for T in LENGTHS:
            x = rng.standard_normal((2, T, 3))
            assert_like_numpy(f(*args(x)), fn(*args(x)), atol=1e-12)  # (tanh of a sum that may cancel)
        assert f.stats()["traces"] == UNROLLED + 1, f.explain()
        assert "(a scan)" in f.explain()
    f = jit(rnn_writing_its_dict, backend=backend)
    for T in (4, 6, 3):
        x = rng.standard_normal((2, T, 3))
        w = {"W": p["U"][:3, :3]}
        assert_like_numpy(f(x, w), rnn_writing_its_dict(x, w))
    assert "q holds a dict" in f.explain() and "(a scan)" not in f.explain()


def test_a_python_float_and_a_loop_from_one(backend):
    rng = np.random.default_rng(1)
    f = jit(ema, backend=backend)
    for T in LENGTHS:
        x = rng.standard_normal((T, 6)).astype(np.float32)
        assert_like_numpy(f(x, 0.25), ema(x, 0.25))  # (a Python float stays weak: float32 out)
    assert f.stats()["traces"] == UNROLLED + 1


def test_augmented_assignment_into_an_array_the_function_made(backend):
    rng = np.random.default_rng(2)
    f = jit(running_sum, backend=backend)
    for T in LENGTHS:
        x = rng.standard_normal((T, 4))
        before = x.copy()
        assert_like_numpy(f(x), running_sum(x.copy()))
        np.testing.assert_array_equal(x, before)
    assert f.stats()["traces"] == UNROLLED + 1 and "(a scan)" in f.explain()


def fills_rows(x):
    back = np.zeros(x.shape, dtype=np.int64)  # (written into, never rebound: Viterbi's backpointers)
    h = x[0]
    alias = [back]
    for t in range(1, x.shape[0]):
        back[t] = (h > x[t]).astype(np.int64) + t
        h = np.maximum(h, x[t])
    return h, alias[0]


def pivots(a):
    a = a.copy()
    for i in range(a.shape[0]):  # (a list display and a traced pivot: no lifted loop, a scan)
        p = i + np.argmax(np.abs(a[i:, 0]))
        a[[i, p]] = a[[p, i]]
    return a


@pytest.mark.parametrize("fn", [fills_rows, pivots])
def test_a_loop_that_only_writes_into_an_array_is_a_scan(backend, fn):
    """The array a loop writes into without rebinding it is carried, and
    takes the scan's values after it (a list holding it sees them, as
    numpy's writes): the loop compiles once for every length, where it was
    unrolled per length ("which it does not rebind"; a list display was no
    loop site at all)."""
    rng = np.random.default_rng(5)
    f = jit(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for T in LENGTHS:
            x = rng.standard_normal((T, 3))
            assert_like_numpy(f(x), fn(x))
    s = f.stats()
    assert s["traces"] == UNROLLED + 1 and s["graph_breaks"] == 0 and "(a scan)" in f.explain(), f.explain()


def halvings(x):
    steps = 0
    while x.max() > 1:  # (a test on a traced value: a scan, whatever the trip count)
        x = x / 2
        steps += 1  # (a Python int: a symbol in the body, a Python int after)
    return x, steps


def jacobi(A, b, tol):
    x = np.zeros_like(b)
    D = np.diag(A)
    err = 1.0  # (a Python float, numpy's float64 after a trip)
    while err > tol:
        new = (b - (A - np.diag(D)) @ x) / D
        err = np.abs(new - x).max()
        x = new
    return x, err


def newton_until_converged(a):
    x = a.copy()
    while True:  # (nx: first bound in the loop and read after it -- its first trip runs as written)
        nx = 0.5 * (x + a / x)
        if np.max(np.abs(nx - x)) < 1e-10:
            break
        x = nx
    return nx


def halve_until_small(x):
    while True:
        m = x.max()
        x = x * 0.5
        if m > 100:
            continue
        if m < 1:
            break
    return x, m


def halvings_seen(x):
    while x.max() > 1:
        last = x.max()
        x = x / 2
    return x, last  # (no trip: numpy's UnboundLocalError)


def doubles(x):
    i = 0
    while i < 3:  # (Python decides: traced as written, as before)
        x = x * 2
        i += 1
    return x, i


@pytest.mark.parametrize("fn, make, traces", [
    (halvings, lambda n, r: (r.random(n) * 4 ** r.integers(0, 12),), 1),
    (jacobi, lambda n, r: (r.random((n, n)) + n * np.eye(n), r.random(n), 1e-10), 1),
    # (a constant count, an exit on a traced value: `if abs(new - lam) < 1e-10: break`)
    (unseen_programs.power_conv, lambda n, r: (np.diag(np.arange(1.0, n + 1)) + 0.1,), 1),
    (doubles, lambda n, r: (r.random(n),), 1),
    (newton_until_converged, lambda n, r: (r.random(n) * 10.0 ** r.integers(0, 6) + 0.1,), 1),
    # (its first trip as written continues, breaks or neither: a trace for each, not per trip count)
    (halve_until_small, lambda n, r: (r.random(n) * 4.0 ** r.integers(0, 12),), 3),
    (halvings_seen, lambda n, r: (r.random(n) * 4.0 ** r.integers(1, 12) + 1.5,), 1),
])
def test_loops_that_stop_on_a_traced_value_compile_once(backend, fn, make, traces):
    """A while loop whose test reads a traced value, and a loop with an exit
    (`if converged: break`) on one, are scans at once, their trips run until
    the test says stop: one trace for every trip count, where each trip's
    decision was a graph break (and each count a new path, or past 64
    decisions the whole call in numpy).  Carried Python numbers come out as
    numpy's do (an int stays an int, a float becomes numpy's float64).  A
    name first bound in a while loop and read after it (`while True: nx =
    ...; if done: break; x = nx` then `return nx`) has its first trip run as
    written, the rest a scan (probe 15: a trace per trip count)."""
    rng = np.random.default_rng(8)
    f = jit(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (4, 7, 4, 12, 30, 9):
            args = make(n, rng)
            got, want = f(*args), fn(*args)
            pairs = list(zip(got, want)) if isinstance(want, tuple) else [(got, want)]
            assert type(got) is type(want) and all(type(a) is type(b) for a, b in pairs)
            assert_like_numpy(got, want, ulps=64)
    s = f.stats()
    peeled = fn in (newton_until_converged, halve_until_small, halvings_seen)  # (the first trip's decision: a break)
    assert s["traces"] == traces and (s["graph_breaks"] > 0) == peeled and s["eager_calls"] == 0, f.explain()
    assert ("(a scan)" in f.explain()) == (fn is not doubles)
    if fn is halvings_seen:  # (a while loop's first trip peeled: no trip leaves `last` unbound, as numpy's)
        for call in (fn, f):
            with pytest.raises(UnboundLocalError):
                call(np.full(3, 0.5))


@pytest.mark.parametrize("fn, make", [
    (halvings, lambda n, r: (r.random(n) * 4 ** r.integers(1, 12),)),
    (jacobi, lambda n, r: (r.random((n, n)) + n * np.eye(n), r.random(n), 1e-10)),
])
def test_every_trip_of_a_while_scan_runs_a_compiled_entry(fn, make):
    """A while loop's test, taken at the end of each trip as a value
    (whether the next runs), lets its last trip run the entry the others
    ran (its test was a graph break at the start of every trip: the last,
    deciding otherwise, went through the body's own jit call), and a trip
    whose carried number became numpy's (`err = 1.0`, then a float64) runs
    the entry of that layout: once warm, no trip calls the body's jit."""
    rng = np.random.default_rng(3)
    f = jit(fn)
    for n in (5, 9, 5, 9):
        args = make(n, rng)
        assert_like_numpy(f(*args), fn(*args), ulps=64)
    calls = _body(f).stats()["calls"]
    for n in (5, 9, 7, 9):
        args = make(n, rng)
        assert_like_numpy(f(*args), fn(*args), ulps=64)
    assert _body(f).stats()["calls"] == calls, _body(f).explain()


def weighted_by_count(x):
    k = 0
    s = np.zeros(x.shape[1])
    for t in range(x.shape[0]):
        s = s + x[t] * k
        k += 2
    return s, k


def test_a_carried_int_runs_on_the_pinned_entry_its_value_moving_every_trip(backend):
    """A carried Python int is a symbol of the body, not one of its
    inputs: the pinned entry takes the carried arrays alone, and the guards
    the int's value of that trip (before, the entry was handed the int too,
    raised, and every trip went through jit's own call)."""
    rng = np.random.default_rng(6)
    f = jit(weighted_by_count, backend=backend)
    for T in (4, 7, 3, 40, 9):
        x = rng.standard_normal((T, 3))
        got, want = f(x), weighted_by_count(x)
        assert type(got[1]) is int and got[1] == want[1]
        assert_like_numpy(got[0], want[0], ulps=16)
    # (the body's entry, found once per call, runs the trips: jit's front door sees a few of them)
    assert f.stats()["traces"] == UNROLLED + 1 and _body(f).stats()["calls"] <= 6, _body(f).stats()


def test_a_loop_that_runs_no_trip_gives_numpys_types():
    """The trace's trips made err numpy's float64; a call whose test fails at
    once keeps numpy's Python float: that call runs in numpy, not with the
    wrong type."""
    f = jit(jacobi)
    A, b = np.eye(3) * 2, np.ones(3)
    assert_like_numpy(f(A, b, 1e-10), jacobi(A, b, 1e-10))
    got, want = f(A, b, 2.0), jacobi(A, b, 2.0)
    assert type(got[1]) is type(want[1]) is float and got[1] == want[1]


@pytest.mark.parametrize("fn, why", [
    (sum_into_argument_row, "it writes into acc, a view or a captured array"),
    (changes_dtype, "made carried value 0 a float64[4], not int64[4]"),
])
def test_what_a_scan_cannot_keep_stays_unrolled(backend, fn, why):
    rng = np.random.default_rng(3)
    f = jit(fn, backend=backend)
    for T in (4, 6, 3):
        x = rng.standard_normal((T, 4))
        args = (x,)
        mine = tuple(a.copy() for a in args)
        assert_like_numpy(f(*mine), fn(*args))
        for a, b in zip(mine, args):  # (numpy's writes into the arguments, and only those)
            np.testing.assert_array_equal(a, b)
    text = f.explain()
    assert why in text and "(a scan)" not in text
    assert f.stats()["traces"] == 3 and f.stats()["fallbacks"] == 0


def test_a_loop_writing_into_an_argument_is_a_scan_whose_values_reach_the_caller(backend):
    """`y[t] = h` into an argument: the scan writes into a copy, and the
    caller's array takes its values at the end of the call, as numpy's
    writes leave it; the same array passed as x and y runs in numpy
    (numpy's reads would see the writes)."""
    rng = np.random.default_rng(3)
    f = jit(writes_what_it_reads, backend=backend)
    for T in (4, 6, 3, 9, 5):
        x = rng.standard_normal((T, 4))
        y, mine = np.zeros((T + 1, 4)), np.zeros((T + 1, 4))
        assert_like_numpy(f(x, mine), writes_what_it_reads(x, y))
        np.testing.assert_array_equal(mine, y)
    assert f.stats()["traces"] == UNROLLED + 1 and "(a scan)" in f.explain() and f.stats()["fallbacks"] == 0
    x = rng.standard_normal((7, 4))
    a, b = x.copy(), x.copy()
    assert_like_numpy(f(a, a), writes_what_it_reads(b, b))
    np.testing.assert_array_equal(a, b)


def test_a_trip_that_changes_a_shape_later_runs_in_numpy(backend):
    rng = np.random.default_rng(4)
    f = jit(shrinks, backend=backend)
    for T in (4, 6, 3):  # (y as long as h: every trip keeps h's shape)
        x = rng.standard_normal((T, 4))
        assert_like_numpy(f(x, np.ones(4)), shrinks(x, np.ones(4)))
    assert "(a scan)" in f.explain()
    x = rng.standard_normal((5, 4))
    assert_like_numpy(f(x, np.ones(2)), shrinks(x, np.ones(2)))  # (trip 0 shortens h: numpy runs the call)
    assert f.metrics.fallbacks["scan_changed"] == 1


def test_two_loops_reusing_the_loop_variable_are_both_scans(backend):
    rng = np.random.default_rng(5)
    f = jit(two_loops_one_name, backend=backend)
    for T in LENGTHS:
        x = rng.standard_normal((T, 3))
        assert_like_numpy(f(x), two_loops_one_name(x))
    assert f.stats()["traces"] == UNROLLED + 1 and f.explain().count("(a scan)") == 2


def test_a_held_array_and_a_branch_in_the_body(backend):
    rng = np.random.default_rng(6)
    W = rng.standard_normal((4, 4)) * 0.5

    def step(x, h):
        for t in range(x.shape[0]):
            if t % 2 == 0:  # (the loop variable is a symbol of the body: a guard on its parity)
                h = np.tanh(x[t] @ W + h)
            else:
                h = h * 0.5 - x[t]
        return h
    f = jit(step, backend=backend)
    for T in LENGTHS:
        x = rng.standard_normal((T, 4))
        assert_like_numpy(f(x, np.zeros(4)), step(x, np.zeros(4)), ulps=16)
    assert f.stats()["traces"] == UNROLLED + 1 and "(a scan)" in f.explain()


def test_a_body_that_raises_raises_numpys_error(backend):
    def gather(x, idx):
        h = x[0] * 0
        for t in range(idx.shape[0]):
            h = h + x[idx[t]]
        return h
    f = jit(gather, backend=backend)
    x = np.arange(12.0).reshape(4, 3)
    for n in (2, 3, 5):
        idx = np.arange(n) % 4
        assert_like_numpy(f(x, idx), gather(x, idx))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the failed call runs in numpy, which raises)
        with pytest.raises(IndexError):
            f(x, np.array([0, 1, 7]))
    idx = np.array([3, 2, 1, 0, 3, 3])
    assert_like_numpy(f(x, idx), gather(x, idx))  # (and the function stays usable)


def test_a_value_from_the_trip_before_stays_unrolled(backend):
    def lagged(x):
        h = x[0] * 0
        for t in range(x.shape[0]):
            if t > 0:
                h = h + prev  # noqa: F821 - bound by the trip before
            prev = x[t] * 2
        return h
    f = jit(lagged, backend=backend)
    rng = np.random.default_rng(7)
    for T in (3, 5, 4):
        x = rng.standard_normal((T, 3))
        assert_like_numpy(f(x), lagged(x))
    assert "may be read before the trip binds it" in f.explain() and f.stats()["fallbacks"] == 0


class _Cell:
    def __init__(self, rng, n):
        self.W, self.U = rng.standard_normal((n, n)) * 0.4, rng.standard_normal((n, n)) * 0.4


def _run_cell(cell, x, h):
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ cell.W + h @ cell.U)
    return h


def test_a_body_reading_arrays_an_object_holds_runs_its_entry_per_trip(backend):
    rng = np.random.default_rng(8)
    cell = _Cell(rng, 6)
    f = jit(_run_cell, backend=backend)
    for T in (4, 9, 12):
        x = rng.standard_normal((T, 6))
        assert_like_numpy(f(cell, x, np.zeros(6)), _run_cell(cell, x, np.zeros(6)), ulps=16)
    body = _body(f)
    # (the body's entry, found once per call, runs the trips: jit's front door sees a few of them)
    assert body.stats()["traces"] == 1 and body.stats()["calls"] <= 4
    cell.W = cell.W * 0.5  # (a held array replaced between calls: the next call reads the new one)
    x = rng.standard_normal((7, 6))
    assert_like_numpy(f(cell, x, np.zeros(6)), _run_cell(cell, x, np.zeros(6)), ulps=16)


def test_a_trip_past_the_pinned_entrys_guards_leaves_the_steady_loop(backend):
    def settle(x, h):
        for t in range(x.shape[0]):
            if t < 6:  # (trips 0-5 on one entry of the body, steady; trip 6 on fails its guard)
                h = h + x[t]
            else:
                h = h * 0.5 - x[t]
        return h
    f = jit(settle, backend=backend)
    rng = np.random.default_rng(9)
    for T in (4, 11, 16, 8, 6, 7):
        x = rng.standard_normal((T, 5)).astype(np.float32)
        assert_like_numpy(f(x, np.zeros(5, np.float32)), settle(x, np.zeros(5, np.float32)))
    assert f.stats()["traces"] == UNROLLED + 1 and "(a scan)" in f.explain() and f.stats()["fallbacks"] == 0


def _relax(p, b):
    p[1:-1] = 0.5 * (p[2:] + p[:-2]) - b[1:-1]


def settle(p, b, tol):
    diff = 1.0
    steps = 0
    while diff > tol:  # (a helper writes into p each trip: p is carried, its values the caller's at the end)
        old = p.copy()
        _relax(p, b)
        diff = np.abs(p - old).max()
        steps += 1
    return steps


def _add_scaled(acc, row, k):
    acc += row * k


def accumulate_through_a_helper(x, k):
    acc = np.zeros(x.shape[1:])
    for t in range(x.shape[0]):
        _add_scaled(acc, x[t], k)
    return acc


def test_a_helper_that_writes_into_what_it_is_handed_is_a_scan(backend, tmp_path, monkeypatch):
    """A call of a function of the user's for its effect (CFD's pressure
    solve, `_poisson(nit, p, b)`): the arrays handed to it are carried, as
    if the body wrote into them (before: an expression statement kept the
    loop unrolled, and a while loop's decisions sent the call to numpy)."""
    rng = np.random.default_rng(5)
    f = jit(settle, backend=backend)
    for n in (12, 20, 9, 31):
        p, b = rng.standard_normal(n), rng.standard_normal(n) * 0.01
        mine = p.copy()
        assert f(mine, b, 1e-6) == settle(p, b, 1e-6)
        np.testing.assert_allclose(mine, p, rtol=1e-12, atol=1e-12)  # (the caller's array written, as numpy's)
    assert f.stats()["traces"] == 1 and f.stats()["fallbacks"] == 0
    assert "(a scan)" in f.explain()
    g = jit(accumulate_through_a_helper, backend=backend)
    for T in LENGTHS:
        x = rng.standard_normal((T, 3))
        assert_like_numpy(g(x, 3), accumulate_through_a_helper(x, 3))
    assert g.stats()["traces"] == UNROLLED + 1 and g.stats()["fallbacks"] == 0
    # (the static int the body reads, k, is plain data: the scan's entry is saved for another process)
    assert "not saved" not in g.explain()


def kadane(x):
    best = cur = x[0]
    for v in x[1::1]:  # (the rows of a slice with a step: a scan over its first dim; x[1:] the lifter takes)
        cur = max(v, cur + v)  # (Python's max of traced scalars: a select, not a decision per trip)
        best = max(best, cur)
    return best, min(x[0], x[1], x[2])


def test_python_max_of_traced_scalars_is_a_select_and_kadane_compiles_once(backend):
    """Python's max/min of traced numpy scalars pick as Python does (the
    first extreme one: a NaN first stays, a NaN after loses) as a select;
    each was a graph break, and a loop of them past 64 decisions ran in
    numpy."""
    rng = np.random.default_rng(10)
    f = jit(kadane, backend=backend)
    for n in (5, 8, 13, 21, 34, 55):
        x = rng.standard_normal(n)
        got, want = f(x), kadane(x)
        assert got == want and all(type(a) is type(b) for a, b in zip(got, want))
    assert f.stats()["traces"] == UNROLLED + 1 and f.stats()["graph_breaks"] == 0
    assert "for loop over the rows of x[1::1] compiled once" in f.explain()
    for x in ([np.nan, 1.0, 2.0, 0.5], [1.0, np.nan, 2.0, 0.5], [3.0, 1.0, np.nan, 0.5]):
        x = np.array(x)
        np.testing.assert_array_equal(f(x), kadane(x))


def gram_schmidt(A):
    m, n = A.shape
    Q = np.zeros((m, n))
    R = np.zeros((n, n))
    for j in range(n):
        v = A[:, j].copy()  # (the trip's own array: `v -= ...` below writes into it, numpy's in-place)
        for i in range(j):
            R[i, j] = Q[:, i] @ A[:, j]
            v -= R[i, j] * Q[:, i]
        R[j, j] = np.linalg.norm(v)
        Q[:, j] = v / R[j, j]
    return Q, R


def test_an_augmented_assignment_keeps_a_trips_array_its_own(backend):
    """`v = A[:, j].copy()` then `v -= ...`: v is still the array the trip
    made (the augmented assignment counted as a rebinding to another array,
    and the loop stayed unrolled: a trace per size)."""
    rng = np.random.default_rng(11)
    f = jit(gram_schmidt, backend=backend)
    for n in (5, 8, 13, 21):
        A = rng.standard_normal((n + 3, n))
        assert_like_numpy(f(A), gram_schmidt(A), ulps=64, atol=1e-13)
    assert f.stats()["traces"] == UNROLLED + 1 and f.stats()["fallbacks"] == 0


def divides_by_a_carried_int(a):
    x = 1
    for i in range(len(a)):
        x = int(a[i]) + x // x + abs(i) % 3  # (x, a carried Python int, and i: symbols in the body)
    return x


def ints_of_a_size(a):
    n = len(a)
    return np.array([7 % n, 7 // n, n & 3, 1 << (n % 4), ~n, abs(-n), -n // 2]) + a.sum()


def test_python_int_arithmetic_of_symbols_is_pythons(backend):
    """A carried int and a size are symbols: `x // x` raises Python's
    ZeroDivisionError where x is 0 (floor(x/x) is 1 to sympy: it returned a
    result), `7 % n`, `n & 3`, `~n` and abs() are Python's."""
    rng = np.random.default_rng(12)
    f = jit(divides_by_a_carried_int, backend=backend)
    for n in LENGTHS:
        a = rng.integers(0, 9, n)
        assert f(a) == divides_by_a_carried_int(a)
    a = np.array([-1, 5, 2, 3])  # (x is 0 after the first trip)
    with pytest.raises(ZeroDivisionError):
        divides_by_a_carried_int(a)
    with pytest.raises(ZeroDivisionError):
        f(a)
    g = jit(ints_of_a_size, backend=backend)
    for n in LENGTHS:
        a = rng.integers(0, 9, n)
        assert_like_numpy(g(a), ints_of_a_size(a))


solvers = types.ModuleType("solvers")  # (a module of the user's helpers, `solvers.relax(p, b)`)
solvers.relax = _relax


def settle_through_a_module(p, b, tol):
    diff = 1.0
    while diff > tol:
        old = p.copy()
        solvers.relax(p, b)
        diff = np.abs(p - old).max()
    return diff


def test_a_module_helper_called_for_its_effect_is_a_scan(backend):
    rng = np.random.default_rng(19)
    f = jit(settle_through_a_module, backend=backend)
    for n in (12, 20, 9):
        p, b = rng.standard_normal(n), rng.standard_normal(n) * 0.01
        mine = p.copy()
        assert f(mine, b, 1e-6) == settle_through_a_module(p, b, 1e-6)
        np.testing.assert_allclose(mine, p, rtol=1e-12, atol=1e-12)
    assert f.stats()["traces"] == 1 and "(a scan)" in f.explain()


def knapsack(w, best):
    """0/1 knapsack by rows: a slice bounded by an item's weight on both
    sides of the write."""
    for i in range(w.shape[0]):
        cand = np.zeros_like(best)
        cand[w[i]:] = best[:best.shape[0] - w[i]] + 1
        best = np.maximum(best, cand)
    return best


def test_a_size_bound_after_the_slice_that_uses_it_is_bound_before_it(backend):
    """The write's length unifies the read's size with one bound later (w[i]
    of the write): the read is scheduled after that binding (it read the
    size before it was bound: an internal error per call of the scan)."""
    f = jit(knapsack, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (3, 8, 21, 55):
            w = np.arange(n) % 3 + 1
            assert_like_numpy(f(w, np.zeros(10, np.int64)), knapsack(w, np.zeros(10, np.int64)))
    assert f.stats()["fallbacks"] == 0 and f.stats()["eager_calls"] == 0


def lcs_rows(a, b):
    """The longest common subsequence's length by rows: each trip makes its
    row, writes into it, then rebinds it to a ufunc method's result."""
    prev = np.zeros(b.shape[0] + 1, dtype=np.int32)
    for i in range(a.shape[0]):
        cur = np.zeros_like(prev)
        cur[1:] = np.maximum(prev[1:], prev[:-1] + (b == a[i]))
        cur = np.maximum.accumulate(cur)
        prev = cur
    return prev[-1]


def test_a_ufunc_methods_result_is_a_trips_own_array(backend):
    """np.maximum.accumulate(cur) makes a new array, as np.cumsum does: the
    loop is a scan (it was a trace per length: "it writes into cur, which a
    trip binds first, not to a new array")."""
    f = jit(lcs_rows, backend=backend)
    for n in (5, 9, 17, 33, 65):
        a, b = np.arange(n) % 3, np.arange(n + 2) % 4
        assert_like_numpy(f(a, b), lcs_rows(a, b))
    assert f.stats()["traces"] <= 3


def damped_solve(A, b, tol=1e-10):
    """A fixed-point solver returning its iteration count: the loop
    variable, read after the loop."""
    x = np.zeros_like(b)
    for k in range(50):
        r = A @ x - b
        if np.linalg.norm(r) < tol:
            break
        x = x - 0.5 * r
    return x, k


def first_above(a):
    for k in range(a.shape[0]):
        if a[k] > 2.0:
            break
    return k


def rows_doubled(X):
    last = -1
    for last in range(X.shape[0] - 3):
        X[last] *= 2
    return last


def test_the_loop_variable_read_after_the_loop_is_the_last_trips(backend):
    """`return x, k` after `for k in range(...)` (with a break, or over a
    symbolic count): the scan gives the index of the last trip it ran (it
    was "k is read outside it": unrolled, a graph break per trip); a loop
    that runs no trip leaves the variable as it was, in numpy."""
    f = jit(damped_solve, backend=backend)
    for n in (3, 5, 8, 13, 21):
        rng = np.random.default_rng(n)
        A, b = np.eye(n) + 0.01 * rng.random((n, n)), rng.random(n)
        got, want = f(A, b), damped_solve(A, b)
        assert type(got[1]) is int and got[1] == want[1]
        assert_like_numpy(got[0], want[0])
    assert f.stats()["traces"] == 1 and f.stats()["graph_breaks"] == 0
    s = jit(first_above, backend=backend)  # (a search: nothing carried, the index where it stopped)
    for n in (3, 5, 8, 13, 21, 4):
        a = np.random.default_rng(n).random(n) * 3
        assert s(a) == first_above(a) and type(s(a)) is int
    assert s.stats()["traces"] == 1 and s.stats()["graph_breaks"] == 0
    h = jit(loop_variable_read_after, backend=backend)
    for T in (4, 6, 3, 9):
        x = np.random.default_rng(T).standard_normal((T, 4))
        assert_like_numpy(h(x), loop_variable_read_after(x))
    assert "(a scan)" in h.explain()
    g = jit(rows_doubled, backend=backend)
    for n in (4, 5, 8, 13, 3, 7):
        X, Y = np.ones((n, 2)), np.ones((n, 2))
        got, want = g(X), rows_doubled(Y)
        assert type(got) is int and got == want
        assert_like_numpy(X, Y)
    assert g.stats()["eager_calls"] == 1 and g.metrics.fallbacks["scan_changed"] == 1  # (the call of no trip)



def prefix_sweep(X):
    """A temp bound to None before the loop, bound first in every trip; a
    trip reads slices of its index (empty at the first trip, of one row at
    the second and the last)."""
    s = None
    for i in range(X.shape[0]):
        s = X[i] + X[:i].sum(0) - X[i + 1:].sum(0)
        X[i] = s
    return X


def _scan_bodies(f):
    return [dict(s.attrs)["call"].body for st in f._keys.values() for e in st.entries
            for s in e.executable.steps if getattr(s, "op", "") == "scan"]


def test_a_temp_bound_before_the_loop_is_no_carried_value_and_trips_stay_on_pinned_entries(backend):
    """`s = None` before the loop: `s` is the trip's own, nothing reads it
    after (it was carried: "s holds a NoneType", unrolled, a trace per
    length); the trips whose slices are empty or of one row (entries of
    their own) run on the entry each takes, looked up for the next trip,
    not through jit's call for every later trip."""
    f = jit(prefix_sweep, backend=backend)
    for n in (5, 9, 14, 60, 61):
        X = np.random.default_rng(n).random((n, 3))
        Y = X.copy()
        assert_like_numpy(f(X), prefix_sweep(Y))
    assert f.stats()["traces"] == 3
    bodies = _scan_bodies(f)
    assert len(bodies) == 1 and bodies[0].stats()["calls"] <= 16, [b.stats()["calls"] for b in bodies]


def pagerank(M, iters=50, tol=1e-10):
    """A name bound first in the loop and read after it (`return r_new`),
    and a convergence test followed by a rename."""
    n = M.shape[0]
    r = np.full(n, 1.0 / n)
    for _ in range(iters):
        r_new = 0.15 / n + 0.85 * (M @ r)
        if np.abs(r_new - r).sum() < tol:
            break
        r = r_new
    return r_new


def last_step(x):
    """A temp read after a loop over a symbolic count, with `continue`
    and no exit; a swap of two carried names."""
    a, b = np.zeros(x.shape[1], x.dtype), np.ones(x.shape[1], x.dtype)
    for t in range(x.shape[0]):
        step = a * 0.5 + x[t]
        if t == 1:
            continue
        a, b = b, step
    return step, a, b


def test_a_name_first_bound_in_the_loop_and_read_after_it_peels_the_first_trip(backend):
    """`r_new` bound in the loop, read after it (it was "r_new is read
    outside it, and not carried": unrolled, a graph break per trip, a trace
    per outcome): the first trip runs as written, the rest is a scan carrying
    it; every n and iteration count is served by one trace.  A call that
    makes no trip raises numpy's UnboundLocalError."""
    f = jit(pagerank, backend=backend)
    for n, iters, tol in ((20, 50, 1e-10), (31, 50, 1e-10), (44, 50, 1e-10), (25, 50, -1.0)):
        A = np.random.default_rng(n).random((n, n))
        M = A / A.sum(0)
        assert_like_numpy(f(M, iters, tol), pagerank(M, iters, tol))
    assert f.stats()["traces"] == 1 and f.stats()["fallbacks"] == 0, f.explain()
    assert "carrying r, r_new" in f.explain()
    # (another count of trips makes it a symbol: one trace more; a first trip that stops, one more)
    for n, iters, tol in ((44, 3, 1e-10), (20, 1, 1e-10), (26, 2, 1e-10), (27, 50, 10.0), (29, 9, 10.0)):
        A = np.random.default_rng(n).random((n, n))
        M = A / A.sum(0)
        assert_like_numpy(f(M, iters, tol), pagerank(M, iters, tol))
    assert f.stats()["traces"] == 3 and f.stats()["fallbacks"] == 0, f.explain()
    # (the trip whose test holds stops on the entry the others took: the test is a value, the rename undone)
    for body in _scan_bodies(f):
        assert body.stats()["graph_breaks"] == 0 and body.stats()["entries"] == 1, body.explain()
    with pytest.raises(UnboundLocalError):
        pagerank(M, 0)
    with pytest.raises(UnboundLocalError):
        f(M, 0)
    assert_like_numpy(f(M, 7, 1e-10), pagerank(M, 7, 1e-10))
    g = jit(last_step, backend=backend)
    for T in (3, 4, 7, 2, 9, 12):
        x = np.random.default_rng(T).standard_normal((T, 3)).astype(np.float32)
        assert_like_numpy(g(x), last_step(x))
    assert "(a scan)" in g.explain() and g.stats()["traces"] == UNROLLED + 1, g.explain()
    x = np.ones((0, 3), np.float32)
    with pytest.raises(UnboundLocalError):
        last_step(x)
    with pytest.raises(UnboundLocalError):
        g(x)


def floyd_warshall(D):
    for k in range(D.shape[0]):
        np.minimum(D, D[:, k, None] + D[None, k, :], out=D)


def relax_rows(D, w):
    for k in range(D.shape[0]):
        np.add(D[k], w, out=D[k])
    return D.sum()


def test_a_write_with_out_into_a_carried_array_is_a_scan(backend):
    """`np.minimum(D, ..., out=D)` (and out= a row of it) writes into D as
    `D[...] = ` does: carried, the loop a scan past its unrolled counts (it
    was "its body writes with out=": a trace and a compile per size)."""
    f, g = jit(floyd_warshall, backend=backend), jit(relax_rows, backend=backend)
    for n in (5, 9, 17, 33, 12):
        A = np.abs(np.random.default_rng(n).standard_normal((n, n)))
        B = A.copy()
        assert f(B) is None and floyd_warshall(A) is None
        assert_like_numpy(B, A)
        w = np.arange(float(n))
        assert_like_numpy(g(B, w), relax_rows(A, w))
        assert_like_numpy(B, A)
    assert f.stats()["traces"] == UNROLLED + 1 and "(a scan)" in f.explain()
    assert g.stats()["traces"] == UNROLLED + 1 and "(a scan)" in g.explain()


# ------------------------------------------------ in-place updates of the carried arrays (probe 13)

def _sgd_for(X, y, w, b, epochs, lr):
    for _ in range(epochs):
        err = X @ w + b - y
        w -= lr * X.T @ err / len(y)
        b -= lr * err.mean()
    return w


def _sgd_while(X, y, w, lr, tol):
    it = 0
    g = X.T @ (X @ w - y) / len(y)
    while np.linalg.norm(g) > tol and it < 200:
        w -= lr * g
        g = X.T @ (X @ w - y) / len(y)
        it += 1
    return it


def _ema_in_dict(G):
    state = {"m": np.zeros(G.shape[1])}
    m = state["m"]
    for i in range(G.shape[0]):
        m *= 0.9
        m += G[i]
    return state["m"]


class _Params:
    def __init__(self, n):
        self.W = np.zeros(n)


def _decay_held(p, X):
    W = p.W
    for i in range(X.shape[0]):
        W -= 0.1 * X[i]
    return W


def _rebound_then_written(x, n):
    for _ in range(n):
        x = x * 0.5  # (each trip binds a new array before writing into it: the caller's is never written)
        x += 1.0
    return x


def _written_then_rebound(x, n):
    for _ in range(n):
        x += 1.0  # (the first trip writes into the caller's array, later ones into the trip's own)
        x = x * 0.5
    return x


def test_in_place_updates_of_a_carried_array_reach_its_array_and_every_holder():
    """`w -= lr * g` in a scan (a for loop from its third trip count, a while
    loop from the first call) on an argument, a name for an array a dict or
    an object holds: numpy writes into that array, so the caller's argument,
    the dict and the object see the new values and `return w` is the
    argument itself (the scan bound the name to a new array: the argument,
    the dict's array and the object's kept their old values, silently).  A
    name each trip binds anew before writing into it writes no one else's
    array; one written and then bound anew runs as written."""
    rng = np.random.default_rng(0)
    f, g = jit(_sgd_for), jit(_sgd_while)
    for n, epochs in ((20, 10), (30, 20), (40, 30), (24, 40), (33, 7)):
        X = rng.standard_normal((n, 3))
        y = X @ np.array([1.0, -2.0, 0.5]) + 0.3
        w1, b1, w2, b2 = np.zeros(3), np.zeros(1), np.zeros(3), np.zeros(1)
        out = f(X, y, w2, b2, epochs, 0.1)
        assert out is w2
        _sgd_for(X, y, w1, b1, epochs, 0.1)
        assert_like_numpy(w2, w1, ulps=64)
        assert_like_numpy(b2, b1, ulps=64)
        w1, w2 = np.zeros(3), np.zeros(3)
        assert g(X, y, w2, 0.1, 1e-6) == _sgd_while(X, y, w1, 0.1, 1e-6)
        assert_like_numpy(w2, w1, ulps=64)
    assert "(a scan)" in f.explain() and "(a scan)" in g.explain()
    h = jit(_ema_in_dict)
    k = jit(_decay_held)
    for n in (3, 4, 5, 6, 9):
        G = rng.standard_normal((n, 2))
        assert_like_numpy(h(G), _ema_in_dict(G))
        p1, p2, X = _Params(3), _Params(3), rng.standard_normal((n, 3))
        out = k(p2, X)
        assert out is p2.W
        _decay_held(p1, X)
        assert_like_numpy(p2.W, p1.W)
    for fn in (_rebound_then_written, _written_then_rebound):
        j = jit(fn)
        for n in (3, 4, 5, 6):
            x1, x2 = np.arange(4.0), np.arange(4.0)
            assert_like_numpy(j(x2, n), fn(x1, n))
            assert_like_numpy(x2, x1)


def total_from_zero(xs, W):
    total = 0
    for t in range(xs.shape[0]):
        total = total + xs[t] @ W
    return total


def total_from_zero_read_in_the_loop(xs):
    total = 0.0
    out = []
    for t in range(xs.shape[0]):
        total = total * 0.5 + xs[t]
        out.append(total * 2)
    return np.stack(out)


def running_sum_over_rows(x):
    out = np.zeros_like(x)
    s = 0  # (its first trip makes it numpy's scalar of x's dtype: then a scan carries it)
    for i, v in enumerate(x):
        s += v
        out[i] = s
    return out, s


def sum_of_squares_over_rows(x):
    s = 0.0
    for v in x:
        s = s + v * v
    return s


def dot_over_zipped_rows(a, b):
    acc = 0
    for u, v in zip(a, b):
        acc += u @ v
    return acc


def backward_rnn(xs, h, W):
    for t in reversed(range(xs.shape[0])):
        h = np.tanh(xs[t] @ W + h)
    return h


def backward_stepped(xs, h):
    outs = []
    for t in reversed(range(1, xs.shape[0], 3)):
        h = h * 0.5 + xs[t]
        outs.append(h * t)
    return h, np.stack(outs)


def backward_by_minus_two(xs, h):
    for t in reversed(range(xs.shape[0] - 1, 0, -2)):
        h = h * 0.5 + xs[t] * t
    return h


def rnn_cell(x, h, W):
    return np.tanh(x @ W + h - h.mean(-1, keepdims=True))


def rnn_by_a_helper(xs, h, W):
    outs = []
    for t in range(xs.shape[0]):
        h = rnn_cell(xs[t], h, W)
        outs.append(h)
    return np.stack(outs)


def scale_in_place(v):
    v *= 0.5
    return v


def rnn_by_a_writing_helper(xs, h):
    outs = []
    for t in range(xs.shape[0]):
        h = scale_in_place(h) + xs[t]
        outs.append(h)
    return np.stack(outs)


def epochs_of_minibatches(X, Y, W, epochs, bs):
    for ep in range(epochs):
        for s in range(0, X.shape[0], bs):
            xb, yb = X[s:s + bs], Y[s:s + bs]
            W = W - 0.01 * xb.T @ (xb @ W - yb) / xb.shape[0]
    return W


def layers_of_rnn(x, W):
    for layer in range(2):  # (x rebound by the outer loop, its shape the same: the inner loop's count)
        h = np.zeros(W.shape[1])
        for t in range(x.shape[0]):
            h = np.tanh(x[t] @ W + h)
        x = x + h[: x.shape[1]]
    return x


def triangular_by_a_temp(x):
    out = np.zeros((x.shape[0], x.shape[0]))
    for i in range(x.shape[0]):
        m = i + 1
        for j in range(m, x.shape[0]):
            out[i, j] = x[i] - x[j]
    return out


def triangular(x):
    out = np.zeros((x.shape[0], x.shape[0]))
    for i in range(x.shape[0]):
        for j in range(i + 1, x.shape[0]):
            out[i, j] = x[i] * x[j]
    return out


@pytest.mark.parametrize("fn, make", [
    (total_from_zero, lambda r, T: (r.standard_normal((T, 4, 3)), r.standard_normal((3, 5)))),
    (total_from_zero_read_in_the_loop, lambda r, T: (r.standard_normal((T, 3)),)),
    (backward_rnn, lambda r, T: (r.standard_normal((T, 4, 3)), np.zeros((4, 3)), r.standard_normal((3, 3)) * .3)),
    (backward_stepped, lambda r, T: (r.standard_normal((T, 3)), np.zeros(3))),
    (backward_by_minus_two, lambda r, T: (r.standard_normal((T, 3)), np.zeros(3))),
    (rnn_by_a_helper, lambda r, T: (r.standard_normal((T, 4, 3)), np.zeros((4, 3)), r.standard_normal((3, 3)))),
    (running_sum_over_rows, lambda r, T: (r.standard_normal(T),)),
    (running_sum_over_rows, lambda r, T: (r.standard_normal(T).astype(np.float32),)),
    (running_sum_over_rows, lambda r, T: (r.integers(-9, 9, T, dtype=np.int32),)),
    (sum_of_squares_over_rows, lambda r, T: (r.standard_normal((T, 3)).astype(np.float32),)),
    (dot_over_zipped_rows, lambda r, T: (r.standard_normal((T, 3)), r.standard_normal((T, 3)))),
])
def test_loops_people_write_are_scans(backend, fn, make):
    """Probe 13's loops that traced once per length: an accumulator that
    starts as a Python 0 (its first trip runs as written, making it an
    array; the rest is a scan), reversed(range(...)) (a backward pass),
    a step of the RNN factored into a helper that writes into nothing;
    probe 15's accumulators over rows, `s = 0; for v in x: s += v` (the
    first trip makes s numpy's scalar: it runs as written, the rest a
    scan)."""
    rng = np.random.default_rng(5)
    f = jit(fn, backend=backend)
    for T in (3, 4, 5, 6, 7, 8, 11, 13, 20, 2):
        args = make(rng, T)
        assert_like_numpy(f(*args), fn(*args), ulps=16, atol=1e-12)  # (tanh(x @ W + h - mean): cancels)
    # (the sum over enumerate's rows lifts whole since the lifter takes enumerate: better than a scan)
    assert ("(a scan)" in f.explain() or fn is running_sum_over_rows and "pyloop" in f.explain()) \
        and f.stats()["fallbacks"] == 0, f.explain()
    # (the stepped ranges' trip counts are floor divisions: their guards may split a few entries)
    assert f.stats()["traces"] <= (UNROLLED + 1 if fn not in (backward_stepped, backward_by_minus_two) else 6)


def test_a_helper_that_writes_into_what_the_loop_hands_it_keeps_numpys_aliasing(backend):
    rng = np.random.default_rng(6)
    f = jit(rnn_by_a_writing_helper, backend=backend)
    for T in (3, 4, 5, 6):
        xs, h = rng.standard_normal((T, 3)), np.ones(3)
        mine = h.copy()
        assert_like_numpy(f(xs, mine), rnn_by_a_writing_helper(xs, h))
        assert_like_numpy(mine, h)  # (the helper halves the caller's h in place on the first trip)


def test_a_loop_inside_an_unrolled_loop_is_a_scan_and_a_triangular_nest_stays_unrolled(backend):
    """The minibatch loop inside an epoch loop over a Python int: a scan per
    epoch (it traced once per data size); `for j in range(i + 1, n)` reads
    the outer loop's variable in its bounds, so it is unrolled with it as
    before (the re-roll pass serves it)."""
    rng = np.random.default_rng(7)
    f = jit(epochs_of_minibatches, backend=backend)
    for n in (64, 96, 128, 160, 192, 100):
        X, Y = rng.standard_normal((n, 8)), rng.standard_normal((n, 2))
        assert_like_numpy(f(X, Y, np.zeros((8, 2)), 3, 16), epochs_of_minibatches(X, Y, np.zeros((8, 2)), 3, 16),
                          atol=1e-12)  # (a gradient: differences of products)
    assert f.stats()["traces"] <= UNROLLED + 2 and "(a scan)" in f.explain(), f.explain()
    h = jit(layers_of_rnn, backend=backend)
    W = rng.standard_normal((3, 4)) * 0.5
    for n in (3, 5, 8, 4, 12, 7):
        x = rng.standard_normal((n, 3))
        assert_like_numpy(h(x, W), layers_of_rnn(x, W), atol=1e-12)
    assert h.stats()["traces"] <= UNROLLED + 2 and "(a scan)" in h.explain(), h.explain()
    for fn in (triangular, triangular_by_a_temp):
        g = jit(fn, backend=backend)
        for n in (5, 6):
            x = rng.standard_normal(n)
            assert_like_numpy(g(x), fn(x))
        assert "range(...) compiled once" not in g.explain().split("entry 0")[1].split("entry 1")[0]


def bfs_levels(adj, src):
    n = adj.shape[0]
    dist = np.full(n, -1)
    dist[src] = 0
    frontier = np.zeros(n, dtype=bool)
    frontier[src] = True
    level = 0
    while frontier.any():
        level += 1
        nxt = adj[frontier].any(axis=0) & (dist < 0)
        dist[nxt] = level  # (the mask's size: data-dependent in the body, one with dist's)
        frontier = nxt
    return dist


def test_a_mask_of_a_data_dependent_size_indexes_the_dims_of_its_shape(backend):
    """A BFS over a boolean frontier, `dist[nxt] = level` in a while loop's
    body: the mask's size is the array's (numpy's rule), checked where it is
    made -- with a 1 x 1 matrix the body's trace failed inside shapejit and
    the call ran in numpy with an internal-error warning (probe 16)."""
    rng = np.random.default_rng(2)
    f = jit(bfs_levels, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (1, 8, 20, 1, 13):
            adj = rng.random((n, n)) < 0.2
            assert_like_numpy(f(adj, 0), bfs_levels(adj, 0))
    assert f.stats()["fallbacks"] == 0 and f.stats()["eager_calls"] == 0, f.explain()


def point_in_polygon(px, py, poly):
    n = poly.shape[0]
    inside = np.zeros(px.shape, dtype=bool)
    j = n - 1
    for i in range(n):
        xi, yi = poly[i]
        xj, yj = poly[j]
        inside ^= ((yi > py) != (yj > py)) & (px < (xj - xi) * (py - yi) / (yj - yi + 1e-300) + xi)
        j = i
    return inside, j


class RunningStats:
    def __init__(self, d):
        self.n, self.mean, self.m2 = 0, np.zeros(d), np.zeros(d)

    def update(self, batch):
        for row in batch:
            self.n += 1
            delta = row - self.mean
            self.mean += delta / self.n
            self.m2 += delta * (row - self.mean)
        return self.m2 / max(self.n - 1, 1)


def test_a_loop_carrying_a_size_is_a_scan(backend):
    """A loop that carries an int that is a symbol (`j = n - 1` then `j = i`
    of the ray-casting test; `self.n += 1` once self.n changed, Welford's
    running statistics over a batch's rows): a scan for every length (a
    trace per length: a carried SymInt was refused, probe 17), the int after
    it Python's, the attributes numpy's."""
    rng = np.random.default_rng(6)
    f = jit(point_in_polygon, backend=backend)
    px, py = rng.uniform(-1, 1, 50), rng.uniform(-1, 1, 50)
    for k in (3, 4, 5, 6, 7, 8, 9, 10, 1):
        t = np.linspace(0, 2 * np.pi, k, endpoint=False)
        poly = np.stack([np.cos(t), np.sin(t)], 1)
        assert_like_numpy(f(px, py, poly), point_in_polygon(px, py, poly))
    assert f.stats()["traces"] <= UNROLLED + 2 and f.stats()["fallbacks"] == 0, f.explain()
    update = jit(RunningStats.update, backend=backend)
    got, want = RunningStats(3), RunningStats(3)
    for n in (2, 3, 4, 5, 6, 7, 8, 9, 1):
        x = rng.standard_normal((n, 3))
        assert_like_numpy(update(got, x), want.update(x))
        assert type(got.n) is int and got.n == want.n
        assert_like_numpy(got.mean, want.mean)
        assert_like_numpy(got.m2, want.m2)
    assert update.stats()["traces"] <= UNROLLED + 2 and update.stats()["fallbacks"] == 0, update.explain()


def power_iteration(M, d, tol, max_iter):
    n = M.shape[0]
    r = np.full(n, 1.0 / n)
    for it in range(max_iter):
        r_new = (1 - d) / n + d * (M.T @ r)
        if np.abs(r_new - r).sum() < tol:
            r = r_new
            break
        r = r_new
    return r, it


def test_an_exit_that_binds_names_first_is_a_scan_s_exit(backend):
    """`if converged: r = r_new; break` is `c = converged; if c: r = r_new;
    if c: break` (jit/lift.py _split_exits): a scan that stops where the
    data says, one trace for every trip count (each count was a trace of
    its own, each trip's decision a graph break, probe 17); the loop's
    variable after it Python's."""
    rng = np.random.default_rng(8)
    f = jit(power_iteration, backend=backend)
    for n, d, tol in ((5, 0.85, 1e-8), (10, 0.85, 1e-8), (20, 0.85, 1e-8), (40, 0.85, 1e-8), (10, 0.5, 1e-8),
                      (10, 0.7, 1e-3), (6, 0.85, 0.0), (7, 0.85, 1e-8)):
        A = rng.random((n, n)) + 0.01
        M = A / A.sum(1, keepdims=True)
        got, want = f(M, d, tol, 60), power_iteration(M, d, tol, 60)
        assert got[1] == want[1] and type(got[1]) is int
        assert_like_numpy(got[0], want[0], ulps=16, atol=1e-15)
    assert f.stats()["traces"] <= 2 and f.stats()["graph_breaks"] == 0, f.explain()


def pendulum(state, g_l):
    th, om = state
    return np.array([om, -g_l * np.sin(th)])


def rk4_pendulum(theta0, omega0, g_l, dt, n):
    s = np.array([theta0, omega0])
    out = np.zeros((n, 2))
    for i in range(n):
        k1 = pendulum(s, g_l)
        k2 = pendulum(s + 0.5 * dt * k1, g_l)
        k3 = pendulum(s + 0.5 * dt * k2, g_l)
        k4 = pendulum(s + dt * k3, g_l)
        s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out[i] = s
    return out


def test_a_helper_that_makes_arrays_with_numpy_writes_into_nothing(backend):
    """RK4 whose derivative is a helper returning np.array([...]): the
    helper, which the trace sees calling its view of numpy's np.array,
    writes into none of its arguments, so the loop that passes it s and
    rebinds s is a scan (it was taken for one that may write into s's
    array: a trace per n, probe 17)."""
    f = jit(rk4_pendulum, backend=backend)
    for n in (3, 4, 5, 6, 7, 8, 9, 10, 1):
        assert_like_numpy(f(0.5, 0.0, 9.81, 0.01, n), rk4_pendulum(0.5, 0.0, 9.81, 0.01, n), ulps=16)
    assert f.stats()["traces"] <= UNROLLED + 2 and "(a scan)" in f.explain(), f.explain()


def min_label_propagate(mask):
    H, W = mask.shape
    labels = np.where(mask, np.arange(H * W).reshape(H, W) + 1, 0)
    changed = True
    while changed:
        big = np.where(mask, labels, H * W + 10)
        nb = big.copy()
        nb[1:, :] = np.minimum(nb[1:, :], big[:-1, :])
        nb[:, 1:] = np.minimum(nb[:, 1:], big[:, :-1])
        new = np.where(mask, np.minimum(nb, big), 0)
        changed = bool((new != labels).any())
        labels = new
    return labels, changed


def relax_until_still(x):
    moving = True
    steps = 0
    while moving:
        y = 0.5 * (x + np.roll(x, 1))
        moving = np.abs(y - x).max() > 1e-3
        x = y
        steps += 1
    return x, steps, moving


def test_a_while_loop_on_a_flag_the_body_sets_from_the_data_is_a_scan(backend):
    """`changed = True` then `while changed: ...; changed = bool((new !=
    labels).any())`: the first trip runs as written, the flag it leaves a
    traced bool (bool() of a traced value is the trace's Python bool,
    decided where it is used), the rest a scan: one trace for every count
    of trips, no graph break (a trace per count, a break per trip, probe
    17); a flag the body sets from numpy's bool alike."""
    rng = np.random.default_rng(12)
    f = jit(min_label_propagate, backend=backend)
    for n in (3, 5, 8, 12, 16, 4):
        m = rng.random((n, n)) > 0.3
        got, want = f(m), min_label_propagate(m)
        assert_like_numpy(got, want)
    assert f.stats()["traces"] <= 2 and f.stats()["fallbacks"] == 0, f.explain()
    g = jit(relax_until_still, backend=backend)
    for n in (4, 9, 16, 5):
        x = rng.standard_normal(n)
        assert_like_numpy(g(x), relax_until_still(x), ulps=16)
    assert g.stats()["traces"] <= 2 and g.stats()["fallbacks"] == 0, g.explain()


def pendulum_of_a_closure(theta0, omega0, g_l, dt, n):
    def f(state):  # (a function of the frame closing over g_l, a Python float of the call)
        th, om = state
        return np.array([om, -g_l * np.sin(th)])
    scale = lambda v: dt * v  # noqa: E731
    s = np.array([theta0, omega0])
    out = np.zeros((n, 2))
    for i in range(n):
        k1 = f(s)
        k2 = f(s + 0.5 * scale(k1))
        s = s + scale(k1 + k2) / 2
        out[i] = s
    return out


def halvings(x, n):
    k = x[0]
    f = lambda v: v * k  # noqa: E731 - (k, bound anew by each trip: numpy's f reads the trip's)
    for i in range(n):
        k = k * 0.5
        x = f(x)
    return x


def test_a_function_of_the_frame_closing_over_values_of_the_trace_is_a_scans(backend):
    """A loop calling a function the frame made that closes over a value of
    the trace (RK4's `def f(state): ... g_l * np.sin(th)`, a lambda over
    `dt`): the scan's body makes the function again over its own values (it
    was a trace per trip count, probe 17); a function whose closure a trip
    binds anew stays unrolled."""
    f = jit(pendulum_of_a_closure, backend=backend)
    for n in (3, 4, 5, 6, 7, 8, 1, 0, 40):
        assert_like_numpy(f(0.5, 0.1, 9.81, 0.01, n), pendulum_of_a_closure(0.5, 0.1, 9.81, 0.01, n))
    assert f.stats()["traces"] <= UNROLLED + 2 and f.stats()["fallbacks"] == 0, f.explain()
    assert "scan" in f.explain()
    g = jit(halvings, backend=backend)
    x = np.linspace(1, 2, 5)
    for n in (3, 4, 5, 6, 0, 1):
        assert_like_numpy(g(x, n), halvings(x, n))


def test_a_gru_storing_each_state_runs_every_trip_compiled(backend):
    """A GRU whose trips store the state they carry (`hs[t] = h`): the
    body's h was written straight into hs's row and carried as that view,
    so every trip after the first met h aliasing the hs it writes into and
    ran in numpy (0.44x numpy's speed, probe 18)."""
    rng = np.random.default_rng(7)
    W, U, b = (rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((8, 12), (4, 12), (12,)))
    f = jit(gru, backend=backend)
    for T in (3, 5, 8, 11, 16):
        xs = rng.standard_normal((T, 2, 8)).astype(np.float32)
        assert_like_numpy(f(xs, W, U, b), gru(xs, W, U, b), ulps=16, atol=1e-6)
    assert f.stats()["fallbacks"] == 0 and "(a scan)" in f.explain(), f.explain()
    assert _body(f).stats()["eager_calls"] == 0, _body(f).explain()


def any_above(x):
    found = False
    for v in x:
        found = found or v > 2.0  # (a Python bool, then numpy's: no lifted loop types it)
    return found


def _count_plain_runs(monkeypatch) -> list:
    """Calls of a scan that ran their trips through the plain body, counted."""
    runs, plain = [], scan_mod.ScanCall._plain_trips

    def counted(self, *a):
        runs.append(1)
        return plain(self, *a)

    monkeypatch.setattr(scan_mod.ScanCall, "_plain_trips", counted)
    return runs


@pytest.mark.parametrize("way", ["plain", "jit"])
def test_a_scans_trips_run_through_its_jitted_or_its_plain_body_with_numpys_results(monkeypatch, way):
    """A scan's trips go through the body it jitted or through the body as
    the plain Python function it is (a body of Python scalars ran 10-70x
    slower than Python jitted: an entry's lookup and numpy's 0-d steps per
    trip, probe 21); either way the results are numpy's (scan.PREFER runs
    one way, as a race's outcome would)."""
    monkeypatch.setattr(scan_mod, "PREFER", way)
    runs = _count_plain_runs(monkeypatch)
    f = jit(any_above)
    rng = np.random.default_rng(3)
    for n in (3, 5, 7) + (300,) * 3 + (301, 0):
        x = rng.standard_normal(n)
        got, want = f(x), any_above(x)
        assert type(got) is type(want) and got == want
    assert "(a scan)" in f.explain() and f.stats()["eager_calls"] == 0, f.explain()
    assert (len(runs) > 0) == (way == "plain")


def test_a_scan_races_its_two_bodies_and_explain_shows_the_times_and_the_choice(monkeypatch):
    """Unforced, a size class's first calls alternate between the two
    bodies, RACE_CALLS each, timed; the faster runs the later calls, and
    explain() prints both times and the choice (which one wins is the
    machine's: not asserted)."""
    runs = _count_plain_runs(monkeypatch)
    f = jit(any_above)
    rng = np.random.default_rng(3)
    for n in (3, 5, 7) + (300,) * (2 * scan_mod.RACE_CALLS + 3):
        x = rng.standard_normal(n)
        assert f(x) == any_above(x)
    assert len(runs) >= scan_mod.RACE_CALLS
    decided = [ln for ln in f.explain().splitlines() if "(arrays of ~2^8 elements)" in ln]  # (n = 300's class)
    assert len(decided) == 1 and "a trip jitted" in decided[0] and ": faster)" in decided[0], f.explain()


def isqrt_newton(x):
    out = []
    for v in x:
        n = int(v)
        r = n
        while r * r > n:  # (Python ints: r * r past 2**63 for n > ~3e9)
            r = (r + n // r) // 2
        out.append(r)
    return out


def test_an_iteration_on_a_python_int_of_the_data_does_not_trace_forever():
    """Newton's isqrt on int(v): traced, each trip doubled the symbolic int's
    expression and sympy's work on it, and the first call never returned
    (probe 21).  Past MAX_INT_NODES terms the trace stops deciding on it:
    the loop becomes a scan, and every call gives Python's ints."""
    def too_long(*_):
        raise TimeoutError("the jitted call did not return in 120 s")

    f = jit(isqrt_newton)
    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(120)
    try:
        for n in (3, 5, 9, 4):
            x = np.random.default_rng(n).integers(0, 10 ** 12, n)
            x[0] = 10 ** 12
            assert f(x) == isqrt_newton(x)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert f.stats()["eager_calls"] == 0, f.explain()


def count_with_a_closure(xs):
    state = {"calls": 0}

    def f(v):
        state["calls"] += 1
        return v * 2

    acc = np.zeros(xs.shape[1])
    for r in xs:
        acc = acc + f(r)
    return acc, state["calls"]


def count_with_nonlocal(xs):
    n = 0

    def f(v):
        nonlocal n
        n += 1
        return v

    acc = np.zeros(xs.shape[1])
    for r in xs:
        acc = acc + f(r)
    return acc, n


class _Counting:
    def __init__(self, w):
        self.k, self.w = 0, w

    def step(self, v):
        self.k += 1
        return v * self.w

    def cell(self, v, h):  # (reads its object only)
        return np.tanh(v * self.w + h)


def _tally(d, v):
    d["calls"] += 1
    return v + 1.0


def count_in_a_dict_handed(xs):
    d = {"calls": 0}
    acc = np.zeros(xs.shape[1])
    for r in xs:
        acc = acc + _tally(d, r)
    return acc, d["calls"]


def count_with_a_method(xs):
    c = _Counting(2.0)
    acc = np.zeros(xs.shape[1])
    for r in xs:
        acc = acc + c.step(r)
    return acc, c.k


def cell_of_a_model(xs):
    c = _Counting(0.5)
    h = np.zeros(xs.shape[1])
    for r in xs:
        h = c.cell(r, h)
    return h


@pytest.mark.parametrize("fn", [count_with_a_closure, count_with_nonlocal, count_with_a_method,
                                count_in_a_dict_handed])
def test_a_loop_calling_a_helper_that_changes_python_state_is_no_scan(fn):
    """A helper the body calls that counts its calls (a closure's dict, a
    nonlocal, its object's attribute) ran once, when the scan's body was
    traced: the count came back 1, or the traced call's, with no warning
    (probe 21).  Such a loop stays unrolled (a trace per length), and every
    count is numpy's."""
    f = jit(fn)
    for n in (3, 5, 8, 4, 11, 8):
        xs = np.ones((n, 2))
        got, want = f(xs), fn(xs)
        assert_like_numpy(got[0], want[0])
        assert got[1] == want[1]
    assert "which may change Python state" in f.explain()


def test_a_loop_calling_a_method_that_only_reads_its_object_is_a_scan():
    f = jit(cell_of_a_model)
    for n in LENGTHS:
        xs = np.random.default_rng(n).standard_normal((n, 3))
        assert_like_numpy(f(xs), cell_of_a_model(xs))
    assert f.stats()["traces"] <= 3 and "(a scan)" in f.explain(), f.explain()


def appends_of_every_kind(a, b):
    floats, scalars, rows, flags = [], [], [], []
    for x, y in zip(a, b):
        floats.append(float(x * y))
        scalars.append(x * y + 1.0)
        rows.append(np.array([x, y]) * 2.0)
        flags.append(bool(x > y))
    return np.array(floats), np.array(scalars), np.stack(rows), np.array(flags), floats[-1]


def test_the_plain_body_stacks_what_its_trips_append_as_numpy(monkeypatch):
    """The trips a scan runs through its plain body stack what they append
    at the end (Python floats and bools, numpy's scalars, arrays): the
    values, dtypes and shapes numpy's lists give."""
    monkeypatch.setattr(scan_mod, "PREFER", "plain")
    runs = _count_plain_runs(monkeypatch)
    f = jit(appends_of_every_kind)
    rng = np.random.default_rng(4)
    for n in (3, 4, 5) + (40,) * 6 + (41, 1):
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        got, want = f(a, b), appends_of_every_kind(a, b)
        for g, w in zip(got, want):
            assert_like_numpy(g, w)
        assert type(got[-1]) is float
    assert "(a scan)" in f.explain() and f.stats()["eager_calls"] == 0 and runs, f.explain()

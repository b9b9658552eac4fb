"""Arrays the program holds — on `self` (also in lists and nested objects),
in a closure, in a module global — are graph inputs fetched again at every
call: gathers from them and writes into them compile, writes reach the held
array as numpy's would, and rebinding an attribute is never served stale."""
from __future__ import annotations

import dataclasses
import enum
import warnings

import numpy as np
import pytest

from bench.programs import Kalman
from jit import JitWarning, jit
from tests.conftest import assert_like_numpy


class Layer:
    def __init__(self, rng):
        self.w, self.b = rng.random((8, 8)), rng.random(8)

    def __call__(self, x):
        return np.tanh(x @ self.w + self.b)


class Model:
    def __init__(self, backend=None):
        rng = np.random.default_rng(0)
        self.emb = rng.random((50, 8))
        self.layers = [Layer(rng) for _ in range(2)]
        self.cache = [np.zeros((32, 8)) for _ in range(2)]
        self.forward = jit(self._forward, backend=backend) if backend else self._forward

    def _forward(self, ids, pos):
        x = self.emb[ids]
        for i, layer in enumerate(self.layers):
            x = layer(x)
            self.cache[i][pos:pos + x.shape[0]] = x
            x = x + self.cache[i][:pos + x.shape[0]].sum(0)
        return x


def _same_state(a: Model, b: Model):
    for x, y in zip(a.cache, b.cache):
        assert_like_numpy(x, y)


def test_kv_cache_on_self_and_embedding_gather(backend):
    got, want = Model(backend), Model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        assert_like_numpy(got.forward(np.array([1, 2, 3]), 0), want.forward(np.array([1, 2, 3]), 0))
        for pos in range(3, 14):
            assert_like_numpy(got.forward(np.array([pos]), pos), want.forward(np.array([pos]), pos))
            _same_state(got, want)
    s = got.forward.stats()
    assert s["compiles"] == 2 and s["eager_nodes"] == 0 and s["fallbacks"] == 0, got.forward.log
    assert "self.cache[1]" in [str(p) for p in got.forward._held_paths]


def test_rebinding_a_held_array_is_not_served_stale(backend):
    got, want = Model(backend), Model()
    for m in (got, want):
        m.forward(np.array([1, 2]), 0)
    for m in (got, want):
        m.layers[0].w = m.layers[0].w * 2          # a new array, same shape
        m.cache[1] = np.ones((32, 8))              # a list element replaced
    assert_like_numpy(got.forward(np.array([4, 5]), 2), want.forward(np.array([4, 5]), 2))
    _same_state(got, want)
    for m in (got, want):
        m.emb = np.concatenate([m.emb, m.emb])     # a new shape: keyed, traced again
    assert_like_numpy(got.forward(np.array([70]), 4), want.forward(np.array([70]), 4))
    for m in (got, want):
        m.layers = m.layers[:1]                    # a path that no longer exists
    assert_like_numpy(got.forward(np.array([3]), 5), want.forward(np.array([3]), 5))
    _same_state(got, want)


STATE = np.zeros(6)


def accumulate(x):
    STATE[:] += x
    return STATE * 2


def test_module_global_array_read_and_written(backend):
    global STATE
    STATE = np.zeros(6)
    jf = jit(accumulate, backend=backend)
    want = np.zeros(6)
    for k in range(4):
        x = np.full(6, float(k))
        want += x
        assert_like_numpy(jf(x), want * 2)
        assert_like_numpy(STATE, want)
    STATE = np.ones(6)  # rebound: the next call reads the new array
    assert_like_numpy(jf(np.zeros(6)), np.full(6, 2.0))
    assert jf.stats()["traces"] == 1


def test_closure_array(backend):
    table = np.arange(20.0).reshape(10, 2)

    def lookup(ids):
        table[ids] += 1
        return table[ids[::-1]]
    jf = jit(lookup, backend=backend)
    want = table.copy()
    for ids in ([1, 2], [3, 4, 5], [0, 9]):
        ids = np.array(ids)
        want[ids] += 1
        assert_like_numpy(jf(ids), want[ids[::-1]])
        assert_like_numpy(table, want)


def test_attribute_assignment_inside_is_set_after_every_call(backend):
    """`self.total = self.total + x` compiles: the value is an output of the
    call, and the attribute is set to it after every call (it ran every
    call in numpy); the returned array is the attribute's, as numpy's."""
    class Counter:
        def __init__(self):
            self.total = np.zeros(3)

        def add(self, x):
            self.total = self.total + x
            return self.total

    c = Counter()
    jf = jit(c.add, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for _ in range(3):
            out = jf(np.ones(3))
    assert_like_numpy(c.total, np.full(3, 3.0))
    assert out is c.total and jf.stats()["eager_calls"] == 0 and jf.stats()["traces"] == 1


class Adam:
    """An optimizer as written in plain numpy: its step count and moments
    rebound on self every step."""

    def __init__(self, n, lr=0.01):
        self.m, self.v, self.t, self.lr = np.zeros(n), np.zeros(n), 0, lr

    @jit
    def step(self, w, g):
        self.t += 1
        self.m = 0.9 * self.m + 0.1 * g
        self.v = 0.999 * self.v + 0.001 * g * g
        m_hat, v_hat = self.m / (1 - 0.9 ** self.t), self.v / (1 - 0.999 ** self.t)
        self.last = float(np.abs(g).max())
        return w - self.lr * m_hat / (np.sqrt(v_hat) + 1e-8)


class RingBuffer:
    def __init__(self, n, d):
        self.buf, self.pos, self.full = np.zeros((n, d)), 0, False

    def push(self, x):
        self.buf[self.pos] = x
        self.pos = (self.pos + 1) % self.buf.shape[0]
        self.full = self.full or self.pos == 0
        return self.buf.mean(0)


class Prop:
    def __init__(self):
        self._scale = 1.0

    @property
    def scale(self):
        return self._scale

    @scale.setter
    def scale(self, v):
        self._scale = v * 2

    def set(self, x):
        self.scale = float(x.sum())
        self.items = [x]
        return x


def test_state_an_object_rebinds_is_compiled_and_set_after_every_call(backend):
    """Adam's step (`self.t += 1; self.m = ...`, @jit on the method), a ring
    buffer (a written array, an int position, a bool flag): every attribute
    numpy's after every call, of numpy's type, with a trace for the first
    count and one with it a symbol (each ran every call in numpy, probe 15).
    A property's setter and a list assigned run in numpy, as before."""
    rng = np.random.default_rng(5)
    got, want = Adam(4), Adam(4)
    for _ in range(8):
        w, g = rng.standard_normal(4), rng.standard_normal(4)
        assert_like_numpy(got.step(w, g), Adam.step.__wrapped__(want, w, g))
        for k in ("m", "v", "t", "last"):
            assert type(getattr(got, k)) is type(getattr(want, k))
            assert_like_numpy(getattr(got, k), getattr(want, k))
    s = Adam.step.stats()
    assert s["eager_calls"] == 0 and s["traces"] <= 2, Adam.step.explain()
    push = jit(RingBuffer.push, backend=backend)
    got, want = RingBuffer(3, 2), RingBuffer(3, 2)
    for k in range(7):
        x = rng.standard_normal(2)
        assert_like_numpy(push(got, x), want.push(x))
        assert (got.pos, got.full) == (want.pos, want.full) and type(got.full) is bool
        assert_like_numpy(got.buf, want.buf)
    assert push.stats()["eager_calls"] == 0, push.explain()
    f = jit(Prop.set, backend=backend)
    p, q = Prop(), Prop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        f(p, np.ones(2))
    Prop.set(q, np.ones(2))
    assert p.scale == q.scale == 4.0 and f.stats()["eager_calls"] == 1
    # (a frozen dataclass's __setattr__ raises where the code assigns: numpy's run, its error)
    g = jit(FrozenStep.bump, backend=backend)
    for _ in range(2):
        with pytest.raises(dataclasses.FrozenInstanceError):
            FrozenStep(1).bump(np.ones(2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JitWarning)
            with pytest.raises(dataclasses.FrozenInstanceError):
                g(FrozenStep(1), np.ones(2))
    assert g.stats()["entries"] == 0 and g.stats()["eager_calls"] == 2  # (no entry that raises after running)


@dataclasses.dataclass(frozen=True)
class FrozenStep:
    t: int

    def bump(self, x):
        self.t = self.t + 1
        return x * self.t


def test_a_loop_that_updates_state_on_self_compiles_once_for_every_length(backend):
    """The filter's loop stores into self.x and self.p: it runs on names
    (jit/lift.py _attributes_as_names), lifted whole, the attributes set
    after the call; self.x, numpy's float64 after the first call with a
    measurement, is a runtime scalar once it changed.  Before, a held numpy
    float was keyed by its value and the loop was unrolled: a trace per
    call."""
    run = jit(Kalman.run, backend=backend)
    got, want = Kalman(), Kalman()
    rng = np.random.default_rng(7)
    for n in (0, 50, 51, 52, 60, 1, 70, 81, 3):
        zs = rng.standard_normal(n)
        assert_like_numpy(run(got, zs), want.run(zs))
        for k in ("x", "p"):
            assert type(getattr(got, k)) is type(getattr(want, k)) and getattr(got, k) == getattr(want, k)
    s = run.stats()
    assert s["eager_calls"] == 0 and s["traces"] <= 5, run.explain()
    # (lifted whole, self.q and self.r read once before it: a scan ran it at 0.1x Python's speed)
    assert "its body stores into an attribute" not in run.explain() and "pyloop" in run.explain(), run.explain()


class KalmanOfLen(Kalman):
    def run(self, zs):
        out = np.empty_like(zs)
        for i in range(len(zs)):  # (len and max: the trace's own builtins)
            self.p = max(self.p + self.q, 0.0)
            k = self.p / (self.p + self.r)
            self.x = self.x + k * (zs[i] - self.x)
            self.p = (1 - k) * self.p
            out[i] = self.x
        return out


def filter_with(kf, zs):
    return kf.run(zs)


def test_a_loop_on_attributes_calling_len_in_a_method_the_function_calls_compiles_once(backend):
    """The filter's loop in a method the jitted function calls, over
    range(len(zs)): the trace's copy calls the trace's own len (and max),
    which the check of the loop's builtins took for rebound ones, and the
    loop's own names (k, i) for values it could not check: unrolled, a trace
    per length (probe 23)."""
    run = jit(filter_with, backend=backend)
    got, want = KalmanOfLen(), KalmanOfLen()
    rng = np.random.default_rng(8)
    for n in (5, 6, 7, 8, 9, 10):
        zs = rng.standard_normal(n)
        assert_like_numpy(run(got, zs), filter_with(want, zs))
        assert (got.x, got.p) == (want.x, want.p)
    assert run.stats()["traces"] <= 3 and "pyloop" in run.explain(), run.explain()


class Scale:
    def __init__(self, s):
        self.s = s

    def apply(self, x):
        return x * self.s


def test_a_held_numpy_float_that_changes_becomes_a_runtime_scalar_of_its_type(backend):
    """A held np.float32 or np.float64 that changes is, from its first
    change, a runtime scalar of its own dtype (strong: float32 data times a
    held np.float64 is float64, as numpy's); a Python float in its place is
    another trace, and served as one."""
    x = np.arange(3, dtype=np.float32)
    for t in (np.float32, np.float64):
        f = jit(Scale.apply, backend=backend)
        o = Scale(t(0.5))
        for k in range(6):
            o.s = t(0.5 + k)
            assert_like_numpy(f(o, x), Scale.apply(o, x))
        assert f.stats()["traces"] == 2, f.explain()
        for v in (0.25, 1.5, t(3.0)):
            o.s = v
            assert_like_numpy(f(o, x), Scale.apply(o, x))
        assert f.stats()["traces"] <= 4 and f.stats()["eager_calls"] == 0, f.explain()


class Stepper:
    """Loops that store into self.x where something else may see it: each
    runs as written (jit/lift.py AttrsHook), with numpy's results."""

    def __init__(self):
        self.x, self.n = 0.0, 0

    def bump(self):
        self.n += 1
        return self.x

    @property
    def twice(self):
        return 2 * self.x

    def calls_a_method(self, zs):
        out = np.empty(zs.shape[0])
        for i in range(zs.shape[0]):
            self.x = self.x + zs[i]
            out[i] = self.bump()
        return out

    def reads_a_property(self, zs):
        out = np.empty(zs.shape[0])
        for i in range(zs.shape[0]):
            self.x = self.x + zs[i]
            out[i] = self.twice
        return out

    def through_another_name(self, zs):
        s = self
        out = np.empty(zs.shape[0])
        for i in range(zs.shape[0]):
            self.x = self.x + zs[i]
            out[i] = s.x
        return out

    def binds_a_new_attribute(self, zs):
        for i in range(zs.shape[0]):
            self.y = zs[i] + self.x
        return zs


@pytest.mark.parametrize("method", ["calls_a_method", "reads_a_property", "through_another_name",
                                    "binds_a_new_attribute"])
def test_a_loop_storing_into_attributes_something_else_sees_keeps_numpys_values(backend, method):
    f = jit(getattr(Stepper, method), backend=backend)
    got, want = Stepper(), Stepper()
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for n in (3, 4, 5, 0, 2):
            zs = rng.standard_normal(n)
            assert_like_numpy(f(got, zs.copy()), getattr(want, method)(zs.copy()))
            assert vars(got).keys() == vars(want).keys()
            for k in vars(want):
                assert type(getattr(got, k)) is type(getattr(want, k)) and getattr(got, k) == getattr(want, k)


class _BatchNorm:
    """Running statistics kept on self, in a dict and in a list, updated in place."""

    def __init__(self, d):
        self.running_mean, self.running_var = np.zeros(d), np.ones(d)
        self.stats, self.bufs = {"n": np.zeros(1)}, [np.zeros(d)]

    def train(self, x):
        m, v = x.mean(0), x.var(0)
        self.running_mean *= 0.9
        self.running_mean += 0.1 * m
        self.running_var -= 0.1 * (self.running_var - v)
        self.stats["n"] += 1
        self.bufs[0] += m
        return (x - m) / np.sqrt(v + 1e-5)


def test_a_held_array_updated_in_place_through_its_attribute(backend):
    """`self.running_mean *= 0.9` binds the attribute to the array it held,
    written in place: compiled, the writes the caller's (it was an
    attribute assignment: every call in numpy)."""
    mine, ref = _BatchNorm(3), _BatchNorm(3)
    arrays = (mine.running_mean, mine.running_var, mine.stats["n"], mine.bufs[0])
    jf = jit(mine.train, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for n in (4, 7, 9, 20):
            x = np.random.default_rng(n).random((n, 3))
            assert_like_numpy(jf(x), ref.train(x))
            for a, b in ((mine.running_mean, ref.running_mean), (mine.running_var, ref.running_var),
                         (mine.stats["n"], ref.stats["n"]), (mine.bufs[0], ref.bufs[0])):
                assert_like_numpy(a, b)
    assert all(a is b for a, b in zip(arrays, (mine.running_mean, mine.running_var, mine.stats["n"], mine.bufs[0])))
    assert jf.stats()["traces"] == 1 and jf.stats()["eager_calls"] == 0


class Act(enum.Enum):
    RELU = 1
    TANH = 2


@dataclasses.dataclass(frozen=True)
class Config:
    k: int
    name: str = "a"


DEFAULT = Config(2)
MODE = Act.RELU


def activate(x, act, cfg):
    """An enum member and a dataclass, compared as numpy's caller sees them."""
    y = np.maximum(x, 0) if act is Act.RELU else np.tanh(x)
    if act == MODE and isinstance(cfg, Config) and cfg == DEFAULT:
        y = y + 1000
    return y * cfg.k


def test_enum_members_and_dataclasses_compare_as_themselves(backend):
    """An enum member is keyed as itself (it was a proxy of the trace: `act
    is Act.RELU` was False, the wrong branch compiled); a dataclass holding
    no array passes isinstance() and == as itself."""
    f = jit(activate, backend=backend)
    x = np.linspace(-1, 2, 4)
    for act, cfg in ((Act.RELU, Config(2)), (Act.TANH, Config(2)), (Act.RELU, Config(3)), (Act.RELU, DEFAULT),
                     (Act.TANH, Config(3, "b"))):
        assert_like_numpy(f(x, act, cfg), activate(x, act, cfg))


_G = np.random.default_rng(7)


def _noisy_global(x):
    return x + _G.standard_normal(x.shape)


def _noisy(x, rng):
    return x + rng.standard_normal(x.shape)


def test_a_numpy_random_generator_runs_the_function_in_numpy(backend):
    """A Generator (or RandomState) passed, held in a global or on self:
    its draws were made while tracing and frozen into the trace (every call
    returned the first call's noise, the generator's state never moved on);
    the function now runs in numpy, with one warning, each call drawing."""
    x = np.zeros(4)
    for fn, make in ((_noisy, lambda: (np.random.default_rng(1),)), (_noisy, lambda: (np.random.RandomState(1),)),
                     (_noisy_global, lambda: ())):
        f = jit(fn, backend=backend)
        state = _G.bit_generator.state
        a = make()
        want = [fn(x, *a) for _ in range(2)]
        _G.bit_generator.state = state
        b = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", JitWarning)
            got = [f(x, *b) for _ in range(2)]
        assert not np.array_equal(got[0], got[1])
        for g, w in zip(got, want):
            assert_like_numpy(g, w)
        assert f.stats()["eager_calls"] >= 1


_LOSSES: list = []
_SEEN: dict = {}


def _train_step(x):
    loss = np.mean(x ** 2)
    _LOSSES.append(loss)
    _SEEN["n"] = x.shape[0]
    return x * 0.5


def test_a_traced_value_put_into_a_global_container_runs_numpy(backend):
    """`LOSSES.append(loss)` of a traced value (or a size into a dict) left
    the trace's value in the user's list (np.mean(LOSSES) then raised
    shapejit's error outside any call); the container is put back as it was
    and each call runs in numpy, appending what numpy's does."""
    f = jit(_train_step, backend=backend)
    _LOSSES.clear()
    _SEEN.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for n in (3, 5, 5):
            assert_like_numpy(f(np.ones(n) * n), np.ones(n) * n * 0.5)
    assert [type(v) for v in _LOSSES] == [np.float64] * 3 and _LOSSES == [9.0, 25.0, 25.0]
    assert _SEEN == {"n": 5} and type(_SEEN["n"]) is int
    assert np.mean(_LOSSES) == pytest.approx(59 / 3)


class _Stack:
    def __init__(self, n):
        self.layers = [np.full(2, float(k + 1)) for k in range(n)]
        self.named = {f"b{k}": np.full(2, 10.0 * (k + 1)) for k in range(n)}

    def __call__(self, x):
        for w in self.layers:
            x = x + w
        for name in self.named:
            x = x + self.named[name]
        return x


def test_a_held_list_or_dict_that_grows_traces_again(backend):
    """`for w in self.layers` over a list of held arrays (and a dict's keys)
    keys its length: a list that grew was served by the entry of the
    shorter one (its new layers silently left out)."""
    m = _Stack(2)
    f = jit(m.__call__, backend=backend)
    x = np.zeros(2)
    for grow in range(3):
        assert_like_numpy(f(x), m(x))
        m.layers.append(np.full(2, 100.0))
        m.named[f"extra{grow}"] = np.full(2, 1000.0)
    assert_like_numpy(f(x), m(x))
    m.layers.pop(0)
    assert_like_numpy(f(x), m(x))


class _MaybeBias:
    def __init__(self):
        self.w, self.b, self.use_bias = np.ones(3), np.full(3, 0.5), False

    def fwd(self, x):
        y = x * self.w
        if self.use_bias:
            y = y + self.b
        return y


def test_an_entry_that_holds_fewer_arrays_than_a_later_trace_is_not_handed_more(backend):
    """A trace that read self.b (use_bias True) after one that did not:
    the saved entry of the first (held: w) was loaded again for a call with
    use_bias False and handed w and b (an internal error, numpy for good)."""
    m = _MaybeBias()
    f = jit(m.fwd, backend=backend)
    x = np.ones((4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for ub in (False, True, False, True, False):
            m.use_bias = ub
            assert_like_numpy(f(x), m.fwd(x))
    assert f.stats()["fallbacks"] == 0


class _Blocks:
    def __init__(self):
        self.blocks = [[np.full(2, 2.0)], [np.full(2, 3.0)]]

    def __call__(self, x):
        for block in self.blocks:
            for w in block:
                x = x * w
        return x


def test_nested_lists_of_held_arrays_are_held_and_keyed(backend):
    """`self.blocks = [[w1], [w2, w3]]`: the inner lists' arrays are held
    and their lengths keyed (the nested list was read once: a grown or
    rebound one was served the first result, with only a warning)."""
    m = _Blocks()
    f = jit(m.__call__, backend=backend)
    x = np.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for change in (None, lambda: m.blocks[1].append(np.full(2, 5.0)), lambda: m.blocks.__setitem__(0, []),
                       lambda: setattr(m, "blocks", []), lambda: setattr(m, "blocks", [[np.full(2, 7.0)]])):
            if change:
                change()
            assert_like_numpy(f(x), m(x))


class _Props:
    scale_base = 1.0

    def __init__(self):
        self.log_scale, self.on = 0.0, True

    @property
    def scale(self):
        return np.exp(self.log_scale) * self.scale_base if self.on else 0.5

    def __call__(self, x):
        return x * self.scale


@dataclasses.dataclass(frozen=True)
class _Eps:
    eps: float


def _returns_config(x, cfg):
    return x + cfg.eps, cfg


def test_properties_and_class_attributes_through_self_are_keyed(backend):
    """A property of self (what it reads of self keyed through it) and a
    class attribute read through self were the trace's constants, stale
    after they changed; a returned object of the caller's runs in numpy (it
    was shapejit's proxy of it)."""
    m = _Props()
    f = jit(m.__call__, backend=backend)
    x = np.ones(2)
    for change in (None, lambda: setattr(m, "log_scale", 1.0), lambda: setattr(m, "on", False),
                   lambda: setattr(m, "on", True), lambda: setattr(_Props, "scale_base", 3.0)):
        if change:
            change()
        assert_like_numpy(f(x), m(x))
    _Props.scale_base = 1.0
    g = jit(_returns_config, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JitWarning)
        for eps in (1e-3, 2.0, 1e-3):
            cfg = _Eps(eps)
            got = g(x, cfg)
            assert got[1] is cfg
            assert_like_numpy(got[0], x + eps)


class _Knobs:
    k = 2
    name = "a"


def _scaled_by_class(x):
    return x * _Knobs.k if _Knobs.name == "a" else -x


def test_a_class_attribute_read_through_the_class_is_keyed(backend):
    """`Cfg.k` of a class the function reads as a global: its plain values
    are keyed at every call (the class was keyed as itself: stale after
    `Cfg.k = 7`)."""
    f = jit(_scaled_by_class, backend=backend)
    x = np.ones(3)
    try:
        for k, name in ((2, "a"), (7, "a"), (7, "b"), (3, "a")):
            _Knobs.k, _Knobs.name = k, name
            assert_like_numpy(f(x), _scaled_by_class(x))
    finally:
        _Knobs.k, _Knobs.name = 2, "a"


# ---------------------------------------------------------------- what arguments reach (probe 10)

SHIFT = 1.0


class Consts:
    k = 2.0
    W = np.ones(3)

    @classmethod
    def scaled(cls, x):
        return x * cls.k + cls.W


class Slotted:
    __slots__ = ("W", "k")

    def __init__(self):
        self.W, self.k = np.ones(3), 2.0


class Activation:
    def __init__(self):
        self.alpha = 0.2

    def leaky(self, x):
        return np.where(x > 0, x, self.alpha * x)


def _shifted(x):
    return x + SHIFT


def _with_class(x, c):
    return x * c.k + c.W


def _with_module(x, m):
    return x * m.pi


def _with_object(x, o):
    return x * o.k + o.W


def _apply(x, f):
    return f(x) * 2


def _attr(x):
    return x * _attr.scale


_attr.scale = 2.0


def test_what_the_trace_reads_through_an_argument_is_keyed():
    """A class, a module, an object of slots, a function, a bound method and
    a closure passed in, and a function's own attribute: what the trace reads
    through them is keyed at their paths, so a change is a new key, never a
    stale result (each was frozen into the trace, with no warning)."""
    global SHIFT
    import math
    x = np.arange(3.0)
    f = jit(Consts.scaled.__func__)
    g = jit(_with_class)
    for k, w in ((2.0, np.ones(3)), (5.0, np.ones(3)), (5.0, np.full(3, 10.0))):
        Consts.k, Consts.W = k, w
        np.testing.assert_array_equal(f(Consts, x), x * k + w)
        np.testing.assert_array_equal(g(x, Consts), x * k + w)
        np.testing.assert_array_equal(g(x, {"c": Consts}["c"]), x * k + w)
    Consts.k, Consts.W = 2.0, np.ones(3)
    np.testing.assert_array_equal(jit(_with_module)(x, math), x * math.pi)
    h, s = jit(_with_object), Slotted()
    np.testing.assert_array_equal(h(x, s), x * 2 + 1)
    s.k, s.W = 3.0, np.zeros(3)
    np.testing.assert_array_equal(h(x, s), x * 3)
    a = jit(_apply)
    np.testing.assert_array_equal(a(x, _shifted), (x + 1) * 2)
    SHIFT = 4.0
    try:
        np.testing.assert_array_equal(a(x, _shifted), (x + 4) * 2)
    finally:
        SHIFT = 1.0
    act, y = Activation(), np.array([-1.0, 2.0])
    np.testing.assert_array_equal(a(y, act.leaky), act.leaky(y) * 2)
    act.alpha = 1.0
    np.testing.assert_array_equal(a(y, act.leaky), act.leaky(y) * 2)
    scale = [3.0]
    np.testing.assert_array_equal(a(x, lambda v: v * scale[0]), x * 6)
    b = jit(_attr)
    np.testing.assert_array_equal(b(x), x * 2)
    _attr.scale = 5.0
    try:
        np.testing.assert_array_equal(b(x), x * 5)
    finally:
        _attr.scale = 2.0


class Scaler:
    @classmethod
    def by_class(cls, x):
        return x * SHIFT

    @staticmethod
    def by_static(x):
        return _shifted(x)

    def by_function(self, x):
        return x - SHIFT


def _through_class(x, c):
    return c.by_class(x) + c.by_static(x) + Scaler.by_function(None, x)


def _partial_target(x, a=1.0):
    return x * a + SHIFT


def test_what_a_class_s_methods_and_a_partial_read_is_keyed():
    """A classmethod, a staticmethod and a function called through a class
    (an argument or a global) run the class's own functions: the globals
    they read (and their helpers read) are keyed through the class.  A
    partial jitted: its function's globals are keyed, and its keywords,
    changed after, are the call's (both were frozen into the trace)."""
    global SHIFT
    import functools
    x = np.arange(3.0)
    f = jit(_through_class)
    np.testing.assert_array_equal(f(x, Scaler), _through_class(x, Scaler))
    p = functools.partial(_partial_target, a=2.0)
    jp = jit(p)
    np.testing.assert_array_equal(jp(x), x * 2 + 1)
    SHIFT = 4.0
    try:
        np.testing.assert_array_equal(f(x, Scaler), _through_class(x, Scaler))
        np.testing.assert_array_equal(jp(x), x * 2 + 4)
        p.keywords["a"] = 5.0
        np.testing.assert_array_equal(jp(x), x * 5 + 4)
        np.testing.assert_array_equal(jp(x, a=3.0), x * 3 + 4)
        before = Scaler.__dict__["by_static"]
        Scaler.by_static = staticmethod(lambda v: v * 10)  # (a method bound anew)
        try:
            np.testing.assert_array_equal(f(x, Scaler), _through_class(x, Scaler))
        finally:
            Scaler.by_static = before
    finally:
        SHIFT = 1.0
    assert jp.stats()["traces"] == 2  # (SHIFT's two values; the keyword is an argument of the call)


class Request:
    def __init__(self, scale):
        self.scale = scale
        self.payload = np.ones(1 << 12)

    @jit
    def run(self, x):
        return (x * self.scale).sum(-1)


def test_a_new_object_of_the_same_class_is_served_by_the_same_entries_and_not_kept():
    """Objects of a user's class are keyed by their class and what the trace
    reads of them (each new instance was a key of its own: a trace each, up to
    max_entries, then numpy; and every instance was kept alive for good)."""
    import gc
    import weakref
    x = np.ones((4, 8))
    refs = []
    for i in range(40):
        q = Request(2.0 if i % 2 else 3.0)
        assert q.run(x).tolist() == [(16.0 if i % 2 else 24.0)] * 4
        refs.append(weakref.ref(q))
        del q
    gc.collect()
    assert sum(r() is not None for r in refs) == 0
    assert Request.run.stats()["traces"] <= 2 and Request.run.stats()["eager_calls"] == 0


class _Scaler:
    def __init__(self, k):
        self.k = k

    @jit
    def forward(self, x):
        return x * self.k


def _twice(x, f):
    return f(f(x))


def test_a_jitted_method_passed_in_is_traced_inline_and_keyed():
    """`m.forward` of a jitted method passed as an argument: traced inline on
    its object, what it reads of it keyed (no warning that it cannot be)."""
    g, m, x = jit(_twice), _Scaler(2.0), np.arange(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        np.testing.assert_array_equal(g(x, m.forward), x * 4)
        m.k = 3.0
        np.testing.assert_array_equal(g(x, m.forward), x * 9)
        np.testing.assert_array_equal(g(x, _Scaler(5.0).forward), x * 25)


G_FACTOR = 2.0


class Tagged:
    SCALE = 3.0

    def __init__(self, a=1.0):
        self.a = a

    @classmethod
    def scaled(cls, x):
        return x * cls.SCALE

    @staticmethod
    def shifted(x):
        return x + G_FACTOR

    @property
    def twice(self):
        return self.a * G_FACTOR


class TaggedChild(Tagged):
    pass


def _through_object(o, x):
    return o.scaled(x) + o.shifted(x) + o.twice + getattr(o, "extra", 0.5)


def _same_objects(a, b, items, x):
    return x * (2 if a is b else 1) + x * (3 if a in items else 0)


def _inherited(c, x):
    return x * c.SCALE


def test_what_an_object_reads_through_its_class_and_its_identity_are_keyed():
    """A classmethod and a staticmethod called through an object, a property
    reading a global, an attribute read as missing (`getattr(o, "extra",
    0.5)`), a class attribute inherited by a subclass passed in, and the
    identity an object's `is`, `in` and `==` read: each is keyed, so a
    change or another object is never served a stale answer (probe 12)."""
    global G_FACTOR
    x = np.arange(3.0)
    f = jit(_through_object)
    o = Tagged()
    np.testing.assert_array_equal(f(o, x), _through_object(o, x))
    try:
        Tagged.SCALE, G_FACTOR = 4.0, 3.0
        np.testing.assert_array_equal(f(o, x), _through_object(o, x))
        o2 = Tagged(5.0)
        o2.extra = 7.0
        np.testing.assert_array_equal(f(o2, x), _through_object(o2, x))
    finally:
        Tagged.SCALE, G_FACTOR = 3.0, 2.0
    g, a, b = jit(_same_objects), Tagged(), Tagged()
    for args in ((a, a, [a], x), (a, b, [b], x), (b, b, [a], x), (a, b, [a, b], x)):
        np.testing.assert_array_equal(g(*args), _same_objects(*args))
    h = jit(_inherited)
    np.testing.assert_array_equal(h(TaggedChild, x), x * 3)
    try:
        Tagged.SCALE = 6.0
        np.testing.assert_array_equal(h(TaggedChild, x), x * 6)
    finally:
        Tagged.SCALE = 3.0


def _typed(o, x):
    return x * (2 if type(o) is Tagged else 1) * type(o).SCALE


def test_type_of_an_object_argument_is_its_class():
    """type(o) inside the function is the object's own class, its values
    keyed (it was shapejit's view class: `type(o) is P` False, `type(o).K`
    an AttributeError and the signature in numpy)."""
    f, x = jit(_typed), np.arange(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        for o in (Tagged(), TaggedChild(), Tagged()):
            np.testing.assert_array_equal(f(o, x), _typed(o, x))
        try:
            Tagged.SCALE = 5.0
            np.testing.assert_array_equal(f(Tagged(), x), _typed(Tagged(), x))
        finally:
            Tagged.SCALE = 3.0


def _types_of_values(x):
    total = 0
    for v in x:
        total += int(v)
    s = x.sum()
    return total, type(total).__name__, type(s).__name__, type(x) is np.ndarray, type(x.shape[0]).__name__, \
        type(x.shape[0] / 2).__name__, type(float(s)).__name__


def test_type_of_a_value_of_the_trace_is_numpys():
    """type() of a traced array, of a numpy scalar the trace made, of a
    Python int a loop added up, of a size and of a float of sizes is the
    type numpy's run has (it was shapejit's Tracer, SymInt or SymFloat: a
    returned `type(total).__name__` read 'Tracer', probe 17)."""
    f = jit(_types_of_values)
    for n in (0, 1, 2, 3, 10):
        x = np.arange(n)
        assert f(x) == _types_of_values(x)
    assert f.stats()["eager_calls"] == 0, f.explain()


@dataclasses.dataclass
class DenseParams:
    W: np.ndarray
    b: np.ndarray
    act: str = "relu"


def dense(p, x):
    y = x @ p.W + p.b
    return np.maximum(y, 0) if p.act == "relu" else np.tanh(y)


def test_a_dataclass_of_parameters_is_keyed_like_any_object_of_the_users(backend):
    """A dataclass (its __hash__ None, as @dataclass's __eq__ leaves it) passed
    as an argument: keyed by its class and what the trace reads of it (it
    ran in numpy on every call, "unhashable static argument")."""
    rng = np.random.default_rng(3)
    f = jit(dense, backend=backend)
    for n, act in ((2, "relu"), (5, "relu"), (9, "relu"), (4, "tanh"), (6, "tanh")):
        p, x = DenseParams(rng.standard_normal((3, 2)), rng.standard_normal(2), act), rng.standard_normal((n, 3))
        assert_like_numpy(f(p, x), dense(p, x))
    s = f.stats()
    assert s["eager_calls"] == 0 and s["traces"] <= 3, f.explain()

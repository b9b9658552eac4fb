"""float16 kernels: computed in float32 and rounded to float16 after every
op, as numpy's half loops compute (codegen/abi.py LLTYPE); casts to float16
round once (a float64 through float32 rounded to odd).  Differential tests
against numpy on both back ends, and on the LLVM back end the ops run in
kernels, not as numpy steps."""
from __future__ import annotations

import numpy as np
import pytest

from clustering.partition import FLOAT_DTYPES
from jit import jit
from tests.conftest import assert_like_numpy
from tests.test_ops import (BINARY, SHAPES_2D, UNARY, UNARY_DOMAIN, UNARY_TERM_SCALE, binary_inputs, check, rand,
                            rng)  # noqa: F401 - (the fixture)

H = np.float16
pytestmark = pytest.mark.skipif(np.dtype(H) not in FLOAT_DTYPES, reason="no F16C: numpy runs float16 here")

HALF_SPECIAL = np.array([np.nan, np.inf, -np.inf, -1.0, -0.0, 0.0, 1.0, -2.5, 3.0, 0.5, 6e-8, -6e-8, 65504.0,
                         -65504.0, 1e-5, 11.0, -11.0, 300.0], dtype=H)


def compiled(jf) -> None:
    """Every op of the traced entries ran in a kernel (no numpy step)."""
    steps = [ln for ln in jf.explain().splitlines() if "numpy: " in ln]
    assert all(any(f"= {op} " in ln for op in ("const", "dim", "reshape")) for ln in steps), jf.explain()


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, backend, rng):
    domain = UNARY_DOMAIN.get(name, "any")
    cases = [(rand(rng, s, H, domain),) for s in SHAPES_2D] + [(HALF_SPECIAL,), (HALF_SPECIAL[::-1].copy(),)]
    jf = check(UNARY[name], cases, backend, term_scale=UNARY_TERM_SCALE.get(name))
    if backend == "llvm":
        compiled(jf)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, backend, rng):
    cases = [binary_inputs(rng, name, s, s, H) for s in SHAPES_2D]
    x = HALF_SPECIAL
    cases += [(x, x[::-1].copy()), (x[::-1].copy(), x)]
    check(BINARY[name], cases, backend)


def test_every_op_rounds_to_float16_as_numpy_does(backend, rng):
    """A chain of arithmetic is numpy's bit for bit: each op's result is
    rounded to float16 before the next (300 * 300 overflows to inf, as in
    numpy, though float32 holds it), casts to float16 round once."""
    def chain(x, y, d):
        z = (x * y + 300.0) * 300.0 - x / (y + 3.0)
        return z, (d * 1.5).astype(H), (x + d).dtype, np.float32(2.0) * x

    jf = jit(chain, backend=backend)
    # float64 values just past a float16 tie: rounding them to the nearest
    # float32 first lands on the tie, then on the even float16 below
    ties = 1.0 + 2.0 ** -11 + np.array([2.0 ** -30, -2.0 ** -30, 0.0, 2.0 ** -40])
    for n in (9, 12, 31):
        x = (rng.standard_normal(n) * 4).astype(H)
        y = (rng.standard_normal(n) * 4).astype(H)
        d = np.resize(np.concatenate([ties / 1.5, rng.standard_normal(5)]), n)
        got, want = jf(x, y, d), chain(x, y, d)
        for g, w in zip(got, want):
            if isinstance(w, np.ndarray):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(g, w)
            else:
                assert g == w
    assert jf.stats()["traces"] == 1
    if backend == "llvm":
        compiled(jf)


@pytest.mark.parametrize("axis", [-1, 0, None])
def test_reductions(axis, backend, rng):
    def red(x):
        return (x.sum(axis=axis), x.max(axis=axis), x.min(axis=axis), x.mean(axis=axis),
                (x * 0.5).sum(axis=axis), x.argmax(axis=axis if axis is not None else None))

    jf = jit(red, backend=backend)
    for s in [(5, 7), (17, 33), (64, 100), (3, 9)]:
        x = rand(rng, s, H, "exact")
        assert_like_numpy(jf(x), red(x))
    assert jf.stats()["fallbacks"] == 0 and jf.stats()["eager_calls"] == 0


def test_softmax_gelu_and_layernorm_in_float16_compile_whole(backend, rng):
    """(numpy's float16 mean sums in float32: a cast the kernel fuses, not a
    sum with dtype= that numpy would run as a step of its own)"""
    def f(x, b):
        y = x + b
        g = 0.5 * y * (1.0 + np.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))
        e = np.exp(g - g.max(axis=-1, keepdims=True))
        s = e / e.sum(axis=-1, keepdims=True)
        d = s - s.mean(axis=-1, keepdims=True)
        return d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + 1e-5) * b

    jf = jit(f, backend=backend)
    for t in (16, 33, 128):
        x, b = rand(rng, (t, 64), H), rand(rng, 64, H)
        assert_like_numpy(jf(x, b), f(x, b), ulps=8)
    assert jf.stats()["traces"] == 1
    if backend == "llvm":
        compiled(jf)


def _half_loop(x, y, d, out):
    for i in range(x.shape[0]):
        a = x[i] * y[i] + 1          # float16 ops, each rounded, a Python int weak
        b = (a - 0.1) / (y[i] + 3.0)  # a Python float weak: float16 still
        c = np.sqrt(abs(b)) + np.tanh(x[i])
        if a > b:
            c = c * 3.0 * 7.1         # rounded after each product
        out[i] = c // 0.75 + c % 0.75
        d[i] = d[i] * x[i]            # float64 array times a float16: float64
        y[i] = d[i]                   # a float64 stored into float16: rounded once
    return out


def test_a_python_loop_over_float16_is_lifted_and_rounds_as_numpy(backend, rng):
    """A Python loop reading and writing float16 arrays becomes one kernel
    (jit/lift.py), every op rounded to float16 as numpy's float16 scalars
    round: one compile for every length, values numpy's bit for bit."""
    jf = jit(_half_loop, backend=backend)
    ties = 1.0 + 2.0 ** -11 + np.array([2.0 ** -30, -2.0 ** -30, 0.0, 2.0 ** -40])
    for n in (9, 12, 31, 4):
        x = np.concatenate([(rng.standard_normal(n - 4) * 4), [1.0, -2.0, 0.5, 3.0]]).astype(H)
        y = np.concatenate([(rng.standard_normal(n - 4) * 2), [0.25, -1.5, 2.0, -0.75]]).astype(H)
        d = np.concatenate([rng.standard_normal(n - 4), ties])
        args = [x, y, d, np.zeros(n, H)]
        mine = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        with np.errstate(all="ignore"):
            want = _half_loop(*args)
            got = jf(*mine)
        for g, w in zip([got] + mine[:4], [want] + args[:4]):
            assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True), (g, w)
    assert jf.stats()["compiles"] == 1 and jf.stats()["fallbacks"] == 0
    if backend == "llvm":
        assert "pyloop" in jf.explain()


def _window_sums(a, out):
    for i in range(a.shape[0] - 2):
        out[i] = a[i:i + 3].sum() * 0.5
    return out


@pytest.mark.parametrize("dtype", [np.float32, H], ids=lambda d: np.dtype(d).name)
def test_a_float16_sum_in_a_loop_is_not_lifted(dtype, backend, rng):
    """numpy's float16 sum keeps its own order and rounding: a loop summing
    float16 windows is not lifted (float32's is), and gives numpy's values."""
    jf = jit(_window_sums, backend=backend)
    for n in (9, 14):
        a = (rng.standard_normal(n) * 3).astype(dtype)
        assert_like_numpy(jf(a, np.zeros(n - 2, dtype)), _window_sums(a, np.zeros(n - 2, dtype)))
    assert ("pyloop" in jf.explain()) == (dtype is np.float32)


def test_a_float16_sum_over_several_axes_rounds_once_as_numpy(backend):
    """x.sum() of a 2-D float16 array: numpy accumulates in float32 and
    rounds once; split into row sums, each rounded to float16 and then
    added, it was up to 36 ulp off (45 of 100 random arrays differed)."""
    f = jit(lambda x: (x.sum(), x.sum(axis=(0, 2)), x.prod(), x.max()), backend=backend)
    rng = np.random.default_rng(14)
    for k in range(40):
        x = (rng.standard_normal((3 + k % 7, 8, 2)) * 3).astype(np.float16)
        assert_like_numpy(f(x), (x.sum(), x.sum(axis=(0, 2)), x.prod(), x.max()), ulps=0)


def test_a_float16_vector_dot_is_numpys():
    """numpy's float16 dot adds the products in float32 (rounding once at
    the end): x @ y of two float16 vectors stays numpy's call, not a product
    rounded to float16 per element and then summed (16.0 for 12.59 below;
    1-6 float16 ulps on random data: probe 14)."""
    f = jit(lambda x, y: (x @ y, np.dot(x, y)))
    x = np.array([100.3125, -100.0, 0.0], np.float16)
    y = np.array([100.3125, 100.5, 0.0], np.float16)
    rng = np.random.default_rng(0)
    for a, b in [(x, y)] + [(rng.standard_normal(n).astype(np.float16), rng.standard_normal(n).astype(np.float16))
                            for n in (5, 100, 4097)]:
        for got, want in zip(f(a, b), (a @ b, np.dot(a, b))):
            assert type(got) is type(want) and got.dtype == want.dtype
            assert got.tobytes() == want.tobytes(), (got, want)

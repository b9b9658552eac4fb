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

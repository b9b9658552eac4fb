"""Reference workloads, written as plain numpy code (float32 throughout).

These numpy functions are the baseline *and* exactly what shapejit is asked to
jit, so they stick to ordinary numpy: elementwise ufuncs, reductions with
``axis=-1, keepdims=True``, ``@``, ``reshape`` and ``transpose``.

Every workload is ``fn(*inputs)`` where ``inputs = make_inputs(size, rng)`` is a
tuple of float32 arrays.  ``WORKLOADS`` maps name -> (fn, make_inputs) so that
tests can reuse the functions without importing any benchmark machinery::

    fn, make = WORKLOADS["layernorm"]
    out = fn(*make(128, np.random.default_rng(0)))

Sizes: an int ``T`` (rows) for gelu_bias/layernorm/softmax/mlp, an int ``S``
(sequence length) for attention, and a ``(B, S)`` tuple for bert_layer.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32

D_MODEL = 768
D_FF = 3072
N_HEADS = 12
D_HEAD = 64
SOFTMAX_COLS = 512


# ---------------------------------------------------------------- functions


def gelu(y):
    """tanh approximation of GELU."""
    return 0.5 * y * (1.0 + np.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


def gelu_bias(x, b):
    y = x + b
    return 0.5 * y * (1.0 + np.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


def layernorm(x, g, b, eps=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=-1, keepdims=True)
    return d / np.sqrt(var + eps) * g + b


def softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def mlp(x, w1, b1, w2, b2):
    return gelu(x @ w1 + b1) @ w2 + b2


def attention(q, k, v):
    s = (q @ np.swapaxes(k, -1, -2)) / 8.0
    return softmax(s) @ v


def bert_layer(x, wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, b1, w2, b2, g2, be2):
    """BERT-base encoder layer (post-LN), x: [B, S, 768].

    Parameters are passed flat (not as a dict) so that a tracing JIT only ever
    sees positional arrays.  Order: see ``BERT_PARAM_NAMES``.
    """
    B, S, D = x.shape
    q = (x @ wq + bq).reshape(B, S, N_HEADS, D_HEAD).transpose(0, 2, 1, 3)
    k = (x @ wk + bk).reshape(B, S, N_HEADS, D_HEAD).transpose(0, 2, 1, 3)
    v = (x @ wv + bv).reshape(B, S, N_HEADS, D_HEAD).transpose(0, 2, 1, 3)
    s = (q @ k.transpose(0, 1, 3, 2)) / 8.0          # [B, H, S, S]
    a = softmax(s) @ v                               # [B, H, S, 64]
    a = a.transpose(0, 2, 1, 3).reshape(B, S, D)     # merge heads
    h = layernorm(x + (a @ wo + bo), g1, be1)
    f = gelu(h @ w1 + b1) @ w2 + b2
    return layernorm(h + f, g2, be2)


BERT_PARAM_NAMES = ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo",
                    "g1", "be1", "w1", "b1", "w2", "b2", "g2", "be2")


# ---------------------------------------------------------------- inputs


def _normal(rng, shape, scale=1.0):
    return (rng.standard_normal(shape, dtype=F32) * F32(scale)).astype(F32)


def make_gelu_bias(T, rng):
    return _normal(rng, (T, D_FF)), _normal(rng, (D_FF,), 0.1)


def make_layernorm(T, rng):
    return (_normal(rng, (T, D_MODEL)),
            (1.0 + _normal(rng, (D_MODEL,), 0.1)).astype(F32),
            _normal(rng, (D_MODEL,), 0.1))


def make_softmax(T, rng):
    return (_normal(rng, (T, SOFTMAX_COLS), 3.0),)


def make_mlp(T, rng):
    return (_normal(rng, (T, D_MODEL)),
            _normal(rng, (D_MODEL, D_FF), 0.02), _normal(rng, (D_FF,), 0.02),
            _normal(rng, (D_FF, D_MODEL), 0.02), _normal(rng, (D_MODEL,), 0.02))


def make_attention(S, rng):
    return tuple(_normal(rng, (N_HEADS, S, D_HEAD)) for _ in range(3))


def make_bert_params(rng):
    """The 16 BERT parameters, in ``BERT_PARAM_NAMES`` order."""
    D, F = D_MODEL, D_FF
    w = lambda *s: _normal(rng, s, 0.02)  # noqa: E731
    gain = lambda n: (1.0 + _normal(rng, (n,), 0.1)).astype(F32)  # noqa: E731
    return (w(D, D), w(D), w(D, D), w(D), w(D, D), w(D), w(D, D), w(D),
            gain(D), w(D), w(D, F), w(F), w(F, D), w(D), gain(D), w(D))


def make_bert_layer(size, rng):
    B, S = size
    return (_normal(rng, (B, S, D_MODEL)),) + make_bert_params(rng)


WORKLOADS = {
    "gelu_bias": (gelu_bias, make_gelu_bias),
    "layernorm": (layernorm, make_layernorm),
    "softmax": (softmax, make_softmax),
    "mlp": (mlp, make_mlp),
    "attention": (attention, make_attention),
    "bert_layer": (bert_layer, make_bert_layer),
}

# Benchmark sizes: full run, and the reduced set for --quick.
SIZES = {
    "gelu_bias": [128, 1024, 4096],
    "layernorm": [128, 1024, 4096],
    "softmax": [128, 1024, 4096],
    "mlp": [128, 512],
    "attention": [128, 512],
    "bert_layer": [(1, 128), (1, 256), (1, 384), (8, 384)],
}
QUICK_SIZES = {
    "gelu_bias": [128, 4096],
    "layernorm": [128, 4096],
    "softmax": [128, 4096],
    "mlp": [128],
    "attention": [128],
    "bert_layer": [(1, 128)],
}


def size_label(name, size):
    if name == "bert_layer":
        return "B=%d,S=%d" % size
    return ("S=%d" if name == "attention" else "T=%d") % size


def io_bytes(name, size):
    """Bytes that must cross memory once (all inputs + the output)."""
    fn, make = WORKLOADS[name]
    ins = make(size, np.random.default_rng(0))
    out = fn(*ins)
    return sum(a.nbytes for a in ins) + out.nbytes

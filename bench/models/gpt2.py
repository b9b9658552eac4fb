"""GPT-2 forward pass in plain numpy, two ways numpy ports write it.

``gpt2`` splits heads with reshape/transpose and runs them as one batched
product; ``gpt2_pico`` is the picoGPT shape of the code: ``len(ids)`` for the
positions, ``np.split`` into a Python list of heads, one attention per head
and ``np.hstack`` to merge.  Both take ``(ids, params, n_head)``: ``ids`` an
int64 array [T], ``params`` the nested dict of ``init_params`` (the layout of
the released checkpoint: ``wte``, ``wpe``, ``blocks[i]["attn"]["c_attn"]["w"]``
...), ``n_head`` a Python int.  They return float32 logits [T, vocab].

Weights are random (a seeded Generator): the models are benchmarks and tests,
not language models.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32


def gelu(x):
    """tanh approximation (Hendrycks & Gimpel), as GPT-2 uses it."""
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return g * (x - mu) / np.sqrt(var + eps) + b


def linear(x, w, b):
    return x @ w + b


def causal_mask(T, dtype):
    """0 on and below the diagonal, -1e10 above it."""
    return (1 - np.tri(T, dtype=dtype)) * -1e10


# ------------------------------------------------ batched heads (reshape)


def attention(x, c_attn, c_proj, n_head):
    T, C = x.shape
    hd = C // n_head
    qkv = linear(x, **c_attn)                                  # [T, 3C]
    q, k, v = np.split(qkv, 3, axis=-1)
    q = q.reshape(T, n_head, hd).transpose(1, 0, 2)            # [H, T, hd]
    k = k.reshape(T, n_head, hd).transpose(1, 0, 2)
    v = v.reshape(T, n_head, hd).transpose(1, 0, 2)
    scores = q @ k.transpose(0, 2, 1) * hd ** -0.5 + causal_mask(T, x.dtype)
    out = softmax(scores) @ v                                  # [H, T, hd]
    out = out.transpose(1, 0, 2).reshape(T, C)
    return linear(out, **c_proj)


def mlp(x, c_fc, c_proj):
    return linear(gelu(linear(x, **c_fc)), **c_proj)


def block(x, ln_1, attn, ln_2, mlp_params, n_head):
    x = x + attention(layer_norm(x, **ln_1), **attn, n_head=n_head)
    return x + mlp(layer_norm(x, **ln_2), **mlp_params)


def gpt2(ids, params, n_head):
    T = ids.shape[0]
    x = params["wte"][ids] + params["wpe"][np.arange(T)]
    for p in params["blocks"]:
        x = block(x, p["ln_1"], p["attn"], p["ln_2"], p["mlp"], n_head)
    x = layer_norm(x, **params["ln_f"])
    return x @ params["wte"].T


# ------------------------------------------------ picoGPT style (list of heads)


def attention_pico(x, c_attn, c_proj, n_head):
    x = linear(x, **c_attn)
    q, k, v = np.split(x, 3, axis=-1)
    heads = zip(np.split(q, n_head, axis=-1), np.split(k, n_head, axis=-1),
                np.split(v, n_head, axis=-1))
    mask = causal_mask(x.shape[0], x.dtype)
    outs = [softmax(qh @ kh.T / np.sqrt(qh.shape[-1], dtype=x.dtype) + mask) @ vh
            for qh, kh, vh in heads]
    return linear(np.hstack(outs), **c_proj)


def gpt2_pico(ids, params, n_head):
    x = params["wte"][ids] + params["wpe"][np.arange(len(ids))]
    for p in params["blocks"]:
        x = x + attention_pico(layer_norm(x, **p["ln_1"]), **p["attn"], n_head=n_head)
        x = x + mlp(layer_norm(x, **p["ln_2"]), **p["mlp"])
    return layer_norm(x, **params["ln_f"]) @ params["wte"].T


# ------------------------------------------------ weights


SMALL = dict(n_vocab=500, n_ctx=128, n_embd=64, n_head=4, n_layer=2)
BENCH = dict(n_vocab=8192, n_ctx=1024, n_embd=768, n_head=12, n_layer=2)  # 124M's width, 2 layers


def init_params(n_vocab, n_ctx, n_embd, n_head, n_layer, seed=0):
    rng = np.random.default_rng(seed)
    C = n_embd

    def w(*shape, scale=0.02):
        return rng.standard_normal(shape, dtype=F32) * F32(scale)

    def ln():
        return {"g": 1 + w(C, scale=0.1), "b": w(C)}

    blocks = [{"ln_1": ln(),
               "attn": {"c_attn": {"w": w(C, 3 * C), "b": w(3 * C)},
                        "c_proj": {"w": w(C, C), "b": w(C)}},
               "ln_2": ln(),
               "mlp": {"c_fc": {"w": w(C, 4 * C), "b": w(4 * C)},
                       "c_proj": {"w": w(4 * C, C), "b": w(C)}}}
              for _ in range(n_layer)]
    return {"wte": w(n_vocab, C), "wpe": w(n_ctx, C, scale=0.01), "blocks": blocks, "ln_f": ln()}


def token_ids(T, n_vocab, seed=0):
    return np.random.default_rng(seed).integers(0, n_vocab, size=T, dtype=np.int64)

"""Llama (2) forward pass in plain numpy, as a class with a KV cache.

The way numpy ports write it: the weights and the cache live on ``self``,
``forward(ids, start_pos)`` writes this call's keys and values into the cache
in place (``self.cache_k[i][:B, start_pos:start_pos + T] = xk``) and attends
over ``cache[:B, :start_pos + T]``; ``start_pos`` is a Python int that grows
by one per decoded token.  RMSNorm, rotary embeddings on the interleaved
pairs ``x[..., ::2]`` / ``x[..., 1::2]``, SwiGLU MLP, grouped-query attention
(``n_kv_heads < n_heads``, keys repeated with ``np.repeat``), a causal mask
for prefill.

``Llama(params, cfg, jit_options)`` jits its forward the way a user would:
``self.forward = jit(self._forward, **jit_options)``; ``jit_options=None``
keeps plain numpy (the reference).
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32

SMALL = dict(vocab=500, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, hidden=176, max_seq=64)
BENCH = dict(vocab=8192, dim=768, n_layers=2, n_heads=12, n_kv_heads=4, hidden=2048, max_seq=1024)


def rms_norm(x, w, eps=1e-5):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def rope_tables(head_dim, max_seq, theta=10000.0):
    """cos and sin of position * frequency, [max_seq, head_dim // 2] float32."""
    freqs = 1.0 / theta ** (np.arange(0, head_dim, 2) / head_dim)
    angles = np.outer(np.arange(max_seq), freqs)
    return np.cos(angles).astype(F32), np.sin(angles).astype(F32)


def apply_rope(x, cos, sin):
    """Rotate the pairs (x[2i], x[2i+1]) of x [B, T, H, hd] by the angles of cos/sin [T, hd/2]."""
    cos = cos[:, None, :]
    sin = sin[:, None, :]
    even, odd = x[..., ::2], x[..., 1::2]
    out = np.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return out.reshape(x.shape)


class Llama:
    def __init__(self, params, cfg, jit_options=None, batch=1, kv_cache=True):
        self.p = params
        self.kv_cache = kv_cache  # False: attend over this call's keys only (a prefill from 0, no state)
        self.n_heads, self.n_kv_heads = cfg["n_heads"], cfg["n_kv_heads"]
        self.head_dim = cfg["dim"] // cfg["n_heads"]
        self.max_seq = cfg["max_seq"]
        self.freqs_cos, self.freqs_sin = rope_tables(self.head_dim, self.max_seq)
        shape = (batch, self.max_seq, self.n_kv_heads, self.head_dim)
        self.cache_k = [np.zeros(shape, F32) for _ in params["layers"]]
        self.cache_v = [np.zeros(shape, F32) for _ in params["layers"]]
        if jit_options is None:
            self.forward = self._forward
        else:
            from jit import jit
            self.forward = jit(self._forward, **jit_options)

    # -------------------------------------------------------------- model
    def _attention(self, x, i, lp, start_pos, cos, sin, mask):
        B, T, _ = x.shape
        H, KV, hd = self.n_heads, self.n_kv_heads, self.head_dim
        xq = (x @ lp["wq"]).reshape(B, T, H, hd)
        xk = (x @ lp["wk"]).reshape(B, T, KV, hd)
        xv = (x @ lp["wv"]).reshape(B, T, KV, hd)
        xq, xk = apply_rope(xq, cos, sin), apply_rope(xk, cos, sin)

        if self.kv_cache:
            self.cache_k[i][:B, start_pos:start_pos + T] = xk
            self.cache_v[i][:B, start_pos:start_pos + T] = xv
            keys = self.cache_k[i][:B, :start_pos + T]
            values = self.cache_v[i][:B, :start_pos + T]
        else:
            keys, values = xk, xv
        if KV != H:
            keys = np.repeat(keys, H // KV, axis=2)
            values = np.repeat(values, H // KV, axis=2)

        q = xq.transpose(0, 2, 1, 3)                            # [B, H, T, hd]
        scores = q @ keys.transpose(0, 2, 3, 1) / math.sqrt(hd)  # [B, H, T, L]
        if mask is not None:
            scores = scores + mask
        out = softmax(scores) @ values.transpose(0, 2, 1, 3)    # [B, H, T, hd]
        return out.transpose(0, 2, 1, 3).reshape(B, T, H * hd) @ lp["wo"]

    def _ffn(self, x, lp):
        return (silu(x @ lp["w1"]) * (x @ lp["w3"])) @ lp["w2"]

    def _forward(self, ids, start_pos):
        """ids [B, T] int64, start_pos a Python int -> logits [B, T, vocab]."""
        B, T = ids.shape
        h = self.p["tok_embeddings"][ids]
        cos = self.freqs_cos[start_pos:start_pos + T]
        sin = self.freqs_sin[start_pos:start_pos + T]
        mask = None
        if T > 1:
            mask = np.triu(np.full((T, T), -np.inf, dtype=F32), k=1)
            mask = np.hstack([np.zeros((T, start_pos), dtype=F32), mask])
        for i, lp in enumerate(self.p["layers"]):
            h = h + self._attention(rms_norm(h, lp["attention_norm"]), i, lp, start_pos, cos, sin, mask)
            h = h + self._ffn(rms_norm(h, lp["ffn_norm"]), lp)
        return rms_norm(h, self.p["norm"]) @ self.p["output"]

    # -------------------------------------------------------------- use
    def prefill(self, ids):
        """ids [T] or [B, T]: fills the cache from position 0, returns logits [B, T, vocab]."""
        ids = np.atleast_2d(np.asarray(ids, dtype=np.int64))
        return self.forward(ids, 0)

    def decode_step(self, token, start_pos):
        """One token per sequence at position start_pos: logits [B, vocab]."""
        ids = np.asarray(token, dtype=np.int64).reshape(-1, 1)
        return self.forward(ids, start_pos)[:, -1]

    def generate(self, prompt, steps):
        """Greedy decoding: the prompt's prefill, then `steps` decode steps; the logits of each."""
        logits = [self.prefill(prompt)[:, -1]]
        pos = np.atleast_2d(prompt).shape[1]
        for _ in range(steps):
            logits.append(self.decode_step(np.argmax(logits[-1], axis=-1), pos))
            pos += 1
        return logits


def init_params(vocab, dim, n_layers, n_heads, n_kv_heads, hidden, max_seq=None, seed=0):
    rng = np.random.default_rng(seed)
    hd = dim // n_heads

    def w(*shape, scale=0.02):
        return rng.standard_normal(shape, dtype=F32) * F32(scale)

    layers = [{"attention_norm": 1 + w(dim, scale=0.1),
               "wq": w(dim, n_heads * hd), "wk": w(dim, n_kv_heads * hd), "wv": w(dim, n_kv_heads * hd),
               "wo": w(n_heads * hd, dim),
               "ffn_norm": 1 + w(dim, scale=0.1),
               "w1": w(dim, hidden), "w3": w(dim, hidden), "w2": w(hidden, dim)}
              for _ in range(n_layers)]
    return {"tok_embeddings": w(vocab, dim), "layers": layers,
            "norm": 1 + w(dim, scale=0.1), "output": w(dim, vocab)}

"""The same two models in torch eager (CPU), for the benchmark's torch column.

Optional: only imported when torch is importable.  The weights are the numpy
arrays, shared through ``torch.from_numpy``; the math is the numpy models'.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


def to_torch(tree):
    if isinstance(tree, dict):
        return {k: to_torch(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [to_torch(v) for v in tree]
    return torch.from_numpy(tree)


def _gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def _ln(x, p):
    return F.layer_norm(x, x.shape[-1:], p["g"], p["b"], 1e-5)


def _linear(x, p):
    return torch.addmm(p["b"], x, p["w"])


@torch.no_grad()
def gpt2(ids, params, n_head):
    """ids: int64 tensor [T]; params: ``to_torch(gpt2.init_params(...))``."""
    T = ids.shape[0]
    x = params["wte"][ids] + params["wpe"][:T]
    mask = torch.triu(torch.full((T, T), -1e10), 1)
    for p in params["blocks"]:
        h = _ln(x, p["ln_1"])
        C = h.shape[-1]
        q, k, v = _linear(h, p["attn"]["c_attn"]).split(C, dim=-1)
        q, k, v = (t.reshape(T, n_head, C // n_head).transpose(0, 1) for t in (q, k, v))
        a = torch.softmax(q @ k.transpose(1, 2) * (C // n_head) ** -0.5 + mask, dim=-1) @ v
        x = x + _linear(a.transpose(0, 1).reshape(T, C), p["attn"]["c_proj"])
        h = _ln(x, p["ln_2"])
        x = x + _linear(_gelu(_linear(h, p["mlp"]["c_fc"])), p["mlp"]["c_proj"])
    return _ln(x, params["ln_f"]) @ params["wte"].T


class Llama:
    """torch port of ``bench.models.llama.Llama`` (same weights, same cache layout)."""

    def __init__(self, params, cfg, batch=1):
        from .llama import rope_tables
        self.p = to_torch(params)
        self.H, self.KV = cfg["n_heads"], cfg["n_kv_heads"]
        self.hd = cfg["dim"] // cfg["n_heads"]
        cos, sin = rope_tables(self.hd, cfg["max_seq"])
        self.cos, self.sin = torch.from_numpy(cos), torch.from_numpy(sin)
        shape = (batch, cfg["max_seq"], self.KV, self.hd)
        self.cache_k = [torch.zeros(shape) for _ in params["layers"]]
        self.cache_v = [torch.zeros(shape) for _ in params["layers"]]

    @staticmethod
    def _rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    def _rope(self, x, cos, sin):
        cos, sin = cos[:, None, :], sin[:, None, :]
        even, odd = x[..., ::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).reshape(x.shape)

    @torch.no_grad()
    def forward(self, ids, start_pos):
        B, T = ids.shape
        H, KV, hd = self.H, self.KV, self.hd
        h = self.p["tok_embeddings"][ids]
        cos, sin = self.cos[start_pos:start_pos + T], self.sin[start_pos:start_pos + T]
        mask = None
        if T > 1:
            mask = torch.hstack([torch.zeros(T, start_pos), torch.triu(torch.full((T, T), -math.inf), 1)])
        for i, lp in enumerate(self.p["layers"]):
            x = self._rms(h, lp["attention_norm"])
            q = self._rope((x @ lp["wq"]).reshape(B, T, H, hd), cos, sin)
            k = self._rope((x @ lp["wk"]).reshape(B, T, KV, hd), cos, sin)
            self.cache_k[i][:B, start_pos:start_pos + T] = k
            self.cache_v[i][:B, start_pos:start_pos + T] = (x @ lp["wv"]).reshape(B, T, KV, hd)
            keys = self.cache_k[i][:B, :start_pos + T].repeat_interleave(H // KV, dim=2)
            values = self.cache_v[i][:B, :start_pos + T].repeat_interleave(H // KV, dim=2)
            s = q.transpose(1, 2) @ keys.permute(0, 2, 3, 1) / math.sqrt(hd)
            if mask is not None:
                s = s + mask
            a = torch.softmax(s, dim=-1) @ values.transpose(1, 2)
            h = h + a.transpose(1, 2).reshape(B, T, H * hd) @ lp["wo"]
            x = self._rms(h, lp["ffn_norm"])
            h = h + (F.silu(x @ lp["w1"]) * (x @ lp["w3"])) @ lp["w2"]
        return self._rms(h, self.p["norm"]) @ self.p["output"]

    def prefill(self, ids):
        return self.forward(torch.from_numpy(np.atleast_2d(np.asarray(ids, dtype=np.int64))), 0)

    def decode_step(self, token, start_pos):
        ids = torch.from_numpy(np.asarray(token, dtype=np.int64).reshape(-1, 1))
        return self.forward(ids, start_pos)[:, -1]

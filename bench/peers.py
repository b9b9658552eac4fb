"""The implementations compared by the benchmark, one ``Peer`` per column.

Every peer library is optional and imported lazily, on first use: if the
import fails, ``peer.available()`` is False, ``peer.reason`` says why, and the
report shows "n/a".  A peer that does not implement a workload (numba for a
matmul, say) returns ``None`` from ``build`` and the report shows "—".

A peer turns a workload into something callable in three steps::

    fn = peer.build("layernorm")        # a *fresh* function/compiled object
    args = peer.convert(numpy_inputs)   # e.g. torch.from_numpy, jax.device_put
    out = peer.run(fn, args)            # one call, synchronised
    peer.to_numpy(out)                  # for the correctness check
"""

from __future__ import annotations

import os

import numpy as np

from . import workloads as W

MATMUL_HEAVY = ("mlp", "attention", "bert_layer")


class Peer:
    """numpy eager; the base class for the others."""

    name = "numpy"
    module = None            # import name of the library, None for numpy
    compiles = False         # True for jit-style peers (has a compile count)

    def __init__(self):
        self._ok = None
        self.reason = ""

    # -- availability -------------------------------------------------------
    def available(self) -> bool:
        if self._ok is None:
            try:
                self._import()
                self._ok = True
            except Exception as e:  # ImportError, but also broken installs
                self._ok = False
                self.reason = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return self._ok

    def _import(self):
        pass

    # -- per workload ---------------------------------------------------------
    def build(self, workload: str):
        """A fresh callable for ``workload``, or None if not implemented."""
        return W.WORKLOADS[workload][0]

    def convert(self, inputs):
        return inputs

    def run(self, fn, args):
        return fn(*args)

    def to_numpy(self, out):
        return np.asarray(out)

    def compile_count(self, fn, shapes_seen):
        """Number of compiles ``fn`` has done so far (None if not meaningful)."""
        return None


# ---------------------------------------------------------------- numexpr


class NumexprPeer(Peer):
    name = "numexpr"
    module = "numexpr"

    def _import(self):
        import numexpr
        numexpr.set_num_threads(os.cpu_count() or 1)
        self.ne = numexpr

    def build(self, workload):
        ne = self.ne

        # Float literals would make numexpr compute in float64: pass float32s.
        consts = {"half": np.float32(0.5), "c0": np.float32(0.7978845608),
                  "c1": np.float32(0.044715)}

        def gelu_bias(x, b):
            return ne.evaluate(
                "half * (x + b) * (1 + tanh(c0 * ((x + b) + c1 * (x + b) * (x + b) * (x + b))))",
                local_dict=dict(consts, x=x, b=b))

        # Reductions stay in numpy; numexpr does the elementwise parts.
        def layernorm(x, g, b, eps=1e-5):
            mean = np.mean(x, axis=-1, keepdims=True)
            d = ne.evaluate("x - mean", local_dict={"x": x, "mean": mean})
            var = np.mean(ne.evaluate("d * d", local_dict={"d": d}), axis=-1, keepdims=True)
            return ne.evaluate("d / sqrt(var + eps) * g + b", local_dict={
                "d": d, "var": var, "eps": np.float32(eps), "g": g, "b": b})

        def softmax(x):
            m = np.max(x, axis=-1, keepdims=True)
            e = ne.evaluate("exp(x - m)", local_dict={"x": x, "m": m})
            s = np.sum(e, axis=-1, keepdims=True)
            return ne.evaluate("e / s", local_dict={"e": e, "s": s})

        return {"gelu_bias": gelu_bias, "layernorm": layernorm, "softmax": softmax}.get(workload)


# ---------------------------------------------------------------- numba


class NumbaPeer(Peer):
    """Explicit loop versions, @njit(parallel=True, fastmath=False)."""

    name = "numba"
    module = "numba"

    def _import(self):
        import numba  # noqa: F401  (only to fail early if it is missing)
        self._fns = None

    def _define(self):
        from numba import njit, prange
        f32 = np.float32
        C0, C1, HALF, ONE = f32(0.7978845608), f32(0.044715), f32(0.5), f32(1.0)

        @njit(parallel=True, fastmath=False)
        def gelu_bias(x, b):
            T, N = x.shape
            out = np.empty_like(x)
            for i in prange(T):
                for j in range(N):
                    y = x[i, j] + b[j]
                    out[i, j] = HALF * y * (ONE + np.tanh(C0 * (y + C1 * y * y * y)))
            return out

        @njit(parallel=True, fastmath=False)
        def layernorm(x, g, b, eps=1e-5):
            T, N = x.shape
            out = np.empty_like(x)
            for i in prange(T):
                s = 0.0                       # float64 accumulators
                for j in range(N):
                    s += x[i, j]
                mean = s / N
                v = 0.0
                for j in range(N):
                    d = x[i, j] - mean
                    v += d * d
                inv = 1.0 / np.sqrt(v / N + eps)
                for j in range(N):
                    out[i, j] = f32((x[i, j] - mean) * inv) * g[j] + b[j]
            return out

        @njit(parallel=True, fastmath=False)
        def softmax(x):
            T, N = x.shape
            out = np.empty_like(x)
            for i in prange(T):
                m = x[i, 0]
                for j in range(1, N):
                    m = max(m, x[i, j])
                s = f32(0.0)
                for j in range(N):
                    e = np.exp(x[i, j] - m)
                    out[i, j] = e
                    s += e
                inv = ONE / s
                for j in range(N):
                    out[i, j] *= inv
            return out

        self._fns = {"gelu_bias": gelu_bias, "layernorm": layernorm, "softmax": softmax}

    def build(self, workload):
        if self._fns is None:
            self._define()
        return self._fns.get(workload)


# ---------------------------------------------------------------- torch


def _torch_fns(torch):
    """torch versions of the workloads, op for op the same as the numpy ones."""

    def gelu(y):
        return 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))

    def gelu_bias(x, b):
        return gelu(x + b)

    def layernorm(x, g, b, eps=1e-5):
        mean = x.mean(dim=-1, keepdim=True)
        d = x - mean
        var = (d * d).mean(dim=-1, keepdim=True)
        return d / torch.sqrt(var + eps) * g + b

    def softmax(x):
        m = x.amax(dim=-1, keepdim=True)
        e = torch.exp(x - m)
        return e / e.sum(dim=-1, keepdim=True)

    def mlp(x, w1, b1, w2, b2):
        return gelu(x @ w1 + b1) @ w2 + b2

    def attention(q, k, v):
        return softmax((q @ k.transpose(-1, -2)) / 8.0) @ v

    def bert_layer(x, wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, b1, w2, b2, g2, be2):
        B, S, D = x.shape
        H, Dh = W.N_HEADS, W.D_HEAD
        q = (x @ wq + bq).reshape(B, S, H, Dh).transpose(1, 2)
        k = (x @ wk + bk).reshape(B, S, H, Dh).transpose(1, 2)
        v = (x @ wv + bv).reshape(B, S, H, Dh).transpose(1, 2)
        a = softmax((q @ k.transpose(-1, -2)) / 8.0) @ v
        a = a.transpose(1, 2).reshape(B, S, D)
        h = layernorm(x + (a @ wo + bo), g1, be1)
        f = gelu(h @ w1 + b1) @ w2 + b2
        return layernorm(h + f, g2, be2)

    return {"gelu_bias": gelu_bias, "layernorm": layernorm, "softmax": softmax,
            "mlp": mlp, "attention": attention, "bert_layer": bert_layer}


class TorchPeer(Peer):
    name = "torch"
    module = "torch"

    def _import(self):
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
        torch.set_grad_enabled(False)
        self.torch = torch
        self.fns = _torch_fns(torch)

    def build(self, workload):
        return self.fns[workload]

    def convert(self, inputs):
        return tuple(self.torch.from_numpy(a) for a in inputs)

    def to_numpy(self, out):
        return out.numpy()


class TorchCompilePeer(TorchPeer):
    """torch.compile(dynamic=True), default backend (inductor)."""

    name = "torch.compile"
    compiles = True

    def build(self, workload):
        # A new wrapper around a new function object: no dynamo cache entries
        # are shared with earlier builds of the same workload.
        src = self.fns[workload]
        fresh = lambda *a: src(*a)  # noqa: E731
        return self.torch.compile(fresh, dynamic=True)

    def reset(self):
        """Forget every compiled graph and zero dynamo's counters."""
        self.torch._dynamo.reset()
        self._counters().clear()

    def _counters(self):
        from torch._dynamo.utils import counters
        return counters

    def compile_count(self, fn, shapes_seen):
        try:
            return int(self._counters()["stats"]["unique_graphs"])
        except Exception:
            return "?"


# ---------------------------------------------------------------- jax


def _jax_fns(jnp):

    def gelu(y):
        return 0.5 * y * (1.0 + jnp.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))

    def gelu_bias(x, b):
        return gelu(x + b)

    def layernorm(x, g, b, eps=1e-5):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        d = x - mean
        var = jnp.mean(d * d, axis=-1, keepdims=True)
        return d / jnp.sqrt(var + eps) * g + b

    def softmax(x):
        m = jnp.max(x, axis=-1, keepdims=True)
        e = jnp.exp(x - m)
        return e / jnp.sum(e, axis=-1, keepdims=True)

    def mlp(x, w1, b1, w2, b2):
        return gelu(x @ w1 + b1) @ w2 + b2

    def attention(q, k, v):
        return softmax((q @ jnp.swapaxes(k, -1, -2)) / 8.0) @ v

    def bert_layer(x, wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, b1, w2, b2, g2, be2):
        B, S, D = x.shape
        H, Dh = W.N_HEADS, W.D_HEAD
        q = (x @ wq + bq).reshape(B, S, H, Dh).transpose(0, 2, 1, 3)
        k = (x @ wk + bk).reshape(B, S, H, Dh).transpose(0, 2, 1, 3)
        v = (x @ wv + bv).reshape(B, S, H, Dh).transpose(0, 2, 1, 3)
        a = softmax((q @ k.transpose(0, 1, 3, 2)) / 8.0) @ v
        a = a.transpose(0, 2, 1, 3).reshape(B, S, D)
        h = layernorm(x + (a @ wo + bo), g1, be1)
        f = gelu(h @ w1 + b1) @ w2 + b2
        return layernorm(h + f, g2, be2)

    return {"gelu_bias": gelu_bias, "layernorm": layernorm, "softmax": softmax,
            "mlp": mlp, "attention": attention, "bert_layer": bert_layer}


class JaxPeer(Peer):
    name = "jax.jit"
    module = "jax"
    compiles = True

    def _import(self):
        import jax
        import jax.numpy as jnp
        self.jax = jax
        self.fns = _jax_fns(jnp)

    def build(self, workload):
        src = self.fns[workload]
        fresh = lambda *a: src(*a)  # noqa: E731  (new identity: no shared traces)
        return self.jax.jit(fresh)

    def reset(self):
        self.jax.clear_caches()

    def convert(self, inputs):
        return tuple(self.jax.device_put(a) for a in inputs)

    def run(self, fn, args):
        return fn(*args).block_until_ready()

    def compile_count(self, fn, shapes_seen):
        size = getattr(fn, "_cache_size", None)
        if callable(size):
            try:
                return int(size())
            except Exception:
                pass
        return len(shapes_seen)


# ---------------------------------------------------------------- shapejit


class ShapejitPeer(Peer):
    """``jit(numpy_fn, dynamic=...)`` from the project's own ``jit`` package."""

    module = "jit"
    compiles = True

    def __init__(self, dynamic):
        super().__init__()
        self.dynamic = dynamic
        self.name = "shapejit-%s" % ("dyn" if dynamic is True else
                                     "static" if dynamic is False else dynamic)

    def _import(self):
        from jit import jit
        self.jit = jit

    def build(self, workload):
        return self.jit(W.WORKLOADS[workload][0], dynamic=self.dynamic)

    @staticmethod
    def stats(fn):
        try:
            return dict(fn.stats())
        except Exception:
            return {}

    def compile_count(self, fn, shapes_seen):
        return self.stats(fn).get("compiles", "?")


# ---------------------------------------------------------------- registry


def all_peers():
    """Every peer, in report column order (a fresh set each call)."""
    return [Peer(), NumexprPeer(), NumbaPeer(), TorchPeer(), TorchCompilePeer(),
            JaxPeer(), ShapejitPeer(True), ShapejitPeer(False)]


def peer_by_name(name):
    for p in all_peers() + [ShapejitPeer("auto")]:
        if p.name == name:
            return p
    raise KeyError(name)

"""An HTTP inference service: a jitted BERT-style encoder serving requests
of any length from one compile.

    python examples/service.py --port 8080
    curl -s localhost:8080/encode -d '{"tokens": [101, 7592, 2088, 102]}'
    curl -s localhost:8080/metrics | grep shapejit_

POST /encode  {"tokens": [int, ...]}  ->  {"length": n, "embedding": [floats]}
GET  /health  ->  {"status": "ok", ...}
GET  /metrics ->  Prometheus text (shapejit_* and service_* metrics)
"""
from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from prometheus_client import CollectorRegistry, Counter, generate_latest

from jit import metrics as jit_metrics
from jit import jit

VOCAB, MAX_LEN = 30522, 512


class Encoder:
    """Post-LN transformer encoder layers (BERT's structure, smaller by default)."""

    def __init__(self, d: int = 256, heads: int = 4, ff: int = 1024, layers: int = 2, seed: int = 0):
        rng = np.random.default_rng(seed)

        def w(*shape, s=0.02):
            return (rng.standard_normal(shape) * s).astype(np.float32)

        self.d, self.heads = d, heads
        self.scale = 1.0 / float(np.sqrt(d // heads))  # a Python float: weakly typed, stays float32
        self.embed = w(VOCAB, d, s=0.1)
        self.pos = w(MAX_LEN, d, s=0.1)
        self.layers = [dict(wq=w(d, d), bq=w(d), wk=w(d, d), bk=w(d), wv=w(d, d), bv=w(d), wo=w(d, d),
                            bo=w(d), g1=1 + w(d), b1=w(d), w1=w(d, ff), c1=w(ff), w2=w(ff, d), c2=w(d),
                            g2=1 + w(d), b2=w(d)) for _ in range(layers)]
        self.forward = jit(self._forward, name="encoder")

    def _forward(self, x, layers):
        s, d = x.shape
        dh = d // self.heads
        for p in layers:
            q = (x @ p["wq"] + p["bq"]).reshape(s, self.heads, dh).transpose(1, 0, 2)
            k = (x @ p["wk"] + p["bk"]).reshape(s, self.heads, dh).transpose(1, 0, 2)
            v = (x @ p["wv"] + p["bv"]).reshape(s, self.heads, dh).transpose(1, 0, 2)
            a = q @ k.transpose(0, 2, 1) * self.scale
            a = np.exp(a - a.max(-1, keepdims=True))
            a = (a / a.sum(-1, keepdims=True)) @ v
            h = _layernorm(x + a.transpose(1, 0, 2).reshape(s, d) @ p["wo"] + p["bo"], p["g1"], p["b1"])
            u = h @ p["w1"] + p["c1"]
            u = 0.5 * u * (1.0 + np.tanh(0.7978845608 * (u + 0.044715 * u * u * u)))
            x = _layernorm(h + u @ p["w2"] + p["c2"], p["g2"], p["b2"])
        return x.mean(axis=0)

    def __call__(self, tokens) -> np.ndarray:
        ids = np.asarray(tokens, dtype=np.int64)
        x = self.embed[ids] + self.pos[: len(ids)]
        return self.forward(x, self.layers)

    def reference(self, tokens) -> np.ndarray:
        ids = np.asarray(tokens, dtype=np.int64)
        return self._forward(self.embed[ids] + self.pos[: len(ids)], self.layers)


def _layernorm(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * g + b


def _live_rss() -> int:
    """Resident bytes after malloc hands its free pages back (what is live,
    not what glibc's per-thread arenas keep cached); 0 where unknown."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        import os
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def make_server(port: int = 8080, addr: str = "127.0.0.1", encoder: Encoder | None = None):
    """The service, not yet serving: call .serve_forever() (tests use a thread)."""
    encoder = encoder or Encoder()
    registry = CollectorRegistry()
    jit_metrics.register(registry)
    requests = Counter("service_requests", "Requests served", ["endpoint", "status"], registry=registry)
    started = time.time()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet: metrics count the requests
            pass

        def _send(self, code: int, body: bytes, ctype="application/json"):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                st = encoder.forward.stats()
                body = {"status": "ok", "uptime_s": round(time.time() - started, 1),
                        "compiles": st["compiles"], "calls": st["calls"], "rss_bytes": _live_rss()}
                requests.labels("health", "200").inc()
                return self._send(200, json.dumps(body).encode())
            if self.path == "/metrics":
                return self._send(200, generate_latest(registry), "text/plain; version=0.0.4")
            requests.labels("other", "404").inc()
            self._send(404, b'{"error": "not found"}')

        def do_POST(self):
            if self.path != "/encode":
                requests.labels("other", "404").inc()
                return self._send(404, b'{"error": "not found"}')
            try:
                n = int(self.headers.get("Content-Length", 0))
                req = json.loads(self.rfile.read(n))
                tokens = req["tokens"]
                if not (isinstance(tokens, list) and 1 <= len(tokens) <= MAX_LEN and
                        all(isinstance(t, int) and 0 <= t < VOCAB for t in tokens)):
                    raise ValueError(f"tokens must be 1..{MAX_LEN} ints in [0, {VOCAB})")
            except (ValueError, KeyError, TypeError) as e:
                requests.labels("encode", "400").inc()
                return self._send(400, json.dumps({"error": str(e)}).encode())
            emb = encoder(tokens)
            requests.labels("encode", "200").inc()
            self._send(200, json.dumps({"length": len(tokens),
                                        "embedding": [round(float(v), 6) for v in emb]}).encode())

    server = ThreadingHTTPServer((addr, port), Handler)
    server.daemon_threads = True
    server.encoder = encoder
    return server


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--addr", default="127.0.0.1")
    ap.add_argument("--d", type=int, default=256, help="model width")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args(argv)
    server = make_server(args.port, args.addr, Encoder(args.d, args.heads, args.ff, args.layers))
    print(f"serving on http://{args.addr}:{server.server_address[1]} (/encode, /health, /metrics)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""An HTTP inference service: a jitted BERT-style encoder serving requests
of any length from one compile, as a WSGI app on waitress.

    pip install -e '.[service]'
    python examples/service.py --port 8080
    curl -s localhost:8080/encode -d '{"tokens": [101, 7592, 2088, 102]}'
    curl -s localhost:8080/metrics | grep shapejit_

POST /encode  {"tokens": [int, ...]}  ->  {"length": n, "embedding": [floats]}
GET  /health  ->  {"status": "ok", ...}
GET  /metrics ->  Prometheus text (shapejit_* and service_* metrics)

Why waitress: one process with threads keeps one copy of the model and one
compiled executable, its Prometheus counters are exact without a
multiprocess mode, and the jitted kernels (and numpy) release the GIL, so
the threads use the cores.  waitress reads each request whole on its I/O
loop before a worker thread sees it (a slow or short-bodied client holds no
worker and is cut off by `channel_timeout`), bounds header and body sizes,
and is maintained and pure Python.  A pre-forking server (gunicorn) would
hold a model and a compile per worker and need prometheus-client's
multiprocess mode; shapejit survives fork (README, "Threads and fork"), but
the memory would not fit the 2-core machines this targets as well.

Admission: at most `inflight` encodes run at once and `waiting` more wait
up to `wait_s` (0.25 s) for a slot; beyond that the answer is 503 with
Retry-After, never an unbounded queue, so an admitted request's latency
stays near its compute time under any load.  Every bad request gets a JSON 4xx and no
traceback in the log.
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import signal
import threading
import time
from http import HTTPStatus

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

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
        self.forward = jit(self._forward, name="encoder", pool_bytes="128MiB")

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


class Service:
    """The WSGI app."""

    def __init__(self, encoder: Encoder | None = None, inflight: int = 4, waiting: int = 8, wait_s: float = 0.25,
                 max_body: int = 64 << 10):
        self.encoder = encoder or Encoder()
        self.max_body, self.wait_s, self.max_waiting = max_body, wait_s, waiting
        self.inflight_limit = inflight
        self._slots = threading.BoundedSemaphore(inflight)
        self._waiting = 0
        self._lock = threading.Lock()
        self.registry = CollectorRegistry()
        jit_metrics.register(self.registry)
        self.requests = Counter("service_requests", "Requests answered", ["endpoint", "status"],
                                registry=self.registry)
        self.seconds = Histogram("service_request_seconds", "Time to answer an admitted /encode",
                                 registry=self.registry)
        self.inflight = Gauge("service_inflight", "Encodes running now", registry=self.registry)
        self.started = time.time()

    def __call__(self, environ, start_response):
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        routes = {"/encode": ("POST", self._encode), "/health": ("GET", self._health),
                  "/metrics": ("GET", self._metrics)}
        if path not in routes:
            status, headers, body = _error(404, "not found")
        elif method != routes[path][0]:
            status, headers, body = _error(405, f"use {routes[path][0]}")
            headers.append(("Allow", routes[path][0]))
        else:
            try:
                status, headers, body = routes[path][1](environ)
            except Exception as e:  # noqa: BLE001 - a server error: logged with its traceback, answered 500
                logging.getLogger("service").exception("error answering %s", path)
                status, headers, body = _error(500, f"internal error: {type(e).__name__}")
        self.requests.labels(path.strip("/") if path in routes else "other", str(status)).inc()
        start_response(f"{status} {HTTPStatus(status).phrase}", headers + [("Content-Length", str(len(body)))])
        return [body]

    def _health(self, environ):
        st = self.encoder.forward.stats()
        return _json(200, {"status": "ok", "uptime_s": round(time.time() - self.started, 1),
                           "compiles": st["compiles"], "traces": st["traces"], "calls": st["calls"],
                           "rss_bytes": _live_rss()})

    def _metrics(self, environ):
        return 200, [("Content-Type", "text/plain; version=0.0.4")], generate_latest(self.registry)

    def _encode(self, environ):
        tokens = self._tokens(environ)
        if not isinstance(tokens, list):
            return tokens  # (an error answer)
        if not self._slots.acquire(blocking=False):
            with self._lock:
                if self._waiting >= self.max_waiting:
                    return _busy()
                self._waiting += 1
            try:
                admitted = self._slots.acquire(timeout=self.wait_s)
            finally:
                with self._lock:
                    self._waiting -= 1
            if not admitted:
                return _busy()
        t0 = time.perf_counter()
        self.inflight.inc()
        try:
            emb = self.encoder(tokens)
        finally:
            self.inflight.dec()
            self._slots.release()
        self.seconds.observe(time.perf_counter() - t0)
        return _json(200, {"length": len(tokens), "embedding": [round(float(v), 6) for v in emb]})

    def _tokens(self, environ):
        """The request's token ids, or an error answer."""
        raw = environ.get("CONTENT_LENGTH") or ""
        if not raw.isdigit():
            return _error(411 if not raw else 400, "a Content-Length (a byte count) is required")
        n = int(raw)
        if n > self.max_body:
            return _error(413, f"the body is limited to {self.max_body} bytes")
        body = environ["wsgi.input"].read(n)
        if len(body) != n:
            return _error(400, "the body is shorter than its Content-Length")
        try:
            req = json.loads(body)
        except (ValueError, RecursionError):
            return _error(400, "the body is not JSON")
        tokens = req.get("tokens") if isinstance(req, dict) else None
        if not isinstance(tokens, list) or not 1 <= len(tokens) <= MAX_LEN:
            return _error(422, f'expected {{"tokens": [...]}} with 1 to {MAX_LEN} token ids')
        if not all(type(t) is int and 0 <= t < VOCAB for t in tokens):  # (type: true and 1.0 are not ids)
            return _error(422, f"token ids are integers in [0, {VOCAB})")
        return tokens


def _json(status: int, obj) -> tuple:
    return status, [("Content-Type", "application/json")], json.dumps(obj).encode()


def _error(status: int, message: str) -> tuple:
    return _json(status, {"error": message})


def _busy() -> tuple:
    status, headers, body = _error(503, "busy: try again")
    return status, headers + [("Retry-After", "1")], body


def make_server(port: int = 8080, addr: str = "127.0.0.1", encoder: Encoder | None = None,
                timeout: float = 10.0, **limits):
    """The service on a waitress server, not yet serving: call .run() (tests
    use a thread, and .close()); .app is the Service, .effective_port the port.
    waitress gets a thread for every request admission may hold (running or
    waiting) and two more (/health, /metrics, the 503s): no request waits in
    waitress's own queue while the app could answer it."""
    from waitress import create_server
    app = Service(encoder, **limits)
    threads = app.inflight_limit + app.max_waiting + 2
    server = create_server(app, host=addr, port=port, threads=threads, channel_timeout=timeout,
                           cleanup_interval=max(1.0, timeout / 2),  # (how often silent connections are looked for)
                           max_request_body_size=app.max_body, max_request_header_size=16 << 10,
                           connection_limit=256, backlog=1024, ident="shapejit-service", expose_tracebacks=False)
    server.app = app
    return server


def spawn(*args: str, env: dict | None = None, log: str):
    """(process, url) of the service started in a process of its own with
    these command-line arguments, its stderr going to the file `log` (a pipe
    nobody reads would fill, and the service would stop on a log line)."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--port", "0", *args], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)
    line = proc.stdout.readline()
    if not line.startswith("serving"):
        proc.kill()
        raise RuntimeError(f"the service did not start: {open(log).read()[-2000:]}")
    return proc, line.split()[2]


def read_metrics(url: str) -> dict:
    """{(sample name, frozenset of its labels but `function`): value} of a
    running service's /metrics, summed over jitted functions."""
    import urllib.request
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(url + "/metrics", timeout=60) as r:
        text = r.read().decode()
    out: dict = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, frozenset((k, v) for k, v in s.labels.items() if k != "function"))
            out[key] = out.get(key, 0.0) + s.value
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--addr", default="127.0.0.1")
    ap.add_argument("--d", type=int, default=256, help="model width")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--inflight", type=int, default=4, help="encodes at once")
    ap.add_argument("--waiting", type=int, default=8, help="encodes waiting for a slot before 503s")
    ap.add_argument("--wait", type=float, default=0.25, help="seconds an encode may wait for a slot before a 503")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds a connection may stay silent")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    # (waitress warns at every request queued for a thread; under saturation that is every request, each
    # answered 503 a moment later: service_requests_total counts them)
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    faulthandler.register(signal.SIGUSR1)  # (kill -USR1 <pid>: every thread's stack on stderr)
    server = make_server(args.port, args.addr, Encoder(args.d, args.heads, args.ff, args.layers), args.timeout,
                         inflight=args.inflight, waiting=args.waiting, wait_s=args.wait)
    print(f"serving on http://{args.addr}:{server.effective_port} (/encode, /health, /metrics)", flush=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

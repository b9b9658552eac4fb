"""python -m bench.service_load [--clients 50] [--seconds 60]: concurrent
clients against examples/service.py (its default model, a process of its
own), every answer checked against numpy.  Reports the requests answered
200 and 503, wrong answers, connection errors, latency percentiles of the
admitted requests and the service's live RSS after warm-up and at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def health(url):
    with urllib.request.urlopen(url + "/health", timeout=60) as r:
        return json.loads(r.read())


def start():
    """(process, url) of a fresh service (its default model, an empty compile cache)."""
    from examples.service import spawn
    env = dict(os.environ, SHAPEJIT_CACHE_DIR=tempfile.mkdtemp(prefix="shapejit-bench-"))
    log = tempfile.mktemp(prefix="service-", suffix=".log")
    proc, url = spawn(env=env, log=log)
    proc.log = log
    return proc, url


def stop(proc) -> str:
    """Stop a service; its log."""
    proc.terminate()
    proc.wait(timeout=60)
    return open(proc.log).read()


def load(url, clients: int, seconds: float, seed: int = 0):
    """(latencies of the 200s, status codes, (tokens, embedding) of the 200s,
    connection errors) of `clients` threads posting random lengths."""
    stop = time.monotonic() + seconds
    lat, codes, answers, errors = [], [], [], []

    def client(k):
        r = np.random.default_rng(seed + k)
        while time.monotonic() < stop:
            tokens = r.integers(0, 30522, int(r.integers(1, 513))).tolist()
            t0 = time.perf_counter()
            try:
                out = post(url + "/encode", {"tokens": tokens})
                lat.append(time.perf_counter() - t0)
                codes.append(200)
                answers.append((tokens, out["embedding"]))
            except urllib.error.HTTPError as e:
                codes.append(e.code)
            except OSError as e:
                errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, codes, answers, errors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds of the same load before RSS is read")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    from examples.service import Encoder, read_metrics
    enc = Encoder()
    proc, url = start()
    try:
        rng = np.random.default_rng(0)
        for n in (512, 300, 2, 1, 77, 400):
            post(url + "/encode", {"tokens": rng.integers(0, 30522, n).tolist()})
        load(url, args.clients, args.warmup, seed=1000)  # (the pools and arenas of concurrent calls fill here)
        warm = health(url)["rss_bytes"]
        before = read_metrics(url)
        lat, codes, answers, errors = load(url, args.clients, args.seconds)
        h = health(url)
        after = read_metrics(url)
    finally:
        err = stop(proc)
    wrong = [len(t) for t, e in answers if not np.allclose(e, enc.reference(t), rtol=1e-3, atol=1e-3)]
    p50, p99 = (np.percentile(lat, q) for q in (50, 99)) if lat else (float("nan"),) * 2
    print(f"{args.clients} clients, {args.seconds:.0f} s: {codes.count(200)} answered 200, {codes.count(503)} 503, "
          f"other {len([c for c in codes if c not in (200, 503)])}; wrong answers {len(wrong)}; "
          f"connection errors {len(errors)}")
    print(f"admitted latency p50 {p50 * 1e3:.0f} ms, p99 {p99 * 1e3:.0f} ms (p99/p50 {p99 / p50:.2f}); "
          f"RSS after warm-up {warm / 2**20:.0f} MiB, at the end {h['rss_bytes'] / 2**20:.0f} MiB "
          f"({h['rss_bytes'] / warm:.2f}x); compiles {h['compiles']}; tracebacks in the log "
          f"{err.count('Traceback')}; waitress queue warnings {err.count('Task queue depth')}")
    counted = {c: after.get(("service_requests_total", frozenset({("endpoint", "encode"), ("status", str(c))})), 0)
               - before.get(("service_requests_total", frozenset({("endpoint", "encode"), ("status", str(c))})), 0)
               for c in (200, 503)}
    calls = after[("shapejit_calls_total", frozenset())] - before[("shapejit_calls_total", frozenset())]
    print(f"/metrics over the run: encode 200 {counted[200]:.0f} (clients saw {codes.count(200)}), 503 "
          f"{counted[503]:.0f} (clients saw {codes.count(503)}), shapejit calls {calls:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

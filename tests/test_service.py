"""The inference service over HTTP on loopback (a WSGI app on waitress),
its /metrics, every class of bad request, a slow client, concurrent clients
with a memory bound, a bounded soak, and the metrics API."""
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from examples.service import Encoder, make_server, spawn
from shapes import config
from tests.conftest import metric

ALLOWED_LABELS = {"function", "reason", "level", "artifact", "stage", "le", "endpoint", "status", "outcome", "kind", "result"}




def serving(server) -> threading.Thread:
    def run():
        try:
            server.run()
        except OSError:  # (closed under its loop by the test)
            pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture
def service():
    server = make_server(0, "127.0.0.1", Encoder(d=64, heads=4, ff=128, layers=2), timeout=2.0)
    t = serving(server)
    yield server.app, f"http://127.0.0.1:{server.effective_port}"
    server.close()
    t.join(10)


def post(url, body, timeout=30):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def get(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def test_service_serves_many_lengths_from_one_compile(service):
    app, url = service
    rng = np.random.default_rng(0)
    n = 60
    for _ in range(n):
        tokens = rng.integers(0, 30522, int(rng.integers(2, 200))).tolist()
        out = post(url + "/encode", {"tokens": tokens})
        assert out["length"] == len(tokens)
        np.testing.assert_allclose(out["embedding"], app.encoder.reference(tokens), rtol=1e-4, atol=1e-4)
    assert json.loads(get(url + "/health"))["status"] == "ok"
    text = get(url + "/metrics")
    assert metric(text, "shapejit_compiles_total", function="encoder") == 1
    assert metric(text, "service_requests_total", endpoint="encode", status="200") == n
    assert metric(text, "shapejit_calls_total", function="encoder") == n
    assert metric(text, "shapejit_call_seconds_count", function="encoder") == n - 1  # the first traced
    assert metric(text, "shapejit_call_seconds_sum", function="encoder") > 0
    assert metric(text, "shapejit_entry_hits_total", function="encoder") == n - 1
    assert metric(text, "shapejit_entry_misses_total", function="encoder") == 1
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("{", 1)[1].rsplit("}", 1)[0]))
        assert set(labels) <= ALLOWED_LABELS, line
        assert not any(re.search(r"\d+\s*,\s*\d+|\[|\(", v) for v in labels.values()), line


def raw_request(port: int, data: bytes, timeout: float = 15.0) -> tuple[int | None, bytes, float]:
    """(status or None when the server closed without an answer, the
    answer's body, seconds) for raw bytes sent to the service."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
                head, _, body = got.partition(b"\r\n\r\n")
                length = re.search(rb"Content-Length: (\d+)", head)
                if length and len(body) >= int(length.group(1)):
                    break
        except (ConnectionResetError, socket.timeout):
            pass
    status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/1.") else None
    return status, got.partition(b"\r\n\r\n")[2], time.monotonic() - t0


def http(path: str, body: bytes, method: str = "POST", length: str | None = None) -> bytes:
    length = str(len(body)) if length is None else length
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + (f"Content-Length: {length}\r\n" if length != "" else "") + "Connection: close\r\n\r\n").encode() + body


BAD = [
    ("empty list", http("/encode", b'{"tokens": []}'), 422),
    ("strings", http("/encode", b'{"tokens": ["a"]}'), 422),
    ("booleans", http("/encode", b'{"tokens": [true, false]}'), 422),
    ("floats", http("/encode", b'{"tokens": [1.0, 2]}'), 422),
    ("negative id", http("/encode", b'{"tokens": [-1]}'), 422),
    ("id too large", http("/encode", b'{"tokens": [30522]}'), 422),
    ("too long", http("/encode", json.dumps({"tokens": list(range(600))}).encode()), 422),
    ("no tokens key", http("/encode", b'{"x": 1}'), 422),
    ("not an object", http("/encode", b"[1, 2]"), 422),
    ("not JSON", http("/encode", b"{tokens"), 400),
    ("deep JSON", http("/encode", b"[" * 100_000 + b"]" * 100_000), 413),
    ("deep JSON under the limit", http("/encode", b"[" * 20_000 + b"]" * 20_000), 400),
    ("no Content-Length", http("/encode", b"", length=""), 411),
    ("Content-Length -1", http("/encode", b'{"tokens": [1]}', length="-1"), 400),
    ("body too large", http("/encode", b" " * (70 << 10)), 413),
    ("GET /encode", http("/encode", b"", method="GET"), 405),
    ("unknown path", http("/nope", b"{}"), 404),
    ("POST /health", http("/health", b"{}"), 405),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,data,code", BAD, ids=[b[0] for b in BAD])
def test_bad_requests_get_a_json_4xx_quickly(service, name, data, code):
    app, url = service
    port = int(url.rsplit(":", 1)[1])
    status, body, seconds = raw_request(port, data)
    assert status == code, (name, status, body[:200])
    if status not in (400, 413) or b"{" in body[:1]:  # (waitress answers malformed HTTP itself, in plain text)
        assert "error" in json.loads(body)
    assert seconds < 10
    assert post(url + "/encode", {"tokens": [1, 2, 3]})["length"] == 3  # still serving


@pytest.mark.slow
def test_a_body_shorter_than_announced_and_a_slow_client_are_cut_off(service):
    """A client that announces 100 bytes and sends 10, and one that sends half
    a request line and stops: neither holds the service; each connection is
    closed by the server after its timeout (2 s here, 10 s by default)."""
    app, url = service
    port = int(url.rsplit(":", 1)[1])
    status, _, seconds = raw_request(port, http("/encode", b'{"tokens":', length="100"))
    assert status is None or status >= 400
    assert seconds < 8
    status, _, seconds = raw_request(port, b"POST /enc")
    assert status is None and seconds < 8
    assert post(url + "/encode", {"tokens": [5, 6]})["length"] == 2


def test_saturated_service_answers_503_not_an_endless_queue():
    """One encode at a time, none waiting: of two concurrent requests for a
    long input, one may get 503 (with Retry-After); every request is
    answered, 200 or 503."""
    server = make_server(0, "127.0.0.1", Encoder(d=64, heads=4, ff=128, layers=2), timeout=5.0, inflight=1,
                         waiting=0)
    serving(server)
    url = f"http://127.0.0.1:{server.effective_port}"
    codes = []

    def one():
        try:
            post(url + "/encode", {"tokens": list(range(512))})
            codes.append(200)
        except urllib.error.HTTPError as e:
            assert e.headers["Retry-After"] == "1"
            codes.append(e.code)

    try:
        post(url + "/encode", {"tokens": list(range(512))})  # (the compile, first)
        threads = [threading.Thread(target=one) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert len(codes) == 6 and set(codes) <= {200, 503} and 200 in codes and 503 in codes, codes
        text = get(url + "/metrics")
        assert metric(text, "service_requests_total", endpoint="encode", status="503") == codes.count(503)
    finally:
        server.close()


def start_service(tmp_path, *extra):
    env = dict(os.environ, SHAPEJIT_CACHE_DIR=str(tmp_path / "cache"))
    proc, url = spawn("--d", "64", "--heads", "4", "--ff", "128", "--layers", "2", *extra, env=env,
                      log=str(tmp_path / "service.log"))
    proc.log = tmp_path / "service.log"
    return proc, url


@pytest.mark.slow
@pytest.mark.stress
def test_concurrent_clients_get_right_answers_in_bounded_memory(tmp_path):
    """16 clients at once for a while (60 s of 50 under SHAPEJIT_STRESS=full):
    every request answered 200 or 503, every 200 right, no connection error,
    the service's live RSS at the end within 1.3x of after warm-up, and no
    traceback in its log."""
    full = config.get("SHAPEJIT_STRESS") == "full"
    clients, seconds = (50, 60.0) if full else (16, 8.0)
    proc, url = start_service(tmp_path)
    enc = Encoder(d=64, heads=4, ff=128, layers=2)
    try:
        rng = np.random.default_rng(0)
        for n in (512, 300, 2, 1, 77):  # warm-up: the largest shape, the specialized one
            post(url + "/encode", {"tokens": rng.integers(0, 30522, n).tolist()})
        results, errors = [], []

        def client(seed, stop):
            r = np.random.default_rng(seed)
            while time.monotonic() < stop:
                tokens = r.integers(0, 30522, int(r.integers(1, 513))).tolist()
                try:
                    out = post(url + "/encode", {"tokens": tokens}, timeout=60)
                    ok = np.allclose(out["embedding"], enc.reference(tokens), rtol=1e-3, atol=1e-3)
                    results.append(200 if ok else -1)
                except urllib.error.HTTPError as e:
                    results.append(e.code)
                except OSError as e:
                    errors.append(repr(e))

        for phase, length in (("warm-up", 3.0), ("measured", seconds)):  # (concurrent calls' pools fill first)
            stop = time.monotonic() + length
            threads = [threading.Thread(target=client, args=(k + 1000 * len(phase), stop)) for k in range(clients)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(length + 120)
            if phase == "warm-up":
                warm = json.loads(get(url + "/health"))["rss_bytes"]
        end = json.loads(get(url + "/health"))["rss_bytes"]
        text = get(url + "/metrics")
        assert errors == [] and results and set(results) <= {200, 503}, (errors[:3], set(results))
        assert warm > 0 and end <= 1.3 * warm, f"RSS {warm / 2**20:.0f} -> {end / 2**20:.0f} MiB"
        # the metrics count what the clients were answered (5 warm-up requests first)
        admitted = 5 + results.count(200)
        assert metric(text, "service_requests_total", endpoint="encode", status="200") == admitted
        assert (metric(text, "service_requests_total", endpoint="encode", status="503") or 0) == results.count(503)
        assert metric(text, "shapejit_calls_total", function="encoder") == admitted
        assert metric(text, "service_request_seconds_count") == admitted
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    err = proc.log.read_text()
    assert "Traceback" not in err, err[-2000:]


@pytest.mark.slow
@pytest.mark.stress
def test_soak_memory_stays_flat(tmp_path):
    """The service in its own process (as deployed), thousands of requests of
    random lengths; its live RSS, reported by /health, stops growing."""
    proc, url = start_service(tmp_path)
    try:
        rng = np.random.default_rng(1)
        full = config.get("SHAPEJIT_STRESS") == "full"
        warm, total = (300, 5000) if full else (200, 1200)
        lengths = rng.integers(1, 513, total)
        # during warm-up: the largest shape (buffers reach their size) and length 1
        # (its own specialization, so its one compile is not counted as growth)
        lengths[:8] = 512
        lengths = np.where(lengths == 1, 2, lengths)
        lengths[8] = 1
        mid = warm + (total - warm) // 2
        rss = {}
        for k, n in enumerate(lengths):
            out = post(url + "/encode", {"tokens": rng.integers(0, 30522, int(n)).tolist()})
            assert out["length"] == n
            if k in (warm, mid):
                rss[k] = json.loads(get(url + "/health"))["rss_bytes"]
        health = json.loads(get(url + "/health"))
        end = health["rss_bytes"]
        assert min(rss[warm], rss[mid], end) > 0, "the service could not read its resident memory"
        assert end - rss[mid] < 8 * 2 ** 20, f"RSS grew {(end - rss[mid]) / 2 ** 20:.1f} MiB in the second half"
        assert end - rss[warm] < 64 * 2 ** 20, f"RSS grew {(end - rss[warm]) / 2 ** 20:.1f} MiB after warm-up"
        assert health["compiles"] == 2  # lengths >= 2 share one; length 1 is specialized (0/1 policy)
        assert health["calls"] == total
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_metrics_serve_and_wsgi_with_a_custom_registry():
    from prometheus_client import CollectorRegistry, generate_latest

    import jit.metrics
    from jit import jit as jit_
    f = jit_(lambda x: np.tanh(x) * 2.0, name="tiny")
    for n in (3, 4, 5):
        f(np.ones(n))
    reg = CollectorRegistry()
    jit.metrics.register(reg)
    text = generate_latest(reg).decode()
    assert metric(text, "shapejit_calls_total", function="tiny") == 3
    assert metric(text, "shapejit_compiles_total", function="tiny") == 1
    assert f.stats()["calls"] == 3 and f.stats()["entry_hits"] == 2
    app = jit.metrics.wsgi_app(reg)
    body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""},
                        lambda status, headers: None))
    assert b'shapejit_calls_total{function="tiny"} 3.0' in body
    server, thread = jit.metrics.serve(0, registry=reg)
    try:
        text = get(f"http://127.0.0.1:{server.server_address[1]}/metrics")
        assert 'shapejit_compiles_total{function="tiny"} 1.0' in text
    finally:
        server.shutdown()


def test_log_env_reports_recompiles_and_fallbacks(monkeypatch, caplog):
    import logging
    monkeypatch.setenv("SHAPEJIT_LOG", "recompiles,fallbacks,compile")
    from jit import jit as jit_

    def g(x):
        return x * 2 if x.shape[0] > 4 else x

    f = jit_(g)
    with caplog.at_level(logging.INFO, logger="shapejit"):
        f(np.ones(3))
        f(np.ones(9))
    text = caplog.text
    assert "recompile #1" in text and "built" in text

"""The inference service over HTTP on loopback, its /metrics, a bounded soak,
and the metrics API."""
import json
import os
import re
import threading
import urllib.request

import numpy as np
import pytest

from examples.service import Encoder, make_server
from shapes import config

ALLOWED_LABELS = {"function", "reason", "level", "stage", "le", "endpoint", "status"}


@pytest.fixture
def service():
    server = make_server(0, "127.0.0.1", Encoder(d=64, heads=4, ff=128, layers=2))
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def post(url, body, timeout=30):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def get(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def metric(text, name, **labels):
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            if line.split("{")[0].split(" ")[0] == name:
                return float(line.rsplit(" ", 1)[1])
    return None


def test_service_serves_many_lengths_from_one_compile(service):
    server, url = service
    rng = np.random.default_rng(0)
    n = 60
    for _ in range(n):
        tokens = rng.integers(0, 30522, int(rng.integers(2, 200))).tolist()
        out = post(url + "/encode", {"tokens": tokens})
        assert out["length"] == len(tokens)
        np.testing.assert_allclose(out["embedding"], server.encoder.reference(tokens), rtol=1e-4, atol=1e-4)
    assert json.loads(get(url + "/health"))["status"] == "ok"
    text = get(url + "/metrics")
    assert metric(text, "shapejit_compiles_total", function="encoder") == 1
    assert metric(text, "service_requests_total", endpoint="encode", status="200") == n
    assert metric(text, "shapejit_calls_total", function="encoder") == n
    assert metric(text, "shapejit_call_seconds_count", function="encoder") == n - 1  # the first traced
    assert metric(text, "shapejit_call_seconds_sum", function="encoder") > 0
    assert metric(text, "shapejit_cache_hits_total", function="encoder", level="memory") == n - 1
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("{", 1)[1].rsplit("}", 1)[0]))
        assert set(labels) <= ALLOWED_LABELS, line
        assert not any(re.search(r"\d+\s*,\s*\d+|\[|\(", v) for v in labels.values()), line


def test_bad_requests_get_400_and_the_service_keeps_working(service):
    server, url = service
    for body in ({"tokens": []}, {"tokens": ["a"]}, {"x": 1}, {"tokens": list(range(600))}):
        with pytest.raises(urllib.error.HTTPError) as e:
            post(url + "/encode", body)
        assert e.value.code == 400
    assert post(url + "/encode", {"tokens": [1, 2, 3]})["length"] == 3


@pytest.mark.stress
def test_soak_memory_stays_flat(tmp_path):
    """The service in its own process (as deployed), thousands of requests of
    random lengths; its live RSS, reported by /health, stops growing."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, SHAPEJIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=root)
    proc = subprocess.Popen([sys.executable, os.path.join(root, "examples", "service.py"), "--port", "0",
                             "--d", "64", "--heads", "4", "--ff", "128", "--layers", "2"],
                            env=env, stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().split()[2]
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
    assert f.stats()["calls"] == 3 and f.stats()["cache_hits_memory"] == 2
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

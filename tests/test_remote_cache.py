"""The fleet tier on Redis (runtime/remote.py), against a real redis-server
started here: a second process with an empty disk compiles nothing; a
tampered, truncated, unsigned or wrongly signed remote record never runs;
Redis killed, stopped (not answering) and restarted; no secret, no tier."""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from examples.fleet import RedisServer as Redis
from runtime.remote import Client
from tests.test_cache_trust import _object_calling_system

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET = "fleet-secret"

if shutil.which("redis-server") is None:  # (.ci/run installs it: in CI a missing server fails)
    pytestmark = pytest.mark.skipif(not os.environ.get("CI"), reason="redis-server is not installed")


@pytest.fixture
def server(tmp_path):
    r = Redis(tmp_path).start()
    yield r
    r.stop()


# Each run is a fresh process with its own (empty unless shared) disk cache.
SCRIPT = textwrap.dedent("""
    import json, os, sys, time, warnings
    import numpy as np
    from jit import jit
    from runtime.cache import default_cache

    def layer(x, w):
        h = x @ w + 1.0
        return np.tanh(h) * 0.5 + h.mean(-1, keepdims=True)

    w = np.linspace(-1.0, 1.0, 32 * 24, dtype=np.float32).reshape(32, 24)
    f = jit(layer)
    report = {"ok": True, "seconds": []}
    marker = os.environ.get("PAUSE_MARKER")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows in map(int, sys.argv[1:]):
            if rows == 0:  # (a pause: the test changes the server, then removes the marker)
                open(marker, "w").close()
                while os.path.exists(marker):
                    time.sleep(0.02)
                continue
            x = np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32)
            t0 = time.perf_counter()
            y = f(x, w)
            report["seconds"].append(time.perf_counter() - t0)
            ref = layer(x, w)
            report["ok"] &= bool(y.shape == ref.shape and y.dtype == ref.dtype and np.allclose(y, ref, rtol=1e-4, atol=1e-4))
    report.update(f.stats())
    report["rejected"] = default_cache().stats.rejected
    from runtime.remote import current_tier
    report["remote_errors"] = current_tier().errors if current_tier() is not None else {}
    report["warnings"] = sorted({str(w.message)[:90] for w in caught})
    print(json.dumps(report))
""")


def run(tmp_path, name, rows, url, secret=SECRET, pause=None, **env_extra):
    script = tmp_path / "layer.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHAPEJIT_")}
    env["SHAPEJIT_CALIBRATE"] = "0"  # (no background calibration: conftest.py)
    # (a generous wait for Redis unless a test sets its own: on a loaded CI machine an answer once took more
    # than the 40 ms default, the tier counted as down, and the records under test were never read)
    env.update(SHAPEJIT_CACHE_DIR=str(tmp_path / f"disk-{name}"), PYTHONPATH=ROOT, SHAPEJIT_REMOTE_CACHE=url,
               SHAPEJIT_REMOTE_TIMEOUT="2s")
    env.update(env_extra)
    if secret:
        env["SHAPEJIT_CACHE_SECRET"] = secret
    if pause is None:
        out = subprocess.run([sys.executable, str(script), *map(str, rows)], env=env, capture_output=True,
                             text=True, timeout=300)
    else:  # rows holds a 0 where the test acts (pause(marker) runs there)
        marker = tmp_path / f"pause-{name}"
        env["PAUSE_MARKER"] = str(marker)
        proc = subprocess.Popen([sys.executable, str(script), *map(str, rows)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.02)
        pause()
        marker.unlink()
        stdout, stderr = proc.communicate(timeout=300)
        out = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_replica_compiles_nothing(tmp_path, server):
    first = run(tmp_path, "a", [37, 5], server.url)
    assert first["ok"] and first["traces"] == 1 and first["compiles"] == 1
    keys = server.client().command("KEYS", "shapejit:*")
    assert len(keys) >= 3  # object code, the GEMM library, the saved trace
    second = run(tmp_path, "b", [123, 7], server.url)  # an empty disk, shapes the first never saw
    assert second["ok"] and second["traces"] == 0 and second["compiles"] == 0
    assert second["cache_hits_remote"] >= 1 and second["rejected"] == {}
    third = run(tmp_path, "b", [9], server.url)  # the remote hits were written to b's disk
    assert third["traces"] == 0 and third["compiles"] == 0 and third["cache_hits_remote"] == 0


# each record on the server gets one attack of the mix, in turn
MIXES = {"signatures": ["unsigned", "wrong secret", "tampered"], "damage": ["truncated", "pickle", "tampered"]}


@pytest.mark.slow
@pytest.mark.parametrize("mix", list(MIXES))
def test_a_forged_remote_record_never_runs(tmp_path, server, mix):
    """Records planted on the server by someone without the secret (object
    code calling system(), a pickle, damaged bytes): none runs, none is
    loaded, the second process compiles for itself and is right."""
    from runtime.cache import pack_record, unpack_record
    first = run(tmp_path, "a", [37], server.url)
    assert first["compiles"] == 1
    client, marker = server.client(), tmp_path / "ran"
    evil = _object_calling_system(marker)
    for k, raw in enumerate(sorted(client.command("KEYS", "shapejit:*"))):
        attack = MIXES[mix][k % len(MIXES[mix])]
        key = raw.decode()[len("shapejit:"):]
        good = client.command("GET", raw)
        info, payload = unpack_record(key, good, SECRET.encode())
        if attack == "unsigned":
            blob = pack_record(key, evil, info, None)
        elif attack == "wrong secret":
            blob = pack_record(key, evil, info, b"another secret")
        elif attack == "tampered":
            blob = good[:-len(payload)] + (evil if info.get("kind") != "trace" else payload.replace(b"l", b"L", 1))
        elif attack == "truncated":
            blob = good[:-7]
        else:
            import pickle
            blob = pickle.dumps(type("Planted", (), {"__reduce__": lambda s: (open, (str(marker), "w"))})())
        client.command("SET", raw, blob)
    second = run(tmp_path, "b", [37, 5], server.url)
    assert second["ok"] and second["compiles"] == 1 and second["cache_hits_remote"] == 0
    assert sum(second["rejected"].values()) >= 3, second
    assert set(second["rejected"]) <= {"unsigned", "bad_signature", "damaged"}
    assert not marker.exists()


def test_no_secret_no_remote_tier(tmp_path, server):
    first = run(tmp_path, "a", [37], server.url, secret=None)
    assert first["ok"] and first["compiles"] == 1
    assert any("without SHAPEJIT_CACHE_SECRET" in w for w in first["warnings"])
    assert server.client().command("KEYS", "shapejit:*") == []


@pytest.mark.slow
def test_redis_killed_mid_run_and_restarted(tmp_path, server):
    run(tmp_path, "a", [37], server.url)  # (the server holds a's records)
    server.stop()
    killed = run(tmp_path, "b", [37, 0, 1], server.url, pause=lambda: (server.start(), time.sleep(3.0)))
    # down at the first call: b compiled itself, warned once; back after the restart (the probe reconnected),
    # so what b compiled later (one row: a signature of its own) was written to the fresh server
    assert killed["ok"] and killed["compiles"] == 2
    assert sum("unusable" in w for w in killed["warnings"]) == 1
    assert server.client().command("KEYS", "shapejit:trace-*") != []


def test_a_server_that_does_not_answer_costs_one_timeout(tmp_path, server):
    """SIGSTOP: connections are accepted by the kernel but never answered.
    The first call waits one timeout per operation, then the tier is off:
    the calls after it do not wait on the server at all."""
    run(tmp_path, "a", [37], server.url)
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        stalled = run(tmp_path, "b", [37, 38, 39, 40], server.url, SHAPEJIT_REMOTE_TIMEOUT="40ms")
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert stalled["ok"] and stalled["compiles"] >= 1
    assert sum("unusable" in w for w in stalled["warnings"]) == 1
    assert stalled["remote_errors"] == {"timeout": 1}  # one wait; the tier was off for the calls after it


@pytest.mark.slow
def test_a_full_server_and_a_password_and_database(tmp_path):
    """A server out of memory refuses the writes: warned once as full, the
    call goes on.  A URL with a password and a database number is honoured."""
    full = Redis(tmp_path).start("--maxmemory", "1", "--maxmemory-policy", "noeviction")
    try:
        r = run(tmp_path, "a", [37, 5], full.url)
        assert r["ok"] and r["compiles"] == 1
        unusable = [w for w in r["warnings"] if "unusable" in w]
        assert len(unusable) == 1 and "Redis is full" in unusable[0]
    finally:
        full.stop()
    locked = Redis(tmp_path).start("--requirepass", "pw")
    try:
        url = f"redis://:pw@127.0.0.1:{locked.port}/3"
        hurried = run(tmp_path, "b0", [37], url.replace("pw", "wrong"))  # (refused: a warning to read)
        shown = [w for w in hurried["warnings"] if "unusable" in w]
        assert len(shown) == 1 and "wrong" not in shown[0]  # (the password is never shown)
        first = run(tmp_path, "b", [37], url)
        second = run(tmp_path, "c", [37], url)
        assert first["compiles"] == 1 and second["compiles"] == 0 and second["cache_hits_remote"] >= 1
        assert Client(url, 5.0).command("DBSIZE") >= 2 and Client(locked.url.replace("//", "//:pw@"), 5.0).command(
            "DBSIZE") == 0  # (database 3, not 0)
    finally:
        locked.stop()

"""python -m bench.replicas [--replicas 4] [--repeats 3] [--stalled 9]: replicas of
examples/service.py sharing one Redis (examples/fleet.py), started one
after another, each with an empty disk cache: the first request of replica
1 (it traces and compiles) against replicas 2..N (they load replica 1's
signed records).  Each replica's first request has a length no replica
served before; every answer is checked against numpy.  Reports, per
replica, the first request's latency, the traces, compiles and cache hits
its /metrics counted, and the median ratio of replicas 2..N to replica 1
over `repeats` fleets (a fresh Redis each).

--stalled: what a Redis that does not answer (stopped with SIGSTOP: the
kernel accepts connections, nobody replies) costs a process with an empty
disk: its calls against the same calls with no remote tier, medians over
that many pairs of fresh processes, run in alternating order.
"""
from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def metric(m: dict, name: str, **labels) -> float:
    """A sample of examples.service.read_metrics's result; 0 when absent."""
    return m.get((name, frozenset(labels.items())), 0.0)


def fleet(replicas: int, lengths, enc) -> list[dict]:
    """One fleet on a fresh Redis: a row per replica."""
    from bench.service_load import post, stop
    from examples.fleet import RedisServer, start_replica
    from examples.service import read_metrics
    redis = RedisServer(tempfile.mkdtemp(prefix="shapejit-redis-")).start()
    secret, procs, rows = secrets.token_hex(16), [], []
    rng = np.random.default_rng(0)
    try:
        for k in range(replicas):
            t_start = time.perf_counter()
            proc, url = start_replica(redis.url, secret)
            procs.append(proc)
            tokens = rng.integers(0, 30522, lengths[k]).tolist()
            t0 = time.perf_counter()
            out = post(url + "/encode", {"tokens": tokens})
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            post(url + "/encode", {"tokens": tokens})
            second = time.perf_counter() - t0
            m = read_metrics(url)
            rows.append(dict(replica=k + 1, length=lengths[k], first=first, second=second,
                             start=t0 - t_start - second, right=bool(np.allclose(
                                 out["embedding"], enc.reference(tokens), rtol=1e-3, atol=1e-3)),
                             traces=metric(m, "shapejit_traces_total"), compiles=metric(m, "shapejit_compiles_total"),
                             remote_hits=metric(m, "shapejit_remote_cache_requests_total", result="hit"),
                             remote_errors=sum(v for (n, _), v in m.items() if n == "shapejit_remote_cache_errors_total"),
                             rejected=sum(v for (n, _), v in m.items() if n == "shapejit_cache_rejected_total")))
    finally:
        for p in procs:
            stop(p)
        redis.stop()
    return rows


# A process with an empty disk cache calling a small jitted layer at a few
# shapes (a miss, then hits): the seconds of each call, and the remote
# tier's error counts, as JSON on stdout.
STALL_SCRIPT = """
import json, sys, time
import numpy as np
from jit import jit
from runtime.remote import current_tier

def layer(x, w):
    h = x @ w + 1.0
    return np.tanh(h) * 0.5 + h.mean(-1, keepdims=True)

w = np.linspace(-1.0, 1.0, 32 * 24, dtype=np.float32).reshape(32, 24)
f = jit(layer)
seconds = []
for rows in map(int, sys.argv[1:]):
    x = np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32)
    t0 = time.perf_counter()
    y = f(x, w)
    seconds.append(time.perf_counter() - t0)
    assert np.allclose(y, layer(x, w), rtol=1e-4, atol=1e-4)
tier = current_tier()
print(json.dumps({"seconds": seconds, "compiles": f.stats()["compiles"],
                  "errors": tier.errors if tier is not None else None}))
"""


def stalled(pairs: int, calls: int = 6) -> None:
    """Print what a stopped Redis adds to the first call and to the calls after it."""
    import json
    import signal
    import subprocess
    from examples.fleet import RedisServer, replica_env
    rows = [str(37 + k) for k in range(calls)]

    def process(url: str) -> dict:
        env = replica_env(url, "bench-secret", tempfile.mkdtemp(prefix="shapejit-stall-"))
        env["PYTHONPATH"] = ROOT
        out = subprocess.run([sys.executable, "-c", STALL_SCRIPT, *rows], env=env, capture_output=True, text=True,
                             timeout=300, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    stopped, none, errors = [], [], []
    for k in range(pairs):
        redis = RedisServer(tempfile.mkdtemp(prefix="shapejit-redis-")).start()
        try:
            process(redis.url)  # (the server holds the records: a stopped server is asked for them)
            os.kill(redis.proc.pid, signal.SIGSTOP)
            for which in ((0, 1) if k % 2 == 0 else (1, 0)):
                if which == 0:
                    r = process(redis.url)
                    stopped.append(r["seconds"])
                    errors.append(r["errors"])
                else:
                    none.append(process("")["seconds"])
        finally:
            os.kill(redis.proc.pid, signal.SIGCONT)
            redis.stop()
    first_s, first_n = (float(np.median([x[0] for x in v])) for v in (stopped, none))
    later_s, later_n = (float(np.median([np.mean(x[1:]) for x in v])) for v in (stopped, none))
    print(f"a Redis that does not answer (SIGSTOP), SHAPEJIT_REMOTE_TIMEOUT default; medians of {pairs} pairs of "
          f"fresh processes, empty disks")
    print(f"  first call (a miss, compiled): stopped server {first_s * 1e3:.1f} ms, no remote tier "
          f"{first_n * 1e3:.1f} ms: added {(first_s - first_n) * 1e3:.1f} ms")
    print(f"  calls 2..{calls} (mean per call): stopped server {later_s * 1e6:.1f} us, no remote tier "
          f"{later_n * 1e6:.1f} us: added {(later_s - later_n) * 1e6:.1f} us")
    print(f"  remote errors in the stalled processes: {errors}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3, help="fleets, each on a fresh Redis")
    ap.add_argument("--stalled", type=int, default=0, metavar="PAIRS",
                    help="measure a Redis that does not answer instead (pairs of processes)")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    if args.stalled:
        stalled(args.stalled)
        return 0
    from examples.service import Encoder
    enc = Encoder()
    ratios = []
    for rep in range(args.repeats):
        lengths = [int(x) for x in np.random.default_rng(rep).choice(np.arange(1, 513), args.replicas, replace=False)]
        rows = fleet(args.replicas, lengths, enc)
        print(f"fleet {rep + 1}: replica  length  first request  second  start-up  traces  compiles  remote hits"
              f"  remote errors  rejected  right")
        for r in rows:
            print(f"{'':9}{r['replica']:7d}  {r['length']:6d}  {r['first'] * 1e3:10.1f} ms  {r['second'] * 1e3:5.1f} ms"
                  f"  {r['start']:6.2f} s  {r['traces']:6.0f}  {r['compiles']:8.0f}  {r['remote_hits']:11.0f}"
                  f"  {r['remote_errors']:13.0f}  {r['rejected']:8.0f}  {r['right']}")
        later = rows[1:]
        ratio = max(r["first"] for r in later) / rows[0]["first"] if later else float("nan")
        ratios.append(ratio)
        print(f"         replicas 2..{args.replicas}: traces {sum(r['traces'] for r in later):.0f}, compiles "
              f"{sum(r['compiles'] for r in later):.0f}; slowest first request / replica 1's = {ratio:.3f}")
    print(f"median over {args.repeats} fleets of (slowest first request of replicas 2..N) / (replica 1's): "
          f"{float(np.median(ratios)):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

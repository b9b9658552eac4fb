"""Measurements that need a fresh process: first-compile time and the stream.

A compiled function's first call depends on everything the process has done
before (imported compiler modules, warmed kernel caches) and on the on-disk
caches of torch inductor, jax and shapejit.  So each of these measurements runs
in its own ``python -m bench.coldstart MODE PEER`` process, with the on-disk
caches pointed at a directory the parent chooses:

* ``first``: build bert_layer (B=1, S=128), time the first call and a steady
  call.  The parent runs it twice with the same cache directory: once empty
  ("cold") and once filled by the first run ("warm disk cache").
* ``stream``: ``calls`` calls of bert_layer with B=1 and a random S in 1..512
  (fixed seed, the same sequence for every peer), in an empty cache directory;
  ``--check`` of the outputs are compared with numpy afterwards.

The child prints one JSON object as its last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from . import harness
from . import workloads as W

STREAM_SEED = 1234
FIRST_SIZE = (1, 128)
CHECKED = 12                 # stream outputs compared with numpy (quick: 6)
ROOT = Path(__file__).resolve().parent.parent     # the project: has jit/ and bench/


def stream_inputs(calls, seed=STREAM_SEED):
    """(lengths, xs, params) of the stream; identical for every peer."""
    rng = np.random.default_rng(seed)
    lengths = [int(s) for s in rng.integers(1, 513, size=calls)]
    xs = [W._normal(rng, (1, s, W.D_MODEL)) for s in lengths]
    params = W.make_bert_params(np.random.default_rng(seed + 1))
    return lengths, xs, params


# ---------------------------------------------------------------- child side


def checked_calls(lengths, n=CHECKED):
    """Indices of the stream calls whose outputs are checked: the first, the
    shortest and the longest, and an even spread of the rest (numpy
    references are costly, so not every call)."""
    idx = {0, lengths.index(min(lengths)), lengths.index(max(lengths))}
    idx.update(np.linspace(0, len(lengths) - 1, max(1, n - len(idx))).astype(int).tolist())
    return sorted(idx)


def _extra_stats(peer, fn):
    """shapejit's full stats dict, or {} for other peers."""
    return peer.stats(fn) if hasattr(peer, "stats") else {}


def measure_first(peer):
    from .suite import check
    inputs = W.make_bert_layer(FIRST_SIZE, np.random.default_rng(0))
    ref = W.bert_layer(*inputs)
    fn = peer.build("bert_layer")
    args = peer.convert(inputs)
    t0 = time.perf_counter()
    out = peer.run(fn, args)
    first = time.perf_counter() - t0
    steady = []
    for _ in range(5):
        t0 = time.perf_counter()
        peer.run(fn, args)
        steady.append(time.perf_counter() - t0)
    return {"first": first, "steady": float(np.median(steady)),
            "wrong": check(peer.to_numpy(out), ref),
            "compiles": peer.compile_count(fn, {inputs[0].shape}),
            "stats": _extra_stats(peer, fn)}


def measure_stream(peer, calls, n_checked=CHECKED):
    from .suite import check
    lengths, xs, params = stream_inputs(calls)
    fn = peer.build("bert_layer")
    p_args = peer.convert(params)
    x_args = [peer.convert((x,))[0] for x in xs]
    times, outs = [], []
    for x in x_args:
        t0 = time.perf_counter()
        out = peer.run(fn, (x,) + tuple(p_args))
        times.append(time.perf_counter() - t0)
        outs.append(out)
    compiles = peer.compile_count(fn, {(1, s, W.D_MODEL) for s in lengths})
    stats = _extra_stats(peer, fn)

    wrong = []                     # a spread of outputs checked against numpy, after timing
    checked = checked_calls(lengths, n_checked) if peer.name != "numpy" else []
    for i in checked:
        why = check(peer.to_numpy(outs[i]), W.bert_layer(xs[i], *params))
        if why:
            wrong.append("call %d (S=%d): %s" % (i, lengths[i], why))
    return {"total": sum(times), "first": times[0], "times": times, "checked": len(checked),
            "distinct_shapes": len(set(lengths)), "compiles": compiles,
            "stats": stats, "wrong": wrong}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.coldstart")
    ap.add_argument("mode", choices=["first", "stream"])
    ap.add_argument("peer")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--check", type=int, default=CHECKED, help="stream outputs to check")
    a = ap.parse_args(argv)

    from .peers import peer_by_name
    peer = peer_by_name(a.peer)
    if not peer.available():
        result = {"status": "n/a", "note": peer.reason}
    else:
        try:
            res = measure_first(peer) if a.mode == "first" else measure_stream(peer, a.calls, a.check)
            result = {"status": "ok", **res}
        except Exception as e:
            from .suite import short_error
            result = {"status": "ERR", "note": short_error(e)}
    sys.stdout.flush()
    print("\n" + json.dumps(result, default=str))


# ---------------------------------------------------------------- parent side


def cache_env(cache_dir: Path, jax_persistent: bool, machine: bool = True):
    """Environment pointing every on-disk compile cache into ``cache_dir``;
    shapejit's holds this machine's own artifacts (its calibration and the
    libraries compiled once per machine: a machine's second day) unless not
    `machine` (its first)."""
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir / "inductor")
    env["SHAPEJIT_CACHE_DIR"] = str(cache_dir / "shapejit")
    env.pop("SHAPEJIT_CACHE", None)          # on-disk caches on, as by default
    if machine:
        harness.seed_machine_artifacts(cache_dir / "shapejit")
    else:  # (nor does a background calibration start beside the timing)
        env["SHAPEJIT_CALIBRATE"] = "0"
    if jax_persistent:
        env["JAX_COMPILATION_CACHE_DIR"] = str(cache_dir / "jax")
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    return env


def run_child(mode, peer_name, cache_dir: Path, calls=100, check=CHECKED, jax_persistent=False,
              timeout=900, machine=True):
    """Run one measurement in a fresh interpreter; returns its result dict."""
    from .harness import LoadMeter
    cmd = [sys.executable, "-m", "bench.coldstart", mode, peer_name,
           "--calls", str(calls), "--check", str(check)]
    meter = LoadMeter().start()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=cache_env(cache_dir, jax_persistent, machine),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "ERR", "note": "timed out after %d s" % timeout}
    wall = time.perf_counter() - t0
    foreign = meter.stop()
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            res = json.loads(line)
            res["process_wall"] = wall
            res["foreign_load"] = foreign
            return res
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-1:] or ["no output"]
    return {"status": "ERR", "note": "child exited %d: %s" % (proc.returncode, tail[0][:160])}


if __name__ == "__main__":
    main()

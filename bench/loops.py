"""python -m bench.loops [--calls 40] [--rounds 5]: Python loops over a
sequence's length that rebind an array every step (an RNN cell, the same
keeping every step's state in a list it stacks, an exponential moving
average), fed a stream of sequences of random lengths,
as a service gets them.  numpy runs each call eagerly; shapejit unrolls the
loop for the first length it sees and makes it a scan (jit/scan.py) at the
second, whose one entry serves every length after; jax.jit (when installed)
traces and compiles each new length.

Prints, per program: the steady time of one length, numpy's over
shapejit's (above 1: shapejit faster), both for the scan's entry and for
the entry unrolled for that length (what a fixed length gets), their calls
interleaved in turns (bench.harness.in_turns); then the stream's total time
for each (its first calls, traces included: none is loaded from the steady
runs' saved traces) and the traces each made.
The steady times come first: once jax ran, its threads slow what runs
after it in the process.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from bench import harness
from bench.report import cpu_description
from jit import jit
from jit.scan import UNROLLED


def rnn(x, h, W, U, b):
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U + b)
    return h


def rnn_states(x, h, W, U, b):
    hs = []
    for t in range(x.shape[0]):
        h = np.tanh(x[t] @ W + h @ U + b)
        hs.append(h)  # (every step's state: the scan stacks them)
    return np.stack(hs)


def ema(x, alpha):
    s = x[0]
    for t in range(1, x.shape[0]):
        s = alpha * x[t] + (1 - alpha) * s
    return s


def _rnn_inputs(rng, T, B=32, I=128, H=256):
    return (rng.standard_normal((T, B, I)).astype(np.float32), np.zeros((B, H), np.float32),
            (rng.standard_normal((I, H)) * 0.05).astype(np.float32),
            (rng.standard_normal((H, H)) * 0.05).astype(np.float32), rng.standard_normal(H).astype(np.float32))


def _ema_inputs(rng, T, N=4096):
    return rng.standard_normal((T, N)).astype(np.float32), 0.1


PROGRAMS = {"rnn (B=32, 128 -> 256, float32)": (rnn, _rnn_inputs),
            "rnn, every step's state stacked (the same sizes)": (rnn_states, _rnn_inputs),
            "ema (4096 series, float32)": (ema, _ema_inputs)}


def _jax(fn):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", False)
    if fn is rnn:
        def f(x, h, W, U, b):
            for t in range(x.shape[0]):
                h = jnp.tanh(x[t] @ W + h @ U + b)
            return h
    elif fn is rnn_states:
        def f(x, h, W, U, b):
            hs = []
            for t in range(x.shape[0]):
                h = jnp.tanh(x[t] @ W + h @ U + b)
                hs.append(h)
            return jnp.stack(hs)
    else:
        def f(x, alpha):
            s = x[0]
            for t in range(1, x.shape[0]):
                s = alpha * x[t] + (1 - alpha) * s
            return s
    jf = jax.jit(f)
    return lambda *a: jf(*a).block_until_ready()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-jax", action="store_true")
    a = ap.parse_args(argv)
    os.environ.setdefault("SHAPEJIT_CACHE_DIR", tempfile.mkdtemp(prefix="sj_loops_"))
    harness.keep_machine_artifacts(("float32",))
    print(f"{cpu_description()}; a stream of {a.calls} sequences, lengths uniform in 8..128")
    # (no saved traces: the entry unrolled for a length must not be a scan another jit saved, nor the
    # stream, a new program's, served from the traces the steady runs made)
    os.environ["SHAPEJIT_TRACE_CACHE"] = "0"
    # (every steady time first: jax's threads, once it ran, slow what runs after it in the process)
    print("\nsteady: numpy's time over shapejit's (the scan's entry; the entry unrolled for that length)")
    for title, (fn, make) in PROGRAMS.items():
        rng = np.random.default_rng(1)
        sj = jit(fn)
        for T in range(8, 8 + UNROLLED + 1):  # (past UNROLLED lengths unrolled: the loop is a scan from now on)
            sj(*make(rng, T))
        print(f"  {title}")
        for T in (16, 64, 128):
            args = make(rng, T)
            fixed = jit(fn)  # (its first length: unrolled)
            fixed(*args)
            tn, ts, tf = harness.in_turns([lambda: fn(*args), lambda: sj(*args), lambda: fixed(*args)], a.rounds)
            print(f"    T={T}: numpy {tn * 1e3:.2f} ms; numpy/shapejit scan {tn / ts:.2f}x, "
                  f"unrolled for T {tn / tf:.2f}x")
        assert sj.stats()["traces"] == UNROLLED + 1, sj.explain()
    for title, (fn, make) in PROGRAMS.items():
        rng = np.random.default_rng(0)
        lengths = [int(n) for n in rng.integers(8, 129, a.calls)]
        stream = [make(rng, T) for T in lengths]
        peers = {"numpy": fn, "shapejit": jit(fn)}
        jx = None if a.no_jax else _jax(fn)
        if jx is not None:
            peers["jax.jit"] = jx
        totals = {}
        for name, call in peers.items():
            t0 = time.perf_counter()
            for args in stream:
                call(*args)
            totals[name] = time.perf_counter() - t0
        print(f"\n{title}\n  stream total: " + ", ".join(f"{k} {v:.3f} s" for k, v in totals.items())
              + f"; shapejit traces {peers['shapejit'].stats()['traces']}"
              + (f", jax.jit traces {len(set(lengths))} (one per length)" if jx is not None else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""python -m bench.figures [--rounds 15] [--peers numpy,torch,jax.jit,shapejit-dyn]:
issue 12's steady-latency figures — bert_layer at B=1, S=128 and S=256 and
mlp at T=128 — with the peers' calls interleaved: each round times a batch
of calls of every peer (each after 0.25 s idle and one untimed call: the
thread pools of the peer before it settle), in a new order every round, so the machine's drift
(the same cell moves 20-60% between runs of `python -m bench` here, whose
peers are timed one after the other) falls on all alike.  Prints per
workload each peer's median over rounds (of each batch's mean call) and the
ratios the issue names: shapejit's latency over jax.jit's, and numpy's time
over shapejit's.  Every output is checked against numpy first.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

from bench import harness
from bench import workloads as W
from bench.peers import peer_by_name
from bench.report import cpu_description
from bench.suite import check

CASES = (("bert_layer", (1, 128)), ("bert_layer", (1, 256)), ("mlp", 128))
BATCH_SECONDS = 0.15  # of calls each peer's turn times (after one untimed call)
SETTLE = 0.25  # seconds before each turn: the previous peer's threads stop spinning (OpenMP's, XLA's, OpenBLAS's)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.figures")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--peers", default="numpy,torch,jax.jit,shapejit-dyn")
    a = ap.parse_args(argv)
    harness.keep_machine_artifacts()  # (this CPU's calibration: none starts in the background meanwhile)
    peers = [p for p in (peer_by_name(n) for n in a.peers.split(",")) if p.available()]
    print(f"# steady latency, calls interleaved ({cpu_description()}); median over {a.rounds} rounds")
    print()
    print("| workload | size | " + " | ".join(p.name for p in peers) + " | shapejit / jax.jit | numpy / shapejit |")
    print("|---|---|" + "--:|" * (len(peers) + 2))
    rng = random.Random(0)
    for name, size in CASES:
        fn_ref, make = W.WORKLOADS[name]
        inputs = make(size, np.random.default_rng(0))
        ref = fn_ref(*inputs)
        runs = {}
        for p in peers:
            fn, args = p.build(name), p.convert(inputs)
            why = check(p.to_numpy(p.run(fn, args)), ref)
            if why:
                raise SystemExit(f"{p.name} {name} {size}: {why}")
            t0 = time.perf_counter()
            p.run(fn, args)
            reps = max(1, int(BATCH_SECONDS / max(1e-6, time.perf_counter() - t0)))
            runs[p.name] = (lambda p=p, fn=fn, args=args: p.run(fn, args)), reps
        times = {n: [] for n in runs}
        for _ in range(a.rounds):
            order = list(runs)
            rng.shuffle(order)
            for n in order:
                call, reps = runs[n]
                time.sleep(SETTLE)
                call()
                t0 = time.perf_counter()
                for _ in range(reps):
                    call()
                times[n].append((time.perf_counter() - t0) / reps)
        med = {n: statistics.median(v) for n, v in times.items()}
        sj, jx, npy = med.get("shapejit-dyn"), med.get("jax.jit"), med.get("numpy")
        ratio = lambda x, y: f"{x / y:.2f}" if x and y else "—"  # noqa: E731
        print(f"| {name} | {W.size_label(name, size)} | " + " | ".join(f"{med[n] * 1e3:.2f} ms" for n in runs)
              + f" | {ratio(sj, jx)} | {ratio(npy, sj)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

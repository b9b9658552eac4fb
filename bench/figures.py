"""python -m bench.figures [--rounds 15] [--peers numpy,torch,jax.jit,shapejit-dyn]:
issue 12's steady-latency figures — bert_layer at B=1, S=128 and S=256 and
mlp at T=128 — with the peers' turns interleaved (bench.harness.in_turns):
each round gives every peer a turn, in a new order every round, so the
machine's drift (the same cell moves 20-60% between runs of `python -m
bench` here, whose peers are timed one after the other) falls on all alike;
a turn starts after 0.25 s idle (the thread pools of the peer before it
settle) and 0.2 s of untimed calls.  Prints per workload each peer's median
over rounds (of each turn's median call) and the
ratios the issue names: shapejit's latency over jax.jit's, and numpy's time
over shapejit's.  Every output is checked against numpy first.
"""
from __future__ import annotations

import argparse

import numpy as np

from bench import harness
from bench import workloads as W
from bench.peers import peer_by_name
from bench.report import cpu_description
from bench.suite import check

CASES = (("bert_layer", (1, 128)), ("bert_layer", (1, 256)), ("mlp", 128))
SETTLE = 0.25  # seconds idle before a turn: the previous peer's threads stop spinning (OpenMP's, XLA's)
WARM = 0.2  # seconds of untimed calls that start a turn
TURN = 0.15  # seconds of timed calls in a turn


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
            runs[p.name] = lambda p=p, fn=fn, args=args: p.run(fn, args)
        med = dict(zip(runs, harness.in_turns(list(runs.values()), a.rounds, warm=WARM, turn=TURN, settle=SETTLE)))
        sj, jx, npy = med.get("shapejit-dyn"), med.get("jax.jit"), med.get("numpy")
        ratio = lambda x, y: f"{x / y:.2f}" if x and y else "—"  # noqa: E731
        print(f"| {name} | {W.size_label(name, size)} | " + " | ".join(f"{med[n] * 1e3:.2f} ms" for n in runs)
              + f" | {ratio(sj, jx)} | {ratio(npy, sj)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

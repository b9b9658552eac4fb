"""python -m bench.gemmchoice [--calls 60] [--corpus mlp,gemm,k2mm]

What runtime/gemmchoice.py decides on this host, and whether its margin is
right: (1) bert_layer over a stream of sequence lengths S in 1..512 (the
same seed as the bench's stream), jitted three times — every product on the
GEMM kernel, every one on numpy's BLAS, and by shapejit's choice (the
calibrated tree where `python -m jit calibrate` made one, else raced) — with
each policy's mean time a call over a second pass of the stream (the first
decides and compiles) against numpy's; (2) for each corpus kernel named,
how much faster numpy's BLAS ran each of its product classes alone
(kernel time / BLAS time, the number the margin is applied to).
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

from bench import harness
from bench import workloads as W
from bench.corpus import BY_NAME, fresh
from bench.report import cpu_description
from jit import jit
from runtime import gemmchoice


def alone_ratios(run) -> list[tuple]:
    """(class, kernel time / BLAS time) of every class `run()` decides."""
    seen = []
    decide = gemmchoice.decide

    def spy(key, kernel_seconds, blas_seconds):
        seen.append((key, min(kernel_seconds) / min(blas_seconds)))
        decide(key, kernel_seconds, blas_seconds)

    gemmchoice.forget()
    gemmchoice.decide = spy  # (read by the executables built during run())
    try:
        run()
    finally:
        gemmchoice.decide = decide
    return seen


def mean_ms(fn, calls) -> float:
    ts = []
    for args in calls:
        t = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t)
    return statistics.mean(ts) * 1e3


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.gemmchoice")
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--corpus", default="mlp,gemm,k2mm")
    a = ap.parse_args(argv)
    print(f"{cpu_description()}, Python {platform.python_version()}, numpy {np.__version__}; "
          f"margin {gemmchoice.MARGIN}, {gemmchoice.ROUNDS} rounds")
    params = W.make_bert_params(np.random.default_rng(0))
    lengths = np.random.default_rng(1234).integers(1, 513, size=a.calls)
    calls = [(np.random.default_rng(int(s)).standard_normal((1, int(s), W.D_MODEL)).astype(np.float32),) + params
             for s in lengths]
    tree = harness.print_choice()
    print(f"bert_layer, {a.calls} calls, S in 1..512: mean ms a call (second pass)")
    for prefer in ("kernel", "blas", None):
        gemmchoice.PREFER = prefer
        f = jit(W.bert_layer)
        ratios = alone_ratios(lambda: mean_ms(f, calls))
        t = mean_ms(f, calls)
        blas = sum(gemmchoice.BEST.values())
        name = prefer or ("tree" if tree else "measured")
        print(f"  {name:>8}: {t:.1f} ms; {len(gemmchoice.BEST)} classes, {blas} on BLAS"
              + ("" if prefer or tree else "; alone, BLAS faster by " + " ".join(f"{r:.2f}" for _, r in sorted(
                  ratios, key=lambda x: x[1]))))
    gemmchoice.PREFER = None
    print(f"  {'numpy':>8}: {mean_ms(W.bert_layer, calls):.1f} ms")
    for name in filter(None, a.corpus.split(",")):
        k = BY_NAME[name]
        base = k.make_inputs("S", np.random.default_rng(0))
        f = jit(k.fn)
        ratios = alone_ratios(lambda: [f(*fresh(base)) for _ in range(2)])
        print(f"{name} S: kernel time / BLAS time alone, per class: "
              + ", ".join(f"{key} {r:.2f}" for key, r in ratios))
    gemmchoice.forget()


if __name__ == "__main__":
    main()

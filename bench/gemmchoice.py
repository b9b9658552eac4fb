"""python -m bench.gemmchoice [--calls 60] [--corpus mlp,gemm,k2mm] [--odd]

What runtime/gemmchoice.py decides on this host, and whether its margin is
right: (1) bert_layer over a stream of sequence lengths S in 1..512 (the
same seed as the bench's stream), jitted three times — every product on the
GEMM kernel, every one on numpy's BLAS, and by shapejit's choice (the
calibrated tree where `python -m jit calibrate` made one, else raced) — with
each policy's mean time a call over a second pass of the stream (the first
decides and compiles) against numpy's; (2) for each corpus kernel named,
how much faster numpy's BLAS ran each of its product classes alone
(kernel time / BLAS time, the number the margin is applied to).  `--odd`
instead: products the kernel's tiles suit badly (ODD), each a jitted `a @
b` on the kernel, on numpy's BLAS and by shapejit's choice, against
numpy's own (numpy's time over each; calls in turns).
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


# (dtype, M, K, N): one column and a few, products the calibration's shapes never had (N < 512), a deep Gram
# matrix (A.T @ A of a tall A: a strided A), a square float64 one
ODD = ((np.float64, 20000, 200, 1), (np.float64, 20000, 200, 8), (np.float32, 20000, 200, 32),
       (np.float64, 400, 20000, 400), (np.float64, 1000, 1000, 1000))


def _product(a, b):
    return a @ b


def odd_products(rounds: int) -> None:
    """numpy's time over each policy's for each product of ODD (a policy's
    calls in turns with numpy's: the classes it decided are the process's)."""
    rng = np.random.default_rng(0)
    print("| dtype | M x K @ K x N | kernel | BLAS | shapejit's choice |\n|---|---|--:|--:|--:|")
    for dt, m, k, n in ODD:
        a = rng.standard_normal((k, m)).astype(dt).T if k > 4 * m else rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        ratios = []
        for prefer in ("kernel", "blas", None):
            gemmchoice.PREFER = prefer
            gemmchoice.forget()
            f = jit(_product)
            for _ in range(3):  # (the trace, and the class decided: raced where no tree decides it)
                f(a, b)
            t_numpy, t_policy = harness.in_turns([lambda: _product(a, b), lambda: f(a, b)], rounds)
            ratios.append(t_numpy / t_policy)
        gemmchoice.PREFER = None
        print(f"| {np.dtype(dt).name} | {m} x {k} @ {k} x {n} | " + " | ".join(f"{r:.2f}x" for r in ratios) + " |")
    gemmchoice.forget()


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
    ap.add_argument("--odd", action="store_true", help="only the products few tiles suit")
    ap.add_argument("--rounds", type=int, default=7, help="(--odd) rounds of interleaved turns")
    a = ap.parse_args(argv)
    print(f"{cpu_description()}, Python {platform.python_version()}, numpy {np.__version__}; "
          f"margin {gemmchoice.MARGIN}, {gemmchoice.ROUNDS} rounds")
    if a.odd:
        odd_products(a.rounds)
        return
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

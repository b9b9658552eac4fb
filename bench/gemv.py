"""python -m bench.gemv [--pairs 768x256,768x768,...] [--rounds 40]: a
product of one row, x [1, K] @ w [K, N] (a decode step's projections), on
three variants, w read from memory (each call reads another of enough
copies of w to outgrow the last-level cache twice, as a model's weights
come between their uses):

- numpy: numpy's matmul (its BLAS's gemv);
- strips: the GEMM kernel split over its column strips (codegen/gemm.py),
  as it runs a product of more rows;
- rows: the GEMM kernel with w's rows split in one contiguous block per
  thread (runtime/gemv.py), what a jitted product of one row runs.

The variants take turns call by call, in a new order every round (the
machine's drift and the call before fall on all alike); each one's median
over the rounds, and the bandwidth it read w at.
"""
from __future__ import annotations

import argparse
import random
import time

import numpy as np

from bench.report import cpu_description
from codegen import gemm, parallel
from jit.compile import _start_pools, library_function
from runtime import dispatch, gemv, threadpool
from runtime.kernelcall import CHUNK_MIN_WORK

PAIRS = "768x256,768x768,768x2048,2048x768,768x8192"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", default=PAIRS, help="KxN,...")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--dtype", default="float32")
    a = ap.parse_args(argv)
    dtype = np.dtype(a.dtype)
    _start_pools()
    pool, threads = threadpool.native_pool(), threadpool.native_threads()
    if pool is None or threads < 2:
        raise SystemExit("needs the native pool and at least 2 threads")
    par = library_function(parallel.par_symbol(gemm.symbol_for(dtype)))
    nr = gemm.tile_for(dtype).nr
    print(f"{cpu_description()}; {dtype}, {threads} threads, w from memory; median of {a.rounds} calls each")
    print(f"{'K':>6} {'N':>6} {'w MB':>6}  " + "  ".join(f"{v:>20}" for v in ("numpy", "strips", "rows")))
    rng = np.random.default_rng(0)
    for K, N in (map(int, p.split("x")) for p in a.pairs.split(",")):
        w = rng.standard_normal((K, N)).astype(dtype)
        ws = [w] + [w.copy() for _ in range(dispatch.cold_copies(w.nbytes) - 1)]
        x = rng.standard_normal((1, K)).astype(dtype)
        c = np.empty((1, N), dtype)
        strips = -(-N // nr)
        parts = gemv.parts(1, K, N)
        variants = {
            "numpy": lambda b: np.matmul(x, b, out=c),
            "strips": lambda b: par(0, strips, x, b, c, 1, N, K, 0, 0, 0, 0, max(1, CHUNK_MIN_WORK // K), pool),
            "rows": (lambda b: gemv.split(par, pool, x, b, c, N, K, strips, parts)) if parts else None,
        }
        times = {k: [] for k, fn in variants.items() if fn is not None}
        order, i = random.Random(0), 0
        for r in range(a.rounds):
            for k in order.sample(sorted(times), len(times)):  # (a new order every round: a call's
                # predecessor, the pool's threads awake or not, falls on every variant alike)
                b = ws[i % len(ws)]
                i += 1
                t0 = time.perf_counter()
                variants[k](b)
                times[k].append(time.perf_counter() - t0)
                if r == 0:
                    np.testing.assert_allclose(c, x @ b, rtol=1e-3, atol=1e-3)
        cells = []
        for k in variants:
            if k in times:
                t = float(np.median(times[k]))
                cells.append(f"{t * 1e6:7.0f} us {w.nbytes / t / 1e9:5.1f} GB/s")
            else:
                cells.append(f"{'(not split)':>20}")
        print(f"{K:>6} {N:>6} {w.nbytes / 1e6:6.2f}  " + "  ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

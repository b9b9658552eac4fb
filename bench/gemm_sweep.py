"""python -m bench.gemm_sweep [--quick] [--pairs 768x3072,3072x768,768x768] [--ms 1,16] [--rounds R]:
a linear layer with GELU, gelu(x @ w + b), over M rows for each (K, N),
jitted once (one compile serves every M and policy):

- shapejit: as a user gets it: the product on whichever of the GEMM kernel
  and numpy's BLAS runtime/gemmchoice.py chose for that shape class (by the
  dispatch tree calibrated on this CPU, `python -m jit calibrate`, else
  measured at its first call, not timed), the epilogue where
  SHAPEJIT_EPILOGUE_IN_STORE puts it (a pass of its own by default);
- kernel: every product on the GEMM kernel (codegen/gemm.py), its epilogue
  in the GEMM's store;
- pass: every product on the GEMM kernel, its epilogue a pass of its own
  after it (as before epilogues ran in the store);
- BLAS: every product on numpy's matmul, the epilogue still compiled;
- the oracle: the fastest of kernel, pass and BLAS at that M;
- the ceiling: numpy's time over the time the cell's multiply-adds take at
  this CPU's FMA peak with the kernel's vectors (`python -m bench.peak`):
  no policy's ratio can pass it (where numpy's BLAS runs near that peak it
  is close to 1, whatever the kernel does);

each against numpy (its matmul, then its epilogue); `--small-m 0` runs the
kernel as it was before products of few rows streamed B (one packed tile), as numpy's time / the
policy's (above 1: faster than numpy).  Run it with SHAPEJIT_ISA=avx2 too on
an AVX-512 host.  `--cold`: every call reads another of enough copies of w
that together they outgrow the last-level cache (twice it), so w comes from
memory as a model's weights do (the calibration times it so:
runtime/dispatch.py); by default one w stays hot in cache.  The policies
are measured in turns, in a new order every round (the machine's drift
falls on all alike), each turn after 0.12
seconds of its own untimed calls: after a call our pool's threads wait
busily for a while, which would charge one policy's threads to the next
(bench.harness.in_turns).  A policy's time: the median over rounds of each
turn's median call.
"""
from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import tempfile

import numpy as np

from bench import harness
from bench import peak as bench_peak
from bench.report import cpu_description
from codegen import gemm, lower
from jit import jit
from runtime import dispatch, gemmchoice
from runtime.cache import reset_default_cache

MS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)
MS_QUICK = (1, 4, 16, 64, 256, 1024)


def linear_gelu(x, w, b):
    h = x @ w + b
    return 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pairs", default="768x3072,3072x768,768x768")
    ap.add_argument("--ms", default=None, help="rows to sweep, comma-separated (default: 1..2048)")
    ap.add_argument("--rounds", type=int, default=None, help=f"rounds of turns a cell (default {ROUNDS})")
    ap.add_argument("--cold", action="store_true", help="w from memory: each call reads another copy")
    ap.add_argument("--small-m", type=int, default=None, metavar="ROWS",
                    help="stream B for products of at most ROWS rows (0: the single packed tile of before)")
    a = ap.parse_args(argv)
    if a.small_m is not None:  # (part of the GEMM library's cache key: a build of its own)
        gemm.SMALL_M, gemm.ROW_STREAM_M = a.small_m, min(gemm.ROW_STREAM_M, a.small_m)
    rounds, ms = (3, MS_QUICK) if a.quick else (ROUNDS, MS)
    ms = tuple(int(m) for m in a.ms.split(",")) if a.ms else ms
    rounds = a.rounds or rounds
    print(f"{cpu_description()}, Python {platform.python_version()}, numpy {np.__version__}; "
          + ("w from memory (--cold)" if a.cold else "w hot in cache"))
    # (a compile cache of its own, holding this CPU's calibration: the sweep's compiles stay out of the user's)
    harness.keep_machine_artifacts()
    cache_dir = tempfile.TemporaryDirectory(prefix="shapejit-sweep-cache-")
    os.environ["SHAPEJIT_CACHE_DIR"] = cache_dir.name
    reset_default_cache()
    harness.seed_machine_artifacts(cache_dir.name)
    harness.print_choice()
    peak = bench_peak.peak(np.float32) * 1e9
    print(f"the multiply-add peak on every core (python -m bench.peak): {peak / 1e9:.0f} GFLOP/s; ceiling: "
          "numpy's time / the peak's time for the cell's multiply-adds (no policy can pass it)")
    rng = np.random.default_rng(0)
    store = lower.fuse_epilogues()  # (where shapejit puts an epilogue: the variable's, before any policy's)
    policies = ("shapejit", "kernel", "pass", "BLAS")
    all_ratios = {p: [] for p in policies + ("oracle", "ceiling")}
    for pair in a.pairs.split(","):
        K, N = map(int, pair.split("x"))
        w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
        b = (rng.standard_normal(N) * 0.1).astype(np.float32)
        ws = itertools.cycle([w] + [w.copy() for _ in range(dispatch.cold_copies(w.nbytes) - 1 if a.cold else 0)])
        # f: the epilogue in the GEMM's store; g: as a pass of its own; shapejit: whichever is the default
        f, g = jit(linear_gelu), jit(lambda x, w, b: linear_gelu(x, w, b))
        runs = {"shapejit": (f if store else g, store), "kernel": (f, True), "pass": (g, False), "BLAS": (f, True)}
        print(f"\nK={K}, N={N}: numpy time / policy time (above 1: faster than numpy)")
        print(f"{'M':>6} {'numpy ms':>9} " + " ".join(f"{p:>9}" for p in all_ratios) + "  choice")
        for m in ms:
            x = rng.standard_normal((m, K)).astype(np.float32)
            ref = linear_gelu(x, w, b)
            gemmchoice.forget()
            lower.FUSE_EPILOGUES = store  # (shapejit's own, whatever the last turn left)
            for _ in range(2):  # (a trace's call runs in numpy; the next call of a class measures both and
                runs["shapejit"][0](x, w, b)  # decides: outside the timing)
            choice = {"shapejit": gemmchoice.BEST.get(gemmchoice.shape_class("f", m, N, K, store)),
                      "kernel": False, "pass": False, "BLAS": True}
            if choice["shapejit"] is None:  # (the product did not reach a GEMM step: numpy ran it)
                choice["shapejit"] = True
            calls = [lambda: linear_gelu(x, next(ws), b)]
            for name in policies:
                fn, in_store = runs[name]
                k = gemmchoice.shape_class("f", m, N, K, in_store)
                for _ in range(2):
                    got = _call(fn, k, choice[name], x, w, b, in_store)
                assert got.dtype == ref.dtype and np.allclose(got, ref, rtol=1e-4, atol=1e-4), (name, m)
                calls.append(lambda fn=fn, k=k, name=name, s=in_store: _call(fn, k, choice[name], x, next(ws), b, s))
            t = harness.in_turns(calls, rounds)
            ratios = {name: t[0] / t[i + 1] for i, name in enumerate(policies)}
            ratios["oracle"] = max(ratios["kernel"], ratios["pass"], ratios["BLAS"])
            ratios["ceiling"] = t[0] * peak / (2.0 * m * N * K)
            for k, v in ratios.items():
                all_ratios[k].append(v)
            print(f"{m:>6} {t[0] * 1e3:>9.3f} " + " ".join(f"{ratios[p]:>9.2f}" for p in all_ratios)
                  + f"  {'BLAS' if choice['shapejit'] else 'kernel'}")
        gemmchoice.forget()
    print("\nover every (K, N, M):")
    for p, r in all_ratios.items():
        print(f"  {p:>8}: median {statistics.median(r):.2f}x numpy, worst {min(r):.2f}x, "
              f"{sum(x >= 0.95 for x in r)}/{len(r)} cells at 0.95x or better")
    near = sum(s >= 0.9 * o for s, o in zip(all_ratios["shapejit"], all_ratios["oracle"]))
    print(f"  shapejit within 10% of the oracle in {near}/{len(all_ratios['oracle'])} cells")
    return 0


ROUNDS = 5


def _call(f, key, blas, x, w, b, in_store):
    gemmchoice.BEST[key] = blas  # (one dict store: the product's implementation for this call)
    # (one more: whether a trace this call makes puts the epilogue in the GEMM's store)
    lower.FUSE_EPILOGUES = in_store
    return f(x, w, b)


if __name__ == "__main__":
    raise SystemExit(main())

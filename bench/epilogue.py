"""python -m bench.epilogue [--ms 1,16,64,256] [--repeats 100]: a product's
epilogue in the GEMM's store against the same epilogue as a pass of its own
after the product (codegen.lower.FUSE_EPILOGUES off while the second function
compiles; the switch is part of a saved trace's key, so neither reuses the
other's), for x @ w + b, GELU(x @ w + b) and x @ w + b + r, with calls of
numpy, the fused and the unfused function interleaved (the machine's drift
falls on all three).  Run it with SHAPEJIT_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1 for one core each.  Prints each against numpy and
fused over unfused speed (above 1: the store is faster).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from bench import harness
from bench.report import cpu_description
from codegen import lower
from jit import jit
from runtime import gemmchoice


def gelu(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


PROGRAMS = {"bias": lambda x, w, b, r: x @ w + b, "bias+gelu": lambda x, w, b, r: gelu(x @ w + b),
            "bias+residual": lambda x, w, b, r: x @ w + b + r}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ms", default="1,16,64,256")
    ap.add_argument("--repeats", type=int, default=100)
    a = ap.parse_args(argv)
    gemmchoice.PREFER = "kernel"  # (both on the GEMM kernel: only where the epilogue runs differs)
    harness.keep_machine_artifacts()  # (this CPU's, calibrated now if missing: none starts in the background)
    print(f"{cpu_description()}: numpy time / policy time; store / pass")
    rng = np.random.default_rng(0)
    for K, N in ((768, 3072), (3072, 768)):
        for M in map(int, a.ms.split(",")):
            args = (rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32),
                    rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32))
            row = []
            for name, fn in PROGRAMS.items():
                fused = jit(lambda *v, fn=fn: fn(*v))
                lower.FUSE_EPILOGUES = False
                try:
                    unfused = jit(lambda *v, fn=fn: fn(*v))
                    for _ in range(3):  # (traced and compiled here, with the switch each was made under)
                        unfused(*args)
                finally:
                    lower.FUSE_EPILOGUES = True
                for _ in range(3):
                    fused(*args)
                assert "in the GEMM store" in fused.explain() and "in the GEMM store" not in unfused.explain()
                t = {"numpy": [], "store": [], "pass": []}
                for _ in range(a.repeats):
                    for k, g in (("numpy", fn), ("store", fused), ("pass", unfused)):
                        t0 = time.perf_counter()
                        g(*args)
                        t[k].append(time.perf_counter() - t0)
                tn, tf, tu = (float(np.median(t[k])) for k in ("numpy", "store", "pass"))
                row.append(f"{name} store {tn / tf:.2f}x pass {tn / tu:.2f}x (store/pass {tu / tf:.2f})")
            print(f"K={K} N={N} M={M}: " + " | ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""python -m bench.calls KERNEL [KERNEL ...] [--preset S] [--calls 14]

Per-call times of one jitted corpus kernel, call after call in a fresh jit
(the first call traces and compiles), against numpy's median on the same
inputs: what the first calls after a compile cost, which the corpus report's
few steady calls fold into one median (an unrolled loop's executable runs
unspecialized bytecode until CPython 3.11 specializes it, runtime/generate.py
_WARMUP).  Times in ms; inputs fresh for every call.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

from bench.corpus import BY_NAME, fresh
from bench.report import cpu_description
from jit import jit


def times(fn, base, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        args = fresh(base)
        t = time.perf_counter()
        fn(*args)
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.calls")
    ap.add_argument("kernels", nargs="+", choices=sorted(BY_NAME))
    ap.add_argument("--preset", default="S")
    ap.add_argument("--calls", type=int, default=14)
    a = ap.parse_args(argv)
    print(f"{cpu_description()}, Python {platform.python_version()}, numpy {np.__version__}")
    for name in a.kernels:
        k = BY_NAME[name]
        base = k.make_inputs(a.preset, np.random.default_rng(0))
        jitted = times(jit(k.fn), base, a.calls)
        numpy = statistics.median(times(k.fn, base, 5))
        print(f"{name} {a.preset}: first call {jitted[0] / 1e3:.1f} s; calls 2-{a.calls} (ms): "
              + " ".join(f"{t:.1f}" for t in jitted[1:]) + f"; numpy median {numpy:.1f} ms")


if __name__ == "__main__":
    main()

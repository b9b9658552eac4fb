"""python -m bench.mixed [--rounds 60] [--runs 2]: a program that mixes
numpy's products with jitted calls, with numpy's OpenBLAS on shapejit's
pool (SHAPEJIT_SHARE_BLAS=1, the default) and on its own threads (=0).

Each run is a fresh process per setting (the two alternate, so the machine's
drift falls on both).  In it: the jitted `x @ w + b` called alone (no numpy
product for 0.3 s before nor meanwhile: "jit alone"), numpy's `x @ w` alone
likewise, then rounds in which the two alternate ("jit in the mix", each
call timed right after numpy's product, and "numpy in the mix", right after
the jitted call); x 256 x 768, w 768 x 3072, float32, the jitted product on
our GEMM kernel whichever variant the dispatch would choose (at this shape
it may choose numpy's BLAS, whose threads then meet only themselves).  Prints the medians
and the ratios mix / alone: 1.00 means the other library's threads cost
nothing.  After a threaded product OpenBLAS's own threads wait busily (~0.1
s, no yield) on the cores the next kernels need (runtime/threadpool.py).
Last, numpy's LAPACK outside any jitted call (a complex solve and a real
inverse of order 200), timed in the same process before shapejit's pool
started and after: its price of each setting.  The child imports numpy
before shapejit, as most programs do: when the pool takes numpy's BLAS it
restarts OpenBLAS's threads with a short wait (runtime/threadpool.py
BLAS_THREAD_TIMEOUT; "restarted" in the table).  A third setting shares the
pool with OPENBLAS_THREAD_TIMEOUT=12 set before numpy loads OpenBLAS.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from bench import harness
from bench.report import cpu_description

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = (256, 768, 3072)


def _lapack(rng) -> dict:
    """numpy's LAPACK as a program calls it outside jitted code: the median
    time of a complex solve and a real inverse (LU factorizations: OpenBLAS
    threads part of them on its own server threads, part through exec_blas)."""
    a = rng.standard_normal((LAPACK_N, LAPACK_N)) + 1j * rng.standard_normal((LAPACK_N, LAPACK_N))
    y = rng.standard_normal((LAPACK_N, 3 * LAPACK_N)) + 0j
    r = rng.standard_normal((LAPACK_N, LAPACK_N))
    out = {}
    for key, fn in (("solve", lambda: np.linalg.solve(a, y)), ("inv", lambda: np.linalg.inv(r))):
        ts = []
        for _ in range(40):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        out[key] = float(np.median(ts[5:]))
    return out


LAPACK_N = 200
# (SHAPEJIT_SHARE_BLAS, OPENBLAS_THREAD_TIMEOUT): OpenBLAS's own threads, which its LU factorizations
# still use (exec_blas_async), wait 2^28 cycles before they sleep, or 2^12 with the variable at 12
SETTINGS = (("1", None), ("0", None), ("1", "12"))


def _child(rounds: int) -> dict:
    lapack_before = _lapack(np.random.default_rng(1))  # (before shapejit's pool starts)
    from jit import jit
    from runtime import gemmchoice, threadpool
    gemmchoice.PREFER = "kernel"  # (the product on our GEMM whatever the dispatch: the two pools meet)
    m, k, n = SHAPE
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    f = jit(lambda x, w, b: x @ w + b)
    for _ in range(5):
        f(x, w, b)
        x @ w
    times = {"jit alone": [], "numpy alone": [], "jit in the mix": [], "numpy in the mix": []}

    def timed(key, fn):
        t0 = time.perf_counter()
        fn()
        times[key].append(time.perf_counter() - t0)

    for key, fn in (("jit alone", lambda: f(x, w, b)), ("numpy alone", lambda: x @ w)):
        time.sleep(0.3)  # (the other's threads settle)
        for _ in range(rounds):
            timed(key, fn)
    for _ in range(rounds):
        x @ w
        timed("jit in the mix", lambda: f(x, w, b))
        timed("numpy in the mix", lambda: x @ w)
    out = {key: float(np.median(v)) for key, v in times.items()}
    out["shared"] = threadpool.blas_shared()
    out["wait"] = bool(threadpool.SHORTENED)
    time.sleep(0.3)
    out["lapack"] = (lapack_before, _lapack(np.random.default_rng(1)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.mixed")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.rounds)))
        return 0
    harness.keep_machine_artifacts()  # (this CPU's calibration: no child starts one in the background)
    print(f"# numpy products and jitted calls in one program ({cpu_description()})")
    print(f"x {SHAPE[0]}x{SHAPE[1]} @ w {SHAPE[1]}x{SHAPE[2]} (+ b jitted), float32; medians of {args.rounds} "
          "calls; ratio = in the mix / alone")
    print()
    print("| run | numpy's BLAS on | jit alone | jit in the mix | ratio | numpy alone | numpy in the mix | ratio "
          f"| solve {LAPACK_N} (complex) after / before the pool | inv {LAPACK_N} after / before |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for run in range(args.runs):
        for share, timeout in SETTINGS:
            env = {**os.environ, "SHAPEJIT_SHARE_BLAS": share, "PYTHONPATH": ROOT}
            env.pop("OPENBLAS_THREAD_TIMEOUT", None)
            if timeout:
                env["OPENBLAS_THREAD_TIMEOUT"] = timeout
            r = subprocess.run([sys.executable, "-m", "bench.mixed", "--child", "--rounds", str(args.rounds)],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                print(r.stderr[-2000:], file=sys.stderr)
                return 1
            d = json.loads(r.stdout.strip().splitlines()[-1])
            where = ("shapejit's pool" if d["shared"] else "its own threads") + (
                f", OPENBLAS_THREAD_TIMEOUT={timeout}" if timeout else ", restarted with wait 2^12" if d["wait"] else "")
            ms = {k: v * 1e3 for k, v in d.items() if k not in ("shared", "lapack", "wait")}
            before, after = d["lapack"]
            lapack = " | ".join(f"{after[k] * 1e3:.2f} / {before[k] * 1e3:.2f} ms ({after[k] / before[k]:.2f})"
                                for k in ("solve", "inv"))
            print(f"| {run + 1} | {where} | {ms['jit alone']:.2f} ms | {ms['jit in the mix']:.2f} ms | "
                  f"{ms['jit in the mix'] / ms['jit alone']:.2f} | {ms['numpy alone']:.2f} ms | "
                  f"{ms['numpy in the mix']:.2f} ms | {ms['numpy in the mix'] / ms['numpy alone']:.2f} | {lapack} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

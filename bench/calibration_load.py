"""python -m bench.calibration_load [--seconds 8]: what a background
calibration of the GEMM dispatch (`python -m jit calibrate` in a process of
its own, as jit/compile.py starts one on a CPU without a calibration) costs
a program in the foreground: the median time of a numpy matmul (384 x 768 @
768 x 3072, float32, numpy's BLAS on every core) alone, beside a calibration
at nice 19, and beside one under SCHED_IDLE (what shapejit starts); how
long each calibration took; and what starting one costs the process that
starts it (jit/compile.py's own start, in an empty cache: the time until
it returns), and how long that calibration takes on the otherwise idle
machine.  Each calibration writes into a cache directory
of its own, removed afterwards.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.report import cpu_description

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _matmul_ms(seconds: float) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((384, 768)).astype(np.float32)
    w = rng.standard_normal((768, 3072)).astype(np.float32)
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        a @ w
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _beside(how: str, seconds: float) -> tuple[float, float]:
    """(median matmul ms, seconds the calibration took) with a calibration
    started `how` ("nice" or "idle") in the background."""
    cache = tempfile.mkdtemp(prefix="shapejit-calibration-load-")
    env = dict(os.environ, SHAPEJIT_CACHE_DIR=cache, SHAPEJIT_CALIBRATE="0")
    cmd = [sys.executable, "-m", "jit", "calibrate", "--dtypes", "float32"]
    if how == "idle":
        cmd += ["--background", _key(cache)]
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                preexec_fn=(lambda: os.nice(19)) if how == "nice" else None)
        time.sleep(1.0)  # (past its start-up: the calibration itself runs beside the matmuls)
        ms = _matmul_ms(seconds)
        proc.wait()
        return ms, time.perf_counter() - t0
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _key(cache: str) -> str:
    """The cache key a process of this CPU would claim (any key will do for
    the measurement: the calibration is the same)."""
    return "calibration-load-" + os.path.basename(cache)


def _started_here() -> tuple[float, float]:
    """(ms until shapejit's own start of a background calibration returned,
    seconds until its tree was installed), in an empty cache."""
    from jit import compile as compile_mod
    from runtime.cache import default_cache, reset_default_cache
    cache = tempfile.mkdtemp(prefix="shapejit-calibration-load-")
    saved = {k: os.environ.get(k) for k in ("SHAPEJIT_CACHE_DIR", "SHAPEJIT_CALIBRATE")}
    os.environ.update(SHAPEJIT_CACHE_DIR=cache, SHAPEJIT_CALIBRATE="1")
    reset_default_cache()
    try:
        dtype = np.dtype(np.float32)
        default_cache()  # (opened by the GEMM library's load, before a calibration starts)
        t0 = time.perf_counter()
        compile_mod._calibrate_in_background(dtype, compile_mod._dispatch_key(dtype))
        spawn = time.perf_counter() - t0
        while compile_mod.calibrating():
            time.sleep(0.05)
        return spawn * 1e3, time.perf_counter() - t0
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        reset_default_cache()
        shutil.rmtree(cache, ignore_errors=True)


def _first_calls(runs: int) -> None:
    """bert_layer's first and next call in fresh processes with empty caches
    (bench/coldstart.py), a background calibration on and off in turns."""
    from bench.coldstart import run_child
    for i in range(runs):
        for on in ("0", "1"):
            while subprocess.run(["pgrep", "-f", "jit calibrate"], capture_output=True).returncode == 0:
                time.sleep(0.5)  # (the last run's calibration finished first)
            with tempfile.TemporaryDirectory(prefix="shapejit-calibration-load-") as d:
                os.environ["SHAPEJIT_CALIBRATE"] = on
                try:
                    r = run_child("first", "shapejit-dyn", Path(d))
                finally:
                    os.environ.pop("SHAPEJIT_CALIBRATE")
            print(f"SHAPEJIT_CALIBRATE={on}: first call {r.get('first', float('nan')):.3f} s, the next "
                  f"{r.get('steady', float('nan')) * 1e3:.1f} ms")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="seconds of matmuls in each measurement")
    ap.add_argument("--first-calls", type=int, default=0, metavar="RUNS",
                    help="instead: bert_layer's first calls in fresh processes, a calibration on and off")
    a = ap.parse_args(argv)
    print(f"{cpu_description()}, numpy {np.__version__}")
    if a.first_calls:
        _first_calls(a.first_calls)
        return 0
    alone = _matmul_ms(a.seconds)
    print(f"numpy matmul 384x768 @ 768x3072 alone:               {alone:7.2f} ms (1.00x)")
    for how, label in (("nice", "beside a nice-19 calibration:     "), ("idle", "beside a SCHED_IDLE calibration:  ")):
        ms, took = _beside(how, a.seconds)
        print(f"numpy matmul {label}     {ms:7.2f} ms ({ms / alone:.2f}x); the calibration took {took:.1f} s")
    spawn_ms, took = _started_here()
    print(f"starting one (jit/compile.py): {spawn_ms:.1f} ms until it returned; its tree installed after "
          f"{took:.1f} s on the otherwise idle machine")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

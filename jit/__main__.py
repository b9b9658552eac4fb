"""`python -m jit demo`: a jitted layer serving a stream of changing shapes."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def _layer(x, p, eps):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    h = (x - m) / np.sqrt(v + eps) * p["g"] + p["b"]
    u = h @ p["w1"] + p["b1"]
    u = 0.5 * u * (1.0 + np.tanh(0.7978845608 * (u + 0.044715 * u * u * u)))
    return x + u @ p["w2"] + p["b2"]


def demo(calls: int, backend: str) -> int:
    from jit import jit, metrics
    from runtime.cache import default_cache

    rng = np.random.default_rng(0)
    d, h = 256, 1024
    p = {"g": np.ones(d, np.float32), "b": np.zeros(d, np.float32),
         "w1": (rng.standard_normal((d, h)) / 16).astype(np.float32), "b1": np.zeros(h, np.float32),
         "w2": (rng.standard_normal((h, d)) / 32).astype(np.float32), "b2": np.zeros(d, np.float32)}
    server, _ = metrics.serve(0)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    f = jit(_layer, backend=backend, name="demo_layer")
    shapes = [(int(rng.integers(2, 9)), int(rng.integers(2, 257))) for _ in range(calls)]
    print(f"shapejit demo: a LayerNorm + GELU MLP layer (d={d}, hidden={h}), float32, {calls} calls with "
          f"random (batch, seq) shapes, backend={backend}")
    t_jit = t_np = 0.0
    worst = 0.0
    first = None
    for k, (b, s) in enumerate(shapes):
        x = rng.standard_normal((b, s, d)).astype(np.float32)
        t0 = time.perf_counter()
        y = f(x, p, 1e-5)
        t1 = time.perf_counter()
        ref = _layer(x, p, 1e-5)
        t2 = time.perf_counter()
        if k == 0:
            first = t1 - t0
        else:
            t_jit += t1 - t0
            t_np += t2 - t1
        assert y.dtype == ref.dtype and y.shape == ref.shape
        worst = max(worst, float(np.max(np.abs(y - ref)) / (np.max(np.abs(ref)) + 1e-30)))
        if k < 3 or k == calls - 1:
            print(f"  call {k:4d}: x{list(x.shape)} -> {list(y.shape)}")
    st = f.stats()
    cache = default_cache()
    print(f"\n{'':28s}{'shapejit':>12s}{'numpy':>12s}")
    print(f"{'time, calls 1..' + str(calls - 1):28s}{t_jit * 1e3:>10.1f}ms{t_np * 1e3:>10.1f}ms"
          f"   numpy/shapejit = {t_np / t_jit:.2f}x")
    how = "trace+compile" if st["traces"] else "saved trace, from disk"
    print(f"{'first call (' + how + ')':28s}{first * 1e3:>10.1f}ms")
    print(f"\ndistinct shapes: {len(set(shapes))}   traces: {st['traces']}   compiles: {st['compiles']}   "
          f"recompiles: {st['recompiles']}   fallbacks: {st['fallbacks']}")
    print(f"calls served by a compiled entry: {st['entry_hits']}; compile cache: {st['cache_hits_disk']} disk hits "
          f"(a second run of this demo loads the saved trace and object code from disk: "
          f"traces 0, compiles 0, disk hits 1); "
          f"{len(cache)} entries in {cache.directory if cache.on_disk else '(memory only)'}")
    print(f"memory: {st['bytes_allocated'] / 2**20:.1f} MiB allocated in total, peak of one call "
          f"{st['peak_bytes'] / 2**20:.2f} MiB")
    print(f"agreement with numpy: max error {worst:.1e} relative to the largest output")
    print(f"\nPrometheus metrics: {url} (while this runs); a sample:")
    import urllib.request
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    for line in text.splitlines():
        if 'function="demo_layer"' in line and any(k in line for k in (
                "shapejit_compiles_total", "shapejit_calls_total", "shapejit_call_seconds_count",
                "shapejit_call_seconds_sum", "shapejit_entry_hits_total", "shapejit_peak_bytes",
                'artifact="trace",function="demo_layer",level="disk"')):
            print("  " + line)
    server.shutdown()
    ok = st["traces"] + st["cache_hits_disk"] == 1 and worst < 1e-4  # traced here, or loaded from disk
    print("\nOK: one trace served every shape" if ok else "\nFAILED")
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m jit", description="shapejit command line")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="a jitted layer over a stream of changing shapes")
    d.add_argument("--calls", type=int, default=200)
    d.add_argument("--backend", default="llvm", choices=("llvm", "reference"))
    c = sub.add_parser("cache", help="list the persistent compile cache (or clear it)")
    c.add_argument("--clear", action="store_true", help="remove every entry")
    k = sub.add_parser("calibrate", help="time the GEMM kernel and numpy's matmul on this CPU and keep the "
                                         "dispatch tree learned from them (seconds)")
    k.add_argument("--dtypes", default="float32,float64")
    k.add_argument("--rounds", type=int, default=3)
    k.add_argument("--background", metavar="KEY", help=argparse.SUPPRESS)  # (a process's own, at the lowest priority)
    args = ap.parse_args(argv)
    if args.cmd == "demo":
        return demo(args.calls, args.backend)
    if args.cmd == "cache":
        return cache_command(args.clear)
    if args.cmd == "calibrate":
        if args.background:
            if "," in args.dtypes:
                ap.error("--background calibrates one dtype")
            _yield_to_everything()
        return calibrate_command(args.dtypes.split(","), args.rounds, args.background)
    return 2


def _yield_to_everything() -> None:
    """Run this process only on cores nothing else wants (Linux's SCHED_IDLE,
    every thread: numpy's BLAS threads exist already; threads started later
    inherit it), else at the lowest priority.  `python -m
    bench.calibration_load` measures what it costs a numpy matmul in the
    foreground (0.81-1.12x of its time alone in four runs on a 2-core AMD
    EPYC, znver3; 0.75-1.17x beside a nice-19 calibration)."""
    try:
        for tid in os.listdir("/proc/self/task"):
            os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def calibrate_command(dtypes: list, rounds: int, key: str | None = None) -> int:
    from jit.compile import calibrate_gemm
    from runtime import dispatch
    from shapes import host

    forced = f", SHAPEJIT_ISA={host.forced()} forced" if host.forced() else ""
    print(f"calibrating products on {host.cpu_name()} ({'with' if host.has_avx512() else 'no'} AVX-512{forced})")
    for name in dtypes:
        t0 = time.perf_counter()
        try:
            cal, tree = calibrate_gemm(np.dtype(name), rounds, key=key)
        except dispatch.Disturbed as e:  # (nothing kept: a later process calibrates again)
            print(f"\n{np.dtype(name).name}: {e}; nothing kept")
            return 1
        print(f"\n{np.dtype(name).name}: {len(cal.times)} shapes in {time.perf_counter() - t0:.1f} s "
              f"(kernel and numpy's matmul, the least of {rounds} passes over the grid):")
        for m, k, n, tk, tb in cal.times:
            print(f"  M={m:<5d} K={k:<5d} N={n:<5d} kernel {tk * 1e3:8.3f} ms  numpy {tb * 1e3:8.3f} ms  "
                  f"({tb / tk:.2f}x)")
        print("  dispatch tree (a shape class not seen yet takes its variant):")
        print("\n".join("    " + x for x in dispatch.describe(tree)))
    return 0


def cache_command(clear: bool) -> int:
    from runtime.cache import default_cache

    cache = default_cache()
    if not cache.on_disk:
        print(f"shapejit cache: disabled or unusable ({cache.disk_error or 'SHAPEJIT_CACHE=0'})")
        return 1
    if clear:
        print(f"cleared {cache.clear()} entries from {cache.directory}")
        return 0
    entries = cache.entries()
    print(f"shapejit compile cache: {cache.directory}")
    print(f"{'function':30s} {'kind':8s} {'size':>10s} {'age':>10s}  signature")
    for e in sorted(entries, key=lambda e: e.age_s):
        print(f"{e.function[:30]:30s} {e.kind:8s} {e.size:>10,d} {_age(e.age_s):>10s}  {e.signature[:80]}")
    code = sum(e.size for e in entries if e.kind in ("artifact", "library"))
    traces = sum(1 for e in entries if e.kind == "trace")
    libraries = sum(1 for e in entries if e.kind == "library")
    print(f"{len(entries)} entries ({traces} saved traces, {libraries} library kernels), "
          f"{code:,d} bytes of object code, "
          f"{cache.volume():,d} bytes on disk (limit {cache.size_limit:,d})")
    return 0


def _age(s: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s / n:.1f}{unit}"
    return f"{s:.0f}s"


if __name__ == "__main__":
    sys.exit(main())

"""`python -m jit demo`: a jitted layer serving a stream of changing shapes."""
from __future__ import annotations

import argparse
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
    from jit import jit

    rng = np.random.default_rng(0)
    d, h = 256, 1024
    p = {"g": np.ones(d, np.float32), "b": np.zeros(d, np.float32),
         "w1": (rng.standard_normal((d, h)) / 16).astype(np.float32), "b1": np.zeros(h, np.float32),
         "w2": (rng.standard_normal((h, d)) / 32).astype(np.float32), "b2": np.zeros(d, np.float32)}
    f = jit(_layer, backend=backend)
    shapes = [(int(rng.integers(2, 9)), int(rng.integers(2, 257))) for _ in range(calls)]
    print(f"shapejit demo: a LayerNorm + GELU MLP layer (d={d}, hidden={h}), float32, "
          f"{calls} calls with random (batch, seq) shapes, backend={backend}")
    t_jit = t_np = 0.0
    worst = 0.0
    for k, (b, s) in enumerate(shapes):
        x = rng.standard_normal((b, s, d)).astype(np.float32)
        t0 = time.perf_counter()
        y = f(x, p, 1e-5)
        t1 = time.perf_counter()
        ref = _layer(x, p, 1e-5)
        t2 = time.perf_counter()
        if k > 0:
            t_jit += t1 - t0
            t_np += t2 - t1
        assert y.dtype == ref.dtype and y.shape == ref.shape
        worst = max(worst, float(np.max(np.abs(y - ref) / (np.abs(ref) + 1e-3))))
        if k < 5 or k == calls - 1:
            print(f"  call {k:4d}: x{list(x.shape)} -> {list(y.shape)}  traces={f.stats()['traces']} "
                  f"compiles={f.stats()['compiles']}")
    st = f.stats()
    print(f"distinct shapes: {len(set(shapes))}, traces: {st['traces']}, compiles: {st['compiles']}, "
          f"recompiles: {st['recompiles']}, memory cache hits: {st['cache_hits_memory']}, "
          f"fallbacks: {st['fallbacks']}")
    print(f"agreement with numpy: max relative error {worst:.2e}")
    print(f"steady time over calls 1..{calls - 1}: shapejit {t_jit * 1e3:.1f} ms, numpy {t_np * 1e3:.1f} ms "
          f"(numpy / shapejit = {t_np / t_jit:.2f}x)")
    print("\nf.explain() (abridged):")
    print("\n".join(f.explain().splitlines()[:14]))
    ok = st["traces"] == 1 and worst < 1e-3
    print("\nOK: one trace served every shape" if ok else "\nFAILED")
    return 0 if ok else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m jit", description="shapejit command line")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="a jitted layer over a stream of changing shapes")
    d.add_argument("--calls", type=int, default=200)
    d.add_argument("--backend", default="reference")
    c = sub.add_parser("cache", help="list the persistent compile cache (or clear it)")
    c.add_argument("--clear", action="store_true", help="remove every entry")
    args = ap.parse_args(argv)
    if args.cmd == "demo":
        return demo(args.calls, args.backend)
    if args.cmd == "cache":
        return cache_command(args.clear)
    return 2


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
    print(f"{'function':30s} {'size':>10s} {'age':>10s}  signature")
    for e in sorted(entries, key=lambda e: e.age_s):
        print(f"{e.function[:30]:30s} {e.size:>10,d} {_age(e.age_s):>10s}  {e.signature[:80]}")
    print(f"{len(entries)} entries, {sum(e.size for e in entries):,d} bytes of object code, "
          f"{cache.volume():,d} bytes on disk (limit {cache.size_limit:,d})")
    return 0


def _age(s: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s / n:.1f}{unit}"
    return f"{s:.0f}s"


if __name__ == "__main__":
    sys.exit(main())

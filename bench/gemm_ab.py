"""python -m bench.gemm_ab --a NAME=VALUE ... --b NAME=VALUE ... [--ms 64,256,1024] [--repeats 15]:
two builds of the GEMM library kernel (float32, or --dtype float64) (codegen/gemm.py) that differ
in module constants (MC, STREAM_BLOCK, SMALL_M, EPILOGUE_ROWS, ...), built in
one process and timed with their calls interleaved on one thread (each first
in every other round) — the
machine's drift falls on both alike.  For each (K, N) and M: both medians and
A's time over B's (above 1: B is faster).  Compare a constant against its
value in the tree, e.g. `--a MC=1073741824 --b MC=96`.  `--cold`: each
call reads another of the copies of B the calibration takes
(`runtime.dispatch.cold_copies`: twice the last-level cache), so B comes
from memory, as a model's weights do between their uses.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from llvmlite import ir

from bench.report import cpu_description
from codegen import gemm, parallel
from codegen.artifact import KernelInfo
from codegen.llvm import compile_ir
from runtime import dispatch
from runtime.loader import load

PAIRS = ((768, 3072), (3072, 768), (768, 768))


def build(symbol: str, consts: dict, dtype=np.float32):
    """The library kernel emitted with gemm's constants set to `consts`, loaded (its serial entry)."""
    old = {k: getattr(gemm, k) for k in consts}
    for k, v in consts.items():
        setattr(gemm, k, v)
    try:
        m = ir.Module(name=symbol)
        gemm.GemmEmitter(m, symbol, dtype).emit()
        parallel.parallel_entries(m, m.globals[symbol], *gemm.ARGS, python=True)
        kernels = parallel.with_parallel([(symbol, *gemm.ARGS)], python=True)
        art = compile_ir(str(m), [KernelInfo(*k) for k in kernels], {"function": "library"}, optimize=False)
        return load(art)[symbol]
    finally:
        for k, v in old.items():
            setattr(gemm, k, v)


def _consts(pairs: list) -> dict:
    out = {}
    for p in pairs:
        name, _, value = p.partition("=")
        if not hasattr(gemm, name):
            raise SystemExit(f"codegen.gemm has no constant {name!r}")
        out[name] = int(value)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", nargs="*", default=[])
    ap.add_argument("--b", nargs="*", default=[])
    ap.add_argument("--ms", default="8,16,64,256,1024")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--cold", action="store_true", help="B from memory: a call reads another copy")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--pairs", default=",".join(f"{k}x{n}" for k, n in PAIRS), help="KxN,...")
    a = ap.parse_args(argv)
    print(f"{cpu_description()}; A: {a.a or 'as in the tree'}, B: {a.b or 'as in the tree'}; 1 thread")
    dt = np.dtype(a.dtype)
    fns = {"A": build("sj_gemm_ab_a", _consts(a.a), dt), "B": build("sj_gemm_ab_b", _consts(a.b), dt)}
    nr = gemm.tile_for(dt).nr
    rng = np.random.default_rng(0)
    for K, N in (map(int, p.split("x")) for p in a.pairs.split(",")):
        b = rng.standard_normal((K, N)).astype(dt)
        bs = [b] + [b.copy() for _ in range(dispatch.cold_copies(b.nbytes) - 1 if a.cold else 0)]
        row = []
        for M in map(int, a.ms.split(",")):
            x = rng.standard_normal((M, K)).astype(dt)
            c = np.empty((M, N), dt)
            t = {k: [] for k in fns}
            for i in range(a.repeats):
                for j, (k, fn) in enumerate(sorted(fns.items(), reverse=bool(i % 2))):  # (A, then B first)
                    b = bs[(2 * i + j) % len(bs)]
                    t0 = time.perf_counter()
                    fn(0, -(-N // nr), x, b, c, M, N, K, 0, 0, 0, 0)
                    t[k].append(time.perf_counter() - t0)
                assert np.allclose(c, x @ b, rtol=1e-3, atol=1e-3)
            ta, tb = np.median(t["A"]), np.median(t["B"])
            row.append(f"M={M}: {ta * 1e3:.2f}/{tb * 1e3:.2f} ms ({ta / tb:.2f})")
        print(f"K={K} N={N}: " + " | ".join(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

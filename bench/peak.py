"""python -m bench.peak: this CPU's multiply-add peak, GFLOP/s on every core
at once, float32 and float64, with the vectors the GEMM kernel uses (AVX-512's
where the host has it and SHAPEJIT_ISA does not narrow it, else AVX2's).

A loop of independent fused multiply-adds (ACCUMULATORS chains, more than
an FMA's latency times the FMA units, so the units never wait), compiled
with llvmlite for the host as SHAPEJIT_ISA sees it, run on one core and on
every core at once (ctypes releases the GIL, so the threads run together):
the peak is the higher of one core's best times the cores and every core's
best together.  No product of
that width can run faster: `bench.gemm_sweep` divides a cell's flops by it
to give the ceiling of a ratio to numpy (numpy's time / the peak's time for
the same multiply-adds): a cell whose ceiling is under a target cannot reach
it on this CPU with that ISA.
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
import time

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir

from codegen import llvm as codegen_llvm
from shapes import host

ACCUMULATORS = 12  # independent chains: 2 FMA units x 4-5 cycles' latency, with room
TRIPS = 1 << 20  # loop trips a call (12 M multiply-adds of vectors: a few ms)
F = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType()}


def lanes(dtype) -> int:
    """Elements of a vector of the width the GEMM kernel uses here."""
    return (64 if host.has_avx512() else 32) // np.dtype(dtype).itemsize


@functools.cache
def _kernel(dtype: np.dtype):
    """`double f(i64 trips)`: TRIPS x ACCUMULATORS vector FMAs, their sum returned (not dead)."""
    ft = F[dtype]
    vt = ir.VectorType(ft, lanes(dtype))
    m = ir.Module(name="peak")
    m.triple = llvm.get_process_triple()
    suffix = f"v{vt.count}f{'32' if ft == ir.FloatType() else '64'}"
    fma = ir.Function(m, ir.FunctionType(vt, [vt] * 3), f"llvm.fma.{suffix}")
    fn = ir.Function(m, ir.FunctionType(ir.DoubleType(), [ir.IntType(64)]), "peak")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    one = ir.Constant(vt, [1.0] * vt.count)
    a = ir.Constant(vt, [0.999999] * vt.count)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(ir.IntType(64))
    accs = [b.phi(vt) for _ in range(ACCUMULATORS)]
    new = [b.call(fma, [acc, a, one]) for acc in accs]
    nxt = b.add(i, ir.Constant(ir.IntType(64), 1))
    i.add_incoming(ir.Constant(ir.IntType(64), 0), entry)
    i.add_incoming(nxt, loop)
    for k, (acc, v) in enumerate(zip(accs, new)):
        acc.add_incoming(ir.Constant(vt, [float(k)] * vt.count), entry)
        acc.add_incoming(v, loop)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[0]), loop, done)
    b.position_at_end(done)
    total = new[0]
    for v in new[1:]:
        total = b.fadd(total, v)
    b.ret(b.fpext(b.extract_element(total, ir.Constant(ir.IntType(32), 0)), ir.DoubleType())
          if ft != ir.DoubleType() else b.extract_element(total, ir.Constant(ir.IntType(32), 0)))
    tm = codegen_llvm.host_target()
    mod = llvm.parse_assembly(str(m))
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    f = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_int64)(engine.get_function_address("peak"))
    return engine, f


def gflops(dtype=np.float32, threads: int | None = None, repeats: int = 7) -> float:
    """The best of `repeats` runs of the FMA loop on `threads` threads at
    once (default: every core the process may use), in GFLOP/s (a
    multiply-add counts two)."""
    dtype = np.dtype(dtype)
    _, f = _kernel(dtype)
    threads = threads or cores()
    f(1000)  # (compiled and paged in)
    flops = 2 * TRIPS * ACCUMULATORS * lanes(dtype) * threads
    best = []
    for _ in range(repeats):
        start = threading.Barrier(threads + 1)
        workers = [threading.Thread(target=lambda: (start.wait(), f(TRIPS))) for _ in range(threads)]
        for w in workers:
            w.start()
        start.wait()
        t0 = time.perf_counter()
        for w in workers:
            w.join()
        best.append(flops / (time.perf_counter() - t0) / 1e9)
    return max(best)


def cores() -> int:
    return len(os.sched_getaffinity(0))


def peak(dtype=np.float32) -> float:
    """An upper bound of this CPU's multiply-add rate, GFLOP/s: one core's
    best (measured alone, after a pause that lets numpy's BLAS threads stop
    spinning) times the cores, or every core's best at once where that is
    higher.  (On a shared VM one core alone is the steadier measure: a
    second core is at times much slower.)"""
    time.sleep(0.3)
    return max(gflops(dtype, 1) * cores(), gflops(dtype))


def main() -> int:
    from bench.report import cpu_description
    print(cpu_description())
    for dtype in (np.float32, np.float64):
        one = [gflops(dtype, 1) for _ in range(3)]
        every = [gflops(dtype) for _ in range(3)]
        print(f"{np.dtype(dtype).name} ({lanes(dtype)} lanes): one core {max(one):.0f} GFLOP/s (runs "
              f"{', '.join(f'{r:.0f}' for r in one)}), {cores()} at once {max(every):.0f} (runs "
              f"{', '.join(f'{r:.0f}' for r in every)}): peak {max(max(one) * cores(), max(every)):.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

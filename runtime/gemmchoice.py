"""Which implementation runs a product on this host: the GEMM kernel
(codegen/gemm.py) or numpy's matmul (its BLAS), decided by measuring both.

Neither wins everywhere, and which one wins depends on the CPU: on a Zen 3
with AVX2 the kernel ran at 0.2-0.6x OpenBLAS for M <= 64 and 0.8-1.0x
above; on a Zen 4 with AVX-512 it ran at or above it for large M.  So no
host is assumed: an executable's product step looks its shape class up in
`BEST`; on a class not seen yet it runs both on the real operands, ROUNDS times
each in turns (the kernel last: its output is what the call returns),
and the faster one (numpy's by a MARGIN) runs that class from then on, for
every function of the process: the first call of a class pays 2 * ROUNDS
products, every later one pays one.

A shape class is (dtype, and the bit lengths of M, N and K): products
within a factor of two in each size behave alike.  The table is
per-process; a new process measures again.
"""
from __future__ import annotations

import threading

import numpy as np

ROUNDS = 2
# numpy's matmul takes a class only when it ran in less than 1/MARGIN of the
# kernel's time.  Measured alone, a BLAS product looks faster than it is in a
# jitted call, whose kernels then compete with OpenBLAS's spinning threads for
# the cores (on the 2-core AVX2 host): bert_layer over S in 1..512 ran 93 ms
# a call with every product on BLAS and 71 ms with every one on the kernel,
# though BLAS won 30 of its 34 classes alone (most by 1.2-1.8x); gemm and
# k2mm (1.65x, 1.7x alone) ran no faster on it.  Products the kernel is far
# off on (the corpus mlp's 8-row products: 2.7-9.6x) go to BLAS.
MARGIN = 2.5

# shape class -> True when numpy's matmul is the faster
BEST: dict[tuple, bool] = {}
# "kernel" or "blas": decide every class so instead of by the times (the
# test suite keeps its products on the kernel, whose results it checks)
PREFER: str | None = None
_lock = threading.Lock()


def shape_class(dtype, m: int, n: int, k: int) -> tuple:
    return np.dtype(dtype).char, int(m).bit_length(), int(n).bit_length(), int(k).bit_length()


def decide(key: tuple, kernel_seconds: list, blas_seconds: list) -> None:
    """Record the times of both implementations on a product of class `key`
    (ROUNDS each, taken in turns): the faster by its least time (numpy's by
    MARGIN) runs the class from now on."""
    with _lock:
        BEST.setdefault(key, PREFER == "blas" if PREFER else MARGIN * min(blas_seconds) < min(kernel_seconds))


def forget() -> None:
    """Measure every class again (tests; after the machine's load changed)."""
    with _lock:
        BEST.clear()


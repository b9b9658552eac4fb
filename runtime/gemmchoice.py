"""Which implementation runs a product on this host: the GEMM kernel
(codegen/gemm.py) or numpy's matmul (its BLAS), decided by measuring both.

Which one wins depends on the CPU and the shape: on the project's 2-core
AMD EPYC (LLVM: znver1, AVX2, no AVX-512) the kernel ran at 0.2-0.6x of
OpenBLAS alone for M <= 64 and 0.7-1.0x above (`python -m bench.gemmchoice`);
with AVX-512 its tile is twice as wide.  So no host is assumed: an
executable's product step looks its shape class up in `BEST`; on a class
not seen yet it runs both on the real operands, ROUNDS times each in turns
(the kernel last: its output is what the call returns), and the faster one
(numpy's by a MARGIN) runs that class from then on, for every function of
the process: the first call of a class pays 2 * ROUNDS products, every
later one pays one.

A shape class is (dtype char, M below EXACT_ROWS or else its bit length,
the bit lengths of N and K, whether an epilogue runs in the kernel's store,
whether B is read through a strided view, whether a C-contiguous B's rows
alias in L1): products within a factor of two in each size behave alike,
but for few rows, where the kernel's path depends on the exact count, and
for aliasing rows, which the kernel packs where it would stream others. The
table is per-process. Where this CPU has been calibrated
(runtime/dispatch.py: once per CPU, in the background, or by `python -m jit
calibrate`), the calibrated decision tree decides a class on sight instead,
in every process.
"""
from __future__ import annotations

import functools

import numpy as np

from shapes import forksafe
from shapes.kernelargs import rows_alias

ROUNDS = 1
# Every class no calibrated tree decides is raced, however many its rows.
# Products of 128 rows or more once ran on the kernel on sight, unraced: the
# race is not free (a class's first product runs twice), and on the AMD EPYC
# above the kernel ran at 0.7-1.0x of OpenBLAS from 128 rows, when a class
# went to BLAS only at a MARGIN of 2.5.  Products that kernel never suits ran
# several times slower (`python -m bench.gemmchoice --odd`, Intel Xeon
# emeraldrapids with AVX-512, numpy's time over the kernel's): 0.05x at 20000
# x 200 @ 200 x 1, 0.43-0.59x at N = 8 and 32 (fewer column strips than
# threads: one core works), 0.34x for A.T @ A of a 20000 x 400 A, 0.53x for
# float64 1000^3.  Raced, each takes numpy's matmul after one product
# (0.92-1.03x there).
# numpy's matmul takes a class only when it ran in less than 1/MARGIN of the
# kernel's time.  Measured alone, a BLAS product looks faster than it is in a
# jitted call, whose kernels then compete with OpenBLAS's spinning threads for
# the cores.  On the AMD EPYC above, three runs of `python -m bench.gemmchoice`:
# bert_layer over S in 1..512 ran 86-102 ms a call with every product on
# BLAS and 67-83 ms with every one on the kernel, though BLAS won about
# two thirds of its 34 classes alone (most by 1.05-1.8x); the corpus mlp's
# 8 x 30000 @ 30000 x 2000, 4.0-5.1x faster on BLAS alone, goes to it.
# Since numpy's OpenBLAS runs on our pool (runtime/threadpool.py) its threads
# no longer spin beside the kernels, and BLAS is as fast in a jitted call as
# alone: the faster one takes the class.  `python -m bench.gemm_sweep` on an
# AMD EPYC znver3 (no AVX-512) with the pool shared: with a margin of 2.5
# every class of 2 rows or more stayed on the kernel (worst cell 0.78x numpy,
# 45 of 66 within 10% of the best variant); with 1.0 (the calibrated tree
# sending most classes above 64 rows to BLAS), the epilogue a pass of its
# own: worst 0.95x, 66 of 66.
MARGIN = 1.0
# A product of one row (a GEMV: a decode step, a batch of one) once had a
# margin of its own, 0.75: its kernel then split B over its column strips,
# and in the jitted linear + GELU of `python -m bench.gemm_sweep` on an AMD
# EPYC znver3 (no AVX-512) the whole call ran at 0.51-0.88x numpy with the
# product on the kernel and 0.91-1.11x on BLAS, though the kernel alone was
# about as fast.  Now each thread reads a contiguous block of B's rows
# (runtime/gemv.py): `python -m bench.gemm_sweep --quick --cold` there, M =
# 1, the product on the kernel and the epilogue a pass of its own, 1.15-1.28x
# numpy against 0.98-1.02x on BLAS for the three (K, N), and MARGIN serves
# one row as any other.

# Products of fewer rows than this are each a class of their own: the
# kernel's path changes with the exact row count there (a single row tile
# at 1, 2, 4 and 6 rows streams B whatever its stride: codegen/gemm.py).
EXACT_ROWS = 16
# The tree decides products of depth K up to the class (bit length) of the
# deepest K the calibration measured (runtime/dispatch.py DEEPEST_K; install
# keeps its bit length here); a deeper one is raced, as is one of fewer
# columns than the calibration's fewest (its GRID_KN), whose class the tree
# never saw: at N = 1..32 the kernel ran 0.05-0.59x numpy's matmul's speed
# (above).  The corpus mlp's 8 x 30000 @ 30000 x
# 2000 ran at 0.78x numpy where a tree sent it to the kernel (`python -m
# bench --corpus --only ...,mlp,...`, AMD EPYC znver3, no AVX-512): its B
# streams at 8 rows, 1.2-1.3x slower than OpenBLAS there, which the
# calibration's K = 3072 does not show.
_tree_k_bits = 0
_tree_n_bits = 0  # (the bit length of the fewest columns the calibration measured: install keeps it)
# shape class -> True when numpy's matmul is the faster
BEST: dict[tuple, bool] = {}
# dtype char -> (the dispatch tree calibrated on this CPU, its generated
# function): it decides every class of that dtype on sight (runtime/dispatch.py)
TREES: dict[str, tuple] = {}
# "kernel" or "blas": decide every class so instead of by the times (the
# test suite keeps its products on the kernel, whose results it checks)
PREFER: str | None = None
_lock = forksafe.lock()


def shape_class(char: str, m: int, n: int, k: int, epilogue: bool = False, strided: bool = False) -> tuple:
    """The class of an (m x k) @ (k x n) product of dtype `char` (np.dtype.char),
    with an `epilogue` in the kernel's store or not (numpy's matmul is then
    followed by the epilogue's own pass).  `strided`: the kernel reads B through
    a strided view or a copy (a transposed weight, `x @ w.T`), which it
    packs where a C-contiguous B of few rows streams (codegen/gemm.py): the
    tree, calibrated on C-contiguous two-dimensional operands, does not
    decide such a class: it is raced.  (Where the tree sent a product of one
    row to the kernel, GPT-2's logits, `x @ wte.T`, ran several times
    slower on it than on numpy's gemv: `python -m bench --models`, T=1 at
    0.69x numpy on an AMD EPYC znver3, no AVX-512.  Where a tree sent
    attention's per-head products, `q @ k.T` of 128 rows with K = 64, to
    numpy's BLAS, the attention of `python -m bench --quick` took 516-531
    us against 419-425 on the kernel, two runs each, the same CPU.  A batch
    of products (`p @ v` per head) is such a class too (runtime/kernelcall.py
    passes it as strided): a tree sent `p @ v` (N = 64) to numpy's matmul,
    which loops over the batch, and the attention at S=512 took 3.8-4.1 ms
    against 2.6-2.7 on the kernel (`python -m bench --only attention`, AMD
    EPYC znver5, with AVX-512).)"""
    alias = not strided and rows_alias(n, _itemsize(char))
    key = char, m if m < EXACT_ROWS else EXACT_ROWS + m.bit_length(), n.bit_length(), k.bit_length(), epilogue, \
        strided, alias
    if key not in BEST:
        tree = TREES.get(char) if PREFER is None and not strided and key[3] <= _tree_k_bits \
            and key[2] >= _tree_n_bits else None
        if tree is not None:
            BEST[key] = tree[1](m, n, k, int(alias))
    return key


@functools.cache
def _itemsize(char: str) -> int:
    return np.dtype(char).itemsize


def install(char: str, tree) -> None:
    """Decide the classes of dtype `char` not seen yet by `tree` (a
    runtime.dispatch.Tree calibrated on this CPU) instead of racing."""
    global _tree_k_bits, _tree_n_bits
    from runtime import dispatch
    with _lock:
        TREES[char] = tree, dispatch.compile_tree(tree)
        _tree_k_bits = dispatch.DEEPEST_K.bit_length()
        _tree_n_bits = dispatch.FEWEST_N.bit_length()


def decide(key: tuple, kernel_seconds: list, blas_seconds: list) -> None:
    """Record the times of both implementations on a product of class `key`
    (ROUNDS each, taken in turns): the faster by its least time (numpy's by
    MARGIN) runs the class from now on."""
    with _lock:
        BEST.setdefault(key, PREFER == "blas" if PREFER else MARGIN * min(blas_seconds) < min(kernel_seconds))


def forget(char: str | None = None) -> None:
    """Decide every class again (of dtype `char` only, when given): tests,
    a machine whose load changed, a calibration that just arrived."""
    with _lock:
        for key in [k for k in BEST if char is None or k[0] == char]:
            del BEST[key]


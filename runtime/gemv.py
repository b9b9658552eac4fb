"""A vector times a matrix (a product of one row) on the GEMM kernel, split
over the matrix's rows.

The GEMM kernel splits a product over its column strips (codegen/gemm.py):
at M = 1 each core then reads a band of every row of B, a few hundred
bytes a page apart.  A product of one row is bound by reading B from
memory, and reads it fastest in long contiguous runs, so here each of the
pool's threads takes a contiguous block of B's rows: the product is run
as a batch of `parts` products, x's part k times B's rows of part k (both
views, no copy), each a unit range of its own that one chunk covers, and
the parts' rows are then added in order (k ascending within a part, the
parts one after another, as a BLAS that splits K does: a few ulp from a
single pass).

Measured on a 2-core AMD EPYC znver3 (AVX2, no AVX-512), float32, B from
memory, two runs of `python -m bench.gemv --rounds 150` (medians, the
variants in a new order every round): B of 768 x 256 in 37-38 us against
59 us on numpy's gemv and 48-49 us on the strip split; 768 x 768 90-95 us
(numpy 96-101, strips 117-129); 2048 x 768 218-224 us (numpy 232-234,
strips 287-290); 768 x 8192 639-671 us, as numpy (631-667; strips
722-829).  One chunk per thread: a worker late to wake leaves its block to
the caller, which then reads all of B (the strip split's many chunks
balance that; they lose more to their band reads).
"""
from __future__ import annotations

import numpy as np

from runtime.threadpool import native_threads

# B's elements below which a product of one row is not split: it is in
# cache, and a fork/join is not paid back
SPLIT_MIN_ELEMENTS = 1 << 16


def parts(m: int, k: int, n: int) -> int:
    """How many blocks of rows a product of m rows, depth k and n columns
    is split into: the native pool's threads when m is 1, B is large enough
    and its rows divide evenly among them, else 0 (the kernel's own split;
    so too with no native pool, or one shut down)."""
    t = native_threads()
    if m != 1 or t < 2 or k % t or k * n < SPLIT_MIN_ELEMENTS:
        return 0
    return t


def split(par, pool: int, a, b, c, n: int, k: int, strips: int, t: int) -> None:
    """c = a @ b for C-contiguous a (k elements), b (k x n) and c (n
    elements), on kernel entry `par` (the GEMM's parallel entry, its units
    the column strips, `strips` of them for n columns) and the native pool
    at address `pool`, in t parts."""
    q = k // t
    part = np.empty((t, 1, n), c.dtype)
    par(0, t * strips, a.reshape(t, 1, q), b.reshape(t, q, n), part, 1, n, q, 0, 0, 0, 0, strips, pool)
    out = c.reshape(n, copy=False)  # (c itself: its rows are written here)
    np.add(part[0, 0], part[1, 0], out=out)
    for p in range(2, t):
        np.add(out, part[p, 0], out=out)

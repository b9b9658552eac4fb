"""The GEMM library kernel (codegen/gemm.py): exact results for every edge
of the register tiling (row tails, masked column tails, K blocks, K = 0),
batches, non-contiguous operands, no access outside the arrays, and the
dispatch that sends float matmuls to it."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen import gemm
from codegen.parallel import par_symbol
from jit import jit
from jit.compile import _start_pools, library_function
from runtime.kernelcall import product_chunk, rows4
from shapes.kernelargs import CHUNKS_PER_THREAD
from runtime import threadpool

DTYPES = [np.float32, np.float64]


@pytest.fixture
def rng():
    _start_pools()
    return np.random.default_rng(7)


def run_kernel(a, b, c, parallel=False, strided=False):
    """C = A @ B through the library kernel, as the executable calls it
    (`strided`: operands passed as the runtime's (batch, rows, cols) views)."""
    dtype = c.dtype
    fn = library_function(gemm.symbol_for(dtype))
    nr = gemm.tile_for(dtype).nr
    if b.ndim == 2:
        batch, M = 1, int(np.prod(a.shape[:-1]))
    else:
        batch, M = int(np.prod(a.shape[:-2])), a.shape[-2]
    K, N = b.shape[-2], b.shape[-1]
    if strided:
        a, b = rows4(a, batch, M, K), rows4(b, batch if b.ndim > 2 else 1, K, N, True)
    units = batch * ((N + nr - 1) // nr)
    args = (a, b, c, M, N, K, int(strided), int(strided), 0, 0)  # (no epilogue)
    if parallel:  # on the native pool (the jit's way) where there is one, else the Python pool
        if threadpool.native_pool() is not None:
            library_function(par_symbol(gemm.symbol_for(dtype)))(0, units, *args, 1, threadpool.native_pool())
        else:
            threadpool.parallel_for(fn, 0, units, args, 1)
    elif units:
        fn(0, units, *args)


def exact(rng, shape, dtype):
    return rng.integers(-8, 9, shape).astype(dtype)


def fenced(values: np.ndarray, fill):
    """`values` copied to the start of a larger buffer whose tail is `fill`:
    a read past the end shows up as `fill` in a result, a write as a change."""
    buf = np.full(values.size + 257, fill, values.dtype)
    buf[:values.size] = values.ravel()
    return buf, buf[:values.size].reshape(values.shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_every_tile_edge_is_exact_and_in_bounds(dtype, parallel, rng):
    nr = gemm.tile_for(np.dtype(dtype)).nr
    kc = gemm.tile_for(np.dtype(dtype)).kc
    Ms = [1, 2, 5, 6, 7, 11, 12, 13, 37]
    Ns = [1, nr // 2 - 1, nr - 1, nr, nr + 1, 2 * nr + 3]
    Ks = [0, 1, 6, 7, kc - 1, kc, kc + 1, 2 * kc + 5]  # (every K mod gemm.K_UNROLL)
    for M in Ms:
        for N in Ns:
            for K in Ks:
                a_buf, a = fenced(exact(rng, (M, K), dtype), np.nan)
                for transposed in (False, True):  # B C-contiguous, or B.T contiguous (packed by columns)
                    if transposed:
                        b = fenced(exact(rng, (N, K), dtype), np.nan)[1].T
                    else:
                        b = fenced(exact(rng, (K, N), dtype), np.nan)[1]
                    c_buf, c = fenced(np.full((M, N), np.inf, dtype), -7.0)
                    run_kernel(a, b, c, parallel, strided=transposed)
                    assert np.array_equal(c, a @ b), (M, N, K, transposed)
                    assert np.all(c_buf[M * N:] == -7.0), f"wrote past C for {(M, N, K, transposed)}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
def test_tall_products_take_deep_blocks_exactly_and_in_bounds(dtype, parallel, rng):
    """From DEEP_ROWS rows the packed path takes DEEP_KC-deep blocks of K: a
    block's edge, the deep panel's last rows and a right-edge strip, exact."""
    nr = gemm.tile_for(np.dtype(dtype)).nr
    deep = gemm.DEEP_KC
    for M in (gemm.DEEP_ROWS - 1, gemm.DEEP_ROWS + 7):
        for K in (1, deep - 1, deep, 2 * deep + 5):
            N = nr + 3 if K != deep else 2 * nr
            a_buf, a = fenced(exact(rng, (M, K), dtype), np.nan)
            b = fenced(exact(rng, (K, N), dtype), np.nan)[1]
            c_buf, c = fenced(np.full((M, N), np.inf, dtype), -7.0)
            run_kernel(a, b, c, parallel)
            assert np.array_equal(c, a @ b), (M, N, K)
            assert np.all(c_buf[M * N:] == -7.0), f"wrote past C for {(M, N, K)}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_few_rows_stream_b_exactly_and_in_bounds(dtype, rng):
    """Products of at most SMALL_M rows read B in place over several strips
    at once (as many as the accumulators allow, then one at a time), the
    strip at the right edge through a panel: every row count up to SMALL_M
    and a few past it, strip counts around the group and the micro-kernels'
    widths, K blocks (the streamed ones of STREAM_KB rows and the panels'
    of KC); serial and on the pool.  B's rows a multiple of ALIAS_BYTES
    apart go through panels from two row tiles on (a single row tile, MR
    rows or 1, 2, 4, streams), a K past STREAM_K from STREAM_DEEP_M + 1
    rows on, packed row after row (every strip of a group full) or strip
    by strip."""
    nr, kc = gemm.tile_for(np.dtype(dtype)).nr, gemm.tile_for(np.dtype(dtype)).kc
    Ms = list(range(1, gemm.SMALL_M + 3))
    alias = gemm.ALIAS_BYTES // np.dtype(dtype).itemsize
    Ns = [nr, 2 * nr, 3 * nr + 1, 4 * nr, 5 * nr - 1, 7 * nr, 9 * nr + 5, alias, 3 * alias]
    for M in Ms:
        for N in Ns:
            deep = (gemm.STREAM_K + 3,) if N in (nr, 5 * nr - 1, alias) else ()
            for K in (0, 1, 5, gemm.STREAM_KB, kc + 3) + deep:
                a_buf, a = fenced(exact(rng, (M, K), dtype), np.nan)
                b = fenced(exact(rng, (K, N), dtype), np.nan)[1]
                c_buf, c = fenced(np.full((M, N), np.inf, dtype), -7.0)
                run_kernel(a, b, c, parallel=(M + N) % 2 == 0)
                assert np.array_equal(c, a @ b), (M, N, K)
                assert np.all(c_buf[M * N:] == -7.0), f"wrote past C for {(M, N, K)}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_batches_and_folded_rows(dtype, rng):
    for sa, sb in [((3, 5, 7), (3, 7, 9)), ((2, 4, 70, 65), (2, 4, 65, 130)), ((4, 33, 20), (20, 17)),
                   ((2, 3, 6, 64), (64, 64)), ((0, 4, 5), (0, 5, 3)), ((5, 0, 4), (5, 4, 6))]:
        a, b = exact(rng, sa, dtype), exact(rng, sb, dtype)
        want = a @ b
        c = np.full(want.shape, np.nan, dtype)
        run_kernel(a, b, c, parallel=True)
        assert np.array_equal(c, want), (sa, sb)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_strided_operands_are_read_in_place_or_copied(dtype, rng):
    big_a, big_b = exact(rng, (3, 40, 90), dtype), exact(rng, (3, 90, 150), dtype)
    q4, k4, v4 = exact(rng, (2, 13, 3, 40), dtype), exact(rng, (2, 17, 3, 40), dtype), exact(rng, (2, 41, 3, 70), dtype)
    # (A, B, whether the kernel reads each in place: the runtime's 4-D view, no copy)
    cases = [(big_a[0, :13, 5:50], big_b[0, 2:47, 10:140], True, True),           # row strides > columns
             (big_a[:, :13, 5:50], big_b[:, 2:47, 10:140], True, True),           # and batch strides
             (big_a[0, ::-1, :45], big_b[0, :45, ::-1], False, False),            # negative strides: copied
             (big_a[0, :13, ::2].T, big_b[0, :13, :70], False, True),             # column stride 2: copied
             (np.broadcast_to(big_a[0, :1, :45], (9, 45)), big_b[1, :45, :70], True, True),  # zero row stride
             (big_a[0, :13, :40], big_b[0, :70, :40].T, True, True),              # B with unit-stride rows
             (big_a[:, :13, :40], big_b[:, :70, :40].transpose(0, 2, 1), True, True),  # batched (q @ k.T)
             (big_a[:, :13, :40], big_b[:, :3, :40].transpose(0, 2, 1), True, True),   # narrower than a strip
             # two batch dims that do not merge (attention with several sequences: [B, S, H, d] read as
             # [B, H, S, d] and [B, H, d, S]): read in place through the outer/inner batch strides
             (q4.transpose(0, 2, 1, 3), k4.transpose(0, 2, 3, 1), True, True),
             (q4.transpose(0, 2, 1, 3), v4.transpose(0, 2, 1, 3)[..., :40, :], True, True)]
    for a, b, a_in_place, b_in_place in cases:
        batch = int(np.prod(a.shape[:-2])) if b.ndim > 2 else 1
        rows = a.shape[-2] if b.ndim > 2 else int(np.prod(a.shape[:-1]))
        assert np.shares_memory(rows4(a, batch, rows, a.shape[-1]), a) == a_in_place
        assert np.shares_memory(rows4(b, batch, *b.shape[-2:], True), b) == b_in_place
        want = a @ b
        c = np.full(want.shape, np.nan, dtype)
        run_kernel(a, b, c, parallel=True, strided=True)
        assert np.array_equal(c, want), (a.shape, a.strides, b.shape, b.strides)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_rounding_matches_numpy_on_random_values(dtype, rng):
    for M, K, N in [(128, 768, 768), (9, 3000, 70), (300, 64, 300)]:
        a = rng.standard_normal((M, K)).astype(dtype)
        b = rng.standard_normal((K, N)).astype(dtype)
        c = np.empty((M, N), dtype)
        run_kernel(a, b, c, parallel=True)
        scale = np.abs(a) @ np.abs(b)  # error bound of any summation order ~ K eps (|A| |B|)
        assert np.all(np.abs(c - a @ b) <= 2 * K * np.finfo(dtype).eps * scale)


def test_float_matmuls_run_on_the_gemm_kernel(rng):
    def layer(x, w, b, q, k, wt):
        s = q.transpose(0, 2, 1, 3) @ k.transpose(0, 2, 3, 1)   # batched, transposed operands
        return np.tanh(x @ w + b), s, x @ wt.T                   # folded rows; a strided B
    f = jit(layer)
    x = exact(rng, (2, 9, 40), np.float32)
    w, b = exact(rng, (40, 70), np.float32), exact(rng, (70,), np.float32)
    q = exact(rng, (1, 9, 3, 16), np.float32)
    wt = exact(rng, (70, 40), np.float32)
    for got, want in zip(f(x, w, b, q, q, wt), layer(x, w, b, q, q, wt)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)
    text = f.explain()
    assert text.count("gemm kernel:") == 3 and "numpy: %" in text  # transposes stay numpy views


def test_int_and_vector_products_stay_in_numpy(rng):
    f = jit(lambda a, b, v: (a @ b, a.astype(np.float32) @ v))
    a, b = rng.integers(-5, 5, (40, 30)), rng.integers(-5, 5, (30, 20))
    v = rng.standard_normal(30).astype(np.float32)
    got = f(a, b, v)
    assert np.array_equal(got[0], a @ b)
    np.testing.assert_allclose(got[1], a.astype(np.float32) @ v, rtol=1e-6)
    assert "gemm kernel:" not in f.explain()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_products_of_one_row_split_over_b_rows(dtype, rng, monkeypatch):
    """A product of one row (a decode step's x @ w) on the kernel splits B's
    rows into one block per thread (runtime/gemv.py) when they divide evenly
    and B is large enough: exact for exact inputs, whatever the row's shape
    ([1, K], [1, 1, K], a batch of one), N past the column strips, K
    even or odd (the odd one takes the kernel's own split), B below the
    size that splits; a one-row M that is a symbol at trace time too."""
    if threadpool.native_threads() < 2:
        pytest.skip("one thread: nothing to split over")
    from runtime import gemv
    splits = []

    def counted(*args):
        splits.append(args[-1])
        return real(*args)
    real = gemv.split
    monkeypatch.setattr(gemv, "split", counted)  # (executables built from now on call it)
    f = jit(lambda x, w: x @ w)
    nr = gemm.tile_for(np.dtype(dtype)).nr
    t = threadpool.native_threads()
    big_k = 2 * t * 512
    for K, N, lead in [(big_k, 3 * nr + 5, (1,)), (big_k, 7 * nr, (1, 1)), (big_k, 2 * nr - 1, (1,)),
                       (big_k + 1, 5 * nr, (1,)), (2 * t, 3 * nr, (1,))]:
        for batched in (False, True):
            x = exact(rng, (1, 1, K) if batched else lead + (K,), dtype)
            w = exact(rng, (1, K, N) if batched else (K, N), dtype)
            f(x, w)  # (the first call of a signature may return the traced result)
            before = len(splits)
            got, want = f(x, w), x @ w
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got, want), (K, N, lead, batched)
            split = K % t == 0 and K * N >= gemv.SPLIT_MIN_ELEMENTS
            assert (len(splits) > before) == split, (K, N, lead, batched)
    assert set(splits) == {t}
    g = jit(lambda x, w: x @ w)  # (rows a symbol: one row at run time splits, more do not)
    w = exact(rng, (big_k, 4 * nr), dtype)
    for m in (3, 1, 2, 1):
        x = exact(rng, (m, big_k), dtype)
        g(x, w)
        before = len(splits)
        assert np.array_equal(g(x, w), x @ w), m
        assert (len(splits) > before) == (m == 1), m


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20), st.integers(0, 70), st.integers(1, 140), st.integers(1, 3),
       st.sampled_from(DTYPES), st.booleans())
def test_hypothesis_shapes_through_jit(M, K, N, batch, dtype, transposed_a):
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    a = exact(rng, (batch, K, M) if transposed_a else (batch, M, K), dtype)
    b = exact(rng, (batch, K, N), dtype)
    f = jit(lambda a, b: (a.transpose(0, 2, 1) if transposed_a else a) @ b)
    want = (a.transpose(0, 2, 1) if transposed_a else a) @ b
    got = f(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


@pytest.mark.slow
def test_the_avx2_kernels_with_avx2_forced(tmp_path):
    """SHAPEJIT_ISA=avx2: no AVX-512 feature in the target, the AVX2 tile
    (8 float32 lanes, 2 vectors), and the tile-edge and epilogue tests pass
    on it (on an AVX-512 host this runs the narrower kernels; on an AVX2 host
    the same)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, SHAPEJIT_ISA="avx2", SHAPEJIT_CACHE_DIR=str(tmp_path))
    probe = ("from codegen import gemm; from shapes import host; import numpy as np; "
             "t = gemm.tile_for(np.float32); "
             "print(host.has_avx512(), '+avx512f' in host.features().split(','), t.lanes, t.nv)")
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=root, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False", "8", "2"], out.stderr
    here = os.path.dirname(os.path.abspath(__file__))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", os.path.abspath(__file__),
                          os.path.join(here, "test_epilogue.py"),
                          "-k", "tile_edge or tall_products or few_rows or batches or strided_operands or gelu or residual"],
                         env=env, cwd=root, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]


@pytest.mark.parametrize("threads", [2, 3, 4, 8])
def test_a_product_splits_into_chunks_of_two_strips_or_more_as_many_a_thread(threads):
    """runtime/kernelcall.py product_chunk: never below the work rule's least;
    where the strips allow chunks of two or more, the pool's chunk count is a
    multiple of the threads (no thread takes one more chunk than another);
    only products of fewer strips than two a thread go one strip a chunk."""
    for least in (1, 2, 5):
        for units in range(1, 400):
            chunk = product_chunk(units, least, threads)
            assert chunk >= least
            n_chunks = min(threads * CHUNKS_PER_THREAD, units // chunk)
            if chunk > least:
                assert chunk >= 2 and n_chunks % threads == 0, (units, least, chunk)
            if least == 1 and units >= 4 * threads and units % threads == 0:
                assert chunk >= 2, (units, chunk)


@pytest.mark.parametrize("m, k, n", [(4, 100000, 4), (64, 4097, 64), (128, 8192, 128), (2, 30000, 3)])
def test_a_deep_product_sums_its_blocks_of_k_as_a_blas_does(m, k, n, rng):
    """Each block of K is summed from zero and then added to C (a block
    summed on from C's value made a product one sequential sum of K terms:
    20-50x numpy's error at K = 100000, 129 ulps from numpy's float32
    result); all of K for a single row tile is at most WHOLE_K rows a block."""
    a = (rng.random((m, k)) + 0.5).astype(np.float32)
    b = (rng.random((k, n)) + 0.5).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    for parallel in (False, True):
        got = np.zeros((m, n), np.float32)
        run_kernel(a, b, got, parallel)
        err = np.max(np.abs(got - exact) / exact)
        assert err < 4 * max(np.max(np.abs(a @ b - exact) / exact), 2 ** -23), err

"""The native thread pool (codegen/parallel.py): kernels' `_par` entries split
a range over the workers and the caller, every index exactly once, from any
number of calling threads, after a fork, and after the pool was stopped."""
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from llvmlite import ir

from codegen import parallel
from codegen.artifact import KernelInfo
from codegen.llvm import I64, compile_ir, for_range
from jit.compile import _start_pools, library_function
from runtime import threadpool
from runtime.loader import load
from tests.conftest import run_in_threads

pytestmark = pytest.mark.skipif(not parallel.native_pool_supported(), reason="no native pool on this platform")


@pytest.fixture(scope="module")
def count():
    """k_count(start, stop, i64* hits, i64 scale, double add): hits[i] += 1
    for i in [start, stop); hits[-1] (one past the range the tests use)
    collects scale + add, so the arguments arrive unchanged."""
    m = ir.Module(name="count")
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [I64, I64, I64.as_pointer(), I64, ir.DoubleType()]), "k_count")
    start, stop, hits, scale, add = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_range(b, start, stop) as i:
        b.atomic_rmw("add", b.gep(hits, [i]), ir.Constant(I64, 1), "monotonic")
    last = b.gep(hits, [ir.Constant(I64, 10_000)])
    b.atomic_rmw("add", last, b.add(scale, b.fptosi(add, I64)), "monotonic")
    b.ret_void()
    parallel.parallel_entries(m, fn, 1, 1, 1)
    art = compile_ir(str(m), [KernelInfo(*k) for k in parallel.with_parallel([("k_count", 1, 1, 1)])])
    _start_pools()
    return load(art)


def run(count, start, stop, chunk, hits):
    count["k_count_par"](start, stop, hits.ctypes.data, 3, chunk, threadpool.native_pool(), 4.0)


def run_script(tmp_path, text: str, **env) -> None:
    """Run `text` as a script in a fresh interpreter of this project (with
    `env` added), under a time limit so a hang fails the test: it must
    print ok."""
    root = Path(__file__).resolve().parent.parent
    script = tmp_path / "script.py"
    script.write_text(text)
    r = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, text=True, timeout=240,
                       env={**os.environ, "PYTHONPATH": str(root), **env})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_every_index_exactly_once(count):
    assert threadpool.native_pool() is not None
    for start, stop, chunk in [(0, 10_000, 1), (0, 10_000, 37), (100, 900, 1), (5, 6, 1), (0, 7, 4), (3, 3, 1),
                               (0, 9_999, 10_000)]:
        hits = np.zeros(10_001, np.int64)
        run(count, start, stop, chunk, hits)
        want = np.zeros(10_000, np.int64)
        want[start:stop] = 1
        np.testing.assert_array_equal(hits[:10_000], want)
        calls = hits[10_000] // 7  # each chunk adds scale + add = 7
        assert hits[10_000] == 7 * calls
        n = stop - start
        assert (calls == 0) if n == 0 else (1 <= calls <= max(1, n // chunk))


def test_workers_take_part(count):
    """A long job is shared: some chunk runs on a worker thread."""
    m = ir.Module(name="who")
    f64 = ir.DoubleType()
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [I64, I64, I64.as_pointer(), f64.as_pointer()]), "k_who")
    start, stop, out, sink = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_range(b, start, stop) as i:
        x = b.load(b.gep(sink, [i]))
        with for_range(b, 0, 20_000):  # ~10 us of dependent work per index, so both threads get some
            b.store(b.fadd(b.fmul(b.load(b.gep(sink, [i])), ir.Constant(f64, 1.0000001)), x), b.gep(sink, [i]))
        b.store(b.ptrtoint(b.alloca(I64), I64), b.gep(out, [i]))  # an address on this thread's stack
    b.ret_void()
    parallel.parallel_entries(m, fn, 2, 0, 0)
    who = load(compile_ir(str(m), [KernelInfo(*k) for k in parallel.with_parallel([("k_who", 2, 0, 0)])]))
    out, sink = np.zeros(64, np.int64), np.ones(64)
    for _ in range(20):
        who["k_who_par"](0, 64, out.ctypes.data, sink.ctypes.data, 1, threadpool.native_pool())
        stacks = {int(x) >> 20 for x in out}  # one stack region per thread
        if len(stacks) > 1:
            break
    assert len(stacks) == min(2, threadpool._configured_threads())


def test_callers_from_many_threads(count):
    def caller(seed):
        rng = np.random.default_rng(seed)
        for _ in range(200):
            start = int(rng.integers(0, 5000))
            stop = int(rng.integers(start, 10_000))
            hits = np.zeros(10_001, np.int64)
            run(count, start, stop, int(rng.integers(1, 50)), hits)
            assert hits[:start].sum() == 0 and (hits[start:stop] == 1).all() and hits[stop:10_000].sum() == 0

    run_in_threads(caller, 6, timeout=60)


def _child(q):
    from jit import jit
    f = jit(lambda x, b: np.tanh(x + b) * 2.0)
    x, b = np.linspace(-3, 3, 300_000, dtype=np.float32).reshape(300, 1000), np.ones(1000, np.float32)
    f(x, b)
    got = f(x, b)
    alive = sum(t.is_alive() for t in threadpool._native.threads)
    q.put((bool(np.allclose(got, np.tanh(x + b) * 2.0, rtol=1e-6, atol=1e-6)), alive))


def test_forked_child_has_its_own_workers(count):
    """A forked child's pool state is reset and its workers restarted (the
    parent's threads do not exist there): kernels run correctly, in parallel."""
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    ok, alive = q.get(timeout=120)
    p.join(60)
    assert p.exitcode == 0 and ok
    assert alive == threadpool._configured_threads() - 1


def test_stopped_pool_runs_on_the_caller(count):
    pool = threadpool._native
    pool.shutdown()
    try:
        assert not pool.threads
        hits = np.zeros(10_001, np.int64)
        run(count, 0, 10_000, 1, hits)  # no worker: the caller runs the whole range, once
        assert (hits[:10_000] == 1).all() and hits[10_000] == 7
    finally:
        pool.start()
    hits = np.zeros(10_001, np.int64)
    run(count, 0, 10_000, 1, hits)
    assert (hits[:10_000] == 1).all()


def test_back_to_back_jobs_never_lose_a_chunk(tmp_path):
    """Jobs posted the moment the previous one returns, while a late worker
    may still be looking at the old ticket: before the ticket was closed
    first, a worker could claim a chunk of the next job before it was
    published, and the caller then waited for ever (seen once in the test
    suite on a loaded machine).  Run in a child process with a time limit,
    so a hang fails the test instead of stopping the suite."""
    run_script(
        tmp_path,
        "import numpy as np\n"
        "from tests.test_native_pool import count\n"
        "from runtime import threadpool\n"
        "k = count.__wrapped__()\n"
        "hits = np.zeros(10_001, np.int64)\n"
        "par, pool = k['k_count_par'], threadpool.native_pool()\n"
        "assert pool is not None\n"
        "for _ in range(100_000):\n"
        "    par(0, 16, hits.ctypes.data, 3, 1, pool, 4.0)\n"
        "assert (hits[:16] == 100_000).all() and not hits[16:10_000].any(), hits[:17]\n"
        "print('ok')\n")


# ------------------------------------------------- numpy's OpenBLAS on the pool

def _shared():
    """Skip where numpy's BLAS takes no threads callback (not OpenBLAS >= 0.3.27)."""
    _start_pools()
    if not threadpool._openblas():
        pytest.skip("numpy's BLAS is not an OpenBLAS that takes a threads callback")
    assert threadpool.blas_shared()


def _products(seed=0):
    """numpy products that OpenBLAS splits over its threads (GEMM, GEMV,
    LU): their results, to compare bit for bit."""
    rng = np.random.default_rng(seed)
    out = []
    for (m, k, n), dt in [((300, 500, 400), np.float64), ((256, 768, 768), np.float32), ((1000, 64, 1000), np.float32),
                          ((7, 3000, 5), np.float64), ((4000, 4000, 1), np.float64)]:
        a, b = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
        out.append(a @ b[:, 0] if n == 1 else a @ b)
    mat = rng.standard_normal((400, 400)) + 400 * np.eye(400)
    out += [np.linalg.solve(mat, np.ones(400)), np.linalg.inv(mat)]
    return out


def _blas_server_ticks() -> int:
    """CPU ticks of this process's threads that are not Python threads (the
    main one, the pools' workers): OpenBLAS's own server threads."""
    ours = {t.native_id for t in threading.enumerate()}
    ticks = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) in ours:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks


def _shared_against_own(products, product, times: int) -> None:
    """products() on the pool and on OpenBLAS's own threads: bit for bit the
    same; and over `times` calls of product() OpenBLAS's server threads stay
    asleep while shared (before, they spun ~0.1 s after every product on the
    cores our kernels need) and work when not (the check can fail)."""

    def server_ticks():
        time.sleep(0.3)  # (a spin left over from before settles)
        before = _blas_server_ticks()
        for _ in range(times):
            product()
        time.sleep(0.15)
        return _blas_server_ticks() - before

    shared = products()
    assert server_ticks() <= 1
    threadpool._unshare_blas()
    try:
        own = products()
        assert server_ticks() >= 5
    finally:
        threadpool._share_blas(library_function(parallel.BLAS_SETUP))
    assert threadpool.blas_shared()
    for x, y in zip(shared, own):
        assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.slow
def test_numpy_blas_runs_on_the_pool_with_the_same_results():
    """With the callback installed numpy's threaded products run on our
    workers, bit for bit as on OpenBLAS's own threads, its threads asleep."""
    _shared()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((256, 768), np.float32), rng.standard_normal((768, 768), np.float32)
    _shared_against_own(_products, lambda: a @ b, 150)


@pytest.mark.slow
def test_numpy_blas_and_kernels_from_many_threads():
    """numpy's products, LU solves and jitted GEMMs from several threads at
    once: every result exact, nothing waits for ever (OpenBLAS's jobs wait
    for each other: two of one call on one thread in turn would hang)."""
    from jit import jit
    _shared()
    want = _products()
    f = jit(lambda x, w: x @ w + 1.0)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((200, 300), np.float32), rng.standard_normal((300, 500), np.float32)
    fx = x.astype(np.float64) @ w + 1.0

    def caller(i):
        for _ in range(8):
            for got, ref in zip(_products(), want):
                assert np.array_equal(got, ref)
            np.testing.assert_allclose(f(x, w), fx, rtol=1e-5, atol=1e-4)  # (kernel or BLAS: the class's race)

    run_in_threads(caller, 4, timeout=180)


@pytest.mark.slow
def test_numpy_blas_with_more_jobs_than_the_pool_has_threads(tmp_path):
    """OpenBLAS told to use more threads than the pool has (after the
    callback was installed), or a pool whose workers stopped: its jobs run
    on threads started for the call, all at once, with the same results."""
    _shared()
    run_script(
        tmp_path,
        "import numpy as np\n"
        "from jit import jit\n"
        "from runtime import threadpool\n"
        "from tests.test_native_pool import _products\n"
        "jit(lambda x: x @ x)(np.ones((64, 64), np.float32))\n"
        "assert threadpool.blas_shared()\n"
        "for _, lib in threadpool._openblas():\n"
        "    threadpool._symbol(lib, 'openblas_set_num_threads')(4)\n"
        "many = _products()\n"
        "threadpool._native.shutdown()\n"
        "closed = _products()\n"
        "threadpool._native.start()\n"
        "again = _products()\n"
        "threadpool._unshare_blas()\n"
        "own = _products()\n"
        "assert all(np.array_equal(a, b) and np.array_equal(c, b) and np.array_equal(d, b)\n"
        "           for a, c, d, b in zip(many, closed, again, own))\n"
        "print('ok')\n", SHAPEJIT_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2")


def test_scipys_openblas_is_shared_too():
    """scipy's wheel loads an OpenBLAS of its own beside numpy's: both run on
    the pool (one callback, its thread indexes past both libraries' server
    threads), scipy's products bit for bit as on its own threads, and its
    server threads asleep."""
    linalg = pytest.importorskip("scipy.linalg")
    _shared()
    threadpool._share_blas(library_function(parallel.BLAS_SETUP))  # (scipy's: here loaded after the pool started)
    libs = threadpool._openblas()
    if len(libs) < 2:
        pytest.skip("scipy's BLAS is numpy's library here")
    assert len(threadpool._blas) == len(libs)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((600, 700), np.float32), rng.standard_normal((700, 500), np.float32)
    mat = rng.standard_normal((300, 300)) + 300 * np.eye(300)
    _shared_against_own(lambda: [linalg.blas.sgemm(1.0, a, b), linalg.lu_factor(mat)[0],
                                 linalg.solve(mat, np.ones(300))],
                        lambda: linalg.blas.sgemm(1.0, a, b), 100)


def test_the_callback_knows_each_library_once_and_as_many_as_it_can(tmp_path):
    """sj_blas_setup records a library's thread count once and refuses (0)
    one more than BLAS_LIBRARIES: that library then keeps its own threads.
    (A process of its own: the table is for the process's life.)"""
    _shared()
    run_script(
        tmp_path,
        "import ctypes\n"
        "import numpy as np\n"
        "from codegen import parallel\n"
        "from jit import jit\n"
        "from jit.compile import library_function\n"
        "from runtime import threadpool\n"
        "jit(lambda x: x @ x)(np.ones((64, 64), np.float32))\n"
        "assert threadpool.blas_shared()\n"
        "setup = library_function(parallel.BLAS_SETUP)\n"
        "cells = [ctypes.c_int(2) for _ in range(parallel.BLAS_LIBRARIES)]\n"
        "def given(cell):\n"
        "    out = ctypes.c_int64(0)\n"
        "    setup(0, 0, ctypes.addressof(cell), ctypes.addressof(out))\n"
        "    return out.value\n"
        "got = [given(c) for c in cells]\n"
        "assert all(got[:-len(threadpool._blas)]) and not got[-1], got\n"
        "assert given(cells[0]) == got[0]  # (known: not recorded twice)\n"
        "a = np.random.default_rng(0).standard_normal((300, 400)); b = a.T.copy()\n"
        "assert np.array_equal(a @ b, a @ b)\n"
        "print('ok')\n")


@pytest.mark.parametrize("first, env, want", [
    ("import jit", {}, "12"),  # (before numpy loads OpenBLAS: its threads sleep after 2^12 cycles)
    ("import numpy, jit", {}, "None"),  # (too late: OpenBLAS read the variable already)
    ("import jit", {"SHAPEJIT_SHARE_BLAS": "0"}, "None"),  # (its threads run numpy's BLAS: its own wait)
    ("import jit", {"OPENBLAS_THREAD_TIMEOUT": "20"}, "20"),  # (the user's own setting stays)
])
def test_openblas_threads_wait_briefly_when_jit_is_imported_first(first, env, want):
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT", "SHAPEJIT_SHARE_BLAS")}
    r = subprocess.run([sys.executable, "-c", f"{first}; import os; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"],
                       env={**base, **env}, capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == want


@pytest.mark.parametrize("case, env, want", [
    ("", {}, True),  # (numpy first: the pool restarts OpenBLAS's threads with the short wait)
    ("", {"OPENBLAS_THREAD_TIMEOUT": "20"}, False),  # (the user's own setting stays)
    ("other", {}, False),  # (another Python thread could be inside a BLAS call: left alone)
])
def test_openblas_threads_restarted_with_a_short_wait_when_numpy_came_first(case, env, want):
    code = (
        "import ctypes, os, threading\n"
        "import numpy as np\n"
        "rng = np.random.default_rng(0)\n"
        "a = rng.standard_normal((200, 200)) + 1j * rng.standard_normal((200, 200)); y = rng.standard_normal((200, 9))\n"
        "before = np.linalg.solve(a, y)\n"
        "stop = threading.Event()\n"
        f"t = threading.Thread(target=stop.wait) if {case == 'other'!r} else None\n"
        "t and t.start()\n"
        "from jit import jit\n"
        "from runtime import threadpool\n"
        "jit(lambda x: (x @ x.T) * 2.0)(np.ones((300, 300)))\n"
        "assert threadpool.blas_shared()\n"
        "stop.set()\n"
        "print(bool(threadpool.SHORTENED), os.environ.get('OPENBLAS_THREAD_TIMEOUT'))\n"
        "for path, lib in threadpool._openblas():\n"
        "    f = threadpool._symbol(lib, 'openblas_thread_timeout'); f.restype = ctypes.c_int; print(f())\n"
        "assert np.array_equal(np.linalg.solve(a, y), before)\n"
        "x = rng.standard_normal((300, 400)); assert np.allclose(x @ x.T, np.einsum('ij,kj->ik', x, x))\n")
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT", "SHAPEJIT_SHARE_BLAS")}
    r = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                       timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0, r.stderr
    shortened, left, *waits = r.stdout.split()
    assert shortened == str(want) and left == env.get("OPENBLAS_THREAD_TIMEOUT", "None")
    assert waits and all(w == ("12" if want else env.get("OPENBLAS_THREAD_TIMEOUT", "0")) for w in waits), r.stdout

"""The native thread pool (codegen/support.py): kernels' `_par` entries split
a range over the workers and the caller, every index exactly once, from any
number of calling threads, after a fork, and after the pool was stopped."""
import multiprocessing

import numpy as np
import pytest
from llvmlite import ir

from codegen import support
from codegen.artifact import KernelInfo
from codegen.llvm import I64, compile_ir, for_range
from jit.compile import _start_pools
from runtime import threadpool
from runtime.loader import load
from tests.conftest import run_in_threads

pytestmark = pytest.mark.skipif(not support.native_pool_supported(), reason="no native pool on this platform")


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
    support.parallel_entries(m, fn, 1, 1, 1)
    art = compile_ir(str(m), [KernelInfo(*k) for k in support.with_parallel([("k_count", 1, 1, 1)])])
    _start_pools()
    return load(art)


def run(count, start, stop, chunk, hits):
    count["k_count_par"](start, stop, hits.ctypes.data, 3, chunk, threadpool.native_pool(), 4.0)


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
    support.parallel_entries(m, fn, 2, 0, 0)
    who = load(compile_ir(str(m), [KernelInfo(*k) for k in support.with_parallel([("k_who", 2, 0, 0)])]))
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
    import subprocess
    import sys
    script = tmp_path / "jobs.py"
    script.write_text(
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
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, text=True, timeout=240,
                       env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]

"""Process-wide persistent thread pools for running kernels in parallel.

Two pools: the native one (codegen/parallel.py; Linux on x86-64 and
aarch64), whose workers never leave native code, runs every compiled kernel
the jit splits (a fork/join costs ~0.5 us); this module starts its workers
(`install_native_pool`) and restarts them in a forked child.  The Python
pool below runs Python callables and, where there is no native pool, the
kernels.

``parallel_for(fn, start, stop, args, min_chunk)`` splits ``[start, stop)``
into contiguous chunks and runs ``fn(chunk_start, chunk_stop, *args)`` on the
worker threads *and* the calling thread.  ``fn`` is normally a kernel's
builtin function (runtime/native.py), which releases the GIL, so chunks
really run concurrently.

Design:

* ``num_threads()`` is the total parallelism (``os.cpu_count()``, or
  ``SHAPEJIT_NUM_THREADS``); the pool has ``num_threads() - 1`` daemon
  workers because the caller always works too.
* A call creates a job (list of chunks + claim index) and posts it on a
  shared queue once per helper it wants.  Caller and workers claim chunks
  from the job until none are left.  The caller therefore never waits for
  an *unclaimed* chunk, which makes concurrent and nested calls
  deadlock-free even when all workers are busy.
* Completion is signalled with a plain lock (the cheapest primitive).
* Ranges shorter than ``2 * min_chunk`` run inline with no synchronization.

Measured on the 2-core znver4 KVM dev box: a parallel_for of a trivial
ctypes kernel on 2 threads costs ~5-10 us median (inline call: ~0.8 us); the
worker needs ~10-20 us to wake up, so for trivial work the caller usually
runs every chunk itself.  When the worker does take part, the fork/join costs
~25-45 us in total, so ``min_chunk`` should give each chunk well above that
amount of work.  (Pure Python: the GIL is only released inside the kernel.)
"""

from __future__ import annotations

import atexit
import ctypes
import os
import queue
import threading

from shapes import config
from shapes.kernelargs import CHUNKS_PER_THREAD

__all__ = ["parallel_for", "num_threads", "get_pool", "ThreadPool", "shutdown", "install_native_pool", "dgemv_address",
           "native_pool", "native_threads", "blas_shared"]


# After a job a worker spins this many pause instructions (~0.2 ms here) in
# native code, without the GIL, watching for the next job before it sleeps:
# the kernels of one call follow each other within microseconds, and waking a
# sleeping worker costs tens of them (set_spin_wait installs the spinner).
SPIN_ROUNDS = 8192
_spin_wait = None  # native spin-wait (codegen/parallel.py), installed by the jit


def set_spin_wait(fn) -> None:
    """Install `fn(seen, rounds, cell_address)`: returns when the int64 at
    the address differs from `seen` or after `rounds` pauses (GIL released)."""
    global _spin_wait
    _spin_wait = fn


def _configured_threads() -> int:
    return config.get("SHAPEJIT_NUM_THREADS") or max(1, os.cpu_count() or 1)


class _Job:
    __slots__ = ("fn", "args", "chunks", "next", "left", "lock", "done", "error")

    def __init__(self, fn, args, chunks):
        self.fn = fn
        self.args = args
        self.chunks = chunks
        self.next = 0
        self.left = ctypes.c_int64(len(chunks))  # chunks not finished; a native cell the caller can spin on
        self.lock = threading.Lock()
        self.done = threading.Lock()
        self.done.acquire()  # released by whoever finishes the last chunk
        self.error = None

    def work(self) -> None:
        """Claim and run chunks until none are left."""
        fn, args, chunks, lock = self.fn, self.args, self.chunks, self.lock
        while True:
            with lock:
                i = self.next
                if i >= len(chunks):
                    return
                self.next = i + 1
                failed = self.error is not None
            if not failed:  # after a failure, remaining chunks are skipped
                try:
                    fn(chunks[i][0], chunks[i][1], *args)
                except BaseException as e:  # re-raised in the caller
                    with lock:
                        if self.error is None:
                            self.error = e
            with lock:
                self.left.value -= 1
                last = self.left.value == 0
            if last:
                self.done.release()

    def wait(self) -> None:
        """Until every chunk is done: spinning natively (without the GIL, so
        a worker finishing its chunk takes the GIL at once) for as long as
        chunks keep finishing, else sleeping on the done lock."""
        spin, left = _spin_wait, self.left
        if spin is not None:
            cell = ctypes.addressof(left)
            for _ in range(8):  # (at most ~1 ms: a long chunk is waited for asleep)
                r = left.value
                if r == 0:
                    return
                spin(r, SPIN_ROUNDS, cell)
        self.done.acquire()


class ThreadPool:
    def __init__(self, n_threads: int, chunks_per_thread: int = CHUNKS_PER_THREAD):
        self.n_threads = n_threads
        self.chunks_per_thread = chunks_per_thread
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._posted = ctypes.c_int64(0)  # jobs posted so far: what spinning workers watch
        self._workers = []
        for i in range(n_threads - 1):
            t = threading.Thread(
                target=self._worker, name=f"shapejit-worker-{i}", daemon=True
            )
            t.start()
            self._workers.append(t)

    def _worker(self) -> None:
        get, get_now, posted = self._queue.get, self._queue.get_nowait, self._posted
        cell = ctypes.addressof(posted)
        while True:
            try:
                job = get_now()
            except queue.Empty:
                # A put precedes its count: a job put before this read is in
                # the queue now, one put after it changes the count.
                seen = posted.value
                try:
                    job = get_now()
                except queue.Empty:
                    spin = _spin_wait
                    if spin is not None:
                        spin(seen, SPIN_ROUNDS, cell)  # back at once when a job is posted
                    job = get()
            if job is None:
                return
            job.work()

    def parallel_for(self, fn, start: int, stop: int, args=(), min_chunk: int = 1) -> None:
        n = stop - start
        min_chunk = max(1, int(min_chunk))
        if n < 2 * min_chunk or self.n_threads == 1:
            if n > 0:
                fn(start, stop, *args)
            return
        n_chunks = min(self.n_threads * self.chunks_per_thread, n // min_chunk)
        base, extra = divmod(n, n_chunks)
        chunks = []
        lo = start
        for i in range(n_chunks):
            hi = lo + base + (1 if i < extra else 0)
            chunks.append((lo, hi))
            lo = hi
        job = _Job(fn, tuple(args), chunks)
        put = self._queue.put
        for _ in range(min(n_chunks - 1, len(self._workers))):
            put(job)
        self._posted.value += 1  # (after the put: a worker woken by it finds the job)
        job.work()
        job.wait()
        if job.error is not None:
            raise job.error

    def shutdown(self, timeout: float = 1.0) -> None:
        for _ in self._workers:
            self._queue.put(None)
        for t in self._workers:
            t.join(timeout)
        self._workers = []


_pool: ThreadPool | None = None
_pool_lock = threading.Lock()


def get_pool() -> ThreadPool:
    """The process-wide pool, created on first use."""
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPool(_configured_threads())
            pool = _pool
    return pool


def num_threads() -> int:
    """Total parallelism of parallel_for (workers + calling thread)."""
    return get_pool().n_threads


def parallel_for(fn, start: int, stop: int, args=(), min_chunk: int = 1) -> None:
    """Run ``fn(lo, hi, *args)`` over contiguous chunks of ``[start, stop)``.

    Blocks until every chunk is done; re-raises the first exception raised
    by any chunk (remaining unstarted chunks are then skipped).
    """
    n = stop - start
    if n < 2 * min_chunk:  # fast path: no pool, no synchronization
        if n > 0:
            fn(start, stop, *args)
        return
    get_pool().parallel_for(fn, start, stop, args, min_chunk)


# ---------------------------------------------------------------- native pool
# Kernels split over the cores by the native pool (codegen/parallel.py): its
# workers never leave native code.  The jit installs it; each worker is a
# Python thread whose whole life is one ctypes call.

class _NativePool:
    def __init__(self, run_address: int, worker, stop, reset, blas_close=None):
        self.run_address = run_address
        self.worker, self.stop, self.reset, self.blas_close = worker, stop, reset, blas_close
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        """Clear the state and start the workers: only while none runs and
        no job is under way (at install, in a forked child, after shutdown)."""
        self.reset(0, 0)
        self.threads = [threading.Thread(target=self.worker, args=(0, 0), name=f"shapejit-native-{i}", daemon=True)
                        for i in range(_configured_threads() - 1)]
        for t in self.threads:
            t.start()

    def shutdown(self, timeout: float = 1.0) -> None:
        """Stop the workers (each after the chunk it runs).  A job under way
        on another thread is finished by its caller: the state is kept.
        OpenBLAS's jobs, if it runs them here, go to threads of their own
        from now on (until start() resets the state)."""
        if self.blas_close is not None:
            self.blas_close(0, 0)
        self.stop(0, 0)
        for t in self.threads:
            t.join(timeout)
        self.threads = []


_native: _NativePool | None = None


def install_native_pool(run_address: int, worker, stop, reset, blas_setup=None, blas_close=None) -> None:
    """Install the native pool (once per process) and start its workers:
    `run_address` is the address of `sj_pool_run`; `worker`, `stop`, `reset`
    ctypes functions of the same library; `blas_setup`, `blas_close` its
    OpenBLAS callback's (`_share_blas`)."""
    global _native
    with _pool_lock:
        if _native is None:
            pool = _NativePool(run_address, worker, stop, reset, blas_close)
            pool.start()
            _native = pool
            if blas_setup is not None and config.get("SHAPEJIT_SHARE_BLAS"):
                _share_blas(blas_setup)


# ---------------------------------------------------------------- numpy's BLAS
# After a threaded product, OpenBLAS's threads wait for the next one busily
# (nop loops, no yield) for 2^28 cycles, ~0.1 s; our workers, after a kernel,
# for up to ~80 ms.  A program that mixes numpy's products with jitted calls
# (or a jitted call that runs a product on numpy's BLAS) had both on the two
# cores at once: on a 2-core AMD EPYC znver3 (AVX2, no AVX-512) a jitted
# 256x768 @ 768x3072 + b right after a numpy product took 1.3-1.8x its time
# alone, 0.86-0.99x with the pool shared (`python -m bench.mixed`, 3 runs).  OpenBLAS >= 0.3.27
# lets the caller run its threaded jobs (openblas_set_threads_callback_function):
# we hand it the native pool (codegen/parallel.py sj_blas_threads), so one set
# of threads serves both and OpenBLAS's own ones sleep: numpy's library, and
# any other loaded when the pool starts (scipy's wheel brings its own: one
# imported after that keeps its own threads).

_blas: dict = {}  # address -> set-callback function of each OpenBLAS library running on the pool


def _symbol(lib, name: str, suffixes=("", "64_", "_64")):
    """`name` in `lib` under any of OpenBLAS's builds' decorations (scipy's
    wheels prefix `scipy_` and, for 64-bit ints, suffix `64_`), or None."""
    for prefix in ("", "scipy_"):
        for suffix in suffixes:
            fn = getattr(lib, f"{prefix}{name}{suffix}", None)
            if fn is not None:
                return fn
    return None


def _openblas_libraries() -> list:
    """[(path, library)] of the OpenBLAS libraries loaded in this process:
    numpy's, and scipy's once scipy.linalg is imported (its wheel brings one
    of its own)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {fields[5].strip() for fields in (line.split(None, 5) for line in maps)
                     if len(fields) == 6 and "openblas" in fields[5].rsplit("/", 1)[-1].lower()}
    except OSError:
        return []
    out = []
    for path in sorted(paths):
        try:
            out.append((path, ctypes.CDLL(path)))
        except OSError:
            continue
    return out


def _openblas() -> list:
    """_openblas_libraries() that take a threads callback (OpenBLAS >= 0.3.27)."""
    return [(path, lib) for path, lib in _openblas_libraries()
            if _symbol(lib, "openblas_set_threads_callback_function") is not None]


_gemv: list = []  # [address]: numpy's cblas_dgemv with 64-bit ints, once found


def dgemv_address() -> int:
    """The address of numpy's OpenBLAS's cblas_dgemv with 64-bit integers
    (numpy's wheels: `scipy_cblas_dgemv64_`), which a re-rolled loop calls
    for a large float64 vector times a matrix (codegen/loops.py GEMV); 0
    where numpy's BLAS is not such an OpenBLAS (the loop's own code runs)."""
    if not _gemv:
        for _, lib in sorted(_openblas_libraries(), key=lambda pl: "numpy" not in pl[0]):  # (numpy's first)
            fn = _symbol(lib, "cblas_dgemv", suffixes=("64_", "_64"))  # (64-bit ints only)
            if fn is not None and ctypes.cast(fn, ctypes.c_void_p).value:
                _gemv.append(ctypes.cast(fn, ctypes.c_void_p).value)
                break
    return _gemv[0] if _gemv else 0


def _share_blas(setup) -> None:
    """Hand each OpenBLAS loaded (numpy's, scipy's) the pool's callback when
    it takes one, exports its thread count (our jobs' thread indexes start
    past its server threads', which LAPACK's LU drives itself) and asks for
    no more threads than the pool has (more would be correct, on threads
    started per call, but slow).  Never raises: a library it cannot share
    keeps its own threads."""
    for path, lib in _openblas():
        try:
            set_callback = _symbol(lib, "openblas_set_threads_callback_function")
            threads = _symbol(lib, "openblas_get_num_threads")
            where = ctypes.cast(set_callback, ctypes.c_void_p).value
            if threads is None or where in _blas:
                continue
            threads.restype = ctypes.c_int
            count_at = ctypes.addressof(ctypes.c_int.in_dll(lib, "blas_num_threads"))
            if threads() > _configured_threads():
                continue
            out = ctypes.c_int64(0)
            setup(0, 0, count_at, ctypes.addressof(out))
            if not out.value:  # (the callback knows as many libraries as it can)
                continue
            set_callback.argtypes = [ctypes.c_void_p]
            set_callback(out.value)
            _blas[where] = set_callback
            _shorten_wait(path, lib)
        except (AttributeError, ValueError, OSError):  # (not exported: this library keeps its own threads)
            continue


# The wait, as OpenBLAS's OPENBLAS_THREAD_TIMEOUT (2^12 cycles), of its own
# threads once the pool runs its threaded calls: they still run the async
# parts of LAPACK's LU factorizations, then spin for 2^28 cycles (~0.1 s)
# beside the pool: numpy's solve and inv of order 200 ran 1.5-1.8x slower once
# the pool started, and 0.6-1.0x with this wait (`python -m bench.mixed`).
BLAS_THREAD_TIMEOUT = "12"
SHORTENED: list = []  # the paths of the libraries whose threads _shorten_wait restarted


def _shorten_wait(path: str, lib) -> None:
    """Restart `lib`'s own threads with the wait BLAS_THREAD_TIMEOUT, unless
    the user set one: OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when it loads
    (jit/__init__.py sets it when shapejit is imported before numpy) and
    when it starts its threads.  Only while no Python thread but shapejit's
    runs (none of which calls BLAS): another could be inside a BLAS call the
    restart would break."""
    read_env = _symbol(lib, "openblas_read_env")
    current = _symbol(lib, "openblas_thread_timeout")
    stop, start = _symbol(lib, "blas_thread_shutdown_"), _symbol(lib, "blas_thread_init")
    others = [t for t in threading.enumerate()
              if t is not threading.current_thread() and not t.name.startswith("shapejit-")]
    if None in (read_env, current, stop, start) or others:
        return
    current.restype = ctypes.c_int
    if current() or os.environ.get("OPENBLAS_THREAD_TIMEOUT"):
        return
    os.environ["OPENBLAS_THREAD_TIMEOUT"] = BLAS_THREAD_TIMEOUT
    try:
        read_env()
    finally:
        del os.environ["OPENBLAS_THREAD_TIMEOUT"]  # (read: the program's subprocesses keep their own)
    stop()
    start()
    SHORTENED.append(path)


def _unshare_blas() -> None:
    """Every OpenBLAS back on its own threads (a call that read the callback
    just before finds the pool closed: _NativePool.shutdown)."""
    while _blas:
        _blas.popitem()[1](None)


def blas_shared() -> bool:
    """Whether an OpenBLAS (numpy's) runs its threaded calls on the native pool."""
    return bool(_blas)


def native_threads() -> int:
    """The threads a native pool job runs on (its workers and the caller);
    0 when there is no native pool.  Starts nothing (num_threads() starts
    the Python pool)."""
    pool = _native
    return 0 if pool is None else len(pool.threads) + 1


def native_pool() -> int | None:
    """The address of the native pool's run function (what a kernel's `_par`
    entry calls), or None when there is none."""
    pool = _native
    return None if pool is None else pool.run_address


def shutdown() -> None:
    """Stop the workers (a later parallel_for creates a new pool; the native
    pool's kernels then run on their callers alone)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown()
    if _native is not None:
        _unshare_blas()
        _native.shutdown()


def _after_fork_in_child() -> None:
    # Worker threads do not survive fork(): the Python pool starts afresh
    # lazily, the native one now (its callers are native code).
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()
    if _native is not None:
        _native.start()


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

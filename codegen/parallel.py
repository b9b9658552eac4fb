"""The native thread pool and what runs kernels on it (their parallel
entries, OpenBLAS's jobs, the Python pool's spin-wait): native helpers of
the runtime (runtime/threadpool.py runs them), compiled like any kernel
(one library per machine, kept in the compile cache).

The thread pool, native (Linux, x86-64 and aarch64): workers that never
leave native code, so a kernel split over the cores costs no GIL hand-off,
no Python object and no lock: a few atomic operations on cache lines the
threads share.  (The Python pool, runtime/threadpool.py, costs ~40-60 us per
parallel kernel here: the caller builds the job in Python and each worker
takes the GIL to start and to finish its chunks; a BERT layer runs ten such
kernels per call.)

* `sj_pool_run(start, stop, fn, args, chunk)` runs `fn(lo, hi, args)` over
  [start, stop) in chunks of at least `chunk` (CHUNKS_PER_THREAD per
  thread at most, their sizes within one of each other) on the workers and
  the calling thread, and returns when every chunk is done.  `fn` is a kernel's
  packed entry (below), `args` the address of its packed arguments.  The
  range runs on the caller alone when there is no worker, when it is
  shorter than two chunks, or when another thread's job holds the pool
  (callers from several threads never wait for each other).
* `sj_pool_worker(0, 0)` is a worker's whole life: it takes chunks of each
  job posted, waits busily ~80 ms for the next one (the kernels of a call
  follow each other within microseconds; a service's calls within
  milliseconds; waking a thread that slept costs milliseconds here), yielding
  its CPU after the first ~0.4 ms, and then sleeps on a futex; it returns
  after `sj_pool_stop`.  `sj_pool_reset` clears the state (a forked child
  has no workers).
* Claiming: one 64-bit ticket holds (job number << 32 | chunks claimed); a
  thread claims a chunk by compare-and-swap, so a late worker can never take
  a chunk of a newer job believing it is of the old one.  Posting a job
  first closes the previous ticket (all its chunks claimed), then writes the
  job's fields, then publishes the new ticket; the fields stay put until the
  job's last chunk is done.

Why it is right (the model of the protocol; TICKET, NCHUNKS, PENDING, BUSY
are the state's slots, J a job, c_J its chunk count):

1. One poster at a time: a caller posts only after winning BUSY 0 -> 1 and
   gives it back only after it saw PENDING == 0 (acquire), so J+1's fields
   are written after every chunk of J has run (each chunk's PENDING
   decrement is a release).
2. A chunk of J is run only by the thread whose compare-and-swap moved the
   ticket from (J, i) to (J, i + 1) with i < c_J.  The ticket holds (J, i)
   for i <= c_J only between J's publication and J+1's close, when the
   fields are J's and stay so (1): so each i < c_J of J is claimed once,
   with J's fields, and PENDING (set to c_J before the publication) reaches
   0 exactly when the last of J's chunks is done.
3. A thread that read the ticket (J, i) and then NCHUNKS of J+1 (a larger
   count: the old check passed, i < c_{J+1}) fails its compare-and-swap:
   J+1's poster closed the ticket to (J, 2^32 - 1) before writing NCHUNKS
   (so the thread's acquire of NCHUNKS also sees the close), and the
   ticket never holds (J, i) again (job numbers wrap after 2^32 posts).
   Without the close that swap succeeded on the unpublished ticket: the
   thread ran a chunk of J+1 that J+1's publication then handed out again,
   and PENDING went one below zero: the caller returned early or waited
   for ever.  tests/test_pool_model.py explores every interleaving of these
   steps (a model in sequential consistency, for a few jobs and workers):
   it finds this race in the protocol without the close (support.py before
   cfa14b8) and nothing in this one.  The window is a few stores wide: the
   stress test `test_back_to_back_jobs_never_lose_a_chunk` (100,000 jobs)
   passed 3 runs of 3 on the old code on an idle machine.
4. The closed ticket is never claimed: its count 2^32 - 1 is above any c_J.
5. No lost wake-up: a worker going to sleep adds itself to SLEEPERS, reads
   the futex word, then the ticket (all seq_cst) and sleeps only if the
   ticket is the one it saw; a poster publishes the ticket, bumps the word,
   then reads SLEEPERS.  In the single order of seq_cst operations, either
   the poster sees the sleeper (and wakes it), or the sleeper's reads come
   after the publication (it does not sleep), or the word changed between
   its read and the wait (FUTEX_WAIT returns at once).

Every kernel gets more entries (`parallel_entries`):
`<k>_packed(lo, hi, args)` unpacks an i64 array into `k`'s arguments,
`<k>_par(start, stop, arrays..., ints..., chunk, pool, floats...)` packs its
arguments on its stack and calls the pool's run function at address `pool`
with them: one call from Python runs a kernel on every core.  The jit's
kernels also get `<k>_py` and `<k>_par_py`, which Python calls
(codegen/pycall.py).

`sj_spin_wait(seen, rounds, cell)` (the Python pool's waiting): returns once
the i64 at address `cell` differs from `seen`, or after `rounds` pauses.

`sj_blas_threads` (OpenBLAS's threading callback: `_Support.emit_blas`) runs
numpy's threaded BLAS calls on the same workers, so one set of threads
serves both (runtime/threadpool.py installs it).
"""
from __future__ import annotations

import platform
import sys

from llvmlite import ir

from codegen.llvm import I64, for_range, host_target, smax
from codegen.pycall import py_symbol, python_entry
from shapes.kernelargs import CHUNKS_PER_THREAD

I1, I8, I32 = ir.IntType(1), ir.IntType(8), ir.IntType(32)
VOID = ir.VoidType()

SPIN_SYMBOL = "sj_spin_wait"
POOL_RUN = "sj_pool_run"
POOL_WORKER = "sj_pool_worker"
POOL_STOP = "sj_pool_stop"
POOL_RESET = "sj_pool_reset"
BLAS_SETUP = "sj_blas_setup"
BLAS_CLOSE = "sj_blas_close"
# exported symbols -> (arrays, ints, floats) of their kernel ABI
_SYMBOLS = {SPIN_SYMBOL: (0, 1, 0), POOL_RESET: (0, 0, 0), POOL_RUN: (0, 3, 0), POOL_WORKER: (0, 0, 0),
            POOL_STOP: (0, 0, 0), BLAS_SETUP: (0, 2, 0), BLAS_CLOSE: (0, 0, 0)}
# A worker watches for the next job this many pauses (~80 ms, yielding its CPU
# every 32 after the first ~0.4 ms) before it sleeps: waking a sleeping thread
# costs 1-6 ms on this virtual machine once it has slept ~100 ms (its idle
# vCPU is descheduled), longer than a whole kernel; OpenBLAS's threads, for
# the same reason, wait busily for ~0.1 s
POOL_SPIN_ROUNDS = 1 << 21
POOL_HOT_ROUNDS = 1 << 14
_YIELD_ROUNDS = 4096       # a caller waiting on the last chunks yields the CPU this often

# (futex, sched_yield) system call numbers
_SYSCALLS = {"x86_64": (202, 24), "aarch64": (98, 124)}
_FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 128, 129

# slots of the pool's state (i64 each); hot ones on cache lines of their own
_TICKET, _PENDING = 0, 8
_FN, _ARGS, _START, _STOP, _NCHUNKS = 16, 17, 18, 19, 20
_BUSY, _WORKERS, _SLEEPERS, _QUIT = 24, 25, 26, 27
BLAS_LIBRARIES = 4  # OpenBLAS libraries one callback serves (numpy's, scipy's, ...)
_BLAS_LOCK, _BLAS_CLOSED = 28, 29  # (OpenBLAS's jobs on the pool: one parallel region at a time; closed at exit)
_FUTEX = 32  # an i32 word: bumped on every post, what sleeping workers wait on
_SLOTS = 40


def native_pool_supported() -> bool:
    return sys.platform.startswith("linux") and platform.machine() in _SYSCALLS


def exported() -> tuple:
    """(symbol, arrays, ints, floats) of each function the module defines."""
    names = list(_SYMBOLS) if native_pool_supported() else [SPIN_SYMBOL, POOL_RESET]
    return tuple((name, *_SYMBOLS[name]) for name in names)


PAR_SUFFIX = "_par"


def par_symbol(symbol: str) -> str:
    """A kernel's parallel entry."""
    return symbol + PAR_SUFFIX


def with_parallel(kernels, python: bool = False) -> tuple:
    """(symbol, arrays, ints, floats, Python entry) of each kernel, each
    followed by its `_par` entry's (two more ints: chunk and pool); the
    Python entries (codegen/pycall.py) are "" unless `python` (as given to
    `parallel_entries`)."""
    return tuple((*e, py_symbol(e[0]) if python else "") for sym, na, ni, nf in kernels
                 for e in ((sym, na, ni, nf), (par_symbol(sym), na, ni + 2, nf)))


def parallel_entries(module: ir.Module, fn: ir.Function, n_arrays: int, n_ints: int, n_floats: int,
                     python: bool = False) -> None:
    """Add `<k>_packed` and `<k>_par` (module docstring) for kernel `fn`;
    with `python`, the Python entries of both too (codegen/pycall.py: for
    kernels whose array arguments are numpy array objects, not data
    pointers)."""
    fn.attributes.add("noinline")  # one copy of the kernel's code, called from both entries
    ptr_t, f64 = I8.as_pointer(), ir.DoubleType()
    n = n_arrays + n_ints + n_floats
    packed = packed_entry(module, fn, 2, n_arrays, n_ints, n_floats)
    packed.linkage = "internal"

    par = ir.Function(module, ir.FunctionType(VOID, [I64, I64] + [ptr_t] * n_arrays + [I64] * (n_ints + 2)
                                              + [f64] * n_floats), par_symbol(fn.name))
    b = ir.IRBuilder(par.append_basic_block("entry"))
    start, stop = par.args[:2]
    arrays = par.args[2:2 + n_arrays]
    ints = par.args[2 + n_arrays:2 + n_arrays + n_ints]
    chunk, pool = par.args[2 + n_arrays + n_ints:4 + n_arrays + n_ints]
    floats = par.args[4 + n_arrays + n_ints:]
    buf = b.alloca(I64, size=ir.Constant(I64, max(1, n)))
    words = [b.ptrtoint(a, I64) for a in arrays] + list(ints) + [b.bitcast(x, I64) for x in floats]
    for i, w in enumerate(words):
        b.store(w, b.gep(buf, [ir.Constant(I64, i)]))
    run_t = ir.FunctionType(VOID, [I64] * 5)
    b.call(b.inttoptr(pool, run_t.as_pointer()),
           [start, stop, b.ptrtoint(packed, I64), b.ptrtoint(buf, I64), chunk])
    b.ret_void()
    if python:
        python_entry(module, fn, n_arrays, n_ints, n_floats)
        python_entry(module, par, n_arrays, n_ints + 2, n_floats)


def packed_entry(module: ir.Module, fn: ir.Function, lead: int, n_arrays: int, n_ints: int,
                 n_floats: int) -> ir.Function:
    """`<k>_packed(i64 x lead, i64 argv)`: kernel `fn` (its `lead` leading
    i64 arguments, then arrays, ints and floats) with every argument after
    the leading ones read from the int64 words at argv (an array as its
    object's address, a float as its bits)."""
    f64 = ir.DoubleType()
    n = n_arrays + n_ints + n_floats
    packed = ir.Function(module, ir.FunctionType(VOID, [I64] * (lead + 1)), fn.name + "_packed")
    b = ir.IRBuilder(packed.append_basic_block("entry"))
    argv = b.inttoptr(packed.args[lead], I64.as_pointer())
    vals = [b.load(b.gep(argv, [ir.Constant(I64, i)])) for i in range(n)]
    vals = ([b.inttoptr(v, p.type) for v, p in zip(vals, fn.args[lead:lead + n_arrays])]
            + vals[n_arrays:n_arrays + n_ints] + [b.bitcast(v, f64) for v in vals[n_arrays + n_ints:]])
    b.call(fn, list(packed.args[:lead]) + vals)
    b.ret_void()
    return packed


def module() -> str:
    """The support library's module text: the spin-wait and, where
    supported, the native pool."""
    m = ir.Module(name="shapejit_support")
    _Support(m).emit()
    return str(m)


class _Support:
    def __init__(self, m: ir.Module):
        self.m = m
        self.x86 = host_target().triple.startswith(("x86_64", "i686", "i386"))
        state_t = ir.ArrayType(I64, _SLOTS)
        self.state = ir.GlobalVariable(m, state_t, "sj_pool_state")
        self.state.linkage = "internal"
        self.state.initializer = ir.Constant(state_t, None)
        self.state.align = 64
        self.syscall = ir.Function(m, ir.FunctionType(I64, [I64], var_arg=True), "syscall")

    def c(self, v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def slot(self, b, k: int):
        return b.gep(self.state, [ir.Constant(I32, 0), ir.Constant(I32, k)])

    def load(self, b, k: int, order="monotonic"):
        return b.load_atomic(self.slot(b, k), order, 8)

    def store(self, b, k: int, v, order="monotonic"):
        b.store_atomic(v, self.slot(b, k), order, 8)

    def rmw(self, b, op: str, k: int, v, order="seq_cst"):
        return b.atomic_rmw(op, self.slot(b, k), v, order)

    def claim(self, b, k: int, order="acq_rel"):
        """Whether this thread took slot k from 0 to 1 (an i1)."""
        return b.extract_value(b.cmpxchg(self.slot(b, k), self.c(0), self.c(1), order, "monotonic"), 1)

    def pause(self, b) -> None:
        if self.x86:
            name = "llvm.x86.sse2.pause"
            fn = self.m.globals.get(name) or ir.Function(self.m, ir.FunctionType(VOID, []), name)
            b.call(fn, [])

    def futex_word(self, b):
        return b.bitcast(self.slot(b, _FUTEX), I32.as_pointer())

    def kernel(self, name: str, n_ints: int, linkage: str | None = None) -> ir.Function:
        fn = ir.Function(self.m, ir.FunctionType(VOID, [I64] * (2 + n_ints)), name)
        if linkage:
            fn.linkage = linkage
        return fn

    def emit(self) -> None:
        self.emit_spin()
        self.emit_reset()
        if not native_pool_supported():
            return
        self.futex, self.sched_yield = _SYSCALLS[platform.machine()]
        work = self.emit_work()
        self.emit_run(work)
        self.emit_worker(work)
        self.emit_stop()
        self.emit_blas(work)

    def emit_spin(self) -> None:
        fn = self.kernel(SPIN_SYMBOL, 1)
        seen, rounds, cell = fn.args[0], fn.args[1], fn.args[2]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ptr = b.inttoptr(cell, I64.as_pointer())
        with for_range(b, 0, rounds):
            value = b.load_atomic(ptr, "acquire", 8)
            with b.if_then(b.icmp_signed("!=", value, seen)):
                b.ret_void()
            self.pause(b)
        b.ret_void()

    def emit_reset(self) -> None:
        fn = self.kernel(POOL_RESET, 0)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        for k in range(_SLOTS):
            self.store(b, k, self.c(0), "seq_cst")
        b.ret_void()

    def emit_stop(self) -> None:
        fn = self.kernel(POOL_STOP, 0)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.store(b, _QUIT, self.c(1), "seq_cst")
        self.wake(b, always=True)
        b.ret_void()

    def wake(self, b, always: bool = False) -> None:
        """Bump the futex word; wake every sleeping worker (if any sleeps)."""
        b.atomic_rmw("add", self.futex_word(b), ir.Constant(I32, 1), "seq_cst")
        cond = ir.Constant(I1, 1) if always else b.icmp_signed(">", self.load(b, _SLEEPERS, "seq_cst"), self.c(0))
        with b.if_then(cond):
            b.call(self.syscall, [self.c(self.futex), b.ptrtoint(self.futex_word(b), I64),
                                  self.c(_FUTEX_WAKE_PRIVATE), self.c(0x7FFFFFFF)])

    def emit_work(self) -> ir.Function:
        """work(job): claim and run chunks of job number `job` until none is
        left (or a newer job replaced it)."""
        fn = self.kernel("sj_pool_work", 1, "internal")
        job = fn.args[2]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        loop = fn.append_basic_block("claim")
        run = fn.append_basic_block("run")
        done = fn.append_basic_block("done")
        b.branch(loop)
        b.position_at_end(loop)
        t = self.load(b, _TICKET, "acquire")
        i = b.and_(t, self.c(0xFFFFFFFF))
        ours = b.icmp_unsigned("==", b.lshr(t, self.c(32)), job)
        left = b.icmp_signed("<", i, self.load(b, _NCHUNKS, "acquire"))
        claim = fn.append_basic_block("cas")
        b.cbranch(b.and_(ours, left), claim, done)
        b.position_at_end(claim)
        got = b.cmpxchg(self.slot(b, _TICKET), t, b.add(t, self.c(1)), "acq_rel", "acquire")
        b.cbranch(b.extract_value(got, 1), run, loop)
        b.position_at_end(run)
        # chunk i of the job's count: [start + i n / count, start + (i + 1) n / count), sizes
        # that differ by one at most (a fixed size leaves the last chunks short: 35 units
        # in 7 chunks of 5 are 4 chunks for one thread and 3 for the other)
        start = self.load(b, _START)
        n, count = b.sub(self.load(b, _STOP), start), self.load(b, _NCHUNKS)
        lo = b.add(start, b.sdiv(b.mul(i, n), count))
        hi = b.add(start, b.sdiv(b.mul(b.add(i, self.c(1)), n), count))
        kernel_t = ir.FunctionType(VOID, [I64, I64, I64])
        b.call(b.inttoptr(self.load(b, _FN), kernel_t.as_pointer()), [lo, hi, self.load(b, _ARGS)])
        self.rmw(b, "sub", _PENDING, self.c(1), "release")
        b.branch(loop)
        b.position_at_end(done)
        b.ret_void()
        return fn

    def emit_run(self, work: ir.Function) -> None:
        fn = self.kernel(POOL_RUN, 3)
        start, stop, kfn, args, chunk = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        kernel_t = ir.FunctionType(VOID, [I64, I64, I64])
        n = b.sub(stop, start)
        with b.if_then(b.icmp_signed("<=", n, self.c(0))):
            b.ret_void()
        chunk = b.select(b.icmp_signed("<", chunk, self.c(1)), self.c(1), chunk)
        workers = self.load(b, _WORKERS)
        pooled = b.and_(b.icmp_signed(">", workers, self.c(0)), b.icmp_signed(">=", n, b.mul(chunk, self.c(2))))
        with b.if_then(pooled):
            with b.if_then(self.claim(b, _BUSY)):  # the pool is ours: post the job
                threads = b.add(workers, self.c(1))
                want = b.mul(threads, self.c(CHUNKS_PER_THREAD))
                most = b.sdiv(n, chunk)  # (chunks of at least `chunk`)
                self.post(b, work, kfn, args, start, stop, b.select(b.icmp_signed("<", most, want), most, want))
                b.ret_void()
        b.call(b.inttoptr(kfn, kernel_t.as_pointer()), [start, stop, args])  # on this thread alone
        b.ret_void()

    def post(self, b, work, kfn, args, start, stop, count) -> None:
        """With the pool won (BUSY 0 -> 1): run kfn over [start, stop) in
        `count` chunks of balanced sizes on the workers and this thread,
        wait for the last chunk, give the pool back."""
        # Close the previous job's ticket (every chunk claimed) before its fields
        # change: a late worker that read the old ticket and then this job's
        # NCHUNKS would otherwise claim a chunk of this job before it is
        # published, run it, and make PENDING miss zero (the caller waits forever)
        old = self.load(b, _TICKET, "seq_cst")
        self.store(b, _TICKET, b.or_(old, self.c(0xFFFFFFFF)), "seq_cst")
        for k, v in ((_FN, kfn), (_ARGS, args), (_START, start), (_STOP, stop), (_PENDING, count)):
            self.store(b, k, v)
        self.store(b, _NCHUNKS, count, "release")  # (a worker that reads it sees the ticket closed)
        job = b.and_(b.add(b.lshr(old, self.c(32)), self.c(1)), self.c(0xFFFFFFFF))
        self.store(b, _TICKET, b.shl(job, self.c(32)), "seq_cst")  # publishes the fields above
        self.wake(b)
        b.call(work, [self.c(0), self.c(0), job])
        # the last chunks may still run on workers
        self.wait_until(b, lambda: b.icmp_signed("==", self.load(b, _PENDING, "acquire"), self.c(0)))
        self.store(b, _BUSY, self.c(0), "release")

    def wait_until(self, b, ready) -> None:
        """Spin (pausing, yielding the CPU now and then) until ready() holds."""
        head = b.append_basic_block("wait")
        spin = b.append_basic_block("wait.spin")
        out = b.append_basic_block("wait.done")
        pre = b.block
        b.branch(head)
        b.position_at_end(head)
        r = b.phi(I64, "r")
        r.add_incoming(self.c(0), pre)
        b.cbranch(ready(), out, spin)
        b.position_at_end(spin)
        self.pause(b)
        with b.if_then(b.icmp_signed("==", b.and_(r, self.c(_YIELD_ROUNDS - 1)), self.c(_YIELD_ROUNDS - 1))):
            b.call(self.syscall, [self.c(self.sched_yield)])
        r.add_incoming(b.add(r, self.c(1)), b.block)
        b.branch(head)
        b.position_at_end(out)

    def emit_worker(self, work: ir.Function) -> None:
        fn = self.kernel(POOL_WORKER, 0)
        entry = fn.append_basic_block("entry")
        b = ir.IRBuilder(entry)
        self.rmw(b, "add", _WORKERS, self.c(1))
        seen0 = b.lshr(self.load(b, _TICKET, "acquire"), self.c(32))
        top = fn.append_basic_block("top")
        sleep = fn.append_basic_block("sleep")
        leave = fn.append_basic_block("leave")
        b.branch(top)
        b.position_at_end(top)
        seen = b.phi(I64, "seen")
        seen.add_incoming(seen0, entry)
        # spin: a new job number, or quit, or sleep after POOL_SPIN_ROUNDS
        with for_range(b, 0, POOL_SPIN_ROUNDS) as i:
            with b.if_then(b.icmp_signed("!=", self.load(b, _QUIT), self.c(0))):
                b.branch(leave)
            job = b.lshr(self.load(b, _TICKET, "acquire"), self.c(32))
            with b.if_then(b.icmp_unsigned("!=", job, seen)):
                b.call(work, [self.c(0), self.c(0), job])
                seen.add_incoming(job, b.block)
                b.branch(top)
            self.pause(b)
            polite = b.and_(b.icmp_signed(">=", i, self.c(POOL_HOT_ROUNDS)),
                            b.icmp_signed("==", b.and_(i, self.c(31)), self.c(0)))
            with b.if_then(polite):  # (other threads of this CPU get it)
                b.call(self.syscall, [self.c(self.sched_yield)])
        b.branch(sleep)
        b.position_at_end(sleep)
        self.rmw(b, "add", _SLEEPERS, self.c(1))
        word = b.load_atomic(self.futex_word(b), "seq_cst", 4)
        job = b.lshr(self.load(b, _TICKET, "seq_cst"), self.c(32))
        idle = b.and_(b.icmp_unsigned("==", job, seen), b.icmp_signed("==", self.load(b, _QUIT, "seq_cst"), self.c(0)))
        with b.if_then(idle):  # (returns at once if the word changed since it was read)
            b.call(self.syscall, [self.c(self.futex), b.ptrtoint(self.futex_word(b), I64),
                                  self.c(_FUTEX_WAIT_PRIVATE), b.zext(word, I64), self.c(0)])
        self.rmw(b, "sub", _SLEEPERS, self.c(1))
        seen.add_incoming(seen, b.block)
        b.branch(top)
        b.position_at_end(leave)
        self.rmw(b, "sub", _WORKERS, self.c(1))
        b.ret_void()

    # ------------------------------------------------ OpenBLAS on the pool
    def emit_blas(self, work: ir.Function) -> None:
        """OpenBLAS's threading callback (`openblas_set_threads_callback_function`,
        OpenBLAS >= 0.3.27; runtime/threadpool.py installs it) and its helpers.

        `sj_blas_threads(sync, dojob, numjobs, elsize, jobdata, dojob_data)`
        runs dojob(thread, jobdata + i * elsize, dojob_data) for every job i
        < numjobs, all at once, and returns when they are done.  All at once
        matters: the jobs of OpenBLAS's threaded GEMM wait for each other's
        packed blocks, so two of them on one thread in turn never finish.
        Jobs that fit the pool (numjobs <= workers + 1) run one per thread as
        a job of the pool with chunks of one (a thread busy in one job's
        chunk cannot claim the other's, whichever it claimed first); more
        jobs than that, or any after `sj_blas_close`, run on threads started
        for the call (pthread_create), never in turn.  `thread` indexes
        OpenBLAS's per-thread buffers and flags: it starts past its own
        server threads' (the int at an address given to `sj_blas_setup`,
        OpenBLAS's `blas_num_threads`, less one: the largest of them, as one
        callback serves every OpenBLAS in the process, numpy's and scipy's),
        and calls are serialized (BLAS_LOCK), so no two running jobs share one.

        `sj_blas_setup(0, 0, nthreads_address, out)` records that address
        (once; up to BLAS_LIBRARIES of them) and writes the callback's own
        address to the i64 at `out`, or 0 when it has no room for it.
        `sj_blas_close(0, 0)` waits for the call under way and sends every
        later one to started threads (the pool's workers are about to stop)."""
        i8p = I8.as_pointer()
        dojob_t = ir.FunctionType(VOID, [I32, i8p, I32])
        cb = ir.Function(self.m, ir.FunctionType(VOID, [I32, dojob_t.as_pointer(), I32, I64, i8p, I32]),
                         "sj_blas_threads")
        cb.linkage = "internal"
        # the addresses of each OpenBLAS's thread count, and how many there are
        counts_t = ir.ArrayType(I64, BLAS_LIBRARIES)
        nthreads = ir.GlobalVariable(self.m, counts_t, "sj_blas_nthreads")
        nthreads.linkage = "internal"
        nthreads.initializer = ir.Constant(counts_t, None)
        libraries = ir.GlobalVariable(self.m, I64, "sj_blas_libraries")
        libraries.linkage = "internal"
        libraries.initializer = self.c(0)

        # a job record: (dojob, elsize, jobdata, dojob_data, first thread) as i64 words
        job = self.kernel("sj_blas_job", 1, "internal")  # (lo, hi, record): jobs [lo, hi) in turn
        lo, hi, rec = job.args
        b = ir.IRBuilder(job.append_basic_block("entry"))
        words = b.inttoptr(rec, I64.as_pointer())
        f, elsize, data, arg, first = (b.load(b.gep(words, [self.c(k)])) for k in range(5))
        f = b.inttoptr(f, dojob_t.as_pointer())
        data = b.inttoptr(data, i8p)
        with for_range(b, lo, hi) as i:
            b.call(f, [b.trunc(b.add(first, i), I32), b.gep(data, [b.mul(i, elsize)]), b.trunc(arg, I32)])
        b.ret_void()

        # a started thread: pthread start routine over (record, job index)
        start_t = ir.FunctionType(i8p, [i8p])
        tramp = ir.Function(self.m, start_t, "sj_blas_thread")
        tramp.linkage = "internal"
        b = ir.IRBuilder(tramp.append_basic_block("entry"))
        pair = b.bitcast(tramp.args[0], I64.as_pointer())
        index = b.load(b.gep(pair, [self.c(1)]))
        b.call(job, [index, b.add(index, self.c(1)), b.load(pair)])
        b.ret(ir.Constant(i8p, None))
        create = ir.Function(self.m, ir.FunctionType(I32, [I64.as_pointer(), i8p, start_t.as_pointer(), i8p]),
                             "pthread_create")
        join = ir.Function(self.m, ir.FunctionType(I32, [I64, i8p.as_pointer()]), "pthread_join")

        sync, dojob, numjobs, elsize, jobdata, dojob_data = cb.args
        b = ir.IRBuilder(cb.append_basic_block("entry"))
        n = b.sext(numjobs, I64)
        with b.if_then(b.icmp_signed("<=", n, self.c(0))):
            b.ret_void()
        self.wait_until(b, lambda: self.claim(b, _BLAS_LOCK, "acquire"))
        first_at = b.alloca(I64)  # (past every library's server threads)
        b.store(self.c(0), first_at)
        with for_range(b, self.c(0), b.load(libraries)) as i:
            count_at = b.load(b.gep(nthreads, [ir.Constant(I32, 0), i]))
            servers = b.sext(b.load(b.inttoptr(count_at, I32.as_pointer())), I64)
            past = b.sub(servers, self.c(1))
            b.store(smax(b, b.load(first_at), past), first_at)
        first = b.load(first_at)
        record = b.alloca(I64, size=self.c(5))
        for k, v in enumerate((b.ptrtoint(dojob, I64), elsize, b.ptrtoint(jobdata, I64),
                               b.sext(dojob_data, I64), first)):
            b.store(v, b.gep(record, [self.c(k)]))
        rec = b.ptrtoint(record, I64)
        workers = self.load(b, _WORKERS, "acquire")
        pooled = b.and_(b.icmp_signed("<=", n, b.add(workers, self.c(1))),
                        b.icmp_signed("==", self.load(b, _BLAS_CLOSED, "acquire"), self.c(0)))
        with b.if_else(b.or_(b.icmp_signed("==", n, self.c(1)), pooled)) as (on_pool, started):
            with on_pool:
                with b.if_else(b.icmp_signed("==", n, self.c(1))) as (alone, shared):
                    with alone:
                        b.call(job, [self.c(0), self.c(1), rec])
                    with shared:  # (the pool's holder, a kernel of another thread, lets go soon)
                        self.wait_until(b, lambda: self.claim(b, _BUSY))
                        self.post(b, work, b.ptrtoint(job, I64), rec, self.c(0), n, n)
            with started:
                tids = b.alloca(I64, size=n)
                pairs = b.alloca(I64, size=b.mul(n, self.c(2)))
                with for_range(b, self.c(1), n) as i:
                    pair = b.gep(pairs, [b.mul(i, self.c(2))])
                    b.store(rec, pair)
                    b.store(i, b.gep(pair, [self.c(1)]))
                    failed = b.icmp_signed("!=", b.call(create, [b.gep(tids, [i]), ir.Constant(i8p, None), tramp,
                                                                 b.bitcast(pair, i8p)]), ir.Constant(I32, 0))
                    with b.if_then(failed):  # (no thread to be had: OpenBLAS itself aborts then)
                        b.store(self.c(0), b.gep(tids, [i]))
                b.call(job, [self.c(0), self.c(1), rec])
                with for_range(b, self.c(1), n) as i:
                    tid = b.load(b.gep(tids, [i]))
                    with b.if_else(b.icmp_signed("!=", tid, self.c(0))) as (ran, not_started):
                        with ran:
                            b.call(join, [tid, ir.Constant(i8p.as_pointer(), None)])
                        with not_started:
                            b.call(job, [i, b.add(i, self.c(1)), rec])
        self.store(b, _BLAS_LOCK, self.c(0), "release")
        b.ret_void()

        setup = self.kernel(BLAS_SETUP, 2)
        b = ir.IRBuilder(setup.append_basic_block("entry"))
        address, out = setup.args[2:]
        known = b.load(libraries)
        seen = b.alloca(I1)
        b.store(ir.Constant(I1, 0), seen)
        with for_range(b, self.c(0), known) as i:
            with b.if_then(b.icmp_signed("==", b.load(b.gep(nthreads, [ir.Constant(I32, 0), i])), address)):
                b.store(ir.Constant(I1, 1), seen)
        room = b.icmp_signed("<", known, self.c(BLAS_LIBRARIES))
        with b.if_then(b.and_(b.not_(b.load(seen)), room)):
            b.store(address, b.gep(nthreads, [ir.Constant(I32, 0), known]))
            b.store(b.add(known, self.c(1)), libraries)
        # (0 when it has no room for another library: that one keeps its own threads)
        b.store(b.select(b.or_(b.load(seen), room), b.ptrtoint(cb, I64), self.c(0)), b.inttoptr(out, I64.as_pointer()))
        b.ret_void()

        close = self.kernel(BLAS_CLOSE, 0)
        b = ir.IRBuilder(close.append_basic_block("entry"))
        self.wait_until(b, lambda: self.claim(b, _BLAS_LOCK, "acquire"))
        self.store(b, _BLAS_CLOSED, self.c(1), "seq_cst")
        self.store(b, _BLAS_LOCK, self.c(0), "release")
        b.ret_void()

"""Building an Executable from a trace: the reference back end runs the graph
node by node in numpy; the llvm back end runs the pass pipeline, partitions
into fused kernels, compiles them to one artifact and links it."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import sympy

from clustering import partition, run_pipeline
from clustering.partition import Kernel, Plan
from clustering.reroll import reroll
from codegen import gemm, lower, parallel
from codegen.artifact import Artifact, ArtifactError, KernelInfo
from codegen.abi import DATA_OFFSET, STRIDES_OFFSET
from codegen.llvm import compile_ir, target_description
from codegen.lower import compile_module, emit_plan, entries
from jit.trace import TraceResult, sizes_outside
from runtime.cache import build_id, content_key, default_cache, key_symbol
from runtime import dispatch, gemmchoice, gemv
from runtime.executable import Executable, OutputSpec, PortableExecutable
from runtime.kernelcall import KernelCall, run_split
from runtime.loader import LoadError, load
from runtime import threadpool
from runtime.native import check_array_layout
from shapes import config, forksafe
from shapes.ir import Graph, Node
from shapes.verify import checks_enabled

BACKENDS = ("llvm", "reference")


@dataclass
class Build:
    executable: Executable
    plan: Plan | None = None
    seconds: dict = field(default_factory=dict)
    cache_level: str | None = None  # "memory" | "disk" | "remote" when the object code came from the cache
    artifact_key: str | None = None  # the object code's cache key (None: no kernels)
    abis: list = field(default_factory=list)
    libraries: tuple = ()  # library kernels it calls (the GEMMs), by symbol
    tiles: tuple = ()  # the tile entries of its epilogues fused into a GEMM's store
    on_gemm: frozenset = frozenset()  # matmul outputs on the GEMM library kernel
    in_store: frozenset = frozenset()  # kernels (by name) run in their GEMM's store

    def describe_plan(self) -> str | None:
        """The plan as text with lowering's decisions (None: the reference back end)."""
        return None if self.plan is None else self.plan.describe(self.on_gemm, self.in_store)


@dataclass(frozen=True)
class SavedBuild:
    """What a new process needs to rebuild the Executable without tracing,
    passes, code generation or sympy (jit/persist.py saves it): plain data."""
    executable: PortableExecutable
    kernels: tuple        # (symbol, n_arrays, n_ints, n_floats) of each kernel
    artifact_key: str | None
    layout: tuple         # the array-struct offsets the kernels read
    libraries: tuple      # library kernels it calls, by symbol

    @staticmethod
    def of(b: Build) -> "SavedBuild":
        return SavedBuild(b.executable.portable, entries(b.abis, b.tiles), b.artifact_key,
                          (DATA_OFFSET, STRIDES_OFFSET), b.libraries)


def build(tr: TraceResult, symbols, backend: str, input_contiguous: list[bool], name: str,
          signature: str = "") -> Build:
    if backend == "reference":
        return Build(Executable(tr.graph, symbols, tr.outputs, tr.dd_dims, dd_checks=tr.dd_checks))
    times = {}
    t0 = time.perf_counter()
    g = run_pipeline(tr.graph, checks=checks_enabled(), sizes=sizes_outside(tr.outputs, tr.dd_checks))
    outputs = _remap_outputs(tr.outputs, g)
    checked = bounds_checked()
    if not checked:  # (a re-rolled loop's loads and stores are not bounds-checked: checked runs keep the trips)
        g = reroll(g)
    plan = partition(g)
    t1 = time.perf_counter()
    times["passes"] = t1 - t0
    contiguous = plan.contiguous_values(input_contiguous)
    low = emit_plan(plan, contiguous, checked)
    kernel_abis, gemms, loops = low.kernels, low.gemms, low.loops
    abis = kernel_abis + list(loops.values())
    t2 = time.perf_counter()
    times["codegen"] = t2 - t1
    functions, loaded, level, key = {}, None, None, None
    if abis:
        key, loaded, level = _artifact(low.text, low.entries(), checked, name, signature)
        functions = _functions(loaded, low.entries(), (DATA_OFFSET, STRIDES_OFFSET))
    libraries = tuple(sorted({a.symbol for a, _ in gemms.values()}))
    functions.update(_library_functions(libraries))
    if functions:
        _start_pools()
    t3 = time.perf_counter()
    times["llvm" if level is None else "load"] = t3 - t2
    by_kernel = {id(k): a for k, a in zip(plan.kernels(), kernel_abis)}
    # a product with an epilogue in its store runs where the epilogue's
    # kernel stood (the steps between do not need it: codegen.lower._epilogues)
    fused = {id(plan.kernels()[i]): (tile, vid) for i, (tile, vid) in low.epilogues.items()}
    moved = {s.out.id: s for s in plan.steps if isinstance(s, Node) and s.out.id in {v for _, v in fused.values()}}

    def product_call(s: Node) -> KernelCall:
        a, prepare = gemms[s.out.id]
        sizes = (sympy.Mul(*s.out.shape[:-1]), s.out.shape[-1], s.inputs[0].shape[-1])  # M, N, K
        return KernelCall(a.symbol, tuple(v.id for v in s.inputs), ((s.out.id, s.out.shape, s.out.dtype),),
                          a.args, a.rows, a.inner, prepare, parallel.par_symbol(a.symbol),
                          (s.inputs[0].id, s.inputs[1].id, sizes))

    def kernel_call(k: Kernel, tile: str = "") -> KernelCall:
        a = by_kernel[id(k)]
        return KernelCall(a.symbol, tuple(v.id for v in k.inputs), tuple((v.id, v.shape, v.dtype) for v in k.outputs),
                          a.args, a.rows, a.inner, parallel=parallel.par_symbol(a.symbol), pointwise=True, tile=tile)
    steps = []
    for s in plan.steps:
        if isinstance(s, Kernel):
            if id(s) in fused:
                tile, vid = fused[id(s)]
                steps.append(product_call(moved[vid]).with_epilogue(kernel_call(s, tile)))
            else:
                steps.append(kernel_call(s))
        elif s.op == "matmul" and s.out.id in gemms:
            if s.out.id not in moved:
                steps.append(product_call(s))
        elif s.op == "loop":  # (run in order on the calling thread: a trip reads what the one before stored)
            a = loops[s.out.id]
            steps.append(KernelCall(a.symbol, tuple(v.id for v in s.inputs), ((s.out.id, s.out.shape, s.out.dtype),),
                                    a.args, a.rows, a.inner, target=True))
        elif s.op == "pyloop":  # (its scalars pass through an int64 buffer: runtime/kernelcall.py run_lifted)
            a, prog = loops[s.out.id], s.attr("program")
            scalars = tuple((v.id, p[2]) for v, p in zip(s.inputs, prog.inputs) if p[1] == "scalar")
            outs = tuple((o.id, t) for o, (_, t) in zip(s.outputs[len(prog.written):], prog.outputs))
            steps.append(KernelCall(a.symbol, tuple(v.id for v in s.inputs),
                                    tuple((v.id, v.shape, v.dtype) for v in s.outputs), a.args, 1, 1,
                                    lifted=(tuple(s.inputs[k].id for k in prog.written), scalars, outs)))
        else:
            steps.append(s)
    defined = {o.id for n in g.nodes for o in n.outputs}
    dd = [d for d in tr.dd_dims if d.value_id in defined]
    exe = Executable(g, symbols, outputs, dd, steps, functions, keepalive=loaded, dd_checks=tr.dd_checks)
    return Build(exe, plan, times, level, key, abis, libraries, tuple(t for t, _ in low.epilogues.values()),
                 frozenset(gemms), frozenset(plan.kernels()[i].name for i in low.epilogues))


def bounds_checked() -> bool:
    """SHAPEJIT_BOUNDS_CHECK=1: kernels check every access (tests)."""
    return config.get("SHAPEJIT_BOUNDS_CHECK")


def plan_switches() -> tuple:
    """What changes what a trace compiles to (part of a saved trace's key):
    bounds checks, epilogues in the GEMM's store, and the target (its CPU
    and features as SHAPEJIT_ISA narrows them): an executable holds the GEMM
    tile's width in its strip counts, so a saved trace of an AVX-512 host
    run on an AVX2 kernel (a fleet's shared cache, SHAPEJIT_ISA=avx2 on the
    same machine) computed a quarter of a product's columns."""
    return bounds_checked(), lower.fuse_epilogues(), target_description()


def build_saved(saved: SavedBuild) -> Build | None:
    """The Executable of a saved build, linking its object code from the
    cache; None when the object code is not there (or not valid) any more."""
    t0 = time.perf_counter()
    functions, loaded, level = {}, None, "memory"
    if saved.kernels:
        found = _cached(default_cache(), saved.artifact_key, [k[0] for k in saved.kernels])
        if found is None:
            return None
        loaded, level = found
        functions = _functions(loaded, saved.kernels, saved.layout)
    functions.update(_library_functions(saved.libraries))
    if functions:
        _start_pools()
    exe = Executable.from_portable(saved.executable, functions, keepalive=loaded)
    return Build(exe, None, {"load": time.perf_counter() - t0}, level, saved.artifact_key, [], saved.libraries)


def _functions(loaded, kernels, layout) -> dict:
    """Callables of the loaded kernels (their Python entries as builtin
    functions; the thread pools' helpers as ctypes functions), by symbol (the
    first field of each of `kernels`); `layout` is the array-struct offsets
    they were generated for, checked against this numpy."""
    check_array_layout(*layout)
    return {k[0]: loaded[k[0]] for k in kernels}


_libraries: dict = {}
_libraries_lock = forksafe.lock()


def _library_functions(libraries) -> dict:
    """The library kernels (by symbol) and their parallel entries."""
    return {sym: library_function(sym) for lib in libraries for sym in (lib, parallel.par_symbol(lib))}


def library_function(symbol: str):
    """A kernel shared by every function of the process — the GEMM of a
    dtype and its parallel entry (codegen/gemm.py), the thread pools'
    helpers (codegen/parallel.py) — compiled once per machine (kept in the
    compile cache under a key of its own) and loaded once per process."""
    with _libraries_lock:
        fn = _libraries.get(symbol)
        if fn is not None:
            return fn
        key, name, make, kernels = library_spec(symbol)
        cache = default_cache()
        symbols = [k[0] for k in kernels]
        found = _cached(cache, key, symbols)
        if found is None:
            # (written vectorized and unrolled by hand: no IR optimization, as fast and 3x quicker to compile)
            artifact = compile_ir(make(), [KernelInfo(*k) for k in kernels], {"function": "library"}, optimize=False,
                                  key_symbol=key_symbol(key))
            cache.put(key, artifact.to_bytes(), "(library)", name, kind="library")
            found = load(artifact), None
        _libraries.update(_functions(found[0], kernels, (DATA_OFFSET, STRIDES_OFFSET)))  # (they keep their code)
        if name != "parallel":
            _load_dispatch(gemm.dtype_of(name))
        return _libraries[symbol]


def library_spec(symbol: str) -> tuple:
    """(cache key, name, module maker, kernels) of the library that defines
    `symbol`: the thread pool's library (codegen/parallel.py), or the GEMM of a dtype.  Its key is the
    machine's (target, build): compiled once per machine."""
    if symbol in {k[0] for k in parallel.exported()}:
        name, make, kernels, variant = "parallel", parallel.module, parallel.exported(), ""
    else:
        name = symbol.removesuffix(parallel.PAR_SUFFIX)
        dtype = gemm.dtype_of(name)
        make, variant = (lambda: gemm.library(dtype)), gemm.variant(dtype)
        kernels = parallel.with_parallel([(name, *gemm.ARGS)], python=True)
    key = content_key("library", name, repr(kernels), variant, target_description(), build_id())
    return key, name, make, kernels


def _dispatch_key(dtype) -> str:
    """The cache key of the dispatch calibrated for `dtype` on this CPU (its
    name and features, a forced ISA included), these threads, this build and
    the numpy whose BLAS it timed (its version, and the kernels
    OPENBLAS_CORETYPE chose: 1.5x apart on one host)."""
    blas = f"numpy {np.__version__}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')}"
    return content_key("gemm-dispatch", np.dtype(dtype).char, target_description(), build_id(),
                       str(threadpool.num_threads()), blas)


def _load_dispatch(dtype, start: bool = True) -> bool:
    """Install the dispatch tree calibrated on this CPU, when the persistent
    cache has one (a damaged record is dropped: the classes are raced);
    else, `start`ing, have it calibrated in the background.  -> whether a
    tree was installed."""
    key = _dispatch_key(dtype)
    blob, _ = default_cache().get(key, memory=False)
    if blob is not None:
        try:
            _, tree = dispatch.from_record(blob)
        except (ValueError, KeyError, TypeError):
            default_cache().reject(key)
        else:
            gemmchoice.install(np.dtype(dtype).char, tree)
            return True
    if start:
        _calibrate_in_background(np.dtype(dtype), key)
    return False


# A CPU without a calibration is calibrated in a process of its own (under
# SCHED_IDLE: jit/__main__.py), once for every process on the machine: the
# first to claim the job in the persistent cache starts it, the others (and
# it) race products until the tree arrives, then take it.  A claim lapses
# after this many seconds: a calibration that failed is started again by a
# process that comes later, not by every process at once.
CALIBRATION_CLAIM = 600.0
CALIBRATION_POLL = 2.0  # seconds between looks at the cache of a process that did not start it
CALIBRATION_ROUNDS = dispatch.ROUNDS


def _calibrate_in_background(dtype: np.dtype, key: str) -> None:
    cache = default_cache()
    if not config.get("SHAPEJIT_CALIBRATE") or not cache.on_disk or dtype.char in _calibrating_here:
        return
    proc = None
    if cache.claim("claim-" + key, CALIBRATION_CLAIM, "(gemm calibration)"):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, SHAPEJIT_CALIBRATE="0", SHAPEJIT_CACHE_DIR=cache.directory,
                   PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        cmd = [sys.executable, "-m", "jit", "calibrate", "--dtypes", dtype.name, "--rounds", str(CALIBRATION_ROUNDS),
               "--background", key]
        try:
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        except (OSError, subprocess.SubprocessError):  # (the classes are raced, as without a calibration)
            dispatch.EVENTS["failed"] += 1
            return
        dispatch.EVENTS["started"] += 1
    _calibrating.add(dtype.char)
    try:
        threading.Thread(target=_take_calibration, args=(dtype, proc, key), daemon=True,
                         name="shapejit-calibration").start()
    except RuntimeError:  # (no thread to spare: a later process takes the calibration)
        _calibrating.discard(dtype.char)


def _take_calibration(dtype: np.dtype, proc, key: str) -> None:
    """Install the calibration when it arrives (the process `proc` exits, or
    another process's turns up in the cache); the classes of its dtype
    raced meanwhile are decided by the tree from then on."""
    deadline = time.monotonic() + CALIBRATION_CLAIM
    try:
        if proc is not None:
            proc.wait()
        while not _load_dispatch(dtype, start=False):
            if proc is not None:  # (it failed: its claim stays until it lapses)
                dispatch.EVENTS["failed"] += 1
                return
            if time.monotonic() > deadline:
                return
            time.sleep(CALIBRATION_POLL)
        if proc is not None:
            default_cache().drop("claim-" + key)
        dispatch.EVENTS["installed"] += 1
        gemmchoice.forget(dtype.char)
    finally:
        _calibrating.discard(dtype.char)


_calibrating: set[str] = set()  # dtype chars whose calibration this process awaits
_calibrating_here: set[str] = set()  # dtype chars calibrate_gemm is calibrating in this process


def calibrating() -> bool:
    """Whether this process awaits a calibration from the background."""
    return bool(_calibrating)


def calibrate_gemm(dtype, rounds: int = dispatch.ROUNDS, grid_m=dispatch.GRID_M, grid_kn=dispatch.GRID_KN,
                   key: str | None = None) -> tuple:
    """Time the GEMM kernel and numpy's matmul on this CPU (runtime/dispatch.py),
    learn the dispatch tree, keep both in the persistent cache (under `key`,
    by default this CPU's) and install the tree: -> (calibration, tree)."""
    dtype = np.dtype(dtype)
    sym = gemm.symbol_for(dtype)
    _calibrating_here.add(dtype.char)  # (loading the kernel starts no calibration of its own)
    try:
        fn, par = library_function(sym), library_function(parallel.par_symbol(sym))
    finally:
        _calibrating_here.discard(dtype.char)
    _start_pools()
    nr = gemm.tile_for(dtype).nr

    def kernel(a, b, c):  # (as an executable calls it: gemm.abi_of's units and work, a row split over K)
        (m, k), n = a.shape, b.shape[1]
        t, pool = gemv.parts(m, k, n), threadpool.native_pool()
        if t and pool is not None:
            gemv.split(par, pool, a, b, c, n, k, -(-n // nr), t)
        else:
            run_split(fn, par, -(-n // nr), m * k * max(1, nr // 16), (a, b, c, m, n, k, 0, 0, 0, 0))
    cal = dispatch.calibrate(dtype, kernel, target_description(), nr, threadpool.num_threads(), grid_m, grid_kn,
                             rounds)
    tree = dispatch.learn(dispatch.votes(cal, gemmchoice.MARGIN))
    default_cache().put(key or _dispatch_key(dtype), dispatch.record(cal, tree), "(gemm dispatch)", dtype.name,
                        kind="calibration")
    gemmchoice.install(dtype.char, tree)
    return cal, tree


def gemm_dispatch() -> dict:
    """The dispatch trees installed in this process, by dtype char."""
    return {char: tree for char, (tree, _) in sorted(gemmchoice.TREES.items())}


_pools_started = False


def _start_pools() -> None:
    """Give the thread pools their native helpers (once per process): the
    Python pool's spin-wait and, where supported, the native pool."""
    global _pools_started
    if _pools_started:
        return
    threadpool.set_spin_wait(library_function(parallel.SPIN_SYMBOL))
    if parallel.native_pool_supported():
        run = library_function(parallel.POOL_RUN)
        threadpool.install_native_pool(ctypes.cast(run, ctypes.c_void_p).value, library_function(parallel.POOL_WORKER),
                                       library_function(parallel.POOL_STOP), library_function(parallel.POOL_RESET),
                                       library_function(parallel.BLAS_SETUP), library_function(parallel.BLAS_CLOSE))
    _pools_started = True


def _artifact(text: str, exported: tuple, checked: bool, name: str, signature: str):
    """(key, loaded object code, cache level) for `text`, which exports
    `exported` (codegen.lower.entries): from the cache when a valid entry
    exists, else compiled by LLVM (level None)."""
    cache = default_cache()
    key = content_key(text, target_description(), build_id(), f"checked={checked}")
    found = _cached(cache, key, [k[0] for k in exported])
    if found is not None:
        return key, found[0], found[1]
    artifact = compile_module(text, exported, {"function": name}, key_symbol(key))
    cache.put(key, artifact.to_bytes(), name, signature)
    return key, load(artifact), None


def _cached(cache, key: str, symbols: list):
    """(loaded, level) for a valid cached artifact with exactly these kernels;
    checksum, versions, host and the key it was compiled for (a symbol named
    from it, which the loader requires) are verified before anything runs,
    and a bad entry is counted and dropped."""
    blob, level = cache.get(key)
    if blob is None:
        return None
    try:
        artifact = Artifact.from_bytes(blob)
        if [k.symbol for k in artifact.kernels] != symbols:
            raise ArtifactError("kernel list does not match")
        if artifact.key_symbol != key_symbol(key):
            raise ArtifactError("object code compiled for another key")
        return load(artifact), level
    except (ArtifactError, LoadError):
        cache.reject(key)
        return None


def _remap_outputs(outputs: list[OutputSpec], g: Graph) -> list[OutputSpec]:
    it = iter(g.outputs)
    return [OutputSpec(o.kind, next(it).id) if o.kind in ("value", "argument") else
            OutputSpec("writeback", (o.payload[0], next(it).id)) if o.kind == "writeback" else
            OutputSpec("check", (next(it).id,) + o.payload[1:]) if o.kind == "check" else o
            for o in outputs]

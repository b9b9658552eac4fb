"""The single LLVM path: LLVM IR text -> optimized native object code.

* :func:`host_target` -- cached target machine for this CPU.
* :func:`compile_ir` -- parse, verify, optimize (new pass manager, O3 with
  loop and SLP vectorization) and emit object code as an :class:`Artifact`.
* :func:`optimize_ir` -- the same optimization, returning IR text (for tests
  and inspection).
* :func:`for_range` / :func:`loop_nest` -- loop builders for ``llvmlite.ir``
  in the style of numba's ``cgutils``.

Set ``SHAPEJIT_DUMP_LLVM=1`` to print the IR before and after optimization to
stderr, or ``SHAPEJIT_DUMP_LLVM=/some/dir`` to write ``*.before.ll`` /
``*.after.ll`` files there.

Compilation is serialized by a lock: the target machine is shared and LLVM
objects are not safe to use concurrently.  A module of several kernels is
compiled in parts, one per core, the parts beyond the first in forked
processes (:func:`_compile_parts`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import select
import signal
import struct
import sys
import time
import warnings
from typing import Iterable, Iterator, Sequence

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from shapes import config, forksafe, host

from .artifact import Artifact, ArtifactError, KernelInfo

__all__ = [
    "host_target",
    "compile_ir",
    "optimize_ir",
    "for_range",
    "loop_nest",
    "I64",
]

I64 = ir.IntType(64)

_compile_lock = forksafe.lock()
forksafe.wait_for(llvm.ffi.lib._lock._lock)  # (fork waits for a call into LLVM to return)
_dump_counter = itertools.count()


# ---------------------------------------------------------------------------
# target


@functools.cache
def _init_native() -> None:
    # llvm.initialize() raises in llvmlite >= 0.45 (core init is automatic),
    # but the native target and asm printer still have to be registered
    # before Target.from_triple / emit_object / create_lljit_compiler work.
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def host_target() -> llvm.TargetMachine:
    """Target machine for the host CPU (its features, as SHAPEJIT_ISA
    narrows them: shapes/host.py; -O3).

    Uses the JIT code model (``large`` on x86-64) so that the object code can
    be linked anywhere in the address space by the in-process loader.
    """
    return _target_machine(host.features())


def target_description() -> str:
    """What object code compiled here depends on: the target, the CPU and
    its features (as SHAPEJIT_ISA narrows them), LLVM's and llvmlite's versions."""
    return "|".join([host_target().triple, host.cpu_name(), host.features(),
                     ".".join(map(str, llvm.llvm_version_info)), llvmlite.__version__])


@functools.cache
def _target_machine(features: str) -> llvm.TargetMachine:
    _init_native()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=host.cpu_name(),
        features=features,
        opt=3,
        reloc="default",
        codemodel="jitdefault",
        jit=True,
    )


def _llvm_version() -> str:
    return ".".join(str(x) for x in llvm.llvm_version_info)


# ---------------------------------------------------------------------------
# dumping


def _dump(stage: str, name: str, text: str) -> None:
    dest = config.get("SHAPEJIT_DUMP_LLVM")
    if dest is None:
        return
    if dest == "stderr":
        bar = "=" * 20
        print(f"{bar} shapejit LLVM IR {name} ({stage}) {bar}\n{text}", file=sys.stderr)
        return
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, f"{name}.{stage}.ll"), "w") as f:
        f.write(text)


def _dump_name(kernels: Sequence[KernelInfo]) -> str:
    first = kernels[0].symbol if kernels else "module"
    return f"{first}.{os.getpid()}.{next(_dump_counter)}"


# ---------------------------------------------------------------------------
# compilation


def _parse(llvm_ir_text: str, tm: llvm.TargetMachine):
    mod = llvm.parse_assembly(str(llvm_ir_text))
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    return mod


def _optimize(mod, tm: llvm.TargetMachine, name: str, optimize: bool = True):
    _dump("before", name, str(mod))
    if not optimize:
        return mod
    # NB: in llvmlite 0.50 create_pipeline_tuning_options() only takes
    # speed_level; size_level is always 0.
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    # kernels that are the same code (the bias adds of q, k and v; the two
    # layernorm epilogues of a BERT layer) become one before the costly
    # pipeline, which then optimizes and vectorizes one copy (a third less
    # compile time for the BERT layer); the others stay as thunks to it
    merge = llvm.ModulePassManager()
    merge.add_merge_functions_pass()
    merge.run(mod, pb)
    pb.getModulePassManager().run(mod, pb)
    _dump("after", name, str(mod))
    return mod


def _check_kernels(mod, kernels: Sequence[KernelInfo]) -> None:
    for k in kernels:
        try:
            fn = mod.get_function(k.symbol)
        except NameError:
            raise ArtifactError(f"kernel {k.symbol!r} is not defined in the module")
        if fn.is_declaration:
            raise ArtifactError(f"kernel {k.symbol!r} is only declared, not defined")
        got = [str(a.type) for a in fn.arguments]
        want = (
            ["i64", "i64"]
            + ["ptr"] * k.n_ptr_args
            + ["i64"] * k.n_int_args
            + ["double"] * k.n_float_args
        )
        if got != want:
            raise ArtifactError(
                f"kernel {k.symbol!r} has signature ({', '.join(got)}), "
                f"expected ({', '.join(want)})"
            )


def compile_ir(
    llvm_ir_text: str,
    kernels: Iterable[KernelInfo],
    metadata: dict | None = None,
    optimize: bool = True,
    key_symbol: str = "",
) -> Artifact:
    """Compile LLVM IR text for the host into an :class:`Artifact`.

    ``kernels`` describes the exported kernel functions; their signatures
    are checked against the ABI before optimization.  ``optimize=False``
    skips the IR optimization pipeline (code generation still runs at -O3):
    for IR written already vectorized and unrolled, such as the GEMM's,
    which then compiles in a third of the time into code as fast.
    ``key_symbol`` names an exported byte the object code carries, named
    from the cache key it is compiled for (runtime/cache.py key_symbol).
    An optimized module whose kernels are independent of each other is
    compiled in parts on the host's cores (:func:`_compile_parts`): the
    artifact then holds one object per part.
    """
    kernels = tuple(kernels)
    if key_symbol:
        if not re.fullmatch(r"sj_key_[0-9a-f]+", key_symbol):
            raise ArtifactError(f"malformed key symbol {key_symbol!r}")
        llvm_ir_text += f'\n@"{key_symbol}" = constant i8 1\n'

    name = _dump_name(kernels)
    with _compile_lock:
        tm = host_target()
        parts = split_module(llvm_ir_text, compile_jobs()) if optimize else [None]
        if len(parts) > 1:
            objects = _compile_parts(llvm_ir_text, parts, kernels, tm, name)
        else:
            objects = [_compile_part(llvm_ir_text, None, kernels, tm, name, optimize)]
    return Artifact(
        objects=tuple(objects),
        kernels=kernels,
        triple=tm.triple,
        cpu=host.cpu_name(),
        features=host.features(),
        llvm_version=_llvm_version(),
        llvmlite_version=llvmlite.__version__,
        metadata=dict(metadata or {}),
        key_symbol=key_symbol,
    )


def _compile_part(text: str, keep: frozenset | None, kernels, tm, name: str, optimize: bool = True) -> bytes:
    """Object code of the module `text`, or of the definitions `keep` of it
    (the others are made internal and, unreferenced, dropped before the
    optimizer sees them)."""
    mod = _parse(text, tm)
    if keep is not None:
        for g in itertools.chain(mod.functions, mod.global_variables):
            if not g.is_declaration and g.name not in keep:
                g.linkage = "internal"
        dce = llvm.ModulePassManager()
        dce.add_global_dead_code_eliminate_pass()
        dce.run(mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0)))
        kernels = [k for k in kernels if k.symbol in keep]
        name += f".part{sorted(keep)[0]}"
    mod = _optimize(mod, tm, name, optimize)
    _check_kernels(mod, kernels)
    return bytes(tm.emit_object(mod))


# ---------------------------------------------------------------------------
# compiling in parts
#
# llvmlite serializes every call into LLVM under one process-wide lock, so
# threads cannot share a compile.  A module whose kernels do not call each
# other is split into parts of about equal size instead; the first is
# compiled here, each other one in a child process forked for it, which sends
# its object code back through a pipe and exits.  The parts are linked into
# one JIT library (runtime/loader.py).  `python -m bench --only bert_layer
# --peers numpy,torch,shapejit-dyn` on a 2-core AMD EPYC znver4 (AVX-512),
# its module of 4 kernels: the cold first call took 343 ms in one part
# (SHAPEJIT_COMPILE_JOBS=1), 259 ms in two.  A child that fails, dies or
# outlasts CHILD_TIMEOUT has its part compiled here instead.

PART_LINES = 400  # the fewest lines of IR a part must have to be worth a process
CHILD_TIMEOUT = 300.0  # seconds a child may take before its part is compiled here
EVENTS = {"split": 0, "forked": 0, "recompiled": 0}  # what compiling in parts did (tests read it)

_NAME = r'@("(?:[^"\\]|\\.)*"|[-a-zA-Z$._][-a-zA-Z$._0-9]*)'
_DEFINE = re.compile(r"^define\b[^@]*" + _NAME)
_GLOBAL = re.compile(r"^" + _NAME + r"\s*=\s*((?:[\w()]+\s+)*?)(global|constant)\b")
_REF = re.compile(_NAME)


def compile_jobs() -> int:
    """How many parts a module may be compiled in: SHAPEJIT_COMPILE_JOBS,
    else the cores this process may run on (1 where fork is unavailable)."""
    if not hasattr(os, "fork") or sys.platform != "linux":
        return 1
    jobs = config.get("SHAPEJIT_COMPILE_JOBS")
    if jobs is None:
        jobs = len(os.sched_getaffinity(0))
    return max(1, jobs)


def split_module(text: str, jobs: int) -> list:
    """The defined symbols of each part `text` compiles in with `jobs`
    processes: [None] (one part, the whole module) unless at least two
    parts of PART_LINES lines each come out.  Definitions that reference
    each other (a kernel and its entries, functions and a global variable
    they read) stay together; an internal constant is copied into every
    part that reads it.  Parts are filled largest unit first."""
    if jobs < 2 or text.count("\n") < 2 * PART_LINES:
        return [None]
    parent: dict[str, str] = {}

    def find(x):
        while parent[x] != x:
            parent[x] = x = parent[parent[x]]
        return x
    bodies, lines = {}, {}
    name, body = None, []
    for line in text.split("\n"):
        if name is not None:
            body.append(line)
            if line == "}":
                bodies[name], lines[name], name = " ".join(body), len(body), None
            continue
        m = _DEFINE.match(line)
        if m:
            name, body = _unquote(m.group(1)), [line]
            parent[name] = name
            continue
        if line.startswith("@"):
            m = _GLOBAL.match(line)
            if m is None:  # (a definition of another kind: compiled whole)
                return [None]
            if not ({"internal", "private"} & set(m.group(2).split()) and m.group(3) == "constant"):
                parent[_unquote(m.group(1))] = _unquote(m.group(1))  # (state, or exported: in one part)
    if name is not None:  # (text not as llvmlite prints it: compiled whole)
        return [None]
    for f, b in bodies.items():
        for ref in _REF.findall(b):
            ref = _unquote(ref)
            if ref != f and ref in parent:
                parent[find(ref)] = find(f)
    units: dict[str, list] = {}
    for x in parent:
        units.setdefault(find(x), []).append(x)
    weighed = sorted(((sum(lines.get(x, 0) for x in u), sorted(u)) for u in units.values()), reverse=True)
    for n in range(min(jobs, sum(w > 0 for w, _ in weighed)), 1, -1):
        parts = [[0, []] for _ in range(n)]
        for w, u in weighed:
            part = min(parts, key=lambda p: p[0])
            part[0] += w
            part[1].extend(u)
        if min(w for w, _ in parts) >= PART_LINES:
            return [frozenset(u) for _, u in parts]
    return [None]


def _compile_parts(text: str, parts: list, kernels, tm, name: str) -> list[bytes]:
    """The object code of each part (split_module) of `text`: the first
    compiled here while a forked child compiles each other one."""
    EVENTS["split"] += 1
    children = [_fork_part(text, keep, kernels, tm, name) for keep in parts[1:]]
    try:
        objects = [_compile_part(text, parts[0], kernels, tm, name)]
        for keep, child in zip(parts[1:], children):
            obj = _collect(*child) if child is not None else None
            if obj is None:
                EVENTS["recompiled"] += 1
                obj = _compile_part(text, keep, kernels, tm, name)
            objects.append(obj)
        return objects
    finally:
        for child in children:
            if child is not None:
                _end(*child)


def _fork_part(text: str, keep: frozenset, kernels, tm, name: str):
    """(pid, read end of its pipe) of a child process compiling the part
    `keep`, or None (no process to be had: the part is compiled here)."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        with warnings.catch_warnings():  # (python >= 3.12 warns of fork in a process with threads, and so
            # does jax's own fork hook once it runs: the child calls nothing but the LLVM of llvmlite, which
            # fork waits to be out of (shapes/forksafe.py), and exits; nothing the user can act on)
            warnings.simplefilter("ignore")
            pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: never returns
        status = 1
        try:
            os.close(r)
            obj = _compile_part(text, keep, kernels, tm, name)
            view = memoryview(struct.pack("<Q", len(obj)) + obj)
            while view:
                view = view[os.write(w, view):]
            status = 0
        finally:
            os._exit(status)
    EVENTS["forked"] += 1
    os.close(w)
    return pid, r


def _collect(pid: int, r: int) -> bytes | None:
    """The object code the child `pid` sends through `r`, or None when it
    sends none whole within CHILD_TIMEOUT."""
    chunks, deadline = [], time.monotonic() + CHILD_TIMEOUT
    poll = select.poll()  # (not select(): a program with over 1024 files open has pipes beyond its reach)
    poll.register(r, select.POLLIN | select.POLLHUP)
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not poll.poll(left * 1000):
            return None
        chunk = os.read(r, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    data = b"".join(chunks)
    if len(data) < 8 or struct.unpack_from("<Q", data)[0] != len(data) - 8:
        return None
    return data[8:]


def _end(pid: int, r: int) -> None:
    """Close the pipe of child `pid` and reap it (killed if still running)."""
    os.close(r)
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:  # (reaped by the program's own SIGCHLD handler)
        pass


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name


def optimize_ir(llvm_ir_text: str) -> str:
    """Return the IR after the same optimization pipeline as compile_ir."""
    with _compile_lock:
        tm = host_target()
        return str(_optimize(_parse(llvm_ir_text, tm), tm, _dump_name(())))


# ---------------------------------------------------------------------------
# loop builders (llvmlite.ir)


def smin(b: ir.IRBuilder, x, y) -> ir.Value:
    """The smaller of two signed integers."""
    return b.select(b.icmp_signed("<", x, y), x, y)


def smax(b: ir.IRBuilder, x, y) -> ir.Value:
    """The larger of two signed integers."""
    return b.select(b.icmp_signed(">", x, y), x, y)


def _as_i64(value) -> ir.Value:
    if isinstance(value, int):
        return ir.Constant(I64, value)
    return value


@contextlib.contextmanager
def for_range(builder: ir.IRBuilder, start, stop, step=1) -> Iterator[ir.Value]:
    """``for (i = start; i < stop; i += step)`` with an i64 index.

    ``start``/``stop``/``step`` are Python ints or i64 values.  A negative
    Python-int ``step`` counts down (``i > stop``); a ``step`` given as an
    IR value must be positive.  The body is emitted inside the ``with``
    block; afterwards the builder is positioned in the exit block.

    Structure (what LLVM's loop passes expect)::

        preheader: br header
        header:    i = phi [start, preheader], [i.next, latch]
                   br (i < stop), body, exit
        body:      ...            (may create further blocks)
                   br latch
        latch:     i.next = add nsw i, step ; br header
        exit:
    """
    start, stop = _as_i64(start), _as_i64(stop)
    down = isinstance(step, int) and step < 0
    if isinstance(step, int) and step == 0:
        raise ValueError("for_range step must not be zero")
    step = _as_i64(step)

    fn = builder.function
    preheader = builder.basic_block
    header = fn.append_basic_block("for.header")
    body = fn.append_basic_block("for.body")
    latch = fn.append_basic_block("for.latch")
    exit_ = fn.append_basic_block("for.exit")

    builder.branch(header)
    builder.position_at_end(header)
    index = builder.phi(I64, name="i")
    index.add_incoming(start, preheader)
    cond = builder.icmp_signed(">" if down else "<", index, stop, name="for.cond")
    builder.cbranch(cond, body, exit_)

    builder.position_at_end(body)
    yield index
    if not builder.block.is_terminated:
        builder.branch(latch)

    builder.position_at_end(latch)
    nxt = builder.add(index, step, name="i.next", flags=("nsw",))
    index.add_incoming(nxt, latch)
    builder.branch(header)

    builder.position_at_end(exit_)


@contextlib.contextmanager
def loop_nest(builder: ir.IRBuilder, extents) -> Iterator[tuple[ir.Value, ...]]:
    """Nested ``for_range(0, extent)`` loops, outermost first.

    Yields the tuple of indices; the innermost loop body is the ``with``
    block.
    """
    with contextlib.ExitStack() as stack:
        indices = tuple(
            stack.enter_context(for_range(builder, 0, extent)) for extent in extents
        )
        yield indices

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
objects are not safe to use concurrently.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import sys
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


def _parse_and_optimize(llvm_ir_text: str, tm: llvm.TargetMachine, name: str, optimize: bool = True):
    mod = llvm.parse_assembly(str(llvm_ir_text))
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
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
    """
    kernels = tuple(kernels)
    if key_symbol:
        if not re.fullmatch(r"sj_key_[0-9a-f]+", key_symbol):
            raise ArtifactError(f"malformed key symbol {key_symbol!r}")
        llvm_ir_text += f'\n@"{key_symbol}" = constant i8 1\n'

    with _compile_lock:
        tm = host_target()
        mod = _parse_and_optimize(llvm_ir_text, tm, _dump_name(kernels), optimize)
        _check_kernels(mod, kernels)
        obj = tm.emit_object(mod)
    return Artifact(
        object_code=bytes(obj),
        kernels=kernels,
        triple=tm.triple,
        cpu=host.cpu_name(),
        features=host.features(),
        llvm_version=_llvm_version(),
        llvmlite_version=llvmlite.__version__,
        metadata=dict(metadata or {}),
        key_symbol=key_symbol,
    )


def optimize_ir(llvm_ir_text: str) -> str:
    """Return the IR after the same optimization pipeline as compile_ir."""
    with _compile_lock:
        tm = host_target()
        return str(_parse_and_optimize(llvm_ir_text, tm, _dump_name(())))


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

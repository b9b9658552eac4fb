"""Link an :class:`Artifact`'s object code into the running process.

No LLVM optimization or code generation happens here: the object code is
handed to an ORC LLJIT (RuntimeDyld) instance, which only relocates and maps
it.  One LLJIT instance is shared by the whole process; every artifact
becomes its own JIT library, kept alive by the :class:`LoadedArtifact`.

Measured on the 2-core znver4 dev box: the first load in a fresh process
takes ~2 ms (0.4 ms host CPU check, 1.1 ms creating the LLJIT, 0.4 ms
linking); later loads ~0.15 ms.  (MCJIT ``add_object_file`` took ~1.5 ms per
object.)  Importing llvmlite.binding itself costs ~20-35 ms.
"""

from __future__ import annotations

import ctypes
import functools
import itertools

import llvmlite.binding as llvm

from runtime.native import kernel_function
from shapes import forksafe, host

__all__ = ["load", "LoadedArtifact", "LoadError", "kernel_cfunctype", "check_host_compatible"]


class LoadError(ValueError):
    """Object code that cannot be linked here: built for another CPU, or a
    symbol missing."""

_lock = forksafe.lock()
forksafe.wait_for(llvm.ffi.lib._lock._lock)  # (fork waits for a call into LLVM to return)
_lib_counter = itertools.count()
_lljit = None


def _get_lljit():
    global _lljit
    if _lljit is None:
        # Needed even for pure object linking: LLJIT looks up the host target.
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _lljit = llvm.create_lljit_compiler()
    return _lljit


@functools.cache
def kernel_cfunctype(n_ptr_args: int, n_int_args: int = 0, n_float_args: int = 0):
    """ctypes prototype of ``void k(i64, i64, ptr..., i64..., double...)``."""
    return ctypes.CFUNCTYPE(
        None,
        ctypes.c_int64,
        ctypes.c_int64,
        *([ctypes.c_void_p] * n_ptr_args),
        *([ctypes.c_int64] * n_int_args),
        *([ctypes.c_double] * n_float_args),
    )


def _host() -> tuple[str, str, str]:
    return (
        llvm.get_process_triple(),
        host.cpu_name(),
        host.features(),
    )


def check_host_compatible(artifact) -> None:
    """Raise LoadError unless the artifact was built for this machine."""
    triple, cpu, features = _host()
    if (artifact.triple, artifact.cpu, artifact.features) != (triple, cpu, features):
        raise LoadError(
            f"artifact was compiled for {artifact.triple}/{artifact.cpu} with "
            f"different CPU features; this host is {triple}/{cpu}"
        )


class LoadedArtifact:
    """Kernels of an artifact, callable in this process.

    ``functions[symbol]`` is the kernel's Python entry as a builtin function
    (runtime/native.py) where it has one, else a ctypes function; both
    release the GIL while the kernel runs.  ``addresses[symbol]`` is the raw
    address of an entry (kernel or Python entry).  The machine code stays
    mapped as long as this object or one of its ``functions`` is alive; raw
    ``addresses`` are only valid while this object is.
    """

    def __init__(self, artifact, tracker, lljit):
        self.artifact = artifact
        self._tracker = tracker  # owns the JIT library
        self._lljit = lljit  # must outlive the tracker
        self.addresses: dict[str, int] = {}
        self.functions: dict[str, object] = {}
        # Each function keeps the machine code mapped even if the
        # LoadedArtifact itself is dropped (load(a)["k"](...) is safe).
        keepalive = self._tracker, self._lljit
        for k in artifact.kernels:
            for symbol in (k.symbol, k.py_entry) if k.py_entry else (k.symbol,):
                addr = tracker[symbol]
                if not addr:
                    raise LoadError(f"symbol {symbol!r} not found in object code")
                self.addresses[symbol] = addr
            if k.py_entry:
                func = kernel_function(self.addresses[k.py_entry], k.symbol, keepalive)
            else:
                func = kernel_cfunctype(k.n_ptr_args, k.n_int_args, k.n_float_args)(self.addresses[k.symbol])
                func._shapejit_keepalive = keepalive
            self.functions[k.symbol] = func

    def __getitem__(self, symbol: str):
        return self.functions[symbol]

    def address(self, symbol: str) -> int:
        return self.addresses[symbol]

    def kernel(self, symbol: str):
        return self.artifact.kernel(symbol)

    def __repr__(self) -> str:
        return f"<LoadedArtifact {sorted(self.functions)}>"


def load(artifact, check_host: bool = True) -> LoadedArtifact:
    """Link the artifact's object code into the process (thread safe).

    `artifact` is codegen's Artifact, read through its plain fields
    (objects, kernels with symbol, argument counts and Python entry,
    triple, cpu, features); the runtime does not import codegen.  With
    ``check_host`` (default) an artifact compiled for another CPU is rejected
    with LoadError instead of risking illegal instructions.
    """
    if check_host:
        check_host_compatible(artifact)
    builder = llvm.JITLibraryBuilder()
    for obj in artifact.objects:  # (a module compiled in parts: one library of them all)
        builder.add_object_img(obj)
    # Resolve libc/libm symbols the optimizer may introduce (memset, memcpy,
    # expf, ...) and the C-API functions of Python entries against the
    # running process.
    builder.add_current_process()
    key_symbol = getattr(artifact, "key_symbol", "")
    for k in artifact.kernels:
        builder.export_symbol(k.symbol)
        if k.py_entry:
            builder.export_symbol(k.py_entry)
    if key_symbol:
        builder.export_symbol(key_symbol)
    with _lock:
        lljit = _get_lljit()
        name = f"shapejit_artifact_{next(_lib_counter)}"
        try:
            tracker = builder.link(lljit, name)
        except RuntimeError as e:
            raise LoadError(f"cannot link artifact object code: {e}") from e
    if key_symbol and not tracker[key_symbol]:
        raise LoadError(f"the object code does not carry its key's symbol {key_symbol!r}")
    return LoadedArtifact(artifact, tracker, lljit)

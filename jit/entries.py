"""What a JitFunction keeps per specialization key: a KeyState, holding the
key's compiled entries (each its guards and Executable, traced here or
loaded from another process's saved trace) or the reason the key runs
eagerly.  Plain state: jit/miss.py makes entries, JitFunction.__call__ runs
them, jit/explain.py describes them."""
from __future__ import annotations

from dataclasses import dataclass, field

from jit import persist
from jit.compile import Build
from jit.signature import Signature
from jit.trace import TraceResult
from runtime.executable import Executable
from shapes.guards import GuardSet


@dataclass
class CompiledEntry:
    """Guards and the Executable that serves every call whose shapes they accept."""
    guards: GuardSet
    run: object  # Executable.run
    out_treedef: object
    executable: Executable
    build: Build
    trace: TraceResult | None = None  # None for an entry another process saved
    saved: persist.SavedEntry | None = None  # set: loaded from the disk cache, not traced here
    last_dims: tuple | None = None  # memory figures are recomputed when the dims change
    bytes: int = 0
    _summary: persist.Summary | None = None
    state: list | None = None  # (attribute path, kind, output) the call assigns after it runs (jit/trace.py set_state)

    @property
    def eager_nodes(self) -> int:
        return len((self.trace if self.trace is not None else self.saved.summary).eager_nodes)

    @property
    def graph_breaks(self) -> int:
        return len((self.trace if self.trace is not None else self.saved.summary).breaks)

    def summary(self) -> persist.Summary:
        """What explain() and dynamic="auto" read of the trace and plan (a
        saved entry's comes from its record)."""
        if self.saved is not None:
            return self.saved.summary
        if self._summary is None:
            self._summary = persist.Summary.of(self.trace, self.build.describe_plan())
        return self._summary

    def account(self, dims, m) -> None:
        self.bytes, peak = self.executable.memory(*dims)
        self.last_dims = dims  # after bytes: a concurrent hit that sees these dims reads their bytes
        if peak > m.peak_bytes:
            m.peak_bytes = peak


@dataclass
class KeyState:
    """One specialization key: its entries, newest last, or why it runs eagerly."""
    entries: list[CompiledEntry] = field(default_factory=list)
    eager_reason: str | None = None  # set: this key runs eagerly
    dynamic_dims: frozenset = frozenset()  # dynamic="auto": dims seen to change
    signature: Signature | None = None
    saved: list | None = None  # saved entries of other processes not yet used (read on the first miss)
    saved_level: str | None = None  # the cache level they came from ("disk" | "remote")
    break_retraces: int = 0  # traces because a graph break decided otherwise
    numpy_raised: int = 0  # calls run in numpy for numpy's error in a compiled step (jit/eager.py after_failure)

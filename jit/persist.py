"""Saved traces: the entries one process traced and built, kept in the
compile cache so that a new process serves the same function without
tracing it, running the passes, generating code or touching sympy (the warm
start).

A saved entry is its guards, the output tree, the built executable as plain
data (runtime/executable.py PortableExecutable) with the cache key of its
object code, and a Summary of its trace and plan (what explain() and
dynamic="auto" read).  It is stored under a key made of the function's
fingerprint (its code and everything it may read, jit/fingerprint.py), the
call's specialization key, the jit options and shapejit's build id, so a
changed function, option or compiler is a miss.  A loaded entry serves only
shapes its guards accept, exactly like an entry traced in this process.

Records are plain data (runtime/plain.py: parsed, never unpickled), checked
by the cache (runtime/cache.py: a digest over key and payload, signed under
SHAPEJIT_CACHE_SECRET); a damaged one is counted, dropped and ignored.  An
entry holding a value with no plain form (an eager step calling a user's
function, say) is not saved, and explain() says why.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from jit.compile import SavedBuild
from jit.fingerprint import Unstable, function_fingerprint, stable_text
from jit.held import Path
from jit.optable import EagerCall
from jit.scan import ScanCall
from jit.trace import PrintCall
from jit.tracer import IntOfFloat, WarnCall
from runtime import plain
from runtime.cache import build_id, content_key
from runtime.executable import PortableExecutable
from shapes import config, forksafe
from shapes.guards import GuardSet, GuardState

FORMAT = "7"
MAX_SAVED = 32  # entries kept per (function, signature), as jit's default max_entries

_write_lock = forksafe.lock()


@dataclass(frozen=True)
class Summary:
    """What explain() and dynamic="auto" read of a trace and its plan, as
    plain data: the same for an entry traced here and one loaded."""
    dims: tuple = ()           # "s0 = x.shape[0]", ...
    eager_nodes: tuple = ()
    breaks: tuple = ()         # (location, description) of each graph break
    lift_refusals: tuple = ()
    graph: str = ""
    plan: str | None = None    # the clusters after the passes (None: the reference back end)
    specialized: tuple = ()    # (arg, axis, size) of the input dims traced as a number
    selects: tuple = ()        # ifs on traced values both of whose branches were traced (jit/lift.py)
    scans: tuple = ()          # loops compiled once for every trip count (jit/scan.py)
    checks: tuple = ()         # decisions on data-dependent sizes, checked where each is made

    @staticmethod
    def of(trace, plan: str | None) -> "Summary":
        """`plan`: the build's plan as text (jit.compile.Build.describe_plan)."""
        env = trace.env
        return Summary(
            tuple(f"{s} = {i.source}" for s, i in env.symbols.items() if s not in env.replacements),
            tuple(trace.eager_nodes), tuple((b.loc, b.describe()) for b in trace.breaks),
            tuple(trace.lift_refusals), repr(trace.graph), plan,
            tuple((d.arg, d.axis, int(d.symbol)) for d in trace.input_dims if getattr(d.symbol, "is_Integer", False)),
            tuple(trace.selects), tuple(trace.scans),
            tuple(f"{cond}    # {reason}" for cond, reason in trace.dd_checks))


@dataclass
class SavedEntry:
    guards: GuardState
    out_treedef: object
    build: SavedBuild
    summary: Summary
    held: tuple = ()      # paths of the held arrays it takes after the arguments (jit/held.py)
    held_key: tuple = ()  # their dtypes, shapes and layouts
    # the other values its trace read: (path, token), the token None for one compared by identity
    # (a function: the fingerprint in the record's key covers it)
    values: tuple = ()
    # the attributes the call assigns: (path, kind, output index) each (jit/trace.py set_state)
    state: tuple = ()

    @property
    def guarded(self) -> list:
        return [p for p, _ in self.values]

    @property
    def guard_set(self) -> GuardSet:
        """The guards, their functions compiled again from their text."""
        g = self.__dict__.get("_guard_set")
        if g is None:
            g = self.__dict__["_guard_set"] = GuardSet.restore(self.guards)
        return g


# the dataclasses a record may hold (runtime/plain.py builds nothing else)
_CLASSES = (SavedEntry, GuardState, SavedBuild, PortableExecutable, Summary, Path, EagerCall, ScanCall, PrintCall,
            WarnCall, IntOfFloat)


def enabled() -> bool:
    return config.get("SHAPEJIT_TRACE_CACHE")


def key_for(fingerprint: str, spec_key, options: str) -> str | None:
    """The record key of one specialization of a fingerprinted function;
    None when the specialization key has no process-independent form."""
    try:
        spec = stable_text(spec_key)
    except Unstable:
        return None
    return "trace-" + content_key("shapejit saved trace", FORMAT, build_id(), np.__version__,
                                  sys.version, fingerprint, spec, options)


class Unsaved(Exception):
    """A trace that another process could not trust."""


def entry_of(trace, guards: GuardSet, build, held_key: tuple, summary: Summary, fn) -> SavedEntry:
    """The saved form of an entry of the jit of `fn`, or Unsaved."""
    if trace.unguarded or trace.changed:  # (in another process those values may differ, unseen)
        raise Unsaved(f"it reads {', '.join(map(str, trace.unguarded + trace.changed))}, which no key holds")
    for call in scans_of(build.executable.portable):
        if call.site < 0 or call.fn is not fn:
            raise Unsaved(f"the scan of the loop at {call.where}: its body reads values of its frame, or it is "
                          "in a function the jit calls (another process could not make its body again)")
    values = tuple((p, _saved_token(p, t)) for p, t in trace.guarded.items())
    return SavedEntry(guards.state(), trace.out_treedef, SavedBuild.of(build), summary, tuple(trace.held),
                      held_key, values, tuple(tuple(s) for s in trace.state or ()))


def scans_of(p: PortableExecutable) -> list:
    """The scans (jit/scan.py ScanCall) an executable runs."""
    return [r[1] for r in p.consts.values() if r[0] == "value" and isinstance(r[1], ScanCall)]


def _saved_token(path: Path, t: tuple):
    """The token a saved entry holds for a value its trace read: a value's
    own; for an object compared by identity, None where the record's key
    covers it (a global or closure variable of the function: its
    fingerprint), else ("fp", its fingerprint) (a helper function stored on
    `self`), compared again when a new process loads the entry."""
    if t[0] != "is":
        return t
    if path.root[0] in ("global", "cell"):
        return None
    digest, why = function_fingerprint(t[1])
    if digest is None:
        raise Unsaved(f"{path}: {why}")
    return "fp", digest


def values_match(saved: tuple, now: tuple) -> bool:
    """Whether the values a saved entry's trace read (`saved`: (path, token))
    are those read now (`now`: their tokens, jit/held.py)."""
    for (_, t), n in zip(saved, now):
        if t is None:
            continue
        if t[0] == "fp":
            if not (isinstance(n, tuple) and n[0] == "is") or function_fingerprint(n[1])[0] != t[1]:
                return False
        elif t != n:
            return False
    return True


def load(cache, key: str) -> tuple[list[SavedEntry], str | None]:
    """(the saved entries under `key`, the cache level they came from)."""
    blob, level = cache.get(key, memory=False)  # from disk (or the fleet's tier): other processes append to it
    if blob is None:
        return [], None
    try:
        entries = plain.loads(blob, _CLASSES)  # (the record's digest, over its key too, was checked by cache.get)
        if not (isinstance(entries, list) and all(isinstance(e, SavedEntry) for e in entries)):
            raise plain.Undecodable("not a list of saved entries")
        for e in entries:
            e.guard_set  # noqa: B018 - compiled here: a guard that does not compile is a damaged record
        return entries, level
    except Exception:  # noqa: BLE001 - damaged or from another format (a guard that does not compile): a miss
        cache.reject(key)
        return [], None


def save(cache, key: str, make_entry, function: str, signature: str) -> str | None:
    """Append the entry `make_entry()` returns to the record; returns why it
    could not be saved (a value with no plain form, runtime/plain.py)."""
    try:
        entry = make_entry()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    with _write_lock:  # read-modify-write; other processes may race, the last write wins
        entries = load(cache, key)[0][-(MAX_SAVED - 1):]
        try:
            blob = plain.dumps(entries + [entry], _CLASSES)
        except plain.Unencodable as e:
            return f"{type(e).__name__}: {e}"
        cache.put(key, blob, function, signature, kind="trace", memory=False)
    return None

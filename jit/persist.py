"""Saved traces: the entries one process traced and built, kept in the
compile cache so that a new process serves the same function without
tracing it, running the passes, generating code or touching sympy (the warm
start).

A saved entry is its guards, the output tree, the built executable as plain
data (runtime/executable.py PortableExecutable) with the cache key of its
object code, and, pickled apart and read only by explain() and
dynamic="auto", the trace and the plan.  It is stored under a key made of
the function's fingerprint (its code and everything it may read,
jit/fingerprint.py), the call's specialization key, the jit options and
shapejit's build id, so a changed function, option or compiler is a miss.
A loaded entry serves only shapes its guards accept, exactly like an entry
traced in this process.  Records are checked by the cache (runtime/cache.py); a damaged one is
counted, dropped and ignored.
"""
from __future__ import annotations

import dataclasses
import pickle
import sys
import threading
from dataclasses import dataclass

import numpy as np

from jit.compile import SavedBuild
from jit.fingerprint import Unstable, stable_text
from runtime.cache import CorruptEntry, build_id, content_key
from shapes import config
from shapes.guards import GuardSet

FORMAT = "4"
MAX_SAVED = 32  # entries kept per (function, signature), as jit's default max_entries

_write_lock = threading.Lock()


@dataclass
class SavedEntry:
    guards: GuardSet
    out_treedef: object
    build: SavedBuild
    details: bytes  # pickle of (TraceResult without its result, Plan)
    held: tuple = ()      # paths of the held arrays it takes after the arguments (jit/held.py)
    held_key: tuple = ()  # their dtypes, shapes and layouts
    eager_nodes: int = 0  # how many eager nodes its trace has (stats() reads it without the details)
    # the other values its trace read: (path, token), the token None for one compared by identity
    # (a function: the fingerprint in the record's key covers it)
    values: tuple = ()

    @property
    def guarded(self) -> list:
        return [p for p, _ in self.values]


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


def entry_of(trace, guards: GuardSet, build, held_key: tuple) -> SavedEntry:
    details = pickle.dumps((dataclasses.replace(trace, concrete=None, writes=[]), build.plan),
                           protocol=pickle.HIGHEST_PROTOCOL)
    values = tuple((p, None if t[0] == "is" else t) for p, t in trace.guarded.items())
    return SavedEntry(guards, trace.out_treedef, SavedBuild.of(build), details, tuple(trace.held), held_key,
                      len(trace.eager_nodes), values)


def details(entry: SavedEntry):
    """(TraceResult, Plan) of a saved entry."""
    return pickle.loads(entry.details)


def load(cache, key: str) -> list[SavedEntry]:
    blob, _ = cache.get(key, memory=False)  # from disk: other processes append to it
    if blob is None:
        return []
    try:
        entries = pickle.loads(blob)  # (the record's digest, over its key too, was checked by cache.get)
        if not (isinstance(entries, list) and all(isinstance(e, SavedEntry) for e in entries)):
            raise CorruptEntry("not a list of saved entries")
        return entries
    except Exception:  # noqa: BLE001 - damaged, foreign or from a changed class: a miss
        cache.reject(key)
        return []


def save(cache, key: str, make_entry, function: str, signature: str) -> str | None:
    """Append the entry `make_entry()` returns to the record; returns why it
    could not be saved (an eager step calling a lambda cannot be pickled)."""
    try:
        entry = make_entry()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"
    with _write_lock:  # read-modify-write; other processes may race, the last write wins
        entries = load(cache, key)[-(MAX_SAVED - 1):]
        try:
            blob = pickle.dumps(entries + [entry], protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001
            return f"{type(e).__name__}: {e}"
        cache.put(key, blob, function, signature, kind="trace", memory=False)
    return None

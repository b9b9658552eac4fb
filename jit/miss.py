"""A call no entry served (the miss path of JitFunction.__call__), under
the function's lock.  In: the call as the hot path bound and keyed it; out:
its result, and the function grown by an entry that serves it (or its key
marked eager, with the reason in its log and metrics).

In order: the full key (an int argument that changed becomes a symbol); an
entry another thread added meanwhile; the reason this call traces again;
the entry limit; a saved trace of another process; else trace, build,
count the recompile, give the call numpy's effects on its arguments, and
save the trace for other processes."""
from __future__ import annotations

import time

import numpy as np

from jit import lift, pytree, scan
from jit.compile import build
from jit.eager import after_failure, call_python, count_fallback, mark_eager, run_eagerly, run_eagerly_from_now, \
    run_eagerly_once
from jit.entries import CompiledEntry, KeyState
from jit.errors import warn
from jit.keys import changed_ints, changed_lists, changed_values, full_key, held_numbers_to_inputs, note_values, \
    rekey
from jit.saved_traces import load_entry, record_key, save_entry
from jit.signature import IntDim, Signature, classify_call, with_data_lists
from jit.trace import DeclarationError, TraceResult, set_state, trace
from jit.tracer import ArrayOfTraced, DataArg, Fallback, SelectAliasWritten, StackedUse, SymFloat, SymInt, \
    TooManyDecisions, Tracer
from runtime.runeagerly import BreakMismatch, RowsOfOtherLengths, RunEagerly
from runtime.metrics import logger_for
from shapes.guards import GuardSet
from shapes.verify import verify

_now = time.perf_counter

MAX_BREAK_RETRACES = 8  # past it, a signature whose Python decisions keep changing runs eagerly

_UNSERVED = object()  # (no entry of the key served the call)


_TRACED = (Tracer, SymInt, SymFloat)


def serve_miss(jf, key, bound, leaves, treedef, arrays, runtime):
    """The result of a call no entry served: `key` and `runtime` as
    classify_call made them, without the held arrays' part."""
    if any(type(x) in _TRACED for x in leaves):  # (called by a function another jit traces: traced inline)
        return call_python(jf, bound)
    with jf._lock:
        return _Miss(jf, key, bound, leaves, treedef, arrays, runtime).serve()


class _Miss:
    """One call on the miss path, and what its steps learn of it."""

    def __init__(self, jf, key, bound, leaves, treedef, arrays, runtime):
        self.jf, self.bound, self.leaves, self.treedef = jf, bound, leaves, treedef
        self.key, self.arrays, self.base_runtime = key, arrays, runtime
        self.full = self.state = self.runtime = self.shapes = self.sig = None
        self.broke: CompiledEntry | None = None  # an entry whose graph break decided otherwise
        self.joined: RowsOfOtherLengths | None = None  # (or whose scan met rows of other lengths)

    def serve(self):
        jf, bound = self.jf, self.bound
        state = self._key()
        if state.eager_reason is not None:
            return run_eagerly(jf, bound)
        self.shapes = tuple([a.shape for a in self.arrays])
        out = self._run_entries()
        if out is not _UNSERVED:
            return out
        jf.metrics.entry_misses += 1
        sig = self.sig = state.signature = Signature.of(self.leaves, self.key, jf._params.leaf_paths(self.treedef),
                                                        jf.dynamic)
        if sig.unsupported or jf._generator:
            return run_eagerly_from_now(jf, state, "unsupported_input", sig.unsupported or "a generator (or "
                                        "coroutine) function: its values are made after the call returns", bound)
        reason, category = self._note_retrace()
        if self.broke is not None and state.break_retraces > MAX_BREAK_RETRACES:
            sites = _break_sites(self.broke)
            return run_eagerly_from_now(jf, state, "graph_break_outcomes",
                                        f"data-dependent Python decisions{' at ' + sites if sites else ''} "
                                        f"took more than {MAX_BREAK_RETRACES + 1} different outcomes", bound)
        if jf.max_entries is not None and jf._n_entries >= jf.max_entries:
            return self._past_entry_limit(reason)
        record = record_key(jf, self.key)
        found = None if record is None else load_entry(jf, state, record, self.shapes, self.leaves)
        if found is not None:
            try:
                return self._run_saved(*found)
            except BreakMismatch:  # saved for another outcome of a graph break: trace this one
                reason, category = "a saved trace's graph break decided otherwise", "graph_break"
        failure = None
        try:
            tr = self._trace()
        except Fallback as f:
            if isinstance(f, StackedUse) and isinstance(f.site, DataArg):
                return self._as_a_list(f)
            return run_eagerly_from_now(jf, self.state, "data_dependent",
                                        f"{f.reason} (at {f.loc})" if f.loc else f.reason, bound)
        except DeclarationError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's error, or shapejit's: numpy tells which
            failure = e
        if failure is not None:  # (outside the handler: numpy's own exception is not chained to it)
            return after_failure(jf, self.state, failure, bound)
        return self._build_and_run(tr, record, reason, category)

    def _key(self) -> KeyState:
        """The full key, its state and the runtime inputs.  An int argument
        whose value differs from an earlier call's of the same structure
        becomes a symbol (automatic dynamic): the call is keyed again."""
        jf = self.jf
        lists = changed_lists(jf, self.bound) if self.key not in jf._keys else frozenset()
        if lists:
            jf._data_args |= lists
            self._reflatten()
            jf._list_note = (f"list argument {', '.join(jf._params.names[k] for k in sorted(lists))} changed "
                             f"length: now data (an array of a symbolic length)")
        full, held, ints = full_key(jf, self.key, self.leaves)
        changed = changed_ints(jf, full) if full not in jf._keys else frozenset()
        if changed:
            jf._dyn_ints |= changed
            self.key, self.arrays, self.base_runtime = classify_call(self.leaves, self.treedef, jf.dynamic,
                                                                     jf._dyn_ints)
            full, held, ints = full_key(jf, self.key, self.leaves)
            paths = jf._params.leaf_paths(self.treedef)
            jf._int_changes = "int argument " + ", ".join(paths[k] for k in sorted(changed)) + " changed: now a symbol"
        numbers = held_numbers_to_inputs(jf, self.leaves) if full not in jf._keys and jf._value_paths else []
        if numbers:
            full, held, ints = full_key(jf, self.key, self.leaves)
            jf._int_changes = "; ".join(f"int {p} changed: now a symbol" if p in jf._held_ints else
                                        f"float {p} changed: now a runtime scalar" for p in numbers)
        self.arrays = self.arrays + [IntDim(v) for (v,) in ints]  # (the held ints that are symbols)
        self.full, self.runtime = full, self.base_runtime + held
        self.state = jf._keys.setdefault(full, KeyState())
        return self.state

    def _as_a_list(self, use: StackedUse):
        """The call served again after its trace used a list it took as data
        as only a list can be used: from now on that argument is keyed as
        the list it is (a trace per length)."""
        jf, k = self.jf, use.site.k
        jf._data_args -= {k}
        jf._not_data.add(k)
        jf._list_note = f"list argument {jf._params.names[k]} used as a list: {use.reason} (at {use.loc})"
        if not self.state.entries:
            jf._keys.pop(self.full, None)
        self._reflatten()
        return self.serve()

    def _reflatten(self) -> None:
        """The call's leaves and key again, its lists of numbers that are
        data (jf._data_args) as NumberList leaves."""
        jf = self.jf
        self.leaves = []
        self.treedef = pytree.flatten(with_data_lists(self.bound, jf._data_args), self.leaves)
        self.key, self.arrays, self.base_runtime = classify_call(self.leaves, self.treedef, jf.dynamic, jf._dyn_ints)

    def _held(self) -> list:
        """The held arrays of the call (the runtime inputs after the arguments')."""
        return self.runtime[len(self.base_runtime):]

    def _run_entries(self):
        """The result from an entry another thread added while this one
        waited for the lock, or _UNSERVED."""
        for e in self.state.entries:
            dims = e.guards.check(self.shapes)
            if dims is not None:
                try:
                    out = self._run(e, dims)
                except BreakMismatch as err:
                    self.broke, self.joined = e, err if isinstance(err, RowsOfOtherLengths) else None
                    continue
                m = self.jf.metrics
                m.slow_calls += 1
                m.slow_entry_hits += 1
                return out
        return _UNSERVED

    def _run(self, e: CompiledEntry, dims):
        """A slow-path call of an entry (the hot path in JitFunction.__call__
        inlines this); raises BreakMismatch when a graph break decides otherwise."""
        try:
            out = e.run(self.runtime, dims)
        except BreakMismatch:
            raise
        except RunEagerly as err:
            return run_eagerly_once(self.jf, err, self.bound)
        except Exception as err:  # noqa: BLE001 - the compiled code failed: numpy decides whose fault
            if e.graph_breaks:  # (a step that may raise -- a gather's bounds check, `np.eye(labels.max() + 1)[labels]`
                # -- may run before a graph break's check, the passes having fused what the break decides on into a
                # later kernel: the call traced again, on its values; a failure of the entry that trace makes is
                # after_failure's)
                raise BreakMismatch() from err
            return after_failure(self.jf, self.state, err, self.bound, "running the compiled code")
        if e.state:
            set_state(self.jf.fn, e.state, out, self.leaves)
        return pytree.unflatten(e.out_treedef, iter(out))

    def _note_retrace(self) -> tuple[str | None, str]:
        """(why this call traces again, the recompile's category); notes a
        graph break's outcome and, with dynamic="auto", the dims that changed."""
        jf, state = self.jf, self.state
        reason, category = None, "signature"
        changed = changed_values(jf, self.leaves)
        if changed:
            reason, category = f"{', '.join(changed)} changed (read by the trace)", "value_changed"
        if jf._int_changes:
            reason, category = jf._int_changes, "auto_dynamic"
            jf._int_changes = None
        if jf._list_note:
            reason, category = jf._list_note, "auto_dynamic"
            jf._list_note = None
        if self.broke is not None:
            state.break_retraces += 1
            if self.joined is not None and self.broke in state.entries:  # (its scan stacks rows that are not of one
                state.entries.remove(self.broke)  # length: it serves no call again, the trace made now joins them)
                jf._n_entries -= 1
            sites = _break_sites(self.broke)
            reason = str(self.joined) if self.joined is not None else \
                f"a graph break at {sites} decided otherwise" if sites else \
                "a decision on a data-dependent size (a traced index's sign or bound, an eager op's size) went " \
                "otherwise"
            category = "graph_break"
        elif state.entries:
            reason = "; ".join(filter(None, (e.guards.failure(self.shapes) for e in state.entries[-1:])))
            category = "guard"
            if jf.dynamic == "auto":
                state.dynamic_dims = state.dynamic_dims | _changed_dims(state.entries[-1], self.shapes)
                category = "auto_dynamic"
        return reason, category

    def _past_entry_limit(self, reason: str | None):
        jf = self.jf
        if not self.state.entries and self.state.eager_reason is None:
            jf._keys.pop(self.full, None)  # (kept, a new static value per call grew the keys, and every miss's scan)
        if not jf._warned_limit:
            jf._warned_limit = True
            warn(f"shapejit: {jf.__qualname__} reached max_entries={jf.max_entries}; calls that need a new entry "
                 "(a new shape or value) run eagerly")
        count_fallback(jf, "max_entries", f"max_entries={jf.max_entries} reached ({reason})")
        return run_eagerly(jf, self.bound)

    def _rekey(self, paths, values) -> None:
        self.state, self.full, self.runtime = rekey(self.jf, self.state, self.full, self.key, self.leaves,
                                                    self.base_runtime, paths, values)

    def _add(self, entry: CompiledEntry) -> None:
        self.state.entries.append(entry)
        self.jf._n_entries += 1
        self.jf.metrics.slow_calls += 1

    def _run_saved(self, entry: CompiledEntry, dims):
        """Add an entry loaded from a saved trace and run the call on it;
        raises BreakMismatch when its graph break decides otherwise."""
        self._rekey(entry.saved.held, entry.saved.guarded)
        self._add(entry)
        return self._run(entry, dims)

    def _trace(self) -> TraceResult:
        jf, m = self.jf, self.jf.metrics
        t0 = _now()

        def traced():
            return trace(jf.fn, self.treedef, self.leaves, self.sig.specs, dynamic=jf.dynamic,
                         dynamic_dims=self.state.dynamic_dims, user_dims=jf.dims or None,
                         constraints=jf.constraints, rebind=jf._params.unbind, held=(jf._held_paths, self._held()),
                         held_ints=jf._held_ints, held_floats=jf._held_floats,
                         scan_jit=jf._scan_jit, loops=jf._loops, trace_consts=jf._trace_consts)
        while True:  # (each retry turns one switch for good: at most three traces)
            try:
                tr = traced()
                break
            except SelectAliasWritten:  # (numpy's aliasing one way: this function's ifs stay graph breaks)
                if not lift.selects_off(jf.fn):
                    raise
            except ArrayOfTraced:  # (numpy took a traced array as data: its constants' arrays traced too)
                if jf._trace_consts:
                    raise
                jf._trace_consts = True
            except TooManyDecisions:  # (a loop unrolled for its count decided every trip: a scan decides per body)
                if not scan.scan_unrolled(jf._loops):
                    raise
            except StackedUse as e:  # (a list a scan appended to, used as only a list can be: appended as written)
                if isinstance(e.site, DataArg) or not scan.unstack(jf._loops, e.site):
                    raise
        verify(tr.graph)
        m.compile_seconds["trace"].observe(_now() - t0)
        m.traces += 1
        m.graph_breaks += len(tr.breaks)
        return tr

    def _build_and_run(self, tr: TraceResult, record: str | None, reason: str | None, category: str):
        """Build the trace's entry and add it; the call's result is the
        trace's own (computed while tracing)."""
        jf = self.jf
        if tr.counters:  # (its traced run changed them once, as numpy's call does: its result is numpy's)
            mark_eager(jf, self.state, "python_state", f"changes {', '.join(tr.counters)}, which it reads (a "
                       "compiled call would neither change it nor see it change: numpy runs it)")
            tr.apply_writes()
            set_state(jf.fn, tr.state, None, self.leaves, tr.state_values)
            return tr.concrete
        self._rekey(tr.held, tr.guarded)
        note_values(jf, tr, self.leaves)
        try:
            entry = build_entry(jf, tr, self.runtime, self.sig.describe())
        except Exception as e:  # noqa: BLE001 - an internal error never reaches the user
            mark_eager(jf, self.state, "internal_error", f"building the executable failed: {type(e).__name__}: {e}")
            tr.apply_writes()
            return tr.concrete
        self._count_recompile(reason, category)
        self._add(entry)
        held = self._held()  # (all of them: the trace may have found more)
        if tr.writes and _aliasing([a for a in self.arrays if isinstance(a, np.ndarray)] + held):
            count_fallback(jf, "aliased_arguments", "(one call) an argument the function writes into "
                                                    "shares memory with another")
            result = run_eagerly(jf, self.bound)
        else:
            tr.apply_writes()
            result = tr.concrete
            set_state(jf.fn, tr.state, None, self.leaves, tr.state_values)
        save_entry(jf, record, tr, entry, held, self.sig)
        return result

    def _count_recompile(self, reason: str | None, category: str) -> None:
        """A new entry when the function has one already is a recompile."""
        jf, m = self.jf, self.jf.metrics
        if self.state.entries or any(s.entries for s in jf._keys.values() if s is not self.state):
            m.recompiles[category] += 1
            text = f"recompile #{sum(m.recompiles.values())}: {reason or 'new signature ' + self.sig.describe()}"
            jf.log.append(text)
            lg = logger_for("recompiles")
            if lg:
                lg.info("%s: %s", jf.__qualname__, text)


def build_entry(jf, tr: TraceResult, runtime, sig: str) -> CompiledEntry:
    """The entry of a trace: its guards and the Executable compile.build
    makes (on the reference back end when compiling fails)."""
    m = jf.metrics
    guards = GuardSet(tr.env, tr.input_dims)
    contiguous = [isinstance(x, np.ndarray) and x.flags.c_contiguous for x in runtime]
    try:
        b = build(tr, guards.symbols, jf.backend, contiguous, jf.__qualname__, sig)
    except Exception as e:  # noqa: BLE001 - a compiler bug must not break the user's call
        count_fallback(jf, "compile_failed", f"compile failed, running the reference back end: "
                                             f"{type(e).__name__}: {e}")
        warn(f"shapejit: compiling {jf.__qualname__} failed ({type(e).__name__}: {e}); "
             f"running it on the reference back end")
        b = build(tr, guards.symbols, "reference", contiguous, jf.__qualname__)
    for stage, sec in b.seconds.items():
        m.compile_seconds[stage].observe(sec)
    if b.cache_level is not None:
        m.cache_hits[b.cache_level, "object"] += 1
    else:
        m.compiles += 1
        if b.artifact_key is not None:  # object code was looked up and compiled
            m.cache_misses += 1
    lg = logger_for("compile")
    if lg:
        lg.info("%s: built %s (%s) in %s", jf.__qualname__, sig,
                f"cache hit: {b.cache_level}" if b.cache_level else "compiled",
                ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in b.seconds.items()))
    b.executable.pool.budget = jf.pool_bytes
    return CompiledEntry(guards, b.executable.run, tr.out_treedef, b.executable, b, trace=tr, state=tr.state or None)


def _break_sites(entry: CompiledEntry) -> str:
    """file:line of each graph break of an entry."""
    return ", ".join(loc for loc, _ in entry.summary().breaks)


def _changed_dims(entry: CompiledEntry, shapes) -> frozenset:
    return frozenset((arg, axis) for arg, axis, size in entry.summary().specialized if shapes[arg][axis] != size)


def _aliasing(arrays) -> bool:
    return any(np.may_share_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])

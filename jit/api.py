"""The public API: `jit`, JitFunction (keys, entries, guards, recompiles,
fallback), `explain()` and `stats()`."""
from __future__ import annotations

import functools
import inspect
import time
import types
import warnings
from dataclasses import dataclass, field

import numpy as np

from jit import persist, pytree
from jit.compile import BACKENDS, Build, build, build_saved, calibrating, gemm_dispatch, plan_switches
from jit.declare import check_constraints, check_dims, dim_names
from jit.errors import JitWarning
from jit.fingerprint import Unstable, function_fingerprint, stable_text
from jit.held import MAX_ITEMS, ValueKeys, fetch_all, key_of
from jit.signature import Signature, classify_call
from jit.trace import DeclarationError, TraceResult, trace
from jit.tracer import Fallback
from runtime.cache import default_cache
from runtime.dispatch import describe as describe_tree
from runtime.executable import Executable
from runtime.runeagerly import BreakMismatch, RunEagerly
from shapes import forksafe
from shapes.config import parse_size
from shapes.guards import GuardSet
from shapes.verify import verify
from runtime.metrics import FunctionMetrics, logger_for

_now = time.perf_counter


MAX_BREAK_RETRACES = 8  # past it, a signature whose Python decisions keep changing runs eagerly


# how a product ran (runtime/executable.py Executable.products)
_VARIANT = {True: "numpy's matmul (BLAS)", False: "the GEMM kernel", None: "both, measured (its class's first call)"}


@dataclass
class Entry:
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

    @property
    def eager_nodes(self) -> int:
        return len((self.trace if self.trace is not None else self.saved.summary).eager_nodes)

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
    entries: list[Entry] = field(default_factory=list)
    eager_reason: str | None = None  # set: this key runs eagerly
    dynamic_dims: frozenset = frozenset()  # dynamic="auto": dims seen to change
    signature: Signature | None = None
    saved: list | None = None  # saved entries of other processes not yet used (read on the first miss)
    saved_level: str | None = None  # the cache level they came from ("disk" | "remote")
    break_retraces: int = 0  # traces because a graph break decided otherwise


class JitFunction:
    def __init__(self, fn, *, dynamic=True, dims=None, constraints=(), static_argnames=(),
                 max_entries=32, backend="llvm", name=None, pool_bytes=None):
        if dynamic not in (True, False, "auto"):
            raise ValueError(f"dynamic must be True, False or 'auto', not {dynamic!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
        if isinstance(fn, (np.ufunc, types.BuiltinFunctionType)) or not _has_signature(fn):
            fn = _as_function(fn)  # a ufunc or builtin: its signature's defaults are not passable
        self.fn = fn
        self.dynamic = dynamic
        self.static_argnames = frozenset((static_argnames,) if isinstance(static_argnames, str)
                                         else static_argnames)
        self.max_entries = max_entries
        try:  # the bytes of pooled intermediates this function's executables keep between calls
            self.pool_bytes = None if pool_bytes is None else parse_size(pool_bytes)
        except ValueError as e:
            raise ValueError(f"pool_bytes={pool_bytes!r}: {e}") from None
        self.backend = backend
        self.__name__ = getattr(fn, "__name__", "jitted")
        self.__qualname__ = name or getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self._sig = inspect.signature(fn)
        params = list(self._sig.parameters.values())
        self._simple = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) \
            and not self.static_argnames
        self._n_params = len(params)
        # the trailing defaults a positional call may leave out (the fast path binds them itself)
        self._defaults = tuple(p.default for p in params if p.default is not p.empty) if self._simple else ()
        if any(p.default is p.empty for p in params[self._n_params - len(self._defaults):]):
            self._defaults = ()
        self._param_names = [p.name for p in params]
        # a generator's (or coroutine's) values are made after the call returns: it runs in numpy
        self._generator = inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn) \
            or inspect.iscoroutinefunction(fn)
        self.dims = check_dims(dims, self._param_names, self.__name__)
        self.constraints = check_constraints(constraints, dim_names(self.dims))
        self._keys: dict = {}
        self._lock = forksafe.rlock()
        self._n_entries = 0
        self._warned_limit = False
        self.log: list[str] = []  # recompile and fallback reasons, in order
        self.metrics = FunctionMetrics(self.__qualname__)
        self._saving: str | None = None  # why traces are not saved, when they are not
        self._dyn_ints: frozenset = frozenset()  # leaf indices of int arguments that are symbols
        self._held_paths: list = []  # where the arrays the program holds are (jit/held.py)
        self._value_paths: list = []  # where the other values traces read are: their tokens are keyed
        self._values = ValueKeys((), fn)  # reads them
        self._last_values: dict = {}  # path -> the token its value had at the last trace
        self._unguarded: list = []  # values traces read that no token describes (warned once)
        self._changed: list = []  # values a traced run changed itself (not keyed)
        self._int_changes: str | None = None

    # ----------------------------------------------------------------- call
    def __call__(self, *args, **kwargs):
        t0 = _now()
        if self._simple and not kwargs and len(args) == self._n_params:
            bound = args
        elif self._defaults and not kwargs and self._n_params - len(self._defaults) <= len(args) < self._n_params:
            bound = args + self._defaults[len(args) - self._n_params:]
        else:
            bound = self._bind(args, kwargs)
        leaves: list = []
        treedef = pytree.flatten(bound, leaves)
        key, arrays, runtime = classify_call(leaves, treedef, self.dynamic, self._dyn_ints)
        full, run_inputs = key, runtime
        if self._held_paths or self._value_paths:  # what the program holds: fetched again at every call
            full, held = self._extend(key, leaves)
            run_inputs = None if held is None else runtime + held
        state = self._keys.get(full)
        if state is not None and state.eager_reason is None:
            shapes = tuple([a.shape for a in arrays])
            for e in state.entries:
                dims = e.guards.check(shapes)
                if dims is not None:
                    try:
                        out = e.run(run_inputs, dims)
                    except BreakMismatch:
                        continue  # a graph break decided otherwise: another entry (or a trace) serves it
                    except RunEagerly as err:
                        return self._run_eagerly_once(err, bound)
                    except Exception as err:  # noqa: BLE001 - the compiled code failed: numpy decides whose fault
                        return self._failed(state, err, bound, "running the compiled code")
                    m = self.metrics
                    if dims != e.last_dims:
                        e.account(dims, m)
                    m.bytes_allocated += e.bytes
                    m.latency.observe(_now() - t0)
                    return pytree.unflatten(e.out_treedef, iter(out))
        return self._miss(key, bound, leaves, treedef, arrays, runtime)

    def _bind(self, args, kwargs) -> tuple:
        try:
            ba = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}(): {e}") from None
        ba.apply_defaults()
        out = []
        for name, p in self._sig.parameters.items():
            v = ba.arguments[name]
            if p.kind == p.VAR_POSITIONAL:
                out.append(tuple(v))
            elif p.kind == p.VAR_KEYWORD:
                out.append(dict(v))
            elif name in self.static_argnames:
                out.append(_Static(v))
            else:
                out.append(v)
        return tuple(out)

    def _unbind(self, bound) -> tuple[tuple, dict]:
        """The bound tuple back to the user's (args, kwargs)."""
        if self._simple:
            return tuple(bound), {}
        args, kwargs = [], {}
        for (name, p), v in zip(self._sig.parameters.items(), bound):
            v = v.value if isinstance(v, _Static) else v
            if p.kind == p.VAR_POSITIONAL:
                args.extend(v)
            elif p.kind == p.VAR_KEYWORD:
                kwargs.update(v)
            elif p.kind == p.KEYWORD_ONLY:
                kwargs[name] = v
            else:
                args.append(v)
        return tuple(args), kwargs

    # ------------------------------------------------------------- slow path
    def _extend(self, key, leaves):
        """(key with the held arrays' part and the tokens of the values
        traces read, the held arrays), or (None, None) when a held path no
        longer reaches an array."""
        if not self._held_paths:
            return key + (self._values.tokens(leaves),), []
        held = fetch_all(self._held_paths, self.fn, leaves)
        if held is None:
            return None, None
        return key + (key_of(held), self._values.tokens(leaves)), held

    def _held(self, key, leaves):
        """(the full key, the held arrays) for this call; a path that no
        longer reaches an array is dropped (traces find them)."""
        if not (self._held_paths or self._value_paths):
            return key, []
        full, held = self._extend(key, leaves)
        if full is None:
            self._held_paths = []
            full, held = self._extend(key, leaves)
        return full, held

    def _rekey(self, state: KeyState, full, key, leaves, base_runtime, paths, values=()):
        """After a trace (or a saved entry) reached more held arrays, or
        read more values, than were known: key them too.  -> (state, full
        key, runtime inputs)."""
        new_values = [p for p in values if p not in self._value_paths]
        if len(paths) <= len(self._held_paths) and not new_values:
            return state, full, base_runtime + self._held(key, leaves)[1]
        if len(paths) > len(self._held_paths):
            self._held_paths = list(paths)
        self._value_paths = self._value_paths + new_values
        self._values = ValueKeys(self._value_paths, self.fn)
        if not state.entries:
            del self._keys[full]
        full, held = self._held(key, leaves)
        new = self._keys.setdefault(full, state)
        new.signature = state.signature
        return new, full, base_runtime + held

    def _note_values(self, tr: TraceResult, leaves) -> None:
        """Remember the values the traces read (a later change names them
        as the reason of the retrace); warn once of those no token describes."""
        self._last_values = dict(zip(self._value_paths, self._values.tokens(leaves)))
        self._changed += [p for p in tr.changed if p not in self._changed]
        new = [p for p in tr.unguarded if p not in self._unguarded]
        if new:
            self._unguarded += new
            warnings.warn(f"shapejit: {self.__name__} reads {', '.join(new)}, which it cannot key on (an object "
                          f"of a library's class, or a container of more than {MAX_ITEMS} values or of "
                          f"objects): a change to it after this trace is not seen", JitWarning, stacklevel=4)

    def _miss(self, key, bound, leaves, treedef, arrays, runtime):
        """`key` and `runtime` without the held arrays' part."""
        with self._lock:
            m = self.metrics
            full, held = self._held(key, leaves)
            changed = self._changed_ints(full) if full not in self._keys else frozenset()
            if changed:  # automatic dynamic: an int that changed becomes a symbol
                self._dyn_ints |= changed
                key, arrays, runtime = classify_call(leaves, treedef, self.dynamic, self._dyn_ints)
                full, held = self._held(key, leaves)
                paths = self._leaf_paths(treedef)
                self._int_changes = ", ".join(paths[k] for k in sorted(changed))
            base_runtime, runtime = runtime, runtime + held
            state = self._keys.setdefault(full, KeyState())
            if state.eager_reason is not None:
                return self._call_eager(bound)
            shapes = tuple([a.shape for a in arrays])
            broke = None
            for e in state.entries:  # another thread traced it while this one waited
                dims = e.guards.check(shapes)
                if dims is not None:
                    try:
                        out = self._run_entry(state, e, runtime, dims, bound)
                    except BreakMismatch:
                        broke = e
                        continue
                    m.slow_calls += 1
                    m.slow_hits["memory"] += 1
                    return out
            m.misses["memory"] += 1
            sig = Signature.of(leaves, key, self._leaf_paths(treedef), self.dynamic)
            state.signature = sig
            if sig.unsupported or self._generator:
                return self._fall_back(state, "unsupported_input", sig.unsupported or "a generator (or coroutine) "
                                       "function: its values are made after the call returns", bound)
            reason, category = None, "signature"
            changed = [str(p) for p, t in zip(self._value_paths, self._values.tokens(leaves))
                       if self._last_values.get(p, t) != t]
            if changed:
                reason, category = f"{', '.join(changed)} changed (read by the trace)", "value_changed"
            if self._int_changes:
                reason, category = f"int argument {self._int_changes} changed: now a symbol", "auto_dynamic"
                self._int_changes = None
            if broke is not None:
                state.break_retraces += 1
                where = ", ".join(loc for loc, _ in broke.summary().breaks)
                if state.break_retraces > MAX_BREAK_RETRACES:
                    return self._fall_back(state, "graph_break_outcomes",
                                           f"data-dependent Python decisions at {where} took more than "
                                           f"{MAX_BREAK_RETRACES + 1} different outcomes", bound)
                reason, category = f"a graph break at {where} decided otherwise", "graph_break"
            elif state.entries:
                reason = "; ".join(filter(None, (e.guards.failure(shapes) for e in state.entries[-1:])))
                category = "guard"
                if self.dynamic == "auto":
                    state.dynamic_dims = state.dynamic_dims | _changed_dims(state.entries[-1], shapes)
                    category = "auto_dynamic"
            if self.max_entries is not None and self._n_entries >= self.max_entries:
                if not self._warned_limit:
                    self._warned_limit = True
                    warnings.warn(f"shapejit: {self.__name__} reached max_entries={self.max_entries}; "
                                  f"new shapes run eagerly", JitWarning, stacklevel=3)
                self._count_fallback("max_entries", f"max_entries={self.max_entries} reached ({reason})")
                return self._call_eager(bound)
            pkey = self._saved_key(key)
            if pkey is not None:
                found = self._load_saved(state, pkey, shapes, leaves)
                if found is not None:
                    entry, dims = found
                    state, full, runtime = self._rekey(state, full, key, leaves, base_runtime, entry.saved.held,
                                                       entry.saved.guarded)
                    state.entries.append(entry)
                    self._n_entries += 1
                    m.slow_calls += 1
                    try:
                        return self._run_entry(state, entry, runtime, dims, bound)
                    except BreakMismatch:  # saved for another outcome of a graph break: trace this one
                        reason, category = "a saved trace's graph break decided otherwise", "graph_break"
                        held = runtime[len(base_runtime):]
            t0 = _now()
            failure = None
            try:
                tr = trace(self.fn, treedef, leaves, sig.specs, dynamic=self.dynamic,
                           dynamic_dims=state.dynamic_dims, user_dims=self.dims or None,
                           constraints=self.constraints, rebind=self._unbind_static,
                           held=(self._held_paths, held))
                verify(tr.graph)
            except Fallback as f:
                return self._fall_back(state, "data_dependent",
                                       f"{f.reason} (at {f.loc})" if f.loc else f.reason, bound)
            except DeclarationError:
                raise
            except Exception as e:  # noqa: BLE001 - the user's error, or shapejit's: numpy tells which
                failure = e
            if failure is not None:
                return self._failed(state, failure, bound)
            m.compile_seconds["trace"].observe(_now() - t0)
            m.traces += 1
            m.graph_breaks += len(tr.breaks)
            state, full, runtime = self._rekey(state, full, key, leaves, base_runtime, tr.held, tr.guarded)
            self._note_values(tr, leaves)
            try:
                entry = self._build(tr, runtime, sig.describe())
            except Exception as e:  # noqa: BLE001 - an internal error never reaches the user
                self._internal_error(state, f"building the executable failed: {type(e).__name__}: {e}")
                tr.apply_writes()
                return tr.concrete
            if state.entries or any(s.entries for s in self._keys.values() if s is not state):
                m.recompiles[category] += 1
                text = f"recompile #{sum(m.recompiles.values())}: {reason or 'new signature ' + sig.describe()}"
                self.log.append(text)
                lg = logger_for("recompiles")
                if lg:
                    lg.info("%s: %s", self.__qualname__, text)
            state.entries.append(entry)
            self._n_entries += 1
            m.slow_calls += 1
            result = tr.concrete
            held = runtime[len(base_runtime):]  # (all of them: the trace may have found more)
            if tr.writes and _aliasing([a for a in arrays if isinstance(a, np.ndarray)] + held):
                self._count_fallback("aliased_arguments", "(one call) an argument the function writes into "
                                                          "shares memory with another")
                result = self._call_eager(bound)
            else:
                tr.apply_writes()
            if pkey is not None and entry.build.plan is not None:  # (not after a fallback to the reference)
                held_key = key_of(held)
                why = persist.save(default_cache(), pkey,
                                   lambda: persist.entry_of(tr, entry.guards, entry.build, held_key, entry.summary()),
                                   self.__qualname__, sig.describe())
                if why:
                    self._saving = f"trace not saved: {why}"
            return result

    def _changed_ints(self, key) -> frozenset:
        """Leaf indices of the int arguments whose value differs from the one
        an earlier call of the same argument structure passed there (torch's
        automatic dynamic; dynamic=False: none)."""
        if self.dynamic is False:
            return frozenset()
        out = set()
        for other in self._keys:
            if len(other) == len(key) and other[0] == key[0]:
                out.update(k - 1 for k in range(1, len(key))
                           if _is_int_key(key[k]) and _is_int_key(other[k]) and other[k] != key[k])
        return frozenset(out)

    def _run_entry(self, state: KeyState, e: Entry, runtime, dims, bound):
        """A slow-path call of an entry (the hot path in __call__ inlines this);
        raises BreakMismatch when a graph break decides otherwise."""
        try:
            out = e.run(runtime, dims)
        except BreakMismatch:
            raise
        except RunEagerly as err:
            return self._run_eagerly_once(err, bound)
        except Exception as err:  # noqa: BLE001 - the compiled code failed: numpy decides whose fault
            return self._failed(state, err, bound, "running the compiled code")
        return pytree.unflatten(e.out_treedef, iter(out))

    def _failed(self, state: KeyState, failure: Exception, bound, stage: str = "tracing"):
        """Tracing (or a compiled call) raised: run the call in numpy.  If
        numpy raises too, the error is the user's (numpy's own exception is
        raised, and the function stays as it was); if numpy runs it, the
        failure was shapejit's and this signature runs eagerly from now on."""
        error = None
        args, kwargs = self._unbind_static(bound)
        try:
            result = self.fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - re-raised below, outside this handler
            error = e
        if error is not None:
            raise error
        self.metrics.eager_calls += 1
        self.metrics.slow_calls += 1
        self._internal_error(state, f"{stage} failed: {type(failure).__name__}: {failure}"
                                    f" (at {_where(failure)})")
        return result

    def _internal_error(self, state: KeyState, reason: str) -> None:
        state.eager_reason = reason
        self._count_fallback("internal_error", reason)
        warnings.warn(f"shapejit: {self.__name__} runs eagerly for this signature: {reason}",
                      JitWarning, stacklevel=4)

    def _run_eagerly_once(self, err: RunEagerly, bound):
        why = {"eager_size_changed": "an eager op's output size changed",
               "aliased_arguments": "an argument the function writes into shares memory with another",
               "lifted_loop": "a compiled loop met what Python or numpy raise or warn about"}
        self._count_fallback(err.reason, f"(one call) {why.get(err.reason, err.reason)}: {err}")
        return self._call_eager(bound)

    # ------------------------------------------------------- saved traces
    def _saved_key(self, key) -> str | None:
        """The disk record of saved traces for this specialization, or None
        when traces are not saved (reference back end, no disk cache, or a
        function whose globals have no process-independent identity)."""
        if self.backend != "llvm" or not persist.enabled():
            return None
        if not default_cache().on_disk:
            return None
        # on every miss (a few ms): a global reassigned since the last trace is a new key
        fingerprint, why = function_fingerprint(self.fn)
        self._saving = f"traces not saved: {why}" if why else None
        if fingerprint is None:
            return None
        try:
            options = stable_text((self.dynamic, sorted(self.dims.items()), self.constraints,
                                   sorted(self.static_argnames), self.backend, plan_switches()))
        except Unstable:
            return None
        return persist.key_for(fingerprint, key, options)

    def _load_saved(self, state: KeyState, pkey: str, shapes, leaves):
        """(entry, dims) from another process's saved traces whose guards
        accept these shapes (and whose held arrays have the shapes it was
        built for), or None."""
        if state.saved is None:
            state.saved, state.saved_level = persist.load(default_cache(), pkey)
        m = self.metrics
        for i, s in enumerate(state.saved):
            dims = s.guard_set.check(shapes)
            if dims is None:
                continue
            if s.held:
                held = fetch_all(s.held, self.fn, leaves)
                if held is None or key_of(held) != s.held_key:
                    continue
            if s.values and not persist.values_match(s.values, ValueKeys(s.guarded, self.fn).tokens(leaves)):
                continue  # traced when a value it read was another
            del state.saved[i]
            b = build_saved(s.build)
            if b is None:  # its object code was evicted: trace and compile as usual
                return None
            for stage, sec in b.seconds.items():
                m.compile_seconds[stage].observe(sec)
            m.slow_hits[state.saved_level or "disk"] += 1
            lg = logger_for("compile")
            if lg:
                lg.info("%s: loaded a saved trace (%s) in %.1f ms", self.__qualname__,
                        state.signature.describe(), b.seconds["load"] * 1e3)
            b.executable.pool.budget = self.pool_bytes
            return Entry(s.guard_set, b.executable.run, s.out_treedef, b.executable, b, saved=s), dims
        return None

    def _build(self, tr: TraceResult, runtime, sig: str) -> Entry:
        m = self.metrics
        guards = GuardSet(tr.env, tr.input_dims)
        contiguous = [isinstance(x, np.ndarray) and x.flags.c_contiguous for x in runtime]
        try:
            b = build(tr, guards.symbols, self.backend, contiguous, self.__qualname__, sig)
        except Exception as e:  # noqa: BLE001 - a compiler bug must not break the user's call
            self._count_fallback("compile_failed", f"compile failed, running the reference back end: "
                                                   f"{type(e).__name__}: {e}")
            warnings.warn(f"shapejit: compiling {self.__name__} failed ({type(e).__name__}: {e}); "
                          f"running it on the reference back end", JitWarning, stacklevel=4)
            b = build(tr, guards.symbols, "reference", contiguous, self.__qualname__)
        for stage, sec in b.seconds.items():
            m.compile_seconds[stage].observe(sec)
        if b.cache_level is not None:
            m.slow_hits[b.cache_level] += 1
        else:
            m.compiles += 1
            if b.artifact_key is not None:  # object code was looked up and compiled
                m.misses["disk"] += 1
        lg = logger_for("compile")
        if lg:
            lg.info("%s: built %s (%s) in %s", self.__qualname__, sig,
                    f"cache hit: {b.cache_level}" if b.cache_level else "compiled",
                    ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in b.seconds.items()))
        b.executable.pool.budget = self.pool_bytes
        return Entry(guards, b.executable.run, tr.out_treedef, b.executable, b, trace=tr)

    def _count_fallback(self, category: str, text: str) -> None:
        self.metrics.fallbacks[category] += 1
        self.log.append(f"fallback: {text}")
        lg = logger_for("fallbacks")
        if lg:
            lg.info("%s: fallback: %s", self.__qualname__, text)

    def _fall_back(self, state: KeyState, category: str, reason: str, bound):
        state.eager_reason = reason
        self._count_fallback(category, reason)
        warnings.warn(f"shapejit: {self.__name__} runs eagerly for this signature: {reason}",
                      JitWarning, stacklevel=4)
        return self._call_eager(bound)

    def _call_eager(self, bound):
        self.metrics.eager_calls += 1
        self.metrics.slow_calls += 1
        args, kwargs = self._unbind_static(bound)
        return self.fn(*args, **kwargs)

    def _unbind_static(self, bound):
        return self._unbind(tuple(x.value if isinstance(x, _Static) else x for x in bound))

    def _leaf_paths(self, treedef) -> list[str]:
        out = []
        for name, sub in zip(self._param_names, treedef[1]):
            out += pytree.leaf_paths(sub, name)
        return out

    # --------------------------------------------------------- observability
    def stats(self) -> dict:
        """The same figures the Prometheus metrics report, as a dict."""
        m = self.metrics
        return {"traces": m.traces, "compiles": m.compiles, "recompiles": sum(m.recompiles.values()),
                "cache_hits_memory": m.hits["memory"], "cache_hits_disk": m.hits["disk"],
                "cache_hits_remote": m.hits["remote"],
                "fallbacks": sum(m.fallbacks.values()), "eager_calls": m.eager_calls, "calls": m.calls,
                "entries": self._n_entries, "bytes_allocated": m.bytes_allocated, "peak_bytes": m.peak_bytes,
                "eager_nodes": sum(e.eager_nodes for s in self._keys.values() for e in s.entries),
                "graph_breaks": m.graph_breaks}

    def explain(self, file=None) -> str:
        lines = [f"shapejit: {self.__qualname__} (dynamic={self.dynamic!r}, backend={self.backend})",
                 "stats: " + ", ".join(f"{k}={v}" for k, v in self.stats().items())]
        for key, state in self._keys.items():
            sig = state.signature.describe() if state.signature else str(key)
            lines.append(f"\nsignature {sig}:")
            if state.eager_reason:
                lines.append(f"  runs eagerly: {state.eager_reason}")
            for k, e in enumerate(state.entries):
                lines.append(f"  entry {k}:" + (" (a saved trace from the disk cache: not traced in this process)"
                                                if e.saved is not None else ""))
                sm = e.summary()
                lines.append("    guards:" + ("" if e.guards.checks else " none (every shape of this signature)"))
                lines += ["      " + g for g in e.guards.describe()]
                if sm.dims:
                    lines.append("    dims: " + ", ".join(sm.dims))
                if sm.eager_nodes:
                    lines.append("    eager nodes (run in numpy between traced segments):")
                    lines += ["      " + x for x in sm.eager_nodes]
                if sm.breaks:
                    lines.append("    graph breaks (this entry serves calls that decide the same way):")
                    lines += ["      " + text for _, text in sm.breaks]
                if sm.lift_refusals:
                    lines.append("    loops traced as written (jit/lift.py could not compile them whole):")
                    lines += ["      " + x for x in sm.lift_refusals]
                lines.append("    graph:")
                lines += ["      " + x for x in sm.graph.splitlines()]
                if sm.plan is not None:
                    lines.append("    clusters (after passes):")
                    lines += ["      " + x for x in sm.plan.splitlines()]
                if e.executable.products:
                    lines.append("    products on its last call: " + ", ".join(
                        f"%{vid} on {_VARIANT[g]}" for vid, g in sorted(e.executable.products.items())))
        trees = gemm_dispatch()
        if trees:
            lines.append("\nproduct dispatch calibrated on this CPU (runtime/dispatch.py; a shape class not "
                         "seen yet takes the tree's variant):")
            for char, tree in trees.items():
                lines.append(f"  {np.dtype(char).name}:")
                lines += ["    " + x for x in describe_tree(tree)]
        elif calibrating():
            lines.append("\nproduct dispatch: this CPU is being calibrated in the background; until then a shape "
                         "class not seen yet is raced on its first product")
        if self._value_paths:
            lines.append("\nvalues the traces read (each call's key holds them: a change traces again): "
                         + ", ".join(map(str, self._value_paths)))
        if self._unguarded:
            lines.append("read but not keyed (a change to them is not seen): " + ", ".join(self._unguarded))
        if self._changed:
            lines.append("changed by the function while it was traced (its Python side effects run only then; "
                         "not keyed): " + ", ".join(self._changed))
        if self._saving:
            lines.append(f"\n{self._saving}")
        if self.log:
            lines.append("\nrecompiles and fallbacks:")
            lines += ["  " + x for x in self.log]
        text = "\n".join(lines)
        if file is not None:
            print(text, file=file)
        return text

    def __repr__(self):
        return f"<shapejit.jit {self.__qualname__} dynamic={self.dynamic!r}>"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)


class _Static:
    """An argument forced static by static_argnames: part of the key."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, o):
        return isinstance(o, _Static) and type(o.value) is type(self.value) and o.value == self.value

    def __hash__(self):
        return hash((type(self.value), self.value))


def _has_signature(fn) -> bool:
    try:
        inspect.signature(fn)
        return True
    except (TypeError, ValueError):
        return False


def _as_function(target):
    """A Python function that calls `target` with exactly the arguments given."""
    def call(*args, **kwargs):
        return target(*args, **kwargs)
    call.__name__ = getattr(target, "__name__", "jitted")
    call.__qualname__ = call.__name__
    call.__doc__ = getattr(target, "__doc__", None)
    return call


def _is_int_key(k) -> bool:
    return type(k) is tuple and len(k) == 2 and k[0] is int


def _where(e: BaseException) -> str:
    """file:line where an exception was raised (the innermost frame)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}" if tb else "?"


def _aliasing(arrays) -> bool:
    return any(np.may_share_memory(a, b) for i, a in enumerate(arrays) for b in arrays[i + 1:])


def _changed_dims(entry: Entry, shapes) -> frozenset:
    return frozenset((arg, axis) for arg, axis, size in entry.summary().specialized if shapes[arg][axis] != size)


def jit(fn=None, *, dynamic=True, dims=None, constraints=(), static_argnames=(), max_entries=32,
        backend="llvm", name=None, pool_bytes=None):
    """Compile a numpy function for every input shape from one trace.

    `@jit` or `@jit(dynamic=True | "auto" | False, dims={"x": ("B", "S", 768)},
    constraints=["S <= 4096"], static_argnames=("mode",), max_entries=32, backend="llvm",
    name="encoder", pool_bytes="64MiB")`; `name` labels the metrics (default: the function's
    qualified name); `pool_bytes` bounds the pooled intermediates its executables keep between
    calls (SHAPEJIT_POOL_BYTES bounds the whole process's)."""
    def wrap(f):
        jf = JitFunction(f, dynamic=dynamic, dims=dims, constraints=constraints,
                         static_argnames=static_argnames, max_entries=max_entries, backend=backend, name=name,
                         pool_bytes=pool_bytes)
        jf.__module__ = getattr(f, "__module__", None)
        return jf
    return wrap if fn is None else wrap(fn)

"""The public API: `jit` and JitFunction, whose call is the hot path (bind
the arguments, key the call, run the first entry whose guards accept its
shapes); a call no entry serves goes to jit/miss.py, and stats() and
explain() read the function's state in jit/explain.py."""
from __future__ import annotations

import functools
import inspect
import time

from jit import explain as _explain
from jit import pytree
from jit.binding import Parameters, with_signature
from jit.compile import BACKENDS
from jit.declare import check_constraints, check_dims, dim_names
from jit.eager import DEFAULT_ERRSTATE, after_failure, call_python, errors_raise, errstate_object, run_eagerly_once, \
    run_under_errstate
from jit.held import ValueKeys
from jit.keys import extended_key
from jit.miss import serve_miss
from jit.signature import classify_call, with_data_lists
from jit.trace import set_state
from jit.tracer import ArrayOfTraced
from runtime.runeagerly import BreakMismatch, RunEagerly
from runtime.metrics import FunctionMetrics
from shapes import forksafe
from shapes.config import parse_size

_now = time.perf_counter


class JitFunction:
    def __init__(self, fn, *, dynamic=True, dims=None, constraints=(), static_argnames=(),
                 max_entries=32, backend="llvm", name=None, pool_bytes=None):
        if dynamic not in (True, False, "auto"):
            raise ValueError(f"dynamic must be True, False or 'auto', not {dynamic!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
        if isinstance(fn, JitFunction):  # (jit(jit(f)): one jit of f)
            fn = fn.fn
        # (@jit over @staticmethod / @classmethod: the function, bound as they bind it, __get__)
        self._binding = "static" if isinstance(fn, staticmethod) else "class" if isinstance(fn, classmethod) \
            else None
        if self._binding:
            fn = fn.__func__
        fn = with_signature(fn)
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
        self._params = params = Parameters(fn, self.static_argnames, self.__name__)
        # what the hot path reads to bind a call, as attributes of its own (one lookup each)
        self._simple, self._n_params, self._defaults = params.positional, params.count, params.defaults
        self._bind = params.bind
        # a generator's (or coroutine's) values are made after the call returns: it runs in numpy
        self._generator = inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn) \
            or inspect.iscoroutinefunction(fn)
        self.dims = check_dims(dims, params.names, self.__name__)
        self.constraints = check_constraints(constraints, dim_names(self.dims))
        self._keys: dict = {}  # full key -> KeyState (jit/entries.py)
        self._lock = forksafe.rlock()
        self._n_entries = 0
        self._warned_limit = False
        self.log: list[str] = []  # recompile and fallback reasons, in order
        self.metrics = FunctionMetrics(self.__qualname__)
        self._saving: str | None = None  # why traces are not saved, when they are not
        # what keys a call besides its arguments (jit/keys.py)
        self._dyn_ints: frozenset = frozenset()  # leaf indices of int arguments that are symbols
        self._data_args: frozenset = frozenset()  # arguments, lists of numbers, traced as data (DataList)
        self._not_data: set = set()  # arguments such a trace used as only a list can be used
        self._list_lens: dict = {}  # argument -> the length of the first list of numbers passed there
        self._held_paths: list = []  # where the arrays the program holds are (jit/held.py)
        self._value_paths: list = []  # where the other values traces read are: their tokens are keyed
        self._values = ValueKeys((), fn)  # reads them
        self._last_values: dict = {}  # path -> the token its value had at the last trace
        self._held_ints: list = []  # paths of held ints that changed once: symbols (jit/keys.py extended_key)
        self._held_floats: list = []  # paths of held floats that changed once: runtime scalars, among _held_paths
        self._unguarded: list = []  # values traces read that no token describes (warned once)
        self._changed: list = []  # values a traced run changed itself (not keyed)
        self._int_changes: str | None = None
        self._errstate_noted = False  # (a call under an error state that raises was logged)
        self._list_note: str | None = None  # why a list argument is keyed otherwise now (the next retrace's reason)
        self._loops: dict = {}  # its loops over a symbolic trip count: counts unrolled, or a scan (jit/scan.py)
        self._trace_consts = False  # arrays made of constants traced (numpy took a traced array as data once)

    def _scan_jit(self, fn, name: str) -> "JitFunction":
        """A loop's body jitted as this function is (jit/scan.py)."""
        return JitFunction(fn, dynamic=True, backend=self.backend, name=name, pool_bytes=self.pool_bytes)

    def __call__(self, *args, **kwargs):
        t0 = _now()
        if self._simple and not kwargs and len(args) == self._n_params:
            bound = args
        elif self._defaults and not kwargs and self._n_params - len(self._defaults) <= len(args) < self._n_params:
            bound = args + self._defaults[len(args) - self._n_params:]
        else:
            bound = self._bind(args, kwargs)
        state = errstate_object()
        if state is not DEFAULT_ERRSTATE and errors_raise(state):
            return run_under_errstate(self, bound)
        leaves: list = []
        treedef = pytree.flatten(with_data_lists(bound, self._data_args) if self._data_args else bound, leaves)
        try:
            key, arrays, runtime = classify_call(leaves, treedef, self.dynamic, self._dyn_ints)
        except ArrayOfTraced:  # (called by a function another jit traces: its Python, traced inline)
            return call_python(self, bound)
        full, run_inputs, ints = key, runtime, ()
        if self._held_paths or self._value_paths:  # what the program holds: fetched again at every call
            full, held, ints = extended_key(self, key, leaves)
            run_inputs = None if held is None else runtime + held
        state = self._keys.get(full)
        if state is not None and state.eager_reason is None:
            shapes = tuple([a.shape for a in arrays]) + ints  # (the held ints that are symbols: after the arguments)
            for e in state.entries:
                dims = e.guards.check(shapes)
                if dims is not None:
                    try:
                        out = e.run(run_inputs, dims)
                    except BreakMismatch:
                        continue  # a graph break decided otherwise: another entry (or a trace) serves it
                    except RunEagerly as err:
                        return run_eagerly_once(self, err, bound)
                    except Exception as err:  # noqa: BLE001 - the compiled code failed: numpy decides whose fault
                        if e.graph_breaks:  # (a step that may raise, fused to run before a graph break's check
                            continue  # that would have failed: the slow path, jit/miss.py _run)
                        return after_failure(self, state, err, bound, "running the compiled code")
                    if e.state:  # (attributes the call assigns: their values the last outputs)
                        set_state(self.fn, e.state, out, leaves)
                    m = self.metrics
                    if dims != e.last_dims:
                        e.account(dims, m)
                    m.bytes_allocated += e.bytes
                    m.latency.observe(_now() - t0)
                    return pytree.unflatten(e.out_treedef, iter(out))
        return serve_miss(self, key, bound, leaves, treedef, arrays, runtime)

    def _entry_for(self, args: tuple, flat: bool = False):
        """(the compiled entry that serves positional `args` now, the held
        arrays it takes after them), or None (a miss, an eager key): for a
        caller that runs one entry over and over while what the program
        holds stays as it is (jit/scan.py's trips).  `flat`: no arg is a
        tuple, list or dict (its leaves are the args)."""
        found = self._entries_for(args, flat)
        if found is None:
            return None
        entries, held, shapes = found
        e = next((e for e in entries if e.guards.check(shapes) is not None), None)
        return None if e is None else (e, held)

    def _entries_for(self, args: tuple, flat: bool = False):
        """(the entries of the key of positional `args` -- the list itself,
        which a trace of that key extends --, the held arrays they take,
        the shapes their guards check), or None (_entry_for)."""
        if not (self._simple and len(args) == self._n_params):
            return None
        if flat:
            leaves, treedef = list(args), pytree.flat_tuple(len(args))
        else:
            leaves = []
            treedef = pytree.flatten(args, leaves)
        key, arrays, _ = classify_call(leaves, treedef, self.dynamic, self._dyn_ints)
        held, ints = [], ()
        if self._held_paths or self._value_paths:
            key, held, ints = extended_key(self, key, leaves)
        state = self._keys.get(key) if key is not None else None
        if state is None or state.eager_reason is not None:
            return None
        return state.entries, held, tuple([a.shape for a in arrays]) + ints

    def stats(self) -> dict:
        """The same figures the Prometheus metrics report, as a dict."""
        return _explain.stats(self)

    def explain(self, file=None) -> str:
        """Its signatures, guards, graphs, clusters, graph breaks, recompiles
        and fallbacks as text (printed to `file` if given)."""
        text = _explain.describe(self)
        if file is not None:
            print(text, file=file)
        return text

    def __repr__(self):
        return f"<shapejit.jit {self.__qualname__} dynamic={self.dynamic!r}>"

    def __get__(self, obj, objtype=None):
        if self._binding == "class":
            return _Bound(self, objtype if objtype is not None else type(obj))
        if obj is None or self._binding == "static":
            return self
        return _Bound(self, obj)


class _Bound(functools.partial):
    """A jitted method bound to its object (or class): called as partial
    calls (in C), and its jit's stats(), explain() and the rest read
    through it (`model.forward.stats()`)."""

    def __getattr__(self, name):
        return getattr(self.func, name)


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

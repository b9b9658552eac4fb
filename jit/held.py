"""Arrays the program holds: a weight or a KV cache kept on `self`, in a
closure or in a module global.  While tracing, the function sees them as
traced arrays (so `table[ids]`, `cache[:, pos:pos + n] = kv` and `w += g`
trace like they do on arguments); each becomes a graph input that every call
fetches again along its path (`self.cache_k[3]`), so a rebound attribute is
never served stale, and writes are copied back into the array the path
reaches, as numpy would have made them.  The key holds each held array's
dtype, exact shape and layout (weights and caches have fixed shapes: their
dims are static in the code).

Any other value the trace reads along such a path (a float global, an int
attribute of `self`, a list of numbers in a closure, a helper function
bound to a global) is a constant of the trace: its token (below) is part of
every call's key, so a changed value is a new key (a retrace, the old entry
kept) and never a stale result.  An int or a float that changes once is
keyed by its type from then on (key_token): an int a symbol the guards bind
from its value, a float a runtime scalar fetched with the held arrays
(jit/keys.py; a numpy float one of its own dtype).  A list or dict too long for a token is viewed item by item
(held_container).  A value no token describes (an object of a library's
class) is listed, and the function warns once that a change to it is not
seen.  An attribute the traced code assigns (`self.t += 1`, `self.m = ...`)
is recorded (Lifter.attr_writes) and set after every call (jit/trace.py
set_state)."""
from __future__ import annotations

import dis
import enum
import functools
import os
import sys
from functools import partial
from operator import call, is_
import types
from dataclasses import dataclass

import numpy as np

from jit.errors import PKG_DIRS
from jit.tracer import Fallback, SymFloat, SymInt, Tracer, user_location

_PLAIN = (int, float, complex, bool, str, bytes, type(None), np.ndarray, np.generic, types.ModuleType,
          types.FunctionType, types.BuiltinFunctionType, type, enum.Enum)
_VALUES = (int, bool, str, bytes, type(None))
# (type(np.sum): numpy's functions that dispatch on __array_function__, such as
# `from numpy.lib.stride_tricks import sliding_window_view` read as a global)
# (an enum's member is a singleton that holds no array: keyed as itself, never a HeldObject)
_BY_IDENTITY = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, np.ufunc, type, type(np.sum),
                enum.Enum)
MAX_ITEMS = 64  # the longest list, tuple or dict of values a key holds (longer ones are not guarded)
MISSING = ("missing",)
_CONTAINERS = (list, tuple, dict)


def token(v, depth: int = 0):
    """A hashable token equal for two values exactly when a trace that read
    one serves the other (floats by their bits: -0.0 is not 0.0, nan is
    nan), or None for a value shapejit does not guard (containers nested
    deeper than 4, one holding itself among them)."""
    t = type(v)
    if t is float:
        return float, v.hex()
    if t is _Same:  # (an object's identity, read where the trace compared or hashed it: Path step "is")
        return v
    if t in _VALUES:
        return t, v
    if t is complex:
        return complex, v.real.hex(), v.imag.hex()
    if isinstance(v, np.generic):
        return t, v.tobytes()
    if t in (list, tuple, dict) and (len(v) > MAX_ITEMS or depth >= 4):
        return None
    if t in (list, tuple):
        items = tuple([token(x, depth + 1) for x in v])
        return None if None in items else (t, items)
    if t is dict:
        items = tuple([(token(k, depth + 1), token(x, depth + 1)) for k, x in v.items()])
        return None if any(None in kv for kv in items) else (t, items)
    if isinstance(v, type) and depth < 4 and users_class(v):  # (a class of the user's: itself, the plain
        # values its body binds, `Cfg.eps`, its methods and the globals they read, read again at every call)
        names, reads, last, tok = _CLASS_VALUES.get(v) or (None, None, None, None)
        values = None
        if names is not None:
            values = [getattr(v, k, None) for k in names] + [g.get(k, MISSING) for g, k in reads]
        if last is None or not all(map(is_, values, last)):  # (the same objects as last time: the same token)
            names, reads = _class_sources(v)
            values = [getattr(v, k, None) for k in names] + [g.get(k, MISSING) for g, k in reads]
            # (an array by its identity: the trace reads its contents at every call, but one bound in its place
            # is another array; so too an object a method reads that no token describes)
            attrs = tuple([("array", _Same(x)) if type(x) is np.ndarray else token(x, depth + 1) for x in
                           values[:len(names)]] + [token(x, depth + 1) or _Same(x) for x in values[len(names):]])
            tok = ("class", v) + attrs if None not in attrs else ("is", v)
            _CLASS_VALUES[v] = names, reads, values, tok
        return tok
    if isinstance(v, _BY_IDENTITY) or jitted(v) is not None:
        return "is", v
    return None


INT = ("int",)  # the token of an int that is a symbol (below): keyed by its type, its value bound by the guards
FLOAT = ("float",)  # the token of a float that is a runtime scalar (below): keyed by its type
_INT64 = 2 ** 63


_NUMPY_FLOATS = (np.floating, np.complexfloating)


def key_token(v, kind):
    """v's token; INT where `kind` is "int" (the path is one of a held int
    that changed once, now a symbol of the traces: Lifter.lift_int) and v an
    int64; where it is "float" (a held float that changed once, now a
    runtime scalar, as a float argument is: Lifter.lift), FLOAT for a
    Python float and ("float", its dtype) for a numpy one (`self.x` after
    `self.x += k * (z[i] - self.x)`: np.float64, strong as an argument of
    that type is)."""
    if kind == "int" and type(v) is int and -_INT64 <= v < _INT64:
        return INT
    if kind == "float":
        if type(v) is float:
            return FLOAT
        if isinstance(v, _NUMPY_FLOATS):
            return "float", v.dtype
    return token(v)


def by_type(tok) -> bool:
    """Whether a key token is a held number's type (key_token: INT, FLOAT or
    a numpy float's dtype), its value an input of the trace."""
    return tok == INT or tok == FLOAT or type(tok) is tuple and len(tok) == 2 and tok[0] == "float"


def changed_number(before, now):
    """int or float when two tokens are of numbers of one type that differ
    (a held value that changed; a numpy float's: float), else None."""
    if type(before) is tuple and type(now) is tuple and len(before) == len(now) == 2 and before != now \
            and before[0] is now[0]:
        if now[0] in (int, float):
            return now[0]
        if isinstance(now[0], type) and issubclass(now[0], _NUMPY_FLOATS):
            return float
    return None


def read_as_value(p) -> bool:
    """Whether the trace reads the value at Path p itself (a variable, an
    attribute, an item: Lifter.wrap), not a fact of it (its length, keys,
    class or identity): only such a number can be keyed by its type."""
    return not p.steps or p.steps[-1][0] in ("attr", "item", "global", "cell")


class _Same:
    """A token part equal only for the same object (an array: unhashable)."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __hash__(self):
        return id(self.x)

    def __eq__(self, other):
        return type(other) is _Same and other.x is self.x


def jitted(v):
    """The Python function of another jit (jit/api.py's JitFunction, which
    this module cannot import), or None."""
    return v.fn if type(v).__name__ == "JitFunction" else None


_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS", "STORE_GLOBAL", "DELETE_GLOBAL"})
_GLOBAL_STORES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})


@functools.lru_cache(maxsize=1024)
def code_names(c: types.CodeType) -> tuple[frozenset, frozenset]:
    """(every name a code object and the code nested in it holds: its
    attributes' too, the global names it reads or assigns)."""
    names = set(c.co_names)
    for k in c.co_consts:
        if isinstance(k, types.CodeType):
            names |= code_names(k)[0]
    return frozenset(names), _global_ops(c, _GLOBAL_OPS)


@functools.lru_cache(maxsize=1024)
def _global_ops(c: types.CodeType, ops: frozenset) -> frozenset:
    """The names instructions of `ops` name in c and the code nested in it."""
    out = {i.argval for i in dis.get_instructions(c) if i.opname in ops}
    return frozenset(out.union(*(_global_ops(k, ops) for k in c.co_consts if isinstance(k, types.CodeType))))


def assigned_only(c: types.CodeType) -> frozenset:
    """The globals c (and the code nested in it) assigns and never reads."""
    return _global_ops(c, _GLOBAL_STORES) - _global_ops(c, _GLOBAL_OPS - _GLOBAL_STORES)


def global_names(c: types.CodeType) -> frozenset:
    """The global names a code object (and the code nested in it) reads or
    assigns: its co_names hold its attributes' names too, and `x.shape`
    taken for a global `shape` that a script's loop rebinds keyed every
    trace on it."""
    return code_names(c)[1]


# a user's class -> (the names of the plain values its body binds, (mapping, key) of its methods and the
# globals they read, those values, its token)
_CLASS_VALUES: dict = {}
_READS_DEPTH = 3  # (the helpers deep a class's methods' reads are followed: _class_sources)


def _class_sources(cls: type) -> tuple:
    """(the names of the plain values a user's class binds, its own and
    those it inherits from the user's classes: `class B(A)`, A.SCALE; the
    (mapping, key) of each of its methods, as its class's body binds it,
    and of each global they read, through the user's functions they call:
    `Cfg.f(x)` runs the class's own function, not a traced copy, so what
    it reads is keyed with the class)."""
    mro = [c for c in cls.__mro__ if c is not object and users_class(c)]
    names = tuple(dict.fromkeys(k for c in mro for k, x in vars(c).items() if not k.startswith("__")
                                and not callable(x) and not isinstance(x, (property, staticmethod, classmethod))))
    reads, seen = {}, set()

    def walk(fn, depth):
        if fn in seen or depth > _READS_DEPTH or not user_file(fn.__code__.co_filename):
            return
        seen.add(fn)
        g = fn.__globals__
        for k in global_names(fn.__code__):
            x = g.get(k, MISSING)
            if isinstance(x, types.ModuleType) or x in mro:  # (a module is rebound by no one; the class, itself)
                continue
            reads.setdefault((id(g), k), (g, k))
            if isinstance(x, types.FunctionType):
                walk(x, depth + 1)
    for c in mro:
        d = vars(c)
        for k, x in d.items():
            fn = x.__func__ if isinstance(x, (classmethod, staticmethod)) else x.fget if isinstance(x, property) \
                else x
            if isinstance(fn, types.FunctionType) and (not k.startswith("__") or k in ("__init__", "__call__")):
                reads.setdefault((id(d), k), (d, k))
                walk(fn, 0)
    return names, tuple(reads.values())


@functools.lru_cache(maxsize=256)
def users_class(c: type) -> bool:
    return user_module(sys.modules.get(c.__module__))


class ValueKeys:
    """The tokens of the values `paths` reach, read at every call: a global
    or closure variable through a getter made once, and the token of a value
    that is the same object as last time (and not a container) reused, so
    a float global costs a dictionary lookup and an identity test."""

    _FETCH_ERRORS = (AttributeError, IndexError, KeyError, TypeError, ValueError)

    def __init__(self, paths, fn, ints=(), floats=()):
        self.paths = list(paths)
        # (the held ints that are symbols, the held floats that are runtime scalars: keyed by their type)
        self._kinds = ["int" if p in ints else "float" if p in floats else None for p in self.paths]
        # (where the held ints that are symbols are among the values, in `ints`' order: their guards' inputs)
        self.int_at = [self.paths.index(p) for p in ints]
        self._get = [_getter(p, fn) for p in self.paths]
        self._fixed = all(isinstance(g, partial) for g in self._get)  # (each reads no argument: called bare)
        # (values, their tokens, whether one is a container: read again even when the same object)
        self._last = ([MISSING] * len(self.paths), tuple([MISSING] * len(self.paths)), True)

    def tokens(self, leaves) -> tuple:
        return self.read(leaves)[0]

    def read(self, leaves) -> tuple:
        """(the values' tokens, the values) of this call: one read serves
        the key and the symbols' values (jit/keys.py extended_key)."""
        try:
            objs = list(map(call, self._get)) if self._fixed else \
                [get() if isinstance(get, partial) else get(leaves) for get in self._get]
        except self._FETCH_ERRORS:
            return self._read_each(leaves)
        last, tokens, containers = self._last  # (one read: the triple another thread stores is stored whole)
        if containers or not all(map(is_, objs, last)):
            tokens = tuple(map(key_token, objs, self._kinds))
            # (a container's items, a class's attributes: read again even when it is the same object)
            self._last = objs, tokens, any(type(x) in _CONTAINERS or isinstance(x, type) and users_class(x)
                                           for x in objs)
        return tokens, objs

    def _read_each(self, leaves) -> tuple:
        tokens, objs = [], []
        for get, kind in zip(self._get, self._kinds):
            try:
                objs.append(get() if isinstance(get, partial) else get(leaves))
                tokens.append(key_token(objs[-1], kind))
            except self._FETCH_ERRORS:
                objs.append(MISSING)
                tokens.append(MISSING)
        return tuple(tokens), objs


def _getter(p: Path, fn):
    """A function reading the value at `p`: of no argument (a partial of a
    C function) for a global or closure variable of the jitted function, else
    of the call's leaves."""
    if not p.steps and p.root[0] == "global":
        return partial(_function(fn).__globals__.__getitem__, p.root[1])
    if not p.steps and p.root[0] == "cell":
        return partial(getattr, _function(fn).__closure__[p.root[1]], "cell_contents")
    return lambda leaves: p.fetch(fn, leaves)


@dataclass(frozen=True)
class Path:
    """root: ("self",) | ("arg", leaf index) | ("global", name) | ("cell", index) | ("root",) (the
    callable jitted itself: a partial);
    steps: ("attr", name) | ("item", index) | ("global", name) (a global of
    the function reached so far, a helper) | ("cell", index) (its closure
    variable) | ("len", 0) | ("keys", 0) | ("type", 0) (its class) | ("is", 0)
    (its identity, as a token: compared or hashed), applied in order."""
    root: tuple
    steps: tuple = ()

    def fetch(self, fn, leaves):
        kind = self.root[0]
        if kind == "self":
            x = fn.__self__
        elif kind == "root":
            x = fn
        elif kind == "arg":
            x = leaves[self.root[1]]
        elif kind == "global":
            x = _function(fn).__globals__[self.root[1]]
        else:
            x = _function(fn).__closure__[self.root[1]].cell_contents
        for op, k in self.steps:
            if op in ("global", "cell") and jitted(x) is not None:
                x = jitted(x)  # (another jit's function, traced inline: its globals and closure, jit/trace.py)
            if op == "attr":
                x = getattr(x, k)
            elif op == "item":
                x = x[k]
            elif op == "global":
                x = x.__globals__[k]
            elif op == "len":
                x = len(x)
            elif op == "keys":
                x = tuple(x)
            elif op == "is":
                x = _Same(x)
            elif op == "type":
                x = type(x)
            else:
                x = x.__closure__[k].cell_contents
        return x

    def child(self, op: str, k) -> "Path":
        return Path(self.root, self.steps + ((op, k),))

    def __str__(self):
        kind = self.root[0]
        head = "self" if kind == "self" else f"<argument {self.root[1]}>" if kind == "arg" else \
            self.root[1] if kind == "global" else "<the partial jitted>" if kind == "root" else \
            f"<closure {self.root[1]}>"
        return head + "".join(_STEP_TEXT[op].format(k) for op, k in self.steps)


_STEP_TEXT = {"attr": ".{}", "item": "[{!r}]", "global": ".__globals__[{!r}]", "cell": ".__closure__[{}]",
              "len": ".__len__()", "keys": ".keys()", "is": " (its identity)", "type": ".__class__"}


def _function(fn):
    return fn.__func__ if isinstance(fn, types.MethodType) else fn


def fetch_all(paths, fn, leaves, floats=()) -> list | None:
    """The arrays `paths` reach now (and floats, at the paths of held floats
    that are runtime scalars), or None when one no longer reaches an ndarray
    (a float: the caller traces again)."""
    out = []
    for p in paths:
        try:
            x = p.fetch(fn, leaves)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            return None
        if type(x) is not np.ndarray and not (p in floats and (type(x) is float or isinstance(x, _NUMPY_FLOATS))):
            return None
        out.append(x)
    return out


def key_of(arrays) -> tuple:
    return tuple([(a.dtype, a.shape, a.flags.c_contiguous) if type(a) is np.ndarray else type(a) for a in arrays])


def holds_arrays(seq, depth: int = 3) -> bool:
    """Whether a list, tuple or dict holds arrays or objects that may, a few
    levels down (`self.blocks = [[w1], [w2, w3]]`): it is handed out as a
    held sequence or mapping, its arrays held, its lengths keyed."""
    items = seq.values() if type(seq) is dict else seq
    return any(type(v) is np.ndarray or holder(v) or depth and type(v) in (list, tuple, dict) and holds_arrays(
        v, depth - 1) for v in items)


def held_container(x) -> bool:
    """Whether a list, tuple or dict the trace reads is viewed item by item
    (HeldSequence, HeldMapping: each item read keyed at its own path): one
    that holds arrays or objects, or one too long for a token of its own (a
    config dict of 80 options, a list of 100 coefficients: read whole, a
    change to it was not seen), its keys strings or ints."""
    if holds_arrays(x):
        return True
    return len(x) > MAX_ITEMS and (type(x) is not dict or all(type(k) in (str, int) for k in x))


RANDOM_STATES = (np.random.Generator, np.random.RandomState, np.random.BitGenerator)


def refuse_random(x, where) -> None:
    """A numpy random generator read by the trace runs the function in numpy:
    its draws, made while tracing, would be the trace's constants."""
    if isinstance(x, RANDOM_STATES):
        raise Fallback(f"{where} is a numpy random generator (its draws would be frozen into the trace)",
                       user_location())


def holder(x) -> bool:
    """An object whose attributes may hold arrays: an instance of a class the
    user's program defines (not numpy's, a library's or the standard library's)."""
    return holder_type(type(x))


@functools.lru_cache(maxsize=512)
def holder_type(t: type) -> bool:
    """Whether t's objects are held (holder): a user's class whose instances have a __dict__ or slots (an
    object of slots holds arrays as one of a __dict__ does)."""
    return not issubclass(t, _PLAIN) and (t.__dictoffset__ != 0 or hasattr(t, "__slots__")) \
        and user_module(sys.modules.get(t.__module__))


_LIBRARY_DIRS = tuple({os.path.dirname(os.__file__), os.path.dirname(np.__file__).rsplit(os.sep, 1)[0]})


def user_file(filename: str) -> bool:
    """A file of the user's program: not the standard library, an installed
    package or shapejit itself."""
    return not filename.startswith(_LIBRARY_DIRS + PKG_DIRS + ("<frozen",))


def user_module(mod) -> bool:
    f = getattr(mod, "__file__", None)
    return f is not None and user_file(f)


class Lifter:
    """Hands out traced arrays for the held arrays a trace reaches.
    `lift(path, array)` returns the same Tracer for the same path."""

    def __init__(self, ctx, make_input, ints=(), make_int=None, floats=()):
        self.ctx = ctx
        self.ints = ints  # paths of held ints that are symbols (changed once: a trace per value otherwise)
        self.floats = floats  # paths of held floats that are runtime scalars (lifted as a held array is)
        # (attribute path -> the value the traced code assigned there, `self.t += 1`, `self.avg = ...`: read
        # back by the trace, and assigned after every call, jit/trace.py state outputs; None: refused, a scan's body)
        self.attr_writes: dict | None = {}
        self.symbols: dict[Path, object] = {}  # their SymInts
        self._make_int = make_int  # (path, value) -> SymInt (a symbol bound from the value at every call)
        self.paths: list[Path] = []
        self.tracers: dict[Path, Tracer] = {}
        self.guarded: dict[Path, tuple] = {}   # values read along paths -> their tokens
        self.unguarded: list[str] = []         # paths of values read that no token describes
        self.containers: list = []  # (a list, dict or set the trace read, its contents then)
        self._make_input = make_input  # (array, path text) -> Tracer (a new graph input)
        self.traceable = lambda f, path=None: f  # a user function as the trace runs it (jit/trace.py)

    def lift(self, path: Path, array) -> Tracer:
        """The traced array of the held array at `path` (or the traced weak
        float of a held float that is a runtime scalar)."""
        t = self.tracers.get(path)
        if t is None:
            if type(array) is float or isinstance(array, np.generic):
                self.guarded[path] = key_token(array, "float")
            elif array.dtype.kind in "OSUVMm":
                raise Fallback(f"held array {path} has unsupported dtype {array.dtype}", user_location())
            t = self._make_input(array, str(path))
            self.tracers[path] = t
            self.paths.append(path)
        return t

    def handed_out(self, path: Path, value) -> bool:
        """Whether `value` is the traced array this trace handed out for the
        held array at `path` (an assignment of it there binds nothing new)."""
        return isinstance(value, Tracer) and self.tracers.get(path) is value

    def lift_int(self, path: Path, x: int):
        """The symbol of the held int at `path` (its key token INT)."""
        s = self.symbols.get(path)
        if s is None:
            s = self.symbols[path] = self._make_int(path, x)
            self.guarded[path] = INT
        return s

    def kind(self, path: Path):
        """"int", "float" (a held number keyed by its type: key_token) or None."""
        return "int" if path in self.ints else "float" if path in self.floats else None

    def wrap(self, path: Path, x):
        """What the traced code sees in place of `x` (found along `path`)."""
        if type(x) is np.ndarray:
            return self.lift(path, x)
        if path in self.ints and key_token(x, "int") is INT:
            return self.lift_int(path, x)
        if path in self.floats and by_type(key_token(x, "float")):
            return self.lift(path, x)
        refuse_random(x, path)
        if type(x) in (list, tuple) and held_container(x):
            return HeldSequence(self, path, x)
        if type(x) is dict and held_container(x):
            return HeldMapping(self, path, x)
        if holder(x):
            return HeldObject(self, path, x)
        self.guard(path, x)
        return x

    def check_containers(self, traced) -> None:
        """A traced value the run put into a list, dict or set it read (a
        global `LOSSES.append(loss)`) would be left there, where no compiled
        call puts one: their contents are put back and the function runs in
        numpy (`traced(v)`: whether v is or holds a value of the trace)."""
        kept = [(c, before) for c, before in self.containers if traced(list(c.values()) if type(c) is dict else c)]
        for c, before in kept:
            if type(c) is list:
                c[:] = before
            else:
                c.clear()
                c.update(before)
        if kept:
            raise Fallback(f"puts a traced value into a {type(kept[0][0]).__name__} it reads, which a compiled call "
                           "would not")

    def guard(self, path: Path, x) -> None:
        """Record a value the trace read at `path` (modules are not: a module
        global is rebound by no one)."""
        if path in self.guarded or isinstance(x, types.ModuleType):
            return
        if by_type(key_token(x, self.kind(path))):  # (its key is its type: a read of it as a constant would
            raise Fallback(f"{path}, a number keyed by its type, read as a constant", user_location())  # serve all)
        if type(x) in (list, dict, set) and all(c is not x for c, _ in self.containers):
            self.containers.append((x, type(x)(x)))
        t = token(x)
        if t is None:
            if str(path) not in self.unguarded:
                self.unguarded.append(str(path))
        else:
            self.guarded[path] = t


class HeldObject:
    """A user object as the traced code sees it: array attributes are traced
    arrays, methods are bound to this view, attribute writes are refused."""

    __slots__ = ("_lifter", "_path", "_obj")

    def __init__(self, lifter: Lifter, path: Path, obj):
        object.__setattr__(self, "_lifter", lifter)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_obj", obj)

    def __getattr__(self, name):
        written = self._lifter.attr_writes.get(self._path.child("attr", name), _UNWRITTEN) \
            if self._lifter.attr_writes else _UNWRITTEN
        if written is not _UNWRITTEN:  # (what the traced code assigned there: the object itself is set after the call)
            return written
        obj = object.__getattribute__(self, "_obj")
        prop = getattr(type(obj), name, None)
        if isinstance(prop, property) and prop.fget is not None:  # (what it reads, of self and its globals, is
            getter = self._path.child("type", 0).child("attr", name).child("attr", "fget")  # keyed through it)
            return self._lifter.traceable(prop.fget, getter)(self)
        try:
            v = getattr(obj, name)
        except AttributeError:  # (`hasattr(o, "extra")`, `getattr(o, "extra", 1.0)`: keyed as missing)
            self._lifter.guarded.setdefault(self._path.child("attr", name), MISSING)
            raise
        inner = jitted(getattr(v, "func", v))  # (a jitted method: jit/api.py binds it as partial(jf, obj))
        if inner is not None and (not isinstance(v, partial) or v.args == (obj,) and not v.keywords):
            # (another jit's method on this object, traced inline as this view's: what it reads keyed)
            v = types.MethodType(inner, obj) if isinstance(v, partial) else inner
        if isinstance(v, types.MethodType) and v.__self__ is obj:
            # (what the method reads is keyed through it: a bound method reads as its function)
            return types.MethodType(self._lifter.traceable(v.__func__, self._path.child("attr", name)), self)
        if isinstance(v, types.MethodType) and v.__self__ is type(obj):  # (a classmethod: its class's values and
            self._lifter.guard(self._path.child("type", 0), v.__self__)  # its function's globals keyed)
            return types.MethodType(self._lifter.traceable(v.__func__, self._path.child("attr", name).child(
                "attr", "__func__")), v.__self__)
        if isinstance(v, types.FunctionType) and name not in getattr(obj, "__dict__", {}):  # (a staticmethod)
            return self._lifter.traceable(v, self._path.child("attr", name))
        if name in getattr(obj, "__dict__", {}) or not callable(v):  # (a class's attribute read through self
            return self._lifter.wrap(self._path.child("attr", name), v)  # is keyed as the instance's)
        return v

    def __setattr__(self, name, value):
        path = self._path.child("attr", name)
        if self._lifter.handed_out(path, value):
            return  # (`self.running_mean *= 0.9`: the held array written in place, bound to itself again)
        lifter = self._lifter
        if lifter.attr_writes is not None and plain_attribute(self._obj, name) \
                and _assignable(value, lifter.ctx):  # (state the call leaves on the object: set after every call)
            lifter.attr_writes[path] = value
            return
        raise Fallback(f"assignment to attribute {name!r} of {self._path} inside a jitted function (of a "
                       f"{type(value).__name__}: an array, a number or a size of the trace, or a plain value, is "
                       "assigned after every call)", user_location())

    def __call__(self, *args, **kwargs):
        return self._lifter.traceable(type(self._obj).__call__, self._path.child("attr", "__call__"))(self, *args,
                                                                                                       **kwargs)

    # (isinstance() and == see the object itself: `isinstance(cfg, Config)`, `cfg == DEFAULT`)
    __class__ = property(lambda self: type(object.__getattribute__(self, "_obj")))

    # (==, != and hash() read the object's identity -- object's own -- or what a user's __eq__ reads: its
    # identity keyed, and the other's, as a new instance of the class would otherwise be served the same answer)
    def __eq__(self, other):
        return _identity(self) == _identity(other)

    def __ne__(self, other):
        return _identity(self) != _identity(other)

    def __hash__(self):
        return hash(_identity(self))

    def __repr__(self):
        return f"HeldObject({self._path})"


_UNWRITTEN = object()


def held_object(h: HeldObject):
    """The object a HeldObject views (a function: a method would hide the
    user's attribute of that name)."""
    return object.__getattribute__(h, "_obj")


def assigns(h: HeldObject) -> bool:
    """Whether an assignment to an attribute of h is set after the call
    (not in a scan's body, whose trips are entries of their own)."""
    return object.__getattribute__(h, "_lifter").attr_writes is not None


def plain_attribute(obj, name: str) -> bool:
    """Whether `obj.name = v` only stores v (the object's class has no
    __setattr__ of its own -- a frozen dataclass's raises -- nor a property
    or other data descriptor there but a slot, and the object has a
    __dict__ or that slot): set after the call, it does what it did where
    the traced code assigned it."""
    t = type(obj)
    attr = getattr(t, name, None)
    return t.__setattr__ is object.__setattr__ and (
        isinstance(attr, types.MemberDescriptorType) or not hasattr(type(attr), "__set__") and hasattr(obj, "__dict__"))


def _assignable(value, ctx) -> bool:
    """A value an attribute assignment of the trace may make at every call:
    an array or number of this trace, a size, or a plain immutable value."""
    if isinstance(value, Tracer):
        return value.ctx is ctx
    if isinstance(value, (SymInt, SymFloat)):
        return True
    return type(value) in (int, float, bool, str, type(None), complex)


def traced_type(x):
    """type(x) as a traced function sees it (jit/lift.py rewrites the call):
    of an object the trace views (HeldObject), its own class, whose values
    are keyed (`type(o) is P`, `type(o).K`); of a held list or dict, list,
    tuple or dict; of a value of the trace, numpy's type (Tracer's
    __class__: ndarray, a numpy scalar type or a Python number's, which
    follows from the signature, not the data; a size int, a float of sizes
    float); anything else's type."""
    t = type(x)
    if t is Tracer:
        return x.__class__
    if t is SymInt or t is SymFloat:
        return int if t is SymInt else float
    if t is HeldObject:
        obj, path = object.__getattribute__(x, "_obj"), object.__getattribute__(x, "_path")
        object.__getattribute__(x, "_lifter").guard(path.child("type", 0), type(obj))
        return type(obj)
    if t in (HeldSequence, HeldMapping):
        return type(object.__getattribute__(x, "_seq" if t is HeldSequence else "_map"))
    return t


def _unheld(x):
    return object.__getattribute__(x, "_obj") if type(x) is HeldObject else x


def _identity(x):
    """The object a HeldObject views, its identity keyed at its path; anything else as it is."""
    if type(x) is not HeldObject:
        return x
    obj, path = object.__getattribute__(x, "_obj"), object.__getattribute__(x, "_path")
    object.__getattribute__(x, "_lifter").guarded.setdefault(path.child("is", 0), _Same(obj))
    return obj


class HeldSequence:
    """A list or tuple of held arrays (or objects): read-only while tracing."""

    __slots__ = ("_lifter", "_path", "_seq")

    def __init__(self, lifter: Lifter, path: Path, seq):
        self._lifter, self._path, self._seq = lifter, path, seq

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        k = k.__index__()
        k = k + len(self) if k < 0 else k
        return self._lifter.wrap(self._path.child("item", k), self._seq[k])

    def __len__(self):
        # (a length read is keyed: `for layer in self.layers` over a list that grows traces again)
        self._lifter.guard(self._path.child("len", 0), len(self._seq))
        return len(self._seq)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __setitem__(self, k, v):
        if isinstance(k, int) and self._lifter.handed_out(self._path.child("item", k % max(1, len(self._seq))), v):
            return  # (`self.caches[i] += kv`: bound to itself again)
        raise Fallback(f"assignment to an element of {self._path} inside a jitted function", user_location())

    def __repr__(self):
        return f"HeldSequence({self._path})"


class HeldMapping:
    """A dict of held arrays (or objects), keyed by strings or ints: read-only
    while tracing."""

    __slots__ = ("_lifter", "_path", "_map")

    def __init__(self, lifter: Lifter, path: Path, mapping):
        self._lifter, self._path, self._map = lifter, path, mapping

    def __getitem__(self, k):
        v = self._map[k]
        if type(k) not in (str, int):
            return v
        return self._lifter.wrap(self._path.child("item", k), v)

    def _keys(self):
        """Its keys, keyed: a dict that gains or loses one traces again."""
        self._lifter.guard(self._path.child("keys", 0), tuple(self._map))
        return self._map.keys()

    def get(self, k, default=None):
        return self[k] if k in self else default

    def __contains__(self, k):
        return k in self._keys()

    def __len__(self):
        return len(self._keys())

    def __iter__(self):
        return iter(self._keys())

    def keys(self):
        return self._keys()

    def values(self):
        return [self[k] for k in self._keys()]

    def items(self):
        return [(k, self[k]) for k in self._keys()]

    def __setitem__(self, k, v):
        if type(k) in (str, int) and self._lifter.handed_out(self._path.child("item", k), v):
            return  # (`self.stats["mean"] += m`: bound to itself again)
        raise Fallback(f"assignment to an element of {self._path} inside a jitted function", user_location())

    def __repr__(self):
        return f"HeldMapping({self._path})"

"""What a trace depends on besides its arguments, as a digest that is the
same in every process: the function's code and, recursively, every global,
closure cell and default it may read.

A saved trace (jit/persist.py) is reused by a new process only when this
digest matches, so editing the function, a helper it calls, or a constant it
reads makes the saved trace a miss.  Values that cannot be identified across
processes (arbitrary objects, user classes) make the function
unfingerprintable: it is then traced in every process, as before.  A method
bound to an instance of a user's class is its function and its class's code;
the values it reads of the instance are keyed by jit at every call.

Library code (the standard library, installed packages and shapejit itself)
is identified by name and the package's version, not by its code; user code (anything else,
including editable installs) by its code.  Names are collected statically from
each code object's `co_names`, an over-approximation of what it can read.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import os
import sys
import sysconfig
import types

import numpy as np

from jit.held import code_names, holder
from jit.errors import PKG_DIRS

# shapejit's own packages count as a library (an editable install is not under
# site-packages): `jit(...)` in a model's __init__ is named, not hashed
_OWN = ("jit", "shapes", "clustering", "codegen", "runtime")
_OWN_DIRS = tuple(os.path.realpath(d) + os.sep for d in PKG_DIRS)
MAX_ARRAY_BYTES = 256 << 20  # larger globals are not hashed: the function is traced each process


class Unstable(Exception):
    """A value with no identity that survives the process."""


def function_fingerprint(fn) -> tuple[str | None, str | None]:
    """(hex digest, None), or (None, why it cannot be fingerprinted)."""
    h = hashlib.sha256()
    try:
        _Hasher(h).value(fn, "the function")
    except Unstable as e:
        return None, str(e)
    except RecursionError:
        return None, "its globals nest too deeply to fingerprint"
    except Exception as e:  # noqa: BLE001 - a value of the user's raised (a __getattr__ raising KeyError)
        return None, f"reading what it may read raised {type(e).__name__}: {e}"
    return h.hexdigest(), None


def stable_text(obj) -> str:
    """A text form of a specialization key that is the same in every process;
    raises Unstable for values that have none (e.g. an object keyed by id)."""
    h = _Hasher(None)
    try:
        h.value(obj, "a static argument")
    except (Unstable, RecursionError):
        raise
    except Exception as e:  # noqa: BLE001 - a value of the user's raised
        raise Unstable(f"a static argument raised {type(e).__name__} when read: {e}") from None
    return "".join(h.parts)


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(os.path.realpath(d) + os.sep for d in dirs)


@functools.cache
def _is_library_module(name: str) -> bool:
    root = name.partition(".")[0]
    if root in sys.builtin_module_names or root in sys.stdlib_module_names:
        return True
    mod = sys.modules.get(root)
    path = getattr(mod, "__file__", None)
    if path is None:
        return False  # a namespace package or something generated: treat as user code
    return os.path.realpath(path).startswith(_library_dirs() + _OWN_DIRS)


def _library_version(name: str) -> str:
    root = name.partition(".")[0]
    if root in sys.stdlib_module_names or root in sys.builtin_module_names:
        return sys.version.split()[0]
    if root in _OWN:
        return "shapejit"  # (a saved trace's key holds shapejit's build id)
    return str(getattr(sys.modules.get(root), "__version__", "?"))


class _Hasher:
    def __init__(self, h):
        self.h = h
        self.parts: list[str] = []
        self.seen: set[int] = set()

    def put(self, s: str) -> None:
        if self.h is None:
            self.parts.append(s)
        else:
            self.h.update(s.encode())
        self._sep()

    def _sep(self) -> None:
        if self.h is None:
            self.parts.append("\0")
        else:
            self.h.update(b"\0")

    # -------------------------------------------------------------- values
    def value(self, v, where: str) -> None:
        t = type(v)
        if v is None or v is Ellipsis or t in (bool, int, float, complex, str, bytes):
            self.put(f"{t.__name__}:{v!r}")
        elif t is slice:
            self.put("slice")
            self.value((v.start, v.stop, v.step), where)
        elif t in (tuple, list):
            self.put(f"{t.__name__}[{len(v)}")
            for x in v:
                self.value(x, where)
        elif t in (set, frozenset):
            self.put(f"{t.__name__}[{len(v)}")
            for x in sorted(v, key=repr):
                self.value(x, where)
        elif t is dict:
            self.put(f"dict[{len(v)}")
            for k in v:
                self.value(k, where)
                self.value(v[k], where)
        elif isinstance(v, np.ndarray):
            self.array(v, where)
        elif isinstance(v, np.generic):
            self.put(f"np:{v.dtype.str}:{v!r}")
        elif isinstance(v, np.dtype):
            self.put(f"dtype:{v.str}")
        elif isinstance(v, types.ModuleType):
            self.put(f"module:{v.__name__}")
        elif isinstance(v, types.FunctionType):
            self.function(v, where)
        elif isinstance(v, types.CodeType):
            self.code(v, None, where)
        elif isinstance(v, functools.partial):
            self.put("partial")
            self.value(v.func, where)
            self.value(v.args, where)
            self.value(v.keywords, where)
        elif isinstance(v, types.MethodType):
            self.method(v, where)
        elif type(v).__name__ == "JitFunction" and hasattr(v, "__wrapped__"):
            self.put("jit")
            self.value(v.__wrapped__, where)
        elif isinstance(v, type) and _record_class(v):
            self.record_class(v, where)
        elif isinstance(v, type) and not _is_library_module(v.__module__ or ""):
            self.user_class(v, where)  # (a user's class: by name and its methods' code; what a trace reads of
            # its attributes is keyed by the entry's values, jit/persist.py)
        elif _record_class(type(v)) and dataclasses.is_dataclass(v):  # (a frozen dataclass: a static argument)
            self.record_class(type(v), where)
            for f in dataclasses.fields(v):
                self.value(getattr(v, f.name), f"{where} ({t.__qualname__}.{f.name})")
        elif isinstance(v, type) or callable(v):
            self.named(v, where)
        else:
            raise Unstable(f"{where} is a {t.__module__}.{t.__qualname__} object")

    def array(self, a: np.ndarray, where: str) -> None:
        if a.dtype.hasobject:
            raise Unstable(f"{where} is an object array")
        if a.nbytes > MAX_ARRAY_BYTES:
            raise Unstable(f"{where} is an array of {a.nbytes} bytes (over {MAX_ARRAY_BYTES})")
        self.put(f"ndarray:{a.dtype.str}:{a.shape}")
        data = hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).data).hexdigest()
        self.put(data)

    def named(self, v, where: str) -> None:
        """A class, builtin, ufunc or other callable from a library, by name."""
        mod = getattr(v, "__module__", None) or ""
        qual = getattr(v, "__qualname__", None) or getattr(v, "__name__", None)
        if isinstance(v, np.ufunc):
            mod, qual = "numpy", v.__name__
        if not qual or not _is_library_module(mod or "builtins"):
            t = type(v)
            raise Unstable(f"{where} is {'the class' if isinstance(v, type) else 'a'} "
                           f"{mod}.{qual or t.__qualname__}, defined outside a library")
        self.put(f"lib:{mod}.{qual}=={_library_version(mod or 'builtins')}")

    def _known(self, obj, label: str) -> bool:
        """True after putting a function or class of a library by name, or a
        back-reference to one being hashed; else marks it seen, puts `label`
        and returns False (its code is to be hashed)."""
        mod = obj.__module__ or ""
        if _is_library_module(mod):
            self.put(f"lib:{mod}.{obj.__qualname__}=={_library_version(mod)}")
            return True
        if id(obj) in self.seen:
            self.put(f"recursive:{obj.__qualname__}")
            return True
        self.seen.add(id(obj))
        self.put(label)
        return False

    def function(self, f: types.FunctionType, where: str) -> None:
        if self._known(f, f"function:{f.__qualname__}"):
            return
        self.value(f.__defaults__, f"a default of {f.__qualname__}")
        self.value(f.__kwdefaults__, f"a default of {f.__qualname__}")
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell: a name assigned later in the enclosing scope
                contents = None
            self.put(f"cell:{name}")
            self.value(contents, f"closure variable {name!r} of {f.__qualname__}")
        self.code(f.__code__, f.__globals__, f.__qualname__)

    def method(self, m: types.MethodType, where: str) -> None:
        """A method bound to an instance of a user's class (jit(self.forward)):
        its function and its class's code.  What the trace reads of the
        instance is not here: jit keys those values at every call and the saved
        entry holds their tokens (jit/held.py, jit/persist.py).  A method bound
        to anything else has state no fingerprint sees."""
        obj = m.__self__
        if isinstance(obj, type):  # a classmethod: the class is its state
            self.put("classmethod")
            self.value(obj, where)
            self.value(m.__func__, where)
            return
        if not holder(obj):
            t = type(obj)
            raise Unstable(f"{where} is a method of a {t.__module__}.{t.__qualname__} object")
        self.put("method")
        self.value(m.__func__, where)
        self.user_class(type(obj), where)

    def user_class(self, cls: type, where: str) -> None:
        """A class of the user's program by its name and the code of every
        function its classes define (methods, properties, static and class
        methods), so `self.helper(x)` and `self.prop` are covered."""
        for c in cls.__mro__:
            if c is object or self._known(c, f"class:{c.__module__}.{c.__qualname__}"):
                continue
            for name, v in sorted(vars(c).items()):
                if isinstance(v, (staticmethod, classmethod)):
                    v = v.__func__
                if isinstance(v, property):
                    v = (v.fget, v.fset, v.fdel)
                if isinstance(v, types.FunctionType) or (
                        isinstance(v, tuple) and all(isinstance(f, (types.FunctionType, type(None))) for f in v)):
                    self.put(f"member:{name}")
                    self.value(v, f"{c.__qualname__}.{name}")

    def record_class(self, cls: type, where: str) -> None:
        """A namedtuple or dataclass of the user's program (a call's tree
        holds the class, a static argument is an instance): its name, its
        fields, their defaults, its other class attributes and the code of
        its methods, the same in every process that defines it so."""
        if self._known(cls, f"record:{cls.__module__}.{cls.__qualname__}"):
            return
        if dataclasses.is_dataclass(cls):
            fields = [(f.name, f.default) for f in dataclasses.fields(cls)]
            self.value(repr(cls.__dataclass_params__), where)
        else:
            fields = [(n, cls._field_defaults.get(n, None)) for n in cls._fields]
        self.value(fields, f"the fields of {cls.__qualname__}")
        for c in cls.__mro__:
            if c is object or _is_library_module(c.__module__ or ""):
                continue
            for name, v in sorted(vars(c).items()):
                if not (name.startswith("__") and name.endswith("__") or name in _RECORD_NAMES
                        or isinstance(v, (staticmethod, classmethod, property, types.FunctionType, _TUPLEGETTER))):
                    self.put(f"attr:{name}")
                    self.value(v, f"{c.__qualname__}.{name}")
        self.seen.discard(id(cls))  # (user_class marks it in turn)
        self.user_class(cls, where)

    def code(self, c: types.CodeType, globals_: dict | None, where: str) -> None:
        """The code itself (not its file or line numbers) and, when the
        globals are known, every global its names may refer to."""
        self.put(f"code:{c.co_name}:{c.co_argcount}:{c.co_kwonlyargcount}:{c.co_flags}")
        self.h_bytes(c.co_code)
        self.put(repr((c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars)))
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                self.code(k, globals_, where)
            else:
                self.value(k, f"a constant of {where}")
        if globals_ is None:
            return
        names, read = code_names(c)  # (names: a user module's attributes read, `cfg.SCALE`)
        builtins = globals_.get("__builtins__", __builtins__)
        builtins = builtins if isinstance(builtins, dict) else vars(builtins)
        for name in sorted(read):
            if name in globals_:
                v = globals_[name]
                self.put(f"global:{name}")
                self.value(v, f"global {name!r} of {where}")
                if isinstance(v, types.ModuleType) and not _is_library_module(v.__name__):
                    # a user module read as `cfg.SCALE`: its attributes named in the code
                    for attr in sorted(names):
                        if not attr.startswith("__") and attr in vars(v):
                            self.put(f"attr:{name}.{attr}")
                            self.value(vars(v)[attr], f"{name}.{attr}")
            elif name in builtins:
                self.put(f"builtin:{name}")

    def h_bytes(self, b: bytes) -> None:
        self.put(hashlib.sha256(b).hexdigest())


_RECORD_NAMES = frozenset(("_fields", "_field_defaults"))  # (a namedtuple's own: its fields, hashed as such)
_TUPLEGETTER = type(collections.namedtuple("_T", "a").a)  # (a namedtuple's field accessor)


def _record_class(cls: type) -> bool:
    """A namedtuple or dataclass class of the user's program."""
    return (issubclass(cls, tuple) and hasattr(cls, "_fields") or dataclasses.is_dataclass(cls)) \
        and not _is_library_module(cls.__module__ or "")
